"""Imbalanced binary classification: X-risk methods against cross-entropy, with the runner.

The task: scikit-learn's handwritten digits (shipped, no download), 8 against the rest, with
the training positives subsampled to 4 % (validation and test keep the natural ~10 %). An
MLP (64 -> 32 -> 1) is trained with each method, each judged on its own metric:

- ``ce``: cross-entropy with Adam (the baseline), ``focal``: focal loss with Adam;
- ``pesg``: ``AUCMLoss`` (AUROC, min-max margin) with ``PESG``;
- ``soap``: ``APLoss`` (average precision, SOAP) with ``SOAP``.

The X-risk methods read batches with a quarter positives (``DualSampler``). This script
builds one runner recipe and calls :func:`xrisk.runner.compare`, which trains every method
and seed (early stopping on the validation split), writes logs, figures and
``report.md``, and returns the test metrics; the script prints them and the paper's
comparison as measured (not asserted)::

    python examples/imbalanced_classification.py
    python examples/imbalanced_classification.py --framework jax --seeds 1 --epochs 5
    python examples/imbalanced_classification.py --warmup-epochs 5   # the paper's recipe

``--warmup-epochs N`` trains N epochs of cross-entropy first and redraws the last layer
before the method starts (the pre-training recipe). The training loop the runner runs is
written out in ``examples/training_loop.py``; ``xrisk compare digits_ap --methods
ce,focal,pesg,soap`` runs the shipped version of this recipe from the command line.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from xrisk.runner import RecipeError, compare, load_recipe, print_comparison

METHODS = ("ce", "focal", "pesg", "soap")
METRICS = ("auroc", "ap")
#: (X-risk method, baseline, metric): the paper's claim is that the method wins there.
CLAIMS = tuple((method, baseline, metric) for method, metric in (("pesg", "auroc"), ("soap", "ap"))
               for baseline in ("ce", "focal"))


def make_recipe(args: argparse.Namespace) -> dict:
    return {
        "name": "imbalanced_classification", "method": "ce", "framework": args.framework,
        "seeds": args.seeds, "epochs": args.warmup_epochs + args.epochs,
        "data": {"name": "digits", "positive_class": 8, "imratio": 0.04},
        "model": {"name": "mlp", "hidden": [32]},
        "sampler": {"batch_size": 32, "sampling_rate": 0.25},
        "schedule": {"warmup_epochs": args.warmup_epochs,
                     "reinit_last_layer": args.warmup_epochs > 0},
        "evaluation": {"metrics": list(METRICS), "patience": 6},
    }


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--framework", choices=("torch", "tensorflow", "jax"), default="torch")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated runner methods (xrisk methods lists them)")
    parser.add_argument("--epochs", type=int, default=20, help="epochs after the warm-up")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--warmup-epochs", type=int, default=0)
    parser.add_argument("--out", default="runs/imbalanced_classification",
                        help="run folder (report.md, figures, logs, checkpoints)")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    try:
        recipe = load_recipe(make_recipe(args))
        results = compare(recipe, methods, args.out)
    except RecipeError as error:  # a bad option: the runner names the field and the fix
        parser.error(str(error))
    print()
    means = print_comparison(results, METRICS, CLAIMS)
    print(f"\nreport: {args.out}/report.md")
    return means


if __name__ == "__main__":
    main()
