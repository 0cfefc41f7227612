r"""Learning to rank: listwise cross-entropy, NDCG (SONG) and top-K NDCG (K-SONG).

A batch holds Q queries; each row has the scores of ``P`` sampled relevant items (its
*positives*, first) followed by ``M`` sampled items that are not relevant (``scores`` has
shape (Q, P + M)), as :class:`~xrisk.samplers.TriSampler` in ranking mode gives them
(``sampler.ranking_inputs(items, queries)`` returns every other input). The state is keyed by
*interaction*, a query's relevant item (``num_interactions`` rows: it grows with the number of
relevant pairs, never with queries x items), plus, for K-SONG, one threshold per query. The
scores of the sampled negatives only enter the batch estimates; they never touch the state.

A query with fewer relevant items than ``P`` fills its row with repeats; ``mask`` (Q, P) marks
the real positives (1) and the padding (0). A padded slot is neither an outer term, nor a
competitor in the inner sums, nor written to the state. Positions that share an interaction
in one batch (a query sampled twice) pool their estimates (mean) into one moving-average
update, so the written state is the same on every backend.

The returned values are *dynamic mini-batch losses*: detached weights times differentiable
inner functions, so that autodiff gives the algorithms' gradient estimates.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._arguments import check_choice, check_count, check_fraction, check_positive
from .._domain import NONNEGATIVE, POSITIVE_COUNT, REAL, Domain, Relation
from .._grouping import KeyGroups, group_keys
from .._state import SHIFTED_MEAN, StateTable, axis_size
from .._typing import Array, in_dtype
from ..surrogates import check_surrogate, surrogate_loss
from ._base import Input, LossDefinition, Step
from .pauc import _log_shift

__all__ = [
    "ListwiseCELoss",
    "ListwiseCEState",
    "KSONGState",
    "NDCGLoss",
    "NDCGState",
    "TOP_K_VERSIONS",
]


#: The K-SONG variants: ``"theo"`` adds the implicit gradient of lambda_q, ``"prac"`` not.
TOP_K_VERSIONS = ("theo", "prac")

_LN2 = math.log(2.0)

#: Graded relevance y of NDCG's gains 2^y - 1: at most 64, so a gain (<= 1.8e19) times the
#: number of candidates stays finite in float32, the narrowest dtype a loss computes in
#: (2^y overflows float32 from y = 128 on: a NaN loss after the state was written).
GRADED_RELEVANCE = Domain(0.0, 64.0)


# --------------------------------------------------------------------------- shared helpers

def _groups(step: Step, name: str, keys: Array, keep: Array | None, dtype: Any) -> KeyGroups:
    """The positions of ``keys`` (n,), input ``name`` flattened, grouped by key, pooling where
    ``keep`` (n,) is true (:func:`xrisk._grouping.group_keys`: positions not kept join the
    first kept position's group and repeat its row's write). O(n log n)."""
    return group_keys(keys, keep, backend=step.backend, xp=step.xp, dtype=dtype,
                      host=step.host.get(name))



def _stored(xp: Any, new: Array, table: Array, dtype: Any) -> Array:
    """``new`` as the table stores it (rounded to the table's dtype), back in ``dtype``: the
    weights use what the next step will read."""
    return new if table.dtype == dtype else xp.astype(xp.astype(new, table.dtype), dtype)


def _sigmoids(xp: Any, x: Array) -> tuple[Array, Array]:
    """``(sigmoid(x), sigmoid(-x)) = (sigmoid(x), 1 - sigmoid(x))`` without overflow (exp of a
    value <= 0 only) and without the cancellation of ``1 - sigmoid(x)`` for large x."""
    negative = x < 0
    e = xp.exp(xp.where(negative, x, -x))
    small, large = e / (1 + e), 1 / (1 + e)
    return xp.where(negative, small, large), xp.where(negative, large, small)


def _mask(xp: Any, mask: Array | None, like: Array, dtype: Any) -> Array:
    """The positives' mask as 0.0/1.0 floats (all ones when omitted)."""
    if mask is None:
        return xp.ones_like(like, dtype=dtype)
    return xp.astype(mask, dtype)


def _check_width(owner: str, scores: Array, interaction: Array) -> int:
    """The positives per query, P. A row needs the positives' columns and at least one sampled
    negative; both widths must be static (the math splits each row at P), the number of
    queries may be known only at run time."""
    candidates, positives = scores.shape[1], interaction.shape[1]
    if candidates is None or positives is None:
        raise ValueError(
            f"{owner}: scores has shape {tuple(scores.shape)} and interaction "
            f"{tuple(interaction.shape)} when traced; expected a static size of every axis "
            "but the first (queries). Fix: give the candidates and positives per query in the "
            "input signature, e.g. tf.TensorSpec([None, num_pos + num_neg]) for scores and "
            "tf.TensorSpec([None, num_pos]) for interaction."
        )
    candidates, positives = int(candidates), int(positives)
    if candidates <= positives:
        raise ValueError(
            f"{owner}: scores has {candidates} columns per query and the positives' inputs "
            f"have {positives}; expected scores of shape (queries, positives + negatives) with "
            "at least one negative. Fix: put the num_pos positives' scores first, then the "
            "num_neg sampled negatives' (TriSampler(mode='ranking') gives items in that order)."
        )
    return positives


def _row_count(xp: Any, valid: Array) -> Array:
    """Number of rows with at least one real positive, at least 1."""
    return xp.clip(xp.sum(xp.max(valid, axis=1)), 1, None)


# --------------------------------------------------------------------------- listwise CE

class ListwiseCEState(NamedTuple):
    """State of :class:`ListwiseCELoss`."""

    #: (num_interactions, 2) float — per interaction, [u~, c]: the moving average
    #: u = u~ exp(c) of mean_j exp(h_qj - h_qi) over the sampled negatives, with its log-shift.
    u: Array


class ListwiseCELoss(LossDefinition):
    r"""Listwise cross-entropy (ListNet-style) by moving-average estimators (FCCO).

    LibAUC's ``ListwiseCELoss``: the paper's warm-up loss before SONG / K-SONG.

    Parameters
    ----------
    num_interactions : int
        Number of relevant (query, item) pairs of the training data (LibAUC's ``N``); the
        ``interaction`` input indexes them (``TriSampler.num_interactions``).
    gamma : float, default 0.9
        Weight of the new mini-batch estimate in the moving average, in (0, 1].

    Notes
    -----
    Inputs: ``scores`` (Q, P + M), the P positives first; ``interaction`` (Q, P), the
    interaction id of each positive; ``mask`` (Q, P), optional, 1 for a real positive and 0 for
    padding. The objective is

    .. math::

        F = \frac{M}{Q}\sum_q\sum_{i\in P_q}\log\frac1M\sum_{j\in N_q} e^{h_{qj} - h_{qi}},

    the cross-entropy of the softmax of each positive against the sampled negatives. With
    :math:`d_{ij} = h_{qj} - h_{qi}` detached as :math:`z_{ij}`, per positive (interaction
    :math:`k`):

    .. math::

        u_k &\leftarrow (1-\gamma)\,u_k + \gamma\,\tfrac1M\textstyle\sum_j e^{z_{ij}} \\
        L &= \frac1{Q'}\sum_{q,i}\sum_j \mathrm{sg}\!\left[e^{z_{ij}} / u_k\right] d_{ij}

    with the updated :math:`u` (Q': rows with a real positive), LibAUC's scale (the sum over
    positives and negatives, divided by the number of queries), so learning rates carry over.
    :math:`u` is stored as :math:`u = \tilde u\,e^c` per interaction, with the log-shift
    :math:`c \leftarrow \max(\max_j z_{ij},\ c + \log((1-\gamma)\tilde u))` and
    :math:`\tilde u \leftarrow (1-\gamma)\tilde u\,e^{c_{old}-c} + \gamma\,\frac1M\sum_j
    e^{z_{ij}-c}`: exact, no overflow, and every stored :math:`u` stays on one scale from
    step to step. With :math:`\gamma = 1` the gradient is that of F on the batch.

    Differences from LibAUC 2.0.1: LibAUC shifts the exponent by the maximum over the whole
    batch, a scalar that changes every step while :math:`u` averages across steps, so a
    stored :math:`u` mixes scales (its weights are wrong by the ratio of two steps' shifts);
    here each row keeps its own shift. No ``eps`` (:math:`\tilde u > 0` by construction);
    ``num_pos`` is the width of ``interaction``; padded positives are masked; duplicate
    interactions in a batch are pooled (LibAUC: the last write wins).

    References
    ----------
    Qiu, Hu, Zhong, Zhang, Yang. "Large-scale Stochastic Optimization of NDCG Surrogates for
    Deep Learning with Provable Convergence", ICML 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = ListwiseCELoss(num_interactions=5, gamma=1.0)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> scores = np.array([[2.0, 0.5, 1.0], [1.0, 0.0, 3.0]])  # 1 positive, 2 negatives
    >>> value, state = loss_fn.apply(state, scores, np.array([[0], [3]]))
    >>> u = state.u[:, 0] * np.exp(state.u[:, 1])  # mean_j exp(h_qj - h_qi)
    >>> round(float(value), 4), u.round(4).tolist()
    (0.669, [0.2955, 0.0, 0.0, 3.8785, 0.0])
    """

    state_type = ListwiseCEState

    def __init__(self, num_interactions: int, *, gamma: float = 0.9) -> None:
        owner = "ListwiseCELoss"
        self.num_interactions = check_count(owner, "num_interactions", num_interactions)
        self.gamma = check_fraction(owner, "gamma", gamma)

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("scores", ("queries", "candidates"), "score"),
            Input("interaction", ("queries", "positives"), "index", keys="interaction"),
            Input("mask", ("queries", "positives"), "label", optional=True),
        )

    def key_spaces(self) -> dict[str, int | None]:
        return {"interaction": self.num_interactions}

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("interaction", (2,), domain=SHIFTED_MEAN)}

    def _loss(self, step: Step, state: ListwiseCEState, params: Any, scores: Array,
              interaction: Array, mask: Array | None) -> tuple[Array, ListwiseCEState]:
        xp, stop = step.xp, step.stop
        dtype = scores.dtype
        queries = axis_size(interaction)
        positives = _check_width(self.name, scores, interaction)
        negatives = int(scores.shape[1]) - positives
        n = queries * positives
        # Without a mask every positive is real: nothing to select (the same numbers).
        valid = None if mask is None else _mask(xp, mask, interaction, dtype)  # (Q, P)

        # d[q, i, j] = h_qj - h_qi over the negatives j: (Q, P, M)
        diff = xp.expand_dims(scores[:, positives:], 1) - xp.expand_dims(scores[:, :positives], 2)
        z = xp.reshape(stop(diff), (n, negatives))
        keep = None if valid is None else xp.reshape(valid, (n,)) > 0
        groups = _groups(step, "interaction", xp.reshape(interaction, (n,)), keep, dtype)

        gathered = xp.take(state.u, groups.rows, axis=0)
        old = in_dtype(gathered, dtype, xp)  # (n, 2)
        row_max = xp.max(z, axis=1)
        largest = groups.max(row_max, None if keep is None else xp.min(row_max))
        shift, carried = _log_shift(xp, old[:, 0], old[:, 1], largest, self.gamma)
        # <= 0 at kept positions (their group's maximum is in the shift); 0 elsewhere, so no
        # exp overflows into the pooling product.
        exponent = z - xp.expand_dims(shift, 1)
        if keep is not None:
            exponent = xp.where(xp.expand_dims(keep, 1), exponent, xp.zeros_like(z))
        fresh = xp.sum(xp.exp(exponent), axis=1) / negatives
        new = xp.stack([carried + self.gamma * groups.mean(fresh), shift], axis=1)
        if keep is None:  # every group has a kept member: every row moves
            new = new if new.dtype == gathered.dtype else xp.astype(new, gathered.dtype)
        else:
            moved = xp.expand_dims(groups.count > 0, 1)
            new = step.unmoved_as_gathered(xp.where(moved, new, old), gathered, moved)
        table = step.write_rows(state.u, groups.rows, new, equal_duplicates=True)

        stored = in_dtype(new, dtype, xp)  # what the next step reads
        positive = stored[:, 0] > 0
        tilde = xp.where(positive if keep is None else keep & positive, stored[:, 0],
                         xp.ones_like(stored[:, 0]))
        if keep is None:
            weights = xp.exp(z - xp.expand_dims(stored[:, 1], 1)) / xp.expand_dims(tilde, 1)
        else:
            column = xp.expand_dims(keep, 1)
            exponent = xp.where(column, z - xp.expand_dims(stored[:, 1], 1), xp.zeros_like(z))
            weights = xp.where(column, xp.exp(exponent) / xp.expand_dims(tilde, 1),
                               xp.zeros_like(z))
        weights = stop(xp.reshape(weights, (queries, positives, negatives)))
        total = xp.sum(weights * diff)
        if valid is not None:
            loss = total / _row_count(xp, valid)
        elif isinstance(queries, int) and queries > 0:  # every row has a real positive
            loss = total / xp.full_like(total, float(queries))
        else:  # a number of queries known only at run time (TensorFlow)
            loss = total / _row_count(xp, _mask(xp, None, interaction, dtype))
        return loss, ListwiseCEState(u=table)


# --------------------------------------------------------------------------- NDCG

class NDCGState(NamedTuple):
    """State of :class:`NDCGLoss` (SONG, ``top_k=None``)."""

    #: (num_interactions,) float — per interaction (q, i), the moving average of
    #: g_qi = mean_j l(h_qi - h_qj), the surrogate of the item's rank.
    u: Array


class KSONGState(NamedTuple):
    """State of :class:`NDCGLoss` with ``top_k=K`` (K-SONG)."""

    #: (num_interactions,) float — as in :class:`NDCGState`.
    u: Array
    #: (num_queries,) float — the threshold lambda_q (the smoothed (K+1)-th largest score).
    lambda_q: Array
    #: (num_queries,) float — moving average of d^2 L_q / d lambda^2 (used by ``"theo"``;
    #: tracked by ``"prac"`` too, so a run can switch variants).
    s_q: Array


class NDCGLoss(LossDefinition):
    r"""NDCG by stochastic compositional optimization: SONG, or top-K NDCG (K-SONG).

    Parameters
    ----------
    num_interactions : int
        Number of relevant (query, item) pairs (LibAUC's ``N``); ``interaction`` indexes them.
    num_queries : int
        Number of queries (users; LibAUC's ``num_user``); ``query`` indexes them.
    num_items : int or None
        :math:`N` in the NDCG surrogate: the size of the candidate set each query is ranked
        in. An int is one global count for every query, the catalogue size (LibAUC's
        ``num_item``: recommendation, every item is a candidate). ``None`` takes a per-query
        count from the ``num_candidates`` input (learning-to-rank data sets, where each query
        ranks its own documents).
    gamma0 : float, default 0.9
        Moving-average weight of the new estimate of :math:`u`, in (0, 1].
    gamma1 : float, default 0.9
        K-SONG ``"theo"``: moving-average weight of :math:`s_q`, in (0, 1].
    eta0 : float, default 0.01
        K-SONG: step size of the threshold :math:`\lambda_q`, > 0.
    margin : float, default 1.0
        Margin of the surrogate.
    top_k : int or None, default None
        ``None``: SONG (all positions). An int K >= 1: K-SONG, NDCG at the top K.
    top_k_version : {"theo", "prac"}, default "theo"
        K-SONG's gradient: ``"theo"`` includes the implicit gradient of :math:`\lambda_q(w)`,
        ``"prac"`` only weights SONG's terms by :math:`\psi`.
    tau_1 : float, default 0.01
        K-SONG: temperature :math:`\tau_1` of the smoothed top-K threshold problem, > 0.
    tau_2 : float, default 0.0001
        K-SONG: its strong-convexity term :math:`\tau_2`, > 0.
    sigmoid_alpha : float, default 2.0
        K-SONG: :math:`\psi(x) = \sigma(\alpha x)`, the smooth indicator of the top K.
    surrogate : str, default "squared_hinge"
        Surrogate :math:`\ell` of the rank indicator, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    Inputs, per query row q of the batch: ``scores`` (Q, P + M), the P positives first;
    ``relevance`` (Q, P) their graded relevance :math:`y`; ``query`` (Q,) the query ids;
    ``interaction`` (Q, P) the positives' interaction ids; ``num_relevant`` (Q,) the query's
    number of relevant items :math:`|S_q^+|`; ``ideal_dcg`` (Q,) its ideal DCG :math:`Z_q`
    (> 0); ``mask`` (Q, P), optional, 1 for a real positive, 0 for padding;
    ``num_candidates`` (Q,), only with ``num_items=None``. ``sampler.ranking_inputs(items,
    queries)`` of a ranking-mode TriSampler returns all of them but ``scores``.

    SONG minimises :math:`F = \frac1Q\sum_q \frac{|S_q^+|}{Z_q}\,\mathrm{mean}_{i\in P_q}
    f_{qi}(g_{qi})` with :math:`f_{qi}(g) = -(2^{y_{qi}}-1)/\log_2(1 + N g)` and
    :math:`g_{qi} = \frac1{C_q}\sum_{j} \ell(h_{qi} - h_{qj})` over the row's :math:`C_q`
    candidates (real positives and negatives, :math:`i` itself included). Per positive
    (interaction :math:`k`):

    .. math::

        u_k &\leftarrow (1-\gamma_0)\,u_k + \gamma_0\,\mathrm{sg}(g_{qi}) \\
        L &= \frac1{Q'}\sum_q \frac{|S_q^+|}{Z_q}\,\mathrm{mean}_{i\in P_q}\,
             \mathrm{sg}[f'_{qi}(u_k)]\,g_{qi}, \qquad
             f'(u) = \frac{(2^{y}-1)\,N}{\ln 2\,(1+Nu)\log_2^2(1+Nu)}

    with the updated :math:`u` (Q': rows with a real positive). With :math:`\gamma_0 = 1` and
    every item of each query in the batch, the gradient is that of F.

    K-SONG (``top_k=K``) keeps :math:`\lambda_q` (the smoothed (K+1)-th largest score) and,
    for ``"theo"``, :math:`s_q`. With the **old** :math:`\lambda_q` and
    :math:`\sigma_{qj} = \sigma((h_{qj} - \lambda_q)/\tau_1)` (detached), in LibAUC's order
    (u, then :math:`\lambda`, then s, then the loss):

    .. math::

        \lambda_q &\leftarrow \lambda_q - \eta_0\,\big(K/N + \tau_2\lambda_q
                     - \mathrm{mean}_j\,\sigma_{qj}\big) \\
        \psi_{qi} &= \sigma(\alpha(h_{qi} - \lambda_q)), \qquad
        H_{qj} = \sigma_{qj}(1-\sigma_{qj})/\tau_1 \\
        s_q &\leftarrow \gamma_1\,(\tau_2 + \mathrm{mean}_j H_{qj}) + (1-\gamma_1)\,s_q \\
        L &= \frac1{Q'}\sum_q \frac{|S_q^+|}{Z_q}\,\mathrm{mean}_{i}\Big(
             \mathrm{sg}[\psi_{qi} f'_{qi}]\,g_{qi}
             + \mathrm{sg}[\alpha\psi_{qi}(1-\psi_{qi})\,f_{qi}(u_k)]\,
             \big(h_{qi} - \mathrm{mean}_j(\mathrm{sg}[H_{qj}]\,h_{qj})/s_q\big)\Big)

    (the second term, the implicit gradient of :math:`\lambda_q(w)`, for ``"theo"`` only; s
    is the updated one; ``"prac"`` updates s too, unused). Pass :math:`Z_q` of the top K
    (``ranking_inputs(..., ideal_k=K)``) for NDCG@K proper; LibAUC passes the full ideal DCG.

    *Batches*: positions sharing an interaction pool their estimates (mean) and make one
    update; rows sharing a query pool their :math:`\lambda`/s estimates likewise. Padded
    positives (mask 0) are no outer term and no competitor, and write nothing.

    Differences from LibAUC 2.0.1: ``num_pos`` is the width of ``relevance``; padding is
    masked (LibAUC has no mask); duplicates are pooled (LibAUC: the last write wins);
    :math:`N` can be per query; the ``"theo"`` term has the chain-rule factor
    :math:`\alpha` of :math:`\psi' = \alpha\psi(1-\psi)` (LibAUC drops it, a factor
    ``sigmoid_alpha`` = 2 at its default); ``log2(1 + N u)`` is floored at the dtype's
    epsilon, so a degenerate u gives a large finite weight, not inf.

    References
    ----------
    Qiu, Hu, Zhong, Zhang, Yang. "Large-scale Stochastic Optimization of NDCG Surrogates for
    Deep Learning with Provable Convergence", ICML 2022.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = NDCGLoss(num_interactions=4, num_queries=2, num_items=10)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> scores = np.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.5]])  # 2 positives, 1 negative
    >>> value, state = loss_fn.apply(
    ...     state, scores, relevance=np.array([[3.0, 1.0], [2.0, 2.0]]),
    ...     query=np.array([0, 1]), interaction=np.array([[0, 1], [2, 3]]),
    ...     num_relevant=np.array([2.0, 2.0]), ideal_dcg=np.array([7.63, 4.89]))
    >>> round(float(value), 4), state.u.round(4).tolist()
    (0.2142, [0.36, 1.704, 1.575, 0.495])
    """

    state_type: type[NDCGState] | type[KSONGState] = NDCGState  # KSONGState with top_k

    def __init__(
        self,
        num_interactions: int,
        num_queries: int,
        num_items: int | None,
        *,
        gamma0: float = 0.9,
        gamma1: float = 0.9,
        eta0: float = 0.01,
        margin: float = 1.0,
        top_k: int | None = None,
        top_k_version: str = "theo",
        tau_1: float = 0.01,
        tau_2: float = 0.0001,
        sigmoid_alpha: float = 2.0,
        surrogate: str = "squared_hinge",
        scale: float = 1.0,
    ) -> None:
        owner = "NDCGLoss"
        self.num_interactions = check_count(owner, "num_interactions", num_interactions)
        self.num_queries = check_count(owner, "num_queries", num_queries)
        self.num_items = None if num_items is None else check_count(
            owner, "num_items", num_items,
            fix="pass the number of items every query is ranked among (the catalogue size), "
                "or num_items=None and a per-query num_candidates input")
        self.gamma0 = check_fraction(owner, "gamma0", gamma0)
        self.gamma1 = check_fraction(owner, "gamma1", gamma1)
        self.eta0 = check_positive(owner, "eta0", eta0)
        self.margin = check_positive(owner, "margin", margin)
        self.top_k = None if top_k is None else check_count(
            owner, "top_k", top_k,
            fix="pass top_k=None for SONG (LibAUC's topk=-1) or a K >= 1 for K-SONG")
        self.top_k_version = check_choice(owner, "top_k_version", top_k_version,
                                          TOP_K_VERSIONS)
        self.tau_1 = check_positive(owner, "tau_1", tau_1)
        self.tau_2 = check_positive(owner, "tau_2", tau_2)
        self.sigmoid_alpha = check_positive(owner, "sigmoid_alpha", sigmoid_alpha)
        self.surrogate = check_surrogate(surrogate)
        self.scale = check_positive(owner, "scale", scale)
        # SONG keeps u only; K-SONG adds its per-query rows (no table that a step never writes).
        self.state_type = NDCGState if self.top_k is None else KSONGState

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("scores", ("queries", "candidates"), "score"),
            Input("relevance", ("queries", "positives"), "relevance", domain=GRADED_RELEVANCE),
            Input("query", ("queries",), "index", keys="query"),
            Input("interaction", ("queries", "positives"), "index", keys="interaction"),
            Input("num_relevant", ("queries",), "data", domain=POSITIVE_COUNT),
            Input("ideal_dcg", ("queries",), "data", domain=NONNEGATIVE),
            Input("mask", ("queries", "positives"), "label", optional=True),
            Input("num_candidates", ("queries",), "data", optional=self.num_items is not None,
                  domain=POSITIVE_COUNT),
        )

    def relations(self) -> tuple[Relation, ...]:
        # A query's relevant items are among its candidates, and so is at least one item that
        # is not relevant (every row has a sampled negative). Not the row's width: padding
        # repeats positives and a query with few unrated items repeats its negatives, so a
        # row may hold more columns than the query has candidates. Z_q divides the outer
        # weight wherever a positive has a gain (a query whose relevances are all 0 may have
        # Z_q = 0: its gains, hence its terms, are 0).
        if self.num_items is None:
            catalogue: str | float = "num_candidates"
            fix = ("pass num_candidates, the number of items each query is ranked among: its "
                   "relevant items and at least one that is not")
        else:
            catalogue = float(self.num_items)
            fix = ("build the loss with num_items = the number of items every query is ranked "
                   "among (the catalogue size), more than any query's relevant items")
        return (
            Relation("num_relevant", "<", catalogue, fix=fix),
            Relation("ideal_dcg", ">", 0.0, where="relevance",
                     fix="pass the query's ideal DCG, sum_r (2^y_r - 1) / log2(r + 1) over its "
                     "relevances (sampler.ranking_inputs gives it)"),
        )

    def key_spaces(self) -> dict[str, int | None]:
        return {"interaction": self.num_interactions, "query": self.num_queries}

    def state_tables(self) -> dict[str, StateTable]:
        # u: a moving average of surrogate values; s_q one of curvatures (both >= 0);
        # lambda_q a threshold on the scores.
        tables = {"u": StateTable("interaction", domain=NONNEGATIVE)}
        if self.top_k is not None:
            tables.update(lambda_q=StateTable("query", domain=REAL),
                          s_q=StateTable("query", domain=NONNEGATIVE))
        return tables

    def state_meaning(self) -> dict[str, Any]:
        # lambda_q tracks the (K+1)-th largest score: K fixes what it is (top_k_version
        # does not: both variants track the same rows).
        return {"top_k": self.top_k}

    def _loss(self, step: Step, state: Any, params: Any, scores: Array,
              relevance: Array, query: Array, interaction: Array, num_relevant: Array,
              ideal_dcg: Array, mask: Array | None, num_candidates: Array | None,
              ) -> tuple[Array, Any]:
        xp, stop = step.xp, step.stop
        dtype = scores.dtype
        queries = axis_size(interaction)
        positives = _check_width(self.name, scores, interaction)
        if self.num_items is not None and num_candidates is not None:
            raise ValueError(
                f"NDCGLoss: num_candidates was given to a loss built with num_items="
                f"{self.num_items}; expected one count. Fix: drop num_candidates, or build the "
                "loss with num_items=None to use per-query counts.")
        width = int(scores.shape[1])
        n = queries * positives
        valid = _mask(xp, mask, interaction, dtype)  # (Q, P)
        # Column weights (Q, C): the positives' mask, then 1 for every negative. Without a
        # mask every column counts: ones, and no product with them (x * 1 is x, forward and
        # backward), so the same numbers at fewer operations.
        if mask is None:
            column_valid = xp.ones_like(scores)
        else:
            columns = xp.arange(width, device=step.backend.device(scores))
            in_positives = xp.expand_dims(columns < positives, 0)
            column_valid = xp.where(
                in_positives, xp.take(valid, xp.clip(columns, None, positives - 1), axis=1),
                xp.ones_like(scores))
        num_valid = xp.sum(column_valid, axis=1)  # C_q, (Q,)
        size = (in_dtype(xp.reshape(num_candidates, (queries, 1)), dtype, xp)
                if self.num_items is None else float(self.num_items))

        # g[q, i] = mean_j l(h_qi - h_qj) over the row's real candidates: (Q, P)
        pair = surrogate_loss(
            self.surrogate,
            xp.expand_dims(scores[:, :positives], 2) - xp.expand_dims(scores, 1),
            margin=self.margin, scale=self.scale, xp=xp)
        if mask is not None:
            pair = pair * xp.expand_dims(column_valid, 1)
        g = xp.sum(pair, axis=2) / xp.expand_dims(num_valid, 1)

        # u: moving average per interaction, pooled over duplicates, then read back. Without
        # a mask every position is kept and every row moves: nothing to select.
        keep = None if mask is None else xp.reshape(valid, (n,)) > 0
        groups = _groups(step, "interaction", xp.reshape(interaction, (n,)), keep, dtype)
        gathered = xp.take(state.u, groups.rows, axis=0)
        old = in_dtype(gathered, dtype, xp)
        estimate = groups.mean(xp.reshape(stop(g), (n,)))
        new = (1 - self.gamma0) * old + self.gamma0 * estimate
        if keep is None:
            new = in_dtype(new, gathered.dtype, xp)
        else:
            moved = groups.count > 0
            new = step.unmoved_as_gathered(xp.where(moved, new, old), gathered, moved)
        u_table = step.write_rows(state.u, groups.rows, new, equal_duplicates=True)
        u = xp.reshape(in_dtype(new, dtype, xp), (queries, positives))  # as stored

        gain = xp.exp(in_dtype(relevance, dtype, xp) * _LN2) - 1
        # ln(1 + N u), floored so that a degenerate u (0 at padding, underflow) stays finite.
        log_rank = xp.clip(xp.log1p(size * u), float(xp.finfo(dtype).eps), None)
        slope = gain * size * _LN2 / (log_rank * log_rank * (1 + size * u))  # f'(u)
        # Z_q = 0 only where every relevance of the query is 0 (a declared relation): its
        # terms are 0 and so is its weight.
        outer = xp.where(ideal_dcg > 0, num_relevant / xp.where(ideal_dcg > 0, ideal_dcg, 1),
                         xp.zeros_like(ideal_dcg))  # (Q,)

        new_state: NDCGState | KSONGState
        if self.top_k is None:
            terms, new_state = stop(slope) * g, NDCGState(u=u_table)
        else:
            terms, lambda_table, s_table = self._top_k(
                step, state, scores, query, column_valid, num_valid, size, slope, gain,
                log_rank, g, self.top_k)
            new_state = KSONGState(u=u_table, lambda_q=lambda_table, s_q=s_table)
        if mask is not None:
            terms = terms * valid
        per_query = xp.sum(terms, axis=1) / xp.clip(xp.sum(valid, axis=1), 1, None)
        loss = xp.sum(outer * per_query) / _row_count(xp, valid)
        return loss, new_state

    def _top_k(self, step: Step, state: KSONGState, scores: Array, query: Array,
               column_valid: Array, num_valid: Array, size: Any, slope: Array, gain: Array,
               log_rank: Array, g: Array, top_k: int) -> tuple[Array, Array, Array]:
        """K-SONG: the lambda_q (and s_q) updates and the per-positive terms (Q, P); ``top_k``
        is ``self.top_k``, passed where it is known not to be None."""
        xp, stop = step.xp, step.stop
        dtype = scores.dtype
        queries = axis_size(scores)
        positives = int(g.shape[1])
        groups = _groups(step, "query", query, None, dtype)
        old_lambda = in_dtype(xp.take(state.lambda_q, groups.rows, axis=0), dtype, xp)
        fixed = stop(scores)
        # sigma((h_qj - lambda_q) / tau_1) with the old lambda, over the real candidates.
        above, below = _sigmoids(xp, (fixed - xp.expand_dims(old_lambda, 1)) / self.tau_1)
        rate = xp.sum(above * column_valid, axis=1) / num_valid
        share = top_k / size if isinstance(size, float) else xp.reshape(
            top_k / size, (queries,))
        grad_lambda = groups.mean(share + self.tau_2 * old_lambda - rate)
        new_lambda = old_lambda - self.eta0 * grad_lambda
        lambda_table = step.write_rows(state.lambda_q, groups.rows, new_lambda,
                                       equal_duplicates=True)

        # psi with the old lambda (LibAUC's order: the differences are taken before the update).
        psi, psi_complement = _sigmoids(
            xp, self.sigmoid_alpha * (fixed[:, :positives] - xp.expand_dims(old_lambda, 1)))
        terms = stop(slope * psi) * g
        curvature = above * below / self.tau_1 * column_valid  # H_qj, 0 at padding
        old_s = in_dtype(xp.take(state.s_q, groups.rows, axis=0), dtype, xp)
        estimate = groups.mean(self.tau_2 + xp.sum(curvature, axis=1) / num_valid)
        new_s = self.gamma1 * estimate + (1 - self.gamma1) * old_s  # >= gamma1 tau_2 > 0
        s_table = step.write_rows(state.s_q, groups.rows, new_s, equal_duplicates=True)
        if self.top_k_version == "theo":
            s = _stored(xp, new_s, state.s_q, dtype)
            # d lambda_q / d w = mean_j H_qj dh_qj / s_q: its surrogate, differentiable in h.
            implicit = xp.sum(stop(curvature) * scores, axis=1) / (num_valid * s)
            value = -gain * _LN2 / log_rank  # f(u) = -(2^y - 1) / log2(1 + N u)
            d_psi = self.sigmoid_alpha * psi * psi_complement
            terms = terms + stop(d_psi * value) * (
                scores[:, :positives] - xp.expand_dims(implicit, 1))
        return terms, lambda_table, s_table
