"""Checks of the relations a definition declares between its inputs.

A :class:`xrisk._domain.Relation` compares two operands row by row: an input's array, a
dimension's size or a number (e.g. ``num_relevant <= width of candidates``), optionally only
where another input has an entry > 0. :func:`check_relations_on_host` raises on the first
failing row of a batch the host read; :func:`relations_in_graph` computes them as a boolean
array where the values are traced (a failed relation then gives a NaN loss, see
:mod:`xrisk._check_mode`). :mod:`xrisk._validation` runs them after the value checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _check_mode
from ._domain import Relation, Size
from ._inputs import preview
from ._typing import Array

__all__ = ["check_relations_on_host", "relations_in_graph"]


def check_relations_on_host(definition: Any, relations: tuple[Relation, ...],
                            host: dict[str, np.ndarray], checked: dict[str, Array]) -> None:
    """Raise if one of ``relations`` fails on a row of a host-checked batch (the inputs
    already passed their domains)."""
    arrays: dict[str, Any] = {**checked, **host}
    for relation in relations:
        left = _operand(definition, relation.left, arrays, None)
        right = _operand(definition, relation.right, arrays, None)
        if left is None or right is None or (relation.where is not None
                                             and arrays.get(relation.where) is None):
            continue  # an omitted optional input: nothing to relate
        holds = np.asarray(relation.compare(left, right))
        if relation.where is not None:
            holds = holds | ~_rows_where(host[relation.where], holds.ndim, np)
        if not bool(np.all(holds)):
            raise _relation_error(definition.name, relation, left, right, holds)


def relations_in_graph(definition: Any, relations: tuple[Relation, ...], backend: Any,
                       arrays: dict[str, Array], valid: Array | None, empty: Any, xp: Any,
                       ) -> Array | None:
    """``valid`` and every relation of ``relations``, computed in the graph (a static
    relation, between sizes and constants, raises now: shapes are known at trace time).
    ``empty`` (an array where the batch may be empty at run time) lets the padded row of an
    empty batch pass."""
    for relation in relations:
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
        if empty is not False:  # the padded row of a batch empty at run time
            holds = holds | empty
        if _check_mode._mode == "raise":
            backend.assert_all(holds, _relation_message(definition.name, relation),
                               left if hasattr(left, "shape") else right)
        ok = xp.all(holds)
        valid = ok if valid is None else valid & ok
    return valid


def _operand(definition: Any, term: Any, arrays: dict[str, Array], backend: Any) -> Any:
    """The value of one operand of a relation: an input's array, a dimension's size (an int,
    or a 0-d array where known only at run time, from ``backend.axis_size``) or a number;
    ``None`` for an omitted optional input."""
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
    """The error of a relation that fails inside a traced or compiled step (``"raise"``
    mode)."""
    return (f"{owner}: {relation.describe()} fails on a row (checked inside a traced or "
            f"compiled step); expected {relation.describe()}. Fix: "
            f"{relation.fix or 'pass consistent inputs'}.")
