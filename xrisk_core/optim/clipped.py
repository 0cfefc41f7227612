r"""LibAUC's named optimizers that are one rule: clipped SGD/Adam with epoch decay.

SOAP, SOPA, SOPAs, SOTAs, STACO, SONG, SGD, Adam and AdamW differ only in their defaults
(LibAUC 2.0.1 gives them one shared update rule too): all the X-risk logic lives in the
losses. Each class here only fixes the signature and defaults; the update is
:class:`ClippedRule`'s.

Examples
--------
>>> import numpy as np, xrisk
>>> opt = xrisk.SOAP(learning_rate=0.1, mode="sgd")
>>> params = [np.array([1.0, -1.0])]
>>> state = opt.init(params)
>>> params, _, state = opt.update([np.array([0.5, 3.0])], state, params)
>>> params[0].round(6).tolist()  # the gradient 3.0 is clipped to 1.0
[0.949999, -1.099999]
"""

from __future__ import annotations

from ._rule import ClippedRule, LearningRate

__all__ = ["SOAP", "SOPA", "SOPAs", "SOTAs", "STACO", "SONG", "SGD", "Adam", "AdamW"]

_BETAS = (0.9, 0.999)


class SOAP(ClippedRule):
    """Optimizer of :class:`xrisk.APLoss` (average precision): clipped Adam by default."""

    def __init__(self, *, learning_rate: LearningRate = 1e-3, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 1e-5, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.1,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)


class SOPA(ClippedRule):
    """Optimizer of the one-way partial AUC by CVaR (pAUC_CVaR).

    Notes
    -----
    LibAUC's ``eta`` argument had no effect and is dropped (the dual step size belongs to
    the loss); passing it raises a TypeError that says so.
    """

    def __init__(self, *, learning_rate: LearningRate = 1e-3, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)


class SOPAs(ClippedRule):
    """Optimizer of the one-way partial AUC by KL-DRO (pAUC_DRO); clips at 2."""

    def __init__(self, *, learning_rate: LearningRate = 1e-3, mode: str = "adam",
                 clip_value: float = 2.0, weight_decay: float = 1e-5, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.1,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)


class SOTAs(ClippedRule):
    """Optimizer of the two-way partial AUC by KL (tpAUC_KL)."""

    def __init__(self, *, learning_rate: LearningRate = 1e-3, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)


class STACO(ClippedRule):
    """Optimizer of the two-way partial AUC by double CVaR (tpAUC_CVaR).

    Notes
    -----
    LibAUC's ``loss_fn`` argument was ignored; it is not an argument here.
    """

    def __init__(self, *, learning_rate: LearningRate = 1e-3, mode: str = "adam",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)


class SONG(ClippedRule):
    """Optimizer of NDCG (SONG, K-SONG) and listwise CE: clipped momentum SGD by default."""

    def __init__(self, *, learning_rate: LearningRate, mode: str = "sgd",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)


class SGD(ClippedRule):
    """LibAUC's SGD: torch's momentum SGD on the clipped direction, with epoch decay."""

    def __init__(self, *, learning_rate: LearningRate, clip_value: float = 1.0,
                 weight_decay: float = 0.0, epoch_decay: float = 0.0, momentum: float = 0.0,
                 nesterov: bool = False, dampening: float = 0.0) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode="sgd", clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=_BETAS, eps=1e-8, amsgrad=False)


class Adam(ClippedRule):
    """LibAUC's Adam: Adam on the clipped direction (coupled L2), with epoch decay."""

    def __init__(self, *, learning_rate: LearningRate = 1e-3, clip_value: float = 1.0,
                 weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode="adam",
                                clip_value=clip_value, weight_decay=weight_decay,
                                epoch_decay=epoch_decay, momentum=0.0, nesterov=False,
                                dampening=0.0, betas=betas, eps=eps, amsgrad=amsgrad)


class AdamW(ClippedRule):
    """LibAUC's AdamW: decoupled weight decay θ ← θ(1 - lr·weight_decay), then Adam on the
    clipped direction (clip 10 by default), with epoch decay."""

    decoupled_weight_decay = True

    def __init__(self, *, learning_rate: LearningRate = 1e-3, clip_value: float = 10.0,
                 weight_decay: float = 1e-2, epoch_decay: float = 0.0,
                 betas: tuple[float, float] = _BETAS, eps: float = 1e-8,
                 amsgrad: bool = False) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode="adam",
                                clip_value=clip_value, weight_decay=weight_decay,
                                epoch_decay=epoch_decay, momentum=0.0, nesterov=False,
                                dampening=0.0, betas=betas, eps=eps, amsgrad=amsgrad)
