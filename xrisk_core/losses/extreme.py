r"""Extreme classification by compositional entropy: SCENT and SOX.

For a sample i with logits :math:`z_i` over classes, the cross-entropy is
:math:`\log\sum_k e^{z_{ik} - z_{iy_i}}`, a log of a mean over classes (up to a constant). With
very many classes a mini-batch scores a *sample* of the classes, and the log of a sampled mean
is a biased estimate. Both algorithms track, per sample, :math:`\nu_i \approx \log m_i` with
:math:`m_i = \frac1{C}\sum_k e^{\ell_{ik}}` (:math:`\ell_{ik} = z_{ik} - z_{iy_i}`, the
inputs), and train on :math:`\sum_k e^{\ell_{ik} - \nu_i}/C`, whose gradient is
:math:`\nabla m_i / e^{\nu_i} \approx \nabla\log m_i`:

- **SOX** (Wang and Yang, ICML 2022): a moving average of :math:`m_i` in log space;
- **SCENT** (Wei, Yang et al.): a proximal (mirror-descent) step on :math:`\nu_i` of the
  min-form :math:`\log m = \min_\nu\, m e^{-\nu} + \nu - 1`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._arguments import check_choice, check_count, check_fraction, check_positive
from .._domain import BINARY, REAL
from .._grouping import group_keys
from .._state import SMOOTHING, StateTable, axis_size
from .._typing import Array
from ._base import Input, LossDefinition, Step, state_update

__all__ = ["EXTREME_MODES", "EntLossClassification", "EntLossClassificationState"]


#: The modes of :class:`EntLossClassification`.
EXTREME_MODES = ("SCENT", "SOX")


class EntLossClassificationState(NamedTuple):
    """State of :class:`EntLossClassification`."""

    #: (num_samples, 2) float — per dataset index, [nu, seen]: the tracked log of the mean
    #: exp(logit) over classes, and 1.0 once the sample has been visited (0.0 before). The
    #: flag, not nu == 0 (LibAUC's test), marks a first visit: nu is exactly 0 whenever the
    #: mean is 1 (e.g. all logits 0), a value LibAUC would then re-initialise every visit.
    nu: Array
    #: () float — the current SOX weight gamma (see ``adjust_gamma``).
    smoothing: Array


class EntLossClassification(LossDefinition):
    r"""Compositional entropy loss for extreme classification: SCENT or SOX.

    Parameters
    ----------
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)`` (LibAUC's
        ``data_size``).
    mode : {"SCENT", "SOX"}, default "SCENT"
        How :math:`\nu` is updated (LibAUC's ``is_scent=True`` / ``False``).
    alpha : float, default 10.0
        SCENT: :math:`\alpha > 0`, the log step size of the proximal update (larger: closer
        to :math:`\nu = \log m` at once).
    gamma : float, default 0.9
        SOX: initial weight of the new estimate in the moving average, in (0, 1]
        (:meth:`adjust_gamma` schedules it).
    alpha_multiplier : float, default 1.0
        SCENT: :math:`\kappa > 0` of the update below.

    Notes
    -----
    Inputs: ``logits`` (B, C): :math:`\ell_{ik} = z_{ik} - z_{iy_i}`, each sample's logits
    minus its label's (so the label's own column is 0), for the C classes scored in the
    batch; ``index`` (B,) dataset indices; ``mask`` (B, C), optional, 1 where a column
    counts (e.g. 0 at the label's column, or at padding). Per sample, with
    :math:`\log m_i = \log\frac1{C_i}\sum_k e^{\ell_{ik}}` over its counted columns
    (computed as a shifted log-sum-exp):

    .. math::

        \text{SOX:}\quad \nu_i &\leftarrow \log\big((1-\gamma)e^{\nu_i} + \gamma m_i\big) \\
        \text{SCENT:}\quad \nu_i &\leftarrow \nu_i + \log\big(1 + e^{\alpha} m_i
            e^{(\kappa-1)\nu_i}\big) - \log\big(1 + e^{\alpha} e^{\kappa\nu_i}\big) \\
        L &= \frac1B \sum_i \frac1{C_i} \sum_k \mathrm{sg}\big[e^{-\nu_i}\big] e^{\ell_{ik}}

    with the *updated* :math:`\nu` in L; a first visit sets :math:`\nu_i = \log m_i`. Both
    updates are computed in logs (``logaddexp``, ``softplus``), and the loss's exponents are
    :math:`\ell_{ik} - \nu_i`, so logits of any size are fine in float32 (LibAUC's
    :math:`e^{\ell}` overflows once :math:`\ell > 88`). With γ = 1 (SOX) every step sets
    :math:`\nu = \log m` and the gradient is that of :math:`\frac1B\sum_i \log m_i`, the
    cross-entropy when the columns are all the classes and the label's column is counted.

    *Duplicates*: positions sharing a dataset index pool their :math:`m` (mean) and get one
    update.

    *Differences from LibAUC 2.0.1*: a first visit is marked by a flag in the state (LibAUC
    tests :math:`\nu = 0.0` exactly, so a sample whose tracked value is 0 is reset at every
    visit); the logits may be masked by ``mask`` instead of ``-inf`` (which the input checks
    reject); the mean is over the counted columns (LibAUC divides the sum over all K columns
    by K - 1: equal when the label's column is masked out; otherwise :math:`\nu` differs by
    the constant :math:`\log\frac{K}{K-1}` and SOX's gradient not at all); :math:`\gamma` is
    state, scheduled by :meth:`adjust_gamma`; the loss returns the value, not
    ``{"loss": value}``.

    References
    ----------
    Wang, Yang. "Finite-Sum Coupled Compositional Stochastic Optimization: Theory and
    Applications", ICML 2022 (SOX).

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = EntLossClassification(num_samples=4, mode="SOX", gamma=0.5)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> logits = np.array([[0.0, 0.0], [0.0, np.log(3.0)]])  # label column first, 0
    >>> value, state = loss_fn.apply(state, logits, np.array([0, 2]))
    >>> state.nu[[0, 2]].round(4).tolist()  # first visit: [log m, seen] (m = 1 and 2)
    [[0.0, 1.0], [0.6931, 1.0]]
    >>> value, state = loss_fn.apply(state, np.array([[0.0, np.log(5.0)]]), np.array([0]))
    >>> round(float(np.exp(state.nu[0, 0])), 4)  # (1 - 0.5) * 1 + 0.5 * 3
    2.0
    """

    state_type = EntLossClassificationState

    def __init__(self, num_samples: int, *, mode: str = "SCENT", alpha: float = 10.0,
                 gamma: float = 0.9, alpha_multiplier: float = 1.0) -> None:
        owner = "EntLossClassification"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.mode = check_choice(owner, "mode", mode, EXTREME_MODES)
        self.alpha = check_positive(owner, "alpha", alpha)
        self.gamma = check_fraction(owner, "gamma", gamma)
        self.alpha_multiplier = check_positive(owner, "alpha_multiplier", alpha_multiplier)

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("logits", ("batch", "classes"), "score"),
            Input("index", ("batch",), "index", keys="sample"),
            Input("mask", ("batch", "classes"), "label", optional=True),
        )

    def key_spaces(self) -> dict[str, int | None]:
        return {"sample": self.num_samples}

    def state_tables(self) -> dict[str, StateTable]:
        # [nu, seen]: nu any log-mean, seen a flag; smoothing SOX's current gamma.
        return {"nu": StateTable("sample", (2,), domain=(REAL, BINARY)),
                "smoothing": StateTable(None, (), self.gamma, domain=SMOOTHING)}

    @state_update
    def adjust_gamma(self, state: Any, epoch: int, num_epochs: int) -> Any:
        r"""The state with SOX's γ set for ``epoch`` of ``num_epochs`` (LibAUC's cosine
        schedule from 1 at epoch 0 down to the constructor's γ at the last epoch):
        :math:`\gamma_e = \gamma + (1-\gamma)\,\frac{1 + \cos(\pi e / E)}{2}`.

        Pure: returns a new state (the torch and TensorFlow losses write it in place). The
        current γ is the state entry ``smoothing``, so a compiled step sees it without
        retracing and a checkpoint carries it. SCENT does not use γ: its state comes back
        unchanged.

        Raises
        ------
        ValueError, TypeError
            ``num_epochs`` is not an integer >= 1 or ``epoch`` not one in [0, num_epochs].
        """
        owner = "EntLossClassification.adjust_gamma"
        total = check_count(owner, "num_epochs", num_epochs)
        current = check_count(owner, "epoch", epoch, minimum=0)
        if current > total:
            raise ValueError(
                f"{owner}: epoch={epoch!r} with num_epochs={num_epochs!r}; expected 0 <= epoch "
                "<= num_epochs. Fix: pass the current epoch and the number of epochs.")
        if self.mode != "SOX":
            return state
        value = self.gamma + (1 - self.gamma) * (1 + math.cos(math.pi * current / total)) / 2
        return state._replace(smoothing=state.smoothing * 0 + value)

    def _loss(self, step: Step, state: EntLossClassificationState, params: Any,
              logits: Array, index: Array, mask: Array | None,
              ) -> tuple[Array, EntLossClassificationState]:
        xp, stop = step.xp, step.stop
        dtype = logits.dtype
        fixed = stop(logits)
        present: Array | None = None  # None: every position has a counted column
        mask_f: Array = None
        if mask is None:  # every column counted: no mask to apply (the same numbers)
            top = xp.max(fixed, axis=1)  # (B,)
            width = logits.shape[1]  # None: known only at run time (TensorFlow)
            size = (xp.sum(xp.ones_like(fixed), axis=1) if width is None
                    else xp.full_like(top, float(width)))
            total = xp.sum(xp.exp(fixed - xp.expand_dims(top, 1)), axis=1) / size
            log_m = top + xp.log(total)  # (B,); total >= 1 / size
        else:
            mask_f = xp.astype(mask, dtype)
            size = xp.sum(mask_f, axis=1)
            present = size > 0  # a position without a counted column is left out
            size = xp.maximum(size, xp.ones_like(size))
            low = xp.min(fixed)
            top = xp.max(xp.where(mask_f > 0, fixed, low), axis=1)  # (B,)
            exponent = xp.where(mask_f > 0, fixed - xp.expand_dims(top, 1),
                                xp.zeros_like(fixed))
            total = xp.sum(xp.exp(exponent) * mask_f, axis=1) / size  # in [1 / size, 1]
            ones = xp.ones_like(total)
            log_m = top + xp.log(xp.where(present, total, ones))  # no log 0 when absent

        # Duplicates: the mean of m over the positions of one index, in log space. Positions
        # without a counted column join the first present position's group (its row, its
        # pooled value), so every write of one index is equal.
        groups = group_keys(index, present, backend=step.backend, xp=xp, dtype=dtype,
                            host=step.host.get("index"))
        pooled = groups.log_mean_exp(log_m)
        rows = groups.rows
        old = xp.take(state.nu, rows, axis=0)
        old = old if old.dtype == dtype else xp.astype(old, dtype)
        nu_old, seen = old[:, 0], old[:, 1] > 0
        moved = self._update(xp, nu_old, pooled, xp.astype(state.smoothing, dtype))
        nu_new = xp.where(seen, moved, pooled)
        new = xp.stack([nu_new, xp.ones_like(nu_new)], axis=1)
        if present is not None:  # a batch without a present position writes back its rows
            new = xp.where(xp.expand_dims(groups.count > 0, 1), new, old)
        table = step.write_rows(state.nu, rows, new, equal_duplicates=True)

        stored = new if new.dtype == state.nu.dtype else xp.astype(
            xp.astype(new, state.nu.dtype), dtype)
        # l - nu: nu >= log m - log(1 / gamma) for SOX and log m at a first visit, so the
        # exponents stay bounded however large the logits are.
        if present is None:
            per_sample = xp.sum(xp.exp(logits - xp.expand_dims(stop(stored[:, 0]), 1)),
                                axis=1) / size
        else:
            nu = xp.where(present, stored[:, 0], xp.zeros_like(nu_new))
            weights = xp.where(mask_f > 0, logits - xp.expand_dims(stop(nu), 1),
                               xp.zeros_like(logits))
            per_sample = xp.sum(xp.exp(weights) * mask_f, axis=1) / size
            per_sample = per_sample * xp.astype(present, dtype)
        loss = xp.sum(per_sample) / axis_size(index, dtype=dtype)
        return loss, EntLossClassificationState(nu=table, smoothing=_fresh(state.smoothing))

    def _update(self, xp: Any, nu: Array, log_m: Array, gamma: Array) -> Array:
        """The new nu of visited rows (detached values)."""
        if self.mode == "SOX":
            # log((1 - gamma) e^nu + gamma m), gamma = 1 giving log m (no log 0).
            has_carry = gamma < 1
            keep = xp.log(xp.where(has_carry, 1 - gamma, xp.ones_like(gamma)))
            fresh = xp.log(gamma) + log_m
            carried = keep + nu
            return xp.where(has_carry, _logaddexp(xp, carried, fresh), log_m)
        kappa, alpha = self.alpha_multiplier, self.alpha
        return (nu + _softplus(xp, alpha + log_m + (kappa - 1) * nu)
                - _softplus(xp, alpha + kappa * nu))


def _softplus(xp: Any, x: Array) -> Array:
    """log(1 + e^x) without overflow, on detached values (``abs``: max(x, -x) in one
    operation, the same bits). Not :func:`xrisk.surrogates.softplus`: that one selects both
    terms on a sign test so that its gradient at 0 is the same in every framework (8
    operators); no gradient flows here, and 6 suffice."""
    return xp.clip(x, 0, None) + xp.log1p(xp.exp(-xp.abs(x)))


def _logaddexp(xp: Any, x: Array, y: Array) -> Array:
    """log(e^x + e^y) without overflow (``y - x`` is ``-(x - y)`` exactly, so the larger
    of the two differences is ``abs(x - y)``)."""
    top = xp.maximum(x, y)
    return top + xp.log1p(xp.exp(-xp.abs(x - y)))


def _fresh(value: Array) -> Array:
    """``value`` as a new array: a state entry a step does not change is still returned as
    its own buffer, so donating the old state (``jax.jit(..., donate_argnums=0)``) never
    deletes an array that an earlier, eager result still holds."""
    return value * 1
