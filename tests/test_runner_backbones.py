"""Larger backbones in the runner: ``model.name: densenet121`` (torch: torchvision; TensorFlow:
keras.applications) and ``resnet18`` (torch only) on binary and multi-label image data.

torchvision cannot be imported on the CPU-only torch these tests run on, so the torch session's
backbone path runs against a small stand-in ``torchvision.models`` (the same module names
``fc`` / ``classifier`` and layer types as torchvision's); the real torchvision is tried where
it imports. Keras's DenseNet121 is real: its weights, BatchNorm statistics included, round-trip
through a checkpoint here, and an interrupted run resuming bit-exactly is the ``slow`` test
(tracing DenseNet121's training step costs about 15 s a run on CPU); the session's resume logic
runs fast on a small Keras stand-in with Keras's own BatchNorm."""

from __future__ import annotations

import random
import re
import sys
import types
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")

import torch  # noqa: E402,I001  (before TensorFlow: tests/conftest.py)
from torch import nn  # noqa: E402

from xrisk.runner import load_recipe  # noqa: E402
from xrisk.runner.engine import BinaryTask, run_seed  # noqa: E402
from xrisk.runner.recipe import RecipeError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class _Interrupt(Exception):
    pass


def _npz(path: Path, *, size: int, labels: int = 0, counts=(16, 8, 8)) -> Path:
    """A MedMNIST-style file of gray ``size`` x ``size`` images: classes 0/1 in turn, or
    ``labels`` 0/1 columns per image (a multi-label file such as ChestMNIST)."""
    rng = np.random.default_rng(3)
    arrays = {}
    for split, count in zip(("train", "val", "test"), counts):
        arrays[f"{split}_images"] = rng.integers(0, 256, (count, size, size), dtype=np.uint8)
        arrays[f"{split}_labels"] = ((rng.random((count, labels)) < 0.5).astype(np.uint8)
                                     if labels else (np.arange(count) % 2).reshape(-1, 1))
    np.savez(path, **arrays)
    return path


def _run_twice_interrupted(recipe, tmp_path, stop=(2, 1)):
    """An uninterrupted run and one stopped at (epoch, batch) then resumed; both results."""
    whole = run_seed(recipe, 0, tmp_path / "whole", progress=False)

    def on_batch(epoch, batch, loss):
        if (epoch, batch) == stop:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        run_seed(recipe, 0, tmp_path / "part", progress=False, on_batch=on_batch)
    resumed = run_seed(recipe, 0, tmp_path / "part", resume=True, progress=False)
    return whole, resumed


def _same_checkpoints(tmp_path, epoch):
    name = f"epoch-{epoch:04d}.npz"
    with np.load(tmp_path / "part" / "checkpoints" / name) as got, \
            np.load(tmp_path / "whole" / "checkpoints" / name) as want:
        assert got.files == want.files
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        return {key: want[key] for key in want.files}


# -- recipes --------------------------------------------------------------------------------

def _data(**changes):
    return {"name": "image_folder", "path": "images", "positive_classes": ["tumour"],
            "image_size": 64, **changes}


@pytest.mark.parametrize(("raw", "words"), [
    ({"method": "pesg", "data": {"name": "breast_cancer"}, "model": {"name": "densenet121"}},
     ["model.name: received 'densenet121'", "'breast_cancer'", "expected image data",
      "Fix: use model.name mlp"]),
    ({"method": "pesg", "data": _data(), "model": {"name": "densenet121"}, "framework": "jax"},
     ["model.name: received 'densenet121' with framework 'jax'",
      "expected framework 'torch' or 'tensorflow'",
      "Fix: use model.name resnet20 or conv_encoder with framework jax",
      "or set framework: torch or tensorflow"]),
    ({"method": "pesg", "data": _data(), "model": {"name": "resnet18"}, "framework": "jax"},
     ["model.name: received 'resnet18' with framework 'jax'", "expected framework 'torch'",
      "Fix: use model.name resnet20 or conv_encoder", "set framework: torch"]),
    ({"method": "pesg", "data": _data(), "model": {"name": "resnet18"},
      "framework": "tensorflow"},
     ["model.name: received 'resnet18' with framework 'tensorflow'",
      "expected framework 'torch'", "Fix: use model.name densenet121 or resnet20",
      "set framework: torch"]),
    ({"method": "pesg", "data": _data(image_size=28), "model": {"name": "densenet121"}},
     ["data.image_size: received 28 with model.name 'densenet121'",
      "expected images of at least 32x32", "Fix: set data.image_size to at least 32"]),
    ({"method": "pesg", "data": {"name": "digits"}, "model": {"name": "densenet121"}},
     ["data.name: received 'digits' (8x8 images)", "at least 32x32",
      "Fix: use model.name resnet20 or conv_encoder"]),
    ({"method": "ml_soap", "data": {"name": "tox21"}, "model": {"name": "densenet121"}},
     ["model.name: received 'densenet121'", "'tox21'", "expected image data", "Fix"]),
    ({"method": "sogclr", "data": {"name": "digits"}, "model": {"name": "densenet121"}},
     ["model.name: received 'densenet121' for a contrastive task", "'conv_encoder'", "Fix"]),
    ({"method": "pesg", "data": _data(), "model": {"name": "densenet"}},
     ["model.name: received 'densenet'", "did you mean 'densenet121'"]),
])
def test_bad_backbone_recipes_name_the_field_and_the_fix(raw, words):
    with pytest.raises(RecipeError) as error:
        load_recipe(raw)
    for word in words:
        assert word in str(error.value), (word, str(error.value))


@pytest.mark.parametrize(("framework", "model", "data", "method"), [
    ("torch", "resnet18", {"name": "digits"}, "pesg"),  # ResNet-18 takes small images
    ("torch", "densenet121", _data(), "soap"),
    ("tensorflow", "densenet121", _data(), "pesg"),
    ("tensorflow", "densenet121", {"name": "chexpert", "path": "train.csv",
                                   "image_size": 224}, "ml_pesg"),
    ("torch", "densenet121", {"name": "medmnist", "path": "chest.npz"}, "ml_bce"),
])
def test_backbones_are_named_in_binary_and_multilabel_image_recipes(framework, model, data,
                                                                   method):
    recipe = load_recipe({"method": method, "framework": framework, "data": data,
                          "model": {"name": model}})
    assert recipe.model.name == model and recipe.task in ("binary", "multilabel")
    assert load_recipe(recipe.to_dict()).to_dict() == recipe.to_dict()  # resume, tune


def test_a_medmnist_file_too_small_for_densenet121_is_refused_when_read(tmp_path):
    # the file's image size is known only once it is read: before any model is built
    path = _npz(tmp_path / "m.npz", size=28)
    recipe = load_recipe({"method": "pesg", "model": {"name": "densenet121"},
                          "data": {"name": "medmnist", "path": str(path),
                                   "positive_classes": ["1"]}})
    with pytest.raises(RecipeError, match=r"model.name: received 'densenet121' with data.name "
                       r"'medmnist' holding 28x28 images; expected images of at least 32x32"
                       r".*Fix: use model.name resnet20 or conv_encoder"):
        BinaryTask(recipe, 0)


def test_the_documented_backbone_recipe_validates():
    import yaml

    page = (ROOT / "docs" / "runner.md").read_text()
    block = re.search(r"```yaml\n(# chexpert_densenet121\.yaml.*?)```", page, re.S)
    assert block is not None, "docs/runner.md lacks the chexpert_densenet121.yaml recipe"
    recipe = load_recipe(yaml.safe_load(block.group(1)))
    assert (recipe.model.name, recipe.framework, recipe.task) == (
        "densenet121", "tensorflow", "multilabel")


class _WeightsOnly:
    """A session reduced to its weights (what :func:`reinit_output_layer` uses)."""

    def __init__(self, weights):
        self.held = dict(weights)

    def weights(self):
        return dict(self.held)

    def set_weights(self, weights):
        self.held = dict(weights)


@pytest.mark.parametrize("last", ["fc", "classifier", "predictions"])
def test_reinit_last_layer_redraws_a_backbones_output_layer(last):
    from xrisk.runner.engine import reinit_output_layer

    rng = np.random.default_rng(0)
    weights = {"conv1/kernel": rng.standard_normal((3, 3, 3, 4)), "bn1/mean": np.ones(4),
               f"{last}/kernel": rng.standard_normal((4, 2)), f"{last}/bias": np.ones(2)}
    session = _WeightsOnly(weights)
    reinit_output_layer(session, np.random.default_rng(1), "float64")
    new = session.held
    assert new[f"{last}/kernel"].shape == (4, 2) and not np.array_equal(
        new[f"{last}/kernel"], weights[f"{last}/kernel"])
    np.testing.assert_array_equal(new[f"{last}/bias"], np.zeros(2))  # Glorot, zero bias
    for key in ("conv1/kernel", "bn1/mean"):
        np.testing.assert_array_equal(new[key], weights[key])


# -- torch: a stand-in torchvision ------------------------------------------------------------

class _TinyResNet(nn.Module):
    """torchvision's ResNet-18 in miniature: ``conv1``/``bn1`` over 3 channels, ``fc``."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn1(self.conv1(x))).mean(dim=(2, 3)))


class _TinyDenseNet(nn.Module):
    """torchvision's DenseNet121 in miniature: ``features.conv0``/``norm0``, ``classifier``."""

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(OrderedDict(
            conv0=nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False), norm0=nn.BatchNorm2d(4)))
        self.classifier = nn.Linear(4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.relu(self.features(x)).mean(dim=(2, 3)))


@pytest.fixture
def torchvision_stand_in(monkeypatch):
    """``torchvision.models.resnet18`` / ``densenet121`` as small stand-ins, recording the
    calls (torchvision itself does not import on this CPU torch)."""
    calls = []

    def maker(cls):
        def build(*, weights=None, num_classes=1000):
            calls.append((cls.__name__, weights, num_classes))
            return cls(num_classes)
        return build

    models = types.ModuleType("torchvision.models")
    models.resnet18 = maker(_TinyResNet)
    models.densenet121 = maker(_TinyDenseNet)
    package = types.ModuleType("torchvision")
    package.models = models
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.models", models)
    return calls


def test_torch_backbone_is_seeded_from_the_run_and_leaves_the_global_generator(
        torchvision_stand_in):
    from xrisk.torch.models import backbone, model_weights

    state = torch.get_rng_state()
    first = model_weights(backbone("resnet18", 2, seed=5, dtype="float64"))
    assert torch.equal(torch.get_rng_state(), state)  # built under fork_rng
    again = model_weights(backbone("resnet18", 2, seed=5, dtype="float64"))
    other = model_weights(backbone("resnet18", 2, seed=6, dtype="float64"))
    assert all(np.array_equal(first[key], again[key]) for key in first)
    assert not np.array_equal(first["conv1/kernel"], other["conv1/kernel"])
    assert first["fc/kernel"].shape == (4, 2) and first["fc/kernel"].dtype == np.float64
    assert torchvision_stand_in[0] == ("_TinyResNet", None, 2)  # no pretrained download


def test_an_interrupted_torch_backbone_run_resumes_bit_exactly(torchvision_stand_in, tmp_path):
    # gray digits repeated to ResNet-18's three channels (the stand-in's conv takes 3), a
    # cross-entropy warm-up, a new ``fc`` layer, then PESG with a proximal stage
    recipe = load_recipe({"method": "pesg", "dtype": "float64", "epochs": 3,
                          "model": {"name": "resnet18"},
                          "data": {"name": "digits", "limit": 80},
                          "sampler": {"batch_size": 16},
                          "schedule": {"warmup_epochs": 1, "reinit_last_layer": True,
                                       "decay_at": [0.5]},
                          "evaluation": {"early_stopping": False}})
    whole, resumed = _run_twice_interrupted(recipe, tmp_path)
    assert [row["phase"] for row in whole.history] == ["warmup", "main", "main"]
    assert resumed.history == whole.history
    arrays = _same_checkpoints(tmp_path, 2)
    assert arrays["model/conv1/kernel"].shape == (3, 3, 3, 4)  # three input channels
    assert not np.array_equal(arrays["model/bn1/mean"], np.zeros(4))  # running statistics


def test_a_multilabel_torch_densenet121_run_has_one_logit_per_label(torchvision_stand_in,
                                                                     tmp_path):
    path = _npz(tmp_path / "chest.npz", size=32, labels=3)
    recipe = load_recipe({"method": "ml_soap", "dtype": "float64", "epochs": 1,
                          "model": {"name": "densenet121"},
                          "data": {"name": "medmnist", "path": str(path)},
                          "sampler": {"batch_size": 8}})
    result = run_seed(recipe, 0, tmp_path / "run", progress=False)
    assert torchvision_stand_in[0] == ("_TinyDenseNet", None, 3)
    with np.load(result.run_dir / "predictions.npz") as predictions:
        assert predictions["test_logits"].shape == (8, 3)
    with np.load(result.run_dir / "checkpoints" / "epoch-0000.npz") as arrays:
        assert arrays["model/classifier/kernel"].shape == (4, 3)
        assert arrays["model/features.norm0/var"].dtype == np.float64


def test_the_torch_backbones_with_torchvision_itself(tmp_path):
    try:
        import torchvision  # noqa: F401
    except Exception as error:  # not installed, or no build for this torch (CPU torch here)
        pytest.skip(f"torchvision does not import here ({error!r}); the stand-in tests cover "
                    "the session")
    recipe = load_recipe({"method": "pesg", "epochs": 1, "model": {"name": "resnet18"},
                          "data": {"name": "digits", "limit": 40},
                          "sampler": {"batch_size": 16}})
    result = run_seed(recipe, 0, tmp_path / "run", progress=False)
    assert np.isfinite(result.history[0]["loss"])


# -- TensorFlow: Keras's DenseNet121 --------------------------------------------------------

def test_keras_densenet121_weights_round_trip_through_a_checkpoint(tmp_path):
    import tensorflow as tf

    from xrisk.runner.checkpoint import load_checkpoint, save_checkpoint
    from xrisk.tensorflow.models import backbone, load_weights, model_weights

    state = random.getstate()
    trained = backbone("densenet121", 2, input_shape=(32, 32, 3), seed=0, dtype="float64")
    assert random.getstate() == state  # Keras's seeds come from `random`, restored after
    assert trained.layers[-1].kernel.dtype == tf.float64
    x = np.random.default_rng(0).standard_normal((4, 32, 32, 3))
    trained(x, training=True)  # moves every BatchNorm's moving statistics
    weights = model_weights(trained)
    assert len(weights) == len(trained.weights) == 606  # the statistics are weights
    assert not np.array_equal(weights["conv1_bn/mean"], np.zeros_like(weights["conv1_bn/mean"]))
    save_checkpoint(tmp_path, 0, {f"model/{k}": v for k, v in weights.items()}, {})
    arrays, _ = load_checkpoint(tmp_path)
    fresh = backbone("densenet121", 2, input_shape=(32, 32, 3), seed=1, dtype="float64")
    load_weights(fresh, {k.partition("/")[2]: v for k, v in arrays.items()})
    restored = model_weights(fresh)
    for key, value in weights.items():
        np.testing.assert_array_equal(restored[key], value, err_msg=key)
    np.testing.assert_array_equal(np.array(fresh(x, training=False)),
                                  np.array(trained(x, training=False)))


def _keras_stand_in(calls):
    """A small Keras model in DenseNet121's terms (Keras's own BatchNorm, ``predictions``),
    built as :func:`xrisk.tensorflow.models.backbone` builds it (seeded, in ``dtype``)."""
    import keras

    def build(name, num_outputs=1, *, input_shape, seed=None, dtype="float32"):
        calls.append((name, num_outputs, tuple(input_shape), seed, dtype))
        inputs = keras.Input(input_shape, dtype=dtype)
        x = keras.layers.Conv2D(4, 3, strides=2, use_bias=False, dtype=dtype, name="conv1_conv",
                                kernel_initializer=keras.initializers.GlorotUniform(seed))(inputs)
        x = keras.layers.BatchNormalization(dtype=dtype, name="conv1_bn")(x)
        x = keras.layers.GlobalAveragePooling2D(dtype=dtype)(keras.layers.ReLU(dtype=dtype)(x))
        outputs = keras.layers.Dense(num_outputs, dtype=dtype, name="predictions",
                                     kernel_initializer=keras.initializers.GlorotUniform(seed))(x)
        return keras.Model(inputs, outputs)

    return build


def test_an_interrupted_tensorflow_backbone_run_resumes_bit_exactly(monkeypatch, tmp_path):
    import xrisk.tensorflow.runner as tf_runner

    calls = []
    monkeypatch.setattr(tf_runner, "backbone", _keras_stand_in(calls))
    path = _npz(tmp_path / "m.npz", size=32, counts=(48, 16, 16))
    recipe = load_recipe({"method": "pesg", "dtype": "float64", "epochs": 3,
                          "framework": "tensorflow", "model": {"name": "densenet121"},
                          "data": {"name": "medmnist", "path": str(path),
                                   "positive_classes": ["1"]},
                          "sampler": {"batch_size": 16},
                          "schedule": {"warmup_epochs": 1, "reinit_last_layer": True,
                                       "decay_at": [0.5]},
                          "evaluation": {"early_stopping": False}})
    whole, resumed = _run_twice_interrupted(recipe, tmp_path)
    # gray images go to the backbone's three channels; its seed is the run's
    assert calls[0] == ("densenet121", 1, (32, 32, 3), 0, "float64")
    assert resumed.history == whole.history
    arrays = _same_checkpoints(tmp_path, 2)
    assert not np.array_equal(arrays["model/conv1_bn/mean"], np.zeros(4))


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_chexpert_images_read_per_batch_reach_a_backbone_as_rgb(framework, monkeypatch,
                                                                tmp_path, request):
    # the paper's setup in miniature: the five CheXpert tasks, gray images read from disk
    # batch by batch (LazyImages), repeated to a backbone's three channels in both the
    # training step and prediction
    pytest.importorskip("PIL")
    from tests.test_runner_multilabel_chexpert import _write

    if framework == "torch":
        calls = request.getfixturevalue("torchvision_stand_in")
    else:
        import xrisk.tensorflow.runner as tf_runner

        calls = []
        monkeypatch.setattr(tf_runner, "backbone", _keras_stand_in(calls))
    rng = np.random.default_rng(7)
    train = _write(tmp_path, "train", patients=8, views=2, suffix="png", rng=rng)
    valid = _write(tmp_path, "valid", patients=4, views=2, suffix="jpg", rng=rng)
    recipe = load_recipe({"method": "ml_pesg", "framework": framework, "epochs": 1,
                          "model": {"name": "densenet121"}, "sampler": {"batch_size": 4},
                          "data": {"name": "chexpert", "path": str(train),
                                   "test_path": str(valid), "image_root": str(tmp_path),
                                   "image_size": 32, "validation_size": 0.25}})
    result = run_seed(recipe, 0, tmp_path / "run", progress=False)
    assert len(calls) == 1 and 5 in calls[0]  # one logit per task
    with np.load(result.run_dir / "predictions.npz") as predictions:
        assert predictions["test_logits"].shape == (8, 5)
        assert np.isfinite(predictions["test_logits"]).all()


@pytest.mark.slow
def test_an_interrupted_keras_densenet121_run_resumes_bit_exactly(tmp_path, request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("tracing DenseNet121's step three times takes minutes on CPU: run with "
                    "-m slow (the stand-in test covers the session's resume fast)")
    path = _npz(tmp_path / "m.npz", size=32)
    recipe = load_recipe({"method": "pesg", "epochs": 2, "framework": "tensorflow",
                          "model": {"name": "densenet121"},
                          "data": {"name": "medmnist", "path": str(path),
                                   "positive_classes": ["1"]},
                          "sampler": {"batch_size": 8},
                          "evaluation": {"early_stopping": False}})
    whole, resumed = _run_twice_interrupted(recipe, tmp_path, stop=(1, 1))
    assert resumed.history == whole.history
    arrays = _same_checkpoints(tmp_path, 1)
    assert arrays["model/conv1_conv/kernel"].shape == (7, 7, 3, 64)  # gray repeated to RGB
    assert "model/conv5_block16_2_conv/kernel" in arrays and "model/bn/var" in arrays
