r"""The stateless binary classification losses and the compositional AUC loss.

- :class:`PairwiseAUCLoss`: the mean pairwise surrogate over positive-negative pairs;
- :class:`CrossEntropyLoss`, :class:`FocalLoss`: per-example losses of **logits**;
- :class:`CompositionalAUCLoss`: k steps of cross-entropy on probabilities, then k steps of
  the AUC-M objective (:mod:`xrisk.losses.auc`), driven by a step counter kept in the state.

All take scores (B,), labels (B,) in {0, 1} and an optional dataset index (B,), which is
validated (integer, >= 0) but unused: they keep no per-sample state, so every loss of the
binary family is called the same way (LibAUC 2.0.1's ``forward(y_pred, y_true)`` of these
losses takes no index).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._arguments import check_choice, check_count, check_fraction, check_positive
from .._domain import COUNT
from .._state import StateTable, axis_size
from .._typing import Array, in_dtype
from ..surrogates import check_surrogate, softplus
from ._base import Auxiliary, NoState, Step
from ._binary import BinaryLoss, batch_pairs
from .auc import AUCMLoss, AUCMParams, aucm_value

__all__ = [
    "CompositionalAUCLoss",
    "CompositionalAUCState",
    "CrossEntropyLoss",
    "FocalLoss",
    "PairwiseAUCLoss",
]


#: Probabilities are clipped to [eps, 1 - eps] before the logarithms of the compositional
#: loss's cross-entropy steps, so a score of exactly 0 or 1 gives a finite loss.
_PROBABILITY_EPS = 1e-12


def _signed_logits(scores: Array, labels: Array, xp: Any) -> tuple[Array, Array]:
    """``(y, m)``: the labels as floats and the signed logits m = (2y - 1) z.

    BCE-with-logits of one example is softplus(-m) and -log(1 - p_t) is softplus(m): one
    stable softplus each, with no ``z - y z`` cancellation (which loses every digit of a
    confident example's loss in float32).
    """
    y = in_dtype(labels, scores.dtype, xp)
    return y, (2 * y - 1) * scores


class PairwiseAUCLoss(BinaryLoss):
    r"""Pairwise AUC loss: the mean surrogate over every positive-negative pair of a batch.

    Parameters
    ----------
    surrogate : str, default "logistic"
        Pairwise surrogate :math:`\ell`, see :mod:`xrisk.surrogates`.
    margin : float, default 1.0
        Margin :math:`m` of ``squared_hinge``, ``hinge``, ``squared`` and ``barrier_hinge``
        (unused by ``logistic``); > 0.
    scale : float, default 1.0
        Scale :math:`s` of ``logistic`` and ``barrier_hinge`` (unused by the others); > 0.

    Notes
    -----
    For scores :math:`s` (B,) and labels :math:`y` (B,), with positives :math:`P` and
    negatives :math:`N` of the batch:

    .. math::

        L = \frac{1}{|P|\,|N|}\sum_{i\in P}\sum_{j\in N} \ell(s_i - s_j)

    A batch without positives or without negatives has no pair: the loss is 0 and so is its
    gradient. No state; ``index`` is optional and unused. Scores may be probabilities or
    logits; the default margin 1 suits probabilities for the margin-based surrogates.

    Differences from LibAUC 2.0.1 (``PairwiseAUCLoss(surr_loss, hparam)``): LibAUC's one
    ``hparam`` is the margin of the hinge family and the scale of ``logistic``; xrisk takes
    ``margin`` and ``scale`` apart (``hparam=h`` is ``scale=h`` for ``logistic``,
    ``margin=h`` otherwise, ``margin, scale = h`` for ``barrier_hinge``). The logistic
    surrogate is computed stably (LibAUC overflows to inf for :math:`-s t \gtrsim 88` in
    float32). LibAUC up to 2.0.0 paired example i with example i only instead of every
    positive with every negative (fixed in 2.0.1).

    References
    ----------
    Yang, Ying. "AUC Maximization in the Era of Big Data and AI: A Survey", ACM Computing
    Surveys 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = PairwiseAUCLoss(surrogate="squared_hinge", margin=1.0)
    >>> value, _ = loss_fn.apply(loss_fn.init(xp=xp), np.array([0.9, 0.2, 0.6, 0.4]),
    ...                          np.array([1, 0, 1, 0]))
    >>> round(float(value), 4)  # pairs: 0.9-0.2, 0.9-0.4, 0.6-0.2, 0.6-0.4
    0.335
    """

    def __init__(self, *, surrogate: str = "logistic", margin: float = 1.0,
                 scale: float = 1.0) -> None:
        self.surrogate = check_surrogate(surrogate)
        self.margin = check_positive("PairwiseAUCLoss", "margin", margin)
        self.scale = check_positive("PairwiseAUCLoss", "scale", scale)

    def _loss(self, step: Step, state: NoState, params: Any, scores: Array, labels: Array,
              index: Array | None) -> tuple[Array, NoState]:
        pairs = batch_pairs(step, scores, labels, surrogate=self.surrogate,
                            margin=self.margin, scale=self.scale)
        # Every surrogate is finite, so masked pairs contribute 0 to value and gradient.
        return step.xp.sum(pairs.only(pairs.value)) / (pairs.num_pos * pairs.num_neg), state


class CrossEntropyLoss(BinaryLoss):
    r"""Binary cross-entropy of **logits**, averaged over the batch.

    Notes
    -----
    ``scores`` are logits :math:`z` (B,) — pass the model's raw outputs, not sigmoid
    probabilities. With :math:`m_i = (2y_i - 1)\,z_i`:

    .. math::

        L = \frac1B\sum_i \mathrm{BCE}_i, \qquad
        \mathrm{BCE}_i = -y_i\log\sigma(z_i) - (1-y_i)\log(1-\sigma(z_i))
                       = \log(1 + e^{-m_i}),

    computed as a stable softplus: finite for any finite logit in float32, with gradient
    :math:`(\sigma(z_i) - y_i)/B`. No state, no hyper-parameter; ``index`` is optional and
    unused. Same math as LibAUC 2.0.1 (``binary_cross_entropy_with_logits``).

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = CrossEntropyLoss()
    >>> value, _ = loss_fn.apply(loss_fn.init(xp=xp), np.array([0.0, 100.0, -100.0]),
    ...                          np.array([1, 0, 0]))
    >>> round(float(value), 4)  # (log 2 + 100 + 0) / 3
    33.5644
    """

    def __init__(self) -> None:
        pass

    def _loss(self, step: Step, state: NoState, params: Any, scores: Array, labels: Array,
              index: Array | None) -> tuple[Array, NoState]:
        xp = step.xp
        _, signed = _signed_logits(scores, labels, xp)
        return xp.sum(softplus(-signed, xp)) / axis_size(scores, dtype=scores.dtype), state


class FocalLoss(BinaryLoss):
    r"""Focal loss of **logits**, with a per-example class weight.

    Parameters
    ----------
    alpha : float, default 0.25
        Weight of the positive examples; negatives weigh ``1 - alpha``. In [0, 1].
    gamma : float, default 2.0
        Focusing exponent :math:`\gamma \ge 0`; 0 gives the class-weighted cross-entropy.

    Notes
    -----
    ``scores`` are logits :math:`z` (B,). With :math:`\mathrm{BCE}_i` the cross-entropy of
    :class:`CrossEntropyLoss`, :math:`p_{t,i} = e^{-\mathrm{BCE}_i}` the probability given to
    the true class and :math:`a_i = \alpha` if :math:`y_i = 1`, :math:`1-\alpha` if
    :math:`y_i = 0`:

    .. math::

        L = \frac1B\sum_i a_i\,(1 - p_{t,i})^{\gamma}\,\mathrm{BCE}_i .

    With :math:`m_i = (2y_i - 1)z_i`, :math:`\mathrm{BCE}_i = \mathrm{softplus}(-m_i)` and
    :math:`(1-p_{t,i})^\gamma = \exp(-\gamma\,\mathrm{softplus}(m_i))`, both computed stably:
    no ``1 - exp`` cancellation, no ``0 ** (gamma - 1)`` in the gradient. No state;
    ``index`` is optional and unused.

    Differences from LibAUC 2.0.1: LibAUC weighs *negatives* by ``alpha`` and
    positives by ``1 - alpha`` (the reverse of the focal-loss paper), and its (B,) weights
    broadcast against (B, 1) losses into a (B, B) matrix, so it returns
    :math:`\overline{a}\cdot\frac1B\sum_i (1-p_{t,i})^\gamma\,\mathrm{BCE}_i` with the
    batch-averaged weight :math:`\overline a` instead of a per-example one. xrisk uses the
    paper's per-example weight: to reproduce LibAUC's class balance pass ``1 - alpha``.

    References
    ----------
    Lin, Goyal, Girshick, He, Dollár. "Focal Loss for Dense Object Detection", ICCV 2017.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = FocalLoss(alpha=0.25, gamma=2.0)
    >>> value, _ = loss_fn.apply(loss_fn.init(xp=xp), np.array([0.0, 0.0]), np.array([1, 0]))
    >>> round(float(value), 6)  # (0.25 + 0.75) * 0.5**2 * log 2 / 2
    0.086643
    """

    def __init__(self, *, alpha: float = 0.25, gamma: float = 2.0) -> None:
        self.alpha = check_fraction("FocalLoss", "alpha", alpha, closed_low=True)
        self.gamma = check_positive("FocalLoss", "gamma", gamma, allow_zero=True)

    def _loss(self, step: Step, state: NoState, params: Any, scores: Array, labels: Array,
              index: Array | None) -> tuple[Array, NoState]:
        xp = step.xp
        y, signed = _signed_logits(scores, labels, xp)
        weight = self.alpha * y + (1 - self.alpha) * (1 - y)
        focus = xp.exp(-self.gamma * softplus(signed, xp))  # (1 - p_t) ** gamma
        total = xp.sum(weight * focus * softplus(-signed, xp))
        return total / axis_size(scores, dtype=scores.dtype), state


class CompositionalAUCState(NamedTuple):
    """State of :class:`CompositionalAUCLoss`."""

    #: () int32 — number of calls so far (the phase of the schedule); empty and invalid
    #: batches do not count.
    step: Array


class CompositionalAUCLoss(BinaryLoss):
    r"""Compositional AUC loss: k steps of cross-entropy, then k steps of AUC-M, in turn.

    Parameters
    ----------
    k : int, default 1
        Length of each phase, in calls; >= 1.
    margin : float, default 1.0
        Margin :math:`m` of the AUC-M objective (scores are probabilities in [0, 1]).
    version : {"v1", "v2"}, default "v1"
        AUC-M version, as in :class:`AUCMLoss`.
    imratio : float or None, default None
        Positive ratio p of AUC-M v1, as in :class:`AUCMLoss` (``None``: each batch's).

    Notes
    -----
    ``scores`` are **probabilities** :math:`s \in [0, 1]` (B,), e.g. sigmoid outputs (a
    host-checked batch outside [0, 1] warns once with :class:`xrisk.InputWarning`). The
    state holds the call counter :math:`t` (starting at 0, +1 per call). Call :math:`t` is a
    cross-entropy step if :math:`t \bmod 2k < k`, else an AUC-M step:

    .. math::

        L_t = \begin{cases}
          -\frac1B\sum_i y_i\log\bar s_i + (1-y_i)\log(1-\bar s_i)
            & t \bmod 2k < k,\\
          \text{AUC-M}(s, y; a, b, \alpha)\ \text{(see AUCMLoss)} & \text{otherwise,}
        \end{cases}

    with :math:`\bar s` the scores clipped to :math:`[10^{-12}, 1-10^{-12}]` (gradient 0
    outside). ``a``, ``b`` (descent) and ``alpha`` (ascent, kept >= 0) are trainable
    auxiliaries, as in :class:`AUCMLoss`, with the same :meth:`ascent_direction`; their
    gradient is 0 on cross-entropy steps. A traced step (or one on a device) computes both
    branches and selects one, so it is jit-compatible and the other branch adds no gradient;
    an eager CPU step reads the counter on the host and computes its phase's branch only
    (the same value and gradients). Its optimizer is PDSCA
    (lr0 and a weight average on cross-entropy steps, momentum on AUC-M steps), which reads
    ``k``. A batch with no example or with invalid values does not advance the counter.

    Differences from LibAUC 2.0.1: ``imratio`` is used when given (LibAUC recomputes the
    ratio from every batch and ignores it); v2 is the intended math (LibAUC's v2 cross term
    is :math:`(n_-/n)\,E_-[s] - E_+[s]` instead of :math:`E_-[s] - E_+[s]`, a misplaced
    parenthesis, LibAUC issue #74); ``k`` is fixed at
    construction (LibAUC's ``forward(..., k=)`` override is dropped); ``backend`` is dropped
    (cross-entropy is the only backend); LibAUC's ``F.binary_cross_entropy`` raises on
    scores outside [0, 1] and floors each log at -100, xrisk clips the scores instead.
    LibAUC's PDSCA lets cross-entropy steps take the AUC branch after the first AUC step;
    that is the optimizer's behaviour, not the loss's (xrisk's PDSCA keeps the schedule).

    References
    ----------
    Yuan, Guo, Xu, Ying, Yang. "Compositional Training for End-to-End Deep AUC
    Maximization", ICLR 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = CompositionalAUCLoss(k=1, version="v2")
    >>> state = loss_fn.init(xp=xp)
    >>> params = AUCMParams(np.float64(0.3), np.float64(0.2), np.float64(0.5))
    >>> scores, labels = np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])
    >>> ce, state = loss_fn.apply(state, scores, labels, params=params)  # step 0: BCE
    >>> auc, state = loss_fn.apply(state, scores, labels, params=params)  # step 1: AUC-M
    >>> round(float(ce), 5), round(float(auc), 5), int(state.step)
    (0.47229, 0.57625, 2)
    """

    state_type = CompositionalAUCState
    params_type = AUCMParams
    score_interval = (0.0, 1.0)  # probabilities: host-checked logits warn once

    def __init__(self, *, k: int = 1, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None) -> None:
        self.k = check_count("CompositionalAUCLoss", "k", k)
        self.margin = check_positive("CompositionalAUCLoss", "margin", margin)
        self.version = check_choice("CompositionalAUCLoss", "version", version, ("v1", "v2"))
        self.imratio = None if imratio is None else check_fraction(
            "CompositionalAUCLoss", "imratio", imratio)

    def state_tables(self) -> dict[str, StateTable]:
        return {"step": StateTable(None, (), 0, kind="int", domain=COUNT)}

    def auxiliaries(self) -> dict[str, Auxiliary]:
        return {"a": Auxiliary(), "b": Auxiliary(), "alpha": Auxiliary(role="ascent", lower=0.0)}

    # The AUC-M phase is AUCMLoss's objective: the same closed-form ascent on alpha.
    ascent_direction = AUCMLoss.ascent_direction

    def _loss(self, step: Step, state: CompositionalAUCState, params: AUCMParams,
              scores: Array, labels: Array, index: Array | None,
              ) -> tuple[Array, CompositionalAUCState]:
        xp = step.xp
        phase = self._phase_on_host(step, state)
        if phase != "auc":
            y = in_dtype(labels, scores.dtype, xp)
            log_p, log_q = _clipped_logs(scores, xp)
            bce = -xp.sum(y * log_p + (1 - y) * log_q) / axis_size(scores, dtype=scores.dtype)
        if phase != "cross_entropy":
            auc = aucm_value(scores, labels, params, margin=self.margin, version=self.version,
                             imratio=self.imratio, xp=xp)
        if phase is None:
            # Both branches are finite with finite gradients (the clip keeps log's argument
            # >= eps), so the branch where() leaves out contributes an exact 0 to every
            # gradient.
            loss = xp.where(state.step % (2 * self.k) < self.k, bce, auc)
        elif phase == "cross_entropy":
            # a, b and alpha get the gradient 0 of the branch left out (not none: a torch
            # optimizer skips a parameter without one), and the value is bce exactly.
            loss = bce + 0 * (params.a + params.b + params.alpha)
        else:
            loss = auc
        counter = state.step + 1
        if step.valid is not None:  # a batch that failed the in-graph checks does not count
            counter = xp.where(step.valid, counter, state.step)
        return loss, CompositionalAUCState(step=counter)


    def _phase_on_host(self, step: Step, state: CompositionalAUCState) -> str | None:
        """``"cross_entropy"`` or ``"auc"``: the phase of this call, where the counter is read
        on the host for free (an eager CPU step checked there), so only that branch is
        computed; ``None`` (traced, on a device): both are, and one is selected in the graph.
        """
        if step.valid is not None or not step.backend.inspectable(state.step):
            return None
        counter = int(step.backend.to_numpy(state.step))
        return "cross_entropy" if counter % (2 * self.k) < self.k else "auc"


def _clipped_logs(p: Array, xp: Any) -> tuple[Array, Array]:
    """``(log p̄, log(1 - p̄))`` with p̄ = ``p`` clipped to [eps, 1 - eps]: gradient 1 inside
    (bounds included), 0 outside.

    Inside means ``p >= eps`` and ``1 - p >= eps``, tested on ``1 - p`` itself: 1 - 1e-12
    rounds to 1 in float32, so a bound on ``p`` alone would let p = 1 through (log(1 - p) =
    log 0). ``where`` rather than ``clip``: frameworks split the gradient of min/max at ties
    differently.
    """
    low = xp.full_like(p, _PROBABILITY_EPS)
    high = xp.full_like(p, 1 - _PROBABILITY_EPS)
    q = 1 - p
    below, above = p < low, q < low
    clipped_p = xp.where(below, low, xp.where(above, high, p))
    clipped_q = xp.where(below, high, xp.where(above, low, q))
    return xp.log(clipped_p), xp.log(clipped_q)
