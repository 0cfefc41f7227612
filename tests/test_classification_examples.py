"""The multi-label (Tox21), multi-instance (MNIST bags) and extreme-classification examples,
PyTorch loops: each runs in a tiny configuration, prints one loss line per epoch and its
table (the values it returns), and rejects bad options naming them; no accuracy threshold
is asserted. The Tox21 runs skip when RDKit (the ``chem`` extra) is missing; its clear error
without RDKit is tested always. (That the losses train alike in every framework is
tests/test_training_agreement.py's business.)"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HAS_RDKIT = importlib.util.find_spec("rdkit") is not None

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="the examples are PyTorch loops")

#: example -> the options of a tiny run (seconds per method)
TINY = {
    "tox21_multilabel": ["--molecules", "300", "--tasks", "3", "--bits", "64", "--hidden", "8",
                         "--per-task", "4"],
    "multi_instance": ["--train-bags", "24", "--test-bags", "24", "--batch-size", "8",
                       "--instances", "3", "--hidden", "8"],
    "extreme_classification": ["--samples", "200", "--batch-size", "32", "--hidden", "8"],
}
#: example -> option lists that must be rejected (each names the option in its error)
BAD = {
    "tox21_multilabel": [["--tasks", "13"], ["--bits", "0"], ["--per-task", "1"],
                         ["--molecules", "10"], ["--hidden", "-3"]],
    "multi_instance": [["--instances", "0"], ["--test-bags", "0"],
                       ["--batch-size", "50", "--train-bags", "20"]],
    "extreme_classification": [["--samples", "50"], ["--batch-size", "0"],
                               ["--batch-size", "90", "--samples", "100"]],
}
COMMON_BAD = [["--epochs", "0"], ["--methods", "SGD"], ["--methods", ","]]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def _needs_rdkit(name):
    if name == "tox21_multilabel" and not HAS_RDKIT:
        pytest.skip('RDKit is not installed (pip install "xrisk[chem]")')


@pytest.fixture(scope="module", params=list(TINY))
def example(request):
    return _load(request.param)


def test_tiny_run_trains_every_method_and_prints_its_table(example, capsys):
    """Two epochs of every method: a loss line per epoch (finite), and one table row per
    method showing the returned test metrics, each in [0, 1]."""
    name = example.__name__
    _needs_rdkit(name)
    results = example.main(["--epochs", "2", *TINY[name]])
    printed = capsys.readouterr().out
    methods = list(example.METHODS)
    assert list(results) == methods
    for method in methods:
        for epoch in (1, 2):
            line = next(line for line in printed.splitlines()
                        if line.startswith(f"  {method} epoch {epoch}: loss "))
            assert math.isfinite(float(line.rsplit(" ", 1)[1])), line
        values = results[method]
        values = list(values.values()) if isinstance(values, dict) else [values]
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values), (method, values)
        row = next(line for line in printed.splitlines() if line.startswith(f"{method} "))
        assert [float(v) for v in row.split()[1:]] == pytest.approx(values, abs=5e-5), row
    with capsys.disabled():
        print(f"\n{name}, 2 tiny epochs: {results} (printed, not asserted)")


def test_bad_options_are_rejected(example, capsys):
    for argv in COMMON_BAD + BAD[example.__name__]:
        with pytest.raises(SystemExit) as raised:
            example.main(argv)
        assert raised.value.code == 2, argv  # argparse's usage error: no data loaded
        error = capsys.readouterr().err
        assert f"{argv[0]}: got" in error and "expected" in error, (argv, error)


def test_tox21_without_rdkit_says_how_to_install(monkeypatch):
    example = _load("tox21_multilabel")
    for name in [m for m in sys.modules if m == "rdkit" or m.startswith("rdkit.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rdkit", None)  # import rdkit -> ImportError
    with pytest.raises(SystemExit) as raised:
        example.main(TINY["tox21_multilabel"])
    message = str(raised.value)
    assert "needs RDKit" in message and 'pip install "xrisk[chem]"' in message
