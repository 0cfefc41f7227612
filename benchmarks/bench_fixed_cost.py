"""Question: what does a step cost besides the arithmetic? Per loss and adapter: the number
of operators a training step dispatches and the time spent outside them.

torch eager (CPU, float32, one thread), every registered loss with its optimizer
(benchmarks/_families.py), one full training step at ``--batch-size`` (default 64, where the
fixed cost dominates):

- operators dispatched per step, by phase (forward + loss, backward, optimizer step), counted
  by a ``TorchDispatchMode`` (tools/op_count.py), and LibAUC 2.0.1's count for the same
  family (includes LibAUC's builtin ``sum()`` over masks: about B adds);
- µs per step (median of ``--rounds`` interleaved rounds of plain steps), µs inside the
  operators (their summed run time, measured by the counter in rounds interleaved with the
  plain ones) and the difference, the time outside operators (Python, autograd bookkeeping,
  hooks), for xrisk and LibAUC; under heavy load the two medians can cross (a negative
  "outside"): compare only figures of a quiet run;
- with ``--lines``: the xrisk source lines dispatching the most operators per family;
- the top fixed costs: the xrisk functions with the most own (``tottime``) Python time per
  step under cProfile, as file:line, over every family.

TensorFlow and JAX (``--frameworks``): the same loss on the same batch, the operations of
the traced loss + gradient graph (``tf.function``: ops in the concrete function's graph,
``jax.jit``: the jaxpr's equations, nested ones included). Compiled steps run no Python per
step, so their "outside" time is the dispatch of one call (printed as the compiled step's
µs).

::

    .venv/bin/python benchmarks/bench_fixed_cost.py                   # torch, ~2 min
    .venv/bin/python benchmarks/bench_fixed_cost.py --frameworks torch,tensorflow,jax --lines

Figures only (no target): the operator counts are deterministic and comparable across
commits; the times move with the machine's load (printed).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))
from _families import FAMILIES, select  # noqa: E402
from _libauc_shim import load_libauc  # noqa: E402
from _timing import interleaved, machine_load, step_runner  # noqa: E402
from op_count import OpCounter, source_roots  # noqa: E402

import xrisk  # noqa: E402


def phase_counts(built: Any, batch: dict, lines: bool) -> dict[str, OpCounter]:
    """One step split in phases, each under its own counter."""
    out = {}
    with OpCounter(lines) as ops:
        loss = built.loss_call(batch)
    out["forward"] = ops
    with OpCounter(lines) as ops:
        built.optimizer.zero_grad()
        loss.backward()
    out["backward"] = ops
    with OpCounter(lines) as ops:
        built.optimizer.step()
    out["optimizer"] = ops
    return out


def inside_runner(built: Any, steps: int) -> Any:
    """A timed run like step_runner's, returning the µs per step spent inside operators."""
    position = [0]

    def run() -> float:
        with OpCounter() as ops:
            for k in range(steps):
                built.step(built.batches[(position[0] + k) % len(built.batches)])
        position[0] += steps
        return ops.seconds / steps * 1e6

    return run


def torch_table(args: argparse.Namespace, lib: Any) -> dict[str, float]:
    """Print the torch table; returns xrisk's own Python seconds per step by function."""
    roots, _ = source_roots()
    own: dict[str, float] = defaultdict(float)
    print(f"\ntorch eager, batch {args.batch_size}: operators per step (forward+loss / backward "
          f"/ optimizer = total) and µs per step: total, inside operators, outside; "
          f"{args.rounds} interleaved rounds x {args.steps} steps")
    header = (f"{'family':<22}{'xrisk ops':>22}{'LibAUC':>8}{'xrisk µs':>10}{'in ops':>8}"
              f"{'outside':>9}{'LibAUC µs':>11}{'in ops':>8}{'outside':>9}")
    print(header)
    print("-" * len(header))
    for family in args.families:
        impls = ["xrisk"] + (["libauc"] if family.libauc and lib is not None else [])
        built = {impl: family.build(impl, args.batch_size, lib, seed=args.seed)
                 for impl in impls}
        for b in built.values():
            for k in range(args.warmup):
                b.step(b.batches[k % len(b.batches)])
        counts = {impl: phase_counts(b, b.batches[0], args.lines) for impl, b in built.items()}
        runs = {}
        for impl, b in built.items():
            runs[impl] = step_runner(b.step, b.batches, args.steps)
            runs[f"{impl} inside"] = inside_runner(b, args.steps)
        times = interleaved(runs, args.rounds)
        cells = []
        for impl in ("xrisk", "libauc"):
            if impl not in built:
                cells.append(("", "", "", ""))
                continue
            total = statistics.median(times[impl])
            inside = statistics.median(times[f"{impl} inside"])
            phases = counts[impl]
            n = sum(c.total for c in phases.values())
            split = "/".join(str(phases[p].total) for p in ("forward", "backward", "optimizer"))
            cells.append((f"{split} = {n}" if impl == "xrisk" else str(n), f"{total:.0f}",
                          f"{inside:.0f}", f"{total - inside:.0f}"))
        (xo, xt, xi, xout), (lo, lt, li, lout) = cells
        print(f"{family.name:<22}{xo:>22}{lo:>8}{xt:>10}{xi:>8}{xout:>9}{lt:>11}{li:>8}"
              f"{lout:>9}")
        if args.lines:
            merged: dict[str, int] = defaultdict(int)
            for c in counts["xrisk"].values():
                for line, k in c.by_line.items():
                    merged[line] += k
            shown = sorted(merged.items(), key=lambda kv: -kv[1])[: args.top]
            print("    " + "; ".join(f"{line} x{k}" for line, k in shown))
        profiler = cProfile.Profile()
        x = built["xrisk"]
        profiler.enable()
        for k in range(args.steps * 4):
            x.step(x.batches[k % len(x.batches)])
        profiler.disable()
        stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
        for (filename, line, name), (_, _, tottime, _, _) in stats.items():
            hit = next((label + filename[len(root):] for label, root in roots
                        if filename.startswith(root)), None)
            if hit is not None:
                own[f"{hit}:{line} {name}"] += tottime / (args.steps * 4) / len(args.families)
    return own


def scored_inputs(family: Any, args: argparse.Namespace) -> tuple[dict, dict[str, Any]]:
    """The xrisk torch loss's inputs on the first batch, by name, as numpy; and its ctor."""
    built = family.build("xrisk", args.batch_size, None, seed=args.seed)
    captured: dict[str, Any] = {}
    definition = built.loss.definition
    original = built.loss.forward

    def capture(*inputs: Any, **named: Any) -> Any:
        captured.update(definition.bind(inputs, named))
        return original(*inputs, **named)

    built.loss.forward = capture
    built.loss_call(built.batches[0])
    kinds = {spec.name: spec.kind for spec in definition.inputs()}
    arrays = {k: v.detach().numpy() for k, v in captured.items() if v is not None}
    return {k: (v, kinds[k]) for k, v in arrays.items()}, built.loss_kwargs


def count_jaxpr(jaxpr: Any) -> int:
    """Equations of a jaxpr, those of nested jaxprs (pjit, custom_jvp, cond, ...) included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for value in eqn.params.values():
            for sub in (value if isinstance(value, (list, tuple)) else [value]):
                inner = getattr(sub, "jaxpr", sub)  # a ClosedJaxpr holds its Jaxpr
                if hasattr(inner, "eqns"):
                    n += count_jaxpr(inner)
    return n


def compiled_table(args: argparse.Namespace) -> None:
    frameworks = [f for f in args.frameworks if f != "torch"]
    if not frameworks:
        return
    print(f"\ncompiled loss + gradient, batch {args.batch_size}: traced operations "
          "(tf.function graph ops / jaxpr equations) and µs per compiled call (median)")
    print(f"{'family':<22}" + "".join(f"{fw + ' ops':>16}{'µs':>8}" for fw in frameworks))
    for family in args.families:
        inputs, ctor = scored_inputs(family, args)
        cells = []
        for fw in frameworks:
            try:
                cells.append(TRACERS[fw](family, inputs, ctor, args))
            except Exception as error:  # noqa: BLE001  (report and go on)
                cells.append((f"n/a {type(error).__name__}", float("nan")))
        print(f"{family.name:<22}" + "".join(f"{str(ops):>16}{us:>8.0f} " for ops, us in cells))


def _median_us(fn: Any, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def trace_tensorflow(family: Any, inputs: dict, ctor: dict, args: argparse.Namespace
                     ) -> tuple[int, float]:
    import tensorflow as tf

    import xrisk.tensorflow as xtf

    loss_fn = getattr(xtf, family.loss)(**ctor)
    named = {k: tf.constant(v) for k, (v, _) in inputs.items()}
    scores = [k for k, (_, kind) in inputs.items() if kind == "score"]

    @tf.function
    def step(named: dict) -> Any:
        with tf.GradientTape() as tape:
            tape.watch([named[k] for k in scores])
            loss = loss_fn(**named)
        return tape.gradient(loss, [named[k] for k in scores] + list(loss_fn.trainable_variables))

    graph = step.get_concrete_function(named).graph
    return len(graph.get_operations()), _median_us(lambda: step(named), args.steps * 2)


def trace_jax(family: Any, inputs: dict, ctor: dict, args: argparse.Namespace
              ) -> tuple[int, float]:
    import jax

    import xrisk.jax as xjax

    loss_fn = getattr(xjax, family.loss)(**ctor)
    state, params = loss_fn.init(), loss_fn.init_params()
    named = {k: jax.numpy.asarray(v) for k, (v, _) in inputs.items()}
    scores = {k: named.pop(k) for k, (_, kind) in inputs.items() if kind == "score"}

    def objective(scores: dict, params: Any, state: Any, named: dict) -> Any:
        return loss_fn.apply(state, **scores, **named, params=params)

    grad = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)
    jaxpr = jax.make_jaxpr(grad)(scores, params, state, named)
    compiled = jax.jit(grad)
    return (count_jaxpr(jaxpr.jaxpr),
            _median_us(lambda: jax.block_until_ready(compiled(scores, params, state, named)),
                       args.steps * 2))


TRACERS = {"tensorflow": trace_tensorflow, "jax": trace_jax}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--families", default="all",
                        help=f"comma-separated, from {[f.name for f in FAMILIES]}")
    parser.add_argument("--frameworks", default="torch",
                        help="comma-separated subset of torch,tensorflow,jax")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--lines", action="store_true", help="top xrisk lines by operators")
    parser.add_argument("--top", type=int, default=6, help="lines / functions shown")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.families = select(args.families)
    args.frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    if not args.frameworks or set(args.frameworks) - {"torch", "tensorflow", "jax"}:
        parser.error(f"--frameworks: got {args.frameworks}; expected torch,tensorflow,jax")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    lib = load_libauc()
    print(f"xrisk {xrisk.__version__}, torch {torch.__version__}, LibAUC "
          f"{lib.version if lib else 'absent'}, CPU, 1 thread, float32; {machine_load()}")
    start = time.perf_counter()
    if "torch" in args.frameworks:
        own = torch_table(args, lib)
        print(f"\ntop fixed costs: xrisk functions by own Python time per step (cProfile "
              f"tottime, averaged over the {len(args.families)} families; the profiler "
              "inflates small functions)")
        for where, seconds in sorted(own.items(), key=lambda kv: -kv[1])[: 3 * args.top]:
            print(f"  {seconds * 1e6:7.1f} µs  {where}")
    if any(f != "torch" for f in args.frameworks):
        import tensorflow  # noqa: F401  (after torch: the house order)

        compiled_table(args)
    print(f"\n(total {time.perf_counter() - start:.0f} s; {machine_load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
