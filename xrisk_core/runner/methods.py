"""The methods a recipe can name, their defaults and their search ranges: one table.

A *method* is a loss, the optimizer it is trained with, how batches are drawn and the metric
it optimizes (its "own" metric: early stopping and comparisons watch it). The default
hyper-parameters are **not** restated here: they are read from the signatures of the core
classes (:data:`xrisk.LOSSES`, :data:`xrisk.OPTIMIZERS`), which are what a user gets from
``xrisk.torch.APLoss(...)``. Only what differs from a class's own default is written down
(``overrides``, with the reason), and the search ranges, which no class knows.

>>> from xrisk.runner.methods import METHODS, defaults
>>> METHODS["soap"].loss, METHODS["soap"].optimizer, METHODS["soap"].metric
('APLoss', 'SOAP', 'ap')
>>> defaults("pesg")["optimizer"]["learning_rate"]
0.1
>>> defaults("soap")["loss"]["gamma"]
0.9
>>> METHODS["ksong"].loss, defaults("ksong")["loss"]["top_k"], METHODS["ksong"].task
('NDCGLoss', 10, 'ranking')
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import xrisk

__all__ = ["METHODS", "Method", "SearchRange", "class_defaults", "defaults", "defaults_table"]

#: Arguments the runner fills from the data (never taken from a recipe).
DATA_ARGUMENTS = ("num_samples", "num_labels", "num_interactions", "num_queries", "num_items",
                  "loss_fn")


@dataclass(frozen=True)
class SearchRange:
    """A tuning range: ``low``..``high``, on a log scale when ``log`` (learning rates)."""

    low: float
    high: float
    log: bool = False


@dataclass(frozen=True)
class Method:
    """One row of the table: what ``method: <name>`` in a recipe means.

    ``sampler`` is ``"dual"`` (a fixed share of positives per batch), ``"random"`` or
    ``"tri"`` (ranking: queries x (rated + unrated items)); ``task`` is ``"binary"``,
    ``"ranking"``, ``"contrastive"`` or ``"multilabel"``;
    ``stages`` says whether the schedule's decay points call ``update_regularizer`` (the
    proximal stages of PESG and PDSCA) rather than ``update_lr``; ``overrides`` holds the
    hyper-parameters where the runner departs from the class default; ``search`` the
    ranges ``xrisk tune`` searches, as ``"loss.<name>"`` / ``"optimizer.<name>"``.
    """

    loss: str
    optimizer: str
    metric: str
    sampler: str = "dual"
    task: str = "binary"
    stages: bool = False
    description: str = ""
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    search: dict[str, SearchRange] = field(default_factory=dict)


_LR_ADAM = SearchRange(1e-4, 1e-2, log=True)
_LR_SGD = SearchRange(1e-2, 1.0, log=True)
_GAMMA = SearchRange(0.1, 1.0)
_MARGIN = SearchRange(0.3, 1.5)
#: The paper's learning-to-rank optimizer: LibAUC's clipped Adam (``SONG(mode="adam")``),
#: weight decay 1e-7, learning rate 1e-2 (the paper's 1e-3 goes with ~540 steps per epoch
#: on MovieLens-20M; the shipped sets give 9-19, and 1e-2 won every MovieLens method in
#: examples/ranking_movielens.py's check).
_RANKING_ADAM = {"mode": "adam", "learning_rate": 1e-2, "weight_decay": 1e-7}
_RANKING_SEARCH = {"optimizer.learning_rate": _LR_ADAM}
#: K of K-SONG (its top-K NDCG and top-K ideal DCG).
KSONG_TOP_K = 10
#: LARS as SimCLR and SogCLR train with it: learning rate 0.075 sqrt(batch size) (0.6 at the
#: runner's batch of 64), weight decay 1e-6, momentum 0.9, trust coefficient 1e-3; vectors
#: (biases, BatchNorm) excluded from the trust ratio (``exclude_1d``).
CONTRASTIVE_LARS = {"learning_rate": 0.6, "weight_decay": 1e-6, "momentum": 0.9,
                    "trust_coefficient": 1e-3}
_CONTRASTIVE_SEARCH = {"optimizer.learning_rate": SearchRange(0.05, 2.0, log=True)}

METHODS: dict[str, Method] = {
    "ce": Method("CrossEntropyLoss", "Adam", "auroc", sampler="random",
                 description="binary cross-entropy on logits (the baseline)",
                 search={"optimizer.learning_rate": _LR_ADAM}),
    "focal": Method("FocalLoss", "Adam", "auroc", sampler="random",
                    description="focal loss on logits (the imbalance baseline)",
                    search={"optimizer.learning_rate": _LR_ADAM,
                            "loss.gamma": SearchRange(0.5, 5.0),
                            "loss.alpha": SearchRange(0.05, 0.95)}),
    "pesg": Method("AUCMLoss", "PESG", "auroc", stages=True,
                   description="AUC-margin min-max loss (AUROC)",
                   search={"optimizer.learning_rate": _LR_SGD,
                           "optimizer.epoch_decay": SearchRange(1e-4, 1e-2, log=True),
                           "loss.margin": SearchRange(0.6, 1.0)}),
    "pdsca": Method("CompositionalAUCLoss", "PDSCA", "auroc", stages=True,
                    description="compositional AUC: cross-entropy steps inside the AUC loss",
                    search={"optimizer.learning_rate": _LR_SGD, "loss.margin": _MARGIN}),
    "pairwise": Method("PairwiseAUCLoss", "Adam", "auroc",
                       description="pairwise AUROC surrogate (logistic)",
                       search={"optimizer.learning_rate": _LR_ADAM}),
    "soap": Method("APLoss", "SOAP", "ap", description="SOAP: average precision (AUPRC)",
                   search={"optimizer.learning_rate": _LR_ADAM, "loss.gamma": _GAMMA,
                           "loss.margin": _MARGIN}),
    "sopa": Method("pAUC_CVaR_Loss", "SOPA", "pauc",
                   description="SOPA: one-way partial AUC (FPR <= beta), exact CVaR",
                   search={"optimizer.learning_rate": _LR_ADAM,
                           "loss.eta": SearchRange(0.01, 1.0, log=True)}),
    "sopas": Method("pAUC_DRO_Loss", "SOPAs", "pauc",
                    description="SOPAs: one-way partial AUC via KL-DRO",
                    search={"optimizer.learning_rate": _LR_ADAM, "loss.gamma": _GAMMA,
                            "loss.lam": SearchRange(0.1, 10.0, log=True)}),
    "sotas": Method("tpAUC_KL_Loss", "SOTAs", "tpauc",
                    description="SOTAs: two-way partial AUC via KL-DRO",
                    search={"optimizer.learning_rate": _LR_ADAM,
                            "loss.tau": SearchRange(0.1, 10.0, log=True),
                            "loss.lam": SearchRange(0.1, 10.0, log=True)}),
    "staco": Method("tpAUC_CVaR_Loss", "STACO", "tpauc",
                    description="STACO: two-way partial AUC via double CVaR",
                    search={"optimizer.learning_rate": _LR_ADAM}),
    "song": Method("NDCGLoss", "SONG", "ndcg@10", sampler="tri", task="ranking",
                   description="SONG: NDCG by moving-average estimators (learning to rank)",
                   overrides={"loss": {"gamma0": 0.1}, "optimizer": dict(_RANKING_ADAM)},
                   search={**_RANKING_SEARCH, "loss.gamma0": _GAMMA}),
    "ksong": Method("NDCGLoss", "SONG", "ndcg@10", sampler="tri", task="ranking",
                    description=f"K-SONG: top-{KSONG_TOP_K} NDCG (top-K ideal DCG)",
                    overrides={"loss": {"gamma0": 0.1, "top_k": KSONG_TOP_K},
                               "optimizer": dict(_RANKING_ADAM)},
                    search={**_RANKING_SEARCH, "loss.gamma0": _GAMMA}),
    "listwise_ce": Method("ListwiseCELoss", "SONG", "ndcg@10", sampler="tri", task="ranking",
                          description="listwise cross-entropy (the ranking baseline)",
                          overrides={"loss": {"gamma": 0.1}, "optimizer": dict(_RANKING_ADAM)},
                          search={**_RANKING_SEARCH, "loss.gamma": _GAMMA}),
    "sogclr": Method("GlobalContrastiveLoss", "LARS", "probe_accuracy", sampler="random",
                     task="contrastive",
                     description="SogCLR: global contrastive loss, moving-average "
                                 "denominators (self-supervised)",
                     overrides={"optimizer": dict(CONTRASTIVE_LARS)},
                     search={**_CONTRASTIVE_SEARCH, "loss.gamma": _GAMMA}),
    "infonce": Method("InfoNCELoss", "LARS", "probe_accuracy", sampler="random",
                      task="contrastive",
                      description="InfoNCE (SimCLR's NT-Xent), trained at 2 tau x its value "
                                  "(the step-size rule)",
                      overrides={"optimizer": dict(CONTRASTIVE_LARS)},
                      search=dict(_CONTRASTIVE_SEARCH)),
    "ml_soap": Method("meanAveragePrecisionLoss", "SOAP", "ap", sampler="random",
                      task="multilabel",
                      description="mAP: SOAP on every label (multi-label, missing masked)",
                      search={"optimizer.learning_rate": _LR_ADAM, "loss.gamma": _GAMMA,
                              "loss.margin": _MARGIN}),
    "ml_pesg": Method("MultiLabelAUCMLoss", "PESG", "auroc", sampler="random",
                      task="multilabel", stages=True,
                      description="AUC-M on every label with PESG (multi-label)",
                      search={"optimizer.learning_rate": _LR_SGD,
                              "optimizer.epoch_decay": SearchRange(1e-4, 1e-2, log=True),
                              "loss.margin": SearchRange(0.6, 1.0)}),
    "ml_sopas": Method("MultiLabelpAUCLoss", "SOPAs", "pauc", sampler="random",
                       task="multilabel",
                       description="one-way partial AUC (KL-DRO) on every label",
                       search={"optimizer.learning_rate": _LR_ADAM}),
    "ml_bce": Method("CrossEntropyLoss", "Adam", "auroc", sampler="random", task="multilabel",
                     description="binary cross-entropy per label, missing labels masked "
                                 "(the multi-label baseline)",
                     search={"optimizer.learning_rate": _LR_ADAM}),
    "bce": Method("CrossEntropyLoss", "Adam", "ndcg@10", sampler="tri", task="ranking",
                  description="pointwise cross-entropy: rated items against sampled unrated",
                  overrides={"optimizer": {"learning_rate": 1e-2, "weight_decay": 1e-7}},
                  search=dict(_RANKING_SEARCH)),
}


def class_defaults(cls: type) -> dict[str, Any]:
    """The keyword defaults of a core class's constructor (data-given arguments left out;
    an argument without a default, such as SGD's learning rate, maps to None).

    >>> class_defaults(xrisk.FocalLoss)
    {'alpha': 0.25, 'gamma': 2.0}
    """
    out = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        if name in DATA_ARGUMENTS:
            continue
        default = parameter.default
        out[name] = None if default is inspect.Parameter.empty else default
    return out


def defaults(method: str) -> dict[str, dict[str, Any]]:
    """``{"loss": {...}, "optimizer": {...}}``: the hyper-parameters a method trains with
    when a recipe sets none (the classes' defaults, then the method's overrides)."""
    row = METHODS[method]
    out = {"loss": class_defaults(xrisk.LOSSES[row.loss]),
           "optimizer": class_defaults(xrisk.OPTIMIZERS[row.optimizer])}
    for part, values in row.overrides.items():
        out[part].update(values)
    return out


def defaults_table() -> str:
    """A Markdown table of every method: loss, optimizer, metric, defaults, search ranges.

    This is the table of ``docs/runner.md``; ``xrisk methods`` prints it.
    """
    lines = ["| method | loss | optimizer | metric | defaults | search |",
             "|---|---|---|---|---|---|"]
    for name, row in METHODS.items():
        values = defaults(name)
        shown = ", ".join(
            [f"{k}={v}" for k, v in values["loss"].items()]
            + [f"{k}={v}" for k, v in values["optimizer"].items()
               if k in ("learning_rate", "mode", "weight_decay", "epoch_decay", "momentum")])
        search = ", ".join(f"{k} in [{r.low:g}, {r.high:g}]{' (log)' if r.log else ''}"
                           for k, r in row.search.items())
        lines.append(f"| `{name}` | {row.loss} | {row.optimizer} | {row.metric} | {shown} | "
                     f"{search} |")
    return "\n".join(lines)
