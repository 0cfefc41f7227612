"""Cost of the input checks: the eager torch APLoss step and the JAX StatefulLoss step.

1. ``torch``: one eager ``xrisk.torch.APLoss`` step (forward, backward, state write) on a
   batch of 256 scores with 20 % positives and a table of 1e6 rows, on one thread. The value
   checks read each input once on the host (``inspectable``) and must stay a small part of
   the step; the time spent in ``xrisk._validation.check_inputs`` is reported with it, and
   ``--baseline FILE`` times another version's ``check_inputs`` in the same run, alternately.
2. ``jax``: one ``xrisk.jax.StatefulLoss`` call at 1e3 and 1e7 rows against a hand-jitted
   step with the state donated. The wrapper must cost O(batch), not O(num_samples).
3. ``families``: ``check_inputs`` alone, in µs per call, on the batch each registered loss
   meets in its torch eager training step (benchmarks/_families.py, batch 64): the Python
   cost of the checks per family, a repeated signature (the steady state of training): the
   fastest of ``--repeats`` short rounds. With ``--baseline`` the other version is timed on
   the same calls, interleaved, with the median of the per-round ratios.

::

    python benchmarks/bench_checks.py                 # torch and jax
    git show HEAD:xrisk_core/_validation.py > /tmp/old_validation.py
    python benchmarks/bench_checks.py --only torch --baseline /tmp/old_validation.py
    python benchmarks/bench_checks.py --only families --baseline /tmp/old_validation.py

Each figure is the median over ``--repeats`` runs of ``--steps`` steps, after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402


def _batches(num_samples: int, batch: int, count: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    labels = np.zeros(batch, np.int64)
    labels[: round(0.2 * batch)] = 1
    return [(rng.uniform(0.05, 0.95, batch).astype(np.float32), labels.copy(),
             rng.choice(num_samples, batch, replace=False).astype(np.int64))
            for _ in range(count)]


def _median_us(run, batches, repeats: int) -> float:
    run(batches[:20])  # warm-up: compile, fault in the table
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(batches)
        times.append((time.perf_counter() - start) / len(batches))
    return statistics.median(times) * 1e6


def _load_baseline(path: str):
    """``check_inputs`` of another version of ``xrisk/_validation.py`` (e.g. the last commit's,
    ``git show HEAD:xrisk_core/_validation.py > /tmp/old_validation.py``), imported inside the
    ``xrisk`` package so that its relative imports resolve."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("xrisk._validation_baseline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_inputs


def bench_torch(steps: int, repeats: int, baseline: str | None) -> dict[str, float]:
    """Median us per eager step and per check_inputs call, for the current checks and (with
    ``baseline``) another version's, measured alternately in one process so that the load of
    a shared machine hits both alike."""
    import torch

    import xrisk.torch as xr
    from xrisk import _validation

    torch.set_num_threads(1)
    loss_fn = xr.APLoss(1_000_000)
    batches = [tuple(torch.as_tensor(a) for a in b) for b in _batches(1_000_000, 256, steps)]
    leaves = [b[0].clone().requires_grad_(True) for b in batches]

    def run(chunk):
        for (_scores, labels, index), leaf in zip(chunk, leaves, strict=False):
            leaf.grad = None
            loss_fn(leaf, labels, index).backward()

    versions = {"current": _validation.check_inputs}
    if baseline:
        versions["baseline"] = _load_baseline(baseline)
    spent: dict[str, list[float]] = {name: [] for name in versions}  # per call, us
    times: dict[str, list[float]] = {name: [] for name in versions}

    def timed(name):
        original = versions[name]

        def check(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[name].append((time.perf_counter() - start) * 1e6)
        return check

    run(batches[:20])  # warm-up: fault in the table
    try:
        for _ in range(repeats):
            for name in versions:
                _validation.check_inputs = timed(name)
                start = time.perf_counter()
                run(batches)
                times[name].append((time.perf_counter() - start) / len(batches) * 1e6)
    finally:
        _validation.check_inputs = versions["current"]
    out = {}
    for name in versions:
        out[f"{name} step"] = statistics.median(times[name])
        out[f"{name} check_inputs"] = statistics.median(spent[name])
    return out


def bench_jax(steps: int, repeats: int) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    import xrisk.jax as xr

    out = {}
    for size in (1_000, 10_000_000):
        batches = [tuple(jnp.asarray(a) for a in b) for b in _batches(size, 256, steps)]
        wrapper = xr.StatefulLoss(xr.APLoss(size))

        def run_wrapper(chunk, wrapper=wrapper):
            for b in chunk:
                value = wrapper(*b)
            value.block_until_ready()

        loss = xr.APLoss(size)
        step = jax.jit(lambda state, s, y, i, loss=loss: loss.apply(state, s, y, i),
                       donate_argnums=0)
        holder = [loss.init()]

        def run_jit(chunk, step=step, holder=holder):
            for b in chunk:
                value, holder[0] = step(holder[0], *b)
            value.block_until_ready()

        out[f"StatefulLoss n={size:.0e}"] = _median_us(run_wrapper, batches, repeats)
        out[f"jit(apply), donated n={size:.0e}"] = _median_us(run_jit, batches, repeats)
    return out


def bench_families(repeats: int, baseline: str | None, batch_size: int = 64,
                   calls: int = 20) -> dict[str, dict[str, float]]:
    """µs per ``check_inputs`` call per family and version, interleaved ABBA over
    ``repeats`` short rounds of ``calls`` calls, on the arguments the family's training step
    passes (recorded from one step): the fastest round (the least disturbed by other jobs on
    a shared machine) and, with a baseline, the median of the per-round ratios."""
    import warnings

    import torch
    from _families import FAMILIES
    from _timing import interleaved

    from xrisk import _validation

    torch.set_num_threads(1)
    versions = {"current": _validation.check_inputs}
    if baseline:
        versions["baseline"] = _load_baseline(baseline)
    out: dict[str, dict[str, float]] = {}
    for family in FAMILIES:
        built = family.build("xrisk", batch_size)
        recorded: list[tuple[Any, ...]] = []

        def record(definition, backend, bound, *, xp, _recorded=recorded):
            _recorded.append((definition, backend, dict(bound), xp))
            return versions["current"](definition, backend, bound, xp=xp)

        _validation.check_inputs = record
        try:
            built.step(built.batches[0])
        finally:
            _validation.check_inputs = versions["current"]

        def runner(check, args_list=recorded):
            def run() -> float:
                start = time.perf_counter()
                for _ in range(calls):
                    for definition, backend, bound, xp in args_list:
                        check(definition, backend, dict(bound), xp=xp)
                return (time.perf_counter() - start) / calls * 1e6
            return run

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an interval warning is given once, not timed
            runs = {name: runner(check) for name, check in versions.items()}
            for warm_up in runs.values():
                warm_up()  # warm-up: the signature's plan is made here
            times = interleaved(runs, repeats)
        out[family.name] = {name: min(values) for name, values in times.items()}
        if "baseline" in times:  # each round times both under the same load: paired ratios
            out[family.name]["ratio"] = statistics.median(
                a / b for a, b in zip(times["current"], times["baseline"], strict=True))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("torch", "jax", "families"), default=None)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", default=None,
                        help="another _validation.py whose check_inputs to time alongside")
    args = parser.parse_args()
    if args.only in (None, "torch"):
        import torch  # noqa: F401  (before TensorFlow/JAX, see tests/conftest.py)
        result = bench_torch(args.steps, args.repeats, args.baseline)
        print("torch eager APLoss step, B=256, 20% positives, n=1e6, 1 thread:")
        for name in ("current", "baseline"):
            if f"{name} step" in result:
                step, checks = result[f"{name} step"], result[f"{name} check_inputs"]
                print(f"  {name:8s} checks: {step:7.1f} us/step, of which check_inputs "
                      f"{checks:5.1f} us ({100 * checks / step:.1f} %)")
    if args.only in (None, "jax"):
        for label, value in bench_jax(args.steps, args.repeats).items():
            print(f"jax {label}: {value:.1f} us/step")
    if args.only == "families":
        import torch  # noqa: F401  (before TensorFlow/JAX, see tests/conftest.py)
        from _timing import machine_load
        result = bench_families(args.repeats, args.baseline)
        print(f"check_inputs, µs per call (fastest round), torch eager, batch 64, 1 thread "
              f"({machine_load()}):")
        names = [name for name in next(iter(result.values())) if name != "ratio"]
        print(f"  {'family':26s}" + "".join(f"{name:>10s}" for name in names)
              + ("  ratio (median of rounds)" if len(names) == 2 else ""))
        for family, figures in result.items():
            ratio = f"{figures['ratio']:10.2f}" if "ratio" in figures else ""
            print(f"  {family:26s}" + "".join(f"{figures[n]:10.1f}" for n in names) + ratio)


if __name__ == "__main__":
    main()
