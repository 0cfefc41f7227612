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

The image and ranking models take the canonical weights of :mod:`xrisk.runner.models`
(convs stored (kh, kw, in, out) there, transposed to torch's (out, in, kh, kw) here):

>>> import torch
>>> from xrisk.runner.models import resnet20_weights
>>> from xrisk.torch.models import model_weights, resnet20
>>> weights = resnet20_weights(10, seed=0, dtype="float32")
>>> net = resnet20(weights).eval()
>>> tuple(net(torch.zeros(2, 3, 32, 32)).shape), tuple(net.conv1.weight.shape)
((2, 10), (16, 3, 3, 3))
>>> bool(np.array_equal(model_weights(net)["conv1/kernel"], weights["conv1/kernel"]))
True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from xrisk.runner.models import (
    BATCH_NORM_EPS,
    BATCH_NORM_MOMENTUM,
    Weights,
    layer_paths,
    resnet20_blocks,
)

__all__ = ["BACKBONES", "BasicBlock", "ConvEncoder", "NeuMF", "ResNet20", "backbone",
           "conv_encoder", "load_weights", "mlp", "mlp_layers", "model_gradients", "model_weights",
           "neumf", "resnet20", "set_mlp_layers"]

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


# -- the image and ranking models (flat canonical weights, xrisk.runner.models) -------------

def _dtype(weights: Weights) -> torch.dtype:
    return getattr(torch, str(next(iter(weights.values())).dtype))


def _conv(fan_in: int, fan_out: int, stride: int, dtype: torch.dtype) -> nn.Conv2d:
    return nn.Conv2d(fan_in, fan_out, 3, stride=stride, padding=1, bias=False, dtype=dtype)


def _batch_norm(channels: int, dtype: torch.dtype) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BATCH_NORM_EPS, momentum=BATCH_NORM_MOMENTUM,
                          dtype=dtype)


class BasicBlock(nn.Module):
    """ResNet's basic block: ``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``; where
    the shape changes the shortcut subsamples by ``stride`` and zero-pads the channels (He et
    al.'s option A, parameter-free)."""

    def __init__(self, fan_in: int, width: int, stride: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv(fan_in, width, stride, dtype), _batch_norm(width, dtype)
        self.conv2, self.bn2 = _conv(width, width, 1, dtype), _batch_norm(width, dtype)
        self.stride, self.pad = stride, (width - fan_in) // 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        shortcut = x
        if self.stride != 1 or self.pad:
            shortcut = F.pad(x[:, :, ::self.stride, ::self.stride],
                             (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(out + shortcut)


class ResNet20(nn.Module):
    """CIFAR ResNet20 (:func:`xrisk.runner.models.resnet20_weights`): images (N, C, H, W) ->
    logits (N, num_outputs)."""

    def __init__(self, in_channels: int, num_outputs: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv(in_channels, 16, 1, dtype), _batch_norm(16, dtype)
        stages: dict[str, list[nn.Module]] = {}
        for path, fan_in, width, stride in resnet20_blocks():
            stages.setdefault(path.partition(".")[0], []).append(
                BasicBlock(fan_in, width, stride, dtype))
        self.layer1, self.layer2, self.layer3 = (nn.Sequential(*stages[f"layer{i}"])
                                                 for i in (1, 2, 3))
        self.linear = nn.Linear(64, num_outputs, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        return self.linear(out.mean(dim=(2, 3)))


class ConvEncoder(nn.Module):
    """Conv encoder + projection head (:func:`xrisk.runner.models.conv_encoder_weights`):
    :meth:`features` (N, widths[-1]) for evaluation, :meth:`forward` the projection
    (N, projection[-1]) for the contrastive loss."""

    def __init__(self, in_channels: int, widths: Sequence[int], projection: Sequence[int],
                 dtype: torch.dtype) -> None:
        super().__init__()
        layers: dict[str, nn.Module] = {}
        fan_in = in_channels
        for i, width in enumerate(widths):
            layers[f"conv{i}"] = _conv(fan_in, width, 1 if i == 0 else 2, dtype)
            layers[f"bn{i}"] = _batch_norm(width, dtype)
            fan_in = width
        self.encoder = nn.ModuleDict(layers)
        head: dict[str, nn.Module] = {}
        for i, width in enumerate(projection):
            head[f"dense{i}"] = nn.Linear(fan_in, width, dtype=dtype)
            fan_in = width
        self.head = nn.ModuleDict(head)
        self.depth = len(widths)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.depth):
            x = F.relu(self.encoder[f"bn{i}"](self.encoder[f"conv{i}"](x)))
        return x.mean(dim=(2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.features(x)
        for position, dense in enumerate(self.head.values()):
            out = dense(F.relu(out) if position else out)
        return out


class NeuMF(nn.Module):
    """NeuMF (:func:`xrisk.runner.models.neumf_weights`): ``forward(users (Q,), items (Q, C))``
    -> scores (Q, C) of each query's candidate items."""

    def __init__(self, num_users: int, num_items: int, factors: int, hidden: Sequence[int],
                 dtype: torch.dtype) -> None:
        super().__init__()
        self.gmf_user = nn.Embedding(num_users, factors, dtype=dtype)
        self.gmf_item = nn.Embedding(num_items, factors, dtype=dtype)
        self.mlp_user = nn.Embedding(num_users, factors, dtype=dtype)
        self.mlp_item = nn.Embedding(num_items, factors, dtype=dtype)
        sizes = [2 * factors, *hidden]
        self.mlp = nn.ModuleList(nn.Linear(a, b, dtype=dtype)
                                 for a, b in zip(sizes[:-1], sizes[1:]))
        self.out = nn.Linear(factors + sizes[-1], 1, dtype=dtype)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        gmf = self.gmf_user(users)[:, None, :] * self.gmf_item(items)
        item = self.mlp_item(items)
        tower = torch.cat([self.mlp_user(users)[:, None, :].expand_as(item), item], dim=-1)
        for dense in self.mlp:
            tower = F.relu(dense(tower))
        return self.out(torch.cat([gmf, tower], dim=-1))[..., 0]


def resnet20(weights: Weights) -> ResNet20:
    """:class:`ResNet20` holding copies of ``weights`` (sizes and dtype read from them)."""
    kernel = _weight(weights, "conv1/kernel", "resnet20")
    model = ResNet20(kernel.shape[2], _weight(weights, "linear/bias", "resnet20").shape[0],
                     _dtype(weights))
    load_weights(model, weights)
    return model


def conv_encoder(weights: Weights) -> ConvEncoder:
    """:class:`ConvEncoder` holding copies of ``weights`` (sizes and dtype read from them)."""
    convs = layer_paths(weights, "encoder.conv")
    heads = layer_paths(weights, "head.dense")
    if not convs or not heads:
        raise ValueError("conv_encoder: weights without 'encoder.conv*' or 'head.dense*' "
                         f"layers (keys {sorted(weights)[:4]}...); expected "
                         "xrisk.runner.models.conv_encoder_weights(...).")
    model = ConvEncoder(weights[f"{convs[0]}/kernel"].shape[2],
                        [weights[f"{p}/kernel"].shape[3] for p in convs],
                        [weights[f"{p}/kernel"].shape[1] for p in heads], _dtype(weights))
    load_weights(model, weights)
    return model


def neumf(weights: Weights) -> NeuMF:
    """:class:`NeuMF` holding copies of ``weights`` (sizes and dtype read from them)."""
    users = _weight(weights, "gmf_user/embedding", "neumf")
    items = _weight(weights, "gmf_item/embedding", "neumf")
    hidden = [weights[f"{p}/kernel"].shape[1] for p in layer_paths(weights, "mlp.")]
    model = NeuMF(users.shape[0], items.shape[0], users.shape[1], hidden, _dtype(weights))
    load_weights(model, weights)
    return model


def _weight(weights: Weights, key: str, owner: str) -> np.ndarray:
    if key not in weights:
        raise ValueError(f"{owner}: the weights lack {key!r} (keys {sorted(weights)[:4]}...); "
                         f"expected xrisk.runner.models.{owner}_weights(...).")
    return weights[key]


# leaf -> (module attribute, trainable) per module type; kernels change layout
_LEAVES: dict[type, dict[str, str]] = {
    nn.Conv2d: {"kernel": "weight", "bias": "bias"},
    nn.Linear: {"kernel": "weight", "bias": "bias"},
    nn.BatchNorm2d: {"gamma": "weight", "beta": "bias", "mean": "running_mean",
                     "var": "running_var"},
    nn.Embedding: {"embedding": "weight"},
}


def _entries(model: nn.Module) -> Iterator[tuple[str, str, torch.Tensor]]:
    """``(canonical key, layout, tensor)`` of every weight of ``model``, in module order."""
    for path, module in model.named_modules():
        leaves = _LEAVES.get(type(module))
        for leaf, attribute in (leaves or {}).items():
            tensor = getattr(module, attribute)
            if tensor is not None:
                yield f"{path}/{leaf}", (type(module).__name__ if leaf == "kernel" else ""), tensor


def _to_canonical(layout: str, array: np.ndarray) -> np.ndarray:
    if layout == "Conv2d":  # (out, in, kh, kw) -> (kh, kw, in, out)
        return array.transpose(2, 3, 1, 0).copy()
    return array.T.copy() if layout == "Linear" else array.copy()


def model_weights(model: nn.Module) -> Weights:
    """The model's weights as canonical numpy copies (``{"path/leaf": array}``; see
    :mod:`xrisk.runner.models`), BatchNorm's running statistics included."""
    return {key: _to_canonical(layout, tensor.detach().cpu().numpy())
            for key, layout, tensor in _entries(model)}


def model_gradients(model: nn.Module) -> Weights:
    """The trainable weights' ``.grad`` in the canonical layout (zeros where none yet)."""
    return {key: _to_canonical(layout, (tensor.grad if tensor.grad is not None
                                        else torch.zeros_like(tensor)).detach().cpu().numpy())
            for key, layout, tensor in _entries(model) if tensor.requires_grad}


def load_weights(model: nn.Module, weights: Weights) -> None:
    """Copy canonical ``weights`` into ``model``; the keys and shapes must be exactly the
    model's (checked before anything is copied)."""
    entries = {key: (layout, tensor) for key, layout, tensor in _entries(model)}
    if set(entries) != set(weights):
        raise ValueError(f"load_weights: weights for {sorted(set(weights) - set(entries))[:4]} "
                         f"that the model lacks, none for {sorted(set(entries) - set(weights))[:4]}"
                         "; expected the keys of the model's own weights. Fix: build the "
                         "weights with the matching xrisk.runner.models function.")
    converted = {}
    for key, (layout, tensor) in entries.items():
        array = np.asarray(weights[key])
        if layout == "Conv2d":
            array = array.transpose(3, 2, 0, 1)
        elif layout == "Linear":
            array = array.T
        if tuple(array.shape) != tuple(tensor.shape):
            raise ValueError(f"load_weights: {key} has shape {np.shape(weights[key])}; the "
                             f"model expects {_to_canonical(layout, np.empty(tensor.shape)).shape}"
                             " (canonical layout). Fix: draw the weights with the model's sizes.")
        converted[key] = np.ascontiguousarray(array)
    with torch.no_grad():
        for key, (_, tensor) in entries.items():
            tensor.copy_(torch.from_numpy(converted[key]))


# -- larger backbones (optional: torchvision) -------------------------------------------------

#: The torchvision backbones :func:`backbone` builds.
BACKBONES = ("resnet18", "densenet121")


def backbone(name: str, num_outputs: int = 1, *, seed: int | None = None,
             dtype: str = "float32") -> nn.Module:
    """torchvision's ImageNet ``resnet18`` or ``densenet121`` with ``num_outputs`` logits and
    torchvision's own random initialisation, for images (N, 3, H, W).

    An optional extra: it needs ``torchvision`` (``pip install torchvision`` matching your
    torch build). Its weights are not drawn from a seed in numpy like the reference models'
    (:func:`resnet20`, :func:`conv_encoder`): the frameworks' versions of these networks differ
    (Keras has no ResNet-18), so their runs do not start from the same model.

    Parameters
    ----------
    name : str
        ``"resnet18"`` (last layer ``fc``) or ``"densenet121"`` (last layer ``classifier``;
        H and W at least 32: it halves the resolution five times).
    num_outputs : int
        Logits per image.
    seed : int or None
        torchvision draws the weights from torch's global generator; with a seed the model is
        built under ``torch.random.fork_rng`` seeded with it, so the same seed builds the same
        weights and the global generator's state is left as it was. None: torch's current
        global stream.
    dtype : str
        ``"float32"`` (torchvision's) or ``"float64"`` (the built model converted).
    """
    if name not in BACKBONES:
        raise ValueError(f"backbone: name={name!r}; expected one of {BACKBONES}. Fix: pick one "
                         "of those, or xrisk.torch.models.resnet20 for 32x32 images.")
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 1:
        raise ValueError(f"backbone: num_outputs={num_outputs!r}; expected a positive int. "
                         "Fix: pass e.g. num_outputs=1.")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"backbone: dtype={dtype!r}; expected 'float32' or 'float64'. Fix: "
                         "pass one of those.")
    try:
        import torchvision.models as vision_models
    except (ImportError, OSError, RuntimeError, AttributeError) as error:
        raise ImportError(
            f"backbone({name!r}) needs torchvision, which failed to import ({error!r}). Fix: "
            f"pip install the torchvision build matching torch {torch.__version__}, or use "
            "xrisk.torch.models.resnet20 (no extra dependency).") from error
    build = getattr(vision_models, name)
    if seed is None:
        model: nn.Module = build(weights=None, num_classes=num_outputs)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build(weights=None, num_classes=num_outputs)
    return model.to(getattr(torch, dtype))
