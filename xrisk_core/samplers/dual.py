"""``DualSampler``: binary mini-batches with a fixed number of positives."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arguments import check_count
from .._inputs import binary_labels, preview
from ._base import (
    NEG_STREAM,
    POS_STREAM,
    BaseSampler,
    check_seed,
    chunk,
    cyclic_stream,
    libauc_guard,
    resolve_num_pos,
)

__all__ = ["DualSampler"]


class DualSampler(BaseSampler):
    """Batches of exactly ``num_pos`` positives followed by ``num_neg`` negatives.

    Parameters
    ----------
    labels : array_like, shape (num_samples,) or (num_samples, 1)
        Binary labels in {0, 1} (numpy, torch, TensorFlow or JAX array, or a list). LibAUC
        takes the dataset first; here pass its labels, e.g. ``dataset.targets``.
    batch_size : int
        Items per batch, ``num_pos + num_neg``; at most ``num_samples``.
    sampling_rate : float, optional
        Share of positives per batch, in (0, 1): ``num_pos = max(1, int(sampling_rate *
        batch_size))``. Default 0.5 when ``num_pos`` is not given either.
    num_pos : int, optional
        Positives per batch, in ``[1, batch_size - 1]``; excludes ``sampling_rate``.
    shuffle : bool, default True
        If False, positives and negatives are visited in dataset order, cycle after cycle.
    seed : int, default 2023
        Seed of this sampler's generators (the global numpy RNG is never touched); LibAUC's
        ``random_seed``.

    Yields
    ------
    numpy.ndarray of int64, shape (batch_size,)
        ``num_pos`` positive indices, then ``num_neg`` negative ones (a fresh array). A shard
        yields ``batch_size // world_size`` of them, the same composition.

    Notes
    -----
    An epoch has ``max(num_positives // num_pos, num_negatives // num_neg)`` batches
    (LibAUC's length), so the larger share is seen about once and the other class is
    recycled. Each class is read from a stream of cycles: every cycle is a fresh permutation of
    the class, and a cycle's leftovers are used before the next cycle starts, so within a cycle
    no item is lost or repeated (LibAUC 2.0.1 shuffles the leftover slice in place, a view of
    the permutation, so some items are lost and others repeated). Each epoch starts a new stream
    at its first cycle. No index repeats inside a batch unless a class has fewer items than the
    batch asks for; then every item of that class appears ``k // n`` or ``k // n + 1`` times in
    the batch (``k`` asked, ``n`` available), which also covers ``num_neg > num_negatives``
    (LibAUC 2.0.1 crashes there).

    Every batch is a pure function of ``(seed, epoch, position)``; see
    :meth:`~xrisk.samplers.DualSampler.batch`, :meth:`set_epoch`, :meth:`state_dict`,
    :meth:`shard`. To resume a training loop, save ``state_dict(batches_consumed=i + 1)``
    (see :mod:`xrisk.samplers`).

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.samplers import DualSampler
    >>> labels = np.array([1, 1, 1] + [0] * 17)
    >>> sampler = DualSampler(labels, 8, sampling_rate=0.25, seed=0)
    >>> len(sampler), sampler.num_pos, sampler.num_neg
    (2, 2, 6)
    >>> batch = sampler.batch(0)
    >>> batch.shape, labels[batch].tolist()
    ((8,), [1, 1, 0, 0, 0, 0, 0, 0])
    """

    _owner = "DualSampler"

    @libauc_guard(
        "labels",
        "DualSampler(labels, batch_size, *, sampling_rate=None, num_pos=None, shuffle=True, "
        "seed=2023)",
        "DualSampler(dataset.targets, batch_size, ...)",
        {
            "random_seed": lambda v: f"seed={v!r}",
            "dataset": lambda v: "the labels first, DualSampler(dataset.targets, batch_size, ...)",
            "batch_size_per_gpu": lambda v: (
                f"batch_size=world_size * {v!r} (the global batch) and "
                "sampler.shard(rank, world_size) on every rank"
            ),
            "batch_size_per_task": lambda v: f"batch_size={v!r} (TriSampler has per-task sizes)",
            "num_sampled_tasks": lambda v: (
                "nothing: DualSampler has a single task (LibAUC ignores it as well); for several "
                "tasks use TriSampler(labels, batch_size_per_task, num_sampled_tasks=...)"
            ),
        },
    )
    def __init__(
        self,
        labels: Any,
        batch_size: int,
        *,
        sampling_rate: float | None = None,
        num_pos: int | None = None,
        shuffle: bool = True,
        seed: int = 2023,
    ) -> None:
        owner = self._owner
        y = binary_labels(owner, labels)
        self.batch_size = check_count(owner, "batch_size", batch_size, minimum=2)
        if self.batch_size > y.size:
            raise ValueError(
                f"{owner}: batch_size={self.batch_size} is larger than the data "
                f"({y.size} labels); expected batch_size <= {y.size}. Fix: lower batch_size."
            )
        # int32 pools halve the memory traffic of the per-epoch shuffles; batches are int64
        dtype = np.int32 if y.size < 2**31 else np.int64
        self.pos_index = np.flatnonzero(y == 1).astype(dtype)
        self.neg_index = np.flatnonzero(y == 0).astype(dtype)
        if self.pos_index.size == 0 or self.neg_index.size == 0:
            raise ValueError(
                f"{owner}: labels hold a single class {preview(np.unique(y))}; expected both "
                "0 and 1. Fix: pass labels that contain positives and negatives."
            )
        self.num_pos = resolve_num_pos(
            owner, self.batch_size, sampling_rate, num_pos, size_name="batch_size"
        )
        self.num_neg = self.batch_size - self.num_pos
        self.num_samples = int(y.size)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(owner, seed)
        self._num_batches = max(
            self.pos_index.size // self.num_pos, self.neg_index.size // self.num_neg, 1
        )
        self._cache: dict[int, np.ndarray] = {}
        self._init_state()

    def _num_global_batches(self) -> int:
        return self._num_batches

    def _plan(self, epoch: int) -> np.ndarray:
        plan = self._cache.get(epoch)
        if plan is None:
            nb, common = self._num_batches, {"seed": self.seed}
            plan = np.empty((nb, self.batch_size), dtype=np.int64)
            plan[:, : self.num_pos] = cyclic_stream(
                self.pos_index,
                nb,
                self.num_pos,
                key=(epoch, POS_STREAM),
                shuffle=self.shuffle,
                **common,
            )
            plan[:, self.num_pos :] = cyclic_stream(
                self.neg_index,
                nb,
                self.num_neg,
                key=(epoch, NEG_STREAM),
                shuffle=self.shuffle,
                **common,
            )
            self._cache.clear()
            self._cache[epoch] = plan
        return plan

    def _global_batch(self, epoch: int, position: int) -> tuple[np.ndarray, ...]:
        return (self._plan(epoch)[position],)

    def _global_epoch(self, epoch: int) -> tuple[np.ndarray, ...]:
        return (self._plan(epoch),)

    def _check_shardable(self, world_size: int) -> None:
        for what, count in (("num_pos", self.num_pos), ("num_neg", self.num_neg)):
            if count % world_size:
                raise self._even_split_error(what, count, world_size)

    def _split(self, parts: tuple[np.ndarray, ...], rank: int, world_size: int) -> tuple[Any, ...]:
        batch = parts[0]
        axis = batch.ndim - 1
        pos = chunk(batch[..., : self.num_pos], axis, rank, world_size)
        neg = chunk(batch[..., self.num_pos :], axis, rank, world_size)
        return (np.concatenate([pos, neg], axis=axis),)
