"""Contrastive runs on your own images: an RGB (or gray) ``image_folder`` and a MedMNIST-style
npz, written by the tests. The three frameworks give the same float64 numbers on RGB data, an
interrupted RGB run resumes bit-exactly, the classes are kept for the probes, and bad files or
recipes name what was received, what was expected and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
pytest.importorskip("sklearn")
pytest.importorskip("PIL")

from xrisk.runner import load_recipe  # noqa: E402
from xrisk.runner.contrastive import load_images  # noqa: E402
from xrisk.runner.engine import run_seed  # noqa: E402
from xrisk.runner.recipe import RecipeError, parse_recipe  # noqa: E402

FRAMEWORKS = ("torch", "tensorflow", "jax")
COLOURS = ((200, 40, 40), (40, 200, 40), (40, 40, 200))  # one hue per class
TINY = {"epochs": 2, "dtype": "float64", "model": {"widths": [4, 8], "hidden": [8, 4]},
        "sampler": {"batch_size": 8}, "evaluation": {"early_stopping": False}}


def _pixels(rng: np.random.Generator, count: int, size: int, colour: tuple[int, ...]
            ) -> np.ndarray:
    """``count`` noisy uint8 RGB images (count, size, size, 3) around ``colour``."""
    return np.clip(rng.normal(colour, 40.0, (count, size, size, 3)), 0, 255).astype(np.uint8)


def _folder(root: Path, per_class: int = 12, size: int = 16, classes: int = 3) -> Path:
    """``root/class<k>/<i>.png``: RGB PNGs, one hue per class."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for k in range(classes):
        (root / f"class{k}").mkdir(parents=True)
        for i, image in enumerate(_pixels(rng, per_class, size, COLOURS[k])):
            Image.fromarray(image).save(root / f"class{k}" / f"{i}.png")
    return root


def _npz(path: Path, counts: dict[str, int], *, gray: bool = False, size: int = 16,
         **replace: np.ndarray) -> Path:
    """A MedMNIST-style file: ``<split>_images`` uint8 (N, H, W, 3) (or (N, H, W)) and
    ``<split>_labels`` (N, 1), classes in turn; ``replace`` overrides or adds arrays."""
    rng = np.random.default_rng(1)
    arrays = {}
    for split, count in counts.items():
        labels = np.arange(count) % 3
        images = np.concatenate([_pixels(rng, 1, size, COLOURS[k]) for k in labels])
        arrays[f"{split}_images"] = images.mean(axis=-1).astype(np.uint8) if gray else images
        arrays[f"{split}_labels"] = labels.reshape(-1, 1)
    np.savez(path, **{**arrays, **replace})
    return path


def _data(section: dict) -> object:
    return parse_recipe({"data": section, "method": "sogclr"}).data


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    return {"image_folder": {"name": "image_folder", "path": str(_folder(root / "folder")),
                             "image_size": 16},
            "medmnist": {"name": "medmnist", "path": str(_npz(
                root / "rgbmnist.npz", {"train": 24, "val": 6, "test": 9}))}}


@pytest.fixture(scope="module")
def runs(sources, tmp_path_factory):
    """SogCLR on the RGB folder (2 epochs) and npz (1 epoch) in every framework."""
    out = {}
    for name, epochs in (("image_folder", 2), ("medmnist", 1)):
        for framework in FRAMEWORKS:
            recipe = load_recipe({**TINY, "epochs": epochs, "data": sources[name],
                                  "method": "sogclr", "framework": framework})
            out[name, framework] = run_seed(recipe, 0, tmp_path_factory.mktemp(
                f"{name}-{framework}"), progress=False)
    return out


@pytest.mark.parametrize("name", ["image_folder", "medmnist"])
def test_the_three_frameworks_give_the_same_float64_run_on_rgb_images(runs, name):
    reference = runs[name, "torch"]
    for framework in ("tensorflow", "jax"):
        history = runs[name, framework].history
        assert len(history) == len(reference.history) >= 1
        for got, want in zip(history, reference.history, strict=True):
            assert got.keys() == want.keys()
            for key, value in want.items():
                if isinstance(value, float):
                    assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
                else:
                    assert got[key] == value
    # the encoder read three channels, and the probes were judged on the three classes
    with np.load(reference.run_dir / "checkpoints" / "epoch-0000.npz") as checkpoint:
        assert checkpoint["model/encoder.conv0/kernel"].shape == (3, 3, 3, 4)  # (kh, kw, C, out)
    with np.load(reference.run_dir / "predictions.npz") as predictions:
        assert set(predictions["test_labels"].tolist()) == {0, 1, 2}


class _Interrupt(Exception):
    pass


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_an_interrupted_rgb_run_resumes_bit_exactly(runs, sources, tmp_path, framework):
    def on_batch(epoch, batch, loss):
        if (epoch, batch) == (1, 1):
            raise _Interrupt

    recipe = load_recipe({**TINY, "data": sources["image_folder"], "method": "sogclr",
                          "framework": framework})
    with pytest.raises(_Interrupt):
        run_seed(recipe, 0, tmp_path, progress=False, on_batch=on_batch)
    run_seed(recipe, 0, tmp_path, resume=True, progress=False)
    reference = runs["image_folder", framework].run_dir
    assert _history(tmp_path) == _history(reference)
    with np.load(tmp_path / "checkpoints" / "epoch-0001.npz") as got, \
            np.load(reference / "checkpoints" / "epoch-0001.npz") as want:
        assert got.files == want.files
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def test_an_image_folder_keeps_its_classes_and_channels(sources, tmp_path):
    rgb = load_images(_data(sources["image_folder"]), seed=0, dtype="float64")
    assert rgb.x_train.shape[1:] == (16, 16, 3)
    for part in ("train", "val", "test"):  # stratified: every class in every split
        assert set(getattr(rgb, f"y_{part}").tolist()) == {0, 1, 2}
    assert rgb.y_train.size + rgb.y_val.size + rgb.y_test.size == 36
    x = np.concatenate([rgb.x_train, rgb.x_val, rgb.x_test])
    assert 0.0 <= x.min() and x.max() <= 1.0
    # the red class is red (RGB order kept), and grayscale: true reads one channel
    red = rgb.x_train[rgb.y_train == 0].mean(axis=(0, 1, 2))
    assert red[0] > red[1] and red[0] > red[2]
    gray = load_images(_data({**sources["image_folder"], "grayscale": True, "image_size": 8}),
                       seed=0, dtype="float32")
    assert gray.x_train.shape[1:] == (8, 8, 1) and gray.x_train.dtype == np.float32
    np.testing.assert_array_equal(gray.y_test, rgb.y_test)  # the same seeded split


def test_an_image_folder_reads_only_the_limited_images(sources, monkeypatch):
    from xrisk.datasets import image_folder

    read = []
    real = image_folder.read_image

    def counting(path, **options):
        read.append(path)
        return real(path, **options)

    monkeypatch.setattr(image_folder, "read_image", counting)
    splits = load_images(_data({**sources["image_folder"], "limit": 30}), seed=0,
                         dtype="float64")
    assert len(read) == 30 == splits.y_train.size + splits.y_val.size + splits.y_test.size


def test_a_medmnist_file_keeps_its_own_splits(sources, tmp_path):
    splits = load_images(_data(sources["medmnist"]), seed=0, dtype="float64")
    assert (splits.y_train.size, splits.y_val.size, splits.y_test.size) == (24, 6, 9)
    with np.load(sources["medmnist"]["path"]) as archive:  # the file's order, scaled
        np.testing.assert_array_equal(splits.x_val, archive["val_images"] / np.float32(255))
        np.testing.assert_array_equal(splits.y_test, archive["test_labels"][:, 0])
    gray = load_images(_data({"name": "medmnist", "path": str(_npz(
        tmp_path / "gray.npz", {"train": 12, "val": 3, "test": 3}, gray=True))}), seed=0,
        dtype="float64")
    assert gray.x_train.shape == (12, 16, 16, 1)
    # a file with a training split only: test, then validation carved from it, stratified
    carved = load_images(_data({"name": "medmnist", "path": str(_npz(
        tmp_path / "train-only.npz", {"train": 30})), "test_size": 0.3,
        "validation_size": 0.2}), seed=0, dtype="float64")
    assert (carved.y_train.size, carved.y_val.size, carved.y_test.size) == (16, 5, 9)
    assert set(carved.y_val.tolist()) == {0, 1, 2}


def test_a_gray_npz_trains_a_one_channel_encoder(tmp_path):
    path = _npz(tmp_path / "gray.npz", {"train": 12, "val": 3, "test": 6}, gray=True)
    recipe = load_recipe({**TINY, "epochs": 1, "data": {"name": "medmnist",
                                                        "path": str(path)},
                          "method": "infonce"})
    result = run_seed(recipe, 0, tmp_path / "run", progress=False)
    assert np.isfinite(result.history[0]["loss"])
    with np.load(tmp_path / "run" / "checkpoints" / "epoch-0000.npz") as checkpoint:
        assert checkpoint["model/encoder.conv0/kernel"].shape == (3, 3, 1, 4)  # (kh, kw, C, out)


def test_a_binary_image_folder_reads_rgb_on_request(sources):
    from xrisk.runner.data import load_splits

    section = {**sources["image_folder"], "positive_classes": ["class2"]}
    binary = parse_recipe({"data": section, "method": "soap"}).data
    gray = load_splits(binary, seed=0, dtype="float64", images=True)
    assert gray.x_train.shape[1:] == (16, 16, 1)  # the binary task's default, as before
    rgb = load_splits(parse_recipe({"data": {**section, "grayscale": False},
                                    "method": "soap"}).data,
                      seed=0, dtype="float64", images=True)
    assert rgb.x_train.shape[1:] == (16, 16, 3)
    assert set(rgb.y_train.tolist()) == {0, 1}


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: {"name": "image_folder", "path": str(_folder(tmp / "one", classes=1))},
     r"received images of 1 class.*expected two or more classes.*Fix"),
    (lambda tmp: {"name": "image_folder", "path": str(_folder(tmp / "few", per_class=2))},
     r"images per class \{0: 2, 1: 2, 2: 2\} cannot be split.*Fix: add images"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "nokeys.npz", {"val": 6}))},
     r"has no \['train_images', 'train_labels'\].*expected MedMNIST's.*Fix"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "rgba.npz", {"train": 6}, train_images=np.zeros((6, 16, 16, 4), np.uint8)))},
     r"images of shape \(6, 16, 16, 4\); expected \(N, H, W\) grayscale or \(N, H, W, 3\)"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "flat.npz", {"train": 6}, train_images=np.zeros((6, 256), np.uint8)))},
     r"images of shape \(6, 256\); expected"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "multi.npz", {"train": 6}, train_labels=np.zeros((6, 14), np.int64)))},
     r"train_labels of shape \(6, 14\); expected one class label per image.*Fix"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "negative.npz", {"train": 6},
        train_labels=np.array([-1, 0, 1, -1, 0, 1]).reshape(-1, 1)))},
     r"class labels \[-1, 0, 1\]; expected class numbers >= 0"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "scaled.npz", {"train": 6},
        train_images=np.full((6, 16, 16, 3), 200.0, np.float32)))},
     r"image values in \[200, 200\]; expected uint8 pixels \(0-255\) or floats in \[0, 1\]"),
    (lambda tmp: {"name": "medmnist", "path": str(_npz(
        tmp / "sizes.npz", {"train": 12, "val": 3},
        val_images=np.zeros((3, 8, 8, 3), np.uint8)))},
     r"images of shapes .*expected one \(H, W\[, C\]\) for every split"),
])
def test_bad_image_data_names_what_was_received_and_the_fix(tmp_path, make, message):
    with pytest.raises(ValueError, match=message) as caught:
        load_images(_data(make(tmp_path)), seed=0, dtype="float64")
    assert "Fix" in str(caught.value)


@pytest.mark.parametrize(("data", "message"), [
    ({"name": "image_folder", "path": "x", "positive_classes": ["a"]},
     r"data.positive_classes: received \['a'\] for a contrastive task"),
    ({"name": "medmnist", "path": "x.npz", "imratio": 0.1},
     "data.imratio: received 0.1 for a contrastive task"),
    ({"name": "medmnist", "path": "x.npz", "grayscale": True},
     "data.grayscale: received True for data set 'medmnist'"),
    ({"name": "chexpert", "path": "x.csv"}, "task: received 'contrastive'"),
])
def test_a_bad_contrastive_data_section_names_the_field_and_the_fix(data, message):
    with pytest.raises(RecipeError, match=message) as caught:
        parse_recipe({"data": data, "method": "sogclr"})
    assert "Fix" in str(caught.value)
    # a binary image folder still needs its positive classes
    with pytest.raises(RecipeError, match="data.positive_classes: received None"):
        parse_recipe({"data": {"name": "image_folder", "path": "x"}, "method": "soap"})


def test_the_documented_recipe_validates():
    import yaml

    page = (Path(__file__).parent.parent / "docs" / "runner.md").read_text()
    section = page.split("### Contrastive learning on your own images", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    recipe = parse_recipe(yaml.safe_load(block))
    assert recipe.task == "contrastive" and recipe.data.name == "image_folder"
    assert recipe.optimizer.name == "LARS" and recipe.model.name == "conv_encoder"
