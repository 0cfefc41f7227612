"""Learning to rank on MovieLens with xrisk in PyTorch, TensorFlow and JAX (NDCG, SONG, K-SONG).

The data: MovieLens ml-latest-small (shipped, no download) with the LibAUC paper's protocol
(:func:`xrisk.datasets.load_movielens`): per user, the last 5 ratings by time are the test
items, the 5 before them validation, the rest training; a user's relevance for a movie is its
rating. At test time every user ranks its 5 held-out movies among 100 movies it never rated.

The model: NeuMF (GMF + MLP towers over user and movie embeddings, as in the paper; the same
initial weights in every framework), trained on the batches of one
``TriSampler(mode="ranking")`` (users x (10 rated movies + 100 unrated ones)) with

- ``BCE``: pointwise cross-entropy, rated movies against sampled unrated ones;
- ``ListwiseCE``: ``ListwiseCELoss`` (the listwise cross-entropy);
- ``SONG``: ``NDCGLoss`` (NDCG by moving-average estimators);
- ``K-SONG``: ``NDCGLoss(top_k=10)`` (top-K NDCG, with the top-10 ideal DCG).

SONG and K-SONG start from the paper's warm-up (``_ranking.warm_up``: ListwiseCE first, then a
new last layer). All use LibAUC's clipped Adam (learning rate 1e-2, weight decay 1e-7, / 10
at 50 % and 75 % of the epochs; see ``_ranking.OPTIMIZER``) and gamma 0.1. The script prints
NDCG@5 and NDCG@10 on the test items of
every user, mean +- std over the seeds, and the paper's comparison as measured::

    python examples/ranking_movielens.py
    python examples/ranking_movielens.py --frameworks jax --epochs 5 --seeds 1 --users 100

The framework sections live in ``examples/_ranking.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _ranking as ranking  # noqa: E402  (the ranking examples' shared engine, next to this file)
from _ranking import Method  # noqa: E402

from xrisk.datasets import load_movielens  # noqa: E402
from xrisk.metrics import ndcg_at_k  # noqa: E402

TOP_K = 10
METHODS = {
    "BCE": Method("CrossEntropyLoss", optimizer="Adam",
                  optimizer_options={"learning_rate": 1e-2, "weight_decay": 1e-7}),
    "ListwiseCE": Method("ListwiseCELoss", {"gamma": 0.1}),
    "SONG": Method("NDCGLoss", {"gamma0": 0.1}, warm_up=True),
    "K-SONG": Method("NDCGLoss", {"gamma0": 0.1, "top_k": TOP_K}, warm_up=True, ideal_k=TOP_K),
}
METRICS = ("NDCG@5", "NDCG@10")
#: (method, baseline, metric): does SONG beat ListwiseCE, does K-SONG help NDCG@K.
COMPARISONS = (("SONG", "ListwiseCE", "NDCG@5"), ("SONG", "ListwiseCE", "NDCG@10"),
               ("K-SONG", "SONG", "NDCG@10"), ("K-SONG", "ListwiseCE", "NDCG@10"))
SIZES = {"factors": 16, "h1": 32, "h2": 16}
NUM_POS, NUM_NEG, BATCH_USERS, TEST_NEGATIVES = 10, 100, 32, 100


def make_task(num_users: int | None = None) -> ranking.Task:
    """The ranking task: the training ratings of the first ``num_users`` users (all by
    default) and their test candidates."""
    data = load_movielens()
    users = data.num_users if num_users is None else num_users
    rows = data.interactions("train")
    rows = rows[rows[:, 0] < users]
    items, relevance, test_users = data.eval_candidates("test", num_negatives=TEST_NEGATIVES)
    keep = test_users < users

    def evaluate(scores: np.ndarray) -> dict[str, float]:
        return {f"NDCG@{k}": float(ndcg_at_k(relevance[keep], scores, k)) for k in (5, 10)}

    return ranking.Task(
        name="movielens", rows=rows, num_queries=users, num_items=data.num_items,
        model="neumf", sizes=SIZES, evaluate=evaluate,
        test={"users": test_users[keep], "items": items[keep]},
        num_pos=NUM_POS, num_neg=NUM_NEG, batch_queries=min(BATCH_USERS, users))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    ranking.add_common_options(parser, list(METHODS), epochs=40, warm_up_epochs=10)
    parser.add_argument("--users", type=int, default=None,
                        help="train and test on the first N users only (default: all 610)")
    args = parser.parse_args(argv)
    ranking.check_common_options(parser, args, list(METHODS))
    if args.users is not None and not 2 <= args.users <= 610:
        parser.error(f"--users: got {args.users}; expected 2 to 610 (ml-latest-small's users)")
    return args


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Train every requested framework x method x seed; print and return the test NDCG."""
    args = parse_args(argv)
    ranking.import_frameworks(args.frameworks)
    task = make_task(args.users)
    print(f"MovieLens ml-latest-small: {task.num_queries} users, {task.num_items} movies, "
          f"{task.rows.shape[0]} training ratings; batches of {task.batch_queries} users x "
          f"({NUM_POS} rated + {NUM_NEG} unrated movies); test: 5 held-out + "
          f"{TEST_NEGATIVES} unrated movies per user", flush=True)
    results = ranking.run(args, task, METHODS)
    ranking.report(results, METRICS, args.frameworks, COMPARISONS)
    return results


if __name__ == "__main__":
    main()
