"""Mixed float dtypes: one rule for every registered loss in every framework.

``LossDefinition.apply`` computes in one dtype, the widest dtype of the score inputs with a
half-precision one (float16, bfloat16) counted as the loss's own dtype; before any state row
is read or written, every floating score and data input and every floating auxiliary is cast
to it. So a float64 view beside a float32 one, float64 scores into a float32 loss or float16
scores into a float64 one give the loss of the same call with every input first cast to that
dtype, bit for bit, and each input's gradient in its own dtype; a non-floating score is
refused with a clear error before any state changes. The adapters' losses (torch buffers and
TensorFlow variables written in place, JAX's pure ``apply``) are driven directly, since a
failure in the middle of a step would leave their state half written.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xrisk.jax
import xrisk.tensorflow
import xrisk.torch
from tests._cases import CASES, NUM_FEATURES
from tests._sizes import KEY_SPACES
from xrisk._apply import compute_dtype
from xrisk.backends import get_backend

FRAMEWORKS = ("torch", "tensorflow", "jax")
#: The float dtypes an input may have. Each input draws them in a rotated order (see
#: :func:`_draw_call`), so that the first, simplest example of every case is a mixed call.
FLOATS = ("float64", "float16", "float32", "bfloat16")
#: A dtype a score input may not have: refused before the step.
NOT_FLOATING = "int32"
ADAPTERS = {"torch": xrisk.torch, "tensorflow": xrisk.tensorflow, "jax": xrisk.jax}
#: Losses whose mixed calls raised before the rule (auxiliaries, or two score inputs).
MIXED_BEFORE = ("AUCMLoss", "CompositionalAUCLoss", "MultiLabelAUCMLoss", "InfoNCELoss",
                "GlobalContrastiveLoss", "BimodalContrastiveLoss",
                "MIDAM_softmax_pooling_loss", "MIDAM_attention_pooling_loss")


def _examples(ci_examples: int):
    """``ci_examples`` examples per test case outside the thorough profile (each is a first
    step of a loss in one framework: eager JAX compiles its primitives), 100 under it."""
    thorough = settings.get_current_profile_name() == "thorough"
    return settings(max_examples=100 if thorough else ci_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _bits(dtype: str) -> int:
    return int(ml_dtypes.finfo(dtype).bits)


def expected_compute_dtype(definition, score_dtypes: list[str], loss_dtype: str) -> str:
    """The rule, independently: the widest score dtype, each half one counted as the
    loss's float dtype (that of its float state tables and auxiliaries; float32 without)."""
    floats = definition.auxiliaries() or any(
        table.kind == "float" for table in definition.state_tables().values())
    held = loss_dtype if floats else "float32"
    widened = [held if _bits(d) < 32 else d for d in score_dtypes]
    return max(widened, key=_bits)


def _numpy(x) -> np.ndarray:
    """Any framework's array as numpy, bfloat16 kept (ml_dtypes)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.dtype == torch.bfloat16:
            return x.float().numpy().astype(ml_dtypes.bfloat16)
        return x.numpy()
    return np.asarray(x)


def _convert(framework: str, values: np.ndarray, dtype: str):
    """``values`` (numpy) as an array of ``framework`` in ``dtype`` (rounded there)."""
    rounded = np.asarray(values).astype(getattr(ml_dtypes, dtype, dtype))
    if framework == "torch":
        wide = rounded.astype(np.float32) if dtype == "bfloat16" else rounded
        return torch.as_tensor(wide).to(getattr(torch, dtype))
    if framework == "tensorflow":
        return tf.constant(rounded)
    return jnp.asarray(rounded)


def _state(framework: str, loss_fn, definition) -> dict[str, np.ndarray]:
    if framework == "jax":
        raise TypeError("JAX losses are pure; their state is returned")
    return {name: _numpy(getattr(loss_fn, name)).copy() for name in definition.state_tables()}


def _step(framework: str, definition, loss_dtype: str, inputs: dict, scores: list[str], *,
          compile_step: bool = False):
    """One call of the adapter's loss built on ``definition`` in ``loss_dtype``: (loss,
    gradients of the score inputs, gradients of the auxiliaries, state after), all numpy."""
    loss_fn = ADAPTERS[framework].XRiskLoss(definition, dtype=loss_dtype)
    if framework == "torch":
        leaves = {k: (v.clone().requires_grad_(True) if k in scores and v.is_floating_point()
                      else v) for k, v in inputs.items()}
        call = torch.compile(loss_fn, backend="aot_eager") if compile_step else loss_fn
        loss = call(**leaves)
        params = list(loss_fn.parameters())
        wrt = [leaves[k] for k in scores] + params
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        state = _state(framework, loss_fn, definition)
        return (_numpy(loss), dict(zip(scores, map(_numpy_or_none, grads[:len(scores)]))),
                [_numpy_or_none(g) for g in grads[len(scores):]], state)
    if framework == "tensorflow":
        def forward(named):
            return loss_fn(**named)
        call = tf.function(forward) if compile_step else forward
        params = list(loss_fn.trainable_variables)
        with tf.GradientTape() as tape:
            for k in scores:
                tape.watch(inputs[k])
            loss = call(inputs)
        grads = tape.gradient(loss, [inputs[k] for k in scores] + params)
        state = _state(framework, loss_fn, definition)
        return (_numpy(loss), dict(zip(scores, map(_numpy_or_none, grads[:len(scores)]))),
                [_numpy_or_none(g) for g in grads[len(scores):]], state)
    state0, params0 = loss_fn.init(), loss_fn.init_params()

    def from_scores(score_inputs, params):
        return loss_fn.apply(state0, **score_inputs,
                             **{k: v for k, v in inputs.items() if k not in scores},
                             params=params)

    grad_fn = jax.value_and_grad(from_scores, argnums=(0, 1), has_aux=True)
    if compile_step:
        grad_fn = jax.jit(grad_fn)
    (loss, new), (g_scores, g_params) = grad_fn({k: inputs[k] for k in scores}, params0)
    return (_numpy(loss), {k: _numpy(v) for k, v in g_scores.items()},
            [_numpy(g) for g in g_params], {k: _numpy(v) for k, v in new._asdict().items()})


def _numpy_or_none(g):
    return None if g is None else _numpy(g)


def _draw_call(data, names, framework: str, dtypes=FLOATS):
    """A loss, its batch as ``framework`` arrays with every score and data input in a drawn
    dtype, the loss's dtype, and those dtypes."""
    name = data.draw(st.sampled_from(names), label="loss")
    case = CASES[name]
    definition = case.make(data.draw(st.sampled_from(KEY_SPACES), label="key space size"),
                           data.draw(case.hyper, label="hyper-parameters"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    batch = case.batch(data.draw, definition, rng)
    kinds = {spec.name: spec.kind for spec in definition.inputs()}
    weights = rng.normal(size=NUM_FEATURES) / 2
    loss_dtype = data.draw(st.sampled_from(["float32", "float64"]), label="loss dtype")
    inputs, own = {}, {}
    for key, value in batch.items():
        if value is None:
            continue
        value = np.asarray(value)
        if kinds[key] == "score":
            value = value @ weights
            value = 1 / (1 + np.exp(-value)) if case.link == "sigmoid" else value
        if kinds[key] in ("score", "data"):
            # Rotated per input: the simplest example feeds float64 scores into a float32
            # loss beside float16 (then float32, ...) other inputs.
            turn = len(own) % len(dtypes)
            order = dtypes[turn:] + dtypes[:turn]
            own[key] = data.draw(st.sampled_from(order), label=f"{key} dtype")
            inputs[key] = value
        else:
            inputs[key] = value
    return definition, inputs, own, loss_dtype


def _framework_inputs(framework, inputs, dtypes):
    convert = {"torch": torch.as_tensor, "tensorflow": tf.constant, "jax": jnp.asarray}
    return {k: (_convert(framework, v, dtypes[k]) if k in dtypes else convert[framework](v))
            for k, v in inputs.items()}


def _check_against_one_dtype_call(framework, definition, inputs, own, loss_dtype, *,
                                  compile_step=False):
    """The call with inputs in the dtypes ``own`` against the same call whose score and
    data inputs come already cast to the compute dtype: the same values (each rounded to its
    own dtype first; float64 holds every one exactly) and the same program after the casts,
    so loss, state and gradients agree bit for bit."""
    scores = [spec.name for spec in definition.inputs()
              if spec.kind == "score" and spec.name in inputs]
    compute = expected_compute_dtype(definition, [own[k] for k in scores], loss_dtype)
    mixed = _framework_inputs(framework, inputs, own)
    rounded = {k: (_numpy(v).astype(np.float64) if k in own else inputs[k])
               for k, v in mixed.items()}
    one_dtype = _framework_inputs(framework, rounded, dict.fromkeys(own, compute))
    loss, grads, grad_params, state = _step(framework, definition, loss_dtype, mixed, scores,
                                            compile_step=compile_step)
    # torch.compile's "aot_eager" runs the same aten operations as eager (and compiling the
    # reference again would cost seconds): the reference is eager there.
    want, want_grads, want_params, want_state = _step(
        framework, definition, loss_dtype, one_dtype, scores,
        compile_step=compile_step and framework != "torch")
    assert loss.dtype == np.dtype(compute), (loss.dtype, compute)
    assert np.isfinite(loss)
    np.testing.assert_array_equal(loss, want)
    for key in scores:
        grad = grads[key]
        assert grad is not None and grad.dtype == np.dtype(getattr(ml_dtypes, own[key],
                                                                   own[key])), key
        assert np.all(np.isfinite(grad.astype(np.float64))), key
        np.testing.assert_array_equal(grad, want_grads[key].astype(grad.dtype))
    for got, expected in zip(grad_params, want_params, strict=True):
        if got is None or expected is None:
            assert got is None and expected is None
            continue
        assert got.dtype == np.dtype(loss_dtype)
        np.testing.assert_array_equal(got, expected.astype(got.dtype))
    for field, table in state.items():
        np.testing.assert_array_equal(table, want_state[field], err_msg=field)
        assert table.dtype == want_state[field].dtype


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.data())
@_examples(1)
def test_mixed_float_inputs_give_the_one_dtype_call(framework, name, data):
    """Score and data inputs of drawn float dtypes (float16 ... float64, each its own):
    loss, state and gradients equal those of the call whose inputs all come in the compute
    dtype, the loss in that dtype, each gradient in its input's dtype."""
    definition, inputs, own, loss_dtype = _draw_call(data, [name], framework)
    _check_against_one_dtype_call(framework, definition, inputs, own, loss_dtype)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@given(data=st.data())
@_examples(1)
def test_mixed_float_inputs_compiled(framework, data):
    """The same under ``torch.compile`` / ``tf.function`` / ``jax.jit``, on a loss whose
    mixed calls raised before (auxiliaries, or two score inputs)."""
    definition, inputs, own, loss_dtype = _draw_call(data, MIXED_BEFORE, framework)
    _check_against_one_dtype_call(framework, definition, inputs, own, loss_dtype,
                                  compile_step=True)


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
@given(data=st.data())
@_examples(3)
def test_a_non_floating_score_is_refused_before_any_state_changes(framework, data):
    """An integer score input among floating ones raises a TypeError naming the input and
    the fix, and leaves every state entry (written in place by these adapters) as it was."""
    definition, inputs, own, loss_dtype = _draw_call(data, sorted(CASES), framework)
    scores = [spec.name for spec in definition.inputs()
              if spec.kind == "score" and spec.name in inputs]
    refused = data.draw(st.sampled_from(scores), label="the integer score input")
    own[refused] = NOT_FLOATING
    loss_fn = ADAPTERS[framework].XRiskLoss(definition, dtype=loss_dtype)
    before = _state(framework, loss_fn, definition)
    refusal = rf"{refused} has dtype .*int32.*; expected a floating.*Fix"
    with pytest.raises(TypeError, match=refusal):
        loss_fn(**_framework_inputs(framework, inputs, own))
    after = _state(framework, loss_fn, definition)
    for field, table in before.items():
        np.testing.assert_array_equal(after[field], table, err_msg=field)


def test_the_rule_widens_half_scores_to_the_loss_dtype_and_keeps_the_widest():
    """The rule as the tests above state it, on the core (numpy) definition."""
    definition = CASES["InfoNCELoss"].make(4, {})
    xp = get_backend("numpy").namespace
    views = {"view1": np.zeros((2, 3), np.float16), "view2": np.zeros((2, 3), np.float32)}
    assert compute_dtype(definition, views, (np.zeros(1, np.float64),), xp) == np.float64
    assert compute_dtype(definition, views, (), xp) == np.float32
