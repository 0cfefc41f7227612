"""The one base of every configured object of the core (loss definitions, optimizer rules).

Configured objects are frozen once constructed: their hyper-parameters are validated in
``__init__`` and the math reads them on every call, so changing one afterwards would bypass the
checks (and, on the adapters, be silently shadowed). Assigning raises and says how to change it.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar

from ._libauc_names import check_libauc_arguments

__all__ = ["Configured"]


class _FreezeAfterInit(type):
    """Metaclass: an instance becomes read-only when its outermost ``__init__`` returns."""

    def __init__(cls, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The constructor's signature, not this metaclass's __call__, is what help() shows.
        init = inspect.signature(getattr(cls, "__init__"))  # noqa: B009  (mypy: instance access)
        cls.__signature__ = init.replace(parameters=list(init.parameters.values())[1:])

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if getattr(cls, "_libauc_names", False):  # before __init__, so before Python's error
            check_libauc_arguments(cls.__name__, kwargs, cls.__signature__.parameters)
        instance = super().__call__(*args, **kwargs)
        object.__setattr__(instance, "_frozen", True)
        return instance


class Configured(metaclass=_FreezeAfterInit):
    """Validated hyper-parameters kept as read-only attributes named like the arguments."""

    _frozen = False
    #: Whether a LibAUC argument name (``data_len=``, ``surr_loss=``, ...) raises a TypeError
    #: that names the xrisk spelling (:mod:`xrisk._libauc_names`); the loss definitions set
    #: it, the optimizer rules explain their own LibAUC names.
    _libauc_names: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return type(self).__name__

    def config(self) -> dict[str, Any]:
        """The constructor arguments, enough to rebuild an equal object."""
        return {name: getattr(self, name) for name in inspect.signature(type(self)).parameters}

    def replace(self, **changes: Any) -> Any:
        """A new object with some hyper-parameters changed (validated like the constructor)."""
        return type(self)(**{**self.config(), **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(
                f"{self.name}.{name} is read-only: hyper-parameters are fixed at construction "
                f"(received {name}={value!r}). Fix: build a new object, e.g. "
                f"{self.name}(..., {name}={value!r}), or obj.replace({name}={value!r})."
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self.name}.{name} is read-only; it cannot be deleted.")

    def __repr__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.config().items())
        return f"{self.name}({args})"
