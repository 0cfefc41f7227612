"""LibAUC 2.0.1's loss arguments that xrisk spells differently or does not take.

A LibAUC-style call such as ``APLoss(data_len=1000, surr_loss="hinge")`` raises a TypeError
that names the xrisk spelling, instead of Python's generic "unexpected keyword argument".
One table serves every loss: the core checks a definition's keyword arguments before its
``__init__`` runs (:mod:`xrisk._config`), and the adapters wrap the ``__init__`` of each of
their loss classes with :func:`guard_init` (their explicit signatures would otherwise reject
the name before the core sees it). An argument is only explained where it applies: a
renamed argument when the loss takes its xrisk spelling, a dropped one whenever the loss
does not take it. Anything else falls through to Python's own error.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RENAMED", "DROPPED", "check_libauc_arguments", "guard_init"]

#: LibAUC argument -> xrisk argument, for the constructor arguments xrisk renamed.
RENAMED: dict[str, str] = {
    "data_len": "num_samples",     # APLoss, pAUC_CVaR_Loss, pAUC_DRO_Loss, tpAUC_KL_Loss
    "data_length": "num_samples",  # tpAUC_CVaR_loss (STACO)
    "data_size": "num_samples",    # EntLossClassification (SCENT / SOX)
    "surr_loss": "surrogate",      # APLoss, PairwiseAUCLoss and the pAUC losses
    "N": "num_samples",            # GCLoss_v1 / GCLoss_v2 (the contrastive losses)
    "Lambda": "lam",               # pAUC_DRO_Loss, tpAUC_KL_Loss
    "threshold": "margin",         # tpAUC_CVaR_loss (STACO): its threshold is the margin
    "hparam": "margin",            # PairwiseAUCLoss; scale for logistic (see _targets)
    "num_user": "num_queries",     # NDCGLoss
    "num_item": "num_items",       # NDCGLoss
    "topk": "top_k",               # NDCGLoss (LibAUC's topk=-1 is top_k=None)
    "topk_version": "top_k_version",  # NDCGLoss
    "surrogate_loss": "surrogate",    # NDCGLoss
}

#: LibAUC argument -> why xrisk does not take it and the fix ({owner}, {value} filled in).
DROPPED: dict[str, str] = {
    "device": "pass device= to the adapter loss (xrisk.torch.{owner}(..., device=...)); the "
              "core definition has no device. Fix: build xrisk.torch.{owner}(..., "
              "device={value}) (or the xrisk.tensorflow / xrisk.jax class), or drop device= "
              "here",
    "pos_len": "LibAUC stores pos_len but never reads it; xrisk keeps one row per dataset "
               "index (num_samples) and needs no count of positives. Fix: drop pos_len=",
    "num_neg": "LibAUC reads num_neg only with auto=False; xrisk counts the negatives of "
               "every batch. Fix: drop num_neg=",
    "is_scent": "the update is chosen by mode: is_scent=True is mode='SCENT', False is "
                "mode='SOX'. Fix: {owner}(..., mode='SCENT') or {owner}(..., mode='SOX')",
    "backend": "cross-entropy is the only backend (LibAUC never reads this argument either). "
               "Fix: drop backend=",
    "enable_isogclr": "iSogCLR's individual temperatures are temperature_scheme='individual'. "
                      "Fix: {owner}(..., temperature_scheme='individual'), or drop "
                      "enable_isogclr=False",
    "eps": "the estimators are stored shifted (u = u~ exp(c), never below their batch share), "
           "so no floor is needed. Fix: drop eps=",
    "distributed": "under data parallelism call the loss on the global batch (the views, "
                   "gathered with their gradients, and the index of every rank); no flag is "
                   "needed. Fix: drop distributed=",
    "rank": "the loss needs no rank: call it on the global batch gathered in rank order. Fix: "
            "drop rank=",
    "world_size": "the loss needs no world size: call it on the global batch gathered in rank "
                  "order. Fix: drop world_size=",
    "num_pos": "the positives per query are the width of the (queries, positives) inputs "
               "(interaction, relevance). Fix: drop num_pos=",
    "cache_labels": "xrisk builds no label tensor to cache (positives are the pairs of one "
                    "row). Fix: drop cache_labels=",
}


def _shown(value: object) -> str:
    """``repr`` of a scalar or a tuple of scalars, the type name of anything else."""
    scalars = (type(None), bool, int, float, str)
    if isinstance(value, scalars) or (
        isinstance(value, tuple) and all(isinstance(v, scalars) for v in value)
    ):
        return repr(value)
    return f"<{type(value).__name__}>"


def _targets(name: str, kwargs: Mapping[str, Any],
             parameters: Mapping[str, inspect.Parameter]) -> tuple[tuple[str, ...], str]:
    """The xrisk argument(s) of LibAUC's ``name`` and a note on when they apply."""
    if name == "N" and "num_interactions" in parameters:  # ListwiseCELoss, NDCGLoss
        return ("num_interactions",), " (the number of relevant (query, item) pairs)"
    if name != "hparam":
        return (RENAMED[name],), ""
    # LibAUC's one hparam is the scale of the logistic surrogate, the margin of the hinge
    # family and both of barrier_hinge; which one depends on the surrogate asked for.
    default = parameters["surrogate"].default if "surrogate" in parameters else None
    surrogate = kwargs.get("surrogate", kwargs.get("surr_loss", default))
    if surrogate == "logistic":
        return ("scale",), " for surrogate='logistic' (margin for the other surrogates)"
    if surrogate == "barrier_hinge":
        return ("margin", "scale"), " for surrogate='barrier_hinge'"
    return ("margin",), f" for surrogate={surrogate!r} (scale for 'logistic')"


def check_libauc_arguments(owner: str, kwargs: Mapping[str, Any],
                           parameters: Mapping[str, inspect.Parameter]) -> None:
    """Raise TypeError for a LibAUC argument name in ``kwargs`` that ``owner`` does not take.

    Parameters
    ----------
    owner : str
        The class name shown in the message (e.g. ``"APLoss"``).
    kwargs : mapping of str to object
        The keyword arguments of the call.
    parameters : mapping of str to inspect.Parameter
        The parameters of the constructor (a ``**kwargs`` parameter disables the check).

    Raises
    ------
    TypeError
        A keyword of :data:`RENAMED` whose xrisk spelling ``owner`` takes, or a keyword of
        :data:`DROPPED`, when ``owner`` does not take the keyword itself.
    """
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    for name, value in kwargs.items():
        if name in parameters:
            continue
        shown = _shown(value)
        if name in RENAMED:
            targets, when = _targets(name, kwargs, parameters)
            if all(target in parameters for target in targets):
                spelled = " and ".join(targets)
                call = ", ".join(f"{target}=..." for target in targets)
                example = ", ".join(f"{target}={shown}" for target in targets)
                raise TypeError(
                    f"{owner}: unexpected argument {name}={shown} (LibAUC 2.0.1's name); "
                    f"{name} is {spelled} in xrisk{when}: {owner}({call}). Fix: rename "
                    f"{name}= to {'= and '.join(targets)}=, e.g. {owner}({example})."
                )
        elif name in DROPPED:
            explanation = DROPPED[name].format(owner=owner, value=shown)
            raise TypeError(
                f"{owner}: unexpected argument {name}={shown} (a LibAUC 2.0.1 argument that "
                f"xrisk's {owner} does not take): {explanation}."
            )


def guard_init(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap a loss class's ``__init__`` so LibAUC argument names raise the explanation of
    :func:`check_libauc_arguments` before Python's generic "unexpected keyword" error.

    The adapters' ``XRiskLoss.__init_subclass__`` applies it to every loss class that
    defines an ``__init__``; ``inspect.signature`` and ``help`` still show the real one.
    """
    if getattr(init, "__libauc_guarded__", False):
        return init
    parameters = inspect.signature(init).parameters

    @functools.wraps(init)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> None:
        check_libauc_arguments(type(self).__name__, kwargs, parameters)
        init(self, *args, **kwargs)

    guarded.__libauc_guarded__ = True  # type: ignore[attr-defined]
    return guarded
