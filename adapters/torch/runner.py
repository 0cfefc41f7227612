"""The runner's PyTorch session: an ``nn.Module`` (an MLP, a reference conv model or a
torchvision backbone), an xrisk loss and optimizer.

:func:`xrisk.runner.engine.run_seed` drives it; :meth:`Session.epoch` is the whole training
loop, as a user would write it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

import xrisk.torch as xr
from xrisk.runner.checkpoint import flatten_tree, unflatten_tree
from xrisk.runner.data import Splits
from xrisk.runner.engine import Phase, loss_arguments
from xrisk.runner.ranking import layers_weights, weights_layers
from xrisk.runner.recipe import BACKBONES

from .models import (
    backbone,
    conv_encoder,
    load_weights,
    mlp,
    mlp_layers,
    model_weights,
    neumf,
    resnet20,
    set_mlp_layers,
)

__all__ = ["ContrastiveSession", "RankingSession", "Session"]


def _masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of logits (B, K) against labels with NaN where missing: the mean
    over the observed entries."""
    observed = ~torch.isnan(labels)
    per_entry = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, torch.where(observed, labels, torch.zeros_like(labels)), reduction="none")
    return (per_entry * observed).sum() / observed.sum().clamp(min=1)


def _to_numpy(value: Any) -> np.ndarray | None:
    return value.detach().cpu().numpy().copy() if isinstance(value, torch.Tensor) else None


class Session:
    """Model, loss and optimizer of one run; see :class:`xrisk.runner.engine.Session`."""

    def __init__(self, splits: Splits, weights: dict[str, np.ndarray], *, model: str,
                 activation: str, dtype: str, seed: int) -> None:
        self.dtype = dtype
        self.kind = model
        # multi-label: labels (N, K) with NaN where missing, one logit per label
        self.multilabel = splits.y_train.ndim == 2
        self.num_samples = len(splits.y_train)
        self.num_labels = splits.y_train.shape[1] if self.multilabel else None
        # a backbone takes 3 channels: gray images are repeated to them batch by batch
        self.repeat_gray = model in BACKBONES and splits.x_train.shape[-1] == 1
        # prediction in chunks: a conv net's activations of a whole split are big
        self.chunk = 64 if model in BACKBONES else 1024
        if model == "mlp":
            self.model: torch.nn.Module = mlp(weights_layers(weights), activation=activation)
        elif model in ("resnet20", "conv_encoder"):
            self.model = resnet20(weights) if model == "resnet20" else conv_encoder(weights)
        elif model in BACKBONES:  # torchvision's initialisation, drawn from the run's seed
            self.model = backbone(model, self.num_labels or 1, seed=seed, dtype=dtype)
            if weights:
                load_weights(self.model, weights)
        else:
            raise ValueError(f"Session: model={model!r}; expected 'mlp', 'resnet20', "
                             f"'conv_encoder' or one of {BACKBONES}. Fix: set model.name to "
                             "one of those.")
        # torch's global generator (dropout, user layers) starts from the run's seed; the
        # checkpoint keeps its state.
        torch.manual_seed(seed)
        # an array, or rows read on request (multi-label CheXpert's images: LazyImages)
        self.x_train: Any = (self._inputs(splits.x_train)
                             if isinstance(splits.x_train, np.ndarray) else splits.x_train)
        self.y_train = torch.from_numpy(splits.y_train)
        self.loss_fn: Any = None
        self.optimizer: Any = None
        self.masked = False

    def _inputs(self, x: np.ndarray) -> torch.Tensor:
        """Features as they are; images (N, H, W, C) as torch's (N, C, H, W), gray ones for a
        backbone as three equal channels (a broadcast view: no copy until a batch is taken)."""
        tensor = torch.from_numpy(x)
        if tensor.ndim != 4:
            return tensor
        tensor = tensor.permute(0, 3, 1, 2).contiguous()
        return tensor.expand(-1, 3, -1, -1) if self.repeat_gray else tensor

    def start(self, phase: Phase) -> None:
        self.loss_fn = getattr(xr, phase.loss)(
            **loss_arguments(phase, self.num_samples, self.num_labels), dtype=self.dtype)
        # multi-label cross-entropy: per label, the missing labels masked (torch's own)
        self.masked = self.multilabel and phase.loss == "CrossEntropyLoss"
        extra = [self.loss_fn] if phase.min_max else []
        self.optimizer = getattr(xr, phase.optimizer)(self.model.parameters(), *extra,
                                                      **phase.optimizer_options)
        self.to_scores = torch.sigmoid if phase.probability else (lambda z: z)

    def epoch(self, batches: Iterable[np.ndarray]) -> Iterator[torch.Tensor]:
        self.model.train()
        for index in batches:
            index_t = torch.from_numpy(index)
            inputs = (self.x_train[index_t] if isinstance(self.x_train, torch.Tensor)
                      else self._inputs(self.x_train[index]))  # read from disk now
            logits = self._logits(self.model(inputs))
            labels = self.y_train[index_t]
            loss = (_masked_cross_entropy(logits, labels) if self.masked
                    else self.loss_fn(self.to_scores(logits), labels, index_t))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            yield loss.detach()

    def predict(self, x: np.ndarray) -> np.ndarray:
        self.model.eval()  # BatchNorm: running statistics
        with torch.no_grad():  # in chunks: a conv net's activations of a whole split are big
            return torch.cat([self._logits(self.model(self._inputs(x[i:i + self.chunk])))
                              for i in range(0, max(len(x), 1), self.chunk)]).numpy().copy()

    def _logits(self, out: torch.Tensor) -> torch.Tensor:
        return out if self.multilabel else out[:, 0]

    def weights(self) -> dict[str, np.ndarray]:
        if self.kind == "mlp":
            return layers_weights(mlp_layers(self.model))
        return model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        if self.kind == "mlp":
            set_mlp_layers(self.model, weights_layers(weights))
        else:
            load_weights(self.model, weights)

    def decay(self, factor: float, *, regularizer: bool) -> None:
        if regularizer:
            self.optimizer.update_regularizer(decay_factor=factor)
        else:
            self.optimizer.update_lr(factor)

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        skeleton, arrays = flatten_tree(self.optimizer.state_dict(), "optimizer", _to_numpy)
        arrays.update({f"loss/{k}": v for k, v in self.loss_fn.export_state().items()})
        arrays["rng"] = torch.get_rng_state().numpy().copy()
        return arrays, {"optimizer": skeleton}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.loss_fn.load_state({k.partition("/")[2]: v for k, v in arrays.items()
                                 if k.startswith("loss/")})
        self.optimizer.load_state_dict(
            unflatten_tree(meta["optimizer"], arrays, lambda a: torch.from_numpy(a.copy())))
        torch.set_rng_state(torch.from_numpy(arrays["rng"].copy()))


class RankingSession:
    """A learning-to-rank run's model (NeuMF or an MLP over features), loss and optimizer;
    :class:`xrisk.runner.ranking.RankingTask` drives it. :meth:`epoch` is the loop a user
    would write around ``TriSampler`` batches."""

    def __init__(self, data: Any, weights: dict[str, np.ndarray], *, activation: str,
                 dtype: str, seed: int) -> None:
        self.dtype = dtype
        torch.manual_seed(seed)
        self.neumf = data.model == "neumf"
        if self.neumf:
            self.model: torch.nn.Module = neumf(weights)
            self.features = torch.zeros(0)
        else:
            self.model = mlp(weights_layers(weights), activation=activation)
            self.features = torch.from_numpy(np.ascontiguousarray(data.features, dtype=dtype))
        self.loss_fn: Any = None
        self.optimizer: Any = None
        self.pointwise = False

    def _scores(self, inputs: dict[str, np.ndarray]) -> torch.Tensor:
        if self.neumf:
            return self.model(torch.from_numpy(inputs["queries"]),
                              torch.from_numpy(inputs["items"]))
        if "rows" in inputs:
            return self.model(self.features[torch.from_numpy(inputs["rows"])])[..., 0]
        x = np.ascontiguousarray(inputs["features"], dtype=self.dtype)
        return self.model(torch.from_numpy(x))[:, 0]

    def start(self, phase: Phase, loss_options: dict[str, Any]) -> None:
        self.loss_fn = getattr(xr, phase.loss)(**loss_options, dtype=self.dtype)
        self.optimizer = getattr(xr, phase.optimizer)(self.model.parameters(),
                                                      **phase.optimizer_options)
        self.pointwise = phase.loss == "CrossEntropyLoss"

    def epoch(self, batches: Iterable[dict[str, Any]]) -> Iterator[torch.Tensor]:
        self.model.train()
        for batch in batches:
            scores = self._scores(batch["model"])
            if self.pointwise:
                scores = scores.reshape(-1)
            inputs = {k: torch.from_numpy(v) for k, v in batch["loss"].items()}
            loss = self.loss_fn(scores, **inputs)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            yield loss.detach()

    def predict(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        self.model.eval()
        with torch.no_grad():
            return self._scores(inputs).numpy().copy()

    def weights(self) -> dict[str, np.ndarray]:
        if self.neumf:
            return model_weights(self.model)
        return layers_weights(mlp_layers(self.model))

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        if self.neumf:
            load_weights(self.model, weights)
        else:
            set_mlp_layers(self.model, weights_layers(weights))

    def decay(self, factor: float) -> None:
        self.optimizer.update_lr(factor)

    state = Session.state
    load_state = Session.load_state


class ContrastiveSession:
    """A contrastive run's conv encoder (with its projection head), loss and LARS;
    :class:`xrisk.runner.contrastive.ContrastiveTask` drives it. :meth:`epoch` is the SimCLR
    loop a user would write: two views of each image (the view parameters come with the
    batch), both views through the encoder in one batch, ``loss_fn(z1, z2, index)``."""

    def __init__(self, images: np.ndarray, weights: dict[str, np.ndarray], *, dtype: str,
                 seed: int, size: tuple[int, int]) -> None:
        from xrisk.backends import get_backend

        torch.manual_seed(seed)
        self.dtype, self.size = dtype, (int(size[0]), int(size[1]))
        self.model = conv_encoder(weights)
        self.images = torch.from_numpy(images)  # (N, H, W, C): the views' layout
        self.namespace = get_backend("torch").namespace
        self.loss_fn: Any = None
        self.optimizer: Any = None
        self.scale = 1.0

    def _view(self, x: torch.Tensor, params: dict[str, np.ndarray]) -> torch.Tensor:
        """One view of each image (N, H, W, C) as the encoder's (N, C, h, w); grayscale
        images pass the RGB pipeline as three equal channels."""
        from xrisk.datasets.views import apply_simclr_views

        channels = x.shape[-1]
        rgb = x.expand(*x.shape[:-1], 3) if channels == 1 else x
        out = apply_simclr_views(self.namespace, rgb,
                                 {k: torch.from_numpy(v) for k, v in params.items()},
                                 self.size)
        return out[..., :channels].permute(0, 3, 1, 2)

    def start(self, phase: Phase, loss_options: dict[str, Any]) -> None:
        self.loss_fn = getattr(xr, phase.loss)(**loss_options, dtype=self.dtype)
        self.optimizer = getattr(xr, phase.optimizer)(self.model.parameters(),
                                                      **phase.optimizer_options)
        self.scale = phase.loss_scale

    def epoch(self, batches: Iterable[dict[str, Any]]) -> Iterator[torch.Tensor]:
        self.model.train()
        for batch in batches:
            index = torch.from_numpy(batch["index"])
            x = self.images[index]
            z1, z2 = self.model(torch.cat([self._view(x, p) for p in batch["views"]])).chunk(2)
            loss = self.loss_fn(z1, z2, index)
            self.optimizer.zero_grad()
            (loss * self.scale).backward()
            self.optimizer.step()
            yield loss.detach()

    def features(self, x: np.ndarray) -> np.ndarray:
        """The encoder's features (N, widths[-1]) of images (N, H, W, C), in evaluation
        mode (BatchNorm's running statistics)."""
        self.model.eval()
        inputs = torch.from_numpy(x).permute(0, 3, 1, 2)
        with torch.no_grad():
            return torch.cat([self.model.features(inputs[i:i + 1024])
                              for i in range(0, max(len(inputs), 1), 1024)]).numpy().copy()

    def weights(self) -> dict[str, np.ndarray]:
        return model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        load_weights(self.model, weights)

    def decay(self, factor: float) -> None:
        self.optimizer.update_lr(factor)

    state = Session.state
    load_state = Session.load_state
