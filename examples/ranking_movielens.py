"""Learning to rank on MovieLens with the runner: SONG and K-SONG against ListwiseCE and BCE.

The data: MovieLens ml-latest-small (shipped, no download) with the LibAUC paper's protocol
(:func:`xrisk.datasets.load_movielens`): per user the last 5 ratings by time are the test
items, the 5 before them validation, the rest training; a user's relevance for a movie is
its rating, and every user ranks its held-out movies among 100 movies it never rated. The
model is NeuMF (user and movie embeddings, GMF + MLP towers), trained on batches of 32
users x (10 rated + 100 unrated movies) (``TriSampler(mode="ranking")``) with

- ``bce``: pointwise cross-entropy, rated movies against sampled unrated ones (Adam);
- ``listwise_ce``: ``ListwiseCELoss``, the listwise baseline;
- ``song``: ``NDCGLoss`` (NDCG by moving-average estimators);
- ``ksong``: ``NDCGLoss(top_k=10)`` (top-K NDCG, with the top-10 ideal DCG).

The paper's recipe comes first for every method: ``--warmup-epochs`` of ListwiseCE, then a
new output layer. :func:`xrisk.runner.compare` trains every method and seed (early stopping
on validation NDCG@10) and writes ``report.md``; the script prints test NDCG@5 and NDCG@10,
mean ± sample std over the seeds, and the paper's comparison as measured (not asserted)::

    python examples/ranking_movielens.py
    python examples/ranking_movielens.py --framework jax --seeds 1 --users 100

``xrisk reproduce ranking`` runs the shipped version of this recipe. A ranking loop written
out (NDCGLoss with a TriSampler in each framework) is in docs/guides/ranking.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from xrisk.runner import RecipeError, compare, load_recipe, print_comparison

METHODS = ("bce", "listwise_ce", "song", "ksong")
METRICS = ("ndcg@5", "ndcg@10")
#: (method, baseline, metric): does SONG beat ListwiseCE, does K-SONG help NDCG@10.
CLAIMS = (("song", "listwise_ce", "ndcg@5"), ("song", "listwise_ce", "ndcg@10"),
          ("ksong", "song", "ndcg@10"), ("ksong", "listwise_ce", "ndcg@10"))


def make_recipe(args: argparse.Namespace) -> dict:
    return {
        "name": "ranking_movielens", "method": "song", "framework": args.framework,
        "seeds": args.seeds, "epochs": args.warmup_epochs + args.epochs,
        "data": {"name": "movielens", "limit": args.users},
        "model": {"hidden": [32, 16]},
        "sampler": {"name": "tri", "num_queries": 32, "num_pos": 10, "num_neg": 100},
        "schedule": {"warmup_epochs": args.warmup_epochs, "warmup_optimizer": "Adam",
                     "warmup_learning_rate": 1e-2,
                     "reinit_last_layer": args.warmup_epochs > 0, "decay_at": [0.5, 0.75]},
        "evaluation": {"metrics": list(METRICS), "patience": 5},
    }


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--framework", choices=("torch", "tensorflow", "jax"), default="torch")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=12, help="epochs after the warm-up")
    parser.add_argument("--warmup-epochs", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--users", type=int, default=None,
                        help="train and test on the first N users only (default: all 610)")
    parser.add_argument("--out", default="runs/ranking_movielens",
                        help="run folder (report.md, figures, logs, checkpoints)")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not set(methods) <= set(METHODS):
        parser.error(f"--methods: got {sorted(set(methods) - set(METHODS))}; expected "
                     f"names from {list(METHODS)}")
    if args.users is not None and not 20 <= args.users <= 610:
        parser.error(f"--users: got {args.users}; expected 20 to 610 (ml-latest-small's users)")
    try:
        results = compare(load_recipe(make_recipe(args)), methods, args.out)
    except RecipeError as error:  # a bad option: the runner names the field and the fix
        parser.error(str(error))

    print()
    means = print_comparison(results, METRICS, CLAIMS)
    print(f"\nreport: {args.out}/report.md")
    return means


if __name__ == "__main__":
    main()
