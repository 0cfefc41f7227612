"""Multi-label runs (all Tox21 assays at once, missing labels masked) in the runner on tiny
float64 runs: the three frameworks give the same numbers, an interrupted run resumes
bit-exactly, the metrics average the labels over the molecules each was measured on."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
pytest.importorskip("rdkit")

from xrisk.runner import load_recipe  # noqa: E402
from xrisk.runner.engine import run_seed  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "jax")
# A cross-entropy warm-up (the masked per-label BCE), a new last layer, then the method with
# a decay point: every part of a multi-label run's state is in play.
TINY = {"data": {"name": "tox21", "limit": 200, "fingerprint_bits": 32}, "epochs": 3,
        "dtype": "float64", "model": {"hidden": [8]}, "sampler": {"batch_size": 32},
        "schedule": {"warmup_epochs": 1, "reinit_last_layer": True, "decay_at": [0.5]},
        "evaluation": {"metrics": ["auroc", "ap"], "early_stopping": False}}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for framework in FRAMEWORKS:
        recipe = load_recipe({**TINY, "method": "ml_pesg", "framework": framework})
        out[framework] = run_seed(recipe, 0, tmp_path_factory.mktemp(framework),
                                  progress=False)
    return out


def test_the_three_frameworks_give_the_same_float64_multilabel_run(runs):
    reference = runs["torch"].history
    assert [row["phase"] for row in reference] == ["warmup", "main", "main"]
    assert all(np.isfinite(row["loss"]) for row in reference)  # NaN labels masked
    for framework in ("tensorflow", "jax"):
        for got, want in zip(runs[framework].history, reference, strict=True):
            for key, value in want.items():
                assert got[key] == (pytest.approx(value, rel=1e-9, abs=1e-12)
                                    if isinstance(value, float) else value), (framework, key)


def test_a_multilabel_run_scores_every_label_on_its_measured_molecules(runs):
    from xrisk.metrics import auroc

    run_dir = runs["torch"].run_dir
    with np.load(run_dir / "predictions.npz") as data:
        scores, labels = data["test_logits"], data["y_test"]
    assert scores.shape == labels.shape and labels.shape[1] == 12
    assert np.isnan(labels).any()  # missing labels reach the metrics as NaN
    per_label = []
    for column in range(12):
        tested = ~np.isnan(labels[:, column])
        y = labels[tested, column]
        if 0 < y.sum() < y.size:
            per_label.append(auroc(y, scores[tested, column]))
    result = json.loads((run_dir / "result.json").read_text())
    assert result["test"]["auroc"] == pytest.approx(np.mean(per_label), rel=1e-12)


class _Interrupt(Exception):
    pass


@pytest.mark.parametrize("method", ["ml_soap"])
def test_an_interrupted_multilabel_run_resumes_bit_exactly(tmp_path, method):
    recipe = load_recipe({**TINY, "method": method})
    whole = run_seed(recipe, 0, tmp_path / "whole", progress=False)

    def on_batch(epoch, batch, loss):
        if (epoch, batch) == (2, 1):
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run_seed(recipe, 0, tmp_path / "part", progress=False, on_batch=on_batch)
    resumed = run_seed(recipe, 0, tmp_path / "part", resume=True, progress=False)
    assert resumed.history == whole.history
    with np.load(tmp_path / "part" / "checkpoints" / "epoch-0002.npz") as got, \
            np.load(tmp_path / "whole" / "checkpoints" / "epoch-0002.npz") as want:
        assert got.files == want.files
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_multilabel_methods_parse_to_their_losses():
    cases = {"ml_soap": ("meanAveragePrecisionLoss", "SOAP", "ap"),
             "ml_pesg": ("MultiLabelAUCMLoss", "PESG", "auroc"),
             "ml_sopas": ("MultiLabelpAUCLoss", "SOPAs", "pauc"),
             "ml_bce": ("CrossEntropyLoss", "Adam", "auroc")}
    for method, (loss, optimizer, metric) in cases.items():
        recipe = load_recipe({"data": {"name": "tox21"}, "method": method})
        assert (recipe.task, recipe.loss.name, recipe.optimizer.name, recipe.metric) == (
            "multilabel", loss, optimizer, metric)
