"""SOAP: the optimizer of :class:`xrisk.losses.APLoss` (clipped SGD or Adam)."""

from __future__ import annotations

from ._clipped import ClippedOptimizer

__all__ = ["SOAP"]


class SOAP(ClippedOptimizer):
    r"""Clipped SGD/Adam with epoch decay, the optimizer LibAUC pairs with ``APLoss``.

    All X-risk logic lives in the loss; SOAP is LibAUC's shared update rule
    (libauc-reference.md §5.1) with SOAP's defaults.

    Parameters
    ----------
    lr : float, default 1e-3
        Learning rate.
    mode : {"adam", "sgd"}, default "adam"
    clip_value : float, default 1.0
        Gradients are clipped elementwise to [-clip_value, clip_value].
    weight_decay : float, default 1e-5
        Coupled L2 coefficient: ``weight_decay * θ`` is added to the clipped gradient.
    epoch_decay : float, default 0.0
        Coefficient of ``θ - θ_ref``; θ_ref starts at the initial parameters and becomes the
        average iterate at each :func:`update_regularizer`.
    momentum : float, default 0.9
        SGD mode: ``buf ← momentum·buf + (1 - dampening)·d`` (the first step takes d).
    nesterov : bool, default False
    dampening : float, default 0.1
    betas : (float, float), default (0.9, 0.999)
        Adam mode: decay rates of the first and second moments.
    eps : float, default 1e-8
    amsgrad : bool, default False

    Notes
    -----
    With :math:`d = \mathrm{clip}(g) + \lambda_{ed}(\theta-\theta_{ref}) + \lambda_{wd}\theta`,
    SGD: :math:`\theta \leftarrow \theta - \eta\,buf`; Adam:
    :math:`\theta \leftarrow \theta - \frac{\eta}{1-\beta_1^t}\,
    \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}`.

    Examples
    --------
    >>> import numpy as np
    >>> opt = SOAP(lr=0.1, mode="sgd")
    >>> params = [np.array([1.0, -1.0])]
    >>> state = opt.init(params)
    >>> updates, state = opt.update([np.array([0.5, 3.0])], state, params)
    >>> (params[0] + updates[0]).round(6).tolist()
    [0.949999, -1.099999]
    """

    sgd_rule = "heavy_ball"

    def __init__(
        self,
        *,
        lr: float = 1e-3,
        mode: str = "adam",
        clip_value: float = 1.0,
        weight_decay: float = 1e-5,
        epoch_decay: float = 0.0,
        momentum: float = 0.9,
        nesterov: bool = False,
        dampening: float = 0.1,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        super().__init__(
            lr=lr, mode=mode, clip_value=clip_value, weight_decay=weight_decay,
            epoch_decay=epoch_decay, momentum=momentum, nesterov=nesterov,
            dampening=dampening, betas=betas, eps=eps, amsgrad=amsgrad,
        )
