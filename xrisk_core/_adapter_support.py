"""Framework-free helpers that the three adapters share (documentation, state export checks).

The adapters hold one short explicit class per loss; what those classes have in common —
their help text, the check of an exported state, the read-only hyper-parameters — lives here
once, so every framework behaves the same.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from .losses import LossDefinition
from .optim import ClippedOptimizer

__all__ = ["DTYPE_NAMES", "dtype_name", "checked_state_arrays", "LossContainer",
           "definition_attribute", "refuse_assignment", "compose_doc",
           "build_optimizer_class", "rule_from_arguments"]

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
    definition: LossDefinition, arrays: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """Validate an exported state dict against ``definition`` and return numpy arrays.

    Raises ValueError naming missing or unexpected keys and wrong shapes; nothing is
    loaded unless every array fits.
    """
    shapes = definition.state_shapes()
    missing = sorted(set(shapes) - set(arrays))
    unexpected = sorted(set(arrays) - set(shapes))
    if missing or unexpected:
        raise ValueError(
            f"{definition.name}: state keys missing {missing}, unexpected {unexpected}; "
            f"expected exactly {sorted(shapes)}. Fix: pass the dict from export_state() of "
            "a loss built with the same arguments."
        )
    out = {}
    for name, shape in shapes.items():
        value = np.asarray(arrays[name])
        if value.shape != shape:
            raise ValueError(
                f"{definition.name}: state[{name!r}] has shape {value.shape}; expected "
                f"{shape}. Fix: build the loss with the arguments of the exported one "
                f"({definition!r})."
            )
        out[name] = value
    return out


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


def compose_doc(own: str | None, definition_type: type[LossDefinition]) -> str:
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


def build_optimizer_class(rule_type: type[ClippedOptimizer], base: type, *, framework: str,
                          module: str) -> type:
    """Create the adapter optimizer class for one entry of :data:`xrisk.OPTIMIZERS`.

    Its signature is ``(params[, loss_fn], *, <the rule's hyper-parameters>)``; a rule that
    reads its margin from the loss (PESG) takes ``loss_fn`` instead of ``margin``.
    """
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    parameters = [inspect.Parameter("params", positional)]
    if rule_type.takes_loss:
        parameters.append(inspect.Parameter("loss_fn", positional))
    parameters += [p for name, p in inspect.signature(rule_type).parameters.items()
                   if name not in rule_type.read_from_loss]
    doc = (f"{rule_type.__name__} for {framework}, built from "
           f":class:`xrisk.{rule_type.__name__}` (the update rule and parameters below).\n\n"
           + inspect.cleandoc(rule_type.__doc__ or ""))
    namespace = {"rule_type": rule_type, "__doc__": doc, "__module__": module,
                 "__signature__": inspect.Signature(parameters)}
    if hasattr(base, "__slots__"):
        namespace["__slots__"] = ()
    return type(rule_type.__name__, (base,), namespace)


def rule_from_arguments(
    cls: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
    loss_containers: tuple[str, ...] = ("a", "b", "alpha"),
) -> tuple[Any, Any, ClippedOptimizer]:
    """Bind an adapter constructor call: ``(params, loss_fn or None, core rule)``.

    Unknown or missing arguments raise the ``TypeError`` of the signature (never swallowed).
    ``loss_containers`` are the attributes a stateful adapter needs on the loss (JAX keeps
    a, b, alpha in the parameter pytree and passes none).
    """
    arguments = dict(cls.__signature__.bind(*args, **kwargs).arguments)
    params = arguments.pop("params")
    loss_fn = arguments.pop("loss_fn", None)
    rule_type = cls.rule_type
    if rule_type.takes_loss:
        needed = (*loss_containers, *rule_type.read_from_loss)
        if not all(hasattr(loss_fn, name) for name in needed):
            raise TypeError(
                f"{rule_type.__name__}: loss_fn is {type(loss_fn).__name__}; expected an AUCMLoss "
                f"(with {', '.join(needed)}). Fix: {rule_type.__name__}(params, "
                "loss_fn=AUCMLoss(), ...)."
            )
        arguments.update({name: getattr(loss_fn, name) for name in rule_type.read_from_loss})
    return params, loss_fn, rule_type(**arguments)
