"""Partial AUC: one-way (FPR <= 0.3) and two-way (TPR >= 0.7, FPR <= 0.3) in PyTorch,
TensorFlow and JAX.

Partial AUC scores a classifier on the part of the ROC curve that matters when false
positives are expensive (one-way: low false-positive rates) or when both kinds of error are
(two-way: low false-positive rates at a high true-positive rate). The task is the one of
``imbalanced_classification.py``: scikit-learn's digits, 8 against the rest, 4 % positives in
the training split. The same MLP is trained in every framework with:

- ``CE``: ``CrossEntropyLoss`` with ``Adam`` (baseline);
- ``AUCM``: ``AUCMLoss`` with ``PESG`` (full AUROC);
- ``SOPA``: ``pAUC_CVaR_Loss`` (one-way pAUC, exact CVaR of the negatives' losses, FPR <= beta)
  with ``SOPA``;
- ``SOPAs``: ``pAUC_DRO_Loss`` (one-way pAUC, KL-regularised DRO) with ``SOPAs``;
- ``SOTAs``: ``tpAUC_KL_Loss`` (two-way pAUC, KL-DRO over positives and negatives) with
  ``SOTAs``;
- ``STACO``: ``tpAUC_CVaR_Loss`` (two-way pAUC, double CVaR) with ``STACO``.

It prints the test one-way pAUC (FPR <= 0.3), two-way pAUC (TPR >= 0.7, FPR <= 0.3), both
normalised to [0, 1], and the AUROC::

    python examples/partial_auc.py
    python examples/partial_auc.py --frameworks torch --methods SOPAs,SOTAs --epochs 10

The numbers are measured, not asserted: which method wins depends on the task and the
budget (the paper's claim is that the pAUC losses beat CE and AUC-M on pAUC).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _training as training  # noqa: E402  (the examples' shared engine, next to this file)
from _training import Method  # noqa: E402

from xrisk.metrics import auroc, one_way_partial_auroc, two_way_partial_auroc  # noqa: E402

MAX_FPR, MIN_TPR = 0.3, 0.7

#: LibAUC's tutorial settings for the pAUC losses (margin 0.6 on sigmoid scores, Adam mode at
#: learning rate 1e-3 raised to 3e-3 for 20 epochs on this small task), the same in every
#: framework.
ADAM = {"learning_rate": 3e-3}
METHODS = {
    "CE": Method("CrossEntropyLoss", "Adam", optimizer_options=ADAM, scores="logits",
                 sampler="random"),
    "AUCM": Method("AUCMLoss", "PESG", loss_options={"margin": 1.0, "version": "v2"},
                   optimizer_options={"learning_rate": 1.0, "epoch_decay": 2e-3},
                   min_max=True, stages=True),
    "SOPA": Method("pAUC_CVaR_Loss", "SOPA", loss_options={"beta": MAX_FPR, "margin": 0.6},
                   optimizer_options=ADAM),
    "SOPAs": Method("pAUC_DRO_Loss", "SOPAs",
                    loss_options={"gamma": 0.1, "lam": 1.0, "margin": 0.6},
                    optimizer_options=ADAM),
    "SOTAs": Method("tpAUC_KL_Loss", "SOTAs",
                    loss_options={"tau": 1.0, "lam": 1.0, "gammas": (0.1, 0.1), "margin": 0.6},
                    optimizer_options=ADAM),
    "STACO": Method("tpAUC_CVaR_Loss", "STACO",
                    # theta_1: the negatives' CVaR level (FPR); theta_0: the positives' (1 - TPR)
                    loss_options={"margin": 0.6, "theta_0": 1 - MIN_TPR, "theta_1": MAX_FPR},
                    optimizer_options=ADAM),
}
METRICS = {
    "pAUC(FPR<=.3)": functools.partial(one_way_partial_auroc, max_fpr=MAX_FPR),
    "tpAUC(.7,.3)": functools.partial(two_way_partial_auroc, max_fpr=MAX_FPR, min_tpr=MIN_TPR),
    "AUROC": auroc,
}


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], dict[str, float]]:
    """Train every requested framework x method; print and return the test metrics."""
    return training.run(argv, description=__doc__.partition("\n")[0], methods=METHODS,
                        metrics=METRICS, epochs=20)


if __name__ == "__main__":
    main()
