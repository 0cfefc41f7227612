"""Multi-instance learning in PyTorch: bags of MNIST digits, positive when one holds a 9 (MIDAM).

The protocol of Ilse, Tomczak and Welling (ICML 2018): a bag is a set of MNIST digits whose
size is drawn per bag from a normal distribution (mean 10, std 2, at least 2); it is positive
when it holds a 9. Bags come from MNIST-5k (shipped), split 80/20 first so that no test digit
is seen in training; only bag labels are used. ``BagSampler`` draws a fixed number of
instances per bag (4; padding and a mask for smaller bags), so every batch has one shape.
An MLP (784 -> 64 -> 2) gives every instance a score phi and an attention logit omega:

- ``CE-max``: binary cross-entropy on the max of the sampled instances' phi, Adam (baseline);
- ``MIDAM-s``: ``MIDAM_softmax_pooling_loss`` (h = tau log mean exp(sigmoid(phi) / tau));
- ``MIDAM-a``: ``MIDAM_attention_pooling_loss`` (sigmoid of the softmax(omega)-weighted mean).

Both MIDAM losses keep a moving average of each bag's pooled statistics, whose weight is
halved at 50 % and 75 % of the epochs (``update_smoothing``), and train with the ``MIDAM``
optimizer. Test bags are scored from all their instances with the method's own pooling; the
script prints the test AUROC as measured (not asserted)::

    python examples/multi_instance.py
    python examples/multi_instance.py --methods MIDAM-a --epochs 10

docs/guides/multilabel.md explains the losses; ``training_loop.py`` shows a loop of the same
shape in TensorFlow and JAX (change the loss, the sampler and ``import xrisk.<framework>``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812  (torch's own convention)

import xrisk.torch as xr
from xrisk.datasets import load_mnist_5k
from xrisk.metrics import auroc
from xrisk.samplers import BagSampler

METHODS = ("CE-max", "MIDAM-s", "MIDAM-a")
TAU = 0.1  # temperature of the softmax pooling


def make_bags(images, digits, num_bags: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bags as one flat instance array x (N, 784), their sizes and labels (holds a 9)."""
    sizes = np.clip(np.rint(rng.normal(10, 2, num_bags)), 2, None).astype(np.int64)
    members = [rng.choice(len(digits), size, replace=False) for size in sizes]
    labels = np.array([float((digits[m] == 9).any()) for m in members], np.float32)
    return images[np.concatenate(members)].reshape(-1, 784).astype(np.float32), sizes, labels


def pool(method: str, phi: np.ndarray, omega: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Bag scores from all the bag's instances, with the method's pooling."""
    scores = []
    for p, w in zip(np.split(phi, np.cumsum(sizes)[:-1]), np.split(omega, np.cumsum(sizes)[:-1]),
                    strict=True):
        if method == "CE-max":
            scores.append(p.max())
        elif method == "MIDAM-s":
            z = 1 / (1 + np.exp(-p)) / TAU
            scores.append(TAU * (z.max() + np.log(np.mean(np.exp(z - z.max())))))
        else:
            weights = np.exp(w - w.max())
            scores.append(weights @ p / weights.sum())
    return np.array(scores)


def train(method: str, x, sizes, labels, args) -> torch.nn.Module:
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(784, args.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(args.hidden, 2))
    if method == "CE-max":
        loss_fn, optimizer = None, xr.Adam(model.parameters(), learning_rate=1e-3)
    else:
        loss_fn = (xr.MIDAM_softmax_pooling_loss(len(sizes), margin=1.0, tau=TAU, gamma=0.9)
                   if method == "MIDAM-s" else
                   xr.MIDAM_attention_pooling_loss(len(sizes), margin=1.0, gamma=0.9))
        optimizer = xr.MIDAM(model.parameters(), loss_fn, learning_rate=0.1, momentum=0.1,
                             weight_decay=1e-4)
    sampler = BagSampler(sizes, args.batch_size, args.instances, seed=args.seed)
    x, y = torch.from_numpy(x), torch.from_numpy(labels)
    for epoch in range(args.epochs):
        if loss_fn is not None and epoch and epoch in (args.epochs // 2, 3 * args.epochs // 4):
            loss_fn.update_smoothing(2)
        sampler.set_epoch(epoch)
        for batch in sampler:
            bags, instances, mask = (torch.from_numpy(part) for part in batch)
            outputs = model(x[instances])  # (bags, instances, 2)
            phi, omega = outputs[..., 0], outputs[..., 1]
            if loss_fn is None:
                pooled = phi.masked_fill(mask == 0, float("-inf")).amax(dim=1)
                loss = F.binary_cross_entropy_with_logits(pooled, y[bags])
            elif method == "MIDAM-s":
                loss = loss_fn(torch.sigmoid(phi), y[bags], bags, mask)
            else:
                loss = loss_fn(phi, omega, y[bags], bags, mask)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"  {method} epoch {epoch + 1}: loss {loss.item():+.4f}", flush=True)
    return model


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-bags", type=int, default=500)
    parser.add_argument("--test-bags", type=int, default=300)
    parser.add_argument("--instances", type=int, default=4, help="drawn per bag in a batch")
    parser.add_argument("--batch-size", type=int, default=16, help="bags per batch")
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or not set(methods) <= set(METHODS):
        parser.error(f"--methods: got {sorted(set(methods) - set(METHODS)) or 'nothing'}; "
                     f"expected names from {list(METHODS)}")
    for name in ("epochs", "train_bags", "test_bags", "instances", "batch_size", "hidden"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: got {getattr(args, name)}; expected >= 1")
    if args.batch_size > args.train_bags:
        parser.error(f"--batch-size: got {args.batch_size} bags per batch with --train-bags "
                     f"{args.train_bags}; expected batch size <= train bags")
    images, digits = load_mnist_5k()
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(digits))
    train_part, test_part = order[:4000], order[4000:]
    x, sizes, labels = make_bags(images[train_part], digits[train_part], args.train_bags, rng)
    x_test, test_sizes, y_test = make_bags(images[test_part], digits[test_part],
                                           args.test_bags, rng)
    print(f"MNIST bags (positive: holds a 9): train {len(sizes)} bags ({labels.mean():.1%} "
          f"positive), test {len(test_sizes)} ({y_test.mean():.1%} positive)")

    results = {}
    for method in methods:
        model = train(method, x, sizes, labels, args)
        with torch.no_grad():
            outputs = model(torch.from_numpy(x_test)).numpy().astype(np.float64)
        results[method] = auroc(y_test, pool(method, outputs[:, 0], outputs[:, 1], test_sizes))
    print(f"\n{'method':<10}{'test AUROC':>12}")
    for method, value in results.items():
        print(f"{method:<10}{value:>12.4f}")
    print("\nThe paper's comparison, as measured here (not asserted):")
    for method in ("MIDAM-s", "MIDAM-a"):
        if method in results and "CE-max" in results:
            print(f"  {method} - CE-max on test AUROC: {results[method] - results['CE-max']:+.4f}")
    return results


if __name__ == "__main__":
    main()
