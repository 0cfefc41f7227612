"""array-api-strict backend: proves the core uses nothing outside the array API standard."""

from __future__ import annotations

from typing import Any

import array_api_strict as namespace
import numpy as np

__all__ = [
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy", "assert_all", "axis_size", "fit_axis", "segment_sum",
    "segment_max",
]

name = "array_api_strict"
has_autodiff = False
index_dtype = namespace.int64


def stop_gradient(x: Any) -> Any:
    return x


def write_rows(table: Any, index: Any, rows: Any) -> Any:
    """Return a new table with ``table[index] = rows`` (strict arrays have no scatter)."""
    out = np.array(to_numpy(table), copy=True)
    out[to_numpy(index)] = to_numpy(rows)
    return namespace.asarray(out, dtype=table.dtype, device=table.device)


def segment_sum(values: Any, ids: Any, segments: int) -> Any:
    """Sums (segments, ...) of ``values`` (n, ...) by segment ``ids`` (the standard has no
    scatter: numpy's, as the reference)."""
    from . import numpy as reference

    out = reference.segment_sum(to_numpy(values), to_numpy(ids), segments)
    return namespace.asarray(out, dtype=values.dtype, device=values.device)


def segment_max(values: Any, ids: Any, segments: int) -> Any:
    """Maxima (segments,) of ``values`` (n,) by segment ``ids`` (numpy's, as the reference)."""
    from . import numpy as reference

    out = reference.segment_max(to_numpy(values), to_numpy(ids), segments)
    return namespace.asarray(out, dtype=values.dtype, device=values.device)


def device(x: Any) -> Any:
    return x.device


def axis_size(x: Any, axis: int) -> Any:
    """The size of axis ``axis``, an int (eager arrays: shapes are always known)."""
    return x.shape[axis]


#: Sizes are always static here: nothing to make agree at run time (TensorFlow's hook).
fit_axis = None


def inspectable(x: Any) -> bool:
    """Values are on the host: checks read them for free."""
    return True


def to_numpy(x: Any) -> np.ndarray:
    return np.asarray(x)


def assert_all(ok: Any, message: str, values: Any) -> None:
    """Raise ``ValueError(message)`` with the offending values unless ``ok`` is all true."""
    ok = to_numpy(ok)
    if not ok.all():
        raise ValueError(f"{message} Received {to_numpy(values)[~ok][:5].tolist()}.")
