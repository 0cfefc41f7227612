"""Initial weights drawn with numpy from a seed, so every framework starts from the same model.

Each framework's builder (``xrisk.<framework>.models``) copies these arrays into its own
layers; kernels are stored (in, out), as Keras and JAX use them (torch transposes).

>>> from xrisk.runner.models import mlp_weights
>>> layers = mlp_weights(30, (16,), 1, seed=0, dtype="float64")
>>> [(k.shape, b.shape) for k, b in layers]
[((30, 16), (16,)), ((16, 1), (1,))]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Layers", "glorot_layer", "mlp_weights"]

Layers = list[tuple[np.ndarray, np.ndarray]]


def glorot_layer(rng: np.random.Generator, fan_in: int, fan_out: int,
                 dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """A Glorot-uniform kernel (fan_in, fan_out) and a zero bias: Keras's default
    initialisation, drawn from ``rng``."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    kernel = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(dtype)
    return kernel, np.zeros(fan_out, dtype=dtype)


def mlp_weights(num_features: int, hidden: Sequence[int], num_outputs: int, *, seed: int,
                dtype: str) -> Layers:
    """The layers ``[(kernel, bias), ...]`` of an MLP ``num_features -> hidden... ->
    num_outputs``, drawn from ``np.random.default_rng(seed)`` (float64 draws cast to
    ``dtype``, so float32 and float64 runs start from the same values, rounded)."""
    rng = np.random.default_rng(seed)
    sizes = [num_features, *hidden, num_outputs]
    return [glorot_layer(rng, fan_in, fan_out, dtype)
            for fan_in, fan_out in zip(sizes[:-1], sizes[1:])]
