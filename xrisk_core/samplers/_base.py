"""Shared machinery of the samplers: input checks, seeded streams, the epoch/position/shard logic.

Every batch is a pure function of ``(seed, epoch, position)``: random numbers come from
``numpy.random.default_rng([seed, epoch, stream, ...])`` generators created on demand, never from
numpy's global RNG, so two samplers built with the same arguments yield the same batches, and a
run resumed from ``state_dict()`` replays the batches it would have seen.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._arguments import check_count, check_interval

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
        rate = check_interval(
            owner, "sampling_rate", 0.5 if sampling_rate is None else sampling_rate, low=0.0,
            high=1.0, low_open=True, expected="the share of positives per batch, a number in "
            "(0, 1)", fix="pass e.g. sampling_rate=0.2", type_error=ValueError,
        )
        num_pos = max(1, int(rate * batch_size))
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
    clash = np.flatnonzero(_member(perm[:head], tail_items))
    if clash.size == 0:
        return
    window = perm[head : head + head + tail_items.size]
    free = head + np.flatnonzero(~_member(window, tail_items))[: clash.size]
    perm[clash], perm[free] = perm[free], perm[clash].copy()


def _member(values: np.ndarray, items: np.ndarray) -> np.ndarray:
    """``np.isin(values, items)``; batch-sized arguments by one broadcast comparison, about
    five times faster than ``isin``'s sort at the sizes of a batch (an epoch of a small data
    set crosses several cycle boundaries)."""
    if values.size * items.size <= 2**16:
        return (values[:, None] == items[None, :]).any(axis=1)
    return np.isin(values, items)


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

    Notes
    -----
    **Position.** The sampler stands at ``(epoch, position)``: the next batch that a new
    iterator yields. Each ``iter(sampler)`` starts there and from then on the sampler follows
    that newest iterator (one pass over the sampler); an older iterator still yields the rest
    of its own epoch but no longer moves the sampler, so abandoning a pass (``break``, then a
    new ``iter(loader)``) is safe. :meth:`set_epoch` and :meth:`load_state_dict` detach a
    running iterator the same way. After the last batch of an epoch the sampler moves to
    ``(epoch + 1, 0)`` by itself.

    **Saving the training loop's position.** A prefetching loader (torch ``DataLoader`` with
    workers, ``tf.data`` with ``prefetch``) draws batches before the loop trains on them, so
    the sampler's own position runs ahead of the loop. Save
    ``sampler.state_dict(batches_consumed=n)`` where ``n`` is the number of batches the loop
    took from the current pass (``i + 1`` in ``for i, batch in enumerate(loader)``); load it
    into a fresh sampler with :meth:`load_state_dict` and call ``set_epoch(epoch)`` as usual:
    the resumed run yields exactly the batches the interrupted one had not trained on.

    **torchdata's StatefulDataLoader** does that bookkeeping itself: it calls
    :meth:`state_dict` right after drawing each batch and keeps, in ``loader.state_dict()``,
    the state of the last batch the loop received (workers and prefetch included);
    ``loader.load_state_dict(saved)`` hands it to :meth:`load_state_dict` of the new loader's
    sampler when the loader is next iterated. A state taken right after an epoch's last batch
    is ``(epoch, len(sampler))``: a pass begun there is empty and moves the sampler to
    ``(epoch + 1, 0)`` at once.
    """

    _owner = "Sampler"
    _stackable = True  # epoch_batches() is cheap, so __iter__ copies out its rows
    seed: int
    shuffle: bool

    def _init_state(self) -> None:
        self.epoch = 0
        self.rank = 0
        self.world_size = 1
        self._position = 0
        self._detach()
        self._restored = False  # a loaded position that no iterator has started from yet

    def _detach(self) -> None:
        """Forget the running pass: a new one (not yet produced anything) starts here."""
        self._leader: object | None = None
        self._pass_start = (self.epoch, self._position)
        self._pass_produced = 0

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
        # Fresh int64 arrays: the caller may modify them without touching the cached epoch.
        arrays = tuple(np.array(part, dtype=np.int64) for part in parts)
        return arrays[0] if len(arrays) == 1 else arrays

    # -- public interface ------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of batches per epoch (the same on every rank)."""
        return self._num_global_batches()

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose batches the next ``iter()`` yields, from position 0.

        Right after :meth:`load_state_dict` for the same epoch the restored position is kept,
        so the usual loop (``set_epoch(epoch)`` at the top of every epoch, as with torch's
        ``DistributedSampler``) resumes where the checkpoint was taken. Selecting another epoch
        than a restored mid-epoch position warns that the rest of that epoch is left out.
        A running iterator is detached (it no longer moves the sampler).
        """
        ep = check_count(self._owner, "epoch", epoch, minimum=0)
        if self._restored and ep == self.epoch:
            self._detach()
            return
        if self._restored and 0 < self._position < len(self):
            warnings.warn(
                f"{self._owner}: set_epoch({ep}) after load_state_dict restored position="
                f"{self._position} of epoch {self.epoch}; the remaining batches of epoch "
                f"{self.epoch} are skipped. Fix: resume with set_epoch({self.epoch}) (the epoch "
                "of state_dict()['epoch']) to train the rest of that epoch first.",
                UserWarning,
                stacklevel=2,
            )
        self.epoch, self._position, self._restored = ep, 0, False
        self._detach()

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

        It is a pure function of ``(seed, epoch, position)`` and of ``(rank, world_size)``:
        a fresh int64 numpy array (or a tuple of them, see the sampler's *Yields*).
        """
        ep = self.epoch if epoch is None else check_count(self._owner, "epoch", epoch, minimum=0)
        pos = self._check_position(position)
        return self._output(self._rank_batch(ep, pos))

    def _rank_batch(self, epoch: int, position: int) -> tuple[np.ndarray, ...]:
        parts = self._global_batch(epoch, position)
        if self.world_size > 1:
            parts = self._split(parts, self.rank, self.world_size)
        return tuple(parts)

    def epoch_batches(self, epoch: int | None = None) -> Any:
        """All batches of ``epoch`` for this rank, stacked along a new first axis (int64)."""
        ep = self.epoch if epoch is None else check_count(self._owner, "epoch", epoch, minimum=0)
        return self._output(self._rank_epoch(ep))

    def _rank_epoch(self, epoch: int) -> tuple[np.ndarray, ...]:
        parts = self._global_epoch(epoch)
        if self.world_size > 1:
            parts = self._split(parts, self.rank, self.world_size)
        return tuple(parts)

    def _global_epoch(self, epoch: int) -> tuple[np.ndarray, ...]:
        rows = [self._global_batch(epoch, p) for p in range(len(self))]
        return tuple(np.stack(column) for column in zip(*rows, strict=True))

    def __iter__(self) -> Iterator[Any]:
        """Yield the rest of the current epoch from the sampler's position, then advance.

        Every batch is a fresh int64 numpy array (or a tuple of them), which the caller may
        modify. The new iterator leads the sampler from now on (see the class notes); after
        its last batch the sampler stands at ``(epoch + 1, 0)``.
        """
        # Not a generator: the pass is registered at iter() time, before the first next().
        token = object()
        epoch, position = self.epoch, self._position
        if position >= len(self):
            # A complete epoch (a state saved right after its last batch): the pass is empty
            # and the sampler stands at the next epoch now, so a pass begun after it (a
            # StatefulDataLoader's next iterator after a finished one) trains that epoch.
            self.epoch, self._position, self._restored = epoch + 1, 0, False
            self._detach()
            return iter(())
        self._detach()
        self._leader, self._restored = token, False
        return self._walk(token, epoch, position)

    def _walk(self, token: object, epoch: int, position: int) -> Iterator[Any]:
        length = len(self)
        parts: tuple[np.ndarray, ...] = ()
        if self._stackable:  # one vectorised epoch, then a copy of one row per batch
            parts = tuple(np.asarray(p, dtype=np.int64) for p in self._rank_epoch(epoch))
        single = parts[0] if len(parts) == 1 else None
        while position < length:
            out: Any
            if single is not None:  # the hot path: ~0.3 us per batch
                out = single[position].copy()
            elif parts:
                out = tuple(part[position].copy() for part in parts)
            else:
                out = self._output(self._rank_batch(epoch, position))
            position += 1
            if self._leader is token:
                self._position = position
                self._pass_produced += 1
            yield out
        if self._leader is token:
            self.epoch, self._position = epoch + 1, 0

    def state_dict(self, *, batches_consumed: int | None = None) -> dict[str, int]:
        """Return ``{"seed", "epoch", "position"}``: where a resumed run starts.

        Parameters
        ----------
        batches_consumed : int, optional
            The number of batches the training loop took from the current pass over the
            sampler (``i + 1`` in ``for i, batch in enumerate(loader)``; the pass is the latest
            ``iter()``, e.g. of the ``DataLoader`` or ``tf.data`` pipeline). The state is then
            the loop's position, however far a prefetching loader has read ahead. Default:
            the sampler's own position, the batches it has handed out (the loop's position
            when nothing prefetches, e.g. a plain JAX loop; what torchdata's
            ``StatefulDataLoader`` saves after drawing each batch).

        Returns
        -------
        dict of str to int
            ``seed``, ``epoch`` and ``position`` (the next batch to train on), plain ints
            (JSON-serialisable). With ``batches_consumed``, a position at the end of an epoch
            is given as ``(epoch + 1, 0)``; without it, right after the epoch's last batch
            (before its pass ends), as ``(epoch, len(sampler))``, which resumes the same way.

        Examples
        --------
        >>> import numpy as np
        >>> from xrisk.samplers import DualSampler
        >>> sampler = DualSampler(np.array([1] * 10 + [0] * 90), 10, seed=0)
        >>> for i, batch in enumerate(sampler):
        ...     if i == 2:
        ...         break
        >>> sampler.state_dict(batches_consumed=i + 1)
        {'seed': 0, 'epoch': 0, 'position': 3}
        """
        if batches_consumed is None:
            return {"seed": self.seed, "epoch": self.epoch, "position": self._position}
        done = check_count(self._owner, "batches_consumed", batches_consumed, minimum=0)
        epoch, start = self._pass_start
        if done > self._pass_produced:
            raise ValueError(
                f"{self._owner}: batches_consumed={done} but the current pass (started at "
                f"epoch {epoch}, position {start}) has produced {self._pass_produced} batches; "
                f"expected 0 <= batches_consumed <= {self._pass_produced}. Fix: count the "
                "batches taken from the latest iter(loader) (i + 1 in enumerate(loader)), not a "
                "global step, and iterate the loader once per epoch (no .repeat())."
            )
        position = start + done
        if position >= len(self):
            epoch, position = epoch + 1, 0
        return {"seed": self.seed, "epoch": epoch, "position": position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a :meth:`state_dict`: the next ``iter()`` starts at its position.

        The seed must match this sampler's. Call ``set_epoch(state["epoch"])`` (or nothing)
        before iterating; see :meth:`set_epoch`. A bad state raises and changes nothing.

        Raises
        ------
        TypeError
            ``state`` is not a mapping, or a value is not an integer (floats, strings and
            bools are refused).
        ValueError
            Missing or unknown keys, negative values, another seed, a position beyond the
            epoch.
        """
        owner = self._owner
        if not isinstance(state, Mapping):
            raise TypeError(
                f"{owner}: state is a {type(state).__name__} ({state!r}); expected the dict "
                "returned by state_dict(). Fix: save and load sampler.state_dict() unchanged."
            )
        keys = ("seed", "epoch", "position")
        missing = sorted(set(keys) - set(state))
        unknown = sorted(map(str, set(state) - set(keys)))
        if missing or unknown:
            raise ValueError(
                f"{owner}: state has keys {sorted(map(str, state))} (missing {missing}, "
                f"unknown {unknown}); expected exactly {list(keys)}. Fix: save and load "
                "sampler.state_dict() unchanged."
            )
        seed, epoch, position = (_state_int(owner, key, state[key]) for key in keys)
        if seed != self.seed:
            raise ValueError(
                f"{owner}: state has seed={seed} but this sampler has seed={self.seed}; "
                f"expected the same seed. Fix: build the sampler with seed={seed} before "
                "loading its state."
            )
        if position > len(self):
            raise ValueError(
                f"{owner}: state position={position} exceeds the {len(self)} batches per "
                "epoch; expected a state saved from a sampler built with the same arguments. "
                "Fix: build the sampler with the arguments of the saved run."
            )
        self.epoch, self._position, self._restored = epoch, position, True
        self._detach()

    def shard(self, rank: int, world_size: int) -> BaseSampler:
        """Return a copy that yields rank ``rank``'s share of every global batch.

        The shards of ranks ``0 .. world_size - 1`` are disjoint parts of the single-process
        batch at the same ``(seed, epoch, position)``, and their union is that batch; every
        shard keeps the batch composition (its share of positives, tasks or queries). The
        copy starts at this sampler's epoch and position, with no pass running.
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
        clone._detach()
        return clone

    def _even_split_error(self, what: str, count: int, world_size: int) -> ValueError:
        return ValueError(
            f"{self._owner}: {what}={count} cannot be split evenly over world_size={world_size}; "
            f"expected a multiple of world_size. Fix: choose {what} divisible by {world_size}."
        )


def _state_int(owner: str, key: str, value: object) -> int:
    """``state[key]`` as a non-negative int: Python/numpy integers and 0-d integer arrays
    (e.g. from ``np.load``) are accepted; bools, floats and strings are refused."""
    return check_count(owner, f"state[{key!r}]", value, minimum=0,
                       fix="load the dict returned by state_dict() unchanged (its values are "
                           "ints; a JSON or YAML round trip keeps them)")


def chunk(array: np.ndarray, axis: int, rank: int, world_size: int) -> np.ndarray:
    """Rank ``rank``'s contiguous equal share of ``array`` along ``axis``."""
    size = array.shape[axis] // world_size
    return np.take(array, np.arange(rank * size, (rank + 1) * size), axis=axis)


# -- LibAUC spellings ------------------------------------------------------------------------


def _is_array_like(value: object) -> bool:
    """Arrays of any framework, scipy sparse matrices, sequences: what labels can be."""
    if isinstance(value, np.ndarray | np.generic | Sequence | int | float):
        return True
    return any(
        hasattr(value, name) for name in ("__array__", "__array_namespace__", "__dlpack__", "tocoo")
    )


def _dataset_error(owner: str, value: object, call: str, example: str) -> TypeError:
    if value is None:  # LibAUC's (dataset=None, ..., labels=y) form
        what = "None"
    else:
        targets = " (it has .targets)" if hasattr(value, "targets") else ""
        what = f"a {type(value).__name__} object{targets}, not an array"
    return TypeError(
        f"{owner}: the first argument is {what}; expected {call}. LibAUC's samplers take "
        "(dataset, batch_size, labels=None, ...); xrisk's take the labels first. Fix: pass "
        f"the labels, e.g. {example}."
    )


def libauc_guard(
    first: str, call: str, example: str, renamed: Mapping[str, Callable[[object], str]]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate a sampler's ``__init__`` to name the xrisk spelling of LibAUC-style calls.

    ``first`` is the name of the first parameter, ``call`` the signature shown (e.g.
    ``"DualSampler(labels, batch_size, ...)"``), ``example`` the fix for a dataset passed
    first, and ``renamed`` maps each LibAUC (or torch) keyword to a function of its value that
    returns the xrisk spelling. The checks run before anything else, so their messages replace
    Python's generic "unexpected keyword argument"; the wrapped signature stays the real one.
    """

    def decorate(init: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(init)
        def checked(self: BaseSampler, *args: Any, **kwargs: Any) -> None:
            owner = self._owner
            head = args[0] if args else kwargs.get(first)
            if (args or first in kwargs) and not _is_array_like(head):
                raise _dataset_error(owner, head, call, example)
            for name, value in kwargs.items():
                if name in renamed:
                    raise TypeError(
                        f"{owner}: got {name}={_short(value)}, a LibAUC argument that xrisk "
                        f"spells differently; expected {call}. Fix: use "
                        f"{renamed[name](value)}."
                    )
            if len(args) > 2:
                shown = ", ".join(_short(a) for a in args)
                raise TypeError(
                    f"{owner}: got {len(args)} positional arguments ({shown}); expected 2, "
                    f"{call}, with every option keyword-only (LibAUC's positional order "
                    "differs). Fix: name the options, e.g. sampling_rate=0.2, seed=0."
                )
            init(self, *args, **kwargs)

        return checked

    return decorate


def _short(value: object) -> str:
    """``repr`` of a scalar, the type name of anything else (arrays, datasets)."""
    if value is None or isinstance(value, int | float | str | bool):
        return repr(value)
    return f"<{type(value).__name__}>"
