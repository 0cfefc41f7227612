r"""Average precision (AUPRC) by FCCO: the SOAP loss.

AP is a finite-sum coupled compositional objective. For a positive :math:`i` let

.. math::

    f_{\mathrm{all},i}(w) = \frac1n\sum_j \ell(s_i - s_j), \qquad
    f_{\mathrm{pos},i}(w) = \frac1n\sum_j \ell(s_i - s_j)\,y_j ,

so that the surrogate of :math:`-\mathrm{AP}` is
:math:`F(w) = -\frac1{n_+}\sum_{i\in P} f_{\mathrm{pos},i} / f_{\mathrm{all},i}`.
The inner functions are tracked per positive by two moving averages indexed by the dataset
index, and the loss multiplies detached weights into the surrogate so that autodiff of the
returned value gives the FCCO gradient estimate (LibAUC 2.0.1's SOAP estimator).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .._arguments import check_count, check_fraction, check_positive
from .._domain import NONNEGATIVE
from .._inputs import to_numpy
from .._state import StateTable, axis_size
from .._typing import Array, in_dtype
from ..surrogates import check_surrogate, surrogate_loss
from ._base import Step
from ._binary import BinaryLoss, PositivePicks, positive_mask, positive_picks

__all__ = ["APLoss", "APState"]



class APState(NamedTuple):
    """State of :class:`APLoss`: both estimators of a sample share one row."""

    #: (num_samples, 2) float — per dataset index, column 0 tracks f_all,i (``u_all``) and
    #: column 1 tracks f_pos,i (``u_pos``). One row per sample means one gather and one
    #: scatter per step, one cache line per positive.
    u: Array


class APLoss(BinaryLoss):
    r"""Average-precision loss (SOAP) with per-sample moving-average estimators.

    Parameters
    ----------
    num_samples : int
        Size of the training set; the dataset index of every example lies in
        ``[0, num_samples)``. The state holds two float arrays of this length.
    gamma : float, default 0.9
        Weight of the new mini-batch estimate in the moving averages,
        :math:`u \leftarrow (1-\gamma)u + \gamma\,\hat u`; in (0, 1].
    margin : float, default 1.0
        Margin :math:`m` of the surrogate (scores are expected in [0, 1]).
    surrogate : str, default "squared_hinge"
        Pairwise surrogate, see :mod:`xrisk.surrogates`.
    scale : float, default 1.0
        Scale of the ``logistic`` and ``barrier_hinge`` surrogates.

    Notes
    -----
    For a batch with scores :math:`s` (shape (B,)), labels :math:`y\in\{0,1\}^B` and dataset
    indices :math:`k`, with :math:`\ell_{ij} = \ell(s_i - s_j)` over **all** j (the pair
    (i, i) included), for every positive i:

    .. math::

        u^{all}_{k_i} &\leftarrow (1-\gamma)\,u^{all}_{k_i}
                         + \gamma\,\tfrac1B\textstyle\sum_j \ell_{ij} \\
        u^{pos}_{k_i} &\leftarrow (1-\gamma)\,u^{pos}_{k_i}
                         + \gamma\,\tfrac1B\textstyle\sum_j \ell_{ij} y_j \\
        w_{ij} &= \mathrm{sg}\!\left[(u^{pos}_{k_i} - u^{all}_{k_i} y_j)
                  / (u^{all}_{k_i})^2\right] \\
        L &= \frac{1}{n_+ B}\sum_{i\in P}\sum_j w_{ij}\,\ell_{ij}

    The weights use the *updated* estimators (the order of LibAUC). ``sg`` is the
    stop-gradient, so the returned value is a gradient surrogate (near 0), not AP.

    *Duplicate indices*: positives sharing one dataset index in a batch share one estimate,
    the mean of their batch estimates, and get one moving-average update; rows of negatives
    are never written. A batch without positives returns 0 and leaves the state unchanged.

    Differences from LibAUC 2.0.1: ``index`` must hold the index of every example (LibAUC
    also accepts positives only); no assertion on a batch without positives; the logistic
    surrogate is computed stably; duplicate indices in a batch are pooled into one estimate,
    deterministically (LibAUC 2.0.1 lets the last write win, which is nondeterministic on GPU).

    References
    ----------
    Qi, Luo, Xu, Ji, Yang. "Stochastic Optimization of Areas Under Precision-Recall Curves
    with Provable Convergence", NeurIPS 2021.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = APLoss(num_samples=6)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> scores = np.array([0.9, 0.2, 0.6, 0.4]); labels = np.array([1, 0, 1, 0])
    >>> value, state = loss_fn.apply(state, scores, labels, np.array([0, 1, 2, 3]))
    >>> state.u[:4, 0].round(4).tolist()  # u_all of the first four samples
    [0.4118, 0.0, 0.8303, 0.0]
    """

    state_type = APState
    score_interval = (0.0, 1.0)

    def __init__(
        self,
        num_samples: int,
        *,
        gamma: float = 0.9,
        margin: float = 1.0,
        surrogate: str = "squared_hinge",
        scale: float = 1.0,
    ) -> None:
        self.num_samples = check_count("APLoss", "num_samples", num_samples)
        self.gamma = check_fraction("APLoss", "gamma", gamma)
        self.margin = check_positive("APLoss", "margin", margin)
        self.surrogate = check_surrogate(surrogate)
        self.scale = check_positive("APLoss", "scale", scale)

    def state_tables(self) -> dict[str, StateTable]:
        # Moving averages of surrogate values (>= 0): u_all and u_pos.
        return {"u": StateTable("sample", (2,), domain=NONNEGATIVE)}

    def upgrade_state(self, arrays: Mapping[str, Any]) -> dict[str, Any]:
        """Stack the two vectors of LibAUC's and xrisk 0.1's layout, ``u_all`` and ``u_pos``
        (each (num_samples,) or (num_samples, 1)), into this version's ``u`` (num_samples, 2)."""
        out = dict(arrays)
        legacy = [key for key in ("u_all", "u_pos") if key in out]
        if not legacy or "u" in out:
            return out
        recipe = ("Fix: convert the old layout, state = {'u': np.stack([np.ravel(u_all), "
                  "np.ravel(u_pos)], axis=1)}, then load_state(state).")
        if len(legacy) == 1:
            raise ValueError(
                f"APLoss: the state holds {legacy[0]!r} of the old (LibAUC / xrisk 0.1) layout "
                f"without its pair; expected both 'u_all' and 'u_pos', or 'u'. {recipe}")
        u_all, u_pos = (to_numpy(out.pop(key)) for key in ("u_all", "u_pos"))
        shapes = (np.shape(u_all), np.shape(u_pos))
        if np.size(u_all) != np.size(u_pos) or not all(
                len(s) == 1 or (len(s) == 2 and s[1] == 1) for s in shapes):
            raise ValueError(
                f"APLoss: old-layout state with u_all of shape {shapes[0]} and u_pos of shape "
                f"{shapes[1]}; expected two (num_samples,) or (num_samples, 1) arrays of one "
                f"length. {recipe}")
        out["u"] = np.stack([np.reshape(u_all, -1), np.reshape(u_pos, -1)], axis=1)
        return out

    def _loss(self, step: Step, state: APState, params: Any, scores: Array, labels: Array,
              index: Array) -> tuple[Array, APState]:
        (loss,), new_state = self.label_losses(step, state, scores, labels, index)
        return loss, new_state

    def label_losses(self, step: Step, state: APState, scores: Array, labels: Array,
                     index: Array, stride: int | None = None) -> tuple[list[Array], APState]:
        """The SOAP step: each label's loss and the new state.

        ``scores`` and ``labels`` (B,): one loss. With ``stride`` (the multi-label mean AP),
        ``scores`` (B, K) and ``labels`` (B, K) hold K label columns, and column t's rows
        of ``u`` are ``t * stride + index``: the K single-label steps in one, each label's
        loss bit for bit the single-label step's on its column. Everything per position
        (masks, the grouping of duplicates, the moving averages, the table's rows) runs
        on all K * B positions at once; the (B, B) pair matrix, its matrix product and the
        loss's sum stay per label, so each is the same operation on the same shape as in
        the single-label step (a stacked (K, B, B) product or sum takes other kernel paths
        and need not round alike).

        Only positives are candidates i. Where the labels were read on the host (an eager CPU
        batch, see :func:`~xrisk.losses._binary.positive_picks`) the pair matrix holds the
        positives' columns only, (B, n+), LibAUC's layout, and the per-position work runs on
        the positives; elsewhere (traced, on a device) it is (B, B) with every position a
        column, masked by the labels. The same terms, summed in another order.
        """
        xp, stop = step.xp, step.stop
        columns = None if stride is None else scores.shape[1]
        picks = positive_picks(step, scores, 1 if columns is None else columns)
        if columns is not None:
            labels = xp.matrix_transpose(labels)  # (K, B): label t's column in row t
        # Floating labels may hold NaN (a missing label of a multi-label column): such an
        # example is left out of every sum, as if it were not in the batch.
        positive, observed = positive_mask(labels, scores.dtype, xp)
        if observed is None:
            batch = axis_size(scores, dtype=scores.dtype)
        else:  # per label (K,), or () for one: counts of 0/1, exact in any order
            batch = xp.clip(xp.sum(observed, axis=-1), 1, None)
        members = xp.ones_like(positive) if observed is None else observed

        # The positives only, each label's (1, n+) a slice of one gather; else every position.
        picked = None
        if picks is not None:
            row = picks.gather(step, scores)  # (1, N)
            picked = [row] if columns is None else [row[:, s:e] for s, e in picks.bounds]
        sums = []
        for t in range(1 if columns is None else columns):
            column = scores if columns is None else scores[:, t]
            candidates = xp.expand_dims(column, 0) if picked is None else picked[t]
            # pair[j, i] = l(s_i - s_j): column i is the positive candidate, row j any
            # example. s_i + (-s_j) is s_i - s_j exactly, and its gradient needs no B x B
            # negation.
            pair = surrogate_loss(
                self.surrogate, candidates + xp.expand_dims(-column, 1),
                margin=self.margin, scale=self.scale, xp=xp,
            )  # (B, B), or (B, n+)
            # Both inner sums of every candidate, sum_j l_ij and sum_j l_ij y_j, in one (2, B)
            # @ (B, B) product: the fast path of matrix products (the (B, B) @ (B, 2) form is
            # several times slower). Its gradient is the FCCO estimate below, so the pair
            # matrix is reduced once, forward and backward.
            inner = (xp.stack([members, positive], axis=0) if columns is None
                     else xp.stack([members[t, ...], positive[t, ...]], axis=0))
            sums.append(inner @ pair)  # (2, B), or (2, n+)
        if picks is not None:
            return self._picked_losses(step, state, scores, index, stride, picks, sums, batch,
                                       observed is None)
        every = sums[0] if columns is None else xp.stack(sums, axis=0)  # (2, B) / (K, 2, B)

        # The state is written for positives only, so only their rows are read and written;
        # positives that share a dataset index pool their estimates (the duplicate rule), and
        # every other position carries its group's row, so duplicates write equal rows.
        groups = self.positive_groups(step, index, positive, stride)
        fresh = stop(every) / (batch if columns is None else xp.reshape(batch, (-1, 1, 1)))
        fresh = xp.matrix_transpose(fresh)  # (B, 2) / (K, B, 2): u_all, u_pos per position
        if columns is not None:
            fresh = xp.reshape(fresh, (-1, 2))  # label by label, as the groups' positions
        moved = xp.expand_dims(groups.count > 0, 1)  # false throughout without positives
        new_state, new = self._moved_rows(step, state, scores, groups, fresh, moved)
        # Weights from the stored (updated) estimators, in the scores' dtype.
        stored = in_dtype(new, scores.dtype, xp)
        u_all, u_pos = stored[:, 0], stored[:, 1]
        if columns is not None:
            # (K, B) with K static: a traced batch size is unknown (None) under tf.function
            u_all, u_pos = xp.reshape(u_all, (columns, -1)), xp.reshape(u_pos, (columns, -1))
        inverse = positive / self._safe_square(xp, u_all)  # 0 at negatives
        # w_ij = (u_pos_i - u_all_i y_j) / u_all_i^2 for positives i, so
        # sum_ij w_ij l_ij = sum_i [u_pos_i sum_j l_ij - u_all_i sum_j l_ij y_j] / u_all_i^2.
        # (No stop-gradient needed: the estimators come from stop(sums) and the state.)
        coefficients = xp.stack([u_pos, -u_all], axis=-2) * xp.expand_dims(inverse, -2)
        scale = xp.clip(xp.sum(positive, axis=-1), 1, None) * batch  # () / (K,)
        if columns is None:
            return [xp.sum(coefficients * every) / scale], new_state
        losses = [xp.sum(coefficients[t, ...] * sums[t]) / scale[t] for t in range(columns)]
        return losses, new_state

    def _moved_rows(self, step: Step, state: APState, scores: Array, groups: Any,
                    fresh: Array, moved: Any) -> tuple[APState, Array]:
        """The moving-average step of the positions' rows and the new state: rows where
        ``moved`` (one per position; ``True``: all) take ``(1 - gamma) u + gamma fresh``
        pooled over their group, the others keep what they hold. Returns the state and the
        new rows in the table's dtype."""
        xp = step.xp
        estimate = groups.mean(fresh)
        gathered = xp.take(state.u, groups.rows, axis=0)
        old = in_dtype(gathered, scores.dtype, xp)
        new = (1 - self.gamma) * old + self.gamma * estimate
        if moved is True:
            new = in_dtype(new, gathered.dtype, xp)
        else:
            new = step.unmoved_as_gathered(xp.where(moved, new, old), gathered, moved)
        # Rows of one index are equal by construction (pooled group rows): no resolution pass.
        return APState(u=step.write_rows(state.u, groups.rows, new, equal_duplicates=True)), new

    @staticmethod
    def _safe_square(xp: Any, u_all: Array) -> Array:
        """u_all^2 with u_all floored. u_all > 0 for a positive in exact arithmetic (the
        pair (i, i) gives l(0) > 0), but a tiny margin or a half-precision dtype underflows it:
        floored at the square root of the smallest normal number of its dtype, u_all**2 stays
        normal and the weight (at most 1 / floor) finite (float32: 1.1e-19, float16: 7.8e-3)."""
        floor = float(xp.finfo(u_all.dtype).smallest_normal) ** 0.5
        safe_all = xp.clip(u_all, floor, None)
        return safe_all * safe_all

    def _picked_losses(self, step: Step, state: APState, scores: Array, index: Array,
                       stride: int | None, picks: PositivePicks, sums: list[Array],
                       batch: Any, all_observed: bool) -> tuple[list[Array], APState]:
        """:meth:`label_losses` after the pair sums of the positives only (``sums[t]`` (2,
        n+_t) of label t): the state and the losses on the picked positions, label after
        label along one axis."""
        xp, stop = step.xp, step.stop
        groups = picks.groups(step, index, stride, scores.dtype)
        # each label's count of examples: () for all, or per label (K,) with NaN labels
        per_label = not all_observed and stride is not None
        batches = [batch[t] if per_label else batch for t in range(len(sums))]
        every = sums[0] if len(sums) == 1 else xp.concat(sums, axis=1)  # (2, N)
        size = picks.labels_of(step, batch) if per_label else batch
        fresh = xp.matrix_transpose(stop(every) / size)  # (N, 2): u_all, u_pos per pick
        new_state, new = self._moved_rows(step, state, scores, groups, fresh, True)
        stored = in_dtype(new, scores.dtype, xp)
        coefficients = (xp.stack([stored[:, 1], -stored[:, 0]], axis=0)
                        * (1 / self._safe_square(xp, stored[:, 0])))  # (2, N)
        losses = []
        for t, inner in enumerate(sums):
            start, end = picks.bounds[t]
            mine = coefficients if len(sums) == 1 else coefficients[:, start:end]
            losses.append(xp.sum(mine * inner) / (picks.counts[t] * batches[t]))
        return losses, new_state
