"""Time and peak memory of the samplers at scale (a benchmark script, not a test).

Run: ``python benchmarks/bench_samplers.py`` (about a minute on two CPU cores).

1. ``DualSampler``: 10 million labels at 1 % positives, batch 128, sampling rate 0.2:
   set-up plus one full epoch. Target < 1 s. LibAUC 2.0.1's DualSampler is timed on the same
   labels in the same run when it is importable (``pip install libauc==2.0.1 --no-deps``), and
   the ratio printed; without it no ratio is printed.
2. ``TriSampler`` ranking mode at MovieLens-20M scale: 138,493 queries, 26,744 items, 20 million
   relevant interactions (synthetic, uniform), 256 queries x (5 positives + 300 negatives) per
   batch: set-up plus one epoch. Target < 60 s and < 2 GB peak memory (LibAUC needs a dense
   items x users matrix of 14.8 GB).

Times come from uninstrumented runs (the first DualSampler run in a fresh process and the best
of a few); peak memory is measured in a separate run as the peak of numpy's traced allocations
(``tracemalloc``) during set-up plus the epoch, input arrays excluded. The process's maximum
resident size (inputs included) is printed as well.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from _libauc_shim import MISSING_MESSAGE, LibAUC, load_libauc

from xrisk.samplers import DualSampler, TriSampler


def _timed(build: Callable[[], Any]) -> tuple[float, float, int]:
    """Seconds for set-up and for set-up plus one full pass, and the number of batches."""
    start = time.perf_counter()
    sampler = build()
    setup = time.perf_counter() - start
    count = sum(1 for _ in sampler)
    return setup, time.perf_counter() - start, count


def _peak_bytes(build: Callable[[], Any]) -> int:
    """Peak of numpy's traced allocations during set-up plus one pass (a separate run)."""
    tracemalloc.start()
    sum(1 for _ in build())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def bench_dual(num_labels: int, repeats: int, lib: LibAUC | None) -> None:
    rng = np.random.default_rng(0)
    labels = (rng.random(num_labels) < 0.01).astype(np.int64)

    def build() -> DualSampler:
        return DualSampler(labels, 128, sampling_rate=0.2, seed=1)

    runs = [_timed(build) for _ in range(repeats)]
    setup, first, batches = runs[0]
    best = min(total for _, total, _ in runs)
    peak = _peak_bytes(build)
    print(
        f"DualSampler: {num_labels:,} labels, {int(labels.sum()):,} positives, batch 128, "
        f"rate 0.2, {batches:,} batches per epoch\n"
        f"  set-up {setup:.3f} s; set-up + epoch: first run {first:.3f} s, best of {repeats} "
        f"{best:.3f} s (target < 1 s: {first:.2f}x / {best:.2f}x of it)\n"
        f"  peak traced memory {peak / 2**20:.0f} MiB (labels themselves: "
        f"{labels.nbytes / 2**20:.0f} MiB)"
    )
    if lib is None:
        print(f"  LibAUC: {MISSING_MESSAGE}")
        return

    def libauc_epoch() -> float:
        """LibAUC's set-up plus one epoch: its __iter__ fills the epoch's whole index array
        (a DataLoader then batches it index by index, not counted here: LibAUC's best case)."""
        start = time.perf_counter()
        sampler = lib.sampler.DualSampler(None, 128, labels=labels, sampling_rate=0.2)
        iter(sampler)
        return time.perf_counter() - start

    libauc_times = [libauc_epoch() for _ in range(repeats)]
    print(
        f"  LibAUC {lib.version} DualSampler, same labels, same run: first {libauc_times[0]:.3f} "
        f"s, best of {repeats} {min(libauc_times):.3f} s (xrisk {libauc_times[0] / first:.1f}x "
        f"/ {min(libauc_times) / best:.1f}x faster)"
    )


def bench_tri(num_queries: int, num_items: int, num_interactions: int) -> None:
    rng = np.random.default_rng(0)
    draws = rng.integers(0, num_queries * num_items, int(num_interactions * 1.01))
    keys = np.unique(draws)  # sorted; the sampler does not rely on it
    keys = np.delete(keys, rng.choice(keys.size, keys.size - num_interactions, replace=False))
    pairs = np.empty((keys.size, 2), dtype=np.int64)
    np.divmod(keys, num_items, out=(pairs[:, 0], pairs[:, 1]))
    del draws, keys

    def build() -> TriSampler:
        return TriSampler(
            pairs,
            305,
            num_sampled_tasks=256,
            num_pos=5,
            mode="ranking",
            num_items=num_items,
            seed=1,
        )

    setup, total, batches = _timed(build)
    peak = _peak_bytes(build)
    print(
        f"TriSampler ranking: {num_queries:,} queries x {num_items:,} items, "
        f"{pairs.shape[0]:,} relevant interactions, 256 queries x (5 + 300) per batch, "
        f"{batches:,} batches per epoch\n"
        f"  set-up {setup:.1f} s; set-up + epoch {total:.1f} s (target < 60 s: "
        f"{total / 60:.2f}x of it)\n"
        f"  peak traced memory {peak / 2**30:.2f} GiB (target < 2 GiB: {peak / 2**31:.2f}x of "
        f"it; LibAUC's dense items x users matrix: 14.8 GB; input pairs: "
        f"{pairs.nbytes / 2**30:.2f} GiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the problems (smoke)")
    parser.add_argument("--repeats", type=int, default=3, help="timed DualSampler runs")
    args = parser.parse_args()
    bench_dual(int(10_000_000 * args.scale), args.repeats, load_libauc())
    bench_tri(
        max(512, int(138_493 * args.scale)), 26_744, max(10_000, int(20_000_000 * args.scale))
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"process maximum resident size (inputs included): {rss:.2f} GiB")


if __name__ == "__main__":
    main()
