"""The adapters end to end: the same training run in torch, TensorFlow (tf.function) and JAX
(jit, donated state) gives the parameters, auxiliaries and loss state of a step-by-step numpy
reference (tests/_reference.py), through ``update_regularizer`` and every optimizer mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow as tf
import torch
from numpy.testing import assert_allclose

import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from tests import _reference

NUM_SAMPLES, NUM_FEATURES, STEPS, REGULARIZER_AT = 20, 3, 6, 3

CONFIGS = {
    "soap-adam": ("SOAP", "APLoss", {}, dict(lr=0.05, weight_decay=1e-3, epoch_decay=0.01)),
    "soap-amsgrad-clip": ("SOAP", "APLoss", {"surrogate": "logistic"},
                          dict(lr=0.05, amsgrad=True, clip_value=0.05)),
    "soap-sgd-nesterov": ("SOAP", "APLoss", {"gamma": 0.5},
                          dict(mode="sgd", lr=0.5, nesterov=True, epoch_decay=0.01)),
    "pesg-sgd-v1": ("PESG", "AUCMLoss", {}, dict(lr=0.1, epoch_decay=0.01)),
    "pesg-adam-v2": ("PESG", "AUCMLoss", {"version": "v2", "margin": 0.6},
                     dict(mode="adam", lr=0.05)),
}


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(NUM_SAMPLES, NUM_FEATURES))
    y = (rng.random(NUM_SAMPLES) < 0.4).astype(np.int64)
    y[:2] = 1
    batches = [np.concatenate([[0, 1, 0], rng.integers(0, NUM_SAMPLES, 5)]) for _ in range(STEPS)]
    w0, b0 = rng.normal(size=NUM_FEATURES) * 0.3, np.float64(0.1)
    return X, y, batches, w0, b0


def _reference_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w, b = _data()
    defaults = {"APLoss": dict(gamma=0.9, margin=1.0, surrogate="squared_hinge", scale=1.0),
                "AUCMLoss": dict(margin=1.0, version="v1")}[loss_name] | loss_kwargs
    core_defaults = {"SOAP": dict(lr=1e-3, mode="adam", clip_value=1.0, weight_decay=1e-5,
                                  epoch_decay=0.0, momentum=0.9, dampening=0.1),
                     "PESG": dict(lr=0.1, mode="sgd", clip_value=1.0, weight_decay=1e-5,
                                  epoch_decay=2e-3, momentum=0.9)}[optimizer] | opt_kwargs
    params = [w, b] + ([np.float64(0.0), np.float64(0.0)] if optimizer == "PESG" else [])
    alpha = 0.0
    rule = _reference.ClippedOptimizer(params, kind=optimizer, margin=defaults["margin"],
                                       **core_defaults)
    u_all, u_pos = np.zeros(NUM_SAMPLES), np.zeros(NUM_SAMPLES)
    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            rule.update_regularizer(decay_factor=2)
        w, b = params[0], params[1]
        s = 1 / (1 + np.exp(-(X[index] @ w + b)))
        if loss_name == "APLoss":
            _, g, u_all, u_pos = _reference.ap_step(
                u_all, u_pos, s, y[index], index, gamma=defaults["gamma"],
                margin=defaults["margin"], surrogate_name=defaults["surrogate"],
                scale=defaults["scale"])
            aux_grads = []
        else:
            _, g, g_a, g_b, _ = _reference.aucm_loss(
                s, y[index], params[2], params[3], alpha, margin=defaults["margin"],
                version=defaults["version"])
            aux_grads = [g_a, g_b]
        gz = g * s * (1 - s)
        grads = [X[index].T @ gz, gz.sum(), *aux_grads]
        if optimizer == "PESG":
            params, alpha = rule.step(params, grads, alpha)
        else:
            params = rule.step(params, grads)
    out = {"w": params[0], "b": params[1]}
    if loss_name == "APLoss":
        out.update(u=np.stack([u_all, u_pos], axis=1))
    else:
        out.update(a=params[2], alpha=alpha, **{"b_aux": params[3]})
    return out


def _torch_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w0, b0 = _data()
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    loss_fn = getattr(xtorch, loss_name)(*([NUM_SAMPLES] if loss_name == "APLoss" else []),
                                         dtype="float64", **loss_kwargs)
    extra = [loss_fn] if optimizer == "PESG" else []
    opt = getattr(xtorch, optimizer)([w, b], *extra, **opt_kwargs)
    X_t, y_t = torch.as_tensor(X), torch.as_tensor(y)
    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            opt.update_regularizer(decay_factor=2)
        index = torch.as_tensor(index)
        opt.zero_grad()
        loss_fn(torch.sigmoid(X_t[index] @ w + b), y_t[index], index).backward()
        opt.step()
    return _collect(w, b, loss_fn.export_state(), loss_name,
                    lambda t: t.detach().numpy())


def _collect(w, b, exported, loss_name, to_numpy):
    out = {"w": to_numpy(w), "b": to_numpy(b)}
    if loss_name == "APLoss":
        out.update(u=exported["u"])
    else:
        out.update(a=exported["a"], alpha=exported["alpha"], b_aux=exported["b"])
    return out


def _tensorflow_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w0, b0 = _data()
    w, b = tf.Variable(w0), tf.Variable(b0)
    loss_fn = getattr(xtf, loss_name)(*([NUM_SAMPLES] if loss_name == "APLoss" else []),
                                      dtype="float64", **loss_kwargs)
    extra = [loss_fn] if optimizer == "PESG" else []
    opt = getattr(xtf, optimizer)([w, b], *extra, **opt_kwargs)
    variables = [w, b, *loss_fn.trainable_variables]

    @tf.function
    def train_step(x, labels, index):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.sigmoid(tf.linalg.matvec(x, w) + b), labels, index)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            opt.update_regularizer(decay_factor=2)
        train_step(tf.constant(X[index]), tf.constant(y[index]), tf.constant(index))
    assert train_step.experimental_get_tracing_count() == 1
    return _collect(w, b, loss_fn.export_state(), loss_name, lambda v: v.numpy())


def _jax_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w0, b0 = _data()
    loss_fn = getattr(xjax, loss_name)(*([NUM_SAMPLES] if loss_name == "APLoss" else []),
                                       dtype="float64", **loss_kwargs)
    params = {"w": jnp.asarray(w0), "b": jnp.asarray(b0), "loss": loss_fn.init_params()}
    extra = [loss_fn] if optimizer == "PESG" else []
    opt = getattr(xjax, optimizer)(params, *extra, **opt_kwargs)
    opt_state, loss_state = opt.init(params), loss_fn.init()

    def objective(p, state, x, labels, index):
        scores = jax.nn.sigmoid(x @ p["w"] + p["b"])
        return loss_fn.apply(state, scores, labels, index, params=p["loss"])

    @jax.jit
    def train_step(p, opt_state, state, x, labels, index):
        grads, state = jax.grad(objective, has_aux=True)(p, state, x, labels, index)
        updates, opt_state = opt.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, state

    train_step = jax.jit(train_step, donate_argnums=(1, 2))
    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            opt_state = opt.update_regularizer(opt_state, decay_factor=2)
        params, opt_state, loss_state = train_step(params, opt_state, loss_state, X[index],
                                                   y[index], index)
    return _collect(params["w"], params["b"], loss_fn.export_state(loss_state, params["loss"]),
                    loss_name, np.asarray)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_adapters_train_like_the_reference(config):
    optimizer, loss_name, loss_kwargs, opt_kwargs = CONFIGS[config]
    expected = _reference_run(optimizer, loss_name, loss_kwargs, opt_kwargs)
    for run in (_torch_run, _tensorflow_run, _jax_run):
        got = run(optimizer, loss_name, loss_kwargs, opt_kwargs)
        for key, value in expected.items():
            assert_allclose(got[key], value, rtol=1e-9, atol=1e-12,
                            err_msg=f"{key} after {STEPS} steps, {run.__name__}, {config}")
    # The run moved the parameters (not a vacuous comparison).
    assert not np.allclose(expected["w"], _data()[3])
