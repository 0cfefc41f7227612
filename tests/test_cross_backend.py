"""Cross-backend identity: numpy reference, numpy/array-api-strict core, torch, JAX and TF.

A property test per registered loss. Hypothesis draws a training *scenario*: the loss's
hyper-parameters (its case's ``hyper`` strategy: gamma, margins, surrogates, ...), the table
size ``num_samples`` (small, so duplicates are common), the batch size, the number of
consecutive steps and, for every step, the number of positives (from none to all) and the
dataset index of every example, drawn with replacement. Every backend — numpy and
array-api-strict included — carries its own state from step to step; at every step each one
must return the reference's loss, gradient with respect to the scores, gradient with respect
to the weights of a linear model, gradients of the trainable auxiliaries and new state, to a
relative 1e-10 in float64 (float32: see :data:`FLOAT32`).

Profiles (tests/conftest.py): the default one runs a few deterministic examples; run
``HYPOTHESIS_PROFILE=thorough`` for hundreds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
from tests._cases import CASES
from tests._frameworks import (
    FRAMEWORKS,
    NO_AUTODIFF,
    reference_weight_grad,
    run_step,
    sigmoid,
    state_dtype,
)

FLOAT64 = {"rtol": 1e-10, "atol": 1e-12}
# float32 state and inputs against the float64 reference: the weights 1/u² of AP amplify
# the float32 rounding of u, so gradients are compared with a looser absolute floor.
FLOAT32 = {"rtol": 2e-4, "atol": 2e-5}
ALL_BACKENDS = FRAMEWORKS + NO_AUTODIFF
NUM_FEATURES = 3


class Batch(NamedTuple):
    X: np.ndarray  # (B, NUM_FEATURES) features of a linear model
    labels: np.ndarray  # (B,) in {0, 1}
    index: np.ndarray  # (B,) dataset index, with repeats


class Scenario(NamedTuple):
    hyper: dict
    num_samples: int
    w: np.ndarray  # (NUM_FEATURES,) weights of the model, scores = sigmoid(X @ w)
    params: dict  # initial trainable auxiliaries (numpy)
    batches: list[Batch]


@st.composite
def scenarios(draw, name, *, max_batch=9, max_steps=4, hyper=None):
    """One run of 3 to ``max_steps`` consecutive steps of the loss ``name``."""
    case = CASES[name]
    chosen = draw(case.hyper if hyper is None else st.just(hyper), label="hyper")
    num_samples = draw(st.integers(1, 12), label="num_samples")
    batch = draw(st.integers(1, max_batch), label="batch size")
    steps = draw(st.integers(3, max_steps), label="steps")
    seed = draw(st.integers(0, 2**32 - 1), label="seed of the float values")
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(steps):
        positives = draw(st.integers(0, batch), label="positives in the batch")
        order = draw(st.permutations(range(batch)), label="positions of the positives")
        labels = np.zeros(batch, dtype=np.int64)
        labels[list(order[:positives])] = 1
        index = np.asarray(draw(st.lists(st.integers(0, num_samples - 1), min_size=batch,
                                         max_size=batch), label="index"), dtype=np.int64)
        if len(np.unique(index[labels == 1])) < positives:
            event("duplicate positive indices")
        batches.append(Batch(rng.normal(size=(batch, NUM_FEATURES)), labels, index))
    return Scenario(chosen, num_samples, rng.normal(size=NUM_FEATURES),
                    case.initial_params(rng), batches)


def _initial_state(definition):
    import array_api_compat.numpy as xp

    return {name: np.asarray(value) for name, value in
            definition.init(xp=xp, dtype=xp.float64)._asdict().items()}


def check_scenario(name, scenario, *, dtype, tolerance, backends=ALL_BACKENDS):
    """Run ``scenario`` on every backend, each carrying its own state; compare every step."""
    case = CASES[name]
    definition = case.make(scenario.num_samples, scenario.hyper)
    params, w = scenario.params, scenario.w
    reference_state = _initial_state(definition)
    states = {backend: reference_state for backend in backends}
    for step, (X, labels, index) in enumerate(scenario.batches):
        loss, grad, grad_params, new_reference = case.reference(
            definition, reference_state, params, sigmoid(X @ w), labels, index)
        for backend in backends:
            result = run_step(backend, definition, states[backend], params, X, w, labels, index,
                              dtype)
            where = f"{definition!r}, step {step}, on {backend}"
            assert_allclose(result.loss, loss, **tolerance, err_msg=f"loss, {where}")
            assert set(result.state) == set(new_reference), where
            for field, value in new_reference.items():
                assert result.state[field].dtype == state_dtype(definition, field, dtype), where
                assert_allclose(result.state[field], value, **tolerance,
                                err_msg=f"state {field}, {where}")
            states[backend] = result.state  # every backend goes on from its own state
            if backend in NO_AUTODIFF:
                continue
            assert_allclose(result.grad_scores, grad, **tolerance, err_msg=f"d/ds, {where}")
            assert_allclose(result.grad_weights, reference_weight_grad(X, w, grad), **tolerance,
                            err_msg=f"d/dw, {where}")
            for field, value in grad_params.items():
                assert_allclose(result.grad_params[field], value, **tolerance,
                                err_msg=f"d/d{field}, {where}")
        reference_state = new_reference


def test_every_registered_loss_has_a_harness_case():
    assert set(CASES) == set(xrisk.LOSSES)


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_backends_agree_float64(name, data):
    scenario = data.draw(scenarios(name), label="scenario")
    check_scenario(name, scenario, dtype=np.float64, tolerance=FLOAT64)


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
def test_backends_agree_float32(name, data):
    # The loss's defaults: FLOAT32 is stated for them (a tiny margin makes AP's 1/u² weights
    # amplify float32 rounding without bound).
    scenario = data.draw(scenarios(name, hyper={}), label="scenario")
    check_scenario(name, scenario, dtype=np.float32, tolerance=FLOAT32)


def test_a_backend_that_drops_its_state_is_caught(monkeypatch):
    """The harness compares each backend's carried state: a backend that forgets its state
    between steps (as numpy and array-api-strict once did, reset to the reference) fails."""
    import tests._frameworks as frameworks

    original = frameworks._no_autodiff

    def forgetful(framework, definition, state, params, X, w, labels, index):
        fresh = {k: np.zeros_like(v) for k, v in state.items()}
        return original(framework, definition, fresh, params, X, w, labels, index)

    monkeypatch.setattr(frameworks, "_no_autodiff", forgetful)
    rng = np.random.default_rng(0)
    batches = [Batch(rng.normal(size=(4, NUM_FEATURES)), np.array([1, 0, 1, 0]),
                     np.array([0, 1, 2, 3])) for _ in range(2)]
    scenario = Scenario({}, 4, rng.normal(size=NUM_FEATURES), {}, batches)
    with pytest.raises(AssertionError, match="step 1, on numpy"):
        check_scenario("APLoss", scenario, dtype=np.float64, tolerance=FLOAT64,
                       backends=("numpy",))
