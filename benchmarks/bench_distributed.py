"""Data-parallel APLoss steps: time, bytes exchanged and memory per rank, replicated vs sharded.

Each configuration runs in fresh processes: torch ranks on gloo (``world`` processes; 4 ranks
on a 2-core host are "simulated"), JAX with ``world`` forced host devices in one process, and
TensorFlow with ``world`` logical CPUs under ``MirroredStrategy``. The model is linear
(16 features, sigmoid), the global batch 64 (half positives), indices uniform over the table;
SGD on the model. Reported per configuration:

- ``step_ms``: median wall time of a training step (forward, gathered loss, backward, update),
  after 3 warm-up steps, every step waited for;
- ``bytes/step/rank``: bytes a rank receives per step in the forward collectives
  (:func:`xrisk.distributed.exchanged_bytes`: the all-gather of the other ranks' parts and,
  sharded, the ring all-reduce of the batch's rows) plus the backward reduce-scatter of the
  scores; computed from the tensors' sizes;
- ``table_MB/rank``: state bytes one rank (device) holds; ``peak_MB``: peak resident memory of
  the process (a torch rank; the whole process for JAX and TensorFlow, all devices).

Usage::

    python benchmarks/bench_distributed.py                      # 1e5 rows, worlds 1 2 4
    python benchmarks/bench_distributed.py --rows 100000000 --worlds 1 2 --frameworks torch

1e9 samples on 8 ranks (on paper, from the measured 8.0 bytes per row: 762.9 MB per 1e8
rows): APLoss keeps 2 float32 per sample, 8 GB replicated on every rank (about 15 GB peak
while a torch or JAX rank builds it: 1.9x the table at 1e8) versus 1 GB per rank sharded
(2.4 GB peak); the per-step exchange does not depend on the table size (global batch 64:
1344 bytes per rank replicated, 2240 sharded: the gather moves 56 examples' scores, labels
and indices to each rank, the sharded rows at most 64 rows x 8 bytes x 2 (8-1)/8 each way),
so the step time of the sharded loss stays that of a small table (measured flat from 1e5 to
1e8 in the three frameworks). TensorFlow's replicated (mirrored) state is the exception:
its steps cost O(table) under MirroredStrategy (1.7 s at 1e8 rows on 2 replicas).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GLOBAL_BATCH, FEATURES, WARMUP = 64, 16, 3


def _batch(rng, rows: int, local: int):
    import numpy as np

    x = rng.normal(size=(local, FEATURES))
    y = np.zeros(local, dtype=np.int64)
    y[: local // 2] = 1
    index = rng.integers(0, rows, size=local, dtype=np.int64)
    return x.astype(np.float32), y, index


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _bytes(rows: int, world: int, sharded: bool) -> int:
    import numpy as np

    import xrisk
    from xrisk.distributed import exchanged_bytes

    local = GLOBAL_BATCH // world
    part = {"scores": np.zeros(local, np.float32), "labels": np.zeros(local, np.int64),
            "index": np.zeros(local, np.int64)}
    parts = exchanged_bytes(xrisk.APLoss(rows), part, world, sharded=sharded)
    backward = local * 4 * (world - 1)  # reduce-scatter of the scores' gradient
    return sum(parts.values()) + backward


def torch_worker(rows: int, world: int, rank: int, port: str, sharded: bool, steps: int):
    import numpy as np
    import torch
    import torch.distributed as dist

    import xrisk
    import xrisk.torch as xr
    from xrisk.torch.distributed import ShardedLoss, gather_batch

    torch.set_num_threads(1)
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    net = torch.nn.Linear(FEATURES, 1)
    model = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net
    loss_fn = (ShardedLoss(xrisk.APLoss(rows)) if sharded else xr.APLoss(rows))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    rng = np.random.default_rng(rank)
    times = []
    for step in range(WARMUP + steps):
        x, y, index = (torch.as_tensor(a) for a in _batch(rng, rows, GLOBAL_BATCH // world))
        start = time.perf_counter()
        scores = torch.sigmoid(model(x)).squeeze(1)
        loss = loss_fn(**gather_batch(loss_fn, scores, y, index))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    table = sum(b.numel() * b.element_size() for b in loss_fn.buffers())
    if world > 1:
        dist.barrier()
    return {"step_ms": 1e3 * statistics.median(times), "table_MB/rank": table / 2**20,
            "peak_MB": _peak_mb()}


def jax_worker(rows: int, world: int, sharded: bool, steps: int):
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={world}"
    import jax
    import jax.numpy as jnp
    import numpy as np

    import xrisk.jax as xr
    from xrisk.jax import distributed as xd

    mesh = jax.make_mesh((world,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    loss_fn = xr.APLoss(rows)
    # Sharded: each device builds only its rows (no whole table on the host or a device).
    state = (xd.sharded_init(loss_fn, mesh) if sharded
             else xd.replicate(loss_fn.init(), mesh))
    w = xd.replicate(jnp.zeros(FEATURES), mesh)

    def step(w, state, batch):
        def objective(w):
            scores = jax.nn.sigmoid(batch["x"] @ w)
            return loss_fn.apply(state, scores, batch["labels"], batch["index"])

        (loss, new_state), grad = jax.value_and_grad(objective, has_aux=True)(w)
        return w - 0.1 * grad, new_state, loss

    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state_out = xd.state_sharding(loss_fn, mesh) if sharded else replicated
    run = jax.jit(step, donate_argnums=(1,), out_shardings=(replicated, state_out, replicated))
    rng = np.random.default_rng(0)
    times = []
    for t in range(WARMUP + steps):
        x, y, index = _batch(rng, rows, GLOBAL_BATCH)
        batch = xd.shard_batch(loss_fn, {"x": x, "labels": y, "index": index}, mesh)
        start = time.perf_counter()
        w, state, loss = jax.block_until_ready(run(w, state, batch))
        if t >= WARMUP:
            times.append(time.perf_counter() - start)
    table = state.u.addressable_shards[0].data.nbytes
    return {"step_ms": 1e3 * statistics.median(times), "table_MB/rank": table / 2**20,
            "peak_MB": _peak_mb()}


def tf_worker(rows: int, world: int, sharded: bool, steps: int):
    os.environ.update(TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")
    import numpy as np
    import torch  # noqa: F401  (the project's import order)

    torch.set_num_threads(1)
    import tensorflow as tf

    import xrisk
    import xrisk.tensorflow as xr
    from xrisk.tensorflow import distributed as xd

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * world)
    strategy = (tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(world)])
                if world > 1 else tf.distribute.get_strategy())
    with strategy.scope():
        w = tf.Variable(tf.zeros(FEATURES))
        loss_fn = (xd.ShardedLoss(xrisk.APLoss(rows)) if sharded else xr.APLoss(rows))

    def replica(x, y, index):
        with tf.GradientTape() as tape:
            scores = tf.sigmoid(tf.linalg.matvec(x, w))
            loss = xd.scale_loss(loss_fn(**xd.gather_batch(loss_fn, scores, y, index)))
        w.assign_sub(0.1 * tape.gradient(loss, w)) if world == 1 else None
        return tape.gradient(loss, w) if world > 1 else loss

    @tf.function
    def step(x, y, index):
        out = strategy.run(replica, args=(x, y, index))
        if world > 1:
            w.assign_sub(0.1 * strategy.reduce("SUM", out, axis=None))
        return out

    rng = np.random.default_rng(0)
    times = []
    for t in range(WARMUP + steps):
        local = [_batch(rng, rows, GLOBAL_BATCH // world) for _ in range(world)]
        args = [strategy.experimental_distribute_values_from_function(
            lambda ctx, k=k, local=local: tf.constant(local[ctx.replica_id_in_sync_group][k]))
            for k in range(3)] if world > 1 else [tf.constant(a) for a in local[0]]
        start = time.perf_counter()
        out = step(*args)
        _ = [np.asarray(v) for v in getattr(out, "values", (out,))]  # wait for the step
        if t >= WARMUP:
            times.append(time.perf_counter() - start)
    copies = list(getattr(loss_fn.u, "values", (loss_fn.u,)))
    table = copies[0].numpy().nbytes
    return {"step_ms": 1e3 * statistics.median(times), "table_MB/rank": table / 2**20,
            "peak_MB": _peak_mb()}


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run(framework: str, rows: int, world: int, sharded: bool, steps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    base = [sys.executable, __file__, "--worker", framework, "--rows", str(rows),
            "--worlds", str(world), "--steps", str(steps)] + (["--sharded"] if sharded else [])
    ranks = world if framework == "torch" else 1
    port = _port()
    procs = [subprocess.Popen([*base, "--rank", str(r), "--port", port], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(ranks)]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=1200)
            if proc.returncode:
                code = proc.returncode  # -9: killed (e.g. by the kernel, out of memory)
                raise RuntimeError(f"{framework} {rows} {world}: exit {code}: {err[-2000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:  # a failed rank leaves the others waiting in a collective
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    worst = max(results, key=lambda r: r["step_ms"])
    return {**worst, "peak_MB": max(r["peak_MB"] for r in results),
            "bytes/step/rank": _bytes(rows, world, sharded)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, nargs="+", default=[1e5])
    parser.add_argument("--worlds", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--frameworks", nargs="+", default=["torch", "jax", "tensorflow"])
    parser.add_argument("--modes", nargs="+", default=["replicated", "sharded"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--worker")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--port", default="0")
    parser.add_argument("--sharded", action="store_true")
    args = parser.parse_args()
    if args.worker:
        rows, world = int(args.rows[0]), args.worlds[0]
        if args.worker == "torch":
            out = torch_worker(rows, world, args.rank, args.port, args.sharded, args.steps)
        elif args.worker == "jax":
            out = jax_worker(rows, world, args.sharded, args.steps)
        else:
            out = tf_worker(rows, world, args.sharded, args.steps)
        print(json.dumps(out))
        return
    print(f"{'framework':<11}{'rows':>7}{'world':>6} {'mode':<11}{'step_ms':>9}"
          f"{'bytes/step/rank':>17}{'table_MB/rank':>15}{'peak_MB':>9}")
    for framework in args.frameworks:
        for rows in (int(r) for r in args.rows):
            for world in args.worlds:
                for mode in args.modes:
                    try:
                        r = run(framework, rows, world, mode == "sharded", args.steps)
                    except (RuntimeError, subprocess.TimeoutExpired) as error:
                        # One configuration that cannot run here (memory, time) leaves the
                        # others' figures: print why and go on.
                        reason = str(error).strip().splitlines()[-1][:120]
                        print(f"{framework:<11}{rows:>7.0e}{world:>6} {mode:<11} failed: "
                              f"{reason}", flush=True)
                        continue
                    print(f"{framework:<11}{rows:>7.0e}{world:>6} {mode:<11}"
                          f"{r['step_ms']:>9.2f}{r['bytes/step/rank']:>17}"
                          f"{r['table_MB/rank']:>15.1f}{r['peak_MB']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
