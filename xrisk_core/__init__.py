"""xrisk: X-risk optimization (AUROC, AP, ...) from one backend-neutral core.

This package is the framework-free core: loss definitions (pure ``init``/``apply``), optimizer
rules, surrogates and the state model, written against the array API standard. It imports no
deep-learning framework. The framework faces live in ``xrisk.torch``, ``xrisk.tensorflow`` and
``xrisk.jax``; each exports the same class names with the same constructor signatures.

>>> import xrisk
>>> sorted(xrisk.LOSSES)
['APLoss', 'AUCMLoss', 'CompositionalAUCLoss', 'CrossEntropyLoss', 'FocalLoss',
 'PairwiseAUCLoss', 'pAUC_CVaR_Loss', 'pAUC_DRO_Loss', 'tpAUC_CVaR_Loss', 'tpAUC_KL_Loss']
"""

from . import backends, surrogates
from ._validation import CHECK_MODES, InputWarning, StateCastWarning, get_checks, set_checks
from .losses import (
    LOSSES,
    APLoss,
    APState,
    AUCMLoss,
    AUCMParams,
    Auxiliary,
    CompositionalAUCLoss,
    CompositionalAUCState,
    CrossEntropyLoss,
    FocalLoss,
    Input,
    LossDefinition,
    PairwiseAUCLoss,
    StateTable,
    pAUC_CVaR_Loss,
    pAUC_CVaR_State,
    pAUC_DRO_Loss,
    pAUC_DRO_State,
    pAUCLoss,
    tpAUC_CVaR_Loss,
    tpAUC_CVaR_State,
    tpAUC_KL_Loss,
    tpAUC_KL_State,
)
from .optim import (
    OPTIMIZERS,
    PDSCA,
    PESG,
    SGD,
    SOAP,
    SONG,
    SOPA,
    STACO,
    Adam,
    AdamW,
    OptimizerState,
    SOPAs,
    SOTAs,
    update_lr,
    update_regularizer,
)

__version__ = "0.1.0"

__all__ = [
    "LOSSES",
    "OPTIMIZERS",
    "APLoss",
    "APState",
    "AUCMLoss",
    "AUCMParams",
    "CompositionalAUCLoss",
    "CompositionalAUCState",
    "CrossEntropyLoss",
    "FocalLoss",
    "LossDefinition",
    "OptimizerState",
    "PairwiseAUCLoss",
    "PESG",
    "PDSCA",
    "SOAP",
    "SOPA",
    "SOPAs",
    "SOTAs",
    "STACO",
    "SONG",
    "SGD",
    "Adam",
    "AdamW",
    "StateTable",
    "Input",
    "Auxiliary",
    "backends",
    "surrogates",
    "CHECK_MODES",
    "InputWarning",
    "StateCastWarning",
    "get_checks",
    "set_checks",
    "update_lr",
    "update_regularizer",
    "pAUC_CVaR_Loss",
    "pAUC_CVaR_State",
    "pAUC_DRO_Loss",
    "pAUC_DRO_State",
    "pAUCLoss",
    "tpAUC_CVaR_Loss",
    "tpAUC_CVaR_State",
    "tpAUC_KL_Loss",
    "tpAUC_KL_State",
]
