"""Learning to rank documents (relevance 0-4) with the runner, beside LightGBM's lambdarank.

The data: LightGBM's learning-to-rank example set (shipped, no download;
:func:`xrisk.datasets.load_lightgbm_rank`): 300 features per document, relevance 0-4, 201
training queries (a fifth held out for validation) and 50 test queries, each with its own
documents. An MLP (300 -> 64 -> 32 -> 1) scores every document; batches hold 16 queries x
(6 relevant + 4 irrelevant documents of the query) (``TriSampler(mode="ranking")``), and
``NDCGLoss`` takes each query's document count as its candidate count. The methods:

- ``listwise_ce``: ``ListwiseCELoss``, the listwise baseline;
- ``song``: ``NDCGLoss`` (SONG); ``ksong``: ``NDCGLoss(top_k=10)`` (K-SONG).

The paper's recipe comes first for every method: ``--warmup-epochs`` of ListwiseCE, then a
new output layer. :func:`xrisk.runner.compare` trains every method and seed and writes
``report.md``. The script prints test NDCG@10, mean ± sample std over the seeds, next to
``lightgbm.LGBMRanker`` (objective ``lambdarank``, the settings of LightGBM's example) when
LightGBM is installed (``pip install xrisk[bench]``)::

    python examples/ranking_letor.py
    python examples/ranking_letor.py --framework jax --epochs 5 --seeds 1 --no-lightgbm
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Sequence

import numpy as np

from xrisk.datasets import load_lightgbm_rank
from xrisk.metrics import ndcg_at_k
from xrisk.runner import RecipeError, compare, load_recipe

METHODS = ("listwise_ce", "song", "ksong")
#: (method, baseline): the paper's comparison on test NDCG@10.
CLAIMS = (("song", "listwise_ce"), ("ksong", "song"), ("ksong", "listwise_ce"))
#: LightGBM's lambdarank example (examples/lambdarank/train.conf), 100 trees.
LIGHTGBM = {"objective": "lambdarank", "n_estimators": 100, "learning_rate": 0.1,
            "num_leaves": 31, "min_child_samples": 50, "min_child_weight": 5.0,
            "verbose": -1, "n_jobs": 1}


def make_recipe(args: argparse.Namespace) -> dict:
    return {
        "name": "ranking_letor", "method": "song", "framework": args.framework,
        "seeds": args.seeds, "epochs": args.warmup_epochs + args.epochs,
        "data": {"name": "letor"},
        "model": {"name": "mlp", "hidden": [64, 32]},
        "sampler": {"name": "tri", "num_queries": 16, "num_pos": 6, "num_neg": 4},
        "schedule": {"warmup_epochs": args.warmup_epochs,
                     "reinit_last_layer": args.warmup_epochs > 0},
        "evaluation": {"metrics": ["ndcg@10"], "patience": 5},
    }


def lightgbm_ndcg(seeds: int) -> list[float]:
    """LightGBM's lambdarank on the whole training split, test NDCG@10 per seed."""
    import lightgbm

    x_train, rel_train, qid_train = load_lightgbm_rank("train")
    x_test, rel_test, qid_test = load_lightgbm_rank("test")
    values = []
    for seed in range(seeds):
        model = lightgbm.LGBMRanker(random_state=seed, **LIGHTGBM)
        model.fit(x_train, rel_train, group=np.bincount(qid_train))
        values.append(float(ndcg_at_k(rel_test, model.predict(x_test), 10, query_ids=qid_test)))
    return values


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--framework", choices=("torch", "tensorflow", "jax"), default="torch")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated subset of {','.join(METHODS)}")
    parser.add_argument("--epochs", type=int, default=30, help="epochs after the warm-up")
    parser.add_argument("--warmup-epochs", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-lightgbm", action="store_true",
                        help="leave LightGBM's lambdarank row out")
    parser.add_argument("--out", default="runs/ranking_letor",
                        help="run folder (report.md, figures, logs, checkpoints)")
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not set(methods) <= set(METHODS):
        parser.error(f"--methods: got {sorted(set(methods) - set(METHODS))}; expected "
                     f"names from {list(METHODS)}")
    try:
        results = compare(load_recipe(make_recipe(args)), methods, args.out)
    except RecipeError as error:  # a bad option: the runner names the field and the fix
        parser.error(str(error))
    values = {method: [run.test["ndcg@10"] for run in runs] for method, runs in results.items()}
    if args.no_lightgbm:
        pass
    elif importlib.util.find_spec("lightgbm") is None:
        print("LightGBM is not installed (pip install xrisk[bench]): its row is left out.")
    else:
        values["lightgbm"] = lightgbm_ndcg(args.seeds)

    print(f"\n{'method':<12}{'test ndcg@10':>22}")
    for method, runs in values.items():
        std = np.std(runs, ddof=1) if len(runs) > 1 else 0.0  # the report's sample std
        print(f"{method:<12}{np.mean(runs):>13.4f} ± {std:.4f}")
    means = {method: float(np.mean(runs)) for method, runs in values.items()}
    print("\nThe paper's comparison, as measured here (not asserted):")
    for method, baseline in CLAIMS:
        if method in means and baseline in means:
            print(f"  {method} - {baseline} on test ndcg@10: "
                  f"{means[method] - means[baseline]:+.4f}")
    print(f"\nreport: {args.out}/report.md")
    return means


if __name__ == "__main__":
    main()
