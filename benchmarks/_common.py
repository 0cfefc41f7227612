"""What the step benchmarks share: framework imports, alternating timings, a copy's cost."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["import_frameworks", "alternating_times", "paired_ratio", "copy_seconds"]


def import_frameworks(names: Sequence[str]) -> None:
    """torch before TensorFlow (the reverse order can crash), quiet TF logs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    for name in ("torch", "tensorflow", "jax"):
        if name in names:
            __import__(name)


def alternating_times(runs: Sequence[tuple[Callable[[list], None], list]],
                      repeats: int) -> list[list[float]]:
    """Seconds per step of every ``(run, batches)`` pair in each of ``repeats`` rounds.

    The runs are timed in alternation (round 1 of every run, then round 2, ...), so that a
    drifting machine load hits them alike; ``run(batches)`` takes one step per batch and
    synchronises.
    """
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for per_run, (run, batches) in zip(times, runs, strict=True):
            start = time.perf_counter()
            run(batches)
            per_run.append((time.perf_counter() - start) / len(batches))
    return times


def paired_ratio(first: Sequence[float], last: Sequence[float]) -> float:
    """Median over rounds of ``last / first``: robust to load that changes between rounds."""
    return statistics.median(b / a for a, b in zip(first, last, strict=True))


def copy_seconds(shapes: Sequence[tuple[int, ...]], repeats: int) -> float:
    """Median time of one numpy copy of float32 arrays of ``shapes``: the least an
    O(table size) step would cost on this machine, to put the measured ratios in scale."""
    arrays = [np.ones(shape, np.float32) for shape in shapes]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for array in arrays:
            array.copy()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
