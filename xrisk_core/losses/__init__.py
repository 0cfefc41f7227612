"""Loss definitions and the registry of every loss.

Adding a loss: write its definition module here and import it below (one line; its
``__all__`` joins this package's). The class registers itself in :data:`LOSSES` as it is
defined (:mod:`xrisk._registry`); ``tools/generate_adapters.py`` then writes its torch,
TensorFlow and JAX classes from its signature, and ``tests/test_api.py`` checks them against
the registry.
"""

from . import _base, ap, auc, classification, contrastive, extreme, midam, multilabel, pauc, ranking
from ._base import *  # noqa: F403  (the protocol)
from .ap import *  # noqa: F403
from .auc import *  # noqa: F403
from .classification import *  # noqa: F403
from .contrastive import *  # noqa: F403
from .extreme import *  # noqa: F403
from .midam import *  # noqa: F403
from .multilabel import *  # noqa: F403
from .pauc import *  # noqa: F403
from .ranking import *  # noqa: F403

__all__: list[str] = []
__all__ += _base.__all__
__all__ += ap.__all__
__all__ += auc.__all__
__all__ += classification.__all__
__all__ += contrastive.__all__
__all__ += extreme.__all__
__all__ += midam.__all__
__all__ += multilabel.__all__
__all__ += pauc.__all__
__all__ += ranking.__all__
