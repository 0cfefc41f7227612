"""Worker of tests/test_distributed.py: every registered loss on 2 JAX host devices.

``python -m tests._distributed_jax OUT`` (XLA_FLAGS must force 2 host devices before JAX
starts, so this runs in its own process) compares, for every loss, the single-device run on
the global batch with: ``shard_map`` with :func:`xrisk.jax.distributed.gather_batch` (state
replicated), and sharded jit (the batch split over the devices) with the state row-sharded
from :func:`xrisk.jax.distributed.sharded_init`, then the per-device checkpoints; and
``sharded_init`` with ``shard_state`` of the full init (values, shardings, rows per device).
Each step is waited for. Writes the mismatches (a list of strings) as JSON to ``OUT``.
"""

from __future__ import annotations

import json
import os
import sys
import time

# Two host devices. These steps are tiny and compile time dominates: no backend optimization,
# the classic loop emitters (XLA's fusion emitters compile 2-3 times slower here) and one
# LLVM module per program.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=2"
                           + " --xla_backend_optimization_level=0"
                           + " --xla_cpu_use_fusion_emitters=false"
                           + " --xla_cpu_parallel_codegen_split_count=1")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from tests._distributed import LR, compare, loss_names, make_plan, score_names  # noqa: E402
from xrisk import distributed as core  # noqa: E402
from xrisk._adapter_support import METADATA_KEY  # noqa: E402
from xrisk.jax import distributed as xd  # noqa: E402


def _link(z, link):
    return jax.nn.sigmoid(z) if link == "sigmoid" else z


def make_step(plan, gather=None):
    definition = plan.definition
    scores = score_names(definition)

    def forward(w, aux, state, batch):
        inputs = {k: (_link(v @ w, plan.link) if k in scores and v is not None else v)
                  for k, v in batch.items()}
        if gather is not None:
            inputs = gather(inputs)
        return definition.apply(state, **inputs, params=aux)

    def step(w, aux, state, batch, run=forward):
        (loss, new_state), (gw, ga) = jax.value_and_grad(run, argnums=(0, 1), has_aux=True)(
            w, aux, state, batch)
        aux = jax.tree.map(lambda p, g: p - LR * g, aux, ga)
        return w - LR * gw, aux, new_state, loss

    return forward, step


def train(plan, mode: str, mesh) -> dict:
    definition = plan.definition
    state = definition.init(xp=jnp, dtype=jnp.float64)
    aux = definition.params_type(**{k: jnp.asarray(v) for k, v in plan.params0.items()})
    w = jnp.asarray(plan.w0)
    forward, step = make_step(plan)
    if mode == "shard_map":
        batch_specs = {name: s.spec for name, s in xd.batch_sharding(definition, mesh).items()}

        def gathered(w, aux, state, batch):
            specs = {k: batch_specs.get(k, P("data")) for k in batch}
            inner = make_step(plan, gather=lambda inputs: xd.gather_batch(definition, **inputs))[0]
            return jax.shard_map(inner, mesh=mesh, in_specs=(P(), P(), P(), specs),
                                 out_specs=(P(), P()))(w, aux, state, batch)

        run = jax.jit(lambda w, aux, state, batch: step(w, aux, state, batch, run=gathered))
    elif mode == "sharded_state":
        state = xd.sharded_init(definition, mesh, dtype=jnp.float64)
        replicated = NamedSharding(mesh, P())
        run = jax.jit(step, out_shardings=(replicated, replicated,
                                           xd.state_sharding(definition, mesh), replicated))
    else:
        run = jax.jit(step)
    if mode != "single":
        w, aux = xd.replicate((w, aux), mesh)
        if mode != "sharded_state":
            state = xd.replicate(state, mesh)
    losses = []
    for t in range(len(plan.parts)):
        batch = {k: (None if v is None else np.asarray(v)) for k, v in plan.global_batch(t).items()}
        if mode != "single":
            batch = xd.shard_batch(definition, batch, mesh)
        w, aux, state, loss = jax.block_until_ready(run(w, aux, state, batch))
        losses.append(float(loss))
    out = {"w": np.asarray(w), "loss": np.array(losses),
           **xd.export_state(definition, state, aux)}
    if mode == "sharded_state":
        out["_shards"] = xd.export_shards(definition, state, aux)
    return out


def check_init(definition, mesh) -> list[str]:
    """sharded_init (each device builds its rows) equals shard_state of the full init, in
    values and shardings; every sharded table holds 1/2 of its padded rows per device."""
    name = definition.name
    got = xd.sharded_init(definition, mesh, dtype=jnp.float64)
    want = xd.shard_state(definition, definition.init(xp=jnp, dtype=jnp.float64), mesh)
    problems = []
    for field in definition.state_tables():
        a, b = getattr(got, field), getattr(want, field)
        if a.shape != b.shape or a.dtype != b.dtype or not np.array_equal(a, b):
            problems.append(f"{name} sharded_init[{field}]: {a.shape} {a.dtype} != "
                            f"{b.shape} {b.dtype} or values differ")
        if not a.sharding.is_equivalent_to(b.sharding, a.ndim):
            problems.append(f"{name} sharded_init[{field}]: sharding {a.sharding} != "
                            f"{b.sharding}")
        if core.sharded(definition, field):
            rows = {s.data.shape[0] for s in a.addressable_shards}
            if rows != {a.shape[0] // 2}:
                problems.append(f"{name} sharded_init[{field}]: rows per device {rows}, "
                                f"expected {{{a.shape[0] // 2}}}")
    return problems


def check_loss(name: str, mesh) -> list[str]:
    plan = make_plan(name)
    want = train(plan, "single", None)
    problems = check_init(plan.definition, mesh)
    # Sharded jit runs with the row-sharded state (the batch split over the devices, the
    # state's tables too); shard_map with the state replicated.
    for mode in ("shard_map", "sharded_state"):
        got = train(plan, mode, mesh)
        shards = got.pop("_shards", None)
        problems += compare(name, got, want, mode)
        if shards is not None:
            assembled = core.assemble_shards(plan.definition, shards)
            keys = {*plan.definition.state_shapes(), METADATA_KEY}
            problems += compare(name, assembled, {k: want[k] for k in keys}, "assembled")
    return problems


def check_misuse(mesh) -> list[str]:
    """A loss traced in shard_map on a device's part warns; on gather_batch's output not.
    With check_vma=False (and in jax.pmap) every call warns: JAX types no input as a
    device's part there, and a gathered call's gradient is wrong."""
    import warnings

    import xrisk.jax as xr

    problems = []
    batch = (jnp.array([0.9, 0.2, 0.6, 0.4]), jnp.array([1, 0, 1, 0]), jnp.array([0, 1, 2, 3]))
    for check_vma in (True, False, "pmap"):
        for gathered in (False, True):
            loss_fn = xr.APLoss(num_samples=4)

            def inner(scores, labels, index, loss_fn=loss_fn, gathered=gathered):
                batch = {"scores": scores, "labels": labels, "index": index}
                if gathered:
                    batch = xd.gather_batch(loss_fn, **batch)
                return loss_fn.apply(loss_fn.init(), **batch)[0][None]

            if check_vma == "pmap":
                run = jax.pmap(inner, axis_name="data")
                args = tuple(x.reshape(2, -1) for x in batch)
            else:
                run = jax.shard_map(inner, mesh=mesh, in_specs=(P("data"),) * 3,
                                    out_specs=P() if gathered else P("data"),
                                    check_vma=check_vma)
                args = batch
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                # The check reads types while tracing: trace only (an eager shard_map would
                # compile every operation of the loss on its own, seconds).
                jax.make_jaxpr(run)(*args)
            warned = [w for w in caught if issubclass(w.category, xd.DistributedWarning)]
            if bool(warned) != (check_vma is not True or not gathered):
                problems.append(f"shard_map check_vma={check_vma} gathered={gathered}: "
                                f"warnings {[str(w.message) for w in warned]}")
    return problems


def main() -> None:
    out = sys.argv[1]
    if jax.device_count() != 2:
        raise SystemExit(f"expected 2 host devices, got {jax.devices()}")
    mesh = jax.make_mesh((2,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    problems: list[str] = []
    timings: dict[str, float] = {}
    names = loss_names()
    for name in names:
        start = time.perf_counter()
        try:
            problems += check_loss(name, mesh)
        except Exception as error:
            problems.append(f"{name}: {type(error).__name__}: {str(error)[:500]}")
        timings[name] = time.perf_counter() - start
    problems += check_misuse(mesh)
    with open(out, "w") as f:
        json.dump({"losses": names, "problems": problems, "seconds": timings}, f)


if __name__ == "__main__":
    main()
