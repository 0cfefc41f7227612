"""Optimizer rules (pure functions on arrays) and the registry the adapters build from."""

from ._clipped import ClippedOptimizer, OptimizerState, update_lr, update_regularizer
from .pesg import PESG
from .soap import SOAP

__all__ = [
    "OPTIMIZERS",
    "ClippedOptimizer",
    "OptimizerState",
    "PESG",
    "SOAP",
    "update_lr",
    "update_regularizer",
]

#: Every optimizer rule, by public class name.
OPTIMIZERS: dict[str, type[ClippedOptimizer]] = {"SOAP": SOAP, "PESG": PESG}
