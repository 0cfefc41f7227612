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

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, write_json_atomic
from .engine import (
    Phase,
    RunResult,
    _phase,
    _prefixed,
    _Progress,
    _unprefixed,
    _write_logs,
    import_framework,
    track_best,
)
from .models import glorot_layer, layers_weights, mlp_weights, neumf_weights, weights_layers
from .recipe import Recipe, RecipeError

__all__ = ["Candidates", "RankingData", "load_ranking", "ranking_metrics", "ranking_weights",
           "layers_weights", "weights_layers", "ranking_phases", "batch_inputs",
           "run_ranking_seed"]

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


def ranking_session_class(framework: str) -> type:
    """``xrisk.<framework>.runner.RankingSession``, imported now."""
    import importlib

    import_framework(framework)
    module = importlib.import_module(f"xrisk.{framework}.runner")
    if not hasattr(module, "RankingSession"):
        raise RecipeError(f"framework: received {framework!r} for a ranking recipe; "
                          f"xrisk.{framework}.runner has no RankingSession. Fix: set "
                          "framework to torch, tensorflow or jax.")
    return module.RankingSession


def run_ranking_seed(recipe: Recipe, seed: int, run_dir: Path, *, resume: bool = False,
                     progress: bool = True, on_batch: Any = None,
                     on_epoch: Any = None) -> RunResult:
    """Train one seed of a ranking recipe into ``run_dir``: the loop of
    :func:`xrisk.runner.engine.run_seed` (warm-up, stage decay, evaluation, early stopping
    on the validation target, per-epoch checkpoints, bit-exact ``resume``) over TriSampler
    batches."""
    from xrisk.samplers import TriSampler

    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoints = run_dir / "checkpoints"
    if not resume and latest_checkpoint(checkpoints) is not None:
        raise FileExistsError(
            f"{run_dir}: holds a run already (checkpoints/latest.json). Fix: pass --resume "
            "to continue it, or choose another output folder (--out).")
    data = load_ranking(recipe.data, seed=seed)
    s = recipe.sampler
    sampler = TriSampler(data.rows, s.num_pos + s.num_neg, num_pos=s.num_pos,
                         num_sampled_tasks=min(s.num_queries, data.num_queries),
                         mode="ranking", num_items=data.num_items, seed=seed)
    weights = ranking_weights(data, recipe.model.hidden, seed=seed, dtype=recipe.dtype)
    session = ranking_session_class(recipe.framework)(
        data, weights, activation=recipe.model.activation, dtype=recipe.dtype, seed=seed)
    warmup, main = ranking_phases(recipe)
    schedule, epochs = recipe.schedule, recipe.epochs
    main_epochs = epochs - schedule.warmup_epochs
    decay_epochs = {schedule.warmup_epochs + max(1, round(f * main_epochs))
                    for f in schedule.decay_at} - {epochs}
    rng = np.random.default_rng([seed, 2])  # the last layer's re-initialisation
    target = recipe.metric
    names = list(dict.fromkeys([*recipe.evaluation.metrics, target]))
    best: dict[str, Any] = {"value": -math.inf, "epoch": -1, "bad_epochs": 0}
    history: list[dict[str, Any]] = []
    best_weights = weights
    start, started, seconds_before, stopped_early = 0, None, 0.0, False
    if resume and latest_checkpoint(checkpoints) is not None:
        arrays, meta = load_checkpoint(checkpoints)
        if meta["recipe"] != recipe.to_dict():
            raise RecipeError(f"{run_dir}: the checkpoint was written by another recipe. Fix: "
                              "resume with the recipe the run started with (its recipe.json).")
        start, history, best = meta["epoch"] + 1, meta["history"], meta["best"]
        seconds_before, stopped_early = meta["seconds"], meta["stopped_early"]
        session.set_weights(_unprefixed("model", arrays))
        best_weights = _unprefixed("best", arrays)
        rng.bit_generator.state = meta["rng"]
        sampler.load_state_dict(meta["sampler"])
        phase_now = warmup if warmup is not None and start < schedule.warmup_epochs else main
        if meta["phase"] == phase_now.name:
            session.start(phase_now, ranking_loss_arguments(phase_now, data, sampler))
            session.load_state(_unprefixed("session", arrays), meta["session"])
            started = phase_now.name
    write_json_atomic(run_dir / "recipe.json", recipe.to_dict(), sort_keys=False)
    began = time.perf_counter()
    bar = _Progress(epochs, start, f"{recipe.framework} {recipe.method or recipe.loss.name} "
                    f"seed {seed}", progress)
    for epoch in range(start, epochs if not stopped_early else start):
        phase = warmup if warmup is not None and epoch < schedule.warmup_epochs else main
        if started != phase.name:
            if phase is main and warmup is not None and schedule.reinit_last_layer:
                kernel = session.weights()["out/kernel"]
                new_kernel, new_bias = glorot_layer(rng, kernel.shape[0], kernel.shape[1],
                                                    recipe.dtype)
                session.set_weights({**session.weights(), "out/kernel": new_kernel,
                                     "out/bias": new_bias})
            session.start(phase, ranking_loss_arguments(phase, data, sampler))
            started = phase.name
        if epoch in decay_epochs and phase is main:
            session.decay(schedule.decay_factor)
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        batches = (batch_inputs(phase, data, sampler, items, queries, recipe.dtype)
                   for items, queries in sampler)
        for batch, loss in enumerate(session.epoch(batches)):
            value = float(loss)
            total, count = total + value, count + 1
            if on_batch is not None:
                on_batch(epoch, batch, value)
        row: dict[str, Any] = {"epoch": epoch, "phase": phase.name,
                               "loss": total / max(count, 1)}
        validation = ranking_metrics(names, data.val, session.predict(data.val.inputs))
        row.update({f"val_{k}": v for k, v in validation.items()})
        row.update({f"test_{k}": v for k, v in ranking_metrics(
            names, data.test, session.predict(data.test.inputs)).items()})
        history.append(row)
        watched = validation.get(target)
        best, best_weights, stopped_early = track_best(recipe, epoch, watched, phase is main,
                                                       best, best_weights, session)
        session_arrays, session_meta = session.state()
        save_checkpoint(checkpoints, epoch, {
            **_prefixed("model", session.weights()), **_prefixed("best", best_weights),
            **_prefixed("session", session_arrays)}, {
            "recipe": recipe.to_dict(), "history": history, "best": best,
            "rng": rng.bit_generator.state, "sampler": sampler.state_dict(),
            "phase": phase.name, "session": session_meta, "stopped_early": stopped_early,
            "seconds": seconds_before + time.perf_counter() - began})
        _write_logs(run_dir, history)
        bar.update({"loss": f"{row['loss']:.4f}",
                    f"val_{target}": "-" if watched is None else f"{watched:.4f}",
                    "best": f"{best['value']:.4f}" if best["epoch"] >= 0 else "-"})
        if on_epoch is not None:
            on_epoch(epoch, row)
        if stopped_early:
            break
    bar.close()
    seconds = seconds_before + time.perf_counter() - began
    best_epoch = best["epoch"] if best["epoch"] >= 0 else history[-1]["epoch"]
    session.set_weights(best_weights)
    test_scores = session.predict(data.test.inputs)
    val_scores = session.predict(data.val.inputs)
    test = ranking_metrics(names, data.test, test_scores)
    validation = ranking_metrics(names, data.val, val_scores)
    # the report's ROC / PR figures read these: relevant (rating > 0) against not, flattened
    with (run_dir / "predictions.tmp.npz").open("wb") as handle:
        np.savez(handle, test_logits=test_scores.reshape(-1),
                 y_test=(data.test.relevance.reshape(-1) > 0).astype(np.int64),
                 val_logits=val_scores.reshape(-1),
                 y_val=(data.val.relevance.reshape(-1) > 0).astype(np.int64),
                 test_relevance=data.test.relevance)
    os.replace(run_dir / "predictions.tmp.npz", run_dir / "predictions.npz")
    result = RunResult(run_dir, seed, history, best_epoch, test, validation, seconds,
                       stopped_early)
    write_json_atomic(run_dir / "result.json", {
        "seed": seed, "best_epoch": best_epoch, "test": test, "validation": validation,
        "seconds": seconds, "stopped_early": stopped_early, "epochs_run": len(history),
        "framework": recipe.framework, "loss": recipe.loss.name,
        "optimizer": recipe.optimizer.name, "metric": recipe.metric}, sort_keys=False)
    return result
