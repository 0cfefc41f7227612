"""``IndexedDataset``: any dataset's items as ``(x, y, index)``, as the X-risk losses need.

The stateful losses keep one entry per training example, addressed by the example's index,
and the xrisk samplers choose the indices from the labels alone. So the wrapper holds the
labels in memory (one small array) and reads the examples only when a batch asks for them:
from an array (numpy, including a memory-mapped one, which stays on disk), or lazily from any
map-style dataset (``len()`` and ``[i]``: a torchvision ``ImageFolder``, a Hugging Face
``datasets.Dataset``, a class that reads a file per item).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .._inputs import class_labels, preview, to_numpy

__all__ = ["IndexedDataset"]

#: ``inputs`` default: the first element of torchvision's ``(x, target)`` pairs when the
#: dataset has ``.targets``, the whole item otherwise.
_AUTO = "auto"


def _is_array(data: Any) -> bool:
    """Arrays (of any framework), nested lists and objects with ``__array__``: gathered at
    once by fancy indexing. Anything else with ``len()`` and ``[i]`` is read item by item."""
    return isinstance(data, np.ndarray | list | tuple) or hasattr(data, "__array__")


def _labels(targets: Any) -> np.ndarray:
    """``targets`` as a numpy array, a column object (e.g. a Hugging Face ``Column``, which
    numpy would iterate row by row: 30 s for a million labels) read with one slice."""
    if not _is_array(targets) and hasattr(targets, "__len__") and hasattr(targets, "__getitem__"):
        targets = targets[:]
    return to_numpy(targets)


def _stack(owner: str, values: list[Any]) -> Any:
    """Stack the examples of a batch along a new first axis, as numpy: dicts and tuples field
    by field (Hugging Face rows, ``(view, view)`` pairs), anything else by ``np.stack``."""
    first = values[0]
    if isinstance(first, Mapping):
        return {key: _stack(owner, [value[key] for value in values]) for key in first}
    if isinstance(first, tuple):
        return tuple(_stack(owner, list(column)) for column in zip(*values, strict=True))
    arrays = [to_numpy(value) for value in values]
    shapes = {array.shape for array in arrays}
    if len(shapes) > 1:
        raise ValueError(
            f"{owner}: the examples of a batch have shapes {sorted(shapes)[:4]}; expected one "
            "shape to stack them into a batch. Fix: pass a transform that brings every example "
            "to one shape (e.g. a resize and crop of images)."
        )
    return np.stack(arrays)


def _take(x: Any, where: np.ndarray) -> Any:
    """``x[where]`` for an array, a dict or tuple of them, or a torch tensor (the torch
    adapter's stacked examples)."""
    if isinstance(x, Mapping):
        return {key: _take(value, where) for key, value in x.items()}
    if isinstance(x, tuple):
        return tuple(_take(value, where) for value in x)
    return x[where]  # numpy, or torch, which takes a numpy index array


class IndexedDataset:
    """Pair the examples of any dataset with their index: item ``i`` is ``(x_i, y[i], i)``.

    The stateful losses keep one entry per training example, addressed by this index. Only
    the labels ``y`` are held in memory (the samplers need nothing else); the examples are
    read when an item or a batch is asked for.

    Parameters
    ----------
    data : array_like of shape (N, ...), or a map-style dataset of N items
        An array (numpy, a ``numpy.memmap``, which stays on disk and is read row by row as
        batches ask; torch, TensorFlow and JAX arrays, nested lists), whose row ``i`` is
        ``x_i``; or any object with ``len()`` and ``data[i]`` (a torchvision dataset, a
        Hugging Face ``datasets.Dataset``, your own lazily reading class), never read here.
    targets : array_like, shape (N,) or (N, T), optional
        The labels the samplers and losses see, e.g. ``hf_dataset["label"]`` or binary
        labels made from a multi-class dataset. Default: ``data.targets``, the labels a
        torchvision dataset lists without reading an image.
    transform : callable, optional
        Applied to ``x_i`` when an item is read (e.g. an augmentation).
    inputs : int, str or None, default "auto"
        Which part of a dataset's item is ``x_i``: ``data[i][inputs]`` (e.g. ``"image"`` for
        a Hugging Face row), or the whole item for ``None``. ``"auto"``: the first element of
        the ``(x, target)`` pairs of a dataset that has ``.targets`` (torchvision's
        convention; any other item then raises), the whole item otherwise. Arrays take the
        default only.

    Attributes
    ----------
    data : numpy.ndarray or the dataset
        What the examples are read from.
    targets : numpy.ndarray, shape (N,) or (N, T)
        The labels, e.g. for ``DualSampler(dataset.targets, ...)``.

    Raises
    ------
    TypeError
        ``data`` neither an array nor a dataset with ``len()`` and ``[i]``; no ``targets``
        and no ``data.targets``; ``inputs`` of another type, or given with an array.
    ValueError
        ``targets`` of another length than ``data``, or a scalar.

    Notes
    -----
    An item key may be an int or, for :class:`~xrisk.samplers.TriSampler` in classification
    mode, a pair ``(i, task)``; the item is then ``(x_i, y[i], (i, task))`` (LibAUC's contract).
    A list or 1-D array of indices (or of such pairs) is a whole batch (see :meth:`batch`):
    ``(x[index], y[index], index)`` as arrays (with ``(index, task)`` for pairs). That is what
    a torch ``DataLoader(dataset, sampler=xrisk_sampler, batch_size=None)`` asks for.

    ``y[i]`` always comes from ``targets``, never from the dataset's item, so the losses see
    the labels the sampler drew from. A batch of a dataset is read with one
    ``data.__getitems__(indices)`` call where the dataset has it (Hugging Face ``datasets``,
    torch ``Subset``), else item by item; its examples are stacked into numpy arrays (dicts
    and tuples field by field); the torch adapter's ``IndexedDataset`` stacks them as
    ``default_collate`` does instead. An array is gathered at once, ``data[index]``.

    Examples
    --------
    >>> import numpy as np
    >>> from xrisk.datasets import IndexedDataset
    >>> ds = IndexedDataset(np.eye(3), np.array([0, 1, 1]))
    >>> x, y, i = ds[2]
    >>> x.tolist(), int(y), i
    ([0.0, 0.0, 1.0], 1, 2)

    Any map-style dataset, read only when asked (here torchvision's ``(image, target)``
    convention with ``.targets``):

    >>> class Files:
    ...     targets = [0, 1, 1]
    ...     def __len__(self):
    ...         return 3
    ...     def __getitem__(self, i):  # e.g. reads and decodes a file
    ...         return np.full(2, float(i)), self.targets[i]
    >>> lazy = IndexedDataset(Files())
    >>> lazy.targets.tolist()
    [0, 1, 1]
    >>> x, y, index = lazy.batch([2, 0])
    >>> x.tolist(), y.tolist(), index.tolist()
    ([[2.0, 2.0], [0.0, 0.0]], [1, 0], [2, 0])
    """

    def __init__(
        self, data: Any, targets: Any = None, transform: Callable[[Any], Any] | None = None,
        *, inputs: int | str | None = _AUTO,
    ) -> None:
        owner = "IndexedDataset"
        array = _is_array(data)
        if not array and not (hasattr(data, "__len__") and hasattr(data, "__getitem__")):
            raise TypeError(
                f"{owner}: data is a {type(data).__name__}; expected an array or a map-style "
                "dataset (len(data) and data[i]). Fix: pass an array, or wrap an iterable in "
                "a class with __len__ and __getitem__."
            )
        if targets is None:
            targets = getattr(data, "targets", None)
            if targets is None:
                raise TypeError(
                    f"{owner}: targets=None and the {type(data).__name__} data has no .targets; "
                    "expected the labels of the examples. Fix: pass them, e.g. "
                    "IndexedDataset(x, y) or IndexedDataset(hf_dataset, hf_dataset['label'])."
                )
        if inputs is not None and type(inputs) is not int and not isinstance(inputs, str):
            raise TypeError(
                f"{owner}: inputs={inputs!r} is a {type(inputs).__name__}; expected an int (a "
                "position in each item), a str (a key of each item), None (the whole item) or "
                "'auto'. Fix: e.g. inputs=0 for (image, target) pairs, inputs='image' for rows."
            )
        if array and inputs != _AUTO:
            raise TypeError(
                f"{owner}: inputs={inputs!r} with an array; expected the default, since row i "
                "of an array is the example. Fix: drop inputs, or index the array yourself."
            )
        source = to_numpy(data) if array else data
        labels = _labels(targets)
        count = (source.shape[0] if source.ndim else 0) if array else len(source)
        if labels.ndim == 0 or labels.shape[0] != count:
            got = "a scalar" if labels.ndim == 0 else f"{labels.shape[0]} rows"
            raise ValueError(
                f"{owner}: data has {count} rows but targets has {got}; expected one target "
                "per example. Fix: pass the labels of exactly these examples."
            )
        self.data = source
        self.targets = labels
        self.transform = transform
        self._array = array
        if inputs == _AUTO:
            inputs = 0 if not array and hasattr(data, "targets") else None
            self._pairs = inputs == 0
        else:
            self._pairs = False
        self.inputs = inputs

    def __len__(self) -> int:
        return int(self.targets.shape[0])

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

    def __getitem__(self, key: Any) -> tuple[Any, ...]:
        """Item ``(x_i, y[i], i)`` for an integer key ``i``, ``(x_i, y[i], (i, task))`` for a
        pair ``(i, task)``, ``(x[instances], y[instances[0]], bag, mask)`` for a
        :class:`~xrisk.samplers.BagSampler` key ``(bag, instances, mask)``; for a list or
        1-D array of either, the whole batch at once (see :meth:`batch` and
        :meth:`bag_batch`).

        Raises
        ------
        TypeError
            A bool key, a tuple that is not a pair or a bag's triple, or an array of more than
            2 dimensions.
        IndexError
            An index outside ``[0, len(self))``.
        """
        if type(key) is int:
            return self._item(self._one_index(key))
        if isinstance(key, list) and key and isinstance(key[0], tuple) and len(key[0]) == 3:
            bags, instances, mask = (np.stack(column) for column in zip(*key, strict=True))
            return self.bag_batch(bags, instances, mask)  # torch's batch_size=None form
        if isinstance(key, list) or (not isinstance(key, tuple) and np.ndim(key) > 0):
            return self._batch_key(key)
        if isinstance(key, tuple):
            if len(key) == 3 and np.ndim(key[1]) == 1:
                bag, instances, mask = key
                x, y, _, _ = self.bag_batch(np.reshape(to_numpy(bag), 1),
                                            to_numpy(instances)[None], to_numpy(mask)[None])
                return x[0], y[0], self._one_index(bag, name="bag", in_range=False), mask
            if len(key) != 2:
                raise TypeError(
                    f"IndexedDataset: item key is a tuple of {len(key)} values; expected an "
                    "index, an (index, task_id) pair (TriSampler's contract) or a (bag, "
                    "instances, mask) triple with instances and mask of shape (K,) "
                    "(BagSampler's). Fix: pass one of those, or use dataset.batch(index) for an "
                    "index array."
                )
            i = self._one_index(key[0])
            task = self._one_index(key[1], name="task id", in_range=False)
            x, y, _ = self._item(i)
            return x, y, (i, task)
        return self._item(self._one_index(key))

    def _item(self, i: int) -> tuple[Any, Any, int]:
        if self._array:
            x = self.data[i]
            if self.transform is not None:
                x = self.transform(x)
        else:
            x = self._example(self.data[i], i)
        return x, self.targets[i], i

    def _example(self, item: Any, i: int) -> Any:
        """``x_i`` of the dataset's item ``i``: the part that ``inputs`` names, transformed."""
        key = self.inputs
        if key is not None:
            if self._pairs and not isinstance(item, tuple | list):
                raise TypeError(
                    f"IndexedDataset: item {i} of the {type(self.data).__name__} dataset is a "
                    f"{type(item).__name__}; a dataset with .targets is expected to give "
                    "(x, target) pairs (torchvision's convention), whose first element is the "
                    "example. Fix: pass inputs=None to take the whole item as the example."
                )
            try:
                item = item[key]
            except (IndexError, KeyError, TypeError) as error:
                fields = (f"keys {list(item)[:6]}" if isinstance(item, Mapping)
                          else f"a {type(item).__name__}")
                raise TypeError(
                    f"IndexedDataset: item {i} of the {type(self.data).__name__} dataset has "
                    f"no inputs={key!r} ({fields}: {error!r}); expected the position or key of "
                    "the example in every item. Fix: pass inputs= one of them, or None for "
                    "the whole item."
                ) from error
        return item if self.transform is None else self.transform(item)

    def _examples(self, idx: np.ndarray) -> list[Any]:
        """The examples ``x_i`` for ``i`` in ``idx`` (a dataset, not an array), read with one
        ``data.__getitems__`` call where the dataset has it (one query of a table instead of
        B), else item by item."""
        keys = idx.tolist()
        read_many = getattr(self.data, "__getitems__", None)
        items = read_many(keys) if read_many is not None else [self.data[i] for i in keys]
        if len(items) != len(keys):
            raise ValueError(
                f"IndexedDataset: {type(self.data).__name__}.__getitems__ returned "
                f"{len(items)} items for {len(keys)} indices; expected one item per index. "
                "Fix: make __getitems__ return [data[i] for i in indices]."
            )
        return [self._example(item, i) for item, i in zip(items, keys, strict=True)]

    def _collate(self, examples: list[Any]) -> Any:
        """Stack a batch's examples (the torch adapter stacks with ``default_collate``)."""
        return _stack("IndexedDataset", examples)

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

    def sampler_batch(self, batch: Any) -> tuple[Any, ...]:
        """The numpy batch for one batch of a core sampler, as it comes.

        An index array (``DualSampler``, ``RandomSampler``) gives ``(x, y, index)``;
        ``TriSampler``'s classification ``(index, task_id)`` gives ``(x, y, (index,
        task_id))``; ``BagSampler``'s ``(bags, instances, mask)`` gives ``(x, y, bags, mask)``
        (see :meth:`bag_batch`). What the JAX adapter's ``batches()`` puts on the device.

        Examples
        --------
        >>> import numpy as np
        >>> from xrisk.samplers import DualSampler
        >>> labels = np.array([1, 1, 0, 0, 0, 0])
        >>> data = IndexedDataset(np.arange(6.0), labels)
        >>> x, y, index = data.sampler_batch(DualSampler(labels, 4, seed=0).batch(0))
        >>> bool((x == index).all()), y.tolist()
        (True, [1, 1, 0, 0])
        """
        if isinstance(batch, tuple) and len(batch) == 3:
            return self.bag_batch(*batch)
        if isinstance(batch, tuple):
            index, task = batch
            x, y, idx = self.batch(index)
            return x, y, (idx, class_labels("IndexedDataset", to_numpy(task), name="task id"))
        return self.batch(batch)

    def bag_batch(self, bags: Any, instances: Any, mask: Any) -> tuple[Any, Any, Any, Any]:
        """``(x[instances], y[instances[:, 0]], bags, mask)`` for a batch of
        :class:`~xrisk.samplers.BagSampler` (multi-instance learning).

        The dataset holds the instances of all bags, bag after bag (the sampler's flat
        instance array), and ``targets`` gives each instance its bag's label; the first
        instance of every row is a drawn one (padding repeats it), so its label is the bag's.

        Parameters
        ----------
        bags : array_like of int, shape (B,)
            The bag indices (the ``index`` of the MIDAM losses).
        instances : array_like of int, shape (B, K)
            Indices of the drawn instances in this dataset.
        mask : array_like of int, shape (B, K)
            1 for a drawn instance, 0 for padding; returned as given.

        Returns
        -------
        x : array of shape (B, K, ...)
            Each distinct instance is read once (padding repeats one).
        y : numpy.ndarray, shape (B,) or (B, T)
        bags, mask : numpy.ndarray

        Examples
        --------
        >>> import numpy as np
        >>> from xrisk.samplers import BagSampler
        >>> sizes = np.array([2, 3, 1])  # bag b: instances offsets[b] .. offsets[b] + size - 1
        >>> instances = IndexedDataset(np.arange(6.0), np.repeat([1, 0, 1], sizes))
        >>> x, y, bags, mask = instances.bag_batch(*BagSampler(sizes, 2, 2, seed=2).batch(0))
        >>> bags.tolist(), x.tolist(), y.tolist(), mask.tolist()
        ([1, 2], [[3.0, 2.0], [5.0, 5.0]], [0, 1], [[1, 1], [1, 0]])
        """
        bags = class_labels("IndexedDataset", np.atleast_1d(to_numpy(bags)), name="bags")
        rows, mask = to_numpy(instances), to_numpy(mask)
        if rows.ndim != 2 or rows.shape[0] != bags.shape[0] or mask.shape != rows.shape:
            raise ValueError(
                f"IndexedDataset: bags of shape {bags.shape}, instances of shape {rows.shape} "
                f"and mask of shape {mask.shape}; expected (B,), (B, K) and (B, K). Fix: pass "
                "a BagSampler batch as it comes, bag_batch(*sampler.batch(position))."
            )
        flat = self.check_index(rows.reshape(-1))
        distinct, where = np.unique(flat, return_inverse=True)
        x, _, _ = self.batch(distinct)
        x = _take(x, where.reshape(rows.shape))
        return x, self.targets[flat.reshape(rows.shape)[:, 0]], bags, mask

    def batch(self, index: Any) -> tuple[Any, np.ndarray, np.ndarray]:
        """``(x[index], y[index], index)`` for an index array of shape (B,).

        ``x`` is an array of shape (B, ...) (a dict or tuple of them for examples that are
        dicts or tuples); only the B examples are read.
        """
        idx = self.check_index(index)
        if not self._array:
            x = self._collate(self._examples(idx))
        elif self.transform is not None:
            x = np.stack([self.transform(row) for row in self.data[idx]])
        else:
            x = self.data[idx]
        return x, self.targets[idx], idx
