"""Multi-instance learning: bags of MNIST digits in PyTorch, TensorFlow and JAX (MIDAM).

The protocol of Ilse, Tomczak and Welling (ICML 2018, "Attention-based deep multiple instance
learning"): a bag is a set of MNIST digits whose size is drawn per bag from a normal
distribution (mean 10, standard deviation 2, at least 2), and it is positive when it holds a
9. Bags are built from MNIST-5k (shipped with xrisk): the digits are split 80/20 first, so no
test digit is ever seen in training. Only bag labels are used.

Training draws a fixed number of instances per bag (``BagSampler``: 4 by default, padding and
a mask for smaller bags), so every batch has the same shape. One MLP (784 -> 64 -> 2) scores
every instance with a score phi and an attention logit omega; it is trained in every framework,
from the same weights on the same batches, with:

- ``CE-max``: binary cross-entropy on the max of the sampled instances' phi, with ``Adam``
  (baseline);
- ``MIDAM-s``: ``MIDAM_softmax_pooling_loss`` (h = tau log mean exp(sigmoid(phi) / tau), tau
  = 0.1) with the ``MIDAM`` optimizer;
- ``MIDAM-a``: ``MIDAM_attention_pooling_loss`` (h = sigmoid of the softmax(omega)-weighted
  mean of phi) with ``MIDAM``.

The MIDAM losses keep a moving average of each bag's pooled statistics (state keyed by the
bag), whose weight gamma is halved at 50 % and 75 % of the epochs (``update_smoothing``).
Test bags are scored from all their instances with the method's own pooling; the script prints
the test AUROC::

    python examples/multi_instance.py
    python examples/multi_instance.py --frameworks jax --methods MIDAM-a --epochs 10

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _runner as runner  # noqa: E402  (the examples' shared engine, next to this file)
from _runner import Trainer  # noqa: E402

from xrisk.datasets import load_mnist_5k  # noqa: E402
from xrisk.metrics import auroc  # noqa: E402
from xrisk.samplers import BagSampler  # noqa: E402

METRICS = ("AUROC",)
TARGET = 9  # a bag is positive when it holds this digit (Ilse et al.)
TAU = 0.1  # temperature of the softmax pooling
MIDAM = {"learning_rate": 0.1, "momentum": 0.1, "weight_decay": 1e-4}
#: method -> (xrisk loss or None for CE on max pooling, loss options, optimizer, options)
METHODS: dict[str, tuple[str | None, dict[str, Any], str, dict[str, Any]]] = {
    "CE-max": (None, {}, "Adam", {"learning_rate": 1e-3}),
    "MIDAM-s": ("MIDAM_softmax_pooling_loss", {"margin": 1.0, "tau": TAU, "gamma": 0.9},
                "MIDAM", MIDAM),
    "MIDAM-a": ("MIDAM_attention_pooling_loss", {"margin": 1.0, "gamma": 0.9}, "MIDAM", MIDAM),
}


# -- data ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bags:
    """Bags as one flat instance array: bag b holds ``x[offsets[b] : offsets[b] + sizes[b]]``."""

    x: np.ndarray  #: (num_instances, 784) float32
    sizes: np.ndarray  #: (num_bags,) int64
    labels: np.ndarray  #: (num_bags,) float32, 1.0 when the bag holds a TARGET digit

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes)[:-1]])


def make_bags(images: np.ndarray, digits: np.ndarray, num_bags: int, mean: float, std: float,
              rng: np.random.Generator) -> Bags:
    """``num_bags`` bags of sizes ~ round(N(mean, std)) (at least 2), digits drawn without
    replacement within a bag."""
    sizes = np.maximum(np.rint(rng.normal(mean, std, num_bags)), 2).astype(np.int64)
    sizes = np.minimum(sizes, len(digits))
    members = [rng.choice(len(digits), size, replace=False) for size in sizes]
    flat = np.concatenate(members)
    labels = np.array([float((digits[m] == TARGET).any()) for m in members], np.float32)
    return Bags(images[flat].reshape(len(flat), -1).astype(np.float32), sizes, labels)


def load_data(args: argparse.Namespace) -> tuple[Bags, Bags]:
    """Training and test bags from disjoint 80/20 splits of MNIST-5k's digits."""
    images, digits = load_mnist_5k()
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(digits))
    cut = (4 * len(digits)) // 5
    train, test = order[:cut], order[cut:]
    return (make_bags(images[train], digits[train], args.train_bags, args.mean_size,
                      args.std_size, rng),
            make_bags(images[test], digits[test], args.test_bags, args.mean_size,
                      args.std_size, rng))


def pool(method: str, outputs: np.ndarray, bags: Bags) -> np.ndarray:
    """Bag scores from every instance's (phi, omega), with the method's pooling."""
    bag_of = np.repeat(np.arange(len(bags.sizes)), bags.sizes)
    phi, omega = outputs[:, 0].astype(np.float64), outputs[:, 1].astype(np.float64)
    scores = np.empty(len(bags.sizes))
    for b in range(len(bags.sizes)):
        p, w = phi[bag_of == b], omega[bag_of == b]
        if method == "CE-max":
            scores[b] = p.max()
        elif method == "MIDAM-s":
            z = 1 / (1 + np.exp(-p)) / TAU
            scores[b] = TAU * (z.max() + np.log(np.mean(np.exp(z - z.max()))))
        else:
            weights = np.exp(w - w.max())
            scores[b] = 1 / (1 + np.exp(-(weights @ p) / weights.sum()))
    return scores


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(method: str, train: Bags, test: Bags, layers: runner.Layers,
                  epochs: int) -> Trainer:
    import torch
    import torch.nn.functional as F  # noqa: N812  (torch's own convention)

    import xrisk.torch as xr

    loss_name, loss_options, optimizer_name, optimizer_options = METHODS[method]
    model = runner.torch_mlp(layers)
    x, y = torch.from_numpy(train.x), torch.from_numpy(train.labels)
    if loss_name is None:
        loss_fn = None
        optimizer = getattr(xr, optimizer_name)(model.parameters(), **optimizer_options)
    else:
        loss_fn = getattr(xr, loss_name)(len(train.sizes), **loss_options)
        optimizer = getattr(xr, optimizer_name)(model.parameters(), loss_fn, **optimizer_options)

    def step(batch: Any) -> Any:
        bags, instances, mask = (torch.from_numpy(part) for part in batch)
        outputs = model(x[instances])  # (B, K, 2): phi and omega of every sampled instance
        phi, omega, labels = outputs[..., 0], outputs[..., 1], y[bags]
        if loss_fn is None:
            pooled = phi.masked_fill(mask == 0, float("-inf")).amax(dim=1)
            loss = F.binary_cross_entropy_with_logits(pooled, labels)
        elif method == "MIDAM-s":
            loss = loss_fn(torch.sigmoid(phi), labels, bags, mask)
        else:
            loss = loss_fn(phi, omega, labels, bags, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def predict() -> np.ndarray:
        with torch.no_grad():
            return pool(method, model(torch.from_numpy(test.x)).numpy(), test)

    def start_epoch(epoch: int) -> None:
        if loss_fn is not None and epoch in smoothing_epochs(epochs):
            loss_fn.update_smoothing(2)

    return Trainer(step, predict, start_epoch)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(method: str, train: Bags, test: Bags, layers: runner.Layers,
                       epochs: int) -> Trainer:
    import tensorflow as tf

    import xrisk.tensorflow as xr

    loss_name, loss_options, optimizer_name, optimizer_options = METHODS[method]
    model = runner.keras_mlp(layers)
    x, y = tf.constant(train.x), tf.constant(train.labels)
    variables = list(model.trainable_variables)
    if loss_name is None:
        loss_fn = None
        optimizer = getattr(xr, optimizer_name)(variables, **optimizer_options)
    else:
        loss_fn = getattr(xr, loss_name)(len(train.sizes), **loss_options)
        variables += loss_fn.trainable_variables  # a, b, alpha train with the model
        optimizer = getattr(xr, optimizer_name)(variables, loss_fn, **optimizer_options)

    @tf.function
    def train_step(bags: tf.Tensor, instances: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            # Keras's Dense model takes (batch, features): score the B*K instances flat.
            flat = model(tf.gather(x, tf.reshape(instances, [-1])), training=True)
            outputs = tf.reshape(flat, [*instances.shape, 2])  # (B, K, 2)
            phi, omega, labels = outputs[..., 0], outputs[..., 1], tf.gather(y, bags)
            if loss_fn is None:
                pooled = tf.reduce_max(tf.where(mask > 0, phi, float("-inf")), axis=1)
                loss = tf.reduce_mean(
                    tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=pooled))
            elif method == "MIDAM-s":
                loss = loss_fn(tf.sigmoid(phi), labels, bags, mask)
            else:
                loss = loss_fn(phi, omega, labels, bags, mask)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(batch: Any) -> Any:
        return train_step(*(tf.constant(part) for part in batch))

    def predict() -> np.ndarray:
        return pool(method, model(test.x, training=False).numpy(), test)

    def start_epoch(epoch: int) -> None:
        if loss_fn is not None and epoch in smoothing_epochs(epochs):
            loss_fn.update_smoothing(2)

    return Trainer(step, predict, start_epoch)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(method: str, train: Bags, test: Bags, layers: runner.Layers,
                epochs: int) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    loss_name, loss_options, optimizer_name, optimizer_options = METHODS[method]
    x, y = jnp.asarray(train.x), jnp.asarray(train.labels)
    params: dict[str, Any] = {"model": [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers]}
    if loss_name is None:
        loss_fn = None
        optimizer = getattr(xr, optimizer_name)(**optimizer_options)
    else:
        loss_fn = getattr(xr, loss_name)(len(train.sizes), **loss_options)
        params["loss"] = loss_fn.init_params()  # a, b, alpha
        optimizer = getattr(xr, optimizer_name)(loss_fn=loss_fn, **optimizer_options)

    def objective(params: Any, state: Any, bags: Any, instances: Any, mask: Any) -> Any:
        outputs = runner.jax_mlp(params["model"], x[instances])  # (B, K, 2)
        phi, omega, labels = outputs[..., 0], outputs[..., 1], y[bags]
        if loss_fn is None:
            pooled = jnp.max(jnp.where(mask > 0, phi, -jnp.inf), axis=1)
            return jnp.mean(optax.sigmoid_binary_cross_entropy(pooled, labels)), state
        inputs = (jax.nn.sigmoid(phi),) if method == "MIDAM-s" else (phi, omega)
        return loss_fn.apply(state, *inputs, labels, bags, mask, params=params["loss"])

    # Parameters, optimizer state and loss state are donated: XLA updates them in place.
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(params: Any, opt_state: Any, state: Any, bags: jax.Array,
                   instances: jax.Array, mask: jax.Array) -> Any:
        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
            params, state, bags, instances, mask)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    carry = {"params": params, "opt_state": optimizer.init(params),
             "state": None if loss_fn is None else loss_fn.init()}

    def step(batch: Any) -> Any:
        carry["params"], carry["opt_state"], carry["state"], loss = train_step(
            carry["params"], carry["opt_state"], carry["state"],
            *(part.astype(np.int32) for part in batch))
        return loss

    def predict() -> np.ndarray:
        outputs = runner.jax_mlp(carry["params"]["model"], jnp.asarray(test.x))
        return pool(method, np.asarray(outputs), test)

    def start_epoch(epoch: int) -> None:
        if loss_fn is not None and epoch in smoothing_epochs(epochs):
            carry["state"] = loss_fn.update_smoothing(carry["state"], 2)

    return Trainer(step, predict, start_epoch)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


def smoothing_epochs(epochs: int) -> set[int]:
    """Epochs at whose start MIDAM's gamma is halved (50 % and 75 %, LibAUC's tutorial)."""
    return {epochs // 2, (3 * epochs) // 4} - {0}


# -- command line ---------------------------------------------------------------------------
def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--train-bags", type=int, default=500)
    parser.add_argument("--test-bags", type=int, default=300)
    parser.add_argument("--mean-size", type=float, default=10.0, help="mean bag size")
    parser.add_argument("--std-size", type=float, default=2.0, help="std of the bag size")
    parser.add_argument("--instances", type=int, default=4,
                        help="instances drawn per bag in a training batch")
    parser.add_argument("--batch-size", type=int, default=16, help="bags per batch")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units of the MLP")


def _check(args: argparse.Namespace) -> str | None:
    for name in ("train_bags", "test_bags", "instances", "batch_size", "hidden"):
        problem = runner.positive(name.replace("_", "-"), getattr(args, name))
        if problem:
            return problem
    if not 2 <= args.mean_size <= 100:
        return f"--mean-size: got {args.mean_size}; expected a number in [2, 100]"
    if args.std_size < 0:
        return f"--std-size: got {args.std_size}; expected a number >= 0"
    if args.batch_size > args.train_bags:
        return (f"--batch-size: got {args.batch_size} bags per batch but --train-bags is "
                f"{args.train_bags}; expected batch size <= train bags")
    return None


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], runner.Outcome]:
    """Train every requested framework x method; print and return the test results."""
    args = runner.parse_args(argv, description=__doc__.partition("\n")[0], methods=METHODS,
                             epochs=20, add_options=_options, check=_check)
    train, test = load_data(args)
    for name, bags in (("training", train), ("test", test)):
        if bags.labels.min() == bags.labels.max():
            raise SystemExit(f"multi_instance.py: the {name} bags are all of one class; use "
                             "more bags or another --seed.")
    print(f"MNIST bags (positive: holds a {TARGET}): train {len(train.sizes)} bags "
          f"({train.labels.mean():.1%} positive, {len(train.x)} digits), test "
          f"{len(test.sizes)} bags ({test.labels.mean():.1%} positive); bag size "
          f"{train.sizes.mean():.1f} on average, {args.instances} drawn per bag", flush=True)
    layers = runner.initial_mlp([train.x.shape[1], args.hidden, 2], args.seed)
    return runner.run(
        args,
        trainer=lambda framework, name: TRAINERS[framework](name, train, test, layers,
                                                            args.epochs),
        batches=lambda name: BagSampler(train.sizes, args.batch_size, args.instances,
                                        seed=args.seed),
        evaluate=lambda scores: {"AUROC": float(auroc(test.labels, scores))},
        metrics=METRICS)


if __name__ == "__main__":
    main()
