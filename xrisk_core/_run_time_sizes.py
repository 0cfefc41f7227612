"""Named dimensions whose size is known only when a step runs (TensorFlow ``None``
dimensions: Keras ``fit``, a ``tf.function`` traced with such an input signature).

Why the core meets them at all: Keras traces ``fit``'s step once with ``None`` for the batch
size (the last batch of an epoch may be smaller), so inside that trace no Python int exists
for it; the loss is traced once and must serve every batch. The core therefore asks the
backend for such a size through one documented hook, ``backend.axis_size`` (a run-time
scalar), and every other backend never has one. What is TensorFlow's own, making inputs of
run-time size agree (appending a neutral row, cutting to a size), is the backend's
``fit_axis`` hook; this module only decides, from the declarations, which size each
dimension must have and whether the batch is valid.
"""

from __future__ import annotations

from typing import Any

from . import _check_mode
from ._typing import Array

__all__ = ["has_run_time_sizes", "conform_run_time_sizes"]


def has_run_time_sizes(sizes: dict[str, dict[str, int | None]]) -> bool:
    """Whether a dimension of the batch has an input whose size is known only at run time
    (``sizes``: dimension -> input name -> static size or ``None``)."""
    return any(None in by_input.values() for by_input in sizes.values())


def conform_run_time_sizes(definition: Any, backend: Any, specs: dict[str, Any],
                           checked: dict[str, Array], sizes: dict[str, dict[str, int | None]],
                           valid: Array | None, empty: bool, xp: Any,
                           ) -> tuple[dict[str, Array], Array | None, Any]:
    """Check in the graph the dimensions whose size is known only at run time; return the
    inputs made consistent, ``valid`` and ``empty``.

    The sizes of each such dimension are compared in the graph: sizes that differ make
    ``valid`` false (NaN loss, no state write; in ``"raise"`` mode the assertion of
    :class:`xrisk.set_checks`). So that the loss's math never meets inconsistent or empty
    arrays (which no check could then catch: broadcasting, a remainder by 0), the inputs of
    unknown size are cut (after padding) to the size the dimension must have where it is
    known — the declared size of a fixed dimension, or the static size of another input —
    and then get that static size back; otherwise every input is cut to the smallest size,
    padded with one neutral row if that is 0 (``empty`` is then a boolean array, true for an
    empty batch: ``apply`` returns 0 and writes no state). Batches of consistent, non-empty
    sizes pass unchanged (a concatenation and a slice per input and dimension, values and
    gradients exact).
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
                checked[name] = backend.fit_axis(checked[name], axis, target, pad=rows,
                                                 fill=_neutral(specs[name].kind))
    for name, x in checked.items():  # dimensions of known size get their static size back
        shape = specs[name].shape if x is not None else ()
        if not empty and any(x.shape[a] is None and d in static for a, d in enumerate(shape)):
            checked[name] = xp.reshape(x, tuple(static[d] if d in static
                                                else backend.axis_size(x, a)
                                                for a, d in enumerate(shape)))
    if empty or run_time_empty is None:  # a static 0, or every size known somewhere
        return checked, valid, empty
    return checked, valid, run_time_empty


def _neutral(kind: str) -> int:
    """The value of a padded entry: 1 in scores, data and relevance, 0 in labels and indices
    (finite math, a valid row)."""
    return 1 if kind in ("score", "data", "relevance") else 0


def _size_message(owner: str, dim: str, names: tuple[str, ...], fixed: dict[str, int]) -> str:
    """The error of run-time sizes that differ (``"raise"`` mode)."""
    want = f"{dim} = {fixed[dim]}" if dim in fixed else "one size"
    return (f"{owner}: {dim} sizes of {', '.join(names)} differ (checked inside a traced "
            f"step); expected {want}. Fix: pass the inputs of the same examples"
            + (f" (this loss was built with {dim}={fixed[dim]})." if dim in fixed else "."))
