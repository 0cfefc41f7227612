"""The contrastive example (``examples/contrastive.py``, a PyTorch loop): it runs in a tiny
configuration, prints its table and the paper's claim as measured, its loop trains the
encoders (the representation moves away from the initial one), and it rejects bad options;
no accuracy threshold is asserted. (That the contrastive losses train alike in every
framework is tests/test_training_agreement.py's business.)"""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: The stateless baseline, the unimodal loss with the most state (estimators and individual
#: temperatures) and the two-encoder bimodal loss; SogCLR and CLIP are their special cases.
METHODS = ("init", "InfoNCE", "iSogCLR", "Bimodal")
#: 64 digits (one batch: every step revisits every estimator row) for 2 epochs, one seed.
TINY = ["--samples", "64", "--epochs", "2", "--seeds", "1"]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="the example is a PyTorch loop")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("contrastive", EXAMPLES / "contrastive.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_tiny_run_prints_table_and_claim(example, capsys):
    accuracy = example.main([*TINY, "--methods", ",".join(METHODS)])
    printed = capsys.readouterr().out
    assert list(accuracy) == list(METHODS)
    for method, values in accuracy.items():
        assert len(values) == 1 and all(math.isfinite(a) and 0.0 <= a <= 1.0 for a in values)
        assert re.search(rf"^{method}\s+{np.mean(values):.4f} \+- 0\.0000$", printed,
                         flags=re.MULTILINE), (method, printed)
        if method != "init":  # a loss line per epoch
            assert re.search(rf"^  {method} seed 0 epoch 2: loss [+-]\d", printed,
                             flags=re.MULTILINE), method
    assert "The paper's claim (the global loss beats the in-batch one" in printed
    gap = np.mean(accuracy["iSogCLR"]) - np.mean(accuracy["InfoNCE"])
    assert f"  iSogCLR - InfoNCE: {gap:+.4f}" in printed


@pytest.mark.parametrize("method", ["InfoNCE", "SogCLR", "Bimodal"])
def test_the_loop_trains_the_encoders(example, method, capsys):
    """One epoch of 64 digits: the held-out representation is finite and no longer that of
    the same seed's initial encoders (zero epochs)."""
    from xrisk.datasets import load_mnist_5k

    images = load_mnist_5k()[0][:96]
    initial = example.represent(example.train(method, images[:64], 0, 0), images[64:])
    trained = example.represent(example.train(method, images[:64], 1, 0), images[64:])
    capsys.readouterr()
    assert trained.shape == initial.shape == (32, 64 * (2 if method == "Bimodal" else 1))
    assert np.all(np.isfinite(trained))
    assert not np.allclose(trained, initial, rtol=0, atol=1e-7), "training changed nothing"


@pytest.mark.parametrize("argv, message", [
    (["--methods", "SimSiam"], "--methods: got ['SimSiam']"),
    (["--methods", ","], "--methods: got nothing"),
    (["--epochs", "0"], "--epochs: got 0; expected 1"),
    (["--seeds", "0"], "--seeds: got 0; expected 1"),
    (["--samples", "10"], "--samples: got 10; expected 64 to 4000"),
    (["--samples", "5000"], "--samples: got 5000; expected 64 to 4000"),
])
def test_bad_options_are_rejected(example, capsys, argv, message):
    with pytest.raises(SystemExit) as error:
        example.main(argv)
    assert error.value.code == 2
    assert message in capsys.readouterr().err
