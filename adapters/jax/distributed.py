"""Data-parallel training with JAX: the global batch over devices, and state sharded by rows.

**Sharded jit (the recipe).** Put the *global* batch on a mesh with its batch axis split over
the devices (:func:`shard_batch`), keep the model, the auxiliaries and the loss state
replicated (:func:`replicate`), and ``jax.jit`` the usual step: XLA computes the loss of the
global batch, so every number equals one device's run on that batch, and the state stays
donated. Nothing in the step changes with the number of devices.

>>> import jax, jax.numpy as jnp, numpy as np
>>> import xrisk.jax as xr
>>> from xrisk.jax import distributed as xd
>>> labels = np.array([1.0, 0.0, 0.0, 0.0] * 32)
>>> loss_fn = xr.APLoss(num_samples=len(labels))
>>> params = jnp.zeros(30)
>>> def train_step(params, state, batch):
...     def objective(params):
...         scores = jax.nn.sigmoid(batch["x"] @ params)
...         return loss_fn.apply(state, scores, batch["labels"], batch["index"])
...     (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(params)
...     return params - 0.1 * grads, state, loss
>>> sampler = xr.DualSampler(labels, 64, sampling_rate=0.5)
>>> batches = ((np.ones((len(i), 30), np.float32), labels[i], i) for i in sampler)
>>> mesh = jax.make_mesh((jax.device_count(),), ("data",),
...                      axis_types=(jax.sharding.AxisType.Auto,))
>>> state, params = xd.replicate((loss_fn.init(), params), mesh)
>>> step = jax.jit(train_step, donate_argnums=(0, 1))
>>> for x, y, index in batches:  # the global batch (here: one epoch)
...     batch = xd.shard_batch(loss_fn, {"x": x, "labels": y, "index": index}, mesh)
...     params, state, loss = step(params, state, batch)
>>> bool(jnp.isfinite(loss))
True

Block on each step's result on a host with few cores (``jax.block_until_ready``):
asynchronous dispatch of many steps of cross-device collectives can time out there.

**shard_map.** Inside ``jax.shard_map`` each device sees its own part; :func:`gather_batch`
all-gathers the declared batch inputs with ``to="invarying"`` so that the loss, the new state
and the gradients are the same on every device (the default ``all_gather`` output varies
over the axis, and shard_map then cannot prove the replicated outputs; ``check_vma=False``
gives wrong gradients, and a loss traced there warns, see :func:`check_call`).

**Sharded state.** :func:`shard_state` places every table the loss addresses by an index
input row-sharded over the mesh axis (blocks of rows, padded to a multiple of the device
count), the rest replicated: each device holds 1/world of the table and the jitted step
(plain ``jax.jit``, ``out_shardings`` = :func:`state_sharding`) moves only the batch's rows.
:func:`sharded_init` builds that layout directly (each device allocates only its rows).
A table of a derived key space (the multi-label (label, sample) tables) is split the same
way, in blocks of its rows. :func:`export_state` returns the usual export (padding
removed); :func:`export_shards` one file's worth per device and
:func:`xrisk.distributed.assemble_shards` puts them together.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from xrisk import distributed as _core
from xrisk.adapter_api import bind_inputs, exported_state, initial_values

__all__ = ["gather_batch", "shard_batch", "replicate", "batch_sharding", "shard_state",
           "state_sharding", "sharded_init", "export_state", "export_shards", "check_call",
           "DistributedWarning"]

DistributedWarning = _core.DistributedWarning


def _varying_axes(value: Any) -> frozenset:
    """The manual mesh axes (inside ``shard_map``) over which ``value`` varies; empty
    outside ``shard_map`` (or for a value gathered with ``to="invarying"``)."""
    try:
        aval = jax.typeof(value)
    except TypeError:
        return frozenset()
    mat = getattr(aval, "mat", None)  # jax 0.10: ShapedArray.mat.varying
    varying: Any = getattr(mat, "varying", None)  # a set of axis names, or None
    if varying is None:
        varying = getattr(aval, "vma", frozenset())  # earlier releases
    return frozenset(varying)


def _unchecked_manual_axes() -> tuple:
    """The manual mesh axes of an enclosing ``shard_map(..., check_vma=False)`` (``jax.pmap``
    runs as one), empty elsewhere.

    Without the check JAX types no value as varying over an axis, so a device's part of the
    batch looks like the gathered batch. Being inside manual axes is public
    (``jax.sharding.get_abstract_mesh().manual_axes``); whether the check is on shows in the
    type of an axis index, which varies over its axis by definition and is typed so exactly
    when the check is on. The probe runs in ``jax.eval_shape``'s own trace, so no operation
    enters the caller's program.
    """
    get_mesh = getattr(jax.sharding, "get_abstract_mesh", None)
    manual = tuple(getattr(get_mesh(), "manual_axes", ())) if get_mesh is not None else ()
    if not manual:
        return ()
    typed: list[frozenset] = []

    def probe() -> Any:
        index = jax.lax.axis_index(manual[0])
        typed.append(_varying_axes(index))
        return index

    jax.eval_shape(probe)
    return () if typed and typed[0] else manual


def check_call(loss: Any, inputs: tuple, named: Mapping[str, Any]) -> None:
    """Warn once per loss when it is traced inside ``shard_map`` on a device's own part of
    the batch (a batch input that varies over a mesh axis): each device would then run the
    loss on a different, smaller batch. Inside ``shard_map(..., check_vma=False)`` (or
    ``jax.pmap``) that cannot be told from the gathered batch, whose gradient is wrong there
    anyway: any call there warns. Costs nothing at run time (it reads types while tracing).
    """
    if loss.__dict__.get("_xrisk_warned"):
        return
    definition = _core._definition(loss)
    bound = bind_inputs(definition, inputs, named)
    plan = _core.gather_plan(definition)
    axes = frozenset().union(*(_varying_axes(bound[name]) for name in plan.gathered
                               if bound.get(name) is not None))
    fix = ("Fix: loss_fn.apply(state, **xrisk.jax.distributed.gather_batch(loss_fn, scores, "
           "labels, index, axis_name=...)) inside jax.shard_map with check_vma=True (the "
           "default), or plain jax.jit with the batch sharded "
           "(xrisk.jax.distributed.shard_batch).")
    if axes:
        object.__setattr__(loss, "_xrisk_warned", True)
        warnings.warn(
            f"{definition.name} was traced inside shard_map on inputs that vary over the mesh "
            f"axes {sorted(map(str, axes))}: each device then runs the loss on its own part "
            "of the batch, not the global batch, and the state copies disagree. Expected "
            f"the global batch. {fix}", DistributedWarning, stacklevel=3)
        return
    unchecked = _unchecked_manual_axes()
    if unchecked:
        object.__setattr__(loss, "_xrisk_warned", True)
        warnings.warn(
            f"{definition.name} was traced inside shard_map with check_vma=False (or "
            f"jax.pmap) over the mesh axes {sorted(map(str, unchecked))}: JAX then types no "
            "input as a device's part, so a per-device call (each device runs the loss on "
            "its own smaller batch) cannot be told from a gathered one, and with the batch "
            "gathered the gradient misses the other devices' scores. Expected "
            "check_vma=True. "
            f"{fix} (Summing the gradients over the devices by hand, with the batch "
            "gathered? Then filter this warning.)", DistributedWarning, stacklevel=3)


def batch_sharding(loss: Any, mesh: Mesh, axis: str = "data") -> dict[str, NamedSharding]:
    """Input name -> sharding: the batch inputs split on ``axis`` (axis 0), others
    replicated (see :func:`xrisk.distributed.gather_plan`)."""
    plan = _core.gather_plan(loss)
    return {spec.name: NamedSharding(mesh, P(axis) if spec.name in plan.gathered else P())
            for spec in _core._definition(loss).inputs()}


def shard_batch(loss: Any, batch: Mapping[str, Any], mesh: Mesh, axis: str = "data"
                ) -> dict[str, Any]:
    """Place a global batch on ``mesh``: the loss's batch inputs split over ``axis``.

    Entries that are not inputs of the loss (e.g. the model's features ``"x"``) are split
    on axis 0 too; ``None`` entries stay ``None``. The batch size must be a multiple of the
    mesh axis size (``DualSampler`` batch sizes are).
    """
    shardings = batch_sharding(loss, mesh, axis)
    split = NamedSharding(mesh, P(axis))
    return {name: None if value is None else jax.device_put(value, shardings.get(name, split))
            for name, value in batch.items()}


def replicate(tree: Any, mesh: Mesh) -> Any:
    """``tree`` with every array replicated on every device of ``mesh``."""
    return jax.device_put(tree, NamedSharding(mesh, P()))


def gather_batch(loss: Any, *inputs: Any, axis_name: str = "data", **named: Any
                 ) -> dict[str, Any]:
    """Inside ``jax.shard_map``: the global batch from this device's part, by input name.

    Every declared batch input is all-gathered along axis 0 over ``axis_name`` (tiled, in
    device order) with ``to="invarying"``: the loss of the gathered batch is the same on
    every device, and its gradient flows back to each device's own scores (the transpose
    sums the devices' identical cotangents and keeps this device's slice). Other inputs
    are returned as given.
    """
    definition = _core._definition(loss)
    plan = _core.gather_plan(definition)
    bound = bind_inputs(definition, inputs, named)
    return {name: (jax.lax.all_gather(value, axis_name, axis=0, tiled=True, to="invarying")
                   if value is not None and name in plan.gathered else value)
            for name, value in bound.items()}


def _padded(rows: int, mesh: Mesh, axis: str) -> int:
    count = mesh.shape[axis]
    return -(-rows // count) * count


def state_sharding(loss: Any, mesh: Mesh, axis: str = "data") -> Any:
    """The state's NamedTuple of shardings for :func:`shard_state`'s layout (pass it as the
    step's ``out_shardings`` for the state, so the new state keeps the layout)."""
    definition = _core._definition(loss)
    return definition.state_type(**{
        name: NamedSharding(mesh, P(axis) if _core.sharded(definition, name) else P())
        for name in definition.state_tables()})


def _padded_shape(definition: Any, name: str, mesh: Mesh, axis: str) -> tuple[int, ...]:
    shape = definition.state_shapes()[name]
    if not _core.sharded(definition, name):
        return shape
    return (_padded(shape[0], mesh, axis), *shape[1:])


def sharded_init(loss: Any, mesh: Mesh, axis: str = "data", *, dtype: Any = None) -> Any:
    """The initial state in :func:`shard_state`'s layout, built where it lives.

    One ``jax.jit`` with the state's shardings as ``out_shardings`` fills every table: each
    device allocates and fills only its own block of rows, so no device (nor the host) ever
    holds a whole sharded table, which ``shard_state(loss, loss.init(), mesh)`` needs. The
    values and shardings are those of ``shard_state`` applied to ``init()``.

    Parameters
    ----------
    loss : xrisk JAX loss or core definition
    mesh : Mesh
    axis : str, default "data"
        The mesh axis the rows are split over.
    dtype : dtype, optional
        Float dtype of the state; default the adapter loss's ``dtype`` (float32 for a core
        definition).
    """
    definition = _core._definition(loss)
    dtype = jnp.dtype(dtype if dtype is not None else getattr(loss, "dtype", jnp.float32))
    tables = definition.state_tables()

    def build() -> Any:
        values = {}
        for name, table in tables.items():
            kind = dtype if table.kind == "float" else jnp.int32
            fill = jnp.asarray(initial_values(table), kind)
            values[name] = jnp.zeros(_padded_shape(definition, name, mesh, axis), kind) + fill
        return definition.state_type(**values)

    return jax.jit(build, out_shardings=state_sharding(definition, mesh, axis))()


def shard_state(loss: Any, state: Any, mesh: Mesh, axis: str = "data") -> Any:
    """``state`` with its sharded tables split in row blocks over ``axis`` of ``mesh``.

    Tables that :func:`xrisk.distributed.sharded` names are padded with initial rows to a
    multiple of the axis size (the padding is never addressed: indices stay below
    ``num_samples``) and split; other entries are replicated. Pass a state from
    ``loss.init()`` or ``loss.load_state(...)`` (numpy arrays work too).
    """
    definition = _core._definition(loss)
    shardings = state_sharding(definition, mesh, axis)
    out = {}
    for name, value in state._asdict().items():
        if _core.sharded(definition, name):
            extra = _padded(value.shape[0], mesh, axis) - value.shape[0]
            if extra:
                value = jnp.concatenate([jnp.asarray(value),
                                         jnp.repeat(jnp.asarray(value)[-1:], extra, axis=0)])
        out[name] = jax.device_put(value, getattr(shardings, name))
    return definition.state_type(**out)


def export_state(loss: Any, state: Any, params: Any = None) -> dict[str, np.ndarray]:
    """The usual export (as ``loss.export_state``) of a state from :func:`shard_state`:
    padding rows removed, one numpy array per entry (gathered to this host)."""
    definition = _core._definition(loss)
    sizes = definition.state_shapes()
    values = {**state._asdict(), **({} if params is None else params._asdict())}
    return exported_state(definition, {
        name: np.array(np.asarray(value)[: sizes[name][0]] if _core.sharded(definition, name)
                       else np.asarray(value), copy=True)
        for name, value in values.items()})


def export_shards(loss: Any, state: Any, params: Any = None) -> list[dict[str, np.ndarray]]:
    """One export per device of a :func:`shard_state` state, in the strided layout of
    :func:`xrisk.distributed.split_export` (rank = the device's position on the axis), so
    that :func:`xrisk.distributed.assemble_shards` reassembles them and any framework's
    sharded loss loads them. Each holds O(num_samples / world) rows."""
    definition = _core._definition(loss)
    full = export_state(definition, state, params)
    world = next((len(value.sharding.device_set) for name, value in state._asdict().items()
                  if _core.sharded(definition, name)), 1)
    return [_core.split_export(definition, full, rank, world) for rank in range(world)]
