"""PyTorch backend: in-place row writes on buffers, ``detach`` for the autodiff boundary."""

from __future__ import annotations

from typing import Any

import array_api_compat.torch as namespace
import numpy as np
import torch

__all__ = [
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy",
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
    return np.asarray(x.detach().cpu().numpy())
