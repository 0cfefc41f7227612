"""Self-supervised contrastive learning at a small batch (64) in PyTorch: global contrastive
losses (SogCLR, iSogCLR, bimodal) against in-batch InfoNCE and CLIP, judged by a linear probe.

The data are MNIST-5k's digits (shipped): 4,000 for contrastive training (no labels) and
1,000 held out. Every digit gets two random views (shift, contrast, noise) per epoch from
:func:`xrisk.datasets.contrastive_views`. A small conv encoder (two 3x3 stride-2
convolutions, a 64-d representation, a two-layer projection head to 32-d) is trained with
:class:`xrisk.torch.LARS` (SimCLR's optimizer) on ``RandomSampler`` batches:

- ``init``: no training, the probe of the initial encoder (a reference point);
- ``InfoNCE``: ``InfoNCELoss`` (SimCLR's NT-Xent: the negatives of the mini-batch only);
- ``SogCLR``: ``GlobalContrastiveLoss`` (a moving-average estimator per digit stands in for
  all the negatives of the data set); ``iSogCLR``: with a learned temperature per digit;
- ``CLIP`` and ``Bimodal``: two "modalities" of a digit, the top half of one view and the
  bottom half of the other, each with its own encoder: ``InfoNCELoss(within_view=False)``
  against ``BimodalContrastiveLoss``.

Under LARS the in-batch losses' gradient is about 1/(2 tau) times the global losses', and
LARS leaves biases to plain momentum steps, so InfoNCE and CLIP are scaled by 2 tau to make
the steps comparable (docs/runner.md measures this). After training, a logistic regression
on the frozen, standardised representation is fitted on the training digits' labels and
scored on the held-out digits; the script prints its accuracy, mean +- std over seeds, and
the paper's claim as measured (not asserted)::

    python examples/contrastive.py
    python examples/contrastive.py --methods InfoNCE,SogCLR --epochs 5 --seeds 1

The same losses in TensorFlow and JAX: docs/guides/contrastive.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn

import xrisk.torch as xr
from xrisk.datasets import contrastive_views, load_mnist_5k
from xrisk.samplers import RandomSampler

TAU, GAMMA, BATCH_SIZE = 0.2, 0.9, 64
METHODS = ("init", "InfoNCE", "SogCLR", "iSogCLR", "CLIP", "Bimodal")
TWO_ENCODERS = ("CLIP", "Bimodal")  # inputs: the top half of view 1, the bottom of view 2
#: (method, its in-batch baseline): the paper's claim is that the global loss wins.
CLAIMS = (("SogCLR", "InfoNCE"), ("iSogCLR", "InfoNCE"), ("Bimodal", "CLIP"))


def make_loss(method: str, num_samples: int) -> nn.Module:
    if method == "InfoNCE":
        return xr.InfoNCELoss(tau=TAU)
    if method == "CLIP":
        return xr.InfoNCELoss(tau=TAU, within_view=False)
    if method == "Bimodal":
        return xr.BimodalContrastiveLoss(num_samples, tau=TAU, gamma=GAMMA)
    scheme = "individual" if method == "iSogCLR" else "global"
    return xr.GlobalContrastiveLoss(num_samples, tau=TAU, gamma=GAMMA, temperature_scheme=scheme)


def encoder() -> nn.Module:
    body = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2),
                         nn.ReLU(), nn.Flatten(), nn.LazyLinear(64), nn.ReLU())
    return nn.ModuleDict({"body": body, "head": nn.Sequential(nn.Linear(64, 64), nn.ReLU(),
                                                              nn.Linear(64, 32))})


def train(method: str, images: np.ndarray, epochs: int, seed: int) -> list[nn.Module]:
    """Train the method's encoders (one, or one per half) and return them."""
    torch.manual_seed(seed)
    encoders = [encoder() for _ in range(2 if method in TWO_ENCODERS else 1)]
    parts = ((slice(0, 14), slice(14, 28)) if method in TWO_ENCODERS
             else (slice(0, 28), slice(0, 28)))
    for model, rows in zip(encoders, parts, strict=False):
        model["body"](torch.zeros(1, 1, 28, 28)[:, :, rows])  # sizes the LazyLinear
    if method == "init":
        return encoders
    loss_fn = make_loss(method, len(images))
    scale = 2 * TAU if isinstance(loss_fn, xr.InfoNCELoss) else 1.0  # comparable LARS steps
    params = [p for model in encoders for p in model.parameters()]
    optimizer = xr.LARS(params, learning_rate=0.075 * BATCH_SIZE**0.5, weight_decay=1e-6,
                        momentum=0.9, trust_coefficient=1e-3)
    sampler = RandomSampler(len(images), BATCH_SIZE, seed=seed)
    first, second = encoders[0], encoders[-1]  # the same encoder for the unimodal losses
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for index in sampler:
            view1, view2 = (torch.from_numpy(v.astype(np.float32))[:, None] for v in
                            contrastive_views(images, index, seed=seed, epoch=epoch))
            z1 = first["head"](first["body"](view1[:, :, parts[0]]))
            z2 = second["head"](second["body"](view2[:, :, parts[1]]))
            loss = scale * loss_fn(z1, z2, torch.from_numpy(index))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"  {method} seed {seed} epoch {epoch + 1}: loss {loss.item():+.4f}", flush=True)
    return encoders


def represent(encoders: list[nn.Module], images: np.ndarray) -> np.ndarray:
    """The frozen representation: the whole digit, or each encoder's half side by side."""
    x = torch.from_numpy(images.astype(np.float32))[:, None]
    halves = (slice(0, 14), slice(14, 28)) if len(encoders) == 2 else (slice(0, 28),)
    with torch.no_grad():
        return torch.cat([m["body"](x[:, :, rows]) for m, rows in zip(encoders, halves,
                                                                      strict=True)], 1).numpy()


def probe(encoders: list[nn.Module], x_train, y_train, x_test, y_test) -> float:
    scaler = StandardScaler().fit(represent(encoders, x_train))
    classifier = LogisticRegression(max_iter=2000).fit(
        scaler.transform(represent(encoders, x_train)), y_train)
    return float(classifier.score(scaler.transform(represent(encoders, x_test)), y_test))


def main(argv: Sequence[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4000,
                        help="training digits (64 to 4000; fewer for a quick run)")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods or not set(methods) <= set(METHODS):
        parser.error(f"--methods: got {sorted(set(methods) - set(METHODS)) or 'nothing'}; "
                     f"expected names from {list(METHODS)}")
    for name, value, low, high in (("epochs", args.epochs, 1, None),
                                   ("seeds", args.seeds, 1, None),
                                   ("samples", args.samples, BATCH_SIZE, 4000)):
        if value < low or (high is not None and value > high):
            parser.error(f"--{name}: got {value}; expected {low} to {high or 'more'}")
    images, digits = load_mnist_5k()
    x_train, x_test, y_train, y_test = train_test_split(images, digits, test_size=1000,
                                                        stratify=digits, random_state=0)
    x_train, y_train = x_train[:args.samples], y_train[:args.samples]  # a shuffled order

    accuracy = {m: [probe(train(m, x_train, args.epochs, seed), x_train, y_train, x_test,
                            y_test) for seed in range(args.seeds)] for m in methods}
    print(f"\n{'method':<10}{'probe accuracy':>22}")
    for method, values in accuracy.items():
        print(f"{method:<10}{np.mean(values):>13.4f} +- {np.std(values):.4f}")
    print("\nThe paper's claim (the global loss beats the in-batch one at a small batch), "
          "as measured here (not asserted):")
    for method, baseline in CLAIMS:
        if method in accuracy and baseline in accuracy:
            gap = np.mean(accuracy[method]) - np.mean(accuracy[baseline])
            print(f"  {method} - {baseline}: {gap:+.4f}")
    return accuracy


if __name__ == "__main__":
    main()
