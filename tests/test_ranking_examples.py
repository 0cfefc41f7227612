"""The learning-to-rank examples (``examples/ranking_movielens.py``,
``examples/ranking_letor.py``), which build runner recipes: they run in a tiny configuration
(one warm-up epoch, one epoch of each method, one seed), print their table and the paper's
comparison as measured, write the runner's report, and reject bad options; no accuracy
threshold is asserted. The warm-up recipe (ListwiseCE, then a new output layer) and the
same numbers in every framework are tests/test_runner_ranking.py's business."""

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

pytestmark = [pytest.mark.skipif(not FRAMEWORKS, reason="no deep-learning framework installed"),
              pytest.mark.skipif(not HAS_RUNNER, reason='needs "xrisk[runner]"')]

#: The tiny configuration of each example.
TINY = {
    "ranking_movielens": ["--epochs", "1", "--warmup-epochs", "1", "--seeds", "1",
                          "--users", "20"],
    "ranking_letor": ["--epochs", "1", "--warmup-epochs", "1", "--seeds", "1",
                      "--no-lightgbm"],
}
METRICS = {"ranking_movielens": ("ndcg@5", "ndcg@10"), "ranking_letor": ("ndcg@10",)}


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


@pytest.fixture(scope="module", params=list(TINY))
def example(request):
    return _load(request.param)


def test_every_method_runs_in_a_tiny_configuration(example, tmp_path, capsys):
    name = example.__name__
    out = tmp_path / "run"
    means = example.main([*TINY[name], "--framework", FRAMEWORKS[0], "--out", str(out)])
    printed = capsys.readouterr().out
    assert list(means) == list(example.METHODS)
    for method, row in means.items():
        values = [row[m] for m in METRICS[name]] if isinstance(row, dict) else [row]
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values), (method, row)
        shown = re.search(rf"^{method}\s+(.*)$", printed, flags=re.MULTILINE)
        assert shown, f"row of {method} missing:\n{printed}"
        assert [float(v) for v in re.findall(r"([\d.]+) ±", shown[1])] == pytest.approx(
            values, abs=5e-5)
    assert "The paper's comparison, as measured here (not asserted):" in printed
    assert re.search(r"^  song - listwise_ce on test ndcg@10: [+-]\d\.\d{4}$", printed,
                     flags=re.MULTILINE)
    report = (out / "report.md").read_text()
    for method in example.METHODS:
        assert f"| {FRAMEWORKS[0]}-{method} |" in report


@pytest.mark.parametrize("options, message", [
    (["--framework", "mxnet"], "--framework: invalid choice"),
    (["--methods", "LambdaMART"], "--methods: got ['LambdaMART']"),
    (["--methods", ","], "expected"),
    (["--epochs", "0"], "warmup_epochs"),
    (["--seeds", "0"], "seeds"),
    (["--warmup-epochs", "-1"], "warmup_epochs"),
])
def test_bad_options_are_rejected(example, options, tmp_path, capsys, message):
    with pytest.raises(SystemExit) as raised:
        example.main([*options, "--out", str(tmp_path / "run")])
    assert raised.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "report.md").exists()


def test_movielens_rejects_a_bad_user_count(capsys, tmp_path):
    module = _load("ranking_movielens")
    for users in ("19", "611"):
        with pytest.raises(SystemExit):
            module.main(["--users", users, "--out", str(tmp_path)])
        assert f"--users: got {users}; expected 20 to 610" in capsys.readouterr().err
