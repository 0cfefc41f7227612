"""Data-parallel training with ``tf.distribute``: the global batch, and state sharded by rows.

**Replicated state (the default).** Build the loss inside ``strategy.scope()``: its state
variables are then mirrored with ``aggregation=ONLY_FIRST_REPLICA`` (the first replica's rows
are written to every copy, so the copies cannot drift; :func:`state_variables` chooses
otherwise). In the replica function, :func:`gather_batch` all-gathers every replica's part
into the global batch (with its static size restored), the unchanged loss runs on it, and
:func:`scale_loss` divides it by the number of replicas: TensorFlow sums the replicas'
gradients, so the model's and the loss's auxiliaries' gradients are those of one process on
the global batch.

>>> import keras
>>> import tensorflow as tf
>>> import xrisk.tensorflow as xr
>>> from xrisk.tensorflow import distributed as xd
>>> def make_model():
...     return keras.Sequential([keras.Input((30,)), keras.layers.Dense(1)])
>>> n = 1000  # samples in the data set: one state row each

Building the strategy and running the step need several replicas (GPUs or a configured CPU
cluster), which a doctest does not set up, so these lines are skipped here (the test suite runs
the same recipe on two replicas):

>>> strategy = tf.distribute.MirroredStrategy()                          # doctest: +SKIP
>>> with strategy.scope():                                               # doctest: +SKIP
...     model, loss_fn = make_model(), xr.APLoss(num_samples=n)
...     optimizer = xr.SOAP(model.trainable_variables, learning_rate=1e-3)
>>> @tf.function                                                          # doctest: +SKIP
... def step(x, y, index):  # this replica's part of the batch
...     def replica(x, y, index):
...         with tf.GradientTape() as tape:
...             scores = tf.sigmoid(model(x))[:, 0]
...             batch = xd.gather_batch(loss_fn, scores, y, index)
...             loss = xd.scale_loss(loss_fn(**batch))
...         variables = model.trainable_variables + list(loss_fn.trainable_variables)
...         optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
...     strategy.run(replica, args=(x, y, index))

Outside a strategy (or with one replica) :func:`gather_batch` returns the inputs and
:func:`scale_loss` the loss, so the same step runs on 1 or N replicas.

**Sharded state.** :class:`ShardedLoss` keeps on replica ``r`` of ``world`` only the rows
``k`` with ``k % world == r`` (mirrored variables with ``aggregation=NONE``, whose copies are
independent: each copy holds 1/world of the table) and moves the batch's rows with one
all-reduce per step.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

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

__all__ = ["gather_batch", "scale_loss", "state_variables", "variable_options", "ShardedLoss",
           "DistributedWarning"]

DistributedWarning = _core.DistributedWarning

def _plain(fn: Any) -> Any:
    """Keep AutoGraph out: these helpers have no tensor-dependent Python control flow, and
    AutoGraph, converting the calls they make into the loss definitions, breaks on them."""
    return tf.autograph.experimental.do_not_convert(fn)


_options = threading.local()  # state_variables() settings
_gathered = threading.local()  # ids of the tensors gather_batch returned last, per replica


def _replica() -> tuple[Any, int]:
    """``(replica context or None, number of replicas)``."""
    ctx = tf.distribute.get_replica_context()
    if ctx is None:  # cross-replica context: the loss is not called per replica here
        return None, 1
    return ctx, ctx.num_replicas_in_sync


@_plain
def gather_batch(loss: Any, *inputs: Any, **named: Any) -> dict[str, Any]:
    """The global batch from this replica's part, by input name (inside ``strategy.run``).

    Every input whose leading dimension is the loss's batch dimension
    (:func:`xrisk.distributed.gather_plan`) is all-gathered on axis 0 in replica order
    (``ReplicaContext.all_gather``, differentiable: the gradient of this replica's part is
    the sum of the replicas' gradients of the global batch). Inputs that travel in one dtype
    share one all-gather (flattened to (batch, width) and concatenated on axis 1, then split
    back: each gather is a collective plus a dozen ops per replica, whose tracing dominated a
    step's build). The static batch size, which the gather loses, is restored (world x the
    part's size) when the part's is known. Integer inputs travel as integers (bool and narrow
    integers as int64, exactly) and come back in their dtype. Inputs of another leading
    dimension are returned as given. With one replica the inputs are returned unchanged.
    """
    definition = _core._definition(loss)
    bound = bind_inputs(definition, inputs, named)
    ctx, world = _replica()
    plan = _core.gather_plan(definition)
    out = dict(bound)
    groups: dict[Any, list[Any]] = {}
    for name, value in bound.items():
        if value is not None and world > 1 and name in plan.gathered:
            value = tf.convert_to_tensor(value)
            groups.setdefault(_travel_dtype(value.dtype), []).append((name, value))
    for dtype, members in groups.items():
        widths = [_width(value) for _, value in members]
        grouped = len(members) > 1 and all(widths)  # static, non-empty rows: one gather
        if grouped:
            flat = [tf.reshape(tf.cast(v, dtype), [-1, w]) for (_, v), w in zip(members, widths)]
            pieces = tf.split(ctx.all_gather(tf.concat(flat, axis=1), axis=0), widths, axis=1)
        else:
            pieces = [ctx.all_gather(tf.cast(v, dtype), axis=0) for _, v in members]
        for (name, value), piece in zip(members, pieces):
            static = value.shape
            if grouped:
                piece = tf.reshape(piece, [-1, *static[1:]])
            piece = tf.cast(piece, value.dtype)
            if static.rank is not None and static[0] is not None:
                piece = tf.ensure_shape(piece, [static[0] * world, *static[1:]])
            out[name] = piece
    _gathered.ids = {id(v) for v in out.values() if v is not None}
    _gathered.keep = list(out.values())  # the ids stay valid while these tensors live
    return out


def _travel_dtype(dtype: Any) -> Any:
    """The dtype an input is gathered in: all_gather takes 32/64-bit numbers and float16
    only, so bool and integers other than (u)int64 travel as int64 (exact)."""
    if dtype == tf.bool or (dtype.is_integer and dtype not in (tf.int64, tf.uint64)):
        return tf.int64
    return dtype


def _width(value: Any) -> int:
    """Elements of one row of ``value`` (0 where a trailing dimension is not static)."""
    dims = value.shape[1:]
    if dims.rank is None or any(d is None for d in dims):
        return 0
    return int(np.prod(dims, dtype=np.int64)) if dims.rank else 1


@_plain
def scale_loss(loss: Any) -> Any:
    """``loss / num_replicas_in_sync`` inside a replica context, ``loss`` elsewhere.

    Every replica computes the same global loss; TensorFlow's optimizers sum the replicas'
    gradients, so this scaling makes that sum the single-process gradient (for the model,
    whose gradient reaches each replica through :func:`gather_batch`, and for the loss's own
    auxiliaries alike).
    """
    _, world = _replica()
    return loss if world == 1 else loss / world


_REFUSED = {tf.VariableAggregation.SUM: "SUM", tf.VariableAggregation.MEAN: "MEAN"}


@contextlib.contextmanager
def state_variables(synchronization: Any = None, aggregation: Any = None) -> Iterator[None]:
    """Synchronization and aggregation of the state variables of losses built inside.

    Parameters
    ----------
    synchronization : tf.VariableSynchronization, optional
        ``ON_WRITE`` (or ``AUTO``); ``ON_READ`` variables have no row scatter and are refused.
    aggregation : tf.VariableAggregation, optional
        ``ONLY_FIRST_REPLICA`` (the default under a strategy: every copy gets the first
        replica's rows) or ``NONE`` (each replica writes its own copy: equal copies as long
        as every replica calls the loss on the same global batch, one broadcast less).
        ``SUM`` and ``MEAN`` are refused: row scatters cannot be summed or averaged.

    Raises
    ------
    ValueError
        For the refused choices.
    """
    if synchronization == tf.VariableSynchronization.ON_READ:
        raise ValueError(
            "state_variables: synchronization=ON_READ; expected ON_WRITE or AUTO. ON_READ "
            "variables have no scatter_update, which writes the batch's rows. Fix: use "
            "ON_WRITE (the default).")
    if aggregation in _REFUSED:
        raise ValueError(
            f"state_variables: aggregation={_REFUSED[aggregation]}; expected "
            "ONLY_FIRST_REPLICA or NONE. A row scatter cannot be summed or averaged over "
            "replicas. Fix: aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA.")
    previous = getattr(_options, "value", None)
    _options.value = {k: v for k, v in (("synchronization", synchronization),
                                        ("aggregation", aggregation)) if v is not None}
    try:
        yield
    finally:
        _options.value = previous


def variable_options() -> dict[str, Any]:
    """Keyword arguments of ``tf.Variable`` for a loss's state variables built now: those of
    :func:`state_variables`, else ``aggregation=ONLY_FIRST_REPLICA`` under a strategy."""
    chosen = getattr(_options, "value", None)
    if chosen is not None:
        return dict(chosen)
    if tf.distribute.has_strategy():
        return {"synchronization": tf.VariableSynchronization.ON_WRITE,
                "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA}
    return {}


def check_call(loss: Any, inputs: tuple, named: Mapping[str, Any]) -> None:
    """Warn once per loss when it is called per replica (several replicas) on inputs that
    :func:`gather_batch` did not return; a no-op outside a multi-replica context."""
    ctx, world = _replica()
    if world < 2 or loss.__dict__.get("_xrisk_warned"):
        return
    ids: set[int] = getattr(_gathered, "ids", set())
    if not any(id(v) in ids for v in (*inputs, *named.values())):
        loss.__dict__["_xrisk_warned"] = True
        warnings.warn(
            f"{loss.definition.name} was called on this replica's part of the batch in a "
            f"strategy of {world} replicas: each replica then runs the loss on a different, "
            "smaller batch and the parameters differ from one process on the global batch. "
            "Expected the global batch. Fix: batch = xrisk.tensorflow.distributed."
            "gather_batch(loss_fn, scores, labels, index); loss = xrisk.tensorflow."
            "distributed.scale_loss(loss_fn(**batch)).", DistributedWarning, stacklevel=3,
        )


def _replica_copy(variable: Any, ctx: Any) -> Any:
    """This replica's copy of a mirrored variable (a plain variable as it is).

    ``tf.gather`` on a ``MirroredVariable`` has no sparse read: it converts the whole
    variable to a tensor, which copies it once rows were scattered into it (TensorFlow's
    copy-on-read mode) — O(table) per step (90 ms at 1e7 rows of a 2-replica step). The
    replica's own copy reads only the rows. MirroredStrategy orders ``values`` by replica.
    """
    copies = getattr(variable, "values", None)
    replica = None if ctx is None else tf.get_static_value(ctx.replica_id_in_sync_group)
    if copies is None or replica is None or len(copies) < 2:
        return variable
    return copies[int(replica)]


class ShardedLoss(tf.Module):
    """A TensorFlow loss whose keyed state tables are split over the replicas by key.

    Replica ``r`` of ``world`` holds the rows ``k`` with ``k % world == r`` (local row
    ``k // world``; a derived table's rows by their inner key, as
    :class:`xrisk.torch.distributed.ShardedLoss`) plus a scratch row, in its own copy of a
    mirrored variable with ``aggregation=NONE`` (copies are independent); other entries are
    replicated (``ONLY_FIRST_REPLICA``). Build it inside ``strategy.scope()`` and call it
    inside ``strategy.run`` with the replica's part (gathered here) or with
    :func:`gather_batch`'s output; scale the loss with :func:`scale_loss` as for the
    replicated loss.

    Parameters
    ----------
    definition : xrisk.LossDefinition
        E.g. ``xrisk.APLoss(num_samples=10**9)``; no table is allocated whole.
    dtype : str or tf.DType, optional
        Float dtype of the state (default: Keras' floatx).
    """

    def __init__(self, definition: LossDefinition, *, dtype: Any = None) -> None:
        super().__init__(name=f"Sharded{definition.name}")
        self.definition = _core._definition(definition)
        definition = self.definition
        strategy = tf.distribute.get_strategy()
        self.world = strategy.num_replicas_in_sync
        float_dtype = tf.as_dtype(tf.keras.backend.floatx() if dtype is None
                                  else dtype_name(definition.name, dtype))
        sizes = definition.table_sizes()
        with tf.init_scope():
            for name, table in definition.state_tables().items():
                table_dtype = float_dtype if table.kind == "float" else tf.int32
                sharded = _core.sharded(definition, name)
                shape = ((-(-sizes[_core.row_space(definition, name)] // self.world) + 1,
                          *_core.stored_row(definition, name)) if sharded
                         else table.shape(sizes))
                value = tf.zeros(shape, table_dtype) + tf.constant(initial_values(table),
                                                                   table_dtype)
                aggregation = (tf.VariableAggregation.NONE if sharded
                               else tf.VariableAggregation.ONLY_FIRST_REPLICA)
                setattr(self, name, tf.Variable(value, trainable=False, name=name,
                                                aggregation=aggregation))
            params = definition.init_params(
                xp=xrisk.backends.get_backend("tensorflow").namespace, dtype=float_dtype)
            for name, value in params._asdict().items():
                setattr(self, name, tf.Variable(value, trainable=True, name=name))

    @_plain
    def __call__(self, *inputs: Any, **named: Any) -> Any:
        """Loss of one mini-batch (global); updates the batch's rows on their owners."""
        definition = self.definition
        ids: set[int] = getattr(_gathered, "ids", set())
        if any(id(v) in ids for v in (*inputs, *named.values())):
            batch = bind_inputs(definition, inputs, named)
        else:
            batch = gather_batch(definition, *inputs, **named)
        ctx, world = _replica()
        rank = tf.constant(0, tf.int64) if ctx is None or world == 1 else tf.cast(
            ctx.replica_id_in_sync_group, tf.int64)
        tables = definition.state_tables()
        params = definition.params_type(*(getattr(self, n) for n in definition.auxiliaries()))
        globals_ = {n: getattr(self, n) for n in tables if not _core.sharded(definition, n)}

        def fetch(name: str, slots: Any) -> Any:
            table = getattr(self, name)
            local, owned = self._local(slots, rank, table.shape[0] - 1)
            rows = tf.gather(_replica_copy(table, ctx), local)
            mask = tf.reshape(owned, [-1, *[1] * (len(rows.shape) - 1)])
            rows = tf.where(mask, rows, tf.zeros_like(rows))
            if world > 1:  # one owner per row: the sum is that row, exactly
                rows = ctx.all_reduce(tf.distribute.ReduceOp.SUM, rows)
            return rows

        loss, new, plan = _core.apply_compact(definition, batch, fetch, globals_, params)
        for name in tables:
            target = getattr(self, name)
            value = getattr(new, name)
            if not _core.sharded(definition, name):
                if value is not target:
                    target.assign(value)
                continue
            local, _ = self._local(plan.slots[_core.row_space(definition, name)], rank,
                                   target.shape[0] - 1)
            target.scatter_update(tf.IndexedSlices(tf.cast(value, target.dtype), local))
        return loss

    def _local(self, slots: Any, rank: Any, scratch: int) -> tuple[Any, Any]:
        slots = tf.cast(slots, tf.int64)
        owned = (slots >= 0) & (tf.math.floormod(slots, self.world) == rank)
        local = tf.where(owned, tf.math.floordiv(slots, self.world),
                         tf.fill(tf.shape(slots), tf.constant(scratch, tf.int64)))
        return local, owned

    def _copies(self, name: str) -> list[Any]:
        value = getattr(self, name)
        return list(getattr(value, "values", (value,)))

    def export_shards(self) -> list[dict[str, np.ndarray]]:
        """One export per replica (its rows, scratch row excluded, plus the replicated
        entries), for :func:`xrisk.distributed.assemble_shards`."""
        out = []
        for rank in range(self.world):
            shard = {}
            for name in self.definition.state_shapes():
                copies = self._copies(name)
                value = np.array(copies[rank if len(copies) > 1 else 0].numpy(), copy=True)
                if _core.sharded(self.definition, name):
                    size = _core.local_size(self.definition.table_sizes()[
                        _core.row_space(self.definition, name)], rank, self.world)
                    value = value[:size].copy()
                shard[name] = value
            shard[_core.SHARD_RANK] = np.asarray(rank, dtype=np.int64)
            shard[_core.SHARD_WORLD] = np.asarray(self.world, dtype=np.int64)
            out.append(exported_state(self.definition, shard))
        return out

    def export_state(self) -> dict[str, np.ndarray]:
        """The full export of a single process (assembled from every replica's rows)."""
        return _core.assemble_shards(self.definition, self.export_shards())

    def load_state(self, arrays: Mapping[str, Any], *, reinterpret: bool = False) -> None:
        """Load a full export (any framework's ``export_state``); validated first (its
        metadata too, and ``reinterpret`` as :meth:`xrisk.tensorflow.XRiskLoss.load_state`)."""
        shapes = self.definition.state_shapes()
        checked = checked_state_arrays(self.definition, arrays,
                                       {n: getattr(self, n).dtype.name for n in shapes},
                                       reinterpret=reinterpret)
        for rank in range(self.world):
            shard = _core.split_export(self.definition, checked, rank, self.world)
            for name in shapes:
                copies = self._copies(name)
                value = shard[name]
                if _core.sharded(self.definition, name):
                    target = copies[rank] if len(copies) > 1 else copies[0]
                    padded = target.numpy().copy()
                    padded[: value.shape[0]] = value
                    target.assign(padded)
                else:
                    for copy in copies:
                        copy.assign(value)
