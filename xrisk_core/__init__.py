"""xrisk: X-risk optimization (AUROC, AP, ...) from one backend-neutral core.

This package is the framework-free core: loss definitions (pure ``init``/``apply``), optimizer
rules, surrogates and the state model, written against the array API standard. It imports no
deep-learning framework. The framework faces live in ``xrisk.torch``, ``xrisk.tensorflow`` and
``xrisk.jax``; each exports the same class names with the same constructor signatures.

>>> import xrisk
>>> sorted(xrisk.LOSSES)
['APLoss', 'AUCMLoss']
"""

from . import surrogates
from . import backends
from .losses import (
    LOSSES,
    APLoss,
    APState,
    AUCMLoss,
    AUCMParams,
    Auxiliary,
    Input,
    LossDefinition,
    StateTable,
)
from .optim import OPTIMIZERS, PESG, SOAP, OptimizerState, update_lr, update_regularizer

__version__ = "0.1.0"

__all__ = [
    "LOSSES",
    "OPTIMIZERS",
    "APLoss",
    "APState",
    "AUCMLoss",
    "AUCMParams",
    "LossDefinition",
    "OptimizerState",
    "PESG",
    "SOAP",
    "StateTable",
    "Input",
    "Auxiliary",
    "backends",
    "surrogates",
    "update_lr",
    "update_regularizer",
]
