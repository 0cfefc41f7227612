"""Partial-AUC losses (SOPA, SOPAs, SOTAs, STACO): oracles, stability, edge cases, input checks.

The identity with the numpy reference on every backend runs in tests/test_cross_backend.py
(through tests/_cases.py) and jit in tests/test_jit.py; this file holds what is specific to
the family: the gradient at gamma = 1 on the full data set equals autodiff of the true
objective, the shifted KL estimators stay finite for logits and over long runs, the front
door ``pAUCLoss`` and the constructor checks.
"""

from __future__ import annotations

import doctest

import array_api_compat.numpy as np_xp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from tests._cases import CASES, SURROGATE_NAMES

NAMES = ("pAUC_CVaR_Loss", "pAUC_DRO_Loss", "tpAUC_KL_Loss", "tpAUC_CVaR_Loss")
ADAPTERS = {"torch": xtorch, "tensorflow": xtf, "jax": xjax}
MODES = {"SOPA": "pAUC_CVaR_Loss", "SOPAs": "pAUC_DRO_Loss", "1w": "pAUC_DRO_Loss",
         "SOTAs": "tpAUC_KL_Loss", "2w": "tpAUC_KL_Loss", "STACO": "tpAUC_CVaR_Loss"}


def _numpy_state(definition, dtype=np.float64):
    return {k: np.asarray(v) for k, v in
            definition.init(xp=np_xp, dtype=np.dtype(dtype).type)._asdict().items()}


def _step(framework, definition, state, scores, labels, index, dtype):
    """(loss, d loss / d scores or None, new state) of one core step, all numpy."""
    labels, index = np.asarray(labels), np.asarray(index)
    scores = np.asarray(scores, dtype=dtype)
    state = {k: np.asarray(v, dtype=dtype) for k, v in state.items()}
    if framework == "numpy":
        loss, new = definition.apply(definition.state_type(**state), scores, labels, index)
        return float(loss), None, {k: np.asarray(v) for k, v in new._asdict().items()}
    if framework == "torch":
        s = torch.tensor(scores, requires_grad=True)
        loss, new = definition.apply(
            definition.state_type(**{k: torch.tensor(v) for k, v in state.items()}), s,
            torch.as_tensor(labels), torch.as_tensor(index))
        loss.backward()
        return float(loss.detach()), s.grad.numpy(), {k: v.detach().numpy()
                                                     for k, v in new._asdict().items()}
    if framework == "jax":
        st_j = definition.state_type(**{k: jnp.asarray(v) for k, v in state.items()})
        (loss, new), grad = jax.jit(jax.value_and_grad(
            lambda s: definition.apply(st_j, s, jnp.asarray(labels), jnp.asarray(index)),
            has_aux=True))(jnp.asarray(scores))
        return float(loss), np.asarray(grad), {k: np.asarray(v)
                                               for k, v in new._asdict().items()}
    s = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(s)
        loss, new = definition.apply(
            definition.state_type(**{k: tf.constant(v) for k, v in state.items()}), s,
            tf.constant(labels), tf.constant(index))
    return float(loss), tape.gradient(loss, s).numpy(), {k: v.numpy()
                                                         for k, v in new._asdict().items()}


# --------------------------------------------------------------------------- oracles

def _pair_losses(scores, positive, surrogate, margin, scale):
    """l_ij for i in P (rows), j in N (columns), by the core's surrogate, in JAX."""
    value = xrisk.surrogates.surrogate_loss(surrogate, scores[:, None] - scores[None, :],
                                            margin=margin, scale=scale, xp=jnp)
    return value[positive][:, ~positive]


@pytest.mark.parametrize("surrogate", SURROGATE_NAMES)
@pytest.mark.parametrize("lam", [0.1, 1.0, 3.0])
def test_sopas_gradient_equals_autodiff_of_the_kl_dro_objective(surrogate, lam):
    """gamma = 1, the whole data set in one batch: u_i is exactly mean_j exp(l_ij / lam), so
    the dynamic loss's gradient is that of F = mean_{i in P} lam log mean_{j in N}
    exp(l_ij / lam), at every step."""
    rng = np.random.default_rng(3)
    n = 11
    labels = np.r_[np.ones(4, np.int64), np.zeros(n - 4, np.int64)][rng.permutation(n)]
    positive = labels == 1
    definition = xrisk.pAUC_DRO_Loss(n, gamma=1.0, lam=lam, margin=0.8, surrogate=surrogate,
                                     scale=1.5)

    def objective(s):
        z = _pair_losses(s, positive, surrogate, 0.8, 1.5) / lam
        return jnp.mean(lam * (jax.nn.logsumexp(z, axis=1) - jnp.log(z.shape[1])))

    state = definition.init(xp=jnp, dtype=jnp.float64)
    for step in range(3):
        scores = jnp.asarray(rng.uniform(-2, 2, n))
        (_, state), dynamic = jax.value_and_grad(
            lambda s, st=state: definition.apply(st, s, jnp.asarray(labels), jnp.arange(n)),
            has_aux=True)(scores)
        assert_allclose(np.asarray(dynamic), np.asarray(jax.grad(objective)(scores)),
                        rtol=1e-10, atol=1e-13, err_msg=f"step {step}")


@pytest.mark.parametrize("surrogate", SURROGATE_NAMES)
@pytest.mark.parametrize("lam, tau", [(1.0, 1.0), (0.5, 2.0), (0.2, 0.1)])
def test_sotas_gradient_equals_autodiff_of_the_two_way_objective(surrogate, lam, tau):
    """gammas = (1, 1), the whole data set in one batch: u_i and w are exact, so the gradient
    is that of F = tau log mean_{i in P} (mean_{j in N} exp(l_ij / lam))^(lam / tau)."""
    rng = np.random.default_rng(5)
    n = 10
    labels = np.r_[np.ones(5, np.int64), np.zeros(n - 5, np.int64)][rng.permutation(n)]
    positive = labels == 1
    definition = xrisk.tpAUC_KL_Loss(n, tau=tau, lam=lam, gammas=(1.0, 1.0), margin=1.0,
                                     surrogate=surrogate, scale=2.0)

    def objective(s):
        z = _pair_losses(s, positive, surrogate, 1.0, 2.0) / lam
        log_u = jax.nn.logsumexp(z, axis=1) - jnp.log(z.shape[1])
        return tau * (jax.nn.logsumexp(lam / tau * log_u) - jnp.log(log_u.shape[0]))

    state = definition.init(xp=jnp, dtype=jnp.float64)
    for step in range(3):
        scores = jnp.asarray(rng.uniform(-2, 2, n))
        (_, state), dynamic = jax.value_and_grad(
            lambda s, st=state: definition.apply(st, s, jnp.asarray(labels), jnp.arange(n)),
            has_aux=True)(scores)
        assert_allclose(np.asarray(dynamic), np.asarray(jax.grad(objective)(scores)),
                        rtol=1e-10, atol=1e-13, err_msg=f"step {step}")


# --------------------------------------------------------------------------- stability

@pytest.mark.parametrize("framework", ["numpy", "torch", "jax", "tensorflow"])
@pytest.mark.parametrize("name", ["pAUC_DRO_Loss", "tpAUC_KL_Loss"])
def test_logits_and_a_small_lambda_stay_finite_in_float32(framework, name):
    """Logits in [-20, 20] with lam = 0.1 and squared hinge: l / lam reaches 1.7e4. LibAUC's
    exp(l / lam) overflows float32 (> 88.7) at once, so its u, weights and loss are inf/NaN
    (in LibAUC 2.0.1); the shifted estimators keep every output finite and u~ in its bounds."""
    definition = CASES[name].make(8, {"lam": 0.1, "margin": 1.0,
                                      "surrogate": "squared_hinge", "scale": 1.0})
    rng = np.random.default_rng(11)
    state = _numpy_state(definition, np.float32)
    labels = np.array([1, 0, 1, 0, 1, 0, 0, 1])
    for _ in range(4):
        scores = rng.uniform(-20, 20, 8).astype(np.float32)
        index = rng.integers(0, 8, 8)
        loss, grad, state = _step(framework, definition, state, scores, labels, index,
                                  np.float32)
        values = [np.array(loss), *state.values()] + ([] if grad is None else [grad])
        assert all(np.all(np.isfinite(v)) for v in values), (framework, loss, grad, state)
        assert np.all(state["u"][:, 0] <= 1 + 0.9 + 1e-6)


@pytest.mark.parametrize("name", ["pAUC_DRO_Loss", "tpAUC_KL_Loss"])
def test_logits_and_a_small_lambda_equal_the_reference_in_float64(name):
    """The large-z regime (z up to ~1.7e4) against the reference, in float64."""
    case = CASES[name]
    definition = case.make(8, {"lam": 0.1, "margin": 1.0, "surrogate": "squared_hinge",
                               "scale": 1.0})
    rng = np.random.default_rng(2)
    state = reference = _numpy_state(definition)
    labels = np.array([1, 0, 1, 0, 1, 0, 0, 1])
    for _ in range(4):
        scores, index = rng.uniform(-20, 20, 8), rng.integers(0, 8, 8)
        want, want_grads, _, reference = case.reference(definition, reference, {}, scores,
                                                        labels, index)
        want_grad = want_grads["scores"]
        loss, grad, state = _step("torch", definition, state, scores, labels, index,
                                  np.float64)
        assert loss == pytest.approx(want, rel=1e-9)
        assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-12)
        for key, value in reference.items():
            assert_allclose(state[key], value, rtol=1e-9, atol=1e-12)


def _falling_batches(steps):
    """z = l / 0.1 of 1000 (and 902.5) at step 0, 14.4 (and 13.2) afterwards."""
    first = np.array([-4.5, 4.5, -4.0, 4.5])
    later = np.array([0.3, 0.5, 0.2, 0.45])
    return [first if step == 0 else later for step in range(steps)]


@pytest.mark.parametrize("name", ["pAUC_DRO_Loss", "tpAUC_KL_Loss"])
def test_shift_follows_a_falling_loss_for_500_steps_in_float32(name):
    """500 steps in float32 after a first batch with z = 1000: the log-shift comes down
    with u, so u~ stays in its bounds and every step equals the float64 reference. With a
    shift that only grows (c_new = max(c_old, max z)), u~ decays like 0.1^t and underflows
    float32 near step 45, where the weights become 0/0."""
    labels, index = np.array([1, 0, 1, 0]), np.array([0, 4, 1, 5])
    case = CASES[name]
    hyper = {"lam": 0.1, "margin": 1.0, "surrogate": "squared_hinge", "scale": 1.0}
    if name == "tpAUC_KL_Loss":
        hyper["tau"] = 0.5
    definition = case.make(6, hyper)
    reference = _numpy_state(definition)
    state32 = definition.init(xp=jnp, dtype=jnp.float32)
    numpy32 = _numpy_state(definition, np.float32)

    @jax.jit
    def step(state, scores):
        return jax.value_and_grad(lambda s: definition.apply(state, s, jnp.asarray(labels),
                                                             jnp.asarray(index)),
                                  has_aux=True)(scores)

    for number, scores in enumerate(_falling_batches(500)):
        want, want_grads, _, reference = case.reference(definition, reference, {}, scores,
                                                        labels, index)
        want_grad = want_grads["scores"]
        (loss, state32), grad = step(state32, jnp.asarray(scores, dtype=jnp.float32))
        loss_np, _, numpy32 = _step("numpy", definition, numpy32, scores, labels, index,
                                    np.float32)
        # While log u ~ 1000 - 2.3 t decays towards z, its shift c is carried in float32
        # from step to step (ulp 6e-5 at 1000): an absolute error of log u, that is a
        # relative error of u, the loss and the gradient, of up to ~1e-2 after 400 steps. Once
        # log u meets z (step ~430), c comes from z again and the error vanishes.
        tol = 2e-2 if number < 450 else 1e-4
        where = f"step {number}"
        for got_loss, got in ((float(loss), state32._asdict()), (loss_np, numpy32)):
            assert np.isfinite(got_loss), where
            assert got_loss == pytest.approx(want, rel=tol, abs=1e-30), where
            log_u = np.log(np.asarray(got["u"])[:2, 0]) + np.asarray(got["u"])[:2, 1]
            assert_allclose(log_u, np.log(reference["u"][:2, 0]) + reference["u"][:2, 1],
                            rtol=0, atol=tol, err_msg=where)
            assert np.all(np.asarray(got["u"])[:2, 0] >= 0.45 * (1 - 1e-6)), where
        assert_allclose(np.asarray(grad), want_grad, rtol=tol, atol=1e-30, err_msg=where)
    assert reference["u"][0, 1] < 20  # the shift came down from 1000


# --------------------------------------------------------------------------- edge cases

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("labels", [[1, 1, 1], [0, 0, 0]])
def test_one_class_batch_gives_zero_and_a_finite_zero_gradient_under_jit(name, labels):
    """At the initial state (u~ = 0, w~ = 0): no pair, loss 0, gradient exactly 0 (no NaN
    from the unused weights, e.g. 1 / u~ with u~ = 0), state unchanged."""
    definition = CASES[name].make(4, {})
    state = definition.init(xp=jnp, dtype=jnp.float64)
    (loss, new), grad = jax.jit(jax.value_and_grad(
        lambda s: definition.apply(state, s, jnp.asarray(labels), jnp.array([0, 1, 1])),
        has_aux=True))(jnp.array([0.2, 0.5, 0.9]))
    assert float(loss) == 0.0
    assert np.array_equal(np.asarray(grad), np.zeros(3))
    for field in state._fields:
        assert np.array_equal(np.asarray(getattr(new, field)), np.asarray(getattr(state, field)))


@pytest.mark.parametrize("name", NAMES)
def test_bad_index_under_jit_writes_no_row_and_no_global_state(name):
    """Traced values cannot raise: an index outside the table gives a NaN loss and leaves
    every state entry unchanged, the global ones (w, s2) included."""
    definition = CASES[name].make(4, {})
    state = definition.init(xp=jnp, dtype=jnp.float64)
    step = jax.jit(definition.apply)
    scores, labels = jnp.array([0.9, 0.2, 0.6, 0.4]), jnp.array([1, 0, 1, 0])
    _, state = step(state, scores, labels, jnp.array([0, 1, 2, 3]))
    loss, new = step(state, scores, labels, jnp.array([0, 1, 7, 3]))
    assert np.isnan(float(loss))
    for field in state._fields:
        assert np.array_equal(np.asarray(getattr(new, field)), np.asarray(getattr(state, field)))


def test_sopa_mask_uses_the_threshold_before_the_step():
    """threshold 0.5 for positive 0: l = [0.25, 0.64] gives mask [0, 1], L = 0.64 / (beta 2),
    and the threshold then moves by -eta (1 - 1 / (beta 2))."""
    definition = xrisk.pAUC_CVaR_Loss(3, beta=0.5, eta=0.1)
    state = definition.state_type(threshold=np.array([0.5, 0.0, 0.0]))
    loss, new = definition.apply(state, np.array([0.5, 0.0, 0.3]), np.array([1, 0, 0]),
                                 np.array([0, 1, 2]))
    assert float(loss) == pytest.approx(0.64 / 1.0, rel=1e-12)
    assert_allclose(new.threshold, [0.5 - 0.1 * (1 - 1 / 1.0), 0.0, 0.0], rtol=1e-12)


# --------------------------------------------------------------------------- front door

@pytest.mark.parametrize("mode", sorted(MODES))
def test_pauc_loss_front_door_builds_the_mode_in_every_face(mode):
    core = xrisk.pAUCLoss(mode, num_samples=5)
    assert type(core) is xrisk.LOSSES[MODES[mode]]
    for framework, module in ADAPTERS.items():
        loss_fn = module.pAUCLoss(mode, num_samples=5, dtype="float64")
        assert type(loss_fn) is getattr(module, MODES[mode]), framework
        assert loss_fn.definition.config() == core.config()
        assert "pAUCLoss" in module.__all__


def test_pauc_loss_front_door_default_and_unknown_mode():
    assert type(xrisk.pAUCLoss(num_samples=3)) is xrisk.pAUC_DRO_Loss  # "1w", as LibAUC
    for build in (xrisk.pAUCLoss, xtorch.pAUCLoss, xtf.pAUCLoss, xjax.pAUCLoss):
        with pytest.raises(ValueError, match=r"mode='3w'; expected one of \['1w', '2w', "
                                             r"'SOPA', 'SOPAs', 'SOTAs', 'STACO'\].*Fix"):
            build("3w", num_samples=3)


# --------------------------------------------------------------------------- bad input

BAD_HYPER = [
    ("pAUC_CVaR_Loss", {"beta": 0.0}, r"beta=0\.0; expected a number in \(0, 1\]"),
    ("pAUC_CVaR_Loss", {"beta": 1.5}, r"beta=1\.5; expected a number in \(0, 1\]"),
    ("pAUC_CVaR_Loss", {"eta": -0.1}, r"eta=-0\.1; expected a finite number > 0"),
    ("pAUC_DRO_Loss", {"lam": 0.0}, r"lam=0\.0; expected a finite number > 0"),
    ("pAUC_DRO_Loss", {"gamma": 0.0}, r"gamma=0\.0; expected a number in \(0, 1\]"),
    ("pAUC_DRO_Loss", {"surrogate": "hingy"}, r"surrogate='hingy'.*Fix"),
    ("tpAUC_KL_Loss", {"tau": -1.0}, r"tau=-1\.0; expected a finite number > 0"),
    ("tpAUC_KL_Loss", {"lam": float("inf")}, r"lam=inf; expected a finite number > 0"),
    ("tpAUC_KL_Loss", {"gammas": 0.9}, r"gammas=0\.9; expected two numbers in \(0, 1\].*Fix"),
    ("tpAUC_KL_Loss", {"gammas": (0.9,)}, r"gammas=\(0\.9,\); expected two numbers.*Fix"),
    ("tpAUC_KL_Loss", {"gammas": (0.9, 0.0)},
     r"gammas\[1\]=0\.0; expected a number in \(0, 1\]"),
    ("tpAUC_KL_Loss", {"gammas": (1.5, 0.9)},
     r"gammas\[0\]=1\.5; expected a number in \(0, 1\]"),
    ("tpAUC_CVaR_Loss", {"theta_0": 0.0}, r"theta_0=0\.0; expected a number in \(0, 1\]"),
    ("tpAUC_CVaR_Loss", {"theta_1": 2.0}, r"theta_1=2\.0; expected a number in \(0, 1\]"),
    ("tpAUC_CVaR_Loss", {"alpha": 0.0}, r"alpha=0\.0; expected a finite number > 0"),
    ("tpAUC_CVaR_Loss", {"beta_0": -1.0}, r"beta_0=-1\.0; expected a finite number > 0"),
    ("tpAUC_CVaR_Loss", {"margin": 0.0}, r"margin=0\.0; expected a finite number > 0"),
]


@pytest.mark.parametrize("name, hyper, message", BAD_HYPER)
def test_constructor_rejects_bad_hyper_parameters_in_every_face(name, hyper, message):
    for build in (getattr(xrisk, name), *(getattr(m, name) for m in ADAPTERS.values())):
        with pytest.raises(ValueError, match=message):
            build(4, **hyper)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("num_samples, error", [(0, ValueError), (2.0, TypeError)])
def test_constructor_rejects_a_bad_num_samples(name, num_samples, error):
    with pytest.raises(error, match=rf"{name}: num_samples={num_samples!r}"):
        xrisk.LOSSES[name](num_samples)


@given(gammas=st.tuples(st.floats(0.01, 1.0), st.floats(0.01, 1.0)))
def test_valid_gammas_are_kept_as_a_tuple_of_floats(gammas):
    definition = xrisk.tpAUC_KL_Loss(3, gammas=list(gammas))
    assert definition.gammas == tuple(float(g) for g in gammas)
    assert xrisk.tpAUC_KL_Loss(**definition.config()).config() == definition.config()


# --------------------------------------------------------------------------- adapter examples

@pytest.mark.parametrize("framework", sorted(ADAPTERS))
@pytest.mark.parametrize("name", [*NAMES, "pAUCLoss"])
def test_adapter_examples_run(framework, name):
    """Each adapter class's Examples run as written in that framework."""
    target = getattr(ADAPTERS[framework], name)
    tests = doctest.DocTestFinder(recurse=False).find(target, name, globs={})
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert tests and tests[0].examples
    assert runner.summarize(verbose=False).failed == 0


def test_torch_state_buffers_and_export_round_trip():
    loss_fn = xtorch.tpAUC_KL_Loss(6, dtype="float64")
    assert set(loss_fn.state_dict()) == {"u", "w", "_extra_state"}
    assert loss_fn.u.shape == (6, 2) and loss_fn.w.shape == (2,)
    loss_fn(torch.tensor([0.9, 0.2, 0.6], dtype=torch.float64), torch.tensor([1, 0, 1]),
            torch.tensor([0, 1, 2]))
    other = xtf.tpAUC_KL_Loss(6, dtype="float64")
    other.load_state(loss_fn.export_state())
    for key, value in loss_fn.export_state().items():
        assert_allclose(other.export_state()[key], value, rtol=0)
