"""JAX backend: functional row writes (in place under ``jit`` with donated buffers)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as namespace
import numpy as np

__all__ = [  # noqa: F822  (index_dtype comes from the module __getattr__ below)
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy",
]

name = "jax"
has_autodiff = True


def _index_dtype() -> Any:
    return namespace.int64 if jax.config.read("jax_enable_x64") else namespace.int32


def __getattr__(attribute: str) -> Any:
    # index_dtype follows the x64 flag, which may be switched after this module is imported.
    if attribute == "index_dtype":
        return _index_dtype()
    raise AttributeError(attribute)


def stop_gradient(x: Any) -> Any:
    return jax.lax.stop_gradient(x)


def write_rows(table: Any, index: Any, rows: Any) -> Any:
    """Return ``table.at[index].set(rows)``; rebinding lets XLA reuse a donated buffer."""
    return table.at[index].set(rows.astype(table.dtype), unique_indices=False)


def device(x: Any) -> Any:
    if isinstance(x, jax.core.Tracer):
        return None
    return next(iter(x.devices()))


def inspectable(x: Any) -> bool:
    """Concrete arrays on the CPU (tracers under jit/grad have no values; an accelerator
    array would synchronise)."""
    if isinstance(x, jax.core.Tracer):
        return False
    return all(device.platform == "cpu" for device in x.devices())


def to_numpy(x: Any) -> np.ndarray:
    return np.asarray(x)
