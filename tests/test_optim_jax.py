"""optax habits: optimizers built without parameters, schedules, ``optax.chain`` with the
schedule hooks still working on the chained state, jit without recompiles when the learning
rate decays."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xr


def _problem():
    loss_fn = xr.AUCMLoss(dtype="float64")
    params = {"w": jnp.linspace(-1.0, 1.0, 4), "loss": loss_fn.init_params()}
    rng = np.random.default_rng(0)
    grads = [jax.tree.map(lambda p: jnp.asarray(rng.normal(size=np.shape(p))), params)
             for _ in range(4)]
    return loss_fn, params, grads


def _run(opt, params, grads, *, hooks, jit=True):
    state = opt.init(params)
    update = jax.jit(opt.update) if jit else opt.update
    for step, g in enumerate(grads):
        updates, state = update(g, state, params)
        params = optax.apply_updates(params, updates)
        if step == 1:
            state = hooks(state)
    return params, state


@pytest.mark.parametrize("name", ["SOAP", "PESG", "PDSCA"])
def test_jitted_update_does_not_retrace_when_the_learning_rate_decays(name):
    loss_fn, params, grads = _problem()
    if name == "PDSCA":
        loss_fn = xr.CompositionalAUCLoss(dtype="float64")
    opt = getattr(xr, name)(**({"loss_fn": loss_fn} if name != "SOAP" else {}),
                            learning_rate=0.1, epoch_decay=0.01)
    traces = []

    @jax.jit
    def update(g, opt_state, p):
        traces.append(1)
        return opt.update(g, opt_state, p)

    opt_state = opt.init(params)
    for g in grads[:3]:
        _, opt_state = update(g, opt_state, params)
        opt_state = opt.update_regularizer(opt_state, decay_factor=2.0)
    assert len(traces) == 1
    assert float(opt.current_learning_rate(opt_state)) == pytest.approx(0.1 / 8)
    assert int(opt_state.step) == 3


def test_chained_state_takes_the_schedule_hooks():
    loss_fn, params, grads = _problem()
    opt = xr.PESG(loss_fn=loss_fn, learning_rate=0.1, epoch_decay=0.05)
    chain = optax.chain(optax.scale(1.0), opt, optax.identity())
    alone, _ = _run(opt, params, grads,
                    hooks=lambda s: opt.update_regularizer(s, decay_factor=4))
    chained, state = _run(chain, params, grads,
                          hooks=lambda s: opt.update_regularizer(s, decay_factor=4))
    for got, want in zip(jax.tree.leaves(chained), jax.tree.leaves(alone), strict=True):
        assert_allclose(got, want, rtol=1e-14)
    assert isinstance(state[1], xrisk.OptimizerState)
    with pytest.raises(ValueError, match="opt_state holds no xrisk optimizer state"):
        opt.update_lr(optax.scale(1.0).init(params), 10)


def test_schedules_are_callables_of_the_step_count():
    loss_fn, params, grads = _problem()
    schedule = optax.exponential_decay(0.1, transition_steps=1, decay_rate=0.5)
    scheduled, _ = _run(xr.SGD(learning_rate=schedule), {"w": params["w"]},
                        [{"w": g["w"]} for g in grads], hooks=lambda s: s)
    w = np.asarray(params["w"])
    for step, g in enumerate(grads):
        w = w - 0.1 * 0.5**step * np.clip(np.asarray(g["w"]), -1, 1)
    assert_allclose(scheduled["w"], w, rtol=1e-6)  # optax computes the schedule in float32


def test_update_needs_params_and_matching_gradients():
    opt = xr.SOAP()
    params = {"w": jnp.ones(2)}
    state = opt.init(params)
    with pytest.raises(ValueError, match=r"needs the current params"):
        opt.update(params, state)
    with pytest.raises(ValueError, match="gradients' pytree"):
        opt.update({"v": jnp.ones(2)}, state, params)


def test_min_max_optimizers_move_ascent_auxiliaries_to_their_new_values():
    loss_fn, params, grads = _problem()
    opt = xr.PESG(loss_fn=loss_fn, learning_rate=0.1)
    final, _ = _run(opt, params, grads, hooks=lambda s: s)
    alpha = float(final["loss"].alpha)
    assert alpha >= 0 and alpha != float(params["loss"].alpha)
    assert opt.rule.loss_fn is loss_fn.definition
