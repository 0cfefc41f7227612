"""Worker of tests/test_distributed.py: every registered loss on 2 logical TensorFlow CPUs.

``python -m tests._distributed_tf OUT`` (the logical devices must be set before TensorFlow
starts, so this runs in its own process) compares, for every loss, the single-process run on
the global batch (eager, no strategy) with a ``MirroredStrategy`` of 2 replicas using
:func:`xrisk.tensorflow.distributed.gather_batch` and ``scale_loss``, with the mirrored state
of the adapter loss and with :class:`xrisk.tensorflow.distributed.ShardedLoss`. Writes the
mismatches (a list of strings) as JSON to ``OUT``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import numpy as np  # noqa: E402
import torch  # noqa: E402  (the project's import order: torch before TensorFlow)

torch.set_num_threads(1)
import tensorflow as tf  # noqa: E402

import xrisk.tensorflow as xr  # noqa: E402
from tests._distributed import LR, compare, loss_names, make_plan, score_names  # noqa: E402
from xrisk import distributed as core  # noqa: E402
from xrisk._adapter_support import METADATA_KEY  # noqa: E402
from xrisk.tensorflow import distributed as xd  # noqa: E402

#: Run the distributed steps in tf.function (True) or eagerly (False: no tracing, which
#: costs more than three eager steps of these tiny batches).
COMPILE = os.environ.get("XRISK_TF_COMPILE", "1") == "1"


def _link(z, link):
    return tf.sigmoid(z) if link == "sigmoid" else z


def _scores(features, w, link):
    return _link(tf.tensordot(features, w, axes=1), link)


def make_loss(plan, sharded: bool):
    definition = plan.definition
    loss_fn = (xd.ShardedLoss(definition, dtype="float64") if sharded
               else getattr(xr, plan.name)(**definition.config(), dtype="float64"))
    for name, value in plan.params0.items():
        getattr(loss_fn, name).assign(tf.constant(value, tf.float64))
    return loss_fn


def _present(part):
    return {k: tf.constant(v) for k, v in part.items() if v is not None}


def single(plan) -> dict:
    w = tf.Variable(tf.constant(plan.w0, tf.float64))
    loss_fn = make_loss(plan, sharded=False)
    scores = score_names(plan.definition)
    losses = []
    for t in range(len(plan.parts)):
        batch = _present(plan.global_batch(t))
        variables = [w, *loss_fn.trainable_variables]
        with tf.GradientTape() as tape:
            inputs = {k: (_scores(v, w, plan.link) if k in scores else v)
                      for k, v in batch.items()}
            loss = loss_fn(**inputs)
        for v, g in zip(variables, tape.gradient(loss, variables)):
            if g is not None:
                v.assign_sub(LR * g)
        losses.append(float(loss))
    return {"w": w.numpy(), "loss": np.array(losses), **loss_fn.export_state()}


VARIANTS = ("mirrored", "sharded")


def mirrored(plan, strategy) -> dict[str, dict]:
    """Both distributed variants (the adapter loss with mirrored state, and ShardedLoss),
    each with its own model, trained side by side in one compiled step (one trace and one
    graph build for both: that fixed cost dominated these tiny steps)."""
    scores = score_names(plan.definition)
    with strategy.scope():
        ws = [tf.Variable(tf.constant(plan.w0, tf.float64)) for _ in VARIANTS]
        loss_fns = [make_loss(plan, sharded=variant == "sharded") for variant in VARIANTS]
    variables = [[w, *loss_fn.trainable_variables] for w, loss_fn in zip(ws, loss_fns)]

    def replica(part):
        out = []
        for w, loss_fn, trained in zip(ws, loss_fns, variables):
            with tf.GradientTape() as tape:
                inputs = {k: (_scores(v, w, plan.link) if k in scores else v)
                          for k, v in part.items()}
                loss = xd.scale_loss(loss_fn(**xd.gather_batch(loss_fn, **inputs)))
            grads = tape.gradient(loss, trained)
            out.append((loss, [tf.zeros_like(v) if g is None else g
                               for v, g in zip(trained, grads)]))
        return out

    @(tf.function if COMPILE else lambda fn: fn)
    def step(parts):
        results = strategy.run(replica, args=(parts,))
        pairs = [(g, v) for (_, grads), trained in zip(results, variables)
                 for g, v in zip(grads, trained)]
        summed = strategy.extended.batch_reduce_to(tf.distribute.ReduceOp.SUM, pairs)
        for (_, v), g in zip(pairs, summed):
            v.assign_sub(LR * strategy.experimental_local_results(g)[0])
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
                for loss, _ in results]

    losses = []
    for t in range(len(plan.parts)):
        ranks = [_present(part) for part in plan.parts[t]]
        parts = strategy.experimental_distribute_values_from_function(
            lambda ctx, ranks=ranks: ranks[ctx.replica_id_in_sync_group])
        losses.append([float(loss) for loss in step(parts)])
    out = {}
    for k, (variant, w, loss_fn) in enumerate(zip(VARIANTS, ws, loss_fns)):
        got = {"w": w.numpy(), "loss": np.array([row[k] for row in losses]),
               **loss_fn.export_state()}
        if variant == "mirrored":  # every copy of the mirrored state holds the same rows
            for name in plan.definition.state_tables():
                copies = [c.numpy() for c in getattr(loss_fn, name).values]
                if any(not np.array_equal(c, copies[0]) for c in copies):
                    got[f"copies of {name}"] = np.array(np.nan)
        else:
            got["_shards"] = loss_fn.export_shards()
            got.update(stored_shapes(plan.definition, loss_fn, len(plan.parts[0])))
            if COMPILE:
                got.update(row_access(plan.definition, loss_fn,
                                      step.get_concrete_function(parts).graph))
        out[variant] = got
    return out


def row_access(definition, loss_fn, graph) -> dict[str, np.ndarray]:
    """NaN entries for a sharded table that the compiled step touches other than by row
    reads and writes (ResourceGather, ResourceScatterUpdate): a whole read of a mirrored
    variable copies it at every step once rows were scattered into it, O(table)."""
    out = {}
    for name in definition.state_tables():
        if not core.sharded(definition, name):
            continue
        handles = {id(copy.handle) for copy in getattr(loss_fn, name).values}
        captured = [inner for outer, inner in graph.captures if id(outer) in handles]
        ops = {op.type for handle in captured for op in handle.consumers()}
        if not captured or ops - {"ResourceGather", "ResourceScatterUpdate"}:
            out[f"{name} accessed by {sorted(ops)}"] = np.array(np.nan)
    return out


def stored_shapes(definition, loss_fn, world: int) -> dict[str, np.ndarray]:
    """NaN entries (which fail the comparison) for a sharded table whose replica copies are
    not ceil(rows / world) + 1 stored rows."""
    sizes = definition.table_sizes()
    out = {}
    for name in definition.state_tables():
        if not core.sharded(definition, name):
            continue
        rows = -(-sizes[core.row_space(definition, name)] // world) + 1
        expected = (rows, *core.stored_row(definition, name))
        copies = list(getattr(getattr(loss_fn, name), "values", (getattr(loss_fn, name),)))
        if len(copies) != world or any(tuple(c.shape) != expected for c in copies):
            out[f"stored shape of {name}"] = np.array(np.nan)
    return out


def check_loss(name: str, strategy) -> list[str]:
    plan = make_plan(name)
    want = single(plan)
    problems = []
    for variant, got in mirrored(plan, strategy).items():
        shards = got.pop("_shards", None)
        problems += compare(name, got, want, variant)
        if shards is not None:
            fresh = make_loss(plan, sharded=False)
            fresh.load_state(core.assemble_shards(plan.definition, shards))
            problems += compare(name, fresh.export_state(),
                                {k: want[k] for k in (*plan.definition.state_shapes(),
                                                      METADATA_KEY)},
                                "assembled")
    return problems


def check_misuse(strategy) -> list[str]:
    problems = []
    with strategy.scope():
        loss_fn = xr.APLoss(num_samples=4, dtype="float64")
    if loss_fn.u.aggregation != tf.VariableAggregation.ONLY_FIRST_REPLICA:
        problems.append(f"default aggregation under a strategy: {loss_fn.u.aggregation}")

    def replica():
        ctx = tf.distribute.get_replica_context()
        r = tf.cast(ctx.replica_id_in_sync_group, tf.int64)
        return loss_fn(tf.constant([0.9, 0.2], tf.float64), tf.constant([1, 0]),
                       tf.stack([r, 2 + r]))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        strategy.run(tf.function(replica))
    naive = [w for w in caught if issubclass(w.category, xd.DistributedWarning)]
    if not naive or "gather_batch" not in str(naive[0].message):
        problems.append(f"naive per-replica call: expected a DistributedWarning, got {naive}")
    for bad in (tf.VariableAggregation.SUM, tf.VariableAggregation.MEAN):
        try:
            with xd.state_variables(aggregation=bad):
                pass
            problems.append(f"state_variables(aggregation={bad}) accepted")
        except ValueError:
            pass
    return problems


def check_fused_optimizers(strategy) -> list[str]:
    """The float32 Keras optimizers, whose update is a fused TensorFlow kernel on the
    variable's handle, under ``model.fit`` with the strategy: each replica's variables are
    stepped (a stale replica would move the weights off the one-device run's by far more
    than float32's rounding of the two replicas' gradient sum)."""
    import keras

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 5)).astype("float32")
    y = (rng.random(64) > 0.5).astype("float32")[:, None]
    problems = []
    for label, make in (("SOAP adam", lambda: xr.SOAP(learning_rate=1e-2)),
                        ("SOAP sgd", lambda: xr.SOAP(learning_rate=0.1, mode="sgd"))):
        weights = []
        for each in (tf.distribute.OneDeviceStrategy("/cpu:0"), strategy):
            keras.utils.set_random_seed(0)
            with each.scope():
                model = keras.Sequential([keras.Input((5,)),
                                          keras.layers.Dense(8, activation="relu"),
                                          keras.layers.Dense(1)])
                model.compile(optimizer=make(), loss="mse")
            model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
            weights.append([w.numpy() for w in model.weights])
        worst = max(float(np.max(np.abs(a - b))) for a, b in zip(*weights))
        if not worst <= 1e-6:
            problems.append(f"float32 {label} under MirroredStrategy: weights off the "
                            f"one-device run's by {worst:.1e} (expected <= 1e-6)")
    return problems


def main() -> None:
    out = sys.argv[1]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    problems: list[str] = []
    timings: dict[str, float] = {}
    names = loss_names()
    for name in names:
        start = time.perf_counter()
        try:
            problems += check_loss(name, strategy)
        except Exception as error:
            problems.append(f"{name}: {type(error).__name__}: {str(error)[:800]}")
        timings[name] = time.perf_counter() - start
    problems += check_misuse(strategy)
    problems += check_fused_optimizers(strategy)
    with open(out, "w") as f:
        json.dump({"losses": names, "problems": problems, "seconds": timings}, f)


if __name__ == "__main__":
    main()
