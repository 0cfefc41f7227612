r"""The one grouping of duplicate keys: positions of a batch that share a key, pooled.

A batch may hold a key twice (an oversampled positive, a query drawn twice, a bag in two
rows). Every loss with per-key state pools the estimates of one key's positions into one
update and writes one row per key, so that the table is the same on every backend and under
every scatter order (the duplicate rule of :func:`xrisk._state.write_rows`).
:func:`group_keys` is that grouping, for every loss:

1. *rows*: each kept position reads and writes its own key; every other position is
   pointed at the first kept position's key (the *anchor*), so a step touches only the kept
   rows of a large table, and a position that is not kept repeats its anchor's write;
2. *group ids*: one sort of the keys and a binary search give every position the number of
   keys smaller than its row (:math:`\mathrm{id}_i = |\{j : k_j < r_i\}|`), the start of
   its segment in sorted order: equal rows share an id, distinct rows get distinct ids, all
   in ``[0, B)``. Integer comparisons, exact for any key (no float conversion, so no limit
   at :math:`2^{24}` and nothing different where JAX lacks float64). Keys already read on
   the host (an eager CPU batch) are ranked there by numpy: the same ids, cheaper than an
   eager framework's sort;
3. *segment reductions* through the backends' ``segment_sum`` / ``segment_max`` (numpy
   ``add.at``, torch ``index_add`` / ``scatter_reduce``, ``jax.ops.segment_*``,
   ``tf.math.unsorted_segment_*``) over ``B`` segments, read back at each position's id, so
   every member of a group gets the same value.

O(B log B) work and O(B) memory, static shapes, no branch on values (jit-safe); a batch
size known only at run time (a TensorFlow ``None`` dimension) gives a run-time number of
segments.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._typing import Array

__all__ = ["KeyGroups", "group_keys", "last_occurrence"]



class KeyGroups(NamedTuple):
    """Positions of a batch grouped by key (see :func:`group_keys`).

    Attributes
    ----------
    rows : array (B,)
        The key each position reads and writes: its own where kept, the anchor's elsewhere.
    anchor : array (1,), or None
        The first kept position (position 0 when nothing is kept); ``None`` where every
        position is kept (``all_kept``).
    ids : array (B,) of int
        Group of each position, in ``[0, B)``: equal for equal ``rows``, distinct otherwise.
    count : array (B,)
        Kept members of the position's group (float, the ``dtype`` of :func:`group_keys`);
        0 for every position of a batch where nothing is kept.
    keep : array (B,) of bool, or None
        The kept positions; ``None`` where every one is (``all_kept``).
    all_kept : bool
        Whether every position is kept (no ``keep`` given): the reductions then mask nothing.
    distinct : bool
        Whether, besides, every key is distinct (read on the host): each group is one
        position, and every reduction returns its values as they are, with no operation
        (an eager batch of distinct dataset indices, the usual one).
    """

    rows: Array
    anchor: Array | None
    ids: Array
    count: Array
    keep: Array | None
    segments: Any  #: number of segments, B (an int, or a run-time scalar on TensorFlow)
    backend: Any
    xp: Any
    all_kept: bool = False
    distinct: bool = False

    def sum(self, values: Array) -> Array:
        """Per position, the sum of ``values`` (B,) or (B, C) over its group's kept members.

        Each group is summed once, into its segment, and read back by every member: the
        members' results are equal whatever order a backend's scatter adds in.
        """
        if self.distinct:
            return values
        xp = self.xp
        masked = values
        if not self.all_kept:
            masked = xp.where(_column(self.keep, values, xp), values, xp.zeros_like(values))
        totals = self.backend.segment_sum(masked, self.ids, self.segments)
        return xp.take(totals, self.ids, axis=0)

    def mean(self, values: Array) -> Array:
        """Per position, the mean of ``values`` (B,) or (B, C) over its group's kept
        members; 0 where the group has none (the count is floored at 1)."""
        if self.distinct:
            return values
        xp = self.xp
        count = self.count if self.all_kept else xp.clip(self.count, 1, None)  # all: >= 1
        return self.sum(values) / (count if len(values.shape) == 1
                                   else xp.expand_dims(count, 1))

    def max(self, values: Array, low: Any) -> Array:
        """Per position, the maximum of ``values`` (B,) over its group's kept members;
        ``low`` (below every value) where the group has none."""
        if self.distinct:
            return values
        xp = self.xp
        masked = values if self.all_kept else xp.where(self.keep, values, low)
        top = self.backend.segment_max(masked, self.ids, self.segments)
        return xp.take(top, self.ids, axis=0)

    def log_mean_exp(self, values: Array) -> Array:
        r"""Per position, :math:`\log \mathrm{mean}_j e^{v_j}` over its group's kept members
        :math:`j` (``values`` (B,)), shifted by the group's maximum (no overflow); the
        position's own value where the group has no kept member."""
        if self.distinct:
            return values
        xp = self.xp
        if self.all_kept:  # every group has its members: nothing to mask, no empty group
            top = self.max(values, None)
            return self._one_per_group(top + xp.log(self.mean(xp.exp(values - top))))
        top = self.max(values, xp.min(values))
        spread = xp.where(self.keep, values - top, xp.zeros_like(values))
        mean = self.mean(xp.exp(spread))
        pooled = self._one_per_group(top + xp.log(xp.where(self.count > 0, mean,
                                                           xp.ones_like(mean))))
        return xp.where(self.count > 0, pooled, values)

    def _one_per_group(self, values: Array) -> Array:
        """``values`` (B,), equal within each group up to the last bit, made equal: each
        member reads its group's maximum. TensorFlow's and XLA's CPU kernels round a
        transcendental function (``log``) by position (a vectorised body, a scalar tail), so
        equal inputs may give results a unit in the last place apart."""
        top = self.backend.segment_max(values, self.ids, self.segments)
        return self.xp.take(top, self.ids, axis=0)

    def spread(self, new: Array, old: Array) -> Array:
        """Rows to write, one per key: every position gets the ``new`` row of its group's
        last kept position, or its ``old`` row where the group has no kept member (a batch
        where nothing is kept writes back what it read).

        For rows not already equal per group (a kept position's own terms, a position that
        is not kept): with them, any scatter order writes the rule's table. ``new`` and
        ``old`` have shape (B, ...).
        """
        if self.distinct:  # each position is its group's last kept one
            return new
        xp = self.xp
        positions = xp.arange(self.segments, dtype=self.ids.dtype,
                              device=self.backend.device(self.ids))
        if not self.all_kept:  # every position kept: each is its own candidate
            positions = xp.where(self.keep, positions, -xp.ones_like(positions))
        last = self.backend.segment_max(positions, self.ids, self.segments)
        last = xp.take(last, self.ids, axis=0)
        source = xp.take(new, xp.clip(last, 0, None), axis=0)
        return xp.where(_column(last >= 0, new, xp), source, old)

    def same(self, dtype: Any) -> Array:
        """(B, B) 1.0 where positions i and j are in one group, 0.0 elsewhere (the diagonal
        included), in ``dtype``: for losses whose pair terms need the mask (the contrastive
        negatives). A float test of the group ids, which are below B and so exact in float32
        for any B that fits a B x B matrix (a subtraction and a product cost less than an
        integer comparison and the cast of its boolean result)."""
        xp = self.xp
        ids = xp.astype(self.ids, dtype)
        gap = xp.expand_dims(ids, 1) - xp.expand_dims(ids, 0)
        return 1 - xp.clip(gap * gap, None, 1)


def _column(mask: Array, like: Array, xp: Any) -> Array:
    """``mask`` (B,) shaped to broadcast against ``like`` (B, ...)."""
    extra = len(like.shape) - 1
    return mask if extra == 0 else xp.reshape(mask, (-1,) + (1,) * extra)


def group_keys(keys: Array, keep: Array | None = None, *, backend: Any, xp: Any,
               dtype: Any, host: np.ndarray | None = None) -> KeyGroups:
    """Group the positions of ``keys`` by value, pooling only the ``keep`` positions.

    Parameters
    ----------
    keys : array (B,) of int
        The keys (dataset indices, interaction or query ids); any integers.
    keep : array (B,) of bool, optional
        Positions whose values enter the pooled reductions (default: all). The others are
        pointed at the first kept position's key (the *anchor*) and take its group's
        results, so that their writes repeat its row.
    backend, xp
        The backend module (its ``segment_sum`` / ``segment_max``) and namespace of ``keys``.
    dtype
        Float dtype of ``count``.
    host : numpy array, optional
        The values of ``keys`` already read on the host (an eager CPU batch, whose values
        the input checks read: :attr:`xrisk.losses.Step.host`), or of an input of which
        ``keys`` is an increasing function (the multi-label losses shift the index per
        label): only their ranks are used. They are ranked there, by
        numpy, instead of on the device: the same ids (the same integers), at a fraction of
        the cost of an eager torch sort and binary search (~20x for 2,560 keys).

    Returns
    -------
    KeyGroups
        ``rows``, ``anchor``, group ``ids``, ``count`` and the reductions ``sum``, ``mean``,
        ``max``, ``log_mean_exp``, the one-row-per-key ``spread`` and the pair mask ``same``.

    Notes
    -----
    With the keys :math:`k` (B,), position i's group is the rank of its row among the keys,
    :math:`\\mathrm{id}_i = |\\{j : k_j < r_i\\}|`, found by one sort of :math:`k` and one
    binary search (``searchsorted``): O(B log B). A group's reductions run over its segment
    (``segment_sum``/``segment_max`` of B segments), then are gathered back at each member's
    id. No argsort: a stable sort of (key, position) pairs costs several times a sort of the
    keys on XLA's CPU backend.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> from xrisk.backends import get_backend
    >>> groups = group_keys(np.array([7, 3, 7, 5]), np.array([True, True, True, False]),
    ...                     backend=get_backend("numpy"), xp=xp, dtype=xp.float64)
    >>> groups.rows.tolist(), groups.count.tolist()
    ([7, 3, 7, 7], [2.0, 1.0, 2.0, 2.0])
    >>> groups.mean(np.array([1.0, 2.0, 3.0, 100.0])).tolist()
    [2.0, 2.0, 2.0, 2.0]
    """
    size = keys.shape[0]
    segments = backend.axis_size(keys, 0) if size is None else size
    here = backend.device(keys)  # what the step creates lives on the keys' device
    # The rank of each key among the keys: equal keys, equal ranks, all in [0, B).
    host_ranks = None
    if host is None:
        ranks = xp.searchsorted(xp.sort(keys), keys)
    else:
        # Array methods where numpy has them: its module functions add a dispatch layer that
        # costs more than the work on a batch's keys (np.reshape 1.8 µs against 0.1 µs).
        flat = np.asarray(host).reshape(-1)
        ordered = np.sort(flat)
        host_ranks = ordered.searchsorted(flat)
        if keep is not None and backend.inspectable(keep):
            return _host_kept_groups(keys, keep, host_ranks, backend, xp, dtype, here)
        ranks = xp.asarray(host_ranks, device=here)
    if keep is not None:
        positions = xp.arange(segments, dtype=keys.dtype, device=here)
        bound = segments if size is not None else xp.astype(segments, keys.dtype)
        first = xp.min(xp.where(keep, positions, positions + bound))
        anchor = xp.reshape(first % bound, (1,))  # nothing kept: position 0
        rows = xp.where(keep, keys, xp.take(keys, anchor, axis=0))
        # Rows are keys, so the keys' ranks tell rows apart as well.
        ids = xp.where(keep, ranks, xp.take(ranks, anchor, axis=0))
        count = xp.take(backend.segment_sum(xp.astype(keep, dtype), ids, segments), ids, axis=0)
        return KeyGroups(rows, anchor, ids, count, keep, segments, backend, xp)
    distinct = False
    if host_ranks is not None:  # the groups' sizes from the host's ranks: the same integers
        sizes = np.bincount(host_ranks, minlength=size)[host_ranks]
        count = xp.astype(xp.asarray(sizes, device=here), dtype)
        distinct = not (ordered[1:] == ordered[:-1]).any()
    else:
        count = xp.take(backend.segment_sum(xp.ones_like(keys, dtype=dtype), ranks, segments),
                        ranks, axis=0)
    # Every position kept: no anchor and no mask (no reduction reads them).
    return KeyGroups(keys, None, ranks, count, None, segments, backend, xp, all_kept=True,
                     distinct=distinct)


def _host_kept_groups(keys: Array, keep: Array, ranks: np.ndarray, backend: Any, xp: Any,
                      dtype: Any, here: Any) -> KeyGroups:
    """:func:`group_keys` with ``keep`` where the host reads the keys' ranks and ``keep``:
    the device path's anchor, group ids and counts (integers, so the same values bit for
    bit) computed by numpy, then moved over, and the rows gathered from ``keys`` at the
    positions they come from; a handful of host operations and one gather in place of a
    dozen eager device operations.

    The host reading only ranks (``ranks``): a caller may pass the reading of an input
    whose keys are an order-preserving function of it (the multi-label losses shift the
    index per label), so no value of the rows is taken from it.
    """
    kept = np.asarray(backend.to_numpy(keep), dtype=bool).reshape(-1)
    size = kept.shape[0]
    members = kept.nonzero()[0]
    first = int(members[0]) if members.size else 0  # nothing kept: position 0
    ids = np.where(kept, ranks, ranks[first])
    # kept members per group, read back at each position (the device's segment sum of 1s)
    count = np.bincount(ids[kept], minlength=size)[ids]
    # the position each row is read from: its own where kept, the anchor's elsewhere
    source = xp.asarray(np.where(kept, np.arange(size), first), device=here)
    anchor = xp.asarray(np.array([first]), device=here)
    if anchor.dtype != keys.dtype:  # positions in the keys' dtype, as the device path's
        anchor = xp.astype(anchor, keys.dtype)
    return KeyGroups(xp.take(keys, source, axis=0), anchor, xp.asarray(ids, device=here),
                     xp.astype(xp.asarray(count, device=here), dtype), keep, size, backend,
                     xp)


def last_occurrence(index: Array, *, backend: Any, xp: Any) -> Array:
    """For each position of ``index`` (B,), the position of the last entry with the same
    value: the duplicate rule's winner (:func:`xrisk._state.write_rows`). O(B log B)."""
    groups = group_keys(index, backend=backend, xp=xp, dtype=xp.float32)
    positions = xp.arange(groups.segments, dtype=groups.ids.dtype,
                          device=backend.device(groups.ids))
    last = backend.segment_max(positions, groups.ids, groups.segments)
    return xp.astype(xp.take(last, groups.ids, axis=0), index.dtype)
