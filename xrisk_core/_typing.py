"""The core's typing vocabulary, written once: arrays, namespaces, dtypes and the two dtype
helpers every loss and rule uses.

The core is written against the array API standard and runs on numpy, torch, JAX and
TensorFlow arrays, whose classes share no base class that a checker could name: an array is
therefore ``Any`` to mypy, and these aliases say in a signature what an ``Any`` stands for.

>>> import numpy as np, array_api_compat.numpy as xp
>>> x = np.ones(2, dtype=np.float32)
>>> in_dtype(x, xp.float32, xp) is x, in_dtype(x, xp.float64, xp).dtype
(True, dtype('float64'))
>>> compute_dtype(np.ones(1, dtype=np.float16), xp)
<class 'numpy.float32'>
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["Array", "DType", "Namespace", "compute_dtype", "in_dtype"]

#: An array of any backend (numpy, torch, JAX, TensorFlow; a traced one included).
Array: TypeAlias = Any
#: An array-API namespace (``array_api_compat.numpy``, ``jax.numpy``, xrisk's TF namespace).
Namespace: TypeAlias = Any
#: A dtype of such a namespace (``xp.float32``, ...).
DType: TypeAlias = Any


def in_dtype(x: Array, dtype: DType, xp: Namespace) -> Array:
    """``x`` in ``dtype``; ``x`` itself when it has it already (``astype`` would copy, and
    the core never writes in place)."""
    return x if x.dtype == dtype else xp.astype(x, dtype)


def compute_dtype(x: Array, xp: Namespace) -> DType:
    """float64 for float64 arrays, float32 otherwise (bfloat16, float16, float32): the dtype
    the optimizer rules compute and keep their slots in."""
    return xp.float64 if x.dtype == xp.float64 else xp.float32
