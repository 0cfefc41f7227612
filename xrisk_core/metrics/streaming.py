"""Streaming (stateful) metrics: ``update`` batch by batch, ``compute`` once, ``merge`` states.

Each class equals its whole-array function of :mod:`xrisk.metrics` on the concatenation of
every batch seen, by construction:

- **classification** (:class:`AUROC`, :class:`AveragePrecision`, :class:`OneWayPartialAUROC`,
  :class:`TwoWayPartialAUROC`): the ROC and precision-recall curves depend on the order of
  all scores together, so no fixed-size summary is exact for arbitrary float scores (a
  histogram is exact only when every distinct score has its own bin). The metric keeps the
  validated scores (float64) and labels (int8) it has seen, 9 bytes per sample and label,
  and ``compute`` calls the whole-array function on them: the same float64 numbers, ties
  and pAUC interpolation as :func:`xrisk.metrics.auroc` and friends, bit for bit;
- **ranking** (:class:`NDCGAtK`, :class:`MAPAtK`): NDCG@k and MAP@k are means over queries
  of a value that depends on the query alone, so each ``update`` (which must hold whole
  queries) computes its queries' values with :func:`xrisk.metrics.ndcg_at_k` /
  :func:`xrisk.metrics.map_at_k` and the state is three numbers: the sum of the defined
  values, the number of defined queries and the number of queries without a relevant item.
  The result equals the whole-array mean up to the rounding of a float64 sum (relative
  1e-15), whatever the batches.

``merge`` of two states is the state of the concatenated data (concatenation, or addition of
the three sums): that is what ranks exchange when they synchronise. The framework versions
(``xrisk.torch.metrics``: torchmetrics ``Metric``; ``xrisk.tensorflow.metrics``:
``keras.metrics.Metric``; ``xrisk.jax.metrics``: pure ``init``/``update``/``compute``/
``merge``) keep the same states in their own arrays and compute with these classes.

Examples
--------
>>> from xrisk.metrics.streaming import AUROC
>>> metric = AUROC()
>>> metric.update([0, 0], [0.1, 0.4])
>>> metric.update([1, 1], [0.35, 0.8])
>>> metric.compute()   # auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
0.75
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np

from .._arguments import check_choice, check_interval
from .._inputs import to_numpy
from . import classification, ranking

__all__ = [
    "StreamingMetric",
    "ClassificationMetric",
    "RankingMetric",
    "AUROC",
    "AveragePrecision",
    "OneWayPartialAUROC",
    "TwoWayPartialAUROC",
    "NDCGAtK",
    "MAPAtK",
]


class StreamingMetric:
    """Common interface: ``update(...)``, ``compute()``, ``reset()``, ``merge(other)``.

    ``config()`` returns the options that give the metric its meaning; two states merge only
    when their classes and configs are equal.
    """

    owner: str = "StreamingMetric"

    def config(self) -> dict[str, Any]:
        raise NotImplementedError

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError

    def compute(self) -> Any:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def merge(self, other: StreamingMetric) -> StreamingMetric:
        raise NotImplementedError

    def check_mergeable(self, other: object) -> None:
        """Raise unless ``other`` is a metric of the same class with the same options."""
        if type(other) is not type(self):
            raise TypeError(
                f"{self.owner}.merge: received a {type(other).__name__}; expected another "
                f"{type(self).__name__}. Fix: merge metrics of one kind, e.g. "
                f"a.merge(b) with both {type(self).__name__}(...)."
            )
        theirs = other.config()
        if theirs != self.config():
            raise ValueError(
                f"{self.owner}.merge: the other metric has options {theirs}; expected "
                f"{self.config()} (the same metric). Fix: build both with the same options."
            )

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({options})"


# --------------------------------------------------------------------------- classification


class ClassificationMetric(StreamingMetric):
    """Keeps the scores and labels seen; ``compute`` applies the whole-array function.

    Labels are 0/1 with shape (B,) or (B, T) (T labels, macro average as in
    :func:`xrisk.metrics.auroc`); scores have the same shape. T is fixed by the first batch.
    """

    #: Whether a column needs negatives too (AUROC, pAUC) or only a positive (AP).
    needs_negatives = True

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every batch."""
        self._labels: list[np.ndarray] = []
        self._scores: list[np.ndarray] = []

    # The function of y_true and y_score that the subclass streams.
    def _function(self) -> Callable[[np.ndarray, np.ndarray], Any]:
        raise NotImplementedError

    def check(self, y_true: Any, y_score: Any,
              columns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Validate one batch; return labels (int8) and scores (float64) of one shape.

        ``columns``: the number of label columns already fixed (None: not yet, 0: 1-D).
        Raises ValueError (shape mismatch, labels other than 0/1, non-finite scores) naming
        the received and expected values and the fix; changes nothing.
        """
        owner = f"{self.owner}.update"
        y = to_numpy(y_true)
        s = to_numpy(y_score)
        if y.size == 0 and s.size == 0:
            labels = np.zeros((0,) if not columns else (0, columns), dtype=np.int8)
            return labels, np.zeros(labels.shape)
        labels, scores = classification._inputs(owner, y, s)
        width = labels.shape[1] if labels.ndim == 2 else 0
        if columns is not None and width != columns:
            expected = "(B,)" if columns == 0 else f"(B, {columns})"
            raise ValueError(
                f"{owner}: y_true has shape {labels.shape}; expected {expected} like the "
                f"batches before. Fix: pass the same labels per sample in every batch, or "
                f"reset() the metric first."
            )
        return labels.astype(np.int8), scores

    @property
    def columns(self) -> int | None:
        """Label columns fixed by the data seen (0: 1-D labels; None: nothing seen yet)."""
        if not self._labels:
            return None
        first = self._labels[0]
        return first.shape[1] if first.ndim == 2 else 0

    def update(self, y_true: Any, y_score: Any) -> None:
        """Add a batch: labels in {0, 1} and scores, shape (B,) or (B, T)."""
        labels, scores = self.check(y_true, y_score, self.columns)
        if labels.shape[0]:
            self._labels.append(labels)
            self._scores.append(scores)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Everything seen so far: labels (N,) or (N, T) int8 and scores float64."""
        if not self._labels:
            return np.zeros(0, dtype=np.int8), np.zeros(0)
        return np.concatenate(self._labels), np.concatenate(self._scores)

    def undefined(self, labels: np.ndarray) -> str | None:
        """Why the metric of ``labels`` is undefined (None when it is defined)."""
        if labels.shape[0] == 0:
            return "no sample has been seen"
        columns = labels.reshape(labels.shape[0], -1)
        has_positive = columns.max(axis=0) == 1
        defined = has_positive & (columns.min(axis=0) == 0) if self.needs_negatives \
            else has_positive
        if defined.any():
            return None
        return ("the labels seen hold a single class" if self.needs_negatives
                else "no positive label has been seen")

    def value(self, labels: np.ndarray, scores: np.ndarray) -> Any:
        """The whole-array function of ``labels`` and ``scores`` (raises where undefined)."""
        if labels.shape[0] == 0:
            raise ValueError(
                f"{self.owner}.compute: no sample has been seen; expected at least one "
                "update. Fix: call update(y_true, y_score) before compute()."
            )
        return self._function()(labels, scores)

    def compute(self) -> Any:
        """The metric of every batch seen (a float; per-label array with ``average=None``)."""
        return self.value(*self.arrays())

    def merge(self, other: StreamingMetric) -> ClassificationMetric:
        """Add ``other``'s data after this metric's (in place); returns ``self``."""
        self.check_mergeable(other)
        theirs_metric = cast(ClassificationMetric, other)
        mine, theirs = self.columns, theirs_metric.columns
        if mine is not None and theirs is not None and mine != theirs:
            raise ValueError(
                f"{self.owner}.merge: the other metric saw {theirs} label columns; expected "
                f"{mine}. Fix: merge metrics of the same task."
            )
        self._labels += theirs_metric._labels
        self._scores += theirs_metric._scores
        return self


def _average(owner: str, average: object) -> str | None:
    return check_choice(owner, "average", average, ("macro", None))


class AUROC(ClassificationMetric):
    """Streaming :func:`xrisk.metrics.auroc` (scikit-learn's ``roc_auc_score``; ties count
    one half).

    Parameters
    ----------
    average : {"macro", None}, default "macro"
        For (N, T) labels: the mean over defined columns, or the per-column values.

    Examples
    --------
    >>> from xrisk.metrics.streaming import AUROC
    >>> metric = AUROC()
    >>> metric.update([0, 1], [0.1, 0.35])
    >>> metric.update([0, 1], [0.4, 0.8])
    >>> metric.compute()
    0.75
    """

    owner = "AUROC"

    def __init__(self, *, average: str | None = "macro") -> None:
        self.average = _average(self.owner, average)
        super().__init__()

    def config(self) -> dict[str, Any]:
        return {"average": self.average}

    def _function(self) -> Callable[[np.ndarray, np.ndarray], Any]:
        return lambda y, s: classification.auroc(y, s, average=self.average)


class AveragePrecision(ClassificationMetric):
    """Streaming :func:`xrisk.metrics.average_precision` (scikit-learn's step-wise AP).

    Defined once a positive has been seen. Same parameters as :class:`AUROC`.

    Examples
    --------
    >>> from xrisk.metrics.streaming import AveragePrecision
    >>> metric = AveragePrecision()
    >>> metric.update([0, 0], [0.1, 0.4])
    >>> metric.update([1, 1], [0.35, 0.8])
    >>> round(metric.compute(), 4)
    0.8333
    """

    owner = "AveragePrecision"
    needs_negatives = False

    def __init__(self, *, average: str | None = "macro") -> None:
        self.average = _average(self.owner, average)
        super().__init__()

    def config(self) -> dict[str, Any]:
        return {"average": self.average}

    def _function(self) -> Callable[[np.ndarray, np.ndarray], Any]:
        return lambda y, s: classification.average_precision(y, s, average=self.average)


class OneWayPartialAUROC(ClassificationMetric):
    """Streaming :func:`xrisk.metrics.one_way_partial_auroc`: the ROC area over
    ``FPR <= max_fpr``.

    Parameters
    ----------
    max_fpr : float in (0, 1]
    scale : {"normalized", "raw", "mcclish"}, default "normalized"
        ``"normalized"``: raw / max_fpr; ``"mcclish"``: scikit-learn's
        ``roc_auc_score(max_fpr=...)``.
    average : {"macro", None}, default "macro"

    Examples
    --------
    >>> from xrisk.metrics.streaming import OneWayPartialAUROC
    >>> metric = OneWayPartialAUROC(max_fpr=0.25)
    >>> metric.update([0, 0, 0], [0.9, 0.2, 0.1])
    >>> metric.update([0, 1, 1], [0.3, 0.95, 0.5])
    >>> metric.compute()
    0.5
    """

    owner = "OneWayPartialAUROC"

    def __init__(self, *, max_fpr: float, scale: str = "normalized",
                 average: str | None = "macro") -> None:
        self.max_fpr = classification._check_max_fpr(self.owner, max_fpr)
        self.scale = check_choice(self.owner, "scale", scale, classification._SCALES_ONE_WAY)
        self.average = _average(self.owner, average)
        super().__init__()

    def config(self) -> dict[str, Any]:
        return {"max_fpr": self.max_fpr, "scale": self.scale, "average": self.average}

    def _function(self) -> Callable[[np.ndarray, np.ndarray], Any]:
        return lambda y, s: classification.one_way_partial_auroc(
            y, s, max_fpr=self.max_fpr, scale=self.scale, average=self.average)


class TwoWayPartialAUROC(ClassificationMetric):
    """Streaming :func:`xrisk.metrics.two_way_partial_auroc`: the ROC area in
    ``FPR <= max_fpr`` and ``TPR >= min_tpr``.

    Parameters
    ----------
    max_fpr : float in (0, 1]
    min_tpr : float in [0, 1)
    scale : {"normalized", "raw"}, default "normalized"
    average : {"macro", None}, default "macro"

    Examples
    --------
    >>> from xrisk.metrics.streaming import TwoWayPartialAUROC
    >>> metric = TwoWayPartialAUROC(max_fpr=0.5, min_tpr=0.5)
    >>> metric.update([0, 0, 0], [0.9, 0.2, 0.1])
    >>> metric.update([0, 1, 1], [0.3, 0.95, 0.5])
    >>> metric.compute()
    0.5
    """

    owner = "TwoWayPartialAUROC"

    def __init__(self, *, max_fpr: float, min_tpr: float, scale: str = "normalized",
                 average: str | None = "macro") -> None:
        self.max_fpr = classification._check_max_fpr(self.owner, max_fpr)
        self.min_tpr = float(check_interval(self.owner, "min_tpr", min_tpr, low=0.0, high=1.0,
                                            fix="pass e.g. min_tpr=0.5", type_error=ValueError))
        self.scale = check_choice(self.owner, "scale", scale, classification._SCALES_TWO_WAY)
        self.average = _average(self.owner, average)
        super().__init__()

    def config(self) -> dict[str, Any]:
        return {"max_fpr": self.max_fpr, "min_tpr": self.min_tpr, "scale": self.scale,
                "average": self.average}

    def _function(self) -> Callable[[np.ndarray, np.ndarray], Any]:
        return lambda y, s: classification.two_way_partial_auroc(
            y, s, max_fpr=self.max_fpr, min_tpr=self.min_tpr, scale=self.scale,
            average=self.average)


# --------------------------------------------------------------------------- ranking


class RankingMetric(StreamingMetric):
    """Per-query sums of a ranking metric: (sum of defined values, defined, undefined).

    Every ``update`` must hold whole queries: a query split over two updates counts as two
    queries. ``relevance`` and ``scores`` are (Q, M) rows (one query per row) or 1-D with
    ``query_ids``, as in :func:`xrisk.metrics.ndcg_at_k`.
    """

    def __init__(self, k: int, ties: str, no_relevant: str) -> None:
        self.k = ranking._check_k(self.owner, k)
        self.ties = check_choice(self.owner, "ties", ties, ranking._TIES)
        self.no_relevant = check_choice(self.owner, "no_relevant", no_relevant,
                                        ranking._NO_RELEVANT)
        self.reset()

    def reset(self) -> None:
        """Forget every batch."""
        self.total = 0.0
        self.num_defined = 0
        self.num_undefined = 0

    def _per_query(self, relevance: Any, scores: Any, query_ids: Any) -> np.ndarray:
        """The per-query values of the batch, NaN for a query without a relevant item."""
        raise NotImplementedError

    def sums(self, relevance: Any, scores: Any,
             query_ids: Any = None) -> tuple[float, int, int]:
        """Validate one batch; return (sum of defined values, defined, undefined).

        Raises ValueError (shapes, negative or non-finite relevance, NaN scores) naming the
        received and expected values and the fix.
        """
        values = self._per_query(relevance, scores, query_ids)
        defined = ~np.isnan(values)
        return float(np.sum(values[defined])), int(defined.sum()), int((~defined).sum())

    def update(self, relevance: Any, scores: Any, query_ids: Any = None) -> None:
        """Add the whole queries of a batch."""
        total, defined, undefined = self.sums(relevance, scores, query_ids)
        self.total += total
        self.num_defined += defined
        self.num_undefined += undefined

    def value(self, total: float, num_defined: int, num_undefined: int) -> float:
        """The mean over queries from the three sums, as the whole-array function's
        ``no_relevant`` rule makes it; raises when undefined."""
        queries = num_defined + num_undefined
        if queries == 0:
            raise ValueError(
                f"{self.owner}.compute: no query has been seen; expected at least one update. "
                "Fix: call update(relevance, scores) before compute()."
            )
        if self.no_relevant == "skip":
            if num_defined == 0:
                raise ValueError(
                    f"{self.owner}.compute: no query has a relevant item, so the metric is "
                    f"undefined for all {queries} queries; expected at least one relevance > 0. "
                    "Fix: evaluate on queries with relevant items, or pass no_relevant='zero'."
                )
            return total / num_defined
        fill = 1.0 if self.no_relevant == "one" else 0.0
        return (total + fill * num_undefined) / queries

    def undefined(self, num_defined: int, num_undefined: int) -> str | None:
        """Why the metric is undefined (None when it is defined)."""
        if num_defined + num_undefined == 0:
            return "no query has been seen"
        if self.no_relevant == "skip" and num_defined == 0:
            return "no query seen has a relevant item"
        return None

    def compute(self) -> float:
        """The mean over every query seen."""
        return self.value(self.total, self.num_defined, self.num_undefined)

    def merge(self, other: StreamingMetric) -> RankingMetric:
        """Add ``other``'s queries (in place); returns ``self``."""
        self.check_mergeable(other)
        theirs = cast(RankingMetric, other)
        self.total += theirs.total
        self.num_defined += theirs.num_defined
        self.num_undefined += theirs.num_undefined
        return self


def _check_ranking_shapes(owner: str, relevance: Any, scores: Any) -> None:
    rel, sco = np.shape(to_numpy(relevance)), np.shape(to_numpy(scores))
    if rel != sco:
        raise ValueError(
            f"{owner}: relevance has shape {rel} but scores have shape {sco}; expected the "
            "same shape. Fix: pass one score per candidate."
        )


class NDCGAtK(RankingMetric):
    """Streaming :func:`xrisk.metrics.ndcg_at_k`: the mean NDCG@k over queries.

    Parameters
    ----------
    k : int
        Cut-off rank (>= 1).
    gain : {"exponential", "linear"}, default "exponential"
        ``2**rel - 1`` (LibAUC) or ``rel`` (scikit-learn's ``ndcg_score``).
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"

    Examples
    --------
    >>> from xrisk.metrics.streaming import NDCGAtK
    >>> metric = NDCGAtK(k=3)
    >>> metric.update([[3, 0, 1]], [[0.2, 0.9, 0.1]])
    >>> metric.update([[0, 2, 0]], [[0.5, 0.7, 0.1]])   # a perfect ranking: 1
    >>> round(metric.compute(), 4)                      # (0.6443 + 1) / 2
    0.8221
    """

    owner = "NDCGAtK"

    def __init__(self, k: int, *, gain: str = "exponential", ties: str = "pessimistic",
                 no_relevant: str = "skip") -> None:
        self.gain = check_choice(self.owner, "gain", gain, ranking._GAINS)
        super().__init__(k, ties, no_relevant)

    def config(self) -> dict[str, Any]:
        return {"k": self.k, "gain": self.gain, "ties": self.ties,
                "no_relevant": self.no_relevant}

    def _per_query(self, relevance: Any, scores: Any, query_ids: Any) -> np.ndarray:
        owner = f"{self.owner}.update"
        _check_ranking_shapes(owner, relevance, scores)
        try:
            return np.asarray(ranking.ndcg_at_k(
                relevance, scores, self.k, query_ids=query_ids, gain=self.gain,
                ties=self.ties, no_relevant="skip", average=None))
        except ValueError as error:
            raise ValueError(str(error).replace("ndcg_at_k:", f"{owner}:", 1)) from None


class MAPAtK(RankingMetric):
    """Streaming :func:`xrisk.metrics.map_at_k`: the mean AP@k over queries.

    Parameters
    ----------
    k : int
        Cut-off rank (>= 1).
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"

    Examples
    --------
    >>> from xrisk.metrics.streaming import MAPAtK
    >>> metric = MAPAtK(k=4)
    >>> metric.update([[1, 0, 1, 0]], [[0.9, 0.8, 0.1, 0.2]])
    >>> metric.update([[0, 1, 0, 0]], [[0.9, 0.8, 0.1, 0.2]])
    >>> metric.compute()   # (0.75 + 0.5) / 2
    0.625
    """

    owner = "MAPAtK"

    def __init__(self, k: int, *, ties: str = "pessimistic", no_relevant: str = "skip") -> None:
        super().__init__(k, ties, no_relevant)

    def config(self) -> dict[str, Any]:
        return {"k": self.k, "ties": self.ties, "no_relevant": self.no_relevant}

    def _per_query(self, relevance: Any, scores: Any, query_ids: Any) -> np.ndarray:
        owner = f"{self.owner}.update"
        _check_ranking_shapes(owner, relevance, scores)
        try:
            return np.asarray(ranking.map_at_k(
                relevance, scores, self.k, query_ids=query_ids, ties=self.ties,
                no_relevant="skip", average=None))
        except ValueError as error:
            raise ValueError(str(error).replace("map_at_k:", f"{owner}:", 1)) from None
