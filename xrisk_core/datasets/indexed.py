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
    :meth:`batch` gathers a whole index array at once. A list or array key (a whole batch) is
    refused with a TypeError: it is what a torch ``DataLoader`` passes when an xrisk sampler is
    given as ``sampler=`` instead of ``batch_sampler=``.

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
        """Item ``(x[i], y[i], i)`` for an integer key ``i``, ``(x[i], y[i], (i, task))`` for a
        pair ``(i, task)``.

        Raises
        ------
        TypeError
            The key holds several indices (a list or array): that is a whole batch, which
            reaches ``__getitem__`` when an xrisk sampler is given to a DataLoader as
            ``sampler=``. Use ``DataLoader(dataset, batch_sampler=sampler)`` or :meth:`batch`.
        IndexError
            The index is outside ``[0, len(self))``.
        """
        if isinstance(key, tuple):
            if len(key) != 2:
                raise TypeError(
                    f"IndexedDataset: item key is a tuple of {len(key)} values; expected an "
                    "index or an (index, task_id) pair (TriSampler's contract). Fix: pass one "
                    "of those, or use dataset.batch(index) for an index array."
                )
            i = self._one_index(key[0])
            task = self._one_index(key[1], name="task id", in_range=False)
            x, y, _ = self[i]
            return x, y, (i, task)
        i = self._one_index(key)
        x = self.data[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.targets[i], i

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
                f"IndexedDataset: item key holds {values.size} indices {preview(values)}, i.e. a "
                f"whole batch; expected one {name}. A DataLoader given an xrisk sampler as "
                "sampler= treats each of its batches as one item (and would train on one "
                "example per batch). Fix: DataLoader(dataset, batch_sampler=sampler) with no "
                "batch_size, shuffle or drop_last; for an index array use dataset.batch(index)."
            )
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
