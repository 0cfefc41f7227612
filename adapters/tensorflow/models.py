"""Reference models for the runner, built from numpy weights (the same in every framework).

>>> from xrisk.runner.models import mlp_weights
>>> from xrisk.tensorflow.models import mlp
>>> model = mlp(mlp_weights(4, (3,), 1, seed=0, dtype="float64"), activation="relu")
>>> [tuple(w.shape) for w in model.get_weights()], [layer.dtype for layer in model.layers]
([(4, 3), (3,), (3, 1), (1,)], ['float64', 'float64'])

The image and ranking models take the canonical weights of :mod:`xrisk.runner.models`
(Keras's layouts; BatchNorm follows torch's running-variance update, :class:`TorchBatchNorm`):

>>> from xrisk.runner.models import resnet20_weights
>>> from xrisk.tensorflow.models import resnet20
>>> net = resnet20(resnet20_weights(10, seed=0, dtype="float32"))
>>> tuple(net(np.zeros((2, 32, 32, 3), np.float32), training=False).shape)
(2, 10)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import keras
import numpy as np

from xrisk.runner.models import (
    BATCH_NORM_EPS,
    BATCH_NORM_MOMENTUM,
    Weights,
    layer_paths,
    resnet20_blocks,
)

__all__ = ["BACKBONES", "BACKBONE_MIN_SIZE", "NeuMF", "PadShortcut", "TorchBatchNorm",
           "backbone", "conv_encoder", "load_weights", "mlp", "mlp_layers", "model_variables",
           "model_weights", "neumf", "resnet20", "set_mlp_layers"]


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


# -- the image and ranking models (flat canonical weights, xrisk.runner.models) -------------

@keras.saving.register_keras_serializable(package="xrisk")
class TorchBatchNorm(keras.layers.BatchNormalization):
    """``BatchNormalization`` with torch's running variance: in training the running
    statistics move by ``1 - momentum`` towards the batch mean and the *unbiased* batch
    variance (``n / (n - 1)`` times the biased one that normalises the batch), as
    ``torch.nn.BatchNorm2d`` does; Keras's own layer moves towards the biased one. Evaluation
    is Keras's (and torch's)."""

    def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        if not training or not self.trainable or self.renorm or mask is not None:
            return super().call(inputs, training=training, mask=mask)
        x = keras.ops.cast(inputs, self.compute_dtype)
        mean, variance = self._moments(x, None)
        count = keras.ops.cast(keras.ops.size(x) // keras.ops.shape(x)[-1], x.dtype)
        unbiased = variance * count / keras.ops.maximum(count - 1, 1)
        self.moving_mean.assign(self.moving_mean * self.momentum + mean * (1 - self.momentum))
        self.moving_variance.assign(self.moving_variance * self.momentum
                                    + unbiased * (1 - self.momentum))
        return keras.ops.batch_normalization(x, mean, variance, axis=self.axis, offset=self.beta,
                                             scale=self.gamma, epsilon=self.epsilon)


@keras.saving.register_keras_serializable(package="xrisk")
class PadShortcut(keras.layers.Layer):
    """ResNet's option-A shortcut: ``x[:, ::stride, ::stride, :]`` with ``pad`` zero channels
    on each side (no parameters)."""

    def __init__(self, stride: int, pad: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stride, self.pad = stride, pad

    def call(self, x: Any) -> Any:
        x = x[:, ::self.stride, ::self.stride, :]
        return keras.ops.pad(x, [(0, 0), (0, 0), (0, 0), (self.pad, self.pad)])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "stride": self.stride, "pad": self.pad}


def _conv_bn(x: Any, path_conv: str, path_bn: str, width: int, stride: int,
             dtype: str) -> Any:
    # torch pads 1 on each side then strides; Keras's "same" pads (0, 1) at stride 2 on even
    # sizes, which samples other pixels: pad explicitly and convolve "valid".
    x = keras.layers.ZeroPadding2D(1, dtype=dtype, name=f"{path_conv}.pad")(x)
    x = keras.layers.Conv2D(width, 3, strides=stride, padding="valid", use_bias=False,
                            dtype=dtype, name=path_conv)(x)
    return TorchBatchNorm(momentum=1 - BATCH_NORM_MOMENTUM, epsilon=BATCH_NORM_EPS,
                          dtype=dtype, name=path_bn)(x)


def _dtype(weights: Weights) -> str:
    return str(next(iter(weights.values())).dtype)


def _weight(weights: Weights, key: str, owner: str) -> np.ndarray:
    if key not in weights:
        raise ValueError(f"{owner}: the weights lack {key!r} (keys {sorted(weights)[:4]}...); "
                         f"expected xrisk.runner.models.{owner}_weights(...).")
    return weights[key]


def resnet20(weights: Weights, *, image_size: tuple[int | None, int | None] = (None, None)
             ) -> keras.Model:
    """CIFAR ResNet20 (:func:`xrisk.runner.models.resnet20_weights`) as a functional model:
    images (N, H, W, C) -> logits (N, num_outputs), holding copies of ``weights``."""
    dtype = _dtype(weights)
    in_channels = _weight(weights, "conv1/kernel", "resnet20").shape[2]
    inputs = keras.Input((*image_size, in_channels), dtype=dtype)
    x = keras.layers.ReLU(dtype=dtype)(_conv_bn(inputs, "conv1", "bn1", 16, 1, dtype))
    for path, fan_in, width, stride in resnet20_blocks():
        out = keras.layers.ReLU(dtype=dtype)(
            _conv_bn(x, f"{path}.conv1", f"{path}.bn1", width, stride, dtype))
        out = _conv_bn(out, f"{path}.conv2", f"{path}.bn2", width, 1, dtype)
        if stride != 1 or fan_in != width:
            x = PadShortcut(stride, (width - fan_in) // 2, dtype=dtype, name=f"{path}.short")(x)
        x = keras.layers.ReLU(dtype=dtype)(keras.layers.Add(dtype=dtype)([out, x]))
    x = keras.layers.GlobalAveragePooling2D(dtype=dtype)(x)
    outputs = keras.layers.Dense(_weight(weights, "linear/bias", "resnet20").shape[0],
                                 dtype=dtype, name="linear")(x)
    model = keras.Model(inputs, outputs, name="resnet20")
    load_weights(model, weights)
    return model


def conv_encoder(weights: Weights, *, image_size: tuple[int | None, int | None] = (None, None)
                 ) -> keras.Model:
    """Conv encoder + projection head (:func:`xrisk.runner.models.conv_encoder_weights`):
    images (N, H, W, C) -> projection (N, projection[-1]). The features (N, widths[-1]) are
    the layer ``"features"``: ``keras.Model(model.input, model.get_layer("features").output)``.
    """
    dtype = _dtype(weights)
    convs, heads = layer_paths(weights, "encoder.conv"), layer_paths(weights, "head.dense")
    if not convs or not heads:
        raise ValueError("conv_encoder: weights without 'encoder.conv*' or 'head.dense*' "
                         f"layers (keys {sorted(weights)[:4]}...); expected "
                         "xrisk.runner.models.conv_encoder_weights(...).")
    inputs = keras.Input((*image_size, weights[f"{convs[0]}/kernel"].shape[2]), dtype=dtype)
    x = inputs
    for i, path in enumerate(convs):
        x = keras.layers.ReLU(dtype=dtype)(_conv_bn(
            x, path, f"encoder.bn{i}", weights[f"{path}/kernel"].shape[3], 1 if i == 0 else 2,
            dtype))
    x = keras.layers.GlobalAveragePooling2D(dtype=dtype, name="features")(x)
    for position, path in enumerate(heads):
        x = keras.layers.Dense(weights[f"{path}/kernel"].shape[1], dtype=dtype, name=path,
                               activation="relu" if position < len(heads) - 1 else None)(x)
    model = keras.Model(inputs, x, name="conv_encoder")
    load_weights(model, weights)
    return model


@keras.saving.register_keras_serializable(package="xrisk")
class NeuMF(keras.Model):
    """NeuMF (:func:`xrisk.runner.models.neumf_weights`): ``model((users (Q,), items (Q, C)))``
    -> scores (Q, C) of each query's candidate items."""

    def __init__(self, num_users: int, num_items: int, factors: int, hidden: list[int],
                 dtype: str = "float32", **kwargs: Any) -> None:
        super().__init__(dtype=dtype, **kwargs)
        self.sizes = (num_users, num_items, factors, list(hidden))
        self.gmf_user = keras.layers.Embedding(num_users, factors, dtype=dtype, name="gmf_user")
        self.gmf_item = keras.layers.Embedding(num_items, factors, dtype=dtype, name="gmf_item")
        self.mlp_user = keras.layers.Embedding(num_users, factors, dtype=dtype, name="mlp_user")
        self.mlp_item = keras.layers.Embedding(num_items, factors, dtype=dtype, name="mlp_item")
        self.tower = [keras.layers.Dense(width, activation="relu", dtype=dtype, name=f"mlp.{i}")
                      for i, width in enumerate(hidden)]
        self.out = keras.layers.Dense(1, dtype=dtype, name="out")

    def call(self, inputs: Any) -> Any:
        users, items = inputs
        gmf = keras.ops.expand_dims(self.gmf_user(users), 1) * self.gmf_item(items)
        item = self.mlp_item(items)
        user = keras.ops.expand_dims(self.mlp_user(users), 1) + keras.ops.zeros_like(item)
        tower = keras.ops.concatenate([user, item], axis=-1)
        for dense in self.tower:
            tower = dense(tower)
        return self.out(keras.ops.concatenate([gmf, tower], axis=-1))[..., 0]

    def get_config(self) -> dict[str, Any]:
        num_users, num_items, factors, hidden = self.sizes
        return {**super().get_config(), "num_users": num_users, "num_items": num_items,
                "factors": factors, "hidden": hidden}


def neumf(weights: Weights) -> NeuMF:
    """:class:`NeuMF` holding copies of ``weights`` (sizes and dtype read from them)."""
    users = _weight(weights, "gmf_user/embedding", "neumf")
    items = _weight(weights, "gmf_item/embedding", "neumf")
    hidden = [weights[f"{p}/kernel"].shape[1] for p in layer_paths(weights, "mlp.")]
    model = NeuMF(users.shape[0], items.shape[0], users.shape[1], hidden, dtype=_dtype(weights))
    model((np.zeros(1, np.int64), np.zeros((1, 1), np.int64)))  # build the weights
    load_weights(model, weights)
    return model


# Keras variable attribute of each canonical leaf
_LEAVES = {"kernel": "kernel", "bias": "bias", "gamma": "gamma", "beta": "beta",
           "mean": "moving_mean", "var": "moving_variance", "embedding": "embeddings"}
_LAYER_LEAVES: dict[type, tuple[str, ...]] = {
    keras.layers.Conv2D: ("kernel", "bias"), keras.layers.Dense: ("kernel", "bias"),
    TorchBatchNorm: ("gamma", "beta", "mean", "var"), keras.layers.Embedding: ("embedding",),
    # Keras's own BatchNorm (keras.applications' backbones): its moving statistics are part
    # of the model's weights, so a checkpoint restores them
    keras.layers.BatchNormalization: ("gamma", "beta", "mean", "var"),
}


def _layers(layer: Any) -> Iterator[Any]:
    for child in layer.layers if isinstance(layer, keras.Model) else [layer]:
        yield from _layers(child) if isinstance(child, keras.Model) else [child]


def _entries(model: keras.Model) -> Iterator[tuple[str, Any]]:
    """``(canonical key, variable)`` of every weight of ``model``, in layer order."""
    for layer in _layers(model):
        for leaf in _LAYER_LEAVES.get(type(layer), ()):
            variable = getattr(layer, _LEAVES[leaf], None)
            if variable is not None:
                yield f"{layer.name}/{leaf}", variable


def model_weights(model: keras.Model) -> Weights:
    """The model's weights as canonical numpy copies (``{"path/leaf": array}``; Keras's
    layouts are canonical), BatchNorm's moving statistics included."""
    return {key: np.array(keras.ops.convert_to_numpy(variable), copy=True)
            for key, variable in _entries(model)}


def model_variables(model: keras.Model) -> dict[str, Any]:
    """The model's trainable variables by canonical key (for ``tape.gradient``)."""
    return {key: variable for key, variable in _entries(model) if variable.trainable}


def load_weights(model: keras.Model, weights: Weights) -> None:
    """Copy canonical ``weights`` into ``model``; the keys and shapes must be exactly the
    model's (checked before anything is copied)."""
    entries = dict(_entries(model))
    if set(entries) != set(weights):
        raise ValueError(f"load_weights: weights for {sorted(set(weights) - set(entries))[:4]} "
                         f"that the model lacks, none for {sorted(set(entries) - set(weights))[:4]}"
                         "; expected the keys of the model's own weights. Fix: build the "
                         "weights with the matching xrisk.runner.models function.")
    for key, variable in entries.items():
        if tuple(np.shape(weights[key])) != tuple(variable.shape):
            raise ValueError(f"load_weights: {key} has shape {np.shape(weights[key])}; the "
                             f"model expects {tuple(variable.shape)}. Fix: draw the weights "
                             "with the model's sizes.")
    for key, variable in entries.items():
        variable.assign(np.asarray(weights[key]))


# -- larger backbones (keras.applications) -----------------------------------------------------

#: The ``keras.applications`` backbones :func:`backbone` builds.
BACKBONES = ("densenet121",)
#: The smallest height and width DenseNet121 takes (it halves the resolution five times).
BACKBONE_MIN_SIZE = 32


def backbone(name: str, num_outputs: int = 1, *,
             input_shape: tuple[int, int, int] = (224, 224, 3), seed: int | None = None,
             dtype: str = "float32") -> keras.Model:
    """``keras.applications``'s ``DenseNet121`` with ``num_outputs`` logits (no softmax) and
    Keras's own random initialisation, for images (N, H, W, C), H and W at least 32.

    Its weights are not drawn from a seed in numpy like the reference models' (:func:`resnet20`,
    :func:`conv_encoder`), so a Keras run does not start from torchvision's model. Keras has no
    ResNet-18: :func:`resnet20` is the small ResNet here, ``keras.applications.ResNet50`` the
    large one.

    Parameters
    ----------
    name : str
        ``"densenet121"`` (:data:`BACKBONES`).
    num_outputs : int
        Logits per image: the last layer, ``"predictions"``, is a Dense layer
        (1024, num_outputs).
    input_shape : tuple of int
        (H, W, C) of the images.
    seed : int or None
        Keras draws each initializer's seed from Python's ``random`` when the layer is made;
        with a seed, ``random`` is seeded with it while the model is built and its state is
        restored afterwards, so the same seed builds the same weights and nothing else's
        random stream moves. None: Keras's usual unseeded draw.
    dtype : str
        The variables' and the computation's dtype (``"float32"`` or ``"float64"``).

    Examples
    --------
    >>> from xrisk.tensorflow.models import backbone, model_weights
    >>> first = model_weights(backbone("densenet121", 2, input_shape=(32, 32, 3), seed=0))
    >>> again = model_weights(backbone("densenet121", 2, input_shape=(32, 32, 3), seed=0))
    >>> first["predictions/kernel"].shape, len(first)  # BatchNorm's statistics included
    ((1024, 2), 606)
    >>> all(np.array_equal(first[key], again[key]) for key in first)
    True
    """
    if name == "resnet18":
        raise ValueError("backbone: name='resnet18' is not in keras.applications; expected one "
                         f"of {BACKBONES}. Fix: use xrisk.tensorflow.models.resnet20, or "
                         "keras.applications.ResNet50(weights=None, ...).")
    if name not in BACKBONES:
        raise ValueError(f"backbone: name={name!r}; expected one of {BACKBONES}. Fix: pick one "
                         "of those.")
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 1:
        raise ValueError(f"backbone: num_outputs={num_outputs!r}; expected a positive int. "
                         "Fix: pass e.g. num_outputs=1.")
    if len(input_shape) != 3 or min(input_shape[:2]) < BACKBONE_MIN_SIZE:
        raise ValueError(f"backbone: input_shape={tuple(input_shape)!r}; expected (H, W, C) with "
                         f"H and W at least {BACKBONE_MIN_SIZE} (DenseNet121 halves the "
                         "resolution five times). Fix: resize the images to at least "
                         f"{BACKBONE_MIN_SIZE}x{BACKBONE_MIN_SIZE} (ImageNet's 224x224 is "
                         "its usual size).")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"backbone: dtype={dtype!r}; expected 'float32' or 'float64'. Fix: "
                         "pass one of those.")
    import random

    saved_random = random.getstate()
    saved_floatx, saved_policy = keras.config.floatx(), keras.config.dtype_policy()
    try:
        if seed is not None:
            random.seed(seed)
        # keras.applications takes no dtype: its input takes floatx and its layers the
        # global policy when they are made
        keras.config.set_floatx(dtype)
        keras.config.set_dtype_policy(dtype)
        model: keras.Model = keras.applications.DenseNet121(
            weights=None, input_shape=tuple(input_shape), classes=num_outputs,
            classifier_activation=None)
    finally:
        keras.config.set_floatx(saved_floatx)
        keras.config.set_dtype_policy(saved_policy)
        if seed is not None:
            random.setstate(saved_random)
    return model
