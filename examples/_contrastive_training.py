"""The training engine of ``contrastive.py``: self-supervised features of MNIST-5k digits.

An example names its methods (:class:`Method`: which xrisk contrastive loss, with which
options, on which inputs); this module loads the data (MNIST-5k from :mod:`xrisk.datasets`,
a fixed stratified train / held-out split), builds the two augmented views of every training
image with :func:`xrisk.datasets.contrastive_views` (a pure function of seed, epoch and
sample, so every framework and method sees the same views), builds the same small conv
encoder with the same initial weights in PyTorch, TensorFlow and JAX, trains it with the
xrisk loss and :class:`xrisk.LARS`, and scores the frozen representation with a linear
probe (scikit-learn's logistic regression fitted on the training split, accuracy on the
held-out split).

Each framework section is written as a user would write it: an ``nn.Module`` loop in
PyTorch, a ``tf.function`` train step in TensorFlow, a ``jax.jit`` step with the parameters,
the optimizer state and the loss state donated in JAX. The xrisk calls are the same in all
three: ``xr.<Loss>(...)``, ``xr.LARS(...)``, ``loss_fn(z1, z2, index)`` (JAX:
``loss_fn.apply(state, z1, z2, index)``).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import _training  # the examples' progress display and framework imports (next to this file)
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from xrisk.datasets import contrastive_views, load_mnist_5k
from xrisk.samplers import RandomSampler

FRAMEWORKS = _training.FRAMEWORKS
BATCH_SIZE = 64
TEST_SIZE = 1000  # held-out images of the linear probe (100 per digit)
CHANNELS = (8, 16)  # of the two 3x3 stride-2 convolutions
REPRESENTATION = 64  # features the linear probe sees
PROJECTION = 32  # features the contrastive loss sees (after a two-layer head, as SimCLR)
#: LARS as in SimCLR / SogCLR: learning rate 0.075 * sqrt(batch size), weight decay 1e-6,
#: trust coefficient 1e-3; biases take plain momentum steps.
LARS_OPTIONS = {"learning_rate": 0.075 * BATCH_SIZE**0.5, "weight_decay": 1e-6,
                "momentum": 0.9, "trust_coefficient": 1e-3}
HALF = 14  # rows of the top half of a 28 x 28 digit; the bottom half is the rest


@dataclass(frozen=True)
class Method:
    """One way to learn the encoder.

    ``loss`` names the adapter class (``None``: no training, the probe of the initial
    weights). ``inputs`` is ``"views"`` (one encoder, the two augmented views of each digit:
    the unimodal losses) or ``"halves"`` (two encoders, the top half of view 1 and the bottom
    half of view 2 as two paired modalities: the image-text losses); the probe then sees both
    encoders' features of the two halves of a digit, side by side.
    """

    loss: str | None
    loss_options: dict[str, Any] = field(default_factory=dict)
    inputs: str = "views"

    @property
    def towers(self) -> int:
        return 2 if self.inputs == "halves" else 1


# -- shared data preparation ---------------------------------------------------------------
@dataclass(frozen=True)
class Data:
    """Float32 images in [0, 1] (N, 28, 28) and their digits (N,) int64."""

    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def load_data(samples: int | None = None) -> Data:
    """MNIST-5k split once (seed 0, stratified) into 4,000 training and 1,000 held-out
    digits; ``samples`` keeps a stratified subset of the training split (tiny runs)."""
    images, labels = load_mnist_5k()
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=TEST_SIZE, stratify=labels, random_state=0)
    if samples is not None and samples < len(y_train):
        x_train, _, y_train, _ = train_test_split(
            x_train, y_train, train_size=samples, stratify=y_train, random_state=0)
    return Data(x_train.astype(np.float32), y_train, x_test.astype(np.float32), y_test)


class Views:
    """The two augmented views of every training image, one epoch at a time.

    ``contrastive_views`` draws the views of sample ``i`` from ``(seed, epoch, i)`` alone, so
    one array per epoch serves every framework and method of a seed (drawing them is the
    costly part of an epoch on a CPU). Cached as float32: 4,000 digits take 25 MB an epoch.
    """

    def __init__(self, images: np.ndarray, seed: int) -> None:
        self.images, self.seed = images, seed
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def epoch(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        if epoch not in self._cache:
            first, second = contrastive_views(self.images, np.arange(len(self.images)),
                                              seed=self.seed, epoch=epoch)
            self._cache[epoch] = (first.astype(np.float32), second.astype(np.float32))
        return self._cache[epoch]


def parts(method: Method, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, ...]:
    """What the encoders see of a pair of images (B, 28, 28): both views, or the top half of
    the first and the bottom half of the second."""
    if method.inputs == "halves":
        return first[:, :HALF], second[:, HALF:]
    return first, second


def probe_parts(method: Method, images: np.ndarray) -> tuple[np.ndarray, ...]:
    """The clean images as the probe's encoders see them: whole, or as two halves."""
    if method.inputs == "halves":
        return images[:, :HALF], images[:, HALF:]
    return (images,)


def _conv_size(size: int) -> int:
    return (size - 3) // 2 + 1  # a 3x3 kernel, stride 2, no padding


def initial_weights(method: Method, seed: int) -> list[dict[str, np.ndarray]]:
    """Glorot-uniform weights of every encoder (one, or one per half), shared by the three
    frameworks: convolution kernels (3, 3, in, out) as TensorFlow and JAX (HWIO), dense
    kernels (in, out), zero biases. The flattened convolution output is in (H, W, C) order."""
    rng = np.random.default_rng([seed, 1])

    def glorot(shape: tuple[int, ...], fan_in: int, fan_out: int) -> np.ndarray:
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape).astype(np.float32)

    height = HALF if method.inputs == "halves" else 28
    flat = _conv_size(_conv_size(height)) * _conv_size(_conv_size(28)) * CHANNELS[1]
    towers = []
    for _ in range(method.towers):
        c1, c2 = CHANNELS
        towers.append({
            "conv1": glorot((3, 3, 1, c1), 9, 9 * c1), "conv1_b": np.zeros(c1, np.float32),
            "conv2": glorot((3, 3, c1, c2), 9 * c1, 9 * c2),
            "conv2_b": np.zeros(c2, np.float32),
            "fc": glorot((flat, REPRESENTATION), flat, REPRESENTATION),
            "fc_b": np.zeros(REPRESENTATION, np.float32),
            "head1": glorot((REPRESENTATION, REPRESENTATION), REPRESENTATION, REPRESENTATION),
            "head1_b": np.zeros(REPRESENTATION, np.float32),
            "head2": glorot((REPRESENTATION, PROJECTION), REPRESENTATION, PROJECTION),
            "head2_b": np.zeros(PROJECTION, np.float32),
        })
    return towers


def build_loss(adapter: Any, method: Method, num_samples: int) -> Any:
    """``adapter.<method.loss>(...)``, given ``num_samples`` when the loss keeps state."""
    cls = getattr(adapter, method.loss)
    options = dict(method.loss_options)
    if "num_samples" in inspect.signature(cls).parameters:
        options["num_samples"] = num_samples
    return cls(**options)


@dataclass
class Trainer:
    """What a framework section hands to the shared loop.

    ``step(x1, x2, index)`` trains on one batch: ``x1``, ``x2`` (B, H, W) float32 are what
    encoders 1 and 2 see (the same encoder for the unimodal losses), ``index`` (B,) int64 the
    dataset positions; it returns the loss. ``features(parts)`` returns the representation
    (M, 64 per encoder) of images given as one array per encoder, as numpy.
    """

    step: Callable[[np.ndarray, np.ndarray, np.ndarray], Any]
    features: Callable[[Sequence[np.ndarray]], np.ndarray]


def train(trainer: Trainer, method: Method, data: Data, views: Views, epochs: int, seed: int,
          label: str) -> tuple[np.ndarray, np.ndarray]:
    """The shared epoch loop; returns the representation of the training and the held-out
    images after training (the probe's inputs)."""
    if method.loss is not None:
        batches = RandomSampler(len(data.train_labels), BATCH_SIZE, seed=seed)
        bar = _training.progress(range(epochs), label)
        for epoch in bar:
            batches.set_epoch(epoch)
            first, second = views.epoch(epoch)
            loss = None
            for index in batches:
                loss = trainer.step(*parts(method, first[index], second[index]), index)
            bar.set_postfix(loss=f"{float(loss):.4f}")
    return (trainer.features(probe_parts(method, data.train_images)),
            trainer.features(probe_parts(method, data.test_images)))


def linear_probe(train_features: np.ndarray, train_labels: np.ndarray,
                 test_features: np.ndarray, test_labels: np.ndarray) -> float:
    """Held-out accuracy of a logistic regression on the standardised frozen features."""
    scaler = StandardScaler().fit(train_features)
    probe = LogisticRegression(max_iter=2000)
    probe.fit(scaler.transform(train_features), train_labels)
    return float(probe.score(scaler.transform(test_features), test_labels))


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(method: Method, data: Data, weights: list[dict[str, np.ndarray]]) -> Trainer:
    import torch
    from torch import nn

    import xrisk.torch as xr

    class Encoder(nn.Module):
        """Two 3x3 stride-2 convolutions, a dense representation, a two-layer head."""

        def __init__(self, w: dict[str, np.ndarray]) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, CHANNELS[0], 3, stride=2)
            self.conv2 = nn.Conv2d(CHANNELS[0], CHANNELS[1], 3, stride=2)
            self.fc = nn.Linear(*w["fc"].shape)
            self.head = nn.Sequential(nn.Linear(REPRESENTATION, REPRESENTATION), nn.ReLU(),
                                      nn.Linear(REPRESENTATION, PROJECTION))
            layers = {"conv1": self.conv1, "conv2": self.conv2, "fc": self.fc,
                      "head1": self.head[0], "head2": self.head[2]}
            with torch.no_grad():
                for name, layer in layers.items():
                    kernel = torch.from_numpy(w[name])
                    # HWIO -> (out, in, H, W); (in, out) -> (out, in)
                    layer.weight.copy_(kernel.permute(3, 2, 0, 1) if kernel.ndim == 4
                                       else kernel.T)
                    layer.bias.copy_(torch.from_numpy(w[f"{name}_b"]))

        def represent(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.conv2(torch.relu(self.conv1(x[:, None]))))
            # flatten channels last, as TensorFlow and JAX do, so the fc weights match
            return torch.relu(self.fc(x.permute(0, 2, 3, 1).flatten(1)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.represent(x))

    encoders = nn.ModuleList([Encoder(w) for w in weights])
    loss_fn = build_loss(xr, method, len(data.train_labels)) if method.loss else None
    optimizer = xr.LARS(encoders.parameters(), **LARS_OPTIONS)
    second = encoders[-1]  # the unimodal losses pass both views through one encoder

    def step(x1: np.ndarray, x2: np.ndarray, index: np.ndarray) -> Any:
        z1 = encoders[0](torch.from_numpy(x1))
        z2 = second(torch.from_numpy(x2))
        loss = loss_fn(z1, z2, torch.from_numpy(index))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def features(images: Sequence[np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return torch.cat([encoder.represent(torch.from_numpy(x))
                              for encoder, x in zip(encoders, images, strict=True)], 1).numpy()

    return Trainer(step, features)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(method: Method, data: Data,
                       weights: list[dict[str, np.ndarray]]) -> Trainer:
    import keras
    import tensorflow as tf

    import xrisk.tensorflow as xr

    height = HALF if method.inputs == "halves" else 28
    encoders, heads = [], []
    for w in weights:
        encoder = keras.Sequential([
            keras.Input((height, 28, 1)),
            keras.layers.Conv2D(CHANNELS[0], 3, strides=2, activation="relu"),
            keras.layers.Conv2D(CHANNELS[1], 3, strides=2, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(REPRESENTATION, activation="relu"),
        ])
        head = keras.Sequential([keras.Input((REPRESENTATION,)),
                                 keras.layers.Dense(REPRESENTATION, activation="relu"),
                                 keras.layers.Dense(PROJECTION)])
        encoder.set_weights([w[k] for k in ("conv1", "conv1_b", "conv2", "conv2_b", "fc",
                                            "fc_b")])
        head.set_weights([w[k] for k in ("head1", "head1_b", "head2", "head2_b")])
        encoders.append(encoder)
        heads.append(head)
    variables = [v for model in (*encoders, *heads) for v in model.trainable_variables]
    loss_fn = build_loss(xr, method, len(data.train_labels)) if method.loss else None
    optimizer = xr.LARS(variables, **LARS_OPTIONS)

    def project(tower: int, x: tf.Tensor) -> tf.Tensor:
        return heads[tower](encoders[tower](x[..., None], training=True), training=True)

    @tf.function
    def train_step(x1: tf.Tensor, x2: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            # the unimodal losses pass both views through one encoder (the last is the first)
            loss = loss_fn(project(0, x1), project(len(encoders) - 1, x2), index)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(x1: np.ndarray, x2: np.ndarray, index: np.ndarray) -> Any:
        return train_step(tf.constant(x1), tf.constant(x2), tf.constant(index))

    def features(images: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([encoder(x[..., None], training=False).numpy()
                               for encoder, x in zip(encoders, images, strict=True)], 1)

    return Trainer(step, features)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(method: Method, data: Data, weights: list[dict[str, np.ndarray]]) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    def conv(x: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
        out = jax.lax.conv_general_dilated(x, kernel, (2, 2), "VALID",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(out + bias)

    def represent(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        x = conv(conv(x[..., None], p["conv1"], p["conv1_b"]), p["conv2"], p["conv2_b"])
        return jax.nn.relu(x.reshape(x.shape[0], -1) @ p["fc"] + p["fc_b"])

    def project(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(represent(p, x) @ p["head1"] + p["head1_b"])
        return hidden @ p["head2"] + p["head2_b"]

    params = [{name: jnp.asarray(value) for name, value in w.items()} for w in weights]
    loss_fn = build_loss(xr, method, len(data.train_labels)) if method.loss else None
    optimizer = xr.LARS(**LARS_OPTIONS)

    def objective(params: Any, state: Any, x1: Any, x2: Any, index: Any) -> Any:
        # the unimodal losses pass both views through one encoder (the last is the first)
        return loss_fn.apply(state, project(params[0], x1), project(params[-1], x2), index)

    # Parameters, optimizer state and loss state are donated: XLA updates them in place.
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(params: Any, opt_state: Any, state: Any, x1: jax.Array, x2: jax.Array,
                   index: jax.Array) -> Any:
        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
            params, state, x1, x2, index)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    carry = {"params": params, "opt_state": optimizer.init(params),
             "state": loss_fn.init() if loss_fn is not None else None}

    def step(x1: np.ndarray, x2: np.ndarray, index: np.ndarray) -> Any:
        carry["params"], carry["opt_state"], carry["state"], loss = train_step(
            carry["params"], carry["opt_state"], carry["state"], x1, x2,
            index.astype(np.int32))
        return loss

    @jax.jit
    def encode(params: Any, images: Sequence[jax.Array]) -> jax.Array:
        return jnp.concatenate([represent(p, x) for p, x in zip(params, images, strict=True)],
                               1)

    def features(images: Sequence[np.ndarray]) -> np.ndarray:
        return np.asarray(encode(carry["params"], tuple(images)))

    return Trainer(step, features)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


# -- reporting, command line ----------------------------------------------------------------
@dataclass
class Result:
    """Per seed: held-out probe accuracy, seconds (training and probe), held-out features."""

    accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    features: list[np.ndarray] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.accuracy)

    @property
    def std(self) -> float:
        return statistics.stdev(self.accuracy) if len(self.accuracy) > 1 else 0.0


Results = dict[tuple[str, str], Result]


def format_row(framework: str, method: str, result: Result) -> str:
    return (f"{framework:<12}{method:<10}{result.mean:>10.4f} +- {result.std:.4f}"
            f"{len(result.accuracy):>7}{statistics.fmean(result.seconds):>12.1f}")


def format_table(results: Results) -> str:
    """Text table: held-out probe accuracy (mean +- std over seeds) per framework x method."""
    head = (f"{'framework':<12}{'method':<10}{'probe accuracy':>20}{'seeds':>7}"
            f"{'s / seed':>12}")
    lines = [head, "-" * len(head)]
    lines += [format_row(framework, method, result)
              for (framework, method), result in results.items()]
    return "\n".join(lines)


def format_claims(results: Results, comparisons: Sequence[tuple[str, str]]) -> str:
    """The paper's claim (a global contrastive loss beats in-batch InfoNCE at small batch),
    as measured: the accuracy gaps per framework, and how well the frameworks agree."""
    lines = [f"paper's claim: the global contrastive loss beats in-batch InfoNCE at small "
             f"batch (here {BATCH_SIZE}); measured (probe accuracy, method - baseline):"]
    frameworks = list(dict.fromkeys(framework for framework, _ in results))
    for framework in frameworks:
        parts_ = []
        for method, baseline in comparisons:
            if (framework, method) in results and (framework, baseline) in results:
                ours, theirs = results[framework, method], results[framework, baseline]
                gaps = [a - b for a, b in zip(ours.accuracy, theirs.accuracy, strict=True)]
                wins = sum(gap > 0 for gap in gaps)
                parts_.append(f"{method} - {baseline} {statistics.fmean(gaps):+.4f} "
                              f"(ahead in {wins}/{len(gaps)} seeds)")
        if parts_:
            lines.append(f"  {framework:<11}" + "; ".join(parts_))
    if len(lines) == 1:
        lines.append("  (no method ran together with its baseline)")
    methods = list(dict.fromkeys(method for _, method in results))
    gaps = [abs(a - b) for method in methods
            for f1 in frameworks for f2 in frameworks if f1 < f2
            if (f1, method) in results and (f2, method) in results
            for a, b in zip(results[f1, method].accuracy, results[f2, method].accuracy,
                            strict=True)]
    if gaps:
        lines.append(f"frameworks agree: largest accuracy difference between two frameworks "
                     f"(same method and seed) {max(gaps):.4f} (the same steps, but float32 "
                     "rounding differences grow over a long run; a few steps agree to ~1e-6)")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None, description: str, methods: Sequence[str],
               epochs: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="comma-separated subset of torch,tensorflow,jax")
    parser.add_argument("--methods", default=",".join(methods),
                        help=f"comma-separated subset of {','.join(methods)}")
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--seeds", type=int, default=3,
                        help="number of seeds (0, 1, ...): initial weights, batches, views")
    parser.add_argument("--samples", type=int, default=None,
                        help=f"training digits to use (at least {BATCH_SIZE}; default: all "
                             "4000 of the training split)")
    args = parser.parse_args(argv)
    for option, allowed in (("frameworks", FRAMEWORKS), ("methods", tuple(methods))):
        chosen = [name.strip() for name in getattr(args, option).split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            parser.error(f"--{option}: got {unknown or 'nothing'}; expected names from "
                         f"{allowed}")
        setattr(args, option, list(dict.fromkeys(chosen)))
    if args.epochs < 1:
        parser.error(f"--epochs: got {args.epochs}; expected at least 1")
    if args.seeds < 1:
        parser.error(f"--seeds: got {args.seeds}; expected at least 1")
    full = 5000 - TEST_SIZE
    if args.samples is not None and not BATCH_SIZE <= args.samples <= full:
        parser.error(f"--samples: got {args.samples}; expected {BATCH_SIZE} (one batch) to "
                     f"{full} (the whole training split)")
    return args


def run(argv: Sequence[str] | None, *, description: str, methods: dict[str, Method],
        comparisons: Sequence[tuple[str, str]], epochs: int) -> Results:
    """Train every requested framework x method x seed; print and return the probe
    accuracies."""
    args = parse_args(argv, description, list(methods), epochs)
    _training.import_frameworks(args.frameworks)
    data = load_data(args.samples)
    print(f"MNIST-5k: {len(data.train_labels)} training digits (contrastive training without "
          f"labels, then the probe's fit), {len(data.test_labels)} held out; batch "
          f"{BATCH_SIZE}, {args.epochs} epochs, {args.seeds} seeds", flush=True)
    results: Results = {(fw, m): Result() for fw in args.frameworks for m in args.methods}
    for seed in range(args.seeds):
        views = Views(data.train_images, seed)
        for framework in args.frameworks:
            for name in args.methods:
                method = methods[name]
                start = time.perf_counter()
                weights = initial_weights(method, seed)
                trainer = TRAINERS[framework](method, data, weights)
                train_features, test_features = train(
                    trainer, method, data, views, args.epochs, seed,
                    label=f"{framework:<10} {name:<8} seed {seed}")
                accuracy = linear_probe(train_features, data.train_labels, test_features,
                                        data.test_labels)
                result = results[framework, name]
                result.accuracy.append(accuracy)
                result.seconds.append(time.perf_counter() - start)
                result.features.append(test_features)
                print(f"{framework:<10} {name:<8} seed {seed}  probe accuracy {accuracy:.4f}  "
                      f"({result.seconds[-1]:.1f} s)", flush=True)
    print()
    print(format_table(results))
    print()
    print(format_claims(results, comparisons))
    return results
