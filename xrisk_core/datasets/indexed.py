"""``IndexedDataset``: a dataset whose items are ``(x, y, index)``, as the X-risk losses need."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._inputs import class_labels, to_numpy

__all__ = ["IndexedDataset"]


class IndexedDataset:
    """Pair examples with their dataset index: item ``i`` is ``(x[i], y[i], i)``.

    The stateful losses keep one entry per training example, addressed by this index.

    Parameters
    ----------
    data : array_like, shape (N, ...)
    targets : array_like, shape (N,) or (N, T)
    transform : callable, optional
        Applied to ``x[i]`` (e.g. an augmentation) when an item is read.

    Notes
    -----
    An item key may be an int or, for :class:`~xrisk.samplers.TriSampler` in classification
    mode, a pair ``(i, task)``; the item is then ``(x[i], y[i], (i, task))`` (LibAUC's contract).
    :meth:`batch` gathers a whole index array at once.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.datasets import IndexedDataset
    >>> ds = IndexedDataset(np.eye(3), np.array([0, 1, 1]))
    >>> x, y, i = ds[2]
    >>> x.tolist(), int(y), i
    ([0.0, 0.0, 1.0], 1, 2)
    """

    def __init__(
        self, data: Any, targets: Any, transform: Callable[[Any], Any] | None = None
    ) -> None:
        self.data = to_numpy(data)
        self.targets = to_numpy(targets)
        if self.data.shape[0] != self.targets.shape[0]:
            raise ValueError(
                f"IndexedDataset: data has {self.data.shape[0]} rows but targets has "
                f"{self.targets.shape[0]}; expected one target per example."
            )
        self.transform = transform

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def check_index(self, index: Any) -> np.ndarray:
        """Return ``index`` as int64 after checking ``0 <= index < len(self)``."""
        idx = class_labels("IndexedDataset", np.atleast_1d(to_numpy(index)), name="index")
        beyond = idx[idx >= len(self)]
        if beyond.size:
            raise IndexError(
                f"IndexedDataset: index values {np.unique(beyond)[:5].tolist()} are beyond the "
                f"data; expected 0 <= index < {len(self)}. Fix: build the sampler from this "
                "dataset's labels."
            )
        return idx

    def __getitem__(self, key: Any) -> tuple[Any, Any, Any]:
        if isinstance(key, tuple):
            i = int(self.check_index(key[0])[0])
            x, y, _ = self[i]
            return x, y, (i, int(key[1]))
        i = int(self.check_index(key)[0])
        x = self.data[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.targets[i], i

    def batch(self, index: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(x[index], y[index], index)`` for an index array of shape (B,)."""
        idx = self.check_index(index)
        x = self.data[idx]
        if self.transform is not None:
            x = np.stack([self.transform(row) for row in x])
        return x, self.targets[idx], idx
