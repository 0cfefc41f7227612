"""load_state against the declarations: an export names its loss, and every stored entry lies
in its declared domain (issue 17, points 3 and 5).

The fuzzer reads the registry and the declarations (``StateTable.domain``, the auxiliaries'
bounds, :meth:`LossDefinition.state_meaning`), so a new loss is covered without new test code:
for every registered loss and every adapter it loads a valid state drawn inside the domains
(bit for bit back), then one drawn fault — a value outside an entry's domain (its ends, NaN,
the infinities, a fraction for a whole-number entry), a wrong dtype, shape or key, metadata of
another loss, of other meaning-giving hyper-parameters, of an unknown format or unreadable —
and checks a clear error and every table unchanged, bit for bit. The regression tests below
pin the cases the issue names.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from tests._cases import CASES, NUM_FEATURES
from tests._frameworks import model_scores, score_names
from tests._sizes import KEY_SPACES
from xrisk._adapter_support import (
    FORMAT_0_SHARED_LAYOUTS,
    METADATA_KEY,
    STATE_FORMAT,
    checked_state_arrays,
    entry_domains,
    stored_domain,
)
from xrisk._domain import Domain

ADAPTERS = {"torch": xtorch, "tensorflow": xtf, "jax": xjax}
FRAMEWORKS = sorted(ADAPTERS)
LOSSES = sorted(CASES)
N = 5


def _examples() -> int:
    """Examples per (loss, framework): a few in CI (63 pairs stay within ~30 s), many when
    thorough."""
    return 300 if settings.get_current_profile_name() == "thorough" else 4


class Holder:
    """One adapter loss and the state it holds: its containers (torch, TensorFlow) or what
    ``load_state`` returned (JAX, pure)."""

    def __init__(self, framework: str, definition, dtype: str = "float64") -> None:
        self.framework = framework
        self.loss = getattr(ADAPTERS[framework], definition.name)(**definition.config(),
                                                                  dtype=dtype)
        self.jax_state = ((self.loss.init(), self.loss.init_params())
                          if framework == "jax" else None)

    def load(self, arrays, **options) -> None:
        loaded = self.loss.load_state(arrays, **options)
        if self.framework == "jax":
            self.jax_state = loaded

    def export(self) -> dict:
        if self.framework == "jax":
            return self.loss.export_state(*self.jax_state)
        return self.loss.export_state()


def _bits(arrays: dict) -> dict:
    """Every entry as its dtype, shape and bytes: equal means equal bit for bit."""
    return {k: (np.asarray(v).dtype.str, np.shape(v), np.asarray(v).tobytes())
            for k, v in arrays.items()}


def _metadata(export: dict) -> dict:
    return json.loads(bytes(np.asarray(export[METADATA_KEY])).decode("utf-8"))


def _with_metadata(export: dict, **changes) -> dict:
    text = json.dumps({**_metadata(export), **changes})
    return {**export, METADATA_KEY: np.frombuffer(text.encode(), np.uint8).copy()}


def _columns(domain) -> list:
    """``[(column or None, Domain)]`` of an entry's declared domain."""
    return [(None, domain)] if isinstance(domain, Domain) else list(enumerate(domain))


def _inside(rng: np.random.Generator, domain: Domain, shape, dtype) -> np.ndarray:
    """Values of ``dtype`` inside ``domain`` (within [-4, 4] where it is unbounded)."""
    low = max(domain.low, -4.0)
    high = min(domain.high, 4.0 if math.isinf(domain.high) else domain.high)
    if domain.integer:
        values = rng.integers(math.ceil(low), math.floor(high) + 1, size=shape)
    else:
        values = rng.uniform(low, high, size=shape)
    values = np.asarray(values).astype(dtype)
    bad = domain.violations(values)
    values[bad] = np.asarray((low + high) / 2).astype(dtype)  # e.g. an open end drawn
    return values


def _valid_state(rng, definition, export: dict) -> dict:
    """A state of ``definition`` drawn inside every declared domain, in the export's dtypes,
    with the export's metadata."""
    out = dict(export)
    for name, domain in entry_domains(definition).items():
        template = np.asarray(export[name])
        value = np.empty(template.shape, template.dtype)
        for column, part in _columns(domain):
            where = (...,) if column is None else (..., column)
            value[where] = _inside(rng, part, value[where].shape, template.dtype)
        out[name] = value
    return out


def _outside_values(draw, domain: Domain, dtype: np.dtype):
    """One value of ``dtype`` outside ``domain`` as load_state sees it (the domain widened to
    where narrow floats round its ends, :func:`xrisk._adapter_support.stored_domain`): NaN or
    an infinity, an open end, the next representable value past a closed end, a whole step
    or a factor past an end, a fraction for a whole-number domain."""
    dtype = np.dtype(dtype)
    effective = stored_domain(domain, dtype.name)
    candidates: list = []
    if dtype.kind == "f":
        candidates += [np.nan, np.inf, -np.inf]
    for end, is_open, outward in ((effective.low, effective.low_open, -1.0),
                                  (effective.high, effective.high_open, 1.0)):
        if math.isinf(end):
            continue
        candidates += [end + outward, end + outward * (1 + abs(end)) * 10]
        if dtype.kind == "f":
            candidates.append(end if is_open else np.nextafter(dtype.type(end),
                                                               dtype.type(outward * np.inf)))
    if effective.integer and dtype.kind == "f":
        candidates.append((0.0 if math.isinf(effective.low) else effective.low) + 0.5)
    kept = []
    for value in candidates:
        with np.errstate(over="ignore", invalid="ignore"):
            if dtype.kind in "iu" and not (np.iinfo(dtype).min <= value <= np.iinfo(dtype).max):
                continue
            cast = np.asarray([value]).astype(dtype)
        if effective.violations(cast)[0]:
            kept.append(cast[0])
    return draw(st.sampled_from(kept), label="value outside the domain") if kept else None


@st.composite
def faults(draw, definition, good: dict):
    """``(description, arrays, entry)``: ``good`` with one drawn fault; ``entry`` the state
    entry the message must name (None for metadata and key faults)."""
    domains = entry_domains(definition)
    kinds = ["metadata", "keys"] + (["value", "dtype", "shape"] if domains else [])
    kind = draw(st.sampled_from(kinds), label="fault")
    if kind == "metadata":
        meta = _metadata(good)
        others = sorted(set(xrisk.LOSSES) - {definition.name})
        changes = [("another loss", {"loss": draw(st.sampled_from(others))}),
                   ("unknown format", {"format": draw(st.sampled_from(
                       [0, STATE_FORMAT + 1, str(STATE_FORMAT), None]))})]
        for key, value in meta["hyper_parameters"].items():  # each meaning-giving value
            other = (value * 2 if isinstance(value, float) else
                     (value or 0) + 1 if isinstance(value, int | type(None)) else value + "x")
            changes.append((f"other {key}",
                            {"hyper_parameters": {**meta["hyper_parameters"], key: other}}))
        what, change = draw(st.sampled_from(changes + [("unreadable", None), ("no object", None)]))
        if what == "unreadable":
            return what, {**good, METADATA_KEY: draw(st.sampled_from(
                [np.frombuffer(b"\xff{", np.uint8), np.zeros(3), np.uint8(7)]))}, None
        if what == "no object":
            return what, {**good, METADATA_KEY: np.frombuffer(b"[1, 2]", np.uint8)}, None
        return what, _with_metadata(good, **change), None
    if kind == "keys":
        names = sorted(domains)
        if names and draw(st.booleans(), label="drop an entry"):
            name = draw(st.sampled_from(names))
            return f"missing {name}", {k: v for k, v in good.items() if k != name}, None
        return "unexpected key", {**good, "extra": np.zeros(2)}, None
    name = draw(st.sampled_from(sorted(domains)), label="entry")
    value = np.array(good[name], copy=True)
    if kind == "dtype":
        bad = draw(st.sampled_from(["complex", "text"] + (["float"] if value.dtype.kind == "i"
                                                           else [])))
        cast = {"complex": np.complex128, "text": np.str_, "float": np.float64}[bad]
        return f"{bad} {name}", {**good, name: value.astype(cast)}, name
    if kind == "shape":
        bad = draw(st.sampled_from(["row more", "axis more", "scalar"]))
        changed = (np.concatenate([value, value[:1]]) if bad == "row more" and value.ndim
                   else value[..., None] if bad != "scalar" or not value.ndim
                   else np.asarray(value.ravel()[0]))
        return f"{bad} {name}", {**good, name: changed}, name
    column, part = draw(st.sampled_from(_columns(domains[name])), label="column")
    outside = _outside_values(draw, part, value.dtype)
    if outside is None:  # no value of this dtype lies outside (an int entry of every int)
        return f"{name} of another dtype", {**good, name: value.astype(np.complex64)}, name
    where = (...,) if column is None else (..., column)
    cells = np.array(value[where], copy=True)
    position = draw(st.integers(0, max(cells.size - 1, 0)), label="position")
    cells[np.unravel_index(position, cells.shape) if cells.ndim else ()] = outside
    value[where] = cells
    return f"{name}[{column}] = {outside!r}", {**good, name: value}, name


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name", LOSSES)
def test_load_state_refuses_every_drawn_fault_and_changes_nothing(name, framework):
    case = CASES[name]

    @settings(max_examples=_examples())
    @given(data=st.data())
    def check(data):
        size = data.draw(st.sampled_from(KEY_SPACES), label="key-space size")
        definition = case.make(size, data.draw(case.hyper, label="hyper-parameters"))
        dtype = data.draw(st.sampled_from(["float64", "float32"]), label="dtype")
        holder = Holder(framework, definition, dtype)
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        good = _valid_state(np.random.default_rng(seed), definition, holder.export())
        holder.load(good)  # inside every domain: loads, bit for bit
        assert _bits(holder.export()) == _bits(good)
        what, arrays, entry = data.draw(faults(definition, good), label="fault")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", xrisk.StateCastWarning)
            with pytest.raises((ValueError, TypeError)) as caught:
                holder.load(arrays)
        message = str(caught.value)
        assert definition.name in message and "expected" in message and "Fix:" in message, (
            what, message)
        if entry is not None:
            assert f"state[{entry!r}]" in message, (what, message)
        assert _bits(holder.export()) == _bits(good), what

    check()


# --------------------------------------------------------------------------- regressions

def _trained_ap(num_samples=N):
    loss = xtorch.APLoss(num_samples, dtype="float64")
    loss(torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64), torch.tensor([1, 0, 1, 0]),
         torch.tensor([0, 1, 2, 3]))
    return loss.export_state()


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("target", [
    lambda n: xrisk.pAUC_DRO_Loss(n), lambda n: xrisk.GlobalContrastiveLoss(n),
    lambda n: xrisk.ListwiseCELoss(n)], ids=["pAUC_DRO_Loss", "GlobalContrastiveLoss",
                                             "ListwiseCELoss"])
def test_an_ap_export_does_not_load_into_another_loss_of_its_layout(framework, target):
    """Issue 17.3: u (N, 2) is APLoss's, pAUC_DRO_Loss's and GlobalContrastiveLoss's: keys
    and shapes matched, and the wrong-meaning state trained on silently."""
    exported = _trained_ap()
    holder = Holder(framework, target(N))
    before = _bits(holder.export())
    with pytest.raises(ValueError, match=r"received an export of APLoss\(\) \(another loss\); "
                                         r"expected one of .*Fix: .*reinterpret=True"):
        holder.load(exported)
    assert _bits(holder.export()) == before
    holder.load(exported, reinterpret=True)  # on purpose: the arrays load as they are
    np.testing.assert_array_equal(holder.export()["u"], exported["u"])


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_multilabel_map_and_one_way_pauc_exports_do_not_cross(framework):
    """Both keep u of shape (K * N, 2): mAP's estimators and SOPAs' shifted averages."""
    mean_ap = xrisk.meanAveragePrecisionLoss(3, num_samples=N)
    one_way = xrisk.MultiLabelpAUCLoss(3, num_samples=N, mode="1w")
    for source, target in ((mean_ap, one_way), (one_way, mean_ap)):
        exported = Holder("torch", source).export()
        holder = Holder(framework, target)
        before = _bits(holder.export())
        with pytest.raises(ValueError, match=rf"received an export of {source.name}"):
            holder.load(exported)
        assert _bits(holder.export()) == before


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_meaning_giving_hyper_parameter_must_match(framework):
    """u~ e^c of pAUC_DRO_Loss is a mean of exp(l / lam): read with another lam it is another
    quantity. gamma only steers the updates: a state carries over a change of gamma."""
    source = Holder("torch", xrisk.pAUC_DRO_Loss(N, lam=1.0, gamma=0.9))
    exported = source.export()
    holder = Holder(framework, xrisk.pAUC_DRO_Loss(N, lam=0.5))
    with pytest.raises(ValueError, match=r"export of pAUC_DRO_Loss\(lam=1.0\) \(other "
                                         r"meaning-giving hyper-parameters\); expected one of "
                                         r"pAUC_DRO_Loss\(lam=0.5\)"):
        holder.load(exported)
    Holder(framework, xrisk.pAUC_DRO_Loss(N, lam=1.0, gamma=0.1)).load(exported)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("definition", [
    xrisk.EntLossClassification(N, mode="SOX"), xrisk.MIDAM_softmax_pooling_loss(N),
    xrisk.MIDAM_attention_pooling_loss(N)], ids=lambda d: d.name)
@pytest.mark.parametrize("smoothing", [0.0, 5.0, -0.5])
def test_the_current_smoothing_must_lie_in_0_1(framework, definition, smoothing):
    """Issue 17.3: MIDAM's and SOX's current gamma accepted 0 and 5, outside (0, 1]."""
    holder = Holder(framework, definition)
    exported = holder.export()
    before = _bits(exported)
    with pytest.raises(ValueError, match=rf"state\['smoothing'\] holds \[{smoothing}\], outside "
                                         r"its domain; expected finite reals in \(0, 1\]"):
        holder.load({**exported, "smoothing": np.float64(smoothing)})
    assert _bits(holder.export()) == before
    holder.load({**exported, "smoothing": np.float64(1e-30)})  # tiny, yet inside


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("flag", [7.0, 0.5, -1.0])
def test_the_seen_flag_of_sox_is_0_or_1(framework, flag):
    """Issue 17.3: the seen flag of EntLossClassification accepted 7."""
    holder = Holder(framework, xrisk.EntLossClassification(N, mode="SOX"))
    exported = holder.export()
    before = _bits(exported)
    nu = np.array(exported["nu"], copy=True)
    nu[2, 1] = flag
    with pytest.raises(ValueError, match=rf"state\['nu'\]\[\.\.\., 1\] holds \[{flag}\] at rows "
                                         r"\[2\], outside its domain; expected \{0, 1\}"):
        holder.load({**exported, "nu": nu})
    assert _bits(holder.export()) == before


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_unknown_format_or_unreadable_metadata_is_refused(framework):
    holder = Holder(framework, xrisk.APLoss(N))
    exported = holder.export()
    for arrays, message in [
            (_with_metadata(exported, format=STATE_FORMAT + 1),
             rf"checkpoint format {STATE_FORMAT + 1}; expected format {STATE_FORMAT}"),
            ({**exported, METADATA_KEY: np.frombuffer(b"\xff", np.uint8)},
             r"'__xrisk__' entry cannot be read"),
            ({**exported, METADATA_KEY: np.zeros(2)}, r"cannot be read.*float64 array")]:
        with pytest.raises(ValueError, match=message):
            holder.load(arrays)
        with pytest.raises(ValueError, match=message):  # reinterpret reads the format too
            holder.load(arrays, reinterpret=True)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_exports_without_metadata_load_where_their_layout_names_one_loss(framework):
    """Format 0 (no metadata): SOX's (nu, smoothing) and LibAUC's (u_all, u_pos) are one
    loss's; AP's u (N, 2) is six losses': that one needs reinterpret=True."""
    sox = Holder(framework, xrisk.EntLossClassification(N, mode="SOX"))
    legacy = {k: v for k, v in sox.export().items() if k != METADATA_KEY}
    sox.load(legacy)
    u = np.linspace(0.1, 1.0, 2 * N).reshape(N, 2)
    ap = Holder(framework, xrisk.APLoss(N))
    ap.load({"u_all": u[:, 0], "u_pos": u[:, 1]})
    with pytest.raises(ValueError, match=r"without the '__xrisk__' metadata entry.*also the "
                                         r"state of GlobalContrastiveLoss, ListwiseCELoss, "
                                         r"MultiLabelpAUCLoss, meanAveragePrecisionLoss, "
                                         r"pAUC_DRO_Loss\. Fix:"):
        ap.load({"u": u})
    ap.load({"u": u}, reinterpret=True)
    np.testing.assert_array_equal(ap.export()["u"], u.astype(np.float64))


@pytest.mark.parametrize("source", FRAMEWORKS)
@pytest.mark.parametrize("target", FRAMEWORKS)
def test_an_export_survives_savez_without_pickle_into_any_framework(tmp_path, source, target):
    """The checkpoint format: np.savez stores the export as it is (the metadata is a uint8
    array), np.load(allow_pickle=False) reads it back, any framework loads it."""
    definition = xrisk.GlobalContrastiveLoss(N, temperature_scheme="individual", tau=0.2)
    holder = Holder(source, definition)
    good = _valid_state(np.random.default_rng(1), definition, holder.export())
    holder.load(good)
    np.savez(tmp_path / "state.npz", **holder.export())
    with np.load(tmp_path / "state.npz", allow_pickle=False) as stored:
        loaded = dict(stored)
    assert _metadata(loaded) == {"format": 1, "loss": "GlobalContrastiveLoss",
                                 "hyper_parameters": {"temperature_scheme": "individual"}}
    other = Holder(target, definition)
    other.load(loaded)
    assert _bits(other.export()) == _bits(good)


def test_metadata_kept_as_text_loads_too():
    """safetensors keeps metadata as strings: the entry may come back as text."""
    loss = xtorch.APLoss(N, dtype="float64")
    exported = loss.export_state()
    text = bytes(exported[METADATA_KEY]).decode()
    for entry in (text, text.encode(), np.asarray(text)):
        loss.load_state({**exported, METADATA_KEY: entry})


def test_bounds_rounded_by_a_narrower_float_are_inside():
    """A float64 table written through float32 scores holds a bound as float32 rounds it:
    clip(t, 0.9, ...) in float32 is 0.89999998, below 0.9. Such a state loads; a value one
    float32 step further out does not."""
    definition = xrisk.GlobalContrastiveLoss(N, temperature_scheme="individual", tau=0.95,
                                             tau_min=0.9, tau_max=1.0)
    loss = xtorch.GlobalContrastiveLoss(**definition.config(), dtype="float64")
    exported = loss.export_state()
    rounded = float(np.float32(0.9))
    assert rounded < 0.9
    temperature = np.array(exported["temperature"], copy=True)
    temperature[0, 0] = rounded
    loss.load_state({**exported, "temperature": temperature})
    temperature[0, 0] = np.nextafter(np.float32(0.9), np.float32(0))
    with pytest.raises(ValueError, match=r"state\['temperature'\]\[\.\.\., 0\] holds"):
        loss.load_state({**exported, "temperature": temperature})


@pytest.mark.parametrize("name", LOSSES)
def test_states_that_training_produces_load_back(name):
    """The domains admit what training writes: a few steps of each registered loss (drawn
    hyper-parameters and batches of the harness), float32 or float64 scores on a float32 or
    float64 table (float32 scores round a bound of a float64 table), then export and load."""
    case = CASES[name]

    @settings(max_examples=2 if settings.get_current_profile_name() != "thorough" else 100)
    @given(data=st.data())
    def check(data):
        definition = case.make(data.draw(st.sampled_from(KEY_SPACES), label="size"),
                               data.draw(case.hyper, label="hyper-parameters"))
        table, score = data.draw(st.sampled_from([("float64", torch.float32),
                                                  ("float64", torch.float64),
                                                  ("float32", torch.float32)]), label="dtypes")
        loss = getattr(xtorch, definition.name)(**definition.config(), dtype=table)
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
        weights = rng.normal(size=NUM_FEATURES)
        for _ in range(3):
            inputs = case.batch(data.draw, definition, rng)
            names = score_names(definition, inputs)
            scores = model_scores(inputs, names, weights, case.link)
            loss(**{k: torch.tensor(scores[k], dtype=score) if k in names
                     else None if v is None else torch.as_tensor(np.asarray(v))
                     for k, v in inputs.items()})
        loss.load_state(loss.export_state())

    check()


@settings(max_examples=25 if settings.get_current_profile_name() != "thorough" else 500)
@given(data=st.data())
def test_format_0_shared_layouts_are_those_of_the_registry(data):
    """FORMAT_0_SHARED_LAYOUTS lists each layout (keys, row shapes) that several registered
    losses share: two drawn losses of different names and one layout are listed there with
    both names; a listed loss's layout names it."""
    drawn = []
    for which in ("first", "second"):
        name = data.draw(st.sampled_from(LOSSES), label=f"{which} loss")
        size = data.draw(st.sampled_from(KEY_SPACES), label=f"{which} size")
        drawn.append(CASES[name].make(size, data.draw(CASES[name].hyper, label=which)))
    first, second = drawn
    layouts = [frozenset((n, "rows", d.state_tables()[n].row)
                         if n in d.state_tables() and d.state_tables()[n].keys is not None
                         else (n, "global", s) for n, s in d.state_shapes().items())
               for d in drawn]
    for definition, layout in zip(drawn, layouts, strict=True):
        if layout in FORMAT_0_SHARED_LAYOUTS:
            assert definition.name in FORMAT_0_SHARED_LAYOUTS[layout]
    if first.name != second.name and layouts[0] == layouts[1] and layouts[0]:
        assert {first.name, second.name} <= set(FORMAT_0_SHARED_LAYOUTS.get(layouts[0], ()))


def test_checked_state_arrays_reads_the_domains_in_the_target_dtype():
    """The check runs on the values as they will be stored: a float64 smoothing that float32
    rounds to 1.0 is inside (0, 1]; a float64 0 is out whatever the target."""
    definition = xrisk.EntLossClassification(N, mode="SOX")
    arrays = {"nu": np.zeros((N, 2)), "smoothing": np.float64(1 + 2**-30)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xrisk.StateCastWarning)
        out = checked_state_arrays(definition, arrays, {"nu": "float32",
                                                        "smoothing": "float32"})
    assert float(out["smoothing"]) == 1.0
    with pytest.raises(ValueError, match=r"state\['smoothing'\] holds \[1.0000000009313226\]"):
        checked_state_arrays(definition, arrays)



@pytest.mark.parametrize("what", ["another loss", "smoothing 0", "seen flag 7"])
def test_sharded_loads_check_like_load_state(what):
    """ShardedLoss.load_state and load_shard (a rank's file) check the metadata and the
    domains too (one process: world 1), and change nothing on error."""
    from xrisk.torch.distributed import ShardedLoss

    definition = xrisk.EntLossClassification(N, mode="SOX")
    loss = ShardedLoss(definition, dtype="float64")
    shard = loss.export_shard()
    export = loss.export_state()
    nu = np.array(shard["nu"], copy=True)
    nu[1, 1] = 7.0
    bad = {"another loss": {METADATA_KEY: Holder("torch", xrisk.MIDAM_softmax_pooling_loss(
               N)).export()[METADATA_KEY]},
           "smoothing 0": {"smoothing": np.float64(0.0)},
           "seen flag 7": {"nu": nu}}[what]
    before = _bits(loss.export_shard())
    for load, arrays in ((loss.load_shard, shard), (loss.load_state, export)):
        with pytest.raises(ValueError, match=r"EntLossClassification: .*expected.*Fix:"):
            load({**arrays, **bad})
        assert _bits(loss.export_shard()) == before
    loss.load_shard(shard)
    loss.load_state(export)
