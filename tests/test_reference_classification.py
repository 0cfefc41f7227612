"""Checks of the numpy classification references (tests/_reference_classification.py).

Gradients against central finite differences with the stop-gradient quantities frozen at
the unperturbed scores; the shifted (stable) KL forms against LibAUC's raw-exp forms; the
loops against LibAUC's vectorised formulas; duplicate pooling on hand examples; finiteness
of the stable forms for logits and a small lambda.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from tests import _reference_classification as ref
from tests._reference import surrogate

SURROGATES = ("squared_hinge", "hinge", "squared", "logistic", "barrier_hinge")
NUM_POS_ROWS = 4  # positives' dataset rows are 0..3, negatives' rows 4..7
NUM_SAMPLES = 8


@st.composite
def batches(draw, low=0.0, high=1.0, max_size=7):
    """(scores, labels, index, rng): >= 1 positive and negative, duplicate positive rows."""
    n = draw(st.integers(2, max_size))
    n_pos = draw(st.integers(1, n - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    labels = rng.permutation(np.r_[np.ones(n_pos, np.int64), np.zeros(n - n_pos, np.int64)])
    index = np.where(labels == 1, rng.integers(0, NUM_POS_ROWS, n),
                     rng.integers(NUM_POS_ROWS, NUM_SAMPLES, n))
    return rng.uniform(low, high, n), labels, index, rng


def central_difference(f, x, h=1e-6):
    grad = np.zeros_like(x)
    for i in range(len(x)):
        step = np.zeros_like(x)
        step[i] = h
        grad[i] = (f(x + step) - f(x - step)) / (2 * h)
    return grad


def kink_free(scores, labels, name, margin, scale, delta=1e-4):
    """No pair difference within delta of a kink of a piecewise-linear surrogate."""
    pos, neg = labels == 1, labels == 0
    t = (scores[pos][:, None] - scores[neg][None, :]).ravel()
    _, below = surrogate(name, t - delta, margin, scale)
    _, above = surrogate(name, t + delta, margin, scale)
    return bool(np.allclose(below, above, atol=1e-2))


def check_step(fn, scores, labels, index, state, hyper):
    """Run one step; check the gradient by finite differences (weights frozen), that the
    input state is untouched and that rows of negatives / rows absent stay unchanged."""
    before = {k: np.array(v) for k, v in state.items()}
    loss, grad, params, new_state = fn(scores, labels, index, state, **hyper)
    assert params == {}
    for key in state:
        assert_allclose(state[key], before[key], rtol=0, atol=0, err_msg="input mutated")
    numeric = central_difference(
        lambda s: fn(s, labels, index, state, stop_gradient_scores=scores, **hyper)[0], scores)
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)
    assert loss == pytest.approx(
        fn(scores, labels, index, state, stop_gradient_scores=scores, **hyper)[0], abs=0)
    untouched = np.setdiff1d(np.arange(NUM_SAMPLES), index[labels == 1])
    for key, value in new_state.items():
        if value.ndim and value.shape[0] == NUM_SAMPLES:
            assert_allclose(value[untouched], before[key][untouched], rtol=0, atol=0)
    return new_state


hyper_common = dict(margin=st.sampled_from([0.5, 1.0]), scale=st.sampled_from([1.0, 2.0]),
                    surrogate_name=st.sampled_from(SURROGATES))


# --------------------------------------------------------------------------- gradients

@given(batch=batches(), **hyper_common)
def test_pairwise_auc_gradient_and_value(batch, margin, scale, surrogate_name):
    scores, labels, _, _ = batch
    assume(kink_free(scores, labels, surrogate_name, margin, scale))
    hyper = dict(surrogate_name=surrogate_name, margin=margin, scale=scale)
    loss, grad, params, state = ref.pairwise_auc(scores, labels, **hyper)
    pos, neg = scores[labels == 1], scores[labels == 0]
    value, _ = surrogate(surrogate_name, pos[:, None] - neg[None, :], margin, scale)
    assert loss == pytest.approx(value.mean(), rel=1e-12)
    assert_allclose(grad, central_difference(
        lambda s: ref.pairwise_auc(s, labels, **hyper)[0], scores), rtol=1e-5, atol=1e-6)
    assert (params, state) == ({}, {})


@given(batch=batches(), beta=st.sampled_from([0.1, 0.5, 1.0]), **hyper_common)
def test_pauc_cvar_gradient(batch, beta, margin, scale, surrogate_name):
    scores, labels, index, rng = batch
    assume(kink_free(scores, labels, surrogate_name, margin, scale))
    hyper = dict(beta=beta, eta=0.3, margin=margin, surrogate_name=surrogate_name, scale=scale)
    state = {"threshold": rng.uniform(-0.2, 1.5, NUM_SAMPLES)}
    for _ in range(2):
        state = check_step(ref.pauc_cvar, scores, labels, index, state, hyper)


@given(batch=batches(), gamma=st.sampled_from([0.1, 0.9, 1.0]),
       lam=st.sampled_from([0.5, 1.0, 2.0]), **hyper_common)
def test_pauc_dro_gradient(batch, gamma, lam, margin, scale, surrogate_name):
    scores, labels, index, rng = batch
    assume(kink_free(scores, labels, surrogate_name, margin, scale))
    hyper = dict(gamma=gamma, lam=lam, margin=margin, surrogate_name=surrogate_name,
                 scale=scale)
    state = ref.init_pauc_dro(NUM_SAMPLES)
    for _ in range(2):
        state = check_step(ref.pauc_dro, scores, labels, index, state, hyper)
        scores = rng.uniform(0, 1, len(scores))
        assume(kink_free(scores, labels, surrogate_name, margin, scale))


@given(batch=batches(), gammas=st.sampled_from([(0.9, 0.9), (0.5, 0.1), (1.0, 1.0)]),
       tau=st.sampled_from([0.5, 1.0, 2.0]), **hyper_common)
def test_tpauc_kl_gradient(batch, gammas, tau, margin, scale, surrogate_name):
    scores, labels, index, rng = batch
    assume(kink_free(scores, labels, surrogate_name, margin, scale))
    hyper = dict(tau=tau, lam=1.0, gammas=gammas, margin=margin,
                 surrogate_name=surrogate_name, scale=scale)
    state = ref.init_tpauc_kl(NUM_SAMPLES)
    for _ in range(2):
        state = check_step(ref.tpauc_kl, scores, labels, index, state, hyper)
        scores = rng.uniform(0, 1, len(scores))
        assume(kink_free(scores, labels, surrogate_name, margin, scale))


@given(batch=batches(low=-1.0, high=1.5), threshold=st.sampled_from([0.5, 1.0]),
       surrogate_name=st.sampled_from(SURROGATES), scale=st.sampled_from([1.0, 2.0]))
def test_tpauc_cvar_gradient(batch, threshold, surrogate_name, scale):
    scores, labels, index, rng = batch
    assume(kink_free(scores, labels, surrogate_name, threshold, scale))
    hyper = dict(threshold=threshold, alpha=0.5, beta0=0.2, beta1=0.1, theta0=0.5,
                 theta1=0.4, surrogate_name=surrogate_name, scale=scale)
    state = ref.init_tpauc_cvar(NUM_SAMPLES)
    state["u"][:, 1] = rng.uniform(0, 1, NUM_SAMPLES)
    state["u"][:, 2] = rng.uniform(0, 1, NUM_SAMPLES)
    for _ in range(2):
        state = check_step(ref.tpauc_cvar, scores, labels, index, state, hyper)


@given(batch=batches(low=0.01, high=0.99), step=st.integers(0, 5), k=st.integers(1, 2),
       version=st.sampled_from(["v1", "v2"]), imratio=st.sampled_from([None, 0.3]))
def test_compositional_auc_gradients(batch, step, k, version, imratio):
    scores, labels, _, rng = batch
    a, b, alpha = rng.uniform(0, 1, 3)
    hyper = dict(k=k, margin=1.0, version=version, imratio=imratio)
    loss, grad, params, state = ref.compositional_auc(scores, labels, a, b, alpha, step, **hyper)
    assert int(state["step"]) == step + 1

    def value(s=scores, a=a, b=b, alpha=alpha):
        return ref.compositional_auc(s, labels, a, b, alpha, step, **hyper)[0]

    assert_allclose(grad, central_difference(value, scores), rtol=1e-5, atol=1e-7)
    for name in ("a", "b", "alpha"):
        numeric = central_difference(lambda x, name=name: value(**{name: x[0]}),
                                     np.array([{"a": a, "b": b, "alpha": alpha}[name]]))
        assert params[name] == pytest.approx(numeric[0], rel=1e-6, abs=1e-8)
    if step % (2 * k) < k:
        y = labels.astype(float)
        bce = -(y * np.log(scores) + (1 - y) * np.log(1 - scores))
        assert loss == pytest.approx(bce.mean(), rel=1e-12)
        assert all(params[name] == 0 for name in params)


def test_compositional_bce_clip_has_zero_gradient_outside():
    # s = 0 for a positive and s = 1 for a negative are clipped: -log(1e-12) each, slope 0
    loss, grad, _, _ = ref.compositional_auc(np.array([0.0, 1.0, 0.5]), np.array([1, 0, 0]),
                                             0.0, 0.0, 0.0, 0, k=1, margin=1.0, version="v1")
    assert loss == pytest.approx((-2 * np.log(1e-12) + np.log(2)) / 3, rel=1e-6)
    assert_allclose(grad, [0.0, 0.0, 2 / 3])


@given(batch=batches(low=-6.0, high=6.0), alpha=st.sampled_from([0.25, 0.5, 0.9]),
       gamma=st.sampled_from([0.0, 0.5, 1.0, 2.0]))
def test_cross_entropy_and_focal_gradients(batch, alpha, gamma):
    logits, labels, _, _ = batch
    loss, grad, _, _ = ref.cross_entropy(logits, labels)
    y = labels.astype(float)
    p = 1 / (1 + np.exp(-logits))
    assert loss == pytest.approx(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(), rel=1e-10)
    assert_allclose(grad, central_difference(lambda z: ref.cross_entropy(z, labels)[0], logits),
                    rtol=1e-6, atol=1e-9)
    loss_f, grad_f, _, _ = ref.focal(logits, labels, alpha=alpha, gamma=gamma)
    assert_allclose(grad_f, central_difference(
        lambda z: ref.focal(z, labels, alpha=alpha, gamma=gamma)[0], logits),
        rtol=1e-5, atol=1e-9)
    weight = np.where(labels == 1, alpha, 1 - alpha)
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    p_t = np.where(labels == 1, p, 1 - p)
    assert loss_f == pytest.approx(np.mean(weight * (1 - p_t) ** gamma * bce), rel=1e-9)


def test_cross_entropy_and_focal_are_stable_for_large_logits():
    logits, labels = np.array([-800.0, 800.0, 40.0, -40.0]), np.array([1, 0, 1, 0])
    for out in (ref.cross_entropy(logits, labels), ref.focal(logits, labels, alpha=.25, gamma=.5)):
        assert np.isfinite(out[0]) and np.all(np.isfinite(out[1]))
    assert ref.cross_entropy(logits[:2], labels[:2])[0] == pytest.approx(800.0)


# --------------------------------------------------------------------------- naive LibAUC forms

def naive_dro(u, scores, labels, index, *, gamma, lam, margin, name, scale):
    """LibAUC 2.0.1's pAUC_DRO_Loss with raw exp, duplicates pooled: (loss, grad, new u (N,))."""
    pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    value, slope = surrogate(name, scores[pos][:, None] - scores[neg][None, :], margin, scale)
    expo = np.exp(value / lam)
    u = u.copy()
    rows = index[pos]
    for k in np.unique(rows):
        u[k] = (1 - gamma) * u[k] + gamma * expo[rows == k].mean()
    coef = expo / u[rows][:, None] / expo.size
    grad = np.zeros(len(scores))
    np.add.at(grad, pos, (coef * slope).sum(1))
    np.add.at(grad, neg, -(coef * slope).sum(0))
    return (coef * value).sum(), grad, u


def naive_kl(u, w, scores, labels, index, *, tau, lam, gammas, margin, name, scale):
    """LibAUC 2.0.1's tpAUC_KL_Loss with raw exp and powers, duplicates pooled:
    (loss, grad, u, w)."""
    pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    value, slope = surrogate(name, scores[pos][:, None] - scores[neg][None, :], margin, scale)
    expo = np.exp(value / lam)
    u = u.copy()
    rows = index[pos]
    for k in np.unique(rows):
        u[k] = (1 - gammas[0]) * u[k] + gammas[0] * expo[rows == k].mean()
    w = (1 - gammas[1]) * w + gammas[1] * np.mean(u[rows] ** (lam / tau))
    coef = u[rows][:, None] ** (lam / tau - 1) * expo / w / expo.size
    grad = np.zeros(len(scores))
    np.add.at(grad, pos, (coef * slope).sum(1))
    np.add.at(grad, neg, -(coef * slope).sum(0))
    return (coef * value).sum(), grad, u, w


@given(batch=batches(), gamma=st.sampled_from([0.1, 0.5, 0.9, 1.0]),
       lam=st.sampled_from([0.25, 1.0, 2.0]), surrogate_name=st.sampled_from(SURROGATES))
def test_stable_dro_equals_naive_libauc(batch, gamma, lam, surrogate_name):
    scores, labels, index, rng = batch
    hyper = dict(gamma=gamma, lam=lam, margin=1.0, scale=1.0)
    state, naive_u = ref.init_pauc_dro(NUM_SAMPLES), np.zeros(NUM_SAMPLES)
    for _ in range(3):
        loss, grad, _, state = ref.pauc_dro(scores, labels, index, state,
                                            surrogate_name=surrogate_name, **hyper)
        n_loss, n_grad, naive_u = naive_dro(naive_u, scores, labels, index,
                                            name=surrogate_name, **hyper)
        assert loss == pytest.approx(n_loss, rel=1e-10)
        assert_allclose(grad, n_grad, rtol=1e-10, atol=1e-13)
        assert_allclose(state["u"][:, 0] * np.exp(state["u"][:, 1]), naive_u, rtol=1e-10)
        scores = rng.uniform(0, 1, len(scores))


@given(batch=batches(), gammas=st.sampled_from([(0.9, 0.9), (0.5, 0.1), (1.0, 1.0)]),
       lam=st.sampled_from([0.5, 1.0]), tau=st.sampled_from([0.25, 1.0, 3.0]),
       surrogate_name=st.sampled_from(SURROGATES))
def test_stable_tpauc_kl_equals_naive_libauc(batch, gammas, lam, tau, surrogate_name):
    scores, labels, index, rng = batch
    hyper = dict(tau=tau, lam=lam, gammas=gammas, margin=1.0, scale=1.0)
    state, naive_u, naive_w = ref.init_tpauc_kl(NUM_SAMPLES), np.zeros(NUM_SAMPLES), 0.0
    for _ in range(3):
        loss, grad, _, state = ref.tpauc_kl(scores, labels, index, state,
                                            surrogate_name=surrogate_name, **hyper)
        n_loss, n_grad, naive_u, naive_w = naive_kl(naive_u, naive_w, scores, labels, index,
                                                    name=surrogate_name, **hyper)
        assert loss == pytest.approx(n_loss, rel=1e-10)
        assert_allclose(grad, n_grad, rtol=1e-10, atol=1e-13)
        assert_allclose(state["u"][:, 0] * np.exp(state["u"][:, 1]), naive_u, rtol=1e-10)
        assert state["w"][0] * np.exp(state["w"][1]) == pytest.approx(naive_w, rel=1e-10)
        scores = rng.uniform(0, 1, len(scores))


@given(batch=batches(max_size=5), surrogate_name=st.sampled_from(SURROGATES))
def test_cvar_loops_equal_vectorised_libauc_without_duplicates(batch, surrogate_name):
    scores, labels, index, rng = batch
    pos = np.flatnonzero(labels == 1)
    assume(len(pos) <= NUM_POS_ROWS)
    index = index.copy()
    index[pos] = rng.permutation(NUM_POS_ROWS)[:len(pos)]  # no duplicates: LibAUC's case
    # SOPA (pAUC_CVaR_Loss)
    thr = rng.uniform(0, 1, NUM_SAMPLES)
    loss, _, _, new = ref.pauc_cvar(scores, labels, index, {"threshold": thr}, beta=0.5,
                                    eta=0.2, margin=1.0, surrogate_name=surrogate_name,
                                    scale=1.0)
    value, _ = surrogate(surrogate_name, scores[pos][:, None] - scores[labels == 0][None, :],
                         1.0, 1.0)
    mask = value > thr[index[pos]][:, None]
    assert loss == pytest.approx((mask * value).mean() / 0.5, rel=1e-12)
    expected = thr.copy()
    expected[index[pos]] -= 0.2 * (1 - mask.sum(1) / (0.5 * value.shape[1]))
    assert_allclose(new["threshold"], expected, rtol=1e-12)
    # STACO (tpAUC_CVaR_Loss)
    state = ref.init_tpauc_cvar(NUM_SAMPLES)
    state["u"][:, 1:] = rng.uniform(0, 1, (NUM_SAMPLES, 2))
    state["s2"] = np.array(0.3)
    loss, _, _, new = ref.tpauc_cvar(scores, labels, index, state, threshold=1.0, alpha=0.5,
                                     beta0=0.2, beta1=0.1, theta0=0.5, theta1=0.4,
                                     surrogate_name=surrogate_name, scale=1.0)
    s1, dual = state["u"][index[pos], 1], state["u"][index[pos], 2]
    p1 = value > s1[:, None]
    tp = (value * p1).mean(1) / 0.4 / 0.5
    u = s1 + np.maximum(value - s1[:, None], 0).mean(1) / 0.4
    dual = np.clip(dual + 0.5 * (u - 0.3) / 0.5, 0, 1)
    assert loss == pytest.approx((dual * tp).mean(), rel=1e-12)
    assert_allclose(new["u"][index[pos]], np.stack(
        [u, s1 - 0.2 * (dual / 0.5) * (1 - p1.mean(1) / 0.4), dual], 1), rtol=1e-12)
    assert float(new["s2"]) == pytest.approx(0.3 - 0.1 * (1 - dual.mean() / 0.5), rel=1e-12)


def test_shifted_estimators_follow_a_falling_loss_for_500_steps():
    """z = l/lam drops from 1000 to 14.4 after the first step. u and w (and the losses)
    equal the exact recursions computed in log space, and u~, w~ stay in their bounds. With
    the earlier shift rule c_new = max(c_old, max z), u~ decayed like 0.1^t (out of its
    bounds at step 2) and reached 0 near step 320, where the weights became 0/0."""
    labels, index = np.array([1, 0, 1, 0]), np.array([0, 4, 1, 5])
    first, later = np.array([-4.5, 4.5, -4.0, 4.5]), np.array([0.3, 0.5, 0.2, 0.45])
    gamma, lam, tau = 0.9, 0.1, 0.5
    common = dict(lam=lam, margin=1.0, surrogate_name="squared_hinge", scale=1.0)
    dro, kl = ref.init_pauc_dro(NUM_SAMPLES), ref.init_tpauc_kl(NUM_SAMPLES)
    log_u, log_w = np.full(2, -np.inf), -np.inf  # exact log u of rows 0, 1 and log w
    with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"):
        for step in range(500):
            scores = first if step == 0 else later
            value, _ = surrogate("squared_hinge", scores[[0, 2]][:, None]
                                 - scores[[1, 3]][None, :], 1.0, 1.0)
            z = value / lam
            fresh = np.log(np.exp(z - z.max(1, keepdims=True)).mean(1)) + z.max(1)
            log_u = np.logaddexp(np.log(1 - gamma) + log_u, np.log(gamma) + fresh)
            v = lam / tau * log_u
            log_w = np.logaddexp(np.log(1 - gamma) + log_w,
                                 np.log(gamma) + np.log(np.exp(v - v.max()).mean()) + v.max())
            loss_dro, _, _, dro = ref.pauc_dro(scores, labels, index, dro, gamma=gamma,
                                               **common)
            loss_kl, _, _, kl = ref.tpauc_kl(scores, labels, index, kl, tau=tau,
                                             gammas=(gamma, gamma), **common)
            assert_allclose(np.log(dro["u"][:2, 0]) + dro["u"][:2, 1], log_u, rtol=1e-12)
            assert_allclose(np.log(kl["w"][0]) + kl["w"][1], log_w, rtol=1e-12)
            assert loss_dro == pytest.approx(
                np.mean(np.exp(z - log_u[:, None]) * value), rel=1e-10)
            assert loss_kl == pytest.approx(np.mean(
                np.exp((lam / tau - 1) * log_u[:, None] + z - log_w) * value), rel=1e-10)
            assert np.all((dro["u"][:2, 0] >= gamma / 2) & (dro["u"][:2, 0] <= 1 + gamma))
            assert gamma / 2 <= kl["w"][0] <= 1 + gamma
    assert dro["u"][0, 1] < 20  # the shift came down from 1000 with u


# --------------------------------------------------------------------------- duplicates by hand

# Positions 0 and 2 are positives sharing dataset row 1; 1 and 3 are negatives (rows 5, 6).
# squared_hinge, margin 1: l = [[0.25, 0.64], [0.81, 1.44]] (rows: positions 0, 2).
HAND = dict(scores=np.array([0.8, 0.3, 0.4, 0.6]), labels=np.array([1, 0, 1, 0]),
            index=np.array([1, 5, 1, 6]))
HAND_L = np.array([[0.25, 0.64], [0.81, 1.44]])


def test_hand_duplicates_cvar():
    state = {"threshold": np.full(NUM_SAMPLES, 0.5)}
    loss, grad, _, new = ref.pauc_cvar(**HAND, state=state, beta=0.5, eta=0.1, margin=1.0,
                                       surrogate_name="squared_hinge", scale=1.0)
    # masks [0, 1] and [1, 1]; L = (1/beta)(1/4)(0.64 + 0.81 + 1.44)
    assert loss == pytest.approx(1.445, rel=1e-12)
    assert_allclose(grad, [-0.8, 0.9, -2.1, 2.0], rtol=1e-12)
    # brackets 1 - 1/(0.5*2) = 0 and 1 - 2/1 = -1: mean -0.5, one update (last-write: 0.6)
    expected = np.full(NUM_SAMPLES, 0.5)
    expected[1] = 0.55
    assert_allclose(new["threshold"], expected, rtol=1e-12)


def test_hand_duplicates_dro_and_kl():
    state = ref.init_pauc_dro(NUM_SAMPLES)
    state["u"][1] = [1.0, 0.0]  # u = 1
    loss, grad, _, new = ref.pauc_dro(**HAND, state=state, gamma=0.5, lam=1.0, margin=1.0,
                                      surrogate_name="squared_hinge", scale=1.0)
    u = 0.5 * 1.0 + 0.5 * np.exp(HAND_L).mean()  # pooled over both duplicates' 4 pairs
    assert new["u"][1, 1] == pytest.approx(1.44)  # the shift is the largest z
    assert new["u"][1, 0] * np.exp(1.44) == pytest.approx(u, rel=1e-12)
    assert loss == pytest.approx((np.exp(HAND_L) / u * HAND_L).mean(), rel=1e-12)
    # SOTAs: both duplicate positions count in w's mean, with the same pooled u
    state = {"u": state["u"], "w": np.array([2.0, 0.0])}
    loss, _, _, new = ref.tpauc_kl(**HAND, state=state, tau=2.0, lam=1.0, gammas=(0.5, 0.5),
                                   margin=1.0, surrogate_name="squared_hinge", scale=1.0)
    w = 0.5 * 2.0 + 0.5 * u**0.5
    assert new["w"][0] * np.exp(new["w"][1]) == pytest.approx(w, rel=1e-12)
    assert loss == pytest.approx((u**-0.5 * np.exp(HAND_L) / w * HAND_L).mean(), rel=1e-12)


def test_hand_duplicates_staco():
    state = ref.init_tpauc_cvar(NUM_SAMPLES)
    state["u"][1] = [1.0, 0.5, 0.5]
    state["s2"] = np.array(0.2)
    loss, _, _, new = ref.tpauc_cvar(**HAND, state=state, threshold=1.0, alpha=0.1, beta0=0.1,
                                     beta1=0.1, theta0=0.5, theta1=0.5,
                                     surrogate_name="squared_hinge", scale=1.0)
    # masks l > 0.5: [0, 1], [1, 1]; tp = [1.28, 4.5]; pooled excess 0.3475 -> u = 1.195;
    # dual = 0.5 + 0.1 (1.195 - 0.2)/0.5 = 0.699; pooled hit rate 0.75 -> s1 = 0.5699
    assert loss == pytest.approx(0.699 * (1.28 + 4.5) / 2, rel=1e-12)
    assert_allclose(new["u"][1], [1.195, 0.5699, 0.699], rtol=1e-12)
    assert float(new["s2"]) == pytest.approx(0.2398, rel=1e-12)
    untouched = np.arange(NUM_SAMPLES) != 1
    assert_allclose(new["u"][untouched], ref.init_tpauc_cvar(NUM_SAMPLES)["u"][untouched])


# --------------------------------------------------------------------------- edge cases

STATEFUL = {
    "pauc_cvar": (ref.pauc_cvar, lambda: {"threshold": np.linspace(0, 1, NUM_SAMPLES)},
                  dict(beta=0.5, eta=0.1, margin=1.0, surrogate_name="squared_hinge",
                       scale=1.0)),
    "pauc_dro": (ref.pauc_dro, lambda: ref.init_pauc_dro(NUM_SAMPLES),
                 dict(gamma=0.9, lam=1.0, margin=1.0, surrogate_name="squared_hinge",
                      scale=1.0)),
    "tpauc_kl": (ref.tpauc_kl, lambda: ref.init_tpauc_kl(NUM_SAMPLES),
                 dict(tau=1.0, lam=1.0, gammas=(0.9, 0.9), margin=1.0,
                      surrogate_name="squared_hinge", scale=1.0)),
    "tpauc_cvar": (ref.tpauc_cvar, lambda: ref.init_tpauc_cvar(NUM_SAMPLES),
                   dict(threshold=0.5, alpha=0.1, beta0=0.1, beta1=0.1, theta0=0.5,
                        theta1=0.5, surrogate_name="squared_hinge", scale=1.0)),
}


@pytest.mark.parametrize("name", sorted(STATEFUL))
@pytest.mark.parametrize("labels", [[1, 1, 1], [0, 0, 0]])
def test_one_class_batch_is_a_no_op(name, labels):
    fn, init, hyper = STATEFUL[name]
    state = init()
    loss, grad, params, new = fn(np.array([0.2, 0.5, 0.9]), np.array(labels),
                                 np.array([0, 1, 1]), state, **hyper)
    assert loss == 0 and not grad.any() and params == {}
    assert sorted(new) == sorted(state)
    for key in state:
        assert_allclose(new[key], state[key], rtol=0, atol=0)
    assert ref.pairwise_auc(np.array([0.2, 0.5]), np.array(labels[:2]), margin=1.0, scale=1.0,
                            surrogate_name="hinge")[:2] == (0.0, pytest.approx([0.0, 0.0]))


# --------------------------------------------------------------------------- stability

@given(batch=batches(low=-20.0, high=20.0),
       gamma=st.sampled_from([0.1, 0.5, 0.9]),
       tau=st.sampled_from([0.05, 0.1, 1.0]),
       surrogate_name=st.sampled_from(["squared_hinge", "squared", "logistic"]))
def test_stable_forms_stay_finite_for_logits_and_small_lambda(batch, gamma, tau,
                                                              surrogate_name):
    """lam = 0.1 and logits in [-20, 20]: l/lam reaches 1.7e4, far past exp's range (LibAUC
    overflows); every output stays finite and within float32's range."""
    scores, labels, index, rng = batch
    big = np.finfo(np.float32).max
    dro, kl = ref.init_pauc_dro(NUM_SAMPLES), ref.init_tpauc_kl(NUM_SAMPLES)
    common = dict(lam=0.1, margin=1.0, surrogate_name=surrogate_name, scale=1.0)
    # exp may underflow to 0 (harmless); any overflow, 0/0 or log(0) fails the test
    with np.errstate(over="raise", divide="raise", invalid="raise", under="ignore"):
        for _ in range(4):
            out_dro = ref.pauc_dro(scores, labels, index, dro, gamma=gamma, **common)
            out_kl = ref.tpauc_kl(scores, labels, index, kl, tau=tau, gammas=(gamma, gamma),
                                  **common)
            for loss, grad, _, state in (out_dro, out_kl):
                values = [np.array(loss), grad, *state.values()]
                assert all(np.all(np.isfinite(v)) and np.all(np.abs(v) < big) for v in values)
            dro, kl = out_dro[3], out_kl[3]
            scores = rng.uniform(-20, 20, len(scores))
