"""Question: is one epoch of real training, through each library's own data idiom, at most
0.8x LibAUC 2.0.1's? And what does the data path alone cost?

One epoch of a small MLP on a data set shipped with xrisk (digits, one class against the
rest, or breast cancer), CPU, float32, one thread, through each library's own idiom: xrisk
``DataLoader(IndexedDataset(x, y), sampler=DualSampler(y, B, sampling_rate=r),
batch_size=None)`` (one gather per batch) and LibAUC ``DataLoader(CustomDataset(x, y,
return_index=True), batch_size=B, sampler=DualSampler(ds, B, labels=y, sampling_rate=r))``.
Both give ``max(n+ // num_pos, n- // num_neg)`` batches. Timed in interleaved epochs after
one warm-up epoch: the data path alone (iterating the loader), then APLoss + SOAP and
AUCMLoss + PESG epochs. ``--data-path`` adds the data path's pieces: one item, a collate,
one batch, the sampler's epoch, and two lower bounds.

::

    .venv/bin/python benchmarks/bench_epoch_vs_libauc.py               # < 1 min
    .venv/bin/python benchmarks/bench_epoch_vs_libauc.py --data-path --dataset breast_cancer

The exit status is 1 when an epoch ratio misses 0.8 (unless ``--report-only``); without
LibAUC the script says so and exits 0. Per-step comparisons of every family:
bench_vs_libauc.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import copy  # noqa: E402
import functools  # noqa: E402
import inspect  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _libauc_shim import MISSING_MESSAGE, LibAUC, load_libauc  # noqa: E402
from _timing import interleaved, machine_load, micro_interleaved, paired_summary  # noqa: E402

import xrisk.torch as xr  # noqa: E402

TARGET = 0.8  # xrisk epoch <= TARGET x LibAUC epoch
OBJECTIVES = ("ap", "aucm")
TITLES = {"ap": "APLoss + SOAP", "aucm": "AUCMLoss + PESG"}

Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None]


def make_model(features: int, hidden: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
    )



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

def print_table(title: str, rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    header = (f"{'case':<34}{'xrisk ms':>10}{'IQR':>8}{'LibAUC ms':>11}{'IQR':>8}"
              f"{'ratio':>8}{'(round IQR)':>16}  target <= {TARGET}")
    print(header)
    print("-" * len(header))
    for name, s in rows:
        verdict = "meets" if s["ratio"] <= TARGET else "misses"
        print(f"{name:<34}{s['a_med']:>10.1f}{s['a_iqr']:>8.1f}{s['b_med']:>11.1f}"
              f"{s['b_iqr']:>8.1f}{s['ratio']:>8.2f}   [{s['r_lo']:.2f}, {s['r_hi']:.2f}]"
              f"  {verdict}")


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



def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--objectives", default="ap,aucm", help="subset of ap,aucm")
    parser.add_argument("--dataset", choices=("digits", "breast_cancer"), default="digits")
    parser.add_argument("--epoch-batch-size", type=int, default=64)
    parser.add_argument("--sampling-rate", type=float, default=0.2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--epoch-rounds", type=int, default=21, help="interleaved epochs")
    parser.add_argument("--data-path", action="store_true", help="the data path's pieces too")
    parser.add_argument("--micro-rounds", type=int, default=9, help="data path: runs")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-only", action="store_true",
                        help="exit 0 even when a ratio misses the target")
    args = parser.parse_args(argv)
    args.objectives = [o.strip() for o in args.objectives.split(",") if o.strip()]
    if not args.objectives or set(args.objectives) - set(OBJECTIVES):
        parser.error(f"--objectives: got {args.objectives}; expected names from {OBJECTIVES}")
    if not 0 < args.sampling_rate < 1:
        parser.error(f"--sampling-rate: got {args.sampling_rate}; expected a number in (0, 1)")
    for name in ("epoch_rounds", "threads", "micro_rounds"):
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

    print(f"xrisk {xrisk.__version__} vs LibAUC {lib.version}, torch {torch.__version__}, "
          f"CPU, {torch.get_num_threads()} thread(s), float32; {machine_load()}")
    start = time.perf_counter()
    rows, about = bench_epochs(args, lib)
    print_table(f"Epoch: {about}; {args.epoch_rounds} interleaved epochs after one "
                "warm-up epoch", rows)
    if args.data_path:
        profile_data_path(args, lib)
    ratios = [s["ratio"] for name, s in rows if name.endswith("epoch")]
    missed = sum(r > TARGET for r in ratios)
    print(f"\n(total {time.perf_counter() - start:.0f} s; {machine_load()})")
    print(f"target xrisk <= {TARGET} x LibAUC: {len(ratios) - missed} of {len(ratios)} epochs")
    return 1 if missed and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
