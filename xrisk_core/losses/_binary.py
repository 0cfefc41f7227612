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
from ..surrogates import surrogate_loss
from ._base import Input, LossDefinition, Step

__all__ = ["BinaryLoss", "LabelBlocks", "Pairs", "PositivePicks", "PositiveRows", "batch_pairs",
           "host_labels", "label_masks", "label_pairs", "positive_mask", "positive_picks"]



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


def host_labels(step: Step) -> np.ndarray | None:
    """The labels as the input checks read them on the host (an eager CPU batch checked
    there), or ``None`` (traced, on a device, or checked in the graph). Losses take their
    compact layouts from it: the positions of each class, known without a device operation."""
    return step.host.get("labels") if step.valid is None else None


class PositivePicks(NamedTuple):
    """The positive positions of each label column of a batch, read on the host
    (:func:`positive_picks`): the candidates whose per-positive terms a loss computes, where
    the traced path computes them at every position and masks."""

    host: tuple[np.ndarray, ...]  #: per label, the positives' positions, in batch order
    positions: Array  #: (N,) the same, label after label, on the scores' device
    counts: tuple[float, ...]  #: per label, n+ (>= 1)
    bounds: tuple[tuple[int, int], ...]  #: per label, its slice of the picks label by label

    def gather(self, step: Step, values: Array) -> Array:
        """The picked entries of ``values`` (B,) (one label) or (B, K), label after label, as
        one row (1, N): one gather (its gradient one scatter), each label's a slice of it.

        Gathered along axis 1 of a (1, ...) view: TensorFlow's gradient of an axis-0 gather
        is IndexedSlices, which a caller differentiating with respect to the scores would get
        in place of a tensor."""
        xp = step.xp
        columns = len(self.host)
        flat = (self.positions if columns == 1 else xp.asarray(
            np.concatenate([picked * columns + t for t, picked in enumerate(self.host)]),
            device=step.backend.device(values)))
        return xp.take(xp.reshape(values, (1, -1)), flat, axis=1)

    @classmethod
    def of(cls, picked: tuple[np.ndarray, ...], xp: Any, device: Any) -> PositivePicks:
        """The picks of each label's positive positions ``picked`` (host arrays; a label may
        have none), moved to ``device`` once, label after label."""
        sizes = [len(positions) for positions in picked]
        ends = np.cumsum(sizes).tolist()
        return cls(picked, xp.asarray(np.concatenate(picked), device=device),
                   tuple(float(max(n, 1)) for n in sizes),
                   tuple(zip([0, *ends[:-1]], ends, strict=True)))

    def labels_of(self, step: Step, per_label: Array) -> Array:
        """``per_label`` (K,) at each pick (N,): the value of its label."""
        ids = np.repeat(np.arange(len(self.host)), [len(picked) for picked in self.host])
        return step.xp.take(per_label, step.xp.asarray(ids, device=step.backend.device(
            per_label)), axis=0)

    def groups(self, step: Step, index: Array, stride: int | None, dtype: Any) -> KeyGroups:
        """The picks, label after label, grouped by key (every one kept): label t's positive
        at position i has key ``t * stride + index[i]`` (one label: ``index[i]``, where
        ``index`` may be the index input shifted: the host reading only ranks)."""
        xp = step.xp
        host = step.host.get("index")
        keys = xp.take(index, self.positions, axis=0)
        positions = self.host[0] if len(self.host) == 1 else np.concatenate(self.host)
        if host is not None:
            host = np.asarray(host).reshape(-1)[positions]
        if len(self.host) > 1:
            offsets = np.repeat(np.arange(len(self.host), dtype=np.int64) * int(stride or 0),
                                [len(picked) for picked in self.host])
            keys = keys + xp.astype(xp.asarray(offsets, device=step.backend.device(index)),
                                    index.dtype)
            if host is not None:
                host = host.astype(np.int64) + offsets
        return group_keys(keys, backend=step.backend, xp=xp, dtype=dtype, host=host)


def positive_picks(step: Step, scores: Array, columns: int) -> PositivePicks | None:
    """The positives of each of the ``columns`` label columns (labels (B,) for one, (B, K)),
    where :func:`host_labels` reads them and every column has one; ``None`` otherwise (the
    loss takes its masked path)."""
    labels = host_labels(step)
    if labels is None:
        return None
    here = step.backend.device(scores)
    if columns == 1:  # the binary losses, every step: the plain case without the loops
        positions = (labels.reshape(-1) == 1).nonzero()[0]
        count = len(positions)
        return None if not count else PositivePicks(
            (positions,), step.xp.asarray(positions, device=here), (float(count),),
            ((0, count),))
    values = labels.reshape(-1, columns)
    picked = tuple((values[:, t] == 1).nonzero()[0] for t in range(columns))
    if not all(len(positions) for positions in picked):
        return None
    return PositivePicks.of(picked, step.xp, here)


class LabelBlocks(NamedTuple):
    """The rows of a multi-label :class:`Pairs` by label column (:func:`label_pairs`): the
    label-level reductions of its rows and the label-level values read at each row.

    Masked: every label has the B rows of the batch, label after label (``ids`` ``None``,
    ``ones`` (K, B) 1.0); compact: the rows of the positives of the labels with a pair, label
    after label, ``ids`` (R,) the label of each row (a label without a row: none).
    """

    num_labels: int  #: K, the label columns
    stride: int  #: rows of one label in the (label, sample) tables: row t * stride + index
    ids: Array | None  #: compact: (R,) the label of each row
    ones: Array | None  #: masked: (K, B) 1.0, the shape of the rows by label

    def sum(self, values: Array, backend: Any, xp: Any) -> Array:
        """(K,) the sum of ``values`` (R,) over each label's rows."""
        if self.ids is None:
            return xp.sum(xp.reshape(values, (self.num_labels, -1)), axis=1)
        return backend.segment_sum(values, self.ids, self.num_labels)

    def max(self, values: Array, backend: Any, xp: Any) -> Array:
        """(K,) the maximum of ``values`` (R,) over each label's rows (``min(values)`` for
        a label without a row)."""
        if self.ids is None:
            return xp.max(xp.reshape(values, (self.num_labels, -1)), axis=1)
        return xp.maximum(backend.segment_max(values, self.ids, self.num_labels),
                          xp.min(values))

    def at_rows(self, per_label: Array, xp: Any) -> Array:
        """(R,) the value of each row's label in ``per_label`` (K,)."""
        ones = self.ones
        if ones is None:  # compact: the label of each row
            return xp.take(per_label, self.ids, axis=0)
        spread = xp.expand_dims(per_label, 1)
        if xp.isdtype(per_label.dtype, "bool"):
            return xp.reshape(spread & (ones > 0), (-1,))
        return xp.reshape(spread * (ones if ones.dtype == per_label.dtype
                                    else xp.astype(ones, per_label.dtype)), (-1,))


class Pairs(NamedTuple):
    r"""The positive-negative pairs of a batch as one matrix: entry (r, c) is
    :math:`\ell(s_r - s_c)` of row position r and column position c.

    :func:`batch_pairs` lays the same pairs out one of two ways:

    - *compact*, where the input checks read the labels on the host (an eager CPU batch) and
      the batch has both classes: the R = n+ rows are the positives and the C = n- columns
      the negatives, each in batch order. Every entry is a pair (``mask`` is ``None``), so a
      pass over the pairs costs n+ n- elements, a sixth of B x B at 20 % positives.
    - *masked* (traced or device arrays, or a batch with one class): every position is a row
      and a column (R = C = B), ``mask`` 1.0 where row i is a positive and column j a
      negative. Static shapes, no branch on values (jit-safe).

    A loss reads the pairs through :meth:`select`, :meth:`only`, :meth:`on_positives` and
    :meth:`positive_max`, which do nothing in the compact layout, so its math is written once
    for both. The layouts add the same terms in another order: their results agree to
    rounding (float64: ~1e-16 relative), not bit for bit.
    """

    value: Array  #: (R, C) l(s_r - s_c), differentiable
    fixed: Array  #: the same, stop-gradient (masks, weights and state are built from it)
    mask: Array | None  #: (R, C) 1.0 on the pairs, else 0.0; ``None``: every entry is one
    on: Array | None  #: ``mask > 0`` (bool), built once for every selection over the pairs
    positive: Array | None  #: (R,) 1.0 at positive rows; ``None``: every row is one
    picks: PositivePicks | None  #: compact: the rows' batch positions (the positives')
    num_pos: Any  #: () max(n+, 1); several labels: (K,), each label's
    num_neg: Any  #: () max(n-, 1); several labels: (R,), each row's label's
    keep: Any  #: () bool: the batch has a pair (and passed the in-graph checks); compact:
    #: True; several labels: (K,), each label's (or True)
    labels: LabelBlocks | None = None  #: several label columns (:func:`label_pairs`)
    row_keep: Any = None  #: several labels: (R,) ``keep`` of each row's label (or True)

    @property
    def compact(self) -> bool:
        """Whether the rows are the positives only (every row moves its state)."""
        return self.picks is not None

    def per_row(self, per_label: Array, xp: Any) -> Array:
        """A label-level value (() or (K,)) at each row (R,) (one label: as it is)."""
        return per_label if self.labels is None else self.labels.at_rows(per_label, xp)

    def label_mean(self, values: Array, step: Step) -> Array:
        """The mean of ``values`` (R,) over each label's positive rows: () or (K,)."""
        xp = step.xp
        positives = self.on_positives(values, xp)
        total = (xp.sum(positives) if self.labels is None
                 else self.labels.sum(positives, step.backend, xp))
        return total / self.num_pos

    def mean(self, weights: Array, xp: Any) -> Array:
        """sum_ij weights_ij l_ij / (n+ n-) over the pairs, summed over the labels: 0, with a
        zero gradient, without pairs (weights off the pairs are never read, not even as
        0 * inf)."""
        weighted = self.select(weights, 0, xp) * self.value
        if self.labels is None:
            return xp.sum(weighted) / (self.num_pos * self.num_neg)
        return xp.sum(xp.sum(weighted, axis=1)
                      / (self.per_row(self.num_pos, xp) * self.num_neg))

    def rows_kept(self, new: Array, old: Array, xp: Any) -> Array:
        """Per row (R, ...): ``new`` where the row's label has pairs, ``old`` elsewhere."""
        keep = self.moved(new, xp)
        return new if keep is True else xp.where(keep, new, old)

    def moved(self, new: Array, xp: Any) -> Any:
        """``keep`` of each row, shaped to broadcast against the rows ``new`` (R, ...)."""
        return self._shaped(self.keep if self.labels is None else self.row_keep, new, xp)

    def _shaped(self, keep: Any, like: Array, xp: Any) -> Any:
        """``keep`` ((), or (K,) / (R,) with several labels) against ``like`` (K or R, ...)."""
        if self.labels is None or keep is True or len(like.shape) < 2:
            return keep
        return xp.reshape(keep, (-1,) + (1,) * (len(like.shape) - 1))

    def select(self, values: Array, fill: Any, xp: Any) -> Array:
        """``values`` (R, C) on the pairs, ``fill`` elsewhere (never read off the pairs)."""
        if self.on is None:
            return values
        return xp.where(self.on, values, fill if not isinstance(fill, int | float)
                        else xp.full_like(values, fill))

    def only(self, values: Array) -> Array:
        """``values`` (R, C) times the pair mask: 0 off the pairs (values there finite)."""
        return values if self.mask is None else values * self.mask

    def on_positives(self, values: Array, xp: Any) -> Array:
        """``values`` (R,) at positive rows, 0 elsewhere."""
        if self.positive is None:
            return values
        return xp.where(self.positive > 0, values, xp.zeros_like(values))

    def positive_and(self, condition: Array) -> Array:
        """``condition`` (R,) and "row r is a positive"."""
        return condition if self.positive is None else (self.positive > 0) & condition

    def positive_max(self, values: Array, step: Step) -> Array:
        """The maximum of ``values`` (R,) over the positive rows (any value without one):
        () or, several labels, (K,) each label's."""
        xp = step.xp
        if self.positive is not None:
            values = xp.where(self.positive > 0, values, xp.min(values))
        return (xp.max(values) if self.labels is None
                else self.labels.max(values, step.backend, xp))

    def if_kept(self, new: Array, old: Array, xp: Any) -> Array:
        """``new`` for a batch (a label) with pairs, ``old`` for one without; several
        labels: ``new`` and ``old`` (K, ...), label by label."""
        keep = self._shaped(self.keep, new, xp)
        return new if keep is True else xp.where(keep, new, old)


def batch_pairs(step: Step, scores: Array, labels: Array, *, surrogate: str, margin: float,
                scale: float) -> Pairs:
    """The :class:`Pairs` of a batch: ``scores`` (B,), ``labels`` (B,) (NaN, a missing label
    of a multi-label column, is in neither class); the surrogate of :mod:`xrisk.surrogates`.

    Compact where ``step.host`` holds the labels' host reading, the in-graph checks are off
    (``step.valid`` is ``None``) and the batch has both classes; masked otherwise.
    """
    xp = step.xp
    picks = positive_picks(step, scores, 1)
    if picks is not None:
        negatives = (np.asarray(host_labels(step)).reshape(-1) == 0).nonzero()[0]
        if negatives.size:
            # Along axis 1 of a (1, B) view, as PositivePicks.gather (a dense gradient).
            at_neg = xp.asarray(negatives, device=step.backend.device(scores))
            value = surrogate_loss(surrogate,
                                   xp.reshape(picks.gather(step, scores), (-1, 1))
                                   - xp.take(xp.reshape(scores, (1, -1)), at_neg, axis=1),
                                   margin=margin, scale=scale, xp=xp)
            return Pairs(value, step.stop(value), None, None, None, picks, picks.counts[0],
                         float(negatives.size), True)
    positive, negative, _ = label_masks(labels, scores.dtype, xp)
    value = surrogate_loss(surrogate, xp.expand_dims(scores, 1) - xp.expand_dims(scores, 0),
                           margin=margin, scale=scale, xp=xp)
    mask = xp.expand_dims(positive, 1) * xp.expand_dims(negative, 0)
    n_pos, n_neg = xp.sum(positive), xp.sum(negative)
    # A batch without positives or without negatives has no pair: loss 0, no state write.
    keep = (n_pos > 0) & (n_neg > 0)
    if step.valid is not None:
        keep = keep & step.valid
    return Pairs(value, step.stop(value), mask, mask > 0, positive, None,
                 xp.clip(n_pos, 1, None), xp.clip(n_neg, 1, None), keep)  # counts


def label_pairs(step: Step, scores: Array, labels: Array, *, stride: int, surrogate: str,
                margin: float, scale: float) -> Pairs:
    """The :class:`Pairs` of every label column at once: ``scores`` and ``labels`` (B, K)
    (NaN: a missing entry, in neither class), each label's pairs its own; row r of label t
    addresses row ``t * stride + index`` of a (label, sample) table.

    Compact (the labels read on the host, checks on the host, a label with both classes):
    the rows are the positives of each label with a pair, label after label (R = sum n+),
    the columns that label's negatives, in batch order, padded to the largest n- (masked);
    a label without a pair has no row. Masked otherwise: K blocks of B rows, label after
    label, each row's columns the batch (R = K B, C = B), as :func:`batch_pairs`'s masked
    layout per label. Either way one pass over the pairs of all labels, where a loop over
    the labels would take K.
    """
    xp = step.xp
    count = scores.shape[1]
    host = host_labels(step)
    if host is not None:
        values = np.asarray(host).reshape(-1, count)
        picked = [(values[:, t] == 1).nonzero()[0] for t in range(count)]
        against = [(values[:, t] == 0).nonzero()[0] for t in range(count)]
        kept = [len(p) > 0 and len(n) > 0 for p, n in zip(picked, against, strict=True)]
        if any(kept):
            return _compact_label_pairs(step, scores, picked, against, kept, stride,
                                        surrogate=surrogate, margin=margin, scale=scale)
    by_label = xp.matrix_transpose(scores)  # (K, B)
    positive, negative, _ = label_masks(xp.matrix_transpose(labels), scores.dtype, xp)
    size = step.backend.axis_size(scores, 0)  # B, a run-time scalar in a TF None dimension
    value = surrogate_loss(surrogate, xp.expand_dims(by_label, 2) - xp.expand_dims(by_label, 1),
                           margin=margin, scale=scale, xp=xp)
    mask = xp.reshape(xp.expand_dims(positive, 2) * xp.expand_dims(negative, 1), (-1, size))
    value = xp.reshape(value, (-1, size))
    n_pos, n_neg = xp.sum(positive, axis=1), xp.sum(negative, axis=1)  # (K,)
    keep = (n_pos > 0) & (n_neg > 0)
    if step.valid is not None:
        keep = keep & step.valid
    blocks = LabelBlocks(count, stride, None, xp.ones_like(positive))
    return Pairs(value, step.stop(value), mask, mask > 0, xp.reshape(positive, (-1,)), None,
                 xp.clip(n_pos, 1, None), blocks.at_rows(xp.clip(n_neg, 1, None), xp), keep,
                 blocks, blocks.at_rows(keep, xp))


def _compact_label_pairs(step: Step, scores: Array, picked: list[np.ndarray],
                         against: list[np.ndarray], kept: list[bool], stride: int, *,
                         surrogate: str, margin: float, scale: float) -> Pairs:
    """:func:`label_pairs`'s compact layout, from each label's positive and negative
    positions read on the host."""
    xp = step.xp
    count = len(picked)
    here = step.backend.device(scores)
    picks = PositivePicks.of(tuple(p if k else p[:0] for p, k in zip(picked, kept, strict=True)),
                             xp, here)
    picked = list(picks.host)
    sizes = [len(p) for p in picked]
    width = max(len(n) for n, k in zip(against, kept, strict=True) if k)
    # Each label's negatives as positions of the flattened (B * K) scores, padded by
    # repeating its first negative (masked out).
    columns = np.zeros((count, width), dtype=np.int64)
    on = np.zeros((count, width), dtype=bool)
    for t, negatives in enumerate(against):
        if kept[t]:
            columns[t, :len(negatives)] = negatives * count + t
            columns[t, len(negatives):] = negatives[0] * count + t
            on[t, :len(negatives)] = True
    ids = np.repeat(np.arange(count), sizes)
    # Along axis 1 of a (1, B K) view, as PositivePicks.gather (a dense TF gradient).
    at_columns = xp.take(xp.reshape(scores, (1, -1)),
                         xp.asarray(columns[ids].reshape(-1), device=here), axis=1)
    value = surrogate_loss(surrogate, xp.reshape(picks.gather(step, scores), (-1, 1))
                           - xp.reshape(at_columns, (-1, width)),
                           margin=margin, scale=scale, xp=xp)
    dtype = scores.dtype
    mask = on_pairs = None
    if not on.all():
        on_pairs = xp.asarray(on[ids], device=here)
        mask = xp.astype(on_pairs, dtype)
    negatives = np.array([max(len(n), 1) for n in against], dtype=np.float64)
    keep: Any = True if all(kept) else xp.asarray(np.array(kept), device=here)
    return Pairs(value, step.stop(value), mask, on_pairs, None, picks,
                 xp.asarray(np.array(picks.counts), dtype=dtype, device=here),
                 xp.asarray(negatives[ids], dtype=dtype, device=here), keep,
                 LabelBlocks(count, stride, xp.asarray(ids, device=here), None), True)


class PositiveRows(NamedTuple):
    """The state rows a step reads and writes: those of the batch's positives.

    ``groups`` are the rows of the pairs (:class:`Pairs`) grouped by dataset index, pooling
    the positives (:func:`xrisk._grouping.group_keys`). Masked pairs: ``rows`` (B,) is the
    index with every non-positive position pointed at the first positive's row, so a step
    touches n+ rows of a large table; ``anchor`` (1,) is that positive's position;
    :meth:`pool` and :meth:`max` give 0 and ``low`` at the other positions, whose rows
    :meth:`spread` replaces by the anchor's. Compact pairs: ``rows`` (n+,) are the positives'
    own, every one kept, and those methods mask nothing.
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
        if self.groups.all_kept:  # every row a positive (compact pairs)
            return self.groups.mean(values)
        kept = self.groups.keep
        kept = kept if len(values.shape) == 1 else xp.expand_dims(kept, 1)
        return xp.where(kept, self.groups.mean(values), xp.zeros_like(values))

    def max(self, values: Array, low: Any, xp: Any) -> Array:
        """Per-position maximum of ``values`` (B,) over each positive's duplicates (``low``
        at negatives)."""
        if self.groups.all_kept:
            return self.groups.max(values, low)
        return xp.where(self.groups.keep, self.groups.max(values, low), low)

    def spread(self, new: Array, old: Array, positive: Array | None, xp: Any) -> Array:
        """Rows to write: ``new`` at positives, ``old`` elsewhere, and every non-positive
        position given the anchor's row, so its write repeats that row's (``positive``
        ``None``: every row is a positive's)."""
        if positive is None:
            return new
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

    def positive_rows(self, step: Step, index: Array, pairs: Pairs) -> PositiveRows:
        """The rows of the positives of a batch (see :class:`PositiveRows`), one per row of
        ``pairs``; ``index`` is the ``index`` input or an injective function of it, as in
        :meth:`positive_groups`."""
        stride = None if pairs.labels is None else pairs.labels.stride
        if pairs.picks is None:
            positive = pairs.positive
            if pairs.labels is not None:  # (K, B): the rows of each label
                positive = step.xp.reshape(positive, (pairs.labels.num_labels, -1))
            return PositiveRows(self.positive_groups(step, index, positive, stride))
        return PositiveRows(pairs.picks.groups(step, index, stride, pairs.value.dtype))
