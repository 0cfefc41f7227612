"""The runner's TensorFlow session: a Keras model (an MLP, a reference conv model or
``keras.applications``' DenseNet121) trained by a ``tf.function`` step.

:func:`xrisk.runner.engine.run_seed` drives it; :meth:`Session.start` builds the step and
:meth:`Session.epoch` is the loop, as a user would write them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import tensorflow as tf

import xrisk.tensorflow as xr
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


def _masked_cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Binary cross-entropy of logits (B, K) against labels with NaN where missing: the mean
    over the observed entries."""
    observed = tf.logical_not(tf.math.is_nan(labels))
    per_entry = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.where(observed, labels, tf.zeros_like(labels)), logits=logits)
    weight = tf.cast(observed, logits.dtype)
    return tf.reduce_sum(per_entry * weight) / tf.maximum(tf.reduce_sum(weight), 1)


class Session:
    """Model, loss and optimizer of one run; see :class:`xrisk.runner.engine.Session`.

    ``seed`` initialises a backbone (Keras's initialisation,
    :func:`xrisk.tensorflow.models.backbone`); the reference models' weights come from numpy,
    and nothing else here draws random numbers.
    """

    def __init__(self, splits: Splits, weights: dict[str, np.ndarray], *, model: str,
                 activation: str, dtype: str, seed: int) -> None:
        self.dtype, self.kind = dtype, model
        # multi-label: labels (N, K) with NaN where missing, one logit per label
        self.multilabel = splits.y_train.ndim == 2
        self.num_samples = len(splits.y_train)
        self.num_labels = splits.y_train.shape[1] if self.multilabel else None
        # a backbone takes 3 channels: gray images are repeated to them batch by batch
        self.repeat_gray = model in BACKBONES and splits.x_train.shape[-1] == 1
        # prediction in chunks: a conv net's activations of a whole split are big
        self.chunk = 64 if model in BACKBONES else 1024
        if model == "mlp":
            self.model = mlp(weights_layers(weights), activation=activation)
        elif model in ("resnet20", "conv_encoder"):  # images (N, H, W, C), Keras's layout
            build = resnet20 if model == "resnet20" else conv_encoder
            self.model = build(weights, image_size=splits.x_train.shape[1:3])
        elif model in BACKBONES:  # Keras's initialisation, drawn from the run's seed
            height, width = splits.x_train.shape[1:3]
            self.model = backbone(model, self.num_labels or 1, input_shape=(height, width, 3),
                                  seed=seed, dtype=dtype)
            if weights:
                load_weights(self.model, weights)
        else:
            raise ValueError(f"Session: model={model!r}; expected 'mlp', 'resnet20', "
                             f"'conv_encoder' or 'densenet121'. Fix: set model.name to one of "
                             "those.")
        # an array, or rows read on request (multi-label CheXpert's images: LazyImages)
        self.lazy = not isinstance(splits.x_train, np.ndarray)
        self.x_train: Any = splits.x_train if self.lazy else tf.constant(splits.x_train)
        self.y_train = tf.constant(splits.y_train)

    def _forward(self, inputs: Any, training: bool) -> Any:
        """The model's output; gray images reach a backbone as three equal channels."""
        if self.repeat_gray:
            inputs = tf.tile(inputs, [1, 1, 1, 3])
        return self.model(inputs, training=training)

    def start(self, phase: Phase) -> None:
        loss_fn = getattr(xr, phase.loss)(
            **loss_arguments(phase, self.num_samples, self.num_labels), dtype=self.dtype)
        # multi-label cross-entropy: per label, the missing labels masked (TensorFlow's own)
        masked, multilabel = self.multilabel and phase.loss == "CrossEntropyLoss", self.multilabel
        # The loss's trainable auxiliaries (AUC-M's a, b) are trained with the model.
        variables = [*self.model.trainable_variables, *loss_fn.trainable_variables]
        optimizer = getattr(xr, phase.optimizer)(
            variables, **({"loss_fn": loss_fn} if phase.min_max else {}),
            **phase.optimizer_options)
        to_scores = tf.sigmoid if phase.probability else (lambda z: z)
        forward, x_train, y_train = self._forward, self.x_train, self.y_train

        def step(inputs: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                out = forward(inputs, training=True)
                logits = out if multilabel else out[:, 0]
                labels = tf.gather(y_train, index)
                loss = (_masked_cross_entropy(logits, labels) if masked
                        else loss_fn(to_scores(logits), labels, index))
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss

        @tf.function
        def train_step(index: tf.Tensor) -> tf.Tensor:
            return step(tf.gather(x_train, index), index)

        # images read from disk per batch enter the step as an input
        read_step = tf.function(step)
        self.loss_fn, self.optimizer = loss_fn, optimizer
        self.train_step, self.read_step = train_step, read_step

    def epoch(self, batches: Iterable[np.ndarray]) -> Iterator[tf.Tensor]:
        for index in batches:
            if self.lazy:
                yield self.read_step(tf.constant(self.x_train[index]), tf.constant(index))
            else:
                yield self.train_step(tf.constant(index))

    def predict(self, x: np.ndarray) -> np.ndarray:
        # in chunks: a conv net's activations of a whole split are big
        outs = [np.array(self._forward(x[i:i + self.chunk], training=False))
                for i in range(0, max(len(x), 1), self.chunk)]
        return np.concatenate([out if self.multilabel else out[:, 0] for out in outs])

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
        arrays = {f"optimizer/{i}": np.array(v.numpy(), copy=True)
                  for i, v in enumerate(self.optimizer.variables)}
        arrays.update({f"loss/{k}": v for k, v in self.loss_fn.export_state().items()})
        return arrays, {"optimizer_variables": len(self.optimizer.variables)}

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        variables = self.optimizer.variables
        if meta["optimizer_variables"] != len(variables):
            raise ValueError(f"checkpoint: {meta['optimizer_variables']} optimizer variables; "
                             f"this optimizer has {len(variables)}. Fix: resume with the "
                             "recipe that wrote the checkpoint.")
        self.loss_fn.load_state({k.partition("/")[2]: v for k, v in arrays.items()
                                 if k.startswith("loss/")})
        for i, variable in enumerate(variables):
            variable.assign(arrays[f"optimizer/{i}"])


class RankingSession:
    """A learning-to-rank run's model (NeuMF or an MLP over features), loss and optimizer;
    :class:`xrisk.runner.ranking.RankingTask` drives it with ``TriSampler`` batches, one
    ``tf.function`` step each."""

    def __init__(self, data: Any, weights: dict[str, np.ndarray], *, activation: str,
                 dtype: str, seed: int) -> None:
        self.dtype = dtype
        self.neumf = data.model == "neumf"
        tf.random.set_seed(seed)
        if self.neumf:
            self.model = neumf(weights)
            self.features = tf.zeros((0,), dtype)
        else:
            self.model = mlp(weights_layers(weights), activation=activation)
            self.features = tf.constant(np.ascontiguousarray(data.features, dtype=dtype))

    def _scores(self, inputs: dict[str, Any], training: bool) -> tf.Tensor:
        if self.neumf:
            return self.model((inputs["queries"], inputs["items"]), training=training)
        if "rows" in inputs:  # (Q, C): the MLP takes (batch, features), so flatten
            rows = inputs["rows"]
            flat = self.model(tf.gather(self.features, tf.reshape(rows, (-1,))),
                              training=training)
            return tf.reshape(flat, tf.shape(rows))
        return self.model(inputs["features"], training=training)[:, 0]

    def start(self, phase: Phase, loss_options: dict[str, Any]) -> None:
        loss_fn = getattr(xr, phase.loss)(**loss_options, dtype=self.dtype)
        variables = list(self.model.trainable_variables)
        optimizer = getattr(xr, phase.optimizer)(variables, **phase.optimizer_options)
        pointwise = phase.loss == "CrossEntropyLoss"
        scores_of = self._scores

        @tf.function
        def train_step(batch: dict[str, Any]) -> tf.Tensor:
            with tf.GradientTape() as tape:
                scores = scores_of(batch["model"], training=True)
                if pointwise:
                    scores = tf.reshape(scores, (-1,))
                loss = loss_fn(scores, **batch["loss"])
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss

        self.loss_fn, self.optimizer, self.train_step = loss_fn, optimizer, train_step

    def epoch(self, batches: Iterable[dict[str, Any]]) -> Iterator[tf.Tensor]:
        for batch in batches:
            yield self.train_step(tf.nest.map_structure(tf.constant, batch))

    def predict(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        given = {k: tf.constant(np.ascontiguousarray(v, dtype=self.dtype)
                                if k == "features" else v) for k, v in inputs.items()}
        return np.array(self._scores(given, training=False), copy=True)

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
    """A contrastive run's Keras conv encoder (with its projection head), loss and LARS;
    :class:`xrisk.runner.contrastive.ContrastiveTask` drives it. The step is one
    ``tf.function``: both SimCLR views of the batch (graph ops on the whole batch, the view
    parameters come with it) through the encoder at once, ``loss_fn(z1, z2, index)``."""

    def __init__(self, images: np.ndarray, weights: dict[str, np.ndarray], *, dtype: str,
                 seed: int, size: tuple[int, int]) -> None:
        import keras

        self.dtype, self.size = dtype, (int(size[0]), int(size[1]))
        self.model = conv_encoder(weights)
        self.encoder = keras.Model(self.model.input, self.model.get_layer("features").output)
        self.images = tf.constant(images)  # (N, H, W, C)

    def start(self, phase: Phase, loss_options: dict[str, Any]) -> None:
        from xrisk.datasets.views import apply_simclr_views

        from .views import namespace

        loss_fn = getattr(xr, phase.loss)(**loss_options, dtype=self.dtype)
        variables = list(self.model.trainable_variables)
        optimizer = getattr(xr, phase.optimizer)(variables, **phase.optimizer_options)
        model, images, size, scale = self.model, self.images, self.size, phase.loss_scale
        channels = int(images.shape[-1])

        def view(x: tf.Tensor, params: dict[str, tf.Tensor]) -> tf.Tensor:
            # grayscale images pass the RGB pipeline as three equal channels
            rgb = tf.tile(x, [1, 1, 1, 3]) if channels == 1 else x
            return apply_simclr_views(namespace, rgb, params, size)[..., :channels]

        @tf.function
        def train_step(index: tf.Tensor, first: dict[str, tf.Tensor],
                       second: dict[str, tf.Tensor]) -> tf.Tensor:
            x = tf.gather(images, index)
            with tf.GradientTape() as tape:
                z1, z2 = tf.split(model(tf.concat([view(x, first), view(x, second)], 0),
                                        training=True), 2)
                loss = loss_fn(z1, z2, index)
                objective = loss * scale
            grads = tape.gradient(objective, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss

        self.loss_fn, self.optimizer, self.train_step = loss_fn, optimizer, train_step

    def epoch(self, batches: Iterable[dict[str, Any]]) -> Iterator[tf.Tensor]:
        for batch in batches:
            first, second = ({k: tf.constant(v) for k, v in p.items()} for p in batch["views"])
            yield self.train_step(tf.constant(batch["index"]), first, second)

    def features(self, x: np.ndarray) -> np.ndarray:
        """The encoder's features (N, widths[-1]), BatchNorm's running statistics."""
        return np.concatenate([np.array(self.encoder(x[i:i + 1024], training=False))
                               for i in range(0, max(len(x), 1), 1024)])

    def weights(self) -> dict[str, np.ndarray]:
        return model_weights(self.model)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        load_weights(self.model, weights)

    def decay(self, factor: float) -> None:
        self.optimizer.update_lr(factor)

    state = Session.state
    load_state = Session.load_state
