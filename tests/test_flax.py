"""Flax NNX trains with xrisk's JAX losses and optax optimizers exactly as plain JAX does.

The recipe of docs/flax.md — an ``nnx.Module`` network, a min-max loss's auxiliaries as an
``nnx.Param`` holding ``loss_fn.init_params()``, ``nnx.Optimizer`` over an xrisk optimizer,
the loss state passed into and returned from a jitted step — is compared in float64 with
the same math written in plain JAX (a parameter dict, ``jax.jit``, ``optax.apply_updates``):
the losses of every step, the final weights, auxiliaries and loss state, for AP + SOAP and
AUC-M + PESG with a stage-wise ``update_regularizer`` between epochs; under ``nnx.jit`` and
under ``jax.jit`` over ``nnx.split`` / ``nnx.merge``. examples/flax_nnx_auc.py runs at a tiny
size.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nnx = pytest.importorskip("flax.nnx")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

import xrisk.jax as xr  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NUM_SAMPLES, FEATURES, HIDDEN, BATCH, EPOCHS = 40, 5, 6, 8, 2

#: loss -> (loss, optimizer) builders
CASES = {
    "AP-SOAP": (lambda: xr.APLoss(num_samples=NUM_SAMPLES, margin=0.6, dtype="float64"),
                lambda loss_fn: xr.SOAP(learning_rate=0.05)),
    "AUCM-PESG": (lambda: xr.AUCMLoss(margin=1.0, dtype="float64"),
                  lambda loss_fn: xr.PESG(loss_fn=loss_fn, learning_rate=0.1,
                                          epoch_decay=0.01)),
}


@pytest.fixture(autouse=True)
def float64():
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def make_data() -> tuple[Any, Any]:
    rng = np.random.default_rng(1)
    labels = (rng.random(NUM_SAMPLES) < 0.3).astype(np.float64)
    features = rng.normal(size=(NUM_SAMPLES, FEATURES)) + labels[:, None]
    return xr.IndexedDataset(features, labels), xr.DualSampler(labels, BATCH,
                                                               sampling_rate=0.25, seed=1)


class Model(nnx.Module):
    """The docs' model: an MLP, plus the loss's auxiliaries for a min-max loss."""

    def __init__(self, loss_fn: Any, rngs: Any) -> None:
        self.hidden = nnx.Linear(FEATURES, HIDDEN, rngs=rngs, param_dtype=jnp.float64)
        self.out = nnx.Linear(HIDDEN, 1, rngs=rngs, param_dtype=jnp.float64)
        self.aux = nnx.Param(loss_fn.init_params())  # AUCMParams(a, b, alpha) or ()

    def __call__(self, x: Any) -> Any:
        return self.out(jax.nn.relu(self.hidden(x))).squeeze(-1)


def nnx_run(case: str, jit: str) -> dict[str, Any]:
    """docs/flax.md's loop: ``nnx.jit`` with ``nnx.Optimizer``, or ``jax.jit`` over the
    split module and a plain optax state."""
    make_loss, make_optimizer = CASES[case]
    loss_fn = make_loss()
    model = Model(loss_fn, nnx.Rngs(0))
    tx = make_optimizer(loss_fn)
    state = loss_fn.init()
    dataset, sampler = make_data()
    losses = []

    def objective(model: Any, state: Any, xb: Any, yb: Any, index: Any) -> Any:
        scores = jax.nn.sigmoid(model(xb))
        return loss_fn.apply(state, scores, yb, index, params=model.aux.get_value())

    if jit == "nnx.jit":
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

        @nnx.jit
        def step(model: Any, optimizer: Any, state: Any, xb: Any, yb: Any, index: Any) -> Any:
            grad_fn = nnx.value_and_grad(objective, has_aux=True)
            (loss, state), grads = grad_fn(model, state, xb, yb, index)
            optimizer.update(model, grads)
            return loss, state

        for epoch in range(EPOCHS):
            if epoch > 0:
                assert tx.update_regularizer(optimizer, 10) is optimizer  # in place
            sampler.set_epoch(epoch)
            for xb, yb, index in dataset.batches(sampler):
                loss, state = step(model, optimizer, state, xb, yb, index)
                losses.append(loss)
        params = nnx.state(model, nnx.Param)
    else:
        graphdef, params = nnx.split(model, nnx.Param)
        opt_state = tx.init(params)

        @jax.jit
        def pure_step(params: Any, opt_state: Any, state: Any, xb: Any, yb: Any,
                      index: Any) -> Any:
            def pure_objective(params: Any) -> Any:
                return objective(nnx.merge(graphdef, params), state, xb, yb, index)

            (loss, state), grads = jax.value_and_grad(pure_objective, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, state, loss

        for epoch in range(EPOCHS):
            if epoch > 0:
                opt_state = tx.update_regularizer(opt_state, 10)
            sampler.set_epoch(epoch)
            for xb, yb, index in dataset.batches(sampler):
                params, opt_state, state, loss = pure_step(params, opt_state, state, xb, yb,
                                                           index)
                losses.append(loss)
    pure = nnx.to_pure_dict(params)
    return {"w1": pure["hidden"]["kernel"], "b1": pure["hidden"]["bias"],
            "w2": pure["out"]["kernel"], "b2": pure["out"]["bias"], "aux": pure["aux"],
            "state": state, "losses": jnp.stack(losses)}


@functools.cache  # compared with both jit forms
def plain_run(case: str) -> dict[str, Any]:
    """The same math in plain JAX: a dict of arrays from the NNX model's initial values."""
    make_loss, make_optimizer = CASES[case]
    loss_fn = make_loss()
    start = Model(loss_fn, nnx.Rngs(0))
    params = {"w1": start.hidden.kernel[...], "b1": start.hidden.bias[...],
              "w2": start.out.kernel[...], "b2": start.out.bias[...],
              "aux": loss_fn.init_params()}
    tx = make_optimizer(loss_fn)
    opt_state, state = tx.init(params), loss_fn.init()
    dataset, sampler = make_data()

    @jax.jit
    def step(params: Any, opt_state: Any, state: Any, xb: Any, yb: Any, index: Any) -> Any:
        def objective(params: Any) -> Any:
            hidden = jax.nn.relu(xb @ params["w1"] + params["b1"])
            scores = jax.nn.sigmoid((hidden @ params["w2"] + params["b2"])[:, 0])
            return loss_fn.apply(state, scores, yb, index, params=params["aux"])

        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    losses = []
    for epoch in range(EPOCHS):
        if epoch > 0:
            opt_state = tx.update_regularizer(opt_state, 10)
        sampler.set_epoch(epoch)
        for xb, yb, index in dataset.batches(sampler):
            params, opt_state, state, loss = step(params, opt_state, state, xb, yb, index)
            losses.append(loss)
    return {**params, "state": state, "losses": jnp.stack(losses)}


def _mismatches(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    problems = []
    for name in want:
        got_leaves, want_leaves = (jax.tree_util.tree_leaves(x[name]) for x in (got, want))
        if len(got_leaves) != len(want_leaves):
            problems.append(f"{name}: {len(got_leaves)} leaves, expected {len(want_leaves)}")
            continue
        for g, w in zip(got_leaves, want_leaves, strict=True):
            if g.dtype != w.dtype or not np.array_equal(g, w):  # bit for bit
                problems.append(f"{name}: {np.asarray(g)} != {np.asarray(w)}")
    return problems


@pytest.mark.parametrize("jit", ["nnx.jit", "jax.jit"])
@pytest.mark.parametrize("case", CASES)
def test_flax_nnx_equals_plain_jax(case, jit):
    got, want = nnx_run(case, jit), plain_run(case)
    assert got["losses"].dtype == jnp.float64
    assert not _mismatches(got, want), "\n".join(_mismatches(got, want))
    start = Model(CASES[case][0](), nnx.Rngs(0)).hidden.kernel[...]
    assert not np.allclose(got["w1"], start)  # the run trained
    if case == "AUCM-PESG":  # PESG found AUCMParams inside the nnx.Param: alpha ascended
        assert float(got["aux"].alpha) > 0


def test_example_runs_at_a_tiny_size(capsys):
    spec = importlib.util.spec_from_file_location("flax_nnx_auc",
                                                  ROOT / "examples" / "flax_nnx_auc.py")
    example = importlib.util.module_from_spec(spec)
    sys.modules["flax_nnx_auc"] = example
    spec.loader.exec_module(example)
    result = example.main(["--epochs", "1", "--hidden", "4"])
    out = capsys.readouterr().out
    assert "test AUROC" in out and 0.0 <= result <= 1.0
