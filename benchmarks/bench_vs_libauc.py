"""Question: is every xrisk.torch training step at most 0.8x LibAUC 2.0.1's, per family?

Every loss family LibAUC 2.0.1 has, with its optimizer (benchmarks/_families.py), torch
eager on the CPU, float32, at batch 64 and 256, all of xrisk's checks on (the default mode:
host-readable batches are checked on the host). One full training step: model forward, the
loss, ``zero_grad``, backward, optimizer step. Both libraries start from the same model and
see the same pre-built batches. Every run of a batch size (xrisk and LibAUC of every family)
is timed in the same rounds, in one process: each round times ``--steps`` consecutive steps
of every run, the order reversed every other round, after ``--warmup`` steps each.

Printed per family and batch size: the median µs per step of each library over the rounds
with its interquartile range (IQR), the ratio xrisk / LibAUC of the medians, the quartiles
of the per-round ratios, and the verdict against the target (<= 0.8x). Losses LibAUC lacks
(tpAUC_CVaR_Loss + STACO, InfoNCELoss) are compared per pair with the nearest family's
xrisk step (target <= 1.2x). The load average is printed before and after.

``--floors`` also times, in the same rounds, each library's step with a free loss (the sum
of the model's outputs, ``_families.free_loss``): the model's forward and backward, zero_grad
and the library's optimizer, the part of a step that no loss implementation removes. Two
more columns follow from it: ``best``, the floor of xrisk's step over LibAUC's step (the
ratio xrisk would reach with a loss, checks and adapter costing nothing: where it is above
0.8, the 0.8x target is out of reach of any loss code), and ``loss x``, the loss's share of
each step, (xrisk - xrisk floor) / (LibAUC - LibAUC floor): the loss, its checks and the
adapter against LibAUC's loss call, forward and backward.

``--model-scale`` picks the models: ``toy`` (the default: a few thousand parameters, so the
ratios measure the fixed per-step cost of loss, checks, adapter and optimizer), ``user``
(about 1 M parameters per workload, the sizes users train: MLPs ``in -> 1024 -> 1024 -> out``
and wider contrastive encoders, see benchmarks/_families.py) or ``toy,user`` (one table per
scale and batch size). The same model for both libraries at each scale.

::

    .venv/bin/python benchmarks/bench_vs_libauc.py                      # all, ~5 min loaded
    .venv/bin/python benchmarks/bench_vs_libauc.py --families "AP + SOAP,NDCGLoss" \
        --batch-sizes 256 --rounds 9
    .venv/bin/python benchmarks/bench_vs_libauc.py --report-only         # exit 0 on misses
    .venv/bin/python benchmarks/bench_vs_libauc.py --model-scale toy,user --rounds 5 \
        --steps 3 --warmup 3                                             # both scales
    .venv/bin/python benchmarks/bench_vs_libauc.py --floors --report-only  # what is reachable

The exit status is 1 when a ratio misses its target (unless ``--report-only``); without
LibAUC the script says so and exits 0. The machine is shared: compare the interleaved
ratios, not absolute times across runs. Where the time goes: tools/profile_step.py and
benchmarks/bench_fixed_cost.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _families import BY_NAME, FAMILIES, SCALES, select  # noqa: E402
from _libauc_shim import MISSING_MESSAGE, load_libauc  # noqa: E402
from _timing import interleaved, machine_load, paired_summary, step_runner  # noqa: E402

TARGET = 0.8       # xrisk step <= TARGET x LibAUC step
PAIR_TARGET = 1.2  # a loss LibAUC lacks: <= PAIR_TARGET x the nearest family's xrisk step


def measure(families: list, batch_size: int, args: argparse.Namespace, lib: object,
            scale: str = "toy") -> dict[str, list[float]]:
    """µs per step of every (family, impl) run, ``args.rounds`` interleaved rounds."""
    runs = {}
    wanted = list(families) + [BY_NAME[f.nearest] for f in families
                               if f.nearest and BY_NAME[f.nearest] not in families]
    for family in wanted:
        for impl in ("xrisk", "libauc"):
            if impl == "libauc" and family.libauc is None:
                continue
            built = family.build(impl, batch_size, lib, seed=args.seed, scale=scale)
            for k in range(args.warmup):
                built.step(built.batches[k % len(built.batches)])
            runs[f"{family.name}|{impl}"] = step_runner(built.step, built.batches, args.steps)
            if args.floors:
                # its own model and optimizer: the free steps must not move the real run's
                floor = family.build(impl, batch_size, lib, seed=args.seed, scale=scale)
                for k in range(args.warmup):
                    floor.free_step(floor.batches[k % len(floor.batches)])
                runs[f"{family.name}|{impl} floor"] = step_runner(
                    floor.free_step, floor.batches, args.steps)
    return interleaved(runs, args.rounds)


def report(families: list, batch_size: int, times: dict[str, list[float]], scale: str = "toy"
           ) -> list[tuple[str, float, float]]:
    """Print the table of one batch size; returns (row, ratio, target) per row."""
    out = []
    floors = any(key.endswith(" floor") for key in times)
    print(f"\n{scale} models, batch {batch_size}: µs per step, median (IQR) over rounds; "
          "ratio = xrisk / LibAUC of the medians; [q1, q3] of the per-round ratios"
          + ("; floor = xrisk's step with a free loss, best = floor / LibAUC, loss x = "
             "(xrisk - floor) / (LibAUC - LibAUC's floor)" if floors else ""))
    extra = f"{'floor':>8}{'best':>6}{'loss x':>8}" if floors else ""
    header = (f"{'family':<22}{'LibAUC pair':<36}{'xrisk':>9}{'(IQR)':>8}{'LibAUC':>9}"
              f"{'(IQR)':>8}{'ratio':>7}  {'round ratios':<14}{extra}  verdict")
    print(header)
    print("-" * len(header))
    for family in families:
        mine = times[f"{family.name}|xrisk"]
        if family.libauc is not None:
            s = paired_summary(mine, times[f"{family.name}|libauc"])
            target, other = TARGET, family.libauc
        else:
            s = paired_summary(mine, times[f"{family.nearest}|xrisk"])
            target, other = PAIR_TARGET, f"(none) vs xrisk {family.nearest}"
        verdict = "meets" if s["ratio"] <= target else "MISSES"
        extra = ""
        if floors and family.libauc is not None:
            floor = statistics.median(times[f"{family.name}|xrisk floor"])
            their_floor = statistics.median(times[f"{family.name}|libauc floor"])
            best = floor / s["b_med"]
            their_loss = s["b_med"] - their_floor
            loss_x = ((s["a_med"] - floor) / their_loss if their_loss > 0
                      else float("nan"))
            extra = f"{floor:>8.0f}{best:>6.2f}{loss_x:>8.2f}"
            if verdict == "MISSES" and best > target:
                verdict += " (out of reach: best > target)"
        elif floors:
            extra = f"{'':>22}"
        print(f"{family.name:<22}{other[:35]:<36}{s['a_med']:>9.0f}{s['a_iqr']:>8.0f}"
              f"{s['b_med']:>9.0f}{s['b_iqr']:>8.0f}{s['ratio']:>7.2f}  "
              f"[{s['r_lo']:.2f}, {s['r_hi']:.2f}]{extra}  {verdict} <= {target}")
        out.append((f"{family.name} B={batch_size} {scale}", s["ratio"], target))
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--families", default="all",
                        help="comma-separated family or loss names (default: all), "
                             f"from {[f.name for f in FAMILIES]}")
    parser.add_argument("--batch-sizes", default="64,256")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=8, help="steps per round and run")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up steps per run")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-scale", default="toy",
                        help=f"comma-separated model scales from {SCALES} (default: toy; "
                             "user: about 1 M parameters per workload)")
    parser.add_argument("--floors", action="store_true",
                        help="also time each library's step with a free loss (the floor; "
                             "columns floor, best and loss x)")
    parser.add_argument("--report-only", action="store_true",
                        help="exit 0 even when a ratio misses its target")
    args = parser.parse_args(argv)
    args.families = select(args.families)
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    args.model_scale = [s.strip() for s in args.model_scale.split(",") if s.strip()]
    unknown = [s for s in args.model_scale if s not in SCALES]
    if unknown or not args.model_scale:
        parser.error(f"--model-scale: got {unknown or args.model_scale}; expected a "
                     f"comma-separated choice of {SCALES}")
    for name in ("rounds", "steps", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: got {getattr(args, name)}; expected >= 1")
    if not args.batch_sizes or min(args.batch_sizes) < 8:
        parser.error(f"--batch-sizes: got {args.batch_sizes}; expected sizes >= 8")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    lib = load_libauc()
    if lib is None:
        print(MISSING_MESSAGE)
        return 0
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")  # LibAUC's deprecation and autocast chatter
    import xrisk

    print(f"xrisk {xrisk.__version__} vs LibAUC {lib.version}, torch {torch.__version__}, CPU, "
          f"{torch.get_num_threads()} thread(s), float32, checks {xrisk.get_checks()!r}; "
          f"{args.rounds} interleaved rounds x {args.steps} steps after {args.warmup} warm-up")
    print(f"start: {machine_load()}")
    start = time.perf_counter()
    rows = []
    for scale in args.model_scale:
        for batch_size in args.batch_sizes:
            times = measure(args.families, batch_size, args, lib, scale)
            rows += report(args.families, batch_size, times, scale)
            print(f"({machine_load()})")
    missed = [(name, r, t) for name, r, t in rows if r > t]
    print(f"\nend: {machine_load()}; total {time.perf_counter() - start:.0f} s")
    print(f"targets (xrisk <= {TARGET} x LibAUC; LibAUC-less losses <= {PAIR_TARGET} x the "
          f"nearest family): {len(rows) - len(missed)} of {len(rows)} met")
    for name, ratio, target in missed:
        print(f"  missed: {name}: {ratio:.2f} > {target}")
    return 1 if missed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
