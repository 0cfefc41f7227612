"""Framework-free helpers that the three adapters share (documentation, state export checks).

The adapters hold one short explicit class per loss; what those classes have in common —
their help text, the check of an exported state, the read-only hyper-parameters — lives here
once, so every framework behaves the same.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._check_mode import StateCastWarning
from ._domain import Domain
from ._inputs import preview, to_numpy
from .losses import LossDefinition

__all__ = ["DTYPE_NAMES", "dtype_name", "METADATA_KEY", "STATE_FORMAT", "state_metadata",
           "exported_state", "entry_domains", "stored_domain", "checked_state_arrays",
           "LossContainer", "definition_attribute", "refuse_assignment", "compose_doc"]

#: The key of an export's metadata entry: a uint8 array of UTF-8 JSON (an array, so that
#: ``np.savez`` without pickle, safetensors and every framework store it like the others).
METADATA_KEY = "__xrisk__"
#: The checkpoint format this version writes and reads (exports without metadata: format 0).
STATE_FORMAT = 1

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


def state_metadata(definition: LossDefinition) -> dict[str, Any]:
    """What an export of ``definition`` says about itself: ``{"format": STATE_FORMAT,
    "loss": its name, "hyper_parameters": its state_meaning()}`` (JSON values).

    >>> import xrisk
    >>> state_metadata(xrisk.pAUC_DRO_Loss(num_samples=10, lam=0.5))
    {'format': 1, 'loss': 'pAUC_DRO_Loss', 'hyper_parameters': {'lam': 0.5}}
    """
    meaning = json.loads(json.dumps(definition.state_meaning()))  # tuples read as lists
    return {"format": STATE_FORMAT, "loss": definition.name, "hyper_parameters": meaning}


def exported_state(definition: LossDefinition,
                   arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """An export: the numpy arrays of every entry plus the metadata entry
    (:data:`METADATA_KEY`, :func:`state_metadata` as a uint8 array of UTF-8 JSON)."""
    text = json.dumps(state_metadata(definition), sort_keys=True)
    return {**arrays, METADATA_KEY: np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()}


def entry_domains(definition: LossDefinition) -> dict[str, Domain | tuple[Domain, ...]]:
    """The declared domain of every entry of an export, by name: each state table's
    ``StateTable.domain`` and each auxiliary's bounds, ``[lower, upper]``."""
    out: dict[str, Domain | tuple[Domain, ...]] = {
        name: table.domain for name, table in definition.state_tables().items()}
    for name, aux in definition.auxiliaries().items():
        out[name] = Domain(-math.inf if aux.lower is None else aux.lower,
                           math.inf if aux.upper is None else aux.upper)
    return out


def checked_state_arrays(
    definition: LossDefinition, arrays: Mapping[str, Any],
    dtypes: Mapping[str, str] | None = None, *, reinterpret: bool = False,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray]:
    """Validate an exported state dict against ``definition``; return the arrays to load.

    First the metadata (:data:`METADATA_KEY`): the export must be of this loss and of the
    same meaning-giving hyper-parameters (:meth:`LossDefinition.state_meaning`), in a format
    this version reads. An export without metadata (format 0, before xrisk recorded it) loads
    where its layout names one loss: not where the keys and row shapes are those of several
    losses (APLoss's ``u`` (N, 2) is also pAUC_DRO_Loss's, GlobalContrastiveLoss's, ...).
    Then old layouts are converted (:meth:`LossDefinition.upgrade_state`). Every entry must
    have its declared shape, real values inside its declared domain (:func:`entry_domains`,
    checked in the target dtype: integers for ``int`` tables, flags in {0, 1}, weights in
    (0, 1], bounds of auxiliaries, ...). Nothing is loaded unless every array fits.

    Parameters
    ----------
    definition : LossDefinition
    arrays : mapping of str to array
        ``export_state()`` of any framework (numpy, torch, TensorFlow or JAX arrays).
    dtypes : mapping of str to str, optional
        The target dtype of every entry by name (``"float32"``, ``"float64"``, ``"bfloat16"``,
        ``"int32"``, ...); the arrays come back in it, or as float32 for ``bfloat16``, which
        numpy lacks (the framework casts, exactly). ``None`` keeps the exported dtypes.
    reinterpret : bool, default False
        Load the arrays as this loss's state whatever loss and hyper-parameters the metadata
        names, or when there is none: the deliberate load of another loss's export (a
        one-label multi-label state into the single-label loss, a state kept across a change
        of temperature) or of arrays made by hand. Keys, shapes and domains are still checked;
        an unknown format still raises.
    shapes : mapping of str to tuple of int, optional
        The shape of every entry; default ``definition.state_shapes()`` (a rank's shard of
        sharded state passes its own, fewer rows).

    Returns
    -------
    dict of str to numpy.ndarray
        Fresh, writable, C-contiguous arrays (frameworks may take them without a copy), the
        metadata left out.

    Raises
    ------
    TypeError
        ``arrays`` is not a mapping, or an entry is not numeric.
    ValueError
        An export of another loss, of other meaning-giving hyper-parameters or of an unknown
        format, unreadable metadata, an ambiguous export without metadata; missing or
        unexpected keys, a wrong shape (naming the size the export holds), complex, NaN or
        infinite values, floats or out-of-range integers for an integer entry, values outside
        an entry's domain, values that overflow the target dtype.

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
    arrays = dict(arrays)
    metadata = _read_metadata(owner, arrays.pop(METADATA_KEY, None))
    shapes = dict(definition.state_shapes() if shapes is None else shapes)
    if not reinterpret:
        if metadata is None:
            _check_unambiguous(definition, arrays, shapes)
        else:
            _check_same_meaning(definition, metadata)
    arrays = definition.upgrade_state(arrays)
    missing = sorted(set(shapes) - set(arrays))
    unexpected = sorted(set(arrays) - set(shapes))
    if missing or unexpected:
        raise ValueError(
            f"{owner}: state keys missing {missing}, unexpected {unexpected}; "
            f"expected exactly {sorted(shapes)}. Fix: pass the dict from export_state() of "
            "a loss built with the same arguments."
        )
    tables, domains = definition.state_tables(), entry_domains(definition)
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
        _check_domain(owner, name, value, stored_domain(domains[name], target))
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


def _read_metadata(owner: str, entry: Any) -> dict[str, Any] | None:
    """The metadata of an export (``None`` without): a JSON object with a known format.
    Taken as the uint8 array :func:`exported_state` writes, or as text (a str, bytes or a
    0-d string array: safetensors keeps metadata as strings)."""
    if entry is None:
        return None
    fix = (f"Fix: pass the dict export_state() returned, with its {METADATA_KEY!r} entry as it "
           "was saved (np.savez keeps it; for safetensors, store it as a uint8 tensor or as "
           "metadata text).")
    try:
        if isinstance(entry, bytes | str):
            text = entry if isinstance(entry, str) else entry.decode("utf-8")
        else:
            array = to_numpy(entry)
            if array.dtype.kind in "US" and array.ndim == 0:
                item = array.item()
                text = item if isinstance(item, str) else item.decode("utf-8")
            elif array.dtype == np.uint8 and array.ndim == 1:
                text = array.tobytes().decode("utf-8")
            else:
                raise ValueError(f"a {array.dtype} array of shape {array.shape}")
        metadata = json.loads(text)
    except (ValueError, TypeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{owner}: the export's {METADATA_KEY!r} entry cannot be read ({error}); expected "
            f"the UTF-8 JSON metadata export_state() writes. {fix}") from None
    if not isinstance(metadata, dict) or not {"format", "loss", "hyper_parameters"} <= set(
            metadata):
        raise ValueError(
            f"{owner}: the export's {METADATA_KEY!r} entry is {preview([metadata])}; expected "
            f"a JSON object with 'format', 'loss' and 'hyper_parameters'. {fix}")
    if metadata["format"] != STATE_FORMAT:
        raise ValueError(
            f"{owner}: the export has checkpoint format {metadata['format']!r}; expected format "
            f"{STATE_FORMAT}, the one this version of xrisk reads. Fix: load it with the "
            "xrisk version that wrote it, or upgrade xrisk.")
    return metadata


def _check_same_meaning(definition: LossDefinition, metadata: dict[str, Any]) -> None:
    """Raise unless the export is of this loss with the same meaning-giving values."""
    expected = state_metadata(definition)
    if (metadata["loss"], metadata["hyper_parameters"]) == (expected["loss"],
                                                           expected["hyper_parameters"]):
        return
    what = ("another loss" if metadata["loss"] != expected["loss"]
            else "other meaning-giving hyper-parameters")
    raise ValueError(
        f"{definition.name}: load_state received an export of {_described(metadata)} "
        f"({what}); expected one of {_described(expected)}: its arrays mean something else "
        f"in this loss. Fix: load it into a loss built like the exported one "
        f"({_described(metadata)}), or pass reinterpret=True to load its arrays as this "
        "loss's state on purpose.")


def _described(metadata: dict[str, Any]) -> str:
    """``"pAUC_DRO_Loss(lam=1.0)"``: a loss and its meaning-giving hyper-parameters."""
    values = metadata["hyper_parameters"]
    pairs = values.items() if isinstance(values, dict) else [("hyper_parameters", values)]
    return f"{metadata['loss']}({', '.join(f'{k}={v!r}' for k, v in pairs)})"


#: Layouts that several losses exported alike before exports named their loss (format 0):
#: the keys and row shapes of every entry, as :func:`_layout` gives them. An export without
#: metadata in one of them may be any of those losses, so it loads only with
#: ``reinterpret=True``; every other layout names one loss. The losses of format 0 are a
#: closed set, so this table is final (tests/test_state_domains_fuzz.py rebuilds it).
FORMAT_0_SHARED_LAYOUTS: dict[frozenset[tuple[str, str, tuple[int, ...]]], tuple[str, ...]] = {
    frozenset({("u", "rows", (2,))}): (
        "APLoss", "GlobalContrastiveLoss", "ListwiseCELoss", "MultiLabelpAUCLoss",
        "meanAveragePrecisionLoss", "pAUC_DRO_Loss"),
    frozenset({("threshold", "rows", ())}): ("MultiLabelpAUCLoss", "pAUC_CVaR_Loss"),
}


def _layout(definition: LossDefinition) -> frozenset[tuple[str, str, tuple[int, ...]]]:
    """Every entry as ``(name, "rows", row shape)`` (a keyed table: its row count depends
    on sizes) or ``(name, "global", shape)``."""
    tables = definition.state_tables()
    return frozenset(
        (name, "rows", tables[name].row) if name in tables and tables[name].keys is not None
        else (name, "global", shape) for name, shape in definition.state_shapes().items())


def _check_unambiguous(definition: LossDefinition, arrays: Mapping[str, Any],
                       shapes: Mapping[str, tuple[int, ...]]) -> None:
    """Raise if an export without metadata, in this loss's own layout, may be another's."""
    losses = FORMAT_0_SHARED_LAYOUTS.get(_layout(definition))
    if losses is None or set(arrays) != set(shapes) or any(
            tuple(getattr(arrays[name], "shape", np.shape(arrays[name]))) != shape
            for name, shape in shapes.items()):
        return  # a layout of one loss, or not this loss's (the key and shape checks say so)
    others = [name for name in losses if name != definition.name]
    raise ValueError(
        f"{definition.name}: load_state received arrays {sorted(arrays)} without the "
        f"{METADATA_KEY!r} metadata entry that names their loss; expected an export of this "
        f"version, since these keys and row shapes are also the state of {', '.join(others)}. "
        "Fix: pass the dict of export_state() (it names its loss), start from "
        "loss.export_state() and replace its arrays, or pass reinterpret=True if the arrays "
        "are this loss's state.")


def _check_domain(owner: str, name: str, value: np.ndarray,
                  domain: Domain | tuple[Domain, ...]) -> None:
    """Raise if an entry (in its target dtype) holds a value outside its domain, or outside
    the domain of its column of the last axis where one is declared per column."""
    columns = [(None, domain)] if isinstance(domain, Domain) else list(enumerate(domain))
    for column, part in columns:
        values = value if column is None else value[..., column]
        if part.admits(values):
            continue
        outside = part.violations(values)
        entry = f"state[{name!r}]" + ("" if column is None else f"[..., {column}]")
        at = (f" at rows {preview(np.unique(np.nonzero(outside)[0]))}" if values.ndim else "")
        clip = (f", or clip it, np.clip({entry}, {part.low}, {part.high})"
                if not (part.integer or part.low_open or part.high_open) else "")
        raise ValueError(
            f"{owner}: {entry} holds {preview(values[outside])}{at}, outside its domain; "
            f"expected {part.describe()}, the values training keeps it in. Fix: load an "
            f"export of this loss, saved before anything edited or corrupted it{clip}.")


def stored_domain(domain: Domain | tuple[Domain, ...], target: str,
                  ) -> Domain | tuple[Domain, ...]:
    """The domain (or per-column domains) ``load_state`` checks an entry stored in dtype
    ``target`` against: for a float dtype, each finite end moved out to where float32 and
    ``target`` round it. A state computed in a narrower float than its table holds a bound
    as that float rounds it: ``clip(t, 0.9, ...)`` in float32 scores gives 0.89999998, below
    0.9, in a float64 table; a bfloat16 table holds 0.8984375. Integer entries as declared.

    >>> stored_domain(Domain(0.9, 1.0), "float64").low
    0.8999999761581421
    """
    if not isinstance(domain, Domain):
        return tuple(_stored_column(part, target) for part in domain)
    return _stored_column(domain, target)


def _stored_column(domain: Domain, target: str) -> Domain:
    if target not in _FLOAT_BITS:
        return domain

    def rounded(end: float) -> list[float]:
        if math.isinf(end):
            return [end]
        with np.errstate(over="ignore"):
            values = [end, float(np.float32(end))]
            if target == "float16":
                values.append(float(np.float16(end)))
            elif target == "bfloat16":  # round to nearest even on float32's top 16 bits
                bits = np.array(np.float32(end)).view(np.uint32)
                half = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
                values.append(float((half & np.uint32(0xFFFF0000)).view(np.float32)))
        return [v for v in values if math.isfinite(v)]

    return domain._replace(low=min(rounded(domain.low)), high=max(rounded(domain.high)))


class LossContainer:
    """Mixin of the torch and TensorFlow losses: views of their containers as core tuples.

    The host class sets ``self.definition`` and holds one attribute per declared entry.
    """

    definition: LossDefinition

    @property
    def state(self) -> Any:
        """The current state as the core's NamedTuple of framework containers."""
        kind: Any = self.definition.state_type  # a NamedTuple class
        return kind(*[getattr(self, name) for name in kind._fields])

    @property
    def aux_params(self) -> Any:
        """The trainable auxiliaries as the core's NamedTuple of framework containers."""
        kind: Any = self.definition.params_type  # a NamedTuple class
        return kind(*[getattr(self, name) for name in kind._fields])


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
