"""torchmetrics ``Metric`` versions of the streaming metrics (import ``xrisk.torch.metrics``).

``AUROC``, ``AveragePrecision``, ``OneWayPartialAUROC``, ``TwoWayPartialAUROC``, ``NDCGAtK`` and
``MAPAtK`` follow torchmetrics' conventions: ``update(preds, target)`` (or
``metric(preds, target)``), ``compute()``, ``reset()``, ``merge_state``/``merge``, and
torchmetrics' own synchronisation across ranks (DDP, Lightning) before ``compute``:

- the classification metrics keep list states of the scores and labels seen (float64:
  torchmetrics sends a rank without data as an empty tensor of the metric's dtype), with
  ``dist_reduce_fx="cat"``: the ranks' lists are gathered, and ``compute`` applies the
  whole-array :mod:`xrisk.metrics` function to them, so the value equals
  :func:`xrisk.metrics.auroc` (and friends) of the data of every rank, bit for bit;
- the ranking metrics keep three sums (``dist_reduce_fx="sum"``): the sum of the per-query
  values, the number of defined queries and of queries without a relevant item.

``update`` validates its batch on the host (labels 0/1, shapes, finite scores), raising a
ValueError that leaves the state unchanged: one device-to-host copy per batch on an
accelerator. This module imports torchmetrics, which ``import xrisk.torch`` does not.

Examples
--------
>>> import torch
>>> from xrisk.torch.metrics import AUROC
>>> metric = AUROC()
>>> metric.update(torch.tensor([0.1, 0.35]), torch.tensor([0, 1]))
>>> metric.update(torch.tensor([0.4, 0.8]), torch.tensor([0, 1]))
>>> metric.compute()
tensor(0.7500, dtype=torch.float64)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat

from xrisk.metrics import streaming

__all__ = ["AUROC", "AveragePrecision", "OneWayPartialAUROC", "TwoWayPartialAUROC",
           "NDCGAtK", "MAPAtK"]


class _Streaming(Metric):
    """Shared by the six metrics: the core definition and merge."""

    is_differentiable = False
    higher_is_better = True
    full_state_update = False
    core: streaming.StreamingMetric
    #: True while ``forward`` computes the value of its batch alone.
    _batch_only = False

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Update with the batch and return the metric of this batch alone, NaN where the
        batch alone leaves it undefined (a batch of one class, say): raising there would
        lose the state torchmetrics set aside while it computes the batch value."""
        self._batch_only = True
        try:
            return super().forward(*args, **kwargs)
        finally:
            self._batch_only = False

    def config(self) -> dict[str, Any]:
        """The options that give the metric its meaning (those of the core class)."""
        return self.core.config()

    def merge(self, other: Metric) -> _Streaming:
        """Add ``other``'s state to this one (in place, as torchmetrics' ``merge_state``
        after checking that both are the same metric with the same options); returns
        ``self``."""
        self.core.check_mergeable(getattr(other, "core", other))
        self.merge_state(other)
        return self


class _Classification(_Streaming):
    core: streaming.ClassificationMetric
    # torchmetrics states: lists of batches (one tensor while synchronised in compute).
    scores: list[torch.Tensor]
    labels: list[torch.Tensor]

    def __init__(self, core: streaming.ClassificationMetric, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.core = core
        self.add_state("scores", default=[], dist_reduce_fx="cat")
        self.add_state("labels", default=[], dist_reduce_fx="cat")
        # A rank that saw nothing sends an empty tensor of the metric's dtype: float64 for
        # both states, so every rank's all_gather has one dtype.
        self.set_dtype(torch.float64)

    def _seen(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Labels and scores seen, concatenated (None before the first sample). The states
        are lists of batches, or one tensor after torchmetrics' synchronisation."""
        labels: Any = self.labels
        if isinstance(labels, list) and not labels:
            return None
        return dim_zero_cat(labels), dim_zero_cat(self.scores)

    def _columns(self) -> int | None:
        # Read from the states only: they survive sync, merge and load_state_dict.
        labels: Any = self.labels
        if isinstance(labels, list):
            if not labels:
                return None
            labels = labels[0]
        return int(labels.shape[1]) if labels.ndim == 2 else 0

    def update(self, preds: Any, target: Any) -> None:
        """Add a batch: scores ``preds`` and labels ``target`` in {0, 1}, shape (B,) or
        (B, T); raises ValueError on bad input and changes nothing."""
        labels, scores = self.core.check(target, preds, self._columns())
        if labels.shape[0]:
            self.scores.append(torch.as_tensor(scores, device=self.device))
            self.labels.append(torch.as_tensor(labels, dtype=torch.float64, device=self.device))

    def compute(self) -> torch.Tensor:
        """The whole-array metric of every batch (of every rank after synchronisation)."""
        seen = self._seen()
        if seen is None:
            labels, scores = np.zeros(0, dtype=np.int8), np.zeros(0)
        else:
            labels, scores = (tensor.cpu().numpy() for tensor in seen)
            labels = labels.astype(np.int8)
        if self._batch_only and self.core.undefined(labels) is not None:
            per_label = labels.ndim == 2 and self.core.config()["average"] is None
            return torch.full(labels.shape[1:] if per_label else (), float("nan"),
                              dtype=torch.float64)
        return torch.as_tensor(self.core.value(labels, scores), dtype=torch.float64)


class AUROC(_Classification):
    """Streaming AUROC, :func:`xrisk.metrics.auroc` of every batch seen.

    Parameters
    ----------
    average : {"macro", None}, default "macro"
        For (N, T) labels: the mean over the columns that hold both classes, or the per-column
        values.
    **kwargs
        torchmetrics ``Metric`` options (``sync_on_compute``, ``process_group``, ...).

    Examples
    --------
    >>> import torch
    >>> from xrisk.torch.metrics import AUROC
    >>> metric = AUROC()
    >>> metric(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
    tensor(0.7500, dtype=torch.float64)
    """

    def __init__(self, *, average: str | None = "macro", **kwargs: Any) -> None:
        super().__init__(streaming.AUROC(average=average), **kwargs)


class AveragePrecision(_Classification):
    """Streaming average precision, :func:`xrisk.metrics.average_precision`.

    Same parameters as :class:`AUROC`.

    Examples
    --------
    >>> import torch
    >>> from xrisk.torch.metrics import AveragePrecision
    >>> metric = AveragePrecision()
    >>> metric.update(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
    >>> round(float(metric.compute()), 4)
    0.8333
    """

    def __init__(self, *, average: str | None = "macro", **kwargs: Any) -> None:
        super().__init__(streaming.AveragePrecision(average=average), **kwargs)


class OneWayPartialAUROC(_Classification):
    """Streaming one-way partial AUROC, :func:`xrisk.metrics.one_way_partial_auroc`.

    Parameters
    ----------
    max_fpr : float in (0, 1]
    scale : {"normalized", "raw", "mcclish"}, default "normalized"
    average : {"macro", None}, default "macro"
    **kwargs
        torchmetrics ``Metric`` options.

    Examples
    --------
    >>> import torch
    >>> from xrisk.torch.metrics import OneWayPartialAUROC
    >>> metric = OneWayPartialAUROC(max_fpr=0.25)
    >>> metric.update(torch.tensor([0.9, 0.2, 0.1, 0.3, 0.95, 0.5]),
    ...               torch.tensor([0, 0, 0, 0, 1, 1]))
    >>> float(metric.compute())
    0.5
    """

    def __init__(self, *, max_fpr: float, scale: str = "normalized",
                 average: str | None = "macro", **kwargs: Any) -> None:
        super().__init__(streaming.OneWayPartialAUROC(max_fpr=max_fpr, scale=scale,
                                                      average=average), **kwargs)


class TwoWayPartialAUROC(_Classification):
    """Streaming two-way partial AUROC, :func:`xrisk.metrics.two_way_partial_auroc`.

    Parameters
    ----------
    max_fpr : float in (0, 1]
    min_tpr : float in [0, 1)
    scale : {"normalized", "raw"}, default "normalized"
    average : {"macro", None}, default "macro"
    **kwargs
        torchmetrics ``Metric`` options.

    Examples
    --------
    >>> import torch
    >>> from xrisk.torch.metrics import TwoWayPartialAUROC
    >>> metric = TwoWayPartialAUROC(max_fpr=0.5, min_tpr=0.5)
    >>> metric.update(torch.tensor([0.9, 0.2, 0.1, 0.3, 0.95, 0.5]),
    ...               torch.tensor([0, 0, 0, 0, 1, 1]))
    >>> float(metric.compute())
    0.5
    """

    def __init__(self, *, max_fpr: float, min_tpr: float, scale: str = "normalized",
                 average: str | None = "macro", **kwargs: Any) -> None:
        super().__init__(streaming.TwoWayPartialAUROC(
            max_fpr=max_fpr, min_tpr=min_tpr, scale=scale, average=average), **kwargs)


class _Ranking(_Streaming):
    core: streaming.RankingMetric
    total: torch.Tensor
    num_defined: torch.Tensor
    num_undefined: torch.Tensor

    def __init__(self, core: streaming.RankingMetric, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.core = core
        zero = torch.zeros((), dtype=torch.float64)
        self.add_state("total", default=zero.clone(), dist_reduce_fx="sum")
        self.add_state("num_defined", default=zero.clone(), dist_reduce_fx="sum")
        self.add_state("num_undefined", default=zero.clone(), dist_reduce_fx="sum")

    def update(self, preds: Any, target: Any,
               query_ids: Any = None) -> None:
        """Add whole queries: scores ``preds`` and graded relevance ``target``, shape (Q, M)
        (one query per row) or (N,) with ``query_ids``; raises ValueError on bad input and
        changes nothing."""
        total, defined, undefined = self.core.sums(target, preds, query_ids)
        self.total += total
        self.num_defined += defined
        self.num_undefined += undefined

    def compute(self) -> torch.Tensor:
        """The mean over the queries of every batch (of every rank after synchronisation)."""
        sums = float(self.total), int(self.num_defined), int(self.num_undefined)
        if self._batch_only and self.core.undefined(*sums[1:]) is not None:
            return torch.tensor(float("nan"), dtype=torch.float64)
        value = self.core.value(*sums)
        return torch.as_tensor(value, dtype=torch.float64)


class NDCGAtK(_Ranking):
    """Streaming NDCG@k, :func:`xrisk.metrics.ndcg_at_k` averaged over every query seen.

    Parameters
    ----------
    k : int
        Cut-off rank (>= 1).
    gain : {"exponential", "linear"}, default "exponential"
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"
    **kwargs
        torchmetrics ``Metric`` options.

    Examples
    --------
    >>> import torch
    >>> from xrisk.torch.metrics import NDCGAtK
    >>> metric = NDCGAtK(k=3)
    >>> metric.update(torch.tensor([[0.2, 0.9, 0.1]]), torch.tensor([[3, 0, 1]]))
    >>> round(float(metric.compute()), 4)
    0.6443
    """

    def __init__(self, k: int, *, gain: str = "exponential", ties: str = "pessimistic",
                 no_relevant: str = "skip", **kwargs: Any) -> None:
        super().__init__(streaming.NDCGAtK(k, gain=gain, ties=ties, no_relevant=no_relevant),
                         **kwargs)


class MAPAtK(_Ranking):
    """Streaming MAP@k, :func:`xrisk.metrics.map_at_k` averaged over every query seen.

    Parameters
    ----------
    k : int
        Cut-off rank (>= 1).
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"
    **kwargs
        torchmetrics ``Metric`` options.

    Examples
    --------
    >>> import torch
    >>> from xrisk.torch.metrics import MAPAtK
    >>> metric = MAPAtK(k=4)
    >>> metric.update(torch.tensor([[0.9, 0.8, 0.1, 0.2]]), torch.tensor([[1, 0, 1, 0]]))
    >>> float(metric.compute())
    0.75
    """

    def __init__(self, k: int, *, ties: str = "pessimistic", no_relevant: str = "skip",
                 **kwargs: Any) -> None:
        super().__init__(streaming.MAPAtK(k, ties=ties, no_relevant=no_relevant), **kwargs)
