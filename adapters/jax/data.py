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
            if isinstance(batch, tuple) and len(batch) == 3:
                x, y, bags, mask = self.bag_batch(*batch)
                yield _device(x), jnp.asarray(y), jnp.asarray(bags), jnp.asarray(mask)
            elif isinstance(batch, tuple):
                index, task = batch
                x, y, idx = self.batch(index)
                yield _device(x), jnp.asarray(y), (jnp.asarray(idx), jnp.asarray(task))
            else:
                x, y, idx = self.batch(batch)
                yield _device(x), jnp.asarray(y), jnp.asarray(idx)


def _device(x: Any) -> Any:
    """Every array of ``x`` (an array, or a dict or tuple of them) as a ``jax.Array``."""
    return jax.tree.map(jnp.asarray, x)
