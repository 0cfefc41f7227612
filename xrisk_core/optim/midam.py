r"""MIDAM: the optimizer of the multi-instance AUC losses (momentum SGD with α ascent)."""

from __future__ import annotations

from typing import Any

from ._rule import ClippedRule, LearningRate, Rates, ascent_step
from .pesg import check_min_max_loss

__all__ = ["MIDAM"]


class MIDAM(ClippedRule):
    r"""Stochastic momentum descent-ascent for :class:`xrisk.MIDAM_softmax_pooling_loss` and
    :class:`xrisk.MIDAM_attention_pooling_loss`.

    The model's parameters and the loss's ``descent`` auxiliaries (a, b) take a momentum SGD
    step without clipping or epoch decay; every ``ascent`` auxiliary (α) then takes a
    projected ascent step, every step.

    Notes
    -----
    With :math:`d = g + \lambda_{wd}\theta` (LibAUC 2.0.1's MIDAM update): ``buf ← d`` at the
    first step, later ``buf ← momentum·buf + (1 - momentum)·d``; :math:`\theta \leftarrow
    \theta - \eta\,buf`. Then, with the updated a and b,
    :math:`\alpha \leftarrow \max(0, \alpha + \eta\,(2(m + b - a) - 2\alpha))`, the
    direction the loss declares (``loss_fn.ascent_direction``), the margin the loss's.

    LibAUC's MIDAM ascends on :math:`(m + b - a) - \alpha`, half of it, to match its loss,
    which drops the factor 2 of the paper's α term. xrisk's MIDAM losses keep the paper's
    objective, so the step here is the objective's gradient (at the same learning rate,
    twice LibAUC's α step; the saddle point :math:`\alpha^* = m + b - a` is the same). LibAUC's
    ``update_lr`` prints "Updating regularizer" and only divides the learning rate; here
    ``update_lr`` divides it and ``update_regularizer`` is a no-op apart from its optional
    decay (no epoch decay).

    References
    ----------
    Zhu, Wang, Zhou, Xu, Yang. "Provable Multi-instance Deep AUC Maximization with
    Stochastic Pooling", ICML 2023.

    Examples
    --------
    >>> import numpy as np, xrisk
    >>> loss_fn = xrisk.MIDAM_softmax_pooling_loss(num_samples=4)
    >>> opt = xrisk.MIDAM(loss_fn, learning_rate=0.1, momentum=0.0, weight_decay=0.0)
    >>> params = [np.array([0.5])]
    >>> aux = xrisk.AUCMParams(np.float64(0.0), np.float64(0.0), np.float64(0.0))
    >>> state = opt.init(params, aux)
    >>> aux_grads = xrisk.AUCMParams(np.float64(-0.4), np.float64(0.1), np.float64(9.0))
    >>> params, aux, state = opt.update([np.array([3.0])], state, params, aux, aux_grads)
    >>> params[0].round(6).tolist(), [round(float(x), 6) for x in aux]  # no clipping
    ([0.2], [0.04, -0.01, 0.19])
    """

    def __init__(self, loss_fn: Any, *, learning_rate: LearningRate, momentum: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        self.loss_fn = check_min_max_loss("MIDAM", loss_fn,
                                          example="MIDAM_attention_pooling_loss(num_samples)")
        # LibAUC's EMA buf <- momentum buf + (1 - momentum) d is torch's heavy-ball rule with
        # dampening = momentum; no clipping, no epoch decay.
        self._configure_clipped(learning_rate=learning_rate, mode="sgd",
                                clip_value=float("inf"), weight_decay=weight_decay,
                                epoch_decay=0.0, momentum=momentum, nesterov=False,
                                dampening=momentum, betas=(0.9, 0.999), eps=1e-8,
                                amsgrad=False)

    def ascend(self, aux: Any, rates: Rates) -> Any:
        return ascent_step(self.loss_fn, aux, rates.lr)
