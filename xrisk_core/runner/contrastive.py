"""Contrastive learning in the runner: SogCLR and InfoNCE on the conv encoder, judged by probes.

A contrastive recipe (``method: sogclr`` or ``infonce``; ``task: contrastive`` follows) trains
the conv encoder with its projection head (:func:`xrisk.runner.models.conv_encoder_weights`,
``model.widths`` and head ``model.hidden``) on two SimCLR views of every training image
(:mod:`xrisk.datasets.views`, settings in the recipe's ``views``), with LARS, the labels
unused. Each epoch the frozen encoder features (before the head) are judged on held-out
images by

- ``probe_accuracy``: a linear probe, scikit-learn's logistic regression on the standardized
  features of the training images, its accuracy on the validation (test) images;
- ``knn_accuracy``: a vote of the :data:`KNN_NEIGHBOURS` training images of highest cosine
  similarity.

Data (:func:`load_images`): the shipped digit images (``digits``, 8 x 8, or ``mnist_5k``,
28 x 28; ten classes); your own images in an ``image_folder`` (one sub-folder per class,
JPEG/PNG, listed without reading and read once after ``limit``; RGB unless
``data.grayscale``, resized to ``data.image_size``); or a ``medmnist`` npz (gray
(N, H, W) or RGB (N, H, W, 3) images, one class label per image). Every class is kept: the
classes judge the probes. The file's own splits are used where it has them; the rest is split
stratified (test, then validation) from the seed. The encoder takes the data's channels. RGB
images go through SimCLR's RGB view pipeline (:mod:`xrisk.datasets.views`: crop, flip,
colour jitter, grayscale); grayscale images go through it as three equal channels and come
back as one (every step keeps a gray image gray).

The step-size rule: under LARS, with the same learning rate, InfoNCE's gradient is about
1/(2 tau) times SogCLR's, and the parameters outside the trust ratio (biases, BatchNorm) take
that much larger steps; the runner therefore differentiates ``2 tau x InfoNCE`` (the reported
loss stays unscaled; ``loss.scale`` overrides it). docs/runner.md shows the measurement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .engine import Phase, _phase, loss_arguments, session_class
from .models import conv_encoder_weights
from .recipe import Recipe

__all__ = ["KNN_NEIGHBOURS", "ContrastiveTask", "ImageSplits", "knn_accuracy", "load_images",
           "loss_scale", "probe_accuracy"]

#: Neighbours of the kNN vote (cosine similarity of the features).
KNN_NEIGHBOURS = 20


@dataclass(frozen=True)
class ImageSplits:
    """Images (N, H, W, C) with values in [0, 1], in the recipe's dtype, and class labels
    (N,) int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_images(section: Any, *, seed: int, dtype: str) -> ImageSplits:
    """The images (N, H, W, C), values in [0, 1], and classes of ``section``: ``digits`` or
    ``mnist_5k`` (C = 1), ``image_folder`` or ``medmnist`` (C = 1 or 3), ``limit`` applied
    (a seeded subset; per split of a MedMNIST file), split stratified (test, then validation
    from the rest) where the data has no splits of its own.

    Raises
    ------
    ValueError
        Images that are not (N, H, W) or (N, H, W, 3), or not in [0, 1]; fewer than two
        classes; a MedMNIST file without ``train_images`` / ``train_labels``, or with several
        labels per image; too few images of a class to split; each with the fix.

    Examples
    --------
    >>> from xrisk.runner.recipe import parse_recipe
    >>> from xrisk.runner.contrastive import load_images
    >>> recipe = parse_recipe({"data": {"name": "digits", "limit": 300}, "method": "sogclr"})
    >>> splits = load_images(recipe.data, seed=0, dtype="float32")
    >>> splits.x_train.shape[1:], len(set(splits.y_train.tolist()))
    ((8, 8, 1), 10)
    """
    readers = {"digits": _digit_splits, "mnist_5k": _digit_splits,
               "image_folder": _folder_splits, "medmnist": _medmnist_splits}
    if section.name not in readers:
        raise ValueError(f"data.name: received {section.name!r} for a contrastive run; "
                         f"expected one of {list(readers)}. Fix: name one of those.")
    parts = readers[section.name](section, seed)
    cast = np.dtype(dtype)
    return ImageSplits(*(np.ascontiguousarray(a, dtype=cast if a.ndim > 1 else np.int64)
                         for part in parts for a in part))


def _digit_splits(section: Any, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The shipped digits (8 x 8) or MNIST-5k (28 x 28) images and their ten classes."""
    from .data import _limited, _split

    if section.name == "digits":
        import sklearn.datasets

        bunch = sklearn.datasets.load_digits()
        x = np.asarray(bunch.data, dtype=np.float64).reshape(-1, 8, 8) / 16.0
        y = np.asarray(bunch.target, dtype=np.int64)
    else:
        from xrisk.datasets import load_mnist_5k

        x, y = load_mnist_5k(seed=0)
    rows = _limited(section, y.size, seed)
    if rows is not None:
        x, y = x[rows], y[rows]
    return _split(section, x[..., None], y, seed)


def _channels_last(x: np.ndarray, where: str) -> np.ndarray:
    """Images (N, H, W) or (N, H, W, 1 or 3) as (N, H, W, C), checked to lie in [0, 1]."""
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] not in (1, 3) or 0 in x.shape[1:]:
        raise ValueError(f"{where}: images of shape {x.shape}; expected (N, H, W) grayscale "
                         "or (N, H, W, 3) RGB images, channels last. Fix: store gray images "
                         "without a channel axis and colour ones as RGB (drop an alpha "
                         "channel, move a channels-first axis to the end).")
    if x.size and (np.isnan(x).any() or x.min() < 0.0 or x.max() > 1.0):
        raise ValueError(f"{where}: image values in [{np.nanmin(x):g}, {np.nanmax(x):g}]; "
                         "expected uint8 pixels (0-255) or floats in [0, 1] (the colour "
                         "jitter works on [0, 1]). Fix: store uint8, or divide by 255.")
    return x


def _check_classes(y: np.ndarray, where: str) -> None:
    """Two or more classes, numbered from 0 (the kNN vote counts votes per class number)."""
    classes = np.unique(y)
    if classes.size and classes[0] < 0:
        raise ValueError(f"{where}: class labels {classes[:10].tolist()}; expected class "
                         "numbers >= 0. Fix: number the classes 0, 1, 2, ...")
    if classes.size < 2:
        raise ValueError(f"{where}: received images of {classes.size} class "
                         f"({classes.tolist()}); expected two or more classes (a contrastive "
                         "run's linear probe and kNN vote are judged on them). Fix: give "
                         "images of several classes (one sub-folder per class).")


def _stratified(split: Callable[[], Any], where: str, y: np.ndarray, section: Any) -> Any:
    """``split()`` (a stratified split), its scikit-learn error made a recipe error."""
    try:
        return split()
    except ValueError as error:
        classes, counts = np.unique(y, return_counts=True)
        per_class = {int(k): int(v) for k, v in zip(classes, counts, strict=True)}
        raise ValueError(
            f"{where}: images per class {per_class} cannot be split stratified with "
            f"data.test_size {section.test_size} and "
            f"data.validation_size {section.validation_size} ({error}); expected enough "
            "images of every class for each split. Fix: add images (or raise data.limit), or "
            "lower data.test_size / data.validation_size.") from None


def _folder_splits(section: Any, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """An image folder's classes, read (only the ``limit`` rows), split stratified."""
    from xrisk.datasets import ImageFolder, IndexedDataset

    from .data import _images, _limited, _split

    folder = ImageFolder(section.path, image_size=section.image_size,
                         grayscale=bool(section.grayscale))
    where = f"data.path {section.path!r} (classes {list(folder.classes)})"
    _check_classes(folder.targets, where)
    rows = _limited(section, folder.targets.size, seed)
    y = folder.targets if rows is None else folder.targets[rows]
    _check_classes(y, f"{where}, data.limit {section.limit}")
    x = _channels_last(_images(IndexedDataset(folder, folder.targets, inputs=0), rows), where)
    return _stratified(lambda: _split(section, x, y, seed), where, y, section)


def _medmnist_splits(section: Any, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """A MedMNIST npz's own train / val / test splits (``limit`` per split); a split the file
    lacks is carved from its training images, stratified."""
    from sklearn.model_selection import train_test_split

    from xrisk.datasets import load_medmnist_npz

    from .data import _limited

    # train is required (load_medmnist_npz names what is missing); val and test are carved
    # from it where the file has neither their images nor their labels
    loaded = {"train": load_medmnist_npz(section.path, "train")}
    with np.load(section.path, allow_pickle=False) as archive:
        files = set(archive.files)
    for split in ("val", "test"):
        if {f"{split}_images", f"{split}_labels"} & files:
            loaded[split] = load_medmnist_npz(section.path, split)
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split, (x, y) in loaded.items():
        where = f"data.path {section.path!r}, {split}_images"
        if y.ndim != 1:
            raise ValueError(f"data.path {section.path!r}: {split}_labels of shape "
                             f"{y.shape}; expected one class label per image (N,) or (N, 1) "
                             "for a contrastive run's probe. Fix: use a single-label file "
                             "(multi-label sets such as ChestMNIST are not supported here).")
        rows = _limited(section, y.size, seed)
        if rows is not None:
            x, y = x[rows], y[rows]
        parts[split] = (_channels_last(x.astype(np.float64), where), y)
    shapes = {split: x.shape[1:] for split, (x, _) in parts.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"data.path {section.path!r}: images of shapes {shapes} per split; "
                         "expected one (H, W[, C]) for every split. Fix: store the splits "
                         "at one size and with the same channels.")
    where = f"data.path {section.path!r}, train split"
    _check_classes(parts["train"][1], where)
    x, y = parts["train"]
    for split, size in (("test", section.test_size), ("val", section.validation_size)):
        if split in parts:
            continue
        if size == 0:
            parts[split] = (x[:0], y[:0])
            continue
        x, x_held, y, y_held = _stratified(
            functools.partial(train_test_split, x, y, test_size=size, stratify=y,
                              random_state=seed), where, y, section)
        parts[split] = (x_held, y_held)
    parts["train"] = (x, y)
    return [parts[split] for split in ("train", "val", "test")]


def probe_accuracy(train: np.ndarray, y_train: np.ndarray, *held: np.ndarray
                   ) -> list[float]:
    """Accuracies of a logistic regression fitted once on the standardized ``train``
    features (scikit-learn's L-BFGS, deterministic), on each held-out pair
    ``features, labels`` of ``held``.

    >>> import numpy as np
    >>> x = np.array([[0.0], [0.1], [1.0], [1.1]])
    >>> probe_accuracy(x, np.array([0, 0, 1, 1]), x[:2], np.array([0, 1]))
    [0.5]
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(train)
    probe = LogisticRegression(max_iter=1000).fit(scaler.transform(train), y_train)
    return [float(probe.score(scaler.transform(x), y)) if len(y) else float("nan")
            for x, y in zip(held[::2], held[1::2], strict=True)]


def knn_accuracy(train: np.ndarray, y_train: np.ndarray, *held: np.ndarray,
                 k: int = KNN_NEIGHBOURS) -> list[float]:
    """Accuracies of a majority vote of the ``k`` training features of highest cosine
    similarity (ties: the lowest class), on each held-out pair ``features, labels``.

    ``k`` is at most the size of the smallest class in ``train``: with more neighbours than a
    class has, the rest of the vote goes to other classes, and on a small image folder
    (a few images per class) the vote then says little about the features.

    >>> import numpy as np
    >>> x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> knn_accuracy(x, np.array([0, 0, 1, 1]), x, np.array([0, 0, 1, 1]), k=1)
    [1.0]
    """
    def unit(a: np.ndarray) -> np.ndarray:
        a = a.astype(np.float64)
        return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)

    counts = np.bincount(y_train)
    k = max(1, min(k, int(counts[counts > 0].min())))
    out = []
    for x, y in zip(held[::2], held[1::2], strict=True):
        if not len(y):
            out.append(float("nan"))
            continue
        nearest = np.argsort(-(unit(x) @ unit(train).T), axis=1, kind="stable")[:, :k]
        votes = np.zeros((len(x), int(y_train.max()) + 1))
        np.add.at(votes, (np.arange(len(x))[:, None], y_train[nearest]), 1.0)
        out.append(float(np.mean(votes.argmax(axis=1) == y)))
    return out


def loss_scale(recipe: Recipe) -> float:
    """The factor of the differentiated loss: ``loss.scale`` when set; else 2 tau for
    InfoNCE (the step-size rule against SogCLR under LARS), 1 for the others.

    >>> from xrisk.runner.recipe import parse_recipe
    >>> loss_scale(parse_recipe({"data": {"name": "digits"}, "method": "infonce"}))
    0.2
    """
    if recipe.loss.scale is not None:
        return float(recipe.loss.scale)
    if recipe.loss.name == "InfoNCELoss":
        return 2.0 * float(recipe.loss.options.get("tau", 0.1))
    return 1.0


class ContrastiveTask:
    """Contrastive learning in :func:`xrisk.runner.engine.run_seed`'s loop: random batches of
    training indices with the view parameters of both views, probes on held-out images."""

    reinit_stream = 3  # unused: a contrastive run has no warm-up

    def __init__(self, recipe: Recipe, seed: int) -> None:
        from xrisk.datasets.views import SimCLRAugment
        from xrisk.samplers import RandomSampler

        self.recipe, self.seed = recipe, seed
        self.splits = splits = load_images(recipe.data, seed=seed, dtype=recipe.dtype)
        self.augment = SimCLRAugment(**recipe.views)
        height, width = splits.x_train.shape[1:3]
        self.shape = (height, width)
        weights = conv_encoder_weights(in_channels=splits.x_train.shape[-1],
                                       widths=recipe.model.widths,
                                       projection=recipe.model.hidden, seed=seed,
                                       dtype=recipe.dtype)
        self.session = session_class(recipe.framework, "ContrastiveSession")(
            splits.x_train, weights, dtype=recipe.dtype, seed=seed,
            size=self.augment.size or self.shape)
        main = _phase("main", recipe.loss.name, dict(recipe.loss.options),
                      recipe.optimizer.name, dict(recipe.optimizer.options))
        self.warmup: Phase | None = None
        self.main = Phase(**{**main.__dict__, "loss_scale": loss_scale(recipe)})
        self.sampler = RandomSampler(splits.y_train.size, recipe.sampler.batch_size,
                                     seed=seed)
        self.names = list(dict.fromkeys([*recipe.evaluation.metrics, recipe.metric]))
        self._test: dict[str, float] | None = None

    def start(self, phase: Phase) -> None:
        self.session.start(phase, loss_arguments(phase, self.splits.y_train.size))

    def decay(self, factor: float) -> None:
        self.session.decay(factor)

    def batches(self, phase: Phase, epoch: int) -> Iterator[dict[str, Any]]:
        from xrisk.datasets.views import simclr_view_params

        cast = np.dtype(self.recipe.dtype)
        for index in self.sampler:
            views = [{k: v.astype(cast) for k, v in simclr_view_params(
                index, *self.shape, seed=self.seed, epoch=epoch, view=view,
                augment=self.augment).items()} for view in (0, 1)]
            yield {"index": index, "views": views}

    def evaluate(self, split: str) -> dict[str, float]:
        if split == "test" and self._test is not None:  # computed with the validation
            test, self._test = self._test, None
            return test
        validation, test, _ = self._both()
        if split == "val":
            self._test = test
            return validation
        return test

    def _both(self) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
        """Validation and test metrics (one probe fitted for both) and the features."""
        s = self.splits
        features = {name: self.session.features(getattr(s, f"x_{name}"))
                    for name in ("train", "val", "test")}
        functions = {"probe_accuracy": probe_accuracy, "knn_accuracy": knn_accuracy}
        validation, test = {}, {}
        for name in self.names:
            on_val, on_test = functions[name](features["train"], s.y_train, features["val"],
                                              s.y_val, features["test"], s.y_test)
            if s.y_val.size:
                validation[name] = on_val
            test[name] = on_test
        return validation, test, features

    def finish(self) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
        validation, test, features = self._both()
        return test, validation, {"test_features": features["test"],
                                  "test_labels": self.splits.y_test}
