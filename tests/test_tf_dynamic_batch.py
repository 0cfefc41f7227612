"""TensorFlow steps whose batch size is known only at run time (issue 11, point 2).

Keras ``model.fit`` and ``tf.data`` pipelines without ``drop_remainder`` trace the step with
``None`` for the batch dimension. For every registered loss, a ``tf.function`` whose input
signature has ``None`` for every free dimension is traced once and then gives, for batches of
several sizes, what the eager step gives (loss, gradients, state); an empty batch gives 0 and
writes nothing; sizes of one dimension that differ give NaN and write nothing (and raise in
the ``"raise"`` mode of ``xrisk.set_checks``).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
import xrisk.tensorflow as xtf
from tests._cases import CASES, MAX_KEYS, NUM_FEATURES, NUM_LABELS
from tests._frameworks import model_scores, score_names
from tests.test_optim_keras import PackedLoss  # the y_true = [label, index] recipe
from xrisk.backends import BACKEND_NAMES, get_backend

DYNAMIC_SETTINGS = settings(max_examples=1, deadline=None)
#: Free dimensions of the ranking losses that stay static: the math splits each row of
#: candidates at the P positives (a clear error says so, see the test below).
STRUCTURAL = {"candidates", "positives"}
RTOL, ATOL = 1e-10, 1e-13


# --------------------------------------------------------------------------- helpers

def _free_dims(definition) -> list[str]:
    """The named dimensions that the input signature leaves unknown (``None``)."""
    dims = []
    for spec in definition.inputs():
        for dim in spec.shape:
            if dim not in definition.dims() and dim not in STRUCTURAL and dim not in dims:
                dims.append(dim)
    return dims


def _draw_batch(data, name, definition) -> dict[str, np.ndarray]:
    """One batch of the case's drawer, score inputs made by its model (float64 numpy)."""
    case = CASES[name]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    inputs = case.batch(data.draw, definition, rng)
    names = score_names(definition, inputs)
    made = model_scores(inputs, names, rng.normal(size=NUM_FEATURES), case.link)
    return {k: np.asarray(v) for k, v in {**inputs, **made}.items() if v is not None}


def _axes(definition, batch, dim) -> dict[str, int]:
    """Input name -> axis of ``dim`` in that input, for the inputs present in ``batch``."""
    return {spec.name: spec.shape.index(dim) for spec in definition.inputs()
            if spec.name in batch and dim in spec.shape}


def _resized(definition, batch, dim, size, rng) -> dict[str, np.ndarray]:
    """``batch`` with ``size`` entries along ``dim`` in every input, drawn with replacement
    from its entries (duplicates are valid inputs of every loss); 0 gives an empty batch."""
    axes = _axes(definition, batch, dim)
    old = batch[next(iter(axes))].shape[next(iter(axes.values()))]
    picks = rng.integers(0, old, size)
    return {k: np.take(v, picks, axis=axes[k]) if k in axes else v for k, v in batch.items()}


def _signature(definition, batch, unknown) -> dict[str, tf.TensorSpec]:
    """Specs of ``batch`` with ``None`` for every dimension named in ``unknown``."""
    out = {}
    for spec in definition.inputs():
        if spec.name in batch:
            value = batch[spec.name]
            shape = [None if dim in unknown else value.shape[axis]
                     for axis, dim in enumerate(spec.shape)]
            out[spec.name] = tf.TensorSpec(shape, tf.as_dtype(value.dtype))
    return out


def _loss_fn(name, definition, params):
    loss_fn = getattr(xtf, name)(**definition.config(), dtype="float64")
    for key, value in params.items():
        getattr(loss_fn, key).assign(value)
    return loss_fn


def _value_and_grad(loss_fn, names, inputs):
    """Loss and gradients with respect to the score inputs and the trainable auxiliaries."""
    scores = {k: v for k, v in inputs.items() if k in names}
    others = {k: v for k, v in inputs.items() if k not in names}
    params = [getattr(loss_fn, key) for key in loss_fn.definition.auxiliaries()]
    with tf.GradientTape() as tape:
        tape.watch(scores)
        loss = loss_fn(**scores, **others)
    grads = tape.gradient(loss, [*scores.values(), *params],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return loss, grads


def _state(loss_fn) -> dict[str, np.ndarray]:
    return loss_fn.export_state()


def _assert_same(got: dict, want: dict) -> None:
    for key, value in want.items():
        assert_allclose(got[key], value, rtol=RTOL, atol=ATOL, err_msg=key)


def _mismatched(definition, batch, dim) -> dict[str, np.ndarray]:
    """``batch`` with the last input that has ``dim`` one entry short along it."""
    axes = _axes(definition, batch, dim)
    name, axis = list(axes.items())[-1]
    cut = [slice(None)] * batch[name].ndim
    cut[axis] = slice(0, batch[name].shape[axis] - 1)
    return {**batch, name: batch[name][tuple(cut)]}


def _tensors(batch):
    return {k: tf.constant(v) for k, v in batch.items()}


# --------------------------------------------------------------------------- every loss

@pytest.mark.parametrize("name", sorted(CASES))
@DYNAMIC_SETTINGS
@given(data=st.data())
def test_one_trace_serves_every_batch_size(name, data):
    """Two batch sizes (every free dimension changed), empty batches along each free
    dimension and sizes that differ, all through one trace; eager is the reference."""
    case = CASES[name]
    definition = case.make(MAX_KEYS, {})
    params = case.initial_params(np.random.default_rng(0))
    first = _draw_batch(data, name, definition)
    names = score_names(definition, first)
    free = _free_dims(definition)
    rng = np.random.default_rng(1)
    second = first
    for dim in free:  # one more entry along every free dimension
        axes = _axes(definition, second, dim)
        size = second[next(iter(axes))].shape[next(iter(axes.values()))]
        second = _resized(definition, second, dim, size + 1, rng)
    empties = [_resized(definition, first, dim, 0, rng) for dim in free]

    eager_fn = _loss_fn(name, definition, params)
    graph_fn = _loss_fn(name, definition, params)
    graph_step = tf.function(lambda inputs: _value_and_grad(graph_fn, names, inputs),
                             input_signature=[_signature(definition, first, free)])
    for number, batch in enumerate([first, second, *empties]):
        before = _state(graph_fn)
        want_loss, want_grads = _value_and_grad(eager_fn, names, _tensors(batch))
        got_loss, got_grads = graph_step(_tensors(batch))
        assert_allclose(got_loss.numpy(), want_loss.numpy(), rtol=RTOL, atol=ATOL)
        for got, want in zip(got_grads, want_grads, strict=True):
            assert_allclose(got.numpy(), want.numpy(), rtol=RTOL, atol=ATOL)
        _assert_same(_state(graph_fn), _state(eager_fn))
        if number >= 2:  # an empty batch: 0, finite zero gradients, no state write
            assert float(got_loss) == 0.0
            assert all(np.all(g.numpy() == 0) for g in got_grads)
            _assert_same(_state(graph_fn), before)

    before = _state(graph_fn)
    loss, grads = graph_step(_tensors(_mismatched(definition, first, free[0])))
    assert np.isnan(float(loss))
    _assert_same(_state(graph_fn), before)
    assert graph_step.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("name", sorted(CASES))
@DYNAMIC_SETTINGS
@given(data=st.data())
def test_sizes_that_differ_raise_in_raise_mode(name, data):
    case = CASES[name]
    definition = case.make(MAX_KEYS, {})
    batch = _draw_batch(data, name, definition)
    free = _free_dims(definition)
    loss_fn = _loss_fn(name, definition, case.initial_params(np.random.default_rng(0)))
    with xrisk.set_checks("raise"):  # read when the step is traced
        step = tf.function(lambda inputs: loss_fn(**inputs),
                           input_signature=[_signature(definition, batch, free)])
        assert np.isfinite(float(step(_tensors(batch))))
        before = _state(loss_fn)
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"{free[0]} sizes of"):
            step(_tensors(_mismatched(definition, batch, free[0])))
    _assert_same(_state(loss_fn), before)


# --------------------------------------------------------------------------- special cases

def test_a_fixed_dimension_unknown_when_traced_gets_its_declared_size():
    """num_labels (fixed at construction) left unknown: the right size runs as eager does,
    another gives NaN and writes no state."""
    definition = xrisk.meanAveragePrecisionLoss(NUM_LABELS, MAX_KEYS)
    rng = np.random.default_rng(0)
    scores = tf.constant(rng.uniform(size=(5, NUM_LABELS)))
    labels = tf.constant((rng.uniform(size=(5, NUM_LABELS)) < 0.5).astype(np.int64))
    index = tf.constant([0, 3, 3, 7, 11], tf.int64)
    eager_fn, graph_fn = (_loss_fn("meanAveragePrecisionLoss", definition, {})
                          for _ in range(2))
    step = tf.function(lambda s, y, i: graph_fn(s, y, i), input_signature=[
        tf.TensorSpec([None, None], tf.float64), tf.TensorSpec([None, None], tf.int64),
        tf.TensorSpec([None], tf.int64)])
    got = step(scores, labels, index)
    assert_allclose(got.numpy(), eager_fn(scores, labels, index).numpy(), rtol=RTOL, atol=ATOL)
    _assert_same(_state(graph_fn), _state(eager_fn))
    before = _state(graph_fn)
    assert np.isnan(float(step(scores[:, :2], labels[:, :2], index)))
    _assert_same(_state(graph_fn), before)


def test_a_size_known_from_another_input_is_the_one_expected():
    """Static scores (5,) with labels and index of unknown size: the static size is given
    back to them (ranking's positives, say, stay static if one input has them static)."""
    definition = xrisk.APLoss(MAX_KEYS)
    scores = tf.constant(np.random.default_rng(0).uniform(size=5))
    labels = tf.constant([1, 0, 1, 1, 0], tf.int64)
    index = tf.constant([0, 3, 3, 7, 11], tf.int64)
    eager_fn, graph_fn = (_loss_fn("APLoss", definition, {}) for _ in range(2))
    shapes = []

    @tf.function(input_signature=[tf.TensorSpec([5], tf.float64),
                                  tf.TensorSpec([None], tf.int64),
                                  tf.TensorSpec([None], tf.int64)])
    def step(s, y, i):
        checked = xrisk._validation.check_inputs(
            definition, get_backend("tensorflow"), {"scores": s, "labels": y, "index": i},
            xp=get_backend("tensorflow").namespace).inputs
        shapes.append({k: tuple(v.shape) for k, v in checked.items()})
        return graph_fn(s, y, i)

    got = step(scores, labels, index)
    assert shapes[0] == {"scores": (5,), "labels": (5,), "index": (5,)}
    assert_allclose(got.numpy(), eager_fn(scores, labels, index).numpy(), rtol=RTOL, atol=ATOL)
    _assert_same(_state(graph_fn), _state(eager_fn))
    before = _state(graph_fn)
    assert np.isnan(float(step(scores, labels[:4], index)))
    assert np.isnan(float(step(scores, labels, tf.concat([index, index[:1]], 0))))
    _assert_same(_state(graph_fn), before)


@pytest.mark.parametrize("name", ["ListwiseCELoss", "NDCGLoss"])
def test_ranking_widths_unknown_when_traced_are_refused_clearly(name):
    definition = CASES[name].make(MAX_KEYS, {})
    loss_fn = _loss_fn(name, definition, {})
    inputs = {"scores": tf.TensorSpec([None, None], tf.float64),
              "interaction": tf.TensorSpec([None, None], tf.int64)}
    if name == "NDCGLoss":
        inputs.update(relevance=tf.TensorSpec([None, None], tf.float64),
                      query=tf.TensorSpec([None], tf.int64),
                      num_relevant=tf.TensorSpec([None], tf.float64),
                      ideal_dcg=tf.TensorSpec([None], tf.float64))
    step = tf.function(lambda kw: loss_fn(**kw), input_signature=[inputs])
    with pytest.raises(ValueError, match="static size of every axis but the first"):
        step.get_concrete_function()


@pytest.mark.parametrize("name", sorted(BACKEND_NAMES))
def test_every_backend_gives_axis_sizes(name):
    backend = get_backend(name)
    x = backend.namespace.zeros((4, 2))
    assert backend.axis_size(x, 0) == 4 and backend.axis_size(x, 1) == 2
    assert type(xrisk._state.axis_size(x, 1)) is int  # static sizes stay Python ints


def test_run_time_axis_size_is_an_index_dtype_scalar():
    backend = get_backend("tensorflow")

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float64)])
    def sizes(x):
        return (backend.axis_size(x, 0), xrisk._state.axis_size(x, 0, dtype=tf.float64),
                xrisk._state.axis_size(x, 1) + tf.constant(0, tf.int64))

    batch, as_float, width = sizes(tf.zeros((5, 3), tf.float64))
    assert (batch.dtype, int(batch), float(as_float), int(width)) == (tf.int64, 5, 5.0, 3)


# --------------------------------------------------------------------------- Keras fit

N, BATCH = 30, 8  # the last batch of each epoch has 6 examples


def _keras_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])


def test_model_fit_with_a_partial_last_batch_trains_like_a_gradient_tape_loop():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype("float32")
    labels = (rng.random(N) < 0.4).astype("int64")
    labels[[0, N - 1]] = 1  # a positive in the first and in the partial last batch
    fitted, loss_fn = _keras_model(), xtf.APLoss(num_samples=N)
    fitted.compile(optimizer=xtf.SOAP(learning_rate=1e-2), loss=PackedLoss(loss_fn))
    history = fitted.fit(x, np.stack([labels, np.arange(N)], axis=1), batch_size=BATCH,
                         epochs=2, shuffle=False, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))

    manual, manual_loss = _keras_model(), xtf.APLoss(num_samples=N)
    opt = xtf.SOAP(manual.trainable_variables, learning_rate=1e-2)
    for _ in range(2):
        for start in range(0, N, BATCH):
            part = slice(start, start + BATCH)
            with tf.GradientTape() as tape:
                loss = manual_loss(tf.sigmoid(manual(x[part])[:, 0]),
                                   tf.constant(labels[part], tf.int32),
                                   tf.constant(np.arange(N)[part]))
            grads = tape.gradient(loss, manual.trainable_variables)
            opt.apply_gradients(zip(grads, manual.trainable_variables))
    assert int(fitted.optimizer.iterations) == 2 * -(-N // BATCH)
    for got, want in zip(fitted.get_weights(), manual.get_weights(), strict=True):
        assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert_allclose(loss_fn.u.numpy(), manual_loss.u.numpy(), rtol=1e-5, atol=1e-7)
    assert loss_fn.u.numpy()[N - 1, 0] != 0  # the partial batch's positive was written
