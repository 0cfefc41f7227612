"""benchmarks/bench_samplers.py prints ratios only against times it measured in the same run.

It used to print "LibAUC 2.0.1 ~2.7 s: N x faster" from a constant measured once elsewhere.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # the script imports its sibling _libauc_shim
    try:
        spec = importlib.util.spec_from_file_location("bench_samplers",
                                                      BENCHMARKS / "bench_samplers.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_without_libauc_no_ratio_against_it_is_printed(bench, capsys):
    bench.bench_dual(20_000, 1, None)
    out = capsys.readouterr().out
    assert "DualSampler: 20,000 labels" in out
    assert "faster" not in out and "2.7" not in out, out
    assert "LibAUC is not importable" in out


def test_with_libauc_its_time_is_measured_in_the_same_run(bench, capsys):
    lib = bench.load_libauc()
    if lib is None:
        pytest.skip("LibAUC is not installed (benchmark-only)")
    bench.bench_dual(20_000, 1, lib)
    out = capsys.readouterr().out
    assert "same labels, same run" in out and "faster" in out, out
