"""The binary-classification examples: ``examples/imbalanced_classification.py`` (the README's
first) and ``examples/partial_auc.py``, which build runner recipes, and
``examples/training_loop.py``, the loop written out in each framework. They run in a tiny
configuration, print their table and the paper's comparison as measured, write the runner's
report, and reject bad options; no accuracy threshold is asserted. (That the runner gives
the same numbers in every framework is tests/test_runner_*.py's business.)"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FRAMEWORKS = [fw for fw in ("torch", "tensorflow", "jax") if importlib.util.find_spec(fw)]
HAS_RUNNER = all(importlib.util.find_spec(name) for name in ("pydantic", "yaml", "matplotlib"))

pytestmark = pytest.mark.skipif(not FRAMEWORKS, reason="no deep-learning framework installed")
needs_runner = pytest.mark.skipif(not HAS_RUNNER, reason='needs "xrisk[runner]"')


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.fixture(scope="module", params=["imbalanced_classification", "partial_auc"])
def example(request):
    return _load(request.param)


def _table_rows(printed, methods, metrics):
    """The printed ``method  mean ± std ...`` rows, parsed, for the given methods."""
    rows = {}
    for method in methods:
        match = re.search(rf"^{re.escape(method)}\s+((?:\s*[\d.]+ ± [\d.]+)+)\s*$", printed,
                          flags=re.MULTILINE)
        assert match, f"row of {method} missing from the printed table:\n{printed}"
        values = [float(v) for v in re.findall(r"([\d.]+) ±", match[1])]
        assert len(values) == len(metrics), (method, match[0])
        rows[method] = values
    return rows


@needs_runner
def test_runner_example_trains_every_method_and_prints_its_table(example, tmp_path, capsys):
    """One epoch, one seed, every method: the returned means are the printed ones, in
    [0, 1]; every claim of the paper is printed as a gap; the report is written."""
    out = tmp_path / "run"
    means = example.main(["--framework", FRAMEWORKS[0], "--epochs", "1", "--seeds", "1",
                          "--out", str(out)])
    printed = capsys.readouterr().out
    methods = list(example.METHODS)
    assert list(means) == methods
    rows = _table_rows(printed, methods, example.METRICS)
    for method in methods:
        for metric, shown in zip(example.METRICS, rows[method], strict=True):
            value = means[method][metric]
            assert math.isfinite(value) and 0.0 <= value <= 1.0, (method, metric, value)
            assert shown == pytest.approx(value, abs=5e-5)
    assert "The paper's comparison, as measured here (not asserted):" in printed
    for method, baseline, metric in example.CLAIMS:
        gap = means[method][metric] - means[baseline][metric]
        assert f"  {method} - {baseline} on test {metric}: {gap:+.4f}" in printed
    report = (out / "report.md").read_text()
    for method in methods:
        assert f"| {FRAMEWORKS[0]}-{method} |" in report


@needs_runner
@pytest.mark.parametrize("argv, message", [
    (["--framework", "mxnet"], "--framework: invalid choice: 'mxnet'"),
    (["--methods", "SGD"], "SGD"),
    (["--methods", ","], "expected"),
    (["--epochs", "0"], "epochs"),
    (["--seeds", "0"], "seeds"),
])
def test_runner_example_rejects_bad_options(example, tmp_path, capsys, argv, message):
    """argparse's usage error (exit 2) naming the option, before anything trains."""
    with pytest.raises(SystemExit) as raised:
        example.main([*argv, "--out", str(tmp_path / "run")])
    assert raised.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "report.md").exists()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_training_loop_trains_in_each_framework(framework, capsys):
    """Two epochs of APLoss + SOAP: one printed line per epoch with the test AUROC and AP it
    returns, all finite and in [0, 1]; the SOAP state and the model move (the metrics of
    the two epochs differ)."""
    example = _load("training_loop")
    history = example.main(["--framework", framework, "--epochs", "2"])
    printed = capsys.readouterr().out
    assert f"{framework}, APLoss + SOAP" in printed
    assert len(history) == 2
    for epoch, row in enumerate(history, 1):
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in row.values()), row
        assert (f"epoch {epoch:3d}  loss " in printed
                and f"test AUROC {row['AUROC']:.4f}  AP {row['AP']:.4f}" in printed)
    assert history[0] != history[1], "the second epoch changed nothing"


def test_training_loop_rejects_bad_options(capsys):
    example = _load("training_loop")
    for argv in (["--framework", "mxnet"], ["--epochs", "0"], ["--batch-size", "1"]):
        with pytest.raises(SystemExit) as raised:
            example.main(argv)
        assert raised.value.code == 2, argv
        assert "--" in capsys.readouterr().err
