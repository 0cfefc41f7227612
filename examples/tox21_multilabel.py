"""Multi-label classification with missing labels: Tox21 in PyTorch, TensorFlow and JAX.

Tox21 (shipped with xrisk) holds 8,014 molecules and 12 toxicity assays; 2.8-16 % of each
assay's tested molecules are toxic and 17 % of the labels are missing (the molecule was not
tested). The molecules become 2048-bit Morgan fingerprints (radius 2) computed with RDKit, an
optional extra::

    pip install "xrisk[chem]"        # or: pip install rdkit

An MLP (fingerprint -> 128 -> 12 logits) is trained in every framework, from the same initial
weights on the same batches, with:

- ``CE``: binary cross-entropy per label (the framework's own), missing labels masked out,
  with ``Adam`` on random batches (baseline);
- ``AUCM``: ``MultiLabelAUCMLoss`` (AUC-margin per label, a, b, alpha per label) with
  ``PESG``;
- ``mAP``: ``meanAveragePrecisionLoss`` (SOAP per label, state keyed by label x molecule) with
  ``SOAP``.

Both X-risk losses take the label matrix with NaN at the missing entries (left out of the
loss, the gradient and the state) and are fed by a ``TriSampler``: every batch holds, for each
of the 12 tasks, 4 of its positives and 4 of its negatives, with the task of each row. The
molecules are split 80/20 at random; the script prints the test mean AUROC and mean AP over
the 12 tasks, each task on its tested molecules only::

    python examples/tox21_multilabel.py
    python examples/tox21_multilabel.py --frameworks torch --methods CE,mAP --epochs 5

The numbers are measured, not asserted: which method wins depends on the budget (LibAUC's
recipe trains the X-risk losses from a CE-pretrained network; here all start from scratch).
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _runner as runner  # noqa: E402  (the examples' shared engine, next to this file)
from _runner import Trainer  # noqa: E402

from xrisk.datasets import TOX21_TASKS, load_tox21, morgan_fingerprints  # noqa: E402
from xrisk.metrics import auroc, average_precision  # noqa: E402
from xrisk.samplers import RandomSampler, TriSampler  # noqa: E402

METRICS = ("mean AUROC", "mean AP")
NUM_TASKS = len(TOX21_TASKS)


@dataclass(frozen=True)
class Method:
    """An xrisk loss (``None``: the framework's masked binary cross-entropy) and optimizer.

    ``min_max``: the optimizer takes the loss (AUC-M's a, b, alpha); ``stages``: PESG's
    ``update_regularizer`` at 50 % and 75 % of the epochs; ``index``: the loss keeps
    per-molecule state (its dataset index is passed).
    """

    loss: str | None
    optimizer: str
    loss_options: dict[str, Any] = field(default_factory=dict)
    optimizer_options: dict[str, Any] = field(default_factory=dict)
    min_max: bool = False
    stages: bool = False
    index: bool = False


METHODS = {
    "CE": Method(None, "Adam", optimizer_options={"learning_rate": 1e-3}),
    "AUCM": Method("MultiLabelAUCMLoss", "PESG",
                   loss_options={"margin": 1.0, "version": "v2"},
                   optimizer_options={"learning_rate": 0.1, "epoch_decay": 2e-3,
                                      "weight_decay": 1e-5},
                   min_max=True, stages=True),
    "mAP": Method("meanAveragePrecisionLoss", "SOAP",
                  loss_options={"margin": 1.0, "gamma": 0.9},
                  optimizer_options={"learning_rate": 1e-3}, index=True),
}


# -- data ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Data:
    """Fingerprints (float32 0/1) and labels (float32, NaN = missing) of both splits."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_data(molecules: int | None, bits: int, seed: int, tasks: int = NUM_TASKS) -> Data:
    """Tox21 fingerprints, a random 80/20 split; ``molecules`` keeps a random subset and
    ``tasks`` the first tasks.

    Raises SystemExit with the install command when RDKit is missing.
    """
    smiles, labels = load_tox21()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(smiles))[:molecules]
    try:
        bits_array, parsed = morgan_fingerprints(smiles[order], radius=2, num_bits=bits)
    except ImportError as error:
        raise SystemExit(f"tox21_multilabel.py needs RDKit for the molecule features.\n{error}"
                         ) from None
    x = bits_array[parsed].astype(np.float32)
    y = labels[order][parsed][:, :tasks].astype(np.float32)
    test = np.zeros(len(y), dtype=bool)
    test[: len(y) // 5] = True  # the order is already random
    return Data(x[~test], y[~test], x[test], y[test])


def task_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Mean AUROC and mean AP over the tasks, each on its tested molecules (NaN left out);
    a task whose test molecules hold one class only is left out of the means."""
    aurocs, aps = [], []
    for task in range(labels.shape[1]):
        seen = ~np.isnan(labels[:, task])
        y, s = labels[seen, task], scores[seen, task]
        if 0 < y.sum() < y.size:
            aurocs.append(auroc(y, s))
            aps.append(average_precision(y, s))
    if not aurocs:
        return dict.fromkeys(METRICS, float("nan"))
    return {"mean AUROC": float(np.mean(aurocs)), "mean AP": float(np.mean(aps))}


def make_batches(method: Method, data: Data, args: argparse.Namespace) -> Any:
    """Random batches for CE; task-balanced ``(index, task)`` batches for the X-risk losses.

    The sampler draws each task's positives and negatives among its tested molecules only
    (NaN: never drawn for that task).
    """
    if method.loss is None:
        return RandomSampler(len(data.y_train), args.batch_size, seed=args.seed)
    return TriSampler(data.y_train, args.per_task, sampling_rate=0.5, seed=args.seed)


def split_batch(method: Method, batch: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """``(index, task)`` of a batch (``task`` is None for the random batches of CE)."""
    return (batch, None) if method.loss is None else (batch[0], batch[1])


def build_loss(adapter: Any, method: Method, labels_shape: tuple[int, int]) -> Any:
    """``adapter.<method.loss>`` for a training label matrix of shape (molecules, tasks)."""
    options = {"num_labels": labels_shape[1], **method.loss_options}
    if method.index:
        options["num_samples"] = labels_shape[0]
    return getattr(adapter, method.loss)(**options)


def stage_epochs(method: Method, epochs: int) -> set[int]:
    return {epochs // 2, (3 * epochs) // 4} - {0} if method.stages else set()


# -- PyTorch --------------------------------------------------------------------------------
def torch_trainer(method: Method, data: Data, layers: runner.Layers, epochs: int) -> Trainer:
    import torch
    import torch.nn.functional as F  # noqa: N812  (torch's own convention)

    import xrisk.torch as xr

    model = runner.torch_mlp(layers)
    x_train, y_train = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    if method.loss is None:
        loss_fn, extra = None, []
    else:
        loss_fn = build_loss(xr, method, data.y_train.shape)
        extra = [loss_fn] if method.min_max else []
    optimizer = getattr(xr, method.optimizer)(model.parameters(), *extra,
                                              **method.optimizer_options)
    stages = stage_epochs(method, epochs)

    def step(batch: Any) -> Any:
        index, task = split_batch(method, batch)
        index_t = torch.from_numpy(index)
        logits, labels = model(x_train[index_t]), y_train[index_t]
        if loss_fn is None:
            seen = ~torch.isnan(labels)
            losses = F.binary_cross_entropy_with_logits(logits, torch.nan_to_num(labels),
                                                        reduction="none")
            loss = (losses * seen).sum() / seen.sum().clamp(min=1)
        elif method.index:
            loss = loss_fn(torch.sigmoid(logits), labels, index_t, torch.from_numpy(task))
        else:
            loss = loss_fn(torch.sigmoid(logits), labels, task=torch.from_numpy(task))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    def predict() -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(data.x_test)).numpy()

    def start_epoch(epoch: int) -> None:
        if epoch in stages:
            optimizer.update_regularizer(decay_factor=10)

    return Trainer(step, predict, start_epoch)


# -- TensorFlow -----------------------------------------------------------------------------
def tensorflow_trainer(method: Method, data: Data, layers: runner.Layers,
                       epochs: int) -> Trainer:
    import tensorflow as tf

    import xrisk.tensorflow as xr

    model = runner.keras_mlp(layers)
    x_train, y_train = tf.constant(data.x_train), tf.constant(data.y_train)
    variables = list(model.trainable_variables)
    if method.loss is None:
        loss_fn, extra = None, []
    else:
        loss_fn = build_loss(xr, method, data.y_train.shape)
        variables += loss_fn.trainable_variables  # AUC-M's a, b, alpha train with the model
        extra = [loss_fn] if method.min_max else []
    optimizer = getattr(xr, method.optimizer)(variables, *extra, **method.optimizer_options)
    stages = stage_epochs(method, epochs)

    @tf.function
    def train_step(index: tf.Tensor, task: tf.Tensor | None) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(tf.gather(x_train, index), training=True)
            labels = tf.gather(y_train, index)
            if loss_fn is None:
                seen = tf.cast(~tf.math.is_nan(labels), logits.dtype)
                losses = tf.nn.sigmoid_cross_entropy_with_logits(
                    labels=tf.where(seen > 0, labels, tf.zeros_like(labels)), logits=logits)
                loss = tf.reduce_sum(losses * seen) / tf.maximum(tf.reduce_sum(seen), 1.0)
            elif method.index:
                loss = loss_fn(tf.sigmoid(logits), labels, index, task)
            else:
                loss = loss_fn(tf.sigmoid(logits), labels, task=task)
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    def step(batch: Any) -> Any:
        index, task = split_batch(method, batch)
        return train_step(tf.constant(index), None if task is None else tf.constant(task))

    def predict() -> np.ndarray:
        return model(data.x_test, training=False).numpy()

    def start_epoch(epoch: int) -> None:
        if epoch in stages:
            optimizer.update_regularizer(decay_factor=10)

    return Trainer(step, predict, start_epoch)


# -- JAX ------------------------------------------------------------------------------------
def jax_trainer(method: Method, data: Data, layers: runner.Layers, epochs: int) -> Trainer:
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xr

    x_train, y_train = jnp.asarray(data.x_train), jnp.asarray(data.y_train)
    params: dict[str, Any] = {"model": [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers]}
    if method.loss is None:
        loss_fn = None
        optimizer = getattr(xr, method.optimizer)(**method.optimizer_options)
    else:
        loss_fn = build_loss(xr, method, data.y_train.shape)
        params["loss"] = loss_fn.init_params()  # AUC-M's a, b, alpha (empty for mAP)
        optimizer = getattr(xr, method.optimizer)(
            **({"loss_fn": loss_fn} if method.min_max else {}), **method.optimizer_options)
    stages = stage_epochs(method, epochs)

    def objective(params: Any, state: Any, index: Any, task: Any) -> Any:
        logits = runner.jax_mlp(params["model"], x_train[index])
        labels = y_train[index]
        if loss_fn is None:
            seen = ~jnp.isnan(labels)
            losses = optax.sigmoid_binary_cross_entropy(logits, jnp.nan_to_num(labels))
            return jnp.sum(losses * seen) / jnp.maximum(jnp.sum(seen), 1), state
        inputs = (index, task) if method.index else ()
        return loss_fn.apply(state, jax.nn.sigmoid(logits), labels, *inputs,
                             **({} if method.index else {"task": task}),
                             params=params["loss"])

    # Parameters, optimizer state and loss state are donated: XLA updates them in place.
    @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
    def train_step(params: Any, opt_state: Any, state: Any, index: jax.Array,
                   task: jax.Array | None) -> Any:
        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(
            params, state, index, task)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    carry = {"params": params, "opt_state": optimizer.init(params),
             "state": None if loss_fn is None else loss_fn.init()}

    def step(batch: Any) -> Any:
        index, task = split_batch(method, batch)
        carry["params"], carry["opt_state"], carry["state"], loss = train_step(
            carry["params"], carry["opt_state"], carry["state"], index.astype(np.int32),
            None if task is None else task.astype(np.int32))
        return loss

    def predict() -> np.ndarray:
        return np.asarray(runner.jax_mlp(carry["params"]["model"], jnp.asarray(data.x_test)))

    def start_epoch(epoch: int) -> None:
        if epoch in stages:
            carry["opt_state"] = optimizer.update_regularizer(carry["opt_state"], 10)

    return Trainer(step, predict, start_epoch)


TRAINERS = {"torch": torch_trainer, "tensorflow": tensorflow_trainer, "jax": jax_trainer}


# -- command line ---------------------------------------------------------------------------
def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--molecules", type=int, default=None,
                        help="use a random subset of this many molecules (default: all 8,014)")
    parser.add_argument("--bits", type=int, default=2048, help="fingerprint length")
    parser.add_argument("--tasks", type=int, default=NUM_TASKS,
                        help=f"train and test on the first TASKS of the {NUM_TASKS} tasks")
    parser.add_argument("--hidden", type=int, default=128, help="hidden units of the MLP")
    parser.add_argument("--batch-size", type=int, default=64, help="CE's batch size")
    parser.add_argument("--per-task", type=int, default=8,
                        help="molecules per task in the X-risk batches (half positives)")


def _check(args: argparse.Namespace) -> str | None:
    if not 1 <= args.tasks <= NUM_TASKS:
        return f"--tasks: got {args.tasks}; expected an integer in [1, {NUM_TASKS}]"
    for name in ("bits", "hidden", "batch_size"):
        problem = runner.positive(name.replace("_", "-"), getattr(args, name))
        if problem:
            return problem
    if args.per_task < 2:
        return f"--per-task: got {args.per_task}; expected an integer >= 2 (a positive and " \
               "a negative per task)"
    if args.molecules is not None and args.molecules < 100:
        return f"--molecules: got {args.molecules}; expected at least 100 (every task needs " \
               "positives in both splits)"
    return None


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], runner.Outcome]:
    """Train every requested framework x method; print and return the test results."""
    args = runner.parse_args(argv, description=__doc__.partition("\n")[0], methods=METHODS,
                             epochs=10, add_options=_options, check=_check)
    data = load_data(args.molecules, args.bits, args.seed, args.tasks)
    train_counts = np.nansum(data.y_train, axis=0)
    if train_counts.min() < 1:
        raise SystemExit(f"tox21_multilabel.py: task {TOX21_TASKS[int(train_counts.argmin())]} "
                         "has no positive in the training split; use more --molecules.")
    print(f"Tox21: train {len(data.y_train)} molecules, test {len(data.y_test)}; "
          f"{args.tasks} tasks, {np.nanmean(data.y_train):.1%} of the tested labels positive, "
          f"{np.isnan(data.y_train).mean():.1%} missing", flush=True)
    layers = runner.initial_mlp([args.bits, args.hidden, args.tasks], args.seed)
    return runner.run(args,
                      trainer=lambda framework, name: TRAINERS[framework](
                          METHODS[name], data, layers, args.epochs),
                      batches=lambda name: make_batches(METHODS[name], data, args),
                      evaluate=lambda scores: task_metrics(data.y_test, scores),
                      metrics=METRICS)


if __name__ == "__main__":
    main()
