"""What the binary classification losses share: their inputs and per-positive state rows.

Every loss of the family takes scores (B,), labels (B,) in {0, 1} and the dataset index (B,)
of every example; losses with per-sample state keep it in tables keyed by ``sample`` and write
the rows of the batch's positives only (as LibAUC 2.0.1 does: its AUC-family losses reduce
the index to the positives' before writing).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._grouping import KeyGroups, group_keys
from .._typing import Array, in_dtype
from ._base import Input, LossDefinition, Step

__all__ = ["BinaryLoss", "PositiveRows", "label_masks", "positive_mask"]



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
    values = in_dtype(labels, dtype, xp)
    if not xp.isdtype(labels.dtype, "real floating"):
        return values, None
    positive = xp.astype(values == 1, dtype)
    return positive, positive + xp.astype(values == 0, dtype)


class PositiveRows(NamedTuple):
    """The state rows a step reads and writes: those of the batch's positives.

    ``groups`` are the positions grouped by dataset index, pooling the positives
    (:func:`xrisk._grouping.group_keys`): ``rows`` (B,) is the index with every non-positive
    position pointed at the first positive's row, so a step touches n+ rows of a large
    table; ``anchor`` (1,) is that positive's position. :meth:`pool` and :meth:`max` give 0
    and ``low`` at the other positions, whose rows :meth:`spread` replaces by the anchor's.
    """

    groups: KeyGroups

    @property
    def rows(self) -> Array:
        return self.groups.rows

    @property
    def anchor(self) -> Array:
        return self.groups.anchor

    def pool(self, values: Array, xp: Any) -> Array:
        """Per-position mean of ``values`` (B,) or (B, C) over each positive's duplicates
        (0 at negatives)."""
        kept = self.groups.keep
        kept = kept if len(values.shape) == 1 else xp.expand_dims(kept, 1)
        return xp.where(kept, self.groups.mean(values), xp.zeros_like(values))

    def max(self, values: Array, low: Any, xp: Any) -> Array:
        """Per-position maximum of ``values`` (B,) over each positive's duplicates (``low``
        at negatives)."""
        return xp.where(self.groups.keep, self.groups.max(values, low), low)

    def spread(self, new: Array, old: Array, positive: Array, xp: Any) -> Array:
        """Rows to write: ``new`` at positives, ``old`` elsewhere, and every non-positive
        position given the anchor's row, so its write repeats that row's."""
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

    def positive_groups(self, step: Step, index: Array, positive: Array,
                        stride: int | None = None) -> KeyGroups:
        """The batch's positions grouped by dataset index, pooling the positives
        (:func:`xrisk._grouping.group_keys`; non-positive positions join the first
        positive's group). ``index`` is the ``index`` input (B,), so the host's reading of
        that input, where the checks made one, ranks it too.

        With ``stride`` (the multi-label losses: ``positive`` (K, B), one row per label
        column), position (t, i) is keyed ``t * stride + index[i]``, its label's row of a
        (label, sample) table, and the K * B positions are grouped at once, flattened label
        by label. Keys of distinct labels differ, so every group is one label's, pooled in
        the order of the single-label grouping; non-positive positions of every label join
        the first positive of the batch (any label's): they only repeat its write.
        """
        xp = step.xp
        host = step.host.get("index")
        keys = index
        if stride is not None:
            labels = positive.shape[0]
            offsets = xp.arange(labels, dtype=index.dtype, device=step.backend.device(index))
            keys = xp.reshape(xp.expand_dims(offsets * stride, 1) + xp.expand_dims(index, 0),
                              (-1,))
            positive = xp.reshape(positive, (-1,))
            if host is not None:  # the same shift of the host's reading: the same ranks
                host = (np.arange(labels, dtype=np.int64)[:, None] * stride
                        + np.reshape(host, (1, -1)).astype(np.int64)).reshape(-1)
        return group_keys(keys, positive > 0, backend=step.backend, xp=xp,
                          dtype=positive.dtype, host=host)

    def positive_rows(self, step: Step, index: Array, positive: Array) -> PositiveRows:
        """The rows of the positives of a batch (see :class:`PositiveRows`); ``index`` is the
        ``index`` input or an injective function of it, as in :meth:`positive_groups`."""
        return PositiveRows(self.positive_groups(step, index, positive))
