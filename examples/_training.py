"""The training engine the binary-classification examples share, one section per framework.

An example names its methods (:class:`Method`: which xrisk loss and optimizer, with which
options) and its test metrics; this module loads the data (scikit-learn's digits, one digit
against the rest, positives subsampled), builds the same MLP with the same initial weights in
PyTorch, TensorFlow and JAX, and trains it. Each framework section is written as a user would
write it: an ``nn.Module`` loop in PyTorch, a ``tf.function`` train step in TensorFlow, a
``jax.jit`` step with the loss state donated in JAX. The xrisk calls are the same in all
three: ``xr.<Loss>(...)``, ``xr.<Optimizer>(...)``, ``loss_fn(scores, labels, index)``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from xrisk.datasets import ImbalancedDataGenerator, load_digits
from xrisk.samplers import DualSampler, RandomSampler

try:
    from tqdm.auto import tqdm
except ImportError:  # tqdm is optional: plain prints instead of progress bars
    tqdm = None

FRAMEWORKS = ("torch", "tensorflow", "jax")
BATCH_SIZE = 32
SAMPLING_RATE = 0.25  # share of positives in the batches of the X-risk methods
HIDDEN = 32


@dataclass(frozen=True)
class Method:
    """One training method: an xrisk loss, an xrisk optimizer and how they are fed.

    ``scores`` says what the loss takes: ``"probability"`` (sigmoid of the logits, the AUC
    family) or ``"logits"``. ``sampler`` is ``"dual"`` (a fixed share of positives,
    :class:`xrisk.samplers.DualSampler`) or ``"random"``. With ``min_max`` the optimizer takes
    the loss (its auxiliaries a, b, alpha). ``stages``: ``update_regularizer(decay_factor)`` at
    50 % and 75 % of the epochs (PESG's proximal stages).
    """

    loss: str
    optimizer: str
    loss_options: dict[str, Any] = field(default_factory=dict)
    optimizer_options: dict[str, Any] = field(default_factory=dict)
    scores: str = "probability"
    sampler: str = "dual"
    min_max: bool = False
    stages: bool = False
    decay_factor: float = 10.0


# -- shared data preparation ---------------------------------------------------------------
@dataclass(frozen=True)
class Data:
    """Standardized float32 features, 0/1 float32 labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_data(digit: int = 8, positive_share: float = 0.04, seed: int = 0) -> Data:
    """Digits: ``digit`` against the rest, training positives subsampled to ``positive_share``.

    The split is stratified (half for testing); the test split keeps the natural ratio.
    """
    x, y = load_digits(positive_class=digit)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.5, stratify=y, random_state=seed
    )
    x_train, y_train = ImbalancedDataGenerator(positive_share, seed=seed).transform(
        x_train, y_train
    )
    scaler = StandardScaler().fit(x_train)
    return Data(
        x_train=scaler.transform(x_train).astype(np.float32),
        y_train=y_train.astype(np.float32),
        x_test=scaler.transform(x_test).astype(np.float32),
        y_test=y_test.astype(np.float32),
    )


def initial_weights(num_features: int, seed: int) -> dict[str, np.ndarray]:
    """Glorot-uniform weights of the MLP, shared by the three frameworks (kernels (in, out))."""
    rng = np.random.default_rng(seed)

    def glorot(fan_in: int, fan_out: int) -> np.ndarray:
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)

    return {
        "w1": glorot(num_features, HIDDEN), "b1": np.zeros(HIDDEN, np.float32),
        "w2": glorot(HIDDEN, 1), "b2": np.zeros(1, np.float32),
    }


def make_batches(method: Method, labels: np.ndarray, seed: int) -> Any:
    """Index batches: a fixed share of positives, or plain shuffles."""
    if method.sampler == "random":
        return RandomSampler(labels.size, BATCH_SIZE, seed=seed)
    return DualSampler(labels, BATCH_SIZE, sampling_rate=SAMPLING_RATE, seed=seed)


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

    ``step(index)`` trains on the examples at ``index`` (dataset positions, int64) and
    returns the loss; ``end_stage()`` starts a new proximal stage; ``predict()`` returns the
    test logits as numpy.
    """

    step: Callable[[np.ndarray], Any]
    predict: Callable[[], np.ndarray]
    end_stage: Callable[[], None]


def train(trainer: Trainer, method: Method, data: Data, epochs: int, seed: int,
          label: str) -> np.ndarray:
    """The shared epoch loop; methods with stages start a new one at 50 % and 75 %.

    The loss shown in the progress bar is the last batch's: for AUC-M a min-max objective and
    for the compositional losses a gradient surrogate, so watch the test metrics, not it.
    """
    batches = make_batches(method, data.y_train, seed)
    stages = {epochs // 2, (3 * epochs) // 4} - {0} if method.stages else set()
    bar = progress(range(epochs), label)
    for epoch in bar:
        if epoch in stages:
            trainer.end_stage()
        batches.set_epoch(epoch)
        loss = None
        for index in batches:
            loss = trainer.step(index)
        bar.set_postfix(loss=f"{float(loss):.4f}")
    return trainer.predict()


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(method: Method, data: Data, weights: dict[str, np.ndarray]) -> Trainer:
    import torch
    from torch import nn

    import xrisk.torch as xr

    model = nn.Sequential(nn.Linear(data.x_train.shape[1], HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, 1))
    with torch.no_grad():
        for layer, w, b in ((model[0], "w1", "b1"), (model[2], "w2", "b2")):
            layer.weight.copy_(torch.from_numpy(weights[w].T))
            layer.bias.copy_(torch.from_numpy(weights[b]))
    x_train, y_train = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    loss_fn = build_loss(xr, method, len(y_train))
    optimizer = getattr(xr, method.optimizer)(
        model.parameters(), *([loss_fn] if method.min_max else []), **method.optimizer_options
    )
    to_scores = torch.sigmoid if method.scores == "probability" else (lambda z: z)

    def step(index: np.ndarray) -> Any:
        index_t = torch.from_numpy(index)
        logits = model(x_train[index_t])[:, 0]
        loss = loss_fn(to_scores(logits), y_train[index_t], index_t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def predict() -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(data.x_test))[:, 0].numpy()

    def end_stage() -> None:
        optimizer.update_regularizer(decay_factor=method.decay_factor)

    return Trainer(step, predict, end_stage)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(method: Method, data: Data, weights: dict[str, np.ndarray]) -> Trainer:
    import keras
    import tensorflow as tf

    import xrisk.tensorflow as xr

    model = keras.Sequential([keras.Input((data.x_train.shape[1],)),
                              keras.layers.Dense(HIDDEN, activation="relu"),
                              keras.layers.Dense(1)])
    model.set_weights([weights["w1"], weights["b1"], weights["w2"], weights["b2"]])
    x_train, y_train = tf.constant(data.x_train), tf.constant(data.y_train)
    loss_fn = build_loss(xr, method, int(y_train.shape[0]))
    # The loss's trainable auxiliaries (AUC-M's a, b, alpha) are trained with the model.
    variables = [*model.trainable_variables, *loss_fn.trainable_variables]
    optimizer = getattr(xr, method.optimizer)(
        variables, *([loss_fn] if method.min_max else []), **method.optimizer_options
    )
    to_scores = tf.sigmoid if method.scores == "probability" else (lambda z: z)

    @tf.function
    def train_step(index: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(tf.gather(x_train, index), training=True)[:, 0]
            loss = loss_fn(to_scores(logits), tf.gather(y_train, index), index)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(index: np.ndarray) -> Any:
        return train_step(tf.constant(index))

    def predict() -> np.ndarray:
        return model(data.x_test, training=False).numpy()[:, 0]

    def end_stage() -> None:
        optimizer.update_regularizer(decay_factor=method.decay_factor)

    return Trainer(step, predict, end_stage)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(method: Method, data: Data, weights: dict[str, np.ndarray]) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    def mlp(params: dict[str, Any], x: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        return (hidden @ params["w2"] + params["b2"])[:, 0]

    x_train, y_train = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    loss_fn = build_loss(xr, method, int(y_train.shape[0]))
    # The loss's trainable auxiliaries (empty for most losses) live in the parameter pytree.
    params = {"model": {name: jnp.asarray(value) for name, value in weights.items()},
              "loss": loss_fn.init_params()}
    optimizer = getattr(xr, method.optimizer)(
        **({"loss_fn": loss_fn} if method.min_max else {}), **method.optimizer_options
    )
    to_scores = jax.nn.sigmoid if method.scores == "probability" else (lambda z: z)

    def objective(params: Any, state: Any, x: Any, labels: Any, index: Any) -> Any:
        scores = to_scores(mlp(params["model"], x))
        return loss_fn.apply(state, scores, labels, index, params=params["loss"])

    # Parameters, optimizer state and loss state are donated: XLA updates them in place.
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(params: Any, opt_state: Any, state: Any, index: jax.Array) -> Any:
        x, labels = x_train[index], y_train[index]
        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
            params, state, x, labels, index
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    carry = {"params": params, "opt_state": optimizer.init(params), "state": loss_fn.init()}

    def step(index: np.ndarray) -> Any:
        carry["params"], carry["opt_state"], carry["state"], loss = train_step(
            carry["params"], carry["opt_state"], carry["state"], index.astype(np.int32)
        )
        return loss

    def predict() -> np.ndarray:
        return np.asarray(mlp(carry["params"]["model"], jnp.asarray(data.x_test)))

    def end_stage() -> None:
        carry["opt_state"] = optimizer.update_regularizer(carry["opt_state"],
                                                          method.decay_factor)

    return Trainer(step, predict, end_stage)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


# -- progress, reporting, command line ------------------------------------------------------
class _PlainProgress:
    """Fallback for tqdm: one line when a run starts and one when it ends."""

    def __init__(self, iterable: Iterable[int], label: str) -> None:
        self.iterable, self.label, self.postfix = iterable, label, ""

    def __iter__(self) -> Iterator[int]:
        print(f"{self.label}: training ...", flush=True)
        yield from self.iterable
        print(f"{self.label}: done {self.postfix}", flush=True)

    def set_postfix(self, **values: str) -> None:
        self.postfix = " ".join(f"{k}={v}" for k, v in values.items())


def progress(iterable: Iterable[int], label: str) -> Any:
    if tqdm is None:
        return _PlainProgress(iterable, label)
    return tqdm(iterable, desc=label, unit="epoch", leave=False)


Metric = Callable[[np.ndarray, np.ndarray], float]


def format_table(results: dict[tuple[str, str], dict[str, float]],
                 metrics: Sequence[str]) -> str:
    """Text table of the test metrics (and seconds) per framework x method."""
    head = f"{'framework':<12}{'method':<8}" + "".join(f"{m:>15}" for m in metrics)
    lines = [head + f"{'time (s)':>10}", "-" * (len(head) + 10)]
    for (framework, method), row in results.items():
        lines.append(f"{framework:<12}{method:<8}" + "".join(f"{row[m]:>15.4f}" for m in metrics)
                     + f"{row['seconds']:>10.1f}")
    return "\n".join(lines)


def import_frameworks(frameworks: Sequence[str]) -> None:
    """Import the frameworks in a safe order: torch before TensorFlow, TF logs quiet."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    if "tensorflow" in frameworks and importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401  (loading TensorFlow first makes a later torch import crash)
    for framework in FRAMEWORKS:
        if framework in frameworks:
            __import__(framework)


def parse_args(argv: Sequence[str] | None, description: str, methods: Sequence[str],
               epochs: int) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="comma-separated subset of torch,tensorflow,jax")
    parser.add_argument("--methods", default=",".join(methods),
                        help=f"comma-separated subset of {','.join(methods)}")
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--digit", type=int, default=8, help="the positive class (0-9)")
    parser.add_argument("--positive-share", type=float, default=0.04,
                        help="share of positives kept in the training split")
    args = parser.parse_args(argv)
    for option, allowed in (("frameworks", FRAMEWORKS), ("methods", tuple(methods))):
        chosen = [name.strip() for name in getattr(args, option).split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            parser.error(f"--{option}: got {unknown or 'nothing'}; expected names from {allowed}")
        setattr(args, option, chosen)
    if args.epochs < 1:
        parser.error(f"--epochs: got {args.epochs}; expected at least 1")
    return args


def run(argv: Sequence[str] | None, *, description: str, methods: dict[str, Method],
        metrics: dict[str, Metric], epochs: int) -> dict[tuple[str, str], dict[str, float]]:
    """Train every requested framework x method; print and return the test metrics."""
    args = parse_args(argv, description, list(methods), epochs)
    import_frameworks(args.frameworks)
    data = load_data(args.digit, args.positive_share, args.seed)
    weights = initial_weights(data.x_train.shape[1], args.seed)
    print(f"digits: {args.digit} vs rest; train {data.y_train.size} examples "
          f"({data.y_train.mean():.1%} positive), test {data.y_test.size} "
          f"({data.y_test.mean():.1%} positive)", flush=True)
    results = {}
    for framework in args.frameworks:
        for name in args.methods:
            method = methods[name]
            start = time.perf_counter()
            trainer = TRAINERS[framework](method, data, weights)
            scores = train(trainer, method, data, args.epochs, args.seed,
                           label=f"{framework:<10} {name:<5}")
            row = {metric: float(fn(data.y_test, scores)) for metric, fn in metrics.items()}
            row["seconds"] = time.perf_counter() - start
            results[framework, name] = row
            shown = "  ".join(f"{metric} {row[metric]:.4f}" for metric in metrics)
            print(f"{framework:<10} {name:<5}  test {shown}  ({row['seconds']:.1f} s)",
                  flush=True)
    print()
    print(format_table(results, list(metrics)))
    return results
