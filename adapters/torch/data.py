"""PyTorch face of the samplers and the ``(x, y, index)`` dataset.

The samplers yield one list of keys per batch: dataset indices (``DualSampler``,
``RandomSampler``), ``(index, task_id)`` pairs (``TriSampler`` classification, LibAUC's
contract) or ``(item_ids, query_id)`` pairs (``TriSampler`` ranking). Give them to a
``DataLoader`` in one of torch's two ways for samplers of whole batches:

- ``DataLoader(dataset, sampler=sampler, batch_size=None)``: the dataset receives each batch's
  list and :class:`IndexedDataset` answers with one gather, ``(x[index], y[index], index)``
  (torch's "bulk read" form, and the fastest: about a fifth of the per-item path's time);
- ``DataLoader(dataset, batch_sampler=sampler)``: any map-style dataset; items are read one by
  one (or by ``__getitems__``) and collated.

Either way the batch size is the sampler's (no ``shuffle`` or ``drop_last``). LibAUC's idiom
``DataLoader(dataset, batch_size=32, sampler=sampler)`` raises a TypeError that names both
forms: torch would wrap the sampler in a ``BatchSampler`` and make each of its batches a
single item. All the core methods stay available (``set_epoch``, ``state_dict``,
``load_state_dict``, ``shard`` for DDP, ``batch``, ``epoch_batches``).

:class:`IndexedDataset` wraps any map-style dataset (a torchvision ``ImageFolder``, a Hugging
Face ``datasets.Dataset``, a ``numpy.memmap``, your own lazily reading class): it holds the
labels the sampler needs and reads the examples only when a batch asks for them.

Resuming: torchdata's ``StatefulDataLoader`` (same arguments) saves the sampler's position
of the last batch the loop received, workers and prefetch included: checkpoint
``loader.state_dict()`` and resume with ``loader.load_state_dict(saved)`` on a new loader of a
new sampler (see ``docs/datasets.md``). With a plain ``DataLoader``, whose workers draw
batches from the sampler ahead of the training loop, save the loop's position,
``sampler.state_dict(batches_consumed=i + 1)`` with ``i`` from ``for i, batch in
enumerate(loader)``; see :mod:`xrisk.samplers`.

Examples
--------
>>> import numpy as np
>>> from torch.utils.data import DataLoader
>>> from xrisk.torch.data import DualSampler, IndexedDataset
>>> labels = np.array([1] * 10 + [0] * 90)
>>> data = IndexedDataset(np.random.default_rng(0).normal(size=(100, 3)), labels)
>>> sampler = DualSampler(labels, 10, sampling_rate=0.2)
>>> loader = DataLoader(data, sampler=sampler, batch_size=None)
>>> x, y, index = next(iter(loader))
>>> tuple(x.shape), y.tolist()[:3], index.dtype
((10, 3), [1, 1, 0], torch.int64)
>>> for epoch in range(2):  # the resumable loop
...     sampler.set_epoch(epoch)
...     for i, (x, y, index) in enumerate(loader):
...         state = sampler.state_dict(batches_consumed=i + 1)  # save it with the model
>>> state["epoch"], state["position"]
(2, 0)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler, Dataset, Sampler, default_collate

from xrisk import datasets as _datasets
from xrisk import samplers as _samplers

__all__ = ["DualSampler", "TriSampler", "RandomSampler", "BagSampler", "IndexedDataset"]

#: numpy dtype kinds that ``torch.from_numpy`` takes: bool, signed, unsigned, float, complex.
_TENSOR_KINDS = "biufc"


def _refuse_sampler_slot(sampler: Any, caller: FrameType | None) -> None:
    """Raise if ``caller`` is a ``BatchSampler`` iterating ``sampler`` (``DataLoader(sampler=)``).

    Why: torch wraps a ``sampler=`` in a ``BatchSampler`` that takes each element as one item;
    our elements are whole batches, so the loader would silently read one example per batch
    (or hand the dataset a list of indices). Only the caller's ``self`` is read.
    """
    owner = caller.f_locals.get("self") if caller is not None else None
    if isinstance(owner, BatchSampler) and owner.sampler is sampler:
        name = type(sampler).__name__
        raise TypeError(
            f"{name}: the DataLoader wrapped this sampler in a BatchSampler of batch_size="
            f"{owner.batch_size} (DataLoader(dataset, batch_size=..., sampler=sampler), "
            f"LibAUC's idiom); xrisk's torch samplers yield whole batches, so each batch would "
            "become one item. Expected the sampler as a sampler of whole batches. Fix: "
            "DataLoader(dataset, sampler=sampler, batch_size=None) (one gather per batch with "
            "xrisk's IndexedDataset) or DataLoader(dataset, batch_sampler=sampler), with no "
            "shuffle or drop_last (the batch size is the sampler's)."
        )


class _TorchBatches:
    """Mixin: iterate a core sampler as a torch batch sampler (one list of keys per batch)."""

    def _keys(self, batch: Any) -> list[Any]:
        return batch.tolist()

    def __iter__(self) -> Iterator[list[Any]]:
        _refuse_sampler_slot(self, sys._getframe(1))
        # map, not a generator: the core registers the pass at iter() time (resume position)
        return map(self._keys, super().__iter__())  # type: ignore[misc]


class DualSampler(_TorchBatches, _samplers.DualSampler, Sampler):
    """Batch sampler version of :class:`xrisk.samplers.DualSampler` (same arguments)."""


class RandomSampler(_TorchBatches, _samplers.RandomSampler, Sampler):
    """Batch sampler version of :class:`xrisk.samplers.RandomSampler` (same arguments)."""


class TriSampler(_TorchBatches, _samplers.TriSampler, Sampler):
    """Batch sampler version of :class:`xrisk.samplers.TriSampler` (same arguments).

    Classification batches are lists of ``(index, task_id)`` pairs, which
    :class:`IndexedDataset` answers with ``(x, y, (index, task_id))``; ranking batches are
    lists of ``(item_ids, query_id)`` pairs (``item_ids`` an int64 array).
    """

    def _keys(self, batch: tuple[np.ndarray, np.ndarray]) -> list[Any]:
        first, second = batch
        if self.mode == "classification":
            return list(zip(first.tolist(), second.tolist(), strict=True))
        return list(zip(first, second.tolist(), strict=True))


class BagSampler(_TorchBatches, _samplers.BagSampler, Sampler):
    """Batch sampler version of :class:`xrisk.samplers.BagSampler` (same arguments).

    Each batch is a list of ``(bag, instances, mask)`` triples, one per bag: the bag index,
    its K instance indices into the flat instance array and their mask (int64 arrays of
    shape (K,)); a dataset's ``__getitem__`` receives one triple (e.g. returns
    ``(x[instances], y[bag], bag, mask)``), so every batch has shape (B, K, ...).
    """

    def _keys(self, batch: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[Any]:
        bags, instances, mask = batch
        return list(zip(bags.tolist(), instances, mask, strict=True))


class IndexedDataset(_datasets.IndexedDataset, Dataset):
    """``torch.utils.data.Dataset`` whose item ``i`` is ``(x_i, y[i], i)``, for any data set.

    Same arguments as :class:`xrisk.datasets.IndexedDataset`: an array (a ``numpy.memmap``
    stays on disk) or any map-style dataset (a torchvision ``ImageFolder``, a Hugging Face
    ``datasets.Dataset``, your own lazily reading class), read only when a batch asks for it;
    the labels are ``targets`` (default ``data.targets``). A list of keys (what
    ``DataLoader(dataset, sampler=xrisk_sampler, batch_size=None)`` passes) gives the whole
    batch, which the loader turns into tensors (the examples of a dataset stacked as
    ``default_collate`` stacks them); with ``batch_sampler=`` the default collate function
    stacks the items of :meth:`__getitems__`. Workers (``num_workers``) read in parallel.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> from xrisk.torch.data import DualSampler, IndexedDataset
    >>> images = TensorDataset(torch.arange(40.0).reshape(20, 2))  # any map-style dataset
    >>> labels = np.array([1] * 4 + [0] * 16)
    >>> data = IndexedDataset(images, labels, inputs=0)  # x_i = images[i][0]
    >>> loader = DataLoader(data, sampler=DualSampler(labels, 8, num_pos=2), batch_size=None)
    >>> x, y, index = next(iter(loader))
    >>> tuple(x.shape), y.tolist()[:3], bool((x[:, 0] == 2 * index).all())
    ((8, 2), [1, 1, 0], True)
    """

    def _collate(self, examples: list[Any]) -> Any:
        return default_collate(examples)

    def __getitems__(self, keys: list[Any]) -> list[tuple[Any, Any, Any]]:
        """The items of a whole batch (a ``DataLoader`` calls this with each list its batch
        sampler yields), read at once. The values and dtypes equal those of
        ``[self[key] for key in keys]`` after the default collate, without its conversion of
        every item from numpy on its own (that was a fifth of a small model's epoch): an
        array's rows become one tensor cut into per-item views, which the collate stacks
        back, and int64 fields become Python ints, which it turns into one int64 tensor. A
        dataset's examples are read with one ``__getitems__`` call where it has one."""
        if not all(type(key) is int for key in keys):
            return [self[key] for key in keys]  # pairs, odd keys: item by item
        index = np.asarray(keys, dtype=np.int64)
        if not self._array:
            index = self.check_index(index)
            examples = self._examples(index)
            return list(zip(examples, *map(_items, (self.targets[index], index)), strict=True))
        if self.transform is not None:
            return [self[key] for key in keys]
        fields = self.batch(index)
        if any(field.dtype.kind not in _TENSOR_KINDS for field in fields):
            return [self[key] for key in keys]
        return list(zip(*map(_items, fields), strict=True))


def _items(field: np.ndarray) -> Any:
    """A batch field cut into what the default collate stacks back: Python ints for int64
    indices and labels (one int64 tensor), per-item views of one tensor otherwise."""
    if field.ndim == 1 and field.dtype == np.int64:
        return field.tolist()
    if field.dtype.kind not in _TENSOR_KINDS:
        return list(field)
    return torch.from_numpy(np.ascontiguousarray(field)).unbind(0)
