"""Multi-label CheXpert in the runner (the five competition tasks at once, images read from
disk batch by batch) on tiny CheXpert-style files the tests write: the three frameworks give
the same float64 run, an interrupted run resumes bit-exactly, patients stay in one split,
the metrics average the five tasks, bad recipes name the field and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
PIL = pytest.importorskip("PIL.Image")

from xrisk.datasets import CHEXPERT_TASKS, load_chexpert  # noqa: E402
from xrisk.runner import load_recipe  # noqa: E402
from xrisk.runner.engine import run_seed  # noqa: E402
from xrisk.runner.recipe import RecipeError  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "jax")
HEADER = "Path,Sex,Age,Frontal/Lateral,AP/PA," + ",".join(CHEXPERT_TASKS)


def _write(root, name, patients, views, suffix, rng):
    """``root/<name>.csv`` in CheXpert's layout (``<name>/patientNNNNN/study1/viewK_*``):
    per patient ``views`` frontal images and one lateral one, labels 1.0 / 0.0 / -1.0
    (uncertain) / empty, random 10x10 grayscale images."""
    lines = [HEADER]
    for patient in range(patients):
        for view in range(views + 1):
            frontal = view < views
            rel = (f"{name}/patient{patient:05d}/study1/view{view + 1}_"
                   f"{'frontal' if frontal else 'lateral'}.{suffix}")
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            PIL.fromarray(rng.integers(0, 256, (10, 10), dtype=np.uint8)).save(root / rel)
            cells = rng.choice(["1.0", "0.0", "-1.0", ""], size=5, p=[0.35, 0.35, 0.15, 0.15])
            lines.append(f"{rel},Female,60,{'Frontal' if frontal else 'Lateral'},AP,"
                         + ",".join(cells))
    path = root / f"{name}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("chexpert")
    rng = np.random.default_rng(7)
    train = _write(root, "train", patients=16, views=3, suffix="png", rng=rng)  # 48 frontal
    valid = _write(root, "valid", patients=8, views=2, suffix="jpg", rng=rng)  # 16 frontal
    return root, train, valid


def _raw(files, **changes):
    root, train, valid = files
    raw = {"method": "ml_pesg", "dtype": "float64", "epochs": 3,
           "data": {"name": "chexpert", "path": str(train), "image_root": str(root),
                    "test_path": str(valid), "image_size": 6, "validation_size": 0.25,
                    "uncertain": {"Cardiomegaly": "ones"}},
           "model": {"name": "conv_encoder", "widths": [4, 8], "hidden": [8]},
           "sampler": {"batch_size": 16},
           # a cross-entropy warm-up (the per-label BCE), a new last layer, then the method
           # with a new proximal stage: every part of the run's state is in play
           "schedule": {"warmup_epochs": 1, "reinit_last_layer": True, "decay_at": [0.5]},
           "evaluation": {"metrics": ["auroc", "ap"], "early_stopping": False}}
    raw.update(changes)
    return raw


@pytest.fixture(scope="module")
def runs(files, tmp_path_factory):
    out = {}
    for framework in FRAMEWORKS:
        recipe = load_recipe({**_raw(files), "framework": framework})
        out[framework] = run_seed(recipe, 0, tmp_path_factory.mktemp(framework),
                                  progress=False)
    return out


def test_the_three_frameworks_give_the_same_float64_chexpert_run(runs):
    reference = runs["torch"].history
    assert [row["phase"] for row in reference] == ["warmup", "main", "main"]
    assert all(np.isfinite(row["loss"]) for row in reference)
    for framework in ("tensorflow", "jax"):
        for got, want in zip(runs[framework].history, reference, strict=True):
            for key, value in want.items():
                assert got[key] == (pytest.approx(value, rel=1e-9, abs=1e-12)
                                    if isinstance(value, float) else value), (framework, key)
        with np.load(runs[framework].run_dir / "predictions.npz") as got, \
                np.load(runs["torch"].run_dir / "predictions.npz") as want:
            np.testing.assert_allclose(got["test_logits"], want["test_logits"], rtol=1e-9,
                                       atol=1e-12)


def test_the_test_split_is_the_valid_csv_scored_as_the_mean_of_the_five_tasks(runs, files):
    from xrisk.metrics import auroc

    root, _, valid = files
    run_dir = runs["torch"].run_dir
    with np.load(run_dir / "predictions.npz") as data:
        scores, labels = data["test_logits"], data["y_test"]
    # valid.csv's frontal rows, in order, with the recipe's uncertain policy
    want = load_chexpert(valid, root, uncertain={"Cardiomegaly": "ones"}).targets
    np.testing.assert_array_equal(labels, want)
    assert scores.shape == labels.shape == (16, 5)
    per_task = [auroc(labels[:, k], scores[:, k]) for k in range(5)
                if 0 < labels[:, k].sum() < len(labels)]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["test"]["auroc"] == pytest.approx(np.mean(per_task), rel=1e-12)
    weights = np.load(run_dir / "checkpoints" / "epoch-0002.npz")
    assert weights["model/head.dense1/kernel"].shape == (8, 5)  # one logit per task
    assert weights["model/encoder.conv0/kernel"].shape == (3, 3, 1, 4)  # grayscale images


def test_images_are_read_from_disk_batch_by_batch(files, monkeypatch):
    from xrisk.datasets import chexpert
    from xrisk.runner.multilabel import LazyImages, MultiLabelTask

    recipe = load_recipe({**_raw(files), "framework": "torch"})
    task = MultiLabelTask(recipe, 0)
    x_train = task.splits.x_train
    assert isinstance(x_train, LazyImages) and x_train.shape == (len(x_train), 6, 6, 1)
    everything = x_train[np.arange(len(x_train))]
    # standardized with the training pixels' own mean and std (fewer than 2048 images)
    assert abs(everything.mean()) < 1e-12 and everything.std() == pytest.approx(1, rel=1e-12)
    read = []
    original = chexpert.ChestImages.__getitem__

    def counting(self, i):
        read.append(i)
        return original(self, i)

    monkeypatch.setattr(chexpert.ChestImages, "__getitem__", counting)
    task.start(task.main)
    task.sampler.set_epoch(0)
    batches = []

    def seen(source):
        for batch in source:
            batches.append(np.array(batch))
            yield batch

    list(task.session.epoch(seen(task.batches(task.main, 0))))
    # each step read its batch's images once (the batch read ahead is the one trained on)
    assert len(batches) > 1
    assert sorted(read) == sorted(x_train.rows[np.concatenate(batches)].tolist())


def test_a_batch_read_ahead_equals_a_plain_read(files):
    from xrisk.runner.multilabel import load_multilabel

    recipe = load_recipe(_raw(files))
    x = load_multilabel(recipe.data, seed=0, dtype="float64").x_train
    assert x.shape == (len(x), 36)  # flattened for an MLP
    batches = [np.array([3, 1, 4]), np.array([1, 5]), np.array([9, 2, 6])]
    for batch, want in zip(x.read_ahead(iter(batches)), batches, strict=True):
        assert batch is want
        np.testing.assert_array_equal(x[batch], x._read(batch))
    # the read ahead is matched by dtype and values: int32 [1, 0] has int64 [1]'s bytes
    ahead = x.read_ahead([np.array([0]), np.array([1], dtype=np.int64)])
    next(ahead)
    np.testing.assert_array_equal(x[np.array([1, 0], dtype=np.int32)], x._read(np.array([1, 0])))
    np.testing.assert_array_equal(x[np.array([1])], x._read(np.array([1])))


def test_the_split_keeps_each_patient_in_one_split(files):
    from xrisk.runner.multilabel import chexpert_rows

    recipe = load_recipe(_raw(files, data={**_raw(files)["data"], "test_path": None}))
    dataset, parts, test_dataset = chexpert_rows(recipe.data, 3)
    assert test_dataset is dataset and sum(len(p) for p in parts) == 48  # frontal rows
    patients = [{dataset.data.paths[i].parts[-3] for i in rows} for rows in parts]
    assert sorted(np.concatenate(parts).tolist()) == list(range(48))
    assert not (patients[0] & patients[1] or patients[0] & patients[2]
                or patients[1] & patients[2])
    # 30 % of the 16 patients to test (5), 25 % of the other 11 to validation (3)
    assert [len(p) for p in patients] == [8, 3, 5]
    again = chexpert_rows(recipe.data, 3)[1]
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    with_valid = chexpert_rows(load_recipe(_raw(files)).data, 3)
    assert with_valid[1][2].tolist() == list(range(16))  # every frontal row of valid.csv
    tiny = load_recipe(_raw(files, data={**_raw(files)["data"], "validation_size": 0.01}))
    with pytest.raises(ValueError, match=r"data.validation_size: received 0.01 of 16 "
                                         r"patients.*Fix: give more rows"):
        chexpert_rows(tiny.data, 0)


class _Interrupt(Exception):
    pass


def test_an_interrupted_chexpert_run_resumes_bit_exactly(files, tmp_path):
    recipe = load_recipe({**_raw(files), "method": "ml_soap"})
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


def _data(**changes):
    return {"name": "chexpert", "path": "train.csv", **changes}


@pytest.mark.parametrize(("raw", "words"), [
    ({"method": "ml_pesg", "data": _data(task="Edema")},
     ["data.task: received 'Edema'", "'ml_pesg'", "five CheXpert tasks",
      "expected no data.task", "Fix: remove data.task"]),
    ({"method": "ml_pesg", "data": _data(task="Edemma")},
     ["data.task: received 'Edemma'", "did you mean 'Edema'", "Fix"]),
    ({"method": "pesg", "task": "multilabel", "data": _data()},
     ["method: received 'pesg', a binary method", "multilabel data", "'ml_pesg'", "Fix"]),
    ({"method": "ml_pesg", "task": "binary", "data": _data()},
     ["method: received 'ml_pesg', a multilabel method", "binary data", "'pesg'", "Fix"]),
    ({"method": "ml_soap", "data": {"name": "breast_cancer"}},
     ["task: received 'multilabel'", "'breast_cancer'", "'chexpert'", "Fix"]),
    ({"method": "ml_soap", "data": _data(uncertain={"Edema": "maybe"})},
     ["data.uncertain.Edema: received 'maybe'", "'ones' or 'zeros'", "Fix"]),
    ({"method": "ml_soap", "data": _data(uncertain={"Effusion": "ones"})},
     ["data.uncertain: received 'Effusion'", "'Pleural Effusion'", "Fix"]),
    ({"method": "ml_soap", "data": _data(imratio=0.1)},
     ["data.imratio: received 0.1", "multilabel", "Fix: remove data.imratio"]),
    ({"method": "ml_soap", "data": {"name": "tox21", "test_path": "valid.csv"}},
     ["data.test_path: received 'valid.csv'", "'tox21'", "chexpert only", "Fix"]),
    ({"method": "ml_soap", "data": _data(), "loss": {"name": "AUCMLoss"}},
     ["loss.name: received 'AUCMLoss'", "MultiLabelAUCMLoss", "Fix"]),
])
def test_bad_multilabel_chexpert_recipes_name_the_field_and_the_fix(raw, words):
    with pytest.raises(RecipeError) as error:
        load_recipe(raw)
    for word in words:
        assert word in str(error.value), (word, str(error.value))


def test_a_multilabel_chexpert_recipe_trains_every_task():
    recipe = load_recipe({"method": "ml_sopas", "data": _data(), "model": {"name": "resnet20"}})
    assert (recipe.task, recipe.data.task, recipe.loss.name, recipe.sampler.name) == (
        "multilabel", None, "MultiLabelpAUCLoss", "random")
    assert load_recipe(recipe.to_dict()).to_dict() == recipe.to_dict()  # resume, tune


def _medmnist(path, labels):
    """A MedMNIST-style file (8x8 gray images) with ``labels`` columns per image (ChestMNIST
    has 14), or one class column for ``labels=1``."""
    rng = np.random.default_rng(3)
    arrays = {}
    for split, count in (("train", 40), ("val", 16), ("test", 16)):
        arrays[f"{split}_images"] = rng.integers(0, 256, (count, 8, 8), dtype=np.uint8)
        arrays[f"{split}_labels"] = (rng.random((count, labels)) < 0.4).astype(np.uint8)
    np.savez(path, **arrays)
    return path


def test_a_multilabel_medmnist_file_trains_every_label_alike_in_the_three_frameworks(
        tmp_path):
    path = _medmnist(tmp_path / "chestmnist.npz", 4)
    raw = {"method": "ml_sopas", "dtype": "float64", "epochs": 2, "model": {"hidden": [6]},
           "data": {"name": "medmnist", "path": str(path)}, "sampler": {"batch_size": 16},
           "evaluation": {"metrics": ["auroc", "pauc"], "early_stopping": False}}
    histories = {}
    for framework in FRAMEWORKS:
        recipe = load_recipe({**raw, "framework": framework})
        histories[framework] = run_seed(recipe, 0, tmp_path / framework,
                                        progress=False).history
    with np.load(tmp_path / "torch" / "predictions.npz") as data:
        assert data["test_logits"].shape == data["y_test"].shape == (16, 4)
    for framework in ("tensorflow", "jax"):
        for got, want in zip(histories[framework], histories["torch"], strict=True):
            for key, value in want.items():
                assert got[key] == (pytest.approx(value, rel=1e-9, abs=1e-12)
                                    if isinstance(value, float) else value), (framework, key)


def test_medmnist_label_shapes_must_fit_the_method(tmp_path):
    from xrisk.runner.engine import BinaryTask
    from xrisk.runner.multilabel import MultiLabelTask

    multi = _medmnist(tmp_path / "multi.npz", 3)
    single = _medmnist(tmp_path / "single.npz", 1)
    with pytest.raises(ValueError, match=r"data.path: the train labels of .*multi.npz are "
                                         r"multi-label, shape \(40, 3\).*binary method.*"
                                         r"Fix: .*ml_pesg"):
        BinaryTask(load_recipe({"method": "pesg", "data": {"name": "medmnist",
                                                           "path": str(multi)}}), 0)
    with pytest.raises(ValueError, match=r"data.path: the train labels of .*single.npz have "
                                         r"shape \(40,\).*expected a multi-label file.*Fix"):
        MultiLabelTask(load_recipe({"method": "ml_pesg", "data": {"name": "medmnist",
                                                                  "path": str(single)}}), 0)
    with pytest.raises(RecipeError, match=r"data.positive_classes: received \['1'\] for a "
                                          r"multilabel task.*Fix: remove"):
        load_recipe({"method": "ml_pesg", "data": {"name": "medmnist", "path": str(multi),
                                                   "positive_classes": ["1"]}})


def test_a_binary_chexpert_task_uses_the_same_patient_split_and_test_csv(files):
    from xrisk.runner.data import load_splits
    from xrisk.runner.multilabel import chexpert_rows

    root, _, valid = files
    data = {**_raw(files)["data"], "task": "Edema", "standardize": False}
    recipe = load_recipe({"method": "pesg", "data": data})
    splits = load_splits(recipe.data, seed=0, dtype="float64")
    edema = load_chexpert(valid, root, uncertain={"Cardiomegaly": "ones"}).targets[:, 1]
    np.testing.assert_array_equal(splits.y_test, edema)  # valid.csv's frontal rows
    dataset, (train, val, _), _ = chexpert_rows(recipe.data, 0)
    np.testing.assert_array_equal(splits.y_train, dataset.targets[train, 1])
    np.testing.assert_array_equal(splits.y_val, dataset.targets[val, 1])
    assert splits.x_train.shape == (len(train), 36)
    x, _, _ = dataset.batch(train[:2])
    np.testing.assert_allclose(splits.x_train[:2], x.reshape(2, 36))
