"""The data a recipe names, as numpy splits: train (imbalanced on request), validation, test.

>>> from xrisk.runner.recipe import parse_recipe
>>> from xrisk.runner.data import load_splits
>>> recipe = parse_recipe({"data": {"name": "breast_cancer", "imratio": 0.1}, "method": "ce"})
>>> splits = load_splits(recipe.data, seed=0, dtype="float64")
>>> splits.x_train.shape[1], round(float(splits.y_train.mean()), 2)
(30, 0.1)
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Splits", "load_splits", "read_csv_features"]


@dataclass(frozen=True)
class Splits:
    """Features (N, D), or images (N, H, W, C) for a conv model, in the recipe's dtype, and
    0/1 labels (N,) of the same dtype."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def describe(self) -> str:
        parts = []
        for name in ("train", "val", "test"):
            y = getattr(self, f"y_{name}")
            parts.append(f"{name} {y.size} ({y.mean():.1%} positive)" if y.size else
                         f"{name} 0")
        return ", ".join(parts)


def read_csv_features(path: str | Path, label_column: str) -> tuple[np.ndarray, np.ndarray]:
    """Numeric feature columns and a 0/1 label column of a CSV file with a header row.

    Raises
    ------
    ValueError
        A missing label column, a non-numeric cell or labels other than 0 and 1, each
        named with its row and column.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data.path: received {str(path)!r}, which is not a file. "
                                "Fix: give the CSV's path, relative to where you run xrisk.")
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    if len(rows) < 2:
        raise ValueError(f"{path}: {len(rows)} rows; expected a header row and data rows.")
    header = [name.strip() for name in rows[0]]
    if label_column not in header:
        raise ValueError(f"data.label_column: received {label_column!r}, not a column of "
                         f"{path} (columns {header}). Fix: set data.label_column to one of "
                         "them.")
    label_at = header.index(label_column)
    values = np.empty((len(rows) - 1, len(header)), dtype=np.float64)
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}, row {r}: {len(row)} cells; expected {len(header)} "
                             "(one per header column). Fix: correct the row.")
        for c, cell in enumerate(row):
            try:
                values[r - 2, c] = float(cell)
            except ValueError:
                raise ValueError(f"{path}, row {r}, column {header[c]!r}: received {cell!r}; "
                                 "expected a number. Fix: encode the column numerically."
                                 ) from None
    y = values[:, label_at]
    if not np.isin(y, (0.0, 1.0)).all():
        bad = np.unique(y[~np.isin(y, (0.0, 1.0))])[:5].tolist()
        raise ValueError(f"{path}, column {label_column!r}: labels {bad}; expected 0 and 1. "
                         "Fix: map the positive class to 1 and the rest to 0.")
    return np.delete(values, label_at, axis=1), y.astype(np.int64)


def _labels_of(section: Any, labels: np.ndarray, path: Any) -> np.ndarray:
    """The 0/1 labels of a one-column label matrix (missing labels are an error here)."""
    column = labels[:, 0]
    if np.isnan(column).any():
        raise ValueError(f"{path}, column {section.label_column!r}: "
                         f"{int(np.isnan(column).sum())} empty labels; expected 0 or 1 in "
                         "every row. Fix: drop the rows without a label.")
    return column.astype(np.int64)


def _images(dataset: Any, rows: np.ndarray | None) -> np.ndarray:
    """Read the images of a lazily reading dataset (``rows`` only): (N, H, W[, C])."""
    index = np.arange(len(dataset)) if rows is None else rows
    x, _, _ = dataset.batch(index)
    return np.asarray(x, dtype=np.float64)


def _raw(section: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features (or SMILES, featurised after ``limit``) and 0/1 labels; files with many
    examples (images) are read after ``limit`` chose the rows."""
    from xrisk import datasets

    if section.name == "tox21":
        smiles, labels = datasets.load_tox21()
        column = labels[:, datasets.TOX21_TASKS.index(section.task)]
        tested = ~np.isnan(column)
        return smiles[tested], column[tested].astype(np.int64)
    if section.name == "smiles_csv":
        smiles, labels = datasets.read_smiles_csv(section.path,
                                                  smiles_column=section.smiles_column,
                                                  label_columns=[section.label_column])
        return smiles, _labels_of(section, labels, section.path)
    if section.name == "breast_cancer":
        return datasets.load_breast_cancer()
    if section.name == "digits":
        x, y = datasets.load_digits(positive_class=section.positive_class)
        return x.reshape(len(x), 8, 8), y  # the 8x8 images, row by row
    if section.name == "mnist_5k":
        return datasets.load_mnist_5k(positive_class=section.positive_class, seed=0)
    if section.name == "image_folder":
        dataset = datasets.binary_image_folder(
            section.path, list(section.positive_classes), image_size=section.image_size,
            grayscale=section.grayscale is not False)  # gray unless the recipe says RGB
        y = dataset.targets
        rows = _limited(section, y.size, seed)
        return _images(dataset, rows), (y if rows is None else y[rows]).astype(np.int64)
    return read_csv_features(section.path, section.label_column)


def _limited(section: Any, count: int, seed: int) -> np.ndarray | None:
    """The rows ``limit`` keeps (a seeded random subset), or None for all."""
    if section.limit is None or section.limit >= count:
        return None
    return np.random.default_rng(seed).permutation(count)[: section.limit]


def _medmnist(section: Any, seed: int, multilabel: bool = False
              ) -> list[tuple[np.ndarray, np.ndarray]]:
    """The file's own train, val and test splits (``limit`` applies to each); 0/1 labels
    (N,), or (N, T) for a ``multilabel`` run (ChestMNIST's 14 findings)."""
    from xrisk.datasets import load_medmnist_npz

    positive = None if section.positive_classes is None else [
        int(c) for c in section.positive_classes]
    out = []
    for split in ("train", "val", "test"):
        x, y = load_medmnist_npz(section.path, split, positive_classes=positive)
        if not multilabel and y.ndim == 2:
            raise ValueError(f"data.path: the {split} labels of {section.path} are "
                             f"multi-label, shape {y.shape}; expected one label per image "
                             "for a binary method. Fix: train every label at once with a "
                             "multi-label method (e.g. method: ml_pesg).")
        if multilabel and (y.ndim != 2 or not np.isin(y, (0, 1)).all()):
            raise ValueError(f"data.path: the {split} labels of {section.path} have shape "
                             f"{y.shape} and values {np.unique(y).tolist()[:10]}; expected a "
                             "multi-label file, 0/1 labels (N, labels) such as ChestMNIST's. "
                             "Fix: train this file with a binary method (and "
                             "data.positive_classes).")
        if not multilabel and (y.ndim != 1 or not np.isin(y, (0, 1)).all()):
            raise ValueError(f"data.positive_classes: the {split} labels of {section.path} "
                             f"hold the classes {np.unique(y).tolist()[:10]}; expected a "
                             "binary task. Fix: name the positive classes, e.g. "
                             "positive_classes: ['1'].")
        rows = _limited(section, len(y), seed)
        if rows is not None:
            x, y = x[rows], y[rows]
        out.append((x.astype(np.float64), y.astype(np.int64)))
    return out


def _chexpert_task(section: Any, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Images (N, H, W) and ``data.task``'s 0/1 labels of the splits of
    :func:`xrisk.runner.multilabel.chexpert_rows` (each patient in one split;
    ``data.test_path`` the test split when given), read into memory."""
    from xrisk.datasets import CHEXPERT_TASKS

    from .multilabel import chexpert_rows

    dataset, splits, test_dataset = chexpert_rows(section, seed)
    column = CHEXPERT_TASKS.index(section.task)
    size = int(section.image_size)
    return [(_images(source, rows) if len(rows) else np.empty((0, size, size)),
             source.targets[rows, column].astype(np.int64))
            for source, rows in zip((dataset, dataset, test_dataset), splits, strict=True)]


def _split(section: Any, x: np.ndarray, y: np.ndarray, seed: int
           ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Train, validation and test: stratified random, test first, then validation from
    the rest."""
    from sklearn.model_selection import train_test_split

    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=section.test_size, stratify=y, random_state=seed)
    if section.validation_size > 0:
        x_train, x_val, y_train, y_val = train_test_split(
            x_rest, y_rest, test_size=section.validation_size, stratify=y_rest,
            random_state=seed)
    else:
        x_train, y_train = x_rest, y_rest
        x_val, y_val = x_rest[:0], y_rest[:0]
    return [(x_train, y_train), (x_val, y_val), (x_test, y_test)]


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1) if x.ndim > 2 else x


def load_splits(section: Any, *, seed: int, dtype: str, images: bool = False,
                multilabel: bool = False) -> Splits:
    """Split ``section``'s data set (stratified, from ``seed``; the scaffold split for
    SMILES; MedMNIST's own splits; CheXpert's by patient,
    :func:`xrisk.runner.multilabel.chexpert_rows`): test, then validation from the rest;
    subsample the training positives to ``imratio``; standardize with the training split's
    statistics; cast to ``dtype``.

    Features are flattened (N, D), or with ``images`` (a conv model) kept as images
    (N, H, W, C), C = 1 for grayscale, standardized per channel; ``images`` needs image data
    (:data:`xrisk.runner.recipe.IMAGE_KINDS`). ``multilabel``: a MedMNIST file's labels
    (N, T), such as ChestMNIST's 14 findings (multi-label runs).
    """
    from .recipe import IMAGE_KINDS

    if images and section.name not in IMAGE_KINDS:
        raise ValueError(f"data.name: received {section.name!r} for a conv model; expected "
                         f"image data, one of {list(IMAGE_KINDS)}. Fix: use model.name mlp.")
    from xrisk.datasets import ImbalancedDataGenerator

    if section.name in ("movielens", "letor"):
        raise ValueError(f"data.name: {section.name!r} is a ranking data set; expected a "
                         "binary one here. Fix: train it with task: ranking (the default "
                         "for this data).")
    if section.name in ("medmnist", "chexpert"):  # their own splits
        parts = (_medmnist(section, seed, multilabel) if section.name == "medmnist"
                 else _chexpert_task(section, seed))
        shape = parts[0][0].shape[1:]
        parts = [(_flat(x), y) for x, y in parts]
    else:
        x, y = _raw(section, seed)
        shape = x.shape[1:]
        x = _flat(x)
        if section.name != "image_folder":  # image folders were limited on read
            rows = _limited(section, y.size, seed)
            if rows is not None:
                x, y = x[rows], y[rows]
        if section.name in ("tox21", "smiles_csv"):
            from xrisk.datasets import morgan_fingerprints

            smiles = x
            x, parsed = morgan_fingerprints(smiles, num_bits=section.fingerprint_bits)
            x, y, smiles = x[parsed].astype(np.float64), y[parsed], smiles[parsed]
            if section.split == "scaffold":
                from xrisk.datasets import scaffold_split

                # validation_size is a share of what the test split leaves, as for the
                # random split
                rows_of = scaffold_split(smiles, test_size=section.test_size,
                                         validation_size=section.validation_size
                                         * (1 - section.test_size))
                parts = [(x[r], y[r]) for r in rows_of]
            else:
                parts = _split(section, x, y, seed)
        else:
            parts = _split(section, x, y, seed)
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = parts
    if section.imratio is not None and y_train.mean() > section.imratio:
        x_train, y_train = ImbalancedDataGenerator(section.imratio, seed=seed).transform(
            x_train, y_train)
    if images:  # (N, H, W, C), a channel axis added to grayscale images
        full = (*shape, 1) if len(shape) == 2 else tuple(shape)
        x_train, x_val, x_test = (a.reshape(len(a), *full) for a in (x_train, x_val, x_test))
    if section.standardize:
        axes = tuple(range(x_train.ndim - 1)) if images else 0  # per channel / per column
        mean, std = x_train.mean(axis=axes), x_train.std(axis=axes)
        std = np.where(std > 0, std, 1.0)  # constant columns (MNIST borders) stay 0
        x_train, x_val, x_test = ((a - mean) / std for a in (x_train, x_val, x_test))
    cast = np.dtype(dtype)
    return Splits(*(np.ascontiguousarray(a, dtype=cast) for a in
                    (x_train, y_train, x_val, y_val, x_test, y_test)))
