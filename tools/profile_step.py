"""Where an xrisk.torch step's time goes, against LibAUC 2.0.1 (a profiling tool, not a
benchmark: it prints, it never judges; the questions and their targets live in benchmarks/).

For APLoss + SOAP and AUCMLoss + PESG (CPU, float32, one thread, MLP 64-32-1, batch 256 with
20 % positives):

1. ``phases``: per-phase medians of both libraries (model forward, loss forward, zero_grad +
   backward, optimizer step), interleaved;
2. ``pieces``: inclusive timings of xrisk's internal pieces during real steps (timing
   wrappers installed for the run and removed after; pieces a checkout lacks are skipped and
   named, so the tool survives renames);
3. ``ops``: the number of torch operators each phase dispatches, with the xrisk source
   lines that dispatch them (tools/op_count.py; deterministic, so the figure to compare
   across commits on a noisy machine);
4. ``micro``: micro-benchmarks of suspects and of cheaper alternatives, all interleaved
   (tools/micro_step.py);
5. ``cprofile``: cProfile of the steps, top functions and the time grouped by layer.

::

    .venv/bin/python tools/profile_step.py                       # phases, pieces, ops
    .venv/bin/python tools/profile_step.py --parts all
    .venv/bin/python tools/profile_step.py --parts cprofile --objectives ap --top 40

Every family's operator count and time outside operators: benchmarks/bench_fixed_cost.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import cProfile  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "benchmarks"))
from _libauc_shim import MISSING_MESSAGE, LibAUC, load_libauc  # noqa: E402
from _timing import machine_load  # noqa: E402
from bench_epoch_vs_libauc import build, make_model, make_step  # noqa: E402
from op_count import OpCounter, source_roots  # noqa: E402

OBJECTIVES = ("ap", "aucm")
TITLES = {"ap": "APLoss + SOAP", "aucm": "AUCMLoss + PESG"}
PARTS = ("phases", "pieces", "ops", "micro", "cprofile")


def make_batches(num_samples: int, args: argparse.Namespace
                 ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """``--num-batches`` batches (x float32 (B, F), y float32 (B,), distinct index int64 (B,)).

    Positives come first, as DualSampler lays them out; each batch has
    ``round(positive_share * B)`` of them.
    """
    rng = np.random.default_rng(args.seed)
    size = args.batch_size
    num_pos = max(1, round(args.positive_share * size))
    labels = np.zeros(size, np.float32)
    labels[:num_pos] = 1
    out = []
    for _ in range(args.num_batches):
        x = rng.normal(size=(size, args.features)).astype(np.float32)
        index = rng.choice(num_samples, size, replace=False).astype(np.int64)
        out.append((torch.from_numpy(x), torch.from_numpy(labels.copy()), torch.from_numpy(index)))
    return out


def fmt_n(n: int) -> str:
    return f"{n:.0e}".replace("+0", "").replace("+", "")


def phase_times(objective: str, model: torch.nn.Module, loss_fn: Any, optimizer: Any,
                batches: list, steps: int) -> dict[str, float]:
    """Median µs of each phase of a step over ``steps`` steps."""
    phases: dict[str, list[float]] = defaultdict(list)
    clock = time.perf_counter
    for k in range(steps):
        x, y, index = batches[k % len(batches)]
        t0 = clock()
        scores = torch.sigmoid(model(x))
        t1 = clock()
        loss = loss_fn(scores, y, index) if objective == "ap" else loss_fn(scores, y)
        t2 = clock()
        optimizer.zero_grad()
        loss.backward()
        t3 = clock()
        optimizer.step()
        t4 = clock()
        for name, value in (("model forward", t1 - t0), ("loss forward", t2 - t1),
                            ("zero_grad + backward", t3 - t2), ("optimizer step", t4 - t3),
                            ("step total", t4 - t0)):
            phases[name].append(value * 1e6)
    return {name: statistics.median(values) for name, values in phases.items()}


# (label, depth, defining module, attribute path). Inclusive time per step; a module-level
# function is patched in every xrisk module that holds it (it is imported by name). Pieces a
# checkout lacks (renamed, removed) are skipped and named once.
PIECES = (
    ("XRiskLoss.forward (loss total)", 0, "xrisk.torch.losses", "XRiskLoss.forward"),
    ("loss.state (NamedTuple of buffers)", 1, "xrisk._adapter_support", "LossContainer.state"),
    ("loss.aux_params (NamedTuple)", 1, "xrisk._adapter_support", "LossContainer.aux_params"),
    ("LossDefinition.apply (generic)", 1, "xrisk.losses._base", "LossDefinition.apply"),
    ("LossDefinition.bind", 2, "xrisk.losses._base", "LossDefinition.bind"),
    ("backend_of", 2, "xrisk.backends", "backend_of"),
    ("check_inputs", 2, "xrisk._validation", "check_inputs"),
    ("backends.torch.to_numpy (value checks)", 3, "xrisk.backends.torch", "to_numpy"),
    ("APLoss._loss", 2, "xrisk.losses.ap", "APLoss._loss"),
    ("AUCMLoss._loss", 2, "xrisk.losses.auc", "AUCMLoss._loss"),
    ("surrogate_loss (B x B pairs)", 3, "xrisk.surrogates", "surrogate_loss"),
    ("masked_mean", 3, "xrisk._state", "masked_mean"),
    ("BinaryLoss.positive_groups (AP)", 3, "xrisk.losses._binary",
     "BinaryLoss.positive_groups"),
    ("BinaryLoss.positive_rows (pAUC family)", 3, "xrisk.losses._binary",
     "BinaryLoss.positive_rows"),
    ("group_keys (sort + binary search)", 4, "xrisk._grouping", "group_keys"),
    ("KeyGroups.mean (segment sums)", 3, "xrisk._grouping", "KeyGroups.mean"),
    ("Step.write_rows", 3, "xrisk.losses._base", "Step.write_rows"),
    ("_state.write_rows", 3, "xrisk._state", "write_rows"),
    ("last_occurrence (sort + segment max)", 4, "xrisk._grouping", "last_occurrence"),
    ("backends.torch.write_rows (index_copy_)", 4, "xrisk.backends.torch", "write_rows"),
    ("XRiskOptimizer._group_rule", 1, "xrisk.torch.optim", "XRiskOptimizer._group_rule"),
    ("UpdateRule.rates", 1, "xrisk.optim._rule", "UpdateRule.rates"),
    ("XRiskOptimizer._update_flat (eager, per group)", 1, "xrisk.torch.optim",
     "XRiskOptimizer._update_flat"),
    ("_plans_match (flat plans still valid?)", 2, "xrisk.torch.optim", "_plans_match"),
    ("_make_plans (rebuild: after loads etc.)", 2, "xrisk.torch.optim", "_make_plans"),
    ("_FlatPlan.update (one flat vector)", 2, "xrisk.torch.optim", "_FlatPlan.update"),
    ("XRiskOptimizer._update_each (per tensor)", 1, "xrisk.torch.optim",
     "XRiskOptimizer._update_each"),
    ("ClippedRule.update_param (core rule)", 3, "xrisk.optim._rule",
     "ClippedRule.update_param"),
    ("XRiskOptimizer._ascend", 1, "xrisk.torch.optim", "XRiskOptimizer._ascend"),
    ("ascent_step (core rule)", 2, "xrisk.optim._rule", "ascent_step"),
)


def _timed(fn: Callable, label: str, durations: dict[str, list[float]]) -> Callable:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            durations[label].append(time.perf_counter() - start)

    return timed


@contextlib.contextmanager
def instrumented(durations: dict[str, list[float]]) -> Iterator[set[str]]:
    """Install timing wrappers on :data:`PIECES` for the duration; yields the labels found."""
    undo: list[tuple[Any, str, Any]] = []
    found: set[str] = set()
    for label, _, module_name, path in PIECES:
        try:
            owner = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for parent in parents:
                owner = getattr(owner, parent)
            original = inspect.getattr_static(owner, attr)
        except (ImportError, AttributeError):
            continue
        if isinstance(owner, type) and attr not in vars(owner):
            continue  # inherited: it is timed (once) where it is defined
        if isinstance(original, property) and original.fget is not None:
            undo.append((owner, attr, original))
            setattr(owner, attr, property(_timed(original.fget, label, durations)))
        elif isinstance(owner, type) and inspect.isfunction(original):
            undo.append((owner, attr, original))
            setattr(owner, attr, _timed(original, label, durations))
        elif inspect.isfunction(original):
            wrapper = _timed(original, label, durations)
            for module in list(sys.modules.values()):
                if not getattr(module, "__name__", "").startswith("xrisk"):
                    continue
                for name, value in list(vars(module).items()):
                    if value is original:
                        undo.append((module, name, original))
                        setattr(module, name, wrapper)
        else:
            continue
        found.add(label)
    try:
        yield found
    finally:
        for owner, attr, original in reversed(undo):
            setattr(owner, attr, original)


def phases_and_pieces(args: argparse.Namespace, lib: LibAUC) -> None:
    num_samples = args.sizes[-1]
    batches = make_batches(num_samples, args)
    steps = max(args.rounds * args.steps // 2, 100)
    print(f"\n== Profile: batch {args.batch_size}, {args.positive_share:.0%} positives, "
          f"n={fmt_n(num_samples)}, MLP {args.features}-{args.hidden}-1, float32, "
          f"{torch.get_num_threads()} thread(s); medians / means over {steps} steps")
    for objective in args.objectives:
        base = make_model(args.features, args.hidden, args.seed)
        built = {}
        for impl in ("xrisk", "libauc"):
            model = copy.deepcopy(base)
            loss_fn, optimizer = build(impl, objective, num_samples, model, lib)
            built[impl] = (model, loss_fn, optimizer)
            phase_times(objective, model, loss_fn, optimizer, batches, args.warmup)
        phases = {}
        for impl in ("libauc", "xrisk", "libauc", "xrisk"):  # interleaved; the last pair is kept
            phases[impl] = phase_times(objective, *built[impl], batches, steps)
        print(f"\n-- {TITLES[objective]}: phases (median µs)")
        print(f"{'phase':<26}{'xrisk':>10}{'LibAUC':>10}{'diff':>10}")
        for name in phases["xrisk"]:
            a, b = phases["xrisk"][name], phases["libauc"][name]
            print(f"{name:<26}{a:>10.1f}{b:>10.1f}{a - b:>+10.1f}")

        durations: dict[str, list[float]] = defaultdict(list)
        model, loss_fn, optimizer = built["xrisk"]
        step = make_step(objective, model, loss_fn, optimizer)
        with instrumented(durations) as found:
            for k in range(steps):
                step(*batches[k % len(batches)])
        print(f"-- {TITLES[objective]}: xrisk pieces, inclusive µs per step = median µs per "
              "call x calls per step (a wrapper adds ~0.3 µs per call; nested = indented)")
        for label, depth, _, _ in PIECES:
            if durations[label]:
                calls = len(durations[label]) / steps
                per_step = statistics.median(durations[label]) * calls * 1e6
                print(f"  {'  ' * depth}{label:<{46 - 2 * depth}}{per_step:>9.1f} µs  "
                      f"({calls:.0f} call/step)")
        absent = [label for label, *_ in PIECES if label not in found]
        if absent:
            print(f"  (not in this checkout: {', '.join(absent)})")


def op_counts(args: argparse.Namespace, lib: LibAUC) -> None:
    """Torch operators dispatched per phase of one step, and the xrisk lines behind them."""
    num_samples = args.sizes[-1]
    batches = make_batches(num_samples, args)
    print(f"\n-- torch ops dispatched per step (n={fmt_n(num_samples)}; LibAUC's count "
          "includes its builtin sum() loop: ~B adds)")
    for objective in args.objectives:
        base = make_model(args.features, args.hidden, args.seed)
        found: dict[str, dict[str, OpCounter]] = {}
        for impl in ("xrisk", "libauc"):
            model = copy.deepcopy(base)
            loss_fn, optimizer = build(impl, objective, num_samples, model, lib)
            step = make_step(objective, model, loss_fn, optimizer)
            for k in range(3):
                step(*batches[k])
            x, y, index = batches[3]
            counts = {}
            with OpCounter(lines=True) as mode:
                scores = torch.sigmoid(model(x))
            counts["model"] = mode
            with OpCounter(lines=True) as mode:
                loss = loss_fn(scores, y, index) if objective == "ap" else loss_fn(scores, y)
            counts["loss"] = mode
            with OpCounter(lines=True) as mode:
                optimizer.zero_grad()
                loss.backward()
            counts["backward"] = mode
            with OpCounter(lines=True) as mode:
                optimizer.step()
            counts["optimizer"] = mode
            found[impl] = counts
        print(f"  {TITLES[objective]}: " + "; ".join(
            f"{phase} {found['xrisk'][phase].total} vs {found['libauc'][phase].total}"
            for phase in found["xrisk"]) + " (xrisk vs LibAUC)")
        for phase in ("loss", "optimizer"):
            shown = ", ".join(f"{where} x{n}"
                              for where, n in found["xrisk"][phase].top(args.top // 2))
            print(f"    xrisk {phase} lines (top): {shown}")


def layer_of(filename: str, roots: list[tuple[str, str]], compat: str) -> str:
    """Which layer a profiled function belongs to, by its source directory."""
    for label, root in roots:
        if filename.startswith(root):
            return f"xrisk {label.rstrip('/')}"
    if compat and filename.startswith(compat):
        return "array_api_compat wrappers"
    for label, needle in (("LibAUC python", f"{os.sep}libauc{os.sep}"),
                          ("torch python (nn, optim, autograd)", f"{os.sep}torch{os.sep}"),
                          ("numpy python", f"{os.sep}numpy{os.sep}")):
        if needle in filename:
            return label
    if filename == "~":
        return "C builtins (torch ops, numpy, ...)"
    return "other python (benchmark, stdlib)"


def cprofile_steps(args: argparse.Namespace, lib: LibAUC) -> None:
    num_samples = args.sizes[-1]
    batches = make_batches(num_samples, args)
    steps = max(args.rounds * args.steps // 2, 100)
    for objective in args.objectives:
        for impl in ("xrisk", "libauc"):
            model = make_model(args.features, args.hidden, args.seed)
            step = make_step(objective, model, *build(impl, objective, num_samples, model, lib))
            for k in range(args.warmup):
                step(*batches[k % len(batches)])
            profiler = cProfile.Profile()
            profiler.enable()
            for k in range(steps):
                step(*batches[k % len(batches)])
            profiler.disable()
            stats = pstats.Stats(profiler)
            roots, compat = source_roots()
            by_layer: dict[str, float] = defaultdict(float)
            total = 0.0
            for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
                by_layer[layer_of(filename, roots, compat)] += tottime
                total += tottime
            print(f"\n== cProfile {TITLES[objective]}, {impl}, n={fmt_n(num_samples)}: "
                  f"{total / steps * 1e6:.0f} µs per step under the profiler "
                  "(its per-call overhead inflates Python-heavy code)")
            for label, value in sorted(by_layer.items(), key=lambda kv: -kv[1]):
                print(f"  {label:<42}{value / steps * 1e6:>8.1f} µs/step  {value / total:>5.0%}")
            stats.sort_stats("tottime").print_stats(args.top)



def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--parts", default="phases,pieces,ops",
                        help=f"comma-separated subset of {','.join(PARTS)} (or 'all')")
    parser.add_argument("--objectives", default="ap,aucm", help="subset of ap,aucm")
    parser.add_argument("--sizes", default="1e3,1e6", help="num_samples (the last is profiled)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--positive-share", type=float, default=0.2)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--num-batches", type=int, default=32, help="distinct step batches")
    parser.add_argument("--rounds", type=int, default=31, help="sets the profiled steps")
    parser.add_argument("--steps", type=int, default=50, help="sets the profiled steps")
    parser.add_argument("--warmup", type=int, default=40, help="warm-up steps")
    parser.add_argument("--micro-rounds", type=int, default=9, help="micro: runs")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--top", type=int, default=25, help="cprofile: functions shown")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.parts = list(PARTS) if args.parts == "all" else [
        p.strip() for p in args.parts.split(",") if p.strip()]
    if not args.parts or set(args.parts) - set(PARTS):
        parser.error(f"--parts: got {args.parts}; expected names from {PARTS} or 'all'")
    args.objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    if not args.objectives or set(args.objectives) - set(OBJECTIVES):
        parser.error(f"--objectives: got {args.objectives}; expected names from {OBJECTIVES}")
    args.sizes = [int(float(n)) for n in args.sizes.split(",") if n.strip()]
    if not args.sizes or min(args.sizes) < args.batch_size:
        parser.error(f"--sizes: got {args.sizes}; expected sizes >= batch size {args.batch_size}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    lib = load_libauc()
    if lib is None:
        print(MISSING_MESSAGE)
        return 0
    torch.set_num_threads(args.threads)
    print(f"LibAUC {lib.version}, torch {torch.__version__}, CPU, {torch.get_num_threads()} "
          f"thread(s), float32; {machine_load()}")
    if "phases" in args.parts or "pieces" in args.parts:
        phases_and_pieces(args, lib)
    if "ops" in args.parts:
        op_counts(args, lib)
    if "micro" in args.parts:
        from micro_step import micro_benchmarks

        micro_benchmarks(args, make_batches(args.sizes[-1], args), lib)
    if "cprofile" in args.parts:
        cprofile_steps(args, lib)
    print(f"\n({machine_load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
