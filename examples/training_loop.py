"""One X-risk method's training loop, written out: average precision (SOAP) on imbalanced
digits, in PyTorch, TensorFlow or JAX.

This is the loop that ``imbalanced_classification.py`` has the runner run for each method:
data -> model -> loss -> optimizer -> sampler -> loop -> metric. The task is scikit-learn's
digits, 8 against the rest, training positives subsampled to 4 %. ``APLoss`` keeps a state
row per training example, so every batch passes the dataset index of its examples; a
``DualSampler`` puts a quarter positives in every batch; ``SOAP`` (LibAUC's clipped Adam)
divides its learning rate by 10 at 75 % of the epochs. Each section uses its framework's own
idioms (a ``DataLoader`` loop, a ``tf.function`` step, a ``jax.jit`` step with the loss
state carried through it); the xrisk calls are the same in all three. It prints the test
AUROC and AP after every epoch::

    python examples/training_loop.py
    python examples/training_loop.py --framework jax --epochs 10

For ``AUCMLoss`` + ``PESG`` the optimizer also takes the loss (its a, b, alpha); see
``flax_nnx_auc.py`` for that in Flax NNX, and docs/guides/ for each loss.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from xrisk.datasets import ImbalancedDataGenerator, load_digits
from xrisk.metrics import auroc, average_precision


def load_data(seed: int) -> tuple[np.ndarray, ...]:
    """Digits, 8 against the rest; half for testing; training positives cut to 4 %."""
    x, y = load_digits(positive_class=8)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.5, stratify=y,
                                                        random_state=seed)
    x_train, y_train = ImbalancedDataGenerator(0.04, seed=seed).transform(x_train, y_train)
    scaler = StandardScaler().fit(x_train)
    return (scaler.transform(x_train).astype(np.float32), y_train.astype(np.float32),
            scaler.transform(x_test).astype(np.float32), y_test)


def train_torch(x_train, y_train, x_test, args, report):
    import torch
    from torch.utils.data import DataLoader

    import xrisk.torch as xr

    torch.manual_seed(args.seed)
    dataset = xr.IndexedDataset(x_train, y_train)  # items (x, y, index)
    sampler = xr.DualSampler(y_train, args.batch_size, sampling_rate=0.25, seed=args.seed)
    loader = DataLoader(dataset, sampler=sampler, batch_size=None)
    model = torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1))
    loss_fn = xr.APLoss(num_samples=len(dataset), gamma=0.9, margin=1.0)
    optimizer = xr.SOAP(model.parameters(), learning_rate=args.learning_rate)
    for epoch in range(args.epochs):
        if epoch == int(0.75 * args.epochs):
            optimizer.update_lr(decay_factor=10)
        sampler.set_epoch(epoch)
        for xb, yb, index in loader:
            loss = loss_fn(torch.sigmoid(model(xb)[:, 0]), yb, index)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            report(epoch, float(loss), model(torch.from_numpy(x_test))[:, 0].numpy())


def train_tensorflow(x_train, y_train, x_test, args, report):
    import keras
    import tensorflow as tf

    import xrisk.tensorflow as xr

    keras.utils.set_random_seed(args.seed)
    dataset = xr.IndexedDataset(x_train, y_train)
    sampler = xr.DualSampler(y_train, args.batch_size, sampling_rate=0.25, seed=args.seed)
    model = keras.Sequential([keras.Input((x_train.shape[1],)),
                              keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)])
    loss_fn = xr.APLoss(num_samples=len(y_train), gamma=0.9, margin=1.0)
    optimizer = xr.SOAP(model.trainable_variables, learning_rate=args.learning_rate)

    @tf.function
    def train_step(xb, yb, index):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.sigmoid(model(xb, training=True)[:, 0]), yb, index)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for epoch in range(args.epochs):
        if epoch == int(0.75 * args.epochs):
            optimizer.update_lr(decay_factor=10)
        sampler.set_epoch(epoch)
        for xb, yb, index in dataset.as_dataset(sampler):  # a tf.data pipeline
            loss = train_step(xb, yb, index)
        report(epoch, float(loss), model(x_test, training=False).numpy()[:, 0])


def train_jax(x_train, y_train, x_test, args, report):
    import jax
    import optax

    import xrisk.jax as xr

    def mlp(params, x):
        return (jax.nn.relu(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"])[:, 0]

    k1, k2 = jax.random.split(jax.random.key(args.seed))
    glorot = jax.nn.initializers.glorot_uniform()
    params = {"w1": glorot(k1, (x_train.shape[1], 32)), "b1": jax.numpy.zeros(32),
              "w2": glorot(k2, (32, 1)), "b2": jax.numpy.zeros(1)}
    dataset = xr.IndexedDataset(x_train, y_train)
    sampler = xr.DualSampler(y_train, args.batch_size, sampling_rate=0.25, seed=args.seed)
    loss_fn = xr.APLoss(num_samples=len(y_train), gamma=0.9, margin=1.0)
    optimizer = xr.SOAP(learning_rate=args.learning_rate)  # an optax transformation
    opt_state, state = optimizer.init(params), loss_fn.init()  # state: the per-example rows

    @jax.jit
    def train_step(params, opt_state, state, xb, yb, index):
        def objective(params):
            return loss_fn.apply(state, jax.nn.sigmoid(mlp(params, xb)), yb, index)

        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, state, loss

    for epoch in range(args.epochs):
        if epoch == int(0.75 * args.epochs):
            opt_state = optimizer.update_lr(opt_state, decay_factor=10)
        sampler.set_epoch(epoch)
        for xb, yb, index in dataset.batches(sampler):
            params, opt_state, state, loss = train_step(params, opt_state, state, xb, yb, index)
        report(epoch, float(loss), np.asarray(mlp(params, x_test)))


def main(argv: Sequence[str] | None = None) -> list[dict[str, float]]:
    """Train and print the test metrics after every epoch; return them."""
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--framework", choices=("torch", "tensorflow", "jax"), default="torch")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 4:
        parser.error(f"expected --epochs >= 1 and --batch-size >= 4; got {args.epochs} and "
                     f"{args.batch_size}")
    x_train, y_train, x_test, y_test = load_data(args.seed)
    print(f"digits 8 vs rest: train {len(y_train)} ({y_train.mean():.1%} positive), "
          f"test {len(y_test)} ({y_test.mean():.1%} positive); {args.framework}, APLoss + SOAP")
    history = []

    def report(epoch: int, loss: float, scores: np.ndarray) -> None:
        history.append({"AUROC": auroc(y_test, scores), "AP": average_precision(y_test, scores)})
        print(f"epoch {epoch + 1:3d}  loss {loss:+.4f}  test AUROC {history[-1]['AUROC']:.4f}  "
              f"AP {history[-1]['AP']:.4f}", flush=True)

    trainer = {"torch": train_torch, "tensorflow": train_tensorflow, "jax": train_jax}
    trainer[args.framework](x_train, y_train, x_test, args, report)
    return history


if __name__ == "__main__":
    main()
