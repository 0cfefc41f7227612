"""Cross-backend identity: numpy reference, numpy/array-api-strict core, torch, JAX and TF.

For random float64 batches over three consecutive steps (indices drawn with replacement, so
duplicates occur; some batches have no positive), every backend returns the reference's
loss, gradient with respect to the scores, gradient with respect to the weights of a linear
model, gradients of the trainable auxiliaries and new state, to a relative 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
from tests._cases import CASES
from tests._frameworks import FRAMEWORKS, NO_AUTODIFF, reference_weight_grad, run_step, sigmoid

FLOAT64 = {"rtol": 1e-10, "atol": 1e-12}
# float32 state and inputs against the float64 reference: the weights 1/u² of AP amplify
# the float32 rounding of u, so gradients are compared with a looser absolute floor.
FLOAT32 = {"rtol": 2e-4, "atol": 2e-5}


def _initial_state(definition):
    import array_api_compat.numpy as xp

    return {name: np.asarray(value) for name, value in
            definition.init(xp=xp, dtype=xp.float64)._asdict().items()}


def _batches(seed, num_samples, batch, steps, num_features=3):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=num_features)
    for step in range(steps):
        X = rng.normal(size=(batch, num_features))
        labels = rng.integers(0, 2, size=batch)
        if step == 1 and rng.random() < 0.3:
            labels[:] = 0  # a batch without positives now and then
        index = rng.integers(0, num_samples, size=batch)  # with repeats
        yield X, w, labels, index


def _check_steps(name, hyper, seed, num_samples, batch, dtype, tolerance, frameworks):
    case = CASES[name]
    definition = case.make(num_samples, hyper)
    rng = np.random.default_rng(seed + 1)
    params = case.initial_params(rng)
    reference_state = _initial_state(definition)
    states = {fw: reference_state for fw in frameworks}
    for X, w, labels, index in _batches(seed, num_samples, batch, steps=3):
        loss, grad, grad_params, new_reference = case.reference(
            definition, reference_state, params, sigmoid(X @ w), labels, index)
        for fw in frameworks:
            result = run_step(fw, definition, states[fw], params, X, w, labels, index, dtype)
            where = f"{name} {hyper} on {fw}"
            assert_allclose(result.loss, loss, **tolerance, err_msg=f"loss, {where}")
            for field, value in new_reference.items():
                assert result.state[field].dtype == np.dtype(dtype), where
                assert_allclose(result.state[field], value, **tolerance,
                                err_msg=f"state {field}, {where}")
            if fw in NO_AUTODIFF:
                continue
            assert_allclose(result.grad_scores, grad, **tolerance, err_msg=f"d/ds, {where}")
            assert_allclose(result.grad_weights, reference_weight_grad(X, w, grad), **tolerance,
                            err_msg=f"d/dw, {where}")
            for field, value in grad_params.items():
                assert_allclose(result.grad_params[field], value, **tolerance,
                                err_msg=f"d/d{field}, {where}")
            states[fw] = result.state
        states.update({fw: new_reference for fw in frameworks if fw in NO_AUTODIFF})
        reference_state = new_reference


def test_every_registered_loss_has_a_harness_case():
    assert set(CASES) == set(xrisk.LOSSES)


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_backends_agree_float64(name, data):
    batch = data.draw(st.integers(2, 9), label="batch")
    _check_steps(
        name,
        data.draw(CASES[name].hyper, label="hyper"),
        data.draw(st.integers(0, 2**31), label="seed"),
        num_samples=data.draw(st.integers(1, 12), label="num_samples"),
        batch=batch,
        dtype=np.float64,
        tolerance=FLOAT64,
        frameworks=FRAMEWORKS + NO_AUTODIFF,
    )


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [3, 11])
def test_backends_agree_float32(name, seed):
    hyper = {}  # the defaults of the loss
    _check_steps(name, hyper, seed, num_samples=10, batch=8, dtype=np.float32,
                 tolerance=FLOAT32, frameworks=FRAMEWORKS)
