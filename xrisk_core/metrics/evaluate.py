"""``evaluate``: several metrics in one call, named by strings."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .classification import auroc, average_precision, one_way_partial_auroc, two_way_partial_auroc
from .ranking import map_at_k, ndcg_at_k, precision_at_k, recall_at_k

__all__ = ["evaluate", "METRIC_NAMES"]

METRIC_NAMES = (
    "auroc",
    "ap",
    "pauc",
    "pauc_raw",
    "pauc_mcclish",
    "tpauc",
    "ndcg@K",
    "map@K",
    "precision@K",
    "recall@K",
)
_RANKING = {"ndcg": ndcg_at_k, "map": map_at_k, "precision": precision_at_k, "recall": recall_at_k}
_AT_K = re.compile(r"^(ndcg|map|precision|recall)@(\d+)$")


def _need(name: str, option: str, value: float | None) -> float:
    if value is None:
        raise ValueError(
            f"evaluate: metric {name!r} needs {option}; received {option}=None. Fix: pass "
            f"evaluate(..., {option}=0.3) or drop {name!r}."
        )
    return value


def evaluate(
    y_true: Any,
    y_score: Any,
    *,
    metrics: Sequence[str] = ("auroc", "ap"),
    max_fpr: float | None = None,
    min_tpr: float | None = None,
    query_ids: Any = None,
    average: str | None = "default",
) -> dict[str, Any]:
    """Compute several metrics of the same predictions.

    Parameters
    ----------
    y_true : array_like
        Classification metrics: labels in {0, 1}, shape (N,) or (N, T). Ranking metrics:
        graded relevances, shape (Q, M), or (N,) with ``query_ids``.
    y_score : array_like, same shape
    metrics : sequence of str, default ("auroc", "ap")
        Names from ``"auroc"``, ``"ap"``, ``"pauc"`` (one-way, normalised by beta),
        ``"pauc_raw"``, ``"pauc_mcclish"`` (scikit-learn's standardisation), ``"tpauc"``
        (two-way, normalised), and ``"ndcg@K"``, ``"map@K"``, ``"precision@K"``,
        ``"recall@K"`` for a cut-off K, e.g. ``"ndcg@10"``.
    max_fpr, min_tpr : float, optional
        beta for ``pauc*`` and ``tpauc``; alpha for ``tpauc``.
    query_ids : array_like, optional
        For flat ranking data.
    average : {"default", None}
        ``"default"`` gives the mean (macro over labels, mean over queries); None gives the
        per-label or per-query arrays.

    Returns
    -------
    dict
        ``{name: value}`` in the order of ``metrics``.

    Examples
    --------
    >>> from xrisk.metrics import evaluate
    >>> evaluate([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], metrics=["auroc", "pauc"], max_fpr=0.5)
    {'auroc': 0.75, 'pauc': 0.5}
    """
    if isinstance(metrics, str):
        metrics = [metrics]
    results: dict[str, Any] = {}
    for name in metrics:
        results[name] = _one(name, y_true, y_score, max_fpr, min_tpr, query_ids, average)
    return results


def _one(
    name: str,
    y_true: Any,
    y_score: Any,
    max_fpr: float | None,
    min_tpr: float | None,
    query_ids: Any,
    average: str | None,
) -> Any:
    classification_average = "macro" if average == "default" else average
    if name == "auroc":
        return auroc(y_true, y_score, average=classification_average)
    if name == "ap":
        return average_precision(y_true, y_score, average=classification_average)
    scales = {"pauc": "normalized", "pauc_raw": "raw", "pauc_mcclish": "mcclish"}
    if name in scales:
        beta = _need(name, "max_fpr", max_fpr)
        return one_way_partial_auroc(
            y_true, y_score, max_fpr=beta, scale=scales[name], average=classification_average
        )
    if name == "tpauc":
        beta, alpha = _need(name, "max_fpr", max_fpr), _need(name, "min_tpr", min_tpr)
        return two_way_partial_auroc(
            y_true, y_score, max_fpr=beta, min_tpr=alpha, average=classification_average
        )
    match = _AT_K.match(name) if isinstance(name, str) else None
    if match is None:
        raise ValueError(
            f"evaluate: unknown metric {name!r}; expected one of {METRIC_NAMES} (K a whole "
            "number >= 1). Fix: e.g. metrics=['auroc', 'ndcg@10']."
        )
    fn = _RANKING[match.group(1)]
    ranking_average = "mean" if average == "default" else average
    return fn(y_true, y_score, int(match.group(2)), query_ids=query_ids, average=ranking_average)
