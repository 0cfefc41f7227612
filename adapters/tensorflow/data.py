"""TensorFlow face of the samplers: ``tf.data`` sources of index batches and of ``(x, y, index)``.

Each sampler has :meth:`as_dataset`, a ``tf.data.Dataset`` that yields the sampler's batches
(int64 tensors); iterating it again runs the next epoch (the sampler advances by itself, or
call ``set_epoch``). :class:`IndexedDataset` gathers ``(x, y, index)`` inside the pipeline.

Resuming: iterate the dataset once per epoch (no ``.repeat()``). ``.prefetch`` draws batches
from the sampler ahead of the loop, so save the loop's position,
``sampler.state_dict(batches_consumed=i + 1)`` with ``i`` from
``for i, batch in enumerate(dataset)``; a fresh sampler's ``load_state_dict`` and
``set_epoch(epoch)`` then continue with the first batch not trained on.

Examples
--------
>>> import numpy as np
>>> from xrisk.tensorflow.data import DualSampler, IndexedDataset
>>> labels = np.array([1] * 10 + [0] * 90)
>>> data = IndexedDataset(np.zeros((100, 3)), labels)
>>> sampler = DualSampler(labels, 10)
>>> x, y, index = next(iter(data.as_dataset(sampler)))
>>> tuple(x.shape), int(y[:5].numpy().sum()), index.dtype.name
((10, 3), 5, 'int64')
>>> sampler.set_epoch(0)
>>> pipeline = data.as_dataset(sampler).prefetch(2)
>>> for i, (x, y, index) in enumerate(pipeline):
...     if i == 2:
...         break
>>> sampler.state_dict(batches_consumed=i + 1)["position"]  # the loop's, not the prefetcher's
3
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from xrisk import datasets as _datasets
from xrisk import samplers as _samplers

__all__ = ["DualSampler", "TriSampler", "RandomSampler", "BagSampler", "IndexedDataset"]


def _index_spec(length: int | None) -> tf.TensorSpec:
    return tf.TensorSpec(shape=(length,), dtype=tf.int64)


class _TFSource:
    """Mixin giving a core sampler a ``tf.data`` face."""

    def _signature(self) -> Any:
        raise NotImplementedError

    def as_dataset(self) -> tf.data.Dataset:
        """``tf.data.Dataset`` of this sampler's batches (one epoch per iteration)."""
        return tf.data.Dataset.from_generator(
            lambda: iter(self),  # type: ignore[call-overload]
            output_signature=self._signature(),
        )


class DualSampler(_TFSource, _samplers.DualSampler):
    """:class:`xrisk.samplers.DualSampler` with :meth:`as_dataset` (same arguments)."""

    def _signature(self) -> Any:
        return _index_spec(self.batch_size // self.world_size)


class RandomSampler(_TFSource, _samplers.RandomSampler):
    """:class:`xrisk.samplers.RandomSampler` with :meth:`as_dataset` (same arguments)."""

    def _signature(self) -> Any:
        fixed = self.drop_last or self.num_samples % self.batch_size == 0
        return _index_spec(self.batch_size // self.world_size if fixed else None)


class TriSampler(_TFSource, _samplers.TriSampler):
    """:class:`xrisk.samplers.TriSampler` with :meth:`as_dataset` (same arguments).

    Classification batches are ``(index, task_id)``; ranking batches ``(item_ids, query_ids)``.
    """

    def _signature(self) -> Any:
        tasks = self.num_sampled_tasks // self.world_size
        if self.mode == "classification":
            spec = _index_spec(tasks * self.batch_size_per_task)
            return spec, spec
        items = tf.TensorSpec(shape=(tasks, self.batch_size_per_task), dtype=tf.int64)
        return items, _index_spec(tasks)


class BagSampler(_TFSource, _samplers.BagSampler):
    """:class:`xrisk.samplers.BagSampler` with :meth:`as_dataset` (same arguments).

    Batches are ``(bags, instances, mask)`` of shapes (B,), (B, K), (B, K); gather the
    instances' features with ``tf.gather(x, instances)`` to get (B, K, ...).
    """

    def _signature(self) -> Any:
        fixed = self.drop_last or self.num_bags % self.batch_size == 0
        rows = self.batch_size // self.world_size if fixed else None
        grid = tf.TensorSpec(shape=(rows, self.num_instances), dtype=tf.int64)
        return _index_spec(rows), grid, grid


class IndexedDataset(_datasets.IndexedDataset):
    """:class:`xrisk.datasets.IndexedDataset` with a ``tf.data`` pipeline of batches."""

    def as_dataset(self, sampler: _TFSource) -> tf.data.Dataset:
        """``(x, y, index)`` batches for the index batches of ``sampler``.

        For ``TriSampler`` in classification mode the last element is ``(index, task_id)``.
        """
        x = tf.constant(self.data)
        y = tf.constant(self.targets)
        source = sampler.as_dataset()
        if isinstance(sampler, TriSampler):
            if sampler.mode != "classification":
                raise ValueError(
                    "IndexedDataset.as_dataset: TriSampler(mode='ranking') yields item and "
                    "query ids, not dataset rows; expected a classification or binary sampler. "
                    "Fix: iterate the ranking sampler's as_dataset() directly."
                )
            return source.map(lambda i, t: (tf.gather(x, i), tf.gather(y, i), (i, t)))
        return source.map(lambda i: (tf.gather(x, i), tf.gather(y, i), i))
