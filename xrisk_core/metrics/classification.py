"""Binary and multi-label classification metrics: AUROC, AP, one- and two-way partial AUROC.

Inputs may be numpy, torch, TensorFlow or JAX arrays (or lists); they are converted to numpy
float64. Labels are 0/1 with shape (N,) or (N, T) (T labels: one column per task).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._arguments import check_choice, check_interval
from .._inputs import binary_labels, preview, to_numpy

__all__ = ["auroc", "average_precision", "one_way_partial_auroc", "two_way_partial_auroc"]

_AVERAGES = ("macro", None)


def _sklearn_metrics() -> Any:
    """``sklearn.metrics``, imported at the first metric call: importing it (with SciPy)
    takes seconds, and ``import xrisk.torch`` and friends must not pay for it."""
    import sklearn.metrics

    return sklearn.metrics
_SCALES_ONE_WAY = ("normalized", "raw", "mcclish")
_SCALES_TWO_WAY = ("normalized", "raw")


def _inputs(owner: str, y_true: Any, y_score: Any) -> tuple[np.ndarray, np.ndarray]:
    y = binary_labels(owner, y_true, name="y_true", allow_2d=True)
    s = to_numpy(y_score).astype(np.float64)
    if s.ndim == 2 and s.shape[1] == 1 and y.ndim == 1:
        s = s[:, 0]
    if s.shape != y.shape:
        raise ValueError(
            f"{owner}: y_score has shape {s.shape} but y_true has shape {y.shape}; expected "
            "the same shape. Fix: pass one score per label, e.g. y_score.reshape(y_true.shape)."
        )
    bad = s[~np.isfinite(s)]
    if bad.size:
        raise ValueError(
            f"{owner}: y_score contains non-finite values {preview(bad)}; expected finite "
            "scores. Fix: check the model outputs for NaN/inf."
        )
    return y, s


def _reduce(
    owner: str,
    fn: Callable[[np.ndarray, np.ndarray], float],
    y: np.ndarray,
    s: np.ndarray,
    average: str | None,
    needs_negatives: bool,
) -> Any:
    """Apply ``fn`` to a 1-D task or to every column of a multi-label task and reduce.

    A column is defined if it has a positive (and a negative when ``needs_negatives``);
    undefined columns are NaN in the per-column result and left out of the macro mean.
    """
    check_choice(owner, "average", average, _AVERAGES)
    need = "positives and negatives" if needs_negatives else "a positive"
    columns = y.reshape(y.shape[0], -1)
    scores = s.reshape(s.shape[0], -1)
    has_pos = columns.max(axis=0) == 1
    defined = has_pos & (columns.min(axis=0) == 0) if needs_negatives else has_pos
    if y.ndim == 1:
        if not defined[0]:
            raise ValueError(
                f"{owner}: y_true holds a single class {preview(np.unique(y))}; expected "
                f"{need}. Fix: evaluate on a split that contains both classes."
            )
        return float(fn(y, s))
    values = np.full(columns.shape[1], np.nan)
    for task in np.flatnonzero(defined):
        values[task] = fn(columns[:, task], scores[:, task])
    if average is None:
        return values
    if not defined.any():
        raise ValueError(
            f"{owner}: no label column has {need}; expected at least one. Fix: evaluate on a "
            "larger split."
        )
    return float(np.mean(values[defined]))


def auroc(y_true: Any, y_score: Any, *, average: str | None = "macro") -> Any:
    """Area under the ROC curve (scikit-learn's ``roc_auc_score``).

    Parameters
    ----------
    y_true : array_like, shape (N,) or (N, T)
        Labels in {0, 1}.
    y_score : array_like, same shape
        Scores, higher means more likely positive (ties count one half).
    average : {"macro", None}, default "macro"
        For (N, T) input: the mean over the columns that hold both classes, or (None) the
        per-column values with NaN for a column that lacks a class.

    Returns
    -------
    float, or numpy.ndarray of shape (T,) if ``average=None`` and the input is 2-D.

    Examples
    --------
    >>> from xrisk.metrics import auroc
    >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    0.75
    """
    y, s = _inputs("auroc", y_true, y_score)
    return _reduce("auroc", _sklearn_metrics().roc_auc_score, y, s, average,
                   needs_negatives=True)


def average_precision(y_true: Any, y_score: Any, *, average: str | None = "macro") -> Any:
    """Average precision (step-wise area under the precision-recall curve, scikit-learn's).

    A column without positives is undefined: NaN per column and left out of the macro mean
    (LibAUC 2.0.1 counts it as 0 in the mean). Same parameters as :func:`auroc`.

    Examples
    --------
    >>> from xrisk.metrics import average_precision
    >>> round(average_precision([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
    0.8333
    """
    y, s = _inputs("average_precision", y_true, y_score)
    return _reduce(
        "average_precision", _sklearn_metrics().average_precision_score, y, s, average,
        needs_negatives=False,
    )


def _check_max_fpr(owner: str, max_fpr: object) -> float:
    return float(check_interval(owner, "max_fpr", max_fpr, low=0.0, high=1.0, low_open=True,
                                high_open=False, fix="pass e.g. max_fpr=0.3",
                                type_error=ValueError))


def _clipped_roc_area(y: np.ndarray, s: np.ndarray, max_fpr: float, min_tpr: float) -> float:
    """Raw area ``integral_0^max_fpr max(TPR(f) - min_tpr, 0) df`` under the ROC curve.

    The ROC curve is scikit-learn's (linear between its points, so tied scores count one half);
    it is cut at ``max_fpr`` by linear interpolation, as in ``roc_auc_score(max_fpr=...)``.
    """
    fpr, tpr, _ = _sklearn_metrics().roc_curve(y, s, drop_intermediate=False)
    stop = int(np.searchsorted(fpr, max_fpr, side="right"))
    if stop < fpr.size:
        cut = np.interp(max_fpr, fpr[stop - 1 : stop + 1], tpr[stop - 1 : stop + 1])
        fpr = np.append(fpr[:stop], max_fpr)
        tpr = np.append(tpr[:stop], cut)
    height = tpr - min_tpr
    h0, h1, width = height[:-1], height[1:], np.diff(fpr)
    both = (h0 >= 0) & (h1 >= 0)
    mixed = (h0 > 0) & (h1 < 0) | (h0 < 0) & (h1 > 0)
    spread = np.where(mixed, np.abs(h0) + np.abs(h1), 1.0)
    crossing = width * (np.maximum(h0, 0) + np.maximum(h1, 0)) ** 2 / (2 * spread)
    return float(
        np.sum(np.where(both, (h0 + h1) / 2 * width, 0.0) + np.where(mixed, crossing, 0.0))
    )


def one_way_partial_auroc(
    y_true: Any,
    y_score: Any,
    *,
    max_fpr: float,
    scale: str = "normalized",
    average: str | None = "macro",
) -> Any:
    """One-way partial AUROC: the ROC area over false-positive rates ``0 <= FPR <= max_fpr``.

    Parameters
    ----------
    y_true, y_score : array_like, shape (N,) or (N, T)
        Labels in {0, 1} and scores.
    max_fpr : float in (0, 1]
        The FPR bound beta.
    scale : {"normalized", "raw", "mcclish"}, default "normalized"
        ``"raw"``: the area itself, in [0, beta]. ``"normalized"``: raw / beta, in [0, 1]
        (what the pAUC losses optimise; 1 is perfect). ``"mcclish"``: scikit-learn's
        ``roc_auc_score(max_fpr=beta)``, McClish's standardisation
        ``(1 + (raw - beta**2 / 2) / (beta - beta**2 / 2)) / 2`` (0.5 is chance), the value
        LibAUC's ``pauc_roc_score`` returns.
    average : {"macro", None}, default "macro"
        Multi-label reduction, as in :func:`auroc`.

    Returns
    -------
    float, or numpy.ndarray of shape (T,).

    Notes
    -----
    Without ties and with ``beta * num_negatives`` a whole number ``m``, the raw area equals
    ``(1 / (n_pos * n_neg)) * sum over the m highest-scored negatives j and all positives i of
    1[s_i > s_j]``.

    Examples
    --------
    >>> from xrisk.metrics import one_way_partial_auroc
    >>> y, s = [0, 0, 0, 0, 1, 1], [0.9, 0.2, 0.1, 0.3, 0.95, 0.5]
    >>> one_way_partial_auroc(y, s, max_fpr=0.25, scale="raw")
    0.125
    >>> one_way_partial_auroc(y, s, max_fpr=0.25)
    0.5
    """
    owner = "one_way_partial_auroc"
    beta = _check_max_fpr(owner, max_fpr)
    check_choice(owner, "scale", scale, _SCALES_ONE_WAY)
    y, s = _inputs(owner, y_true, y_score)

    def value(labels: np.ndarray, scores: np.ndarray) -> float:
        raw = _clipped_roc_area(labels, scores, beta, 0.0)
        if scale == "raw":
            return raw
        if scale == "normalized":
            return raw / beta
        low = beta**2 / 2
        return 0.5 * (1 + (raw - low) / (beta - low)) if beta < 1 else raw

    return _reduce(owner, value, y, s, average, needs_negatives=True)


def two_way_partial_auroc(
    y_true: Any,
    y_score: Any,
    *,
    max_fpr: float,
    min_tpr: float,
    scale: str = "normalized",
    average: str | None = "macro",
) -> Any:
    """Two-way partial AUROC: the ROC area in the region ``FPR <= max_fpr`` and ``TPR >= min_tpr``.

    Parameters
    ----------
    y_true, y_score : array_like, shape (N,) or (N, T)
    max_fpr : float in (0, 1]
        beta.
    min_tpr : float in [0, 1)
        alpha.
    scale : {"normalized", "raw"}, default "normalized"
        ``"raw"``: ``integral_0^beta max(TPR(f) - alpha, 0) df``, in [0, beta (1 - alpha)];
        ``"normalized"``: raw / (beta (1 - alpha)), in [0, 1].
    average : {"macro", None}, default "macro"

    Notes
    -----
    Without ties and with whole numbers ``m = beta n_neg`` and ``p = (1 - alpha) n_pos``, the
    normalised value is the AUROC of the ``p`` lowest-scored positives against the ``m``
    highest-scored negatives (Yang et al., 2021; LibAUC's estimator). It is defined for every
    class size, including selections equal to a whole class (LibAUC 2.0.1's two-way score
    crashes in ``argpartition`` there).

    Examples
    --------
    >>> from xrisk.metrics import two_way_partial_auroc
    >>> y, s = [0, 0, 0, 0, 1, 1], [0.9, 0.2, 0.1, 0.3, 0.95, 0.5]
    >>> two_way_partial_auroc(y, s, max_fpr=0.5, min_tpr=0.5)
    0.5
    """
    owner = "two_way_partial_auroc"
    beta = _check_max_fpr(owner, max_fpr)
    alpha = float(check_interval(owner, "min_tpr", min_tpr, low=0.0, high=1.0,
                                 fix="pass e.g. min_tpr=0.5", type_error=ValueError))
    check_choice(owner, "scale", scale, _SCALES_TWO_WAY)
    y, s = _inputs(owner, y_true, y_score)
    norm = beta * (1 - alpha) if scale == "normalized" else 1.0

    def value(labels: np.ndarray, scores: np.ndarray) -> float:
        return _clipped_roc_area(labels, scores, beta, alpha) / norm

    return _reduce(owner, value, y, s, average, needs_negatives=True)
