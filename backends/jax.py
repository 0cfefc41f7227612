"""JAX backend: functional row writes (in place under ``jit`` with donated buffers)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as namespace
import numpy as np

__all__ = [  # noqa: F822  (index_dtype comes from the module __getattr__ below)
    "name", "namespace", "has_autodiff", "index_dtype", "stop_gradient", "write_rows", "device",
    "inspectable", "to_numpy", "assert_all", "axis_size", "fit_axis", "segment_sum",
    "segment_max",
]

name = "jax"
has_autodiff = True


def _index_dtype() -> Any:
    return namespace.int64 if jax.config.read("jax_enable_x64") else namespace.int32


if TYPE_CHECKING:
    index_dtype: Any  # provided by the module __getattr__ below


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


def segment_sum(values: Any, ids: Any, segments: int) -> Any:
    """Sums (segments, ...) of ``values`` (n, ...) by segment ``ids`` (n,)."""
    return jax.ops.segment_sum(values, ids, segments)


def segment_max(values: Any, ids: Any, segments: int) -> Any:
    """Maxima (segments,) of ``values`` (n,) by segment ``ids``."""
    return jax.ops.segment_max(values, ids, segments)


def device(x: Any) -> Any:
    if isinstance(x, jax.core.Tracer):
        return None
    return next(iter(x.devices()))


def axis_size(x: Any, axis: int) -> Any:
    """The size of axis ``axis``, an int (JAX traces with static shapes)."""
    return x.shape[axis]


#: Sizes are always static here: nothing to make agree at run time (TensorFlow's hook).
fit_axis = None


def inspectable(x: Any) -> bool:
    """Concrete arrays on the CPU (tracers under jit/grad have no values; an accelerator
    array would synchronise)."""
    if isinstance(x, jax.core.Tracer):
        return False
    return all(device.platform == "cpu" for device in x.devices())


def to_numpy(x: Any) -> np.ndarray:
    out = np.asarray(x)
    # ml_dtypes floats (bfloat16, float8) are not numpy dtypes: they leave as float32 (exact).
    return out.astype(np.float32) if out.dtype.kind == "V" else out


def assert_all(ok: Any, message: str, values: Any) -> None:
    """Raise unless ``ok`` is all true (the ``"raise"`` mode of ``xrisk.set_checks``).

    Within :func:`functional_checks` (``xrisk.jax.checked``) this is a ``checkify.check``:
    the error comes back as a value with the step's outputs. Elsewhere — eagerly, under
    ``jax.grad`` or a plain ``jax.jit`` — a host callback raises while the step runs (under
    jit as a ``JaxRuntimeError`` carrying the message; a donated input is then lost).
    """
    flat = namespace.reshape(ok, (-1,))
    first_bad = namespace.reshape(values, (-1,))[namespace.argmin(flat)]
    passed = namespace.all(flat)
    if _FUNCTIONAL_CHECKS.get():
        from jax.experimental import checkify

        text = message.replace("{", "{{").replace("}", "}}") + " First offending value: {}."
        checkify.check(passed, text, first_bad)
    else:
        jax.debug.callback(functools.partial(_raise_unless, message), passed, first_bad)


def _raise_unless(message: str, passed: Any, first_bad: Any) -> None:
    if not np.all(passed):
        raise ValueError(f"{message} First offending value: {np.ravel(first_bad)[0]}.")


#: Whether failed checks are ``checkify.check`` (set by :func:`functional_checks`).
_FUNCTIONAL_CHECKS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "xrisk_jax_functional_checks", default=False)


@contextlib.contextmanager
def functional_checks() -> Iterator[None]:
    """Within it, :func:`assert_all` emits ``checkify.check`` instead of a host callback: for
    a step traced under ``jax.experimental.checkify`` (``xrisk.jax.checked`` traces its step
    inside it), whose failed checks then come back as a value with the step's outputs."""
    token = _FUNCTIONAL_CHECKS.set(True)
    try:
        yield
    finally:
        _FUNCTIONAL_CHECKS.reset(token)
