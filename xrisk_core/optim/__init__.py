"""Optimizer rules (pure per-parameter functions on arrays) and the registry of every optimizer.

Adding an optimizer: write its rule here (an :class:`UpdateRule`, usually a
:class:`ClippedRule` with other defaults) and add it to :data:`OPTIMIZERS`; each adapter
(torch, TensorFlow, JAX) then holds one short class of the same name and signature, which
``tests/test_optim_api.py`` checks against the registry.
"""

from ._rule import (
    ClippedRule,
    ClippedSlots,
    OptimizerState,
    Rates,
    SlotSpec,
    UpdateRule,
    ascent_step,
    reset_reference,
    update_lr,
    update_regularizer,
)
from .clipped import SGD, SOAP, SONG, SOPA, STACO, Adam, AdamW, SOPAs, SOTAs
from .lars import LARS, LARSSlots
from .midam import MIDAM
from .pdsca import PDSCA, PDSCASlots
from .pesg import PESG

__all__ = [
    "LARS",
    "LARSSlots",
    "OPTIMIZERS",
    "ClippedRule",
    "ClippedSlots",
    "OptimizerState",
    "PDSCASlots",
    "Rates",
    "SlotSpec",
    "UpdateRule",
    "ascent_step",
    "reset_reference",
    "update_lr",
    "update_regularizer",
    "SOAP",
    "SOPA",
    "SOPAs",
    "SOTAs",
    "STACO",
    "SONG",
    "SGD",
    "Adam",
    "AdamW",
    "PESG",
    "PDSCA",
    "MIDAM",
]

#: Every optimizer rule, by public class name (LibAUC's names).
OPTIMIZERS: dict[str, type[UpdateRule]] = {
    "SOAP": SOAP,
    "SOPA": SOPA,
    "SOPAs": SOPAs,
    "SOTAs": SOTAs,
    "STACO": STACO,
    "SONG": SONG,
    "SGD": SGD,
    "Adam": Adam,
    "AdamW": AdamW,
    "PESG": PESG,
    "PDSCA": PDSCA,
    "MIDAM": MIDAM,
    "LARS": LARS,
}
