"""Time of one global contrastive step against ``num_samples``: it must cost O(batch).

For each framework (torch eager, JAX under ``jax.jit`` with the loss state donated, TensorFlow
under ``tf.function``) and each loss (SogCLR: ``GlobalContrastiveLoss``; iSogCLR: the same with
``temperature_scheme="individual"``; Bimodal: ``BimodalContrastiveLoss``) one step is: the
forward pass of the loss on two views ``(batch, dim)`` with their dataset indices, the
gradient of the loss with respect to both views, and the write of the new per-sample rows
(estimators, temperatures) into the state. The step is timed with ``num_samples`` = 1e3 and
1e7; since a step touches only the rows of its batch, the two times should match (ratio
step(1e7) / step(1e3) <= 1.1)::

    python benchmarks/bench_contrastive_step.py
    python benchmarks/bench_contrastive_step.py --frameworks jax --losses iSogCLR --steps 300

Each timing is the fastest of ``--repeats`` runs of ``--steps`` consecutive steps (as
``timeit`` advises: on a shared machine the slower runs measure the other jobs), after a
warm-up that compiles (JAX, TensorFlow) and faults in the state. The sizes are timed in
alternation (repeat 1 of every size, then repeat 2, ...), and the ratio is the median over
repeats of each repeat's own ratio, so that drifting machine load, which affects the runs of
one repeat alike, cancels out. The ratio of the fastest runs is printed too. Results are
synchronised (``block_until_ready`` for JAX, ``.numpy()`` for TensorFlow, ``.numpy()`` of the last
gradient for torch CPU; ``torch.cuda.synchronize`` on a GPU). The script prints figures and
exits with status 1 if a ratio exceeds the target; it is not a unit test.

On JAX/CPU, XLA's ``cpu-parallel-task-assigner`` pass splits the gather and scatter of a few
rows of a large table across threads (a fixed ~10-30 us, see ``bench_ap_step.py``);
``XLA_FLAGS=--xla_disable_hlo_passes=cpu-parallel-task-assigner`` turns it off.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import alternating_times, copy_seconds, import_frameworks, paired_ratio  # noqa: E402

FRAMEWORKS = ("torch", "jax", "tensorflow")
SIZES = (1_000, 10_000_000)
TARGET = 1.1  # largest accepted ratio time(1e7) / time(1e3)
#: name: (adapter class, options)
LOSSES = {
    "SogCLR": ("GlobalContrastiveLoss", {"tau": 0.1, "gamma": 0.9}),
    "iSogCLR": ("GlobalContrastiveLoss", {"tau": 0.1, "gamma": 0.9,
                                          "temperature_scheme": "individual"}),
    "Bimodal": ("BimodalContrastiveLoss", {"tau": 0.05, "gamma": 0.9}),
}

Batch = tuple[Any, Any, Any]
Runner = tuple[Callable[[list], None], Callable[[list], list]]


def make_batches(num_samples: int, batch_size: int, dim: int, count: int,
                 seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``count`` batches of (view1 float32 (B, D), view2 float32 (B, D), distinct index
    int64 (B,))."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(count):
        view1 = rng.standard_normal((batch_size, dim)).astype(np.float32)
        view2 = (view1 + 0.5 * rng.standard_normal((batch_size, dim))).astype(np.float32)
        index = rng.choice(num_samples, batch_size, replace=False).astype(np.int64)
        batches.append((view1, view2, index))
    return batches


def _build(adapter: Any, loss: str, num_samples: int) -> Any:
    name, options = LOSSES[loss]
    return getattr(adapter, name)(num_samples, dtype="float32", **options)


# Each builder returns ``(run, convert)``: ``run(batches)`` performs one step per batch and
# synchronises; ``convert`` turns numpy batches into the framework's arrays once, untimed.
def torch_runner(loss: str, num_samples: int) -> Runner:
    import torch

    import xrisk.torch as xr

    device = "cuda" if torch.cuda.is_available() else "cpu"
    loss_fn = _build(xr, loss, num_samples).to(device)

    def run(batches: list) -> None:
        for view1, view2, index in batches:
            view1 = view1.clone().requires_grad_(True)
            view2 = view2.clone().requires_grad_(True)
            value = loss_fn(view1, view2, index)
            grads = torch.autograd.grad(value, (view1, view2))
        if device == "cuda":
            torch.cuda.synchronize()
        grads[0].cpu().numpy()

    def convert(batches: list) -> list:
        return [tuple(torch.from_numpy(a).to(device) for a in batch) for batch in batches]

    return run, convert


def jax_runner(loss: str, num_samples: int) -> Runner:
    import jax
    import jax.numpy as jnp

    import xrisk.jax as xr

    loss_fn = _build(xr, loss, num_samples)
    holder = {"state": loss_fn.init()}

    # The state is donated: XLA writes the batch's rows in place instead of copying the table.
    @functools.partial(jax.jit, donate_argnums=(0,))
    def step(state: Any, view1: jax.Array, view2: jax.Array, index: jax.Array) -> Any:
        (_, state), grads = jax.value_and_grad(
            lambda v1, v2: loss_fn.apply(state, v1, v2, index), argnums=(0, 1), has_aux=True
        )(view1, view2)
        return state, grads

    def run(batches: list) -> None:
        state = holder["state"]
        for view1, view2, index in batches:
            state, grads = step(state, view1, view2, index)
        holder["state"] = state
        jax.block_until_ready((state, grads))

    def convert(batches: list) -> list:
        return [(jnp.asarray(v1), jnp.asarray(v2), jnp.asarray(i.astype(np.int32)))
                for v1, v2, i in batches]

    return run, convert


def tensorflow_runner(loss: str, num_samples: int) -> Runner:
    import tensorflow as tf

    import xrisk.tensorflow as xr

    loss_fn = _build(xr, loss, num_samples)

    @tf.function
    def step(view1: tf.Tensor, view2: tf.Tensor, index: tf.Tensor) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([view1, view2])
            value = loss_fn(view1, view2, index)
        return tape.gradient(value, [view1, view2])

    def run(batches: list) -> None:
        for view1, view2, index in batches:
            grads = step(view1, view2, index)
        grads[0].numpy()

    def convert(batches: list) -> list:
        return [tuple(tf.constant(a) for a in batch) for batch in batches]

    return run, convert


RUNNERS = {"torch": torch_runner, "jax": jax_runner, "tensorflow": tensorflow_runner}


def time_steps(framework: str, loss: str,
               args: argparse.Namespace) -> tuple[list[float], float]:
    """Fastest seconds per step of ``framework`` x ``loss`` for every size in ``args.sizes``,
    and the median over repeats of the paired ratio last size / first size."""
    runs = []
    for num_samples in args.sizes:
        run, convert = RUNNERS[framework](loss, num_samples)
        batches = convert(make_batches(num_samples, args.batch_size, args.dim, args.steps,
                                       args.seed))
        run(batches[:5])  # compile
        run(batches)  # warm up: fault in the state pages, fill the caches
        runs.append((run, batches))
    times = alternating_times(runs, args.repeats)
    return [min(per_size) for per_size in times], paired_ratio(times[0], times[-1])


def _names(parser: argparse.ArgumentParser, option: str, value: str,
           allowed: Sequence[str]) -> list[str]:
    chosen = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(allowed))
    if unknown or not chosen:
        parser.error(f"--{option}: got {unknown or 'nothing'}; expected names from "
                     f"{tuple(allowed)}")
    return chosen


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="comma-separated subset of torch,jax,tensorflow")
    parser.add_argument("--losses", default=",".join(LOSSES),
                        help=f"comma-separated subset of {','.join(LOSSES)}")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dim", type=int, default=128, help="feature dimension of a view")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sizes", default=",".join(f"{n:.0e}" for n in SIZES),
                        help="comma-separated num_samples, smallest first; the ratio is "
                             "last / first")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(float(n)) for n in args.sizes.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--sizes: got {args.sizes!r}; expected comma-separated numbers, "
                     "e.g. 1e3,1e7")
    if len(args.sizes) < 2 or args.sizes != sorted(args.sizes):
        parser.error(f"--sizes: got {args.sizes}; expected two or more increasing sizes")
    for option in ("batch_size", "dim", "steps", "repeats"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')}: got {getattr(args, option)}; "
                         "expected at least 1")
    if args.sizes[0] < args.batch_size:
        parser.error(f"--sizes: the smallest size {args.sizes[0]} is below --batch-size "
                     f"{args.batch_size}; expected sizes >= the batch size (distinct indices)")
    args.frameworks = _names(parser, "frameworks", args.frameworks, FRAMEWORKS)
    args.losses = _names(parser, "losses", args.losses, list(LOSSES))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import_frameworks(args.frameworks)
    print(f"global contrastive step (forward + d loss / d both views + state write), float32, "
          f"batch {args.batch_size}, dim {args.dim}; fastest of {args.repeats} x {args.steps} "
          "steps")
    header = (f"{'framework':<12}{'loss':<9}" + "".join(f"{f'n={n:.0e}':>14}" for n in args.sizes)
              + f"{'ratio':>9}{'(fastest)':>11}  target <= {TARGET}")
    print(header)
    print("-" * len(header))
    failed = False
    for framework in args.frameworks:
        for loss in args.losses:
            times, ratio = time_steps(framework, loss, args)
            verdict = "PASS" if ratio <= TARGET else "FAIL"
            failed |= verdict == "FAIL"
            print(f"{framework:<12}{loss:<9}" + "".join(f"{t * 1e6:>11.1f} us" for t in times)
                  + f"{ratio:>9.2f}{times[-1] / times[0]:>11.2f}  {verdict}", flush=True)
    copy = copy_seconds([(args.sizes[-1], 2)] * 2, args.repeats)
    print(f"scale: one copy of two (n={args.sizes[-1]:.0e}, 2) float32 tables (iSogCLR's "
          f"state) takes {copy * 1e6:.0f} us here; an O(num_samples) step would cost at "
          "least that.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
