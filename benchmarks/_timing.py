"""Interleaved timing and its summaries, shared by the LibAUC comparisons and the profilers."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["interleaved", "step_runner", "quartiles", "paired_summary", "machine_load",
           "micro_interleaved"]


def interleaved(runs: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call each timed run once per round, the order reversed every other round (ABBA...), so
    a drifting machine load and a warm cache hit every run alike."""
    names = list(runs)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            out[name].append(runs[name]())
    return out


def step_runner(step: Callable[[Any], None], batches: Sequence[Any], steps: int,
                sync: Callable[[], None] = lambda: None) -> Callable[[], float]:
    """A callable timing ``steps`` consecutive steps over the batches in turn; returns µs per
    step. ``sync`` waits for the device (a GPU's queue) before each clock read."""
    position = [0]

    def run() -> float:
        sync()
        start = time.perf_counter()
        for k in range(steps):
            step(batches[(position[0] + k) % len(batches)])
        sync()
        elapsed = time.perf_counter() - start
        position[0] += steps
        return elapsed / steps * 1e6

    return run


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, q2, q3 = np.percentile(np.asarray(values, dtype=np.float64), [25, 50, 75])
    return float(q1), float(q2), float(q3)


def paired_summary(a_times: Sequence[float], b_times: Sequence[float]) -> dict[str, float]:
    """Medians and IQRs of both series, the ratio a / b of the medians, and the quartiles of
    the per-round ratios (each round measured both under the same load)."""
    aq, bq = quartiles(a_times), quartiles(b_times)
    rq = quartiles([a / b for a, b in zip(a_times, b_times, strict=True)])
    return {"a_med": aq[1], "a_iqr": aq[2] - aq[0], "b_med": bq[1], "b_iqr": bq[2] - bq[0],
            "ratio": aq[1] / bq[1], "r_lo": rq[0], "r_med": rq[1], "r_hi": rq[2]}


def machine_load() -> str:
    """The load averages (1, 5, 15 min) and core count, as ``uptime`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


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
