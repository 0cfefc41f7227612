"""Input checks shared by every loss, driven by the loss's declared inputs.

Shape and dtype checks are static and always run. Value checks (every input inside its
declared domain, :func:`declared_domain`: labels in {0, 1}, finite scores, an index inside its
key space, a count a whole number ...; and the definition's relations between inputs, e.g.
``num_relevant < num_candidates``) raise on arrays whose values the host can read for free
(eager CPU arrays); on traced or device arrays they are computed in the graph instead, and a
batch that fails them gives a NaN loss and writes no state. Every check runs before any state
is touched: bad input never changes state.

What a failed *in-graph* check does is the global check mode of :mod:`xrisk._check_mode`
(:class:`set_checks`: ``"nan"`` or ``"raise"``), read here when a step is traced. The checks
of scalar arguments live in :mod:`xrisk._arguments`; both are re-exported here.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any, NamedTuple

import numpy as np

# The argument validators live in their own module; they are re-exported here for the modules
# that import every check from this one.
from . import _check_mode
from ._arguments import (
    check_choice,
    check_count,
    check_flag,
    check_fraction,
    check_interval,
    check_positive,
)
from ._check_mode import CHECK_MODES, InputWarning, StateCastWarning, get_checks, set_checks
from ._domain import (
    BINARY,
    BINARY_OR_MISSING,
    FINITE,
    NONNEGATIVE,
    Domain,
    Relation,
    Size,
    index_domain,
)
from ._inputs import preview
from ._typing import Array

__all__ = [
    "CHECK_MODES", "InputWarning", "StateCastWarning", "set_checks", "get_checks",
    "CheckedBatch", "check_inputs", "declared_domain", "missing_input", "check_interval",
    "check_count", "check_positive", "check_fraction", "check_choice", "check_flag",
]


# Loss definitions that already warned about inputs outside their declared interval.
_warned: weakref.WeakSet = weakref.WeakSet()


def missing_input(owner: str, spec: Any) -> ValueError:
    """The error for a required input that was omitted (``None``)."""
    if spec.kind == "index":
        return ValueError(
            f"{owner}: {spec.name} is None; expected the {spec.keys} index of every example, "
            f"shape {_shape_text(spec.shape)}. Fix: return the index from the dataset, "
            f"(x, y, index) = batch, and pass it to the loss."
        )
    return ValueError(
        f"{owner}: {spec.name} is None; expected an array of shape {_shape_text(spec.shape)}. "
        f"Fix: pass {spec.name}."
    )


def _shape_text(dims: tuple[str, ...]) -> str:
    return "(" + ", ".join(dims) + (",)" if len(dims) == 1 else ")")


def _match_rank(owner: str, spec: Any, x: Array, xp: Any) -> Array:
    """``x`` with the declared rank; a 1-D input also accepts a trailing axis of size 1."""
    shape = tuple(x.shape)
    rank = len(spec.shape)
    if len(shape) == rank:
        return x
    if rank == 1 and len(shape) == 2 and shape[1] == 1:
        return xp.reshape(x, (-1,))  # shape[0] may be None (known at run time)
    accepted = _shape_text(spec.shape)
    if rank == 1:
        accepted += f" or ({spec.shape[0]}, 1)"
    raise ValueError(
        f"{owner}: {spec.name} has shape {shape}; expected {accepted}. Fix: pass one entry per "
        f"example{', e.g. ' + spec.name + '.reshape(-1) for a single output' if rank == 1 else ''}."
    )


def _check_dtype(owner: str, spec: Any, x: Array, xp: Any) -> None:
    if spec.kind in ("score", "data") and not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(
            f"{owner}: {spec.name} has dtype {x.dtype}; expected a floating dtype. Fix: pass "
            "model outputs (e.g. torch.sigmoid(logits)) or cast with .float() / astype(float32)."
        )
    if spec.kind == "index" and not xp.isdtype(x.dtype, "integral"):
        raise TypeError(
            f"{owner}: {spec.name} has dtype {x.dtype}; expected an integer dtype ({spec.keys} "
            "positions). Fix: pass the index returned by the dataset, cast with .long() or "
            "astype(int64)."
        )


class CheckedBatch(NamedTuple):
    """The result of :func:`check_inputs`.

    Attributes
    ----------
    inputs : dict
        The inputs with their declared ranks and every index in the backend's index dtype
        (made safe to gather with).
    valid : bool array of shape (), or None
        ``None`` when the values were checked on the host (bad values raise), else whether
        they pass, computed in the graph.
    empty : bool, or bool array of shape ()
        Whether a free dimension is 0 (an array where sizes are known only at run time, see
        :func:`_run_time_sizes`).
    host : dict
        The numpy values of the inputs read on the host for their checks (eager CPU arrays:
        views, no copy); empty for traced or device arrays. Values a loss may use to take a
        cheaper, equal path (the host ranking of :func:`xrisk._grouping.group_keys`).
    """

    inputs: dict[str, Array]
    valid: Array | None
    empty: Any
    host: dict[str, np.ndarray]


def check_inputs(definition: Any, backend: Any, bound: dict[str, Array], *, xp: Any,
                 ) -> CheckedBatch:
    """Validate one batch against ``definition.inputs()``; see :class:`CheckedBatch`.

    Raises
    ------
    ValueError
        A wrong rank, sizes of one named dimension that differ, and, on arrays whose values can
        be read for free (``backend.inspectable``), values outside an input's domain (its
        declared ``domain``, else its kind's: labels in {0, 1}, finite scores, relevance
        >= 0, an index inside its key space) or a row that breaks one of the definition's
        ``relations()``. In the ``"raise"`` mode of :class:`set_checks`, traced values that
        fail raise the framework's assertion error.
    TypeError
        Scores of a non-floating dtype, an index of a non-integer dtype.

    Warns
    -----
    InputWarning
        Once per loss definition, when a host-checked input lies outside the interval its
        declaration gives (e.g. logits passed where probabilities in [0, 1] are expected).
    """
    owner = definition.name
    specs = {spec.name: spec for spec in definition.inputs()}
    # The static checks depend on the inputs' shapes and dtypes only: a signature that passed
    # them before is not checked again (an eager step meets the same one batch after batch).
    signature = _signature(backend, bound)
    cache = definition.__dict__.get("_static_checks")
    if cache is None or len(cache) > 64:
        cache = {}
        object.__setattr__(definition, "_static_checks", cache)  # definitions are frozen
    known = cache.get(signature) if signature is not None else None
    if known is not None:
        flat, empty = known
        ranked = {name: x if x is None or name not in flat else xp.reshape(x, (-1,))
                  for name, x in bound.items()}
        return _check_values_of(definition, backend, specs, ranked, {}, empty, xp)
    fixed = definition.dims()
    checked: dict[str, Array] = {}
    sizes: dict[str, dict[str, int | None]] = {}  # None: known only at run time
    for name, spec in specs.items():
        x = bound[name]
        if x is None:
            checked[name] = None
            continue
        x = _match_rank(owner, spec, x, xp)
        _check_dtype(owner, spec, x, xp)
        for dim, size in zip(spec.shape, tuple(x.shape)):
            sizes.setdefault(dim, {})[name] = None if size is None else int(size)
        checked[name] = x
    for dim, by_input in sizes.items():
        static = {size for size in by_input.values() if size is not None}  # None: run time
        expected = {fixed[dim]} if dim in fixed else static
        if len(static | expected) > 1:
            want = f"{dim} = {fixed[dim]}" if dim in fixed else f"one {dim} size for " + \
                ", ".join(by_input)
            raise ValueError(
                f"{owner}: {dim} sizes differ: {by_input}; expected {want}. Fix: pass the "
                "inputs of the same examples" + (f" (this loss was built with {dim}="
                                                  f"{fixed[dim]})." if dim in fixed else ".")
            )
    empty = any(0 in by_input.values() for dim, by_input in sizes.items() if dim not in fixed)
    if signature is not None:
        flat = frozenset(name for name, x in checked.items()
                         if x is not None and x is not bound[name])
        cache[signature] = (flat, empty)
    return _check_values_of(definition, backend, specs, checked, sizes, empty, xp)


def _signature(backend: Any, bound: dict[str, Array]) -> tuple[Any, ...] | None:
    """The shapes and dtypes of a batch, hashable; ``None`` if a size is unknown (run time)."""
    out: list[Any] = [backend.name]
    for x in bound.values():
        if x is None:
            out.append(None)
            continue
        shape = tuple(x.shape)
        if None in shape:
            return None
        out.append((shape, x.dtype))
    return tuple(out)


def _check_values_of(definition: Any, backend: Any, specs: dict[str, Any],
                     checked: dict[str, Array], sizes: dict[str, dict[str, int | None]],
                     empty: Any, xp: Any) -> CheckedBatch:
    """The value checks of :func:`check_inputs`, on inputs that passed the static ones."""
    owner = definition.name
    present = [x for x in checked.values() if x is not None]
    spaces = definition.key_spaces()
    if all(backend.inspectable(x) for x in present):
        warn = definition not in _warned
        host = {}
        for name, x in checked.items():
            if x is not None:
                spec = specs[name]
                host[name] = values = backend.to_numpy(x)  # one host read per input
                interval = getattr(spec, "interval", None)
                if not (warn and interval is not None and values.size
                        and _in_interval(definition, spec, values)):
                    _check_values(owner, spec, values, spaces)
                if spec.domain is not None and not spec.domain.admits(values):
                    raise _domain_error(owner, spec, values)
                if spec.kind == "index":  # exact values were checked: the cast is safe
                    checked[name] = _as_index(x, backend, xp)
        for relation in definition.relations():
            _check_relation_on_host(definition, relation, host, checked)
        return CheckedBatch(checked, None, empty, host)
    valid = None
    for name, x in checked.items():
        if x is None:
            continue
        spec = specs[name]
        if spec.kind == "index":
            # Cast first: every integer dtype maps to the backend's signed index dtype, and a
            # value the cast wraps (uint64 >= 2**63, uint32 >= 2**31 on 32-bit JAX) turns
            # negative, so it still fails the check below.
            x = _as_index(x, backend, xp)
        ok = _values_ok(spec, x, spaces, xp)
        if spec.domain is not None:  # the declared domain narrows the kind's
            narrowed = spec.domain.holds(x, xp)
            ok = narrowed if ok is None else ok & narrowed
        if ok is None:
            checked[name] = x
            continue
        if _check_mode._mode == "raise":
            backend.assert_all(ok, _graph_message(owner, spec, spaces), x)
        if spec.kind == "index":  # gathers stay inside the table on every backend
            x = xp.where(ok, x, xp.zeros_like(x))
        checked[name] = x
        ok = xp.all(ok)
        valid = ok if valid is None else valid & ok
    if any(None in by_input.values() for by_input in sizes.values()):
        result = _run_time_sizes(definition, backend, specs, checked, sizes, valid, empty, xp)
    else:
        result = CheckedBatch(checked, valid, empty, {})
    if definition.relations() and result.empty is not True:
        result = result._replace(valid=_relations_in_graph(definition, backend, result, xp))
    return result


def _run_time_sizes(definition: Any, backend: Any, specs: dict[str, Any],
                    checked: dict[str, Array], sizes: dict[str, dict[str, int | None]],
                    valid: Array | None, empty: bool, xp: Any,
                    ) -> CheckedBatch:
    """The checks of named dimensions whose size is known only at run time (TensorFlow
    ``None`` dimensions: Keras ``fit``, a ``tf.function`` with such an input signature).

    The sizes of each such dimension are compared in the graph: sizes that differ make
    ``valid`` false (NaN loss, no state write; in ``"raise"`` mode the assertion of
    :class:`set_checks`). So that the loss's math never meets inconsistent or empty arrays
    (which no check could then catch: broadcasting, a remainder by 0), the inputs of unknown
    size are cut (after padding) to the size the dimension must have where it is known — the
    declared size of a fixed dimension, or the static size of another input — and then get
    that static size back; otherwise every input is cut to the smallest size, padded with
    one neutral row if that is 0 (``empty`` is then true: ``apply`` returns 0 and writes no
    state). Batches of consistent, non-empty sizes pass unchanged (a concatenation and a
    slice per input and dimension, values and gradients exact).
    """
    owner, fixed = definition.name, definition.dims()
    static = dict(fixed)  # dimension -> the size all its inputs must have, where known
    run_time_empty = None
    for dim, by_input in sizes.items():
        if None not in by_input.values():
            continue
        axes = {name: specs[name].shape.index(dim) for name in by_input}
        found = xp.stack([xp.asarray(backend.axis_size(checked[name], axis),
                                     dtype=backend.index_dtype) for name, axis in axes.items()])
        known = [size for size in by_input.values() if size is not None]
        if dim not in static and known:  # the host checked that the known sizes agree
            static[dim] = known[0]
        if dim in static:
            target = rows = static[dim]
            ok = found == target
        else:
            smallest = xp.min(found)
            ok, rows = found == smallest, 1
            target = xp.maximum(smallest, xp.ones_like(smallest))
            is_empty = smallest == 0
            run_time_empty = is_empty if run_time_empty is None else run_time_empty | is_empty
        if _check_mode._mode == "raise":
            backend.assert_all(ok, _size_message(owner, dim, tuple(axes), fixed), found)
        valid = xp.all(ok) if valid is None else valid & xp.all(ok)
        if empty:  # a static 0 elsewhere: apply returns before any math
            continue
        for name, axis in axes.items():
            if by_input[name] is None:
                checked[name] = _cut_or_pad(checked[name], axis, target, rows,
                                            specs[name].kind, backend, xp)
    for name, x in checked.items():  # dimensions of known size get their static size back
        shape = specs[name].shape if x is not None else ()
        if not empty and any(x.shape[a] is None and d in static for a, d in enumerate(shape)):
            checked[name] = xp.reshape(x, tuple(static[d] if d in static
                                                else backend.axis_size(x, a)
                                                for a, d in enumerate(shape)))
    if empty or run_time_empty is None:  # a static 0, or every size known somewhere
        return CheckedBatch(checked, valid, empty, {})
    return CheckedBatch(checked, valid, run_time_empty, {})


def declared_domain(spec: Any, spaces: dict[str, int | None]) -> Domain:
    """The values input ``spec`` may take: its declared ``domain``, else its kind's (finite
    reals for scores and data, {0, 1} for labels, NaN too for partial labels, finite reals
    >= 0 for relevance, integers in [0, size of its key space) for an index).

    The validator checks the kind's domain with the kind's fast paths and a declared domain
    on top of it (a declared domain narrows the kind's); tests read this to draw values
    outside it.
    """
    if spec.domain is not None:
        return spec.domain
    if spec.kind == "index":
        return index_domain(spaces.get(spec.keys))
    return _KIND_DOMAINS[spec.kind]


_KIND_DOMAINS = {"score": FINITE, "data": FINITE, "label": BINARY,
                 "partial_label": BINARY_OR_MISSING, "relevance": NONNEGATIVE}


def _domain_error(owner: str, spec: Any, values: np.ndarray) -> ValueError:
    """The error of host values outside ``spec.domain`` (the kind's checks passed)."""
    domain = spec.domain
    bad = values[domain.violations(values)]
    return ValueError(
        f"{owner}: {spec.name} must be {domain.describe()}; received {preview(np.unique(bad))}"
        f". Expected {domain.describe()} in every entry of {spec.name}. Fix: pass {spec.name} "
        f"as {domain.describe()}."
    )


def _operand(definition: Any, term: Any, arrays: dict[str, Array], backend: Any) -> Any:
    """The value of one operand of a relation: an input's array, a dimension's size (an int,
    or a 0-d array where known only at run time) or a number; ``None`` for an omitted
    optional input."""
    if isinstance(term, str):
        return arrays[term]
    if isinstance(term, Size):
        fixed = definition.dims()
        if term.dim in fixed:
            return fixed[term.dim]
        for spec in definition.inputs():
            x = arrays.get(spec.name)
            if x is not None and term.dim in spec.shape:
                axis = spec.shape.index(term.dim)
                size = x.shape[axis]
                return backend.axis_size(x, axis) if size is None else int(size)
        return None
    return term


def _rows_where(values: Any, rank: int, xp: Any) -> Any:
    """Whether each row (the first ``rank`` axes) of ``values`` has an entry > 0."""
    positive = values > 0
    if xp is np:
        return np.any(positive, axis=tuple(range(rank, values.ndim)))
    positive = xp.astype(positive, xp.int32)
    for _ in range(len(positive.shape) - rank):
        positive = xp.max(positive, axis=-1)
    return positive > 0


def _check_relation_on_host(definition: Any, relation: Relation, host: dict[str, np.ndarray],
                            checked: dict[str, Array]) -> None:
    """Raise if ``relation`` fails on a row of a host-checked batch (the inputs already
    passed their domains)."""
    arrays: dict[str, Any] = {**checked, **host}
    left = _operand(definition, relation.left, arrays, None)
    right = _operand(definition, relation.right, arrays, None)
    if left is None or right is None or (relation.where is not None
                                         and arrays.get(relation.where) is None):
        return  # an omitted optional input: nothing to relate
    holds = np.asarray(relation.compare(left, right))
    if relation.where is not None:
        holds = holds | ~_rows_where(host[relation.where], holds.ndim, np)
    if bool(np.all(holds)):
        return
    raise _relation_error(definition.name, relation, left, right, holds)


def _relation_error(owner: str, relation: Relation, left: Any, right: Any,
                    holds: np.ndarray) -> ValueError:
    rows = np.flatnonzero(~holds.reshape(-1)) if holds.ndim else np.array([], dtype=int)
    received = []
    for term, value in ((relation.left, left), (relation.right, right)):
        if isinstance(term, Size):
            received.append(f"{term.dim} width {value}")
        elif isinstance(term, str):
            value = np.asarray(value)
            shown = value.reshape(-1)[rows] if value.ndim and rows.size else value
            received.append(f"{term}={preview(shown)}")
    where = f" at rows {preview(rows)}" if rows.size else ""
    return ValueError(
        f"{owner}: {relation.describe()} fails{where}: received {', '.join(received)}. "
        f"Expected {relation.describe()}. Fix: {relation.fix or 'pass consistent inputs'}."
    )


def _relations_in_graph(definition: Any, backend: Any, batch: CheckedBatch, xp: Any,
                        ) -> Array | None:
    """``batch.valid`` and every declared relation, computed in the graph (a static
    relation, between sizes and constants, raises now: shapes are known at trace time)."""
    valid = batch.valid
    arrays = batch.inputs
    for relation in definition.relations():
        left = _operand(definition, relation.left, arrays, backend)
        right = _operand(definition, relation.right, arrays, backend)
        if left is None or right is None or (relation.where is not None
                                             and arrays.get(relation.where) is None):
            continue
        holds = relation.compare(*_comparable(left, right, xp))
        if isinstance(holds, bool | np.bool_):
            if not holds:
                raise _relation_error(definition.name, relation, left, right,
                                      np.asarray(False))
            continue
        if relation.where is not None:
            holds = holds | ~_rows_where(arrays[relation.where], len(holds.shape), xp)
        if batch.empty is not False:  # the padded row of a batch empty at run time
            holds = holds | batch.empty
        if _check_mode._mode == "raise":
            backend.assert_all(holds, _relation_message(definition.name, relation),
                               left if hasattr(left, "shape") else right)
        ok = xp.all(holds)
        valid = ok if valid is None else valid & ok
    return valid


def _comparable(left: Any, right: Any, xp: Any) -> tuple[Any, Any]:
    """Two operands of a relation in one dtype, the wider (TensorFlow compares only equal
    dtypes; data inputs may come as float64 beside float32 ones)."""
    if not (hasattr(left, "dtype") and hasattr(right, "dtype")) or left.dtype == right.dtype:
        return left, right

    def bits(x: Any) -> int:
        return xp.finfo(x.dtype).bits if xp.isdtype(x.dtype, "real floating") else 0

    dtype = left.dtype if bits(left) >= bits(right) else right.dtype
    return xp.astype(left, dtype), xp.astype(right, dtype)


def _relation_message(owner: str, relation: Relation) -> str:
    """The error of a relation that fails inside a traced step (``"raise"`` mode)."""
    return (f"{owner}: {relation.describe()} fails on a row (checked inside a traced or "
            f"compiled step); expected {relation.describe()}. Fix: "
            f"{relation.fix or 'pass consistent inputs'}.")


def _cut_or_pad(x: Array, axis: int, target: Any, rows: int, kind: str, backend: Any,
                xp: Any) -> Array:
    """``x`` cut to ``target`` entries along ``axis``, after ``rows`` neutral entries are
    appended (1 in scores and data, 0 in labels and indices: finite math, a valid row)."""
    shape = tuple(rows if a == axis else backend.axis_size(x, a) for a in range(len(x.shape)))
    fill = xp.zeros(shape, dtype=x.dtype)
    if kind in ("score", "data", "relevance") and not xp.isdtype(x.dtype, "bool"):
        fill = fill + 1
    cut = (slice(None),) * axis + (slice(None, target),)
    return xp.concat([x, fill], axis=axis)[cut]


def _size_message(owner: str, dim: str, names: tuple[str, ...], fixed: dict[str, int]) -> str:
    """The error of run-time sizes that differ (``"raise"`` mode)."""
    want = f"{dim} = {fixed[dim]}" if dim in fixed else "one size"
    return (f"{owner}: {dim} sizes of {', '.join(names)} differ (checked inside a traced "
            f"step); expected {want}. Fix: pass the inputs of the same examples"
            + (f" (this loss was built with {dim}={fixed[dim]})." if dim in fixed else "."))


def _as_index(x: Array, backend: Any, xp: Any) -> Array:
    """``x`` in the backend's index dtype (int64; int32 on JAX without x64), cast only if
    needed: small and unsigned integer dtypes lack gathers, ranges or scatters on some
    backends (torch index_select takes int32/int64 only, TF has no uint8 range)."""
    dtype = backend.index_dtype
    return x if x.dtype == dtype else xp.astype(x, dtype)


def _values_ok(spec: Any, x: Array, spaces: dict[str, int | None], xp: Any) -> Array | None:
    """Elementwise in-graph value check of one input (``None``: nothing to check)."""
    if spec.kind in ("label", "partial_label"):
        if xp.isdtype(x.dtype, "bool"):
            return None  # every bool is a binary label
        ok = (x == 0) | (x == 1)
        if spec.kind == "partial_label" and xp.isdtype(x.dtype, "real floating"):
            ok = ok | (x != x)  # NaN: a missing label
        return ok
    if spec.kind == "index":
        size = spaces[spec.keys]
        if size is None or size > xp.iinfo(x.dtype).max:  # no value of x reaches size
            return x >= 0
        return (x >= 0) & (x < size)
    if spec.kind in ("score", "data"):
        return xp.isfinite(x)
    if spec.kind == "relevance":
        return xp.isfinite(xp.astype(x, xp.float32)) & (x >= 0)
    return None


def _graph_message(owner: str, spec: Any, spaces: dict[str, int | None]) -> str:
    """The error of a failed in-graph check (``"raise"`` mode); the backend appends the bad
    values where it can read them."""
    name, where = spec.name, "(checked inside a traced or compiled step)"
    if spec.domain is not None:
        described = declared_domain(spec, spaces).describe()
        return (f"{owner}: {name} must be {described} {where}; expected {described} in "
                f"every entry of {name}. Fix: pass {name} as {described}.")
    if spec.kind == "partial_label":
        return (f"{owner}: {name} must be 0, 1 or NaN (missing) {where}; expected binary "
                "labels in {0, 1}, NaN where a label is missing. Fix: map the positive class "
                f"to 1, every other class to 0 and unknown labels to NaN.")
    if spec.kind == "label":
        return (f"{owner}: {name} must be 0 or 1 {where}; expected binary labels in {{0, 1}}. "
                f"Fix: map the positive class to 1 and every other class to 0, e.g. {name} = "
                "(y == positive_class).")
    if spec.kind == "index":
        size = spaces[spec.keys]
        return (f"{owner}: {name} values are outside [0, {spec.keys} count={size}) {where}; "
                f"expected {spec.keys} positions. Fix: pass the index of each example and build "
                f"the loss with the number of {spec.keys}s (e.g. num_samples = len(dataset)).")
    what = "finite values >= 0" if spec.kind == "relevance" else "finite values"
    return (f"{owner}: {name} contain values that are not {what} {where}; expected {what}. "
            "Fix: check the model for NaN/inf (e.g. a too-large learning rate).")


def _check_values(owner: str, spec: Any, values: np.ndarray, spaces: dict[str, int | None],
                  ) -> None:
    """Raise on the first bad value of one input read on the host.

    Runs on every eager step, so each check is one or two vectorised passes over the batch;
    the offending values are gathered only once a check has failed.
    """
    name = spec.name
    if spec.kind == "label":
        if values.dtype == bool:
            return
        if values.dtype.kind in "iu":  # one reduction: negatives are huge in the unsigned view
            good = bool(_unsigned(values).max(initial=0) <= 1)
        else:
            good = bool(((values == 0) | (values == 1)).all())
        if not good:
            bad = values[(values != 0) & (values != 1)]
            raise ValueError(
                f"{owner}: {name} must be 0 or 1; received {preview(np.unique(bad))}. "
                "Expected binary labels in {0, 1}. Fix: map the positive class to 1 and every "
                f"other class to 0, e.g. {name} = (y == positive_class)."
            )
    elif spec.kind == "partial_label":
        if values.dtype == bool:
            return
        bad = values[(values != 0) & (values != 1) & ~np.isnan(values.astype(np.float64))]
        if bad.size:
            raise ValueError(
                f"{owner}: {name} must be 0, 1 or NaN (missing); received "
                f"{preview(np.unique(bad))}. Expected binary labels in {{0, 1}}, NaN where a "
                "label is missing. Fix: map the positive class to 1, every other class to 0 "
                f"and unknown labels to NaN, e.g. {name} = np.where(known, y == 1, np.nan)."
            )
    elif spec.kind in ("score", "data", "relevance"):
        bad = values[~np.isfinite(values)]  # indexing an all-false mask is nearly free
        if bad.size:
            raise ValueError(
                f"{owner}: {name} contain non-finite values {preview(bad)}; expected finite "
                "values. Fix: check the model for NaN/inf (e.g. a too-large learning rate)."
            )
        if spec.kind == "relevance" and values.size and values.min() < 0:
            raise ValueError(
                f"{owner}: {name} contain negative values {preview(values[values < 0])}; "
                "expected graded relevance >= 0. Fix: map unrated or irrelevant items to 0."
            )
    elif spec.kind == "index" and values.size:
        size = spaces[spec.keys]
        if size is None:
            good = values.dtype.kind == "u" or bool(values.min() >= 0)
        else:  # one reduction: negatives are huge in the unsigned view
            good = bool(_unsigned(values).max() < size)
        if not good:
            outside = values[(values < 0) | (values >= (np.inf if size is None else size))]
            raise ValueError(
                f"{owner}: {name} values {preview(np.unique(outside))} are outside "
                f"[0, {spec.keys} count={size}). Expected {spec.keys} positions. Fix: pass the "
                f"index of each example and build the loss with the number of {spec.keys}s "
                "(e.g. num_samples = len(dataset))."
            )


def _unsigned(values: np.ndarray) -> np.ndarray:
    """The same bytes as unsigned integers (no copy): -1 reads as the largest value."""
    return values if values.dtype.kind == "u" else values.view(_UNSIGNED[values.dtype.itemsize])


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _in_interval(definition: Any, spec: Any, values: np.ndarray) -> bool:
    """Whether ``values`` are finite and inside ``spec.interval``, from their min and max
    (NaN propagates through both, so this also proves them finite: the caller then skips the
    finiteness check). Finite values outside warn, once per definition."""
    low, high = spec.interval
    smallest, largest = float(values.min()), float(values.max())
    if low <= smallest and largest <= high:
        return True
    if not (np.isfinite(smallest) and np.isfinite(largest)):
        return False  # non-finite: _check_values raises
    _warned.add(definition)
    warnings.warn(
        f"{definition.name}: {spec.name} lie outside [{low:g}, {high:g}] (received min "
        f"{smallest:.4g}, max {largest:.4g}); expected probabilities in [{low:g}, {high:g}]. "
        f"Fix: pass sigmoid outputs, e.g. torch.sigmoid(logits), tf.sigmoid(logits) or "
        f"jax.nn.sigmoid(logits). Shown once per loss.",
        InputWarning, stacklevel=_caller_level(),
    )
    return True  # finite (checked above); the warning has been given


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside xrisk and the frameworks (the user's
    line), whatever adapter or module call chain led here."""
    import sys

    frame: Any = sys._getframe(1)  # a frame, or None past the outermost one
    level = 1
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.partition(".")[0] not in _LIBRARY_ROOTS:
            return level
        frame, level = frame.f_back, level + 1
    return 1


# Modules whose frames a warning skips to point at the user's call.
_LIBRARY_ROOTS = frozenset({"xrisk", "torch", "tensorflow", "keras", "jax", "jaxlib"})
