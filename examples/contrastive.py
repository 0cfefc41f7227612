"""Self-supervised contrastive learning at a small batch (64): global contrastive losses
(SogCLR, iSogCLR, bimodal) against in-batch InfoNCE, in PyTorch, TensorFlow and JAX.

The data are MNIST-5k's digits (shipped with xrisk): 4,000 for contrastive training (no
labels) and 1,000 held out. Every digit gets two random augmentations (shift, contrast,
noise) per epoch from :func:`xrisk.datasets.contrastive_views`. A small conv encoder (two
3x3 stride-2 convolutions, a 64-d representation, a two-layer projection head to 32-d) is
trained with :class:`xrisk.LARS`, the same initial weights and batches in every framework:

- ``init``: no training; the probe of the random initial encoder (a reference point);
- ``InfoNCE``: ``InfoNCELoss`` (SimCLR's NT-Xent: the negatives of the mini-batch only);
- ``SogCLR``: ``GlobalContrastiveLoss`` (a moving-average estimator per digit stands in for
  all the negatives of the data set);
- ``iSogCLR``: ``GlobalContrastiveLoss(temperature_scheme="individual")`` (a temperature per
  digit, learned);
- ``CLIP`` and ``Bimodal``: two modalities of a digit, the top half of one view and the
  bottom half of the other, each with its own encoder: CLIP's in-batch loss
  (``InfoNCELoss(within_view=False)``) against ``BimodalContrastiveLoss``.

After training, a linear probe (logistic regression on the frozen, standardised
representation, fitted on the training digits' labels) is scored on the held-out digits; the
script prints its accuracy, mean +- std over seeds::

    python examples/contrastive.py
    python examples/contrastive.py --frameworks jax --methods InfoNCE,SogCLR --epochs 5

The paper's claim (the global loss beats InfoNCE at a small batch) is printed as measured,
not asserted: on a data set this small and a budget this short, either can come out ahead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _contrastive_training as training  # noqa: E402  (the engine, next to this file)
from _contrastive_training import Method  # noqa: E402

TAU = 0.2  # one temperature for every unimodal loss (iSogCLR's initial one)
GAMMA = 0.9  # weight of the new mini-batch estimate in the moving averages
METHODS = {
    "init": Method(None),
    "InfoNCE": Method("InfoNCELoss", {"tau": TAU}),
    "SogCLR": Method("GlobalContrastiveLoss", {"tau": TAU, "gamma": GAMMA}),
    "iSogCLR": Method("GlobalContrastiveLoss", {"tau": TAU, "gamma": GAMMA,
                                                "temperature_scheme": "individual"}),
    "CLIP": Method("InfoNCELoss", {"tau": TAU, "within_view": False}, inputs="halves"),
    "Bimodal": Method("BimodalContrastiveLoss", {"tau": TAU, "gamma": GAMMA},
                      inputs="halves"),
}
#: (method, its in-batch baseline) pairs whose gap the claim line reports.
COMPARISONS = (("SogCLR", "InfoNCE"), ("iSogCLR", "InfoNCE"), ("Bimodal", "CLIP"))


def main(argv: Sequence[str] | None = None) -> training.Results:
    """Train every requested framework x method x seed; print and return the accuracies."""
    return training.run(argv, description=__doc__.partition("\n")[0], methods=METHODS,
                        comparisons=COMPARISONS, epochs=10)


if __name__ == "__main__":
    main()
