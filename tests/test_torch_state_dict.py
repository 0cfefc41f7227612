"""torch's own route, ``state_dict()`` / ``load_state_dict()``, checks a loss's state as
``load_state`` does (issue 17, point 3).

``torch.save(model.state_dict())`` with the loss as a submodule, Lightning checkpoints and DDP
load through ``nn.Module.load_state_dict``, which copied any tensors of the right shape: another
loss's state, other meaning-giving hyper-parameters, values outside their declared domains.
The loss now carries its export metadata as torch's extra state (a uint8 tensor, so
``torch.load(weights_only=True)`` reads it) and checks its entries before torch copies any.
The drawn faults and the valid states are those of tests/test_state_domains_fuzz.py, over
every registered loss.
"""

from __future__ import annotations

import copy
import io
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import xrisk
import xrisk.torch as xtorch
from tests._cases import CASES
from tests._sizes import KEY_SPACES
from tests.test_state_domains_fuzz import _bits, _metadata, _valid_state, faults
from xrisk._adapter_support import METADATA_KEY

LOSSES = sorted(CASES)
EXTRA = "_extra_state"
N = 5


def _examples() -> int:
    return 300 if settings.get_current_profile_name() == "thorough" else 4


def _as_state_dict(arrays: dict, prefix: str = "") -> dict:
    """An ``export_state()``-like dict as a torch state dict: tensors, the metadata as the
    extra state (entries that are no tensor, e.g. text, stay as they are)."""
    out = {}
    for key, value in arrays.items():
        value = np.array(value, copy=True)
        try:
            tensor = torch.from_numpy(value)
        except TypeError:
            tensor = value
        out[prefix + (EXTRA if key == METADATA_KEY else key)] = tensor
    return out


def _saved_and_loaded(state_dict: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _draw_loss(data, name: str):
    definition = CASES[name].make(data.draw(st.sampled_from(KEY_SPACES), label="size"),
                                  data.draw(CASES[name].hyper, label="hyper-parameters"))
    dtype = data.draw(st.sampled_from(["float64", "float32"]), label="dtype")
    return definition, dtype


def _holder(where: str, loss: nn.Module) -> tuple[nn.Module, str]:
    """The loss alone or in a container next to a linear layer; the loss's prefix."""
    if where == "alone":
        return loss, ""
    if where == "sequential":
        return nn.Sequential(nn.Linear(2, 2, dtype=torch.float64), loss), "1."
    model = nn.Module()
    model.net = nn.Linear(2, 2, dtype=torch.float64)
    model.criterion = loss
    return model, "criterion."


HOLDERS = st.sampled_from(["alone", "sequential", "module"])


@pytest.mark.parametrize("name", LOSSES)
def test_a_state_dict_round_trip_through_torch_save_restores_the_loss(name):
    """state_dict -> torch.save -> torch.load(weights_only=True) -> load_state_dict of a fresh
    loss (alone or in a model): bit for bit, and the extra state is the export's metadata."""

    @settings(max_examples=_examples())
    @given(data=st.data())
    def check(data):
        definition, dtype = _draw_loss(data, name)
        source = getattr(xtorch, name)(**definition.config(), dtype=dtype)
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        good = _valid_state(np.random.default_rng(seed), definition, source.export_state())
        source.load_state(good)
        where = data.draw(HOLDERS, label="holder")
        source_holder, prefix = _holder(where, source)
        saved = _saved_and_loaded(source_holder.state_dict())
        extra = saved[prefix + EXTRA]
        assert extra.dtype == torch.uint8
        assert _metadata({METADATA_KEY: extra.numpy()}) == _metadata(good)
        target = getattr(xtorch, name)(**definition.config(), dtype=dtype)
        target_holder, _ = _holder(where, target)
        target_holder.load_state_dict(saved)
        assert _bits(target.export_state()) == _bits(good)

    check()


@pytest.mark.parametrize("name", LOSSES)
def test_load_state_dict_refuses_every_drawn_fault_and_changes_no_tensor_of_the_loss(name):
    """A drawn fault (tests/test_state_domains_fuzz.py: a value outside its domain, a wrong
    dtype or shape, a missing or unexpected entry, metadata of another loss, of other
    meaning-giving hyper-parameters, of an unknown format, unreadable) in the state dict of
    the loss or of a model holding it: load_state_dict raises with the received value, the
    expected one and the fix (torch's key report for a missing or unexpected key), the loss's
    tensors are unchanged bit for bit and the other modules' load (torch's behaviour). Without
    the checks torch copied any tensor of the right shape."""

    @settings(max_examples=_examples())
    @given(data=st.data())
    def check(data):
        definition, dtype = _draw_loss(data, name)
        loss = getattr(xtorch, name)(**definition.config(), dtype=dtype)
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        good = _valid_state(np.random.default_rng(seed), definition, loss.export_state())
        loss.load_state(good)
        holder, prefix = _holder(data.draw(HOLDERS, label="holder"), loss)
        what, arrays, entry = data.draw(faults(definition, good), label="fault")
        state_dict = {**holder.state_dict(), **_as_state_dict(arrays, prefix)}
        for key in set(good) - set(arrays):  # a dropped entry
            state_dict.pop(prefix + key)
        new_others = {key: torch.full_like(value, 0.25) for key, value in state_dict.items()
                      if not key.startswith(prefix)}
        state_dict.update(new_others)
        strict = (what.startswith(("missing", "unexpected"))
                  or data.draw(st.booleans(), label="strict"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", xrisk.StateCastWarning)
            with pytest.raises(RuntimeError) as caught:
                holder.load_state_dict(state_dict, strict=strict)
        message = str(caught.value)
        if what.startswith(("missing", "unexpected")):  # torch's key report
            assert "Missing key(s)" in message or "Unexpected key(s)" in message, message
        else:
            assert definition.name in message and "expected" in message and "Fix:" in message, (
                what, message)
            if entry is not None:
                assert f"state[{entry!r}]" in message or "torch.Tensor" in message, (
                    what, message)
        assert _bits(loss.export_state()) == _bits(good), what
        for key, value in new_others.items():  # torch's own behaviour: the others load
            assert torch.equal(holder.state_dict()[key], value), key

    check()


# --------------------------------------------------------------------------- regressions

@pytest.mark.parametrize("make", [
    lambda: xtorch.EntLossClassification(N, mode="SOX", dtype="float64"),
    lambda: xtorch.MIDAM_softmax_pooling_loss(N, dtype="float64"),
    lambda: xtorch.MIDAM_attention_pooling_loss(N, dtype="float64")],
    ids=["SOX", "MIDAM_softmax", "MIDAM_attention"])
@pytest.mark.parametrize("strict", [True, False])
def test_a_smoothing_of_5_in_a_model_state_dict_is_refused(make, strict):
    """Issue 17.3: MIDAM's and SOX's current gamma took 5 through torch's load_state_dict."""
    model = nn.Sequential(nn.Linear(2, 1, dtype=torch.float64), make())
    state_dict = model.state_dict()
    state_dict["1.smoothing"] = torch.tensor(5.0, dtype=torch.float64)
    before = _bits(model[1].export_state())
    with pytest.raises(RuntimeError, match=r"In the entries 1\.\*: .*state\['smoothing'\] holds "
                                           r"\[5\.0\], outside its domain; expected finite reals "
                                           r"in \(0, 1\].*Fix:"):
        model.load_state_dict(state_dict, strict=strict)
    assert _bits(model[1].export_state()) == before


def test_a_seen_flag_of_7_is_refused_and_the_whole_loss_is_kept():
    """Issue 17.3: the seen flag of SOX took 7; nu and smoothing load together or not at all."""
    loss = xtorch.EntLossClassification(N, mode="SOX", dtype="float64")
    state_dict = loss.state_dict()
    state_dict["nu"] = state_dict["nu"].clone()
    state_dict["nu"][2] = torch.tensor([0.5, 7.0], dtype=torch.float64)
    state_dict["smoothing"] = torch.tensor(0.5, dtype=torch.float64)  # valid, yet not loaded
    before = _bits(loss.export_state())
    with pytest.raises(RuntimeError, match=r"state\['nu'\]\[\.\.\., 1\] holds \[7\.0\] at rows "
                                           r"\[2\], outside its domain; expected \{0, 1\}"):
        loss.load_state_dict(state_dict)
    assert _bits(loss.export_state()) == before


def test_another_loss_state_dict_is_refused_and_load_state_reinterprets_it():
    """APLoss's and pAUC_DRO_Loss's state dicts hold the same keys and shapes ({u: (N, 2)}):
    the metadata tells them apart; the fix names load_state(..., reinterpret=True), which
    loads them on purpose."""
    source = xtorch.APLoss(N, dtype="float64")
    source.load_state({**source.export_state(), "u": np.full((N, 2), 0.5)})
    target = nn.ModuleDict({"loss": xtorch.pAUC_DRO_Loss(N, dtype="float64")})
    state_dict = {"loss." + key: value for key, value in source.state_dict().items()}
    before = _bits(target["loss"].export_state())
    with pytest.raises(RuntimeError) as caught:
        target.load_state_dict(state_dict)
    message = str(caught.value)
    assert "received an export of APLoss() (another loss); expected one of pAUC_DRO_Loss(" \
        in message and "load_state_dict has no reinterpret" in message, message
    assert _bits(target["loss"].export_state()) == before
    target["loss"].load_state({name: state_dict["loss." + name] for name in ["u"]},
                              reinterpret=True)
    np.testing.assert_array_equal(target["loss"].u.numpy(), np.full((N, 2), 0.5))


def test_other_meaning_giving_hyper_parameters_are_refused():
    """pAUC_DRO_Loss's u~ e^c is a mean of exp(l / lam): lam=1 does not load as lam=0.5;
    gamma only steers the updates, so a change of gamma loads."""
    source = xtorch.pAUC_DRO_Loss(N, lam=1.0, gamma=0.9, dtype="float64")
    target = xtorch.pAUC_DRO_Loss(N, lam=0.5, dtype="float64")
    before = _bits(target.export_state())
    with pytest.raises(RuntimeError, match=r"export of pAUC_DRO_Loss\(lam=1.0\) \(other "
                                           r"meaning-giving hyper-parameters\); expected one of "
                                           r"pAUC_DRO_Loss\(lam=0.5\)"):
        target.load_state_dict(_saved_and_loaded(source.state_dict()))
    assert _bits(target.export_state()) == before
    xtorch.pAUC_DRO_Loss(N, lam=1.0, gamma=0.1, dtype="float64").load_state_dict(
        source.state_dict())


def test_state_dicts_without_the_extra_state_follow_the_format_0_rule():
    """A state dict saved before the extra state existed loads where load_state takes an
    export of format 0 (strict=True: no missing '_extra_state'); APLoss's u, the layout of six
    losses, needs load_state(..., reinterpret=True); xrisk 0.1's u_all / u_pos are converted."""
    sox = xtorch.EntLossClassification(N, mode="SOX", dtype="float64")
    legacy = {k: v for k, v in sox.state_dict().items() if k != EXTRA}
    legacy["smoothing"] = torch.tensor(0.25, dtype=torch.float64)
    sox.load_state_dict(legacy)
    assert sox.smoothing.item() == 0.25
    ap = xtorch.APLoss(N, dtype="float64")
    with pytest.raises(RuntimeError, match=r"without the '__xrisk__' metadata entry.*Fix:.*"
                                           r"loss\.load_state\(\{name: state_dict\[name\]"):
        ap.load_state_dict({"u": torch.full((N, 2), 0.5, dtype=torch.float64)})
    u = torch.linspace(0.1, 1.0, 2 * N, dtype=torch.float64).reshape(N, 2)
    ap.load_state_dict({"u_all": u[:, 0], "u_pos": u[:, 1]})
    assert torch.equal(ap.u, u)


def test_strict_false_relaxes_key_matching_only():
    """strict=False: a missing entry keeps its value, an unknown key is ignored, and the
    entries present are still checked."""
    loss = xtorch.EntLossClassification(N, mode="SOX", dtype="float64")
    state_dict = loss.state_dict()
    nu = torch.zeros(N, 2, dtype=torch.float64)
    nu[:, 1] = 1.0
    smoothing = loss.smoothing.clone()
    result = loss.load_state_dict({"nu": nu, "other": torch.ones(1)}, strict=False)
    assert torch.equal(loss.nu, nu) and torch.equal(loss.smoothing, smoothing)
    assert result.unexpected_keys == ["other"] and result.missing_keys == ["smoothing"]
    with pytest.raises(RuntimeError, match=r"state\['smoothing'\] holds \[0\.0\]"):
        loss.load_state_dict({"smoothing": torch.tensor(0.0, dtype=torch.float64)},
                             strict=False)
    with pytest.raises(RuntimeError, match=r"another loss"):
        loss.load_state_dict({**state_dict, EXTRA: xtorch.APLoss(N).state_dict()[EXTRA]},
                             strict=False)
    assert torch.equal(loss.nu, nu)


def test_assign_deepcopy_and_device_moves_keep_working():
    """assign=True takes the state dict's tensors once checked; a deep copy and .to() keep
    the module's state dict loadable."""
    loss = xtorch.GlobalContrastiveLoss(N, temperature_scheme="individual", tau=0.2,
                                        dtype="float64")
    good = _valid_state(np.random.default_rng(3), loss.definition, loss.export_state())
    loss.load_state(good)
    copied = copy.deepcopy(loss).to("cpu")
    fresh = xtorch.GlobalContrastiveLoss(N, temperature_scheme="individual", tau=0.2,
                                         dtype="float64")
    fresh.load_state_dict(copied.state_dict(), assign=True)
    assert _bits(fresh.export_state()) == _bits(good)
    bad = copied.state_dict()
    bad["temperature"] = bad["temperature"].clone()
    bad["temperature"][0, 0] = 5.0  # above tau_max
    with pytest.raises(RuntimeError, match=r"state\['temperature'\]\[\.\.\., 0\] holds \[5\.0\]"):
        fresh.load_state_dict(bad, assign=True)
    assert _bits(fresh.export_state()) == _bits(good)
