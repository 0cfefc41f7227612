r"""Framework-free parts of data-parallel training: the global batch, and state sharded by rows.

**One process on the global batch.** With data parallelism every rank (process or device)
holds a part of each mini-batch. An X-risk loss couples the examples of a batch (pairs,
per-positive moving averages, duplicate indices pooled), so calling the loss on each rank's
part is a *different* algorithm: the parameters drift from the single-process run and the
ranks' copies of the state disagree. The adapters' ``gather_batch`` helpers concatenate every
rank's part along the batch axis (:func:`gather_plan` says which inputs, from the loss's
declared :meth:`~xrisk.LossDefinition.inputs`) and call the unchanged loss on the global
batch: every rank then computes the same loss and the same new state rows, and the gradient
flows back to each rank's own scores.

**State sharded by rows.** For a data set too large to replicate its state on every rank,
rank ``r`` of ``world`` keeps the rows whose key ``k`` has ``k % world == r``, at local row
``k // world`` (:func:`owner`, :func:`local_row`, :func:`shard_rows`). A step needs only the
rows of the batch's keys: :func:`compact_batch` renumbers the batch's keys ``0 .. m-1`` in
increasing order (monotone, so the loss sees the same order of keys), the adapter fetches
those rows from their owners (O(batch) communication), and :func:`apply_compact` runs the
unchanged loss on that compact table; the adapter writes the new rows back to their owners.
Tables without a key space (global entries) are small and replicated: every rank computes the
same update.

**Derived keys.** A table keyed by the product of two spaces
(declared in the loss's :class:`~xrisk.losses.Sharding`, ``loss_fn.sharding.derived``, e.g.
the multi-label ``(label, sample)`` tables,
row ``t * num_samples + i``) is owned by its *inner* key: rank ``r`` stores, for each inner
key ``i`` with ``i % world == r``, one row holding the rows of every outer key
(:func:`stored_row`, shape ``(size of outer, *row)``; :func:`key_rows` converts a full
table to that layout). The compact step runs on the loss rebuilt with its inner space
sized to the batch's number of inner keys (the constructor argument
``loss_fn.sharding.sizes`` names, :func:`resized`), whose derived table is then the compact
rows in its own layout, so no loss math is repeated here.

Checkpoints are saved per shard (:func:`split_export`) and reassembled into the usual export
of a single process (:func:`assemble_shards`), so a run resumes on any number of ranks.

Examples
--------
>>> import numpy as np, array_api_compat.numpy as xp, xrisk
>>> from xrisk import distributed
>>> loss_fn = xrisk.APLoss(num_samples=10)
>>> distributed.gather_plan(loss_fn).gathered
('scores', 'labels', 'index')
>>> state = loss_fn.init(xp=xp, dtype=xp.float64)
>>> batch = {"scores": np.array([0.9, 0.2, 0.6, 0.7]), "labels": np.array([1, 0, 1, 1]),
...          "index": np.array([7, 3, 7, 2])}
>>> def fetch(name, slots):  # rows of the compact table (slot -1: an unused row)
...     return xp.take(getattr(state, name), np.maximum(slots, 0), axis=0)
>>> loss, compact, plan = distributed.apply_compact(loss_fn, batch, fetch, {})
>>> plan.slots["sample"].tolist(), plan.inputs["index"].tolist()
([2, 3, 7, -1], [2, 1, 2, 0])
>>> full_loss, full = loss_fn.apply(state, **batch)
>>> bool(np.allclose(compact.u[:3], full.u[[2, 3, 7]])), bool(np.isclose(loss, full_loss))
(True, True)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from ._adapter_support import METADATA_KEY
from ._apply import apply, check_batch, owning_space, row_keys
from ._arguments import check_count
from ._grouping import group_keys
from ._inputs import to_numpy
from ._typing import Array
from .backends import backend_of
from .losses import LossDefinition

__all__ = [
    "DistributedWarning",
    "GatherPlan",
    "CompactBatch",
    "gather_plan",
    "keyed_tables",
    "sharded",
    "row_space",
    "stored_row",
    "key_rows",
    "table_rows",
    "owner",
    "local_row",
    "local_size",
    "shard_rows",
    "split_export",
    "assemble_shards",
    "compact_keys",
    "compact_batch",
    "apply_compact",
    "resized",
    "exchanged_bytes",
    "SHARD_RANK",
    "SHARD_WORLD",
]


#: Keys of the metadata entries of a shard's export (0-d int64 arrays, so ``np.savez`` keeps
#: them next to the rows).
SHARD_RANK = "__shard_rank__"
SHARD_WORLD = "__shard_world__"


class DistributedWarning(UserWarning):
    """A loss is used in a way that makes a data-parallel run differ from one process on the
    global batch (e.g. each rank calls it on its own part of the batch)."""


class GatherPlan(NamedTuple):
    """Which inputs of a loss make the global batch, from its declared inputs.

    Attributes
    ----------
    batch_dim : str
        The named dimension split over ranks (the leading one of the first input:
        ``"batch"``, ``"queries"``, ...).
    gathered : tuple of str
        Inputs whose leading dimension is ``batch_dim``: concatenated along axis 0, in rank
        order, into the global batch.
    differentiable : tuple of str
        The ``score`` inputs among ``gathered``: gathered with the framework's autodiff, so
        the gradient of the global loss reaches each rank's own scores.
    replicated : tuple of str
        Inputs with another leading dimension: the same on every rank, passed unchanged.
    """

    batch_dim: str
    gathered: tuple[str, ...]
    differentiable: tuple[str, ...]
    replicated: tuple[str, ...]


def _definition(loss: Any) -> LossDefinition:
    """The core definition of a core loss or of an adapter loss (``.definition``)."""
    definition = loss if isinstance(loss, LossDefinition) else getattr(loss, "definition", None)
    if not isinstance(definition, LossDefinition):
        raise TypeError(
            f"received a {type(loss).__name__}; expected an xrisk loss (a core definition such "
            "as xrisk.APLoss(...) or an adapter loss such as xrisk.torch.APLoss(...)). Fix: "
            "pass the loss object itself."
        )
    return definition


def gather_plan(loss: Any) -> GatherPlan:
    """The :class:`GatherPlan` of ``loss`` (a core definition or an adapter loss).

    Raises
    ------
    ValueError
        If the first input's leading dimension has a fixed size (:meth:`LossDefinition.dims`):
        no batch axis to split.
    """
    definition = _definition(loss)
    declared = definition.inputs()
    fixed = definition.dims()
    batch_dim = declared[0].shape[0] if declared and declared[0].shape else ""
    if not batch_dim or batch_dim in fixed:
        raise ValueError(
            f"{definition.name}: the first input {declared[0].name if declared else None!r} "
            f"has leading dimension {batch_dim!r}; expected a free batch dimension to split "
            "over ranks. Fix: declare the batch-like input first."
        )
    gathered = tuple(s.name for s in declared if s.shape and s.shape[0] == batch_dim)
    return GatherPlan(
        batch_dim=batch_dim,
        gathered=gathered,
        differentiable=tuple(s.name for s in declared
                             if s.name in gathered and s.kind == "score"),
        replicated=tuple(s.name for s in declared if s.name not in gathered),
    )


def _owning_space(definition: LossDefinition, keys: str | None) -> str | None:
    """The space whose keys own the rows of a table keyed by ``keys``: the inner space of a
    derived key (``definition.sharding.derived``), else ``keys`` itself."""
    return owning_space(definition.sharding.derived, keys)


def keyed_tables(loss: Any) -> dict[str, tuple[str, ...]]:
    """Key space -> names of the state tables that can be sharded by rows: the tables of
    the spaces of :func:`xrisk._apply.row_keys` (a step addresses them by index inputs),
    a table of a derived space under its inner space. Every other table (global entries,
    small tables of spaces that no index input addresses) is replicated."""
    definition = _definition(loss)
    spaces = row_keys(definition)
    out: dict[str, tuple[str, ...]] = {}
    for name, table in definition.state_tables().items():
        space = _owning_space(definition, table.keys)
        if space in spaces:
            out[space] = (*out.get(space, ()), name)
    return out


def sharded(loss: Any, name: str) -> bool:
    """Whether state entry ``name`` is sharded by rows (see :func:`keyed_tables`)."""
    return any(name in names for names in keyed_tables(loss).values())


def row_space(loss: Any, name: str) -> str:
    """The key space whose keys own the rows of sharded table ``name`` (a derived table's
    inner space): its stored rows are one per key of that space, in key order.

    Raises
    ------
    ValueError
        If ``name`` is not a sharded table of the loss.
    """
    definition = _definition(loss)
    for space, names in keyed_tables(definition).items():
        if name in names:
            return space
    raise ValueError(
        f"{definition.name}: {name!r} is not a sharded state table; expected one of "
        f"{sorted(n for names in keyed_tables(definition).values() for n in names)}. Fix: "
        "check xrisk.distributed.sharded(loss, name) first.")


def _outer(definition: LossDefinition, name: str) -> int | None:
    """Size of the outer space of a derived table ``name`` (``None``: not derived)."""
    keys = definition.state_tables()[name].keys
    derived = definition.sharding.derived
    if keys is None or keys not in derived:
        return None
    return definition.table_sizes()[derived[keys][0]]


def stored_row(loss: Any, name: str) -> tuple[int, ...]:
    """Shape of one stored row of sharded table ``name`` (one per key of
    :func:`row_space`): the table's row, or ``(size of the outer space, *row)`` for a derived
    table, whose stored row ``i`` holds the rows ``(t, i)`` of every outer key ``t``."""
    definition = _definition(loss)
    row = tuple(definition.state_tables()[name].row)
    outer = _outer(definition, name)
    return row if outer is None else (outer, *row)


def key_rows(loss: Any, name: str, table: Any) -> np.ndarray:
    """A full table in its stored layout: one row per key of :func:`row_space` (numpy).

    The table itself for a table keyed by that space; for a derived table (``outer *
    size(inner) + inner`` rows of shape ``row``), the array of shape ``(size(inner), outer,
    *row)``. :func:`table_rows` is the inverse.
    """
    definition = _definition(loss)
    value = to_numpy(table)
    outer = _outer(definition, name)
    if outer is None:
        return value
    return np.swapaxes(value.reshape(outer, -1, *value.shape[1:]), 0, 1)


def table_rows(loss: Any, name: str, rows: Any) -> np.ndarray:
    """The inverse of :func:`key_rows`: stored rows back to the table's own layout."""
    definition = _definition(loss)
    value = to_numpy(rows)
    outer = _outer(definition, name)
    if outer is None:
        return value
    return np.swapaxes(value, 0, 1).reshape(-1, *value.shape[2:])


# -- rows owned by ranks ---------------------------------------------------------------------


def _check_rank(rank: int, world: int) -> tuple[int, int]:
    world = check_count("xrisk.distributed", "world", world, minimum=1)
    rank = check_count("xrisk.distributed", "rank", rank, minimum=0)
    if rank >= world:
        raise ValueError(
            f"xrisk.distributed: rank={rank} with world={world}; expected 0 <= rank < world. "
            "Fix: pass the process rank and the number of processes."
        )
    return rank, world


def owner(keys: Array, world: int) -> Array:
    """The rank that owns each key: ``keys % world``."""
    return keys % world


def local_row(keys: Array, world: int) -> Array:
    """Row of each key in its owner's shard: ``keys // world``."""
    return keys // world


def local_size(num_rows: int, rank: int, world: int) -> int:
    """Number of rows of a table of ``num_rows`` that ``rank`` owns: ``ceil((n - rank) / w)``."""
    rank, world = _check_rank(rank, world)
    return max(0, -(-(num_rows - rank) // world))


def shard_rows(table: Array, rank: int, world: int) -> Array:
    """Rank ``rank``'s rows of a full table: ``table[rank::world]``."""
    rank, world = _check_rank(rank, world)
    return table[rank::world]


def split_export(loss: Any, arrays: Mapping[str, Any], rank: int, world: int,
                 ) -> dict[str, np.ndarray]:
    """Rank ``rank``'s shard of a full export (``export_state()`` of any adapter).

    Keyed tables keep the rank's rows in their stored layout (:func:`key_rows`: keys ``k``
    with ``k % world == rank``, in key order); global entries and auxiliaries are copied
    whole; the metadata entries :data:`SHARD_RANK` and :data:`SHARD_WORLD` record the layout.
    """
    definition = _definition(loss)
    rank, world = _check_rank(rank, world)
    out = {}
    for name, value in arrays.items():
        value = np.array(to_numpy(value), copy=True)
        if sharded(definition, name):
            value = shard_rows(key_rows(definition, name, value), rank, world).copy()
        out[name] = value
    out[SHARD_RANK] = np.asarray(rank, dtype=np.int64)
    out[SHARD_WORLD] = np.asarray(world, dtype=np.int64)
    return out


def assemble_shards(loss: Any, shards: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """The full export of a single process from the shards of every rank (any order).

    The result loads into a replicated loss of any framework (``load_state``) or splits again
    for another number of ranks (:func:`split_export`).

    Raises
    ------
    ValueError
        Shards of different layouts, a missing or repeated rank, a shard of the wrong size.
    """
    definition = _definition(loss)
    if not shards:
        raise ValueError(
            f"{definition.name}: assemble_shards received no shard; expected one per rank. "
            "Fix: pass the export of every rank, e.g. [np.load(f) for f in files].")
    worlds = {int(np.asarray(s.get(SHARD_WORLD, -1))) for s in shards}
    ranks = sorted(int(np.asarray(s.get(SHARD_RANK, -1))) for s in shards)
    if len(worlds) != 1 or ranks != list(range(len(shards))) or worlds != {len(shards)}:
        raise ValueError(
            f"{definition.name}: shards of ranks {ranks} with world sizes {sorted(worlds)}; "
            f"expected ranks 0..{len(shards) - 1} of one world of {len(shards)}. Fix: pass "
            "the shard export of every rank of one run, each once."
        )
    world = len(shards)
    by_rank = {int(np.asarray(s[SHARD_RANK])): s for s in shards}
    spaces = definition.table_sizes()
    out = {}
    for name in definition.state_shapes():
        first = to_numpy(by_rank[0][name])
        if not sharded(definition, name):
            out[name] = np.array(first, copy=True)
            continue
        size = spaces[row_space(definition, name)]
        full = np.empty((size, *stored_row(definition, name)), dtype=first.dtype)
        for r in range(world):
            part = to_numpy(by_rank[r][name])
            expected = (local_size(size, r, world), *full.shape[1:])
            if part.shape != expected:
                raise ValueError(
                    f"{definition.name}: shard {r} of {name!r} has shape {part.shape}; "
                    f"expected {expected} (the rows k with k % {world} == {r} of {size}). "
                    "Fix: pass the shards of a loss built with the same arguments.")
            full[r::world] = part
        out[name] = table_rows(definition, name, full)
    metadata = by_rank[0].get(METADATA_KEY)  # the loss the shards name, checked on load
    if metadata is not None:
        out[METADATA_KEY] = np.array(to_numpy(metadata), copy=True)
    return out


# -- the loss on a compact table of the batch's rows -----------------------------------------


class CompactBatch(NamedTuple):
    """A batch renumbered for a compact state (see :func:`compact_batch`).

    Attributes
    ----------
    inputs : dict of str to array
        The batch, with every index input of a keyed space replaced by positions in the
        compact tables (or by the key-space size, an invalid index, when a key is outside
        its space: the loss's own checks then reject the batch and write nothing).
    slots : dict of str to array
        Key space -> (m,) the key of each compact row in increasing order, ``-1`` for the
        unused rows at the end (m = number of index entries of that space in the batch).
    """

    inputs: dict[str, Array]
    slots: dict[str, Array]


def compact_keys(keys: Array, *, xp: Any) -> tuple[Array, Array]:
    r"""Renumber integer ``keys`` (m,) by the order of their distinct values.

    Returns ``(slots, positions)``: ``positions[i]`` is the number of distinct keys smaller
    than ``keys[i]`` (so equal keys share a position and the order of keys is kept), and
    ``slots`` (m,) holds the distinct keys in increasing order, then ``-1``. Through the one
    grouping of duplicate keys (:func:`xrisk._grouping.group_keys`): the group of key k is
    segment :math:`|\{j : k_j < k\}|`; the segments with members, sorted, give each group
    its number among them (a binary search) and its key (a segment maximum). O(m log m),
    static shapes (jit-safe), exact for every integer key.
    """
    m = keys.shape[0]
    if m == 0:
        return keys, keys
    backend = backend_of(keys)
    ids = group_keys(keys, backend=backend, xp=xp, dtype=xp.float32).ids
    segments = xp.arange(m, dtype=ids.dtype)
    filled = backend.segment_sum(xp.ones_like(segments), ids, m) > 0
    # The segments with members in increasing order, then m for each empty one.
    starts = xp.sort(xp.where(filled, segments, xp.full_like(segments, m)))
    positions = xp.astype(xp.searchsorted(starts, ids), keys.dtype)
    segment_keys = backend.segment_max(keys, ids, m)  # every member of a segment: one key
    slots = xp.where(starts < m, xp.take(segment_keys, xp.clip(starts, None, m - 1), axis=0),
                     xp.full_like(keys, -1))
    return slots, positions


def compact_batch(loss: Any, inputs: Mapping[str, Array]) -> CompactBatch:
    """Renumber the index inputs of ``inputs`` for compact tables of the batch's rows.

    The index inputs of one key space are renumbered together (:func:`compact_keys` on their
    concatenation), so equal keys get equal positions across inputs. Key spaces without a
    state table are left unchanged.

    Parameters
    ----------
    loss : LossDefinition or adapter loss
    inputs : mapping of str to array
        The (global) batch by input name, as ``apply`` takes it.
    """
    definition = _definition(loss)
    spaces = definition.table_sizes()
    present = {name: value for name, value in inputs.items() if value is not None}
    if not present:
        raise ValueError(f"{definition.name}: compact_batch received no input; expected the "
                         "batch by input name. Fix: pass the inputs of apply().")
    backend = backend_of(*present.values())
    xp = backend.namespace
    out = dict(inputs)
    slots = {}
    declared = {s.name: s for s in definition.inputs()}
    for space, names in row_keys(definition).items():
        specs = [declared[name] for name in names]
        missing = [spec.name for spec in specs if inputs.get(spec.name) is None]
        if missing:
            raise ValueError(
                f"{definition.name}: the batch lacks {missing}, the index of the "
                f"{space!r} rows; expected every input of {list(names)}. Fix: pass them.")
        flat = [xp.reshape(inputs[s.name], (-1,)) for s in specs]
        keys = flat[0] if len(flat) == 1 else xp.concat(flat, axis=0)
        keys = xp.astype(keys, xp.int64)
        slot, position = compact_keys(keys, xp=xp)
        size = spaces[space]
        if keys.shape[0]:
            # Keys outside the space: give the loss an invalid index (its checks then reject
            # the batch, raising on the host or writing nothing under jit) and fetch no row.
            inside = xp.all((keys >= 0) & (keys < size))
            if backend.inspectable(keys) and not bool(inside):
                check_batch(definition, **present)  # raises, naming the user's own values
            position = xp.where(inside, position, xp.full_like(position, size))
            slot = xp.where(inside, slot, xp.full_like(slot, -1))
        slots[space] = slot
        start = 0
        for spec, part in zip(specs, flat, strict=True):
            stop = start + part.shape[0]
            value = inputs[spec.name]
            out[spec.name] = xp.astype(xp.reshape(position[start:stop], value.shape),
                                       value.dtype)
            start = stop
    return CompactBatch(out, slots)


def apply_compact(loss: Any, inputs: Mapping[str, Array],
                  fetch: Callable[[str, Array], Array], global_state: Mapping[str, Array],
                  params: Any = None) -> tuple[Array, Any, CompactBatch]:
    """``apply`` on compact tables of the batch's rows: ``(loss, new_compact_state, batch)``.

    Parameters
    ----------
    loss : LossDefinition or adapter loss
    inputs : mapping of str to array
        The global batch by input name.
    fetch : callable (table name, slots) -> rows
        Returns the stored rows of table ``name`` at the keys ``slots`` (m,) of its
        :func:`row_space`, shape ``(m, *stored_row)`` in the table's dtype (for a derived
        table, the rows of every outer key of each slot: :func:`stored_row`); rows at slot
        ``-1`` are never read by the loss (any value). The sharded containers fetch each row
        from its owner.
    global_state : mapping of str to array
        The replicated entries by name: global entries and the tables that are not sharded
        (:func:`sharded`).
    params : NamedTuple, optional
        The trainable auxiliaries (``init_params``).

    Returns
    -------
    loss : array of shape ()
        Equal to ``apply`` on the full state.
    new_state : NamedTuple
        Sharded tables as compact stored rows ``(m, *stored_row)`` aligned with
        ``batch.slots[row_space(loss, name)]``; write row ``p`` back at key ``slots[p]`` for
        every ``slots[p] >= 0``. Replicated entries whole.
    batch : CompactBatch

    Raises
    ------
    ValueError
        A loss with derived tables (``definition.sharding.derived``) on a batch whose
        size is known only at run time: the resized loss needs it.
    """
    definition = _definition(loss)
    plan = compact_batch(definition, inputs)
    tables = definition.state_tables()
    derived = {space: keys for space, keys in definition.sharding.derived.items()
               if space in definition.key_spaces()}
    sizes = {}
    for space in {inner for _, inner in derived.values()} & set(plan.slots):
        count = plan.slots[space].shape[0]
        if count is None:
            raise ValueError(
                f"{definition.name}: received a batch whose number of {space!r} keys is "
                "known only at run time (None); expected a static size for its derived "
                "tables (the compact step runs the loss resized to it). Fix: give the batch "
                "a static size (a fully defined tf.function input_signature, or "
                "tf.ensure_shape on the inputs).")
        sizes[space] = max(int(count), 1)
    compact = resized(definition, sizes) if sizes else definition
    values = {}
    for name, table in tables.items():
        if not sharded(definition, name):
            values[name] = global_state[name]
            continue
        rows = fetch(name, plan.slots[row_space(definition, name)])
        outer = _outer(definition, name)
        values[name] = rows if outer is None else _outer_major(rows, outer, table.row)
    state = compact.state_type(**values)
    options = {} if params is None else {"params": params}
    value, new_state = apply(compact, state, **plan.inputs, **options)
    stored = {}
    for name, table in tables.items():
        outer = _outer(definition, name) if sharded(definition, name) else None
        if outer is not None:  # back to one stored row per inner key
            stored[name] = _key_major(getattr(new_state, name), outer, table.row)
    return value, new_state._replace(**stored) if stored else new_state, plan


def resized(loss: Any, sizes: Mapping[str, int]) -> LossDefinition:
    """The loss a compact step runs: ``loss`` rebuilt with the inner key spaces ``sizes``
    (name -> size) of its derived tables at their compact size.

    A derived table's row ``outer * size(inner) + inner`` depends on the size of its inner
    space, so the step on the compact rows of ``m`` inner keys must run on the loss whose
    inner space has ``m`` keys: its declaration (``loss.sharding.sizes``) names the
    constructor argument that sets it. A loss without derived tables (or sizes of spaces
    that size none) is returned as it is: its math does not depend on the sizes, index
    bounds that a smaller space still satisfies aside.

    Examples
    --------
    >>> import xrisk
    >>> small = resized(xrisk.meanAveragePrecisionLoss(2, num_samples=9), {"sample": 3})
    >>> small.num_samples, small.state_shapes()
    (3, {'u': (6, 2)})
    """
    definition = _definition(loss)
    declared = definition.sharding
    spaces = definition.key_spaces()
    inner = {keys[1] for space, keys in declared.derived.items() if space in spaces}
    changes = {declared.sizes[space]: int(size) for space, size in sizes.items()
               if space in inner}
    if not changes:
        return definition
    return _resized(definition, tuple(sorted(changes.items())))


@functools.lru_cache(maxsize=64)
def _resized(definition: LossDefinition, changes: tuple[tuple[str, int], ...],
             ) -> LossDefinition:
    # A compiled step builds it once; an eager step would rebuild it (and its declarations)
    # at every call.
    return cast(LossDefinition, definition.replace(**dict(changes)))


def _outer_major(rows: Array, outer: int, row: tuple[int, ...]) -> Array:
    """Stored rows (m, outer, *row) -> the derived table of m inner keys (outer * m, *row),
    row ``t * m + p`` = ``rows[p, t]``: two matrix transposes, which every namespace has."""
    xp = backend_of(rows).namespace
    m, width = rows.shape[0], math.prod(row)
    x = xp.matrix_transpose(xp.reshape(rows, (m, outer * width)))  # (outer * width, m)
    x = xp.matrix_transpose(xp.reshape(x, (outer, width, m)))  # (outer, m, width)
    return xp.reshape(x, (outer * m, *row))


def _key_major(table: Array, outer: int, row: tuple[int, ...]) -> Array:
    """The inverse of :func:`_outer_major`: (outer * m, *row) -> (m, outer, *row)."""
    xp = backend_of(table).namespace
    width = math.prod(row)
    m = table.shape[0] // outer
    x = xp.matrix_transpose(xp.reshape(table, (outer, m, width)))  # (outer, width, m)
    x = xp.matrix_transpose(xp.reshape(x, (outer * width, m)))  # (m, outer * width)
    return xp.reshape(x, (m, outer, *row))


def exchanged_bytes(loss: Any, local_batch: Mapping[str, Any], world: int, *,
                    sharded: bool, state_itemsize: int = 4) -> dict[str, int]:
    """Bytes one rank sends and receives per step (forward collectives), by part.

    ``local_batch`` is one rank's part (arrays or anything with ``shape`` and ``dtype``).
    ``gather``: every rank receives the other ranks' parts of the gathered inputs;
    ``rows`` (sharded only): the all-reduce of the compact tables, counted as a ring
    all-reduce (2 (world - 1) / world of the table per rank). The backward pass moves the
    score inputs' size once more (reduce-scatter).
    """
    definition = _definition(loss)
    plan = gather_plan(definition)
    gather = 0
    entries: dict[str, int] = {}
    for spec in definition.inputs():
        value = local_batch.get(spec.name)
        if value is None or spec.name not in plan.gathered:
            continue
        size = int(np.prod(value.shape)) * np.dtype(str(value.dtype).rpartition(".")[2]).itemsize
        gather += size * (world - 1)
        if spec.kind == "index" and spec.keys is not None:
            entries[spec.keys] = entries.get(spec.keys, 0) + int(np.prod(value.shape)) * world
    out = {"gather": gather}
    if sharded:
        rows = 0
        for space, names in keyed_tables(definition).items():
            for name in names:
                row = math.prod(stored_row(definition, name)) * state_itemsize
                rows += entries.get(space, 0) * row
        out["rows"] = 2 * (world - 1) * rows // world
    return out
