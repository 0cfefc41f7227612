"""What the binary classification losses share: their inputs and per-positive state rows.

Every loss of the family takes scores (B,), labels (B,) in {0, 1} and the dataset index (B,)
of every example; losses with per-sample state keep it in tables keyed by ``sample`` and write
the rows of the batch's positives only (libauc-reference.md §2.4).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._state import focus_rows
from ._base import Input, LossDefinition, Step

__all__ = ["BinaryLoss", "PositiveRows"]

Array = Any


class PositiveRows(NamedTuple):
    """The state rows a step reads and writes: those of the batch's positives.

    ``rows`` (B,) is the index with every non-positive position pointed at one positive's row
    (:func:`xrisk._state.focus_rows`), so a step touches n+ rows of a large table; ``anchor``
    (1,) is that positive's position; ``pooling`` (B, B) averages the batch quantities of
    positives that share one dataset index (row i: 1/count at the positions of i's duplicates
    among the positives, 0 elsewhere; all-zero rows for negatives).
    """

    rows: Array
    anchor: Array
    pooling: Array

    def pool(self, values: Array, xp: Any) -> Array:
        """Per-position mean of ``values`` (B,) or (B, C) over each positive's duplicates."""
        if len(values.shape) == 1:
            return xp.sum(self.pooling * xp.expand_dims(values, 0), axis=1)
        return self.pooling @ values

    def spread(self, new: Array, old: Array, positive: Array, xp: Any) -> Array:
        """Rows to write: ``new`` at positives, ``old`` elsewhere, and every non-positive
        position given the anchor's row (see focus_rows), so its write repeats that row's."""
        is_positive = positive > 0
        if len(new.shape) > 1:
            is_positive = xp.reshape(is_positive, (-1,) + (1,) * (len(new.shape) - 1))
        rows = xp.where(is_positive, new, old)
        return xp.where(is_positive, rows, xp.take(rows, self.anchor, axis=0))


class BinaryLoss(LossDefinition):
    """Base of the binary family: inputs ``scores``, ``labels``, ``index`` keyed by sample.

    Subclasses with per-sample state set ``num_samples`` in ``__init__``; the others leave it
    unset and take an optional index (validated, unused), so every loss of the family is called
    the same way.
    """

    num_samples: int | None = None

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("scores", ("batch",), "score"),
            Input("labels", ("batch",), "label"),
            Input("index", ("batch",), "index", keys="sample",
                  optional=self.num_samples is None),
        )

    def key_spaces(self) -> dict[str, int | None]:
        # Without per-sample state any non-negative index is accepted (it is not used).
        return {"sample": self.num_samples}

    def positive_rows(self, step: Step, index: Array, positive: Array) -> PositiveRows:
        """The rows of the positives of a batch (see :class:`PositiveRows`)."""
        xp = step.xp
        rows, anchor = focus_rows(index, positive > 0, xp=xp)
        same = xp.astype(xp.expand_dims(index, 1) == xp.expand_dims(index, 0), positive.dtype)
        same = same * xp.expand_dims(positive, 0) * xp.expand_dims(positive, 1)
        count = xp.sum(same, axis=1)
        pooling = same / xp.expand_dims(xp.maximum(count, xp.ones_like(count)), 1)
        return PositiveRows(rows, anchor, pooling)
