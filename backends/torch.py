"""PyTorch backend: in-place row writes on buffers, ``detach`` for the autodiff boundary."""

from __future__ import annotations

from typing import Any

import array_api_compat.torch as namespace
import numpy as np
import torch

__all__ = [
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy", "assert_all",
]

name = "torch"
has_autodiff = True
index_dtype = torch.int64


def stop_gradient(x: Any) -> Any:
    # detach (not requires_grad_(False)): it works on non-leaf tensors and shares storage.
    return x.detach()


def write_rows(table: Any, index: Any, rows: Any) -> Any:
    """Write ``rows`` into ``table`` at ``index`` in place (O(batch)) and return ``table``."""
    with torch.no_grad():
        table.index_copy_(0, index.to(torch.int64), rows.detach().to(table.dtype))
    return table


def device(x: Any) -> Any:
    return x.device


def inspectable(x: Any) -> bool:
    """Eager CPU tensors: reading values costs no device sync. Under ``torch.compile`` values
    are fake tensors, and on an accelerator a read would synchronise every step."""
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def to_numpy(x: Any) -> np.ndarray:
    """``x`` as numpy; floats numpy lacks (bfloat16, float8) come back as float32 (exact)."""
    if x.dtype not in _NUMPY_DTYPES and x.dtype.is_floating_point:
        x = x.detach().float()
    return x.numpy(force=True)  # detaches and copies to the CPU only when needed


# torch dtypes with a numpy twin (checked every eager step: a set lookup).
_NUMPY_DTYPES = frozenset({
    torch.float16, torch.float32, torch.float64, torch.bool, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
    torch.complex64, torch.complex128,
})


def assert_all(ok: Any, message: str, values: Any) -> None:
    """``torch._check_tensor_all``: a RuntimeError eagerly; under ``torch.compile`` the graph
    breaks at the check, which then runs eagerly (the ``"raise"`` mode of xrisk.set_checks)."""
    torch._check_tensor_all(
        ok, lambda: f"{message} Received {to_numpy(values[~ok])[:5].tolist()}.")
