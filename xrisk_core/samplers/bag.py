"""``BagSampler``: batches of bags with a fixed number of instances each (multi-instance AUC)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arguments import check_count
from ._base import BATCH_STREAM, ORDER_STREAM, BaseSampler, check_seed, chunk, generator

__all__ = ["BagSampler"]


class BagSampler(BaseSampler):
    """Shuffled bags in batches of ``batch_size``, each with ``num_instances`` of its instances.

    The instances of all bags are one flat array, bag after bag (bag ``b`` holds the
    instances ``offsets[b] .. offsets[b] + bag_sizes[b] - 1``); a batch names the bags, the
    instances drawn from each and which of them are real, so every batch has the same shape
    whatever the bag sizes (no retrace under ``jax.jit`` / ``tf.function``).

    Parameters
    ----------
    bag_sizes : array-like of int, shape (num_bags,)
        Number of instances of every bag, each >= 1.
    batch_size : int
        Bags per batch, at most ``num_bags``.
    num_instances : int
        Instances drawn per bag (K). A bag with more draws K distinct ones at random; a bag
        with fewer gives all of its instances, then padding (mask 0).
    drop_last : bool, default True
        Drop the incomplete last batch of bags. If False the last batch is shorter.
    shuffle : bool, default True
        If False, bags come in order and each bag gives its first K instances.
    seed : int, default 2023

    Yields
    ------
    (bags, instances, mask) : tuple of numpy.ndarray of int64
        ``bags`` (B,): bag indices (the ``index`` of the MIDAM losses); ``instances`` (B, K):
        indices into the flat instance array, all of row i within bag ``bags[i]`` (padding
        repeats the bag's first instance, so a gather stays inside the bag); ``mask`` (B, K):
        1 for a drawn instance, 0 for padding. Fresh arrays.

    Notes
    -----
    Epoch ``e`` orders the bags by a permutation from
    ``numpy.random.default_rng([seed, e, ...])`` and batch ``p`` draws its instances from
    ``default_rng([seed, e, ..., p])``: every batch is a pure function of ``(seed, epoch,
    position)``, never of the global RNG, so ``state_dict`` / ``load_state_dict`` resume a run
    exactly (see :mod:`xrisk.samplers`). Within a batch, the instances of a bag are distinct.
    A bag's instances differ between epochs (each epoch draws afresh), which is what MIDAM's
    moving averages of the pooled values expect.

    Examples
    --------
    >>> from xrisk.samplers import BagSampler
    >>> sampler = BagSampler([3, 1, 5, 2], batch_size=2, num_instances=2, seed=0)
    >>> bags, instances, mask = sampler.batch(0)
    >>> bags.shape, instances.shape, mask.shape
    ((2,), (2, 2), (2, 2))
    >>> sampler.offsets.tolist()  # bag b holds instances offsets[b] .. offsets[b] + size - 1
    [0, 3, 4, 9]
    """

    _owner = "BagSampler"

    def __init__(self, bag_sizes: Any, batch_size: int, num_instances: int, *,
                 drop_last: bool = True, shuffle: bool = True, seed: int = 2023) -> None:
        owner = self._owner
        sizes = _bag_sizes(owner, bag_sizes)
        self.bag_sizes = sizes
        self.num_bags = int(sizes.shape[0])
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.batch_size = check_count(owner, "batch_size", batch_size)
        if self.batch_size > self.num_bags:
            raise ValueError(
                f"{owner}: batch_size={self.batch_size} is larger than the number of bags "
                f"({self.num_bags}); expected batch_size <= num_bags. Fix: lower batch_size."
            )
        self.num_instances = check_count(owner, "num_instances", num_instances)
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(owner, seed)
        full, rest = divmod(self.num_bags, self.batch_size)
        self._num_batches = full + (1 if rest and not self.drop_last else 0)
        self._stackable = self.drop_last or rest == 0
        self._cache: dict[int, np.ndarray] = {}
        self._init_state()

    def _num_global_batches(self) -> int:
        return self._num_batches

    def _order(self, epoch: int) -> np.ndarray:
        if epoch not in self._cache:
            order = np.arange(self.num_bags, dtype=np.int64)
            if self.shuffle:
                order = generator(self.seed, epoch, ORDER_STREAM).permutation(order)
            self._cache.clear()
            self._cache[epoch] = order
        return self._cache[epoch]

    def _global_batch(self, epoch: int, position: int) -> tuple[np.ndarray, ...]:
        start = position * self.batch_size
        bags = self._order(epoch)[start : start + self.batch_size]
        instances, mask = self._draw(bags, epoch, position)
        return bags, instances, mask

    def _draw(self, bags: np.ndarray, epoch: int, position: int
              ) -> tuple[np.ndarray, np.ndarray]:
        """K instances per bag: distinct random ones (the first K without shuffling), then
        padding that repeats the bag's first instance, with mask 0."""
        k = self.num_instances
        sizes = self.bag_sizes[bags]
        width = max(int(sizes.max()), k)
        local = np.arange(width)
        if self.shuffle:
            # Random keys, +inf beyond each bag's size: the K smallest are K distinct
            # instances drawn uniformly without replacement (all of them for a small bag).
            keys = generator(self.seed, epoch, BATCH_STREAM, position).random(
                (bags.shape[0], width))
            keys[local[None, :] >= sizes[:, None]] = np.inf
            chosen = np.argsort(keys, axis=1, kind="stable")[:, :k]
        else:
            chosen = np.broadcast_to(local[:k], (bags.shape[0], k))
        mask = chosen < sizes[:, None]
        chosen = np.where(mask, chosen, 0)
        return self.offsets[bags][:, None] + chosen, mask.astype(np.int64)

    def _check_shardable(self, world_size: int) -> None:
        if self.batch_size % world_size:
            raise self._even_split_error("batch_size", self.batch_size, world_size)
        if not self.drop_last and self.num_bags % self.batch_size % world_size:
            raise self._even_split_error(
                "the last batch size", self.num_bags % self.batch_size, world_size)

    def _split(self, parts: tuple[np.ndarray, ...], rank: int, world_size: int
               ) -> tuple[Any, ...]:
        # Every part has the batch on its first axis (after the epoch axis of a stacked epoch).
        axis = 1 if parts[0].ndim == 2 else 0
        return tuple(chunk(part, axis, rank, world_size) for part in parts)

    def bag_of(self, instances: Any) -> np.ndarray:
        """The bag of every instance index (any shape): the inverse of ``offsets``."""
        values = np.asarray(instances)
        return np.searchsorted(self.offsets, values, side="right") - 1


def _bag_sizes(owner: str, bag_sizes: Any) -> np.ndarray:
    """``bag_sizes`` as a 1-D int64 array of integers >= 1; else TypeError/ValueError."""
    values = np.asarray(bag_sizes)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(
            f"{owner}: bag_sizes has shape {values.shape}; expected a non-empty 1-D array of "
            "instance counts, one per bag. Fix: pass e.g. bag_sizes=[len(b) for b in bags]."
        )
    if values.dtype.kind not in "iu":
        raise TypeError(
            f"{owner}: bag_sizes has dtype {values.dtype}; expected integers (instances per "
            "bag). Fix: pass whole numbers, e.g. np.asarray(bag_sizes, dtype=int)."
        )
    if values.min() < 1:
        bad = np.flatnonzero(values < 1)[:5].tolist()
        raise ValueError(
            f"{owner}: bag_sizes holds {values.min()} (bags {bad}); expected every bag to have "
            "at least 1 instance. Fix: drop empty bags before sampling."
        )
    return values.astype(np.int64)
