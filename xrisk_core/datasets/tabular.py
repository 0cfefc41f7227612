"""Imbalanced binary classification sets from scikit-learn (shipped with it, no download)."""

from __future__ import annotations

import numpy as np

from .imbalanced import ImbalancedDataGenerator

__all__ = ["load_breast_cancer", "load_digits", "subsample_positives"]


def subsample_positives(
    x: np.ndarray, y: np.ndarray, imratio: float | None, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Keep all negatives and enough positives for a share ``imratio`` (None: keep all)."""
    if imratio is None:
        return x, y
    return ImbalancedDataGenerator(imratio, seed=seed).transform(x, y)


def load_breast_cancer(
    *, imratio: float | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Wisconsin breast cancer: malignant (1, 212 of 569, 37 %) vs benign (0).

    Parameters
    ----------
    imratio : float in (0, 0.5], optional
        Subsample the positives to this share (see :class:`ImbalancedDataGenerator`).
    seed : int, default 0

    Returns
    -------
    x : numpy.ndarray of float64, shape (569, 30) (fewer with ``imratio``)
    y : numpy.ndarray of int64, shape (569,)

    Examples
    --------
    >>> from xrisk.datasets import load_breast_cancer
    >>> x, y = load_breast_cancer()
    >>> x.shape, int(y.sum())
    ((569, 30), 212)
    """
    import sklearn.datasets  # here: scikit-learn takes seconds to import

    bunch = sklearn.datasets.load_breast_cancer()
    x = np.asarray(bunch.data, dtype=np.float64)
    y = (np.asarray(bunch.target) == 0).astype(np.int64)  # sklearn: 0 = malignant
    return subsample_positives(x, y, imratio, seed)


def load_digits(
    *, positive_class: int = 0, imratio: float | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Handwritten digits 8x8, one class vs the rest (about 10 % positives).

    Parameters
    ----------
    positive_class : int in 0..9, default 0
    imratio : float in (0, 0.5], optional
        Subsample the positives to this share, e.g. 0.02.
    seed : int, default 0

    Returns
    -------
    x : numpy.ndarray of float64, shape (1797, 64), pixels scaled to [0, 1]
    y : numpy.ndarray of int64, shape (1797,)

    Examples
    --------
    >>> from xrisk.datasets import load_digits
    >>> x, y = load_digits(positive_class=3)
    >>> x.shape, int(y.sum())
    ((1797, 64), 183)
    """
    if isinstance(positive_class, bool) or positive_class not in range(10):
        raise ValueError(f"load_digits: positive_class={positive_class!r}; expected a digit 0..9.")
    import sklearn.datasets  # here: scikit-learn takes seconds to import

    bunch = sklearn.datasets.load_digits()
    x = np.asarray(bunch.data, dtype=np.float64) / 16.0
    y = (np.asarray(bunch.target) == positive_class).astype(np.int64)
    return subsample_positives(x, y, imratio, seed)
