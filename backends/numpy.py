"""NumPy backend: the reference for values and state (no autodiff)."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as namespace
import numpy as np

__all__ = [
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy", "assert_all", "axis_size",
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


def device(x: Any) -> Any:
    return "cpu"


def axis_size(x: Any, axis: int) -> Any:
    """The size of axis ``axis``, an int (numpy shapes are always known)."""
    return x.shape[axis]


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
