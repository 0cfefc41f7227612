"""The runner end to end on tiny float64 runs: each framework trains the same recipe to the
same numbers, a run killed mid-epoch (SIGKILL) resumes bit-exactly, early stopping, the
warm-up's last-layer re-initialisation, CSV data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
pytest.importorskip("matplotlib")

from xrisk.runner import load_recipe, train  # noqa: E402
from xrisk.runner.checkpoint import latest_checkpoint  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "jax")

# PESG after one epoch of cross-entropy (re-initialised last layer), a proximal stage at
# epoch 2: every part of a run's state (model, a/b/alpha, the optimizer's reference point and
# stage, the sampler, the warm-up's RNG) is in play.
RECIPE = """
name: tiny
method: pesg
dtype: float64
epochs: 3
data: {name: breast_cancer, imratio: 0.2, limit: 200}
model: {hidden: [8]}
sampler: {batch_size: 16, sampling_rate: 0.25}
schedule: {warmup_epochs: 1, reinit_last_layer: true, decay_at: [0.5], decay_factor: 2}
evaluation: {metrics: [auroc, ap], early_stopping: false}
"""
KILL_AT = (2, 1)  # epoch, batch: after the stage's decay point, mid-epoch


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("recipe") / "tiny.yaml"
    path.write_text(RECIPE)
    return path


@pytest.fixture(scope="module")
def runs(recipe_file, tmp_path_factory):
    """One uninterrupted run per framework (the reference of the other tests)."""
    out = {}
    for framework in FRAMEWORKS:
        folder = tmp_path_factory.mktemp(framework)
        train(recipe_file, folder, overrides=[f"framework={framework}"], progress=False,
              write_report=False)
        out[framework] = folder / f"{framework}-pesg" / "seed-0"
    return out


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _checkpoint(run_dir: Path) -> dict[str, np.ndarray]:
    epoch = latest_checkpoint(run_dir / "checkpoints")
    return _arrays(run_dir / "checkpoints" / f"epoch-{epoch:04d}.npz")


def _assert_identical(run_dir: Path, reference: Path) -> None:
    assert _history(run_dir) == _history(reference)
    for name in ("predictions.npz",):
        got, want = _arrays(run_dir / name), _arrays(reference / name)
        assert got.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    got, want = _checkpoint(run_dir), _checkpoint(reference)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_run_writes_its_logs_checkpoints_and_result(runs, framework):
    run_dir = runs[framework]
    history = _history(run_dir)
    assert [row["epoch"] for row in history] == [0, 1, 2]
    assert [row["phase"] for row in history] == ["warmup", "main", "main"]
    assert all(np.isfinite(row["loss"]) and 0 <= row["val_auroc"] <= 1 for row in history)
    csv_lines = (run_dir / "metrics.csv").read_text().splitlines()
    assert csv_lines[0].split(",")[:3] == ["epoch", "phase", "loss"] and len(csv_lines) == 4
    result = json.loads((run_dir / "result.json").read_text())
    assert result["metric"] == "auroc" and result["best_epoch"] in (1, 2)
    assert list(result["test"]) == ["auroc", "ap"]
    assert latest_checkpoint(run_dir / "checkpoints") == 2


def test_the_three_frameworks_give_the_same_float64_run(runs):
    reference = _history(runs["torch"])
    for framework in ("tensorflow", "jax"):
        history = _history(runs[framework])
        for want, got in zip(reference, history, strict=True):
            for key, value in want.items():
                if isinstance(value, float):
                    assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (framework,
                                                                                   key)
                else:
                    assert got[key] == value
        got = _arrays(runs[framework] / "predictions.npz")["test_logits"]
        want = _arrays(runs["torch"] / "predictions.npz")["test_logits"]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_the_warmup_reinitialises_the_last_layer_only(recipe_file, tmp_path):
    """One warm-up epoch, then the X-risk phase starts from a new last layer: stopping
    training there shows the hidden layer kept and the last one redrawn."""
    from xrisk.runner.engine import run_seed

    recipe = load_recipe(recipe_file, ["epochs=2", "optimizer.learning_rate=1e-12",
                                       "optimizer.epoch_decay=0", "optimizer.weight_decay=0"])
    snapshots = []

    def on_batch(epoch, batch, loss):
        if batch == 0:
            snapshots.append(epoch)

    run_seed(recipe, 0, tmp_path / "a", progress=False, on_batch=on_batch)
    warm = _arrays(tmp_path / "a" / "checkpoints" / "epoch-0000.npz")
    main = _arrays(tmp_path / "a" / "checkpoints" / "epoch-0001.npz")
    np.testing.assert_allclose(main["model/mlp.0/kernel"], warm["model/mlp.0/kernel"],
                               atol=1e-9)
    assert not np.allclose(main["model/out/kernel"], warm["model/out/kernel"], atol=1e-3)
    assert snapshots == [0, 1]


_KILLED_RUN = """
import sys, time
from xrisk.runner import train

def on_batch(epoch, batch, loss):
    if (epoch, batch) == ({epoch}, {batch}):
        open(sys.argv[2], "w").close()
        time.sleep(600)

train(sys.argv[1], sys.argv[3], progress=False, write_report=False, on_batch=on_batch)
"""


def test_a_run_killed_mid_epoch_resumes_bit_exactly(runs, recipe_file, tmp_path):
    marker, out = tmp_path / "mid-epoch", tmp_path / "run"
    script = _KILLED_RUN.format(epoch=KILL_AT[0], batch=KILL_AT[1])
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    process = subprocess.Popen([sys.executable, "-c", script, str(recipe_file), str(marker),
                                str(out)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the run never reached the kill point"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    run_dir = out / "torch-pesg" / "seed-0"
    assert latest_checkpoint(run_dir / "checkpoints") == KILL_AT[0] - 1
    assert not (run_dir / "result.json").exists()

    train(recipe_file, out, resume=True, progress=False, write_report=False)
    _assert_identical(run_dir, runs["torch"])


class _Interrupt(Exception):
    pass


@pytest.mark.parametrize("framework", ["tensorflow", "jax"])
def test_an_interrupted_run_resumes_bit_exactly(runs, recipe_file, tmp_path, framework):
    def on_batch(epoch, batch, loss):
        if (epoch, batch) == KILL_AT:
            raise _Interrupt

    overrides = [f"framework={framework}"]
    with pytest.raises(_Interrupt):
        train(recipe_file, tmp_path, overrides=overrides, progress=False, write_report=False,
              on_batch=on_batch)
    train(recipe_file, tmp_path, overrides=overrides, resume=True, progress=False,
          write_report=False)
    _assert_identical(tmp_path / f"{framework}-pesg" / "seed-0", runs[framework])


def test_resume_refuses_another_recipe_and_a_fresh_run_refuses_an_old_folder(runs,
                                                                              recipe_file):
    out = runs["torch"].parent.parent
    with pytest.raises(FileExistsError, match="--resume"):
        train(recipe_file, out, progress=False, write_report=False)
    with pytest.raises(ValueError, match="another recipe"):
        train(recipe_file, out, overrides=["loss.margin=0.5"], resume=True, progress=False,
              write_report=False)


def test_early_stopping_stops_after_patience_epochs_without_progress(tmp_path):
    recipe = {"method": "soap", "epochs": 30, "dtype": "float64",
              "data": {"name": "breast_cancer", "limit": 120},
              "optimizer": {"options": {"learning_rate": 1e-9}},  # nothing improves
              "evaluation": {"patience": 2}, "model": {"hidden": [4]}}
    [result] = train(recipe, tmp_path, progress=False, write_report=False)
    assert result.stopped_early and len(result.history) == 3 and result.best_epoch == 0
    # resuming a stopped run does not train on
    [again] = train(recipe, tmp_path, resume=True, progress=False, write_report=False)
    assert again.stopped_early and again.history == result.history
    assert again.test == result.test


def test_a_tox21_task_trains_on_fingerprints(tmp_path):
    pytest.importorskip("rdkit")
    from xrisk.runner.data import load_splits

    recipe = load_recipe({"method": "soap", "epochs": 1, "model": {"hidden": [4]},
                          "data": {"name": "tox21", "task": "SR-p53", "limit": 300,
                                   "fingerprint_bits": 64, "standardize": False}})
    splits = load_splits(recipe.data, seed=0, dtype="float32")
    assert splits.x_train.shape[1] == 64 and set(np.unique(splits.x_train)) <= {0.0, 1.0}
    assert sum(s.size for s in (splits.y_train, splits.y_val, splits.y_test)) <= 300
    [result] = train(recipe, tmp_path, progress=False, write_report=False)
    assert 0 <= result.test["ap"] <= 1


def test_a_csv_of_features_trains(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 3))
    y = (x[:, 0] + 0.3 * rng.normal(size=120) > 0.8).astype(int)
    lines = ["a,b,target,c"] + [f"{r[0]},{r[1]},{t},{r[2]}" for r, t in zip(x, y)]
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    recipe = {"method": "ce", "epochs": 2, "model": {"hidden": [4]},
              "data": {"name": "csv", "path": str(tmp_path / "data.csv"),
                       "label_column": "target"}}
    [result] = train(recipe, tmp_path / "out", progress=False, write_report=False)
    assert result.history and 0 <= result.test["auroc"] <= 1
    (tmp_path / "bad.csv").write_text("a,target\n1,2\n")
    with pytest.raises(ValueError, match="expected 0 and 1"):
        train({**recipe, "data": {"name": "csv", "path": str(tmp_path / "bad.csv"),
                                  "label_column": "target"}}, tmp_path / "out2",
              progress=False, write_report=False)


def test_torch_and_tensorflow_train_the_same_float64_resnet20(tmp_path):
    """The same drawn ResNet20, the same images (N, H, W, C) and batches: the two frameworks'
    histories and test logits agree (BatchNorm included; JAX's ResNet20 forward and gradient
    are checked in test_models, its runner below with the smaller conv encoder)."""
    histories, logits = {}, {}
    for framework in ("torch", "tensorflow"):
        train({"method": "soap", "dtype": "float64", "epochs": 1, "framework": framework,
               "model": {"name": "resnet20"}, "data": {"name": "digits", "limit": 60},
               "sampler": {"batch_size": 16}, "evaluation": {"early_stopping": False}},
              tmp_path, progress=False, write_report=False)
        run_dir = tmp_path / f"{framework}-soap" / "seed-0"
        histories[framework] = _history(run_dir)
        logits[framework] = _arrays(run_dir / "predictions.npz")["test_logits"]
    for framework in ("tensorflow",):
        for want, got in zip(histories["torch"], histories[framework], strict=True):
            for key, value in want.items():
                assert got[key] == (pytest.approx(value, rel=1e-7, abs=1e-9)
                                    if isinstance(value, float) else value), (framework, key)
        np.testing.assert_allclose(logits[framework], logits["torch"], rtol=1e-7, atol=1e-9)


def test_a_tiny_resnet20_trains_on_8x8_images_and_resumes(tmp_path):
    """digits' 8x8 images reach ResNet20 as images (one channel: the stem's kernel is
    (3, 3, 1, 16)); BatchNorm's running statistics are checkpointed; a run resumed after
    its first epoch ends where the uninterrupted one does."""
    from xrisk.runner.engine import run_seed

    raw = {"method": "soap", "dtype": "float64", "epochs": 2, "model": {"name": "resnet20"},
           "data": {"name": "digits", "limit": 120}, "sampler": {"batch_size": 16},
           "schedule": {"warmup_epochs": 1, "reinit_last_layer": True},
           "evaluation": {"early_stopping": False}}
    recipe = load_recipe(raw)
    whole = run_seed(recipe, 0, tmp_path / "whole", progress=False)
    assert [row["phase"] for row in whole.history] == ["warmup", "main"]
    assert all(np.isfinite(row["loss"]) for row in whole.history)
    weights = _checkpoint(tmp_path / "whole")
    assert weights["model/conv1/kernel"].shape == (3, 3, 1, 16)
    assert weights["model/linear/kernel"].shape == (64, 1)
    assert not np.array_equal(weights["model/bn1/mean"], np.zeros(16))  # statistics moved

    def on_batch(epoch, batch, loss):
        if (epoch, batch) == (1, 1):
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run_seed(recipe, 0, tmp_path / "part", progress=False, on_batch=on_batch)
    resumed = run_seed(recipe, 0, tmp_path / "part", resume=True, progress=False)
    assert resumed.history == whole.history
    np.testing.assert_array_equal(
        _arrays(tmp_path / "part" / "predictions.npz")["test_logits"],
        _arrays(tmp_path / "whole" / "predictions.npz")["test_logits"])


def test_a_conv_encoder_classifies_images(tmp_path):
    from xrisk.runner.engine import run_seed

    recipe = load_recipe({"method": "pesg", "epochs": 1, "data": {"name": "digits",
                                                                 "limit": 100},
                          "model": {"name": "conv_encoder", "widths": [4, 8], "hidden": [4]},
                          "sampler": {"batch_size": 16}})
    result = run_seed(recipe, 0, tmp_path, progress=False)
    weights = _checkpoint(tmp_path)
    assert weights["model/encoder.conv0/kernel"].shape == (3, 3, 1, 4)
    assert weights["model/head.dense1/kernel"].shape == (4, 1)
    assert 0 <= result.test["auroc"] <= 1


def test_jax_trains_the_conv_encoder_as_torch_does_and_resumes(tmp_path):
    """The JAX runner's conv models: BatchNorm's running statistics threaded through the
    jitted step give torch's float64 history (warm-up, re-initialised head, PESG), and a run
    interrupted mid-epoch resumes bit-exactly."""
    from xrisk.runner.engine import run_seed

    raw = {"method": "pesg", "dtype": "float64", "epochs": 2, "data": {"name": "digits",
                                                                       "limit": 100},
           "model": {"name": "conv_encoder", "widths": [4, 8], "hidden": [4]},
           "sampler": {"batch_size": 16}, "schedule": {"warmup_epochs": 1,
                                                       "reinit_last_layer": True},
           "evaluation": {"early_stopping": False}}
    results = {framework: run_seed(load_recipe({**raw, "framework": framework}), 0,
                                   tmp_path / framework, progress=False)
               for framework in ("torch", "jax")}
    for want, got in zip(results["torch"].history, results["jax"].history, strict=True):
        for key, value in want.items():
            assert got[key] == (pytest.approx(value, rel=1e-7, abs=1e-9)
                                if isinstance(value, float) else value), key
    assert not np.array_equal(_checkpoint(tmp_path / "jax")["model/encoder.bn0/mean"],
                              np.zeros(4))  # the running statistics moved

    def on_batch(epoch, batch, loss):
        if (epoch, batch) == (1, 2):
            raise _Interrupt

    recipe = load_recipe({**raw, "framework": "jax"})
    with pytest.raises(_Interrupt):
        run_seed(recipe, 0, tmp_path / "part", progress=False, on_batch=on_batch)
    resumed = run_seed(recipe, 0, tmp_path / "part", resume=True, progress=False)
    assert resumed.history == results["jax"].history
    _assert_identical(tmp_path / "part", tmp_path / "jax")
