"""load_state takes only valid state, in every framework, and changes nothing otherwise."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
import torch

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from xrisk._adapter_support import METADATA_KEY, checked_state_arrays

N = 5
ADAPTERS = {"torch": xtorch, "tensorflow": xtf, "jax": xjax}
FRAMEWORKS = sorted(ADAPTERS)


def _loss(framework, name, *args, dtype="float32", **kwargs):
    """float32 by default in every framework (JAX's default follows jax_enable_x64)."""
    return getattr(ADAPTERS[framework], name)(*args, dtype=dtype, **kwargs)


def _current(framework, loss_fn, loaded):
    """The state a framework holds now: its containers (torch, TF) or what load returned."""
    if framework == "jax":
        return loss_fn.export_state(*loaded) if loaded is not None else None
    return loss_fn.export_state()


def _as_export(loss_fn, framework, arrays):
    """``arrays`` as an export of ``loss_fn`` (its metadata entry added): a state edited from
    ``export_state()``, so that each check below is the one reached."""
    if not isinstance(arrays, dict):
        return arrays
    exported = (loss_fn.export_state(loss_fn.init(), loss_fn.init_params())
                if framework == "jax" else loss_fn.export_state())
    return {**arrays, METADATA_KEY: exported[METADATA_KEY]}


def _assert_same(current, before):
    assert current.keys() == before.keys()
    for key, value in current.items():
        np.testing.assert_array_equal(value, before[key], err_msg=key)


def _good_u(dtype=np.float32):
    return (np.arange(2 * N).reshape(N, 2) / 10 + 0.05).astype(dtype)


BAD_STATES = {
    "nan": ({"u": np.where(np.eye(N, 2) > 0, np.nan, _good_u())}, ValueError,
            r"state\['u'\] holds non-finite values \[nan, nan\]; expected finite"),
    "inf": ({"u": np.full((N, 2), np.inf, np.float32)}, ValueError, r"non-finite values \[inf"),
    "complex": ({"u": _good_u().astype(np.complex64)}, ValueError,
                r"state\['u'\] has complex dtype complex64; expected real values"),
    "strings": ({"u": np.full((N, 2), "a")}, TypeError, r"has dtype <U1; expected real numbers"),
    "rows of the wrong shape": ({"u": np.zeros(N, np.float32)}, ValueError,
                                r"state\['u'\] has shape \(5,\); expected \(5, 2\).*each row of"
                                r" 'u' has shape \(2,\)"),
    "more samples": ({"u": np.zeros((N + 3, 2), np.float32)}, ValueError,
                     r"has shape \(8, 2\); expected \(5, 2\)\. Fix: the export holds 8 sample "
                     r"rows and this loss 5: build the loss with num_samples=8, e.g. "
                     r"APLoss\(num_samples=8,"),
    "overflow": ({"u": np.full((N, 2), 1e300)}, ValueError,
                 r"non-finite values after the cast to float32"),
    "one old key": ({"u_all": np.zeros(N)}, ValueError,
                    r"'u_all' of the old \(LibAUC / xrisk 0.1\) layout without its pair.*Fix: "
                    r"convert the old layout, state = \{'u': np.stack"),
    "not a dict": ([("u", _good_u())], TypeError, r"load_state received a list; expected a dict"),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("case", sorted(BAD_STATES))
def test_bad_state_is_rejected_and_nothing_changes(framework, case):
    arrays, error, message = BAD_STATES[case]
    loss_fn = _loss(framework, "APLoss", N)
    loaded = loss_fn.load_state(_as_export(loss_fn, framework, {"u": _good_u()}))
    before = _current(framework, loss_fn, loaded)
    with pytest.raises(error, match=message) as caught:
        loss_fn.load_state(_as_export(loss_fn, framework, arrays))
    assert "expected" in str(caught.value) and "Fix:" in str(caught.value)
    after = _current(framework, loss_fn, loaded)
    np.testing.assert_array_equal(after["u"], before["u"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_auxiliary_outside_its_bounds_is_rejected(framework):
    loss_fn = _loss(framework, "AUCMLoss")
    good = {"a": np.float32(0.5), "b": np.float32(0.2), "alpha": np.float32(0.3)}
    loaded = loss_fn.load_state(good)
    before = _current(framework, loss_fn, loaded)
    with pytest.raises(ValueError, match=r"state\['alpha'\] holds \[-0.5\], outside its domain; "
                                         r"expected finite reals in \[0, ∞\).*Fix:.*np.clip"):
        loss_fn.load_state({**good, "alpha": np.float32(-0.5)})
    _assert_same(_current(framework, loss_fn, loaded), before)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_integer_state_takes_integers_only(framework):
    loss_fn = _loss(framework, "CompositionalAUCLoss")
    good = {"step": np.int32(3), "a": np.float32(0.5), "b": np.float32(0.2),
            "alpha": np.float32(0.3)}
    loaded = loss_fn.load_state(good)
    before = _current(framework, loss_fn, loaded)
    for step, message in [(np.float32(3.0), r"state\['step'\] has dtype float32; expected "
                                             r"integers"),
                          (np.int64(2**40), r"holds values in \[1099511627776, "
                                            r"1099511627776\]; expected int32 values")]:
        with pytest.raises(ValueError, match=message):
            loss_fn.load_state({**good, "step": step})
    _assert_same(_current(framework, loss_fn, loaded), before)
    assert int(before["step"]) == 3


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_float64_into_float32_is_cast_with_a_warning(framework):
    """The chosen rule: cast explicitly and say so (float32 into float64 is exact: silent)."""
    values = _good_u(np.float64) + 1e-12  # not representable in float32
    loss_fn = _loss(framework, "APLoss", N)
    with pytest.warns(xrisk.StateCastWarning, match=r"load_state rounds u \(float64 -> "
                                                    r"float32\).*Fix: build the loss with"):
        loaded = loss_fn.load_state(_as_export(loss_fn, framework, {"u": values}))
    state = _current(framework, loss_fn, loaded)
    assert state["u"].dtype == np.float32
    np.testing.assert_array_equal(state["u"], values.astype(np.float32))
    wide = _loss(framework, "APLoss", N, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = wide.load_state(_as_export(wide, framework, {"u": _good_u(np.float32)}))
    np.testing.assert_array_equal(_current(framework, wide, loaded)["u"], _good_u(np.float32))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_old_u_all_u_pos_checkpoints_load(framework):
    """LibAUC / xrisk 0.1 kept AP's estimators as two vectors (LibAUC: (N, 1) tensors)."""
    u = _good_u()
    old = {"u_all": torch.as_tensor(u[:, :1]), "u_pos": u[:, 1]}
    loss_fn = _loss(framework, "APLoss", N)
    loaded = loss_fn.load_state(old)
    np.testing.assert_array_equal(_current(framework, loss_fn, loaded)["u"], u)


@pytest.mark.parametrize("target", ["torch", "tensorflow"])
def test_a_jax_export_loads_without_any_warning(target):
    """JAX exports were read-only views; torch warned 'The given NumPy array is not
    writable'. Exports are writable copies now, and loads copy anyway."""
    source = xjax.APLoss(N, dtype="float32")
    state = source.load_state({"u": _good_u()}, reinterpret=True)
    exported = source.export_state(*state)
    assert all(value.flags.writeable for value in exported.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _loss(target, "APLoss", N).load_state(exported)
        _loss(target, "APLoss", N).load_state({**exported,
                                               "u": np.asarray(jnp.asarray(_good_u()))})


def test_checked_state_arrays_returns_fresh_arrays_in_the_target_dtypes():
    definition = xrisk.AUCMLoss()
    source = {"a": np.float64(0.25), "b": np.int64(1), "alpha": np.float32(0.5)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xrisk.StateCastWarning)
        out = checked_state_arrays(definition, source,
                                   {"a": "float32", "b": "float64", "alpha": "bfloat16"})
    assert {k: v.dtype.name for k, v in out.items()} == {"a": "float32", "b": "float64",
                                                          "alpha": "float32"}
    assert all(v.flags.writeable and v.flags.c_contiguous for v in out.values())
    assert float(out["b"]) == 1.0


def test_bfloat16_state_exports_as_float32():
    """numpy has no bfloat16: exports carry float32 (exact), in every framework."""
    torch_loss = xtorch.APLoss(N).to(torch.bfloat16)
    assert torch_loss.u.dtype == torch.bfloat16
    assert torch_loss.export_state()["u"].dtype == np.float32
    jax_loss = xjax.APLoss(N)
    state = jax_loss.init()._replace(u=jnp.ones((N, 2), jnp.bfloat16))
    assert jax_loss.export_state(state)["u"].dtype == np.float32
    with pytest.warns(xrisk.StateCastWarning, match=r"u \(float32 -> bfloat16\)"):
        torch_loss.load_state({"u": _good_u()}, reinterpret=True)  # float32 -> bfloat16
    np.testing.assert_allclose(torch_loss.export_state()["u"], _good_u(), rtol=1e-2)
