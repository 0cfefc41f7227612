"""``ImbalancedDataGenerator``: turn a labelled set into an imbalanced binary task."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arguments import check_interval
from .._inputs import class_labels, to_numpy
from ..samplers._base import check_seed

__all__ = ["ImbalancedDataGenerator"]


def _check_imratio(imratio: object) -> float:
    return float(check_interval(
        "ImbalancedDataGenerator", "imratio", imratio, low=0.0, high=0.5, low_open=True,
        high_open=False, expected="the share of positives, a number in (0, 0.5]",
        fix="pass e.g. imratio=0.1 for 10 % positives", type_error=ValueError,
    ))


class ImbalancedDataGenerator:
    """Binary, imbalanced version of a labelled data set (LibAUC's generator, seeded per instance).

    Parameters
    ----------
    imratio : float in (0, 0.5], optional
        Share of positives wanted; can also be given to :meth:`transform`.
    shuffle : bool, default True
        Shuffle before choosing positives and after concatenating.
    seed : int, default 0
        Seed of this instance's ``numpy.random.Generator`` (the global RNG is not touched).

    Notes
    -----
    As in LibAUC 2.0.1: with ``C`` distinct classes the classes ``<= C // 2 - 1`` become
    negative (0) and the others positive (1) (binary labels stay as they are); all negatives
    are kept with the first ``floor(imratio / (1 - imratio) * num_negatives)`` positives of the
    shuffled order; ``imratio = 0.5`` keeps every example. Differences: negative labels are
    an error (LibAUC maps -1 to 0), the labels are int64 of shape (N,) for every ratio (LibAUC:
    float32 (N, 1) below 0.5 and the input dtype at 0.5), and asking for more positives than
    exist is an error.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.datasets import ImbalancedDataGenerator
    >>> x, y = ImbalancedDataGenerator(0.1, seed=0).transform(np.arange(100), np.arange(100) % 10)
    >>> x.shape, int(y.sum())
    ((55,), 5)
    """

    def __init__(self, imratio: float | None = None, *, shuffle: bool = True, seed: int = 0):
        self.imratio = None if imratio is None else _check_imratio(imratio)
        self.shuffle = bool(shuffle)
        self.seed = check_seed("ImbalancedDataGenerator", seed)

    def transform(
        self, data: Any, targets: Any, imratio: float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(data, labels)``: the kept examples and their 0/1 labels (int64, (N,)).

        Parameters
        ----------
        data : array_like, shape (N, ...)
        targets : array_like of int, shape (N,) or (N, 1)
        imratio : float in (0, 0.5], optional
            Overrides the constructor's value.
        """
        owner = "ImbalancedDataGenerator"
        ratio = _check_imratio(imratio if imratio is not None else self.imratio)
        x = to_numpy(data)
        y = class_labels(owner, targets, name="targets")
        if x.shape[0] != y.size:
            raise ValueError(
                f"{owner}: data has {x.shape[0]} rows but targets has {y.size}; expected one "
                "target per example. Fix: pass matching data and targets."
            )
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(
                f"{owner}: targets hold a single class {classes.tolist()}; expected at least "
                "two classes. Fix: pass the full labelled set."
            )
        rng = np.random.default_rng(self.seed)
        if self.shuffle:
            order = rng.permutation(y.size)
            x, y = x[order], y[order]
        labels = (y > classes.size // 2 - 1).astype(np.int64)
        if ratio < 0.5:
            negatives = np.flatnonzero(labels == 0)
            positives = np.flatnonzero(labels == 1)
            keep = int(ratio / (1 - ratio) * negatives.size)
            if keep < 1 or keep > positives.size:
                raise ValueError(
                    f"{owner}: imratio={ratio} needs {keep} positives next to "
                    f"{negatives.size} negatives, but {positives.size} positives exist; "
                    f"expected 1 to {positives.size}. Fix: choose another imratio."
                )
            chosen = np.concatenate([negatives, positives[:keep]])
            x, labels = x[chosen], labels[chosen]
            if self.shuffle:
                order = rng.permutation(labels.size)
                x, labels = x[order], labels[order]
        return x, labels
