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

import numpy as np
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
    """:class:`xrisk.datasets.IndexedDataset` with a ``tf.data`` pipeline of batches.

    In-memory numpy data is gathered inside the graph (``tf.gather`` of one constant); any
    other source (a map-style dataset of ``len()`` and ``data[i]``, a ``numpy.memmap``, data
    with a ``transform``) is read lazily, only the batch's rows, by
    :meth:`xrisk.datasets.IndexedDataset.batch` inside ``tf.numpy_function``: nothing is
    loaded into memory up front.

    Examples
    --------
    >>> import numpy as np, tensorflow as tf
    >>> from xrisk.tensorflow.data import IndexedDataset
    >>> class Files:  # e.g. reads one file per item
    ...     def __len__(self):
    ...         return 4
    ...     def __getitem__(self, i):
    ...         return np.full(2, float(i), dtype=np.float32)
    >>> lazy = IndexedDataset(Files(), np.array([0, 1, 1, 0]))
    >>> x, y = lazy.gather(tf.constant([3, 1], tf.int64))
    >>> x.numpy().tolist(), y.numpy().tolist()
    ([[3.0, 3.0], [1.0, 1.0]], [0, 1])
    """

    def _in_memory(self) -> bool:
        return (isinstance(self.data, np.ndarray) and not isinstance(self.data, np.memmap)
                and getattr(self, "transform", None) is None)

    def gather(self, index: tf.Tensor) -> tuple[Any, tf.Tensor]:
        """``(x[index], y[index])`` as tensors, for an int64 index batch (inside ``tf.data``).

        A lazily read source is read once (its first example) to learn the shapes and dtypes
        of ``x``; an example that is a dict or tuple of arrays gives a dict or tuple.
        """
        if self._in_memory():
            tensors = self.__dict__.get("_tf_tensors")
            if tensors is None:
                with tf.init_scope():
                    tensors = (tf.constant(self.data), tf.constant(self.targets))
                self.__dict__["_tf_tensors"] = tensors
            return tf.gather(tensors[0], index), tf.gather(tensors[1], index)
        template = self.__dict__.get("_tf_template")
        if template is None:
            x0, _, _ = self.batch(np.zeros(1, dtype=np.int64))
            template = tf.nest.map_structure(np.asarray, x0)
            self.__dict__["_tf_template"] = template
        flat = tf.nest.flatten(template)

        def read(idx: np.ndarray) -> list[np.ndarray]:
            x, y, _ = self.batch(np.asarray(idx, dtype=np.int64))
            parts = [np.asarray(part, dtype=t.dtype)
                     for part, t in zip(tf.nest.flatten(x), flat, strict=True)]
            return [*parts, np.asarray(y, dtype=self.targets.dtype)]

        out = tf.numpy_function(read, [index], [*(tf.as_dtype(t.dtype) for t in flat),
                                                tf.as_dtype(self.targets.dtype)],
                                stateful=False)
        for part, t in zip(out[:-1], flat, strict=True):
            part.set_shape((None, *t.shape[1:]))
        out[-1].set_shape((None, *self.targets.shape[1:]))
        return tf.nest.pack_sequence_as(template, list(out[:-1])), out[-1]

    def as_dataset(self, sampler: _TFSource) -> tf.data.Dataset:
        """``(x, y, index)`` batches for the index batches of ``sampler``.

        For ``TriSampler`` in classification mode the last element is ``(index, task_id)``.
        For ``model.fit`` use :func:`xrisk.tensorflow.fit_dataset` (known cardinality, an
        epoch that moves only with trained batches).
        """
        source = sampler.as_dataset()
        if isinstance(sampler, TriSampler):
            if sampler.mode != "classification":
                raise ValueError(
                    "IndexedDataset.as_dataset: TriSampler(mode='ranking') yields item and "
                    "query ids, not dataset rows; expected a classification or binary sampler. "
                    "Fix: iterate the ranking sampler's as_dataset() directly."
                )
            return source.map(lambda i, t: (*self.gather(i), (i, t)))
        return source.map(lambda i: (*self.gather(i), i))
