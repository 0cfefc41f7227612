"""Shared machinery of the samplers: input checks, seeded streams, the epoch/position/shard logic.

Every batch is a pure function of ``(seed, epoch, position)``: random numbers come from
``numpy.random.default_rng([seed, epoch, stream, ...])`` generators created on demand, never from
numpy's global RNG, so two samplers built with the same arguments yield the same batches, and a
run resumed from ``state_dict()`` replays the batches it would have seen.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._validation import check_count

__all__ = [
    "BaseSampler",
    "cyclic_stream",
    "check_seed",
    "resolve_num_pos",
    "generator",
]

# Stream identifiers: each kind of random decision draws from its own generator.
POS_STREAM = 0
NEG_STREAM = 1
TASK_STREAM = 2
ORDER_STREAM = 3
BATCH_STREAM = 4


def check_seed(owner: str, seed: object) -> int:
    """Return ``seed`` as a non-negative int; else raise TypeError/ValueError."""
    return check_count(owner, "seed", seed, minimum=0)


def resolve_num_pos(
    owner: str, batch_size: int, sampling_rate: object, num_pos: object, *, size_name: str
) -> int:
    """Number of positives per batch from ``sampling_rate`` or ``num_pos`` (one of them).

    ``num_pos = max(1, int(sampling_rate * batch_size))`` as in LibAUC; the result must leave
    at least one negative, so it lies in ``[1, batch_size - 1]``.
    """
    if sampling_rate is not None and num_pos is not None:
        raise ValueError(
            f"{owner}: both sampling_rate={sampling_rate!r} and num_pos={num_pos!r} were given; "
            "expected one of them. Fix: pass only sampling_rate (a share) or only num_pos "
            "(a count)."
        )
    if num_pos is None:
        rate = 0.5 if sampling_rate is None else sampling_rate
        ok = isinstance(rate, int | float | np.floating) and not isinstance(rate, bool)
        if not ok or not 0 < rate < 1:  # type: ignore[operator]
            raise ValueError(
                f"{owner}: sampling_rate={rate!r}; expected a number in the open interval "
                "(0, 1), the share of positives per batch. Fix: e.g. sampling_rate=0.2."
            )
        num_pos = max(1, int(float(rate) * batch_size))  # type: ignore[arg-type]
    count = check_count(owner, "num_pos", num_pos)
    if count > batch_size - 1:
        raise ValueError(
            f"{owner}: num_pos={count} with {size_name}={batch_size} leaves no room for "
            f"negatives; expected 1 <= num_pos <= {size_name} - 1 = {batch_size - 1}. Fix: "
            f"lower num_pos or sampling_rate, or raise {size_name}."
        )
    return count


def generator(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng([seed, *key])


def _keep_head_apart(perm: np.ndarray, head: int, tail_items: np.ndarray) -> None:
    """Reorder ``perm`` in place so its first ``head`` entries avoid ``tail_items``.

    Entries of the head that also occur in ``tail_items`` (the previous cycle's leftovers that
    share the batch) are swapped with the first entries after the head that do not. ``perm``
    stays a permutation, so the cycle still holds every item exactly once.
    """
    if head == 0 or tail_items.size == 0:
        return
    clash = np.flatnonzero(np.isin(perm[:head], tail_items))
    if clash.size == 0:
        return
    window = perm[head : head + head + tail_items.size]
    free = head + np.flatnonzero(~np.isin(window, tail_items))[: clash.size]
    perm[clash], perm[free] = perm[free], perm[clash].copy()


def cyclic_stream(
    pool: np.ndarray,
    num_draws: int,
    per_draw: int,
    *,
    seed: int,
    key: tuple[int, ...],
    shuffle: bool,
) -> np.ndarray:
    """Draw ``num_draws`` groups of ``per_draw`` items from ``pool``, cycle after cycle.

    Parameters
    ----------
    pool : numpy.ndarray of int, shape (n,)
        Distinct items (e.g. the dataset indices of one class), n > 0.
    num_draws, per_draw : int
        The result has shape ``(num_draws, per_draw)``.
    seed : int
        Sampler seed.
    key : tuple of int
        Identifies the stream (e.g. ``(epoch, POS_STREAM, task)``).
    shuffle : bool
        If False every cycle is the pool in its given order.

    Returns
    -------
    numpy.ndarray of the pool's dtype, shape (num_draws, per_draw)
        Items of ``pool``.

    Notes
    -----
    If ``per_draw <= n``, the draws read consecutive stretches of a stream that is a
    concatenation of cycles; cycle ``c`` is a fresh permutation of the pool (generator
    ``[seed, *key, c]``). Each cycle holds every item exactly once, so nothing is lost or
    repeated within a cycle; a draw that straddles two cycles takes the leftovers of the old one
    first and the next cycle is reordered (:func:`_keep_head_apart`) so that the draw holds no
    item twice. If ``per_draw > n``, duplicates are unavoidable: each draw holds every item
    ``per_draw // n`` or ``per_draw // n + 1`` times (``per_draw // n`` full permutations, then
    the first ``per_draw % n`` items of one more).
    """
    size = pool.shape[0]
    if per_draw > size:  # whole permutations side by side, cut to per_draw
        copies = -(-per_draw // size)
        rows = np.broadcast_to(pool, (num_draws * copies, size))
        if shuffle:
            rows = generator(seed, *key, 0).permuted(rows, axis=1)
        return np.ascontiguousarray(rows).reshape(num_draws, copies * size)[:, :per_draw]
    total = num_draws * per_draw
    num_cycles = max(1, math.ceil(total / size))
    if num_cycles == 1:
        perm = generator(seed, *key, 0).permutation(pool) if shuffle else pool
        return perm[:total].reshape(num_draws, per_draw)
    stream = np.empty(num_cycles * size, dtype=pool.dtype)
    for cycle in range(num_cycles):
        perm = generator(seed, *key, cycle).permutation(pool) if shuffle else pool
        start = cycle * size
        leftover = start % per_draw
        if cycle and shuffle and leftover:
            _keep_head_apart(perm, per_draw - leftover, stream[start - leftover : start])
        stream[start : start + size] = perm
    return stream[:total].reshape(num_draws, per_draw)


class BaseSampler:
    """Epoch, position, resume and sharding logic shared by every sampler.

    A subclass sets ``_owner``, ``seed``, ``shuffle`` and implements ``_num_global_batches``,
    ``_global_batch(epoch, position)`` (a tuple of arrays) and ``_split(parts, rank,
    world_size)``; it may override ``_global_epoch`` with a vectorised version and
    ``_check_shardable``.
    """

    _owner = "Sampler"
    _stackable = True  # epoch_batches() is cheap, so __iter__ walks its rows
    seed: int
    shuffle: bool

    def _init_state(self) -> None:
        self.epoch = 0
        self.rank = 0
        self.world_size = 1
        self._position = 0

    # -- to be provided by subclasses -------------------------------------------------------
    def _num_global_batches(self) -> int:
        raise NotImplementedError

    def _global_batch(self, epoch: int, position: int) -> tuple[np.ndarray, ...]:
        raise NotImplementedError

    def _split(self, parts: tuple[np.ndarray, ...], rank: int, world_size: int) -> tuple[Any, ...]:
        raise NotImplementedError

    def _check_shardable(self, world_size: int) -> None:
        """Raise ValueError if the global batch cannot be split evenly into ``world_size``."""

    @staticmethod
    def _output(parts: tuple[Any, ...]) -> Any:
        return parts[0] if len(parts) == 1 else parts

    # -- public interface ------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of batches per epoch (the same on every rank)."""
        return self._num_global_batches()

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next ``__iter__`` yields (from position 0)."""
        self.epoch = check_count(self._owner, "epoch", epoch, minimum=0)
        self._position = 0

    def _check_position(self, position: object) -> int:
        pos = check_count(self._owner, "position", position, minimum=0)
        if pos >= len(self):
            raise IndexError(
                f"{self._owner}: position={pos} is beyond the epoch; expected 0 <= position < "
                f"{len(self)} (batches per epoch). Fix: use a position below len(sampler)."
            )
        return pos

    def batch(self, position: int, epoch: int | None = None) -> Any:
        """Return the batch at ``position`` of ``epoch`` (default: the current epoch) for this rank.

        It is a pure function of ``(seed, epoch, position)`` and of ``(rank, world_size)``.
        """
        ep = self.epoch if epoch is None else check_count(self._owner, "epoch", epoch, minimum=0)
        pos = self._check_position(position)
        parts = self._global_batch(ep, pos)
        if self.world_size > 1:
            parts = self._split(parts, self.rank, self.world_size)
        return self._output(parts)

    def epoch_batches(self, epoch: int | None = None) -> Any:
        """All batches of ``epoch`` for this rank, stacked along a new first axis."""
        ep = self.epoch if epoch is None else check_count(self._owner, "epoch", epoch, minimum=0)
        parts = self._global_epoch(ep)
        if self.world_size > 1:
            parts = self._split(parts, self.rank, self.world_size)
        return self._output(parts)

    def _global_epoch(self, epoch: int) -> tuple[np.ndarray, ...]:
        rows = [self._global_batch(epoch, p) for p in range(len(self))]
        return tuple(np.stack(column) for column in zip(*rows, strict=True))

    def __iter__(self) -> Iterator[Any]:
        """Yield the remaining batches of the current epoch, then move to the next epoch.

        Iteration starts at the position restored by :meth:`load_state_dict` (0 otherwise).
        After the last batch the sampler advances to ``epoch + 1`` by itself;
        :meth:`set_epoch` chooses an epoch explicitly (as with ``DistributedSampler``).
        """
        epoch = self.epoch
        if self._stackable:  # one vectorised epoch, then cheap row views
            parts = self.epoch_batches(epoch)
            rows = zip(*parts, strict=True) if isinstance(parts, tuple) else iter(parts)
            for _ in range(self._position):
                next(rows)
            for row in rows:
                self._position += 1
                yield row
        else:
            while self._position < len(self):
                position = self._position
                self._position += 1
                yield self.batch(position, epoch)
        self.epoch = epoch + 1
        self._position = 0

    def state_dict(self) -> dict[str, int]:
        """Return ``{"seed", "epoch", "position"}``: enough to replay the rest of the epoch."""
        return {"seed": self.seed, "epoch": self.epoch, "position": self._position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from a :meth:`state_dict`; the seed must match the one of this sampler."""
        missing = {"seed", "epoch", "position"} - set(state)
        if missing:
            raise KeyError(
                f"{self._owner}: state is missing {sorted(missing)}; expected the dict returned "
                "by state_dict(). Fix: save and load sampler.state_dict() unchanged."
            )
        if int(state["seed"]) != self.seed:
            raise ValueError(
                f"{self._owner}: state has seed={state['seed']!r} but this sampler has seed="
                f"{self.seed}; expected the same seed. Fix: build the sampler with "
                f"seed={state['seed']!r} before loading its state."
            )
        epoch = check_count(self._owner, "epoch", int(state["epoch"]), minimum=0)
        position = check_count(self._owner, "position", int(state["position"]), minimum=0)
        if position > len(self):
            raise ValueError(
                f"{self._owner}: state position={position} exceeds the {len(self)} batches per "
                "epoch; expected a state saved from a sampler built with the same arguments."
            )
        self.epoch, self._position = epoch, position

    def shard(self, rank: int, world_size: int) -> BaseSampler:
        """Return a copy that yields rank ``rank``'s share of every global batch.

        The shards of ranks ``0 .. world_size - 1`` are disjoint parts of the single-process
        batch at the same ``(seed, epoch, position)``, and their union is that batch; every
        shard keeps the batch composition (its share of positives, tasks or queries).
        """
        world = check_count(self._owner, "world_size", world_size, minimum=1)
        r = check_count(self._owner, "rank", rank, minimum=0)
        if r >= world:
            raise ValueError(
                f"{self._owner}: rank={r} with world_size={world}; expected 0 <= rank < "
                "world_size. Fix: pass the process rank, e.g. torch.distributed.get_rank()."
            )
        if self.world_size != 1:
            raise ValueError(
                f"{self._owner}: this sampler is already shard {self.rank} of "
                f"{self.world_size}; expected an unsharded sampler. Fix: shard the original."
            )
        self._check_shardable(world)
        clone = copy.copy(self)
        clone.rank, clone.world_size = r, world
        return clone

    def _even_split_error(self, what: str, count: int, world_size: int) -> ValueError:
        return ValueError(
            f"{self._owner}: {what}={count} cannot be split evenly over world_size={world_size}; "
            f"expected a multiple of world_size. Fix: choose {what} divisible by {world_size}."
        )


def chunk(array: np.ndarray, axis: int, rank: int, world_size: int) -> np.ndarray:
    """Rank ``rank``'s contiguous equal share of ``array`` along ``axis``."""
    size = array.shape[axis] // world_size
    return np.take(array, np.arange(rank * size, (rank + 1) * size), axis=axis)
