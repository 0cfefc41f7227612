"""``TriSampler``: controlled batches of tasks (multi-label) or of queries (ranking)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arguments import check_choice, check_count
from .._inputs import binary_labels, class_labels, preview, to_numpy
from ._base import (
    BATCH_STREAM,
    NEG_STREAM,
    ORDER_STREAM,
    POS_STREAM,
    TASK_STREAM,
    BaseSampler,
    check_seed,
    chunk,
    cyclic_stream,
    generator,
    libauc_guard,
    resolve_num_pos,
)
from ._interactions import LAYOUTS, Interactions

__all__ = ["TriSampler"]

_MODES = ("classification", "ranking")


class TriSampler(BaseSampler):
    """Batches of tasks (or queries), each with a controlled number of positives and negatives.

    Parameters
    ----------
    labels : array_like
        ``mode="classification"``: multi-label targets, shape (num_samples, num_labels), in
        {0, 1}, NaN where a label is missing (that example is then neither a positive nor a
        negative of that task and is never drawn for it); 1-D integer class ids of shape
        (num_samples,) are one-hot encoded (class ``c`` is task ``c``).
        ``mode="ranking"``: the interactions, either an integer array of shape
        (num_interactions, 2) or (num_interactions, 3) with rows ``(query, item[, relevance])``,
        or a scipy sparse matrix of shape (num_queries, num_items) whose stored entries are the
        relevances; with ``layout="items_by_queries"``, LibAUC's dense (num_items,
        num_users) relevance matrix (or a sparse one in that orientation), whose nonzero
        entries are the rated pairs. LibAUC takes the dataset first; here pass its
        labels, e.g. ``dataset.targets``. An item is relevant to a query if its relevance is
        > 0 (rows without a relevance column are all relevant); every listed item counts as
        rated.
    batch_size_per_task : int
        ``num_pos + num_neg``: items per task (or per query) in a batch.
    num_sampled_tasks : int, optional
        Tasks (or queries) per batch; default all tasks (classification) or 1 query (ranking).
    sampling_rate : float, optional
        Share of positives per task, in (0, 1); ``num_pos = max(1, int(sampling_rate *
        batch_size_per_task))``. Default 0.5 when ``num_pos`` is not given either.
    num_pos : int, optional
        Positives per task, in ``[1, batch_size_per_task - 1]``; excludes ``sampling_rate``.
    mode : {"classification", "ranking"}, default "classification"
    shuffle : bool, default True
        If False, tasks, positives and negatives are visited in order (classification).
    seed : int, default 2023
        LibAUC's ``random_seed``.
    num_items : int, optional
        Ranking only: the number of items (negatives are drawn from ``0 .. num_items - 1``).
        Default ``max(item) + 1`` (or the matrix's item count).
    layout : {"rows", "items_by_queries"}, optional
        Ranking only: how a 2-D ``labels`` array is read. Default (``None`` or ``"rows"``):
        rows ``(query, item[, relevance])`` (a scipy sparse matrix: queries x items).
        ``"items_by_queries"``: LibAUC's (num_items, num_users) matrix. A dense matrix is never
        guessed: one with 2 or 3 users has the shape of rows, so it must be declared.

    Yields
    ------
    classification : (indices, task_ids)
        Two int64 arrays of shape (num_sampled_tasks * batch_size_per_task,): for every
        sampled task, ``num_pos`` positives then ``num_neg`` negatives of that task, and the
        task id of each entry.
    ranking : (item_ids, query_ids)
        int64 arrays of shape (num_sampled_tasks, num_pos + num_neg) and (num_sampled_tasks,):
        per sampled query, ``num_pos`` relevant items then ``num_neg`` unrated items.
        :meth:`ranking_inputs` turns a batch into the other inputs of the ranking losses
        (interaction ids, relevance, mask of the padded positives, counts, ideal DCG).
    The arrays are fresh numpy arrays; to resume a training loop, save
    ``state_dict(batches_consumed=i + 1)`` (see :mod:`xrisk.samplers`).

    Notes
    -----
    Classification: an epoch has ``num_samples // (batch_size_per_task * num_sampled_tasks)``
    batches (LibAUC's length). The tasks of a batch are distinct; when fewer than all tasks
    are sampled they are read from a stream of task permutations. Each task's positives and
    negatives are read from streams of permutations as in
    :class:`~xrisk.samplers.DualSampler` (no item lost or repeated within a cycle, no duplicate
    within a batch unless the task has fewer items than asked for).

    Ranking: the interactions are stored as sorted per-query rows (CSR), never as a dense
    items x queries matrix. Queries without a relevant item are never sampled. An epoch visits
    ``num_active_queries // num_sampled_tasks`` batches of distinct queries (a permutation of
    the active queries). Per query, the positives are ``num_pos`` distinct relevant items
    drawn uniformly (if the query has fewer, each appears ``num_pos // n`` or
    ``num_pos // n + 1`` times); the negatives are ``num_neg`` distinct items drawn uniformly
    from the query's unrated items (the r-th unrated item is found by a binary search in the
    sorted row, no rejection loop over rated items). Negatives repeat only when the query has
    fewer than ``num_neg`` unrated items; then each appears ``num_neg // u`` or
    ``num_neg // u + 1`` times. A query whose items are all rated is an error.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.samplers import TriSampler
    >>> labels = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]] * 5)
    >>> sampler = TriSampler(labels, 4, num_sampled_tasks=2, num_pos=1, seed=0)
    >>> index, task = sampler.batch(0)
    >>> index.shape, task.shape
    ((8,), (8,))
    >>> bool(labels[index, task][::4].all())  # first item of every task is a positive
    True
    >>> pairs = np.array([[0, 3, 5.0], [0, 7, 4.0], [1, 2, 1.0]])
    >>> ranker = TriSampler(pairs, 4, num_sampled_tasks=2, num_pos=1, mode="ranking",
    ...                     num_items=10, seed=0)
    >>> items, queries = ranker.batch(0)
    >>> items.shape, queries.shape
    ((2, 4), (2,))
    """

    _owner = "TriSampler"

    @libauc_guard(
        "labels",
        "TriSampler(labels, batch_size_per_task, *, num_sampled_tasks=None, sampling_rate=None, "
        "num_pos=None, mode='classification', shuffle=True, seed=2023, num_items=None, "
        "layout=None)",
        "TriSampler(dataset.targets, batch_size_per_task, ...)",
        {
            "random_seed": lambda v: f"seed={v!r}",
            "dataset": lambda v: (
                "the labels first, TriSampler(dataset.targets, batch_size_per_task, ...)"
            ),
            "batch_size": lambda v: (
                f"batch_size_per_task={v!r} (items per task; a batch holds "
                "batch_size_per_task * num_sampled_tasks items)"
            ),
            "num_sampled_tasks_per_gpu": lambda v: (
                f"num_sampled_tasks={v!r} * world_size (the global count) and "
                "sampler.shard(rank, world_size) on every rank"
            ),
        },
    )
    def __init__(
        self,
        labels: Any,
        batch_size_per_task: int,
        *,
        num_sampled_tasks: int | None = None,
        sampling_rate: float | None = None,
        num_pos: int | None = None,
        mode: str = "classification",
        shuffle: bool = True,
        seed: int = 2023,
        num_items: int | None = None,
        layout: str | None = None,
    ) -> None:
        owner = self._owner
        mode = check_choice(owner, "mode", mode, _MODES, fix="use 'classification' for "
                            "multi-label targets or 'ranking' for interactions")
        self.mode = mode
        self._stackable = mode == "classification"
        self.batch_size_per_task = check_count(
            owner, "batch_size_per_task", batch_size_per_task, minimum=2
        )
        self.num_pos = resolve_num_pos(
            owner,
            self.batch_size_per_task,
            sampling_rate,
            num_pos,
            size_name="batch_size_per_task",
        )
        self.num_neg = self.batch_size_per_task - self.num_pos
        self.shuffle = bool(shuffle)
        self.seed = check_seed(owner, seed)
        self._cache: dict[int, tuple[np.ndarray, ...]] = {}
        if mode == "classification":
            for name, value in (("num_items", num_items), ("layout", layout)):
                if value is not None:
                    raise ValueError(
                        f"{owner}: {name}={value!r} was given in classification mode; "
                        f"expected None. Fix: drop {name} or use mode='ranking'."
                    )
            self._init_classification(labels, num_sampled_tasks)
        else:
            if layout is not None:
                layout = check_choice(owner, "layout", layout, LAYOUTS,
                                      fix="pass layout='rows' for (query, item[, relevance]) "
                                          "rows or 'items_by_queries' for LibAUC's matrix")
            self._init_ranking(labels, num_sampled_tasks, num_items, layout)
        self._init_state()

    # -- classification --------------------------------------------------------------------
    def _init_classification(self, labels: Any, num_sampled_tasks: int | None) -> None:
        owner = self._owner
        values = to_numpy(labels)
        if values.ndim == 2 and values.shape[1] > 1:
            # NaN marks a missing label (as in real multi-label data): that example is neither
            # a positive nor a negative of that task, so the task never draws it.
            known = ~np.isnan(values) if values.dtype.kind == "f" else np.ones(values.shape, bool)
            y = binary_labels(owner, np.where(known, values, 0), allow_2d=True).astype(bool)
        else:
            classes = class_labels(owner, values)
            y = classes[:, None] == np.arange(classes.max() + 1)[None, :]
            known = np.ones(y.shape, bool)
        self._labels, self._negatives = y, known & ~y
        self.num_samples, self.num_tasks = y.shape
        counts = y.sum(axis=0)
        negatives = self._negatives.sum(axis=0)
        for what, bad in (("positive", counts == 0), ("negative", negatives == 0)):
            if bad.any():
                raise ValueError(
                    f"{owner}: tasks {preview(np.flatnonzero(bad))} have no {what} example; "
                    "expected every task to have positives and negatives. Fix: drop those "
                    "label columns (or classes) before building the sampler."
                )
        self.num_sampled_tasks = self._check_num_tasks(num_sampled_tasks, self.num_tasks, "tasks")
        per_batch = self.batch_size_per_task * self.num_sampled_tasks
        if per_batch > self.num_samples:
            raise ValueError(
                f"{owner}: a batch of batch_size_per_task * num_sampled_tasks = {per_batch} "
                f"items is larger than the data ({self.num_samples} samples); expected at most "
                f"{self.num_samples}. Fix: lower batch_size_per_task or num_sampled_tasks."
            )
        self._num_batches = self.num_samples // per_batch

    def _check_num_tasks(self, value: int | None, available: int, what: str) -> int:
        if value is None:
            return available if self.mode == "classification" else 1
        count = check_count(self._owner, "num_sampled_tasks", value)
        if count > available:
            raise ValueError(
                f"{self._owner}: num_sampled_tasks={count} but only {available} {what} can be "
                f"sampled; expected num_sampled_tasks <= {available}. Fix: lower it."
            )
        return count

    def _task_plan(self, epoch: int) -> np.ndarray:
        nb, num_tasks, sampled = self._num_batches, self.num_tasks, self.num_sampled_tasks
        tasks = np.arange(num_tasks, dtype=np.int64)
        if sampled < num_tasks:
            return cyclic_stream(
                tasks, nb, sampled, seed=self.seed, key=(epoch, TASK_STREAM), shuffle=self.shuffle
            )
        rows = np.broadcast_to(tasks, (nb, num_tasks))
        if self.shuffle:
            rows = generator(self.seed, epoch, TASK_STREAM).permuted(rows, axis=1)
        return np.ascontiguousarray(rows)

    def _classification_epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        tasks = self._task_plan(epoch)
        flat = tasks.ravel()
        order = np.argsort(flat, kind="stable")
        counts = np.bincount(flat, minlength=self.num_tasks)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        out = np.empty((flat.size, self.batch_size_per_task), dtype=np.int64)
        common = {"seed": self.seed}
        for task in np.flatnonzero(counts):
            slots = order[bounds[task] : bounds[task + 1]]
            column = self._labels[:, task]
            out[slots, : self.num_pos] = cyclic_stream(
                np.flatnonzero(column),
                slots.size,
                self.num_pos,
                key=(epoch, POS_STREAM, int(task)),
                shuffle=self.shuffle,
                **common,
            )
            out[slots, self.num_pos :] = cyclic_stream(
                np.flatnonzero(self._negatives[:, task]),
                slots.size,
                self.num_neg,
                key=(epoch, NEG_STREAM, int(task)),
                shuffle=self.shuffle,
                **common,
            )
        shape = (self._num_batches, self.num_sampled_tasks * self.batch_size_per_task)
        task_ids = np.repeat(flat, self.batch_size_per_task)
        return out.reshape(shape), task_ids.reshape(shape)

    # -- ranking ---------------------------------------------------------------------------
    def _init_ranking(self, labels: Any, num_sampled_tasks: int | None, num_items: Any,
                      layout: str | None) -> None:
        data = Interactions.build(self._owner, labels, num_items, layout)
        if data.relevant_values is None:  # build() always fills it; the field defaults to None
            raise RuntimeError(
                f"{self._owner}: Interactions.build returned relevant_values=None; expected the "
                "relevance of every relevant pair. Fix: none on the caller's side; report this bug."
            )
        self._interactions = data
        #: (num_interactions,) float64: the relevance of each relevant pair, in key order.
        self._relevance: np.ndarray = data.relevant_values
        self.num_items, self.num_queries = data.num_items, data.num_queries
        #: Number of relevant (query, item) pairs: the ``interaction`` key space of the
        #: ranking losses (ids ``0 .. num_interactions - 1`` in (query, item) order).
        self.num_interactions = int(data.relevant_keys.size)
        self._ideal: dict[int | None, np.ndarray] = {}
        self.active_queries = data.active_queries
        self.num_tasks = int(self.active_queries.size)
        self.num_sampled_tasks = self._check_num_tasks(
            num_sampled_tasks, self.num_tasks, "queries with a relevant item"
        )
        self._num_batches = self.num_tasks // self.num_sampled_tasks

    def _query_plan(self, epoch: int) -> np.ndarray:
        if epoch not in self._cache:
            plan = cyclic_stream(
                self.active_queries,
                self._num_batches,
                self.num_sampled_tasks,
                seed=self.seed,
                key=(epoch, ORDER_STREAM),
                shuffle=self.shuffle,
            )
            self._cache.clear()
            self._cache[epoch] = (plan,)
        return self._cache[epoch][0]

    def _ranking_batch(self, epoch: int, position: int) -> tuple[np.ndarray, np.ndarray]:
        queries = self._query_plan(epoch)[position]
        rng = generator(self.seed, epoch, BATCH_STREAM, position)
        items = np.empty((queries.size, self.batch_size_per_task), dtype=np.int64)
        items[:, : self.num_pos] = self._interactions.sample_relevant(rng, queries, self.num_pos)
        items[:, self.num_pos :] = self._interactions.sample_unrated(rng, queries, self.num_neg)
        return items, queries.copy()

    def ranking_inputs(self, items: Any, queries: Any, *, ideal_k: int | None = None,
                       ) -> dict[str, np.ndarray]:
        r"""The inputs of the ranking losses for a batch ``(items, queries)`` of this sampler.

        Parameters
        ----------
        items : array_like of int, shape (Q, num_pos + num_neg)
            A ranking batch's items, the ``num_pos`` relevant ones first.
        queries : array_like of int, shape (Q,)
        ideal_k : int, optional
            Cut-off of the ideal DCG: ``None`` sums every relevant item (SONG, LibAUC); K gives
            the top-K ideal DCG :math:`Z^K_q` of K-SONG's objective.

        Returns
        -------
        dict of numpy arrays, keyed by the losses' input names
            ``query`` (Q,) int64; ``interaction`` (Q, num_pos) int64, the id of each (query,
            positive) pair in ``[0, num_interactions)``; ``relevance`` (Q, num_pos) float64;
            ``mask`` (Q, num_pos) bool, False on a repeat of an earlier positive of the row
            (the padding of a query with fewer than ``num_pos`` relevant items);
            ``num_relevant`` (Q,) float64, the query's count of relevant items; ``ideal_dcg``
            (Q,) float64, :math:`\sum_r (2^{y_r} - 1) / \log_2(r + 1)` over its relevances in
            decreasing order. Pass them with the scores, e.g. ``loss_fn(scores, **inputs)``
            (:class:`~xrisk.ListwiseCELoss` takes ``interaction`` and ``mask``).

        Raises
        ------
        ValueError
            A sampler in classification mode, wrong shapes, or a positive that is not a
            relevant item of its query.
        """
        owner = self._owner
        if self.mode != "ranking":
            raise ValueError(
                f"{owner}: ranking_inputs() needs mode='ranking'; this sampler has mode="
                f"{self.mode!r}. Fix: build TriSampler(..., mode='ranking')."
            )
        items = np.asarray(to_numpy(items))
        queries = np.asarray(to_numpy(queries))
        if (items.ndim != 2 or queries.ndim != 1 or items.shape[0] != queries.shape[0]
                or items.shape[1] != self.batch_size_per_task
                or items.dtype.kind not in "iu" or queries.dtype.kind not in "iu"):
            raise ValueError(
                f"{owner}: ranking_inputs got items of shape {items.shape} ({items.dtype}) and "
                f"queries of shape {queries.shape} ({queries.dtype}); expected integer arrays "
                f"of shapes (Q, {self.batch_size_per_task}) and (Q,). Fix: pass one batch of "
                "this sampler, items, queries = sampler.batch(i)."
            )
        data = self._interactions
        positives = items[:, : self.num_pos].astype(np.int64)
        queries = queries.astype(np.int64)
        bad = (queries < 0) | (queries >= data.num_queries)
        if bad.any():
            raise ValueError(
                f"{owner}: query ids {preview(np.unique(queries[bad]))} are outside [0, "
                f"{data.num_queries}); expected this sampler's queries. Fix: pass its batches."
            )
        keys = queries[:, None] * data.num_items + positives
        interaction = np.searchsorted(data.relevant_keys, keys)
        found = np.take(data.relevant_keys, np.minimum(interaction, data.relevant_keys.size - 1))
        missing = (found != keys) | (positives < 0) | (positives >= data.num_items)
        if missing.any():
            row, col = np.argwhere(missing)[0]
            raise ValueError(
                f"{owner}: item {int(positives[row, col])} at positive slot {int(col)} is not "
                f"a relevant item of query {int(queries[row])}; expected the num_pos="
                f"{self.num_pos} first items of every row to be relevant. Fix: pass a batch of "
                "this sampler unchanged."
            )
        earlier = np.tril(np.ones((self.num_pos, self.num_pos), dtype=bool), k=-1)
        repeat = ((positives[:, :, None] == positives[:, None, :]) & earlier).any(axis=2)
        counts = np.diff(data.relevant_ptr)
        return {
            "query": queries,
            "interaction": interaction.astype(np.int64),
            "relevance": self._relevance[interaction],
            "mask": ~repeat,
            "num_relevant": counts[queries].astype(np.float64),
            "ideal_dcg": self._ideal_dcg(ideal_k)[queries],
        }

    def _ideal_dcg(self, ideal_k: int | None) -> np.ndarray:
        """Ideal DCG (num_queries,) at cut-off ``ideal_k`` (None: every position), cached."""
        if ideal_k is not None:
            ideal_k = check_count(self._owner, "ideal_k", ideal_k)
        if ideal_k not in self._ideal:
            data = self._interactions
            counts = np.diff(data.relevant_ptr)
            row = np.repeat(np.arange(data.num_queries), counts)
            order = np.lexsort((-self._relevance, row))  # best first within each row
            rank = np.arange(row.size) - np.repeat(data.relevant_ptr[:-1], counts)
            gain = np.exp2(self._relevance[order]) - 1
            contribution = gain / np.log2(rank + 2.0)
            if ideal_k is not None:
                contribution = np.where(rank < ideal_k, contribution, 0.0)
            self._ideal[ideal_k] = np.bincount(row, contribution, minlength=data.num_queries)
        return self._ideal[ideal_k]

    # -- BaseSampler hooks -----------------------------------------------------------------
    def _num_global_batches(self) -> int:
        return self._num_batches

    def _global_epoch(self, epoch: int) -> tuple[np.ndarray, ...]:
        if self.mode == "ranking":
            return super()._global_epoch(epoch)
        plan = self._cache.get(epoch)
        if plan is None:
            plan = self._classification_epoch(epoch)
            self._cache.clear()
            self._cache[epoch] = plan
        return plan

    def _global_batch(self, epoch: int, position: int) -> tuple[np.ndarray, ...]:
        if self.mode == "ranking":
            return self._ranking_batch(epoch, position)
        indices, tasks = self._global_epoch(epoch)
        return indices[position], tasks[position]

    def _check_shardable(self, world_size: int) -> None:
        if self.num_sampled_tasks % world_size:
            raise self._even_split_error("num_sampled_tasks", self.num_sampled_tasks, world_size)

    def _split(self, parts: tuple[np.ndarray, ...], rank: int, world_size: int) -> tuple[Any, ...]:
        if self.mode == "ranking":
            items, queries = parts
            return (
                chunk(items, items.ndim - 2, rank, world_size),
                chunk(queries, queries.ndim - 1, rank, world_size),
            )
        shape = (*parts[0].shape[:-1], self.num_sampled_tasks, self.batch_size_per_task)
        out = []
        for part in parts:
            piece = chunk(part.reshape(shape), len(shape) - 2, rank, world_size)
            out.append(piece.reshape(*shape[:-2], -1))
        return tuple(out)
