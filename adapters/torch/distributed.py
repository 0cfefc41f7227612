"""Data-parallel training with torch.distributed: the global batch, and state sharded by rows.

**Replicated state (the default).** Wrap the *model* in ``DistributedDataParallel`` and call
the loss outside it on the global batch that :func:`gather_batch` builds from each rank's
part. Every rank then computes the single-process loss and the same new state rows, and
``backward()`` sends each rank the gradient of its own scores: the all-gather's backward sums
the ranks' identical gradients (a reduce-scatter) and DDP's mean over ranks divides that sum
back, so the parameters follow the single-process run on the global batch. Indices travel as
integers, gathered in their own dtype.

Set-up (runs anywhere):

>>> import torch
>>> import torch.distributed as dist
>>> from torch.utils.data import DataLoader
>>> import xrisk.torch as xr
>>> from xrisk.torch.distributed import gather_batch
>>> labels = torch.tensor([1.0, 0.0, 0.0, 0.0] * 32)
>>> dataset = xr.IndexedDataset(torch.randn(128, 30), labels)
>>> net = torch.nn.Linear(30, 1)
>>> loss_fn = xr.APLoss(num_samples=len(dataset))
>>> optimizer = xr.SOAP(net.parameters(), learning_rate=1e-3)

The training loop needs a process group of several ranks (``torchrun``), which a doctest does
not start, so these lines are skipped here (the test suite runs the same recipe on two ranks):

>>> dist.init_process_group("gloo")                                      # doctest: +SKIP
>>> model = torch.nn.parallel.DistributedDataParallel(net)                # doctest: +SKIP
>>> sampler = xr.DualSampler(labels, 64, sampling_rate=0.5).shard(        # doctest: +SKIP
...     dist.get_rank(), dist.get_world_size())  # each rank: 32 of the global 64
>>> for x, y, index in DataLoader(dataset, batch_sampler=sampler):       # doctest: +SKIP
...     scores = torch.sigmoid(model(x)).squeeze(1)
...     loss = loss_fn(**gather_batch(loss_fn, scores, y, index))
...     optimizer.zero_grad(); loss.backward(); optimizer.step()

Without a process group (or with one rank) :func:`gather_batch` returns the inputs
unchanged, so one script runs on 1 or N ranks.

**Sharded state.** :class:`ShardedLoss` keeps on rank ``r`` only the rows ``k`` with
``k % world == r`` (1/world of each table) and exchanges only the batch's rows per step
(an all-reduce of a table of the batch's rows: O(batch), whatever the data set's size).

Pitfalls the module detects:

- a loss module inside a ``DistributedDataParallel`` model with ``broadcast_buffers=True``
  (the default): DDP would copy rank 0's whole state table to every rank at each forward,
  O(num_samples) per step, and throw away the other ranks' updates -> RuntimeError at the
  loss's first call;
- a loss called on a rank's own part while a process group of several ranks is active (the
  single-process algorithm on a smaller batch, not the global one) -> one
  :class:`xrisk.distributed.DistributedWarning` per loss.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

import xrisk
from xrisk import LossDefinition
from xrisk import distributed as _core
from xrisk.adapter_api import (
    bind_inputs,
    checked_state_arrays,
    dtype_name,
    exported_state,
    initial_values,
)

__all__ = ["gather_batch", "ShardedLoss", "check_ddp", "DistributedWarning"]

DistributedWarning = _core.DistributedWarning

#: Attribute set on the tensors :func:`gather_batch` returns: the loss then knows its input
#: is the global batch and does not warn.
_GLOBAL = "_xrisk_global_batch"


def _world(group: Any) -> tuple[int, int]:
    """``(rank, world)`` of ``group``; ``(0, 1)`` without an initialized process group."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def _group(group: Any) -> Any:
    return dist.group.WORLD if group is None else group


def _wait(tensor: torch.Tensor) -> torch.Tensor:
    # Functional collectives return an AsyncCollectiveTensor in eager mode; its wait() keeps
    # the autograd edge (the wait op has its own backward).
    wait = getattr(tensor, "wait", None)
    return wait() if callable(wait) else tensor


def _all_gather(value: torch.Tensor, group: Any) -> torch.Tensor:
    """Concatenation of every rank's ``value`` on axis 0, differentiable (the backward is a
    reduce-scatter sum of the gradient)."""
    from torch.distributed import _functional_collectives as funcol

    flag = value.dtype == torch.bool  # gloo has no bool collectives: travel as uint8
    source = value.to(torch.uint8) if flag else value
    out = _wait(funcol.all_gather_single(source.contiguous(), 0, _group(group)))
    return out.to(torch.bool) if flag else out


def gather_batch(loss: Any, *inputs: Any, group: Any = None, **named: Any
                 ) -> dict[str, torch.Tensor]:
    """The global batch from this rank's part: every rank's inputs concatenated in rank order.

    Each input whose leading dimension is the batch dimension of ``loss``'s declarations
    (:func:`xrisk.distributed.gather_plan`) is all-gathered along axis 0; score inputs keep
    their autograd graph (the gradient of the global loss flows back to this rank's scores,
    summed over ranks, which DDP's mean over ranks divides back). Labels, indices and other
    integer inputs are gathered in their own dtype. Inputs of another leading dimension are
    returned as given (they must be equal on every rank).

    Parameters
    ----------
    loss : xrisk torch loss or core definition
    *inputs, **named : torch.Tensor
        This rank's part of the batch, as the loss takes it (positionally or by name). Every
        rank must pass parts of the same shape (``DualSampler.shard`` / ``TriSampler.shard``
        split each global batch evenly).
    group : ProcessGroup, optional
        Default: the world group.

    Returns
    -------
    dict of str to torch.Tensor
        The global batch by input name: call ``loss(**batch)``. Without an initialized
        process group, or with one rank, the inputs themselves.
    """
    definition = _core._definition(loss)
    bound = bind_inputs(definition, inputs, named)
    _, world = _world(group)
    out: dict[str, Any] = {}
    plan = _core.gather_plan(definition)
    for name, value in bound.items():
        if value is not None and world > 1 and name in plan.gathered:
            value = _all_gather(value if name in plan.differentiable else value.detach(),
                                group)
        if isinstance(value, torch.Tensor):
            setattr(value, _GLOBAL, True)
        out[name] = value
    return out


def check_ddp(module: nn.Module) -> None:
    """Raise if ``module`` is a DDP model with ``broadcast_buffers=True`` holding an xrisk
    loss whose state DDP syncs (see the module docstring; state that DDP was told to ignore,
    ``_ddp_params_and_buffers_to_ignore``, is never synced); the losses also check at their
    first call.

    Raises
    ------
    RuntimeError
    """
    from torch.nn.parallel import DistributedDataParallel

    # torch 2.13 renamed broadcast_buffers to forward_sync_buffers (the old name still works).
    syncs = getattr(module, "forward_sync_buffers", getattr(module, "broadcast_buffers", False))
    if not isinstance(module, DistributedDataParallel) or not syncs:
        return
    ignored: set[str] = getattr(module, "parameters_to_ignore", set())  # never synced by DDP
    for prefix, sub in module.module.named_modules():
        # An xrisk loss module (XRiskLoss, ShardedLoss) holds its core definition.
        holds_loss = isinstance(sub.__dict__.get("definition"), LossDefinition)
        if holds_loss and any(name not in ignored for name, _ in sub.named_buffers(
                prefix=prefix, recurse=False)):
            raise RuntimeError(
                f"{sub.definition.name} is inside a DistributedDataParallel model that syncs "
                "buffers at each forward (broadcast_buffers / forward_sync_buffers=True): "
                "DDP copies rank 0's whole state table to every rank at each forward "
                "(O(num_samples) per step) and discards the other ranks' "
                "updates. Expected the loss outside the DDP-wrapped module. Fix: wrap only "
                "the network, DDP(net), and call loss_fn(**gather_batch(loss_fn, scores, "
                "labels, index)) outside it, or exclude its state from DDP's sync before "
                "wrapping (xrisk.torch.lightning.exclude_loss_state_from_ddp(model); under "
                "Lightning, the callback xrisk.torch.lightning.XRiskCallback does it)."
            )


def _running_ddp() -> Any:
    """The ``DistributedDataParallel`` whose forward is running, if any: DDP records it around
    its module's forward for TorchDynamo (``_get_active_ddp_module``), so the loss reads it
    there instead of walking the call stack."""
    from torch.nn.parallel import DistributedDataParallel

    active = getattr(DistributedDataParallel, "_get_active_ddp_module", None)
    return None if active is None else active()


def check_call(loss: Any, inputs: tuple, named: Mapping[str, Any]) -> None:
    """Checks of a torch loss call while a process group is active (a no-op otherwise).

    Called by every torch loss at each call; costs one ``dist.is_initialized()`` without a
    process group. The first call with a group checks the DDP placement (:func:`check_ddp`);
    a call on inputs that :func:`gather_batch` did not make warns once per loss.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    seen = loss.__dict__.setdefault("_xrisk_checked", set())
    if "ddp" not in seen:
        seen.add("ddp")
        ddp = _running_ddp()
        if ddp is not None:
            check_ddp(ddp)
    values = [*inputs, *named.values()]
    if "naive" not in seen and not any(getattr(v, _GLOBAL, False) for v in values):
        seen.add("naive")
        warnings.warn(
            f"{loss.definition.name} was called on this rank's part of the batch while a "
            f"process group of {dist.get_world_size()} ranks is active: each rank then runs "
            "the loss on a different, smaller batch, the state copies of the ranks disagree "
            "and the parameters differ from one process on the global batch. Expected the "
            "global batch. Fix: loss_fn(**xrisk.torch.distributed.gather_batch(loss_fn, "
            "scores, labels, index)).", DistributedWarning, stacklevel=5,
        )


class ShardedLoss(nn.Module):
    """A torch loss whose keyed state tables are split over the ranks by key.

    Rank ``r`` of ``world`` holds the rows ``k`` with ``k % world == r`` (local row
    ``k // world``) of every table keyed by a key space, plus one scratch row; a table of a
    derived key space (the multi-label (label, sample) tables) is owned by its inner key, one
    stored row per sample holding its rows of every label
    (:func:`xrisk.distributed.stored_row`). Global entries (no key space) and trainable
    auxiliaries are replicated. A call gathers the global batch
    (:func:`gather_batch`), fetches the batch's rows from their owners with one all-reduce of
    a (rows in the batch) table, runs the unchanged loss on that compact table
    (:func:`xrisk.distributed.apply_compact`) and writes each new row on its owner: O(batch)
    communication and memory per step, 1/world of each table per rank, and the same numbers
    as the replicated loss on the global batch.

    Parameters
    ----------
    definition : xrisk.LossDefinition
        The core definition, e.g. ``xrisk.APLoss(num_samples=10**9)`` (no table is
        allocated whole). An adapter loss is accepted too: its definition is used and its
        current state and auxiliaries are copied (this rank's rows).
    dtype : str or torch.dtype, optional
        Float dtype of the state (default: torch's default dtype).
    device : str or torch.device, optional
    group : ProcessGroup, optional
        Default: the world group. Without a process group the loss has one shard.

    Examples
    --------
    >>> import torch, xrisk, xrisk.torch as xr
    >>> from xrisk.torch.distributed import ShardedLoss
    >>> loss_fn = ShardedLoss(xrisk.APLoss(num_samples=6), dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> loss_fn.export_state()["u"][:4, 0].round(4).tolist()  # as xr.APLoss
    [0.4118, 0.0, 0.8303, 0.0]
    """

    def __init__(self, definition: Any, *, dtype: Any = None, device: Any = None,
                 group: Any = None) -> None:
        super().__init__()
        source = None if isinstance(definition, LossDefinition) else definition
        definition = _core._definition(definition)
        self.definition = definition
        self.group = group
        self.rank, self.world = _world(group)
        if source is not None and dtype is None:
            dtype = next((t.dtype for t in source.state if t.dtype.is_floating_point), None)
        float_dtype = (torch.get_default_dtype() if dtype is None
                       else getattr(torch, dtype_name(definition.name, dtype)))
        self._float_dtype = float_dtype
        sizes = definition.table_sizes()
        for name, table in definition.state_tables().items():
            table_dtype = float_dtype if table.kind == "float" else torch.int32
            fill = torch.tensor(initial_values(table), dtype=table_dtype,
                                device=device)
            rows = (table.shape(sizes) if not _core.sharded(definition, name) else
                    (_core.local_size(sizes[_core.row_space(definition, name)], self.rank,
                                      self.world) + 1, *_core.stored_row(definition, name)))
            self.register_buffer(name, torch.zeros(rows, dtype=table_dtype, device=device)
                                 + fill)
        params = definition.init_params(xp=xrisk.backends.get_backend("torch").namespace,
                                        dtype=float_dtype, device=device)
        for name, value in params._asdict().items():
            self.register_parameter(name, nn.Parameter(value))
        if source is not None:
            self.load_state(source.export_state())

    # -- the step ---------------------------------------------------------------------------
    def forward(self, *inputs: torch.Tensor, **named: torch.Tensor) -> torch.Tensor:
        """Loss of one mini-batch; updates the rows of the global batch on their owners.

        Pass this rank's part of the batch (gathered here), or the global batch that
        :func:`gather_batch` returned (used as it is).
        """
        definition = self.definition
        if any(getattr(v, _GLOBAL, False) for v in (*inputs, *named.values())):
            batch = bind_inputs(definition, inputs, named)
        else:
            batch = gather_batch(definition, *inputs, group=self.group, **named)
        tables = definition.state_tables()
        params = definition.params_type(*(getattr(self, n) for n in definition.auxiliaries()))
        globals_ = {n: getattr(self, n) for n in tables if not _core.sharded(definition, n)}
        loss, new, plan = _core.apply_compact(definition, batch, self._fetch, globals_, params)
        with torch.no_grad():
            for name in tables:
                target = getattr(self, name)
                value = getattr(new, name)
                if not _core.sharded(definition, name):
                    if value is not target:
                        target.copy_(value)
                    continue
                local, _ = self._local(plan.slots[_core.row_space(definition, name)],
                                       target.shape[0] - 1)
                target.index_copy_(0, local, value.detach().to(target.dtype))
        return loss

    def _local(self, slots: torch.Tensor, scratch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Local rows of ``slots`` owned here; every other slot points at the scratch row."""
        owned = (slots >= 0) & (slots % self.world == self.rank)
        local = torch.where(owned, slots // self.world, torch.full_like(slots, scratch))
        return local, owned

    def _fetch(self, name: str, slots: torch.Tensor) -> torch.Tensor:
        table = getattr(self, name)
        local, owned = self._local(slots, table.shape[0] - 1)
        rows = table.index_select(0, local)
        mask = owned.reshape(-1, *(1,) * (rows.dim() - 1))
        rows = torch.where(mask, rows, torch.zeros_like(rows))
        if self.world > 1:  # one owner per row: the sum is that row, exactly (x + 0 = x)
            from torch.distributed import _functional_collectives as funcol

            rows = _wait(funcol.all_reduce(rows, "sum", _group(self.group)))
        return rows

    # -- checkpoints ------------------------------------------------------------------------
    def export_shard(self) -> dict[str, np.ndarray]:
        """This rank's rows (scratch row excluded), the replicated entries and the layout
        metadata: save one file per rank; :func:`xrisk.distributed.assemble_shards` of all
        ranks' files gives the export of a single process."""
        backend = xrisk.backends.get_backend("torch")
        out = {}
        for name in self.definition.state_shapes():
            value = np.array(backend.to_numpy(getattr(self, name)), copy=True)
            out[name] = value[:-1].copy() if _core.sharded(self.definition, name) else value
        out[_core.SHARD_RANK] = np.asarray(self.rank, dtype=np.int64)
        out[_core.SHARD_WORLD] = np.asarray(self.world, dtype=np.int64)
        return exported_state(self.definition, out)

    def export_state(self) -> dict[str, np.ndarray]:
        """The full export of a single process (a collective: every rank must call it; it
        moves the whole tables, so use it for small ones or on one process)."""
        shard = self.export_shard()
        if self.world == 1:
            return _core.assemble_shards(self.definition, [shard])
        shards: list[Any] = [None] * self.world
        dist.all_gather_object(shards, shard, group=self.group)
        return _core.assemble_shards(self.definition, shards)

    def load_state(self, arrays: Mapping[str, Any], *, reinterpret: bool = False) -> None:
        """Load this rank's rows from a full export (``export_state()`` of any framework, or
        :func:`xrisk.distributed.assemble_shards`); validated first (its metadata too, and
        ``reinterpret`` as :meth:`xrisk.torch.XRiskLoss.load_state`), nothing changes on
        error."""
        shapes = self.definition.state_shapes()
        dtypes = {n: str(getattr(self, n).dtype).rpartition(".")[2] for n in shapes}
        checked = checked_state_arrays(self.definition, arrays, dtypes, reinterpret=reinterpret)
        self._write_shard(_core.split_export(self.definition, checked, self.rank, self.world))

    def load_shard(self, shard: Mapping[str, Any], *, reinterpret: bool = False) -> None:
        """Load a shard written by :meth:`export_shard` of the same rank and world; validated
        as :meth:`load_state` validates an export (its metadata, keys, this rank's shapes,
        every value in its domain; ``reinterpret`` alike), nothing changes on error."""
        layout = (int(np.asarray(shard.get(_core.SHARD_RANK, -1))),
                  int(np.asarray(shard.get(_core.SHARD_WORLD, -1))))
        if layout != (self.rank, self.world):
            raise ValueError(
                f"{self.definition.name}: shard of rank {layout[0]} of {layout[1]}; expected "
                f"rank {self.rank} of {self.world}. Fix: load this rank's file, or assemble "
                "the shards (xrisk.distributed.assemble_shards) and call load_state.")
        shapes, dtypes = {}, {}
        for name in self.definition.state_shapes():
            target = getattr(self, name)
            keyed = _core.sharded(self.definition, name)
            shapes[name] = ((target.shape[0] - 1, *target.shape[1:]) if keyed
                            else tuple(target.shape))
            dtypes[name] = str(target.dtype).rpartition(".")[2]
            got = tuple(np.shape(shard[name])) if name in shard else shapes[name]
            if got != shapes[name]:
                raise ValueError(
                    f"{self.definition.name}: shard[{name!r}] has shape {got}; expected "
                    f"{shapes[name]}. Fix: load a shard of a loss built with the same "
                    "arguments.")
        arrays = {k: v for k, v in shard.items() if k not in (_core.SHARD_RANK,
                                                             _core.SHARD_WORLD)}
        self._write_shard(checked_state_arrays(self.definition, arrays, dtypes,
                                               reinterpret=reinterpret, shapes=shapes))

    def _write_shard(self, shard: Mapping[str, np.ndarray]) -> None:
        """Copy this rank's checked rows and replicated entries into the buffers."""
        tensors = {}
        for name in self.definition.state_shapes():
            target = getattr(self, name)
            tensors[name] = torch.as_tensor(np.asarray(shard[name])).to(target.device,
                                                                         target.dtype)
        with torch.no_grad():
            for name, value in tensors.items():
                target = getattr(self, name)
                keyed = _core.sharded(self.definition, name)
                (target[:-1] if keyed else target).copy_(value)

    def extra_repr(self) -> str:
        return f"{self.definition!r}, rank={self.rank}, world={self.world}"
