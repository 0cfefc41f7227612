"""``keras.metrics.Metric`` versions of the streaming metrics (import
``xrisk.tensorflow.metrics``).

``AUROC``, ``AveragePrecision``, ``OneWayPartialAUROC``, ``TwoWayPartialAUROC``, ``NDCGAtK``
and ``MAPAtK`` work in ``model.compile(metrics=[...])`` under ``fit``/``evaluate``, eagerly
and inside ``tf.function``, with the Keras conventions ``update_state(y_true, y_pred)``,
``result()``, ``reset_state()``.

Exact state. A ROC or precision-recall curve depends on every score seen, and a histogram
(Keras' ``AUC``) is exact only when each distinct score has its own bin, which no fixed set
of thresholds guarantees for float scores. So the classification metrics keep the scores
(float64) and labels (int8) seen in **growable variables**: ``tf.Variable``\\ s of unknown
length (``shape=[None]``) that ``update_state`` replaces by their concatenation with the
batch. ``result`` applies the whole-array :mod:`xrisk.metrics` function to them through
``tf.numpy_function`` (a host call), so the value equals :func:`xrisk.metrics.auroc` (and
friends) of every batch, bit for bit. The ranking metrics keep three sums (per-query values,
defined queries, queries without a relevant item) in ordinary Keras variables.

Cost. Keras calls ``result()`` after every training step to show progress: each call sorts
every score seen in the epoch so far (O(N log N) on the host). For large training sets,
watch the metric on the validation data (``fit(validation_data=...)`` computes it once per
epoch) or use ``evaluate``.

Undefined values. ``result()`` is NaN while the metric is undefined (one class seen so far,
no query with a relevant item, no data), because Keras calls it mid-epoch; the whole-array
functions and the other adapters raise there instead.

Bad input (labels other than 0/1, non-finite scores, mismatched shapes, a ``sample_weight``)
raises before any variable changes: a ValueError eagerly, a ``tf.errors.InvalidArgumentError``
carrying the same message inside ``tf.function``.

Several replicas (``tf.distribute.MirroredStrategy``): each replica appends to its own copy
of the growable variables (on-read synchronisation); ``result()`` in the cross-replica
context (``evaluate``, the epoch logs of ``fit``, a call outside ``strategy.run``)
concatenates every replica's data; inside a replica it sees that replica's data. The ranking
sums add up across replicas.

Examples
--------
>>> import numpy as np
>>> from xrisk.tensorflow.metrics import AUROC
>>> metric = AUROC()
>>> metric.update_state(np.array([0, 1]), np.array([0.1, 0.35]))
>>> metric.update_state(np.array([0, 1]), np.array([0.4, 0.8]))
>>> float(metric.result())
0.75
"""

from __future__ import annotations

import re
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from xrisk.metrics import streaming

__all__ = ["AUROC", "AveragePrecision", "OneWayPartialAUROC", "TwoWayPartialAUROC",
           "NDCGAtK", "MAPAtK"]


def _no_sample_weight(owner: str, sample_weight: Any) -> None:
    if sample_weight is not None:
        raise ValueError(
            f"{owner}.update_state: received sample_weight of type "
            f"{type(sample_weight).__name__}; expected None (the metric equals the unweighted "
            "whole-array function). Fix: drop sample_weight, or select the samples to count."
        )


def _replica_values(variable: Any) -> list[Any]:
    """Every replica's value of an on-read variable outside the replicas (``evaluate``, the
    epoch logs, eager code after ``strategy.run``); this replica's value inside one."""
    replica = tf.distribute.get_replica_context()
    inside_a_replica = replica is not None and replica.num_replicas_in_sync > 1
    parts = getattr(variable, "values", None)  # a distributed variable's copies
    if inside_a_replica or not isinstance(parts, tuple):
        return [tf.convert_to_tensor(variable)]
    return [tf.convert_to_tensor(part) for part in parts]


class _Classification(keras.metrics.Metric):
    core: streaming.ClassificationMetric

    def __init__(self, core: streaming.ClassificationMetric, num_labels: int | None,
                 name: str | None, **kwargs: Any) -> None:
        from xrisk.adapter_api import check_count

        snake = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", core.owner).lower()  # one_way_partial_auroc
        kwargs.pop("dtype", None)  # from get_config: the values are float64 whatever it says
        super().__init__(name=name or snake, dtype="float64", **kwargs)
        self.core = core
        self.num_labels = None if num_labels is None else check_count(
            core.owner, "num_labels", num_labels, fix="pass None for (N,) labels")
        row = [] if num_labels is None else [self.num_labels]
        on_read = {"synchronization": tf.VariableSynchronization.ON_READ,
                   "aggregation": tf.VariableAggregation.NONE, "trainable": False}
        self._row = row
        self.seen_scores = tf.Variable(tf.zeros([0, *row], tf.float64),
                                       shape=tf.TensorShape([None, *row]),
                                       name="seen_scores", **on_read)
        self.seen_labels = tf.Variable(tf.zeros([0, *row], tf.int8),
                                       shape=tf.TensorShape([None, *row]),
                                       name="seen_labels", **on_read)

    def _checked(self, y_true: Any, y_pred: Any) -> tuple[Any, Any]:
        columns = 0 if self.num_labels is None else self.num_labels
        if tf.executing_eagerly():
            labels, scores = self.core.check(np.asarray(y_true), np.asarray(y_pred), columns)
            return tf.constant(labels), tf.constant(scores)

        def check(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return self.core.check(y, s, columns)

        labels, scores = tf.numpy_function(check, [y_true, y_pred], [tf.int8, tf.float64],
                                           stateful=False)
        labels.set_shape([None, *self._row])
        scores.set_shape([None, *self._row])
        return labels, scores

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Append a batch: labels ``y_true`` in {0, 1} and scores ``y_pred``, shape (B,),
        (B, 1) or (B, num_labels)."""
        _no_sample_weight(self.core.owner, sample_weight)
        labels, scores = self._checked(y_true, y_pred)
        self.seen_labels.assign(tf.concat([self.seen_labels, labels], 0))
        self.seen_scores.assign(tf.concat([self.seen_scores, scores], 0))

    def result(self) -> Any:
        """The whole-array metric of every batch seen (NaN while undefined)."""
        shape = [self.num_labels] if self.num_labels and self.core.config().get(
            "average", "macro") is None else []

        def value(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
            if self.core.undefined(labels) is not None:
                return np.full(shape, np.nan)
            return np.asarray(self.core.value(labels, scores), np.float64)

        seen = [tf.concat(_replica_values(v), 0) for v in (self.seen_labels, self.seen_scores)]
        out = tf.numpy_function(value, seen, tf.float64, stateful=False)
        out.set_shape(shape)
        return out

    def reset_state(self) -> None:
        """Forget every batch (every replica's)."""
        for variable in (self.seen_labels, self.seen_scores):
            parts = getattr(variable, "values", None)  # a distributed variable's copies
            for part in parts if isinstance(parts, tuple) else (variable,):
                part.assign(tf.zeros([0, *self._row], variable.dtype))

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.core.config(), "num_labels": self.num_labels}


@keras.saving.register_keras_serializable(package="xrisk")
class AUROC(_Classification):
    """Streaming AUROC, :func:`xrisk.metrics.auroc` of every batch seen.

    Parameters
    ----------
    num_labels : int, optional
        T for (B, T) multi-label batches; None for (B,) or (B, 1).
    average : {"macro", None}, default "macro"
    name : str, optional
        The metric's name in Keras logs (default ``"auroc"``).

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.tensorflow.metrics import AUROC
    >>> metric = AUROC()
    >>> metric.update_state(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> float(metric.result())
    0.75
    """

    def __init__(self, *, num_labels: int | None = None, average: str | None = "macro",
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(streaming.AUROC(average=average), num_labels, name, **kwargs)


@keras.saving.register_keras_serializable(package="xrisk")
class AveragePrecision(_Classification):
    """Streaming average precision, :func:`xrisk.metrics.average_precision`.

    Same parameters as :class:`AUROC` (default name ``"average_precision"``).

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.tensorflow.metrics import AveragePrecision
    >>> metric = AveragePrecision()
    >>> metric.update_state(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    >>> round(float(metric.result()), 4)
    0.8333
    """

    def __init__(self, *, num_labels: int | None = None, average: str | None = "macro",
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(streaming.AveragePrecision(average=average), num_labels, name,
                         **kwargs)


@keras.saving.register_keras_serializable(package="xrisk")
class OneWayPartialAUROC(_Classification):
    """Streaming one-way partial AUROC, :func:`xrisk.metrics.one_way_partial_auroc`.

    Parameters
    ----------
    max_fpr : float in (0, 1]
    scale : {"normalized", "raw", "mcclish"}, default "normalized"
    num_labels : int, optional
    average : {"macro", None}, default "macro"
    name : str, optional

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.tensorflow.metrics import OneWayPartialAUROC
    >>> metric = OneWayPartialAUROC(max_fpr=0.25)
    >>> metric.update_state(np.array([0, 0, 0, 0, 1, 1]),
    ...                     np.array([0.9, 0.2, 0.1, 0.3, 0.95, 0.5]))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, *, max_fpr: float, scale: str = "normalized",
                 num_labels: int | None = None, average: str | None = "macro",
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(streaming.OneWayPartialAUROC(max_fpr=max_fpr, scale=scale,
                                                      average=average),
                         num_labels, name, **kwargs)


@keras.saving.register_keras_serializable(package="xrisk")
class TwoWayPartialAUROC(_Classification):
    """Streaming two-way partial AUROC, :func:`xrisk.metrics.two_way_partial_auroc`.

    Parameters
    ----------
    max_fpr : float in (0, 1]
    min_tpr : float in [0, 1)
    scale : {"normalized", "raw"}, default "normalized"
    num_labels : int, optional
    average : {"macro", None}, default "macro"
    name : str, optional

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.tensorflow.metrics import TwoWayPartialAUROC
    >>> metric = TwoWayPartialAUROC(max_fpr=0.5, min_tpr=0.5)
    >>> metric.update_state(np.array([0, 0, 0, 0, 1, 1]),
    ...                     np.array([0.9, 0.2, 0.1, 0.3, 0.95, 0.5]))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, *, max_fpr: float, min_tpr: float, scale: str = "normalized",
                 num_labels: int | None = None, average: str | None = "macro",
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(streaming.TwoWayPartialAUROC(
            max_fpr=max_fpr, min_tpr=min_tpr, scale=scale, average=average),
            num_labels, name, **kwargs)


class _Ranking(keras.metrics.Metric):
    core: streaming.RankingMetric

    def __init__(self, core: streaming.RankingMetric, name: str | None,
                 **kwargs: Any) -> None:
        kwargs.pop("dtype", None)  # from get_config: the values are float64 whatever it says
        super().__init__(name=name or f"{core.owner.lower()[:-3]}@{core.k}", dtype="float64",
                         **kwargs)
        self.core = core
        self.total = self.add_variable(shape=(), initializer="zeros", dtype="float64",
                                       aggregation="sum", name="total")
        self.num_defined = self.add_variable(shape=(), initializer="zeros", dtype="float64",
                                             aggregation="sum", name="num_defined")
        self.num_undefined = self.add_variable(shape=(), initializer="zeros", dtype="float64",
                                               aggregation="sum", name="num_undefined")

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        """Add whole queries: relevance ``y_true`` and scores ``y_pred``, shape (Q, M), one
        query per row."""
        _no_sample_weight(self.core.owner, sample_weight)
        if tf.executing_eagerly():
            sums = [tf.constant(v, tf.float64)
                    for v in self.core.sums(np.asarray(y_true), np.asarray(y_pred))]
        else:
            def host_sums(relevance: np.ndarray, scores: np.ndarray) -> list[np.ndarray]:
                return [np.asarray(v, np.float64) for v in self.core.sums(relevance, scores)]

            sums = tf.numpy_function(host_sums, [y_true, y_pred], [tf.float64] * 3,
                                     stateful=False)
        for variable, value in zip((self.total, self.num_defined, self.num_undefined), sums,
                                   strict=True):
            variable.assign_add(tf.reshape(value, []))

    def result(self) -> Any:
        """The mean over every query seen (NaN while undefined)."""
        def value(total: np.ndarray, defined: np.ndarray, undefined: np.ndarray) -> np.ndarray:
            if self.core.undefined(int(defined), int(undefined)) is not None:
                return np.asarray(np.nan)
            return np.asarray(self.core.value(float(total), int(defined), int(undefined)))

        sums = [tf.add_n(_replica_values(v.value))
                for v in (self.total, self.num_defined, self.num_undefined)]
        out = tf.numpy_function(value, sums, tf.float64, stateful=False)
        out.set_shape([])
        return out

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.core.config()}


@keras.saving.register_keras_serializable(package="xrisk")
class NDCGAtK(_Ranking):
    """Streaming NDCG@k, :func:`xrisk.metrics.ndcg_at_k` averaged over every query seen.

    Parameters
    ----------
    k : int
    gain : {"exponential", "linear"}, default "exponential"
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"
    name : str, optional
        Default ``"ndcg@k"``.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.tensorflow.metrics import NDCGAtK
    >>> metric = NDCGAtK(k=3)
    >>> metric.update_state(np.array([[3, 0, 1]]), np.array([[0.2, 0.9, 0.1]]))
    >>> round(float(metric.result()), 4)
    0.6443
    """

    def __init__(self, k: int, *, gain: str = "exponential", ties: str = "pessimistic",
                 no_relevant: str = "skip", name: str | None = None, **kwargs: Any) -> None:
        super().__init__(streaming.NDCGAtK(k, gain=gain, ties=ties, no_relevant=no_relevant),
                         name, **kwargs)


@keras.saving.register_keras_serializable(package="xrisk")
class MAPAtK(_Ranking):
    """Streaming MAP@k, :func:`xrisk.metrics.map_at_k` averaged over every query seen.

    Parameters
    ----------
    k : int
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"
    name : str, optional
        Default ``"map@k"``.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.tensorflow.metrics import MAPAtK
    >>> metric = MAPAtK(k=4)
    >>> metric.update_state(np.array([[1, 0, 1, 0]]), np.array([[0.9, 0.8, 0.1, 0.2]]))
    >>> float(metric.result())
    0.75
    """

    def __init__(self, k: int, *, ties: str = "pessimistic", no_relevant: str = "skip",
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(streaming.MAPAtK(k, ties=ties, no_relevant=no_relevant), name,
                         **kwargs)
