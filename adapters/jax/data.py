"""JAX face of the samplers: plain iterators of numpy index arrays, and device batches.

The core samplers already are plain Python iterators of numpy int64 arrays, which JAX takes
as they are (``jnp.asarray`` or as jit arguments); they are re-exported here under the same
names as in ``xrisk.torch`` and ``xrisk.tensorflow``. :meth:`IndexedDataset.batches` gathers
``(x, y, index)`` per batch and puts them on the default device.

Resuming: save ``sampler.state_dict(batches_consumed=i + 1)`` with ``i`` from
``for i, batch in enumerate(dataset.batches(sampler))`` (the same call as with torch and
TensorFlow; nothing prefetches here, so it equals ``sampler.state_dict()``), then
``load_state_dict`` and ``set_epoch(epoch)`` on a fresh sampler.

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

import jax.numpy as jnp

from xrisk import datasets as _datasets
from xrisk.samplers import BagSampler, DualSampler, RandomSampler, TriSampler

__all__ = ["DualSampler", "TriSampler", "RandomSampler", "BagSampler", "IndexedDataset"]


class IndexedDataset(_datasets.IndexedDataset):
    """:class:`xrisk.datasets.IndexedDataset` with batches as JAX arrays."""

    def batches(self, sampler: Iterable[Any]) -> Iterator[tuple[Any, Any, Any]]:
        """Yield ``(x, y, index)`` as ``jax.Array`` for each batch of ``sampler``.

        ``sampler`` yields index arrays (``DualSampler``, ``RandomSampler``) or, for
        ``TriSampler`` in classification mode, ``(index, task_id)``; then the last element
        is the pair ``(index, task_id)``.
        """
        for batch in sampler:
            if isinstance(batch, tuple):
                index, task = batch
                x, y, idx = self.batch(index)
                yield jnp.asarray(x), jnp.asarray(y), (jnp.asarray(idx), jnp.asarray(task))
            else:
                x, y, idx = self.batch(batch)
                yield jnp.asarray(x), jnp.asarray(y), jnp.asarray(idx)
