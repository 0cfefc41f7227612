"""Partial AUC, one-way (FPR <= 0.3) and two-way (TPR >= 0.7, FPR <= 0.3), with the runner.

Partial AUC scores a classifier on the part of the ROC curve that matters when false
positives are expensive (one-way: low false-positive rates) or when both kinds of error are
(two-way: low false-positive rates at a high true-positive rate). The task is the one of
``imbalanced_classification.py``: digits, 8 against the rest, 4 % positives in training. The
same MLP is trained with each method at the options below (LibAUC's tutorial settings:
margin 0.6 on sigmoid scores, Adam mode at learning rate 3e-3):

- ``ce``: cross-entropy with Adam (baseline); ``pesg``: ``AUCMLoss`` + ``PESG`` (full AUROC);
- ``sopa``: ``pAUC_CVaR_Loss`` (one-way, exact CVaR of the negatives' losses) + ``SOPA``;
- ``sopas``: ``pAUC_DRO_Loss`` (one-way, KL-regularised DRO) + ``SOPAs``;
- ``sotas``: ``tpAUC_KL_Loss`` (two-way, KL-DRO over both classes) + ``SOTAs``;
- ``staco``: ``tpAUC_CVaR_Loss`` (two-way, double CVaR) + ``STACO``.

Each method is one runner recipe trained by :func:`xrisk.runner.train` (early stopping on
its own metric on the validation split) into one run folder, with one report.
The script prints the test one-way and two-way pAUC (normalised to [0, 1]) and AUROC, and
the paper's comparison as measured (not asserted)::

    python examples/partial_auc.py
    python examples/partial_auc.py --framework jax --methods ce,sopas,sotas --seeds 1

The loop of one method is written out in ``training_loop.py`` (swap ``APLoss`` + ``SOAP``
for ``pAUC_DRO_Loss`` + ``SOPAs``: the same calls).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from xrisk.runner import RecipeError, load_recipe, print_comparison, train

MAX_FPR, MIN_TPR = 0.3, 0.7
ADAM = {"learning_rate": 3e-3}
#: method -> (loss options, optimizer options); the rest are the method's defaults.
METHODS = {
    "ce": ({}, ADAM),
    "pesg": ({"margin": 1.0, "version": "v2"}, {"learning_rate": 1.0, "epoch_decay": 2e-3}),
    "sopa": ({"beta": MAX_FPR, "margin": 0.6}, ADAM),
    "sopas": ({"gamma": 0.1, "lam": 1.0, "margin": 0.6}, ADAM),
    "sotas": ({"tau": 1.0, "lam": 1.0, "gammas": [0.1, 0.1], "margin": 0.6}, ADAM),
    # theta_1: the negatives' CVaR level (FPR); theta_0: the positives' (1 - TPR)
    "staco": ({"margin": 0.6, "theta_0": 1 - MIN_TPR, "theta_1": MAX_FPR}, ADAM),
}
METRICS = ("pauc", "tpauc", "auroc")
#: (method, baseline, metric): the pAUC losses against CE and AUC-M on their own metric.
CLAIMS = tuple((method, baseline, metric)
               for method, metric in (("sopa", "pauc"), ("sopas", "pauc"), ("sotas", "tpauc"),
                                      ("staco", "tpauc"))
               for baseline in ("ce", "pesg"))


def make_recipe(method: str, args: argparse.Namespace) -> dict:
    loss_options, optimizer_options = METHODS[method]
    return {
        "name": "partial_auc", "method": method, "framework": args.framework,
        "seeds": args.seeds, "epochs": args.epochs,
        "data": {"name": "digits", "positive_class": 8, "imratio": 0.04},
        "model": {"name": "mlp", "hidden": [32]},
        "loss": {"options": loss_options}, "optimizer": {"options": optimizer_options},
        "sampler": {"batch_size": 32, "sampling_rate": 0.25},
        "schedule": {"decay_at": [0.5, 0.75] if method == "pesg" else []},
        "evaluation": {"metrics": list(METRICS), "max_fpr": MAX_FPR, "min_tpr": MIN_TPR,
                       "patience": 6},
    }


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--framework", choices=("torch", "tensorflow", "jax"), default="torch")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="runs/partial_auc",
                        help="run folder (report.md, figures, logs, checkpoints)")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        parser.error(f"--methods: got {unknown or 'nothing'}; expected names from "
                     f"{list(METHODS)}")
    try:  # every recipe is checked before the first trains
        recipes = {m: load_recipe(make_recipe(m, args)) for m in methods}
    except RecipeError as error:  # a bad option: the runner names the field and the fix
        parser.error(str(error))
    # One run folder: the last method's train() writes the report of every run in it.
    results = {m: train(recipe, args.out, write_report=m == methods[-1])
               for m, recipe in recipes.items()}

    print()
    means = print_comparison(results, METRICS, CLAIMS)
    print(f"\nreport: {args.out}/report.md")
    return means


if __name__ == "__main__":
    main()
