"""Extreme classification (SCENT / SOX): updates against the reference, stability, the
first-visit flag, the SOX schedule, the gamma = 1 oracle and bad inputs.

Cross-backend identity over several steps (duplicates, masks) runs in
tests/test_cross_backend.py and tests/test_jit.py through the case of EntLossClassification.
"""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import xrisk
from tests import _reference_extreme


def _numpy_state(state):
    return {k: np.asarray(v) for k, v in state._asdict().items()}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**16), mode=st.sampled_from(["SCENT", "SOX"]),
       alpha=st.sampled_from([0.1, 1.0, 10.0]), kappa=st.sampled_from([0.5, 1.0, 3.0]),
       gamma=st.sampled_from([0.1, 0.9, 1.0]), batch=st.integers(1, 6))
def test_updates_match_the_reference_over_steps(seed, mode, alpha, kappa, gamma, batch):
    rng = np.random.default_rng(seed)
    definition = xrisk.EntLossClassification(4, mode=mode, alpha=alpha, gamma=gamma,
                                             alpha_multiplier=kappa)
    state = definition.init(xp=xp, dtype=xp.float64)
    for _ in range(4):
        logits = rng.normal(size=(batch, 3)) * 4
        index = rng.integers(0, 4, size=batch)  # duplicates common
        want = _reference_extreme.step(_numpy_state(state), logits, index, mode=mode,
                                       alpha=alpha, alpha_multiplier=kappa)
        loss, state = definition.apply(state, logits, index)
        np.testing.assert_allclose(float(loss), want[0], rtol=1e-12)
        np.testing.assert_allclose(state.nu, want[3]["nu"], rtol=1e-12, atol=1e-12)


def test_scent_converges_to_log_m_and_sox_is_the_moving_average():
    logits = np.array([[0.5, -1.0, 2.0]])
    log_m = np.log(np.exp(logits).mean())
    scent = xrisk.EntLossClassification(1, mode="SCENT", alpha=2.0)
    state = scent.init(xp=xp, dtype=xp.float64)
    _, state = scent.apply(state, np.zeros((1, 3)), np.array([0]))  # first visit: nu = 0
    for _ in range(30):
        _, state = scent.apply(state, logits, np.array([0]))
    np.testing.assert_allclose(state.nu[0, 0], log_m, rtol=1e-10)
    sox = xrisk.EntLossClassification(1, mode="SOX", gamma=0.25)
    state = sox.init(xp=xp, dtype=xp.float64)
    naive = None
    for step in range(5):
        batch = logits * (step + 1)
        m = np.exp(batch).mean()
        naive = m if naive is None else 0.75 * naive + 0.25 * m
        _, state = sox.apply(state, batch, np.array([0]))
    np.testing.assert_allclose(np.exp(state.nu[0, 0]), naive, rtol=1e-12)


@pytest.mark.parametrize("mode", ["SCENT", "SOX"])
def test_a_first_visit_is_detected_even_when_the_true_value_is_zero(mode):
    """m = 1 (all logits 0) makes nu exactly 0.0: LibAUC's nu == 0 test would treat the
    second visit as a first one again and reset nu to log m."""
    definition = xrisk.EntLossClassification(2, mode=mode, gamma=0.5, alpha=1.0)
    state = definition.init(xp=xp, dtype=xp.float64)
    _, state = definition.apply(state, np.zeros((1, 2)), np.array([1]))
    assert state.nu[1].tolist() == [0.0, 1.0]  # nu = log 1, visited
    assert state.nu[0].tolist() == [0.0, 0.0]  # never visited
    second = np.array([[0.0, np.log(3.0)]])  # m = 2
    _, state = definition.apply(state, second, np.array([1]))
    want = _reference_extreme.step({"nu": np.array([[0.0, 0.0], [0.0, 1.0]]),
                                    "smoothing": np.asarray(0.5)}, second, np.array([1]),
                                   mode=mode, alpha=1.0, alpha_multiplier=1.0)[3]["nu"][1, 0]
    np.testing.assert_allclose(state.nu[1, 0], want, rtol=1e-12)
    assert abs(state.nu[1, 0] - np.log(2.0)) > 0.1  # not re-initialised to log m
    if mode == "SOX":
        np.testing.assert_allclose(state.nu[1, 0], np.log(1.5), rtol=1e-12)


@pytest.mark.parametrize("mode", ["SCENT", "SOX"])
def test_huge_logits_stay_finite_in_float32(mode):
    definition = xrisk.EntLossClassification(3, mode=mode)
    namespace = xrisk.backends.get_backend("torch").namespace
    state = definition.init(xp=namespace, dtype=torch.float32)
    for scale in (1e3, 1e4, 3e4):
        logits = torch.tensor([[0.0, scale, scale - 5], [0.0, -scale, 10.0]], requires_grad=True)
        loss, state = definition.apply(state, logits, torch.tensor([0, 1]))
        (grad,) = torch.autograd.grad(loss, logits)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        assert torch.isfinite(state.nu).all()
    # nu tracks log m in float32 without ever forming exp(logit)
    exact = torch.logsumexp(torch.tensor([0.0, 3e4, 3e4 - 5], dtype=torch.float64), 0) \
        - np.log(3)
    assert abs(float(state.nu[0, 0]) - float(exact)) < 50  # the same order: no overflow


def test_gamma_one_sox_is_the_cross_entropy_gradient():
    """gamma = 1: nu = log m every step, so the gradient is that of mean_i log m_i, the
    softmax cross-entropy when every class's column is counted."""
    rng = np.random.default_rng(3)
    raw = torch.tensor(rng.normal(size=(5, 4)) * 3, requires_grad=True)
    labels = torch.tensor(rng.integers(0, 4, size=5))
    definition = xrisk.EntLossClassification(5, mode="SOX", gamma=1.0)
    namespace = xrisk.backends.get_backend("torch").namespace
    state = definition.init(xp=namespace, dtype=torch.float64)
    _, state = definition.apply(state, torch.zeros(5, 4, dtype=torch.float64),
                                torch.arange(5))  # every row visited: the SOX branch
    shifted = raw - raw.gather(1, labels[:, None])
    loss, _ = definition.apply(state, shifted, torch.arange(5))
    (got,) = torch.autograd.grad(loss, raw)
    (want,) = torch.autograd.grad(torch.nn.functional.cross_entropy(raw, labels), raw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-14)


def test_adjust_gamma_is_a_cosine_schedule_in_the_state():
    definition = xrisk.EntLossClassification(3, mode="SOX", gamma=0.2)
    state = definition.init(xp=xp, dtype=xp.float64)
    values = [float(definition.adjust_gamma(state, e, 4).smoothing) for e in range(5)]
    want = [0.2 + 0.8 * (1 + np.cos(np.pi * e / 4)) / 2 for e in range(5)]
    np.testing.assert_allclose(values, want, rtol=1e-12)
    assert values[0] == pytest.approx(1.0) and values[-1] == pytest.approx(0.2)
    scent = xrisk.EntLossClassification(3, mode="SCENT")
    kept = scent.init(xp=xp, dtype=xp.float64)
    assert scent.adjust_gamma(kept, 2, 4) is kept


@pytest.mark.parametrize(("epoch", "total", "error", "match"), [
    (5, 4, ValueError, r"epoch=5 with num_epochs=4; expected 0 <= epoch <= num_epochs.*Fix"),
    (-1, 4, ValueError, r"epoch=-1; expected an integer >= 0"),
    (1, 0, ValueError, r"num_epochs=0; expected an integer >= 1"),
    (1.5, 4, TypeError, r"epoch=1.5 .*expected an integer"),
])
def test_adjust_gamma_refuses_bad_epochs(epoch, total, error, match):
    definition = xrisk.EntLossClassification(3, mode="SOX")
    with pytest.raises(error, match=match):
        definition.adjust_gamma(definition.init(xp=xp), epoch, total)


def test_adapters_adjust_gamma_and_export_the_flag():
    import xrisk.jax as xj
    import xrisk.tensorflow as xt
    import xrisk.torch as xr

    for loss in (xr.EntLossClassification(3, mode="SOX", gamma=0.5, dtype="float64"),
                 xt.EntLossClassification(3, mode="SOX", gamma=0.5, dtype="float64")):
        loss.adjust_gamma(2, 4)
        assert loss.export_state()["smoothing"] == pytest.approx(0.75)
    jax_loss = xj.EntLossClassification(3, mode="SOX", gamma=0.5)
    state = jax_loss.adjust_gamma(jax_loss.init(), 4, 4)
    assert float(state.smoothing) == pytest.approx(0.5)


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"logits": np.array([[0.0, -np.inf]])}, ValueError, r"logits contain non-finite.*Fix"),
    ({"index": np.array([3])}, ValueError, r"index values \[3\] are outside.*Fix"),
    ({"mask": np.array([[1, 1, 1]])}, ValueError, r"classes sizes differ.*expected.*Fix"),
    ({"logits": np.array([[0, 1]])}, TypeError,
     r"logits has dtype \S*int64; expected a floating dtype.*Fix"),
])
def test_bad_inputs_raise_and_leave_the_state(change, error, match):
    import xrisk.torch as xr

    loss_fn = xr.EntLossClassification(3, dtype="float64")
    before = loss_fn.export_state()
    inputs = {"logits": np.zeros((1, 2)), "index": np.array([0]), **change}
    with pytest.raises(error, match=match):
        loss_fn(**{k: torch.as_tensor(v) for k, v in inputs.items()})
    for name, value in loss_fn.export_state().items():
        np.testing.assert_array_equal(value, before[name])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mode": "sox"}, r"mode='sox'; expected one of \('SCENT', 'SOX'\)"),
    ({"alpha": 0.0}, r"alpha=0.0; expected a finite number > 0"),
    ({"gamma": 0.0}, r"gamma=0.0; expected"),
    ({"alpha_multiplier": -1.0}, r"alpha_multiplier=-1.0; expected"),
])
def test_bad_hyper_parameters_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        xrisk.EntLossClassification(3, **kwargs)
