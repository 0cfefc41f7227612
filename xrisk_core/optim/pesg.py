"""PESG: the primal-dual optimizer of :class:`xrisk.losses.AUCMLoss`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._validation import check_positive
from ..backends import backend_of
from ._clipped import ClippedOptimizer, OptimizerState

__all__ = ["PESG"]

Array = Any


class PESG(ClippedOptimizer):
    r"""Proximal epoch stochastic gradient descent-ascent for the AUC-M min-max loss.

    The primal parameters (the model's and the loss's ``a``, ``b``) take LibAUC's clipped
    step; the dual ``alpha`` takes a projected ascent step.

    Parameters
    ----------
    margin : float, default 1.0
        Margin m of the AUC-M loss (the adapters read it from the loss).
    lr : float, default 0.1
    mode : {"sgd", "adam"}, default "sgd"
    clip_value : float, default 1.0
    weight_decay : float, default 1e-5
    epoch_decay : float, default 2e-3
        Pull toward the reference point, which becomes the average iterate at each
        :func:`update_regularizer` (LibAUC's tutorials call it at 50 % and 75 % of training
        with ``decay_factor=10``).
    momentum : float, default 0.9
        EMA weight of the new direction: ``buf ← (1 - momentum)·buf + momentum·d``
        (LibAUC's rule; the first step takes d; 0 disables momentum).
    betas, eps, amsgrad
        Adam mode, as in :class:`SOAP`.

    Notes
    -----
    After the primal step, with the *updated* a and b (libauc-reference.md §5.2):

    .. math:: \alpha \leftarrow \max\bigl(0,\ \alpha + \eta\,(2(m + b - a) - 2\alpha)\bigr)

    i.e. ascent along the closed-form gradient of the v2 objective in α (E₊s ≈ a,
    E₋s ≈ b). LibAUC applies it only when ``alpha.grad`` exists; here it runs every step,
    and α is clipped to [0, ∞) (Ω = ℝ₊ of the paper) instead of [0, 999].

    References
    ----------
    Yuan, Yan, Sonka, Yang. ICCV 2021; Guo, Xu, Lin, Yang. ICML 2020.

    Examples
    --------
    >>> import numpy as np
    >>> opt = PESG(lr=0.1, epoch_decay=0.0, weight_decay=0.0)
    >>> params = [np.array([0.5]), np.float64(0.0), np.float64(0.0)]  # model, a, b
    >>> state = opt.init(params)
    >>> grads = [np.array([0.2]), np.float64(-0.4), np.float64(0.1)]
    >>> updates, alpha_update, state = opt.update(grads, state, params, alpha=np.float64(0.0))
    >>> float(alpha_update)  # 0.1 * 2 * (1 + b - a) with a = 0.04, b = -0.01
    0.19
    """

    sgd_rule = "ema"
    takes_loss = True
    read_from_loss = ("margin",)

    def __init__(
        self,
        *,
        margin: float = 1.0,
        lr: float = 0.1,
        mode: str = "sgd",
        clip_value: float = 1.0,
        weight_decay: float = 1e-5,
        epoch_decay: float = 2e-3,
        momentum: float = 0.9,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        self.margin = check_positive("PESG", "margin", margin)
        super().__init__(
            lr=lr, mode=mode, clip_value=clip_value, weight_decay=weight_decay,
            epoch_decay=epoch_decay, momentum=momentum, betas=betas, eps=eps,
            amsgrad=amsgrad,
        )

    def update(  # type: ignore[override]
        self,
        grads: Sequence[Array | None],
        state: OptimizerState,
        params: Sequence[Array],
        *,
        alpha: Array,
    ) -> tuple[list[Array], Array, OptimizerState]:
        """Return ``(updates, alpha_update, new_state)``.

        ``params`` ends with the loss's ``a`` and ``b`` (in that order); ``alpha`` is the dual
        variable. Apply as ``param + update`` and ``alpha + alpha_update``.
        """
        if len(params) < 2:
            raise ValueError(
                f"PESG: got {len(params)} parameters; expected the model's parameters followed "
                "by the loss's a and b."
            )
        updates, new_state = super().update(grads, state, params)
        xp = backend_of(alpha, *params).namespace
        a = params[-2] + updates[-2]
        b = params[-1] + updates[-1]
        ascent = alpha + state.learning_rate * (2 * (self.margin + b - a) - 2 * alpha)
        new_alpha = xp.maximum(ascent, xp.zeros_like(ascent))
        return updates, new_alpha - alpha, new_state
