"""The adapters end to end: the same training run in torch, TensorFlow (tf.function) and JAX
(jit, donated state) gives the parameters, auxiliaries and loss state of a step-by-step numpy
reference (tests/_reference.py), through ``update_regularizer``, for every optimizer of
``xrisk.OPTIMIZERS`` and every mode."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow as tf
import torch
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from tests import _reference
from tests._reference_classification import compositional_auc

NUM_SAMPLES, NUM_FEATURES, STEPS, REGULARIZER_AT = 20, 3, 6, 3
REQUIRED = object()

#: LibAUC 2.0.1's optimizer defaults, in xrisk's spelling (lr ->
#: learning_rate, lr0 -> ce_learning_rate; SOPA's unused eta dropped); written from the
#: reference, not from xrisk.
LIBAUC_DEFAULTS = {
    "SOAP": dict(learning_rate=1e-3, mode="adam", clip_value=1.0, weight_decay=1e-5,
                 epoch_decay=0.0, momentum=0.9, nesterov=False, dampening=0.1,
                 betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "SOPA": dict(learning_rate=1e-3, mode="adam", clip_value=1.0, weight_decay=0.0,
                 epoch_decay=0.0, momentum=0.9, nesterov=False, dampening=0.0,
                 betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "SOPAs": dict(learning_rate=1e-3, mode="adam", clip_value=2.0, weight_decay=1e-5,
                  epoch_decay=0.0, momentum=0.9, nesterov=False, dampening=0.1,
                  betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "SOTAs": dict(learning_rate=1e-3, mode="adam", clip_value=1.0, weight_decay=0.0,
                  epoch_decay=0.0, momentum=0.9, nesterov=False, dampening=0.0,
                  betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "STACO": dict(learning_rate=1e-3, mode="adam", clip_value=1.0, weight_decay=0.0,
                  epoch_decay=0.0, momentum=0.9, nesterov=False, dampening=0.0,
                  betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "SONG": dict(learning_rate=REQUIRED, mode="sgd", clip_value=1.0, weight_decay=0.0,
                 epoch_decay=0.0, momentum=0.9, nesterov=False, dampening=0.0,
                 betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "SGD": dict(learning_rate=REQUIRED, clip_value=1.0, weight_decay=0.0, epoch_decay=0.0,
                momentum=0.0, nesterov=False, dampening=0.0),
    "Adam": dict(learning_rate=1e-3, clip_value=1.0, weight_decay=0.0, epoch_decay=0.0,
                 betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "AdamW": dict(learning_rate=1e-3, clip_value=10.0, weight_decay=1e-2, epoch_decay=0.0,
                  betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "PESG": dict(learning_rate=0.1, mode="sgd", clip_value=1.0, weight_decay=1e-5,
                 epoch_decay=2e-3, momentum=0.9, betas=(0.9, 0.999), eps=1e-8, amsgrad=False),
    "PDSCA": dict(learning_rate=0.1, ce_learning_rate=None, beta1=0.99, beta2=0.999,
                  clip_value=1.0, weight_decay=1e-5, epoch_decay=2e-3),
    "MIDAM": dict(learning_rate=REQUIRED, momentum=0.0, weight_decay=0.0),
    # LibAUC's lr=0 default trains nothing: xrisk requires the rate, as for the others.
    "LARS": dict(learning_rate=REQUIRED, weight_decay=0.0, momentum=0.9, trust_coefficient=1e-3,
                 exclude_1d=True),
}

# name: (optimizer, loss, loss kwargs, optimizer kwargs)
CONFIGS = {
    "soap-adam": ("SOAP", "APLoss", {}, dict(learning_rate=0.05, weight_decay=1e-3,
                                             epoch_decay=0.01)),
    "soap-amsgrad-clip": ("SOAP", "APLoss", {"surrogate": "logistic"},
                          dict(learning_rate=0.05, amsgrad=True, clip_value=0.05)),
    "soap-sgd-nesterov": ("SOAP", "APLoss", {"gamma": 0.5},
                          dict(mode="sgd", learning_rate=0.5, nesterov=True, epoch_decay=0.01)),
    "sopa-sgd-dampening": ("SOPA", "APLoss", {}, dict(mode="sgd", learning_rate=0.3,
                                                      dampening=0.3, epoch_decay=0.01)),
    "sopas-adam": ("SOPAs", "APLoss", {}, dict(learning_rate=0.05, epoch_decay=0.02)),
    "sotas-adam": ("SOTAs", "APLoss", {}, dict(learning_rate=0.05, weight_decay=1e-2)),
    "staco-adam": ("STACO", "APLoss", {}, dict(learning_rate=0.05, clip_value=0.1)),
    "song-sgd": ("SONG", "APLoss", {}, dict(learning_rate=0.5, epoch_decay=0.01)),
    "sgd-plain": ("SGD", "APLoss", {}, dict(learning_rate=0.5, weight_decay=1e-2)),
    "sgd-momentum": ("SGD", "APLoss", {}, dict(learning_rate=0.5, momentum=0.5,
                                               dampening=0.2, epoch_decay=0.01)),
    "adam": ("Adam", "APLoss", {}, dict(learning_rate=0.05, epoch_decay=0.01)),
    "adamw": ("AdamW", "APLoss", {}, dict(learning_rate=0.05, weight_decay=0.1,
                                          epoch_decay=0.01, clip_value=0.2)),
    "pesg-sgd-v1": ("PESG", "AUCMLoss", {}, dict(learning_rate=0.1, epoch_decay=0.01)),
    "pesg-adam-v2": ("PESG", "AUCMLoss", {"version": "v2", "margin": 0.6},
                     dict(mode="adam", learning_rate=0.05)),
    "pesg-no-momentum": ("PESG", "AUCMLoss", {"version": "v2"},
                         dict(learning_rate=0.1, momentum=0.0)),
    "pdsca-k2": ("PDSCA", "CompositionalAUCLoss", {"k": 2, "version": "v2"},
                 dict(learning_rate=0.1, ce_learning_rate=0.3, epoch_decay=0.01)),
    "pdsca-k1-no-average": ("PDSCA", "CompositionalAUCLoss", {"k": 1},
                            dict(learning_rate=0.2, beta1=0.0, beta2=0.5)),
    # MIDAM's rule on AUC-M (its MIDAM losses are checked in tests/test_midam.py)
    "midam-momentum": ("MIDAM", "AUCMLoss", {"version": "v2"},
                       dict(learning_rate=0.1, momentum=0.9, weight_decay=1e-3)),
}
MIN_MAX = {"PESG", "PDSCA", "MIDAM"}
LOSS_DEFAULTS = {
    "APLoss": dict(gamma=0.9, margin=1.0, surrogate="squared_hinge", scale=1.0),
    "AUCMLoss": dict(margin=1.0, version="v1"),
    "CompositionalAUCLoss": dict(k=1, margin=1.0, version="v1"),
}


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(NUM_SAMPLES, NUM_FEATURES))
    y = (rng.random(NUM_SAMPLES) < 0.4).astype(np.int64)
    y[:2] = 1
    batches = [np.concatenate([[0, 1, 0], rng.integers(0, NUM_SAMPLES, 5)]) for _ in range(STEPS)]
    w0, b0 = rng.normal(size=NUM_FEATURES) * 0.3, np.float64(0.1)
    return X, y, batches, w0, b0


def _reference_rule(optimizer, params, loss, opt_kwargs):
    """The numpy copy of ``optimizer`` with LibAUC's defaults and the config's changes."""
    hyper = LIBAUC_DEFAULTS[optimizer] | opt_kwargs
    lr = hyper.pop("learning_rate")
    if optimizer == "PDSCA":
        return _reference.ClippedOptimizer(
            params, kind="PDSCA", lr=lr, lr0=hyper["ce_learning_rate"], beta1=hyper["beta1"],
            beta2=hyper["beta2"], clip_value=hyper["clip_value"],
            weight_decay=hyper["weight_decay"], epoch_decay=hyper["epoch_decay"],
            margin=loss["margin"], k=loss["k"], n_aux=2)
    if optimizer == "MIDAM":  # no clipping, no epoch decay, buf <- mu buf + (1 - mu) d
        return _reference.ClippedOptimizer(
            params, kind="MIDAM", lr=lr, clip_value=np.inf, weight_decay=hyper["weight_decay"],
            momentum=hyper["momentum"], dampening=hyper["momentum"], margin=loss["margin"])
    kind = {"PESG": "PESG", "AdamW": "AdamW"}.get(optimizer, "heavy_ball")
    mode = {"SGD": "sgd", "Adam": "adam", "AdamW": "adam"}.get(optimizer) or hyper.pop("mode")
    hyper.pop("mode", None)
    return _reference.ClippedOptimizer(params, kind=kind, lr=lr, mode=mode,
                                       margin=loss.get("margin", 1.0), **hyper)


def _reference_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w, b = _data()
    loss = LOSS_DEFAULTS[loss_name] | loss_kwargs
    params = [w, b] + ([np.float64(0.0), np.float64(0.0)] if optimizer in MIN_MAX else [])
    alpha = 0.0
    rule = _reference_rule(optimizer, params, loss, opt_kwargs)
    u_all, u_pos = np.zeros(NUM_SAMPLES), np.zeros(NUM_SAMPLES)
    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            rule.update_regularizer(decay_factor=2)
        w, b = params[0], params[1]
        s = 1 / (1 + np.exp(-(X[index] @ w + b)))
        aux_grads = []
        if loss_name == "APLoss":
            _, g, u_all, u_pos = _reference.ap_step(
                u_all, u_pos, s, y[index], index, gamma=loss["gamma"], margin=loss["margin"],
                surrogate_name=loss["surrogate"], scale=loss["scale"])
        elif loss_name == "AUCMLoss":
            _, g, g_a, g_b, _ = _reference.aucm_loss(
                s, y[index], params[2], params[3], alpha, margin=loss["margin"],
                version=loss["version"])
            aux_grads = [g_a, g_b]
        else:
            _, g, grads_aux, _ = compositional_auc(
                s, y[index], params[2], params[3], alpha, step, k=loss["k"],
                margin=loss["margin"], version=loss["version"])
            aux_grads = [grads_aux["a"], grads_aux["b"]]
        gz = g * s * (1 - s)
        grads = [X[index].T @ gz, gz.sum(), *aux_grads]
        if optimizer in MIN_MAX:
            params, alpha = rule.step(params, grads, alpha)
        else:
            params = rule.step(params, grads)
    out = {"w": params[0], "b": params[1]}
    if loss_name == "APLoss":
        out.update(u=np.stack([u_all, u_pos], axis=1))
    else:
        out.update(a=params[2], alpha=alpha, b_aux=params[3])
    return out


def _make_loss(module, loss_name, loss_kwargs):
    args = [NUM_SAMPLES] if loss_name == "APLoss" else []
    return getattr(module, loss_name)(*args, dtype="float64", **loss_kwargs)


def _collect(w, b, exported, loss_name, to_numpy):
    out = {"w": to_numpy(w), "b": to_numpy(b)}
    if loss_name == "APLoss":
        out.update(u=exported["u"])
    else:
        out.update(a=exported["a"], alpha=exported["alpha"], b_aux=exported["b"])
    return out


def _torch_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w0, b0 = _data()
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    loss_fn = _make_loss(xtorch, loss_name, loss_kwargs)
    extra = [loss_fn] if optimizer in MIN_MAX else []
    opt = getattr(xtorch, optimizer)([w, b], *extra, **opt_kwargs)
    X_t, y_t = torch.as_tensor(X), torch.as_tensor(y)
    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            opt.update_regularizer(decay_factor=2)
        index = torch.as_tensor(index)
        opt.zero_grad()
        loss_fn(torch.sigmoid(X_t[index] @ w + b), y_t[index], index).backward()
        opt.step()
    return _collect(w, b, loss_fn.export_state(), loss_name, lambda t: t.detach().numpy())


def _tensorflow_run(optimizer, loss_name, loss_kwargs, opt_kwargs):
    X, y, batches, w0, b0 = _data()
    w, b = tf.Variable(w0), tf.Variable(b0)
    loss_fn = _make_loss(xtf, loss_name, loss_kwargs)
    extra = [loss_fn] if optimizer in MIN_MAX else []
    opt = getattr(xtf, optimizer)([w, b], *extra, **opt_kwargs)  # built now: one trace
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
    loss_fn = _make_loss(xjax, loss_name, loss_kwargs)
    params = {"w": jnp.asarray(w0), "b": jnp.asarray(b0), "loss": loss_fn.init_params()}
    extra = {"loss_fn": loss_fn} if optimizer in MIN_MAX else {}
    opt = getattr(xjax, optimizer)(**extra, **opt_kwargs)  # no params: optax style
    opt_state, loss_state = opt.init(params), loss_fn.init()

    def objective(p, state, x, labels, index):
        scores = jax.nn.sigmoid(x @ p["w"] + p["b"])
        return loss_fn.apply(state, scores, labels, index, params=p["loss"])

    traces = []

    def train_step(p, opt_state, state, x, labels, index):
        traces.append(1)
        grads, state = jax.grad(objective, has_aux=True)(p, state, x, labels, index)
        updates, opt_state = opt.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, state

    train_step = jax.jit(train_step, donate_argnums=(1, 2))
    for step, index in enumerate(batches):
        if step == REGULARIZER_AT:
            opt_state = opt.update_regularizer(opt_state, decay_factor=2)
        params, opt_state, loss_state = train_step(params, opt_state, loss_state, X[index],
                                                   y[index], index)
    assert len(traces) == 1  # update_regularizer's decay did not retrace
    return _collect(params["w"], params["b"], loss_fn.export_state(loss_state, params["loss"]),
                    loss_name, np.asarray)


#: Optimizers whose frameworks are compared in a test of their own (LARS is no clipped rule:
#: core, torch, Keras and optax.lars agree in tests/test_optim_lars.py).
OWN_AGREEMENT_TEST = {"LARS"}


def test_every_optimizer_is_trained_here():
    trained = {config[0] for config in CONFIGS.values()}
    assert trained | OWN_AGREEMENT_TEST == set(xrisk.OPTIMIZERS)


@pytest.mark.parametrize("name", sorted(xrisk.OPTIMIZERS))
def test_defaults_are_libauc_s(name):
    defaults = {n: REQUIRED if p.default is inspect.Parameter.empty else p.default
                for n, p in inspect.signature(xrisk.OPTIMIZERS[name]).parameters.items()
                if n != "loss_fn"}
    assert defaults == LIBAUC_DEFAULTS[name]


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
    if optimizer in MIN_MAX:
        assert expected["alpha"] > 0
