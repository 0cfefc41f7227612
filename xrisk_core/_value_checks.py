"""Value checks of one input against its domain: on the host (raise) and in the graph.

Every declared input has a domain, :func:`declared_domain`: its own ``domain``, else its
kind's (finite scores and data, labels in {0, 1}, NaN too for partial labels, relevance >= 0,
an index inside its key space). :func:`host_check` raises on the first bad value of a
batch the host can read for free; :func:`holds_in_graph` computes the same check as a boolean
array where the values are traced or live on a device (a failed check then gives a NaN loss,
see :mod:`xrisk._check_mode`). :mod:`xrisk._validation` runs both on every batch.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ._check_mode import InputWarning
from ._domain import BINARY, BINARY_OR_MISSING, FINITE, NONNEGATIVE, Domain, index_domain
from ._inputs import preview
from ._typing import Array

__all__ = ["declared_domain", "host_check", "warned", "holds_in_graph", "graph_message",
           "as_index", "calls_through"]


def declared_domain(spec: Any, spaces: dict[str, int | None]) -> Domain:
    """The values input ``spec`` may take: its declared ``domain``, else its kind's (finite
    reals for scores and data, {0, 1} for labels, NaN too for partial labels, finite reals
    >= 0 for relevance, integers in [0, size of its key space) for an index).

    The validator checks the kind's domain with the kind's fast paths and a declared domain
    on top of it (a declared domain narrows the kind's); tests read this to draw values
    outside it.

    Examples
    --------
    >>> import xrisk
    >>> spec = {s.name: s for s in xrisk.APLoss(10).inputs()}["index"]
    >>> declared_domain(spec, {"sample": 10}).admits([0, 9]), declared_domain(spec,
    ...     {"sample": 10}).admits([10])
    (True, False)
    """
    if spec.domain is not None:
        return spec.domain
    if spec.kind == "index":
        return index_domain(spaces.get(spec.keys))
    return _KIND_DOMAINS[spec.kind]


_KIND_DOMAINS = {"score": FINITE, "data": FINITE, "label": BINARY,
                 "partial_label": BINARY_OR_MISSING, "relevance": NONNEGATIVE}


# --------------------------------------------------------------------------- on the host

def host_check(definition: Any, spec: Any, dtype: np.dtype, spaces: dict[str, int | None],
               ) -> Callable[[np.ndarray, bool], None]:
    """The check of input ``spec`` read on the host as numpy values of ``dtype``:
    ``check(values, may_warn)`` raises on the first value outside the input's domain.

    Made once per definition and batch signature (:mod:`xrisk._validation` keeps it), so an
    eager step runs only the vectorised passes its values need: one reduction proves a batch
    of labels or indices valid, the offending values are gathered only once it has failed
    (by :func:`_check_kind`, which names them). An input declaring an ``interval``
    (probabilities in [0, 1]) is checked from its min and max, which also prove it finite;
    while ``may_warn`` (the definition has not warned yet), finite values outside the
    interval warn once (:class:`xrisk.InputWarning`).
    """
    owner, interval, domain = definition.name, getattr(spec, "interval", None), spec.domain
    valid = _quick_proof(spec, dtype, spaces)
    inside = _inside_interval(interval, dtype)

    if domain is not None and spec.kind in ("score", "data") and not domain.allow_nan:
        # The declared domain's own check proves its values finite (a min and a max, which
        # NaN and inf reach), so it is run alone; on failure the kind's check raises first,
        # as it would have (a non-finite value), else the domain's error.
        def check_domain(values: np.ndarray, may_warn: bool) -> None:
            if not domain.admits(values):
                _check_kind(owner, spec, values, spaces)
                raise _domain_error(owner, spec, values)

        return check_domain

    def check(values: np.ndarray, may_warn: bool) -> None:
        if inside is not None and inside(values):
            pass  # finite and inside the interval: the kind's check passes, no warning is due
        elif not (may_warn and interval is not None and values.size
                  and _in_interval(definition, spec, values)) and not valid(values):
            _check_kind(owner, spec, values, spaces)  # raises, naming the bad values
        if domain is not None and not domain.admits(values):
            raise _domain_error(owner, spec, values)

    return check


def _inside_interval(interval: tuple[float, float] | None, dtype: np.dtype,
                     ) -> Callable[[np.ndarray], bool] | None:
    """One reduction that proves floats inside ``[0, high]`` (probabilities), or ``None``.

    Read as unsigned integers of the same width, floats >= +0 keep their order, while a set
    sign bit (negatives, -0), NaN and inf read larger than ``high``'s bits: the largest of
    the unsigned views is at most ``high``'s exactly when every value is a finite number in
    [+0, high]. False (a -0, a value outside, NaN): the exact check of :func:`_in_interval`
    runs, so the outcome is always the exact one.
    """
    if interval is None or interval[0] != 0 or not interval[1] > 0 or dtype.kind != "f" \
            or dtype.itemsize not in _UNSIGNED:
        return None
    unsigned = _UNSIGNED[dtype.itemsize]
    high = np.asarray(interval[1], dtype=dtype).view(unsigned)[()]
    return lambda values: bool(values.view(unsigned).max(initial=0) <= high)


def _quick_proof(spec: Any, dtype: np.dtype, spaces: dict[str, int | None],
                 ) -> Callable[[np.ndarray], bool]:
    """A test of the values of ``spec`` (of numpy ``dtype``) that is true only if they lie
    in the domain of the input's kind: one vectorised pass, no gathering (false: run
    :func:`_check_kind`, which raises naming the bad values)."""
    kind = spec.kind
    if dtype.kind == "b" and kind in ("label", "partial_label"):
        return _always  # every bool is a binary label
    if kind == "label":
        if dtype.kind in "iu":  # one reduction: negatives are huge in the unsigned view
            unsigned = _UNSIGNED[dtype.itemsize]
            return lambda values: bool(values.view(unsigned).max(initial=0) <= 1)
        return lambda values: bool(((values == 0) | (values == 1)).all())
    if kind in ("score", "data"):
        if dtype in _DOT_PROOF:
            # One BLAS reduction, half the cost of isfinite + all: a NaN or an infinity makes
            # the sum of squares non-finite, so a finite sum proves every value finite (a sum
            # that overflows from finite values only sends the batch to the exact check).
            return lambda values: math.isfinite(np.vdot(values, values))
        return lambda values: bool(np.isfinite(values).all())
    if kind == "index":
        size = spaces[spec.keys]
        if size is None:
            return lambda values: (dtype.kind == "u" or not values.size
                                   or bool(values.min() >= 0))
        unsigned = _UNSIGNED[dtype.itemsize]  # one reduction, as for labels
        return lambda values: not values.size or bool(values.view(unsigned).max() < size)
    if kind == "relevance":  # finite and >= +0: below +inf in the unsigned view (-0 fails)
        unsigned = _UNSIGNED[dtype.itemsize]
        bound = (np.asarray(np.inf, dtype).view(unsigned)[()] if dtype.kind == "f"
                 else 2 ** (8 * dtype.itemsize - 1) if dtype.kind == "i" else None)
        if bound is not None:
            return lambda values: bool(values.view(unsigned).max(initial=0) < bound)
    return _never  # partial labels, other dtypes: _check_kind checks every batch


def _always(values: np.ndarray) -> bool:
    return True


def _never(values: np.ndarray) -> bool:
    return False


def _check_kind(owner: str, spec: Any, values: np.ndarray, spaces: dict[str, int | None],
                ) -> None:
    """Raise on the first value outside the domain of the input's kind."""
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

#: Float dtypes whose squares overflow only for values beyond 1e19 (float16's beyond 256:
#: its batches keep the elementwise proof).
_DOT_PROOF = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _domain_error(owner: str, spec: Any, values: np.ndarray) -> ValueError:
    """The error of host values outside ``spec.domain`` (the kind's checks passed)."""
    domain = spec.domain
    bad = values[domain.violations(values)]
    return ValueError(
        f"{owner}: {spec.name} must be {domain.describe()}; received {preview(np.unique(bad))}"
        f". Expected {domain.describe()} in every entry of {spec.name}. Fix: pass {spec.name} "
        f"as {domain.describe()}."
    )


# Loss definitions that already warned about inputs outside their declared interval.
_warned: weakref.WeakSet = weakref.WeakSet()


def warned(definition: Any) -> bool:
    """Whether ``definition`` already warned about inputs outside their declared interval."""
    return definition in _warned

#: Frames from :func:`_in_interval` (which warns) up to :func:`xrisk._apply.apply` (or
#: ``check_batch``): _in_interval, the check of :func:`host_check`,
#: ``_validation._check_on_host``, check_inputs, apply. ``tests/test_hardening_inputs.py``
#: checks that the warning names the caller's file, so a change of this chain fails there.
_FRAMES_TO_THE_ENTRY = 5


def calls_through(definition: Any, frames: int) -> None:
    """Declare that ``definition`` is applied by an adapter's entry point that adds
    ``frames`` frames between the user's line and :func:`xrisk._apply.apply` (e.g. 3 for a
    torch module: ``Module.__call__``, its ``_call_impl`` and ``forward``; default 1, the
    method ``LossDefinition.apply``).

    A warning about the batch (:class:`xrisk.InputWarning`) then names the user's line, at a
    stack level fixed by the known call depth instead of a walk over the stack. An adapter
    declares it once, when it builds its definition.
    """
    object.__setattr__(definition, "_entry_frames", frames)  # definitions are frozen


def _in_interval(definition: Any, spec: Any, values: np.ndarray) -> bool:
    """Whether ``values`` are finite and inside ``spec.interval``, from their min and max
    (NaN propagates through both, so this also proves them finite: the caller then skips the
    finiteness check). Finite values outside warn, once per definition."""
    low, high = spec.interval
    smallest, largest = float(values.min()), float(values.max())
    if low <= smallest and largest <= high:
        return True
    if not (np.isfinite(smallest) and np.isfinite(largest)):
        return False  # non-finite: the kind's check raises
    _warned.add(definition)
    warnings.warn(
        f"{definition.name}: {spec.name} lie outside [{low:g}, {high:g}] (received min "
        f"{smallest:.4g}, max {largest:.4g}); expected probabilities in [{low:g}, {high:g}]. "
        f"Fix: pass sigmoid outputs, e.g. torch.sigmoid(logits), tf.sigmoid(logits) or "
        f"jax.nn.sigmoid(logits). Shown once per loss.",
        InputWarning,
        # the user's line: past the checks, the core's entry and the caller's entry point
        stacklevel=_FRAMES_TO_THE_ENTRY + definition.__dict__.get("_entry_frames", 1) + 1,
    )
    return True  # finite (checked above); the warning has been given


# --------------------------------------------------------------------------- in the graph

def as_index(x: Array, backend: Any, xp: Any) -> Array:
    """``x`` in the backend's index dtype (int64; int32 on JAX without x64), cast only if
    needed: small and unsigned integer dtypes lack gathers, ranges or scatters on some
    backends (torch index_select takes int32/int64 only, TF has no uint8 range)."""
    dtype = backend.index_dtype
    return x if x.dtype == dtype else xp.astype(x, dtype)


def holds_in_graph(spec: Any, x: Array, spaces: dict[str, int | None], xp: Any,
                   ) -> Array | None:
    """Elementwise in-graph check of one input against its domain (``None``: nothing to
    check). An index is expected in the backend's index dtype (:func:`as_index`)."""
    ok = _kind_holds(spec, x, spaces, xp)
    if spec.domain is not None:  # the declared domain narrows the kind's
        narrowed = spec.domain.holds(x, xp)
        ok = narrowed if ok is None else ok & narrowed
    return ok


def _kind_holds(spec: Any, x: Array, spaces: dict[str, int | None], xp: Any) -> Array | None:
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


def graph_message(owner: str, spec: Any, spaces: dict[str, int | None]) -> str:
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
