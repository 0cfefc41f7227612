"""PyTorch face of the samplers and the ``(x, y, index)`` dataset.

The samplers are ``torch.utils.data.Sampler`` batch samplers: pass them as
``DataLoader(dataset, batch_sampler=sampler)``. Each yields one list per batch: dataset
indices (``DualSampler``, ``RandomSampler``), ``(index, task_id)`` pairs (``TriSampler``
classification, LibAUC's contract) or ``(item_ids, query_id)`` pairs (``TriSampler`` ranking).
All the core methods stay available (``set_epoch``, ``state_dict``, ``shard`` for DDP,
``batch``, ``epoch_batches``).

Examples
--------
>>> import numpy as np
>>> from torch.utils.data import DataLoader
>>> from xrisk.torch.data import DualSampler, IndexedDataset
>>> labels = np.array([1] * 10 + [0] * 90)
>>> data = IndexedDataset(np.random.default_rng(0).normal(size=(100, 3)), labels)
>>> loader = DataLoader(data, batch_sampler=DualSampler(labels, 10, sampling_rate=0.2))
>>> x, y, index = next(iter(loader))
>>> tuple(x.shape), y.tolist()[:3], index.dtype
((10, 3), [1, 1, 0], torch.int64)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import Dataset, Sampler

from xrisk import datasets as _datasets
from xrisk import samplers as _samplers

__all__ = ["DualSampler", "TriSampler", "RandomSampler", "IndexedDataset"]


class DualSampler(_samplers.DualSampler, Sampler):  # type: ignore[type-arg]
    """Batch sampler version of :class:`xrisk.samplers.DualSampler` (same arguments)."""

    def __iter__(self) -> Iterator[list[int]]:
        for batch in super().__iter__():
            yield batch.tolist()


class RandomSampler(_samplers.RandomSampler, Sampler):  # type: ignore[type-arg]
    """Batch sampler version of :class:`xrisk.samplers.RandomSampler` (same arguments)."""

    def __iter__(self) -> Iterator[list[int]]:
        for batch in super().__iter__():
            yield batch.tolist()


class TriSampler(_samplers.TriSampler, Sampler):  # type: ignore[type-arg]
    """Batch sampler version of :class:`xrisk.samplers.TriSampler` (same arguments).

    Classification batches are lists of ``(index, task_id)`` pairs, which
    :class:`IndexedDataset` answers with ``(x, y, (index, task_id))``; ranking batches are
    lists of ``(item_ids, query_id)`` pairs.
    """

    def __iter__(self) -> Iterator[list[Any]]:
        for first, second in super().__iter__():
            if self.mode == "classification":
                yield list(zip(first.tolist(), second.tolist(), strict=True))
            else:
                yield list(zip(first, second.tolist(), strict=True))


class IndexedDataset(_datasets.IndexedDataset, Dataset):  # type: ignore[type-arg]
    """``torch.utils.data.Dataset`` whose item ``i`` is ``(x[i], y[i], i)``.

    Same arguments as :class:`xrisk.datasets.IndexedDataset`; the default collate function
    turns the numpy items into tensors.
    """
