"""Traced steps never corrupt state, and the checked path raises inside compiled code.

Under ``jax.jit``, ``jax.grad`` / ``jax.value_and_grad``, ``tf.function`` and ``torch.compile``
a bad batch cannot raise by default: it must return a NaN loss and write no state row (an
index of -1 must not wrap onto row N-1, an index >= N must not clamp or write garbage).
``xrisk.set_checks("raise")`` (and ``xrisk.jax.checked``) make the same checks raise inside
the compiled step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from tests._cases import CASES, is_binary

N = 6
SCORES = [0.9, 0.2, 0.6, 0.4]
LABELS = [1, 0, 1, 0]
INDEX = [0, 1, 2, 3]
NAN = float("nan")

# Each case changes one input of the good batch; the positives are at positions 0 and 2.
BAD = {
    "index -1 on a positive": dict(index=[0, 1, -1, 3]),  # would wrap onto row N - 1
    "index -1 on a negative": dict(index=[0, -1, 2, 3]),
    "index N on a positive": dict(index=[0, 1, N, 3]),  # would clamp onto row N - 1
    "index 2**40 on a positive": dict(index=[0, 1, 2**40, 3]),
    "labels in {-1, 1}": dict(labels=[1, -1, 1, -1]),
    "nan score": dict(scores=[0.9, NAN, 0.6, 0.4]),
}
INDEX_CASES = [case for case in BAD if case.startswith("index")]


def _batch(changes, convert):
    values = {"scores": SCORES, "labels": LABELS, "index": INDEX, **changes}
    return (convert(np.asarray(values["scores"], np.float64)),
            convert(np.asarray(values["labels"], np.int64)),
            convert(np.asarray(values["index"], np.int64)))


def _prior_state(definition, xp):
    """A state whose rows all differ, so a write to any row shows."""
    state = definition.init(xp=xp, dtype=xp.float64)
    values = {}
    for name, value in state._asdict().items():
        if xp.isdtype(value.dtype, "real floating") and len(value.shape):
            size = int(np.prod(value.shape))
            values[name] = xp.reshape(xp.asarray(np.arange(size) / (2 * size) + 0.05,
                                                 dtype=value.dtype), value.shape)
        else:
            values[name] = value
    return type(state)(**values)


def _jax_runner(kind, definition, params):
    def loss_and_state(state, scores, labels, index):
        return definition.apply(state, scores, labels, index, params=params)

    if kind == "jax.jit":
        return jax.jit(loss_and_state)
    if kind == "jax.grad":
        def grad_only(state, scores, labels, index):
            def value(s):
                loss, new = loss_and_state(state, s, labels, index)
                return loss, (loss, new)
            return jax.grad(value, has_aux=True)(scores)[1]
        return grad_only
    if kind == "jax.value_and_grad":
        def both(state, scores, labels, index):
            return jax.value_and_grad(
                lambda s: loss_and_state(state, s, labels, index), has_aux=True)(scores)[0]
        return both
    if kind == "jax.jit(jax.grad)":
        return jax.jit(_jax_runner("jax.grad", definition, params))
    raise ValueError(kind)


JAX_KINDS = ("jax.jit", "jax.grad", "jax.value_and_grad", "jax.jit(jax.grad)")


def _assert_same_state(after, before):
    for field in before._fields:
        np.testing.assert_array_equal(np.asarray(getattr(after, field)),
                                      np.asarray(getattr(before, field)), err_msg=field)


@pytest.mark.parametrize("kind", JAX_KINDS)
@pytest.mark.parametrize("case", sorted(BAD))
def test_jax_traced_bad_batch_gives_nan_and_keeps_every_row(kind, case):
    definition = xrisk.APLoss(N)
    state = _prior_state(definition, jnp)
    run = _jax_runner(kind, definition, definition.init_params(xp=jnp))
    loss, new = run(state, *_batch(BAD[case], jnp.asarray))
    assert np.isnan(float(loss))
    _assert_same_state(new, state)
    # The same step on a good batch does write (the check is not vacuous).
    loss, new = run(state, *_batch({}, jnp.asarray))
    assert np.isfinite(float(loss)) and np.any(np.asarray(new.u) != np.asarray(state.u))


def _stateful_cases():
    """(loss, bad index case) for every loss with state; an index >= N is bad only where the
    index addresses a sized key space (not for losses whose index is validated but unused)."""
    for name in sorted(filter(is_binary, CASES)):
        definition = CASES[name].make(N, {})
        if definition.state_tables():
            sized = definition.key_spaces().get("sample") is not None
            yield from ((name, case) for case in INDEX_CASES if sized or "-1" in case)


@pytest.mark.parametrize("name, case", list(_stateful_cases()))
def test_every_stateful_loss_writes_no_row_for_a_bad_jitted_index(name, case):
    """Out-of-range rows are never written, whatever loss: the guard is in Step.write_rows."""
    definition = CASES[name].make(N, {})
    state = _prior_state(definition, jnp)
    params = definition.params_type(**{
        k: jnp.asarray(v) for k, v in CASES[name].initial_params(np.random.default_rng(0))
        .items()})
    loss, new = jax.jit(
        lambda st, s, y, i: definition.apply(st, s, y, i, params=params))(
        state, *_batch(BAD[case], jnp.asarray))
    assert np.isnan(float(loss))
    _assert_same_state(new, state)


@pytest.mark.parametrize("case", sorted(BAD))
def test_tf_function_bad_batch_gives_nan_and_keeps_every_row(case):
    loss_fn = xtf.APLoss(N, dtype="float64")
    loss_fn.load_state({"u": np.asarray(_prior_state(xrisk.APLoss(N), np).u)},
                       reinterpret=True)  # a state made here, for this loss
    before = loss_fn.export_state()

    @tf.function
    def step(scores, labels, index):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = loss_fn(scores, labels, index)
        return loss, tape.gradient(loss, scores)

    loss, _ = step(*_batch(BAD[case], tf.constant))
    assert np.isnan(float(loss))
    np.testing.assert_array_equal(loss_fn.export_state()["u"], before["u"])


@pytest.mark.parametrize("case", ["labels in {-1, 1}", "nan score", "index -1 on a negative"])
def test_traced_bad_batch_gives_nan_for_auxiliary_losses(case):
    """AUC-M (no state, an optional index): NaN under jit and tf.function alike."""
    definition = xrisk.AUCMLoss()
    params = definition.init_params(xp=jnp, dtype=jnp.float64)
    loss, _ = jax.jit(lambda *b: definition.apply(definition.init(xp=jnp), *b, params=params))(
        *_batch(BAD[case], jnp.asarray))
    assert np.isnan(float(loss))
    loss_fn = xtf.AUCMLoss(dtype="float64")
    assert np.isnan(float(tf.function(loss_fn)(*_batch(BAD[case], tf.constant))))


def test_torch_compile_nan_then_raise_and_state_kept():
    """One small torch.compile test: NaN and untouched rows by default; with
    set_checks("raise") the step recompiles (it guards on the mode) and raises inside.

    Backend "aot_eager": Dynamo's capture, guards and graph breaks and AOTAutograd's
    functionalization of the in-place state writes, which is where a compiled step could lose
    a write or apply one twice, all run; only Inductor's kernel code generation is skipped. The
    step is ~10 graphs (graph breaks are allowed), and with Inductor each costs a C++ compile
    on a fresh machine: ~23 s instead of ~4 s. An index that is out of range or -1 is caught
    alike: the eager kernels raise or wrap, as Inductor's generated kernels do."""
    torch._dynamo.reset()
    loss_fn = xtorch.APLoss(N, dtype="float64")
    loss_fn.load_state({"u": np.asarray(_prior_state(xrisk.APLoss(N), np).u)},
                       reinterpret=True)  # a state made here, for this loss
    before = loss_fn.export_state()["u"]
    step = torch.compile(lambda s, y, i: loss_fn(s, y, i), backend="aot_eager")
    for case in ("index -1 on a positive", "index N on a positive"):
        assert torch.isnan(step(*_batch(BAD[case], torch.as_tensor)))
        np.testing.assert_array_equal(loss_fn.export_state()["u"], before, err_msg=case)
    with xrisk.set_checks("raise"):
        with pytest.raises(RuntimeError, match=r"index values are outside \[0, sample count=6\)"
                                               r".*Fix:.*Received \[-1\]"):
            step(*_batch(BAD["index -1 on a positive"], torch.as_tensor))
    np.testing.assert_array_equal(loss_fn.export_state()["u"], before)
    assert torch.isfinite(step(*_batch({}, torch.as_tensor)))  # back to "nan": a good step
    assert np.any(loss_fn.export_state()["u"] != before)


def test_tf_function_raises_inside_the_graph_with_set_checks():
    loss_fn = xtf.APLoss(N, dtype="float64")
    with xrisk.set_checks("raise"):
        step = tf.function(lambda s, y, i: loss_fn(s, y, i))
        for case, message in [("index N on a positive", r"index values are outside.*\n?.*6"),
                              ("labels in {-1, 1}", r"labels must be 0 or 1.*-1")]:
            with pytest.raises(tf.errors.InvalidArgumentError, match=message):
                step(*_batch(BAD[case], tf.constant))
        assert not np.any(loss_fn.export_state()["u"])
        step(*_batch({}, tf.constant))  # a good batch passes the assertions
    assert np.any(loss_fn.export_state()["u"])


@pytest.mark.parametrize("kind", ["jit", "jit(value_and_grad)"])
def test_jax_checked_step_raises_and_returns_the_unchanged_state(kind):
    loss_fn = xjax.APLoss(N, dtype="float64")
    state = _prior_state(loss_fn.definition, jnp)

    def step(state, scores, labels, index):
        if kind == "jit":
            return loss_fn.apply(state, scores, labels, index)
        (loss, new), grad = jax.value_and_grad(
            lambda s: loss_fn.apply(state, s, labels, index), has_aux=True)(scores)
        return loss, new

    checked = xjax.checked(step)
    with pytest.raises(ValueError, match=r"index values are outside \[0, sample count=6\).*"
                                         r"Fix:.*First offending value: -1") as caught:
        checked(state, *_batch(BAD["index -1 on a positive"], jnp.asarray))
    loss, new = caught.value.outputs
    assert np.isnan(float(loss))
    _assert_same_state(new, state)
    with pytest.raises(ValueError, match=r"labels must be 0 or 1.*First offending value: -1"):
        checked(state, *_batch(BAD["labels in {-1, 1}"], jnp.asarray))
    loss, new = checked(state, *_batch({}, jnp.asarray))
    assert np.isfinite(float(loss))
    assert xrisk.get_checks() == "nan"  # checked() switched the mode only while tracing


def test_jax_raise_mode_raises_under_a_plain_jit_and_under_grad():
    """Without checkify the check is a host callback: it raises while the step runs."""
    definition = xrisk.APLoss(N)
    state = definition.init(xp=jnp)
    bad = _batch(BAD["index N on a positive"], jnp.asarray)
    with xrisk.set_checks("raise"):
        step = jax.jit(definition.apply)
        with pytest.raises(Exception, match=r"index values are outside \[0, sample count=6\)"
                                            r"(.|\n)*First offending value: 6"):
            jax.block_until_ready(step(state, *bad))
        with pytest.raises(ValueError, match=r"index values are outside.*First offending"):
            jax.grad(lambda s: definition.apply(state, s, *bad[1:])[0])(bad[0])
        loss, _ = step(state, *_batch({}, jnp.asarray))
        assert np.isfinite(float(loss))


def test_set_checks_is_a_switch_and_a_context_manager():
    assert xrisk.get_checks() == "nan"
    with xrisk.set_checks("raise") as mode:
        assert xrisk.get_checks() == "raise" and repr(mode) == "xrisk.set_checks('raise')"
        with xrisk.set_checks("nan"):
            assert xrisk.get_checks() == "nan"
        assert xrisk.get_checks() == "raise"
    assert xrisk.get_checks() == "nan"
    xrisk.set_checks("raise")
    try:
        assert xrisk.get_checks() == "raise"
    finally:
        xrisk.set_checks("nan")
    with pytest.raises(ValueError, match=r"mode='loud'; expected one of \('nan', 'raise'\)"):
        xrisk.set_checks("loud")
    assert xrisk.get_checks() == "nan"


# -- JAX StatefulLoss: the data boundary and the O(batch) compiled step ------------------------

def test_stateful_jax_checks_the_numpy_batch_before_jax_truncates_it():
    """Without x64, JAX turns a numpy int64 index of 2**32 + 2 into 2 at the jit boundary,
    before any xrisk code runs: the wrapper checks the host batch first."""
    big = np.array([0, 1, 2**32 + 2, 3], dtype=np.int64)
    scores, labels = np.asarray(SCORES, np.float32), np.asarray(LABELS)
    with jax.enable_x64(False):
        assert int(jax.jit(lambda i: i)(big)[2]) == 2  # the hazard itself
        wrapper = xjax.StatefulLoss(xjax.APLoss(N))
        before = wrapper.loss.export_state(wrapper.state)
        with pytest.raises(ValueError, match=r"index values \[4294967298\] are outside"):
            wrapper(scores, labels, big)
        after = wrapper.loss.export_state(wrapper.state)
        np.testing.assert_array_equal(after["u"], before["u"])
        with pytest.raises(ValueError, match=r"index values \[4294967298\] are outside"):
            xjax.APLoss(N).check_batch(scores, labels, big)  # for users of pure apply + jit
        wrapper(scores, labels, np.asarray(INDEX))  # numpy batches are accepted
        assert np.any(np.asarray(wrapper.state.u))


def test_stateful_jax_runs_one_donated_jitted_step():
    wrapper = xjax.StatefulLoss(xjax.APLoss(N, dtype="float64"))
    pure = xjax.APLoss(N, dtype="float64")
    state = pure.init()
    rng = np.random.default_rng(0)
    for _ in range(3):
        batch = (jnp.asarray(rng.uniform(size=4)), jnp.asarray(LABELS),
                 jnp.asarray(rng.choice(N, 4, replace=False)))
        old = wrapper.state.u
        value = wrapper(*batch)
        assert old.is_deleted()  # donated to the compiled step: updated in place, O(batch)
        expected, state = pure.apply(state, *batch)
        np.testing.assert_allclose(float(value), float(expected), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(np.asarray(wrapper.state.u), np.asarray(state.u), rtol=1e-12)
    assert list(wrapper.loss._steps) == ["nan"]


@pytest.mark.parametrize("mode", ["nan", "raise"])
def test_stateful_jax_device_batches_get_the_in_graph_checks(mode, monkeypatch):
    """Arrays on an accelerator are not read back: NaN, or a ValueError in "raise" mode,
    and the wrapper keeps the (unchanged) state either way."""
    monkeypatch.setattr(xjax.losses, "_on_host", lambda value: False)  # as if on a GPU
    wrapper = xjax.StatefulLoss(xjax.APLoss(N, dtype="float64"))
    wrapper(*_batch({}, jnp.asarray))
    before = np.array(wrapper.state.u)
    bad = _batch(BAD["index N on a positive"], jnp.asarray)
    with xrisk.set_checks(mode):
        if mode == "nan":
            assert np.isnan(float(wrapper(*bad)))
        else:
            with pytest.raises(ValueError, match=r"index values are outside.*First offending "
                                                 r"value: 6"):
                wrapper(*bad)
    np.testing.assert_array_equal(np.asarray(wrapper.state.u), before)
