"""Surrogates: LibAUC 2.0.1's formulas, the logistic without overflow."""

from __future__ import annotations

import array_api_compat.numpy as xp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from numpy.testing import assert_allclose

from xrisk.backends import get_backend
from xrisk.surrogates import SURROGATES, surrogate_loss

T = np.linspace(-3, 3, 61)


@pytest.mark.parametrize("margin, scale", [(1.0, 1.0), (0.5, 2.0)])
def test_values_follow_the_libauc_formulas(margin, scale):
    formulas = {
        "squared_hinge": np.maximum(margin - T, 0) ** 2,
        "hinge": np.maximum(margin - T, 0),
        "squared": (margin - T) ** 2,
        "logistic": np.log(1 + np.exp(-scale * T)),
        "barrier_hinge": np.maximum(-scale * (margin + T) + margin,
                                    np.maximum(margin - T, scale * (T - margin))),
    }
    assert set(formulas) == set(SURROGATES)
    for name, expected in formulas.items():
        got = surrogate_loss(name, T, margin=margin, scale=scale, xp=xp)
        assert_allclose(got, expected, rtol=1e-12, atol=1e-15, err_msg=name)


def _value_and_grad(framework, t):
    backend = get_backend(framework)
    if framework == "torch":
        x = torch.tensor(t, requires_grad=True)
        y = surrogate_loss("logistic", x, scale=10.0, xp=backend.namespace)
        y.sum().backward()
        return y.detach().numpy(), x.grad.numpy()
    if framework == "jax":
        fn = lambda x: surrogate_loss("logistic", x, scale=10.0, xp=jnp)  # noqa: E731
        return np.asarray(fn(jnp.asarray(t))), np.asarray(
            jax.grad(lambda x: fn(x).sum())(jnp.asarray(t)))
    x = tf.constant(t)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = surrogate_loss("logistic", x, scale=10.0, xp=backend.namespace)
    return y.numpy(), tape.gradient(y, x).numpy()


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_logistic_is_finite_where_the_naive_form_overflows(framework):
    t = np.array([-50.0, -9.0, 0.0, 9.0, 50.0], dtype=np.float32)  # -scale·t up to 500
    value, grad = _value_and_grad(framework, t)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    reference = np.logaddexp(0, -10.0 * t.astype(np.float64))
    assert_allclose(value, reference, rtol=1e-6, atol=1e-30)
    assert_allclose(grad, -10.0 / (1 + np.exp(10.0 * t.astype(np.float64))), rtol=1e-5,
                    atol=1e-30)
    assert grad[2] == pytest.approx(-5.0)  # σ(0)·scale at the kink-free centre
