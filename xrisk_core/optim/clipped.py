r"""LibAUC's named optimizers that are one rule: clipped SGD/Adam with epoch decay.

SOAP, SOPA, SOPAs, SOTAs, STACO, SONG, SGD, Adam and AdamW differ only in their defaults
(LibAUC 2.0.1 gives them one shared update rule too): all the X-risk logic lives in the
losses. Each class here is a *preset* of :class:`ClippedRule`: it names the defaults it
changes and the arguments it fixes; its signature, checks and update are the rule's.

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

from ._rule import REQUIRED, ClippedRule

__all__ = ["SOAP", "SOPA", "SOPAs", "SOTAs", "STACO", "SONG", "SGD", "Adam", "AdamW"]

#: What SGD and the Adams leave out: the other mode's options.
_SGD_ONLY = {"mode": "sgd", "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False}
_ADAM_ONLY = {"mode": "adam", "momentum": 0.0, "nesterov": False, "dampening": 0.0}


class SOAP(ClippedRule, preset={"weight_decay": 1e-5, "dampening": 0.1}):
    """Optimizer of :class:`xrisk.APLoss` (average precision): clipped Adam by default."""


class SOPA(ClippedRule, preset={}):
    """Optimizer of the one-way partial AUC by CVaR (pAUC_CVaR).

    Notes
    -----
    LibAUC's ``eta`` argument had no effect and is dropped (the dual step size belongs to
    the loss); passing it raises a TypeError that says so.
    """


class SOPAs(ClippedRule, preset={"clip_value": 2.0, "weight_decay": 1e-5, "dampening": 0.1}):
    """Optimizer of the one-way partial AUC by KL-DRO (pAUC_DRO); clips at 2."""


class SOTAs(ClippedRule, preset={}):
    """Optimizer of the two-way partial AUC by KL (tpAUC_KL)."""


class STACO(ClippedRule, preset={}):
    """Optimizer of the two-way partial AUC by double CVaR (tpAUC_CVaR).

    Notes
    -----
    LibAUC's ``loss_fn`` argument was ignored; it is not an argument here.
    """


class SONG(ClippedRule, preset={"learning_rate": REQUIRED, "mode": "sgd"}):
    """Optimizer of NDCG (SONG, K-SONG) and listwise CE: clipped momentum SGD by default."""


class SGD(ClippedRule, preset={"learning_rate": REQUIRED, "momentum": 0.0}, fixed=_SGD_ONLY):
    """LibAUC's SGD: torch's momentum SGD on the clipped direction, with epoch decay."""


class Adam(ClippedRule, preset={}, fixed=_ADAM_ONLY):
    """LibAUC's Adam: Adam on the clipped direction (coupled L2), with epoch decay."""


class AdamW(ClippedRule, preset={"clip_value": 10.0, "weight_decay": 1e-2}, fixed=_ADAM_ONLY):
    """LibAUC's AdamW: decoupled weight decay θ ← θ(1 - lr·weight_decay), then Adam on the
    clipped direction (clip 10 by default), with epoch decay."""

    decoupled_weight_decay = True
