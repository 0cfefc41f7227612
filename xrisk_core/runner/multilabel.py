"""Multi-label classification in the runner: every Tox21 assay, or every CheXpert
competition task, at once.

A multi-label recipe (``method: ml_soap``, ``ml_pesg``, ``ml_sopas`` or ``ml_bce``;
``task: multilabel`` follows) trains a model with one logit per label with

- ``ml_soap``: :class:`xrisk.meanAveragePrecisionLoss` (SOAP on every label) and SOAP;
- ``ml_pesg``: :class:`xrisk.MultiLabelAUCMLoss` (AUC-M per label) and PESG;
- ``ml_sopas``: :class:`xrisk.MultiLabelpAUCLoss` (one-way pAUC, KL-DRO, per label) and SOPAs;
- ``ml_bce``: the per-label binary cross-entropy, the baseline (also the warm-up's loss).

A metric (``auroc``, ``ap``, ``pauc``, ``tpauc``) is the mean over the labels of the metric
on the examples each label was measured on, labels with a single class in the split left
out (:func:`label_metrics`).

``data.name: tox21``: an MLP over Morgan fingerprints (``data.fingerprint_bits``; RDKit), the
12 assays. A molecule the assay did not test has a missing label (NaN): the X-risk losses
leave it out of their loss, gradient and state, and the cross-entropy masks it. The
molecules are split at random from the seed (``test_size``, then ``validation_size`` of
the rest); ``data.limit`` keeps a seeded subset.

``data.name: chexpert``: the five competition tasks of a CheXpert CSV
(:data:`xrisk.datasets.CHEXPERT_TASKS`), frontal views, each task's uncertain labels by
``data.uncertain`` over LibAUC's policy (:func:`xrisk.datasets.load_chexpert`), grayscale
images resized to ``data.image_size``, read from disk batch by batch
(:class:`LazyImages`), for ResNet20, the conv encoder or an MLP over the flattened pixels.
The split (:func:`chexpert_rows`) keeps each patient in one split.

``data.name: medmnist``: a MedMNIST file whose labels are multi-label (ChestMNIST's 14
findings), its own train / val / test splits, images in memory and standardized as in a
binary run (per channel for a conv model, per pixel for the MLP).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np

from .data import Splits, _limited, load_splits
from .engine import BinaryTask, initial_weights, main_stages, make_sampler, phases, session_class
from .recipe import CONV_MODELS, Recipe

__all__ = ["LazyImages", "MultiLabelTask", "chexpert_rows", "label_metrics",
           "load_multilabel"]

#: At most this many training images (drawn from the seed; all of a smaller split) give the
#: mean and standard deviation that standardize CheXpert's pixels.
STATISTICS_IMAGES = 2048


def load_multilabel(section: Any, *, seed: int, dtype: str, images: bool = False) -> Splits:
    """The splits of a multi-label data set, labels (N, K): Tox21's fingerprints (N, bits)
    and 12 assays, NaN where not tested, split at random from ``seed``; CheXpert's images
    (:func:`chexpert_rows`, :class:`LazyImages`: (N, H, W, 1) with ``images`` for a conv
    model, else (N, H * W)) and five tasks; or a multi-label MedMNIST file's own splits
    (ChestMNIST: 14 findings; :func:`xrisk.runner.data.load_splits`).

    Examples
    --------
    >>> from xrisk.runner.recipe import parse_recipe
    >>> from xrisk.runner.multilabel import load_multilabel
    >>> recipe = parse_recipe({"data": {"name": "tox21", "limit": 200,
    ...                                 "fingerprint_bits": 64}, "method": "ml_soap"})
    >>> splits = load_multilabel(recipe.data, seed=0, dtype="float32")
    >>> splits.x_train.shape[1], splits.y_train.shape[1]
    (64, 12)
    """
    if section.name == "chexpert":
        return _chexpert_splits(section, seed=seed, dtype=dtype, images=images)
    if section.name == "medmnist":  # the file's own splits, in memory, as a binary run's
        return load_splits(section, seed=seed, dtype=dtype, images=images, multilabel=True)
    from sklearn.model_selection import train_test_split

    from xrisk.datasets import load_tox21, morgan_fingerprints

    smiles, labels = load_tox21()
    rows = _limited(section, len(smiles), seed)
    if rows is not None:
        smiles, labels = smiles[rows], labels[rows]
    x, parsed = morgan_fingerprints(smiles, num_bits=section.fingerprint_bits)
    x, y = x[parsed].astype(np.float64), labels[parsed].astype(np.float64)
    x_rest, x_test, y_rest, y_test = train_test_split(x, y, test_size=section.test_size,
                                                      random_state=seed)
    if section.validation_size > 0:
        x_train, x_val, y_train, y_val = train_test_split(
            x_rest, y_rest, test_size=section.validation_size, random_state=seed)
    else:
        x_train, y_train, x_val, y_val = x_rest, y_rest, x_rest[:0], y_rest[:0]
    cast_to = np.dtype(dtype)
    return Splits(*(np.ascontiguousarray(a, dtype=cast_to) for a in
                    (x_train, y_train, x_val, y_val, x_test, y_test)))


class LazyImages:
    """Rows of a lazily reading image dataset as a read-only array: indexing with a slice or
    an index array reads those images from disk (only those) and returns them standardized,
    ``(B, H, W, 1)`` (``flat=False``, a conv model's input) or ``(B, H * W)``.

    The runner's sessions index it batch by batch (training) and in chunks (prediction);
    nothing holds a whole split of images in memory. The images of a batch are decoded by a
    pool of threads (Pillow releases the GIL while it decodes and resizes), and
    :meth:`read_ahead` reads the next training batch while the model trains on the current
    one; the values are the same as a plain read's.

    Parameters
    ----------
    dataset : IndexedDataset
        :func:`xrisk.datasets.load_chexpert`'s dataset (images (H, W) in [0, 1]).
    rows : numpy.ndarray of int, shape (N,)
        The dataset's rows that make this split, in order.
    mean, std : float
        ``(pixel - mean) / std`` (the training split's statistics; 0 and 1 keep [0, 1]).
    flat : bool
        Flatten each image (an MLP's input).
    dtype : str
        The dtype of what indexing returns.
    workers : int, optional
        Threads that decode a batch's images; default ``min(8, os.cpu_count())``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import numpy as np
    >>> from PIL import Image
    >>> from xrisk.datasets import CHEXPERT_TASKS, load_chexpert
    >>> from xrisk.runner.multilabel import LazyImages
    >>> root = Path(tempfile.mkdtemp())
    >>> for i in range(3):
    ...     Image.new("L", (6, 6), 50 * i).save(root / f"{i}.png")
    >>> rows = [f"{i}.png,Frontal," + ",".join(["0.0"] * 5) for i in range(3)]
    >>> _ = (root / "train.csv").write_text(
    ...     "Path,Frontal/Lateral," + ",".join(CHEXPERT_TASKS) + "\\n" + "\\n".join(rows))
    >>> images = LazyImages(load_chexpert(root / "train.csv", root, image_size=4),
    ...                     np.array([2, 0]), mean=0.0, std=1.0, flat=False, dtype="float64")
    >>> images.shape, images[:1].shape, round(float(images[np.array([0, 1])][0].max()), 3)
    ((2, 4, 4, 1), (1, 4, 4, 1), 0.392)
    """

    def __init__(self, dataset: Any, rows: np.ndarray, *, mean: float, std: float, flat: bool,
                 dtype: str, workers: int | None = None) -> None:
        self.dataset, self.rows = dataset, np.asarray(rows, dtype=np.int64)
        self.workers = max(1, workers or min(8, os.cpu_count() or 1))
        self._ahead: tuple[tuple[str, bytes], Future[np.ndarray]] | None = None
        self.mean, self.std, self.flat = float(mean), float(std), flat
        self.dtype = np.dtype(dtype)
        size = int(dataset.data.image_size)
        self.shape: tuple[int, ...] = ((len(self.rows), size * size) if flat
                                       else (len(self.rows), size, size, 1))
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: slice | np.ndarray) -> np.ndarray:
        if isinstance(key, np.ndarray) and self._ahead is not None:
            wanted, future = self._ahead
            if _key(key) == wanted:  # the batch read_ahead has read (or is reading)
                self._ahead = None
                return future.result()
        return self._read(key)

    def _read(self, key: slice | np.ndarray) -> np.ndarray:
        rows = self.rows[key]
        if rows.ndim != 1:
            raise TypeError(f"LazyImages: received the key {key!r}; expected a slice or a 1-D "
                            "index array (a batch). Fix: index with an array of rows.")
        if not len(rows):
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)
        x = np.stack(list(_pool("decode", self.workers).map(self.dataset.data.__getitem__,
                                                             rows.tolist())))
        x = (x.astype(np.float64) - self.mean) / self.std
        return np.ascontiguousarray(x.reshape(len(rows), *self.shape[1:]), dtype=self.dtype)

    def read_ahead(self, batches: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        """Yield ``batches`` (index arrays into this split), each after starting to read the
        one that follows it, so that ``self[batch]`` finds it read."""
        iterator = iter(batches)
        current = next(iterator, None)
        while current is not None:
            following = next(iterator, None)
            if following is not None:
                key = np.asarray(following)
                self._ahead = (_key(key), _pool("ahead", 1).submit(self._read, key))
            yield current
            current = following
        self._ahead = None

    def __repr__(self) -> str:
        return f"LazyImages(shape={self.shape}, dtype={self.dtype})"


_POOLS: dict[tuple[str, int], ThreadPoolExecutor] = {}


def _key(index: np.ndarray) -> tuple[str, bytes]:
    """An index array's identity: its dtype and values (1-D)."""
    return index.dtype.str, index.tobytes()


def _pool(purpose: str, workers: int) -> ThreadPoolExecutor:
    """One shared pool per purpose and size (decoding a batch; reading the next batch ahead:
    two pools, so that a read ahead never waits for its own pool's threads)."""
    key = (purpose, workers)
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(workers, thread_name_prefix=f"xrisk-{purpose}")
    return _POOLS[key]


def _patients(paths: list[Any]) -> np.ndarray:
    """A group number per image: its ``patient<digits>`` path part (CheXpert's layout,
    ``train/patient00001/study1/view1_frontal.jpg``), or the image itself where no part is."""
    keys = []
    for i, path in enumerate(paths):
        found = next((part for part in reversed(Path(path).parts)
                      if re.fullmatch(r"patient\d+", part)), None)
        keys.append(found if found is not None else f"row {i}")
    return np.unique(np.asarray(keys), return_inverse=True)[1].reshape(-1)


def _hold_out(rows: np.ndarray, groups: np.ndarray, share: float, rng: np.random.Generator,
              field: str) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` split into (kept, held out): ``round(share x patients)`` patients drawn by
    ``rng`` are held out with all their images."""
    patients = np.unique(groups[rows])
    count = int(round(share * len(patients)))
    if not 0 < count < len(patients):
        raise ValueError(f"data.{field}: received {share} of {len(patients)} patients, which "
                         f"holds out {count}; expected at least one patient on each side. "
                         f"Fix: give more rows (data.limit) or another data.{field}.")
    held = np.isin(groups[rows], rng.permutation(patients)[:count])
    return rows[~held], rows[held]


def chexpert_rows(section: Any, seed: int) -> tuple[Any, list[np.ndarray], Any]:
    """CheXpert's splits as rows: ``(train dataset, [train, val, test rows], test dataset)``.

    The datasets are :func:`xrisk.datasets.load_chexpert` of ``data.path`` and, when given,
    ``data.test_path`` (frontal views, the five tasks, ``data.uncertain`` over LibAUC's
    policy, ``data.image_size``); ``data.limit`` keeps that many rows of each CSV, drawn
    from ``seed``. The split keeps each patient (the ``patient<digits>`` folder of a path;
    each image is its own patient where there is none) in one split:

    - ``data.test_path`` given (CheXpert's ``valid.csv``; the competition's test set is not
      public, and the paper reports on ``valid.csv``): its rows are the test split, and
      ``validation_size`` of the patients of ``data.path`` the validation split;
    - else ``test_size`` of the patients of ``data.path`` are the test split and
      ``validation_size`` of the other patients the validation split.

    Patients are drawn from ``seed``. Binary CheXpert runs (one ``data.task``) use the same
    split (:func:`xrisk.runner.data.load_splits`).
    """
    from xrisk.datasets import load_chexpert

    def read(path: str) -> tuple[Any, np.ndarray]:
        dataset = load_chexpert(path, section.image_root or "",
                                uncertain=dict(section.uncertain), image_size=section.image_size)
        kept = _limited(section, len(dataset), seed)
        return dataset, np.arange(len(dataset)) if kept is None else np.sort(kept)

    dataset, rows = read(section.path)
    groups = _patients(dataset.data.paths)
    rng = np.random.default_rng([seed, 0])
    if section.test_path is not None:
        test_dataset, test = read(section.test_path)
    else:
        test_dataset = dataset
        rows, test = _hold_out(rows, groups, section.test_size, rng, "test_size")
    if section.validation_size > 0:
        train, val = _hold_out(rows, groups, section.validation_size, rng, "validation_size")
    else:
        train, val = rows, rows[:0]
    return dataset, [train, val, test], test_dataset


def _chexpert_splits(section: Any, *, seed: int, dtype: str, images: bool) -> Splits:
    """:func:`chexpert_rows` as :class:`LazyImages` and label matrices (N, 5), standardized
    with the mean and standard deviation of (at most :data:`STATISTICS_IMAGES` of) the
    training images' pixels."""
    dataset, (train, val, test), test_dataset = chexpert_rows(section, seed)
    mean, std = 0.0, 1.0
    if section.standardize:
        sample = train if len(train) <= STATISTICS_IMAGES else np.sort(
            np.random.default_rng([seed, 1]).choice(train, STATISTICS_IMAGES, replace=False))
        pixels = LazyImages(dataset, sample, mean=0.0, std=1.0, flat=True, dtype="float64")[:]
        mean, std = float(pixels.mean()), float(pixels.std())
        std = std if std > 0 else 1.0
    cast_to = np.dtype(dtype)
    parts: list[Any] = []
    for source, rows in ((dataset, train), (dataset, val), (test_dataset, test)):
        parts.append(LazyImages(source, rows, mean=mean, std=std, flat=not images,
                                dtype=dtype))
        parts.append(np.ascontiguousarray(source.targets[rows], dtype=cast_to))
    # LazyImages stands in for the image arrays: the sessions index it batch by batch
    return Splits(*cast("list[np.ndarray]", parts))


def label_metrics(recipe: Recipe, labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Each metric of the recipe, averaged over the labels with both classes among the
    examples the label was measured on (NaN labels left out).

    >>> import numpy as np
    >>> from xrisk.runner.recipe import parse_recipe
    >>> recipe = parse_recipe({"data": {"name": "tox21"}, "method": "ml_bce"})
    >>> labels = np.array([[1, 0], [0, np.nan], [1, 1], [0, 1]])
    >>> scores = np.array([[0.9, 0.2], [0.1, 0.5], [0.8, 0.3], [0.2, 0.1]])
    >>> label_metrics(recipe, labels, scores)["auroc"]  # label 0: 1.0; label 1: 0.5
    0.75
    """
    from xrisk.metrics import evaluate

    names = list(dict.fromkeys([*recipe.evaluation.metrics, recipe.metric]))
    sums: dict[str, list[float]] = {name: [] for name in names}
    for column in range(labels.shape[1] if labels.ndim == 2 else 0):
        tested = ~np.isnan(labels[:, column])
        y = labels[tested, column]
        if y.size == 0 or y.min() == y.max():
            continue
        values = evaluate(y.astype(np.int64), scores[tested, column], metrics=names,
                          max_fpr=recipe.evaluation.max_fpr, min_tpr=recipe.evaluation.min_tpr)
        for name in names:
            sums[name].append(float(values[name]))
    return {name: float(np.mean(v)) for name, v in sums.items() if v}


class MultiLabelTask(BinaryTask):
    """Multi-label runs in :func:`xrisk.runner.engine.run_seed`'s loop: the binary task's
    session with one logit per label, random batches, per-label metrics averaged."""

    reinit_stream = 4

    def __init__(self, recipe: Recipe, seed: int) -> None:
        self.recipe = recipe
        self.splits = splits = load_multilabel(recipe.data, seed=seed, dtype=recipe.dtype,
                                               images=recipe.model.name in CONV_MODELS)
        weights = initial_weights(recipe, splits, seed, num_outputs=splits.y_train.shape[1])
        self.session = session_class(recipe.framework)(
            splits, weights, model=recipe.model.name, activation=recipe.model.activation,
            dtype=recipe.dtype, seed=seed)
        self.warmup, self.main = phases(recipe)
        # random batches (a dual sampler needs one label per example)
        self.sampler = make_sampler(recipe, splits.y_train[:, 0], seed)
        self.stages = main_stages(recipe)

    def batches(self, phase: Any, epoch: int) -> Iterable[Any]:
        """The sampler's batches; images read from disk are read one batch ahead."""
        x_train = self.splits.x_train
        return (x_train.read_ahead(self.sampler) if isinstance(x_train, LazyImages)
                else self.sampler)

    def score(self, labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
        """The recipe's metrics, each averaged over the labels (:func:`label_metrics`)."""
        return label_metrics(self.recipe, labels, logits)
