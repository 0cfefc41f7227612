"""Imbalanced binary classification with xrisk in PyTorch, TensorFlow and JAX.

The task: scikit-learn's handwritten digits (shipped with scikit-learn, no download), one
digit against the rest (default 8, the hardest one for a linear model), with the positives of
the training split subsampled to a few per cent (default 4 %). The test split keeps the
natural ratio (about 10 %). Features are standardized on the training split.

A small MLP (64 -> 32 -> 1, the same initial weights everywhere) is trained in every
framework with three methods:

- ``CE``: binary cross-entropy on plain shuffled batches with the framework's Adam;
- ``AUCM``: xrisk's ``AUCMLoss`` (AUROC, min-max margin loss) with the ``PESG`` optimizer;
- ``AP``: xrisk's ``APLoss`` (average precision, SOAP) with the ``SOAP`` optimizer.

AUCM and AP read batches with a fixed share of positives (``DualSampler``) and pass the
dataset index of every example to the loss, which keeps per-sample state. The script prints
the test AUROC and AP of every framework x method::

    python examples/imbalanced_classification.py
    python examples/imbalanced_classification.py --frameworks jax,torch --epochs 10

Each framework section is written as a user would write it: an ``nn.Module`` loop in
PyTorch, a ``tf.function`` train step in TensorFlow, a ``jax.jit`` step with the loss state
donated in JAX. Porting between them changes ``import xrisk.<framework> as xr`` and the
framework's own idioms, not the xrisk calls.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from xrisk.datasets import ImbalancedDataGenerator, load_digits
from xrisk.metrics import auroc, average_precision
from xrisk.samplers import DualSampler, RandomSampler

try:
    from tqdm.auto import tqdm
except ImportError:  # tqdm is optional: plain prints instead of progress bars
    tqdm = None

FRAMEWORKS = ("torch", "tensorflow", "jax")
METHODS = ("CE", "AUCM", "AP")

#: Hyper-parameters of each method, the same in every framework (tuned lightly on seeds 0-4:
#: CE and SOAP share Adam's learning rate; AUC-M uses the class-conditional version "v2",
#: which suits batches with a fixed positive share).
HYPER = {
    "CE": {"lr": 3e-3},
    "AUCM": {"lr": 1.0, "margin": 1.0, "version": "v2", "epoch_decay": 2e-3,
             "decay_factor": 10.0},
    "AP": {"lr": 3e-3, "margin": 1.0, "gamma": 0.9},
}
BATCH_SIZE = 32
SAMPLING_RATE = 0.25  # share of positives in the AUCM / AP batches
HIDDEN = 32


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


def make_batches(method: str, labels: np.ndarray, seed: int) -> Any:
    """Index batches: a fixed share of positives for the X-risk losses, plain shuffles for CE."""
    if method == "CE":
        return RandomSampler(labels.size, BATCH_SIZE, seed=seed)
    return DualSampler(labels, BATCH_SIZE, sampling_rate=SAMPLING_RATE, seed=seed)


@dataclass
class Trainer:
    """What a framework section hands to the shared loop.

    ``step(index)`` trains on the examples at ``index`` (dataset positions, int64) and
    returns the loss; ``end_stage()`` starts a new PESG stage; ``predict()`` returns the test
    scores as numpy.
    """

    step: Callable[[np.ndarray], Any]
    predict: Callable[[], np.ndarray]
    end_stage: Callable[[], None] | None = None


def train(trainer: Trainer, method: str, data: Data, epochs: int, seed: int,
          label: str) -> np.ndarray:
    """The shared epoch loop; PESG starts a new stage at 50 % and 75 % of the epochs.

    A stage (``update_regularizer``) moves PESG's epoch-decay reference point to the average
    iterate and divides its learning rate by ``decay_factor``. The loss shown in the progress
    bar is the last batch's: for AUCM a min-max objective and for AP a gradient surrogate, so
    watch the test metrics, not its value.
    """
    batches = make_batches(method, data.y_train, seed)
    stages = {epochs // 2, (3 * epochs) // 4} - {0}
    bar = progress(range(epochs), label)
    for epoch in bar:
        if trainer.end_stage is not None and epoch in stages:
            trainer.end_stage()
        batches.set_epoch(epoch)
        loss = None
        for index in batches:
            loss = trainer.step(index)
        bar.set_postfix(loss=f"{float(loss):.4f}")
    return trainer.predict()


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(method: str, data: Data, weights: dict[str, np.ndarray]) -> Trainer:
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
    hyper = HYPER[method]

    if method == "CE":
        bce = nn.BCEWithLogitsLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=hyper["lr"])

        def objective(logits: Any, labels: Any, index: Any) -> Any:
            return bce(logits, labels)
    elif method == "AUCM":
        loss_fn = xr.AUCMLoss(margin=hyper["margin"], version=hyper["version"])
        optimizer = xr.PESG(model.parameters(), loss_fn, lr=hyper["lr"],
                            epoch_decay=hyper["epoch_decay"])

        def objective(logits: Any, labels: Any, index: Any) -> Any:
            return loss_fn(torch.sigmoid(logits), labels)
    else:
        loss_fn = xr.APLoss(len(y_train), margin=hyper["margin"], gamma=hyper["gamma"])
        optimizer = xr.SOAP(model.parameters(), lr=hyper["lr"])

        def objective(logits: Any, labels: Any, index: Any) -> Any:
            return loss_fn(torch.sigmoid(logits), labels, index)

    def step(index: np.ndarray) -> Any:
        index_t = torch.from_numpy(index)
        loss = objective(model(x_train[index_t])[:, 0], y_train[index_t], index_t)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def predict() -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(data.x_test))[:, 0].numpy()

    end_stage = None
    if method == "AUCM":
        def end_stage() -> None:
            optimizer.update_regularizer(decay_factor=hyper["decay_factor"])

    return Trainer(step, predict, end_stage)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(method: str, data: Data, weights: dict[str, np.ndarray]) -> Trainer:
    import keras
    import tensorflow as tf

    import xrisk.tensorflow as xr

    model = keras.Sequential([keras.Input((data.x_train.shape[1],)),
                              keras.layers.Dense(HIDDEN, activation="relu"),
                              keras.layers.Dense(1)])
    model.set_weights([weights["w1"], weights["b1"], weights["w2"], weights["b2"]])
    x_train, y_train = tf.constant(data.x_train), tf.constant(data.y_train)
    variables = list(model.trainable_variables)
    hyper = HYPER[method]

    if method == "CE":
        optimizer = keras.optimizers.Adam(learning_rate=hyper["lr"])

        def objective(logits: Any, labels: Any, index: Any) -> Any:
            return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, logits))
    elif method == "AUCM":
        loss_fn = xr.AUCMLoss(margin=hyper["margin"], version=hyper["version"])
        optimizer = xr.PESG(model.trainable_variables, loss_fn, lr=hyper["lr"],
                            epoch_decay=hyper["epoch_decay"])
        variables += list(loss_fn.trainable_variables)  # a, b (alpha's gradient is unused)

        def objective(logits: Any, labels: Any, index: Any) -> Any:
            return loss_fn(tf.sigmoid(logits), labels)
    else:
        loss_fn = xr.APLoss(int(y_train.shape[0]), margin=hyper["margin"],
                            gamma=hyper["gamma"])
        optimizer = xr.SOAP(model.trainable_variables, lr=hyper["lr"])

        def objective(logits: Any, labels: Any, index: Any) -> Any:
            return loss_fn(tf.sigmoid(logits), labels, index)

    @tf.function
    def train_step(index: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(tf.gather(x_train, index), training=True)[:, 0]
            loss = objective(logits, tf.gather(y_train, index), index)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(index: np.ndarray) -> Any:
        return train_step(tf.constant(index))

    def predict() -> np.ndarray:
        return model(data.x_test, training=False).numpy()[:, 0]

    end_stage = None
    if method == "AUCM":
        def end_stage() -> None:
            optimizer.update_regularizer(decay_factor=hyper["decay_factor"])

    return Trainer(step, predict, end_stage)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(method: str, data: Data, weights: dict[str, np.ndarray]) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    def mlp(params: dict[str, Any], x: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        return (hidden @ params["w2"] + params["b2"])[:, 0]

    x_train, y_train = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    model_params = {name: jnp.asarray(value) for name, value in weights.items()}
    hyper = HYPER[method]
    loss_state: Any = ()  # per-sample state of APLoss; empty for CE and AUCM

    if method == "CE":
        params: Any = model_params
        optimizer = optax.adam(hyper["lr"])

        def objective(params: Any, state: Any, x: Any, labels: Any, index: Any) -> Any:
            loss = optax.sigmoid_binary_cross_entropy(mlp(params, x), labels).mean()
            return loss, state
    elif method == "AUCM":
        loss_fn = xr.AUCMLoss(margin=hyper["margin"], version=hyper["version"])
        params = {"model": model_params, "loss": loss_fn.init_params()}
        optimizer = xr.PESG(params, loss_fn, lr=hyper["lr"], epoch_decay=hyper["epoch_decay"])

        def objective(params: Any, state: Any, x: Any, labels: Any, index: Any) -> Any:
            scores = jax.nn.sigmoid(mlp(params["model"], x))
            loss, _ = loss_fn.apply(loss_fn.init(), scores, labels, params=params["loss"])
            return loss, state
    else:
        loss_fn = xr.APLoss(int(y_train.shape[0]), margin=hyper["margin"], gamma=hyper["gamma"])
        params = model_params
        optimizer = xr.SOAP(params, lr=hyper["lr"])
        loss_state = loss_fn.init()

        def objective(params: Any, state: Any, x: Any, labels: Any, index: Any) -> Any:
            return loss_fn.apply(state, jax.nn.sigmoid(mlp(params, x)), labels, index)

    # Parameters, optimizer state and loss state are donated: XLA updates them in place.
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(params: Any, opt_state: Any, state: Any, index: jax.Array) -> Any:
        x, labels = x_train[index], y_train[index]
        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
            params, state, x, labels, index
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    carry = {"params": params, "opt_state": optimizer.init(params), "state": loss_state}

    def step(index: np.ndarray) -> Any:
        carry["params"], carry["opt_state"], carry["state"], loss = train_step(
            carry["params"], carry["opt_state"], carry["state"], index.astype(np.int32)
        )
        return loss

    def predict() -> np.ndarray:
        weights = carry["params"]["model"] if method == "AUCM" else carry["params"]
        return np.asarray(mlp(weights, jnp.asarray(data.x_test)))

    end_stage = None
    if method == "AUCM":
        def end_stage() -> None:
            carry["opt_state"] = optimizer.update_regularizer(
                carry["opt_state"], hyper["decay_factor"]
            )

    return Trainer(step, predict, end_stage)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


# -- progress and reporting -----------------------------------------------------------------
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


def format_table(results: dict[tuple[str, str], dict[str, float]]) -> str:
    """Text table of test AUROC and AP (and seconds) per framework x method."""
    lines = [f"{'framework':<12}{'method':<8}{'AUROC':>8}{'AP':>8}{'time (s)':>10}"]
    lines.append("-" * len(lines[0]))
    for (framework, method), row in results.items():
        lines.append(f"{framework:<12}{method:<8}{row['auroc']:>8.4f}{row['ap']:>8.4f}"
                     f"{row['seconds']:>10.1f}")
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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="comma-separated subset of torch,tensorflow,jax")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated subset of CE,AUCM,AP")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--digit", type=int, default=8, help="the positive class (0-9)")
    parser.add_argument("--positive-share", type=float, default=0.04,
                        help="share of positives kept in the training split")
    args = parser.parse_args(argv)
    for option, allowed in (("frameworks", FRAMEWORKS), ("methods", METHODS)):
        chosen = [name.strip() for name in getattr(args, option).split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            parser.error(f"--{option}: got {unknown or 'nothing'}; expected names from {allowed}")
        setattr(args, option, chosen)
    if args.epochs < 1:
        parser.error(f"--epochs: got {args.epochs}; expected at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], dict[str, float]]:
    """Train every requested framework x method; print and return the test metrics."""
    args = parse_args(argv)
    import_frameworks(args.frameworks)
    data = load_data(args.digit, args.positive_share, args.seed)
    weights = initial_weights(data.x_train.shape[1], args.seed)
    print(f"digits: {args.digit} vs rest; train {data.y_train.size} examples "
          f"({data.y_train.mean():.1%} positive), test {data.y_test.size} "
          f"({data.y_test.mean():.1%} positive)", flush=True)
    results = {}
    for framework in args.frameworks:
        for method in args.methods:
            start = time.perf_counter()
            trainer = TRAINERS[framework](method, data, weights)
            scores = train(trainer, method, data, args.epochs, args.seed,
                           label=f"{framework:<10} {method:<4}")
            results[framework, method] = {
                "auroc": float(auroc(data.y_test, scores)),
                "ap": float(average_precision(data.y_test, scores)),
                "seconds": time.perf_counter() - start,
            }
            row = results[framework, method]
            print(f"{framework:<10} {method:<4}  test AUROC {row['auroc']:.4f}  "
                  f"AP {row['ap']:.4f}  ({row['seconds']:.1f} s)", flush=True)
    print()
    print(format_table(results))
    return results


if __name__ == "__main__":
    main()
