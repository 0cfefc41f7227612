"""The one base of every configured object of the core (loss definitions, optimizer rules)."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["Configured"]


class Configured:
    """Validated hyper-parameters kept as attributes named like the constructor arguments."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def config(self) -> dict[str, Any]:
        """The constructor arguments, enough to rebuild an equal object."""
        names = inspect.signature(type(self)).parameters
        return {name: getattr(self, name) for name in names}

    def __repr__(self) -> str:
        args = ", ".join(f"{key}={value!r}" for key, value in self.config().items())
        return f"{self.name}({args})"
