"""Inputs users really pass: empty batches, every index dtype, bf16 / fp16 scores, logits."""

from __future__ import annotations

import warnings

import array_api_compat.numpy as xnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import given
from hypothesis import strategies as st

import xrisk
import xrisk.metrics
from tests._cases import CASES, is_binary
from xrisk.backends import get_backend

N = 12
SCORES = np.array([0.9, 0.2, 0.6, 0.4, 0.7, 0.1], np.float32)
LABELS = np.array([1, 0, 1, 0, 1, 0])
INDEX = np.array([0, 3, 5, 7, 9, 11])
CONVERT = {"torch": torch.as_tensor, "tensorflow": tf.constant, "jax": jnp.asarray}
FRAMEWORKS = sorted(CONVERT)


def _definition(name):
    return CASES[name].make(N, {})


def _params(name, definition, xp, dtype):
    values = CASES[name].initial_params(np.random.default_rng(0))
    return definition.params_type(**{k: xp.asarray(np.asarray(v, dtype=dtype))
                                     for k, v in values.items()})


def _dtype_name(x):
    """``"float32"`` for a torch, TensorFlow or JAX array of that dtype."""
    return getattr(x.dtype, "name", str(x.dtype).rpartition(".")[2])


def _grads(framework, definition, state, params, scores, labels, index):
    """(loss, d loss / d scores, d loss / d params, new state) with the framework's autodiff."""
    if framework == "torch":
        scores = scores.clone().requires_grad_(True)
        params = type(params)(*(p.clone().requires_grad_(True) for p in params))
        loss, new = definition.apply(state, scores, labels, index, params=params)
        inputs = [scores, *params]
        grads = torch.autograd.grad(loss, inputs, allow_unused=True) if loss.requires_grad \
            else [None] * len(inputs)
        return loss.detach(), grads[0], grads[1:], new
    if framework == "tensorflow":
        params = type(params)(*(tf.Variable(p) for p in params))
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss, new = definition.apply(state, scores, labels, index, params=params)
        grads = tape.gradient(loss, [scores, *params])
        return loss, grads[0], grads[1:], new
    (loss, new), (g_scores, g_params) = jax.value_and_grad(
        lambda s, p: definition.apply(state, s, labels, index, params=p), argnums=(0, 1),
        has_aux=True)(scores, params)
    return loss, g_scores, list(g_params), new


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", sorted(filter(is_binary, CASES)))
def test_empty_batch_gives_zero_loss_zero_gradients_and_keeps_state(framework, name):
    definition = _definition(name)
    xp = get_backend(framework).namespace
    state = definition.init(xp=xp)
    params = _params(name, definition, xp, np.float32)
    convert = CONVERT[framework]
    empty = (convert(np.zeros(0, np.float32)), convert(np.zeros(0, np.int64)),
             convert(np.zeros(0, np.int64)))
    loss, g_scores, g_params, new = _grads(framework, definition, state, params, *empty)
    assert float(loss) == 0.0
    assert g_scores is not None and tuple(g_scores.shape) == (0,)
    for grad in g_params:  # connected: finite zeros, not None (optimizers see a normal step)
        assert grad is not None and float(np.asarray(grad)) == 0.0
    for field in state._fields:
        np.testing.assert_array_equal(np.asarray(getattr(new, field)),
                                      np.asarray(getattr(state, field)))


INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_every_integer_index_dtype_gives_the_int64_result(framework, dtype):
    definition = xrisk.APLoss(N)
    xp = get_backend(framework).namespace
    convert = CONVERT[framework]
    expected, expected_state = definition.apply(
        definition.init(xp=xnp, dtype=np.float32), SCORES, LABELS, INDEX)
    loss, state = definition.apply(definition.init(xp=xp), convert(SCORES), convert(LABELS),
                                   convert(INDEX.astype(dtype)))
    np.testing.assert_allclose(float(loss), float(expected), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(state.u), expected_state.u, rtol=1e-6)
    bad = INDEX.astype(dtype)
    bad[2] = np.iinfo(dtype).max  # outside the key space, as every dtype can say it
    with pytest.raises(ValueError, match=rf"index values \[{np.iinfo(dtype).max}\] are outside"):
        definition.apply(definition.init(xp=xp), convert(SCORES), convert(LABELS),
                         convert(bad))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint16", "uint32", "uint64"])
def test_small_and_unsigned_index_dtypes_work_when_traced(dtype):
    """Under jax.jit and tf.function the index is cast to the backend's index dtype (TF has
    no uint8 range, small dtypes cannot hold num_samples); a value the cast wraps still fails."""
    definition = xrisk.APLoss(300)  # larger than int8 / uint8 can count
    _, want = definition.apply(definition.init(xp=xnp, dtype=np.float32), SCORES, LABELS, INDEX)
    state = definition.init(xp=jnp)
    loss, new = jax.jit(definition.apply)(state, jnp.asarray(SCORES), jnp.asarray(LABELS),
                                          jnp.asarray(INDEX.astype(dtype)))
    np.testing.assert_allclose(np.asarray(new.u), want.u, rtol=1e-6)
    tf_state = definition.init(xp=get_backend("tensorflow").namespace)
    loss, new = tf.function(definition.apply)(tf_state, tf.constant(SCORES),
                                              tf.constant(LABELS),
                                              tf.constant(INDEX.astype(dtype)))
    np.testing.assert_allclose(new.u.numpy(), want.u, rtol=1e-6)
    huge = INDEX.astype(dtype)
    huge[0] = np.iinfo(dtype).max  # outside [0, 300) unless the dtype tops below 300
    loss, new = jax.jit(definition.apply)(state, jnp.asarray(SCORES), jnp.asarray(LABELS),
                                          jnp.asarray(huge))
    assert np.isnan(float(loss)) == (np.iinfo(dtype).max >= 300)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", sorted(filter(is_binary, CASES)))
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_scores_work_in_every_loss(framework, name, dtype):
    """Computed in the loss's float dtype (float32 here), gradients back in the scores'."""
    definition = _definition(name)
    xp = get_backend(framework).namespace
    state, params = definition.init(xp=xp), _params(name, definition, xp, np.float32)
    convert = CONVERT[framework]
    scores = {"torch": lambda a: torch.as_tensor(a).to(getattr(torch, dtype)),
              "tensorflow": lambda a: tf.cast(tf.constant(a), dtype),
              "jax": lambda a: jnp.asarray(a, dtype=dtype)}[framework](SCORES)
    loss, g_scores, g_params, new = _grads(framework, definition, state, params, scores,
                                           convert(LABELS), convert(INDEX))
    want, _ = definition.apply(definition.init(xp=xnp, dtype=np.float32),
                               np.asarray(get_backend(framework).to_numpy(scores)), LABELS,
                               INDEX, params=_params(name, definition, xnp, np.float32))
    assert _dtype_name(loss) == "float32"
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-5, atol=1e-6)
    assert _dtype_name(g_scores) == dtype
    assert np.all(np.isfinite(get_backend(framework).to_numpy(g_scores)))
    for field in new._fields:
        assert np.all(np.isfinite(np.asarray(getattr(new, field))))


@given(margin=st.sampled_from([1e-12, 1e-8, 1e-5, 1e-3, 0.5, 1.0]),
       surrogate=st.sampled_from(["squared_hinge", "hinge", "logistic", "squared"]),
       batch=st.integers(2, 64), seed=st.integers(0, 2**16))
def test_ap_in_float16_never_gives_nan(margin, surrogate, batch, seed):
    """The u_all floor is sqrt(tiny) of the scores' dtype (1e-18 was 0 in float16)."""
    rng = np.random.default_rng(seed)
    definition = xrisk.APLoss(80, margin=margin, surrogate=surrogate)
    state = definition.init(xp=xnp, dtype=np.float16)
    for _ in range(3):
        labels = (rng.uniform(size=batch) < 0.3).astype(np.int64)
        labels[0] = 1
        scores = rng.uniform(0, 1, batch).astype(np.float16)
        loss, state = definition.apply(state, scores, labels,
                                       rng.choice(80, batch, replace=False))
        assert np.isfinite(loss) and np.all(np.isfinite(state.u))


METRICS = {
    "auroc": lambda y, s: xrisk.metrics.auroc(y, s),
    "average_precision": lambda y, s: xrisk.metrics.average_precision(y, s),
    "one_way_partial_auroc": lambda y, s: xrisk.metrics.one_way_partial_auroc(y, s, max_fpr=0.5),
    "two_way_partial_auroc": lambda y, s: xrisk.metrics.two_way_partial_auroc(
        y, s, max_fpr=0.5, min_tpr=0.5),
    "ndcg_at_k": lambda y, s: xrisk.metrics.ndcg_at_k(y, s, 3),
    "evaluate": lambda y, s: xrisk.metrics.evaluate(y, s)["auroc"],
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("metric", sorted(METRICS))
def test_metrics_take_bfloat16_scores(framework, metric):
    scores = {"torch": lambda: torch.as_tensor(SCORES).bfloat16(),
              "tensorflow": lambda: tf.cast(tf.constant(SCORES), tf.bfloat16),
              "jax": lambda: jnp.asarray(SCORES, jnp.bfloat16)}[framework]()
    exact = get_backend(framework).to_numpy(scores)
    assert exact.dtype == np.float32  # numpy has no bfloat16: float32, exactly
    compute = METRICS[metric]
    np.testing.assert_allclose(np.asarray(compute(LABELS, scores)),
                               np.asarray(compute(LABELS, exact)))


@pytest.mark.parametrize("name", ["APLoss", "AUCMLoss"])
def test_scores_outside_0_1_warn_once_naming_sigmoid(name):
    definition = _definition(name)
    params = _params(name, definition, xnp, np.float64)
    logits = np.array([2.5, -1.0, 0.3, -0.2, 1.5, -3.0])
    with pytest.warns(xrisk.InputWarning, match=r"scores lie outside \[0, 1\] \(received min "
                                               r"-3, max 2.5\).*Fix: pass sigmoid outputs") as w:
        definition.apply(definition.init(xp=xnp), logits, LABELS, INDEX, params=params)
    assert w[0].filename == __file__  # points at the caller, not at xrisk
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per loss object
        definition.apply(definition.init(xp=xnp), logits, LABELS, INDEX, params=params)
        other = _definition(name)  # probabilities: no warning
        other.apply(other.init(xp=xnp), SCORES.astype(np.float64), LABELS, INDEX,
                    params=params)
    with pytest.warns(xrisk.InputWarning):  # a new loss object warns again
        other.apply(other.init(xp=xnp), logits, LABELS, INDEX, params=params)


def test_the_interval_warning_names_the_line_that_called_an_adapter():
    """The stack level is fixed by the known call depth (no walk over the stack): through
    the TensorFlow module's __call__ and its wrapper, the torch module's call machinery, and
    check_batch."""
    import xrisk.tensorflow as xtf
    import xrisk.torch as xt

    logits = tf.constant([2.5, -1.0, 0.3, -0.2, 1.5, -3.0])
    with pytest.warns(xrisk.InputWarning, match="scores lie outside") as w:
        xtf.APLoss(N)(logits, tf.constant(LABELS), tf.constant(INDEX))
    assert w[0].filename == __file__
    with pytest.warns(xrisk.InputWarning, match="scores lie outside") as w:
        xt.APLoss(N)(torch.as_tensor(logits.numpy()), torch.as_tensor(LABELS),
                     torch.as_tensor(INDEX))
    assert w[0].filename == __file__
    definition = _definition("APLoss")
    with pytest.warns(xrisk.InputWarning, match="scores lie outside") as w:
        definition.check_batch(logits.numpy(), LABELS, INDEX)
    assert w[0].filename == __file__


def test_the_interval_warning_names_the_line_that_called_the_jax_adapter():
    """JAX's three entry points: the pure apply, check_batch before a jitted step, and
    StatefulLoss, which checks a host batch on every call."""
    import xrisk.jax as xj

    logits = np.array([2.5, -1.0, 0.3, -0.2, 1.5, -3.0])
    for call in (lambda loss: loss.apply(loss.init(), logits, LABELS, INDEX),
                 lambda loss: loss.check_batch(logits, LABELS, INDEX),
                 lambda loss: xj.StatefulLoss(loss)(logits, LABELS, INDEX)):
        with pytest.warns(xrisk.InputWarning, match="scores lie outside") as w:
            call(xj.APLoss(N))
        assert w[0].filename == __file__


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "FocalLoss"])
def test_losses_of_logits_do_not_warn(name):
    definition = _definition(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        definition.apply(definition.init(xp=xnp), np.array([2.5, -1.0, 0.3, -0.2, 1.5, -3.0]),
                         LABELS, INDEX)


def test_traced_scores_outside_0_1_do_not_warn():
    """The interval warning reads values on the host only: no warning (and no host read)
    under jax.jit."""
    definition = xrisk.APLoss(N)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.jit(definition.apply)(definition.init(xp=jnp), jnp.asarray([2.0, -1.0]),
                                  jnp.asarray([1, 0]), jnp.asarray([0, 1]))


def test_tensorflow_shim_knows_finfo_and_iinfo():
    xp = get_backend("tensorflow").namespace
    assert float(xp.finfo(tf.bfloat16).smallest_normal) == float(np.finfo(np.float32).tiny)
    assert float(xp.finfo(tf.float16).smallest_normal) == float(np.finfo(np.float16).tiny)
    assert xp.iinfo(tf.int32).max == 2**31 - 1
