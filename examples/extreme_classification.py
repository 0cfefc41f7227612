"""Extreme classification in PyTorch: SCENT and SOX against softmax cross-entropy on MNIST.

``EntLossClassification`` writes the cross-entropy of sample i as the log of a mean over
classes, log((1/C) sum_k exp(z_ik - z_iy)) + log C, and tracks that log per sample (state
keyed by the dataset index), so a batch that scores only a sample of the classes still gives
a good gradient estimate: what makes it fit for very many classes. Here every batch scores
all 10 classes, a small, checkable stand-in (with the state exact the gradient is the
cross-entropy's). An MLP (784 -> 128 -> 10) is trained with ``SGD`` (momentum 0.9) and

- ``CE``: torch's softmax cross-entropy (baseline);
- ``SCENT``: ``EntLossClassification(mode="SCENT")``, a proximal step on each sample's
  log estimate;
- ``SOX``: ``EntLossClassification(mode="SOX")``, a moving average of it, whose weight
  follows LibAUC's cosine schedule (``adjust_gamma`` every epoch).

The data are MNIST-5k (shipped, 500 digits per class), split 80/20 stratified; the script
prints the test accuracy as measured (not asserted)::

    python examples/extreme_classification.py
    python examples/extreme_classification.py --methods CE,SOX --epochs 5

docs/guides/multilabel.md trains SOX in JAX; ``training_loop.py`` shows a loop of the same
shape in TensorFlow.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812  (torch's own convention)
from sklearn.model_selection import train_test_split

import xrisk.torch as xr
from xrisk.datasets import load_mnist_5k
from xrisk.samplers import RandomSampler

#: method -> options of EntLossClassification (None: torch's cross-entropy)
METHODS = {"CE": None, "SCENT": {"mode": "SCENT", "alpha": 10.0}, "SOX": {"mode": "SOX",
                                                                         "gamma": 0.9}}


def train(method: str, x_train, y_train, x_test, args) -> np.ndarray:
    """Train one method; return the test logits."""
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 10))
    x, y = torch.from_numpy(x_train), torch.from_numpy(y_train)
    options = METHODS[method]
    loss_fn = None if options is None else xr.EntLossClassification(len(y), **options)
    optimizer = xr.SGD(model.parameters(), learning_rate=0.05, momentum=0.9)
    sampler = RandomSampler(len(y), args.batch_size, seed=args.seed)
    for epoch in range(args.epochs):
        if loss_fn is not None:
            loss_fn.adjust_gamma(epoch, args.epochs)  # SOX's schedule; SCENT ignores it
        sampler.set_epoch(epoch)
        for index in sampler:
            index = torch.from_numpy(index)
            logits, labels = model(x[index]), y[index]
            if loss_fn is None:
                loss = F.cross_entropy(logits, labels)
            else:  # z_k - z_y: each sample's logits minus its label's
                loss = loss_fn(logits - logits.gather(1, labels[:, None]), index)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"  {method} epoch {epoch + 1}: loss {loss.item():+.4f}", flush=True)
    with torch.no_grad():
        return model(torch.from_numpy(x_test)).numpy()


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=5000,
                        help="a stratified subset of this many digits (100 to 5,000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or not set(methods) <= set(METHODS):
        parser.error(f"--methods: got {sorted(set(methods) - set(METHODS)) or 'nothing'}; "
                     f"expected names from {list(METHODS)}")
    for name, value, low, high in (("epochs", args.epochs, 1, None),
                                   ("samples", args.samples, 100, 5000),
                                   ("batch-size", args.batch_size, 1, 4 * args.samples // 5),
                                   ("hidden", args.hidden, 1, None)):
        if value < low or (high is not None and value > high):
            parser.error(f"--{name}: got {value}; expected {low} to {high or 'more'}")
    images, digits = load_mnist_5k()
    x = images.reshape(len(digits), -1).astype(np.float32)
    if args.samples < len(digits):
        x, _, digits, _ = train_test_split(x, digits, train_size=args.samples, stratify=digits,
                                           random_state=args.seed)
    x_train, x_test, y_train, y_test = train_test_split(x, digits, test_size=0.2,
                                                        stratify=digits, random_state=args.seed)
    print(f"MNIST-5k, 10 classes: train {len(y_train)} digits, test {len(y_test)}")

    accuracy = {m: float(np.mean(train(m, x_train, y_train, x_test, args).argmax(1) == y_test))
                for m in methods}
    print(f"\n{'method':<8}{'test accuracy':>15}")
    for method, value in accuracy.items():
        print(f"{method:<8}{value:>15.4f}")
    return accuracy


if __name__ == "__main__":
    main()
