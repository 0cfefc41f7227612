"""Optimizer rules (pure per-parameter functions on arrays) and the registry of every optimizer.

Adding an optimizer: write its rule in a module here (an :class:`UpdateRule`, or a preset of
:class:`ClippedRule`: other defaults of the same update) and import that module below. The
rule registers itself in :data:`OPTIMIZERS` as it is defined; ``tools/generate_adapters.py``
writes its torch, TensorFlow and JAX classes from its signature, which
``tests/test_optim_api.py`` checks against the registry.
"""

from . import _rule, clipped, lars, midam, pdsca, pesg
from ._rule import *  # noqa: F403  (the protocol)
from .clipped import *  # noqa: F403
from .lars import *  # noqa: F403
from .midam import *  # noqa: F403
from .pdsca import *  # noqa: F403
from .pesg import *  # noqa: F403

__all__: list[str] = []
__all__ += _rule.__all__
__all__ += clipped.__all__
__all__ += lars.__all__
__all__ += midam.__all__
__all__ += pdsca.__all__
__all__ += pesg.__all__
