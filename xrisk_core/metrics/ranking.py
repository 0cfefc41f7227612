"""Ranking metrics per query: NDCG@k, MAP@k, precision@k, recall@k, and the ideal DCG.

Inputs: ``relevance`` and ``scores`` either as 2-D arrays (one row per query, every entry a
candidate) or as 1-D arrays with ``query_ids`` (query-grouped data such as LETOR files).
Arrays may come from numpy, torch, TensorFlow or JAX.

Conventions (all documented choices):

- relevance is graded (>= 0); an item is relevant if its relevance is > 0 (MAP, precision,
  recall use this binary view, NDCG the grades);
- the ranking sorts scores in decreasing order; **ties** are broken by ``ties``:
  ``"pessimistic"`` (default) puts less relevant items first among equal scores, so a
  constant scorer gets the worst value, ``"optimistic"`` the reverse;
- precision@k is ``(relevant items in the top k) / k``, also when a query has fewer than k
  candidates; recall@k divides by the number of relevant items; AP@k (for MAP@k) is
  ``sum_{i <= k, item i relevant} precision@i / min(k, number relevant)``;
- a **query without relevant items** has no defined NDCG, recall or AP: ``no_relevant``
  chooses ``"skip"`` (default: NaN per query, left out of the mean), ``"zero"`` or ``"one"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._arguments import check_choice, check_count
from .._inputs import preview, to_numpy

__all__ = ["ndcg_at_k", "map_at_k", "precision_at_k", "recall_at_k", "ideal_dcg"]

_TIES = ("pessimistic", "optimistic")
_NO_RELEVANT = ("skip", "zero", "one")
_GAINS = ("exponential", "linear")
_AVERAGES = ("mean", None)


def _check_k(owner: str, k: object) -> int:
    # ValueError for a non-integer k too: the metrics' contract since their first release.
    return check_count(owner, "k", k, fix="pass the cut-off rank, e.g. k=10",
                       type_error=ValueError)


def _relevance(owner: str, values: np.ndarray) -> np.ndarray:
    rel = values.astype(np.float64)
    bad = rel[~np.isfinite(rel) | (rel < 0)]
    if bad.size:
        raise ValueError(
            f"{owner}: relevance contains {preview(np.unique(bad))}; expected finite grades "
            ">= 0 (0 = not relevant). Fix: drop unlabelled candidates or clip the grades."
        )
    return rel


def _grouped(owner: str, relevance: Any, scores: Any, query_ids: Any) -> tuple[np.ndarray, ...]:
    """Return padded (Q, M) relevance, scores and a validity mask."""
    rel = to_numpy(relevance)
    sco = to_numpy(scores).astype(np.float64)
    if rel.shape != sco.shape:
        raise ValueError(
            f"{owner}: relevance has shape {rel.shape} but scores have shape {sco.shape}; "
            "expected the same shape. Fix: pass one score per candidate."
        )
    if np.isnan(sco).any():
        raise ValueError(
            f"{owner}: scores contain NaN at {preview(np.argwhere(np.isnan(sco)))}; expected "
            "numbers. Fix: check the model outputs."
        )
    rel = _relevance(owner, rel)
    if query_ids is None:
        if rel.ndim == 1:
            rel, sco = rel[None, :], sco[None, :]
        if rel.ndim != 2 or rel.shape[0] == 0 or rel.shape[1] == 0:
            raise ValueError(
                f"{owner}: relevance has shape {rel.shape}; expected (num_queries, "
                "num_candidates) with at least one query and one candidate (empty queries "
                "have no ranking). Fix: drop empty queries, or pass 1-D arrays with query_ids."
            )
        return rel, sco, np.ones(rel.shape, dtype=bool)
    qid = to_numpy(query_ids)
    if rel.ndim != 1 or qid.shape != rel.shape or rel.size == 0:
        raise ValueError(
            f"{owner}: with query_ids, relevance, scores and query_ids must be 1-D of one "
            f"length; received shapes {rel.shape} and {qid.shape}. Fix: flatten them."
        )
    order = np.argsort(qid, kind="stable")
    _, start, counts = np.unique(qid[order], return_index=True, return_counts=True)
    slot = np.arange(order.size) - np.repeat(start, counts)
    row = np.repeat(np.arange(counts.size), counts)
    shape = (counts.size, int(counts.max()))
    padded_rel, padded_sco = np.zeros(shape), np.full(shape, -np.inf)
    valid = np.zeros(shape, dtype=bool)
    padded_rel[row, slot], padded_sco[row, slot], valid[row, slot] = rel[order], sco[order], True
    return padded_rel, padded_sco, valid


def _ranked(rel: np.ndarray, sco: np.ndarray, valid: np.ndarray, ties: str) -> np.ndarray:
    """Relevance in ranked order per row; padding (relevance 0) goes last."""
    tie_key = rel if ties == "pessimistic" else -rel
    order = np.lexsort((tie_key, -sco, ~valid), axis=-1)
    return np.take_along_axis(rel, order, axis=-1)


def _gain(rel: np.ndarray, gain: str) -> np.ndarray:
    return np.expm1(rel * np.log(2.0)) if gain == "exponential" else rel


def _dcg(ranked: np.ndarray, k: int, gain: str) -> np.ndarray:
    top = ranked[:, :k]
    discount = 1.0 / np.log2(np.arange(2, top.shape[1] + 2))
    return (_gain(top, gain) * discount).sum(axis=1)


def ideal_dcg(relevance: Any, k: int | None = None, *, gain: str = "exponential") -> np.ndarray:
    """Ideal (maximum) DCG@k of each query: the DCG of its relevances sorted decreasingly.

    Parameters
    ----------
    relevance : array_like, shape (num_queries, num_candidates) or (num_candidates,)
        Graded relevances >= 0 (pad missing candidates with 0).
    k : int, optional
        Cut-off; default all candidates.
    gain : {"exponential", "linear"}, default "exponential"
        ``2**rel - 1`` (LibAUC, Burges et al.) or ``rel`` (scikit-learn's ``ndcg_score``).

    Returns
    -------
    numpy.ndarray, shape (num_queries,)
        ``sum_{i < k} gain(rel_(i)) / log2(i + 2)`` with ``rel_(0) >= rel_(1) >= ...``.

    Examples
    --------
    >>> from xrisk.metrics import ideal_dcg
    >>> ideal_dcg([[3, 0, 1]]).round(4).tolist()
    [7.6309]
    """
    owner = "ideal_dcg"
    check_choice(owner, "gain", gain, _GAINS)
    rel = _relevance(owner, to_numpy(relevance))
    rel = rel[None, :] if rel.ndim == 1 else rel
    cut = rel.shape[1] if k is None else _check_k(owner, k)
    return _dcg(-np.sort(-rel, axis=1), cut, gain)


def _finish(
    owner: str, values: np.ndarray, undefined: np.ndarray, no_relevant: str, average: str | None
) -> Any:
    fill = {"skip": np.nan, "zero": 0.0, "one": 1.0}[no_relevant]
    values = np.where(undefined, fill, values)
    if average is None:
        return values
    if np.isnan(values).all():
        raise ValueError(
            f"{owner}: no query has a relevant item, so the metric is undefined for all "
            f"{values.size} queries; expected at least one relevance > 0. Fix: evaluate on "
            "queries with relevant items, or pass no_relevant='zero'."
        )
    return float(np.nanmean(values))


def _prepare(
    owner: str,
    relevance: Any,
    scores: Any,
    query_ids: Any,
    k: object,
    ties: str,
    no_relevant: str,
    average: str | None,
) -> tuple[np.ndarray, np.ndarray, int]:
    check_choice(owner, "ties", ties, _TIES)
    check_choice(owner, "no_relevant", no_relevant, _NO_RELEVANT)
    check_choice(owner, "average", average, _AVERAGES)
    cut = _check_k(owner, k)
    rel, sco, valid = _grouped(owner, relevance, scores, query_ids)
    return rel, _ranked(rel, sco, valid, ties), cut


def ndcg_at_k(
    relevance: Any,
    scores: Any,
    k: int,
    *,
    query_ids: Any = None,
    gain: str = "exponential",
    ties: str = "pessimistic",
    no_relevant: str = "skip",
    average: str | None = "mean",
) -> Any:
    """Normalised discounted cumulative gain at rank k, ``DCG@k / ideal DCG@k`` per query.

    Parameters
    ----------
    relevance : array_like, shape (Q, M), or (N,) with ``query_ids``
        Graded relevances >= 0.
    scores : array_like, same shape
        Model scores; higher ranks first.
    k : int
        Cut-off rank (>= 1).
    query_ids : array_like, shape (N,), optional
        Query of each row for flat (query-grouped) data.
    gain : {"exponential", "linear"}, default "exponential"
        ``2**rel - 1`` or ``rel`` (scikit-learn's ``ndcg_score``).
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"
    average : {"mean", None}, default "mean"
        Mean over the defined queries, or the per-query values (shape (Q,)).

    Returns
    -------
    float or numpy.ndarray of shape (Q,)

    Examples
    --------
    >>> from xrisk.metrics import ndcg_at_k
    >>> round(ndcg_at_k([[3, 0, 1]], [[0.2, 0.9, 0.1]], k=3), 4)
    0.6443
    """
    owner = "ndcg_at_k"
    check_choice(owner, "gain", gain, _GAINS)
    rel, ranked, cut = _prepare(owner, relevance, scores, query_ids, k, ties, no_relevant, average)
    ideal = _dcg(-np.sort(-rel, axis=1), cut, gain)
    undefined = ideal == 0
    values = _dcg(ranked, cut, gain) / np.where(undefined, 1.0, ideal)
    return _finish(owner, values, undefined, no_relevant, average)


def precision_at_k(
    relevance: Any,
    scores: Any,
    k: int,
    *,
    query_ids: Any = None,
    ties: str = "pessimistic",
    average: str | None = "mean",
) -> Any:
    """Precision at k: ``(relevant items among the top k) / k`` per query.

    Defined for every query (0 when it has no relevant item). LibAUC 2.0.1 divides by
    ``min(k, number relevant)`` and flattens multi-query input into one ranking. Parameters
    as in :func:`ndcg_at_k`.

    Examples
    --------
    >>> from xrisk.metrics import precision_at_k
    >>> precision_at_k([[1, 0, 1, 0]], [[0.9, 0.8, 0.1, 0.2]], k=2)
    0.5
    """
    owner = "precision_at_k"
    _, ranked, cut = _prepare(owner, relevance, scores, query_ids, k, ties, "zero", average)
    hits = (ranked[:, :cut] > 0).sum(axis=1)
    return _finish(owner, hits / cut, np.zeros(hits.shape, dtype=bool), "zero", average)


def recall_at_k(
    relevance: Any,
    scores: Any,
    k: int,
    *,
    query_ids: Any = None,
    ties: str = "pessimistic",
    no_relevant: str = "skip",
    average: str | None = "mean",
) -> Any:
    """Recall at k: ``(relevant items among the top k) / (relevant items)`` per query.

    Parameters as in :func:`ndcg_at_k`.

    Examples
    --------
    >>> from xrisk.metrics import recall_at_k
    >>> recall_at_k([[1, 0, 1, 0]], [[0.9, 0.8, 0.1, 0.2]], k=2)
    0.5
    """
    owner = "recall_at_k"
    rel, ranked, cut = _prepare(owner, relevance, scores, query_ids, k, ties, no_relevant, average)
    total = (rel > 0).sum(axis=1)
    hits = (ranked[:, :cut] > 0).sum(axis=1)
    values = hits / np.maximum(total, 1)
    return _finish(owner, values, total == 0, no_relevant, average)


def map_at_k(
    relevance: Any,
    scores: Any,
    k: int,
    *,
    query_ids: Any = None,
    ties: str = "pessimistic",
    no_relevant: str = "skip",
    average: str | None = "mean",
) -> Any:
    """Mean average precision at k.

    ``AP@k = sum_{i <= k, item i relevant} precision@i / min(k, number relevant)`` per query
    (the ``apk`` of ml_metrics, which LibAUC's ``map_at_k`` uses on id lists), then the mean over
    queries. Parameters as in :func:`ndcg_at_k`.

    Examples
    --------
    >>> from xrisk.metrics import map_at_k
    >>> map_at_k([[1, 0, 1, 0]], [[0.9, 0.8, 0.1, 0.2]], k=4)
    0.75
    """
    owner = "map_at_k"
    rel, ranked, cut = _prepare(owner, relevance, scores, query_ids, k, ties, no_relevant, average)
    hit = ranked[:, :cut] > 0
    precision = np.cumsum(hit, axis=1) / np.arange(1, hit.shape[1] + 1)
    total = (rel > 0).sum(axis=1)
    values = (precision * hit).sum(axis=1) / np.maximum(np.minimum(total, cut), 1)
    return _finish(owner, values, total == 0, no_relevant, average)
