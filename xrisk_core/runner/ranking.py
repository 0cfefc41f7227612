"""Learning to rank in the runner: the data (MovieLens, LETOR), TriSampler batches, NDCG@K.

A ranking recipe (``data.name: movielens`` or ``letor``; ``task: ranking`` follows) trains a
scorer of ``(query, item)`` pairs on the batches of one
:class:`xrisk.samplers.TriSampler` in ranking mode (``sampler.num_queries`` queries x
(``num_pos`` rated + ``num_neg`` unrated items)) with one of the ranking methods
(:mod:`xrisk.runner.methods`: ``song``, ``ksong``, ``listwise_ce``, ``bce``), and judges it by
NDCG@K (and MAP / precision / recall @K) of the held-out items of every query.

- **MovieLens** (shipped ml-latest-small, the LibAUC paper's protocol,
  :func:`xrisk.datasets.load_movielens`): per user the last 5 ratings by time are the test
  items, the 5 before them validation; each user ranks its 5 held-out movies among 100
  movies it never rated (drawn once, seed 0, the same for every seed and method). Model:
  NeuMF (:func:`xrisk.runner.models.neumf_weights`: GMF + MLP towers over user and movie
  embeddings, 16 factors, ReLU tower widths ``model.hidden``). ``data.limit``: the first
  ``limit`` users.
- **LETOR** (the shipped LightGBM set, :func:`xrisk.datasets.load_lightgbm_rank`, or an
  svmlight file with ``qid`` at ``data.path``): ``validation_size`` of the training queries
  (seeded) are held out for validation; every document of a query is ranked. Model: an MLP
  over the standardized features (``model.hidden``).

The warm-up of the schedule (``schedule.warmup_epochs``) is the paper's: ListwiseCE
(gamma 0.1) with ``schedule.warmup_optimizer`` at ``warmup_learning_rate``, then a new last
layer (``reinit_last_layer``) before SONG / K-SONG start with a fresh loss state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .engine import Phase, _phase, session_class
from .models import layers_weights, mlp_weights, neumf_weights, weights_layers
from .recipe import Recipe

__all__ = ["Candidates", "RankingData", "load_ranking", "ranking_metrics", "ranking_weights",
           "layers_weights", "weights_layers", "ranking_phases", "batch_inputs",
           "RankingTask"]

#: NeuMF's embedding width for MovieLens (the towers' widths are ``model.hidden``).
NEUMF_FACTORS = 16
#: Unrated movies each user ranks its held-out movies among (the paper's protocol).
EVAL_NEGATIVES = 100
#: The warm-up's loss (the paper: ListwiseCE before SONG / K-SONG).
WARMUP_LOSS = ("ListwiseCELoss", {"gamma": 0.1})


@dataclass(frozen=True)
class Candidates:
    """What a split ranks: the model's ``inputs`` (``{"queries" (U,), "items" (U, C)}`` for
    NeuMF, ``{"rows" (N,)}``, rows of ``features``, for the MLP) and the ``relevance`` of
    each candidate, (U, C), or (N,) with ``query_ids`` (N,)."""

    inputs: dict[str, np.ndarray]
    relevance: np.ndarray
    query_ids: np.ndarray | None = None


@dataclass(frozen=True)
class RankingData:
    """A ranking data set as the runner trains it.

    ``rows`` (n, 3): the training interactions ``(query, item, relevance)`` of the
    TriSampler; ``model``: ``"neumf"`` (ids) or ``"mlp"`` (``features`` rows: the item of
    query ``q`` at position ``p`` is row ``offsets[q] + p``); ``num_candidates``: per-query
    candidate counts for ``NDCGLoss(num_items=None)`` (LETOR), None for a catalogue.
    """

    model: str
    rows: np.ndarray
    num_queries: int
    num_items: int
    val: Candidates
    test: Candidates
    features: np.ndarray | None = None
    offsets: np.ndarray | None = None
    num_candidates: np.ndarray | None = None

    def describe(self) -> str:
        return (f"{self.num_queries} queries, {self.num_items} items, {len(self.rows)} "
                f"training interactions, {self.test.relevance.size} test candidates")


def _movielens(section: Any) -> RankingData:
    from xrisk.datasets import load_movielens

    data = load_movielens()
    users = data.num_users if section.limit is None else min(section.limit, data.num_users)
    rows = data.interactions("train")
    rows = rows[rows[:, 0] < users]
    splits = []
    for split in ("val", "test"):
        items, relevance, queries = data.eval_candidates(split, num_negatives=EVAL_NEGATIVES,
                                                         seed=0)
        keep = queries < users
        splits.append(Candidates({"queries": queries[keep], "items": items[keep]},
                                 relevance[keep]))
    return RankingData("neumf", rows, users, data.num_items, splits[0], splits[1])


def _letor_file(section: Any, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if section.path is None:
        from xrisk.datasets import load_lightgbm_rank

        return load_lightgbm_rank(split)
    from sklearn.datasets import load_svmlight_file

    path = Path(section.path)
    if not path.is_file():
        raise FileNotFoundError(f"data.path: received {str(path)!r}, which is not a file. Fix: "
                                "give the svmlight file's path (one line per document, with "
                                "qid:<query>).")
    x, y, qid = load_svmlight_file(str(path), query_id=True)
    _, query = np.unique(qid, return_inverse=True)
    order = np.argsort(query, kind="stable")  # a query's documents contiguous
    return (np.asarray(x.toarray(), dtype=np.float64)[order], y.astype(np.int64)[order],
            query[order].astype(np.int64))


def _letor(section: Any, seed: int) -> RankingData:
    x, relevance, query = _letor_file(section, "train")
    if section.limit is not None:  # the first ``limit`` queries (smoke runs)
        first = query < section.limit
        x, relevance, query = x[first], relevance[first], query[first]
    num_queries = int(query.max()) + 1
    if section.path is None:
        x_test, rel_test, q_test = _letor_file(section, "test")
    else:
        x_test, rel_test, q_test = x[:0], relevance[:0], query[:0]
    held = np.random.default_rng([seed, 3]).permutation(num_queries)
    num_val = max(1, round(section.validation_size * num_queries)) \
        if section.validation_size > 0 else 0
    is_val = np.isin(query, held[:num_val])
    is_test_here = np.zeros_like(is_val)
    if section.path is not None:  # one file: the test queries come from it too
        num_test = max(1, round(section.test_size * num_queries))
        is_test_here = np.isin(query, held[num_val:num_val + num_test])
    train = ~is_val & ~is_test_here
    if section.path is not None:
        x_test, rel_test, q_test = x[is_test_here], relevance[is_test_here], query[is_test_here]
    mean, std = x[train].mean(axis=0), x[train].std(axis=0)
    std = np.where(std > 0, std, 1.0)

    def scaled(a: np.ndarray) -> np.ndarray:
        return (a - mean) / std

    # training queries renumbered 0..Q-1; documents are positions within their query
    _, q_train = np.unique(query[train], return_inverse=True)
    rel_train = relevance[train]
    counts = np.bincount(q_train)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    position = np.arange(q_train.size) - offsets[q_train]
    relevant = np.bincount(q_train, rel_train > 0, minlength=counts.size)
    trainable = (relevant > 0) & (relevant < counts)  # a positive and a negative to sample
    width = int(counts.max())
    # Rated: the relevant documents (their grade) and the padding positions past a query's
    # end (relevance 0, so never drawn as negatives); unrated, so sampled as negatives: the
    # query's documents of relevance 0.
    keep = trainable[q_train] & (rel_train > 0)
    docs = np.column_stack([q_train[keep], position[keep], rel_train[keep]])
    pad_query = np.repeat(np.arange(counts.size), width - counts)
    pad_position = np.concatenate([np.arange(c, width) for c in counts])
    pad = np.column_stack([pad_query, pad_position, np.zeros(pad_query.size)])
    rows = np.concatenate([docs, pad[trainable[pad_query]]]).astype(np.float64)
    if not trainable.any():
        raise ValueError(f"data: no training query of {section.path or 'the LETOR set'} has "
                         "both a relevant and an irrelevant document; expected some. Fix: "
                         "check the relevance labels.")

    def candidates(features: np.ndarray, rel: np.ndarray, qid: np.ndarray) -> Candidates:
        return Candidates({"features": scaled(features)}, rel.astype(np.float64), qid)

    return RankingData(
        "mlp", rows, int(counts.size), width,
        candidates(x[is_val], relevance[is_val], query[is_val]),
        candidates(x_test, rel_test, q_test), features=scaled(x[train]), offsets=offsets,
        num_candidates=counts.astype(np.float64))


def load_ranking(section: Any, *, seed: int) -> RankingData:
    """The ranking data a recipe's ``data`` section names (``movielens`` or ``letor``).

    ``seed`` draws LETOR's validation (and, for a single file, test) queries; MovieLens's
    splits are the protocol's, the same for every seed.

    Examples
    --------
    >>> from xrisk.runner.ranking import load_ranking
    >>> from xrisk.runner.recipe import parse_recipe
    >>> recipe = parse_recipe({"data": {"name": "movielens", "limit": 50}, "method": "song"})
    >>> data = load_ranking(recipe.data, seed=0)
    >>> data.model, data.num_queries, data.test.inputs["items"].shape
    ('neumf', 50, (50, 105))
    """
    if section.name == "movielens":
        return _movielens(section)
    if section.name == "letor":
        return _letor(section, seed)
    raise ValueError(f"data.name: received {section.name!r}; expected a ranking data set "
                     "('movielens' or 'letor'). Fix: use the binary runner for it.")


def ranking_weights(data: RankingData, hidden: tuple[int, ...], *, seed: int,
                    dtype: str) -> dict[str, np.ndarray]:
    """Initial weights (numpy, the same for every framework) of the data's scorer, in the
    canonical layout of :mod:`xrisk.runner.models` (its output layer is ``out``).

    NeuMF: :func:`xrisk.runner.models.neumf_weights` with :data:`NEUMF_FACTORS` factors and
    tower widths ``hidden`` (ReLU). MLP: :func:`xrisk.runner.models.mlp_weights`
    ``features -> hidden... -> 1``, as ``mlp.<i>/kernel`` (in, out), ``mlp.<i>/bias`` and
    ``out/...``.
    """
    if data.model == "neumf":
        return neumf_weights(data.num_queries, data.num_items, factors=NEUMF_FACTORS,
                             hidden=hidden, seed=seed, dtype=dtype)
    if data.features is None:
        raise ValueError("ranking_weights: an MLP scorer needs the data's features.")
    return layers_weights(mlp_weights(data.features.shape[1], hidden, 1, seed=seed,
                                      dtype=dtype))


def ranking_phases(recipe: Recipe) -> tuple[Phase | None, Phase]:
    """The warm-up phase (ListwiseCE, the paper's; None without warm-up epochs) and the
    main one."""
    main = _phase("main", recipe.loss.name, dict(recipe.loss.options), recipe.optimizer.name,
                  dict(recipe.optimizer.options))
    schedule = recipe.schedule
    if not schedule.warmup_epochs:
        return None, main
    return _phase("warmup", WARMUP_LOSS[0], dict(WARMUP_LOSS[1]), schedule.warmup_optimizer,
                  {"learning_rate": schedule.warmup_learning_rate}), main


def ranking_loss_arguments(phase: Phase, data: RankingData, sampler: Any) -> dict[str, Any]:
    """``xr.<phase.loss>(...)``'s arguments: the data's sizes, then the phase's options."""
    options: dict[str, Any] = {}
    if phase.loss == "ListwiseCELoss":
        options["num_interactions"] = sampler.num_interactions
    elif phase.loss == "NDCGLoss":
        options.update(num_interactions=sampler.num_interactions,
                       num_queries=sampler.num_queries,
                       num_items=None if data.num_candidates is not None else sampler.num_items)
    options.update(phase.loss_options)
    return options


def batch_inputs(phase: Phase, data: RankingData, sampler: Any, items: np.ndarray,
                 queries: np.ndarray, dtype: str) -> dict[str, dict[str, np.ndarray]]:
    """One TriSampler batch as a session trains on it: the model's inputs (ids for NeuMF,
    feature ``rows`` for the MLP) and the loss's keyword inputs (pointwise cross-entropy:
    0/1 ``labels``, the rated items first)."""
    cast = np.dtype(dtype)
    if data.model == "neumf":
        model = {"queries": queries, "items": items}
    else:
        offsets = np.asarray(data.offsets)
        model = {"rows": offsets[queries][:, None] + items}
    if phase.loss == "CrossEntropyLoss":
        labels = np.zeros(items.shape, cast)
        labels[:, : sampler.num_pos] = 1
        return {"model": model, "loss": {"labels": labels.reshape(-1)}}
    top_k = phase.loss_options.get("top_k")
    inputs = sampler.ranking_inputs(items, queries, ideal_k=top_k)
    if phase.loss == "ListwiseCELoss":
        inputs = {"interaction": inputs["interaction"], "mask": inputs["mask"]}
    elif data.num_candidates is not None:
        inputs["num_candidates"] = data.num_candidates[queries]
    loss = {k: v.astype(cast) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    return {"model": model, "loss": loss}


def ranking_metrics(names: tuple[str, ...] | list[str], candidates: Candidates,
                    scores: np.ndarray) -> dict[str, float]:
    """``{"ndcg@10": ...}``: each ``<name>@<K>`` averaged over the queries (queries without a
    relevant candidate skipped)."""
    from xrisk import metrics

    functions: dict[str, Callable[..., Any]] = {
        "ndcg": metrics.ndcg_at_k, "map": metrics.map_at_k,
        "precision": metrics.precision_at_k, "recall": metrics.recall_at_k}
    if candidates.relevance.size == 0:
        return {}
    out = {}
    for name in names:
        head, _, k = name.partition("@")
        out[name] = float(functions[head](candidates.relevance, scores, int(k),
                                          query_ids=candidates.query_ids))
    return out


class RankingTask:
    """Learning to rank in :func:`xrisk.runner.engine.run_seed`'s loop: TriSampler batches
    (queries x (rated + unrated items)), NDCG@K (and MAP / precision / recall @K) of each
    query's held-out candidates, the ListwiseCE warm-up."""

    reinit_stream = 2

    def __init__(self, recipe: Recipe, seed: int) -> None:
        from xrisk.samplers import TriSampler

        self.recipe = recipe
        self.data = data = load_ranking(recipe.data, seed=seed)
        s = recipe.sampler
        self.sampler = TriSampler(data.rows, s.num_pos + s.num_neg, num_pos=s.num_pos,
                                  num_sampled_tasks=min(s.num_queries, data.num_queries),
                                  mode="ranking", num_items=data.num_items, seed=seed)
        weights = ranking_weights(data, recipe.model.hidden, seed=seed, dtype=recipe.dtype)
        self.session = session_class(recipe.framework, "RankingSession")(
            data, weights, activation=recipe.model.activation, dtype=recipe.dtype, seed=seed)
        self.warmup, self.main = ranking_phases(recipe)
        self.names = list(dict.fromkeys([*recipe.evaluation.metrics, recipe.metric]))

    def start(self, phase: Phase) -> None:
        self.session.start(phase, ranking_loss_arguments(phase, self.data, self.sampler))

    def decay(self, factor: float) -> None:
        self.session.decay(factor)

    def batches(self, phase: Phase, epoch: int) -> Iterator[dict[str, dict[str, np.ndarray]]]:
        return (batch_inputs(phase, self.data, self.sampler, items, queries, self.recipe.dtype)
                for items, queries in self.sampler)

    def evaluate(self, split: str) -> dict[str, float]:
        candidates = getattr(self.data, split)
        return ranking_metrics(self.names, candidates, self.session.predict(candidates.inputs))

    def finish(self) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
        data = self.data
        test_scores = self.session.predict(data.test.inputs)
        val_scores = self.session.predict(data.val.inputs)
        # the report's ROC / PR figures read these: relevant (rating > 0) against not,
        # flattened
        return (ranking_metrics(self.names, data.test, test_scores),
                ranking_metrics(self.names, data.val, val_scores),
                {"test_logits": test_scores.reshape(-1),
                 "y_test": (data.test.relevance.reshape(-1) > 0).astype(np.int64),
                 "val_logits": val_scores.reshape(-1),
                 "y_val": (data.val.relevance.reshape(-1) > 0).astype(np.int64),
                 "test_relevance": data.test.relevance})
