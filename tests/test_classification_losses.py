"""PairwiseAUCLoss, CrossEntropyLoss, FocalLoss and CompositionalAUCLoss beyond the harness.

tests/test_cross_backend.py checks every backend against the numpy references on sigmoid
scores; this file checks what it does not reach: large logits in float32 in every framework,
focal against its reference over wide logits, the compositional schedule and its counter,
one-class batches and the constructors' messages.
"""

from __future__ import annotations

import warnings

import array_api_compat.numpy as np_xp
import array_api_strict
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
from tests import _reference_classification as ref
from tests._cases import SURROGATE_NAMES

AUTODIFF = ("torch", "jax", "tensorflow")
EVERY_FRAMEWORK = ("numpy", "array_api_strict", *AUTODIFF)
ADAPTERS = {"torch": xtorch, "tensorflow": xtf, "jax": xjax}


def value_and_grad(framework, definition, scores, labels, dtype, params=None, state=None):
    """``(loss, d loss / d scores or None, new state)`` of one core ``apply`` in
    ``framework``, with every float input in ``dtype``."""
    scores = np.asarray(scores, dtype=dtype)
    labels = np.asarray(labels)
    params = {} if params is None else params
    if framework in ("numpy", "array_api_strict"):
        convert = np.asarray if framework == "numpy" else array_api_strict.asarray
        xp = np_xp if framework == "numpy" else array_api_strict
        state = definition.init(xp=xp, dtype=getattr(xp, np.dtype(dtype).name)) \
            if state is None else state
        aux = definition.params_type(**{k: convert(np.asarray(v, dtype)) for k, v in
                                        params.items()})
        loss, new = definition.apply(state, convert(scores), convert(labels), params=aux)
        return float(loss), None, new
    if framework == "torch":
        s = torch.tensor(scores, requires_grad=True)
        state = definition.init(xp=_xp("torch"), dtype=getattr(torch, np.dtype(dtype).name)) \
            if state is None else state
        aux = definition.params_type(**{k: torch.tensor(np.asarray(v, dtype)) for k, v in
                                        params.items()})
        loss, new = definition.apply(state, s, torch.as_tensor(labels), params=aux)
        loss.backward()
        return float(loss.detach()), s.grad.numpy(), new
    if framework == "jax":
        state = definition.init(xp=jnp, dtype=jnp.dtype(dtype)) if state is None else state
        aux = definition.params_type(**{k: jnp.asarray(np.asarray(v, dtype)) for k, v in
                                        params.items()})
        (loss, new), grad = jax.value_and_grad(
            lambda s: definition.apply(state, s, jnp.asarray(labels), params=aux),
            has_aux=True)(jnp.asarray(scores))
        return float(loss), np.asarray(grad), new
    s = tf.constant(scores)
    state = definition.init(xp=_xp("tensorflow"), dtype=tf.as_dtype(dtype)) \
        if state is None else state
    aux = definition.params_type(**{k: tf.constant(np.asarray(v, dtype)) for k, v in
                                    params.items()})
    with tf.GradientTape() as tape:
        tape.watch(s)
        loss, new = definition.apply(state, s, tf.constant(labels), params=aux)
    return float(loss), tape.gradient(loss, s).numpy(), new


def _xp(framework):
    return xrisk.backends.get_backend(framework).namespace


# --------------------------------------------------------------------------- large logits

LOGITS = np.array([100.0, -100.0, 100.0, -100.0, 0.0, 30.0])
LOGIT_LABELS = np.array([1, 1, 0, 0, 1, 0])

STABLE_CASES = {
    "cross_entropy": (xrisk.CrossEntropyLoss(), lambda s, y: ref.cross_entropy(s, y)),
    "focal": (xrisk.FocalLoss(alpha=0.25, gamma=2.0),
              lambda s, y: ref.focal(s, y, alpha=0.25, gamma=2.0)),
    "focal_gamma_half": (xrisk.FocalLoss(alpha=0.6, gamma=0.5),
                         lambda s, y: ref.focal(s, y, alpha=0.6, gamma=0.5)),
    "pairwise_logistic": (
        xrisk.PairwiseAUCLoss(surrogate="logistic", scale=1.0),
        lambda s, y: ref.pairwise_auc(s, y, surrogate_name="logistic", margin=1.0, scale=1.0)),
    "pairwise_logistic_scale_4": (
        xrisk.PairwiseAUCLoss(surrogate="logistic", scale=4.0),
        lambda s, y: ref.pairwise_auc(s, y, surrogate_name="logistic", margin=1.0, scale=4.0)),
}


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
@pytest.mark.parametrize("case", sorted(STABLE_CASES))
def test_logits_of_100_are_stable_in_float32(framework, case):
    """exp(100) and exp(200) overflow float32: a naive log(1 + exp(.)) returns inf (LibAUC's
    logistic surrogate) and 1 - exp(-BCE) loses the focal weight; every framework
    returns the float64 reference's finite loss and gradient in float32."""
    definition, reference = STABLE_CASES[case]
    loss, grad, _ = value_and_grad(framework, definition, LOGITS, LOGIT_LABELS, np.float32)
    with np.errstate(over="ignore"):  # the reference's slope uses exp(800) -> inf -> 0
        want_loss, want_grad, _, _ = reference(LOGITS, LOGIT_LABELS)
    assert np.isfinite(want_loss) and want_loss > 10  # the confidently wrong logits count
    assert_allclose(loss, want_loss, rtol=1e-6)
    if grad is not None:
        assert grad.dtype == np.float32
        assert np.all(np.isfinite(grad))
        assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("framework", AUTODIFF)
def test_adapter_cross_entropy_of_large_logits_is_finite_in_float32(framework):
    loss_fn = ADAPTERS[framework].CrossEntropyLoss(dtype="float32")
    logits, labels = LOGITS.astype(np.float32), LOGIT_LABELS
    if framework == "jax":
        value, _ = loss_fn.apply(loss_fn.init(), jnp.asarray(logits), jnp.asarray(labels))
    elif framework == "torch":
        value = loss_fn(torch.as_tensor(logits), torch.as_tensor(labels))
    else:
        value = loss_fn(tf.constant(logits), tf.constant(labels))
    assert_allclose(float(value), ref.cross_entropy(LOGITS, LOGIT_LABELS)[0], rtol=1e-6)


# --------------------------------------------------------------------------- focal

@given(
    logits=st.lists(st.floats(-40, 40, allow_nan=False), min_size=1, max_size=8),
    data=st.data(),
    alpha=st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0]),
    gamma=st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]),
)
def test_focal_matches_the_reference_over_wide_logits(logits, data, alpha, gamma):
    labels = np.asarray(data.draw(st.lists(st.integers(0, 1), min_size=len(logits),
                                           max_size=len(logits))))
    want_loss, want_grad, _, _ = ref.focal(logits, labels, alpha=alpha, gamma=gamma)
    for framework in ("torch", "jax"):
        loss, grad, _ = value_and_grad(framework, xrisk.FocalLoss(alpha=alpha, gamma=gamma),
                                       logits, labels, np.float64)
        # atol: the reference's sigmoid(z) - y cancels (absolute error ~1e-16 / B)
        assert_allclose(loss, want_loss, rtol=1e-10, atol=1e-15)
        assert_allclose(grad, want_grad, rtol=1e-9, atol=1e-15)


def test_focal_alpha_weighs_positives_per_example():
    """The paper's convention: alpha = 1 keeps positives only, alpha = 0 negatives only.
    LibAUC 2.0.1 weighs negatives by alpha, and its (B,) x (B, 1) broadcast averages
    the weights over the batch, so both of these would be half of the whole loss there."""
    logits, labels = np.array([0.3, -1.2, 2.0, 0.7]), np.array([1, 0, 0, 1])
    per_example = np.array([ref.focal([z], [y], alpha=0.5, gamma=2.0)[0] * 2
                            for z, y in zip(logits, labels, strict=True)])  # unweighted
    positives_only = per_example[labels == 1].sum() / len(logits)
    negatives_only = per_example[labels == 0].sum() / len(logits)
    for alpha, want in ((1.0, positives_only), (0.0, negatives_only)):
        loss, _, _ = value_and_grad("numpy", xrisk.FocalLoss(alpha=alpha), logits, labels,
                                    np.float64)
        assert_allclose(loss, want, rtol=1e-12)
    libauc_b14 = 0.5 * per_example.mean()  # batch-mean of the reversed weights (1, 0, 0, 1)
    assert not np.isclose(positives_only, libauc_b14)


def test_cross_entropy_gradient_is_sigmoid_minus_label():
    logits, labels = np.array([-3.0, 0.5, 8.0]), np.array([1, 0, 1])
    loss, grad, _ = value_and_grad("torch", xrisk.CrossEntropyLoss(), logits, labels,
                                   np.float64)
    assert_allclose(grad, (1 / (1 + np.exp(-logits)) - labels) / 3, rtol=1e-12)
    assert_allclose(loss, torch.nn.functional.binary_cross_entropy_with_logits(
        torch.tensor(logits), torch.tensor(labels, dtype=torch.float64)).item(), rtol=1e-12)


# --------------------------------------------------------------------------- compositional

def _params(a=0.3, b=0.2, alpha=0.5):
    return {"a": a, "b": b, "alpha": alpha}


def _expected_phases(k, steps):
    return ["bce" if t % (2 * k) < k else "auc" for t in range(steps)]


@pytest.mark.parametrize("framework", EVERY_FRAMEWORK)
def test_compositional_schedule_k2_alternates_two_bce_and_two_auc_steps(framework):
    """k = 2: steps 0, 1 BCE; 2, 3 AUC-M; 4, 5 BCE; 6 AUC-M — each step equals the
    reference of its phase; the counter is an int32 that counts every call."""
    definition = xrisk.CompositionalAUCLoss(k=2, version="v2")
    rng = np.random.default_rng(0)
    state = None
    for t, phase in enumerate(_expected_phases(2, 7)):
        scores, labels = rng.uniform(0.05, 0.95, 6), np.array([1, 0, 1, 0, 0, 1])
        loss, grad, state = value_and_grad(framework, definition, scores, labels, np.float64,
                                           params=_params(), state=state)
        want = ref.compositional_auc(scores, labels, 0.3, 0.2, 0.5, t, k=2, margin=1.0,
                                     version="v2")
        bce = ref.cross_entropy(np.log(scores / (1 - scores)), labels)[0]
        assert_allclose(loss, want[0], rtol=1e-12, err_msg=f"step {t}")
        assert np.isclose(loss, bce, rtol=1e-9) == (phase == "bce"), f"step {t}: {phase}"
        if grad is not None:
            assert_allclose(grad, want[1], rtol=1e-10, atol=1e-14)
        assert np.asarray(state.step).dtype == np.int32
        assert int(np.asarray(state.step)) == t + 1


def test_compositional_auxiliaries_get_gradient_on_auc_steps_only():
    loss_fn = xtorch.CompositionalAUCLoss(k=1, dtype="float64")
    scores, labels = torch.tensor([0.2, 0.7, 0.4, 0.9], dtype=torch.float64), torch.tensor(
        [0, 1, 0, 1])
    for phase in _expected_phases(1, 4):
        for p in (loss_fn.a, loss_fn.b, loss_fn.alpha):
            p.grad = None
        loss_fn(scores, labels).backward()
        grads = [p.grad for p in (loss_fn.a, loss_fn.b, loss_fn.alpha)]
        assert all(g is not None and torch.isfinite(g) for g in grads)
        if phase == "bce":
            assert all(float(g) == 0.0 for g in grads)
        else:
            assert any(float(g) != 0.0 for g in grads)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_compositional_eager_cpu_step_computes_its_phase_only_with_the_same_results(version):
    """An eager CPU step reads the counter on the host and computes one branch; the value
    and every gradient (scores, a, b, alpha) equal those of the two-branch step a traced or
    device step takes."""
    import contextlib
    from unittest import mock

    import xrisk.losses.classification as classification

    scores = np.array([0.2, 0.7, 0.4, 0.9, 0.55])
    labels = torch.tensor([0, 1, 0, 1, 0])
    runs = {}
    for layout in ("one branch", "both branches"):
        loss_fn = xtorch.CompositionalAUCLoss(k=2, version=version, dtype="float64")
        with torch.no_grad():
            loss_fn.a.fill_(0.3), loss_fn.b.fill_(0.6), loss_fn.alpha.fill_(0.2)
        with contextlib.ExitStack() as patches:
            logs = patches.enter_context(mock.patch.object(
                classification, "_clipped_logs", wraps=classification._clipped_logs))
            aucm = patches.enter_context(mock.patch.object(
                classification, "aucm_value", wraps=classification.aucm_value))
            if layout == "both branches":
                patches.enter_context(mock.patch.object(
                    classification.CompositionalAUCLoss, "_phase_on_host", return_value=None))
            results = []
            for _ in range(4):  # k = 2: two cross-entropy steps, then two AUC-M steps
                s = torch.tensor(scores, requires_grad=True)
                for p in (loss_fn.a, loss_fn.b, loss_fn.alpha):
                    p.grad = None
                loss = loss_fn(s, labels)
                loss.backward()
                results.append([loss.detach().numpy(), s.grad.numpy()]
                               + [p.grad.numpy() for p in (loss_fn.a, loss_fn.b, loss_fn.alpha)])
        runs[layout] = results, (logs.call_count, aucm.call_count)
    (one, one_calls), (both, both_calls) = runs["one branch"], runs["both branches"]
    assert one_calls == (2, 2) and both_calls == (4, 4)
    for step, (got, want) in enumerate(zip(one, both, strict=True)):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"step {step}")


@pytest.mark.parametrize("framework", AUTODIFF)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compositional_scores_of_exactly_0_and_1_give_finite_values_and_gradients(
        framework, dtype):
    """The BCE logs see clipped probabilities (1 - s is clipped on its own: 1 - 1e-12 rounds
    to 1 in float32, so clipping s alone would give log(0) at s = 1); neither phase's
    gradient is NaN, including the branch that where() leaves out."""
    definition = xrisk.CompositionalAUCLoss(k=1)
    scores, labels = np.array([1.0, 0.0, 0.5, 1.0]), np.array([0, 1, 1, 1])
    state = None
    for t in range(2):  # step 0 BCE, step 1 AUC-M
        loss, grad, state = value_and_grad(framework, definition, scores, labels, dtype,
                                           params=_params(), state=state)
        want, want_grad, _, _ = ref.compositional_auc(scores, labels, 0.3, 0.2, 0.5, t, k=1,
                                                      margin=1.0, version="v1")
        assert np.isfinite(loss) and np.all(np.isfinite(grad)), (t, loss, grad)
        assert_allclose(loss, want, rtol=1e-5)
        assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
    assert loss != 0.0


def test_compositional_counter_skips_invalid_and_empty_batches():
    definition = xrisk.CompositionalAUCLoss(k=1)
    params = definition.init_params(xp=jnp, dtype=jnp.float64)
    step = jax.jit(lambda st, s, y: definition.apply(st, s, y, params=params))
    state = definition.init(xp=jnp, dtype=jnp.float64)
    loss, state = step(state, jnp.array([0.2, 0.8]), jnp.array([0, 2]))  # label 2, in-graph
    assert np.isnan(float(loss)) and int(state.step) == 0
    loss, state = definition.apply(state, jnp.zeros(0), jnp.zeros(0, dtype=jnp.int32),
                                   params=params)  # empty batch
    assert float(loss) == 0.0 and int(state.step) == 0
    torch_loss = xtorch.CompositionalAUCLoss()
    with pytest.raises(ValueError, match="labels must be 0 or 1"):  # eager: raises, no count
        torch_loss(torch.tensor([0.2, 0.8]), torch.tensor([0, 2]))
    assert int(torch_loss.step) == 0


def test_compositional_counter_resumes_across_frameworks():
    """An exported counter carries the phase: after one (BCE) step in torch, the next step
    is AUC-M in every framework."""
    scores, labels = np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])
    source = xtorch.CompositionalAUCLoss(k=1, version="v2", dtype="float64")
    with torch.no_grad():
        source.a.fill_(0.3), source.b.fill_(0.2), source.alpha.fill_(0.5)
    source(torch.as_tensor(scores), torch.as_tensor(labels))
    exported = source.export_state()
    assert exported["step"].dtype == np.int32 and int(exported["step"]) == 1
    assert "step" in source.state_dict()
    want = source(torch.as_tensor(scores), torch.as_tensor(labels)).item()
    assert_allclose(want, 0.57625, rtol=1e-12)  # AUC-M v2 (the AUCMLoss example)
    tf_loss = xtf.CompositionalAUCLoss(k=1, version="v2", dtype="float64")
    tf_loss.load_state(exported)
    assert_allclose(float(tf_loss(tf.constant(scores), tf.constant(labels))), want, rtol=1e-12)
    assert int(tf_loss.step.numpy()) == 2
    jax_loss = xjax.CompositionalAUCLoss(k=1, version="v2", dtype="float64")
    state, params = jax_loss.load_state(exported)
    value, state = jax_loss.apply(state, jnp.asarray(scores), jnp.asarray(labels),
                                  params=params)
    assert_allclose(float(value), want, rtol=1e-12)
    assert state.step.dtype == jnp.int32 and int(state.step) == 2


def test_compositional_declares_the_auxiliaries_and_ascent_of_aucm():
    comp, aucm = xrisk.CompositionalAUCLoss(margin=0.7), xrisk.AUCMLoss(margin=0.7)
    assert comp.auxiliaries() == aucm.auxiliaries()
    params = xrisk.AUCMParams(np.float64(0.6), np.float64(0.1), np.float64(0.4))
    assert_allclose(comp.ascent_direction(params)["alpha"],
                    aucm.ascent_direction(params)["alpha"], rtol=0)
    assert comp.state_tables()["step"].kind == "int"
    assert comp.state_shapes()["step"] == ()


# --------------------------------------------------------------------------- one-class batches

@pytest.mark.parametrize("framework", AUTODIFF)
@pytest.mark.parametrize("surrogate", SURROGATE_NAMES)
@pytest.mark.parametrize("label", [0, 1])
def test_pairwise_one_class_batch_has_zero_loss_and_gradient(framework, surrogate, label):
    loss, grad, _ = value_and_grad(framework, xrisk.PairwiseAUCLoss(surrogate=surrogate),
                                   [0.3, 0.9, -2.0], [label] * 3, np.float64)
    assert loss == 0.0
    assert_allclose(grad, 0.0, atol=0)


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "FocalLoss", "CompositionalAUCLoss"])
@pytest.mark.parametrize("label", [0, 1])
def test_other_losses_are_finite_on_one_class_batches(name, label):
    definition = xrisk.LOSSES[name]()
    params = _params() if name == "CompositionalAUCLoss" else None
    state = None
    for _ in range(2):  # both phases of the compositional loss
        loss, grad, state = value_and_grad("torch", definition, [0.3, 0.9, 0.6], [label] * 3,
                                           np.float64, params=params, state=state)
        assert np.isfinite(loss) and np.all(np.isfinite(grad))


def test_stateless_losses_validate_an_index_they_do_not_use():
    definition = xrisk.PairwiseAUCLoss()
    state = definition.init(xp=np_xp)
    value, _ = definition.apply(state, np.array([0.2, 0.8]), np.array([0, 1]),
                                np.array([7, 123456]))
    assert np.isfinite(value)
    with pytest.raises(ValueError, match="index values"):
        definition.apply(state, np.array([0.2, 0.8]), np.array([0, 1]), np.array([0, -1]))


# --------------------------------------------------------------------------- constructors

@pytest.mark.parametrize("build, error, message", [
    (lambda: xrisk.PairwiseAUCLoss(surrogate="sigmoid"), ValueError,
     r"surrogate='sigmoid'.*Expected one of"),
    (lambda: xrisk.PairwiseAUCLoss(margin=0.0), ValueError, r"margin=0.0; expected .*> 0"),
    (lambda: xrisk.PairwiseAUCLoss(scale=-1.0), ValueError, r"scale=-1.0; expected .*> 0"),
    (lambda: xrisk.PairwiseAUCLoss(hparam=1.0), TypeError, "hparam"),
    (lambda: xrisk.FocalLoss(alpha=1.5), ValueError, r"alpha=1.5; expected .*\[0, 1\]"),
    (lambda: xrisk.FocalLoss(gamma=-1.0), ValueError, r"gamma=-1.0; expected .*>= 0"),
    (lambda: xrisk.FocalLoss(gamma=float("nan")), ValueError, r"gamma=nan"),
    (lambda: xrisk.CrossEntropyLoss(reduction="sum"), TypeError, "reduction"),
    (lambda: xrisk.CompositionalAUCLoss(k=0), ValueError, r"k=0; expected an integer >= 1"),
    (lambda: xrisk.CompositionalAUCLoss(k=1.5), TypeError, r"k=1.5 .*expected an integer"),
    (lambda: xrisk.CompositionalAUCLoss(version="v3"), ValueError,
     r"version='v3'; expected one of \('v1', 'v2'\)"),
    (lambda: xrisk.CompositionalAUCLoss(imratio=0.0), ValueError,
     r"imratio=0.0; expected .*\(0, 1\]"),
    (lambda: xrisk.CompositionalAUCLoss(margin=-1.0), ValueError, r"margin=-1.0"),
    (lambda: xrisk.CompositionalAUCLoss(backend="ce"), TypeError, "backend"),
])
def test_constructors_reject_bad_hyperparameters(build, error, message):
    with pytest.raises(error, match=message):
        build()


@pytest.mark.parametrize("framework", AUTODIFF)
def test_adapters_validate_like_the_core(framework):
    module = ADAPTERS[framework]
    with pytest.raises(ValueError, match=r"FocalLoss: alpha=2"):
        module.FocalLoss(alpha=2)
    with pytest.raises(ValueError, match=r"CompositionalAUCLoss: k=0"):
        module.CompositionalAUCLoss(k=0)
    loss_fn = module.CompositionalAUCLoss(k=3)
    assert loss_fn.k == 3
    with pytest.raises(AttributeError, match="read-only"):
        loss_fn.k = 1


def test_compositional_warns_on_logits_and_the_logit_losses_do_not():
    """CompositionalAUCLoss's BCE steps expect probabilities; CE and focal take logits."""
    scores, labels = np.array([3.0, -2.0]), np.array([1, 0])
    definition = xrisk.CompositionalAUCLoss()
    params = definition.init_params(xp=np_xp, dtype=np_xp.float64)
    with pytest.warns(xrisk.InputWarning, match="CompositionalAUCLoss: scores lie outside"):
        definition.apply(definition.init(xp=np_xp), scores, labels, params=params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", xrisk.InputWarning)
        for definition in (xrisk.CrossEntropyLoss(), xrisk.FocalLoss(), xrisk.PairwiseAUCLoss()):
            definition.apply(definition.init(xp=np_xp), scores, labels)
