"""A fuzzer driven by the declarations: every registered loss, every input, out of its domain.

Nothing here lists a bad case by hand. For every loss of the registry (``tests._cases.CASES``,
so a new loss is covered without an edit) the strategies read what the loss declares, its
inputs (:meth:`~xrisk.losses.LossDefinition.inputs`, each with its domain,
:func:`xrisk._value_checks.declared_domain`) and its relations
(:meth:`~xrisk.losses.LossDefinition.relations`), start from a good batch of the harness and
break it in one declared way:

- a value outside an input's domain: NaN, an infinity, each finite end of the interval (the
  end itself where it is open, the next representable value past it where it is closed), a
  non-integral value where the domain holds whole numbers; written in the input's dtype,
  float64, float32 or float16, so half precision and mixed dtypes are drawn too;
- a relation broken on one row (``num_relevant < num_candidates`` on a row that has it
  not, ``ideal_dcg > 0`` on a row with a positive relevance);
- a wrong shape (a row or column fewer in one input, an extra axis) or a wrong dtype (a
  float index, integer scores);
- an empty batch (valid: the loss is 0 and nothing is written).

The contract, in each mode of :data:`MODES`: eagerly a ``ValueError`` / ``TypeError`` naming
the input, and every state table bit for bit as it was; under ``jax.jit``, ``jax.grad``,
``tf.function`` and ``torch.compile`` (backend ``aot_eager``) a NaN loss (or a clear error at
trace time for a static fault) and every state table unchanged, and an error under
``xrisk.set_checks("raise")``.

The CI profile draws a few examples per loss and runs ``torch.compile`` on a sample of the
losses; ``HYPOTHESIS_PROFILE=thorough`` draws hundreds and compiles every loss.

This module fuzzes the batch inputs; its sibling ``tests/test_state_domains_fuzz.py`` fuzzes
the stored state entries on load by the same mechanism (the state tables' declared domains).
The helpers here (:func:`outside_values`, :func:`assert_bitwise_equal`, :func:`run_step`)
serve any further section.
"""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import xrisk
from tests._cases import CASES, NUM_FEATURES
from tests._frameworks import model_scores, score_names
from tests._sizes import KEY_SPACES
from xrisk._domain import COUNT, Domain, Relation, Size
from xrisk._value_checks import declared_domain

#: Every registered loss, by name (the registry, read at import: new losses join here).
LOSSES = sorted(CASES)
#: Where one fuzzed step runs.
EAGER = ("numpy", "torch", "jax", "tensorflow")
TRACED = ("jax.jit", "jax.grad", "tf.function", "torch.compile")
#: The losses whose step is also run under torch.compile in CI (each compile costs seconds):
#: a stateful binary loss, a ranking loss with per-query data and relations, a contrastive
#: loss. Every loss under the thorough profile.
COMPILED_IN_CI = ("APLoss", "NDCGLoss", "GlobalContrastiveLoss")
FLOATS = (np.float64, np.float32, np.float16)
WEIGHTS = np.linspace(-0.6, 0.9, NUM_FEATURES)


def _thorough() -> bool:
    return settings.get_current_profile_name() == "thorough"


def rotated(draw, choices, offset, label):
    """One of ``choices``, drawn, rotated by ``offset``: hypothesis's first example is its
    simplest (the first choice), so with a few examples per loss every loss would meet the
    same first choice; the rotation (a loss's position in the registry) spreads those first
    examples over the choices, the later examples draw freely."""
    choices = tuple(choices)
    return choices[(draw(st.integers(0, len(choices) - 1), label=label) + offset)
                   % len(choices)]


# -- drawing a good batch, then breaking it ---------------------------------------------------
def _prior_state(definition):
    """A numpy state whose float rows all differ (a write to any row shows); counters as
    initialised."""
    state = definition.init(xp=np, dtype=np.float64)
    values = {}
    for name, value in state._asdict().items():
        value = np.asarray(value)
        if value.dtype.kind == "f" and value.ndim:
            values[name] = (np.arange(value.size) / (2 * value.size) + 0.05).reshape(value.shape)
        else:
            values[name] = value
    return values


@st.composite
def good_batches(draw, name):
    """``(definition, state, params, inputs)``: a loss of the registry and a good batch for it
    (numpy, scores made by the harness's linear model), each float input in a drawn dtype."""
    case = CASES[name]
    size = draw(st.sampled_from(KEY_SPACES), label="key space size")
    definition = case.make(size, draw(case.hyper, label="hyper-parameters"))
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="seed"))
    inputs = case.batch(draw, definition, rng)
    names = score_names(definition, inputs)
    inputs = {**inputs, **model_scores(inputs, names, WEIGHTS, case.link)}
    for spec in definition.inputs():
        value = inputs.get(spec.name)
        if value is not None and np.asarray(value).dtype.kind == "f":
            dtype = draw(st.sampled_from(FLOATS), label=f"dtype of {spec.name}")
            inputs[spec.name] = np.asarray(value).astype(dtype)
    params = {k: np.asarray(v, np.float64)
              for k, v in case.initial_params(np.random.default_rng(0)).items()}
    return definition, _prior_state(definition), params, inputs


def outside_values(domain: Domain, dtype: np.dtype) -> list:
    """Values of ``dtype`` outside ``domain``: NaN, the infinities, each finite end where it is
    open and the next representable value past it where it is closed, a non-integral value
    inside the interval where the domain holds whole numbers. Only values the dtype can hold,
    each checked to lie outside (the rounding of a narrow dtype may bring one back in)."""
    dtype = np.dtype(dtype)
    found: list = []
    if dtype.kind == "f":
        found += [np.nan, np.inf, -np.inf]
    for end, is_open, outward in ((domain.low, domain.low_open, -np.inf),
                                  (domain.high, domain.high_open, np.inf)):
        if math.isinf(end):
            continue
        if is_open:
            found.append(end)
        elif dtype.kind == "f":
            past = np.nextafter(dtype.type(end), dtype.type(outward))
            if abs(past) < np.finfo(dtype).tiny:  # subnormal: XLA on CPU reads it as 0
                past = np.copysign(np.finfo(dtype).tiny, past)
            found.append(past)
        else:
            found.append(end + (1 if outward > 0 else -1))
        if dtype.kind in "iu" or domain.integer:  # a whole step past the end too
            found.append(end + (1 if outward > 0 else -1) * (2 if is_open else 1))
    if domain.integer and dtype.kind == "f":
        inner = 0.5 if math.isinf(domain.low) else domain.low + 0.5
        found.append(inner)
    kept = []
    for value in found:
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if not (info.min <= value <= info.max) or value != int(value):
                continue
        with np.errstate(over="ignore", invalid="ignore"):
            cast = np.asarray([value]).astype(dtype)
        if domain.violations(cast)[0]:
            kept.append(cast[0])
    return kept


def _batch_axis_inputs(definition, inputs):
    """The inputs present, each with its declared dims."""
    return [spec for spec in definition.inputs() if inputs.get(spec.name) is not None]


class Fault:
    """One way a batch was broken: its description and the input names an error must name.

    ``static``: a shape or dtype fault, which every mode may reject before running (a traced
    step raises while tracing). ``empty``: the batch is empty (valid: the loss is 0)."""

    def __init__(self, text, names, *, static=False, empty=False):
        self.text, self.names, self.static, self.empty = text, tuple(names), static, empty

    def __repr__(self):
        return f"Fault({self.text!r})"


def _value_fault(draw, definition, inputs, offset):
    specs = [spec for spec in _batch_axis_inputs(definition, inputs)
             if np.asarray(inputs[spec.name]).size]
    spaces = definition.key_spaces()
    choices = []
    for spec in specs:
        values = np.asarray(inputs[spec.name])
        domain = declared_domain(spec, spaces)
        if values.dtype == bool:
            continue  # every bool is a binary label: nothing outside {0, 1} to write
        choices += [(spec, value) for value in outside_values(domain, values.dtype)]
    assume(choices)
    spec, value = rotated(draw, choices, offset, "input and value outside its domain")
    values = np.array(inputs[spec.name])  # a copy
    position = rotated(draw, range(values.size), offset, "position")
    values.reshape(-1)[position] = value
    inputs[spec.name] = values
    event(f"value outside the domain of a {spec.kind} input")
    return Fault(f"{spec.name}[{position}] = {value!r} ({values.dtype})", [spec.name])


def _relation_fault(draw, definition, inputs, offset):
    relations = [r for r in definition.relations()
                 if all(inputs.get(name) is not None for name in r.names())
                 and isinstance(r.left, str)]
    assume(relations)
    relation: Relation = rotated(draw, relations, offset, "relation")
    left = np.array(inputs[relation.left])
    assume(left.size)
    row = rotated(draw, range(left.shape[0]), offset, "row")
    if isinstance(relation.right, str):
        right = np.asarray(inputs[relation.right])[row]
    elif isinstance(relation.right, Size):
        right = _size(definition, inputs, relation.right.dim)
    else:
        right = relation.right
    # The left value that breaks the relation by the least: the right value itself for a
    # strict comparison, one step past it otherwise (a whole step: counts stay whole).
    step = 1.0 if left.dtype.kind in "iu" or _integer(definition, relation.left) else \
        max(abs(float(right)) * 1e-3, 1e-3)
    broken = {"<": right, "<=": right + step, ">": right, ">=": right - step}[relation.op]
    left[row] = broken
    inputs[relation.left] = left
    if relation.where is not None:  # the row must be one where the relation applies
        where = np.array(inputs[relation.where])
        where[row].reshape(-1)[0] = 1
        inputs[relation.where] = where
    assume(not bool(relation.compare(left[row].astype(np.float64), float(right))))
    event(f"relation {relation.describe()}")
    return Fault(f"row {row} breaks {relation.describe()}", relation.names())


def _integer(definition, name):
    spec = next(spec for spec in definition.inputs() if spec.name == name)
    return declared_domain(spec, definition.key_spaces()).integer


def _size(definition, inputs, dim):
    for spec in _batch_axis_inputs(definition, inputs):
        if dim in spec.shape:
            return np.asarray(inputs[spec.name]).shape[spec.shape.index(dim)]
    return definition.dims()[dim]


def _shape_fault(draw, definition, inputs, offset):
    specs = _batch_axis_inputs(definition, inputs)
    spec = rotated(draw, specs, offset, "input to reshape")
    values = np.asarray(inputs[spec.name])
    kind = rotated(draw, ["fewer", "extra axis", "dtype"], offset, "shape fault")
    if kind == "fewer":
        axis = draw(st.integers(0, values.ndim - 1), label="axis")
        others = [s for s in specs if s.name != spec.name and spec.shape[axis] in s.shape]
        assume(values.shape[axis] > 0 and (others or spec.shape[axis] in definition.dims()))
        inputs[spec.name] = np.take(values, np.arange(values.shape[axis] - 1), axis=axis)
    elif kind == "extra axis":
        inputs[spec.name] = np.stack([values, values], axis=-1)
    else:
        if spec.kind in ("score", "data"):
            inputs[spec.name] = values.astype(np.int64)
        elif spec.kind == "index":
            inputs[spec.name] = values.astype(np.float32)
        else:
            assume(False)  # labels and relevance take any real dtype
    event(f"shape fault: {kind}")
    return Fault(f"{spec.name}: {kind}", [spec.name], static=True)


def _empty_batch(draw, definition, inputs, offset):
    for spec in _batch_axis_inputs(definition, inputs):
        inputs[spec.name] = np.asarray(inputs[spec.name])[:0]
    return Fault("empty batch", [], empty=True)


@st.composite
def broken_batches(draw, name, kind):
    """``(definition, state, params, inputs, fault)``: a good batch broken in one declared
    way, ``kind`` (see the module docstring)."""
    definition, state, params, inputs = draw(good_batches(name))
    breaker = {"value": _value_fault, "relation": _relation_fault, "shape": _shape_fault,
               "empty": _empty_batch}[kind]
    fault = breaker(draw, definition, inputs, LOSSES.index(name))
    return definition, state, params, inputs, fault


# -- running one step in each mode -------------------------------------------------------------
def _to(framework, value):
    if framework == "numpy":
        return value
    if framework in ("torch", "torch.compile"):
        return torch.as_tensor(value)
    if framework.startswith("jax"):
        return jnp.asarray(value)
    return tf.constant(value)


def _containers(framework, definition, state, params):
    return (definition.state_type(**{k: _to(framework, v) for k, v in state.items()}),
            definition.params_type(**{k: _to(framework, v) for k, v in params.items()}))


_COMPILED: dict = {}


def _compiled(mode, definition, names):
    """The compiled step of ``definition`` for ``mode``, cached by loss and input names (a
    compiled function retraces for new shapes or dtypes by itself)."""
    key = (mode, definition, names)
    if key in _COMPILED:
        return _COMPILED[key]

    def step(state, params, *values):
        return definition.apply(state, params=params, **dict(zip(names, values)))

    if mode == "jax.jit":
        run = jax.jit(step)
    elif mode == "jax.grad":  # compiled too: op by op, a grad step compiles every primitive
        scores = {s.name for s in definition.inputs() if s.kind == "score"}

        def grad_step(state, params, *values):
            # With respect to a floating score input; integer scores (a dtype fault) are the
            # library's to refuse, which jax.grad would do first in its own words.
            score = next((i for i, name in enumerate(names) if name in scores
                          and jnp.issubdtype(values[i].dtype, jnp.inexact)), None)
            if score is None:
                return step(state, params, *values)

            def loss(x):
                out, new = step(state, params, *values[:score], x, *values[score + 1:])
                return jnp.sum(out.astype(jnp.float64)), (out, new)
            return jax.grad(loss, has_aux=True)(values[score])[1]
        run = jax.jit(grad_step)
    elif mode == "tf.function":  # the library has no Python control flow on tensors
        run = tf.function(step, autograph=False)
    else:
        run = torch.compile(step, backend="aot_eager")
    _COMPILED[key] = run
    return run


def run_step(mode, definition, state, params, inputs):
    """``(loss, new_state)`` of one step in ``mode``; numpy results."""
    framework = {"jax.jit": "jax", "jax.grad": "jax", "tf.function": "tensorflow"}.get(mode, mode)
    state_c, params_c = _containers(framework, definition, state, params)
    names = tuple(name for name, value in inputs.items() if value is not None)
    values = [_to(framework, inputs[name]) for name in names]
    if mode in TRACED:
        loss, new = _compiled(mode, definition, names)(state_c, params_c, *values)
    else:
        loss, new = definition.apply(state_c, params=params_c, **dict(zip(names, values)))
    given = {k: np.asarray(_numpy(v)) for k, v in state_c._asdict().items()}
    return float(_numpy(loss)), {k: _numpy(v) for k, v in new._asdict().items()}, given


def _numpy(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return np.asarray(x)


def assert_bitwise_equal(after: dict, before: dict, what: str) -> None:
    """Every state table of ``after`` is the table of ``before``, bit for bit (dtype, shape
    and bytes: NaN rows and -0.0 included)."""
    assert after.keys() == before.keys(), what
    for name, value in before.items():
        got = np.asarray(after[name])
        assert got.dtype == value.dtype and got.shape == value.shape, (what, name)
        assert got.tobytes() == value.tobytes(), f"{what}: state {name!r} changed"


def _check_contract(mode, definition, state, params, inputs, fault):
    """The contract of one broken batch in one mode (see the module docstring)."""
    before = {k: v.copy() for k, v in state.items()}
    try:
        loss, new, given = run_step(mode, definition, state, params, inputs)
    except (ValueError, TypeError) as error:
        assert not fault.empty, f"{mode}: an empty batch raised {error!r}"
        if mode not in TRACED or fault.static:
            names = "|".join(re.escape(name) for name in fault.names)
            assert re.search(names, str(error)), f"{mode}: {fault} gave {error!r}"
        return
    except Exception as error:  # a framework's wrapper of a trace-time error
        assert mode in TRACED and fault.static, f"{mode}: {fault} gave {error!r}"
        return
    assert mode in TRACED or fault.empty, f"{mode}: {fault} raised nothing (loss {loss})"
    if fault.empty:
        assert loss == 0.0, f"{mode}: empty batch gave {loss}"
    else:
        assert np.isnan(loss), f"{mode}: {fault} gave loss {loss}"
    assert_bitwise_equal({k: np.asarray(v) for k, v in new.items()}, before, f"{mode} {fault}")
    assert_bitwise_equal(given, before, f"{mode} {fault} (state given)")


def _settings(ci_examples: int):
    """``ci_examples`` examples per loss outside the thorough profile (derandomized, as the
    suite's other profiles), hundreds under it."""
    if _thorough():
        return settings(max_examples=200, deadline=None,
                        suppress_health_check=[HealthCheck.too_slow,
                                               HealthCheck.filter_too_much])
    return settings(max_examples=ci_examples, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


FAULT_KINDS = ("value", "relation", "shape", "empty")


def _declares_relations(name):
    return bool(CASES[name].make(KEY_SPACES[1], {}).relations())


def _loss_and_kind():
    """Every registered loss with every fault kind it can have (a relation fault for the
    losses that declare relations)."""
    return [(name, kind) for name in LOSSES for kind in FAULT_KINDS
            if kind != "relation" or _declares_relations(name)]


# -- section 1: batch inputs -----------------------------------------------------------------
@pytest.mark.parametrize("name, kind", _loss_and_kind())
@_settings(ci_examples=3)
@given(data=st.data())
def test_eager_bad_input_raises_naming_it_and_keeps_state(name, kind, data):
    """Eagerly, in every framework: a ValueError / TypeError that names the input, no state
    change (an empty batch: loss 0, no state change)."""
    definition, state, params, inputs, fault = data.draw(broken_batches(name, kind))
    for mode in EAGER:
        _check_contract(mode, definition, state, params, inputs, fault)


@pytest.mark.parametrize("name", LOSSES)
@_settings(ci_examples=2)
@given(data=st.data())
def test_traced_bad_input_gives_nan_and_keeps_state(name, data):
    """Under jax.jit, jax.grad and tf.function: NaN (0 for an empty batch) or a trace-time
    error for a static fault, and every state table unchanged."""
    offset = LOSSES.index(name)
    kind = rotated(data.draw, [k for k in FAULT_KINDS
                               if k != "relation" or _declares_relations(name)],
                   offset, "fault kind")
    definition, state, params, inputs, fault = data.draw(broken_batches(name, kind))
    mode = rotated(data.draw, ("jax.jit", "jax.grad", "tf.function"), offset, "mode")
    event(f"mode {mode}, fault kind {kind}")
    _check_contract(mode, definition, state, params, inputs, fault)


@pytest.mark.parametrize("name", LOSSES if _thorough() else COMPILED_IN_CI)
@_settings(ci_examples=1)
@given(data=st.data())
def test_torch_compile_bad_input_gives_nan_and_keeps_state(name, data):
    """Under torch.compile (backend aot_eager: Dynamo's capture and AOTAutograd's
    functionalization of the state writes, without Inductor's code generation)."""
    kind = data.draw(st.sampled_from(
        [k for k in ("value", "relation") if k != "relation" or _declares_relations(name)]),
        label="fault kind")
    definition, state, params, inputs, fault = data.draw(broken_batches(name, kind))
    torch._dynamo.reset()
    _check_contract("torch.compile", definition, state, params, inputs, fault)


@pytest.mark.parametrize("mode", ["jax.jit", "tf.function"])
@pytest.mark.parametrize("name", ["APLoss", "NDCGLoss"] if not _thorough() else LOSSES)
@_settings(ci_examples=1)
@given(data=st.data())
def test_traced_bad_input_raises_under_set_checks_raise(mode, name, data):
    """With ``xrisk.set_checks("raise")`` the same faults raise inside the compiled step, and
    the state given to it is unchanged."""
    kind = "relation" if _declares_relations(name) and data.draw(
        st.booleans(), label="relation fault") else "value"
    definition, state, params, inputs, fault = data.draw(broken_batches(name, kind))
    before = {k: v.copy() for k, v in state.items()}
    with xrisk.set_checks("raise"):
        _COMPILED.clear()  # the mode is read when tracing
        with pytest.raises(Exception) as caught:  # each framework's assertion error
            run_step(mode, definition, state, params, inputs)
            jax.effects_barrier()
        _COMPILED.clear()
    assert any(name in str(caught.value) for name in fault.names), caught.value
    assert_bitwise_equal(state, before, f"{mode} {fault}")


# -- regressions: the cases issue 17 lists, and what the fuzzer found ---------------------------
def _ranking_batch(**changes):
    """A good NDCG batch of two queries (2 positives, 1 negative) with ``changes``."""
    batch = {"scores": np.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.5]]),
             "relevance": np.array([[3.0, 1.0], [2.0, 2.0]]), "query": np.array([0, 1]),
             "interaction": np.array([[0, 1], [2, 3]]), "num_relevant": np.array([2.0, 2.0]),
             "ideal_dcg": np.array([7.63, 4.89]), "num_candidates": np.array([10.0, 10.0])}
    return {**batch, **{k: np.asarray(v, np.float64) for k, v in changes.items()}}


#: The listed cases: (changed inputs, the input or relation the error must name).
ISSUE_CASES = {
    "num_candidates 0": ({"num_candidates": [0.0, 10.0]}, r"num_candidates must be integers"),
    "num_candidates negative": ({"num_candidates": [-4.0, 10.0]},
                                r"num_candidates must be integers in \[1, ∞\)"),
    "num_candidates below num_relevant": ({"num_candidates": [10.0, 1.0]},
                                          r"num_relevant < num_candidates fails at rows \[1\]"),
    "num_candidates fractional": ({"num_candidates": [9.5, 10.0]}, r"received \[9\.5\]"),
    "ideal_dcg 0": ({"ideal_dcg": [0.0, 4.89]}, r"ideal_dcg > 0 on every row where relevance"),
    "ideal_dcg negative": ({"ideal_dcg": [-1.0, 4.89]}, r"ideal_dcg must be finite reals in "
                                                        r"\[0, ∞\); received \[-1\.0\]"),
    "num_relevant negative": ({"num_relevant": [-2.0, 2.0]}, r"num_relevant must be integers"),
    "num_relevant 0": ({"num_relevant": [0.0, 2.0]}, r"num_relevant must be integers in \[1"),
    # Found while declaring: 2^130 - 1 overflows float32 (a NaN loss after the write).
    "relevance 130": ({"relevance": [[130.0, 1.0], [2.0, 2.0]]},
                      r"relevance must be finite reals in \[0, 64\]; received \[130\.0\]"),
}


@pytest.mark.parametrize("top_k", [None, 1])
@pytest.mark.parametrize("case", sorted(ISSUE_CASES))
def test_issue_ranking_cases_raise_eagerly_and_give_nan_under_jit(case, top_k):
    """SONG and K-SONG with per-query counts: each listed case raises eagerly naming the
    input, and under jax.jit returns NaN with every state table unchanged."""
    changes, message = ISSUE_CASES[case]
    definition = xrisk.NDCGLoss(4, 2, None, top_k=top_k)
    state = _prior_state(definition)
    before = {k: v.copy() for k, v in state.items()}
    inputs = _ranking_batch(**changes)
    with pytest.raises(ValueError, match=message):
        run_step("numpy", definition, state, {}, inputs)
    assert_bitwise_equal(state, before, case)
    loss, new, _ = run_step("jax.jit", definition, state, {}, inputs)
    assert np.isnan(loss)
    assert_bitwise_equal(new, before, f"jax.jit {case}")
    loss, new, _ = run_step("jax.jit", definition, state, {}, _ranking_batch())
    assert np.isfinite(loss) and np.any(new["u"] != before["u"])  # the good batch writes


def test_ideal_dcg_zero_where_every_relevance_is_zero_is_a_zero_weight():
    """A query whose relevant items all have relevance 0 has Z_q = 0 (what the sampler
    gives): its weight is 0, not 0/0, so the loss and every gradient stay finite."""
    definition = xrisk.NDCGLoss(4, 2, None)
    inputs = _ranking_batch(relevance=[[0.0, 0.0], [2.0, 2.0]], ideal_dcg=[0.0, 4.89])
    scores = torch.tensor(inputs.pop("scores"), requires_grad=True)
    state = definition.state_type(**{k: torch.as_tensor(v)
                                     for k, v in _prior_state(definition).items()})
    loss, _ = definition.apply(state, scores, **{k: torch.as_tensor(v)
                                                 for k, v in inputs.items()})
    loss.backward()
    assert torch.isfinite(loss) and bool(torch.isfinite(scores.grad).all())
    assert float(scores.grad[0].abs().sum()) == 0.0  # the zero-gain query moves nothing


@pytest.mark.parametrize("mode", ["jax.jit", "tf.function"])
@pytest.mark.parametrize("name", ["EntLossClassification", "tpAUC_KL_Loss", "MultiLabelpAUCLoss"])
def test_bad_traced_batch_keeps_a_float64_state_under_float32_scores(name, mode):
    """Found by the fuzzer: a bad traced batch with float32 scores and a float64 state wrote
    its rows (EntLoss's nu), its loss-wide entries (tpAUC-KL's w) and its per-label rows
    (multi-label tpAUC-KL's w, keyed by label) back through float32, changing their digits.
    Step.write_rows now re-reads the table's rows for a bad batch, and apply keeps every
    table that no index addresses as given."""
    definition = (xrisk.MultiLabelpAUCLoss(3, 1, mode="SOTAs", tau=0.1, lam=0.1)
                  if name == "MultiLabelpAUCLoss" else CASES[name].make(1, {}))
    state = _prior_state(definition)
    before = {k: v.copy() for k, v in state.items()}
    batch = {"EntLossClassification": {"logits": np.array([[0.48]], np.float32),
                                       "index": np.array([1])},
             "tpAUC_KL_Loss": {"scores": np.array([0.62], np.float32), "labels": np.array([0]),
                               "index": np.array([1])},
             "MultiLabelpAUCLoss": {"scores": np.array([[0.62, 0.55, 0.22]], np.float32),
                                    "labels": np.array([[0.0, 1.0, 0.0]]),
                                    "index": np.array([1])},
             }[name]  # index 1 is outside a key space of 1
    loss, new, _ = run_step(mode, definition, state, {}, batch)
    assert np.isnan(loss)
    assert_bitwise_equal(new, before, f"{mode} {name}")


# -- the Domain itself: the host test and the in-graph test agree -------------------------------
@st.composite
def domains(draw):
    """Domains with ends among a few edges (open or closed), whole numbers or not, NaN or
    not."""
    ends = st.sampled_from([-math.inf, -2.0, -1.0, 0.0, 0.5, 1.0, 3.0, math.inf])
    low, high = sorted((draw(ends), draw(ends)))
    return Domain(low, high, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()),
                  draw(st.booleans()))


@_settings(ci_examples=20)
@given(domain=domains(), dtype=st.sampled_from([np.float64, np.float32, np.float16, np.int64,
                                                np.int8, np.uint8]),
       data=st.data())
def test_domain_host_and_graph_tests_agree(domain, dtype, data):
    """``violations`` (host, per entry), ``admits`` (host, the fast path of every eager step)
    and ``holds`` (in the graph, numpy / torch / JAX / TensorFlow) say the same of the same
    values: the edges of the domain, the values just past them, NaN and the infinities."""
    from xrisk.backends import tensorflow as tf_backend

    candidates = [0, 1, 2, -1, -2, 3, 4, 0.5, 2.5, -0.5]
    candidates += [end for end in (domain.low, domain.high) if not math.isinf(end)]
    if np.dtype(dtype).kind == "f":
        candidates += [np.nan, np.inf, -np.inf]
        candidates += outside_values(domain, dtype)
    values = data.draw(st.lists(st.sampled_from(candidates), min_size=0, max_size=6),
                       label="values")
    with np.errstate(invalid="ignore", over="ignore"):
        array = np.asarray(values, dtype=np.float64).astype(dtype)
    bad = domain.violations(array)
    assert domain.admits(array) == (not bad.any())
    graphs = {"numpy": np.asarray(domain.holds(array, np)),
              "torch": domain.holds(torch.as_tensor(array), _torch_xp()).numpy(),
              "jax": np.asarray(domain.holds(jnp.asarray(array), jnp)),
              "tensorflow": domain.holds(tf.constant(array), tf_backend.namespace).numpy()}
    for framework, holds in graphs.items():
        np.testing.assert_array_equal(holds, ~bad, err_msg=f"{framework}: {domain} {array}")


def _torch_xp():
    import array_api_compat.torch as xp

    return xp


def test_domain_descriptions_read_as_sets():
    assert Domain(1.0, integer=True).describe() == "integers in [1, ∞)"
    assert Domain(0.0, low_open=True).describe() == "finite reals in (0, ∞)"
    assert Domain(0.0, 1.0, integer=True).describe() == "{0, 1}"
    assert Domain(0.0, 5.0, high_open=True, integer=True).describe() == "integers in [0, 5)"
    assert Relation("a", "<", "b", where="c").describe() == \
        "a < b on every row where c has an entry > 0"
    assert Relation(Size("candidates"), "<=", 7.0).describe() == "the candidates width <= 7"


class _Sized(xrisk.losses.LossDefinition):
    """A toy loss with relations to a width: ``counts >= Size("batch")`` row by row (an
    input against a dimension) and ``Size("batch") <= limit`` (static)."""

    def __init__(self, limit: float = 4.0) -> None:
        self.limit = limit

    def inputs(self):
        return (xrisk.losses.Input("scores", ("batch",), "score"),
                xrisk.losses.Input("counts", ("batch",), "data", domain=COUNT))

    def relations(self):
        return (Relation("counts", ">=", Size("batch"), fix="pass counts >= the batch size"),
                Relation(Size("batch"), "<=", self.limit))

    def _loss(self, step, state, params, scores, counts):
        return step.xp.sum(scores * counts), state


def test_relations_to_a_width_eager_traced_and_static():
    """A relation to a dimension's size holds row by row (eager: raise; jax.jit: NaN); one
    between sizes and constants only is static and raises even while tracing."""
    definition = _Sized()
    state = definition.init(xp=np)
    scores = np.array([0.5, 0.25, 0.75])
    with pytest.raises(ValueError, match=r"counts >= the batch width fails at rows \[1\]: "
                                         r"received counts=\[2\.0\], batch width 3"):
        definition.apply(state, scores, np.array([3.0, 2.0, 5.0]))
    step = jax.jit(lambda s, c: definition.apply(state, s, c)[0])
    assert np.isnan(float(step(jnp.asarray(scores), jnp.asarray([3.0, 2.0, 5.0]))))
    assert float(step(jnp.asarray(scores), jnp.asarray([3.0, 3.0, 5.0]))) == 6.0  # a good batch
    with pytest.raises(ValueError, match=r"the batch width <= 4 fails"):
        step(jnp.ones(5), jnp.full(5, 5.0))
