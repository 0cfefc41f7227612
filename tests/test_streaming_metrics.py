"""Streaming metrics equal the whole-array functions over any split of the data into batches.

For the core (``xrisk.metrics.streaming``), torchmetrics (``xrisk.torch.metrics``), Keras
(``xrisk.tensorflow.metrics``) and JAX (``xrisk.jax.metrics``, eager and under ``jit``):
hypothesis draws the data (ties included), the metric's options and the batch boundaries;
streaming over the batches equals :mod:`xrisk.metrics` on the whole arrays (classification:
bit for bit; ranking: to float64 rounding of the sum) and scikit-learn where it has the
metric; merge equals concatenation; reset forgets; a bad batch raises a message with the
received value, the expected one and the fix, and leaves the state unchanged. Synchronisation
across 2 ranks runs in child processes (tests/test_streaming_metrics.py itself is the worker):
torch on gloo, JAX on 2 host devices in ``shard_map``, TensorFlow with a ``MirroredStrategy``
over 2 logical CPUs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xrisk import metrics as whole
from xrisk.metrics import streaming

ROOT = Path(__file__).resolve().parent.parent
RANKING_TOLERANCE = 1e-12

# -- drawn data ------------------------------------------------------------------------------


@st.composite
def classification_data(draw: Any, max_size: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Labels with both classes and scores with drawn ties (a few distinct values or not)."""
    size = draw(st.integers(2, max_size))
    labels = np.array(draw(st.lists(st.integers(0, 1), min_size=size, max_size=size)))
    labels[draw(st.integers(0, size - 1))] = 1
    if labels.min() == 1:
        labels[0] = 0
    if labels.max() == 0:
        labels[-1] = 1
    tied = draw(st.booleans())
    values = st.sampled_from([0.1, 0.25, 0.5, 0.75]) if tied else st.floats(0, 1, width=32)
    scores = np.array(draw(st.lists(values, min_size=size, max_size=size)), dtype=np.float32)
    return labels, scores


@st.composite
def splits(draw: Any, size: int) -> list[slice]:
    """Batch boundaries over ``size`` rows (batches of at least one row)."""
    cuts = sorted(draw(st.sets(st.integers(1, size - 1), max_size=min(size - 1, 5))))
    bounds = [0, *cuts, size]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@st.composite
def classification_options(draw: Any) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(["AUROC", "AveragePrecision", "OneWayPartialAUROC",
                                 "TwoWayPartialAUROC"]))
    options: dict[str, Any] = {}
    beta = draw(st.sampled_from([0.1, 0.3, 0.5, 1.0]))
    if kind == "OneWayPartialAUROC":
        options = {"max_fpr": beta, "scale": draw(st.sampled_from(["normalized", "raw",
                                                                    "mcclish"]))}
    if kind == "TwoWayPartialAUROC":
        options = {"max_fpr": beta, "min_tpr": draw(st.sampled_from([0.0, 0.3, 0.5])),
                   "scale": draw(st.sampled_from(["normalized", "raw"]))}
    return kind, options


@st.composite
def ranking_data(draw: Any) -> tuple[np.ndarray, np.ndarray]:
    """(Q, M) graded relevance in {0..3} (a query may have none) and scores with ties."""
    queries, items = draw(st.integers(2, 8)), draw(st.integers(1, 6))
    relevance = np.array(draw(st.lists(st.integers(0, 3), min_size=queries * items,
                                       max_size=queries * items))).reshape(queries, items)
    relevance[0, 0] = max(relevance[0, 0], 1)  # the metric is defined
    tied = draw(st.booleans())
    values = st.sampled_from([0.0, 0.5, 1.0]) if tied else st.floats(-3, 3, width=32)
    scores = np.array(draw(st.lists(values, min_size=queries * items,
                                    max_size=queries * items))).reshape(queries, items)
    return relevance, scores


@st.composite
def ranking_options(draw: Any) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(["NDCGAtK", "MAPAtK"]))
    options = {"k": draw(st.integers(1, 7)), "ties": draw(st.sampled_from(["pessimistic",
                                                                           "optimistic"])),
               "no_relevant": draw(st.sampled_from(["skip", "zero", "one"]))}
    if kind == "NDCGAtK":
        options["gain"] = draw(st.sampled_from(["exponential", "linear"]))
    return kind, options


def whole_value(kind: str, options: dict[str, Any], y: np.ndarray, s: np.ndarray,
                query_ids: Any = None) -> float:
    """The whole-array function the streaming metric ``kind`` stands for."""
    if kind == "AUROC":
        return whole.auroc(y, s)
    if kind == "AveragePrecision":
        return whole.average_precision(y, s)
    if kind == "OneWayPartialAUROC":
        return whole.one_way_partial_auroc(y, s, **options)
    if kind == "TwoWayPartialAUROC":
        return whole.two_way_partial_auroc(y, s, **options)
    ranking = dict(options)
    k = ranking.pop("k")
    function = whole.ndcg_at_k if kind == "NDCGAtK" else whole.map_at_k
    return function(y, s, k, query_ids=query_ids, **ranking)


def sklearn_value(kind: str, options: dict[str, Any], y: np.ndarray,
                  s: np.ndarray) -> float | None:
    """scikit-learn's value of the same metric where it has it (None where it has not)."""
    from sklearn.metrics import average_precision_score, ndcg_score, roc_auc_score

    if kind == "AUROC":
        return float(roc_auc_score(y, s))
    if kind == "AveragePrecision":
        return float(average_precision_score(y, s))
    if kind == "OneWayPartialAUROC" and options["scale"] == "mcclish":
        # roc_auc_score(max_fpr=beta) is McClish-standardised; at beta = 1 it is the AUROC.
        beta = options["max_fpr"]
        return float(roc_auc_score(y, s, max_fpr=beta if beta < 1 else None))
    if kind == "OneWayPartialAUROC" and options["max_fpr"] == 1.0:
        return float(roc_auc_score(y, s))  # raw and normalised: the whole area
    if (kind == "NDCGAtK" and options["gain"] == "linear" and (y > 0).any(axis=1).all()
            and all(np.unique(row).size == row.size for row in s)):
        # Without ties and with a relevant item per query: scikit-learn's ndcg_score.
        return float(ndcg_score(y, s, k=options["k"]))
    return None


def assert_ranking_close(got: float, want: float) -> None:
    assert abs(got - want) <= RANKING_TOLERANCE * max(1.0, abs(want)), (got, want)


# -- core ------------------------------------------------------------------------------------


@given(data=st.data())
def test_core_classification_over_any_batches_equals_the_whole_array_function(data):
    y, s = data.draw(classification_data())
    kind, options = data.draw(classification_options())
    metric = getattr(streaming, kind)(**options)
    for part in data.draw(splits(y.size)):
        metric.update(y[part], s[part])
    value = metric.compute()
    assert value == whole_value(kind, options, y, s)  # bit for bit
    reference = sklearn_value(kind, options, y, s.astype(np.float64))
    if reference is not None:
        assert value == pytest.approx(reference, rel=1e-12, abs=1e-12)


@given(data=st.data())
def test_core_ranking_over_any_batches_equals_the_whole_array_function(data):
    rel, s = data.draw(ranking_data())
    kind, options = data.draw(ranking_options())
    metric = getattr(streaming, kind)(**options)
    flat = data.draw(st.booleans())  # rows, or flat arrays with query ids
    for part in data.draw(splits(rel.shape[0])):
        if flat:
            ids = np.repeat(np.arange(rel.shape[0])[part], rel.shape[1])
            metric.update(rel[part].ravel(), s[part].ravel(), query_ids=ids)
        else:
            metric.update(rel[part], s[part])
    value = metric.compute()
    assert_ranking_close(value, whole_value(kind, options, rel, s))
    reference = sklearn_value(kind, options, rel, s)
    if reference is not None:
        assert_ranking_close(value, reference)


@given(data=st.data())
def test_core_merge_equals_concatenation_and_reset_forgets(data):
    y, s = data.draw(classification_data())
    kind, options = data.draw(classification_options())
    cut = data.draw(st.integers(1, y.size - 1))
    first, second = (getattr(streaming, kind)(**options) for _ in range(2))
    first.update(y[:cut], s[:cut])
    second.update(y[cut:], s[cut:])
    assert first.merge(second).compute() == whole_value(kind, options, y, s)
    first.reset()
    with pytest.raises(ValueError, match="no sample has been seen"):
        first.compute()
    first.update(y[::-1], s[::-1])
    assert first.compute() == whole_value(kind, options, y[::-1], s[::-1])

    rel, scores = data.draw(ranking_data())
    kind, options = data.draw(ranking_options())
    cut = data.draw(st.integers(1, rel.shape[0] - 1))
    first, second = (getattr(streaming, kind)(**options) for _ in range(2))
    first.update(rel[:cut], scores[:cut])
    second.update(rel[cut:], scores[cut:])
    assert_ranking_close(first.merge(second).compute(), whole_value(kind, options, rel, scores))
    first.reset()
    with pytest.raises(ValueError, match="no query has been seen"):
        first.compute()


def test_core_merge_refuses_another_metric_or_other_options():
    a, b = streaming.OneWayPartialAUROC(max_fpr=0.3), streaming.OneWayPartialAUROC(max_fpr=0.5)
    with pytest.raises(ValueError, match=r"max_fpr.*expected.*Fix"):
        a.merge(b)
    with pytest.raises(TypeError, match=r"received a AUROC.*Fix"):
        a.merge(streaming.AUROC())
    with pytest.raises(ValueError, match=r"NDCGAtK.*k=0.*Fix"):
        streaming.NDCGAtK(k=0)


def test_core_multilabel_streams_the_macro_average():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, size=(20, 3))
    y[0], y[1] = 1, 0
    s = rng.normal(size=(20, 3))
    metric = streaming.AUROC()
    metric.update(y[:7], s[:7])
    metric.update(y[7:], s[7:])
    assert metric.compute() == whole.auroc(y, s)
    with pytest.raises(ValueError, match=r"shape \(2,\).*expected \(B, 3\).*Fix"):
        metric.update(y[:2, 0], s[:2, 0])


def test_multilabel_batches_in_every_framework_equal_the_macro_and_per_label_values():
    import jax
    import jax.numpy as jnp
    import tensorflow as tf
    import torch

    from xrisk.jax import metrics as jax_metrics
    from xrisk.tensorflow import metrics as keras_metrics
    from xrisk.torch import metrics as torch_metrics

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=(18, 3))
    y[0], y[1] = 1, 0
    y[:, 2] = 0  # the third label has no positive: NaN per label, left out of the mean
    s = np.round(rng.uniform(size=(18, 3)), 1)
    parts = (slice(0, 5), slice(5, 18))
    for average in ("macro", None):
        want = whole.average_precision(y, s, average=average)
        torch_metric = torch_metrics.AveragePrecision(average=average)
        keras_metric = keras_metrics.AveragePrecision(num_labels=3, average=average)
        keras_update = tf.function(keras_metric.update_state)
        jax_metric = jax_metrics.AveragePrecision(capacity=18, num_labels=3, average=average)
        state = jax_metric.init()
        for part in parts:
            torch_metric.update(torch.as_tensor(s[part]), torch.as_tensor(y[part]))
            keras_update(tf.constant(y[part]), tf.constant(s[part]))
            state = jax.jit(jax_metric.update)(state, jnp.asarray(y[part]), jnp.asarray(s[part]))
        for got in (torch_metric.compute().numpy(), keras_metric.result().numpy(),
                    jax_metric.compute(state), np.asarray(jax.jit(jax_metric.compute)(state))):
            np.testing.assert_array_equal(got, want)


#: (batch kind, bad batch, expected message): labels not 0/1, shape mismatch, NaN scores.
BAD_CLASSIFICATION = [
    ((np.array([0, 2]), np.array([0.1, 0.2])), r"contains \[2\]; expected binary.*Fix"),
    ((np.array([0, 1, 1]), np.array([0.1, 0.2])),
     r"y_score has shape \(2,\) but y_true has shape \(3,\).*Fix"),
    ((np.array([0, 1]), np.array([0.1, np.nan])), r"non-finite.*expected finite.*Fix"),
]
BAD_RANKING = [
    ((np.array([[1, -1]]), np.array([[0.1, 0.2]])), r"relevance contains.*expected.*Fix"),
    ((np.array([[1, 0, 0]]), np.array([[0.1, 0.2]])), r"shape \(1, 3\).*\(1, 2\).*Fix"),
]


@pytest.mark.parametrize("kind", ["AUROC", "AveragePrecision", "OneWayPartialAUROC",
                                  "TwoWayPartialAUROC"])
@pytest.mark.parametrize(("batch", "message"), BAD_CLASSIFICATION)
def test_core_bad_classification_batch_raises_and_changes_nothing(kind, batch, message):
    options = {"OneWayPartialAUROC": {"max_fpr": 0.5},
               "TwoWayPartialAUROC": {"max_fpr": 0.5, "min_tpr": 0.2}}.get(kind, {})
    metric = getattr(streaming, kind)(**options)
    y, s = np.array([0, 1, 0, 1]), np.array([0.3, 0.6, 0.2, 0.1])
    metric.update(y, s)
    before = metric.compute()
    with pytest.raises(ValueError, match=message):
        metric.update(*batch)
    assert metric.compute() == before
    assert metric.arrays()[0].size == 4


@pytest.mark.parametrize("kind", ["NDCGAtK", "MAPAtK"])
@pytest.mark.parametrize(("batch", "message"), BAD_RANKING)
def test_core_bad_ranking_batch_raises_and_changes_nothing(kind, batch, message):
    metric = getattr(streaming, kind)(k=2)
    metric.update(np.array([[1, 0, 2]]), np.array([[0.3, 0.6, 0.2]]))
    before = (metric.total, metric.num_defined, metric.num_undefined)
    with pytest.raises(ValueError, match=message):
        metric.update(*batch)
    assert (metric.total, metric.num_defined, metric.num_undefined) == before


# -- torch -----------------------------------------------------------------------------------


def _torch_metric(kind: str, options: dict[str, Any]) -> Any:
    pytest.importorskip("torchmetrics")
    from xrisk.torch import metrics as torch_metrics

    return getattr(torch_metrics, kind)(**options)


@given(data=st.data())
def test_torch_metrics_equal_the_whole_array_functions(data):
    import torch

    y, s = data.draw(classification_data())
    kind, options = data.draw(classification_options())
    metric = _torch_metric(kind, options)
    parts = data.draw(splits(y.size))
    for part in parts:
        metric.update(torch.as_tensor(s[part]), torch.as_tensor(y[part]))
    assert float(metric.compute()) == whole_value(kind, options, y, s)
    other = _torch_metric(kind, options)
    other.update(torch.as_tensor(s), torch.as_tensor(y))
    metric.merge(other)  # the data twice: the same ROC curve
    assert float(metric.compute()) == whole_value(kind, options, np.tile(y, 2), np.tile(s, 2))
    metric.reset()
    assert metric.labels == []

    rel, scores = data.draw(ranking_data())
    kind, options = data.draw(ranking_options())
    metric = _torch_metric(kind, options)
    for part in data.draw(splits(rel.shape[0])):
        metric.update(torch.as_tensor(scores[part]), torch.as_tensor(rel[part]))
    assert_ranking_close(float(metric.compute()), whole_value(kind, options, rel, scores))


def test_torch_bad_batch_raises_and_changes_nothing():
    import torch

    metric = _torch_metric("AUROC", {})
    metric.update(torch.tensor([0.3, 0.6]), torch.tensor([0, 1]))
    for (y, s), message in BAD_CLASSIFICATION:
        with pytest.raises(ValueError, match=message):
            metric.update(torch.as_tensor(s), torch.as_tensor(y))
    assert len(metric.labels) == 1 and float(metric.compute()) == 1.0
    ranking = _torch_metric("NDCGAtK", {"k": 2})
    ranking.update(torch.tensor([[0.3, 0.6]]), torch.tensor([[1, 0]]))
    for (rel, s), message in BAD_RANKING:
        with pytest.raises(ValueError, match=message):
            ranking.update(torch.as_tensor(s), torch.as_tensor(rel))
    assert float(ranking.num_defined) == 1.0 and float(ranking.compute()) == whole.ndcg_at_k(
        [[1, 0]], [[0.3, 0.6]], 2)
    with pytest.raises(TypeError, match="expected another AUROC"):
        metric.merge(ranking)


def test_torch_forward_of_an_undefined_batch_is_nan_and_keeps_the_state():
    import torch

    metric = _torch_metric("AUROC", {})
    assert float(metric(torch.tensor([0.2, 0.7]), torch.tensor([0, 1]))) == 1.0
    assert np.isnan(float(metric(torch.tensor([0.9, 0.1]), torch.tensor([1, 1]))))
    assert float(metric.compute()) == whole.auroc([0, 1, 1, 1], [0.2, 0.7, 0.9, 0.1])
    ranking = _torch_metric("NDCGAtK", {"k": 2})
    ranking(torch.tensor([[0.3, 0.6]]), torch.tensor([[1, 0]]))
    assert np.isnan(float(ranking(torch.tensor([[0.3, 0.6]]), torch.tensor([[0, 0]]))))
    assert float(ranking.compute()) == whole.ndcg_at_k([[1, 0], [0, 0]], [[0.3, 0.6]] * 2, 2)
    metric.reset()
    with pytest.raises(ValueError, match="no sample has been seen"):
        metric.compute()  # compute itself raises where the whole-array function does


# -- Keras -----------------------------------------------------------------------------------


def _tf_update(metric: Any) -> Any:
    """``metric.update_state`` in a tf.function traced once for any batch length."""
    import tensorflow as tf

    return tf.function(metric.update_state, reduce_retracing=True)


@given(data=st.data())
def test_keras_metrics_in_tf_function_equal_the_whole_array_functions(data):
    import tensorflow as tf

    from xrisk.tensorflow import metrics as keras_metrics

    y, s = data.draw(classification_data())
    kind, options = data.draw(classification_options())
    metric = getattr(keras_metrics, kind)(**options)
    update = _tf_update(metric)
    for part in data.draw(splits(y.size)):
        update(tf.constant(y[part]), tf.constant(s[part]))
    assert float(metric.result()) == whole_value(kind, options, y, s)
    assert float(tf.function(metric.result)()) == whole_value(kind, options, y, s)
    metric.reset_state()
    assert np.isnan(float(metric.result()))  # nothing seen: NaN, Keras calls it mid-epoch
    metric.update_state(y[::-1], s[::-1])  # eagerly
    assert float(metric.result()) == whole_value(kind, options, y[::-1], s[::-1])

    rel, scores = data.draw(ranking_data())
    kind, options = data.draw(ranking_options())
    metric = getattr(keras_metrics, kind)(**options)
    update = _tf_update(metric)
    for part in data.draw(splits(rel.shape[0])):
        update(tf.constant(rel[part]), tf.constant(scores[part]))
    assert_ranking_close(float(metric.result()), whole_value(kind, options, rel, scores))


def test_keras_metrics_round_trip_through_their_config():
    from xrisk.tensorflow import metrics as keras_metrics

    for kind, options in SYNC_METRICS:
        metric = getattr(keras_metrics, kind)(**options, name=f"my_{kind}")
        again = type(metric).from_config(metric.get_config())
        assert again.get_config() == metric.get_config() and again.name == f"my_{kind}"


def test_keras_metrics_in_fit_and_evaluate_equal_the_whole_array_functions(tmp_path):
    import keras

    from xrisk.tensorflow import metrics as keras_metrics

    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 3)).astype("float32")
    y = (x[:, 0] + rng.normal(size=50) > 0).astype("float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="sgd", loss="binary_crossentropy",
                  metrics=[keras_metrics.AUROC(), keras_metrics.AveragePrecision(),
                           keras_metrics.OneWayPartialAUROC(max_fpr=0.3, scale="mcclish"),
                           keras_metrics.TwoWayPartialAUROC(max_fpr=0.5, min_tpr=0.5)])
    history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert np.isfinite(history.history["auroc"]).all()
    got = model.evaluate(x, y, batch_size=12, verbose=0, return_dict=True)
    p = model.predict(x, verbose=0)
    assert got["auroc"] == whole.auroc(y, p[:, 0])
    assert got["average_precision"] == whole.average_precision(y, p[:, 0])
    assert got["one_way_partial_auroc"] == whole.one_way_partial_auroc(
        y, p[:, 0], max_fpr=0.3, scale="mcclish")
    assert got["two_way_partial_auroc"] == whole.two_way_partial_auroc(
        y, p[:, 0], max_fpr=0.5, min_tpr=0.5)
    model.save(tmp_path / "model.keras")  # the metrics are registered Keras objects
    loaded = keras.models.load_model(tmp_path / "model.keras")
    again = loaded.evaluate(x, y, batch_size=25, verbose=0, return_dict=True)
    assert {k: v for k, v in again.items() if k != "loss"} == {
        k: v for k, v in got.items() if k != "loss"}


def test_keras_bad_batch_raises_and_changes_nothing():
    import tensorflow as tf

    from xrisk.tensorflow import metrics as keras_metrics

    metric = keras_metrics.AUROC()
    metric.update_state(np.array([0, 1]), np.array([0.3, 0.6]))
    update = _tf_update(metric)
    for (y, s), message in BAD_CLASSIFICATION:
        with pytest.raises(ValueError, match=message):
            metric.update_state(y, s)
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            update(tf.constant(y), tf.constant(s))
    with pytest.raises(ValueError, match="sample_weight.*expected None.*Fix"):
        metric.update_state(np.array([0, 1]), np.array([0.3, 0.6]), sample_weight=[1, 1])
    assert metric.seen_labels.numpy().shape == (2,) and float(metric.result()) == 1.0
    ranking = keras_metrics.MAPAtK(k=2)
    ranking.update_state(np.array([[1, 0]]), np.array([[0.3, 0.6]]))
    for (rel, s), message in BAD_RANKING:
        with pytest.raises(ValueError, match=message):
            ranking.update_state(rel, s)
    assert float(ranking.num_defined) == 1.0 and float(ranking.result()) == 0.5


# -- JAX -------------------------------------------------------------------------------------


@given(data=st.data())
def test_jax_metrics_under_jit_equal_the_whole_array_functions(data):
    import jax
    import jax.numpy as jnp

    from xrisk.jax import metrics as jax_metrics

    y, s = data.draw(classification_data(max_size=12))
    kind, options = data.draw(classification_options())
    metric = getattr(jax_metrics, kind)(capacity=12, **options)
    state = metric.init()
    update = jax.jit(metric.update)
    for part in data.draw(splits(y.size)):
        state = update(state, jnp.asarray(y[part]), jnp.asarray(s[part]))
    want = whole_value(kind, options, y, s)
    assert metric.compute(state) == want
    assert float(jax.jit(metric.compute)(state)) == want
    merged = metric.merge(state, metric.update(metric.init(), jnp.asarray(y), jnp.asarray(s)))
    assert merged.scores.shape == (24,)
    assert metric.compute(merged) == whole_value(kind, options, np.tile(y, 2), np.tile(s, 2))

    rel, scores = data.draw(ranking_data())
    kind, options = data.draw(ranking_options())
    ranking = getattr(jax_metrics, kind)(**options)
    state = ranking.init()
    for part in data.draw(splits(rel.shape[0])):
        state = jax.jit(ranking.update)(state, jnp.asarray(rel[part]), jnp.asarray(scores[part]))
    assert_ranking_close(ranking.compute(state), whole_value(kind, options, rel, scores))


def test_jax_bad_input_raises_on_the_host_and_is_nan_under_jit():
    import jax
    import jax.numpy as jnp

    from xrisk.jax import metrics as jax_metrics

    metric = jax_metrics.AUROC(capacity=4)
    state = metric.update(metric.init(), jnp.array([0, 1]), jnp.array([0.3, 0.6]))
    for (y, s), message in BAD_CLASSIFICATION:
        with pytest.raises(ValueError, match=message):
            metric.update(state, jnp.asarray(y), jnp.asarray(s))
    with pytest.raises(ValueError, match=r"5 samples seen; expected at most capacity=4.*Fix"):
        metric.update(state, jnp.zeros(3, int), jnp.zeros(3))
    update = jax.jit(metric.update)
    overflowed = update(state, jnp.array([0, 1, 1]), jnp.array([0.1, 0.2, 0.3]))
    assert np.isnan(jax.jit(metric.compute)(overflowed))
    with pytest.raises(ValueError, match="expected at most capacity=4"):
        metric.compute(overflowed)
    poisoned = update(state, jnp.array([0, 2]), jnp.array([0.1, 0.2]))
    assert int(poisoned.num_seen) == 2 and np.isnan(jax.jit(metric.compute)(poisoned))
    with pytest.raises(ValueError, match="labels other than 0/1.*Fix"):
        metric.compute(poisoned)
    assert metric.compute(state) == 1.0  # the state passed in is unchanged
    with pytest.raises(ValueError, match=r"NDCGAtK.*k=0.*Fix"):
        jax_metrics.NDCGAtK(k=0)


# -- 2-rank synchronisation (child processes) ------------------------------------------------

#: Each rank's part of the sync data: uneven sizes, ties across ranks, every metric defined.
SYNC_SEED, SYNC_SIZES, SYNC_QUERIES = 7, (9, 5), (3, 2)
SYNC_METRICS = [("AUROC", {}), ("AveragePrecision", {}),
                ("OneWayPartialAUROC", {"max_fpr": 0.3, "scale": "mcclish"}),
                ("TwoWayPartialAUROC", {"max_fpr": 0.5, "min_tpr": 0.3}),
                ("NDCGAtK", {"k": 3}), ("MAPAtK", {"k": 2})]


def sync_data() -> dict[str, Any]:
    """The data of both ranks (classification and ranking) from a fixed seed."""
    rng = np.random.default_rng(SYNC_SEED)
    total = sum(SYNC_SIZES)
    y = rng.integers(0, 2, total)
    y[:2] = [0, 1]
    s = np.round(rng.uniform(size=total), 1)
    queries = sum(SYNC_QUERIES)
    rel = rng.integers(0, 3, size=(queries, 4))
    rel[:, 0] = np.maximum(rel[:, 0], 1)
    scores = np.round(rng.normal(size=(queries, 4)), 1)
    cut, qcut = SYNC_SIZES[0], SYNC_QUERIES[0]
    return {"y": y, "s": s, "rel": rel, "scores": scores,
            "parts": [(slice(0, cut), slice(0, qcut)), (slice(cut, total), slice(qcut, queries))]}


def sync_reference() -> dict[str, float]:
    data = sync_data()
    out = {}
    for kind, options in SYNC_METRICS:
        classification = kind not in ("NDCGAtK", "MAPAtK")
        y, s = (data["y"], data["s"]) if classification else (data["rel"], data["scores"])
        out[kind] = float(whole_value(kind, options, y, s))
    return out


def torch_rank(rank: int, port: str, out: str) -> None:
    """One gloo rank: update this rank's part in two batches, compute (synced)."""
    import torch
    import torch.distributed as dist

    import xrisk.torch  # noqa: F401

    imported_before = "torchmetrics" in sys.modules  # import xrisk.torch must not load it
    from xrisk.torch import metrics as torch_metrics

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    data = sync_data()
    rows, queries = data["parts"][rank]
    values: dict[str, Any] = {"torchmetrics_imported_by_xrisk_torch": imported_before}
    for kind, options in SYNC_METRICS:
        metric = getattr(torch_metrics, kind)(**options)
        ranking = kind in ("NDCGAtK", "MAPAtK")
        preds, target = ((data["scores"][queries], data["rel"][queries]) if ranking
                         else (data["s"][rows], data["y"][rows]))
        half = len(target) // 2
        for part in (slice(0, half), slice(half, None)):
            metric.update(torch.as_tensor(preds[part]), torch.as_tensor(target[part]))
        values[kind] = float(metric.compute())
    # A rank that saw nothing: the value is the other rank's data alone.
    alone = torch_metrics.AUROC()
    if rank == 0:
        alone.update(torch.as_tensor(data["s"][rows]), torch.as_tensor(data["y"][rows]))
    values["rank_1_empty"] = float(alone.compute())
    with open(out, "w") as f:
        json.dump(values, f)
    dist.barrier()
    dist.destroy_process_group()


def jax_devices(out: str) -> None:
    """Two host devices: each updates its part under jit inside shard_map, then syncs."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    from xrisk.jax import metrics as jax_metrics

    jax.config.update("jax_enable_x64", True)
    mesh = jax.make_mesh((2,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    data = sync_data()
    values = {}
    for kind, options in SYNC_METRICS:
        ranking = kind in ("NDCGAtK", "MAPAtK")
        if ranking:
            metric = getattr(jax_metrics, kind)(**options)
            y, s = data["rel"][:4], data["scores"][:4]  # shard_map splits evenly: 2 + 2
        else:
            metric = getattr(jax_metrics, kind)(capacity=8, **options)
            y, s = data["y"][:14], data["s"][:14]  # 7 + 7

        def local(y, s, metric=metric):
            state = metric.update(metric.init(), y, s)
            return metric.compute(metric.sync(state, "data"))

        run = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P("data"), P("data")),
                                    out_specs=P()))
        values[kind] = (float(run(jnp.asarray(y), jnp.asarray(s))),
                        float(whole_value(kind, options, y, s)))
    with open(out, "w") as f:
        json.dump(values, f)


def tf_replicas(out: str) -> None:
    """A MirroredStrategy over 2 logical CPUs: each replica updates its part in a
    tf.function, then ``result()`` outside the replicas sees both parts."""
    import tensorflow as tf  # alone in this process: torch is not imported here

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from xrisk.tensorflow import metrics as keras_metrics

    strategy = tf.distribute.MirroredStrategy(
        [device.name for device in tf.config.list_logical_devices("CPU")])
    data = sync_data()
    with strategy.scope():
        built = [getattr(keras_metrics, kind)(**options) for kind, options in SYNC_METRICS]

    def part(context: Any) -> tuple[Any, ...]:
        rows, queries = data["parts"][context.replica_id_in_sync_group]
        return (tf.constant(data["y"][rows]), tf.constant(data["s"][rows]),
                tf.constant(data["rel"][queries]), tf.constant(data["scores"][queries]))

    @tf.function
    def step(y: Any, s: Any, rel: Any, scores: Any) -> None:
        for metric in built:
            ranking = isinstance(metric, (keras_metrics.NDCGAtK, keras_metrics.MAPAtK))
            metric.update_state(*((rel, scores) if ranking else (y, s)))

    strategy.run(step, args=strategy.experimental_distribute_values_from_function(part))
    values = {kind: float(metric.result()) for (kind, _), metric in zip(SYNC_METRICS, built,
                                                                         strict=True)}
    for metric in built:
        metric.reset_state()
    values["after_reset"] = float(built[0].result())
    with open(out, "w") as f:
        json.dump(values, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sync_reports(tmp_path_factory):
    """Run the torch ranks, the JAX devices and the TensorFlow replicas at once; their JSON
    reports by worker."""
    folder = tmp_path_factory.mktemp("streaming_sync")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
           "TF_ENABLE_ONEDNN_OPTS": "0",
           "OMP_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
           + " --xla_force_host_platform_device_count=2"}
    port = str(_free_port())
    calls = {"torch0": f"torch_rank(0, {port!r}, {str(folder / 'torch0.json')!r})",
             "torch1": f"torch_rank(1, {port!r}, {str(folder / 'torch1.json')!r})",
             "jax": f"jax_devices({str(folder / 'jax.json')!r})",
             "tensorflow": f"tf_replicas({str(folder / 'tensorflow.json')!r})"}
    running = {name: subprocess.Popen(
        [sys.executable, "-c", f"from tests.test_streaming_metrics import *; {call}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for name, call in calls.items()}
    reports = {}
    for name, process in running.items():
        try:
            output = process.communicate(timeout=300)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            output = process.communicate()[0] + "\n(timed out)"
        path = folder / f"{name}.json"
        reports[name] = (json.loads(path.read_text()) if path.exists()
                         else {"error": output[-3000:]})
    return reports


@pytest.mark.parametrize("rank", [0, 1])
def test_torch_sync_over_two_gloo_ranks_equals_the_whole_data(sync_reports, rank):
    pytest.importorskip("torchmetrics")
    got = sync_reports[f"torch{rank}"]
    assert "error" not in got, got.get("error")
    assert got["torchmetrics_imported_by_xrisk_torch"] is False
    data = sync_data()
    first = data["parts"][0][0]
    assert got["rank_1_empty"] == whole.auroc(data["y"][first], data["s"][first])
    want = sync_reference()
    for kind, _ in SYNC_METRICS:
        if kind in ("NDCGAtK", "MAPAtK"):
            assert_ranking_close(got[kind], want[kind])
        else:
            assert got[kind] == want[kind], kind


def test_jax_sync_over_two_devices_equals_the_whole_data(sync_reports):
    got = sync_reports["jax"]
    assert "error" not in got, got.get("error")
    for kind, (value, want) in got.items():
        if kind in ("NDCGAtK", "MAPAtK"):
            assert_ranking_close(value, want)
        else:
            assert value == want, kind


def test_keras_sync_over_two_replicas_equals_the_whole_data(sync_reports):
    got = sync_reports["tensorflow"]
    assert "error" not in got, got.get("error")
    want = sync_reference()
    for kind, _ in SYNC_METRICS:
        if kind in ("NDCGAtK", "MAPAtK"):
            assert_ranking_close(got[kind], want[kind])
        else:
            assert got[kind] == want[kind], kind
    assert np.isnan(got["after_reset"])
