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
    """Features (N, D) in the recipe's dtype and 0/1 labels (N,) of the same dtype."""

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


def _raw(section: Any) -> tuple[np.ndarray, np.ndarray]:
    """Features and 0/1 labels; for tox21 the SMILES (featurised after ``limit``)."""
    from xrisk import datasets

    if section.name == "tox21":
        smiles, labels = datasets.load_tox21()
        column = labels[:, datasets.TOX21_TASKS.index(section.task)]
        tested = ~np.isnan(column)
        return smiles[tested], column[tested].astype(np.int64)
    if section.name == "breast_cancer":
        return datasets.load_breast_cancer()
    if section.name == "digits":
        return datasets.load_digits(positive_class=section.positive_class)
    if section.name == "mnist_5k":
        x, y = datasets.load_mnist_5k(positive_class=section.positive_class, seed=0)
        return x.reshape(len(x), -1), y
    return read_csv_features(section.path, section.label_column)


def load_splits(section: Any, *, seed: int, dtype: str) -> Splits:
    """Split ``section``'s data set (stratified, from ``seed``): test, then validation from
    the rest; subsample the training positives to ``imratio``; standardize with the
    training split's statistics; cast to ``dtype``."""
    from sklearn.model_selection import train_test_split

    from xrisk.datasets import ImbalancedDataGenerator

    x, y = _raw(section)
    if section.limit is not None and section.limit < len(y):
        order = np.random.default_rng(seed).permutation(len(y))[: section.limit]
        x, y = x[order], y[order]
    if section.name == "tox21":
        from xrisk.datasets import morgan_fingerprints

        x, parsed = morgan_fingerprints(x, num_bits=section.fingerprint_bits)
        x, y = x[parsed].astype(np.float64), y[parsed]
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=section.test_size, stratify=y, random_state=seed)
    if section.validation_size > 0:
        x_train, x_val, y_train, y_val = train_test_split(
            x_rest, y_rest, test_size=section.validation_size, stratify=y_rest,
            random_state=seed)
    else:
        x_train, y_train = x_rest, y_rest
        x_val, y_val = x_rest[:0], y_rest[:0]
    if section.imratio is not None and y_train.mean() > section.imratio:
        x_train, y_train = ImbalancedDataGenerator(section.imratio, seed=seed).transform(
            x_train, y_train)
    if section.standardize:
        mean, std = x_train.mean(axis=0), x_train.std(axis=0)
        std = np.where(std > 0, std, 1.0)  # constant columns (MNIST borders) stay 0
        x_train, x_val, x_test = ((a - mean) / std for a in (x_train, x_val, x_test))
    cast = np.dtype(dtype)
    return Splits(*(np.ascontiguousarray(a, dtype=cast) for a in
                    (x_train, y_train, x_val, y_val, x_test, y_test)))
