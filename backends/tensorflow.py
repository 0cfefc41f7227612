"""TensorFlow backend, with the array-API shim the core needs (array-api-compat has none).

The shim :data:`namespace` exposes exactly :data:`SHIM_FUNCTIONS`: the functions the core
calls, with array-API semantics. ``tests/test_backends.py`` checks that list against the
``xp.<name>`` calls found in ``xrisk_core``, so the shim grows only with the core.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import tensorflow as tf

__all__ = ["name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows",
           "device", "inspectable", "to_numpy", "assert_all", "axis_size", "fit_axis",
           "segment_sum", "segment_max", "SHIM_FUNCTIONS"]

name = "tensorflow"
has_autodiff = True
index_dtype = tf.int64
segment_sum, segment_max = tf.math.unsorted_segment_sum, tf.math.unsorted_segment_max


def _like(value: Any, other: Any) -> Any:
    """Python scalars take the dtype of the array they meet (array-API promotion)."""
    if isinstance(value, int | float | bool) and hasattr(other, "dtype"):
        return tf.constant(value, dtype=other.dtype)
    return value


def _pair(x: Any, y: Any) -> tuple[Any, Any]:
    return _like(x, y), _like(y, x)


def asarray(obj: Any, dtype: Any = None, device: Any = None) -> Any:
    return tf.convert_to_tensor(obj, dtype=dtype)


def astype(x: Any, dtype: Any, copy: bool = True) -> Any:
    return tf.cast(x, dtype)


def where(condition: Any, x1: Any, x2: Any) -> Any:
    x1, x2 = _pair(x1, x2)
    return tf.where(condition, x1, x2)


def take(x: Any, indices: Any, axis: int | None = None) -> Any:
    return tf.gather(x, indices, axis=axis or 0)


def concat(arrays: Any, axis: int = 0) -> Any:
    return tf.concat(arrays, axis=axis)


def _reduction(reduce: Any) -> Any:
    """The array-API reduction (``sum``, ``all``, ``max``, ``min``) of ``tf.reduce_*``."""
    return lambda x, axis=None, keepdims=False: reduce(x, axis=axis, keepdims=keepdims)


def maximum(x1: Any, x2: Any) -> Any:
    return tf.maximum(*_pair(x1, x2))


def clip(x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    if min is not None:
        x = tf.maximum(x, _like(min, x))
    if max is not None:
        x = tf.minimum(x, _like(max, x))
    return x


def pow(x1: Any, x2: Any) -> Any:  # noqa: A001
    return tf.pow(*_pair(x1, x2))


def zeros(shape: Any, dtype: Any = None, device: Any = None) -> Any:
    return tf.zeros(shape, dtype=dtype or tf.float32)


def full_like(x: Any, fill_value: Any, dtype: Any = None, device: Any = None) -> Any:
    return tf.fill(tf.shape(x), tf.constant(fill_value, dtype=dtype or x.dtype))


def zeros_like(x: Any, dtype: Any = None, device: Any = None) -> Any:
    return tf.zeros_like(x, dtype=dtype)


def ones_like(x: Any, dtype: Any = None, device: Any = None) -> Any:
    return tf.ones_like(x, dtype=dtype)


def arange(stop: int, dtype: Any = None, device: Any = None) -> Any:
    return tf.range(stop, dtype=dtype or tf.int64)


def reshape(x: Any, shape: Any, copy: bool | None = None) -> Any:
    return tf.reshape(x, shape)


_KINDS = {
    "real floating": lambda d: d.is_floating,
    "integral": lambda d: d.is_integer,
    "bool": lambda d: d == tf.bool,
}


def isdtype(dtype: Any, kind: str) -> bool:
    return bool(_KINDS[kind](tf.as_dtype(dtype)))


def finfo(dtype: Any) -> Any:  # ml_dtypes (a TensorFlow dependency) also knows bfloat16
    return ml_dtypes.finfo(tf.as_dtype(dtype).as_numpy_dtype)


def iinfo(dtype: Any) -> Any:
    return np.iinfo(tf.as_dtype(dtype).as_numpy_dtype)


SHIM_FUNCTIONS = (
    "abs", "all", "arange", "asarray", "astype", "clip", "concat", "exp", "expand_dims", "finfo",
    "float32", "float64", "floor", "full_like", "iinfo", "int32", "int64", "isdtype",
    "isfinite", "log", "log1p", "matrix_transpose", "max", "maximum", "min", "ones_like", "pow",
    "reshape", "searchsorted", "sort", "sqrt", "stack", "sum", "take", "where", "zeros",
    "zeros_like",
)

_DIRECT = {"abs": tf.math.abs, "sum": _reduction(tf.reduce_sum), "exp": tf.exp,
           "all": _reduction(tf.reduce_all), "max": _reduction(tf.reduce_max),
           "min": _reduction(tf.reduce_min), "floor": tf.floor, "log": tf.math.log,
           "log1p": tf.math.log1p, "sqrt": tf.sqrt, "isfinite": tf.math.is_finite,
           "float32": tf.float32, "float64": tf.float64, "int32": tf.int32, "int64": tf.int64,
           "matrix_transpose": tf.linalg.matrix_transpose, "sort": tf.sort,
           "searchsorted": tf.searchsorted, "stack": tf.stack, "expand_dims": tf.expand_dims}

namespace = SimpleNamespace(
    **{fn: _DIRECT[fn] if fn in _DIRECT else globals()[fn] for fn in SHIM_FUNCTIONS}
)


def stop_gradient(x: Any) -> Any:
    return tf.stop_gradient(x)


def write_rows(table: Any, index: Any, rows: Any) -> Any:
    """Write rows at ``index``: in place on a variable, functionally on a tensor.

    Variables take ``scatter_update`` of ``tf.IndexedSlices``: distributed variables
    (``MirroredVariable`` under a ``tf.distribute`` strategy) have it, not
    ``scatter_nd_update``; a batch of run-time size (a gathered batch) writes the same way.
    """
    index, rows = tf.cast(index, tf.int64), tf.cast(rows, table.dtype)
    if isinstance(table, tf.Variable | tf.distribute.DistributedValues):
        table.scatter_update(tf.IndexedSlices(rows, index, tf.shape(table, tf.int64)))
        return table
    return tf.tensor_scatter_nd_update(table, tf.expand_dims(index, 1), rows)


def device(x: Any) -> Any:
    return getattr(x, "device", None)


def axis_size(x: Any, axis: int) -> Any:
    """The size of axis ``axis``: an int, or an int64 scalar tensor where it is known only at
    run time (a ``tf.function`` traced with ``None`` in the input signature)."""
    size = x.shape[axis]
    return tf.shape(x, out_type=tf.int64)[axis] if size is None else size


def fit_axis(x: Any, axis: int, size: Any, *, pad: int, fill: int) -> Any:
    """``x`` with ``pad`` entries of ``fill`` (``False`` in a bool input) appended along
    ``axis``, then cut to its first ``size`` entries (an int or a run-time scalar): inputs of
    run-time size made to agree (:mod:`xrisk._run_time_sizes`), values and gradients exact."""
    shape = tuple(pad if a == axis else axis_size(x, a) for a in range(len(x.shape)))
    padding = tf.zeros(shape, dtype=x.dtype)
    if fill and x.dtype != tf.bool:
        padding = padding + fill
    cut = (slice(None),) * axis + (slice(None, size),)
    return tf.concat([x, padding], axis=axis)[cut]


def inspectable(x: Any) -> bool:
    """Eager tensors on the CPU (inside ``tf.function`` values are symbolic)."""
    return tf.executing_eagerly() and "GPU" not in (getattr(x, "device", "") or "")


def to_numpy(x: Any) -> np.ndarray:
    out = np.asarray(x.numpy() if hasattr(x, "numpy") else x)
    # ml_dtypes floats (bfloat16, float8) are not numpy dtypes: they leave as float32 (exact).
    return out.astype(np.float32) if out.dtype.kind == "V" else out


def assert_all(ok: Any, message: str, values: Any) -> None:
    """``tf.debugging.Assert``: InvalidArgumentError eagerly and inside ``tf.function`` (an
    assertion op, run by the automatic control dependencies of the graph)."""
    bad = tf.boolean_mask(values, tf.logical_not(ok))
    tf.debugging.Assert(tf.reduce_all(ok), [message, "Received:", bad], summarize=5)
