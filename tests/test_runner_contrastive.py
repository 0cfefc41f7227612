"""Contrastive runs (SogCLR, InfoNCE) in the runner on tiny float64 digit runs: the three
frameworks give the same numbers, an interrupted run resumes bit-exactly, InfoNCE is trained
at 2 tau x its value, the probes, recipe validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
pytest.importorskip("sklearn")

from xrisk.runner import load_recipe  # noqa: E402
from xrisk.runner.engine import run_seed  # noqa: E402
from xrisk.runner.recipe import RecipeError, parse_recipe  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "jax")
TINY = {"data": {"name": "digits", "limit": 120}, "epochs": 2, "dtype": "float64",
        "model": {"widths": [4, 8], "hidden": [8, 4]}, "sampler": {"batch_size": 16},
        "evaluation": {"early_stopping": False}}


def _recipe(method: str, framework: str = "torch", **extra):
    return load_recipe({**TINY, "method": method, "framework": framework, **extra})


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """SogCLR in each framework, InfoNCE in torch: the references of the tests below."""
    out = {}
    for method, framework in [("sogclr", f) for f in FRAMEWORKS] + [("infonce", "torch")]:
        folder = tmp_path_factory.mktemp(f"{method}-{framework}")
        out[method, framework] = run_seed(_recipe(method, framework), 0, folder,
                                          progress=False)
    return out


def test_the_three_frameworks_give_the_same_float64_contrastive_run(runs):
    reference = runs["sogclr", "torch"].history
    assert [row["epoch"] for row in reference] == [0, 1]
    for framework in ("tensorflow", "jax"):
        history = runs["sogclr", framework].history
        for got, want in zip(history, reference, strict=True):
            assert got.keys() == want.keys()
            for key, value in want.items():
                if isinstance(value, float):
                    assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
                else:
                    assert got[key] == value
    first = runs["sogclr", "torch"].run_dir
    with np.load(first / "predictions.npz") as data:
        assert data["test_features"].shape[1] == 8  # the encoder's features, not the head's
        assert data["test_labels"].shape == (data["test_features"].shape[0],)


def test_a_contrastive_run_reports_probe_and_knn_accuracy(runs):
    result = json.loads((runs["sogclr", "torch"].run_dir / "result.json").read_text())
    assert result["metric"] == "probe_accuracy"
    assert set(result["test"]) == {"probe_accuracy", "knn_accuracy"}
    assert all(0.0 <= value <= 1.0 for value in result["test"].values())


class _Interrupt(Exception):
    pass


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_an_interrupted_contrastive_run_resumes_bit_exactly(runs, tmp_path, framework):
    def on_batch(epoch, batch, loss):
        if (epoch, batch) == (1, 2):
            raise _Interrupt

    recipe = _recipe("sogclr", framework)
    with pytest.raises(_Interrupt):
        run_seed(recipe, 0, tmp_path, progress=False, on_batch=on_batch)
    run_seed(recipe, 0, tmp_path, resume=True, progress=False)
    reference = runs["sogclr", framework].run_dir
    assert _history(tmp_path) == _history(reference)
    with np.load(tmp_path / "checkpoints" / "epoch-0001.npz") as got, \
            np.load(reference / "checkpoints" / "epoch-0001.npz") as want:
        assert got.files == want.files
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_infonce_is_trained_at_two_tau_times_its_value(runs, tmp_path):
    # The step-size rule: 2 tau = 0.2 at tau 0.1. The raw InfoNCE (scale 1) trains
    # differently (LARS leaves the vectors' steps unscaled); the logged loss is unscaled, so
    # the first batch's loss is the same.
    from xrisk.runner.contrastive import loss_scale

    assert loss_scale(_recipe("infonce")) == pytest.approx(0.2)
    assert loss_scale(_recipe("infonce", loss={"options": {"tau": 0.5}})) == pytest.approx(1.0)
    assert loss_scale(_recipe("sogclr")) == 1.0
    first: list[float] = []
    raw = run_seed(_recipe("infonce", loss={"scale": 1.0}), 0, tmp_path, progress=False,
                   on_batch=lambda epoch, batch, loss: first.append(loss))
    scaled = runs["infonce", "torch"].history
    assert raw.history[0]["loss"] != scaled[0]["loss"]
    assert raw.history[-1]["val_probe_accuracy"] >= 0  # a run, not an error
    assert first[0] > 0


def test_probes_score_separable_features():
    from xrisk.runner.contrastive import knn_accuracy, probe_accuracy

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    features = np.eye(3)[labels] * 5 + 0.1 * rng.standard_normal((60, 3))
    shuffled = rng.permutation(labels)
    assert probe_accuracy(features, labels, features, labels) == [1.0]
    assert knn_accuracy(features, labels, features, labels, features, shuffled) == [
        1.0, float(np.mean(labels == shuffled))]


@settings(deadline=None)
@given(st.integers(2, 5), st.lists(st.integers(1, 6), min_size=5, max_size=5),
       st.integers(0, 2**32 - 1))
def test_knn_votes_with_no_more_neighbours_than_the_smallest_class(classes, sizes, seed):
    """Well-separated features of small classes (a few images each, as in a small image
    folder): the kNN vote is right for every image, whatever the class sizes. With 20
    neighbours the vote went to the larger classes (0.2-0.36 on a 36-image folder)."""
    from xrisk.runner.contrastive import knn_accuracy

    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(classes), sizes[:classes])
    features = np.eye(classes)[labels] * 5 + 0.1 * rng.standard_normal((labels.size, classes))
    assert knn_accuracy(features, labels, features, labels) == [1.0]


@pytest.mark.parametrize(("change", "message"), [
    ({"data": {"name": "breast_cancer"}}, "task: received 'contrastive'"),
    ({"model": {"name": "mlp"}}, "model.name: received 'mlp' for a contrastive task"),
    ({"schedule": {"warmup_epochs": 1}}, "schedule.warmup_epochs: received 1"),
    ({"views": {"flip": 2}}, "views: SimCLRAugment: flip=2"),
    ({"views": {"blur": 0.5}}, "views: .*blur"),
    ({"evaluation": {"metrics": ["auroc"]}}, "received 'auroc' for a contrastive task"),
    ({"loss": {"name": "APLoss"}}, "loss.name: received 'APLoss'"),
    ({"loss": {"options": {"gamma_schedule": "cosine", "gamma_decay_epochs": 3}}},
     "gamma_schedule"),
    ({"loss": {"scale": 0}}, "loss.scale: received 0"),
    ({"evaluation": {"train_metrics": True}}, "evaluation.train_metrics: received True"),
])
def test_a_bad_contrastive_recipe_names_the_field_and_the_fix(change, message):
    with pytest.raises(RecipeError, match=message) as caught:
        parse_recipe({"data": {"name": "digits"}, "method": "sogclr", **change})
    assert "Fix" in str(caught.value)


def test_views_apply_to_contrastive_runs_only():
    with pytest.raises(RecipeError, match="views apply to contrastive runs only"):
        parse_recipe({"data": {"name": "digits"}, "method": "soap", "views": {"flip": 0.2}})
    recipe = parse_recipe({"data": {"name": "mnist_5k"}, "method": "infonce",
                           "views": {"scale": [0.2, 1.0]}})
    assert recipe.task == "contrastive" and recipe.model.name == "conv_encoder"
    assert recipe.optimizer.name == "LARS" and recipe.sampler.name == "random"
