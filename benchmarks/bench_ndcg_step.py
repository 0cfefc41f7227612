"""One NDCG step against the number of interactions: state updates must cost O(batch).

For each backend (torch eager, JAX under ``jax.jit`` with the loss state donated, TensorFlow
under ``tf.function``) one step is: ``NDCGLoss`` (K-SONG, ``top_k=10``, the "theo" variant,
which reads and writes every table: ``u`` per interaction, ``lambda_q`` and ``s_q`` per query)
on a batch of the paper's shape (256 queries x (10 positives + 300 sampled negatives)), the
gradient with respect to the scores, and the write of the new rows into the state. The data
are synthetic, of MovieLens-20M's shape (138,493 queries, 26,744 items); the step is timed
with 1e4 and with 2e7 interactions (the size of the ``u`` table). Reported:

1. the median step time at each size and their ratio (target <= 1.1: the step touches only
   the batch's rows);
2. the peak memory the state costs: each (backend, size) runs in a fresh process that builds
   the loss and takes the steps (Linux: the peak resident memory, ``VmHWM``, restarted before
   each phase, under glibc malloc settings that make it steady, see ``STEADY_MALLOC``); the
   difference of the two sizes' peaks while stepping is compared with the difference of their
   state bytes (target <= 1.3x: no step copies a table); the same figure while the loss is
   built is printed too (also <= 1.3x: building holds no second table);
3. the time per training epoch of the runner's MovieLens recipe (SONG, all 610 users) per
   framework, compilation (the first epoch) left out.

::

    python benchmarks/bench_ndcg_step.py
    python benchmarks/bench_ndcg_step.py --backends jax --steps 20 --no-epoch

Figures are printed, nothing is asserted; the exit status is 1 if a ratio misses its target.
Timings are medians of ``--repeats`` runs of ``--steps`` steps, the sizes in alternation
(drifting load hits both alike), after a warm-up that compiles and faults in the state.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import alternating_times, import_frameworks, paired_ratio  # noqa: E402

BACKENDS = ("torch", "jax", "tensorflow")
SIZES = (10_000, 20_000_000)
NUM_QUERIES, NUM_ITEMS = 138_493, 26_744  # MovieLens-20M
TIME_TARGET, MEMORY_TARGET = 1.1, 1.3


def make_batches(num_interactions: int, args: argparse.Namespace,
                 ) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
    """``args.steps`` batches of (scores (Q, P + M) float32, the loss's other inputs).

    Distinct queries and distinct interaction ids per batch; relevance 1-5; counts and ideal
    DCG consistent with ``P`` positives.
    """
    rng = np.random.default_rng(args.seed)
    q, p, m = args.queries, args.positives, args.negatives
    batches = []
    for _ in range(args.steps):
        scores = rng.normal(size=(q, p + m)).astype(np.float32)
        relevance = rng.integers(1, 6, size=(q, p)).astype(np.float32)
        ranked = -np.sort(-relevance, axis=1)
        ideal = ((2.0 ** ranked - 1) / np.log2(np.arange(2, p + 2))).sum(axis=1)
        inputs = {
            "relevance": relevance,
            "query": rng.choice(NUM_QUERIES, q, replace=False).astype(np.int64),
            "interaction": distinct_ids(rng, num_interactions, (q, p)),
            "num_relevant": np.full(q, float(p), np.float32),
            "ideal_dcg": ideal.astype(np.float32),
        }
        batches.append((scores, inputs))
    return batches


def distinct_ids(rng: np.random.Generator, bound: int, shape: tuple[int, int]) -> np.ndarray:
    """Uniform ids in [0, bound), no id twice, as a TriSampler batch holds each interaction
    once (distinct queries, each positive drawn once); O(size) memory (a permutation of
    ``bound`` ids would blur the memory figures). Eager torch takes the loss's path for
    distinct keys (no B x B pooling), JAX and TensorFlow compiled steps the general one."""
    size = shape[0] * shape[1]
    if size > bound:
        raise ValueError(f"{size} distinct ids asked of {bound}; expected at most {bound}")
    ids = np.unique(rng.integers(0, bound, size))
    while ids.size < size:
        ids = np.unique(np.concatenate([ids, rng.integers(0, bound, size - ids.size)]))
    return rng.permutation(ids).reshape(shape)


def loss_options(num_interactions: int, args: argparse.Namespace) -> dict[str, Any]:
    return {"num_interactions": num_interactions, "num_queries": NUM_QUERIES,
            "num_items": NUM_ITEMS, "gamma0": 0.1, "top_k": args.top_k or None}


# Each builder returns ``(run, convert, state_bytes)``: ``run(batches)`` takes one step per
# batch and synchronises.
def torch_runner(num_interactions: int, args: argparse.Namespace) -> tuple[Any, Any, int]:
    import torch

    import xrisk.torch as xr

    loss_fn = xr.NDCGLoss(**loss_options(num_interactions, args), dtype="float32")
    with torch.no_grad():
        for buffer in loss_fn.buffers():
            buffer.add_(0.0)  # torch.zeros maps pages lazily: make them resident, as in training

    def run(batches: list) -> None:
        for scores, inputs in batches:
            scores = scores.clone().requires_grad_(True)
            loss = loss_fn(scores, **inputs)
            (grad,) = torch.autograd.grad(loss, scores)
        grad.numpy()

    def convert(batches: list) -> list:
        return [(torch.from_numpy(s), {k: torch.from_numpy(v) for k, v in i.items()})
                for s, i in batches]

    state = sum(b.numel() * b.element_size() for b in loss_fn.buffers())
    return run, convert, state


def jax_runner(num_interactions: int, args: argparse.Namespace) -> tuple[Any, Any, int]:
    import jax
    import jax.numpy as jnp

    import xrisk.jax as xr

    loss_fn = xr.NDCGLoss(**loss_options(num_interactions, args), dtype="float32")
    holder = {"state": loss_fn.init()}

    @functools.partial(jax.jit, donate_argnums=(0,))
    def step(state: Any, scores: jax.Array, inputs: dict[str, jax.Array]) -> Any:
        (_, state), grad = jax.value_and_grad(
            lambda s: loss_fn.apply(state, s, **inputs), has_aux=True)(scores)
        return state, grad

    def run(batches: list) -> None:
        state = holder["state"]
        for scores, inputs in batches:
            state, grad = step(state, scores, inputs)
        holder["state"] = state
        jax.block_until_ready((state, grad))

    def convert(batches: list) -> list:
        return [(jnp.asarray(s), {k: jnp.asarray(v.astype(np.int32) if v.dtype == np.int64
                                                 else v) for k, v in i.items()})
                for s, i in batches]

    state = sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(holder["state"]))
    return run, convert, state


def tensorflow_runner(num_interactions: int, args: argparse.Namespace,
                      ) -> tuple[Any, Any, int]:
    import tensorflow as tf

    import xrisk.tensorflow as xr

    loss_fn = xr.NDCGLoss(**loss_options(num_interactions, args), dtype="float32")

    @tf.function
    def step(scores: tf.Tensor, inputs: dict[str, tf.Tensor]) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = loss_fn(scores, **inputs)
        return tape.gradient(loss, scores)

    def run(batches: list) -> None:
        for scores, inputs in batches:
            grad = step(scores, inputs)
        grad.numpy()

    def convert(batches: list) -> list:
        return [(tf.constant(s), {k: tf.constant(v) for k, v in i.items()})
                for s, i in batches]

    state = sum(int(v.shape.num_elements()) * v.dtype.size for v in loss_fn.variables)
    return run, convert, state


RUNNERS: dict[str, Callable[..., tuple[Any, Any, int]]] = {
    "torch": torch_runner, "jax": jax_runner, "tensorflow": tensorflow_runner}


def time_steps(backend: str, args: argparse.Namespace) -> list[list[float]]:
    """Seconds per step of ``backend`` in each repeat at every size, timed in alternation."""
    runs = []
    for size in args.sizes:
        run, convert, _ = RUNNERS[backend](size, args)
        batches = convert(make_batches(size, args))
        run(batches[:2])  # compile
        run(batches)  # warm up: fault in the state pages
        runs.append((run, batches))
    return alternating_times(runs, args.repeats)


def _memory(field: str) -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident) of this process, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} missing from /proc/self/status: the probes need Linux")


def _reset_peak() -> None:
    """Restart ``VmHWM`` from the current resident size (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def memory_probe(backend: str, size: int, args: argparse.Namespace) -> dict[str, int]:
    """In a fresh process: the peak resident memory while the loss is built (``init``) and,
    separately, while its steps run; the state's bytes."""
    import_frameworks([backend])
    batches = make_batches(size, args)
    run, convert, _ = RUNNERS[backend](args.sizes[0], args)
    # The framework's one-off costs (kernels, compilation) first.
    run(convert(make_batches(args.sizes[0], args)[:1]))
    del run
    _reset_peak()
    run, convert, state = RUNNERS[backend](size, args)
    built = _memory("VmHWM")
    batches = convert(batches)
    _reset_peak()
    run(batches)
    return {"built": built, "steps": _memory("VmHWM"), "state": state}


#: glibc's malloc raises its mmap threshold each time a large block is freed, so whether a
#: step's (B, B) temporaries come back to the system or stay in the heap depends on the
#: process's history: the torch probe's peaks moved between 0.44x and 1.9x the state from run
#: to run. A fixed threshold (which also stops the raising) makes the resident peak the peak
#: of live memory: 1.01-1.03x over three runs. The probes only; timings keep the defaults.
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(2**20), "MALLOC_TRIM_THRESHOLD_": str(2**20)}


def measure_memory(backend: str, args: argparse.Namespace) -> tuple[float, float, int]:
    """Extra peak memory of the largest size over the smallest, per extra state byte: while
    the loss is built and while it steps (each size in its own process); the largest state's
    bytes."""
    probes = []
    for size in (args.sizes[0], args.sizes[-1]):
        command = [sys.executable, __file__, "--memory-probe", backend, str(size),
                   "--steps", str(args.steps), "--top-k", str(args.top_k),
                   "--sizes", ",".join(map(str, args.sizes))]
        out = subprocess.run(command, check=True, capture_output=True, text=True,
                             env={**os.environ, **STEADY_MALLOC}).stdout
        probes.append(json.loads(out.strip().splitlines()[-1]))
    extra_state = probes[1]["state"] - probes[0]["state"]
    built = (probes[1]["built"] - probes[0]["built"]) / extra_state
    steps = (probes[1]["steps"] - probes[0]["steps"]) / extra_state
    return built, steps, probes[1]["state"]


def epoch_seconds(backend: str, epochs: int) -> float:
    """Seconds per training epoch of the MovieLens recipe's SONG (all users, the runner's
    ``movielens_ndcg`` from scratch), the first epoch (compilation) left out. An epoch is
    timed from its first to its last step (evaluation left out), scaled to all its steps."""
    import tempfile

    from xrisk.runner import train

    stamps: dict[int, list[float]] = {}

    def on_batch(epoch: int, batch: int, loss: object) -> None:
        stamps.setdefault(epoch, []).append(time.perf_counter())

    with tempfile.TemporaryDirectory() as out:
        train("movielens_ndcg", out, progress=False, write_report=False, on_batch=on_batch,
              overrides=[f"framework={backend}", "method=song", "schedule.warmup_epochs=0",
                         f"epochs={epochs + 1}", "evaluation.patience=1000"])
    seconds = [(times[-1] - times[0]) * len(times) / (len(times) - 1)
               for epoch, times in sorted(stamps.items()) if len(times) > 1]
    return statistics.median(seconds[1:])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated subset of torch,jax,tensorflow")
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--positives", type=int, default=10)
    parser.add_argument("--negatives", type=int, default=300)
    parser.add_argument("--top-k", type=int, default=10, help="K of K-SONG; 0 for SONG")
    parser.add_argument("--steps", type=int, default=10, help="steps per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", default=",".join(f"{n:.0e}" for n in SIZES),
                        help="comma-separated numbers of interactions, smallest first")
    parser.add_argument("--epochs", type=int, default=2,
                        help="timed epochs of the MovieLens recipe (after one untimed)")
    parser.add_argument("--no-epoch", action="store_true", help="skip the MovieLens epochs")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory probes")
    parser.add_argument("--memory-probe", nargs=2, metavar=("BACKEND", "SIZE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = [int(float(n)) for n in args.sizes.split(",") if n.strip()]
    if len(args.sizes) < 2 or args.sizes != sorted(args.sizes) or args.sizes[0] < 1:
        parser.error(f"--sizes: got {args.sizes}; expected two or more increasing sizes >= 1")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown or not args.backends:
        parser.error(f"--backends: got {unknown or 'nothing'}; expected names from {BACKENDS}")
    for option in ("queries", "positives", "negatives", "steps", "repeats", "epochs"):
        if getattr(args, option) < 1:
            parser.error(f"--{option}: got {getattr(args, option)}; expected at least 1")
    if args.top_k < 0:
        parser.error(f"--top-k: got {args.top_k}; expected 0 (SONG) or K >= 1 (K-SONG)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.memory_probe:
        backend, size = args.memory_probe
        print(json.dumps(memory_probe(backend, int(size), args)))
        return 0
    import_frameworks(args.backends)
    name = f"K-SONG (top_k={args.top_k})" if args.top_k else "SONG"
    print(f"NDCGLoss step, {name}: forward + d loss / d scores + state write, float32; batch "
          f"{args.queries} queries x ({args.positives} + {args.negatives}); {NUM_QUERIES:,} "
          f"queries, {NUM_ITEMS:,} items; median of {args.repeats} x {args.steps} steps")
    header = (f"{'backend':<12}" + "".join(f"{f'n={n:.2g}':>13}" for n in args.sizes)
              + f"{'ratio':>8}{'step mem':>10}{'init mem':>10}{'state':>11}{'epoch':>9}")
    print(header)
    print("-" * len(header))
    failed = False
    for backend in args.backends:
        rounds = time_steps(backend, args)
        times = [statistics.median(per_size) for per_size in rounds]
        ratio = paired_ratio(rounds[0], rounds[-1])
        failed |= ratio > TIME_TARGET
        line = f"{backend:<12}" + "".join(f"{t * 1e3:>10.2f} ms" for t in times)
        line += f"{ratio:>8.2f}"
        if args.no_memory:
            line += f"{'-':>10}{'-':>10}{'-':>11}"
        else:
            built, steps, state = measure_memory(backend, args)
            failed |= max(steps, built) > MEMORY_TARGET
            line += f"{steps:>9.2f}x{built:>9.2f}x{state / 2**20:>7.1f} MiB"
        epoch = float("nan") if args.no_epoch else epoch_seconds(backend, args.epochs)
        print(line + f"{epoch:>8.2f}s", flush=True)
    print(f"ratio: step time at n={args.sizes[-1]:.2g} / at n={args.sizes[0]:.2g}, median of "
          f"the rounds' paired ratios (target <= "
          f"{TIME_TARGET}). step mem / init mem: the extra peak resident memory of the larger "
          "state over the smaller one, per extra state byte, while stepping (target <= "
          f"{MEMORY_TARGET}) / while the loss is built (same target). epoch: seconds per "
          "training epoch of the runner's movielens_ndcg recipe, SONG.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
