"""NumPy backend: the reference for values and state (no autodiff)."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as namespace
import numpy as np

__all__ = [
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy", "assert_all", "axis_size", "fit_axis", "segment_sum",
    "segment_max",
]

name = "numpy"
has_autodiff = False
index_dtype = np.int64


def stop_gradient(x: Any) -> Any:
    return x


def write_rows(table: Any, index: Any, rows: Any) -> Any:
    """Return ``table`` with ``table[index] = rows``; copies, so the old table stays valid."""
    out = np.array(table, copy=True)
    out[np.asarray(index)] = np.asarray(rows, dtype=out.dtype)
    return out


def segment_sum(values: Any, ids: Any, segments: int) -> Any:
    """Sums (segments, ...) of ``values`` (n, ...) by segment ``ids`` (n,), in position order."""
    out = np.zeros((segments, *values.shape[1:]), dtype=values.dtype)
    np.add.at(out, ids, values)
    return out


def segment_max(values: Any, ids: Any, segments: int) -> Any:
    """Maxima (segments,) of ``values`` (n,) by segment ``ids``; empty segments are never read
    (every id comes from a member), so their fill is the dtype's lowest value."""
    low = np.finfo(values.dtype).min if values.dtype.kind == "f" else np.iinfo(values.dtype).min
    out = np.full(segments, low, dtype=values.dtype)
    np.maximum.at(out, ids, values)
    return out


def device(x: Any) -> Any:
    return "cpu"


def axis_size(x: Any, axis: int) -> Any:
    """The size of axis ``axis``, an int (numpy shapes are always known)."""
    return x.shape[axis]


#: Sizes are always static here: nothing to make agree at run time (TensorFlow's hook).
fit_axis = None


def inspectable(x: Any) -> bool:
    """Values are on the host: checks read them for free."""
    return True


def to_numpy(x: Any) -> np.ndarray:
    out = np.asarray(x)
    # ml_dtypes floats (bfloat16, float8) are not numpy dtypes: scikit-learn, savez and other
    # frameworks reject them, so values leave as float32 (exact for them).
    return out.astype(np.float32) if out.dtype.kind == "V" else out


def assert_all(ok: Any, message: str, values: Any) -> None:
    """Raise ``ValueError(message)`` with the offending values unless ``ok`` is all true."""
    ok = np.asarray(ok)
    if not ok.all():
        raise ValueError(f"{message} Received {to_numpy(values)[~ok][:5].tolist()}.")
