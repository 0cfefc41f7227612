"""The README's first example, ``examples/imbalanced_classification.py``, runs and learns."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "imbalanced_classification.py"
FRAMEWORKS = [fw for fw in ("torch", "tensorflow", "jax") if importlib.util.find_spec(fw)]
METHODS = ("CE", "AUCM", "AP")

pytestmark = pytest.mark.skipif(not FRAMEWORKS, reason="no deep-learning framework installed")


@pytest.fixture(scope="module")
def example():
    """The example as a module (registered in sys.modules, as its dataclasses need)."""
    spec = importlib.util.spec_from_file_location("imbalanced_classification", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _check_table(results, printed, frameworks, methods):
    assert set(results) == {(fw, m) for fw in frameworks for m in methods}
    for (framework, method), row in results.items():
        for metric in ("auroc", "ap"):
            value = row[metric]
            assert math.isfinite(value) and 0.0 <= value <= 1.0, (framework, method, row)
        line = f"{framework:<12}{method:<8}{row['auroc']:>8.4f}{row['ap']:>8.4f}"
        assert line in printed, f"row missing from the printed table: {line!r}"


def test_one_epoch_every_framework_and_method(example, capsys):
    results = example.main(["--frameworks", ",".join(FRAMEWORKS), "--epochs", "1"])
    _check_table(results, capsys.readouterr().out, FRAMEWORKS, METHODS)


def test_xrisk_losses_reach_good_test_auroc_with_defaults(example, capsys):
    results = example.main(["--frameworks", ",".join(FRAMEWORKS), "--methods", "AUCM,AP"])
    _check_table(results, capsys.readouterr().out, FRAMEWORKS, ("AUCM", "AP"))
    for key, row in results.items():
        assert row["auroc"] > 0.8, (key, row)


def test_plain_progress_without_tqdm(example, capsys, monkeypatch):
    monkeypatch.setattr(example, "tqdm", None)
    results = example.main(["--frameworks", FRAMEWORKS[0], "--methods", "CE", "--epochs", "2"])
    printed = capsys.readouterr().out
    assert f"{FRAMEWORKS[0]:<10} CE  : training ..." in printed
    assert f"{FRAMEWORKS[0]:<10} CE  : done loss=" in printed
    _check_table(results, printed, FRAMEWORKS[:1], ("CE",))


def test_bad_options_are_rejected(example):
    with pytest.raises(SystemExit):
        example.main(["--frameworks", "mxnet"])
    with pytest.raises(SystemExit):
        example.main(["--epochs", "0"])
