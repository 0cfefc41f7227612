"""xrisk.torch against LibAUC 2.0.1, side by side in one process (CPU, float32).

Measured (a benchmark script, not a test; LibAUC is needed here only and never by xrisk)::

    .venv/bin/pip install libauc==2.0.1 --no-deps      # benchmark-only; see _libauc_shim.py
    .venv/bin/python benchmarks/bench_vs_libauc.py                  # step + epoch, < 2 min
    .venv/bin/python benchmarks/bench_vs_libauc.py --parts profile  # where xrisk's time goes
    .venv/bin/python benchmarks/bench_vs_libauc.py --parts cprofile # cProfile, by layer

1. ``step``: one training step — MLP forward, sigmoid, the loss, ``zero_grad``, backward,
   optimizer step — for APLoss + SOAP and AUCMLoss + PESG at batch 256 with 20 % positives,
   ``num_samples`` 1e3 and 1e6. Both implementations start from copies of one model and
   see the same pre-built batches. They run in interleaved rounds (xrisk, LibAUC, LibAUC,
   xrisk, ... — the order flips every round so neither always runs on a warm cache) after a
   warm-up; each round times ``--steps`` consecutive steps. Reported: median µs per step
   over the rounds, the interquartile range, and the ratio xrisk / LibAUC of the medians
   (with the IQR of the per-round paired ratios).
2. ``epoch``: one epoch of a small MLP on a real data set shipped with xrisk (digits, one
   class against the rest, or breast cancer) through each library's own data idiom:
   xrisk ``DataLoader(IndexedDataset(x, y), sampler=DualSampler(y, B, sampling_rate=r),
   batch_size=None)`` (one gather per batch)
   and LibAUC ``DataLoader(CustomDataset(x, y, return_index=True), batch_size=B,
   sampler=DualSampler(ds, B, labels=y, sampling_rate=r))``. Both give
   ``max(n+ // num_pos, n- // num_neg)`` batches. Also timed: the data path alone
   (iterating the loader without training).
3. ``profile``: where xrisk's step time goes: per-phase medians of both libraries;
   inclusive timings of xrisk's internal pieces during real steps (timing wrappers installed
   for the run and removed after; pieces a checkout lacks are skipped and named, so the
   script survives renames); the number of torch ops each phase dispatches, with the xrisk
   source lines that dispatch them (deterministic, so it is the figure to compare across
   commits on a noisy machine); micro-benchmarks of suspects and of cheaper alternatives,
   all interleaved; the data path per item, per batch and per epoch.
4. ``cprofile``: cProfile of the steps, top functions and the time grouped by layer.

The target tracked is xrisk <= 0.8 x LibAUC for the step and the epoch; ``--strict`` makes
the exit status 1 when a ratio misses it. Without LibAUC the script prints a message and
exits 0. Figures are of one run on a shared 2-core machine whose load from other jobs moves
absolute times by 2x or more: compare the interleaved ratios and the op counts, not
absolute times across runs.
"""

from __future__ import annotations

import os

# TensorFlow is never imported here, but keep the house order: TF env vars, torch first.
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
from torch.utils.data import DataLoader  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _libauc_shim import MISSING_MESSAGE, LibAUC, load_libauc  # noqa: E402

import xrisk.torch as xr  # noqa: E402

TARGET = 0.8  # tracked: xrisk time <= TARGET x LibAUC time
OBJECTIVES = ("ap", "aucm")
TITLES = {"ap": "APLoss + SOAP", "aucm": "AUCMLoss + PESG"}
PARTS = ("step", "epoch", "profile", "cprofile")

Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]


# ---------------------------------------------------------------------------------------------
# models, batches, the two implementations
# ---------------------------------------------------------------------------------------------
def make_model(features: int, hidden: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
    )


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


def lr_kwarg(cls: Any, value: float) -> dict[str, float]:
    """``{"lr": value}``, or ``{"learning_rate": value}`` if the class takes only that name
    (xrisk renames the argument; LibAUC and torch say ``lr``)."""
    try:
        names = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {"lr": value}
    return {"learning_rate": value} if "learning_rate" in names and "lr" not in names \
        else {"lr": value}


def build(impl: str, objective: str, num_samples: int, model: torch.nn.Module,
          lib: LibAUC) -> tuple[Any, Any]:
    """``(loss_fn, optimizer)`` of ``impl`` ("xrisk" or "libauc") for ``objective``.

    Only the basic constructors, with each library's defaults (they agree: SOAP Adam
    lr 1e-3, weight decay 1e-5; PESG SGD lr 0.1, momentum 0.9, epoch decay 2e-3;
    AUC-M v1 with the batch's positive ratio; AP gamma 0.9, margin 1, squared hinge).
    """
    params = model.parameters()
    if impl == "xrisk":
        if objective == "ap":
            return xr.APLoss(num_samples), xr.SOAP(params, **lr_kwarg(xr.SOAP, 1e-3))
        loss_fn = xr.AUCMLoss()
        return loss_fn, xr.PESG(params, loss_fn)
    if objective == "ap":
        loss_fn = lib.losses.APLoss(data_len=num_samples, device="cpu")
        return loss_fn, lib.optimizers.SOAP(params, lr=1e-3, device="cpu")
    loss_fn = lib.losses.AUCMLoss(device="cpu")
    return loss_fn, lib.optimizers.PESG(params, loss_fn=loss_fn, device="cpu", verbose=False)


def make_step(objective: str, model: torch.nn.Module, loss_fn: Any, optimizer: Any) -> Step:
    """One training step: forward, loss, zero_grad, backward, optimizer step."""
    if objective == "ap":
        def step(x: torch.Tensor, y: torch.Tensor, index: torch.Tensor) -> None:
            loss = loss_fn(torch.sigmoid(model(x)), y, index)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    else:
        def step(x: torch.Tensor, y: torch.Tensor, index: torch.Tensor) -> None:
            loss = loss_fn(torch.sigmoid(model(x)), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return step


# ---------------------------------------------------------------------------------------------
# statistics and printing
# ---------------------------------------------------------------------------------------------
def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(np.asarray(values, dtype=np.float64), [25, 50, 75])
    return float(q1), float(q2), float(q3)


def paired_summary(x_times: Sequence[float], l_times: Sequence[float]) -> dict[str, float]:
    """Medians and IQRs of both series, ratio of the medians, IQR of the per-round ratios."""
    xq, lq = quartiles(x_times), quartiles(l_times)
    rq = quartiles([a / b for a, b in zip(x_times, l_times, strict=True)])
    return {"x_med": xq[1], "x_iqr": xq[2] - xq[0], "l_med": lq[1], "l_iqr": lq[2] - lq[0],
            "ratio": xq[1] / lq[1], "r_lo": rq[0], "r_hi": rq[2]}


def verdict(ratio: float) -> str:
    return "meets" if ratio <= TARGET else "misses"


def print_table(title: str, unit: str, rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    header = (f"{'case':<34}{'xrisk ' + unit:>14}{'IQR':>9}{'LibAUC ' + unit:>15}{'IQR':>9}"
              f"{'ratio':>8}{'(round IQR)':>16}  target <= {TARGET}")
    print(header)
    print("-" * len(header))
    for name, s in rows:
        print(f"{name:<34}{s['x_med']:>14.1f}{s['x_iqr']:>9.1f}{s['l_med']:>15.1f}"
              f"{s['l_iqr']:>9.1f}{s['ratio']:>8.2f}   [{s['r_lo']:.2f}, {s['r_hi']:.2f}]"
              f"  {verdict(s['ratio'])}")


def fmt_n(n: int) -> str:
    return f"{n:.0e}".replace("+0", "").replace("+", "")


# ---------------------------------------------------------------------------------------------
# 1. step benchmark
# ---------------------------------------------------------------------------------------------
def interleaved(runs: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call each timed run once per round, flipping the order every round (ABBA...)."""
    names = list(runs)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            out[name].append(runs[name]())
    return out


def step_runner(step: Step, batches: list, steps: int) -> Callable[[], float]:
    """A callable timing ``steps`` consecutive steps; returns µs per step."""
    position = [0]

    def run() -> float:
        start = time.perf_counter()
        for k in range(steps):
            step(*batches[(position[0] + k) % len(batches)])
        elapsed = time.perf_counter() - start
        position[0] += steps
        return elapsed / steps * 1e6

    return run


def bench_steps(args: argparse.Namespace, lib: LibAUC) -> list[tuple[str, dict[str, float]]]:
    rows = []
    for objective in args.objectives:
        for num_samples in args.sizes:
            batches = make_batches(num_samples, args)
            base = make_model(args.features, args.hidden, args.seed)
            runs = {}
            for impl in ("xrisk", "libauc"):
                model = copy.deepcopy(base)
                step = make_step(objective, model, *build(impl, objective, num_samples, model, lib))
                for k in range(args.warmup):
                    step(*batches[k % len(batches)])
                runs[impl] = step_runner(step, batches, args.steps)
            times = interleaved(runs, args.rounds)
            rows.append((f"{TITLES[objective]}, n={fmt_n(num_samples)}",
                         paired_summary(times["xrisk"], times["libauc"])))
    return rows


# ---------------------------------------------------------------------------------------------
# 2. epoch benchmark
# ---------------------------------------------------------------------------------------------
def load_data(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardised float32 features and int64 labels of a data set shipped with xrisk."""
    from xrisk import datasets

    if name == "digits":
        x, y = datasets.load_digits(positive_class=0, seed=seed)
    else:
        x, y = datasets.load_breast_cancer(seed=seed)
    x = (x - x.mean(axis=0)) / np.maximum(x.std(axis=0), 1e-6)
    return x.astype(np.float32), y.astype(np.int64)


def make_loaders(x: np.ndarray, y: np.ndarray, args: argparse.Namespace, lib: LibAUC
                 ) -> dict[str, DataLoader]:
    """Each library's own idiom (single process, no workers, default collate)."""
    size, rate = args.epoch_batch_size, args.sampling_rate
    xrisk_loader = DataLoader(xr.IndexedDataset(x, y), batch_size=None,
                              sampler=xr.DualSampler(y, size, sampling_rate=rate))
    dataset = lib.CustomDataset(x, y, return_index=True)
    sampler = lib.sampler.DualSampler(dataset, size, labels=y, sampling_rate=rate)
    libauc_loader = DataLoader(dataset, batch_size=size, sampler=sampler, shuffle=False)
    return {"xrisk": xrisk_loader, "libauc": libauc_loader}


def epoch_runner(loader: DataLoader, step: Step | None) -> Callable[[], float]:
    """A callable timing one epoch (training, or the data path alone); returns ms."""
    def run() -> float:
        start = time.perf_counter()
        for x, y, index in loader:
            if step is not None:
                step(x, y, index)
        return (time.perf_counter() - start) * 1e3

    return run


def bench_epochs(args: argparse.Namespace, lib: LibAUC
                 ) -> tuple[list[tuple[str, dict[str, float]]], str]:
    x, y = load_data(args.dataset, args.seed)
    loaders = make_loaders(x, y, args, lib)
    counts = {impl: len(loader) for impl, loader in loaders.items()}
    about = (f"{args.dataset}: {x.shape[0]} examples x {x.shape[1]} features, "
             f"{int(y.sum())} positives; batch {args.epoch_batch_size}, sampling rate "
             f"{args.sampling_rate}; batches per epoch: xrisk {counts['xrisk']}, "
             f"LibAUC {counts['libauc']}; MLP {x.shape[1]}-{args.hidden}-1")
    rows = []
    data_runs = {impl: epoch_runner(loader, None) for impl, loader in loaders.items()}
    for run in data_runs.values():
        run()
    times = interleaved(data_runs, args.epoch_rounds)
    rows.append(("data path only (no training)", paired_summary(times["xrisk"], times["libauc"])))
    for objective in args.objectives:
        base = make_model(x.shape[1], args.hidden, args.seed)
        runs = {}
        for impl, loader in loaders.items():
            model = copy.deepcopy(base)
            step = make_step(objective, model, *build(impl, objective, x.shape[0], model, lib))
            runs[impl] = epoch_runner(loader, step)
            runs[impl]()  # warm-up epoch
        times = interleaved(runs, args.epoch_rounds)
        rows.append((f"{TITLES[objective]} epoch",
                     paired_summary(times["xrisk"], times["libauc"])))
    return rows, about


# ---------------------------------------------------------------------------------------------
# 3. profile: phases, instrumented pieces, micro-benchmarks, data path
# ---------------------------------------------------------------------------------------------
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


def profile_steps(args: argparse.Namespace, lib: LibAUC) -> None:
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
    op_counts(args, lib)
    micro_benchmarks(args, batches, lib)
    profile_data_path(args, lib)


def micro_benchmarks(args: argparse.Namespace, batches: list, lib: LibAUC) -> None:
    """Isolated costs of the suspects and of cheaper alternatives (µs per call)."""
    import array_api_compat.torch as xp

    x, y, index = batches[0]
    size = args.batch_size
    num_pos = int(y.sum())
    scores = torch.rand(size)
    u = torch.zeros(args.sizes[-1], 2)
    small = torch.rand(32)
    entries: list[tuple[str, Callable[[], Any] | None, int]] = []

    def add(label: str, fn: Callable[[], Any] | None, number: int = 100) -> None:
        if fn is not None:
            try:
                fn()
            except Exception as error:  # noqa: BLE001  (a renamed helper must not stop the run)
                label, fn = f"{label}  [n/a: {type(error).__name__}: {error}]", None
        entries.append((label, fn, number))

    def section(title: str) -> None:
        entries.append((f"[{title}]", None, 0))

    section("per-op floor")
    add("one torch op on a (32,) tensor (a + b)", lambda: small + small)
    add("torch.tensor(python float)", lambda: torch.tensor(1e-3, dtype=torch.float32))
    add("float(0-d tensor) (a host read; a device sync on a GPU)", lambda: float(scores[0]))
    section("array_api_compat wrappers")
    add("xp.take(u, index) (index_select + lt/add/where)", lambda: xp.take(u, index, axis=0))
    add("torch.index_select(u, 0, index)", lambda: torch.index_select(u, 0, index))
    add("xp.astype(scores, float32) (same dtype: copies)", lambda: xp.astype(scores, torch.float32))
    add("xp.astype(..., copy=False) (same dtype: no-op)",
        lambda: xp.astype(scores, torch.float32, copy=False))
    section("validation")
    try:
        from xrisk.backends import backend_of
        add("backend_of(scores, labels, index, state.u)",
            lambda: backend_of(scores, y, index, u, names=("s", "y", "i", "u")))
    except ImportError:
        pass
    try:
        from xrisk.backends import get_backend
        backend = get_backend("torch")
        add("backend.to_numpy(labels) (x3 in check_batch)", lambda: backend.to_numpy(y))

        def numpy_checks() -> None:
            labels_np = backend.to_numpy(y)
            labels_np[(labels_np != 0) & (labels_np != 1)]
            scores_np = backend.to_numpy(scores)
            scores_np[~np.isfinite(scores_np)]
            index_np = backend.to_numpy(index)
            index_np[(index_np < 0) | (index_np >= u.shape[0])]

        add("value checks as check_batch does them (numpy)", numpy_checks)
    except ImportError:
        pass
    add("xp.isdtype(scores.dtype, 'real floating')",
        lambda: xp.isdtype(scores.dtype, "real floating"))
    add("torch.compiler.is_compiling()", torch.compiler.is_compiling)

    def fused_check() -> bool:
        bad = (((y != 0) & (y != 1)).any() | ~torch.isfinite(scores).all()
               | (index < 0).any() | (index >= u.shape[0]).any())
        return bool(bad)

    add("alternative: the checks as torch ops + one bool()", fused_check)
    section(f"duplicate-index handling at B={size}")
    try:
        from xrisk._grouping import group_keys, last_occurrence
        from xrisk.backends import get_backend

        torch_backend = get_backend("torch")
        add("last_occurrence(index) (sort + segment max, as write_rows calls it)",
            lambda: last_occurrence(index, backend=torch_backend, xp=xp))
        add("group_keys(index) (sort + binary search, ranked in the graph)",
            lambda: group_keys(index, backend=torch_backend, xp=xp, dtype=torch.float32))
    except (ImportError, TypeError):
        pass
    add("index[:, None] == index[None, :] (B x B)", lambda: index[:, None] == index[None, :])

    def duplicate_probe() -> bool:
        ordered = torch.sort(index).values
        return bool((ordered[1:] == ordered[:-1]).any())

    add("alternative: sort + 'any duplicate?' probe (then skip)", duplicate_probe)

    def last_by_scatter() -> torch.Tensor:
        _, inverse = torch.unique(index, return_inverse=True)
        last = torch.zeros(size, dtype=torch.int64)
        return last.scatter_reduce_(0, inverse, torch.arange(size), "amax")[inverse]

    add("alternative: unique + scatter_reduce(amax) (torch only)", last_by_scatter)
    section("pair matrix and pooling")
    column, row = scores[:, None], scores[None, :]
    add(f"squared hinge on B x B = {size}x{size} (xrisk computes all rows)",
        lambda: torch.clamp(1.0 - (column - row), min=0) ** 2)
    add(f"squared hinge on n+ x B = {num_pos}x{size} (LibAUC: positive rows)",
        lambda: torch.clamp(1.0 - (column[:num_pos] - row), min=0) ** 2)
    same = (index[:, None] == index[None, :]).to(torch.float32)
    estimate = torch.rand(size, 2)
    add("(B x B) @ (B x 2) duplicate pooling matmul", lambda: same @ estimate)
    add("the same pooling as (B x 2)^T @ (B x B), transposed back (same is symmetric)",
        lambda: (estimate.T @ same).T)
    for label, fn in ap_formulations(size, num_pos):
        add(label, fn)
    section("optimizer update")
    optimizer_micro(args, add, lib)
    section("LibAUC's own hot spot")
    mask = y == 1
    mask_2d = mask[:, None].float()
    add(f"APLoss: builtin sum(pos_mask) over {size} elements", lambda: sum(mask), number=10)
    add(f"AUCMLoss: builtin sum(pos_mask) over ({size}, 1)", lambda: sum(mask_2d), number=10)
    labels = [label for label, _, _ in entries]
    if len(set(labels)) != len(labels):
        raise RuntimeError(f"duplicate micro-benchmark labels in {labels}")
    timed = {label: (fn, number) for label, fn, number in entries if fn is not None}
    best = micro_interleaved(timed, rounds=args.micro_rounds)
    width = max(len(label) for label, _, _ in entries)
    print(f"\n-- micro-benchmarks (µs per call: best of {args.micro_rounds} interleaved runs)")
    for label, _, _ in entries:
        if label.startswith("["):
            print(f"  {label}")
        else:
            print(f"    {label:<{width}}  " + (f"{best[label]:>8.1f}" if label in best else ""))


def micro_interleaved(fns: dict[str, tuple[Callable[[], Any], int]], rounds: int = 9
                      ) -> dict[str, float]:
    """µs per call of each ``name -> (function, calls per run)``: the best of ``rounds`` runs,
    all functions interleaved in every round (order flipped each round), so that close
    alternatives are compared under the same load on a shared machine."""
    runs: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            fn, number = fns[name]
            start = time.perf_counter()
            for _ in range(number):
                fn()
            runs[name].append((time.perf_counter() - start) / number * 1e6)
    return {name: min(values) for name, values in runs.items()}


def ap_formulations(size: int, num_pos: int
                    ) -> list[tuple[str, Callable[[], Any] | None]]:
    """AP's weighted pair sum, forward + backward with autograd, in algebraically equal forms
    (benchmark-local code, float32). With w_ij = sg[(u_pos_i - u_all_i y_j) / u_all_i^2] pos_i:

    - matrix (xrisk's form): build the (B, B) weights, sum(w * pair_loss);
    - rows: sum_i a_i R_i - b_i P_i with a = sg[u_pos / u_all^2 pos], b = sg[pos / u_all],
      R = pair_loss.sum(1), P = pair_loss @ y (the row sums the estimators need anyway);
    - stacked: the same as one (2, B) @ (B, B) product; and with max(gap, 0)^2 as surrogate.
    """
    rng = torch.Generator().manual_seed(0)
    scores = torch.rand(size, generator=rng)
    y = torch.zeros(size)
    y[:num_pos] = 1
    u_all = torch.rand(size, generator=rng) + 0.5
    u_pos = torch.rand(size, generator=rng) * u_all
    safe = torch.where(y > 0, u_all, torch.ones_like(u_all))
    scale = num_pos * size

    def where_hinge(s: torch.Tensor) -> torch.Tensor:  # as xrisk.surrogates writes it
        gap = 1.0 - (s[:, None] - s[None, :])
        return torch.where(gap > 0, gap * gap, torch.zeros_like(gap))

    def clamp_hinge(s: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1.0 - (s[:, None] - s[None, :]), min=0) ** 2

    def matrix() -> torch.Tensor:
        s = scores.clone().requires_grad_(True)
        weights = (u_pos[:, None] - u_all[:, None] * y[None, :]) / (safe * safe)[:, None]
        torch.sum((weights * y[:, None]).detach() * where_hinge(s)).div(scale).backward()
        return s.grad  # type: ignore[return-value]

    def rows() -> torch.Tensor:
        s = scores.clone().requires_grad_(True)
        losses = where_hinge(s)
        a, b = u_pos / (safe * safe) * y, y / safe
        torch.sum(a * losses.sum(1) - b * (losses @ y)).div(scale).backward()
        return s.grad  # type: ignore[return-value]

    def stacked(hinge: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            s = scores.clone().requires_grad_(True)
            m = torch.stack([u_pos / (safe * safe) * y, y / safe]) @ hinge(s)  # (2, B)
            ((m[0].sum() - m[1] @ y) / scale).backward()
            return s.grad  # type: ignore[return-value]
        return run

    fns = {"matrix": matrix, "rows": rows, "stacked": stacked(where_hinge),
           "stacked_clamp": stacked(clamp_hinge)}
    reference = matrix()
    agree = all(torch.allclose(reference, fn(), rtol=1e-4, atol=1e-7) for fn in fns.values())
    return [
        ("AP pair sum fwd+bwd: (B x B) weight matrix (xrisk's form)", fns["matrix"]),
        ("  row sums R = L.sum(1), P = L @ y, no weight matrix", fns["rows"]),
        ("  one (2 x B) @ (B x B) product", fns["stacked"]),
        ("  the same with clamp(gap, 0)^2 as surrogate", fns["stacked_clamp"]),
        (f"  (every form gives the matrix form's gradient within 1e-4: {agree})", None),
    ]


class FlatMLP(torch.nn.Module):
    """The benchmark MLP with all weights in ONE parameter vector (views per layer), to time
    an optimizer on one tensor instead of four through the public API."""

    def __init__(self, reference: torch.nn.Module) -> None:
        super().__init__()
        tensors = [p.detach() for p in reference.parameters()]
        self.shapes = [t.shape for t in tensors]
        self.flat = torch.nn.Parameter(torch.cat([t.reshape(-1) for t in tensors]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2 = (v.view(shape) for v, shape in zip(
            self.flat.split([s.numel() for s in self.shapes]), self.shapes, strict=True))
        return torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1, b1)),
                                          w2, b2)


def optimizer_micro(args: argparse.Namespace, add: Callable[..., None], lib: LibAUC) -> None:
    """One optimizer step (gradients fixed) through the public constructors: the MLP's four
    tensors vs the same weights as one flat parameter; LibAUC and torch's Adam for scale."""
    base = make_model(args.features, args.hidden, args.seed)

    def stepper(impl: str, objective: str, flat: bool) -> Callable[[], Any]:
        model = FlatMLP(base) if flat else copy.deepcopy(base)
        loss_fn, optimizer = build(impl, objective, 1000, model, lib)
        for p in model.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        if objective == "aucm":
            for name in ("a", "b", "alpha"):
                getattr(loss_fn, name).grad = torch.full_like(getattr(loss_fn, name), 1e-3)
        return optimizer.step

    for objective, name in (("ap", "SOAP"), ("aucm", "PESG")):
        for impl, flat, label in (("xrisk", False, f"xrisk {name}.step, MLP as 4 tensors"),
                                  ("xrisk", True, f"  xrisk {name}, the same weights as 1 "
                                                  "flat tensor"),
                                  ("libauc", False, f"LibAUC {name}.step, 4 tensors"),
                                  ("libauc", True, f"  LibAUC {name}, 1 flat tensor")):
            try:
                add(label, stepper(impl, objective, flat))
            except Exception as error:  # noqa: BLE001  (constructor APIs may change)
                add(f"{label} [n/a: {type(error).__name__}: {error}]", None)
    for foreach in (False, True):
        reference = copy.deepcopy(base)
        for p in reference.parameters():
            p.grad = torch.randn_like(p)
        adam = torch.optim.Adam(reference.parameters(), lr=1e-3, foreach=foreach)
        add(f"torch.optim.Adam(foreach={foreach}).step, 4 tensors (reference)", adam.step)


class _PlainItems(torch.utils.data.Dataset):
    """Lower bound of the per-item idiom: ``(x[i], y[i], i)`` with no checks."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray, int]:
        return self.x[i], self.y[i], i


class _ArrayKey(_PlainItems):
    """Whole-batch lookup: ``DataLoader(ds, sampler=batch_sampler, batch_size=None)`` passes
    each index list as one key; one fancy index per batch and no per-item collate."""

    def __getitem__(self, key: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # type: ignore[override]
        index = np.asarray(key, dtype=np.int64)
        return self.x[index], self.y[index], index


def _fetch(dataset: Any, keys: list[int]) -> Any:
    """What the DataLoader does for one batch: read every item, then collate."""
    from torch.utils.data import default_collate

    return default_collate([dataset[k] for k in keys])


def profile_data_path(args: argparse.Namespace, lib: LibAUC) -> None:
    """Per-item, per-batch and per-epoch costs of the two data idioms (and two lower bounds)."""
    from torch.utils.data import default_collate

    from xrisk.samplers import DualSampler as CoreDualSampler  # yields numpy index batches

    x, y = load_data(args.dataset, args.seed)
    loaders = make_loaders(x, y, args, lib)
    size = args.epoch_batch_size
    keys = list(range(size))
    sampler = CoreDualSampler(y, size, sampling_rate=args.sampling_rate)
    plain = DataLoader(_PlainItems(x, y), batch_sampler=sampler)
    whole = DataLoader(_ArrayKey(x, y), sampler=sampler, batch_size=None)
    def count(iterable: Any) -> Callable[[], int]:
        return lambda: sum(1 for _ in iterable)

    fns: dict[str, tuple[Callable[[], Any], int]] = {}
    for impl, loader in loaders.items():
        dataset: Any = loader.dataset
        items = [dataset[k] for k in keys]
        fns[f"item {impl}"] = (functools.partial(dataset.__getitem__, 7), 1000)
        fns[f"collate {impl}"] = (functools.partial(default_collate, items), 50)
        fns[f"batch {impl}"] = (functools.partial(_fetch, dataset, keys), 50)
        fns[f"sampler {impl}"] = (count(loader.batch_sampler or loader.sampler), 10)
        fns[f"epoch {impl}"] = (count(loader), 2)
    fns["epoch plain"] = (count(plain), 2)
    fns["epoch whole"] = (count(whole), 2)
    best = micro_interleaved(fns, rounds=args.micro_rounds)
    print(f"\n-- data path ({args.dataset}, batch {size}), µs (best of {args.micro_rounds} "
          "interleaved runs)")
    print(f"{'piece':<52}{'xrisk':>10}{'LibAUC':>10}")
    for key, label in (("item", "dataset[i] (one item)"),
                       ("collate", f"default_collate of {size} items"),
                       ("batch", f"{size} items + collate (one batch)"),
                       ("sampler", "sampler: one epoch of index batches"),
                       ("epoch", "loader: one epoch, data only")):
        print(f"{label:<52}{best[f'{key} xrisk']:>10.1f}{best[f'{key} libauc']:>10.1f}")
    print("lower bounds (xrisk.samplers.DualSampler + benchmark-local datasets), one epoch:")
    print(f"{'  plain (x[i], y[i], i) items + default collate':<52}{best['epoch plain']:>10.1f}")
    print(f"{'  one array key per batch, DataLoader(batch_size=None)':<52}"
          f"{best['epoch whole']:>10.1f}")


def op_counts(args: argparse.Namespace, lib: LibAUC) -> None:
    """Torch ops dispatched per phase of one step (deterministic, unlike the timings), and
    the xrisk source lines that dispatch them. Uses torch's private TorchDispatchMode."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError:
        print("\n-- op counts: n/a (torch.utils._python_dispatch.TorchDispatchMode missing)")
        return
    roots, compat = _source_roots()

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0
            self.lines: dict[str, int] = defaultdict(int)

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            self.total += 1
            frame: Any = sys._getframe(1)
            via = ""
            while frame is not None:
                name = frame.f_code.co_filename
                if compat and name.startswith(compat):
                    via = " (via array_api_compat)"
                else:
                    hit = next(((lab, root) for lab, root in roots if name.startswith(root)),
                               None)
                    if hit is not None:
                        where = f"{hit[0]}{name[len(hit[1]):]}:{frame.f_lineno}"
                        self.lines[f"{where} {func.overloadpacket.__name__}{via}"] += 1
                        break
                frame = frame.f_back
            return func(*args, **(kwargs or {}))

    num_samples = args.sizes[-1]
    batches = make_batches(num_samples, args)
    print(f"\n-- torch ops dispatched per step (n={fmt_n(num_samples)}; LibAUC's count "
          "includes its builtin sum() loop: ~B adds)")
    for objective in args.objectives:
        base = make_model(args.features, args.hidden, args.seed)
        found: dict[str, dict[str, Any]] = {}
        for impl in ("xrisk", "libauc"):
            model = copy.deepcopy(base)
            loss_fn, optimizer = build(impl, objective, num_samples, model, lib)
            step = make_step(objective, model, loss_fn, optimizer)
            for k in range(3):
                step(*batches[k])
            x, y, index = batches[3]
            counts = {}
            with Count() as mode:
                scores = torch.sigmoid(model(x))
            counts["model"] = mode
            with Count() as mode:
                loss = loss_fn(scores, y, index) if objective == "ap" else loss_fn(scores, y)
            counts["loss"] = mode
            with Count() as mode:
                optimizer.zero_grad()
                loss.backward()
            counts["backward"] = mode
            with Count() as mode:
                optimizer.step()
            counts["optimizer"] = mode
            found[impl] = counts
        print(f"  {TITLES[objective]}: " + "; ".join(
            f"{phase} {found['xrisk'][phase].total} vs {found['libauc'][phase].total}"
            for phase in found["xrisk"]) + " (xrisk vs LibAUC)")
        for phase in ("loss", "optimizer"):
            lines = sorted(found["xrisk"][phase].lines.items(), key=lambda kv: -kv[1])
            shown = ", ".join(f"{where} x{n}" for where, n in lines[: args.top // 2])
            print(f"    xrisk {phase} lines (top): {shown}")


def _source_roots() -> tuple[list[tuple[str, str]], str]:
    """(label, directory) of xrisk's packages, most specific first, and array_api_compat's
    directory (its frames are skipped so that ops go to the xrisk line that called it)."""
    import xrisk
    import xrisk.backends

    roots = [("torch-adapter/", str(Path(xr.__file__).parent) + os.sep),
             ("backends/", str(Path(xrisk.backends.__file__).parent) + os.sep),
             ("core/", str(Path(xrisk.__file__).parent) + os.sep)]
    try:
        import array_api_compat

        compat = str(Path(array_api_compat.__file__).parent) + os.sep
    except ImportError:
        compat = ""
    return roots, compat


# ---------------------------------------------------------------------------------------------
# 4. cProfile, grouped by layer
# ---------------------------------------------------------------------------------------------
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
            roots, compat = _source_roots()
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


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--parts", default="step,epoch",
                        help=f"comma-separated subset of {','.join(PARTS)} (or 'all')")
    parser.add_argument("--objectives", default="ap,aucm", help="subset of ap,aucm")
    parser.add_argument("--sizes", default="1e3,1e6", help="num_samples of the step benchmark")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--positive-share", type=float, default=0.2)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--num-batches", type=int, default=32, help="distinct step batches")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved step rounds")
    parser.add_argument("--steps", type=int, default=50, help="steps per round")
    parser.add_argument("--warmup", type=int, default=40, help="warm-up steps")
    parser.add_argument("--dataset", choices=("digits", "breast_cancer"), default="digits")
    parser.add_argument("--epoch-batch-size", type=int, default=64)
    parser.add_argument("--sampling-rate", type=float, default=0.2)
    parser.add_argument("--epoch-rounds", type=int, default=21, help="interleaved epochs")
    parser.add_argument("--micro-rounds", type=int, default=9, help="profile: micro runs")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--top", type=int, default=25, help="cprofile: functions shown")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true",
                        help=f"exit 1 if a step or epoch ratio exceeds {TARGET}")
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
    if not 0 < args.positive_share < 1 or not 0 < args.sampling_rate < 1:
        parser.error("--positive-share and --sampling-rate: expected numbers in (0, 1)")
    for name in ("rounds", "steps", "epoch_rounds", "num_batches", "threads", "micro_rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: got {getattr(args, name)}; expected >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    lib = load_libauc()
    if lib is None:
        print(MISSING_MESSAGE)
        return 0
    torch.set_num_threads(args.threads)
    import xrisk

    stub = f"; torchvision stubbed for the import ({', '.join(lib.stubbed)})" if lib.stubbed \
        else ""
    print(f"xrisk {xrisk.__version__} vs LibAUC {lib.version}, torch {torch.__version__}, "
          f"CPU, {torch.get_num_threads()} thread(s), float32{stub}")
    start = time.perf_counter()
    ratios = []
    if "step" in args.parts:
        rows = bench_steps(args, lib)
        print_table(
            f"Step: MLP {args.features}-{args.hidden}-1 forward + sigmoid + loss + zero_grad + "
            f"backward + optimizer step; batch {args.batch_size} with "
            f"{args.positive_share:.0%} positives; {args.rounds} interleaved rounds x "
            f"{args.steps} steps after {args.warmup} warm-up steps", "µs", rows)
        ratios += [s["ratio"] for _, s in rows]
    if "epoch" in args.parts:
        rows, about = bench_epochs(args, lib)
        print_table(f"Epoch: {about}; {args.epoch_rounds} interleaved epochs after one "
                    "warm-up epoch", "ms", rows)
        ratios += [s["ratio"] for name, s in rows if name.endswith("epoch")]
    if "profile" in args.parts:
        profile_steps(args, lib)
    if "cprofile" in args.parts:
        cprofile_steps(args, lib)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")
    if ratios:
        missed = sum(r > TARGET for r in ratios)
        print(f"target xrisk <= {TARGET} x LibAUC: {len(ratios) - missed} of {len(ratios)} "
              "ratios meet it")
        if args.strict and missed:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
