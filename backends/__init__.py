"""Backend lookup: which array library an array belongs to, found without importing any.

Each module here (``numpy``, ``array_api_strict``, ``torch``, ``jax``, ``tensorflow``) supplies
only what the array API standard lacks: the namespace, ``stop_gradient``, ``write_rows`` (the
one mutation primitive), segment reductions (``segment_sum``, ``segment_max``), dtypes,
devices, laziness (tracers) and axis sizes known only at run time (TensorFlow's, with
``fit_axis`` to make them agree). The core asks :func:`backend_of` for the backend of its
input arrays on every call, so one process can mix backends freely and no global switch
exists.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast

__all__ = ["BACKEND_NAMES", "Backend", "backend_of", "get_backend", "MixedBackendsError"]

BACKEND_NAMES = ("numpy", "array_api_strict", "torch", "jax", "tensorflow")

# Root module of an array's type -> backend name. Reading ``type(x).__module__`` never imports
# a framework: an array of a framework exists only if the user imported that framework.
_ROOT_TO_BACKEND = {
    "numpy": "numpy",
    "array_api_strict": "array_api_strict",
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "tensorflow": "tensorflow",
}

_lock = threading.Lock()
_loaded: dict[str, ModuleType] = {}


class Backend(Protocol):
    """The backend contract: what each module of this package supplies (mypy checks the
    modules against it wherever the core uses a backend)."""

    name: str
    has_autodiff: bool
    namespace: Any  #: the array-API namespace (array-api-compat's, or the TensorFlow shim)
    index_dtype: Any

    def stop_gradient(self, x: Any) -> Any: ...

    def write_rows(self, table: Any, index: Any, rows: Any) -> Any: ...

    def segment_sum(self, values: Any, ids: Any, segments: Any) -> Any:
        """Sums (segments, ...) of ``values`` (n, ...) by segment ``ids`` (n,) in
        ``[0, segments)`` (the grouping of duplicate keys, :mod:`xrisk._grouping`)."""

    def segment_max(self, values: Any, ids: Any, segments: Any) -> Any:
        """Maxima (segments,) of ``values`` (n,) by segment ``ids`` (n,)."""

    def device(self, x: Any) -> Any: ...

    def axis_size(self, x: Any, axis: int) -> Any:
        """An int, or a scalar array of the index dtype where the size is known only at run
        time (TensorFlow's ``None`` dimensions: Keras ``fit`` traces its step once for every
        batch size); the core reads it through :func:`xrisk._state.axis_size`."""

    @property
    def fit_axis(self) -> Callable[..., Any] | None:
        """``fit_axis(x, axis, size, *, pad, fill)``: ``x`` with ``pad`` entries of ``fill``
        appended along ``axis``, cut to ``size`` entries (a run-time scalar), so that inputs
        of run-time size agree (:mod:`xrisk._run_time_sizes`); ``None`` where every size is
        static (every backend but TensorFlow)."""

    def inspectable(self, x: Any) -> bool: ...

    def to_numpy(self, x: Any) -> Any: ...

    def assert_all(self, ok: Any, message: str, values: Any) -> None: ...


class MixedBackendsError(TypeError):
    """Arrays of two array libraries were passed to one call."""


def get_backend(name: str) -> Backend:
    """Return the backend module called ``name`` (imported once, thread-safely)."""
    if name not in BACKEND_NAMES:
        raise ValueError(
            f"Unknown backend {name!r}. Expected one of {BACKEND_NAMES}. "
            "Pass arrays of one of these libraries."
        )
    module = _loaded.get(name)
    if module is None:
        with _lock:
            module = _loaded.get(name)
            if module is None:
                module = importlib.import_module(f"{__name__}.{name}")
                _loaded[name] = module
    return cast(Backend, module)


#: Backend name per array type, filled at each type's first call. torch.compile traces a
#: lookup keyed by the type, where it cannot trace the string work on a Parameter's type.
_NAME_BY_TYPE: dict[type, str | None] = {}


def register_array_types(name: str, *types: type) -> None:
    """Record ``types`` as arrays of the backend ``name`` (a backend module does it for its
    library's array and parameter types when it is loaded, before anything is compiled)."""
    _NAME_BY_TYPE.update(dict.fromkeys(types, name))


def _name_of(array: Any) -> str | None:
    kind = type(array)
    if kind in _NAME_BY_TYPE:
        return _NAME_BY_TYPE[kind]
    name = _ROOT_TO_BACKEND.get(kind.__module__.partition(".")[0])
    _NAME_BY_TYPE[kind] = name
    return name


def backend_of(*arrays: Any, names: tuple[str, ...] | None = None) -> Backend:
    """Return the backend module shared by ``arrays``; ``None`` entries are skipped.

    Parameters
    ----------
    *arrays : arrays of one library, or None
    names : tuple of str, optional
        Argument names, used only to say which arguments disagree in the error.

    Raises
    ------
    MixedBackendsError
        If the arrays come from two libraries (e.g. a torch tensor and a jax array).
    TypeError
        If an argument is not an array of a supported library.
    """
    # The common call (every array of one known library) in one pass without labels; any
    # other (an unknown type, two libraries, no array) takes the pass below, which raises.
    name = None
    for array in arrays:
        if array is not None:
            kind = _NAME_BY_TYPE.get(type(array))
            if kind is None or (kind != name and name is not None):
                name = None
                break
            name = kind
    if name is not None:
        module = _loaded.get(name)
        return cast(Backend, module) if module is not None else get_backend(name)
    found: dict[str, str] = {}
    for position, array in enumerate(arrays):
        if array is None:
            continue
        label = names[position] if names else f"argument {position}"
        name = _name_of(array)
        if name is None:
            raise TypeError(
                f"{label} is a {type(array).__module__}.{type(array).__qualname__}; expected an "
                f"array of one of {BACKEND_NAMES}. Convert it, e.g. numpy.asarray(x) or "
                "torch.as_tensor(x)."
            )
        found.setdefault(name, label)
    if len(found) > 1:
        detail = ", ".join(f"{label} is {name}" for name, label in found.items())
        raise MixedBackendsError(
            f"Arrays from different libraries were mixed in one call ({detail}). Expected every "
            "array argument (and the loss state) to come from one library. Convert them to one "
            "framework before the call, e.g. torch.as_tensor(numpy_array)."
        )
    if not found:
        raise TypeError("No array was passed; expected at least one array argument.")
    return get_backend(next(iter(found)))


if TYPE_CHECKING:  # mypy checks every backend module against the contract (no runtime import)
    from . import array_api_strict as _strict
    from . import jax as _jax
    from . import numpy as _numpy
    from . import tensorflow as _tensorflow
    from . import torch as _torch

    _NUMPY: Backend = _numpy
    _STRICT: Backend = _strict
    _TORCH: Backend = _torch
    _JAX: Backend = _jax
    _TENSORFLOW: Backend = _tensorflow
