"""xrisk: X-risk optimization (AUROC, AP, ...) from one backend-neutral core.

This package is the framework-free core: loss definitions (pure ``init``/``apply``), optimizer
rules, surrogates and the state model, written against the array API standard. It imports no
deep-learning framework. The framework faces live in ``xrisk.torch``, ``xrisk.tensorflow`` and
``xrisk.jax``; each exports the same class names with the same constructor signatures.

>>> import xrisk
>>> [name in xrisk.LOSSES for name in ("APLoss", "NDCGLoss", "GlobalContrastiveLoss")]
[True, True, True]
>>> xrisk.LOSSES["APLoss"] is xrisk.APLoss
True
"""

from . import backends, losses, optim, surrogates
from ._check_mode import CHECK_MODES, InputWarning, StateCastWarning, get_checks, set_checks

# Every loss and optimizer, by its module's __all__ (star imports from the modules themselves:
# mypy follows one star import, not a chain of them). A new module adds its line here and in
# its package's __init__; no class is named here.
from .losses._base import *  # noqa: F403  (the protocol)
from .losses.ap import *  # noqa: F403
from .losses.auc import *  # noqa: F403
from .losses.classification import *  # noqa: F403
from .losses.contrastive import *  # noqa: F403
from .losses.extreme import *  # noqa: F403
from .losses.midam import *  # noqa: F403
from .losses.multilabel import *  # noqa: F403
from .losses.pauc import *  # noqa: F403
from .losses.ranking import *  # noqa: F403
from .optim._rule import *  # noqa: F403  (the protocol)
from .optim.clipped import *  # noqa: F403
from .optim.lars import *  # noqa: F403
from .optim.midam import *  # noqa: F403
from .optim.pdsca import *  # noqa: F403
from .optim.pesg import *  # noqa: F403

__version__ = "0.1.0"

__all__ = [
    "backends",
    "surrogates",
    "CHECK_MODES",
    "InputWarning",
    "StateCastWarning",
    "get_checks",
    "set_checks",
]
__all__ += losses.__all__
__all__ += optim.__all__
