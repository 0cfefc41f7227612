"""JAX losses: pure ``init`` / ``apply`` objects generated from the core registry.

``apply`` is the core's pure function, so it works under ``jax.jit`` (hyper-parameters are
static), ``jax.grad(..., has_aux=True)`` and ``donate_argnums`` on the state, whose rows are
written with ``.at[].set`` and updated in place by XLA when the buffer is donated.
:class:`StatefulLoss` keeps the state for eager use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from xrisk import LOSSES, LossDefinition
from xrisk._adapter_support import (
    build_loss_class,
    checked_state_arrays,
    definition_attribute,
    dtype_name,
)
from xrisk.losses import NO_PARAMS

__all__ = ["XRiskLoss", "StatefulLoss", *LOSSES]


class XRiskLoss:
    """Base of the generated JAX losses; ``definition_type`` names the core definition."""

    definition_type: ClassVar[type[LossDefinition]]

    def __init__(self, *args: Any, dtype: Any = "float32", device: Any = None, **kwargs: Any):
        self.definition = self.definition_type(*args, **kwargs)
        self.dtype = jnp.dtype(dtype_name(self.definition.name, dtype))
        self.device = device

    def __getattr__(self, name: str) -> Any:
        return definition_attribute(self, name)

    def _place(self, tree: Any) -> Any:
        return tree if self.device is None else jax.device_put(tree, self.device)

    def init(self) -> Any:
        """The initial state: a NamedTuple of arrays with shapes fixed at construction."""
        return self._place(self.definition.init(xp=jnp, dtype=self.dtype))

    def init_params(self) -> Any:
        """The initial trainable auxiliaries (e.g. ``AUCMParams``), to train with the model."""
        return self._place(self.definition.init_params(xp=jnp, dtype=self.dtype))

    def apply(
        self, state: Any, scores: Any, labels: Any, index: Any = None, *,
        params: Any = NO_PARAMS,
    ) -> tuple[jax.Array, Any]:
        """Pure step: ``(loss, new_state)``; see the class docstring for the math."""
        return self.definition.apply(state, scores, labels, index, params=params)

    def export_state(self, state: Any, params: Any = NO_PARAMS) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral)."""
        out = {name: np.asarray(value) for name, value in state._asdict().items()}
        out.update({name: np.asarray(value) for name, value in params._asdict().items()})
        return out

    def load_state(self, arrays: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(state, params)`` from a dict of ``export_state`` of any framework."""
        checked = checked_state_arrays(self.definition, arrays)
        definition = self.definition

        def build(kind: type, fields: Mapping[str, Any]) -> Any:
            values = {}
            for name, field in fields.items():
                dtype = self.dtype if field.kind == "float" else jnp.int32
                values[name] = jnp.asarray(checked[name], dtype=dtype)
            return self._place(kind(**values))

        return (build(definition.state_type, definition.state_fields()),
                build(definition.params_type, definition.param_fields()))

    def __repr__(self) -> str:
        return f"xrisk.jax.{self.definition!r}"


class StatefulLoss:
    """Eager convenience: keeps a loss's state (and auxiliaries) between calls.

    >>> loss_fn = StatefulLoss(APLoss(num_samples=100))       # doctest: +SKIP
    >>> value = loss_fn(scores, labels, index)                # doctest: +SKIP
    """

    def __init__(self, loss: XRiskLoss) -> None:
        self.loss = loss
        self.state = loss.init()
        self.params = loss.init_params()

    def __call__(self, scores: Any, labels: Any, index: Any = None) -> jax.Array:
        value, self.state = self.loss.apply(
            self.state, scores, labels, index, params=self.params
        )
        return value


globals().update({
    name: build_loss_class(definition, XRiskLoss, framework="JAX (pure init/apply)",
                           module="xrisk.jax")
    for name, definition in LOSSES.items()
})
