r"""AUROC by the AUC-margin min-max objective (AUC-M), optimized with PESG.

.. math::

    \min_{w,a,b}\max_{\alpha\ge 0}\;
    \mathbb E_+[(s-a)^2] + \mathbb E_-[(s-b)^2] + 2\alpha\,(m + \mathbb E_-[s] - \mathbb E_+[s])
    - \alpha^2

(the paper's form with :math:`\alpha \to 2\alpha`, as LibAUC implements it). ``a``, ``b`` and
``alpha`` are trainable auxiliaries (parameters, not state); the optimizer
(:class:`xrisk.optim.PESG`) descends on w, a, b and ascends on α.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._arguments import check_choice, check_fraction, check_positive
from .._state import axis_size, masked_mean
from .._typing import Array
from ._base import Auxiliary, NoState, Step
from ._binary import BinaryLoss, label_masks

__all__ = ["AUCMLoss", "AUCMParams", "aucm_value"]



class AUCMParams(NamedTuple):
    """Trainable auxiliaries of :class:`AUCMLoss`, each a scalar (shape ())."""

    a: Array  #: () — estimate of the mean positive score
    b: Array  #: () — estimate of the mean negative score
    alpha: Array  #: () — dual variable, kept >= 0 by the optimizer


class AUCMLoss(BinaryLoss):
    r"""AUC-margin loss (min-max), versions ``"v1"`` and ``"v2"``.

    Parameters
    ----------
    margin : float, default 1.0
        Margin :math:`m` (scores are expected in [0, 1], e.g. sigmoid outputs).
    version : {"v1", "v2"}, default "v1"
        ``"v1"`` weighs the terms by the positive ratio p; ``"v2"`` uses class-conditional
        means and suits a :class:`DualSampler` with a fixed positive share.
    imratio : float or None, default None
        Positive ratio p of v1. ``None`` uses the ratio of each batch (LibAUC's default);
        a number is used as given (LibAUC 2.0.1 silently ignores it: its ``forward``
        recomputes the ratio from every batch).

    Notes
    -----
    With :math:`\mathbb 1_+`, :math:`\mathbb 1_-` the class masks and means over the batch:

    v1: :math:`(1-p)\,\overline{(s-a)^2\mathbb 1_+} + p\,\overline{(s-b)^2\mathbb 1_-}
    + 2\alpha\,(p(1-p)m + \overline{p\,s\,\mathbb 1_- - (1-p)\,s\,\mathbb 1_+})
    - p(1-p)\alpha^2`

    v2: :math:`\mathbb E_+[(s-a)^2] + \mathbb E_-[(s-b)^2]
    + 2\alpha\,(m + \mathbb E_-[s] - \mathbb E_+[s]) - \alpha^2`

    v2 is the intended math, not LibAUC 2.0.1's (LibAUC issue #74: a misplaced parenthesis
    makes its cross term :math:`(n_-/n)\mathbb E_-[s] - \mathbb E_+[s]`): for
    s = [0.1, 0.4, 0.35, 0.8], y = [0, 0, 1, 1], a = 0.3, b = 0.2, α = 0.5 it gives 0.57625
    (LibAUC: 0.45125). Class means of an empty class are 0, so a one-class batch gives a
    finite loss (LibAUC: NaN in v2). The value is a min-max objective and may be negative:
    monitor AUROC, not it.

    References
    ----------
    Yuan, Yan, Sonka, Yang. "Large-scale Robust Deep AUC Maximization: A New Surrogate Loss
    and Empirical Studies on Medical Image Classification", ICCV 2021.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = AUCMLoss(version="v2")
    >>> params = AUCMParams(np.float64(0.3), np.float64(0.2), np.float64(0.5))
    >>> value, _ = loss_fn.apply(loss_fn.init(xp=xp), np.array([0.1, 0.4, 0.35, 0.8]),
    ...                          np.array([0, 0, 1, 1]), params=params)
    >>> round(float(value), 5)
    0.57625
    """

    params_type = AUCMParams
    score_interval = (0.0, 1.0)

    def __init__(
        self, *, margin: float = 1.0, version: str = "v1", imratio: float | None = None
    ) -> None:
        self.margin = check_positive("AUCMLoss", "margin", margin)
        self.version = check_choice("AUCMLoss", "version", version, ("v1", "v2"))
        self.imratio = None if imratio is None else check_fraction("AUCMLoss", "imratio", imratio)

    def auxiliaries(self) -> dict[str, Auxiliary]:
        return {"a": Auxiliary(), "b": Auxiliary(), "alpha": Auxiliary(role="ascent", lower=0.0)}

    def ascent_direction(self, params: AUCMParams) -> dict[str, Array]:
        """PESG's closed-form ascent on α: the v2 objective's gradient with E+s = a, E-s = b."""
        a, b, alpha = params
        return {"alpha": 2 * (self.margin + b - a) - 2 * alpha}

    def _loss(self, step: Step, state: NoState, params: AUCMParams, scores: Array,
              labels: Array, index: Array | None) -> tuple[Array, NoState]:
        return aucm_value(scores, labels, params, margin=self.margin, version=self.version,
                          imratio=self.imratio, xp=step.xp), state


def aucm_value(scores: Array, labels: Array, params: AUCMParams, *, margin: float,
               version: str, imratio: float | None, xp: Any, axis: int | None = None) -> Array:
    """The AUC-M objective of one batch (see :class:`AUCMLoss`); shared with the losses that
    alternate it with another objective (:class:`CompositionalAUCLoss`) and with the
    multi-label loss, which passes scores and labels (B, K), a, b, alpha (K,) and ``axis=0``
    to get the K per-label values. NaN labels (floating dtypes) are missing: left out of
    every mean, as if the example were not in the batch."""
    a, b, alpha = params
    positive, negative, observed = label_masks(labels, scores.dtype, xp)
    if version == "v2":
        return (
            masked_mean((scores - a) ** 2, positive, axis=axis, xp=xp)
            + masked_mean((scores - b) ** 2, negative, axis=axis, xp=xp)
            + 2 * alpha * (margin + masked_mean(scores, negative, axis=axis, xp=xp)
                           - masked_mean(scores, positive, axis=axis, xp=xp))
            - alpha * alpha
        )
    batch = axis_size(scores, dtype=scores.dtype) if observed is None else xp.clip(
        xp.sum(observed, axis=axis), 1, None)
    p = xp.sum(positive, axis=axis) / batch if imratio is None else imratio
    q = 1 - p
    # The v1 objective, (1-p) E[(s-a)^2 y] + p E[(s-b)^2 (1-y)] + 2 alpha (p (1-p) m
    # + E[p s (1-y) - (1-p) s y]) - p (1-p) alpha^2, regrouped per example: the same value
    # with a third fewer array operations forward and backward (an eager step pays per op).
    twice_alpha_s = 2 * alpha * scores
    per_example = ((positive * (q / batch)) * ((scores - a) ** 2 - twice_alpha_s)
                   + (negative * (p / batch)) * ((scores - b) ** 2 + twice_alpha_s))
    return xp.sum(per_example, axis=axis) + p * q * alpha * (2 * margin - alpha)
