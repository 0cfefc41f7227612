"""Time and peak memory of the samplers at scale (a benchmark script, not a test).

Run: ``python benchmarks/bench_samplers.py`` (about a minute on two CPU cores).

1. ``DualSampler``: 10 million labels at 1 % positives, batch 128, sampling rate 0.2:
   set-up plus one full epoch. Target < 1 s (LibAUC 2.0.1: about 2.7 s on the reference machine).
2. ``TriSampler`` ranking mode at MovieLens-20M scale: 138,493 queries, 26,744 items, 20 million
   relevant interactions (synthetic, uniform), 256 queries x (5 positives + 300 negatives) per
   batch: set-up plus one epoch. Target < 60 s and < 2 GB peak memory (LibAUC needs a dense
   items x users matrix of 14.8 GB).

Peak memory is the peak of numpy's traced allocations (``tracemalloc``) during set-up plus
the epoch, input arrays excluded; the process's maximum resident size is printed as well.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np
from xrisk.samplers import DualSampler, TriSampler


def _measure(build, consume):  # type: ignore[no-untyped-def]
    tracemalloc.start()
    start = time.perf_counter()
    sampler = build()
    setup = time.perf_counter() - start
    batches = consume(sampler)
    total = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return setup, total, peak, batches


def _iterate(sampler) -> int:  # type: ignore[no-untyped-def]
    count = 0
    for _ in sampler:
        count += 1
    return count


def bench_dual(num_labels: int) -> None:
    rng = np.random.default_rng(0)
    labels = (rng.random(num_labels) < 0.01).astype(np.int64)
    setup, total, peak, batches = _measure(
        lambda: DualSampler(labels, 128, sampling_rate=0.2, seed=1), _iterate
    )
    print(
        f"DualSampler  {num_labels:,} labels, {labels.sum():,} positives, batch 128, rate 0.2: "
        f"{batches:,} batches; set-up {setup:.3f} s, set-up + epoch {total:.3f} s "
        f"(target < 1 s: {total / 1.0:.2f}x of it; LibAUC 2.0.1 ~2.7 s: {2.7 / total:.1f}x "
        f"faster); peak traced memory {peak / 2**20:.0f} MiB"
    )


def bench_tri(num_queries: int, num_items: int, num_interactions: int) -> None:
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, num_queries * num_items, int(num_interactions * 1.01)))
    keys = rng.permutation(keys)[:num_interactions]
    pairs = np.empty((keys.size, 2), dtype=np.int64)
    np.divmod(keys, num_items, out=(pairs[:, 0], pairs[:, 1]))
    del keys
    setup, total, peak, batches = _measure(
        lambda: TriSampler(
            pairs,
            305,
            num_sampled_tasks=256,
            num_pos=5,
            mode="ranking",
            num_items=num_items,
            seed=1,
        ),
        _iterate,
    )
    print(
        f"TriSampler ranking  {num_queries:,} queries x {num_items:,} items, "
        f"{pairs.shape[0]:,} interactions, 256 queries x (5 + 300) per batch: {batches:,} "
        f"batches; set-up {setup:.1f} s, set-up + epoch {total:.1f} s (target < 60 s: "
        f"{total / 60:.2f}x of it); peak traced memory {peak / 2**30:.2f} GiB (target < 2 GiB; "
        f"LibAUC dense matrix 14.8 GB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the problems (smoke)")
    args = parser.parse_args()
    bench_dual(int(10_000_000 * args.scale))
    bench_tri(
        max(512, int(138_493 * args.scale)), 26_744, max(10_000, int(20_000_000 * args.scale))
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"process maximum resident size (inputs included): {rss:.2f} GiB")


if __name__ == "__main__":
    main()
