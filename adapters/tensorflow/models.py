"""Reference models for the runner, built from numpy weights (the same in every framework).

>>> from xrisk.runner.models import mlp_weights
>>> from xrisk.tensorflow.models import mlp
>>> model = mlp(mlp_weights(4, (3,), 1, seed=0, dtype="float64"), activation="relu")
>>> [tuple(w.shape) for w in model.get_weights()], [layer.dtype for layer in model.layers]
([(4, 3), (3,), (3, 1), (1,)], ['float64', 'float64'])
"""

from __future__ import annotations

import keras
import numpy as np

__all__ = ["mlp", "mlp_layers", "set_mlp_layers"]


def mlp(layers: list[tuple[np.ndarray, np.ndarray]], *, activation: str = "relu") -> keras.Model:
    """``keras.Sequential`` of Dense layers (``activation`` on all but the last) in the
    weights' dtype, holding copies of ``layers`` (kernels (in, out))."""
    if activation not in ("relu", "tanh"):
        raise ValueError(f"mlp: activation={activation!r}; expected 'relu' or 'tanh'. "
                         "Fix: pick one of those.")
    dtype = str(layers[0][0].dtype)
    dense = [keras.layers.Dense(kernel.shape[1], dtype=dtype,
                                activation=activation if i < len(layers) - 1 else None)
             for i, (kernel, _) in enumerate(layers)]
    model = keras.Sequential([keras.Input((layers[0][0].shape[0],), dtype=dtype), *dense])
    set_mlp_layers(model, layers)
    return model


def mlp_layers(model: keras.Model) -> list[tuple[np.ndarray, np.ndarray]]:
    """The Dense layers' weights as numpy copies ``[(kernel, bias), ...]``."""
    weights = [np.array(w, copy=True) for w in model.get_weights()]
    return list(zip(weights[0::2], weights[1::2], strict=True))


def set_mlp_layers(model: keras.Model, layers: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Copy numpy ``layers`` into the model (shapes must match)."""
    model.set_weights([array for layer in layers for array in layer])
