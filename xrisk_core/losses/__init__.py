"""Loss definitions and the registry that the adapters build their classes from.

Adding a loss: write its definition module here and add it to :data:`LOSSES`; every adapter
(torch, TensorFlow, JAX) then exports a class of the same name and signature.
"""

from ._base import NO_PARAMS, LossDefinition, NoParams, NoState
from .ap import APLoss, APState
from .auc import AUCMLoss, AUCMParams

__all__ = [
    "LOSSES",
    "NO_PARAMS",
    "LossDefinition",
    "NoParams",
    "NoState",
    "APLoss",
    "APState",
    "AUCMLoss",
    "AUCMParams",
]

#: Every loss definition, by public class name.
LOSSES: dict[str, type[LossDefinition]] = {
    "APLoss": APLoss,
    "AUCMLoss": AUCMLoss,
}
