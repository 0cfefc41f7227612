"""Jit: the same numbers under ``jax.jit`` and ``tf.function``; no retrace on a second step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
from tests._cases import CASES, MAX_KEYS, NUM_FEATURES
from tests._frameworks import model_scores, score_names

JIT_SETTINGS = settings(max_examples=2, deadline=None)


def _definition(name):
    return CASES[name].make(MAX_KEYS, {})


def _jax_params(definition):
    return definition.init_params(xp=jnp, dtype=jnp.float64)


def _steps(data, name, definition, count=3):
    """``count`` batches from the case's drawer with their score inputs made by the case's
    model, as float64 numpy arrays; and the number of distinct shape signatures among them."""
    case = CASES[name]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    w = rng.normal(size=NUM_FEATURES)
    batches = []
    for _ in range(count):
        inputs = case.batch(data.draw, definition, rng)
        names = score_names(definition, inputs)
        batches.append({k: v for k, v in {**inputs, **model_scores(inputs, names, w,
                                                                  case.link)}.items()
                        if v is not None})
    signatures = {tuple((k, np.shape(v), np.asarray(v).dtype.str) for k, v in sorted(b.items()))
                  for b in batches}
    return batches, len(signatures)


@pytest.mark.parametrize("name", sorted(CASES))
@JIT_SETTINGS
@given(data=st.data())
def test_jax_jit_matches_eager_and_does_not_retrace(name, data):
    definition = _definition(name)
    batches, signatures = _steps(data, name, definition)
    names = score_names(definition, batches[0])
    traces = []

    def step(state, params, scores, others):
        traces.append(1)
        return jax.value_and_grad(
            lambda s: definition.apply(state, **s, **others, params=params),
            has_aux=True)(scores)

    jitted = jax.jit(step, donate_argnums=(0,))
    eager_state = jitted_state = definition.init(xp=jnp, dtype=jnp.float64)
    params = _jax_params(definition)
    for batch in batches:
        scores = {k: jnp.asarray(v) for k, v in batch.items() if k in names}
        others = {k: jnp.asarray(v) for k, v in batch.items() if k not in names}
        (eager_loss, eager_state), eager_grad = step(eager_state, params, scores, others)
        (jit_loss, jitted_state), jit_grad = jitted(jitted_state, params, scores, others)
        assert_allclose(float(jit_loss), float(eager_loss), rtol=1e-12, atol=1e-15)
        for key in names:
            assert_allclose(np.asarray(jit_grad[key]), np.asarray(eager_grad[key]),
                            rtol=1e-12, atol=1e-15)
        for field in eager_state._fields:
            got, want = getattr(jitted_state, field), getattr(eager_state, field)
            assert got.dtype == want.dtype
            assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    # Three eager calls, and one trace per distinct input shape for the jitted steps.
    assert len(traces) == len(batches) + signatures


@pytest.mark.parametrize("name", sorted(CASES))
@JIT_SETTINGS
@given(data=st.data())
def test_tf_function_matches_eager_and_does_not_retrace(name, data):
    definition = _definition(name)
    batches, signatures = _steps(data, name, definition)
    names = score_names(definition, batches[0])
    config = definition.config()  # the adapter takes the core's arguments
    eager_loss_fn = getattr(xtf, name)(**config, dtype="float64")
    graph_loss_fn = getattr(xtf, name)(**config, dtype="float64")

    def value_and_grad(loss_fn, scores, others):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = loss_fn(**scores, **others)
        return loss, tape.gradient(loss, scores)

    graph_step = tf.function(lambda s, o: value_and_grad(graph_loss_fn, s, o))
    for batch in batches:
        scores = {k: tf.constant(v) for k, v in batch.items() if k in names}
        others = {k: tf.constant(v) for k, v in batch.items() if k not in names}
        eager_loss, eager_grad = value_and_grad(eager_loss_fn, scores, others)
        graph_loss, graph_grad = graph_step(scores, others)
        assert_allclose(graph_loss.numpy(), eager_loss.numpy(), rtol=1e-12, atol=1e-15)
        for key in names:
            assert_allclose(graph_grad[key].numpy(), eager_grad[key].numpy(), rtol=1e-12,
                            atol=1e-15)
        for field, value in eager_loss_fn.export_state().items():
            assert_allclose(graph_loss_fn.export_state()[field], value, rtol=1e-12)
    assert graph_step.experimental_get_tracing_count() == signatures


@pytest.mark.parametrize("optimizer", ["SOAP", "PESG"])
def test_jitted_optimizer_step_does_not_retrace_after_lr_changes(optimizer):
    loss_fn = xjax.AUCMLoss(dtype="float64")
    params = {"w": jnp.ones(3), "loss": loss_fn.init_params()}
    opt = (xjax.PESG(loss_fn=loss_fn, learning_rate=0.1) if optimizer == "PESG"
           else xjax.SOAP())
    traces = []

    @jax.jit
    def update(grads, opt_state, params):
        traces.append(1)
        return opt.update(grads, opt_state, params)

    opt_state = opt.init(params)
    grads = jax.tree.map(jnp.ones_like, params)
    for _ in range(3):
        _, opt_state = update(grads, opt_state, params)
        opt_state = opt.update_regularizer(opt_state, decay_factor=2.0)
    assert len(traces) == 1
    assert float(opt.current_learning_rate(opt_state)) == pytest.approx(
        opt.rule.learning_rate / 8)
    assert int(opt_state.step) == 3


@pytest.mark.parametrize("name", sorted(CASES))
@JIT_SETTINGS
@given(data=st.data())
def test_core_functions_have_no_data_dependent_shapes_under_jit(name, data):
    """Each loss traces with abstract shapes only (a jax.jit trace fails otherwise)."""
    definition = _definition(name)
    (batch,), _ = _steps(data, name, definition, count=1)
    state = definition.init(xp=jnp, dtype=jnp.float64)
    abstract = {k: jax.ShapeDtypeStruct(np.shape(v), np.asarray(v).dtype)
                for k, v in batch.items()}
    shapes = jax.eval_shape(lambda st, b: definition.apply(st, **b, params=_jax_params(
        definition)), state, abstract)
    assert shapes[0].shape == ()
    assert isinstance(xrisk.LOSSES[name](**definition.config()), xrisk.LossDefinition)
