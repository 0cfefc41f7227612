"""LARS: the core rule, torch, Keras and JAX (optax.lars itself) give the same update.

Parameters: a matrix, a vector (excluded from weight decay and the trust ratio), a matrix
whose gradient is 0 at one step and a zero matrix (trust ratio 1 where a norm is 0). Five
steps, with a constant learning rate and with one that changes every step (the momentum
keeps the rate each step was taken with, as optax does).
"""

from __future__ import annotations

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

STEPS = 5
HYPER = dict(weight_decay=0.01, momentum=0.9, trust_coefficient=0.02)


def _problem():
    rng = np.random.default_rng(0)
    params = [rng.normal(size=(3, 2)), rng.normal(size=(2,)), rng.normal(size=(2, 2)),
              np.zeros((2, 3))]
    grads = [[rng.normal(size=p.shape) for p in params] for _ in range(STEPS)]
    grads[1][2] = np.zeros((2, 2))  # a zero gradient (and no weight decay: d = wd θ != 0)
    return params, grads


def _rate(step):
    return 0.5 / (1 + step)


def _numpy_lars(params, grads, schedule, exclude_1d=True):
    """LARS written out: d = g + wd θ, q = c|θ|/|d| (1 if a norm is 0), buf = μ buf + lr q d,
    θ -= buf (vectors: d = g, q = 1)."""
    params = [p.copy() for p in params]
    buffers = [np.zeros_like(p) for p in params]
    for step, step_grads in enumerate(grads):
        lr = _rate(step) if schedule else 0.5
        for k, (p, g) in enumerate(zip(params, step_grads)):
            d = g.copy()
            if not (exclude_1d and p.ndim <= 1):
                d = d + HYPER["weight_decay"] * p
                pn, dn = np.linalg.norm(p), np.linalg.norm(d)
                d = d * (HYPER["trust_coefficient"] * pn / dn if pn > 0 and dn > 0 else 1.0)
            buffers[k] = HYPER["momentum"] * buffers[k] + lr * d
            params[k] = p - buffers[k]
    return params


def _core(params, grads, schedule, exclude_1d=True):
    rule = xrisk.LARS(learning_rate=_rate if schedule else 0.5, exclude_1d=exclude_1d,
                      **HYPER)
    params = [p.copy() for p in params]
    state = rule.init(params)
    for step_grads in grads:
        params, _, state = rule.update(step_grads, state, params)
    return params


def _torch(params, grads, schedule, exclude_1d=True):
    tensors = [torch.nn.Parameter(torch.tensor(p)) for p in params]
    opt = xtorch.LARS(tensors, learning_rate=0.5, exclude_1d=exclude_1d, **HYPER)
    for step, step_grads in enumerate(grads):
        if schedule:
            opt.param_groups[0]["lr"] = _rate(step)
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)
        opt.step()
    return [t.detach().numpy() for t in tensors]


def _keras(params, grads, schedule, exclude_1d=True):
    variables = [tf.Variable(p) for p in params]
    rate = (lambda step: 0.5 / (1 + tf.cast(step, tf.float64))) if schedule else 0.5
    opt = xtf.LARS(learning_rate=rate, exclude_1d=exclude_1d, **HYPER)
    for step_grads in grads:
        opt.apply_gradients([(tf.constant(g), v) for g, v in zip(step_grads, variables)])
    return [v.numpy() for v in variables]


def _jax(params, grads, schedule, exclude_1d=True):
    import jax
    import jax.numpy as jnp  # float64: tests/conftest.py enables jax_enable_x64

    rate = (lambda step: 0.5 / (1 + step)) if schedule else 0.5
    opt = xjax.LARS(learning_rate=rate, exclude_1d=exclude_1d, **HYPER)
    tree = [jnp.asarray(p) for p in params]
    state = opt.init(tree)
    update = jax.jit(opt.update)
    for step_grads in grads:
        updates, state = update([jnp.asarray(g) for g in step_grads], state, tree)
        tree = optax.apply_updates(tree, updates)
    return [np.asarray(t) for t in tree]


@pytest.mark.parametrize("exclude_1d", [True, False])
@pytest.mark.parametrize("schedule", [False, True], ids=["constant", "schedule"])
def test_core_torch_keras_and_optax_give_the_same_update(schedule, exclude_1d):
    params, grads = _problem()
    expected = _numpy_lars(params, grads, schedule, exclude_1d)
    for name, run in (("core", _core), ("torch", _torch), ("keras", _keras), ("jax", _jax)):
        got = run(params, grads, schedule, exclude_1d)
        for k, (a, b) in enumerate(zip(got, expected)):
            assert_allclose(a, b, rtol=1e-12, atol=1e-15, err_msg=f"{name}, parameter {k}")
    assert not np.allclose(expected[3], params[3])  # the zero matrix moved (trust ratio 1)


def test_constant_rate_equals_libauc_lr_outside_the_momentum():
    """LibAUC's SogCLR/LARS: buf = μ buf + q d, θ -= lr buf: the same steps at a constant
    learning rate."""
    params, grads = _problem()
    ours = _core(params, grads, schedule=False)
    theirs = [p.copy() for p in params]
    buffers = [np.zeros_like(p) for p in params]
    for step_grads in grads:
        for k, (p, g) in enumerate(zip(theirs, step_grads)):
            d = g.copy()
            if p.ndim > 1:
                d = d + HYPER["weight_decay"] * p
                pn, dn = np.linalg.norm(p), np.linalg.norm(d)
                d = d * (HYPER["trust_coefficient"] * pn / dn if pn > 0 and dn > 0 else 1.0)
            buffers[k] = HYPER["momentum"] * buffers[k] + d
            theirs[k] = p - 0.5 * buffers[k]
    for a, b in zip(ours, theirs):
        assert_allclose(a, b, rtol=1e-12)


def test_bad_arguments_name_value_expectation_and_fix():
    with pytest.raises(ValueError, match=r"trust_coefficient=0.0; expected a number in "
                                         r"\(0, ∞\).*Fix:"):
        xrisk.LARS(learning_rate=0.1, trust_coefficient=0.0)
    with pytest.raises(TypeError, match=r"exclude_1d='yes' \(type str\); expected True or "
                                        r"False. Fix:"):
        xtorch.LARS([torch.zeros(2, requires_grad=True)], learning_rate=0.1, exclude_1d="yes")
    with pytest.raises(TypeError, match=r"called learning_rate in xrisk"):
        xjax.LARS(lr=0.1)
    with pytest.raises(TypeError, match=r"optax.lars.*Fix: xr.LARS\(learning_rate=optax"):
        opt = xjax.LARS(learning_rate=0.1)
        opt.update_lr(opt.init({"w": np.ones((2, 2))}), 10)
