"""Extreme classification: SCENT and SOX against softmax CE, PyTorch, TensorFlow and JAX.

MNIST digits as a 10-class problem.

``EntLossClassification`` writes the cross-entropy of sample i as the log of a mean over
classes, log((1/C) sum_k exp(z_ik - z_iy)) + log C, and tracks that log per sample (state
keyed by the dataset index), so that a batch that scores only a sample of the classes still
gives a good gradient estimate; that is what makes it fit for very many classes.
Here every batch scores all 10 classes, a small, checkable stand-in: with the state exact the
gradient is the cross-entropy's. The MLP (784 -> 128 -> 10) is trained in every framework,
from the same weights on the same batches, with ``SGD`` (momentum 0.9) and:

- ``CE``: the framework's softmax cross-entropy (baseline);
- ``SCENT``: ``EntLossClassification(mode="SCENT")``, a proximal step on each sample's log
  estimate;
- ``SOX``: ``EntLossClassification(mode="SOX")``, a moving average of it, whose weight gamma
  follows LibAUC's cosine schedule (``adjust_gamma`` every epoch).

The data set is MNIST-5k (shipped with xrisk, 500 digits per class), split 80/20 stratified;
the script prints the test accuracy::

    python examples/extreme_classification.py
    python examples/extreme_classification.py --frameworks torch --methods CE,SOX --epochs 5

The numbers are measured, not asserted.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _runner as runner  # noqa: E402  (the examples' shared engine, next to this file)
from _runner import Trainer  # noqa: E402

from xrisk.datasets import load_mnist_5k  # noqa: E402
from xrisk.samplers import RandomSampler  # noqa: E402

METRICS = ("accuracy",)
NUM_CLASSES = 10
SGD = {"learning_rate": 0.05, "momentum": 0.9}
#: method -> options of EntLossClassification (None: the framework's cross-entropy)
METHODS: dict[str, dict[str, Any] | None] = {
    "CE": None,
    "SCENT": {"mode": "SCENT", "alpha": 10.0},
    "SOX": {"mode": "SOX", "gamma": 0.9},
}


# -- data ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Data:
    """Pixels in [0, 1] as float32 (N, 784) and class ids as int64 (N,)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_data(samples: int | None, seed: int) -> Data:
    """MNIST-5k (or a stratified subset of ``samples`` digits), split 80/20 stratified."""
    images, digits = load_mnist_5k()
    x = images.reshape(len(digits), -1).astype(np.float32)
    if samples is not None and samples < len(digits):
        x, _, digits, _ = train_test_split(x, digits, train_size=samples, stratify=digits,
                                           random_state=seed)
    x_train, x_test, y_train, y_test = train_test_split(x, digits, test_size=0.2,
                                                        stratify=digits, random_state=seed)
    return Data(x_train, y_train, x_test, y_test)


def accuracy(labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    return {"accuracy": float(np.mean(np.argmax(logits, axis=1) == labels))}


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(method: str, data: Data, layers: runner.Layers, epochs: int) -> Trainer:
    import torch
    import torch.nn.functional as F  # noqa: N812  (torch's own convention)

    import xrisk.torch as xr

    model = runner.torch_mlp(layers)
    x, y = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    options = METHODS[method]
    loss_fn = None if options is None else xr.EntLossClassification(len(y), **options)
    optimizer = xr.SGD(model.parameters(), **SGD)

    def step(index: np.ndarray) -> Any:
        index_t = torch.from_numpy(index)
        logits, labels = model(x[index_t]), y[index_t]
        if loss_fn is None:
            loss = F.cross_entropy(logits, labels)
        else:  # z_k - z_y: each sample's logits minus its label's
            loss = loss_fn(logits - logits.gather(1, labels[:, None]), index_t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def predict() -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(data.x_test)).numpy()

    def start_epoch(epoch: int) -> None:
        if loss_fn is not None:
            loss_fn.adjust_gamma(epoch, epochs)  # SOX's schedule; SCENT ignores it

    return Trainer(step, predict, start_epoch)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(method: str, data: Data, layers: runner.Layers, epochs: int) -> Trainer:
    import tensorflow as tf

    import xrisk.tensorflow as xr

    model = runner.keras_mlp(layers)
    x, y = tf.constant(data.x_train), tf.constant(data.y_train)
    options = METHODS[method]
    loss_fn = None if options is None else xr.EntLossClassification(len(data.y_train), **options)
    variables = list(model.trainable_variables)
    optimizer = xr.SGD(variables, **SGD)

    @tf.function
    def train_step(index: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits, labels = model(tf.gather(x, index), training=True), tf.gather(y, index)
            if loss_fn is None:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=logits))
            else:  # z_k - z_y: each sample's logits minus its label's
                loss = loss_fn(logits - tf.gather(logits, labels, batch_dims=1)[:, None], index)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(index: np.ndarray) -> Any:
        return train_step(tf.constant(index))

    def predict() -> np.ndarray:
        return model(data.x_test, training=False).numpy()

    def start_epoch(epoch: int) -> None:
        if loss_fn is not None:
            loss_fn.adjust_gamma(epoch, epochs)

    return Trainer(step, predict, start_epoch)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(method: str, data: Data, layers: runner.Layers, epochs: int) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    x, y = jnp.asarray(data.x_train), jnp.asarray(data.y_train.astype(np.int32))
    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers]
    options = METHODS[method]
    loss_fn = None if options is None else xr.EntLossClassification(len(data.y_train), **options)
    optimizer = xr.SGD(**SGD)

    def objective(params: Any, state: Any, index: Any) -> Any:
        logits, labels = runner.jax_mlp(params, x[index]), y[index]
        if loss_fn is None:
            return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels)), \
                state
        label_logit = jnp.take_along_axis(logits, labels[:, None], axis=1)
        return loss_fn.apply(state, logits - label_logit, index)

    # Parameters, optimizer state and loss state are donated: XLA updates them in place.
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(params: Any, opt_state: Any, state: Any, index: jax.Array) -> Any:
        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(params, state, index)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    carry = {"params": params, "opt_state": optimizer.init(params),
             "state": None if loss_fn is None else loss_fn.init()}

    def step(index: np.ndarray) -> Any:
        carry["params"], carry["opt_state"], carry["state"], loss = train_step(
            carry["params"], carry["opt_state"], carry["state"], index.astype(np.int32))
        return loss

    def predict() -> np.ndarray:
        return np.asarray(runner.jax_mlp(carry["params"], jnp.asarray(data.x_test)))

    def start_epoch(epoch: int) -> None:
        if loss_fn is not None:
            carry["state"] = loss_fn.adjust_gamma(carry["state"], epoch, epochs)

    return Trainer(step, predict, start_epoch)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


# -- command line ---------------------------------------------------------------------------
def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, default=None,
                        help="use a stratified subset of this many digits (default: all 5,000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128, help="hidden units of the MLP")


def _check(args: argparse.Namespace) -> str | None:
    for name in ("batch_size", "hidden"):
        problem = runner.positive(name.replace("_", "-"), getattr(args, name))
        if problem:
            return problem
    if args.samples is not None and not 100 <= args.samples <= 5000:
        return f"--samples: got {args.samples}; expected an integer in [100, 5000]"
    train_size = (4 * (args.samples or 5000)) // 5
    if args.batch_size > train_size:
        return (f"--batch-size: got {args.batch_size}; expected at most the training split "
                f"({train_size} digits)")
    return None


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], runner.Outcome]:
    """Train every requested framework x method; print and return the test results."""
    args = runner.parse_args(argv, description=__doc__.partition("\n")[0], methods=METHODS,
                             epochs=10, add_options=_options, check=_check)
    data = load_data(args.samples, args.seed)
    print(f"MNIST-5k, {NUM_CLASSES} classes: train {len(data.y_train)} digits, test "
          f"{len(data.y_test)}", flush=True)
    layers = runner.initial_mlp([data.x_train.shape[1], args.hidden, NUM_CLASSES], args.seed)
    return runner.run(args,
                      trainer=lambda framework, name: TRAINERS[framework](
                          name, data, layers, args.epochs),
                      batches=lambda name: RandomSampler(len(data.y_train), args.batch_size,
                                                         seed=args.seed),
                      evaluate=lambda logits: accuracy(data.y_test, logits), metrics=METRICS)


if __name__ == "__main__":
    main()
