"""Framework-free helpers that the three adapters share (documentation, state export checks).

The adapters hold one short explicit class per loss; what those classes have in common —
their help text, the check of an exported state, the read-only hyper-parameters — lives here
once, so every framework behaves the same.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._inputs import preview, to_numpy
from ._validation import StateCastWarning
from .losses import LossDefinition

__all__ = ["DTYPE_NAMES", "dtype_name", "checked_state_arrays", "LossContainer",
           "definition_attribute", "refuse_assignment", "compose_doc"]

#: Float dtypes a loss state may use, by name.
DTYPE_NAMES = ("float32", "float64")


def dtype_name(owner: str, dtype: Any) -> str:
    """Return ``"float32"`` or ``"float64"`` for a dtype name or a framework dtype object."""
    text = str(getattr(dtype, "name", dtype)).rpartition(".")[2].strip("'>")
    if text not in DTYPE_NAMES:
        raise ValueError(
            f"{owner}: dtype={dtype!r}; expected one of {DTYPE_NAMES} (a name or the "
            "framework's dtype), or None for the framework's default float. Fix: pass "
            "dtype='float32' or dtype='float64'."
        )
    return text


def checked_state_arrays(
    definition: LossDefinition, arrays: Mapping[str, Any],
    dtypes: Mapping[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """Validate an exported state dict against ``definition``; return the arrays to load.

    Old layouts are converted first (:meth:`LossDefinition.upgrade_state`). Every entry must
    have its declared shape, real finite values (integers for ``int`` tables, within their
    range), and trainable auxiliaries must lie inside their declared bounds
    (``Auxiliary.lower`` / ``upper``). Nothing is loaded unless every array fits.

    Parameters
    ----------
    definition : LossDefinition
    arrays : mapping of str to array
        ``export_state()`` of any framework (numpy, torch, TensorFlow or JAX arrays).
    dtypes : mapping of str to str, optional
        The target dtype of every entry by name (``"float32"``, ``"float64"``, ``"bfloat16"``,
        ``"int32"``, ...); the arrays come back in it, or as float32 for ``bfloat16``, which
        numpy lacks (the framework casts, exactly). ``None`` keeps the exported dtypes.

    Returns
    -------
    dict of str to numpy.ndarray
        Fresh, writable, C-contiguous arrays (frameworks may take them without a copy).

    Raises
    ------
    TypeError
        ``arrays`` is not a mapping, or an entry is not numeric.
    ValueError
        Missing or unexpected keys, a wrong shape (naming the size the export holds), complex,
        NaN or infinite values, floats or out-of-range integers for an integer entry, values
        outside an auxiliary's bounds, values that overflow the target dtype.

    Warns
    -----
    StateCastWarning
        A float entry is rounded to a narrower float (e.g. a float64 export loaded into a
        float32 loss): the cast is done, and said.
    """
    owner = definition.name
    if not isinstance(arrays, Mapping):
        raise TypeError(
            f"{owner}: load_state received a {type(arrays).__name__}; expected a dict of "
            "arrays. Fix: pass the dict returned by export_state() (e.g. dict(np.load(path)))."
        )
    arrays = definition.upgrade_state(arrays)
    shapes = definition.state_shapes()
    missing = sorted(set(shapes) - set(arrays))
    unexpected = sorted(set(arrays) - set(shapes))
    if missing or unexpected:
        raise ValueError(
            f"{owner}: state keys missing {missing}, unexpected {unexpected}; "
            f"expected exactly {sorted(shapes)}. Fix: pass the dict from export_state() of "
            "a loss built with the same arguments."
        )
    tables, auxiliaries = definition.state_tables(), definition.auxiliaries()
    out, narrowed = {}, []
    for name, shape in shapes.items():
        value = to_numpy(arrays[name])
        integer = name in tables and tables[name].kind == "int"
        _check_state_dtype(owner, name, value, integer)
        if value.shape != shape:
            raise ValueError(
                f"{owner}: state[{name!r}] has shape {value.shape}; expected {shape}. Fix: "
                + _shape_fix(definition, name, value.shape, shape)
            )
        target = (dtypes or {}).get(name, value.dtype.name)
        if integer:
            value = _as_integers(owner, name, value, target)
        else:
            source = value.dtype.name
            value = _as_floats(owner, name, value, target)
            if _FLOAT_BITS.get(source, 0) > _FLOAT_BITS.get(target, 64):
                narrowed.append(f"{name} ({source} -> {target})")
        aux = auxiliaries.get(name)
        if aux is not None:
            _check_bounds(owner, name, value, aux)
        out[name] = value
    if narrowed:
        warnings.warn(
            f"{owner}: load_state rounds {', '.join(narrowed)} to the loss's dtype; the "
            "export has more precision than the loss. Fix: build the loss with the export's "
            "dtype (e.g. dtype='float64') to keep every digit, or cast the export yourself to "
            "silence this.", StateCastWarning, stacklevel=3,
        )
    return out


#: Significand bits of the float dtypes a state may be loaded into (rounding check).
_FLOAT_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _check_state_dtype(owner: str, name: str, value: np.ndarray, integer: bool) -> None:
    kind = value.dtype.kind
    if kind == "c":
        raise ValueError(
            f"{owner}: state[{name!r}] has complex dtype {value.dtype}; expected real values. "
            f"Fix: pass the real part if the imaginary part is 0 (np.real({name}))."
        )
    if integer and kind not in "iu":
        raise ValueError(
            f"{owner}: state[{name!r}] has dtype {value.dtype}; expected integers (an int32 "
            f"counter). Fix: pass the integer array of export_state(), e.g. "
            f"{name}.astype(np.int32) if its values are whole numbers."
        )
    if kind not in "iuf":
        raise TypeError(
            f"{owner}: state[{name!r}] has dtype {value.dtype}; expected real numbers. Fix: "
            "pass the numeric arrays of export_state()."
        )


def _shape_fix(definition: LossDefinition, name: str, got: tuple[int, ...],
               shape: tuple[int, ...]) -> str:
    """How to build a loss that takes a state of shape ``got`` (the export's size)."""
    table = definition.state_tables().get(name)
    if table is not None and table.keys is not None and len(got) == len(shape) \
            and got[1:] == shape[1:]:
        size = definition.key_spaces()[table.keys]
        counts = [key for key, value in definition.config().items()
                  if key.startswith("num_") and value == size]
        if got[0] == 0:
            return (f"the export holds no {table.keys} rows; pass the export_state() of a loss "
                    f"built like this one ({definition!r}).")
        if len(counts) == 1:
            return (f"the export holds {got[0]} {table.keys} rows and this loss {size}: build "
                    f"the loss with {counts[0]}={got[0]}, e.g. "
                    f"{definition.replace(**{counts[0]: got[0]})!r}.")
        return (f"the export holds {got[0]} {table.keys} rows and this loss {size}: build the "
                f"loss with {got[0]} {table.keys}s.")
    return (f"build the loss with the arguments of the exported one (this loss is "
            f"{definition!r}; each row of {name!r} has shape {shape[1:]}).")


def _as_integers(owner: str, name: str, value: np.ndarray, target: str) -> np.ndarray:
    info = np.iinfo(target)
    if value.size and (value.min() < info.min or value.max() > info.max):
        raise ValueError(
            f"{owner}: state[{name!r}] holds values in [{value.min()}, {value.max()}]; expected "
            f"{target} values in [{info.min}, {info.max}]. Fix: pass the export of a loss of "
            "this version."
        )
    return np.array(value, dtype=target, order="C", copy=True)


def _as_floats(owner: str, name: str, value: np.ndarray, target: str) -> np.ndarray:
    """``value`` in ``target``; float32 for bfloat16 (numpy has none; its range is float32's,
    so the overflow check below holds for it too)."""
    if value.dtype.kind == "f":
        _check_finite(owner, name, value, "")
    stored = "float32" if target == "bfloat16" else target
    with np.errstate(over="ignore"):  # an overflow becomes inf, reported just below
        out = np.array(value, dtype=stored, order="C", copy=True)
    _check_finite(owner, name, out, f" after the cast to {target}")
    return out


def _check_finite(owner: str, name: str, value: np.ndarray, after: str) -> None:
    finite = np.isfinite(value)
    if not finite.all():
        raise ValueError(
            f"{owner}: state[{name!r}] holds non-finite values{after} "
            f"{preview(value[~finite])}; expected finite values. Fix: load a checkpoint saved "
            "before the run diverged (or a loss of a wider dtype for values this large)."
        )


def _check_bounds(owner: str, name: str, value: np.ndarray, aux: Any) -> None:
    low = -np.inf if aux.lower is None else aux.lower
    high = np.inf if aux.upper is None else aux.upper
    outside = value[(value < low) | (value > high)]
    if outside.size:
        raise ValueError(
            f"{owner}: state[{name!r}] = {preview(outside)} lies outside its bounds "
            f"[{low}, {high}]; expected a value the optimizer's projection keeps. Fix: load "
            f"an export of this loss, or clip it, np.clip({name}, {low}, {high})."
        )


class LossContainer:
    """Mixin of the torch and TensorFlow losses: views of their containers as core tuples.

    The host class sets ``self.definition`` and holds one attribute per declared entry.
    """

    definition: LossDefinition

    @property
    def state(self) -> Any:
        """The current state as the core's NamedTuple of framework containers."""
        names = self.definition.state_tables()
        return self.definition.state_type(*(getattr(self, name) for name in names))

    @property
    def aux_params(self) -> Any:
        """The trainable auxiliaries as the core's NamedTuple of framework containers."""
        names = self.definition.auxiliaries()
        return self.definition.params_type(*(getattr(self, name) for name in names))


def definition_attribute(loss: Any, name: str) -> Any:
    """``__getattr__`` fallback of every adapter loss: hyper-parameters (margin, gamma, ...)
    are read from its core definition; anything else is an AttributeError."""
    definition = loss.__dict__.get("definition")
    if definition is not None and not name.startswith("_") and hasattr(definition, name):
        return getattr(definition, name)
    raise AttributeError(f"{type(loss).__name__} has no attribute {name!r}")


def refuse_assignment(loss: Any, name: str, value: Any) -> None:
    """Raise if ``name`` is a hyper-parameter of the loss's definition (read-only)."""
    definition = loss.__dict__.get("definition")
    if definition is not None and name in definition.config():
        cls = type(loss).__name__
        raise AttributeError(
            f"{cls}.{name} is read-only (received {name}={value!r}; the loss was built with "
            f"{name}={getattr(definition, name)!r}): hyper-parameters are fixed at construction. "
            f"Fix: build a new loss, {cls}(..., {name}={value!r}), and carry the state over with "
            "new_loss.load_state(old_loss.export_state())."
        )


def compose_doc(own: str | None, definition_type: type) -> str:
    """An adapter class's docstring: its own summary, the core definition's parameters, notes
    and references, then the adapter's own examples (the core's numpy examples are left out)."""
    examples = re.compile(r"\n\s*Examples\n\s*-{3,}")
    core = examples.split(inspect.cleandoc(definition_type.__doc__ or ""))[0].rstrip()
    body = core.split("\n", 1)[1].strip() if "\n" in core else ""
    own_parts = examples.split(inspect.cleandoc(own or ""), maxsplit=1)
    text = (f"{own_parts[0].rstrip()}\n\nThe math and hyper-parameters of :class:`xrisk."
            f"{definition_type.__name__}` follow.\n\n{body}\n")
    if len(own_parts) > 1:
        text += "\nExamples\n--------" + own_parts[1].rstrip("\n") + "\n"
    return text
