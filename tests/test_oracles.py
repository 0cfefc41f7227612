"""Oracles and frozen vectors: the true AP objective, the AUC-M v2 vector, hand cases."""

from __future__ import annotations

import array_api_compat.numpy as xp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

import xrisk
from tests._cases import SURROGATE_NAMES


@pytest.mark.parametrize("surrogate", SURROGATE_NAMES)
def test_ap_gradient_equals_autodiff_of_the_compositional_objective(surrogate):
    """Full batch, gamma = 1: u holds the exact inner functions, so the dynamic loss's
    gradient is the gradient of F(s) = -(1/n+) sum_i f_pos,i / f_all,i, at every step."""
    rng = np.random.default_rng(7)
    n = 12
    labels = torch.as_tensor(rng.integers(0, 2, n))
    labels[:2] = 1
    index = torch.arange(n)
    definition = xrisk.APLoss(n, gamma=1.0, margin=0.8, surrogate=surrogate, scale=1.5)
    state = definition.init(xp=xrisk.backends.get_backend("torch").namespace,
                            dtype=torch.float64)
    positive = labels.double()

    def objective(s):
        pair = xrisk.surrogates.surrogate_loss(
            surrogate, s[:, None] - s[None, :], margin=0.8, scale=1.5,
            xp=xrisk.backends.get_backend("torch").namespace)
        f_all = pair.mean(dim=1)
        f_pos = (pair * positive[None, :]).mean(dim=1)
        return -((f_pos / f_all) * positive).sum() / positive.sum()

    for step in range(2):
        scores = torch.as_tensor(rng.uniform(0.05, 0.95, n), dtype=torch.float64)
        scores.requires_grad_(True)
        loss, state = definition.apply(state, scores, labels, index)
        (dynamic,) = torch.autograd.grad(loss, scores)
        (true,) = torch.autograd.grad(objective(scores), scores)
        assert_allclose(dynamic.numpy(), true.numpy(), rtol=1e-10, atol=1e-13,
                        err_msg=f"step {step}")


def test_ap_oracle_in_jax_too():
    rng = np.random.default_rng(1)
    n = 9
    labels = jnp.asarray([1, 0, 1, 1, 0, 0, 1, 0, 0])
    definition = xrisk.APLoss(n, gamma=1.0)
    state = definition.init(xp=jnp, dtype=jnp.float64)
    scores = jnp.asarray(rng.uniform(0, 1, n))
    positive = labels.astype(jnp.float64)

    def objective(s):
        pair = jnp.maximum(1.0 - (s[:, None] - s[None, :]), 0.0) ** 2
        f_all, f_pos = pair.mean(1), (pair * positive[None, :]).mean(1)
        return -((f_pos / f_all) * positive).sum() / positive.sum()

    dynamic = jax.grad(lambda s: definition.apply(state, s, labels, jnp.arange(n))[0])(scores)
    assert_allclose(np.asarray(dynamic), np.asarray(jax.grad(objective)(scores)), rtol=1e-10)


def test_aucm_v2_vector_of_libauc_issue_74():
    """LibAUC issue #74's example: the intended v2 math gives 0.57625 (LibAUC 2.0.1: 0.45125)."""
    loss_fn = xrisk.AUCMLoss(version="v2", margin=1.0)
    params = xrisk.AUCMParams(np.float64(0.3), np.float64(0.2), np.float64(0.5))
    value, _ = loss_fn.apply(loss_fn.init(xp=xp), np.array([0.1, 0.4, 0.35, 0.8]),
                             np.array([0, 0, 1, 1]), params=params)
    assert_allclose(float(value), 0.57625, rtol=1e-12)


def test_aucm_v1_hand_case():
    # s = [0.2, 0.7, 0.9], y = [0, 1, 1], a = 0.5, b = 0.1, alpha = 1, m = 1, p = 2/3:
    # (1/3)(0.04 + 0.16)/3 + (2/3)(0.01)/3 + 2(2/9 + (2/3·0.2 - 1/3·1.6)/3) - 2/9 = -0.02
    expected = (1 / 3) * 0.2 / 3 + (2 / 3) * 0.01 / 3 \
        + 2 * (2 / 9 + ((2 / 3) * 0.2 - (1 / 3) * 1.6) / 3) - 2 / 9
    loss_fn = xrisk.AUCMLoss()
    params = xrisk.AUCMParams(np.float64(0.5), np.float64(0.1), np.float64(1.0))
    value, _ = loss_fn.apply(loss_fn.init(xp=xp), np.array([0.2, 0.7, 0.9]),
                             np.array([0, 1, 1]), params=params)
    assert_allclose(float(value), expected, rtol=1e-12)
    assert_allclose(expected, -0.02, rtol=1e-12)  # the same sum, worked out by hand


def test_ap_hand_case_first_step():
    """Hand-computed squared-hinge estimates for scores [0.9, 0.2, 0.6, 0.4], y = [1, 0, 1, 0]:
    u_all[0] = 0.9·(1 + 0.09 + 0.49 + 0.25)/4, u_pos[0] = 0.9·(1 + 0.49)/4, etc.; the first
    loss is exactly 0 because u equals gamma times the batch estimates."""
    loss_fn = xrisk.APLoss(5)
    state = loss_fn.init(xp=xp, dtype=xp.float64)
    value, state = loss_fn.apply(state, np.array([0.9, 0.2, 0.6, 0.4]), np.array([1, 0, 1, 0]),
                                 np.array([0, 1, 2, 3]))
    u_all, u_pos = state.u[:, 0], state.u[:, 1]
    assert_allclose(u_all, [0.9 * 1.83 / 4, 0, 0.9 * 3.69 / 4, 0, 0], rtol=1e-12)
    assert_allclose(u_pos, [0.9 * 1.49 / 4, 0, 0.9 * 2.69 / 4, 0, 0], rtol=1e-12)
    assert abs(float(value)) < 1e-15
    # Second step: u ← 0.1·u + 0.9·new, and the loss is no longer 0.
    value, state = loss_fn.apply(state, np.array([0.5, 0.3]), np.array([1, 0]),
                                 np.array([0, 1]))
    new_all = (1 + (1 - 0.2) ** 2) / 2
    assert_allclose(state.u[0, 0], 0.1 * 0.9 * 1.83 / 4 + 0.9 * new_all, rtol=1e-12)
    assert_allclose(state.u[1], [0, 0])  # a negative's row is never written
    u_all, u_pos = state.u[0]
    expected = ((u_pos - u_all) * 1 + u_pos * 0.64) / u_all**2 / 2
    assert_allclose(float(value), expected, rtol=1e-12)
