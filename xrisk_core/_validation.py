"""Input checks shared by every loss, driven by the loss's declared inputs.

Shape and dtype checks are static and always run. Value checks (labels in {0, 1}, finite
scores, index inside its key space) raise on arrays whose values the host can read for free
(eager CPU arrays); on traced or device arrays they are computed in the graph instead, and a
batch that fails them gives a NaN loss and writes no state. Every check runs before any state
is touched: bad input never changes state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._inputs import preview

__all__ = [
    "check_inputs", "missing_input", "check_count", "check_positive", "check_fraction",
    "check_choice",
]

Array = Any


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
        return xp.reshape(x, (shape[0],))
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


def check_inputs(definition: Any, backend: Any, bound: dict[str, Array], *, xp: Any,
                 ) -> tuple[dict[str, Array], Array | None, bool]:
    """Validate one batch against ``definition.inputs()``.

    Returns ``(inputs, valid, empty)``: the inputs with their declared ranks (index inputs made
    safe to gather with), ``valid`` — ``None`` when the values were checked on the host (bad
    values raise), else a bool array computed in the graph — and whether a free dimension is 0.

    Raises
    ------
    ValueError
        A wrong rank, sizes of one named dimension that differ, and, on arrays whose values can
        be read for free (:func:`inspectable`), labels outside {0, 1}, non-finite scores,
        negative relevance or an index outside its key space.
    TypeError
        Scores of a non-floating dtype, an index of a non-integer dtype.
    """
    owner = definition.name
    fixed = definition.dims()
    checked: dict[str, Array] = {}
    sizes: dict[str, dict[str, int]] = {}
    specs = {spec.name: spec for spec in definition.inputs()}
    for name, spec in specs.items():
        x = bound[name]
        if x is None:
            checked[name] = None
            continue
        x = _match_rank(owner, spec, x, xp)
        _check_dtype(owner, spec, x, xp)
        for dim, size in zip(spec.shape, tuple(x.shape)):
            sizes.setdefault(dim, {})[name] = int(size)
        checked[name] = x
    for dim, by_input in sizes.items():
        expected = {fixed[dim]} if dim in fixed else set(by_input.values())
        if len(set(by_input.values()) | expected) > 1:
            want = f"{dim} = {fixed[dim]}" if dim in fixed else f"one {dim} size for " + \
                ", ".join(by_input)
            raise ValueError(
                f"{owner}: {dim} sizes differ: {by_input}; expected {want}. Fix: pass the "
                "inputs of the same examples" + (f" (this loss was built with {dim}="
                                                  f"{fixed[dim]})." if dim in fixed else ".")
            )
    empty = any(0 in by_input.values() for dim, by_input in sizes.items() if dim not in fixed)
    present = [x for x in checked.values() if x is not None]
    spaces = definition.key_spaces()
    if all(backend.inspectable(x) for x in present):
        for name, x in checked.items():
            if x is not None:
                _check_values(owner, specs[name], backend.to_numpy(x), spaces)
        return checked, None, empty
    valid = None
    for name, x in checked.items():
        if x is None:
            continue
        ok = _values_ok(specs[name], x, spaces, xp)
        if ok is None:
            continue
        if specs[name].kind == "index":  # gathers stay inside the table on every backend
            checked[name] = xp.where(ok, x, xp.zeros_like(x))
        ok = xp.all(ok)
        valid = ok if valid is None else valid & ok
    return checked, valid, empty


def _values_ok(spec: Any, x: Array, spaces: dict[str, int | None], xp: Any) -> Array | None:
    """Elementwise in-graph value check of one input (``None``: nothing to check)."""
    if spec.kind == "label":
        return (x == 0) | (x == 1)
    if spec.kind == "index":
        size = spaces[spec.keys]
        return (x >= 0) if size is None else (x >= 0) & (x < size)
    if spec.kind in ("score", "data"):
        return xp.isfinite(x)
    if spec.kind == "relevance":
        return xp.isfinite(xp.astype(x, xp.float32)) & (x >= 0)
    return None


def _check_values(owner: str, spec: Any, values: np.ndarray, spaces: dict[str, int | None],
                  ) -> None:
    """Raise on the first bad value of one input read on the host."""
    name = spec.name
    if spec.kind == "label":
        bad = values[(values != 0) & (values != 1)]
        if bad.size:
            raise ValueError(
                f"{owner}: {name} must be 0 or 1; received {preview(np.unique(bad))}. Expected "
                "binary labels in {0, 1}. Fix: map the positive class to 1 and every other class "
                f"to 0, e.g. {name} = (y == positive_class)."
            )
    elif spec.kind in ("score", "data", "relevance"):
        bad = values[~np.isfinite(values)]
        if bad.size:
            raise ValueError(
                f"{owner}: {name} contain non-finite values {preview(bad)}; expected finite "
                "values. Fix: check the model for NaN/inf (e.g. a too-large learning rate)."
            )
        if spec.kind == "relevance" and np.any(values < 0):
            raise ValueError(
                f"{owner}: {name} contain negative values {preview(values[values < 0])}; "
                "expected graded relevance >= 0. Fix: map unrated or irrelevant items to 0."
            )
    elif spec.kind == "index":
        size = spaces[spec.keys]
        outside = values[(values < 0) | (values >= (np.inf if size is None else size))]
        if outside.size:
            raise ValueError(
                f"{owner}: {name} values {preview(np.unique(outside))} are outside "
                f"[0, {spec.keys} count={size}). Expected {spec.keys} positions. Fix: pass the "
                f"index of each example and build the loss with the number of {spec.keys}s "
                "(e.g. num_samples = len(dataset))."
            )


def _real(value: object) -> float | None:
    """``value`` as a float if it is a finite real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        return None
    number = float(value)
    return number if np.isfinite(number) else None


def check_count(owner: str, name: str, value: object, *, minimum: int = 1) -> int:
    """Return ``value`` as int if it is an integer >= ``minimum``; else raise.

    Raises
    ------
    TypeError
        ``value`` is not an integer (bool and float are rejected).
    ValueError
        ``value`` is smaller than ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(
            f"{owner}: {name}={value!r} (type {type(value).__name__}); expected an integer >= "
            f"{minimum}. Fix: pass a whole number, e.g. {name}=int({name})."
        )
    if value < minimum:
        raise ValueError(
            f"{owner}: {name}={value!r}; expected an integer >= {minimum}. "
            f"Fix: pass {name} >= {minimum}."
        )
    return int(value)


def check_positive(owner: str, name: str, value: object, *, allow_zero: bool = False) -> float:
    """Return ``value`` as float if it is a finite number > 0 (or >= 0); else ValueError."""
    number = _real(value)
    if number is not None and (number > 0 or (allow_zero and number == 0)):
        return number
    bound = ">= 0" if allow_zero else "> 0"
    raise ValueError(f"{owner}: {name}={value!r}; expected a finite number {bound}.")


def check_fraction(owner: str, name: str, value: object, *, closed_low: bool = False) -> float:
    """Return ``value`` as float if it lies in (0, 1] (or [0, 1]); else ValueError."""
    number = _real(value)
    if number is not None and (0 < number <= 1 or (closed_low and number == 0)):
        return number
    interval = "[0, 1]" if closed_low else "(0, 1]"
    raise ValueError(f"{owner}: {name}={value!r}; expected a number in {interval}.")


def check_choice(owner: str, name: str, value: object, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``; else ValueError listing them."""
    if isinstance(value, str) and value in choices:
        return value
    raise ValueError(f"{owner}: {name}={value!r}; expected one of {choices}.")
