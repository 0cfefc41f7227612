"""``IndexedDataset``: a dataset whose items are ``(x, y, index)``, as the X-risk losses need."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._inputs import class_labels, preview, to_numpy

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
    A list or 1-D array of indices (or of such pairs) is a whole batch, gathered at once:
    ``(x[index], y[index], index)`` as arrays (with ``(index, task)`` for pairs). That is what
    a torch ``DataLoader(dataset, sampler=xrisk_sampler, batch_size=None)`` asks for: one
    gather per batch instead of one read per item plus a collate.

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
        if (isinstance(index, np.ndarray) and index.dtype == np.int64 and index.ndim == 1
                and index.size and index.min() >= 0 and index.max() < len(self)):
            return index  # a sampler's batch, as it comes every step: two reductions
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
        """Item ``(x[i], y[i], i)`` for an integer key ``i``, ``(x[i], y[i], (i, task))`` for a
        pair ``(i, task)``; for a list or 1-D array of either, the whole batch at once (see
        :meth:`batch`).

        Raises
        ------
        TypeError
            A bool key, a tuple that is not a pair, or an array of more than 2 dimensions.
        IndexError
            An index outside ``[0, len(self))``.
        """
        if type(key) is int:
            return self._item(self._one_index(key))
        if isinstance(key, list) or (not isinstance(key, tuple) and np.ndim(key) > 0):
            return self._batch_key(key)
        if isinstance(key, tuple):
            if len(key) != 2:
                raise TypeError(
                    f"IndexedDataset: item key is a tuple of {len(key)} values; expected an "
                    "index or an (index, task_id) pair (TriSampler's contract). Fix: pass one "
                    "of those, or use dataset.batch(index) for an index array."
                )
            i = self._one_index(key[0])
            task = self._one_index(key[1], name="task id", in_range=False)
            x, y, _ = self._item(i)
            return x, y, (i, task)
        return self._item(self._one_index(key))

    def _item(self, i: int) -> tuple[Any, Any, int]:
        x = self.data[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.targets[i], i

    def _batch_key(self, key: Any) -> tuple[Any, Any, Any]:
        """A whole batch: indices (B,) or ``(index, task)`` pairs (B, 2)."""
        values = to_numpy(key)
        if values.ndim == 2 and values.shape[1] == 2:
            x, y, index = self.batch(values[:, 0])
            return x, y, (index, class_labels("IndexedDataset", values[:, 1], name="task id"))
        if values.ndim != 1:
            raise TypeError(
                f"IndexedDataset: batch key of shape {values.shape}; expected indices (B,) or "
                "(index, task_id) pairs (B, 2). Fix: pass a sampler's batch as it comes."
            )
        return self.batch(values)

    def _one_index(self, key: Any, *, name: str = "index", in_range: bool = True) -> int:
        """``key`` as one int >= 0 (and < ``len(self)`` if ``in_range``); else raise."""
        plain = isinstance(key, int) and not isinstance(key, bool) and key >= 0
        if plain and (not in_range or key < len(self)):
            return key  # the DataLoader's common case, without array conversions
        values = to_numpy(key)
        if isinstance(key, bool) or values.dtype == bool:
            raise TypeError(
                f"IndexedDataset: {name} {key!r} is a bool; expected an integer. Fix: pass the "
                "integer position of the example."
            )
        if values.ndim != 0:
            raise TypeError(
                f"IndexedDataset: {name} {preview(values)} holds {values.size} values; expected "
                f"one {name}. Fix: pass one integer per key (a pair is (index, task_id)).")
        if not in_range:
            return int(class_labels("IndexedDataset", values.reshape(1), name=name)[0])
        return int(self.check_index(values)[0])

    def batch(self, index: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(x[index], y[index], index)`` for an index array of shape (B,)."""
        idx = self.check_index(index)
        x = self.data[idx]
        if self.transform is not None:
            x = np.stack([self.transform(row) for row in x])
        return x, self.targets[idx], idx
