"""The runner's PyTorch session: an ``nn.Module`` MLP, an xrisk loss and optimizer.

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

from .models import mlp, mlp_layers, set_mlp_layers

__all__ = ["RankingSession", "Session"]


def _to_numpy(value: Any) -> np.ndarray | None:
    return value.detach().cpu().numpy().copy() if isinstance(value, torch.Tensor) else None


class Session:
    """Model, loss and optimizer of one run; see :class:`xrisk.runner.engine.Session`."""

    def __init__(self, splits: Splits, layers: list[tuple[np.ndarray, np.ndarray]], *,
                 activation: str, dtype: str, seed: int) -> None:
        self.dtype = dtype
        self.model = mlp(layers, activation=activation)
        # torch's global generator (dropout, user layers) starts from the run's seed; the
        # checkpoint keeps its state.
        torch.manual_seed(seed)
        self.x_train = torch.from_numpy(splits.x_train)
        self.y_train = torch.from_numpy(splits.y_train)
        self.num_samples = splits.y_train.size
        self.loss_fn: Any = None
        self.optimizer: Any = None

    def start(self, phase: Phase) -> None:
        self.loss_fn = getattr(xr, phase.loss)(**loss_arguments(phase, self.num_samples),
                                               dtype=self.dtype)
        extra = [self.loss_fn] if phase.min_max else []
        self.optimizer = getattr(xr, phase.optimizer)(self.model.parameters(), *extra,
                                                      **phase.optimizer_options)
        self.to_scores = torch.sigmoid if phase.probability else (lambda z: z)

    def epoch(self, batches: Iterable[np.ndarray]) -> Iterator[torch.Tensor]:
        self.model.train()
        for index in batches:
            index_t = torch.from_numpy(index)
            logits = self.model(self.x_train[index_t])[:, 0]
            loss = self.loss_fn(self.to_scores(logits), self.y_train[index_t], index_t)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            yield loss.detach()

    def predict(self, x: np.ndarray) -> np.ndarray:
        self.model.eval()
        with torch.no_grad():
            return self.model(torch.from_numpy(x))[:, 0].numpy().copy()

    def layers(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return mlp_layers(self.model)

    def set_layers(self, layers: list[tuple[np.ndarray, np.ndarray]]) -> None:
        set_mlp_layers(self.model, layers)

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


class _NeuMF(torch.nn.Module):
    """GMF + MLP towers over query and item embeddings, one linear output (He et al., 2017);
    weights from :func:`xrisk.runner.ranking.ranking_weights`."""

    def __init__(self, weights: dict[str, np.ndarray], activation: str) -> None:
        super().__init__()
        self.embeddings = torch.nn.ParameterDict({
            name: torch.nn.Parameter(torch.from_numpy(weights[name].copy()))
            for name in ("gmf_user", "gmf_item", "mlp_user", "mlp_item")})
        self.tower: torch.nn.ModuleList = _dense_stack(weights)
        self.act = torch.relu if activation == "relu" else torch.tanh

    def forward(self, queries: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        e = self.embeddings
        gmf = e["gmf_user"][queries][:, None, :] * e["gmf_item"][items]  # (Q, C, f)
        item = e["mlp_item"][items]
        hidden = torch.cat([e["mlp_user"][queries][:, None, :].expand_as(item), item], dim=-1)
        for layer in self.tower[:-1]:
            hidden = self.act(layer(hidden))
        return self.tower[-1](torch.cat([gmf, hidden], dim=-1))[..., 0]  # (Q, C)


class _RankingMLP(torch.nn.Module):
    """An MLP scoring feature rows; weights from ``ranking_weights``."""

    def __init__(self, weights: dict[str, np.ndarray], activation: str) -> None:
        super().__init__()
        self.tower: torch.nn.ModuleList = _dense_stack(weights)
        self.act = torch.relu if activation == "relu" else torch.tanh

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.tower[:-1]:
            x = self.act(layer(x))
        return self.tower[-1](x)[..., 0]


def _dense_names(weights: dict[str, np.ndarray]) -> list[str]:
    count = sum(1 for key in weights if key.startswith("layer") and key.endswith("/kernel"))
    return [*(f"layer{i}" for i in range(count)), "out"]


def _dense_stack(weights: dict[str, np.ndarray]) -> torch.nn.ModuleList:
    layers = torch.nn.ModuleList()
    for name in _dense_names(weights):
        kernel = weights[f"{name}/kernel"]
        layer = torch.nn.Linear(kernel.shape[0], kernel.shape[1],
                                dtype=torch.from_numpy(kernel).dtype)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(kernel.T))
            layer.bias.copy_(torch.from_numpy(weights[f"{name}/bias"]))
        layers.append(layer)
    return layers


class RankingSession:
    """A learning-to-rank run's model (NeuMF or an MLP over features), loss and optimizer;
    :func:`xrisk.runner.ranking.run_ranking_seed` drives it. :meth:`epoch` is the loop a user
    would write around ``TriSampler`` batches."""

    def __init__(self, data: Any, weights: dict[str, np.ndarray], *, activation: str,
                 dtype: str, seed: int) -> None:
        self.dtype = dtype
        self.names = _dense_names(weights)
        torch.manual_seed(seed)
        if data.model == "neumf":
            self.model: _NeuMF | _RankingMLP = _NeuMF(weights, activation)
            self.features = torch.zeros(0)
        else:
            self.model = _RankingMLP(weights, activation)
            self.features = torch.from_numpy(np.ascontiguousarray(data.features, dtype=dtype))
        tower = self.model.tower
        self.linears = [layer for layer in tower if isinstance(layer, torch.nn.Linear)]
        self.loss_fn: Any = None
        self.optimizer: Any = None
        self.pointwise = False

    def _scores(self, inputs: dict[str, np.ndarray]) -> torch.Tensor:
        if "queries" in inputs:
            return self.model(torch.from_numpy(inputs["queries"]),
                              torch.from_numpy(inputs["items"]))
        if "rows" in inputs:
            return self.model(self.features[torch.from_numpy(inputs["rows"])])
        return self.model(torch.from_numpy(np.ascontiguousarray(inputs["features"],
                                                                dtype=self.dtype)))

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
        out = {}
        if isinstance(self.model, _NeuMF):
            out = {k: v.detach().numpy().copy() for k, v in self.model.embeddings.items()}
        for name, layer in zip(self.names, self.linears):
            out[f"{name}/kernel"] = layer.weight.detach().numpy().T.copy()
            out[f"{name}/bias"] = layer.bias.detach().numpy().copy()
        return out

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        with torch.no_grad():
            if isinstance(self.model, _NeuMF):
                for k, v in self.model.embeddings.items():
                    v.copy_(torch.from_numpy(weights[k]))
            for name, layer in zip(self.names, self.linears):
                layer.weight.copy_(torch.from_numpy(weights[f"{name}/kernel"].T))
                layer.bias.copy_(torch.from_numpy(weights[f"{name}/bias"]))

    def decay(self, factor: float) -> None:
        self.optimizer.update_lr(factor)

    state = Session.state
    load_state = Session.load_state
