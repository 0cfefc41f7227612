"""Input checks shared by every loss, driven by the loss's declared inputs.

Shape and dtype checks are static and always run. Value checks (every input inside its
declared domain, :func:`xrisk._value_checks.declared_domain`: labels in {0, 1}, finite
scores, an index inside its key space, a count a whole number ...; and the definition's
relations between inputs, :mod:`xrisk._relation_checks`, e.g. ``num_relevant <
num_candidates``) raise on arrays whose values the host can read for free (eager CPU
arrays); on traced or device arrays they are computed in the graph instead, and a batch that
fails them gives a NaN loss and writes no state. Every check runs before any state is
touched: bad input never changes state.

What a failed *in-graph* check does is the global check mode of :mod:`xrisk._check_mode`
(:class:`xrisk.set_checks`: ``"nan"`` or ``"raise"``), read when a step is traced. Sizes
known only at run time (TensorFlow's ``None`` dimensions) are checked by
:mod:`xrisk._run_time_sizes`. The checks of scalar arguments are :mod:`xrisk._arguments`'.

What depends only on the definition and the batch's signature (shapes, dtypes, backend) is
worked out once and kept on the definition (:class:`_Plan`): a repeated eager step runs the
value checks its batch needs and little else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from . import _check_mode
from ._relation_checks import check_relations_on_host, relations_in_graph
from ._run_time_sizes import conform_run_time_sizes, has_run_time_sizes
from ._typing import Array
from ._value_checks import as_index, graph_message, holds_in_graph, host_check, warned

__all__ = ["CheckedBatch", "check_inputs", "missing_input"]


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
        :mod:`xrisk._run_time_sizes`).
    host : dict
        The numpy values of the inputs read on the host for their checks (eager CPU arrays:
        views, no copy); empty for traced or device arrays. Values a loss may use to take a
        cheaper path: equal bit for bit (the host ranking of
        :func:`xrisk._grouping.group_keys`) or to rounding (the compact pair layouts of
        :mod:`xrisk.losses._binary`, which read the labels).
    """

    inputs: dict[str, Array]
    valid: Array | None
    empty: Any
    host: dict[str, np.ndarray]


class _Plan(NamedTuple):
    """What the checks of one batch signature need, worked out once per definition.

    ``present``: (name, spec) of the inputs given, in declaration order; ``flat``: the
    inputs given as (N, 1) for a declared (N,); ``empty``: whether a free dimension is
    statically 0; ``indices``: the index inputs not yet in the backend's index dtype;
    ``host_checks``: per input, the value check of each numpy dtype its host values came in
    (:func:`xrisk._value_checks.host_check`, made at the first host read); ``relations``:
    the definition's.
    """

    present: tuple[tuple[str, Any], ...]
    flat: frozenset[str]
    empty: bool
    indices: frozenset[str]
    host_checks: dict[str, dict[np.dtype, Callable[[np.ndarray, bool], None]]]
    relations: tuple[Any, ...]


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
        ``relations()``. In the ``"raise"`` mode of :class:`xrisk.set_checks`, traced values
        that fail raise the framework's assertion error.
    TypeError
        Scores of a non-floating dtype, an index of a non-integer dtype.

    Warns
    -----
    InputWarning
        Once per loss definition, when a host-checked input lies outside the interval its
        declaration gives (e.g. logits passed where probabilities in [0, 1] are expected).
    """
    # The static checks depend on the inputs' shapes and dtypes only: a signature that passed
    # them before is not checked again (an eager step meets the same one batch after batch).
    signature = _signature(backend, bound)
    plans = definition.__dict__.get("_check_plans")
    if plans is None or len(plans) > 64:
        plans = {}
        object.__setattr__(definition, "_check_plans", plans)  # definitions are frozen
    plan = plans.get(signature) if signature is not None else None
    if plan is not None:
        checked = {name: x if x is None or name not in plan.flat else xp.reshape(x, (-1,))
                   for name, x in bound.items()} if plan.flat else dict(bound)
        inspectable = backend.inspectable
        for name, _ in plan.present:
            if not inspectable(checked[name]):
                return _check_in_graph(definition, backend, plan, checked, {}, xp)
        return _check_on_host(definition, backend, plan, checked, xp)
    checked, sizes, empty = _static_checks(definition, bound, xp)
    present = tuple((spec.name, spec) for spec in definition.inputs()
                    if checked[spec.name] is not None)
    plan = _Plan(present,
                 frozenset(name for name, _ in present if checked[name] is not bound[name]),
                 empty,
                 frozenset(name for name, spec in present if spec.kind == "index"
                           and checked[name].dtype != backend.index_dtype),
                 {name: {} for name, _ in present}, definition.relations())
    if signature is not None:
        plans[signature] = plan
    if all(backend.inspectable(checked[name]) for name, _ in present):
        return _check_on_host(definition, backend, plan, checked, xp)
    return _check_in_graph(definition, backend, plan, checked, sizes, xp)


def _signature(backend: Any, bound: dict[str, Array]) -> tuple[Any, ...] | None:
    """The shapes and dtypes of a batch, hashable; ``None`` if a size is unknown (run time)."""
    out: list[Any] = [backend.name]
    append = out.append
    for x in bound.values():
        if x is None:
            append(None)
            continue
        shape = tuple(x.shape)
        if None in shape:
            return None
        append((shape, x.dtype))
    return tuple(out)


# --------------------------------------------------------------------------- static checks

def _static_checks(definition: Any, bound: dict[str, Array], xp: Any,
                   ) -> tuple[dict[str, Array], dict[str, dict[str, int | None]], bool]:
    """Ranks, dtypes and the sizes of every named dimension: the inputs with their declared
    ranks, the sizes by dimension and input (``None``: known only at run time) and whether a
    free dimension is 0."""
    owner, fixed = definition.name, definition.dims()
    checked: dict[str, Array] = {}
    sizes: dict[str, dict[str, int | None]] = {}
    for spec in definition.inputs():
        x = bound[spec.name]
        if x is None:
            checked[spec.name] = None
            continue
        x = _match_rank(owner, spec, x, xp)
        _check_dtype(owner, spec, x, xp)
        for dim, size in zip(spec.shape, tuple(x.shape)):
            sizes.setdefault(dim, {})[spec.name] = None if size is None else int(size)
        checked[spec.name] = x
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
    return checked, sizes, empty


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


# --------------------------------------------------------------------------- value checks

def _check_on_host(definition: Any, backend: Any, plan: _Plan, checked: dict[str, Array],
                   xp: Any) -> CheckedBatch:
    """The value checks of a batch the host reads for free: raise on a bad value."""
    may_warn = not warned(definition)
    host = {}
    to_numpy, host_checks, indices = backend.to_numpy, plan.host_checks, plan.indices
    for name, spec in plan.present:
        x = checked[name]
        host[name] = values = to_numpy(x)  # one host read per input
        checks = host_checks[name]
        check = checks.get(values.dtype)
        if check is None:
            check = checks[values.dtype] = host_check(definition, spec, values.dtype,
                                                      definition.key_spaces())
        check(values, may_warn)
        if indices and name in indices:  # exact values were checked: the cast is safe
            checked[name] = xp.astype(x, backend.index_dtype)
    if plan.relations:
        check_relations_on_host(definition, plan.relations, host, checked)
    return CheckedBatch(checked, None, plan.empty, host)


def _check_in_graph(definition: Any, backend: Any, plan: _Plan, checked: dict[str, Array],
                    sizes: dict[str, dict[str, int | None]], xp: Any) -> CheckedBatch:
    """The value checks of traced or device arrays, computed in the graph: ``valid``."""
    owner, spaces = definition.name, definition.key_spaces()
    valid = None
    for name, spec in plan.present:
        x = checked[name]
        if spec.kind == "index":
            # Cast first: every integer dtype maps to the backend's signed index dtype, and a
            # value the cast wraps (uint64 >= 2**63, uint32 >= 2**31 on 32-bit JAX) turns
            # negative, so it still fails the check below.
            x = as_index(x, backend, xp)
        ok = holds_in_graph(spec, x, spaces, xp)
        if ok is None:
            checked[name] = x
            continue
        if _check_mode._mode == "raise":
            backend.assert_all(ok, graph_message(owner, spec, spaces), x)
        if spec.kind == "index":  # gathers stay inside the table on every backend
            x = xp.where(ok, x, xp.zeros_like(x))
        checked[name] = x
        ok = xp.all(ok)
        valid = ok if valid is None else valid & ok
    empty: Any = plan.empty
    if has_run_time_sizes(sizes):
        checked, valid, empty = conform_run_time_sizes(definition, backend, dict(plan.present),
                                                       checked, sizes, valid, empty, xp)
    if plan.relations and empty is not True:
        valid = relations_in_graph(definition, plan.relations, backend, checked, valid, empty,
                                   xp)
    return CheckedBatch(checked, valid, empty, {})
