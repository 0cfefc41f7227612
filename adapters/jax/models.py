"""Reference models for the runner as pure JAX functions of numpy-drawn weights.

>>> import numpy as np
>>> from xrisk.runner.models import mlp_weights
>>> from xrisk.jax.models import mlp_apply, mlp_params
>>> params = mlp_params(mlp_weights(4, (3,), 1, seed=0, dtype="float32"))
>>> mlp_apply(params, np.ones((2, 4), np.float32), activation="relu").shape
(2, 1)

The image and ranking models are functions of ``(params, state)``, the canonical weights of
:mod:`xrisk.runner.models` split by :func:`split_weights` (plain functions rather than Flax
NNX modules: the canonical keys *are* the parameter tree, so loading, optax and checkpoints
need no name mapping, and the train/eval switch is an argument, not module state):

>>> import jax
>>> from xrisk.runner.models import resnet20_weights
>>> from xrisk.jax.models import resnet20_apply, split_weights
>>> params, state = split_weights(resnet20_weights(10, seed=0, dtype="float32"))
>>> forward = jax.jit(resnet20_apply, static_argnames="train")
>>> logits, state = forward(params, state, np.zeros((2, 32, 32, 3), np.float32), train=True)
>>> logits.shape, sorted(state)[:2]
((2, 10), ['bn1/mean', 'bn1/var'])
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xrisk.runner.models import BATCH_NORM_EPS, BATCH_NORM_MOMENTUM, Weights, resnet20_blocks

__all__ = ["conv_encoder_apply", "merge_weights", "mlp_apply", "mlp_layers", "mlp_params",
           "neumf_apply", "resnet20_apply", "split_weights"]

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


# -- the image and ranking models (flat canonical weights, xrisk.runner.models) -------------
# Plain functions over two flat dicts keyed like the canonical weights: ``params`` (what the
# optimizer trains) and ``state`` (BatchNorm's running statistics). The keys are the torch and
# Keras layer names, so loading is a dict split and the optax tree needs no mapping.

def split_weights(weights: Weights) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """Canonical numpy ``weights`` -> ``(params, state)``: the trainable arrays and
    BatchNorm's running statistics (``.../mean``, ``.../var``), as JAX arrays."""
    params: dict[str, jax.Array] = {}
    state: dict[str, jax.Array] = {}
    for key, array in weights.items():
        target = state if key.rpartition("/")[2] in ("mean", "var") else params
        target[key] = jnp.asarray(array)
    return params, state


def merge_weights(params: Any, state: Any = None) -> Weights:
    """``(params, state)`` -> canonical numpy copies (the inverse of :func:`split_weights`)."""
    return {key: np.array(value, copy=True) for key, value in {**params, **(state or {})}.items()}


def _batch_norm(params: Any, state: Any, path: str, x: jax.Array, train: bool,
                updates: dict[str, jax.Array]) -> jax.Array:
    """torch's BatchNorm2d over NHWC ``x``: batch statistics in training (running ones move
    towards the mean and the unbiased variance), running statistics in evaluation."""
    if train:
        mean = jnp.mean(x, axis=(0, 1, 2))
        variance = jnp.mean(jnp.square(x - mean), axis=(0, 1, 2))
        count = x.size // x.shape[-1]
        unbiased = variance * (count / max(count - 1, 1))
        m = BATCH_NORM_MOMENTUM
        updates[f"{path}/mean"] = (1 - m) * state[f"{path}/mean"] + m * mean
        updates[f"{path}/var"] = (1 - m) * state[f"{path}/var"] + m * unbiased
    else:
        mean, variance = state[f"{path}/mean"], state[f"{path}/var"]
    scale = params[f"{path}/gamma"] * jax.lax.rsqrt(variance + BATCH_NORM_EPS)
    return (x - mean) * scale + params[f"{path}/beta"]


def _conv(params: Any, path: str, x: jax.Array, stride: int) -> jax.Array:
    """3x3 convolution, padding 1 on each side (torch's), kernel (kh, kw, in, out)."""
    return jax.lax.conv_general_dilated(
        x, params[f"{path}/kernel"], window_strides=(stride, stride),
        padding=((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _numbered(params: Any, prefix: str) -> list[str]:
    """The paths ``prefix0, prefix1, ...`` of ``params``'s kernels in number order (jit
    rebuilds dicts with sorted keys, which would put ``10`` before ``2``)."""
    paths = {key.rpartition("/")[0] for key in params
             if key.startswith(prefix) and key.endswith("/kernel")}
    return sorted(paths, key=lambda path: int(path[len(prefix):]))


def _dense(params: Any, path: str, x: jax.Array) -> jax.Array:
    return x @ params[f"{path}/kernel"] + params[f"{path}/bias"]


def resnet20_apply(params: Any, state: Any, x: Any, *, train: bool
                   ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """CIFAR ResNet20 (:func:`xrisk.runner.models.resnet20_weights`): images (N, H, W, C) ->
    ``(logits (N, num_outputs), new_state)``; ``new_state`` is ``state`` with the running
    statistics moved when ``train`` (unchanged otherwise)."""
    updates: dict[str, jax.Array] = {}
    out = jax.nn.relu(_batch_norm(params, state, "bn1", _conv(params, "conv1", x, 1), train,
                                  updates))
    for path, fan_in, width, stride in resnet20_blocks():
        residual = jax.nn.relu(_batch_norm(params, state, f"{path}.bn1",
                                           _conv(params, f"{path}.conv1", out, stride),
                                           train, updates))
        residual = _batch_norm(params, state, f"{path}.bn2",
                               _conv(params, f"{path}.conv2", residual, 1), train, updates)
        if stride != 1 or fan_in != width:  # option A: subsample, zero-pad the channels
            pad = (width - fan_in) // 2
            out = jnp.pad(out[:, ::stride, ::stride, :], ((0, 0), (0, 0), (0, 0), (pad, pad)))
        out = jax.nn.relu(residual + out)
    return _dense(params, "linear", jnp.mean(out, axis=(1, 2))), {**state, **updates}


def conv_encoder_apply(params: Any, state: Any, x: Any, *, train: bool,
                       features: bool = False) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Conv encoder + projection head (:func:`xrisk.runner.models.conv_encoder_weights`):
    images (N, H, W, C) -> ``(projection (N, projection[-1]), new_state)``, or the features
    (N, widths[-1]) when ``features``."""
    updates: dict[str, jax.Array] = {}
    for i, path in enumerate(_numbered(params, "encoder.conv")):
        x = jax.nn.relu(_batch_norm(params, state, f"encoder.bn{i}",
                                    _conv(params, path, x, 1 if i == 0 else 2), train, updates))
    out = jnp.mean(x, axis=(1, 2))
    if not features:
        for position, path in enumerate(_numbered(params, "head.dense")):
            out = _dense(params, path, jax.nn.relu(out) if position else out)
    return out, {**state, **updates}


def neumf_apply(params: Any, users: Any, items: Any) -> jax.Array:
    """NeuMF (:func:`xrisk.runner.models.neumf_weights`): users (Q,), items (Q, C) -> scores
    (Q, C) of each query's candidate items."""
    gmf = params["gmf_user/embedding"][users][:, None, :] * params["gmf_item/embedding"][items]
    item = params["mlp_item/embedding"][items]
    user = jnp.broadcast_to(params["mlp_user/embedding"][users][:, None, :], item.shape)
    tower = jnp.concatenate([user, item], axis=-1)
    for path in _numbered(params, "mlp."):
        tower = jax.nn.relu(_dense(params, path, tower))
    return _dense(params, "out", jnp.concatenate([gmf, tower], axis=-1))[..., 0]
