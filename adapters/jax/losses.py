"""JAX losses: pure ``init`` / ``apply`` objects, one per core loss definition.

``apply`` is the core's pure function, so it works under ``jax.jit`` (hyper-parameters are
static), ``jax.grad(..., has_aux=True)`` and ``donate_argnums`` on the state, whose rows are
written with ``.at[].set`` and updated in place by XLA when the buffer is donated.
:class:`StatefulLoss` keeps the state for eager use. Each class below only fixes its
constructor signature and its examples; :class:`XRiskLoss` reads the rest from the core
definition's declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import xrisk
from xrisk import LossDefinition
from xrisk._adapter_support import (
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    refuse_assignment,
)
from xrisk.losses import NO_PARAMS

# One class per entry of the core registry (a missing one fails this import).
__all__ = ["XRiskLoss", "StatefulLoss", *xrisk.LOSSES]

DType = str | Any | None
Device = Any


class XRiskLoss:
    """Base of the JAX losses: a core definition with pure ``init`` / ``apply``.

    ``apply(state, *inputs, params=...)`` takes the inputs the definition declares (e.g.
    scores, labels, index), positionally or by name, and returns ``(loss, new_state)``.
    """

    definition_type: ClassVar[type[LossDefinition]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "definition_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.definition_type)

    def __init__(self, definition: LossDefinition, *, dtype: DType = None,
                 device: Device = None) -> None:
        self.definition = definition
        if dtype is None:  # the framework's default float: float64 only under jax_enable_x64
            dtype = "float64" if jax.config.read("jax_enable_x64") else "float32"
        self.dtype = jnp.dtype(dtype_name(definition.name, dtype))
        self.device = device

    def __getattr__(self, name: str) -> Any:
        return definition_attribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        refuse_assignment(self, name, value)
        object.__setattr__(self, name, value)

    def _place(self, tree: Any) -> Any:
        return tree if self.device is None else jax.device_put(tree, self.device)

    def init(self) -> Any:
        """The initial state: a NamedTuple of arrays with shapes fixed at construction."""
        return self._place(self.definition.init(xp=jnp, dtype=self.dtype))

    def init_params(self) -> Any:
        """The initial trainable auxiliaries (e.g. ``AUCMParams``), to train with the model."""
        return self._place(self.definition.init_params(xp=jnp, dtype=self.dtype))

    def apply(self, state: Any, *inputs: Any, params: Any = NO_PARAMS,
              **named: Any) -> tuple[jax.Array, Any]:
        """Pure step: ``(loss, new_state)``; see the class docstring for the math."""
        return self.definition.apply(state, *inputs, params=params, **named)

    def export_state(self, state: Any, params: Any = NO_PARAMS) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral)."""
        out = {name: np.asarray(value) for name, value in state._asdict().items()}
        out.update({name: np.asarray(value) for name, value in params._asdict().items()})
        return out

    def load_state(self, arrays: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(state, params)`` from a dict of ``export_state`` of any framework."""
        checked = checked_state_arrays(self.definition, arrays)
        definition = self.definition
        state, params = self.init(), self.init_params()

        def build(template: Any) -> Any:
            return type(template)(**{
                name: jnp.asarray(checked[name], dtype=value.dtype)
                for name, value in template._asdict().items()
            })

        del definition
        return self._place(build(state)), self._place(build(params))

    def __repr__(self) -> str:
        return f"xrisk.jax.{self.definition!r}"


class StatefulLoss:
    """Eager convenience: keeps a loss's state (and auxiliaries) between calls.

    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.StatefulLoss(xr.APLoss(num_samples=4))
    >>> value = loss_fn(jnp.array([0.9, 0.2]), jnp.array([1, 0]), jnp.array([0, 1]))
    >>> round(float(loss_fn.state.u[0, 0]), 4)  # 0.9 * (1 + 0.09) / 2
    0.4905
    """

    def __init__(self, loss: XRiskLoss) -> None:
        self.loss = loss
        self.state = loss.init()
        self.params = loss.init_params()

    def __call__(self, *inputs: Any, **named: Any) -> jax.Array:
        value, self.state = self.loss.apply(self.state, *inputs, params=self.params, **named)
        return value


class APLoss(XRiskLoss):
    """Average-precision loss (SOAP) with pure ``init`` / ``apply`` for JAX.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.APLoss(num_samples=6)
    >>> state = loss_fn.init()
    >>> step = jax.jit(loss_fn.apply, donate_argnums=0)
    >>> loss, state = step(state, jnp.array([0.9, 0.2, 0.6, 0.4]), jnp.array([1, 0, 1, 0]),
    ...                    jnp.array([0, 1, 2, 3]))
    >>> [round(float(u), 3) for u in state.u[:4, 0]]  # u_all of the first four samples
    [0.412, 0.0, 0.83, 0.0]
    """

    definition_type = xrisk.APLoss

    def __init__(self, num_samples: int, *, gamma: float = 0.9, margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.APLoss(num_samples, gamma=gamma, margin=margin,
                                      surrogate=surrogate, scale=scale),
                         dtype=dtype, device=device)


class AUCMLoss(XRiskLoss):
    """AUC-margin min-max loss with pure ``init`` / ``apply`` for JAX; a, b, alpha are the
    ``AUCMParams`` from ``init_params()``, trained with :class:`xrisk.jax.PESG`.

    Examples
    --------
    >>> import jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.AUCMLoss(version="v2")
    >>> params = loss_fn.init_params()._replace(a=jnp.asarray(0.3), b=jnp.asarray(0.2),
    ...                                         alpha=jnp.asarray(0.5))
    >>> loss, _ = loss_fn.apply(loss_fn.init(), jnp.array([0.1, 0.4, 0.35, 0.8]),
    ...                         jnp.array([0, 0, 1, 1]), params=params)
    >>> round(float(loss), 5)
    0.57625
    """

    definition_type = xrisk.AUCMLoss

    def __init__(self, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio),
                         dtype=dtype, device=device)
