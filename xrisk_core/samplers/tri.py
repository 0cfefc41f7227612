"""``TriSampler``: controlled batches of tasks (multi-label) or of queries (ranking)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._inputs import binary_labels, class_labels, preview, to_numpy
from .._validation import check_choice, check_count
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
from ._interactions import Interactions

__all__ = ["TriSampler"]

_MODES = ("classification", "ranking")


class TriSampler(BaseSampler):
    """Batches of tasks (or queries), each with a controlled number of positives and negatives.

    Parameters
    ----------
    labels : array_like
        ``mode="classification"``: multi-label targets, shape (num_samples, num_labels), in
        {0, 1}; 1-D integer class ids of shape (num_samples,) are one-hot encoded (class ``c``
        is task ``c``).
        ``mode="ranking"``: the interactions, either an integer array of shape
        (num_interactions, 2) or (num_interactions, 3) with rows ``(query, item[, relevance])``,
        or a scipy sparse matrix of shape (num_queries, num_items) whose stored entries are the
        relevances (LibAUC's dense (num_items, num_users) matrix ``m`` is
        ``scipy.sparse.csr_matrix(m.T)``). LibAUC takes the dataset first; here pass its
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
        Default ``max(item) + 1`` (or the sparse matrix's column count).

    Yields
    ------
    classification : (indices, task_ids)
        Two int64 arrays of shape (num_sampled_tasks * batch_size_per_task,): for every
        sampled task, ``num_pos`` positives then ``num_neg`` negatives of that task, and the
        task id of each entry.
    ranking : (item_ids, query_ids)
        int64 arrays of shape (num_sampled_tasks, num_pos + num_neg) and (num_sampled_tasks,):
        per sampled query, ``num_pos`` relevant items then ``num_neg`` unrated items.
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
        "num_pos=None, mode='classification', shuffle=True, seed=2023, num_items=None)",
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
            if num_items is not None:
                raise ValueError(
                    f"{owner}: num_items={num_items!r} was given in classification mode; "
                    "expected None. Fix: drop num_items or use mode='ranking'."
                )
            self._init_classification(labels, num_sampled_tasks)
        else:
            self._init_ranking(labels, num_sampled_tasks, num_items)
        self._init_state()

    # -- classification --------------------------------------------------------------------
    def _init_classification(self, labels: Any, num_sampled_tasks: int | None) -> None:
        owner = self._owner
        values = to_numpy(labels)
        if values.ndim == 2 and values.shape[1] > 1:
            y = binary_labels(owner, values, allow_2d=True).astype(bool)
        else:
            classes = class_labels(owner, values)
            y = classes[:, None] == np.arange(classes.max() + 1)[None, :]
        self._labels = y
        self.num_samples, self.num_tasks = y.shape
        counts = y.sum(axis=0)
        for what, bad in (("positive", counts == 0), ("negative", counts == self.num_samples)):
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
                np.flatnonzero(~column),
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
    def _init_ranking(self, labels: Any, num_sampled_tasks: int | None, num_items: Any) -> None:
        self._interactions = Interactions.build(self._owner, labels, num_items)
        data = self._interactions
        self.num_items, self.num_queries = data.num_items, data.num_queries
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
