"""JAX face of the samplers: plain iterators of numpy index arrays, and device batches.

The core samplers already are plain Python iterators of numpy int64 arrays, which JAX takes
as they are (``jnp.asarray`` or as jit arguments); they are re-exported here under the same
names as in ``xrisk.torch`` and ``xrisk.tensorflow``. :meth:`IndexedDataset.batches` reads
``(x, y, index)`` per batch, from an array (a ``numpy.memmap`` stays on disk) or lazily from
any map-style dataset (``len()`` and ``[i]``: a Hugging Face ``datasets.Dataset`` in numpy
format, a class that reads files), and puts them on the default device.

Resuming: nothing prefetches here, so ``sampler.state_dict()`` saved after a training step
is the loop's position; ``load_state_dict`` and ``set_epoch(epoch)`` on a fresh sampler
resume it (``state_dict(batches_consumed=i + 1)``, the call shared with torch and
TensorFlow, gives the same).

Examples
--------
>>> import numpy as np
>>> from xrisk.jax.data import DualSampler, IndexedDataset
>>> labels = np.array([1] * 10 + [0] * 90)
>>> data = IndexedDataset(np.zeros((100, 3)), labels)
>>> x, y, index = next(data.batches(DualSampler(labels, 10)))
>>> x.shape, int(y[:5].sum())
((10, 3), 5)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import jax
import jax.numpy as jnp

from xrisk import datasets as _datasets
from xrisk.adapter_api import check_count as _check_count
from xrisk.samplers import BagSampler, DualSampler, RandomSampler, TriSampler

__all__ = ["DualSampler", "TriSampler", "RandomSampler", "BagSampler", "IndexedDataset"]


class IndexedDataset(_datasets.IndexedDataset):
    """:class:`xrisk.datasets.IndexedDataset` with batches as JAX arrays.

    Examples
    --------
    A Hugging Face ``datasets.Dataset`` (or any map-style dataset), read batch by batch:

    >>> import datasets
    >>> import numpy as np
    >>> rows = datasets.Dataset.from_dict(
    ...     {"pixels": np.arange(40.0).reshape(20, 2).tolist(), "label": [1] * 4 + [0] * 16}
    ... ).with_format("numpy")
    >>> data = IndexedDataset(rows, rows["label"], inputs="pixels")
    >>> x, y, index = next(data.batches(DualSampler(data.targets, 8, num_pos=2)))
    >>> x.shape, y.tolist()[:3], bool((x[:, 0] == 2 * index).all())
    ((8, 2), [1, 1, 0], True)
    """

    def batches(self, sampler: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        """Yield ``(x, y, index)`` as ``jax.Array`` for each batch of ``sampler``.

        ``sampler`` yields index arrays (``DualSampler``, ``RandomSampler``) or, for
        ``TriSampler`` in classification mode, ``(index, task_id)``; then the last element
        is the pair ``(index, task_id)``. A ``BagSampler``'s ``(bags, instances, mask)``
        gives ``(x, y, bags, mask)`` (see :meth:`bag_batch`). ``x`` is a pytree of arrays
        where the examples are dicts or tuples (e.g. Hugging Face rows).
        """
        for batch in sampler:
            yield jax.tree.map(jnp.asarray, self.sampler_batch(batch))

    def grain_dataset(self, sampler: Any, epochs: int) -> Any:
        """Epochs ``0 .. epochs - 1`` of ``sampler`` as a grain ``MapDataset`` of batches.

        Element ``k`` is batch ``k % len(sampler)`` of epoch ``k // len(sampler)``, the
        numpy batch :meth:`batches` would give (read when grain asks for it). Every batch is a
        pure function of the sampler's seed, epoch and position, so grain's reading threads
        or processes (``to_iter_dataset(grain.ReadOptions(...))``, ``mp_prefetch``) read
        ahead freely, and the iterator's ``get_state()`` / ``set_state()`` resume exactly,
        across epochs too. Needs ``pip install grain``.

        Parameters
        ----------
        sampler : a sampler of :mod:`xrisk.samplers` (sharded or not)
        epochs : int
            Number of epochs, from epoch 0.

        Examples
        --------
        A pipeline read ahead by two threads, checkpointed mid-run (the test suite runs this
        where grain is installed)::

            pipeline = dataset.grain_dataset(sampler, epochs=10).to_iter_dataset(
                grain.ReadOptions(num_threads=2, prefetch_buffer_size=4))
            batches = iter(pipeline)
            for x, y, index in batches:
                ...  # train; save batches.get_state() with the model
            resumed = iter(pipeline)  # a new run: the same dataset, sampler and epochs
            resumed.set_state(saved)  # yields exactly the batches not yet trained on
        """
        try:
            import grain
        except ImportError as error:
            raise ImportError(
                f"IndexedDataset.grain_dataset needs grain, which is not installed ({error}); "
                "expected `import grain` to work. Fix: pip install grain, or iterate "
                "dataset.batches(sampler)."
            ) from error
        count = _check_count("IndexedDataset", "epochs", epochs)
        per_epoch = len(sampler)
        return grain.MapDataset.range(count * per_epoch).map(_BatchAt(self, sampler, per_epoch))


class _BatchAt:
    """Element ``k`` of :meth:`IndexedDataset.grain_dataset` (a class, not a closure: grain's
    worker processes pickle it)."""

    def __init__(self, dataset: IndexedDataset, sampler: Any, per_epoch: int) -> None:
        self.dataset, self.sampler, self.per_epoch = dataset, sampler, per_epoch

    def __call__(self, k: int) -> tuple[Any, ...]:
        epoch, position = divmod(int(k), self.per_epoch)
        return self.dataset.sampler_batch(self.sampler.batch(position, epoch=epoch))
