"""AUROC maximization of a Flax NNX model: AUC-M + PESG from ``xrisk.jax`` under ``nnx.jit``.

The task: the Wisconsin breast-cancer data shipped with scikit-learn (no download), with the
malignant class subsampled to 10 % of the training split, a stratified test split of 30 % at
the natural ratio, and features standardized on the training split. An MLP written as an
``nnx.Module`` holds the loss's auxiliaries (a, b, alpha) as an ``nnx.Param``; PESG
(an optax transformation) descends on the network and on a, b and takes the projected ascent
on alpha. The loss state (none for AUC-M; a table per sample for AP, pAUC, ...) is passed to
the jitted step and returned by it. The script prints the test AUROC after each epoch::

    python examples/flax_nnx_auc.py
    python examples/flax_nnx_auc.py --epochs 30 --hidden 64

docs/flax.md explains each part; swapping in ``xr.APLoss(num_samples=len(train))`` with
``xr.SOAP(...)`` trains average precision with the same loop.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import xrisk.jax as xr
from xrisk.datasets import load_breast_cancer
from xrisk.metrics import auroc


class MLP(nnx.Module):
    def __init__(self, num_features: int, hidden: int, loss_fn: xr.XRiskLoss,
                 rngs: nnx.Rngs) -> None:
        self.hidden = nnx.Linear(num_features, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)
        self.aux = nnx.Param(loss_fn.init_params())  # AUC-M's a, b, alpha

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(jax.nn.relu(self.hidden(x))).squeeze(-1)  # one score per example


def split(x: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    """Stratified 70/30 split; the training positives subsampled to 10 %; standardized."""
    rng = np.random.default_rng(seed)
    test = np.concatenate([rng.permutation(np.flatnonzero(y == c))[: int(0.3 * (y == c).sum())]
                           for c in (0, 1)])
    train = np.setdiff1d(np.arange(len(y)), test)
    negatives, positives = train[y[train] == 0], train[y[train] == 1]
    keep = rng.permutation(positives)[: int(len(negatives) / 9)]  # 10 % positives
    train = np.concatenate([negatives, keep])
    mean, std = x[train].mean(0), x[train].std(0)
    return ((x[train] - mean) / std).astype(np.float32), y[train].astype(np.float32), \
        ((x[test] - mean) / std).astype(np.float32), y[test]


def main(argv: Sequence[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.hidden < 1 or args.batch_size < 2:
        parser.error(f"expected --epochs >= 1, --hidden >= 1, --batch-size >= 2; got "
                     f"{args.epochs}, {args.hidden}, {args.batch_size}")

    x_train, y_train, x_test, y_test = split(*load_breast_cancer(), args.seed)
    dataset = xr.IndexedDataset(x_train, y_train)  # batches (x, y, index)
    sampler = xr.DualSampler(y_train, args.batch_size, sampling_rate=0.25, seed=args.seed)

    loss_fn = xr.AUCMLoss(margin=1.0, version="v2")
    model = MLP(x_train.shape[1], args.hidden, loss_fn, nnx.Rngs(args.seed))
    optimizer = nnx.Optimizer(model, xr.PESG(loss_fn=loss_fn, learning_rate=args.learning_rate,
                                             epoch_decay=2e-3), wrt=nnx.Param)
    state = loss_fn.init()  # the loss state, carried through the jitted step

    @nnx.jit
    def train_step(model: MLP, optimizer: nnx.Optimizer, state: object, x: jax.Array,
                   y: jax.Array, index: jax.Array) -> tuple[jax.Array, object]:
        def objective(model: MLP) -> tuple[jax.Array, object]:
            scores = jax.nn.sigmoid(model(x))
            return loss_fn.apply(state, scores, y, index, params=model.aux.get_value())

        (loss, state), grads = nnx.value_and_grad(objective, has_aux=True)(model)
        optimizer.update(model, grads)
        return loss, state

    score = 0.0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y, index in dataset.batches(sampler):
            loss, state = train_step(model, optimizer, state, x, y, index)
        score = auroc(y_test, np.asarray(model(jnp.asarray(x_test))))
        print(f"epoch {epoch + 1:3d}  loss {float(loss):.4f}  test AUROC {score:.4f}")
    return score


if __name__ == "__main__":
    main()
