"""The runner's TensorFlow session: a Keras MLP trained by a ``tf.function`` step.

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

from .models import mlp, mlp_layers, set_mlp_layers

__all__ = ["Session"]


class Session:
    """Model, loss and optimizer of one run; see :class:`xrisk.runner.engine.Session`.

    ``seed`` is unused: nothing here draws random numbers (the weights come from numpy).
    """

    def __init__(self, splits: Splits, layers: list[tuple[np.ndarray, np.ndarray]], *,
                 activation: str, dtype: str, seed: int) -> None:
        self.dtype = dtype
        self.model = mlp(layers, activation=activation)
        self.x_train = tf.constant(splits.x_train)
        self.y_train = tf.constant(splits.y_train)
        self.num_samples = splits.y_train.size

    def start(self, phase: Phase) -> None:
        loss_fn = getattr(xr, phase.loss)(**loss_arguments(phase, self.num_samples),
                                          dtype=self.dtype)
        # The loss's trainable auxiliaries (AUC-M's a, b) are trained with the model.
        variables = [*self.model.trainable_variables, *loss_fn.trainable_variables]
        optimizer = getattr(xr, phase.optimizer)(
            variables, **({"loss_fn": loss_fn} if phase.min_max else {}),
            **phase.optimizer_options)
        to_scores = tf.sigmoid if phase.probability else (lambda z: z)
        model, x_train, y_train = self.model, self.x_train, self.y_train

        @tf.function
        def train_step(index: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = model(tf.gather(x_train, index), training=True)[:, 0]
                loss = loss_fn(to_scores(logits), tf.gather(y_train, index), index)
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss

        self.loss_fn, self.optimizer, self.train_step = loss_fn, optimizer, train_step

    def epoch(self, batches: Iterable[np.ndarray]) -> Iterator[tf.Tensor]:
        for index in batches:
            yield self.train_step(tf.constant(index))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.array(self.model(x, training=False)[:, 0], copy=True)

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
