"""``RandomSampler``: plain shuffled batches (the contrastive family), seeded like the others."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arguments import check_count
from ._base import ORDER_STREAM, BaseSampler, check_seed, chunk, generator, libauc_guard

__all__ = ["RandomSampler"]


class RandomSampler(BaseSampler):
    """Shuffled dataset indices in batches of ``batch_size``.

    Parameters
    ----------
    num_samples : int
        Dataset size; indices are ``0 .. num_samples - 1``.
    batch_size : int
        Indices per batch, at most ``num_samples``.
    drop_last : bool, default True
        Drop the incomplete last batch (contrastive losses want full batches). If False the
        last batch is shorter.
    shuffle : bool, default True
        If False, the indices come in order.
    seed : int, default 2023

    Yields
    ------
    numpy.ndarray of int64, shape (batch_size,)
        Dataset indices (a fresh array); the last batch is shorter if ``drop_last=False``.

    Notes
    -----
    Epoch ``e`` is a permutation drawn from ``numpy.random.default_rng([seed, e, ...])``, so
    every batch is a pure function of ``(seed, epoch, position)``; each index appears at most
    once per epoch (exactly once if ``drop_last=False``).

    Examples
    --------
    >>> from xrisk.samplers import RandomSampler
    >>> sampler = RandomSampler(10, 4, seed=0)
    >>> len(sampler), sampler.batch(0).shape
    (2, (4,))
    """

    _owner = "RandomSampler"

    @libauc_guard(
        "num_samples",
        "RandomSampler(num_samples, batch_size, *, drop_last=True, shuffle=True, seed=2023)",
        "RandomSampler(len(dataset), batch_size)",
        {
            "random_seed": lambda v: f"seed={v!r}",
            "dataset": lambda v: "num_samples=len(dataset)",
            "data_source": lambda v: "num_samples=len(data_source)",
            "generator": lambda v: (
                "seed=<int> (batches are a pure function of (seed, epoch, position); no "
                "generator object is used)"
            ),
        },
    )
    def __init__(
        self,
        num_samples: int,
        batch_size: int,
        *,
        drop_last: bool = True,
        shuffle: bool = True,
        seed: int = 2023,
    ) -> None:
        owner = self._owner
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.batch_size = check_count(owner, "batch_size", batch_size)
        if self.batch_size > self.num_samples:
            raise ValueError(
                f"{owner}: batch_size={self.batch_size} is larger than the data "
                f"(num_samples={self.num_samples}); expected batch_size <= num_samples. "
                "Fix: lower batch_size."
            )
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(owner, seed)
        full, rest = divmod(self.num_samples, self.batch_size)
        self._num_batches = full + (1 if rest and not self.drop_last else 0)
        self._cache: dict[int, np.ndarray] = {}
        self._stackable = self.drop_last or self.num_samples % self.batch_size == 0
        self._init_state()

    def _num_global_batches(self) -> int:
        return self._num_batches

    def _order(self, epoch: int) -> np.ndarray:
        if epoch not in self._cache:
            order = np.arange(self.num_samples, dtype=np.int64)
            if self.shuffle:
                order = generator(self.seed, epoch, ORDER_STREAM).permutation(order)
            self._cache.clear()
            self._cache[epoch] = order
        return self._cache[epoch]

    def _global_batch(self, epoch: int, position: int) -> tuple[np.ndarray, ...]:
        start = position * self.batch_size
        return (self._order(epoch)[start : start + self.batch_size],)

    def _global_epoch(self, epoch: int) -> tuple[np.ndarray, ...]:
        if not self.drop_last and self.num_samples % self.batch_size:
            raise ValueError(
                f"{self._owner}: with drop_last=False the last batch is shorter, so the epoch "
                "cannot be stacked into one array; expected drop_last=True for epoch_batches(). "
                "Fix: iterate the sampler or call batch(position) instead."
            )
        used = self._num_batches * self.batch_size
        return (self._order(epoch)[:used].reshape(self._num_batches, self.batch_size),)

    def _check_shardable(self, world_size: int) -> None:
        if self.batch_size % world_size:
            raise self._even_split_error("batch_size", self.batch_size, world_size)
        if not self.drop_last and self.num_samples % self.batch_size % world_size:
            raise self._even_split_error(
                "the last batch size", self.num_samples % self.batch_size, world_size
            )

    def _split(self, parts: tuple[np.ndarray, ...], rank: int, world_size: int) -> tuple[Any, ...]:
        batch = parts[0]
        return (chunk(batch, batch.ndim - 1, rank, world_size),)
