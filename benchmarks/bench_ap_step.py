"""Time of one APLoss step against ``num_samples``: the state update must cost O(batch).

For each backend (torch eager, JAX under ``jax.jit`` with the state donated, TensorFlow under
``tf.function``) one step is: the forward pass of ``APLoss`` on a batch of scores, the
gradient of the loss with respect to the scores, and the write of the new per-sample rows
into the state. The step is timed with ``num_samples`` = 1e3 and 1e7; since a step touches
only the ``batch_size`` rows of its batch, the two times should match::

    python benchmarks/bench_ap_step.py
    python benchmarks/bench_ap_step.py --backends jax --steps 500

Each timing is the median over ``--repeats`` runs of ``--steps`` consecutive steps, after a
warm-up that compiles (JAX, TensorFlow) and faults in the state. Results are synchronised
(``block_until_ready`` for JAX, ``.numpy()`` for TensorFlow; torch CPU is synchronous). The
script exits with status 1 if a backend's ratio exceeds the target.

What remains of the difference on JAX/CPU is not per-sample work: XLA's CPU
``cpu-parallel-task-assigner`` pass sizes its thread split by the operand, so the gather and
scatter of a few rows of a 10-million-row table are split across threads (a fixed
~10-30 us). ``XLA_FLAGS=--xla_disable_hlo_passes=cpu-parallel-task-assigner`` turns that
pass off for a whole program (measured here: ratio 0.99-1.03, and a faster step at every size).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
from collections.abc import Callable, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import alternating_times, copy_seconds, import_frameworks, paired_ratio  # noqa: E402

BACKENDS = ("torch", "jax", "tensorflow")
SIZES = (1_000, 10_000_000)
TARGET = 1.1  # largest accepted ratio time(1e7) / time(1e3)


def make_batches(num_samples: int, batch_size: int, positive_share: float, count: int,
                 seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``count`` batches of (scores float32, labels float32, distinct index int64)."""
    rng = np.random.default_rng(seed)
    num_pos = max(1, round(positive_share * batch_size))
    labels = np.zeros(batch_size, np.float32)
    labels[:num_pos] = 1
    batches = []
    for _ in range(count):
        scores = rng.uniform(0.05, 0.95, batch_size).astype(np.float32)
        index = rng.choice(num_samples, batch_size, replace=False).astype(np.int64)
        batches.append((scores, labels, index))
    return batches


# Each builder returns ``run(batches)``: it performs one step per batch and synchronises.
def torch_runner(num_samples: int) -> tuple[Callable[[list], None], Callable[[list], list]]:
    import torch

    import xrisk.torch as xr

    loss_fn = xr.APLoss(num_samples, dtype="float32")

    def run(batches: list) -> None:
        for scores, labels, index in batches:
            scores = scores.clone().requires_grad_(True)
            loss = loss_fn(scores, labels, index)
            (grad,) = torch.autograd.grad(loss, scores)
        grad.numpy()

    def convert(batches: list) -> list:
        return [tuple(torch.from_numpy(a) for a in batch) for batch in batches]

    return run, convert


def jax_runner(num_samples: int) -> tuple[Callable[[list], None], Callable[[list], list]]:
    import jax
    import jax.numpy as jnp

    import xrisk.jax as xr

    loss_fn = xr.APLoss(num_samples, dtype="float32")
    holder = {"state": loss_fn.init()}

    @functools.partial(jax.jit, donate_argnums=(0,))
    def step(state, scores, labels, index):
        (loss, state), grad = jax.value_and_grad(
            lambda s: loss_fn.apply(state, s, labels, index), has_aux=True
        )(scores)
        return state, grad

    def run(batches: list) -> None:
        state = holder["state"]
        for scores, labels, index in batches:
            state, grad = step(state, scores, labels, index)
        holder["state"] = state
        jax.block_until_ready((state, grad))

    def convert(batches: list) -> list:
        return [(jnp.asarray(s), jnp.asarray(y), jnp.asarray(i.astype(np.int32)))
                for s, y, i in batches]

    return run, convert


def tensorflow_runner(num_samples: int) -> tuple[Callable[[list], None], Callable[[list], list]]:
    import tensorflow as tf

    import xrisk.tensorflow as xr

    loss_fn = xr.APLoss(num_samples, dtype="float32")

    @tf.function
    def step(scores, labels, index):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            loss = loss_fn(scores, labels, index)
        return tape.gradient(loss, scores)

    def run(batches: list) -> None:
        for scores, labels, index in batches:
            grad = step(scores, labels, index)
        grad.numpy()

    def convert(batches: list) -> list:
        return [tuple(tf.constant(a) for a in batch) for batch in batches]

    return run, convert


RUNNERS = {"torch": torch_runner, "jax": jax_runner, "tensorflow": tensorflow_runner}


def time_steps(backend: str, args: argparse.Namespace) -> list[list[float]]:
    """Seconds per step of ``backend`` in each repeat, for every size in ``args.sizes``
    (timed in alternation, see :func:`_common.alternating_times`)."""
    runs = []
    for num_samples in args.sizes:
        run, convert = RUNNERS[backend](num_samples)
        batches = convert(make_batches(num_samples, args.batch_size, args.positive_share,
                                       args.steps, args.seed))
        run(batches[:10])  # compile
        run(batches)  # warm up: fault in the state pages, fill the caches
        runs.append((run, batches))
    return alternating_times(runs, args.repeats)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated subset of torch,jax,tensorflow")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--positive-share", type=float, default=0.2)
    parser.add_argument("--steps", type=int, default=200, help="steps per timed repeat")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", default=",".join(f"{n:.0e}" for n in SIZES),
                        help="comma-separated num_samples, smallest first; the ratio is "
                             "last / first (e.g. 1e3,1e5,1e7,1e8 shows where it levels off)")
    args = parser.parse_args(argv)
    args.sizes = [int(float(n)) for n in args.sizes.split(",") if n.strip()]
    if len(args.sizes) < 2 or args.sizes != sorted(args.sizes) or args.sizes[0] < 1:
        parser.error(f"--sizes: got {args.sizes}; expected two or more increasing sizes >= 1")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown or not args.backends:
        parser.error(f"--backends: got {unknown or 'nothing'}; expected names from {BACKENDS}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import_frameworks(args.backends)
    print(f"APLoss step (forward + d loss / d scores + state write), float32, batch "
          f"{args.batch_size} with {args.positive_share:.0%} positives; median of "
          f"{args.repeats} x {args.steps} steps")
    header = (f"{'backend':<12}" + "".join(f"{f'n={n:.0e}':>14}" for n in args.sizes)
              + f"{'ratio':>9}  target <= {TARGET}")
    print(header)
    print("-" * len(header))
    failed = False
    for backend in args.backends:
        rounds = time_steps(backend, args)
        times = [statistics.median(per_size) for per_size in rounds]
        ratio = paired_ratio(rounds[0], rounds[-1])
        verdict = "PASS" if ratio <= TARGET else "FAIL"
        failed |= verdict == "FAIL"
        print(f"{backend:<12}" + "".join(f"{t * 1e6:>11.1f} us" for t in times)
              + f"{ratio:>9.2f}  {verdict}", flush=True)
    copy = copy_seconds([(args.sizes[-1],)] * 2, args.repeats)
    print(f"scale: one copy of the n={args.sizes[-1]:.0e} state (2 x float32) takes "
          f"{copy * 1e6:.0f} us here; an O(num_samples) step would cost at least that.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
