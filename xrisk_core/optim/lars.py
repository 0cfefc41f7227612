r"""LARS: layer-wise adaptive rate scaling, the optimizer of the contrastive losses (SogCLR).

Examples
--------
>>> import numpy as np, xrisk
>>> opt = xrisk.LARS(learning_rate=1.0, weight_decay=0.0, momentum=0.0,
...                  trust_coefficient=0.1)
>>> params = [np.array([[3.0, 4.0]]), np.array([1.0])]  # a weight matrix and a bias
>>> state = opt.init(params)
>>> params, _, state = opt.update([np.array([[0.0, 2.0]]), np.array([0.5])], state, params)
>>> params[0].tolist(), params[1].tolist()  # |step| = 0.1 * |w| = 0.5; the bias: plain SGD
([[3.0, 3.5]], [0.5])
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._typing import Array, compute_dtype, in_dtype
from ._rule import (
    LearningRate,
    Rates,
    SlotSpec,
    UpdateRule,
    _as_compute,
    _namespace,
    check_flag,
    check_learning_rate,
    check_number,
)

__all__ = ["LARS", "LARSSlots"]



class LARSSlots(NamedTuple):
    """Per-parameter state of :class:`LARS` (``None``: momentum 0)."""

    momentum: Array | None = None  #: the trace of the scaled steps


class LARS(UpdateRule):
    r"""Layer-wise adaptive rate scaling (LARS) with momentum: the optimizer of SimCLR,
    SogCLR and iSogCLR (LibAUC's ``SogCLR(mode='lars')`` / ``iSogCLR`` / ``LARS``).

    Per parameter tensor :math:`\theta` with gradient :math:`g` (a matrix or larger; with
    ``exclude_1d`` vectors and scalars — biases, normalisation scales — take
    :math:`d = g` and no scaling):

    .. math::

        d &= g + \lambda_{wd}\,\theta,\qquad
        q = \begin{cases} c\,\lVert\theta\rVert / \lVert d\rVert & \lVert\theta\rVert > 0
            \text{ and } \lVert d\rVert > 0 \\ 1 & \text{otherwise} \end{cases} \\
        buf &\leftarrow \mu\,buf + \eta\,q\,d,\qquad \theta \leftarrow \theta - buf

    (:math:`c`: the trust coefficient, :math:`\eta`: the learning rate). This is
    ``optax.lars`` (the JAX adapter runs optax's own), so the three frameworks give the same
    update for a constant learning rate *and* under a schedule (in JAX and TensorFlow a
    schedule passed as ``learning_rate``; in torch a number, scheduled by a
    ``torch.optim.lr_scheduler``: the torch optimizer refuses a callable ``learning_rate``).

    Notes
    -----
    LibAUC's ``SogCLR``/``LARS`` (as MAE's and FB's LARS) keep the learning rate outside the
    momentum, :math:`buf \leftarrow \mu\,buf + q\,d`, :math:`\theta \leftarrow \theta -
    \eta\,buf`: the same steps for a constant learning rate; when it changes, the trace here
    keeps the rates its steps were taken with (as optax and SimCLR's TensorFlow LARS do).
    LibAUC's SogCLR optimizer also takes ``epoch_decay`` (its ``update_regularizer`` divides
    by zero there) and an unused ``clip_value``; neither is an argument here.

    References
    ----------
    You, Gitman, Ginsburg. "Large Batch Training of Convolutional Networks", 2017.
    """

    slots_type = LARSSlots

    def __init__(self, *, learning_rate: LearningRate, weight_decay: float = 0.0,
                 momentum: float = 0.9, trust_coefficient: float = 0.001,
                 exclude_1d: bool = True) -> None:
        owner = "LARS"
        self.learning_rate = check_learning_rate(owner, "learning_rate", learning_rate)
        self.weight_decay = check_number(owner, "weight_decay", weight_decay, low=0.0)
        self.momentum = check_number(owner, "momentum", momentum, low=0.0, high=1.0)
        self.trust_coefficient = check_number(owner, "trust_coefficient", trust_coefficient,
                                              low=0.0, low_open=True)
        self.exclude_1d = check_flag(owner, "exclude_1d", exclude_1d)

    def slot_specs(self) -> dict[str, SlotSpec]:
        return {"momentum": SlotSpec()} if self.momentum > 0 else {}

    def update_param(self, grad: Array, param: Array, slots: Any, rates: Rates, *,
                     auxiliary: bool = False) -> tuple[Array, Any]:
        xp = _namespace(param)
        dtype = compute_dtype(param, xp)
        p, d = in_dtype(param, dtype, xp), in_dtype(grad, dtype, xp)
        if not (self.exclude_1d and len(param.shape) <= 1):  # static: the tensor's rank
            if self.weight_decay > 0:
                d = d + self.weight_decay * p
            p_norm, d_norm = xp.sqrt(xp.sum(p * p)), xp.sqrt(xp.sum(d * d))
            scaled = (p_norm > 0) & (d_norm > 0)
            ratio = self.trust_coefficient * p_norm / xp.where(scaled, d_norm,
                                                               xp.ones_like(d_norm))
            d = d * xp.where(scaled, ratio, xp.ones_like(ratio))
        step = _as_compute(rates.lr, dtype, xp) * d
        if self.momentum > 0:
            step = self.momentum * slots.momentum + step
            slots = slots._replace(momentum=step)
        return in_dtype(p - step, param.dtype, xp), slots
