"""The runner's JAX sessions: pure models trained by a ``jax.jit`` step with donated state.

:func:`xrisk.runner.engine.run_seed` drives it; :meth:`Session.start` builds the step and
:meth:`Session.epoch` is the loop, as a user would write them. float64 recipes turn on
``jax_enable_x64`` (JAX computes in float32 otherwise).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import xrisk.jax as xr
from xrisk.runner.data import Splits
from xrisk.runner.engine import Phase, loss_arguments
from xrisk.runner.ranking import layers_weights, weights_layers

from .models import (
    conv_encoder_apply,
    merge_weights,
    mlp_apply,
    mlp_layers,
    mlp_params,
    neumf_apply,
    resnet20_apply,
    split_weights,
)

__all__ = ["ContrastiveSession", "RankingSession", "Session"]


def _masked_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Binary cross-entropy of logits (B, K) against labels with NaN where missing: the mean
    over the observed entries."""
    observed = ~jnp.isnan(labels)
    per_entry = optax.sigmoid_binary_cross_entropy(logits, jnp.where(observed, labels, 0.0))
    weight = observed.astype(logits.dtype)
    return jnp.sum(per_entry * weight) / jnp.maximum(jnp.sum(weight), 1)


def _model_apply(kind: str, activation: str) -> Any:
    """``(params, batch_norm, x, train) -> (outputs, batch_norm)`` of a reference model (the
    MLP has no BatchNorm state: an empty dict passes through)."""
    if kind == "resnet20":
        return lambda p, s, x, train: resnet20_apply(p, s, x, train=train)
    if kind == "conv_encoder":
        return lambda p, s, x, train: conv_encoder_apply(p, s, x, train=train)
    return lambda p, s, x, train: (mlp_apply(p, x, activation=activation), s)


class Session:
    """Model, loss and optimizer of one run; see :class:`xrisk.runner.engine.Session`.

    The models are pure functions of ``(params, batch-norm state)``
    (:mod:`xrisk.jax.models`); the step threads the BatchNorm running statistics of ResNet20
    and the conv encoder through ``jax.jit`` next to the optimizer and loss state. ``seed``
    is unused: nothing here draws random numbers (the weights come from numpy).
    """

    def __init__(self, splits: Splits, weights: dict[str, np.ndarray], *, model: str,
                 activation: str, dtype: str, seed: int) -> None:
        if model not in ("mlp", "resnet20", "conv_encoder"):
            raise ValueError(f"Session: model={model!r}; expected 'mlp', 'resnet20' or "
                             "'conv_encoder'. Fix: set model.name to one of those.")
        if dtype == "float64" and not jax.config.read("jax_enable_x64"):
            jax.config.update("jax_enable_x64", True)
        self.dtype, self.kind = dtype, model
        self.apply = _model_apply(model, activation)
        # an array, or rows read on request (multi-label CheXpert's images: LazyImages)
        self.lazy = not isinstance(splits.x_train, np.ndarray)
        self.x_train: Any = splits.x_train if self.lazy else jnp.asarray(splits.x_train)
        self.y_train = jnp.asarray(splits.y_train)
        # multi-label: labels (N, K) with NaN where missing, one logit per label
        self.multilabel = splits.y_train.ndim == 2
        self.num_samples = len(splits.y_train)
        self.num_labels = splits.y_train.shape[1] if self.multilabel else None
        self.carry: dict[str, Any] = {}
        self.set_weights(weights)
        apply = self.apply
        self.forward = jax.jit(lambda p, s, x: apply(p, s, x, False)[0])

    def start(self, phase: Phase) -> None:
        loss_fn = getattr(xr, phase.loss)(
            **loss_arguments(phase, self.num_samples, self.num_labels), dtype=self.dtype)
        optimizer = getattr(xr, phase.optimizer)(
            **({"loss_fn": loss_fn} if phase.min_max else {}), **phase.optimizer_options)
        to_scores = jax.nn.sigmoid if phase.probability else (lambda z: z)
        # multi-label cross-entropy: per label, the missing labels masked (optax's own)
        masked = self.multilabel and phase.loss == "CrossEntropyLoss"
        apply, multilabel = self.apply, self.multilabel
        x_train, y_train = self.x_train, self.y_train

        def objective(params: Any, state: Any, batch_norm: Any, index: jax.Array,
                      inputs: jax.Array) -> Any:
            out, batch_norm = apply(params["model"], batch_norm, inputs, True)
            logits = out if multilabel else out[:, 0]
            if masked:
                return _masked_cross_entropy(logits, y_train[index]), (state, batch_norm)
            loss, state = loss_fn.apply(state, to_scores(logits), y_train[index], index,
                                        params=params["loss"])
            return loss, (state, batch_norm)

        # Parameters, optimizer, loss and BatchNorm state are donated: updated in place.
        # Images read from disk per batch (LazyImages) enter the step as ``inputs``; arrays
        # are gathered inside it.
        @functools.partial(jax.jit, donate_argnums=(0, 1, 2, 3))
        def train_step(params: Any, opt_state: Any, state: Any, batch_norm: Any,
                       index: jax.Array, inputs: jax.Array | None = None) -> Any:
            (loss, (state, batch_norm)), grads = jax.value_and_grad(objective, has_aux=True)(
                params, state, batch_norm, index, x_train[index] if inputs is None else inputs)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, state, batch_norm, loss

        # The loss's trainable auxiliaries (empty for most losses) live in the parameters.
        params = {"model": self.carry["params"]["model"], "loss": loss_fn.init_params()}
        self.carry = {"params": params, "opt_state": optimizer.init(params),
                      "state": loss_fn.init(), "bn": self.carry["bn"]}
        self.loss_fn, self.optimizer, self.train_step = loss_fn, optimizer, train_step

    def epoch(self, batches: Iterable[np.ndarray]) -> Iterator[jax.Array]:
        carry = self.carry
        for index in batches:
            inputs = self.x_train[index] if self.lazy else None  # read from disk now
            (carry["params"], carry["opt_state"], carry["state"], carry["bn"],
             loss) = self.train_step(carry["params"], carry["opt_state"], carry["state"],
                                     carry["bn"], index.astype(np.int32), inputs)
            yield loss

    def predict(self, x: np.ndarray) -> np.ndarray:
        model, batch_norm = self.carry["params"]["model"], self.carry["bn"]
        # in chunks: a conv net's activations of a whole split are big
        outs = [np.asarray(self.forward(model, batch_norm, x[i:i + 1024]))
                for i in range(0, max(len(x), 1), 1024)]
        return np.concatenate([out if self.multilabel else out[:, 0] for out in outs])

    def weights(self) -> dict[str, np.ndarray]:
        model = self.carry["params"]["model"]
        if self.kind == "mlp":
            return layers_weights(mlp_layers(model))
        return merge_weights(model, self.carry["bn"])

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        model: Any
        batch_norm: dict[str, Any]
        if self.kind == "mlp":
            model, batch_norm = mlp_params(weights_layers(weights)), {}
        else:
            model, batch_norm = split_weights(weights)
        self.carry = {**self.carry, "params": {**self.carry.get("params", {}), "model": model},
                      "bn": batch_norm}

    def decay(self, factor: float, *, regularizer: bool) -> None:
        change = (self.optimizer.update_regularizer if regularizer
                  else self.optimizer.update_lr)
        self.carry["opt_state"] = change(self.carry["opt_state"], factor)

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        leaves = jax.tree.leaves(self.carry["opt_state"])
        arrays = {f"optimizer/{i}": np.array(leaf, copy=True) for i, leaf in enumerate(leaves)}
        exported = self.loss_fn.export_state(self.carry["state"], self.carry["params"]["loss"])
        arrays.update({f"loss/{k}": v for k, v in exported.items()})
        return arrays, {"optimizer_leaves": len(leaves)}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        leaves, treedef = jax.tree.flatten(self.carry["opt_state"])
        if meta["optimizer_leaves"] != len(leaves):
            raise ValueError(f"checkpoint: {meta['optimizer_leaves']} optimizer arrays; this "
                             f"optimizer has {len(leaves)}. Fix: resume with the recipe that "
                             "wrote the checkpoint.")
        state, loss_params = self.loss_fn.load_state(
            {k.partition("/")[2]: v for k, v in arrays.items() if k.startswith("loss/")})
        opt_state = jax.tree.unflatten(treedef, [
            jnp.asarray(arrays[f"optimizer/{i}"], dtype=leaf.dtype)
            for i, leaf in enumerate(leaves)])
        # the BatchNorm statistics (carry["bn"]) are the model's: restored with its weights
        self.carry = {**self.carry, "params": {**self.carry["params"], "loss": loss_params},
                      "opt_state": opt_state, "state": state}


class RankingSession:
    """A learning-to-rank run's model (NeuMF or an MLP over features), loss and optimizer;
    :class:`xrisk.runner.ranking.RankingTask` drives it with ``TriSampler`` batches, one
    ``jax.jit`` step each (parameters, optimizer and loss state donated)."""

    def __init__(self, data: Any, weights: dict[str, np.ndarray], *, activation: str,
                 dtype: str, seed: int) -> None:
        if dtype == "float64" and not jax.config.read("jax_enable_x64"):
            jax.config.update("jax_enable_x64", True)
        self.dtype, self.activation = dtype, activation
        self.neumf = data.model == "neumf"
        model = split_weights(weights)[0] if self.neumf else mlp_params(weights_layers(weights))
        self.features = None if self.neumf else jnp.asarray(
            np.ascontiguousarray(data.features, dtype=dtype))
        self.carry: dict[str, Any] = {"params": {"model": model}}
        self.score = jax.jit(self._score)

    def _score(self, model: Any, inputs: dict[str, Any]) -> jax.Array:
        if self.neumf:
            return neumf_apply(model, inputs["queries"], inputs["items"])
        if "rows" in inputs:
            return mlp_apply(model, self.features[inputs["rows"]],  # type: ignore[index]
                             activation=self.activation)[..., 0]
        return mlp_apply(model, inputs["features"], activation=self.activation)[:, 0]

    def start(self, phase: Phase, loss_options: dict[str, Any]) -> None:
        loss_fn = getattr(xr, phase.loss)(**loss_options, dtype=self.dtype)
        optimizer = getattr(xr, phase.optimizer)(**phase.optimizer_options)
        pointwise = phase.loss == "CrossEntropyLoss"
        score = self._score

        def objective(params: Any, state: Any, batch: dict[str, Any]) -> Any:
            scores = score(params["model"], batch["model"])
            if pointwise:
                scores = jnp.reshape(scores, (-1,))
            return loss_fn.apply(state, scores, **batch["loss"], params=params["loss"])

        @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
        def train_step(params: Any, opt_state: Any, state: Any, batch: Any) -> Any:
            (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
                params, state, batch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, state, loss

        params = {"model": self.carry["params"]["model"], "loss": loss_fn.init_params()}
        self.carry = {"params": params, "opt_state": optimizer.init(params),
                      "state": loss_fn.init()}
        self.loss_fn, self.optimizer, self.train_step = loss_fn, optimizer, train_step

    def epoch(self, batches: Iterable[dict[str, Any]]) -> Iterator[jax.Array]:
        carry = self.carry
        for batch in batches:
            carry["params"], carry["opt_state"], carry["state"], loss = self.train_step(
                carry["params"], carry["opt_state"], carry["state"], batch)
            yield loss

    def predict(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        given = {k: np.ascontiguousarray(v, dtype=self.dtype) if k == "features" else v
                 for k, v in inputs.items()}
        return np.array(self.score(self.carry["params"]["model"], given), copy=True)

    def weights(self) -> dict[str, np.ndarray]:
        model = self.carry["params"]["model"]
        return merge_weights(model) if self.neumf else layers_weights(mlp_layers(model))

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        model = split_weights(weights)[0] if self.neumf else mlp_params(weights_layers(weights))
        self.carry["params"] = {**self.carry["params"], "model": model}

    def decay(self, factor: float) -> None:
        self.carry["opt_state"] = self.optimizer.update_lr(self.carry["opt_state"], factor)

    state = Session.state
    load_state = Session.load_state


class ContrastiveSession:
    """A contrastive run's conv encoder (pure functions of ``(params, batch-norm state)``),
    loss and LARS; :class:`xrisk.runner.contrastive.ContrastiveTask` drives it. One
    ``jax.jit`` step: both SimCLR views of the batch (:func:`xrisk.jax.views.apply_views`,
    the view parameters come with the batch) through the encoder at once, the loss, LARS;
    parameters, optimizer, loss and BatchNorm state donated."""

    def __init__(self, images: np.ndarray, weights: dict[str, np.ndarray], *, dtype: str,
                 seed: int, size: tuple[int, int]) -> None:
        if dtype == "float64" and not jax.config.read("jax_enable_x64"):
            jax.config.update("jax_enable_x64", True)
        self.dtype, self.size = dtype, (int(size[0]), int(size[1]))
        params, batch_norm = split_weights(weights)
        self.carry: dict[str, Any] = {"params": {"model": params}, "bn": batch_norm}
        self.images = jnp.asarray(images)  # (N, H, W, C)
        self.encode = jax.jit(lambda p, s, x: conv_encoder_apply(p, s, x, train=False,
                                                                 features=True)[0])

    def start(self, phase: Phase, loss_options: dict[str, Any]) -> None:
        from .views import apply_views

        loss_fn = getattr(xr, phase.loss)(**loss_options, dtype=self.dtype)
        optimizer = getattr(xr, phase.optimizer)(**phase.optimizer_options)
        images, size, scale = self.images, self.size, phase.loss_scale
        channels = int(images.shape[-1])

        def view(x: jax.Array, params: dict[str, jax.Array]) -> jax.Array:
            # grayscale images pass the RGB pipeline as three equal channels
            rgb = jnp.tile(x, (1, 1, 1, 3)) if channels == 1 else x
            return apply_views(rgb, params, size=size)[..., :channels]

        def objective(params: Any, state: Any, batch_norm: Any, index: jax.Array,
                      first: Any, second: Any) -> Any:
            x = images[index]
            z, batch_norm = conv_encoder_apply(
                params["model"], batch_norm,
                jnp.concatenate([view(x, first), view(x, second)]), train=True)
            z1, z2 = jnp.split(z, 2)
            loss, state = loss_fn.apply(state, z1, z2, index, params=params["loss"])
            return loss * scale, (loss, state, batch_norm)

        @functools.partial(jax.jit, donate_argnums=(0, 1, 2, 3))
        def train_step(params: Any, opt_state: Any, state: Any, batch_norm: Any,
                       index: jax.Array, first: Any, second: Any) -> Any:
            (_, (loss, state, batch_norm)), grads = jax.value_and_grad(
                objective, has_aux=True)(params, state, batch_norm, index, first, second)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, state, batch_norm, loss

        params = {"model": self.carry["params"]["model"], "loss": loss_fn.init_params()}
        self.carry = {"params": params, "opt_state": optimizer.init(params),
                      "state": loss_fn.init(), "bn": self.carry["bn"]}
        self.loss_fn, self.optimizer, self.train_step = loss_fn, optimizer, train_step

    def epoch(self, batches: Iterable[dict[str, Any]]) -> Iterator[jax.Array]:
        carry = self.carry
        for batch in batches:
            first, second = batch["views"]
            (carry["params"], carry["opt_state"], carry["state"], carry["bn"],
             loss) = self.train_step(carry["params"], carry["opt_state"], carry["state"],
                                     carry["bn"], batch["index"].astype(np.int32), first,
                                     second)
            yield loss

    def features(self, x: np.ndarray) -> np.ndarray:
        """The encoder's features (N, widths[-1]), BatchNorm's running statistics."""
        model, batch_norm = self.carry["params"]["model"], self.carry["bn"]
        return np.concatenate([np.asarray(self.encode(model, batch_norm, x[i:i + 1024]))
                               for i in range(0, max(len(x), 1), 1024)])

    def weights(self) -> dict[str, np.ndarray]:
        return merge_weights(self.carry["params"]["model"], self.carry["bn"])

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        params, batch_norm = split_weights(weights)
        self.carry = {**self.carry, "params": {**self.carry["params"], "model": params},
                      "bn": batch_norm}

    def decay(self, factor: float) -> None:
        self.carry["opt_state"] = self.optimizer.update_lr(self.carry["opt_state"], factor)

    state = Session.state
    load_state = Session.load_state
