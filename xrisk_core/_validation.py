"""Input checks shared by every loss.

Shape and dtype checks are static and always run. Value checks (labels in {0, 1}, finite
scores, index in range) need concrete values, so they run only on eager arrays and are
skipped for lazy ones (JAX tracers, symbolic TensorFlow tensors inside ``tf.function``).
Every check runs before any state is touched: bad input never changes state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._inputs import preview

__all__ = [
    "as_batch_vector", "check_batch", "check_count", "check_positive", "check_fraction",
    "check_choice",
]

Array = Any


def as_batch_vector(x: Array, *, name: str, owner: str, xp: Any) -> Array:
    """Return ``x`` as shape (B,), accepting (B,) or (B, 1); raise ValueError otherwise."""
    shape = tuple(x.shape)
    if len(shape) == 1:
        return x
    if len(shape) == 2 and shape[1] == 1:
        return xp.reshape(x, (shape[0],))
    raise ValueError(
        f"{owner}: {name} has shape {shape}; expected (batch_size,) or (batch_size, 1). "
        f"Fix: pass one column per example, e.g. {name}.reshape(-1) for a single output."
    )


def check_batch(
    owner: str,
    backend: Any,
    scores: Array,
    labels: Array,
    index: Array | None,
    *,
    num_samples: int | None,
    xp: Any,
) -> tuple[Array, Array, Array | None]:
    """Validate one batch and return ``(scores, labels, index)`` as (B,) vectors.

    Raises
    ------
    ValueError
        Mismatched batch sizes, labels outside {0, 1}, NaN or infinite scores, an index
        outside ``[0, num_samples)``.
    TypeError
        Scores of a non-floating dtype, an index of a non-integer dtype.
    """
    scores = as_batch_vector(scores, name="scores", owner=owner, xp=xp)
    labels = as_batch_vector(labels, name="labels", owner=owner, xp=xp)
    sizes = {"scores": scores.shape[0], "labels": labels.shape[0]}
    if index is not None:
        index = as_batch_vector(index, name="index", owner=owner, xp=xp)
        sizes["index"] = index.shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(
            f"{owner}: batch sizes differ: {sizes}; expected one size for scores, labels and "
            "index. Fix: pass the scores, labels and dataset indices of the same examples."
        )
    if not xp.isdtype(scores.dtype, "real floating"):
        raise TypeError(
            f"{owner}: scores have dtype {scores.dtype}; expected a floating dtype. "
            "Fix: pass model outputs, e.g. torch.sigmoid(logits), not integer labels."
        )
    if index is not None and not xp.isdtype(index.dtype, "integral"):
        raise TypeError(
            f"{owner}: index has dtype {index.dtype}; expected an integer dtype (dataset "
            "positions). Fix: pass the index returned by the dataset, cast with .long() or "
            "astype(int64)."
        )
    lazy = any(backend.is_lazy(x) for x in (scores, labels, index) if x is not None)
    if lazy:
        return scores, labels, index

    label_values = backend.to_numpy(labels)
    bad = label_values[(label_values != 0) & (label_values != 1)]
    if bad.size:
        raise ValueError(
            f"{owner}: labels must be 0 or 1; received {preview(np.unique(bad))}. Expected "
            "binary labels in {0, 1}. Fix: map the positive class to 1 and every other class "
            "to 0, e.g. labels = (y == positive_class)."
        )
    score_values = backend.to_numpy(scores)
    bad_scores = score_values[~np.isfinite(score_values)]
    if bad_scores.size:
        raise ValueError(
            f"{owner}: scores contain non-finite values {preview(bad_scores)}; expected finite "
            "scores. Fix: check the model for NaN/inf (e.g. a too-large learning rate)."
        )
    if index is not None and num_samples is not None:
        index_values = backend.to_numpy(index)
        outside = index_values[(index_values < 0) | (index_values >= num_samples)]
        if outside.size:
            raise ValueError(
                f"{owner}: index values {preview(np.unique(outside))} are outside "
                f"[0, num_samples={num_samples}). Expected dataset positions. Fix: pass the "
                "dataset index of each example and construct the loss with num_samples = "
                "len(dataset)."
            )
    return scores, labels, index


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
