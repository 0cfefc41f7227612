"""A MedMNIST-style ``.npz`` file: ``train_images``, ``train_labels``, ``val_*``, ``test_*``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._arguments import check_choice

__all__ = ["load_medmnist_npz"]

_SPLITS = ("train", "val", "test")


def load_medmnist_npz(path: str | Path, split: str = "train", *,
                      positive_classes: Sequence[int] | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """One split of a MedMNIST ``.npz`` (the files ``medmnist`` downloads, e.g.
    ``pneumoniamnist.npz``), read without the ``medmnist`` package.

    Parameters
    ----------
    path : str or Path
    split : {"train", "val", "test"}, default "train"
    positive_classes : sequence of int, optional
        Make a multi-class task binary: these classes are 1, the others 0. Without it the
        labels are returned as stored (binary tasks such as PneumoniaMNIST are 0/1 already).

    Returns
    -------
    images : numpy.ndarray of float32, shape (N, H, W) or (N, H, W, 3)
        Pixels scaled to [0, 1].
    labels : numpy.ndarray of int64, shape (N,) for one label column, (N, T) for a
        multi-label set (ChestMNIST's 14 findings).

    Raises
    ------
    ValueError
        A file without ``<split>_images`` / ``<split>_labels``, or labels of another length.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> from xrisk.datasets import load_medmnist_npz
    >>> path = Path(tempfile.mkdtemp()) / "tiny.npz"
    >>> rng = np.random.default_rng(0)
    >>> splits = ("train", "val", "test")
    >>> np.savez(path, **{f"{s}_images": rng.integers(0, 256, (6, 28, 28), dtype=np.uint8)
    ...                   for s in splits},
    ...          **{f"{s}_labels": np.arange(6).reshape(6, 1) % 3 for s in splits})
    >>> x, y = load_medmnist_npz(path, "val", positive_classes=[2])
    >>> x.shape, x.dtype, y.tolist()
    ((6, 28, 28), dtype('float32'), [0, 0, 1, 0, 0, 1])
    """
    owner = "load_medmnist_npz"
    split = check_choice(owner, "split", split, _SPLITS)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{owner}: path={str(path)!r} is not a file; expected a "
                                "MedMNIST .npz. Fix: check the path (medmnist saves them under "
                                "~/.medmnist).")
    with np.load(path, allow_pickle=False) as archive:
        keys = (f"{split}_images", f"{split}_labels")
        missing = [k for k in keys if k not in archive.files]
        if missing:
            raise ValueError(f"{owner}: {path} has no {missing} (keys {sorted(archive.files)}); "
                             "expected MedMNIST's <split>_images and <split>_labels. Fix: pass "
                             "a MedMNIST-style file or another split.")
        images, labels = archive[keys[0]], archive[keys[1]]
    if labels.shape[0] != images.shape[0]:
        raise ValueError(f"{owner}: {path}: {images.shape[0]} {split} images but "
                         f"{labels.shape[0]} labels; expected one label row per image.")
    labels = labels.reshape(labels.shape[0], -1).astype(np.int64)
    if labels.shape[1] == 1:
        labels = labels[:, 0]
    if positive_classes is not None:
        if labels.ndim != 1:
            raise ValueError(f"{owner}: positive_classes={list(positive_classes)} with "
                             f"{labels.shape[1]} label columns; expected a single-label set. "
                             "Fix: drop positive_classes for a multi-label file.")
        classes = np.unique(labels).tolist()
        unknown = [c for c in positive_classes if c not in classes]
        if unknown or not len(positive_classes):
            raise ValueError(f"{owner}: positive_classes={list(positive_classes)}; expected "
                             f"some of the classes {classes} of the {split} split. Fix: name "
                             "classes that occur.")
        labels = np.isin(labels, list(positive_classes)).astype(np.int64)
    scale = np.float32(255.0) if images.dtype == np.uint8 else np.float32(1.0)
    return images.astype(np.float32) / scale, labels
