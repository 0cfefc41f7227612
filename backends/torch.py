"""PyTorch backend: in-place row writes on buffers, ``detach`` for the autodiff boundary."""

from __future__ import annotations

import types
from typing import Any

import array_api_compat.torch as _compat
import numpy as np
import torch

from . import register_array_types

__all__ = [
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy", "assert_all", "axis_size", "fit_axis", "segment_sum",
    "segment_max",
]

name = "torch"

# Parameters among them: torch.compile cannot trace the string work that names a new type.
register_array_types(name, torch.Tensor, torch.nn.Parameter)


def _take(x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    if axis is None and x.ndim != 1:
        return _compat.take(x, indices)  # its error: axis must be given
    return torch.index_select(x, 0 if axis is None else axis, indices)


def _clip(x: Any, /, min: Any = None, max: Any = None) -> Any:  # noqa: A002 (array API)
    # Float tensors with finite Python-number bounds: clamp is the array API's clip.
    # (the bound tests inline: clip runs several times per step)
    if x.is_floating_point() and (min is not None or max is not None) and (
            min is None or (type(min) in _NUMBERS and min == min)) and (
            max is None or (type(max) in _NUMBERS and max == max)):
        return torch.clamp(x, min, max)
    return _compat.clip(x, min, max)


#: The bound types ``clamp`` takes as they are (finite or infinite; NaN goes to compat's clip).
_NUMBERS = (int, float)


def _asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
             **kwargs: Any) -> Any:
    # A numpy array to a CPU tensor (the host-ranked keys of xrisk._grouping, each stateful
    # step): torch.asarray itself, sharing memory as compat's wrapper does, without the
    # wrapper's keyword forwarding (half the cost of the call).
    if type(obj) is np.ndarray and dtype is None and copy is None and not kwargs:
        return torch.asarray(obj) if device is None else torch.asarray(obj, device=device)
    return _compat.asarray(obj, dtype=dtype, device=device, copy=copy, **kwargs)


def _where(condition: Any, x1: Any, x2: Any, /) -> Any:
    # Two tensors of one dtype: compat's promotion fix-up (a 0-d operand's dtype) changes
    # nothing, so call torch directly; anything else takes compat's path.
    if (isinstance(x1, torch.Tensor) and isinstance(x2, torch.Tensor)
            and x1.dtype == x2.dtype):
        return torch.where(condition, x1, x2)
    return _compat.where(condition, x1, x2)


def _finfo(type_: Any, /) -> Any:
    # A torch dtype straight to torch.finfo (compat tries it first too, inside a try).
    return torch.finfo(type_) if isinstance(type_, torch.dtype) else _compat.finfo(type_)


def _isdtype(dtype: Any, kind: Any) -> bool:
    # The kinds the core asks at every step, answered as compat answers them for a torch
    # dtype (its string dispatch costs more than the answer); everything else goes to compat.
    if isinstance(dtype, torch.dtype) and type(kind) is str:
        if kind == "real floating":
            return dtype.is_floating_point
        if kind == "bool":
            return dtype == torch.bool
    return _compat.isdtype(dtype, kind)


#: ``array_api_compat.torch`` with its hottest wrappers made direct calls. The core
#: calls ``take``, ``clip``, ``where``, ``isdtype`` and ``finfo`` several times per step
#: (and ``asarray`` of numpy keys in each stateful one), and an eager torch step is
#: dominated by per-op costs at the batch sizes users train with: compat's ``take`` adds three
#: ops to wrap negative indices, which the core never passes (its gathers use validated or
#: computed non-negative positions; a negative one still raises in ``index_select``), its
#: ``clip`` inspects its bounds in Python before ``clamp``, and its ``where`` reconciles the
#: dtypes of its operands even where they agree. A module object, so that ``torch.compile``
#: traces through it as through compat's own module (a custom class breaks the graph).
namespace = types.ModuleType("xrisk.backends.torch.namespace", __doc__)
namespace.__dict__.update({k: v for k, v in vars(_compat).items() if not k.startswith("__")})
namespace.__dict__.update(take=_take, clip=_clip, where=_where, asarray=_asarray, finfo=_finfo,
                          isdtype=_isdtype)
has_autodiff = True
index_dtype = torch.int64


def stop_gradient(x: Any) -> Any:
    # detach (not requires_grad_(False)): it works on non-leaf tensors and shares storage.
    return x.detach()


def write_rows(table: Any, index: Any, rows: Any) -> Any:
    """Write ``rows`` into ``table`` at ``index`` in place (O(batch)) and return ``table``."""
    # Conversions only where needed: a ``.to`` of the same dtype returns its input but costs
    # a dispatcher round trip (about 2 µs each on CPU), and every stateful step writes rows.
    if index.dtype != torch.int64:
        index = index.to(torch.int64)
    if rows.requires_grad:  # (rows built from detached values need no detach op)
        rows = rows.detach()
    if rows.dtype != table.dtype:
        rows = rows.to(table.dtype)
    with torch.no_grad():
        table.index_copy_(0, index, rows)
    return table


def segment_sum(values: Any, ids: Any, segments: int) -> Any:
    """Sums (segments, ...) of ``values`` (n, ...) by segment ``ids`` (n,): ``index_add``
    (differentiable; sequential on CPU, atomic on CUDA unless deterministic algorithms are on)."""
    out = values.new_zeros((segments, *values.shape[1:]))
    return out.index_add(0, ids, values)


def segment_max(values: Any, ids: Any, segments: int) -> Any:
    """Maxima (segments,) of ``values`` (n,) by segment ``ids``: ``scatter_reduce``; empty
    segments (never read: every id comes from a member) keep the dtype's lowest value."""
    info = torch.finfo if values.is_floating_point() else torch.iinfo
    out = values.new_full((segments,), info(values.dtype).min)
    return out.scatter_reduce(0, ids, values, "amax", include_self=False)


def device(x: Any) -> Any:
    return x.device


def axis_size(x: Any, axis: int) -> Any:
    """The size of axis ``axis``: an int (a symbolic int under ``torch.compile``)."""
    return x.shape[axis]


#: Sizes are always static here: nothing to make agree at run time (TensorFlow's hook).
fit_axis = None


def inspectable(x: Any) -> bool:
    """Eager CPU tensors: reading values costs no device sync. Under ``torch.compile`` values
    are fake tensors, and on an accelerator a read would synchronise every step."""
    return x.is_cpu and not torch.compiler.is_compiling()


def to_numpy(x: Any) -> np.ndarray:
    """``x`` as numpy; floats numpy lacks (bfloat16, float8) come back as float32 (exact)."""
    dtype = x.dtype
    if dtype not in _NUMPY_DTYPES and dtype.is_floating_point:
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
