r"""PESG: the primal-dual optimizer of min-max losses such as :class:`xrisk.AUCMLoss`."""

from __future__ import annotations

from typing import Any

from ..losses._base import LossDefinition
from ._rule import ClippedRule, LearningRate, Rates, ascent_step

__all__ = ["PESG"]

_BETAS = (0.9, 0.999)


def check_min_max_loss(owner: str, loss_fn: Any, *, example: str) -> LossDefinition:
    """The loss definition of ``loss_fn`` (a definition or an adapter loss) if it declares at
    least one ``ascent`` auxiliary; else TypeError."""
    if loss_fn is None:
        raise TypeError(
            f"{owner}: loss_fn is None; expected the min-max loss it trains (e.g. {example}). "
            f"Fix: {owner}(model.parameters(), loss_fn, ...) in torch; "
            f"{owner}(loss_fn=loss_fn, ...) in JAX and Keras, where params is optional."
        )
    definition = getattr(loss_fn, "definition", loss_fn)
    if not isinstance(definition, LossDefinition):
        raise TypeError(
            f"{owner}: loss_fn is {type(loss_fn).__name__}; expected an xrisk loss (e.g. "
            f"{example}). Fix: {owner}(params, loss_fn={example}, ...)."
        )
    if not any(aux.role == "ascent" for aux in definition.auxiliaries().values()):
        raise TypeError(
            f"{owner}: loss_fn is {definition.name}, which declares no ascent auxiliary; "
            f"expected a min-max loss such as {example}. Fix: train {definition.name} with "
            "the optimizer LibAUC pairs with it (e.g. SOAP for APLoss)."
        )
    return definition


class PESG(ClippedRule):
    r"""Proximal epoch stochastic gradient descent-ascent (PESG) for min-max losses.

    The model's parameters and the loss's ``descent`` auxiliaries (AUC-M's a, b) take the
    clipped step with an EMA momentum; every ``ascent`` auxiliary (AUC-M's α) takes a projected
    ascent step after it, every step.

    Notes
    -----
    Momentum (LibAUC 2.0.1's PESG rule): ``buf ← (1 - momentum)·buf +
    momentum·d`` (the first step takes d; momentum=0 uses d itself). Then, with the
    auxiliaries *updated* by this step (LibAUC's order):

    .. math:: x \leftarrow \Pi_{[lower, upper]}\bigl(x + \eta\,\mathrm{direction}(x)\bigr)

    for each ascent auxiliary x, with the direction from ``loss_fn.ascent_direction`` (AUC-M:
    :math:`2(m + b - a) - 2\alpha`, the gradient of the v2 objective in α with E₊s = a,
    E₋s = b) and the bounds it declares (α ≥ 0; LibAUC clips at [0, 999]). LibAUC applies
    it only when ``alpha.grad`` exists; here it runs every step. The margin is the loss's.

    References
    ----------
    Yuan, Yan, Sonka, Yang. ICCV 2021; Guo, Xu, Lin, Yang. ICML 2020.

    Examples
    --------
    >>> import numpy as np, xrisk
    >>> loss_fn = xrisk.AUCMLoss()
    >>> opt = xrisk.PESG(loss_fn, learning_rate=0.1, epoch_decay=0.0, weight_decay=0.0)
    >>> params = [np.array([0.5])]
    >>> aux = xrisk.AUCMParams(np.float64(0.0), np.float64(0.0), np.float64(0.0))
    >>> state = opt.init(params, aux)
    >>> grads = [np.array([0.2])]
    >>> aux_grads = xrisk.AUCMParams(np.float64(-0.4), np.float64(0.1), np.float64(9.0))
    >>> params, aux, state = opt.update(grads, state, params, aux, aux_grads)
    >>> [round(float(x), 6) for x in aux]  # a, b descend; alpha = 0.1 * 2 * (1 + b - a)
    [0.04, -0.01, 0.19]
    """

    sgd_rule = "ema"

    def __init__(self, loss_fn: Any, *, learning_rate: LearningRate = 0.1, mode: str = "sgd",
                 clip_value: float = 1.0, weight_decay: float = 1e-5,
                 epoch_decay: float = 2e-3, momentum: float = 0.9,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self.loss_fn = check_min_max_loss("PESG", loss_fn, example="AUCMLoss()")
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=False, dampening=0.0, betas=betas,
                                eps=eps, amsgrad=amsgrad)

    def ascend(self, aux: Any, rates: Rates) -> Any:
        return ascent_step(self.loss_fn, aux, rates.lr)
