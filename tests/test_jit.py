"""Jit: the same numbers under ``jax.jit`` and ``tf.function``; no retrace on a second step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
from tests._cases import CASES


def _batch(seed, batch=8, num_samples=12):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, batch)
    labels[0] = 1
    return rng.uniform(0.05, 0.95, batch), labels, rng.integers(0, num_samples, batch)


def _definition(name):
    return CASES[name].make(12, {})


def _jax_params(definition):
    return definition.init_params(xp=jnp, dtype=jnp.float64)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jax_jit_matches_eager_and_does_not_retrace(name):
    definition = _definition(name)
    traces = []

    def step(state, params, scores, labels, index):
        traces.append(1)
        return jax.value_and_grad(
            lambda s: definition.apply(state, s, labels, index, params=params),
            has_aux=True)(scores)

    jitted = jax.jit(step, donate_argnums=(0,))
    eager_state = jitted_state = definition.init(xp=jnp, dtype=jnp.float64)
    params = _jax_params(definition)
    for seed in (1, 2, 3):
        scores, labels, index = (jnp.asarray(a) for a in _batch(seed))
        (eager_loss, eager_state), eager_grad = step(eager_state, params, scores, labels, index)
        (jit_loss, jitted_state), jit_grad = jitted(jitted_state, params, scores, labels, index)
        assert_allclose(float(jit_loss), float(eager_loss), rtol=1e-12, atol=1e-15)
        assert_allclose(np.asarray(jit_grad), np.asarray(eager_grad), rtol=1e-12, atol=1e-15)
        for field in eager_state._fields:
            got, want = getattr(jitted_state, field), getattr(eager_state, field)
            assert got.dtype == want.dtype
            assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
    assert len(traces) == 3 + 1  # three eager calls and a single trace for three jitted steps


@pytest.mark.parametrize("name", sorted(CASES))
def test_tf_function_matches_eager_and_does_not_retrace(name):
    config = _definition(name).config()  # the adapter takes the core's arguments
    eager_loss_fn = getattr(xtf, name)(**config, dtype="float64")
    graph_loss_fn = getattr(xtf, name)(**config, dtype="float64")

    def value_and_grad(loss_fn, scores, labels, index):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = loss_fn(scores, labels, index)
        return loss, tape.gradient(loss, scores)

    graph_step = tf.function(lambda *a: value_and_grad(graph_loss_fn, *a))
    for seed in (1, 2, 3):
        batch = [tf.constant(a) for a in _batch(seed)]
        eager_loss, eager_grad = value_and_grad(eager_loss_fn, *batch)
        graph_loss, graph_grad = graph_step(*batch)
        assert_allclose(graph_loss.numpy(), eager_loss.numpy(), rtol=1e-12, atol=1e-15)
        assert_allclose(graph_grad.numpy(), eager_grad.numpy(), rtol=1e-12, atol=1e-15)
        for field, value in eager_loss_fn.export_state().items():
            assert_allclose(graph_loss_fn.export_state()[field], value, rtol=1e-12)
    assert graph_step.experimental_get_tracing_count() == 1


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


def test_core_functions_have_no_data_dependent_shapes_under_jit():
    """Each loss traces with abstract shapes only (a jax.jit trace fails otherwise)."""
    for name in CASES:
        definition = _definition(name)
        state = definition.init(xp=jnp, dtype=jnp.float64)
        shapes = jax.eval_shape(
            lambda st, s, y, i, d=definition: d.apply(st, s, y, i, params=_jax_params(d)),
            state, jnp.zeros(8), jnp.zeros(8, dtype=jnp.int64), jnp.zeros(8, dtype=jnp.int64))
        assert shapes[0].shape == ()
        assert isinstance(xrisk.LOSSES[name](**definition.config()), xrisk.LossDefinition)
