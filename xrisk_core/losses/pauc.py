r"""Partial AUC: one-way (FPR :math:`\le\beta`) and two-way (also TPR :math:`\ge\alpha`).

Every loss here compares each positive i of a batch with each negative j through
:math:`\ell_{ij} = \ell(s_i - s_j)` (a surrogate of :mod:`xrisk.surrogates`) and keeps
per-positive state indexed by the dataset index:

- :class:`pAUC_CVaR_Loss` (SOPA): the CVaR form of one-way pAUC, a threshold per positive;
- :class:`pAUC_DRO_Loss` (SOPAs): its KL-DRO smoothing, a moving average
  :math:`u_i \approx \frac1{n_-}\sum_j e^{\ell_{ij}/\lambda}` per positive (FCCO);
- :class:`tpAUC_KL_Loss` (SOTAs): two-way pAUC, the same :math:`u_i` plus one global average;
- :class:`tpAUC_CVaR_Loss` (STACO): two-way pAUC as a double CVaR, with closed-form duals.

The returned value is a *dynamic mini-batch loss*: detached weights times :math:`\ell_{ij}`,
so that autodiff gives the algorithm's gradient estimate (not the pAUC itself).

The KL estimators are stored shifted, :math:`u = \tilde u\,e^{c}`, with the log-shift
:math:`c` following :math:`\log u` down as well as up, so neither ``exp`` overflows (LibAUC's
raw :math:`e^{\ell/\lambda}` does once :math:`\ell/\lambda > 88` in float32: logits, small
:math:`\lambda`) nor :math:`\tilde u` underflows when the losses fall.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

from .._arguments import check_count, check_fraction, check_positive
from .._domain import REAL, UNIT_INTERVAL
from .._registry import by_mode, modes_of
from .._state import SHIFTED_MEAN, StateTable
from .._typing import Array, in_dtype
from ..surrogates import check_surrogate
from ._base import LOSSES, Step
from ._binary import BinaryLoss, Pairs, PositiveRows, batch_pairs

__all__ = [
    "PAUC_MODES",
    "pAUCLoss",
    "pauc_class",
    "pAUC_CVaR_Loss",
    "pAUC_CVaR_State",
    "pAUC_DRO_Loss",
    "pAUC_DRO_State",
    "tpAUC_KL_Loss",
    "tpAUC_KL_State",
    "tpAUC_CVaR_Loss",
    "tpAUC_CVaR_State",
]



# --------------------------------------------------------------------------- shared math

class _PairwiseLoss(BinaryLoss):
    """What the four losses share: the pairs (:class:`~xrisk.losses._binary.Pairs`, compact
    or masked), the rows of positives, the write rule. Every per-row quantity is (R,), one
    per row of the pairs, and every pair matrix (R, C).

    Each loss writes its math once, in :meth:`_pair_loss`, for the pairs of one label column
    (:func:`~xrisk.losses._binary.batch_pairs`) and for those of every column of a
    multi-label batch at once (:func:`~xrisk.losses._binary.label_pairs`, which
    :class:`~xrisk.losses.multilabel.MultiLabelpAUCLoss` passes): there a global entry of the
    state (SOTAs' ``w``, STACO's ``s2``) has one row per label, read at the rows through
    ``pairs.per_row`` and reduced through ``pairs.label_mean`` / ``positive_max``, and the
    loss is the sum of the labels' losses.
    """

    margin: float
    surrogate: str
    scale: float

    def _pairs(self, step: Step, scores: Array, labels: Array) -> Pairs:
        return batch_pairs(step, scores, labels, surrogate=self.surrogate,
                           margin=self.margin, scale=self.scale)

    def _loss(self, step: Step, state: Any, params: Any, scores: Array, labels: Array,
              index: Array) -> tuple[Array, Any]:
        pairs = self._pairs(step, scores, labels)
        return self._pair_loss(step, state, pairs, self.positive_rows(step, index, pairs))

    def _pair_loss(self, step: Step, state: Any, pairs: Pairs, rows: PositiveRows,
                   ) -> tuple[Array, Any]:
        """The loss (summed over the labels of a multi-label ``pairs``) and the new state."""
        raise NotImplementedError

    @staticmethod
    def _gather(xp: Any, table: Array, rows: PositiveRows, dtype: Any) -> Array:
        return in_dtype(xp.take(table, rows.rows, axis=0), dtype, xp)

    @staticmethod
    def _write(step: Step, table: Array, rows: PositiveRows, pairs: Pairs, new: Array,
               old: Array) -> tuple[Array, Array]:
        """Write the positives' new rows (none for a batch without pairs); return the table
        and the rows as stored (in the table's dtype, cast back), which the weights use.

        The rows of one index are equal (duplicate positives pool their estimates; negatives
        repeat their anchor positive's row), so the write skips the search (a sort) for the
        last position of each index (``tests/test_duplicate_rule.py`` checks it under an
        adversarial scatter order)."""
        xp = step.xp
        dtype = old.dtype
        new = pairs.rows_kept(new, old, xp)
        if new.dtype != table.dtype and pairs.compact:  # every row moves
            new = xp.astype(new, table.dtype)
        elif new.dtype != table.dtype:
            # A masked row without pairs is written back as stored, not through the scores'
            # dtype (which would cut the digits of a float64 table under float32 scores);
            # before the spread, so that a position pointed at its anchor writes exactly the
            # anchor's row (several labels: the anchor's label may have pairs where the
            # position's has none).
            old = xp.take(table, rows.rows, axis=0)
            new = step.unmoved_as_gathered(new, old, pairs.moved(new, xp))
        new = rows.spread(new, old, pairs.positive, xp)
        stored = in_dtype(new, dtype, xp)  # new rows (never a table): no copy needed
        return step.write_rows(table, rows.rows, new, equal_duplicates=True), stored



def _log_shift(xp: Any, old_tilde: Array, old_shift: Array, largest: Array, gamma: float,
               ) -> tuple[Array, Array]:
    r"""New log-shift and carried term of a shifted moving average :math:`u = \tilde u e^c`.

    ``c_new = max(largest, c_old + log((1 - gamma) u~_old))``, the second term left out when
    ``(1 - gamma) u~_old`` is 0 (a first visit, or gamma = 1), and ``carried = (1 - gamma)
    u~_old exp(c_old - c_new)``, which is <= 1. Computed with ``where`` on safe operands, so
    no inf or NaN appears on either branch.
    """
    carry = (1 - gamma) * old_tilde
    has_carry = carry > 0
    candidate = old_shift + xp.log(xp.where(has_carry, carry, xp.ones_like(carry)))
    shift = xp.where(has_carry, xp.maximum(largest, candidate), largest)
    carried = xp.where(has_carry, xp.exp(candidate - shift), xp.zeros_like(carry))
    return shift, carried


def _kl_rows(xp: Any, rows: PositiveRows, old: Array, z: Array, pairs: Pairs,
             gamma: float) -> Array:
    r"""New rows [u~, c] (R, 2) of :math:`u_i \leftarrow (1-\gamma)u_i + \gamma\,
    \frac1{n_-}\sum_j e^{z_{ij}}`, pooled over the duplicates of a positive; ``old`` (R, 2)
    are the gathered rows, ``z`` (R, C) the detached exponents."""
    low = None if pairs.mask is None else xp.min(z)  # below every pair's z (masked maxima)
    largest = xp.max(pairs.select(z, low, xp), axis=1)
    largest = rows.max(largest, low, xp)
    shift, carried = _log_shift(xp, old[:, 0], old[:, 1], largest, gamma)
    exponent = pairs.select(z - xp.expand_dims(shift, 1), 0, xp)
    fresh = xp.sum(pairs.only(xp.exp(exponent)), axis=1) / pairs.num_neg  # each <= 1
    return xp.stack([carried + gamma * rows.pool(fresh, xp), shift], axis=1)


def _check_surrogate_args(owner: str, margin: object, surrogate: object, scale: object,
                          ) -> tuple[float, str, float]:
    return (check_positive(owner, "margin", margin), check_surrogate(surrogate),
            check_positive(owner, "scale", scale))


def _check_gammas(owner: str, gammas: object) -> tuple[float, float]:
    pair = tuple(gammas) if isinstance(gammas, tuple | list) else None
    if pair is None or len(pair) != 2:
        raise ValueError(
            f"{owner}: gammas={gammas!r}; expected two numbers in (0, 1], the moving-average "
            "weights of u and of w. Fix: pass e.g. gammas=(0.9, 0.9)."
        )
    return (check_fraction(owner, "gammas[0]", pair[0]),
            check_fraction(owner, "gammas[1]", pair[1]))


# --------------------------------------------------------------------------- SOPA

class pAUC_CVaR_State(NamedTuple):
    """State of :class:`pAUC_CVaR_Loss`."""

    #: (num_samples,) float — per dataset index, the CVaR threshold s_i of that positive.
    threshold: Array


class pAUC_CVaR_Loss(_PairwiseLoss):
    r"""One-way partial AUC (FPR :math:`\le\beta`) by its CVaR form: SOPA.

    Parameters
    ----------
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)``.
    beta : float, default 0.2
        Largest false-positive rate of the partial area, in (0, 1].
    eta : float, default 0.1
        Step size of the threshold update, > 0.
    margin : float, default 1.0
        Margin :math:`m` of the surrogate (scores are expected in [0, 1]).
    surrogate : str, default "squared_hinge"
        Pairwise surrogate :math:`\ell`, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    For each positive i (dataset index :math:`k_i`) and negative j of the batch, with the
    threshold *before* the step,

    .. math::

        p_{ij} &= \mathbb 1[\ell_{ij} > s_{k_i}] \\
        L &= \frac{1}{\beta\,n_+ n_-}\sum_{i,j} p_{ij}\,\ell_{ij} \\
        s_{k_i} &\leftarrow s_{k_i} - \eta\Big(1 - \frac{\sum_j p_{ij}}{\beta\,n_-}\Big)

    (:math:`p` is detached). :math:`n_-` is the batch's count of negatives, as LibAUC's
    default ``auto=True``; LibAUC's ``pos_len`` and ``num_neg`` are therefore not needed.

    *Batches*: pass the dataset index of every example. Positives sharing one dataset index
    pool their batch quantities (mean) and get one update; rows of negatives are never
    written. A batch without positives or without negatives returns 0 (gradient 0) and leaves
    the state unchanged.

    References
    ----------
    Zhu, Li, Wang, Wu, Yang. "When AUC meets DRO: Optimizing Partial AUC for Deep Learning
    with Non-Convex Convergence Guarantee", ICML 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = pAUC_CVaR_Loss(num_samples=4, beta=0.5)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> value, state = loss_fn.apply(state, np.array([0.9, 0.2, 0.6, 0.4]),
    ...                              np.array([1, 0, 1, 0]), np.array([0, 1, 2, 3]))
    >>> round(float(value), 4), state.threshold.round(4).tolist()
    (0.67, [0.1, 0.0, 0.1, 0.0])
    """

    state_type = pAUC_CVaR_State
    modes = ("SOPA",)  # pAUCLoss's

    def __init__(self, num_samples: int, *, beta: float = 0.2, eta: float = 0.1,
                 margin: float = 1.0, surrogate: str = "squared_hinge",
                 scale: float = 1.0) -> None:
        owner = "pAUC_CVaR_Loss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.beta = check_fraction(owner, "beta", beta)
        self.eta = check_positive(owner, "eta", eta)
        self.margin, self.surrogate, self.scale = _check_surrogate_args(
            owner, margin, surrogate, scale)

    def state_tables(self) -> dict[str, StateTable]:
        return {"threshold": StateTable("sample", domain=REAL)}  # moves either way

    def _pair_loss(self, step: Step, state: pAUC_CVaR_State, pairs: Pairs, rows: PositiveRows,
                   ) -> tuple[Array, pAUC_CVaR_State]:
        xp = step.xp
        dtype = pairs.value.dtype
        old = self._gather(xp, state.threshold, rows, dtype)  # (R,)
        hit = pairs.only(xp.astype(pairs.fixed > xp.expand_dims(old, 1), dtype))
        bracket = 1 - xp.sum(hit, axis=1) / (self.beta * pairs.num_neg)
        new = old - self.eta * rows.pool(bracket, xp)
        table, _ = self._write(step, state.threshold, rows, pairs, new, old)
        return pairs.mean(hit, xp) / self.beta, pAUC_CVaR_State(threshold=table)


# --------------------------------------------------------------------------- SOPAs

class pAUC_DRO_State(NamedTuple):
    """State of :class:`pAUC_DRO_Loss`."""

    #: (num_samples, 2) float — per dataset index, [u~, c]: the moving average
    #: u = u~ exp(c) of that positive's mean exp(l_ij / lam), with its log-shift c.
    u: Array


class pAUC_DRO_Loss(_PairwiseLoss):
    r"""One-way partial AUC (FPR :math:`\le\beta`) by KL-DRO: SOPAs (``pAUCLoss("1w")``).

    Parameters
    ----------
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)``.
    gamma : float, default 0.9
        Weight of the new mini-batch estimate in the moving average, in (0, 1].
    lam : float, default 1.0
        Temperature :math:`\lambda > 0` of the KL-DRO (LibAUC's ``Lambda``); a smaller value
        concentrates the weight on the hardest negatives (a smaller FPR range).
    margin : float, default 1.0
        Margin :math:`m` of the surrogate.
    surrogate : str, default "squared_hinge"
        Pairwise surrogate :math:`\ell`, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    The objective is :math:`F = \frac1{n_+}\sum_{i\in P} \lambda\log \frac1{n_-}
    \sum_{j\in N} e^{\ell_{ij}/\lambda}`. Per positive i (dataset index :math:`k_i`),
    with :math:`z_{ij} = \ell_{ij}/\lambda` detached:

    .. math::

        u_{k_i} &\leftarrow (1-\gamma)\,u_{k_i} + \gamma\,\tfrac1{n_-}
                     \textstyle\sum_j e^{z_{ij}} \\
        L &= \frac{1}{n_+ n_-}\sum_{i,j} \mathrm{sg}\!\left[e^{z_{ij}} / u_{k_i}
             \right]\ell_{ij}

    with the updated :math:`u`. It is stored as :math:`u = \tilde u\,e^c` with
    :math:`c \leftarrow \max(\max_j z_{ij},\ c + \log((1-\gamma)\tilde u))` and
    :math:`\tilde u \leftarrow (1-\gamma)\tilde u\,e^{c_{old} - c} + \gamma\,\frac1{n_-}
    \sum_j e^{z_{ij} - c}`, which is exact and keeps :math:`\tilde u` in
    :math:`[\min(1, \gamma/(m\,n_-)), 1 + \gamma]` (m: the row's duplicates in the batch).
    So logits and a small :math:`\lambda` are fine in float32, where LibAUC's raw
    :math:`e^{\ell/\lambda}` overflows to inf. With :math:`\gamma = 1` and the whole
    data set in one batch, the gradient is that of F.

    *Batches*: pass the dataset index of every example. Positives sharing one dataset index
    pool their batch quantities (mean) and get one update; rows of negatives are never
    written. A batch without positives or without negatives returns 0 (gradient 0) and leaves
    the state unchanged.

    References
    ----------
    Zhu, Li, Wang, Wu, Yang. "When AUC meets DRO: Optimizing Partial AUC for Deep Learning
    with Non-Convex Convergence Guarantee", ICML 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = pAUC_DRO_Loss(num_samples=4, gamma=1.0)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> value, state = loss_fn.apply(state, np.array([0.9, 0.2, 0.6, 0.4]),
    ...                              np.array([1, 0, 1, 0]), np.array([0, 1, 2, 3]))
    >>> u = state.u[:, 0] * np.exp(state.u[:, 1])  # mean_j exp(l_ij) of positives 0 and 2
    >>> round(float(value), 4), u.round(4).tolist()
    (0.3479, [1.1891, 0.0, 1.6649, 0.0])
    """

    state_type = pAUC_DRO_State
    modes = ("SOPAs", "1w")  # pAUCLoss's

    def __init__(self, num_samples: int, *, gamma: float = 0.9, lam: float = 1.0,
                 margin: float = 1.0, surrogate: str = "squared_hinge",
                 scale: float = 1.0) -> None:
        owner = "pAUC_DRO_Loss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.gamma = check_fraction(owner, "gamma", gamma)
        self.lam = check_positive(owner, "lam", lam)
        self.margin, self.surrogate, self.scale = _check_surrogate_args(
            owner, margin, surrogate, scale)

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("sample", (2,), domain=SHIFTED_MEAN)}

    def state_meaning(self) -> dict[str, Any]:
        # u~ e^c is a mean of exp(l / lam): lam is the unit of the stored exponent.
        return {"lam": self.lam}

    def _pair_loss(self, step: Step, state: pAUC_DRO_State, pairs: Pairs, rows: PositiveRows,
                   ) -> tuple[Array, pAUC_DRO_State]:
        xp = step.xp
        z = pairs.fixed / self.lam
        old = self._gather(xp, state.u, rows, pairs.value.dtype)  # (R, 2)
        new = _kl_rows(xp, rows, old, z, pairs, self.gamma)
        table, stored = self._write(step, state.u, rows, pairs, new, old)
        # u~ > 0 at the positives of a batch with pairs; elsewhere (and in a batch without
        # pairs, whose rows keep their initial 0) it is replaced by 1, so nothing divides by 0.
        tilde = xp.where(pairs.positive_and(stored[:, 0] > 0), stored[:, 0],
                         xp.ones_like(stored[:, 0]))
        exponent = pairs.select(z - xp.expand_dims(stored[:, 1], 1), 0, xp)  # <= 0 on pairs
        weights = xp.exp(exponent) / xp.expand_dims(tilde, 1)
        return pairs.mean(weights, xp), pAUC_DRO_State(u=table)


# --------------------------------------------------------------------------- SOTAs

class tpAUC_KL_State(NamedTuple):
    """State of :class:`tpAUC_KL_Loss`."""

    #: (num_samples, 2) float — per dataset index, [u~, c] as in :class:`pAUC_DRO_State`.
    u: Array
    #: (2,) float — [w~, d]: the moving average w = w~ exp(d) of mean_i u_i^(lam/tau).
    w: Array


class tpAUC_KL_Loss(_PairwiseLoss):
    r"""Two-way partial AUC by a double KL-DRO: SOTAs (``pAUCLoss("2w")``).

    Two-way: FPR :math:`\le\beta` and TPR :math:`\ge\alpha`, both set by temperatures.

    Parameters
    ----------
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)``.
    tau : float, default 1.0
        Temperature :math:`\tau > 0` over positives (the TPR side).
    lam : float, default 1.0
        Temperature :math:`\lambda > 0` over negatives (the FPR side; LibAUC's ``Lambda``).
    gammas : tuple of two floats, default (0.9, 0.9)
        Moving-average weights :math:`(\gamma_0, \gamma_1)` of :math:`u` and :math:`w`, each
        in (0, 1].
    margin : float, default 1.0
        Margin :math:`m` of the surrogate.
    surrogate : str, default "squared_hinge"
        Pairwise surrogate :math:`\ell`, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    The objective is :math:`F = \tau\log\frac1{n_+}\sum_{i\in P} u_i^{\lambda/\tau}`
    with :math:`u_i = \frac1{n_-}\sum_{j\in N} e^{\ell_{ij}/\lambda}`. Per step, with
    :math:`z_{ij} = \ell_{ij}/\lambda` detached and :math:`r = \lambda/\tau`:

    .. math::

        u_{k_i} &\leftarrow (1-\gamma_0)\,u_{k_i} + \gamma_0\,\tfrac1{n_-}
                     \textstyle\sum_j e^{z_{ij}} \\
        w &\leftarrow (1-\gamma_1)\,w + \gamma_1\,\tfrac1{n_+}
             \textstyle\sum_{i\in P} u_{k_i}^{r} \\
        L &= \frac{1}{n_+ n_-}\sum_{i,j} \mathrm{sg}\!\left[u_{k_i}^{r-1}
             e^{z_{ij}} / w\right]\ell_{ij}

    with the updated :math:`u` and :math:`w` (duplicate positives count once per position in
    the mean of :math:`w`). Both are stored shifted, :math:`u = \tilde u e^c` as in
    :class:`pAUC_DRO_Loss` and :math:`w = \tilde w e^d` with the same rule for
    :math:`v_i = r\log u_{k_i}`, and the weights are computed in logs: no overflow for
    logits or small temperatures. With :math:`\gamma_0 = \gamma_1 = 1` and the whole data set
    in one batch, the gradient is that of F.

    *Batches*: pass the dataset index of every example. Positives sharing one dataset index
    pool their batch quantities (mean) and get one update; rows of negatives are never
    written. A batch without positives or without negatives returns 0 (gradient 0) and leaves
    the state unchanged.

    References
    ----------
    Zhu, Li, Wang, Wu, Yang. "When AUC meets DRO: Optimizing Partial AUC for Deep Learning
    with Non-Convex Convergence Guarantee", ICML 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = tpAUC_KL_Loss(num_samples=4, tau=0.5)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> value, state = loss_fn.apply(state, np.array([0.9, 0.2, 0.6, 0.4]),
    ...                              np.array([1, 0, 1, 0]), np.array([0, 1, 2, 3]))
    >>> round(float(value), 4), round(float(state.w[0] * np.exp(state.w[1])), 4)
    (0.4982, 1.5257)
    """

    state_type = tpAUC_KL_State
    modes = ("SOTAs", "2w")  # pAUCLoss's

    def __init__(self, num_samples: int, *, tau: float = 1.0, lam: float = 1.0,
                 gammas: tuple[float, float] = (0.9, 0.9), margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0) -> None:
        owner = "tpAUC_KL_Loss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.tau = check_positive(owner, "tau", tau)
        self.lam = check_positive(owner, "lam", lam)
        self.gammas = _check_gammas(owner, gammas)
        self.margin, self.surrogate, self.scale = _check_surrogate_args(
            owner, margin, surrogate, scale)

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("sample", (2,), domain=SHIFTED_MEAN),
                "w": StateTable(None, (2,), domain=SHIFTED_MEAN)}

    def state_meaning(self) -> dict[str, Any]:
        # u is a mean of exp(l / lam) and w one of u^(lam / tau).
        return {"lam": self.lam, "tau": self.tau}

    def _pair_loss(self, step: Step, state: tpAUC_KL_State, pairs: Pairs, rows: PositiveRows,
                   ) -> tuple[Array, tpAUC_KL_State]:
        xp = step.xp
        dtype = pairs.value.dtype
        gamma0, gamma1 = self.gammas
        ratio = self.lam / self.tau
        z = pairs.fixed / self.lam
        old = self._gather(xp, state.u, rows, dtype)
        new = _kl_rows(xp, rows, old, z, pairs, gamma0)
        table, stored = self._write(step, state.u, rows, pairs, new, old)

        tilde = stored[:, 0]  # > 0 at positives of a batch with pairs; else replaced by 1
        log_tilde = xp.log(xp.where(pairs.positive_and(tilde > 0), tilde, xp.ones_like(tilde)))
        shift = stored[:, 1]
        v = ratio * (log_tilde + shift)  # r log u_i, (R,)
        largest = pairs.positive_max(v, step)  # () or (K,): per label
        old_w = xp.astype(state.w, dtype)  # (2,) or (K, 2)
        w_shift, carried = _log_shift(xp, old_w[..., 0], old_w[..., 1], largest, gamma1)
        exponent = pairs.on_positives(v - pairs.per_row(w_shift, xp), xp)  # <= 0 at positives
        fresh = pairs.label_mean(xp.exp(exponent), step)
        new_w = pairs.if_kept(xp.stack([carried + gamma1 * fresh, w_shift], axis=-1), old_w, xp)
        w_table = in_dtype(new_w, state.w.dtype, xp)
        stored_w = in_dtype(w_table, dtype, xp)  # the weights use the stored w
        w_tilde = xp.where(stored_w[..., 0] > 0, stored_w[..., 0], xp.ones_like(stored_w[..., 0]))
        w_shift = stored_w[..., 1]

        # log weight = r log u - d - log w~ + (z - c) - log u~: each large pair cancels first.
        outer = (v - pairs.per_row(w_shift, xp) - pairs.per_row(xp.log(w_tilde), xp)
                 - log_tilde)
        exponent = xp.expand_dims(outer, 1) + (z - xp.expand_dims(shift, 1))
        weights = xp.exp(pairs.select(exponent, 0, xp))
        return pairs.mean(weights, xp), tpAUC_KL_State(u=table, w=w_table)


# --------------------------------------------------------------------------- STACO

class tpAUC_CVaR_State(NamedTuple):
    """State of :class:`tpAUC_CVaR_Loss`."""

    #: (num_samples, 3) float — per dataset index, [u, s1, dual]: the CVaR value over
    #: negatives, its threshold s1 and the positive's dual weight in [0, 1]; filled (1, 0, 1).
    u: Array
    #: () float — the threshold s2 of the outer CVaR over positives.
    s2: Array


class tpAUC_CVaR_Loss(_PairwiseLoss):
    r"""Two-way partial AUC by a double CVaR with closed-form duals: STACO.

    ``pAUCLoss("STACO")``; LibAUC's ``tpAUC_CVaR_loss``.

    Parameters
    ----------
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)`` (LibAUC's
        ``data_length``).
    margin : float, default 0.5
        Margin :math:`m` of the surrogate (LibAUC's ``threshold``).
    alpha : float, default 0.1
        Step size :math:`\alpha > 0` of the dual update.
    beta_0, beta_1 : float, default 0.1
        Step sizes :math:`\beta_0, \beta_1 > 0` of the thresholds s1 (per positive) and s2.
    theta_0, theta_1 : float, default 0.5
        CVaR levels :math:`\theta_0` over positives (the TPR side) and :math:`\theta_1` over
        negatives (the FPR side), each in (0, 1].
    surrogate : str, default "squared_hinge"
        Pairwise surrogate :math:`\ell`, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    Per positive i (dataset index :math:`k_i`; :math:`s_1, \mathrm{dual}, s_2` before the
    step):

    .. math::

        p_{ij} &= \mathbb 1[\ell_{ij} > s_{1,k_i}] \\
        u_{k_i} &\leftarrow s_{1,k_i} + \tfrac{1}{\theta_1 n_-}\textstyle\sum_j
                     \max(\ell_{ij} - s_{1,k_i}, 0) \\
        \mathrm{dual}_{k_i} &\leftarrow \mathrm{clip}(\mathrm{dual}_{k_i}
                     + \alpha\,(u_{k_i} - s_2)/\theta_0,\ 0,\ 1) \\
        L &= \frac{1}{\theta_0\theta_1\,n_+ n_-}\sum_{i,j}
             \mathrm{sg}[\mathrm{dual}_{k_i}\,p_{ij}]\,\ell_{ij} \\
        s_{1,k_i} &\leftarrow s_{1,k_i} - \beta_0\,\frac{\mathrm{dual}_{k_i}}{\theta_0}
                     \Big(1 - \frac{\sum_j p_{ij}}{\theta_1 n_-}\Big) \\
        s_2 &\leftarrow s_2 - \beta_1\Big(1 - \frac{1}{\theta_0 n_+}\textstyle\sum_{i\in P}
               \mathrm{dual}_{k_i}\Big)

    with the updated duals in L, :math:`s_1` and :math:`s_2` (LibAUC 2.0.1's order of
    updates). The index must hold every example's index; LibAUC crashes when it holds the
    positives' only (``UnboundLocalError``).

    *Batches*: pass the dataset index of every example. Positives sharing one dataset index
    pool their batch quantities (mean) and get one update; rows of negatives are never
    written. A batch without positives or without negatives returns 0 (gradient 0) and leaves
    the state unchanged.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = tpAUC_CVaR_Loss(num_samples=4, margin=1.0)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> value, state = loss_fn.apply(state, np.array([0.9, 0.2, 0.6, 0.4]),
    ...                              np.array([1, 0, 1, 0]), np.array([0, 1, 2, 3]))
    >>> round(float(value), 4), state.u[0].round(4).tolist(), round(float(state.s2), 4)
    (1.34, [0.34, 0.2, 1.0], 0.1)
    """

    state_type = tpAUC_CVaR_State
    modes = ("STACO",)  # pAUCLoss's

    def __init__(self, num_samples: int, *, margin: float = 0.5, alpha: float = 0.1,
                 beta_0: float = 0.1, beta_1: float = 0.1, theta_0: float = 0.5,
                 theta_1: float = 0.5, surrogate: str = "squared_hinge",
                 scale: float = 1.0) -> None:
        owner = "tpAUC_CVaR_Loss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.margin, self.surrogate, self.scale = _check_surrogate_args(
            owner, margin, surrogate, scale)
        self.alpha = check_positive(owner, "alpha", alpha)
        self.beta_0 = check_positive(owner, "beta_0", beta_0)
        self.beta_1 = check_positive(owner, "beta_1", beta_1)
        self.theta_0 = check_fraction(owner, "theta_0", theta_0)
        self.theta_1 = check_fraction(owner, "theta_1", theta_1)

    def state_tables(self) -> dict[str, StateTable]:
        # [u, s1, dual]: the CVaR value and threshold move either way, the dual is clipped.
        return {"u": StateTable("sample", (3,), fill=(1.0, 0.0, 1.0),
                                domain=(REAL, REAL, UNIT_INTERVAL)),
                "s2": StateTable(None, domain=REAL)}

    def _pair_loss(self, step: Step, state: tpAUC_CVaR_State, pairs: Pairs,
                   rows: PositiveRows) -> tuple[Array, tpAUC_CVaR_State]:
        xp = step.xp
        dtype = pairs.value.dtype
        old = self._gather(xp, state.u, rows, dtype)  # (R, 3): u, s1, dual
        s1, dual = old[:, 1], old[:, 2]
        s2 = xp.astype(state.s2, dtype)  # () or (K,): per label
        excess = pairs.fixed - xp.expand_dims(s1, 1)
        hit = pairs.only(xp.astype(excess > 0, dtype))
        above = xp.sum(pairs.only(xp.where(excess > 0, excess, xp.zeros_like(excess))), axis=1)
        u = s1 + rows.pool(above / pairs.num_neg, xp) / self.theta_1
        dual = xp.clip(dual + self.alpha * (u - pairs.per_row(s2, xp)) / self.theta_0,
                       min=0.0, max=1.0)
        dual = in_dtype(in_dtype(dual, state.u.dtype, xp), dtype, xp)  # the stored dual
        hit_rate = rows.pool(xp.sum(hit, axis=1) / pairs.num_neg, xp)
        s1 = s1 - self.beta_0 * (dual / self.theta_0) * (1 - hit_rate / self.theta_1)
        table, _ = self._write(step, state.u, rows, pairs, xp.stack([u, s1, dual], axis=1), old)

        weights = xp.expand_dims(dual, 1) * hit / (self.theta_0 * self.theta_1)
        loss = pairs.mean(weights, xp)
        mean_dual = pairs.label_mean(dual, step)
        new_s2 = pairs.if_kept(s2 - self.beta_1 * (1 - mean_dual / self.theta_0), s2, xp)
        return loss, tpAUC_CVaR_State(u=table, s2=in_dtype(new_s2, state.s2.dtype, xp))


# --------------------------------------------------------------------------- front door

#: ``pAUCLoss`` modes (LibAUC's names) -> loss class, from each pairwise loss's ``modes``.
PAUC_MODES: dict[str, type[_PairwiseLoss]] = modes_of(
    cls for cls in LOSSES.values() if issubclass(cls, _PairwiseLoss))


def pauc_class(mode: object) -> type[_PairwiseLoss]:
    """The class of ``pAUCLoss(mode)``; ValueError listing the modes otherwise.

    >>> pauc_class("1w").__name__
    'pAUC_DRO_Loss'
    """
    return cast(type[_PairwiseLoss], by_mode(
        "pAUCLoss", PAUC_MODES, mode, "pAUCLoss('1w', num_samples=len(dataset))"))


def pAUCLoss(mode: str = "1w", **kwargs: Any) -> BinaryLoss:
    """The partial-AUC loss of ``mode``, built with ``kwargs`` (LibAUC's front door).

    ``"SOPA"`` -> :class:`pAUC_CVaR_Loss`, ``"SOPAs"`` / ``"1w"`` -> :class:`pAUC_DRO_Loss`,
    ``"SOTAs"`` / ``"2w"`` -> :class:`tpAUC_KL_Loss`, ``"STACO"`` -> :class:`tpAUC_CVaR_Loss`
    (each class's ``modes``).

    >>> loss_fn = pAUCLoss("2w", num_samples=10, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau, loss_fn.gammas
    ('tpAUC_KL_Loss', 0.5, (0.9, 0.9))
    """
    return pauc_class(mode)(**kwargs)
