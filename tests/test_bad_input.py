"""Bad input: a clear error naming the received value, and no state changed."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from xrisk.backends import MixedBackendsError

N = 10
GOOD = dict(scores=[0.2, 0.7, 0.4, 0.9], labels=[0, 1, 0, 1], index=[0, 1, 2, 3])

BAD_BATCHES = {
    "label 2": (dict(labels=[0, 2, 1, 1]), ValueError, r"labels must be 0 or 1; received \[2\]"),
    "label -1": (dict(labels=[0, -1, 1, 1]), ValueError, r"received \[-1\]"),
    "index too large": (dict(index=[0, 1, 2, 99]), ValueError,
                        r"index values \[99\] are outside \[0, sample count=10\)"),
    "negative index": (dict(index=[-1, 1, 2, 3]), ValueError, r"\[-1\] are outside"),
    "float index": (dict(index=[0.0, 1.0, 2.0, 3.0]), TypeError,
                    r"index has dtype .*float.*expected an integer dtype"),
    "nan score": (dict(scores=[0.2, float("nan"), 0.4, 0.9]), ValueError,
                  r"non-finite values \[nan\]"),
    "inf score": (dict(scores=[0.2, float("inf"), 0.4, 0.9]), ValueError,
                  r"non-finite values \[inf\]"),
    "short labels": (dict(labels=[0, 1, 1]), ValueError,
                     r"batch sizes differ: \{'scores': 4, 'labels': 3, 'index': 4\}"),
    "two columns": (dict(scores=[[0.2, 0.1], [0.7, 0.3], [0.4, 0.5], [0.9, 0.9]]), ValueError,
                    r"scores has shape \(4, 2\); expected \(batch,\) or \(batch, 1\)"),
}


def _convert(framework, values, key):
    dtype = {"scores": "float32", "labels": "int64", "index": "int64"}[key]
    array = np.asarray(values)
    if array.dtype.kind == "f" and key == "index":
        dtype = "float32"
    array = array.astype(dtype)
    return {"torch": torch.as_tensor, "tensorflow": tf.constant, "jax": jnp.asarray}[framework](
        array)


def _adapter(framework):
    return {"torch": xtorch, "tensorflow": xtf, "jax": xjax}[framework]


def _call(framework, loss_fn, state, batch):
    if framework == "jax":
        return loss_fn.apply(state[0], batch["scores"], batch["labels"], batch["index"],
                             params=state[1])
    return loss_fn(batch["scores"], batch["labels"], batch["index"])


def _snapshot(framework, loss_fn, state):
    if framework == "jax":
        return loss_fn.export_state(*state)
    return loss_fn.export_state()


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
@pytest.mark.parametrize("loss_name, case", [
    (loss_name, case) for loss_name in ("APLoss", "AUCMLoss") for case in sorted(BAD_BATCHES)
    if not (loss_name == "AUCMLoss" and "outside" in BAD_BATCHES[case][2])  # no num_samples
])
def test_bad_batch_raises_and_keeps_state(framework, loss_name, case):
    changes, error, message = BAD_BATCHES[case]
    adapter = _adapter(framework)
    loss_fn = getattr(adapter, loss_name)(*([N] if loss_name == "APLoss" else []))
    state = (loss_fn.init(), loss_fn.init_params()) if framework == "jax" else None
    # One good step first, so the state is not all zeros.
    good = {k: _convert(framework, v, k) for k, v in GOOD.items()}
    result = _call(framework, loss_fn, state, good)
    if framework == "jax":
        state = (result[1], state[1])
    before = _snapshot(framework, loss_fn, state)
    bad = {k: _convert(framework, changes.get(k, v), k) for k, v in GOOD.items()}
    with pytest.raises(error, match=message) as caught:
        _call(framework, loss_fn, state, bad)
    message = str(caught.value)
    assert "expected" in message.lower() and "Fix:" in message, message
    after = _snapshot(framework, loss_fn, state)
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=f"{key} changed")


@pytest.mark.parametrize("loss_name", ["APLoss", "AUCMLoss"])
def test_arrays_of_two_frameworks_are_rejected(loss_name):
    loss_fn = getattr(xtorch, loss_name)(*([N] if loss_name == "APLoss" else []))
    before = loss_fn.export_state()
    with pytest.raises(MixedBackendsError, match=r"scores is torch.*labels is jax|"
                                                 r"labels is jax.*scores is torch|"
                                                 r"scores is torch, labels is jax"):
        loss_fn(torch.tensor(GOOD["scores"]), jnp.asarray(GOOD["labels"]),
                torch.tensor(GOOD["index"]))
    with pytest.raises(MixedBackendsError, match="index is tensorflow"):
        loss_fn(torch.tensor(GOOD["scores"]), torch.tensor(GOOD["labels"]),
                tf.constant(GOOD["index"]))
    for key, value in before.items():
        np.testing.assert_array_equal(loss_fn.export_state()[key], value)


def test_non_array_input_is_named():
    loss_fn = xtorch.APLoss(N)
    with pytest.raises(TypeError, match=r"scores is a builtins.list; expected an array"):
        loss_fn([0.2, 0.3], torch.tensor([0, 1]), torch.tensor([0, 1]))


def test_missing_index_is_explained():
    with pytest.raises(ValueError,
                       match="index is None; expected the sample index of every example"):
        xtorch.APLoss(N)(torch.tensor([0.2, 0.3]), torch.tensor([0, 1]))


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_batch_without_positives_is_finite_and_leaves_state(framework):
    adapter = _adapter(framework)
    scores = np.array([0.2, 0.7, 0.4], dtype=np.float32)
    labels, index = np.zeros(3, dtype=np.int64), np.array([1, 5, 5])
    for loss_name in ("APLoss", "AUCMLoss"):
        loss_fn = getattr(adapter, loss_name)(*([N] if loss_name == "APLoss" else []),
                                              version="v2") if loss_name == "AUCMLoss" \
            else adapter.APLoss(N)
        if framework == "torch":
            s = torch.tensor(scores, requires_grad=True)
            value = loss_fn(s, torch.tensor(labels), torch.tensor(index))
            value.backward()
            value, grad = value.detach(), s.grad.numpy()
            exported = loss_fn.export_state()
        elif framework == "tensorflow":
            s = tf.constant(scores)
            with tf.GradientTape() as tape:
                tape.watch(s)
                value = loss_fn(s, tf.constant(labels), tf.constant(index))
            grad = tape.gradient(value, s).numpy()
            exported = loss_fn.export_state()
        else:
            import jax

            state, params = loss_fn.init(), loss_fn.init_params()
            (value, state), grad = jax.value_and_grad(
                lambda s, st=state, p=params, fn=loss_fn: fn.apply(
                    st, s, jnp.asarray(labels), jnp.asarray(index), params=p),
                has_aux=True)(jnp.asarray(scores))
            exported = loss_fn.export_state(state, params)
        assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))
        if loss_name == "APLoss":
            assert float(value) == 0.0 and not np.any(np.asarray(grad))
            assert not np.any(exported["u"])


BAD_CONSTRUCTORS = [
    (lambda: xrisk.APLoss(0), r"num_samples=0; expected an integer >= 1"),
    (lambda: xrisk.APLoss(10.0), r"num_samples=10.0 \(type float\); expected an integer"),
    (lambda: xrisk.APLoss(10, gamma=1.5), r"gamma=1.5; expected a number in \(0, 1\]"),
    (lambda: xrisk.APLoss(10, margin=-1), r"margin=-1; expected a finite number > 0"),
    (lambda: xrisk.APLoss(10, surrogate="hinge2"), r"Unknown surrogate='hinge2'"),
    (lambda: xrisk.AUCMLoss(version="v3"), r"version='v3'; expected one of \('v1', 'v2'\)"),
    (lambda: xrisk.AUCMLoss(imratio=1.5), r"imratio=1.5"),
    (lambda: xrisk.SOAP(mode="rmsprop"), r"mode='rmsprop'; expected one of \('sgd', 'adam'\)"),
    (lambda: xrisk.SOAP(lr=0), r"unexpected argument lr=0 \(a LibAUC argument\)"),
    (lambda: xrisk.PESG(xrisk.AUCMLoss(), betas=(0.9, 1.5)), r"betas=\(0.9, 1.5\)"),
    (lambda: xtorch.APLoss(10, dtype="int8"), r"dtype='int8'; expected one of"),
    (lambda: xtorch.PESG([torch.zeros(2, requires_grad=True)], xtorch.APLoss(3)),
     r"loss_fn is APLoss, which declares no ascent auxiliary"),
    (lambda: xjax.PESG({"w": jnp.ones(2)}, xjax.AUCMLoss()), r"holds 0 AUCMParams nodes"),
]


@pytest.mark.parametrize("build, message", BAD_CONSTRUCTORS)
def test_bad_hyperparameters(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_load_state_rejects_mismatches_atomically(framework):
    loss_fn = _adapter(framework).APLoss(N)
    good = {"u": np.arange(2 * N, dtype=np.float32).reshape(N, 2)}
    with pytest.raises(ValueError, match=r"state\['u'\] has shape \(11, 2\); expected \(10, 2\)"):
        loss_fn.load_state({"u": np.zeros((N + 1, 2))})
    with pytest.raises(ValueError, match=r"missing \['u'\], unexpected \['v'\]"):
        loss_fn.load_state({"v": np.zeros(N)})
    if framework != "jax":  # stateful containers: still the initial zeros, then loadable
        assert not np.any(loss_fn.export_state()["u"])
        loss_fn.load_state(good, reinterpret=True)  # arrays made here, for this loss
        np.testing.assert_array_equal(loss_fn.export_state()["u"], good["u"])
