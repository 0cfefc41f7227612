"""Question: what does ``torch.compile`` buy a torch training step, per loss family?

For each family (benchmarks/_families.py; CPU, float32, one thread, checks in their default
mode), two copies of one training step from the same model and batches: eager, and with the
forward pass and the loss compiled by ``torch.compile`` (inductor; its backward is compiled
with it by AOTAutograd), ``zero_grad`` and the optimizer step left eager::

    compiled_loss = torch.compile(lambda batch: loss_fn(model(batch...), ...))
    loss = compiled_loss(batch); optimizer.zero_grad(); loss.backward(); optimizer.step()

Printed: the compile time (the first two calls), the number of graphs Dynamo made (one per loss:
tests/test_torch_compile.py), the median µs per step of each over ``--rounds`` interleaved
rounds with their IQRs, and the speed-up eager / compiled with the quartiles of the
per-round ratios; a compiled step that is slower than the eager one is flagged. Both copies
take the same steps on the same batches, so their models must agree (printed: the largest
difference of a parameter tensor relative to its largest entry, after every timed step;
float32, and inductor reorders sums, so ~1e-6 is agreement).

A fresh loss's first compiled call computes some of its cached declarations inside the
trace (``LossDefinition``'s ``_declared`` cache, xrisk_core/losses/_base.py:257); Dynamo
guards on the cache and recompiles once on the second call ("graphs" then reads 2 for one
loss). One eager call before compiling, or the second compile, settles it.

::

    .venv/bin/python benchmarks/bench_torch_compile.py                    # ~4 min (compiles)
    .venv/bin/python benchmarks/bench_torch_compile.py --families "AP + SOAP" --batch-size 64
    python benchmarks/bench_torch_compile.py --device cuda --families all  # on a GPU (Triton)

The exit status is 1 when a compiled step is slower than the eager one (unless
``--report-only``). Needs a C++ compiler for inductor's CPU code (``g++``).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _families import FAMILIES, select  # noqa: E402
from _timing import interleaved, machine_load, paired_summary, step_runner  # noqa: E402

DEFAULT = "AP + SOAP,pAUC DRO + SOPAs,NDCG + SONG,SogCLR + LARS,MIDAM softmax"


def compiled_step(built: Any) -> tuple[Any, float, list]:
    """The step with its forward + loss compiled; returns (step, compile seconds, graphs)."""
    graphs: list = []

    def count(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(graph_module, example_inputs)

    loss_of = torch.compile(built.loss_call, backend=count)
    def step(batch: dict) -> None:
        loss = loss_of(batch)
        built.optimizer.zero_grad()
        loss.backward()
        built.optimizer.step()

    start = time.perf_counter()
    step(built.batches[0])
    step(built.batches[1 % len(built.batches)])  # the one recompilation (see above)
    return step, time.perf_counter() - start, graphs


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--families", default=DEFAULT,
                        help=f"comma-separated or 'all', from {[f.name for f in FAMILIES]}")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--device", default="cpu",
                        help="e.g. cuda: the models, batches and tables on the GPU, each round "
                             "timed after a synchronize")
    args = parser.parse_args(argv)
    args.families = select(args.families)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"torch {torch.__version__}, {where}, {args.threads} thread(s), float32, batch "
          f"{args.batch_size}; {args.rounds} interleaved rounds x {args.steps} steps; "
          f"{machine_load()}")
    header = (f"{'family':<22}{'compile s':>10}{'graphs':>7}{'eager µs':>10}{'(IQR)':>8}"
              f"{'compiled µs':>12}{'(IQR)':>8}{'speed-up':>9}  {'round ratios':<14}"
              f"{'max rel diff':>13}")
    print(header)
    print("-" * len(header))
    slower = []
    for family in args.families:
        eager = family.build("xrisk", args.batch_size, seed=args.seed, device=device)
        fast = family.build("xrisk", args.batch_size, seed=args.seed, device=device)
        torch._dynamo.reset()
        eager_step = eager.step
        for k in range(2):
            eager_step(eager.batches[k % len(eager.batches)])
        step, seconds, graphs = compiled_step(fast)
        for k in range(2, args.warmup):
            eager_step(eager.batches[k % len(eager.batches)])
            step(fast.batches[k % len(fast.batches)])
        times = interleaved({"eager": step_runner(eager_step, eager.batches, args.steps, sync),
                             "compiled": step_runner(step, fast.batches, args.steps, sync)},
                            args.rounds)
        s = paired_summary(times["eager"], times["compiled"])
        diff = max(float((p - q).abs().max() / p.abs().max().clamp_min(1e-30))
                   for p, q in zip(eager.model.parameters(), fast.model.parameters(),
                                   strict=True))
        speed = s["ratio"]
        flag = "" if speed >= 1 else "  SLOWER"
        if speed < 1:
            slower.append(family.name)
        print(f"{family.name:<22}{seconds:>10.1f}{len(graphs):>7}{s['a_med']:>10.0f}"
              f"{s['a_iqr']:>8.0f}{s['b_med']:>12.0f}{s['b_iqr']:>8.0f}{speed:>8.2f}x  "
              f"[{s['r_lo']:.2f}, {s['r_hi']:.2f}]{diff:>13.1e}{flag}")
    print(f"({machine_load()})")
    return 1 if slower and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
