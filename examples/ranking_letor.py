"""Learning to rank documents (graded relevance 0-4) with xrisk in PyTorch, TensorFlow and JAX,
side by side with LightGBM's lambdarank.

The data: LightGBM's learning-to-rank example set (shipped, no download;
:func:`xrisk.datasets.load_lightgbm_rank`): 300 features per document, relevance 0-4, 201
training and 50 test queries, each with its own documents. Features are standardised on the
training split.

The sampler: a query's candidates are its own documents, so the items of the
``TriSampler(mode="ranking")`` are document *positions within their query*; the positions past
a query's last document are listed as rated (relevance 0), so the unrated items it samples as
negatives are exactly the query's documents of relevance 0. Queries with no document of
relevance 0 (57 of the 201) have nothing to sample as a negative and are left out of the
xrisk training (LightGBM trains on all of them). ``NDCGLoss(num_items=None)`` takes each
query's document count as its candidate count.

The model: an MLP scorer (300 -> 64 -> 32 -> 1, the same initial weights everywhere), with

- ``ListwiseCE``: ``ListwiseCELoss``;
- ``SONG``: ``NDCGLoss``;
- ``K-SONG``: ``NDCGLoss(top_k=10)`` (with the top-10 ideal DCG);

SONG and K-SONG start from the paper's warm-up (``_ranking.warm_up``). The script prints
NDCG@10 on the test queries, mean +- std over the seeds, next to ``lightgbm.LGBMRanker``
(objective ``lambdarank``, the settings of LightGBM's example) when LightGBM is installed
(``pip install xrisk[bench]``)::

    python examples/ranking_letor.py
    python examples/ranking_letor.py --frameworks torch --epochs 5 --seeds 1

The framework sections live in ``examples/_ranking.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _ranking as ranking  # noqa: E402  (the ranking examples' shared engine, next to this file)
from _ranking import Method  # noqa: E402

from xrisk.datasets import load_lightgbm_rank  # noqa: E402
from xrisk.metrics import ndcg_at_k  # noqa: E402

TOP_K = 10
METHODS = {
    "ListwiseCE": Method("ListwiseCELoss", {"gamma": 0.1}),
    "SONG": Method("NDCGLoss", {"gamma0": 0.1}, warm_up=True),
    "K-SONG": Method("NDCGLoss", {"gamma0": 0.1, "top_k": TOP_K}, warm_up=True, ideal_k=TOP_K),
}
METRICS = ("NDCG@10",)
COMPARISONS = (("SONG", "ListwiseCE", "NDCG@10"), ("K-SONG", "SONG", "NDCG@10"),
               ("K-SONG", "ListwiseCE", "NDCG@10"))
SIZES = {"h1": 64, "h2": 32}
NUM_POS, NUM_NEG, BATCH_QUERIES = 6, 4, 16
#: LightGBM's lambdarank example (examples/lambdarank/train.conf), 100 trees.
LIGHTGBM = {"objective": "lambdarank", "n_estimators": 100, "learning_rate": 0.1,
            "num_leaves": 31, "min_child_samples": 50, "min_child_weight": 5.0,
            "verbose": -1, "n_jobs": 1}


def standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = train.mean(axis=0), train.std(axis=0)
    std = np.where(std > 0, std, 1.0)  # constant features stay 0
    return ((train - mean) / std).astype(np.float32), ((test - mean) / std).astype(np.float32)


def make_task() -> ranking.Task:
    x_train, rel_train, qid_train = load_lightgbm_rank("train")
    x_test, rel_test, qid_test = load_lightgbm_rank("test")
    x_train, x_test = standardise(x_train, x_test)
    counts = np.bincount(qid_train)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    position = np.arange(qid_train.size) - offsets[qid_train]
    relevant = np.bincount(qid_train, rel_train > 0, minlength=counts.size)
    trainable = (relevant > 0) & (relevant < counts)  # a positive and a negative to sample
    width = int(counts.max())
    # Rated: the relevant documents (their grade) and the padding positions (relevance 0);
    # unrated, so sampled as negatives: the query's documents of relevance 0.
    keep = trainable[qid_train] & (rel_train > 0)
    docs = np.column_stack([qid_train[keep], position[keep], rel_train[keep]])
    pad_query = np.repeat(np.arange(counts.size), width - counts)
    pad_position = np.concatenate([np.arange(c, width) for c in counts])
    pad = np.column_stack([pad_query, pad_position, np.zeros(pad_query.size)])
    rows = np.concatenate([docs, pad[trainable[pad_query]]]).astype(np.float64)

    def evaluate(scores: np.ndarray) -> dict[str, float]:
        return {"NDCG@10": float(ndcg_at_k(rel_test, scores, TOP_K, query_ids=qid_test))}

    return ranking.Task(
        name="letor", rows=rows, num_queries=int(counts.size), num_items=width, model="mlp",
        sizes=SIZES, evaluate=evaluate, test={"features": x_test}, num_pos=NUM_POS,
        num_neg=NUM_NEG, batch_queries=BATCH_QUERIES, features=x_train, offsets=offsets,
        num_candidates=counts.astype(np.float32))


def lightgbm_row(seeds: int) -> dict[str, Any] | None:
    """LightGBM's lambdarank on the same split, NDCG@10 with the same metric (None when
    LightGBM is not installed)."""
    if importlib.util.find_spec("lightgbm") is None:
        print("LightGBM is not installed (pip install xrisk[bench]): its row is left out.")
        return None
    import lightgbm

    x_train, rel_train, qid_train = load_lightgbm_rank("train")
    x_test, rel_test, qid_test = load_lightgbm_rank("test")
    values, start = [], time.perf_counter()
    for seed in range(seeds):
        model = lightgbm.LGBMRanker(random_state=seed, **LIGHTGBM)
        model.fit(x_train, rel_train, group=np.bincount(qid_train))
        scores = model.predict(x_test)
        values.append(float(ndcg_at_k(rel_test, scores, TOP_K, query_ids=qid_test)))
    print(f"{'lightgbm':<10} {'lambdarank':<10} test NDCG@10 {np.mean(values):.4f} +- "
          f"{np.std(values):.4f}  ({seeds} seeds, {time.perf_counter() - start:.1f} s)")
    return {"NDCG@10": float(np.mean(values)), "NDCG@10 std": float(np.std(values)),
            "NDCG@10 runs": values, "epoch seconds": float("nan")}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    ranking.add_common_options(parser, list(METHODS), epochs=40, warm_up_epochs=10)
    parser.add_argument("--no-lightgbm", action="store_true",
                        help="leave LightGBM's lambdarank row out")
    args = parser.parse_args(argv)
    ranking.check_common_options(parser, args, list(METHODS))
    return args


def main(argv: Sequence[str] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Train every requested framework x method x seed; print and return the test NDCG@10."""
    args = parse_args(argv)
    ranking.import_frameworks(args.frameworks)
    task = make_task()
    sampler = task.sampler(0)
    print(f"LightGBM rank set: {task.num_queries} training queries ({sampler.num_tasks} with "
          f"a relevant and an irrelevant document are sampled), {task.features.shape[0]} "
          f"documents; batches of {task.batch_queries} queries x ({NUM_POS} relevant + "
          f"{NUM_NEG} irrelevant documents); test: {task.test['features'].shape[0]} documents "
          "in 50 queries", flush=True)
    results = ranking.run(args, task, METHODS)
    if not args.no_lightgbm:
        row = lightgbm_row(args.seeds)
        if row is not None:
            results["lightgbm", "lambdarank"] = row
    ranking.report(results, METRICS, args.frameworks, COMPARISONS)
    return results


if __name__ == "__main__":
    main()
