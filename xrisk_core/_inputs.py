"""Conversion of framework arrays to numpy and the label checks shared by the core
(metrics, samplers, data sets, loss validation).

Nothing here imports a framework: an array's library is read from ``type(x).__module__``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .backends import backend_of

__all__ = ["to_numpy", "preview", "binary_labels", "class_labels"]


def preview(values: Any, limit: int = 5) -> str:
    """Short text rendering of the first ``limit`` values, for error messages."""
    flat = np.asarray(values).ravel()
    shown = ", ".join(repr(v.item()) for v in flat[:limit])
    more = f", ... ({flat.size} in all)" if flat.size > limit else ""
    return f"[{shown}{more}]"


def to_numpy(x: Any) -> np.ndarray:
    """Return ``x`` (numpy, torch, TensorFlow, JAX array or nested list) as a numpy array.

    Arrays go through their backend's ``to_numpy`` (torch: detached and moved to the CPU);
    anything else through ``numpy.asarray``. No framework is imported: a tensor of a
    framework exists only if the user imported it.
    """
    try:
        backend = backend_of(x)
    except TypeError:  # lists, scalars, objects with __array__
        return np.asarray(x)
    return np.asarray(backend.to_numpy(x))


def _check_finite_integers(owner: str, name: str, values: np.ndarray) -> None:
    if values.dtype == bool:
        return
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise TypeError(
            f"{owner}: {name} has dtype {values.dtype}; expected integer, bool or float class "
            f"labels. Fix: convert them, e.g. np.asarray({name}, dtype=np.int64)."
        )
    if np.issubdtype(values.dtype, np.floating):
        nan = np.isnan(values)
        if nan.any():
            raise ValueError(
                f"{owner}: {name} contains NaN at positions {preview(np.flatnonzero(nan))}; "
                f"expected class labels. Fix: drop or impute the unlabelled examples."
            )
        fractional = values[values != np.round(values)]
        if fractional.size:
            raise ValueError(
                f"{owner}: {name} contains non-integer values {preview(np.unique(fractional))}; "
                "expected whole-number class labels. Fix: pass class ids, e.g. y.astype(int)."
            )
    negative = values[values < 0]
    if negative.size:
        raise ValueError(
            f"{owner}: {name} contains negative values {preview(np.unique(negative))}; expected "
            "class labels >= 0. Fix: map them to 0, 1, ..., e.g. np.unique(y, "
            "return_inverse=True)[1] (or y == positive_class for a binary task)."
        )


def class_labels(owner: str, labels: Any, *, name: str = "labels") -> np.ndarray:
    """Return 1-D integer class labels (shape (N,), int64) after validation.

    Accepts shape (N,) or (N, 1). Raises on NaN, negative or non-integer values and on an empty
    array.
    """
    values = to_numpy(labels)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(
            f"{owner}: {name} has shape {values.shape}; expected (num_samples,) or "
            f"(num_samples, 1). Fix: pass one class label per example."
        )
    if values.size == 0:
        raise ValueError(
            f"{owner}: {name} is empty (shape {values.shape}); expected at least one label."
        )
    _check_finite_integers(owner, name, values)
    return values.astype(np.int64, copy=False)


def binary_labels(
    owner: str, labels: Any, *, name: str = "labels", allow_2d: bool = False
) -> np.ndarray:
    """Return labels in {0, 1} as int64, shape (N,) (or (N, T) when ``allow_2d``).

    Raises
    ------
    ValueError
        NaN, negative, non-integer values, values other than 0 and 1, an empty array, a shape
        other than (N,), (N, 1) (or (N, T)).
    """
    values = to_numpy(labels)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    expected = "(num_samples,) or (num_samples, num_labels)" if allow_2d else "(num_samples,)"
    if values.ndim not in ((1, 2) if allow_2d else (1,)):
        raise ValueError(
            f"{owner}: {name} has shape {values.shape}; expected {expected}. Fix: pass one "
            "label (or one row of labels) per example."
        )
    if values.size == 0:
        raise ValueError(f"{owner}: {name} is empty (shape {values.shape}); expected labels.")
    kind = values.dtype.kind
    if kind == "b" or (kind in "iu" and values.min() >= 0 and values.max() <= 1):
        return values.astype(np.int64, copy=False)
    _check_finite_integers(owner, name, values)  # dtype, NaN, fractions, negatives
    other = values[(values != 0) & (values != 1)]
    if other.size:  # only classes >= 2 are left here
        raise ValueError(
            f"{owner}: {name} contains {preview(np.unique(other))}; expected binary labels in "
            "{0, 1}. Fix: mark the positive class with 1 and the rest with 0, e.g. "
            "(y == positive_class).astype(int)."
        )
    return values.astype(np.int64, copy=False)
