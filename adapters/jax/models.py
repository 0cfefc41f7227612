"""Reference models for the runner as pure JAX functions of numpy-drawn weights.

>>> import numpy as np
>>> from xrisk.runner.models import mlp_weights
>>> from xrisk.jax.models import mlp_apply, mlp_params
>>> params = mlp_params(mlp_weights(4, (3,), 1, seed=0, dtype="float32"))
>>> mlp_apply(params, np.ones((2, 4), np.float32), activation="relu").shape
(2, 1)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["mlp_apply", "mlp_params", "mlp_layers"]

_ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh}


def mlp_params(layers: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[jax.Array, jax.Array]]:
    """The parameter pytree ``[(kernel, bias), ...]`` of numpy ``layers``."""
    return [(jnp.asarray(kernel), jnp.asarray(bias)) for kernel, bias in layers]


def mlp_layers(params: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """The parameters as numpy copies."""
    return [(np.array(kernel, copy=True), np.array(bias, copy=True)) for kernel, bias in params]


def mlp_apply(params: Any, x: Any, *, activation: str = "relu") -> jax.Array:
    """The MLP: ``activation`` between the affine layers, none after the last."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"mlp_apply: activation={activation!r}; expected one of "
                         f"{sorted(_ACTIVATIONS)}. Fix: pick one of those.")
    for position, (kernel, bias) in enumerate(params):
        if position:
            x = _ACTIVATIONS[activation](x)
        x = x @ kernel + bias
    return x
