"""Initial weights drawn with numpy from a seed, so every framework starts from the same model.

Each framework's builder (``xrisk.<framework>.models``) copies these arrays into its own
layers. The MLP's weights are a list ``[(kernel, bias), ...]`` (kernels (in, out)); the other
reference models' weights are a flat dict ``{"path/leaf": array}`` in one canonical layout:

- ``kernel``: conv (kh, kw, in, out), dense (in, out), as Keras and JAX hold them (torch:
  (out, in, kh, kw) and (out, in));
- ``bias``; ``embedding`` (rows, dim): the same everywhere;
- BatchNorm's ``gamma``, ``beta``, ``mean``, ``var`` (C,): torch's ``weight``, ``bias``,
  ``running_mean``, ``running_var``; Keras's ``gamma``, ``beta``, ``moving_mean``,
  ``moving_variance``.

``path`` is the layer's name in every framework (torch sub-module path, Keras layer name, key
of the JAX parameter dict). BatchNorm everywhere follows torch: ``eps = 1e-5``, running
statistics ``(1 - 0.1) * running + 0.1 * batch`` with the *unbiased* batch variance (Keras's
``momentum=0.9``; its stock layer uses the biased variance, so the Keras builder corrects it).

>>> from xrisk.runner.models import mlp_weights, parameter_count, resnet20_weights
>>> layers = mlp_weights(30, (16,), 1, seed=0, dtype="float64")
>>> [(k.shape, b.shape) for k, b in layers]
[((30, 16), (16,)), ((16, 1), (1,))]
>>> parameter_count(resnet20_weights(10, seed=0, dtype="float32"))  # He et al.: 0.27 M
269722
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["BATCH_NORM_EPS", "BATCH_NORM_MOMENTUM", "Layers", "MODEL_NAMES",
           "WEIGHT_CONSTRUCTORS", "Weights", "conv_encoder_weights", "glorot_layer",
           "layer_paths", "layers_weights", "mlp_weights", "neumf_weights", "parameter_count",
           "resnet20_blocks", "resnet20_weights", "weights_layers"]

Layers = list[tuple[np.ndarray, np.ndarray]]
Weights = dict[str, np.ndarray]

#: The reference models, by the name a recipe's ``model.name`` will use for them.
MODEL_NAMES = ("mlp", "resnet20", "conv_encoder", "neumf")
#: torch's BatchNorm defaults, used by every framework (Keras: ``momentum = 1 - 0.1``).
BATCH_NORM_EPS = 1e-5
BATCH_NORM_MOMENTUM = 0.1
_STATISTICS = ("mean", "var")


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


def parameter_count(weights: Weights) -> int:
    """Trainable scalars of ``weights`` (BatchNorm's running statistics excluded)."""
    return sum(int(array.size) for key, array in weights.items()
               if key.rpartition("/")[2] not in _STATISTICS)


def _positive(owner: str, name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name}={value!r}; expected a positive int. "
                         f"Fix: pass e.g. {name}=1.")
    return int(value)


def _widths(owner: str, name: str, values: Sequence[int]) -> tuple[int, ...]:
    widths = tuple(values)
    if not widths or any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or w < 1
                         for w in widths):
        raise ValueError(f"{owner}: {name}={values!r}; expected a non-empty sequence of "
                         f"positive ints. Fix: pass e.g. {name}=(64, 32).")
    return widths


class _Draw:
    """Draws layers in a fixed order from one generator (float64 draws cast to ``dtype``)."""

    def __init__(self, seed: int, dtype: str) -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.weights: Weights = {}

    def conv(self, path: str, size: int, fan_in: int, fan_out: int) -> None:
        # torch's kaiming_normal_ (fan_in, ReLU gain), as LibAUC's ResNet20 initialises convs
        std = np.sqrt(2.0 / (size * size * fan_in))
        self.weights[f"{path}/kernel"] = (
            std * self.rng.standard_normal((size, size, fan_in, fan_out))).astype(self.dtype)

    def batch_norm(self, path: str, channels: int) -> None:
        for leaf, value in (("gamma", 1.0), ("beta", 0.0), ("mean", 0.0), ("var", 1.0)):
            self.weights[f"{path}/{leaf}"] = np.full(channels, value, dtype=self.dtype)

    def dense_kaiming(self, path: str, fan_in: int, fan_out: int) -> None:
        # LibAUC's ResNet: kaiming_normal_ kernel; torch Linear's default uniform bias
        std = np.sqrt(2.0 / fan_in)
        bound = 1.0 / np.sqrt(fan_in)
        self.weights[f"{path}/kernel"] = (
            std * self.rng.standard_normal((fan_in, fan_out))).astype(self.dtype)
        self.weights[f"{path}/bias"] = self.rng.uniform(-bound, bound, fan_out).astype(self.dtype)

    def dense_glorot(self, path: str, fan_in: int, fan_out: int) -> None:
        kernel, bias = glorot_layer(self.rng, fan_in, fan_out, self.dtype)
        self.weights[f"{path}/kernel"], self.weights[f"{path}/bias"] = kernel, bias

    def embedding(self, path: str, rows: int, dim: int, std: float) -> None:
        self.weights[f"{path}/embedding"] = (
            std * self.rng.standard_normal((rows, dim))).astype(self.dtype)


def resnet20_blocks() -> list[tuple[str, int, int, int]]:
    """The basic blocks of ResNet20 as ``(path, in_channels, out_channels, stride)``: three
    stages of three blocks, 16/32/64 channels, the first block of stages 2 and 3 halving the
    resolution (He et al., 2016, section 4.2)."""
    blocks, channels = [], 16
    for stage, width in enumerate((16, 32, 64), start=1):
        for block in range(3):
            stride = 2 if stage > 1 and block == 0 else 1
            blocks.append((f"layer{stage}.{block}", channels, width, stride))
            channels = width
    return blocks


def resnet20_weights(num_outputs: int = 1, *, in_channels: int = 3, seed: int,
                     dtype: str) -> Weights:
    """The CIFAR ResNet20 of He et al. (2016) as in LibAUC: a 3x3 conv stem (16 channels, no
    bias) + BatchNorm + ReLU, :func:`resnet20_blocks` (two 3x3 convs with BatchNorm, the
    identity shortcut, zero-padded channels and stride-2 subsampling where the shape changes:
    the paper's option A, no parameters), global average pooling and a linear layer.

    Convs and the linear kernel are Kaiming-normal (fan in), the linear bias
    ``U(-1/sqrt(64), 1/sqrt(64))``, BatchNorm ``gamma = 1, beta = 0`` (LibAUC's
    initialisation). 269,722 parameters for 10 outputs (the paper's 0.27 M)."""
    owner = "resnet20_weights"
    num_outputs = _positive(owner, "num_outputs", num_outputs)
    in_channels = _positive(owner, "in_channels", in_channels)
    draw = _Draw(seed, dtype)
    draw.conv("conv1", 3, in_channels, 16)
    draw.batch_norm("bn1", 16)
    for path, fan_in, width, _ in resnet20_blocks():
        draw.conv(f"{path}.conv1", 3, fan_in, width)
        draw.batch_norm(f"{path}.bn1", width)
        draw.conv(f"{path}.conv2", 3, width, width)
        draw.batch_norm(f"{path}.bn2", width)
    draw.dense_kaiming("linear", 64, num_outputs)
    return draw.weights


def conv_encoder_weights(*, in_channels: int = 3, widths: Sequence[int] = (32, 64, 128),
                         projection: Sequence[int] = (128, 64), seed: int,
                         dtype: str) -> Weights:
    """A small conv encoder with a SimCLR projection head, for contrastive learning.

    Encoder: per width ``w_i`` a 3x3 conv (stride 1 for the first, 2 after; no bias) +
    BatchNorm + ReLU, then global average pooling: the features ``(N, widths[-1])``. Head
    (SimCLR): dense ``widths[-1] -> projection[0]`` + ReLU, ..., dense to ``projection[-1]``
    (no activation after the last): the embedding a contrastive loss normalises. Convs are
    Kaiming-normal, dense layers Glorot-uniform with zero bias."""
    owner = "conv_encoder_weights"
    in_channels = _positive(owner, "in_channels", in_channels)
    conv_widths = _widths(owner, "widths", widths)
    head = _widths(owner, "projection", projection)
    draw = _Draw(seed, dtype)
    fan_in = in_channels
    for i, width in enumerate(conv_widths):
        draw.conv(f"encoder.conv{i}", 3, fan_in, width)
        draw.batch_norm(f"encoder.bn{i}", width)
        fan_in = width
    for i, width in enumerate(head):
        draw.dense_glorot(f"head.dense{i}", fan_in, width)
        fan_in = width
    return draw.weights


def neumf_weights(num_users: int, num_items: int, *, factors: int = 8,
                  hidden: Sequence[int] = (64, 32), seed: int, dtype: str) -> Weights:
    """NeuMF (He et al., 2017, as in LibAUC): GMF and MLP user/item embeddings
    ``N(0, 0.01^2)`` of ``factors`` columns, an MLP tower ``2 factors -> hidden...`` (ReLU
    after each), and one linear output over ``[gmf, tower]`` (``factors + hidden[-1] -> 1``);
    dense kernels Glorot-uniform, biases zero."""
    owner = "neumf_weights"
    num_users = _positive(owner, "num_users", num_users)
    num_items = _positive(owner, "num_items", num_items)
    factors = _positive(owner, "factors", factors)
    tower = _widths(owner, "hidden", hidden)
    draw = _Draw(seed, dtype)
    for path, rows in (("gmf_user", num_users), ("gmf_item", num_items),
                       ("mlp_user", num_users), ("mlp_item", num_items)):
        draw.embedding(path, rows, factors, 0.01)
    fan_in = 2 * factors
    for i, width in enumerate(tower):
        draw.dense_glorot(f"mlp.{i}", fan_in, width)
        fan_in = width
    draw.dense_glorot("out", factors + fan_in, 1)
    return draw.weights


def layer_paths(weights: Weights, prefix: str) -> list[str]:
    """The layer paths ``prefix0, prefix1, ...`` of ``weights``, in number order (whatever the
    dict's order, e.g. sorted by a file format)."""
    paths = {key.rpartition("/")[0] for key in weights}
    numbered = [path for path in paths
                if path.startswith(prefix) and path[len(prefix):].isdigit()]
    return sorted(numbered, key=lambda path: int(path[len(prefix):]))


def layers_weights(layers: Layers) -> Weights:
    """MLP layers ``[(kernel, bias), ...]`` as named weights (``mlp.<i>``, the last ``out``)."""
    names = [*(f"mlp.{i}" for i in range(len(layers) - 1)), "out"]
    out = {}
    for name, (kernel, bias) in zip(names, layers):
        out[f"{name}/kernel"], out[f"{name}/bias"] = kernel, bias
    return out


def weights_layers(weights: Weights) -> Layers:
    """The inverse of :func:`layers_weights`."""
    names = [*layer_paths(weights, "mlp."), "out"]
    return [(weights[f"{name}/kernel"], weights[f"{name}/bias"]) for name in names]


#: Each reference model's weight constructor by name (:data:`MODEL_NAMES`); the builders of
#: ``xrisk.<framework>.models`` of the same name take what these return.
WEIGHT_CONSTRUCTORS = {"mlp": mlp_weights, "resnet20": resnet20_weights,
                       "conv_encoder": conv_encoder_weights, "neumf": neumf_weights}
