"""Cross-backend identity: numpy reference, numpy/array-api-strict core, torch, JAX and TF.

A property test per registered loss. Hypothesis draws a training *scenario*: the loss's
hyper-parameters (its case's ``hyper`` strategy: gamma, margins, surrogates, ...), the size
of its key spaces (small, so duplicates are common), the number of consecutive steps and,
for every step, that step's inputs from the case's ``batch`` drawer (for a binary loss: the
batch size, the number of positives, from none to all, and the dataset index of every
example, drawn with replacement). Sizes and batch shapes come from a few fixed values
(tests/_sizes.py: 1, a few, the largest), so eager JAX reuses its compiled primitives across
steps, examples and losses. Every backend — numpy and array-api-strict included —
carries its own state from step to step; at every step each one must return the reference's
loss, gradient with respect to every score input, gradient with respect to the weights of
the linear model that makes those inputs, gradients of the trainable auxiliaries and new
state, to a relative 1e-10 in float64 (float32: see :data:`FLOAT32`). JAX runs eagerly in
float64 and under ``jax.jit`` in float32 (see :data:`FLOAT32_BACKENDS`).

Profiles (tests/conftest.py): the default one runs a few deterministic examples; run
``HYPOTHESIS_PROFILE=thorough`` for hundreds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
from tests._cases import CASES, NUM_FEATURES
from tests._frameworks import (
    FRAMEWORKS,
    NO_AUTODIFF,
    model_scores,
    reference_weight_grad,
    run_step,
    score_names,
    state_dtype,
)
from tests._sizes import KEY_SPACES, draw_size

FLOAT64 = {"rtol": 1e-10, "atol": 1e-12}
# float32 state and inputs against the float64 reference: the weights 1/u² of AP amplify
# the float32 rounding of u, so gradients are compared with a looser absolute floor.
FLOAT32 = {"rtol": 2e-4, "atol": 2e-5}
ALL_BACKENDS = FRAMEWORKS + NO_AUTODIFF
#: float32 runs JAX's step under ``jax.jit``, as a JAX user trains, and float64 eagerly (the
#: path of the host-side shortcuts): each compiled path is checked against the reference in
#: one dtype, and tests/test_jit.py checks jit against eager. Eager JAX compiles every
#: primitive for every new shape, about 2 s a shape here, against about 0.3 s for the whole
#: jitted step (with test_grouping, test_mixed_dtypes and test_hardening_traced in one
#: process: 5239 -> 3037 XLA compiles, 260 -> 184 s of CPU).
FLOAT32_BACKENDS = tuple("jax.jit" if b == "jax" else b for b in ALL_BACKENDS)


class Scenario(NamedTuple):
    hyper: dict
    size: int  # sizes the loss's key spaces (small, so duplicates are common)
    w: np.ndarray  # (NUM_FEATURES,) weights of the model, scores = link(features @ w)
    params: dict  # initial trainable auxiliaries (numpy)
    batches: list[dict]  # one step's inputs each, score inputs as features


@st.composite
def scenarios(draw, name, *, max_steps=4, hyper=None):
    """One run of 3 to ``max_steps`` consecutive steps of the loss ``name``."""
    case = CASES[name]
    chosen = draw(case.hyper if hyper is None else st.just(hyper), label="hyper")
    size = draw_size(draw, KEY_SPACES, label="size")
    steps = draw(st.integers(3, max_steps), label="steps")
    seed = draw(st.integers(0, 2**32 - 1), label="seed of the float values")
    rng = np.random.default_rng(seed)
    definition = case.make(size, chosen)
    batches = [case.batch(draw, definition, rng) for _ in range(steps)]
    return Scenario(chosen, size, rng.normal(size=NUM_FEATURES), case.initial_params(rng),
                    batches)


def _initial_state(definition):
    import array_api_compat.numpy as xp

    return {name: np.asarray(value) for name, value in
            definition.init(xp=xp, dtype=xp.float64)._asdict().items()}


def check_scenario(name, scenario, *, dtype, tolerance, backends=ALL_BACKENDS):
    """Run ``scenario`` on every backend, each carrying its own state; compare every step."""
    case = CASES[name]
    definition = case.make(scenario.size, scenario.hyper)
    params, w = scenario.params, scenario.w
    reference_state = _initial_state(definition)
    states = {backend: reference_state for backend in backends}
    for step, inputs in enumerate(scenario.batches):
        names = score_names(definition, inputs)
        loss, grads, grad_params, new_reference = case.reference(
            definition, reference_state, params,
            **{**inputs, **model_scores(inputs, names, w, case.link)})
        assert set(grads) == set(names), f"{name}: reference gradients {sorted(grads)}"
        for backend in backends:
            result = run_step(backend, definition, states[backend], params, inputs, w,
                              link=case.link, dtype=dtype)
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
            for input_name, grad in grads.items():
                assert_allclose(result.grad_inputs[input_name], grad, **tolerance,
                                err_msg=f"d/d{input_name}, {where}")
            assert_allclose(result.grad_weights,
                            reference_weight_grad(inputs, w, grads, case.link), **tolerance,
                            err_msg=f"d/dw, {where}")
            for field, value in grad_params.items():
                # an ascent auxiliary reports -dL/dx: any descent optimizer ascends on it
                # (LossDefinition._saddle_point; tests/test_foreign_optimizers.py)
                ascent = definition.auxiliaries()[field].role == "ascent"
                assert_allclose(result.grad_params[field], -value if ascent else value,
                                **tolerance, err_msg=f"d/d{field}, {where}")
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
    check_scenario(name, scenario, dtype=np.float32, tolerance=FLOAT32,
                   backends=FLOAT32_BACKENDS)


def test_a_backend_that_drops_its_state_is_caught(monkeypatch):
    """The harness compares each backend's carried state: a backend that forgets its state
    between steps (as numpy and array-api-strict once did, reset to the reference) fails."""
    import tests._frameworks as frameworks

    original = frameworks._no_autodiff

    def forgetful(framework, definition, state, *args):
        fresh = {k: np.zeros_like(v) for k, v in state.items()}
        return original(framework, definition, fresh, *args)

    monkeypatch.setattr(frameworks, "_no_autodiff", forgetful)
    rng = np.random.default_rng(0)
    batches = [{"scores": rng.normal(size=(4, NUM_FEATURES)), "labels": np.array([1, 0, 1, 0]),
                "index": np.array([0, 1, 2, 3])} for _ in range(2)]
    scenario = Scenario({}, 4, rng.normal(size=NUM_FEATURES), {}, batches)
    with pytest.raises(AssertionError, match="step 1, on numpy"):
        check_scenario("APLoss", scenario, dtype=np.float64, tolerance=FLOAT64,
                       backends=("numpy",))
