"""Reference models for the runner, built from numpy weights (the same in every framework).

>>> import numpy as np
>>> from xrisk.runner.models import mlp_weights
>>> from xrisk.torch.models import mlp, mlp_layers
>>> layers = mlp_weights(4, (3,), 1, seed=0, dtype="float64")
>>> model = mlp(layers, activation="relu")
>>> [tuple(p.shape) for p in model.parameters()]
[(3, 4), (3,), (1, 3), (1,)]
>>> bool(np.array_equal(mlp_layers(model)[0][0], layers[0][0]))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = ["mlp", "mlp_layers", "set_mlp_layers"]

_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


def mlp(layers: list[tuple[np.ndarray, np.ndarray]], *, activation: str = "relu") -> nn.Sequential:
    """``nn.Sequential`` of Linear layers with ``activation`` between them, in the weights'
    dtype, holding copies of ``layers`` (kernels (in, out); torch stores them transposed)."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"mlp: activation={activation!r}; expected one of "
                         f"{sorted(_ACTIVATIONS)}. Fix: pick one of those.")
    modules: list[nn.Module] = []
    for position, (kernel, _) in enumerate(layers):
        if position:
            modules.append(_ACTIVATIONS[activation]())
        fan_in, fan_out = kernel.shape
        modules.append(nn.Linear(fan_in, fan_out, dtype=getattr(torch, str(kernel.dtype))))
    model = nn.Sequential(*modules)
    set_mlp_layers(model, layers)
    return model


def _linears(model: nn.Module) -> list[Any]:
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


def mlp_layers(model: nn.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    """The Linear layers' weights as numpy copies ``[(kernel (in, out), bias), ...]``."""
    return [(m.weight.detach().cpu().numpy().T.copy(), m.bias.detach().cpu().numpy().copy())
            for m in _linears(model)]


def set_mlp_layers(model: nn.Module, layers: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Copy numpy ``layers`` into the model's Linear layers (shapes must match)."""
    linears = _linears(model)
    if len(linears) != len(layers):
        raise ValueError(f"set_mlp_layers: {len(layers)} layers for a model with "
                         f"{len(linears)} Linear layers; expected as many.")
    with torch.no_grad():
        for module, (kernel, bias) in zip(linears, layers, strict=True):
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
            module.bias.copy_(torch.from_numpy(bias))
