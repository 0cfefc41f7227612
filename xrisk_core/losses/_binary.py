"""What the binary classification losses share: their inputs and per-positive state rows.

Every loss of the family takes scores (B,), labels (B,) in {0, 1} and the dataset index (B,)
of every example; losses with per-sample state keep it in tables keyed by ``sample`` and write
the rows of the batch's positives only (as LibAUC 2.0.1 does: its AUC-family losses reduce
the index to the positives' before writing).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._state import axis_size, focus_rows, key_gaps, size_bound
from ._base import Input, LossDefinition, Step

__all__ = ["BinaryLoss", "PositiveGroups", "PositiveRows", "label_masks", "positive_mask"]

Array = Any


def label_masks(labels: Array, dtype: Any, xp: Any) -> tuple[Array, Array, Array | None]:
    """``(positive, negative, observed)`` masks (B,) in ``dtype`` (0.0 / 1.0) of ``labels``.

    Integer and bool labels are all observed: ``observed`` is ``None`` and ``negative`` is
    ``1 - positive``, the binary losses' path. Floating labels may hold NaN, a missing label
    (the multi-label losses pass a label column that way): it is neither positive nor negative
    and ``observed`` is 0 there. The branch is on the dtype, never on values (jit-safe).
    """
    positive, observed = positive_mask(labels, dtype, xp)
    if observed is None:
        return positive, 1 - positive, None
    return positive, observed - positive, observed


def positive_mask(labels: Array, dtype: Any, xp: Any) -> tuple[Array, Array | None]:
    """``(positive, observed)`` of :func:`label_masks`, for losses that need no negative
    mask (one array operation fewer per step)."""
    values = xp.astype(labels, dtype)
    if not xp.isdtype(labels.dtype, "real floating"):
        return values, None
    positive = xp.astype(values == 1, dtype)
    return positive, positive + xp.astype(values == 0, dtype)


class PositiveRows(NamedTuple):
    """The state rows a step reads and writes: those of the batch's positives.

    ``rows`` (B,) is the index with every non-positive position pointed at one positive's row
    (:func:`xrisk._state.focus_rows`), so a step touches n+ rows of a large table; ``anchor``
    (1,) is that positive's position; ``same`` (B, B) is 1 where positions i and j are both
    positives with one dataset index, 0 elsewhere (symmetric; all-zero rows and columns for
    negatives); ``count`` (B,) its row sums floored at 1 (a positive's number of duplicates
    in the batch, itself included).

    Where the batch's index is known to hold no value twice (:meth:`Step.distinct`), no
    positive has a duplicate: ``same`` is ``None`` and ``count`` is 1 at positives, 0
    elsewhere. :meth:`pool` and :meth:`max` give the same values either way.
    """

    rows: Array
    anchor: Array
    same: Array | None
    count: Array

    def pool(self, values: Array, xp: Any) -> Array:
        """Per-position mean of ``values`` (B,) or (B, C) over each positive's duplicates
        (0 at negatives).

        Computed as (C, B) @ (B, B) products, ``same`` being symmetric: the (B, B) @ (B, C)
        product with a small C takes a path of CPU BLAS several times slower.
        """
        if self.same is None:
            kept = self.count > 0
            kept = kept if len(values.shape) == 1 else xp.expand_dims(kept, 1)
            return xp.where(kept, values, xp.zeros_like(values))
        if len(values.shape) == 1:
            return xp.reshape(xp.expand_dims(values, 0) @ self.same, (-1,)) / self.count
        width = values.shape[1]
        columns = xp.stack([values[:, k] for k in range(width)], axis=0) @ self.same
        return (xp.stack([columns[k, :] for k in range(width)], axis=1)
                / xp.expand_dims(self.count, 1))

    def max(self, values: Array, low: Any, xp: Any) -> Array:
        """Per-position maximum of ``values`` (B,) over each positive's duplicates (``low``
        at negatives)."""
        if self.same is None:
            return xp.where(self.count > 0, values, low)
        return xp.max(xp.where(self.same > 0, xp.expand_dims(values, 0), low), axis=1)

    def spread(self, new: Array, old: Array, positive: Array, xp: Any) -> Array:
        """Rows to write: ``new`` at positives, ``old`` elsewhere, and every non-positive
        position given the anchor's row (see focus_rows), so its write repeats that row's."""
        is_positive = positive > 0
        if len(new.shape) > 1:
            is_positive = xp.reshape(is_positive, (-1,) + (1,) * (len(new.shape) - 1))
        rows = xp.where(is_positive, new, old)
        return xp.where(is_positive, rows, xp.take(rows, self.anchor, axis=0))


class PositiveGroups(NamedTuple):
    """The batch's positives grouped by dataset index, every position given a group.

    ``rows`` (B,) is the row each position reads and writes: its dataset index at positives
    and, elsewhere, the smallest dataset index among the positives (the *anchor* group; the
    batch's largest index if it has no positive), so that a step touches only positives'
    rows of a large table. ``members`` (B, B) is 1 where position j is a positive whose
    dataset index is ``rows[i]``: column i lists the positives of position i's group (the
    anchor group for non-positive positions). ``count`` (B,) is the size of that group, 0
    for every position of a batch without positives.

    Positions with the same row have the same column of ``members``, so a group's pooled
    estimate, and a moving average from the row gathered there, are the same values at every
    such position: the rows written for one index are equal.

    Where the batch's index is known to hold no value twice (:meth:`Step.distinct`), every
    positive is its own group: ``rows`` is the index itself, ``members`` is ``None`` (no
    pooling) and ``count`` is 1 at positives, 0 elsewhere, so a non-positive position keeps
    its own row unchanged. The positives' rows and values are those of the general form.
    """

    rows: Array
    members: Array | None
    count: Array

    def pool(self, values: Array, xp: Any) -> Array:
        """(C, B) group means of ``values`` (C, B), where ``count`` > 0."""
        if self.members is None:
            return values
        return values @ self.members / xp.clip(self.count, 1, None)


class BinaryLoss(LossDefinition):
    """Base of the binary family: inputs ``scores``, ``labels``, ``index`` keyed by sample.

    Subclasses with per-sample state set ``num_samples`` in ``__init__``; the others leave it
    unset and take an optional index (validated, unused), so every loss of the family is called
    the same way.
    """

    num_samples: int | None = None
    #: Range of scores the math expects: ``(0.0, 1.0)`` for losses of probabilities (sigmoid
    #: outputs), so host-checked scores outside it warn once; ``None`` for losses of logits.
    score_interval: tuple[float, float] | None = None

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("scores", ("batch",), "score", interval=self.score_interval),
            Input("labels", ("batch",), "label"),
            Input("index", ("batch",), "index", keys="sample",
                  optional=self.num_samples is None),
        )

    def key_spaces(self) -> dict[str, int | None]:
        # Without per-sample state any non-negative index is accepted (it is not used).
        return {"sample": self.num_samples}

    def positive_groups(self, step: Step, index: Array, positive: Array) -> PositiveGroups:
        """The batch's positives grouped by dataset index (see :class:`PositiveGroups`).

        About 10 array operations: a reduction picks the anchor group (no gather), one
        float test (:func:`xrisk._state.key_gaps`) builds ``members``; none where the batch's
        ``index`` input is known to repeat nothing (:meth:`Step.distinct`). ``index`` is that
        input or an injective function of it (the multi-label losses shift it per label), so
        its values repeat nothing either.
        """
        xp = step.xp
        if step.distinct("index"):  # host-read, no repeat: no groups to build (CPU eager)
            return PositiveGroups(index, None, positive)
        keep = positive > 0
        # The smallest positive index; the batch's largest index when there is no positive.
        anchor = xp.min(xp.where(keep, index, xp.max(index)))
        rows = xp.where(keep, index, anchor)
        # Non-positive positions j get the key -1, which no row has (rows are >= 0).
        gaps = key_gaps(xp.where(keep, index, xp.full_like(index, -1)), rows,
                        bound=max(self.num_samples or 0, 1), xp=xp, dtype=positive.dtype)
        members = 1 - xp.clip(gaps, None, 1)
        if members.dtype != positive.dtype:
            members = xp.astype(members, positive.dtype)
        return PositiveGroups(rows, members, xp.sum(members, axis=0))

    def positive_rows(self, step: Step, index: Array, positive: Array) -> PositiveRows:
        """The rows of the positives of a batch (see :class:`PositiveRows`); ``index`` is the
        ``index`` input or an injective function of it, as in :meth:`positive_groups`."""
        xp = step.xp
        keep = positive > 0
        rows, anchor = focus_rows(index, keep, xp=xp)
        if step.distinct("index"):  # host-read, no repeat: no duplicates to pool (CPU eager)
            return PositiveRows(rows, anchor, None, positive)
        # Keys: the dataset index at positives; elsewhere a negative number that no key on
        # the other axis has (rows -1 - i, columns -1 - B - j), so that one float test
        # (key_gaps) gives "both positive, one dataset index" without mask products.
        batch = axis_size(index)
        positions = xp.arange(batch, dtype=index.dtype)
        gaps = key_gaps(xp.where(keep, index, -1 - positions),
                        xp.where(keep, index, -1 - batch - positions),
                        bound=max(self.num_samples or 0, 2 * size_bound(batch)), xp=xp,
                        dtype=positive.dtype)
        same = 1 - xp.clip(gaps, None, 1)
        if same.dtype != positive.dtype:
            same = xp.astype(same, positive.dtype)
        count = xp.sum(same, axis=1)
        return PositiveRows(rows, anchor, same, xp.maximum(count, xp.ones_like(count)))
