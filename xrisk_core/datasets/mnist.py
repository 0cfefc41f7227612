"""MNIST-5k (shipped): one-vs-rest classification and augmented views for contrastive learning."""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .._arguments import check_count
from .._inputs import class_labels
from ..samplers._base import check_seed
from ._files import data_file
from .imbalanced import ImbalancedDataGenerator

__all__ = ["load_mnist_5k", "augment_images", "contrastive_views"]


@lru_cache(maxsize=1)
def _raw() -> tuple[np.ndarray, np.ndarray]:
    text = gzip.decompress(data_file("mnist_5k", "mnist_5k.csv.gz").read_bytes())
    values = np.array(text.replace(b"\n", b",").split(b",")[:-1], dtype=np.uint8)
    table = values.reshape(-1, 785)
    return table[:, :784].reshape(-1, 28, 28), table[:, 784].astype(np.int64)


def load_mnist_5k(
    *,
    positive_class: int | None = None,
    imratio: float | None = None,
    shuffle: bool = True,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """5,000 MNIST digits (500 per class), 28 x 28, grey levels scaled to [0, 1].

    The shipped file stores the digits sorted by class (500 zeros, then 500 ones, ...), so a
    slice of the file's order holds one or two classes. By default the rows come in a random
    order drawn from ``seed`` (the same order at every call with the same seed), so any slice
    (``images[:320]``) is a random sample of all ten digits.

    Parameters
    ----------
    positive_class : int in 0..9, optional
        If given, the labels are 1 for this digit and 0 for the rest (10 % positives).
    imratio : float in (0, 0.5], optional
        With ``positive_class``: subsample the positives to this share.
    shuffle : bool, default True
        False keeps the file's order, sorted by digit (with ``imratio``: the negatives, then
        the kept positives).
    seed : int, default 0
        Seed of the order and of the subsample.

    Returns
    -------
    images : numpy.ndarray of float64, shape (5000, 28, 28)
    labels : numpy.ndarray of int64, shape (5000,): digits 0..9, or 0/1 with ``positive_class``

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.datasets import load_mnist_5k
    >>> images, labels = load_mnist_5k(positive_class=7)
    >>> images.shape, int(labels.sum())
    ((5000, 28, 28), 500)
    >>> _, digits = load_mnist_5k()                   # shuffled with seed 0
    >>> len(np.unique(digits[:320]))                  # a prefix spans every digit
    10
    >>> _, digits = load_mnist_5k(shuffle=False)      # the file's order
    >>> digits[:320].max(), digits[-1]
    (np.int64(0), np.int64(9))
    """
    if not isinstance(shuffle, (bool, np.bool_)):
        raise TypeError(
            f"load_mnist_5k: shuffle={shuffle!r}; expected True (a seeded random order) or "
            "False (the file's order, sorted by digit)."
        )
    seed = check_seed("load_mnist_5k", seed)
    pixels, digits = _raw()
    images = pixels.astype(np.float64) / 255.0
    if positive_class is None:
        if imratio is not None:
            raise ValueError(
                f"load_mnist_5k: imratio={imratio!r} needs a positive_class; received None. "
                "Fix: pass positive_class=0..9 (one vs rest) as well."
            )
        labels = digits.copy()
    else:
        if isinstance(positive_class, bool) or positive_class not in range(10):
            raise ValueError(
                f"load_mnist_5k: positive_class={positive_class!r}; expected a digit 0..9."
            )
        labels = (digits == positive_class).astype(np.int64)
        if imratio is not None:
            return ImbalancedDataGenerator(imratio, shuffle=shuffle, seed=seed).transform(
                images, labels)
    if shuffle:
        order = np.random.default_rng(seed).permutation(len(labels))
        images, labels = images[order], labels[order]
    return images, labels


def augment_images(
    images: Any,
    *,
    seed: int | Sequence[int],
    max_shift: int = 2,
    noise_std: float = 0.1,
    contrast: tuple[float, float] = (0.7, 1.3),
) -> np.ndarray:
    """Simple random augmentation of grey images: shift, contrast scaling, Gaussian noise.

    Parameters
    ----------
    images : array_like, shape (B, H, W), values in [0, 1]
    seed : int or sequence of int
        Seed of the generator; the output is a pure function of (images, seed).
    max_shift : int, default 2
        Each image moves by up to ``max_shift`` pixels in each direction (zero fill).
    noise_std : float, default 0.1
    contrast : (float, float), default (0.7, 1.3)
        Range of the random multiplicative factor.

    Returns
    -------
    numpy.ndarray of float64, shape (B, H, W), clipped to [0, 1]
    """
    x = np.asarray(images, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(
            f"augment_images: images have shape {x.shape}; expected (batch, height, width)."
        )
    shift = check_count("augment_images", "max_shift", max_shift, minimum=0)
    rng = np.random.default_rng(seed)
    batch, height, width = x.shape
    padded = np.pad(x, ((0, 0), (shift, shift), (shift, shift)))
    dy, dx = rng.integers(0, 2 * shift + 1, size=(2, batch))
    rows = dy[:, None] + np.arange(height)[None, :]
    cols = dx[:, None] + np.arange(width)[None, :]
    out = padded[np.arange(batch)[:, None, None], rows[:, :, None], cols[:, None, :]]
    out = out * rng.uniform(contrast[0], contrast[1], size=(batch, 1, 1))
    out = out + rng.normal(0.0, noise_std, size=out.shape)
    return np.clip(out, 0.0, 1.0)


def contrastive_views(
    images: Any, index: Any, *, seed: int = 0, epoch: int = 0, **augment: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Two augmented views of ``images[index]`` for a contrastive loss (SimCLR/SogCLR style).

    The views of example ``i`` are a pure function of ``(seed, epoch, i)`` (not of the batch
    it is in), so a resumed run sees the same views.

    Parameters
    ----------
    images : array_like, shape (N, H, W)
    index : array_like of int, shape (B,)
        Dataset indices of the batch (e.g. from :class:`~xrisk.samplers.RandomSampler`).
    seed, epoch : int
    **augment
        Options of :func:`augment_images`.

    Returns
    -------
    view_1, view_2 : numpy.ndarray of float64, shape (B, H, W)

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.datasets import contrastive_views, load_mnist_5k
    >>> images, _ = load_mnist_5k()
    >>> a, b = contrastive_views(images, np.arange(4), seed=0)
    >>> a.shape, bool(np.allclose(a, b))
    ((4, 28, 28), False)
    """
    owner = "contrastive_views"
    x = np.asarray(images)
    idx = class_labels(owner, index, name="index")
    beyond = idx[idx >= x.shape[0]]
    if beyond.size:
        raise IndexError(
            f"{owner}: index values {np.unique(beyond)[:5].tolist()} are beyond the data "
            f"({x.shape[0]} images); expected 0 <= index < {x.shape[0]}."
        )
    base = check_seed(owner, seed)
    ep = check_count(owner, "epoch", epoch, minimum=0)
    views = []
    for view in (0, 1):
        # one generator per example: the view does not depend on the batch composition
        rows = [
            augment_images(x[i : i + 1], seed=[base, ep, view, int(i)], **augment)[0] for i in idx
        ]
        views.append(np.stack(rows) if rows else np.empty((0, *x.shape[1:])))
    return views[0], views[1]
