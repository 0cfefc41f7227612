r"""Global contrastive losses (SogCLR, iSogCLR, bimodal) and the in-batch InfoNCE baseline.

Every loss here takes two views of a batch, ``(B, D)`` each, whose rows ``i`` form the positive
pair of one data sample, and that sample's dataset index ``(B,)``:

- :class:`GlobalContrastiveLoss`: the unimodal global contrastive loss (GCL) by SogCLR, with
  one moving-average estimator per sample; ``temperature_scheme="individual"`` adds a
  temperature per sample learned by its own rule (iSogCLR). LibAUC's ``GCLoss('unimodal')``
  / ``GCLoss_v1``.
- :class:`BimodalContrastiveLoss`: the image-text GCL, one estimator per sample and
  direction (image anchors against texts, text anchors against images), global or
  individual temperatures. LibAUC's ``GCLoss('bimodal')`` / ``GCLoss_v2``.
- :class:`InfoNCELoss`: the mini-batch InfoNCE of SimCLR (``within_view=True``) and CLIP
  (``within_view=False``), for comparison.

*Normalisation* is the same for all of them: with ``normalize=True`` (the default) each row
of both views is divided by its L2 norm inside the loss (and differentiated through); pass
``normalize=False`` only for features that are already unit rows. (LibAUC normalises inside
its unimodal loss and not inside its bimodal one.)

*Negatives* of an anchor are the other samples of the batch: every position whose dataset
index differs from the anchor's. A sample drawn twice is never its own negative, so the
duplicates of an index share one estimator row, written once per step (the mean of their
batch estimates).

*Numerics*: the estimators :math:`u_i \approx \frac1{|S_i^-|}\sum_j e^{z_{ij}}` (z: a
similarity over a temperature as low as 0.005, so :math:`e^{z}` overflows float32 at
:math:`z > 88`) are stored shifted, :math:`u = \tilde u\,e^{c}`, with the log-shift
:math:`c` following :math:`\log u` down as well as up, as the KL-DRO estimators of
:mod:`xrisk.losses.pauc`. Every exponent is :math:`\le 0` and :math:`\tilde u \le 1 + \gamma`.

*Distributed data parallel*: gather both views (with their gradients, e.g.
``torch.distributed.nn.functional.all_gather``) and the index of every rank, in rank order,
and call the loss on the global batch on every rank. Row ``p`` of the gathered views is one
sample's pair whatever rank it came from, so each sample's positive is its own pair (LibAUC
2.0.1's bimodal loss subtracts another sample's similarity on ranks >= 1); every rank
computes the same loss and writes the same rows — the estimator rows of the whole global
batch, once — into its own full copy of the state; the gradient averaged by DDP over the
ranks is the single-process gradient of the global batch.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._arguments import check_choice, check_count, check_fraction, check_positive
from .._domain import REAL, Domain
from .._grouping import KeyGroups, group_keys
from .._state import SHIFTED_MEAN, StateTable, axis_size
from .._typing import Array, in_dtype
from ._base import Input, LossDefinition, Step
from .pauc import _log_shift

__all__ = [
    "GAMMA_SCHEDULES",
    "TEMPERATURE_SCHEMES",
    "gamma_at",
    "GlobalContrastiveLoss",
    "GlobalContrastiveState",
    "IndividualContrastiveState",
    "BimodalContrastiveLoss",
    "BimodalContrastiveState",
    "BimodalIndividualState",
    "InfoNCELoss",
]


#: Schedules of the moving-average weight gamma over epochs.
GAMMA_SCHEDULES = ("constant", "cosine")
#: Temperatures: one for every sample, or one per sample (and direction) learned in state.
TEMPERATURE_SCHEMES = ("global", "individual")

# Rows are divided by sqrt(max(|x|^2, _TINY)): a zero row stays finite (gradient 0 there).
_TINY = 1e-24


def gamma_at(epoch: int, *, gamma: float, schedule: str = "constant",
             decay_epochs: int | None = None) -> float:
    r"""The moving-average weight of epoch ``epoch`` (0-based): a pure function.

    ``"constant"``: ``gamma``. ``"cosine"``: :math:`\gamma + (1-\gamma)\,\frac12
    \bigl(1 + \cos(\pi\,\min(e, E)/E)\bigr)` with :math:`E` = ``decay_epochs``, from 1 at
    epoch 0 down to ``gamma`` at epoch E and after (LibAUC's ``adjust_gamma`` keeps following
    the cosine past E, back up to 1).

    Examples
    --------
    >>> [round(gamma_at(e, gamma=0.2, schedule="cosine", decay_epochs=4), 4) for e in range(6)]
    [1.0, 0.8828, 0.6, 0.3172, 0.2, 0.2]
    """
    epoch = check_count("gamma_at", "epoch", epoch, minimum=0)
    gamma = check_fraction("gamma_at", "gamma", gamma)
    schedule = check_choice("gamma_at", "schedule", schedule, GAMMA_SCHEDULES)
    if schedule == "constant":
        return gamma
    if decay_epochs is None:
        raise ValueError(
            "gamma_at: schedule='cosine' with decay_epochs=None; expected the number of "
            "epochs over which gamma decays. Fix: pass gamma_decay_epochs, e.g. the number "
            "of training epochs.")
    total = check_count("gamma_at", "decay_epochs", decay_epochs)
    return gamma + (1 - gamma) * 0.5 * (1 + math.cos(math.pi * min(epoch, total) / total))


# --------------------------------------------------------------------------- shared math

def _unit_rows(xp: Any, x: Array) -> Array:
    """Each row of ``x`` (B, D) divided by its L2 norm (differentiable, finite at 0)."""
    squares = xp.sum(x * x, axis=1, keepdims=True)
    return x / xp.sqrt(xp.clip(squares, _TINY, None))


class _Groups(NamedTuple):
    """Who is whom in a batch: its positions grouped by dataset index
    (:func:`xrisk._grouping.group_keys`) and the (B, B) negatives mask the pair terms need."""

    keys: KeyGroups  #: positions by dataset index: ``count``, ``mean``, ``max`` per group
    negative: Array  #: (B, B) 1.0 where j holds another dataset index than anchor i
    num_neg: Array  #: (B,) negatives of each anchor, floored at 1
    has: Array  #: (B,) bool: the anchor has a negative
    #: (B, B) bool ``negative > 0``, tested once per step for every block that selects by it
    is_negative: Array


def _groups(step: Step, index: Array, dtype: Any) -> _Groups:
    """The batch's positions grouped by ``index`` (B,) in O(B log B), ranked on the host where
    the checks read the index; the negatives mask from the group ids (exact integers)."""
    keys = group_keys(index, backend=step.backend, xp=step.xp, dtype=dtype,
                      host=step.host.get("index"))
    negative = 1 - keys.same(dtype)
    # Exact: B and the counts are integers far below 2**24.
    num_neg = axis_size(index, dtype=dtype) - keys.count
    return _Groups(keys, negative, step.xp.clip(num_neg, 1, None), num_neg > 0, negative > 0)



def _masked_exp(xp: Any, z: Array, shift: Array, groups: _Groups, zeros: Array) -> Array:
    """exp(z - shift_i) on the negatives (<= 1 there), 0 elsewhere; nothing overflows.
    ``zeros`` (B, B): the fill of the other entries, one array for every block."""
    exponent = xp.where(groups.is_negative, z - xp.expand_dims(shift, 1), zeros)
    return xp.exp(exponent) * groups.negative


class _Estimate(NamedTuple):
    """A table's new rows and what the weights of each direction read."""

    rows: Array  #: (B, 2) [u~, c] to write (old rows for anchors without negatives)
    tilde: list[Array]  #: per direction, (B,) its own updated u~ (LibAUC's u1, u2)
    shift: Array  #: (B,) c
    exps: list[list[Array]]  #: per direction and block, exp(z - c) on the negatives


def _estimate(xp: Any, groups: _Groups, old: Array, directions: list[list[Array]],
              gamma: float) -> _Estimate:
    r"""One moving-average step of :math:`u_i` from the detached exponents ``directions``
    (per direction, a list of (B, B) blocks of z whose negatives are ``groups.negative``).

    Each direction d moves the shared old row on its own batch mean,
    :math:`u_d = (1-\gamma)u + \gamma\,\mathrm{mean}_j e^{z}` (the first visit of a row,
    :math:`\tilde u = 0`, takes :math:`\gamma = 1`), pooled over the duplicates; the row keeps
    the mean over directions. One shift serves every direction of the row.
    """
    is_negative = groups.is_negative
    blocks = [z for direction in directions for z in direction]
    # A finite fill below every z, for the masked maxima.
    low = xp.min(xp.stack([xp.min(z) for z in blocks]))
    largest = None
    for z in blocks:
        row_max = xp.max(xp.where(is_negative, z, low), axis=1)
        largest = row_max if largest is None else xp.maximum(largest, row_max)
    # The group's largest (duplicates share one row, so one shift).
    largest = groups.keys.max(largest, low)
    old_tilde, old_shift = old[:, 0], old[:, 1]
    # Rows without a carried term (first visits, gamma = 1) get the new shift as their old
    # one, so that even the branch where() discards never evaluates exp(c_old - largest) > 0.
    carries = (1 - gamma) * old_tilde > 0
    old_shift = xp.where(carries, old_shift, largest)
    shift, carried = _log_shift(xp, old_tilde, old_shift, largest, gamma)
    weight = xp.where(old_tilde > 0, xp.full_like(old_tilde, gamma),
                      xp.ones_like(old_tilde))  # first visit: the batch estimate itself
    tildes, exps = [], []
    zeros = xp.zeros_like(blocks[0])  # detached blocks: the fill needs no gradient of its own
    for direction in directions:
        terms = [_masked_exp(xp, z, shift, groups, zeros) for z in direction]
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        fresh = xp.sum(total, axis=1) / (len(direction) * groups.num_neg)
        tildes.append(carried + weight * groups.keys.mean(fresh))
        exps.append(terms)
    tilde = tildes[0]
    for other in tildes[1:]:
        tilde = tilde + other
    tilde = tilde / len(tildes)
    has = xp.expand_dims(groups.has, 1)
    rows = xp.where(has, xp.stack([tilde, shift], axis=1), old)
    return _Estimate(rows, tildes, shift, exps)


def _safe(xp: Any, tilde: Array, groups: _Groups) -> Array:
    """u~ where it is > 0 at an anchor with negatives, 1 elsewhere (never divides by 0)."""
    return xp.where(groups.has & (tilde > 0), tilde, xp.ones_like(tilde))


def _check_gamma_schedule(owner: str, gamma: object, schedule: object, decay_epochs: object,
                          epoch: object) -> tuple[float, str, int | None, int]:
    gamma = check_fraction(owner, "gamma", gamma)
    schedule_name: str = check_choice(owner, "gamma_schedule", schedule, GAMMA_SCHEDULES)
    if decay_epochs is not None:
        decay_epochs = check_count(owner, "gamma_decay_epochs", decay_epochs)
    elif schedule_name == "cosine":
        raise ValueError(
            f"{owner}: gamma_schedule='cosine' with gamma_decay_epochs=None; expected the "
            "number of epochs over which gamma decays from 1 to gamma. Fix: pass "
            "gamma_decay_epochs, e.g. the number of training epochs.")
    epoch = check_count(owner, "epoch", epoch, minimum=0,
                        fix="pass the 0-based epoch number, loss_fn.at_epoch(epoch)")
    return gamma, schedule_name, decay_epochs, epoch


class _TemperatureRule(NamedTuple):
    """iSogCLR's rule for individual temperatures (validated hyper-parameters)."""

    tau_min: float
    tau_max: float
    rho: float
    eta: float
    beta: float

    def rows(self, xp: Any, groups: _Groups, old: Array, grad: Array) -> Array:
        r"""New rows [τ, m] (B, 2): :math:`m \leftarrow (1-\beta)m + \beta\,\bar g`,
        :math:`\tau \leftarrow \Pi_{[\tau_{min}, \tau_{max}]}(\tau - \eta m)` with
        :math:`\bar g` the mean of ``grad`` (B,) over the duplicates; old rows for anchors
        without negatives."""
        momentum = (1 - self.beta) * old[:, 1] + self.beta * groups.keys.mean(grad)
        tau = xp.clip(old[:, 0] - self.eta * momentum, self.tau_min, self.tau_max)
        return xp.where(xp.expand_dims(groups.has, 1), xp.stack([tau, momentum], axis=1), old)


def _check_temperatures(owner: str, scheme: object, tau: float, tau_min: object,
                        tau_max: object, rho: object, eta: object, beta: object,
                        ) -> tuple[str, _TemperatureRule]:
    scheme_name: str = check_choice(owner, "temperature_scheme", scheme, TEMPERATURE_SCHEMES)
    tau_min = check_positive(owner, "tau_min", tau_min)
    tau_max = check_positive(owner, "tau_max", tau_max)
    if tau_min > tau_max:
        raise ValueError(
            f"{owner}: tau_min={tau_min!r} > tau_max={tau_max!r}; expected tau_min <= "
            "tau_max (the bounds of the individual temperatures). Fix: swap them.")
    if scheme_name == "individual" and not tau_min <= tau <= tau_max:
        raise ValueError(
            f"{owner}: tau={tau!r} outside [tau_min, tau_max] = [{tau_min!r}, {tau_max!r}]; "
            "expected the initial temperature inside the bounds of the individual "
            f"temperatures. Fix: pass tau in [{tau_min!r}, {tau_max!r}] or widen the bounds.")
    rule = _TemperatureRule(tau_min, tau_max, check_positive(owner, "rho", rho, allow_zero=True),
                            check_positive(owner, "eta", eta), check_fraction(owner, "beta", beta))
    return scheme_name, rule


class _TwoViews(LossDefinition):
    """Inputs, key space and gamma schedule of the global contrastive losses."""

    num_samples: int
    normalize: bool
    gamma: float
    gamma_schedule: str
    gamma_decay_epochs: int | None
    epoch: int
    tau: float
    temperature_scheme: str
    tau_min: float
    tau_max: float
    _view_names: tuple[str, str] = ("view1", "view2")

    def inputs(self) -> tuple[Input, ...]:
        first, second = self._view_names
        return (Input(first, ("batch", "features"), "score"),
                Input(second, ("batch", "features"), "score"),
                Input("index", ("batch",), "index", keys="sample"))

    def key_spaces(self) -> dict[str, int | None]:
        return {"sample": self.num_samples}

    def _temperature_domain(self) -> tuple[Domain, Domain]:
        """Rows [tau_i, m_i] of the individual temperatures: tau_i projected onto
        [tau_min, tau_max], any momentum m_i."""
        return (Domain(self.tau_min, self.tau_max), REAL)

    def state_meaning(self) -> dict[str, Any]:
        # u~ e^c is a mean of exp(similarity / tau), tau the global temperature or the
        # sample's own (then stored, and the initial tau means nothing for the state).
        return ({"temperature_scheme": self.temperature_scheme}
                if self.temperature_scheme == "individual"
                else {"temperature_scheme": self.temperature_scheme, "tau": self.tau})

    def gamma_at(self, epoch: int) -> float:
        """The moving-average weight this loss uses at ``epoch`` (see :func:`gamma_at`)."""
        return gamma_at(epoch, gamma=self.gamma, schedule=self.gamma_schedule,
                        decay_epochs=self.gamma_decay_epochs)

    def at_epoch(self, epoch: int) -> Any:
        """This loss for epoch ``epoch``: a new definition, since definitions are frozen
        (under ``jax.jit`` the step retraces once per epoch). Carry an adapter's state over
        with ``new.load_state(old.export_state())``."""
        return self.replace(epoch=epoch)

    @property
    def current_gamma(self) -> float:
        """The moving-average weight of the steps of :attr:`epoch`."""
        return self.gamma_at(self.epoch)


def _check_flag(owner: str, name: str, value: object) -> bool:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise ValueError(
        f"{owner}: {name}={value!r} (type {type(value).__name__}); expected True or False. "
        f"Fix: pass {name}=True or {name}=False.")


def _transpose(xp: Any, x: Array) -> Array:
    return xp.matrix_transpose(x)


# --------------------------------------------------------------------------- unimodal

class GlobalContrastiveState(NamedTuple):
    """State of :class:`GlobalContrastiveLoss` with one temperature."""

    #: (num_samples, 2) float — per dataset index, [u~, c]: the moving average u = u~ exp(c)
    #: of the sample's mean exp(similarity / tau) over its negatives, with its log-shift.
    u: Array


class IndividualContrastiveState(NamedTuple):
    """State of :class:`GlobalContrastiveLoss` with individual temperatures (iSogCLR)."""

    u: Array  #: (num_samples, 2) float — [u~, c] as in :class:`GlobalContrastiveState`
    #: (num_samples, 2) float — per dataset index, [tau_i, m_i]: the sample's temperature
    #: (filled with ``tau``) and the momentum of its gradient (filled with 0).
    temperature: Array


class GlobalContrastiveLoss(_TwoViews):
    r"""Unimodal global contrastive loss by SogCLR; iSogCLR with individual temperatures.

    LibAUC's ``GCLoss('unimodal')`` / ``GCLoss_v1`` (``enable_isogclr=True`` is
    ``temperature_scheme="individual"``). Optimizer: LARS (:class:`xrisk.LARS`).

    Parameters
    ----------
    num_samples : int
        Size of the training set; dataset indices lie in ``[0, num_samples)``.
    tau : float, default 0.1
        Temperature :math:`\tau > 0`; with individual temperatures, the initial one.
    gamma : float, default 0.9
        Weight of the new mini-batch estimate in the moving average, in (0, 1]; with the
        cosine schedule, its final value.
    gamma_schedule : {"constant", "cosine"}, default "constant"
        How gamma changes over epochs (see :func:`gamma_at`).
    gamma_decay_epochs : int or None, default None
        Epochs of the cosine decay (required by ``"cosine"``).
    epoch : int, default 0
        The epoch whose gamma the steps use; :meth:`at_epoch` returns the loss of another.
    temperature_scheme : {"global", "individual"}, default "global"
        One temperature ``tau`` (SogCLR), or one per sample learned in state (iSogCLR).
    tau_min, tau_max : float, default 0.05, 0.7
        Bounds of the individual temperatures.
    rho : float, default 0.3
        iSogCLR's :math:`\rho \ge 0` (the KL-DRO radius term of each temperature's objective).
    eta : float, default 0.01
        Step size of the individual temperatures.
    beta : float, default 0.9
        Weight of the new gradient in each temperature's momentum, in (0, 1].
    normalize : bool, default True
        Divide every row of both views by its L2 norm inside the loss (see the module notes).

    Notes
    -----
    For a batch of views :math:`x, x'` (rows L2-normalised), dataset indices :math:`k` and
    temperatures :math:`\tau_i` (``tau``, or the sample's before the step), anchor :math:`x_i`
    sees the logits :math:`S_{ij} = x_i^\top x'_j` and :math:`A_{ij} = x_i^\top x_j`, and
    anchor :math:`x'_i` sees :math:`S_{ji}` and :math:`x_i'^\top x'_j`. The negatives are the
    columns :math:`j` with :math:`k_j \ne k_i`, :math:`n_i = 2\,|\{j: k_j\ne k_i\}|` per
    direction. With :math:`z = \mathrm{sg}(\text{logit})/\tau_i`, per direction d:

    .. math::

        u_{d,i} &= (1-\gamma)\,u_{k_i} + \gamma\,\tfrac1{n_i}\textstyle\sum_{j\in S_i^-}
                   e^{z_{ij}},\qquad u_{k_i} \leftarrow \tfrac12(u_{1,i} + u_{2,i}) \\
        L &= \frac1B\sum_i\sum_{d=1,2}\Big(-S_{ii} + \frac1{n_i}\sum_{j\in S_i^-}
             \mathrm{sg}\big[e^{z_{ij}}/u_{d,i}\big]\,\text{logit}_{ij}\Big)

    (LibAUC's estimator and loss; the positive is not a negative). Its gradient estimates that
    of :math:`\tau\sum_d \frac1B\sum_i \log\frac1{n_i}\sum_{j\in S_i^-}
    e^{(\text{logit}_{ij} - S_{ii})/\tau}`, exactly so with :math:`\gamma = 1` and no
    duplicate in the batch (the paper's GCL, summed over the two directions). The first
    update of a row takes :math:`\gamma = 1` (LibAUC detects it by :math:`u = 0`, too).

    *Individual temperatures* (iSogCLR), per sample, the two directions averaged:

    .. math::

        g_i &= \tfrac12\textstyle\sum_d\Big(\log u_{d,i} + \rho
               - \frac1{n_i}\sum_{j\in S_i^-}\mathrm{sg}\big[e^{z_{ij}}/u_{d,i}\big]\,z_{ij}
               \Big) \\
        m_i &\leftarrow (1-\beta)\,m_i + \beta\,g_i,\qquad
        \tau_i \leftarrow \Pi_{[\tau_{min},\tau_{max}]}(\tau_i - \eta\,m_i)

    :math:`g_i` is the derivative of :math:`\tau_i\log u_i + \rho\,\tau_i` in :math:`\tau_i`.

    *Duplicates* of a dataset index in a batch are never each other's negatives; they pool
    their batch estimates (mean) into one update of their row (and of their temperature).
    An anchor without negatives (a batch of one sample) adds 0 and changes no row.

    Differences from LibAUC 2.0.1: the estimators are stored shifted (no overflow in
    float32 at small temperatures); the first-visit rule is per row, not per batch; the
    gamma schedule is a pure function of the epoch and nothing is printed; the index may
    live on any device.

    References
    ----------
    Yuan, Wu, Qiu, Du, Zhang, Zhou, Yang. "Provable Stochastic Optimization for Global
    Contrastive Learning: Small Batch Does Not Harm Performance", ICML 2022.
    Qiu, Hu, Yuan, Zhou, Zhang, Yang. "Not All Semantics are Created Equal: Contrastive
    Self-supervised Learning with Automatic Temperature Individualization", ICML 2023.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = GlobalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> value, state = loss_fn.apply(state, x, x[::-1], np.array([0, 1, 3]))
    >>> round(float(value), 4), (state.u[:, 0] * np.exp(state.u[:, 1])).round(4).tolist()
    (0.0288, [4.1656, 2.9765, 0.0, 4.1656, 0.0])
    """

    def __init__(self, num_samples: int, *, tau: float = 0.1, gamma: float = 0.9,
                 gamma_schedule: str = "constant", gamma_decay_epochs: int | None = None,
                 epoch: int = 0, temperature_scheme: str = "global", tau_min: float = 0.05,
                 tau_max: float = 0.7, rho: float = 0.3, eta: float = 0.01, beta: float = 0.9,
                 normalize: bool = True) -> None:
        owner = "GlobalContrastiveLoss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.tau = check_positive(owner, "tau", tau)
        self.gamma, self.gamma_schedule, self.gamma_decay_epochs, self.epoch = (
            _check_gamma_schedule(owner, gamma, gamma_schedule, gamma_decay_epochs, epoch))
        self.temperature_scheme, rule = _check_temperatures(
            owner, temperature_scheme, self.tau, tau_min, tau_max, rho, eta, beta)
        self.tau_min, self.tau_max, self.rho, self.eta, self.beta = rule
        self.normalize = _check_flag(owner, "normalize", normalize)
        self._rule = rule
        self.state_type = (IndividualContrastiveState if self.temperature_scheme == "individual"
                           else GlobalContrastiveState)

    def state_tables(self) -> dict[str, StateTable]:
        tables = {"u": StateTable("sample", (2,), domain=SHIFTED_MEAN)}
        if self.temperature_scheme == "individual":
            tables["temperature"] = StateTable("sample", (2,), fill=(self.tau, 0.0),
                                               domain=self._temperature_domain())
        return tables

    def _loss(self, step: Step, state: Any, params: Any, view1: Array, view2: Array,
              index: Array) -> tuple[Array, Any]:
        xp, stop = step.xp, step.stop
        dtype = view1.dtype
        if self.normalize:
            view1, view2 = _unit_rows(xp, view1), _unit_rows(xp, view2)
        groups = _groups(step, index, dtype)
        cross = view1 @ _transpose(xp, view2)  # S_ij = x_i . x'_j
        # Direction 1: anchors x_i against x'_j and x_j; direction 2: x'_i against x_j, x'_j.
        logits = [[cross, view1 @ _transpose(xp, view1)],
                  [_transpose(xp, cross), view2 @ _transpose(xp, view2)]]
        positive = xp.sum(view1 * view2, axis=1)  # S_ii
        individual = self.temperature_scheme == "individual"
        if individual:
            old_tau = in_dtype(xp.take(state.temperature, index, axis=0), dtype, xp)
            tau = xp.expand_dims(old_tau[:, 0], 1)
        else:
            tau = self.tau
        z = [[stop(block) / tau for block in direction] for direction in logits]
        old = in_dtype(xp.take(state.u, index, axis=0), dtype, xp)
        estimate = _estimate(xp, groups, old, z, self.current_gamma)

        loss = xp.zeros_like(positive)
        grad_tau = xp.zeros_like(positive)
        for blocks, zs, exps, tilde in zip(logits, z, estimate.exps, estimate.tilde,
                                           strict=True):
            inverse = 1 / (_safe(xp, tilde, groups) * 2 * groups.num_neg)
            weighted = xp.zeros_like(positive)
            weighted_z = xp.zeros_like(positive)
            for block, zb, e in zip(blocks, zs, exps, strict=True):
                weights = stop(e * xp.expand_dims(inverse, 1))  # 0 off the negatives
                weighted = weighted + xp.sum(weights * block, axis=1)
                if individual:
                    weighted_z = weighted_z + xp.sum(weights * zb, axis=1)
            loss = loss + weighted - positive
            if individual:
                log_u = xp.log(_safe(xp, tilde, groups)) + estimate.shift
                grad_tau = grad_tau + (log_u + self.rho - weighted_z) / 2
        has = in_dtype(groups.has, dtype, xp)
        value = xp.sum(loss * has) / axis_size(positive, dtype=positive.dtype)
        table = step.write_rows(state.u, index, estimate.rows, equal_duplicates=True)
        if not individual:
            return value, GlobalContrastiveState(u=table)
        tau_rows = self._rule.rows(xp, groups, old_tau, grad_tau)
        tau_table = step.write_rows(state.temperature, index, tau_rows,
                                    equal_duplicates=True)
        return value, IndividualContrastiveState(u=table, temperature=tau_table)


# --------------------------------------------------------------------------- bimodal

class BimodalContrastiveState(NamedTuple):
    """State of :class:`BimodalContrastiveLoss` with one temperature."""

    #: (num_samples, 2) float — per dataset index, [u~, c] of the image anchor: the moving
    #: average u = u~ exp(c) of its mean exp((s_ij - s_ii) / tau) over the other texts.
    u_image: Array
    #: (num_samples, 2) float — the same for the text anchor against the other images.
    u_text: Array


class BimodalIndividualState(NamedTuple):
    """State of :class:`BimodalContrastiveLoss` with individual temperatures."""

    u_image: Array  #: (num_samples, 2) float — as in :class:`BimodalContrastiveState`
    u_text: Array  #: (num_samples, 2) float
    temperature_image: Array  #: (num_samples, 2) float — [tau_i, m_i] of the image anchor
    temperature_text: Array  #: (num_samples, 2) float — [tau_i, m_i] of the text anchor


class BimodalContrastiveLoss(_TwoViews):
    r"""Bimodal (image-text) global contrastive loss by SogCLR; global or individual
    temperatures.

    LibAUC's ``GCLoss('bimodal')`` / ``GCLoss_v2`` (its ``temperature_scheme``
    ``'global_constant'`` is ``"global"``, ``'individual_learnable'`` is ``"individual"``).
    Optimizer: LARS (:class:`xrisk.LARS`) or AdamW.

    Parameters
    ----------
    num_samples : int
        Size of the training set (image-text pairs); dataset indices lie in
        ``[0, num_samples)``.
    tau : float, default 0.01
        Temperature :math:`\tau > 0`; with individual temperatures, the initial one.
    gamma : float, default 0.9
        Weight of the new mini-batch estimate in the moving averages, in (0, 1]; with the
        cosine schedule, its final value.
    gamma_schedule : {"constant", "cosine"}, default "constant"
        How gamma changes over epochs (see :func:`gamma_at`).
    gamma_decay_epochs : int or None, default None
        Epochs of the cosine decay (required by ``"cosine"``).
    epoch : int, default 0
        The epoch whose gamma the steps use; :meth:`at_epoch` returns the loss of another.
    temperature_scheme : {"global", "individual"}, default "global"
        One temperature ``tau``, or one per sample and direction learned in state.
    tau_min, tau_max : float, default 0.005, 0.05
        Bounds of the individual temperatures.
    rho : float, default 6.0
        The :math:`\rho \ge 0` of each individual temperature's objective.
    eta : float, default 0.01
        Step size of the individual temperatures.
    beta : float, default 0.9
        Weight of the new gradient in each temperature's momentum, in (0, 1].
    negative_reduction : {"mean", "sum"}, default "mean"
        ``"mean"`` averages each anchor's weighted negatives, so the gradient's scale does not
        depend on the batch size. ``"sum"`` sums them, as LibAUC 2.0.1 does: its gradient is
        :math:`(B-1)` times larger and grows with the (global) batch size.
    normalize : bool, default True
        Divide every row of both views by its L2 norm inside the loss (see the module notes;
        LibAUC's bimodal loss expects normalised features instead).

    Notes
    -----
    For images :math:`x`, texts :math:`t` (rows L2-normalised) and dataset indices
    :math:`k`, :math:`s_{ij} = x_i^\top t_j`. Image anchor i has the margins
    :math:`L_{ij} = s_{ij} - s_{ii}`, text anchor i has :math:`L'_{ij} = s_{ji} - s_{ii}`,
    over the negatives :math:`j` with :math:`k_j \ne k_i` (:math:`n_i` of them). Per
    direction, with its own estimator table and :math:`z = \mathrm{sg}(L)/\tau_i`:

    .. math::

        u_{k_i} &\leftarrow (1-\gamma)\,u_{k_i} + \gamma\,\tfrac1{n_i}
                   \textstyle\sum_{j\in S_i^-} e^{z_{ij}} \\
        L_{img} &= \frac1B\sum_i \frac1{n_i}\sum_{j\in S_i^-}
                   \mathrm{sg}\big[e^{z_{ij}}/u_{k_i}\big]\,L_{ij},\qquad
        \text{loss} = \tfrac12(L_{img} + L_{txt})

    (``negative_reduction="sum"`` drops the :math:`1/n_i`). With :math:`\gamma = 1` its
    gradient is :math:`\tau\,\nabla\,\frac12\sum_{d}\frac1B\sum_i
    \log\frac1{n_i}\sum_{j} e^{L^{(d)}_{ij}/\tau}`. The first update of a row takes
    :math:`\gamma = 1`. Individual temperatures follow :class:`GlobalContrastiveLoss`'s rule
    per direction, with :math:`g_i = \log u_{k_i} + \rho - \frac1{n_i}\sum_j
    \mathrm{sg}[e^{z_{ij}}/u_{k_i}]\,z_{ij}`.

    The estimators are stored shifted, :math:`u = \tilde u\,e^{c}`: LibAUC's running-max
    shift :math:`b` only grows, so :math:`\tilde u` underflows once the margins fall; here
    :math:`c` follows :math:`\log u` down as well as up.

    *Duplicates* of a dataset index in a batch are never each other's negatives and pool
    their batch estimates into one update of each of their rows.

    Differences from LibAUC 2.0.1: a plain loss value (LibAUC returns a tuple); the gradient
    scale does not grow with the batch size unless ``negative_reduction="sum"``; under data
    parallelism each sample's positive is its own pair (see the module notes); the
    normalisation is explicit; no ``global_learnable`` scheme.

    References
    ----------
    Yuan et al., ICML 2022 (SogCLR); Qiu et al., ICML 2023 (iSogCLR); Wei et al.,
    "FastCLIP: A Suite of Optimization Techniques to Accelerate CLIP Training with Limited
    Resources", 2024.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = BimodalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0)
    >>> state = loss_fn.init(xp=xp, dtype=xp.float64)
    >>> image = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> text = np.array([[0.8, 0.6], [0.0, 1.0], [1.0, 0.0]])
    >>> value, state = loss_fn.apply(state, image, text, np.array([0, 1, 3]))
    >>> u = state.u_image[:, 0] * np.exp(state.u_image[:, 1])  # image anchors 0 and 1
    >>> round(float(value), 4), u[:2].round(4).tolist()
    (-0.0295, [0.8469, 0.2923])
    """

    _view_names = ("image", "text")

    def __init__(self, num_samples: int, *, tau: float = 0.01, gamma: float = 0.9,
                 gamma_schedule: str = "constant", gamma_decay_epochs: int | None = None,
                 epoch: int = 0, temperature_scheme: str = "global", tau_min: float = 0.005,
                 tau_max: float = 0.05, rho: float = 6.0, eta: float = 0.01, beta: float = 0.9,
                 negative_reduction: str = "mean", normalize: bool = True) -> None:
        owner = "BimodalContrastiveLoss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.tau = check_positive(owner, "tau", tau)
        self.gamma, self.gamma_schedule, self.gamma_decay_epochs, self.epoch = (
            _check_gamma_schedule(owner, gamma, gamma_schedule, gamma_decay_epochs, epoch))
        self.temperature_scheme, rule = _check_temperatures(
            owner, temperature_scheme, self.tau, tau_min, tau_max, rho, eta, beta)
        self.tau_min, self.tau_max, self.rho, self.eta, self.beta = rule
        self.negative_reduction = check_choice(owner, "negative_reduction", negative_reduction,
                                               ("mean", "sum"))
        self.normalize = _check_flag(owner, "normalize", normalize)
        self._rule = rule
        self.state_type = (BimodalIndividualState if self.temperature_scheme == "individual"
                           else BimodalContrastiveState)

    def state_tables(self) -> dict[str, StateTable]:
        tables = {"u_image": StateTable("sample", (2,), domain=SHIFTED_MEAN),
                  "u_text": StateTable("sample", (2,), domain=SHIFTED_MEAN)}
        if self.temperature_scheme == "individual":
            for name in ("temperature_image", "temperature_text"):
                tables[name] = StateTable("sample", (2,), fill=(self.tau, 0.0),
                                          domain=self._temperature_domain())
        return tables

    def _loss(self, step: Step, state: Any, params: Any, image: Array, text: Array,
              index: Array) -> tuple[Array, Any]:
        xp, stop = step.xp, step.stop
        dtype = image.dtype
        if self.normalize:
            image, text = _unit_rows(xp, image), _unit_rows(xp, text)
        groups = _groups(step, index, dtype)
        cross = image @ _transpose(xp, text)  # s_ij
        positive = xp.expand_dims(xp.sum(image * text, axis=1), 1)  # s_ii
        individual = self.temperature_scheme == "individual"
        has = in_dtype(groups.has, dtype, xp)
        value = None
        written: dict[str, Array] = {}
        for side, similarity in (("image", cross), ("text", _transpose(xp, cross))):
            margin = similarity - positive  # L_ij (B, B)
            table = getattr(state, f"u_{side}")
            if individual:
                tau_table = getattr(state, f"temperature_{side}")
                old_tau = in_dtype(xp.take(tau_table, index, axis=0), dtype, xp)
                tau = xp.expand_dims(old_tau[:, 0], 1)
            else:
                tau = self.tau
            z = stop(margin) / tau
            old = in_dtype(xp.take(table, index, axis=0), dtype, xp)
            estimate = _estimate(xp, groups, old, [[z]], self.current_gamma)
            safe = _safe(xp, estimate.tilde[0], groups)
            ratio = estimate.exps[0][0] / xp.expand_dims(safe, 1)  # sg[e^z / u], 0 off negatives
            reduce = groups.num_neg if self.negative_reduction == "mean" else 1
            term = xp.sum(stop(ratio) * margin, axis=1) / reduce
            direction = xp.sum(term * has) / axis_size(image, dtype=term.dtype)
            value = direction if value is None else (value + direction) / 2
            written[f"u_{side}"] = step.write_rows(table, index, estimate.rows,
                                                   equal_duplicates=True)
            if individual:
                log_u = xp.log(safe) + estimate.shift
                grad = log_u + self.rho - xp.sum(ratio * z, axis=1) / groups.num_neg
                written[f"temperature_{side}"] = step.write_rows(
                    tau_table, index, self._rule.rows(xp, groups, old_tau, grad),
                    equal_duplicates=True)
        return value, self.state_type(**written)


# --------------------------------------------------------------------------- InfoNCE

class InfoNCELoss(LossDefinition):
    r"""In-batch InfoNCE: SimCLR's NT-Xent (``within_view=True``) or CLIP's loss
    (``within_view=False``), the mini-batch baseline of the global contrastive losses.

    Parameters
    ----------
    tau : float, default 0.1
        Temperature :math:`\tau > 0`.
    within_view : bool, default True
        Whether an anchor's negatives include the other samples of its own view (SimCLR) or
        only those of the other view (CLIP, image-text).
    normalize : bool, default True
        Divide every row of both views by its L2 norm inside the loss.

    Notes
    -----
    With :math:`z_{ij} = x_i^\top x'_j/\tau` (rows L2-normalised), anchor :math:`x_i` has the
    positive :math:`z_{ii}` and the negatives :math:`x_i^\top x'_j/\tau` (and, within views,
    :math:`x_i^\top x_j/\tau`) over the samples :math:`j` with another dataset index:

    .. math::

        \ell_i = -z_{ii} + \log\Big(e^{z_{ii}} + \sum_{j\in S_i^-} e^{z^-_{ij}}\Big),
        \qquad L = \frac1{2B}\sum_i (\ell_i + \ell'_i)

    with :math:`\ell'_i` the same for anchor :math:`x'_i`. ``index`` is optional: without it
    every position is its own sample; with it, duplicates of a sample are not its negatives
    (as in the global losses). Unlike the global losses, the negatives are those of the
    mini-batch only, so the estimate of the global objective is biased for small batches.

    References
    ----------
    Chen, Kornblith, Norouzi, Hinton. "A Simple Framework for Contrastive Learning of Visual
    Representations", ICML 2020. Radford et al. "Learning Transferable Visual Models From
    Natural Language Supervision", ICML 2021.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = InfoNCELoss(tau=0.5)
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> value, _ = loss_fn.apply(loss_fn.init(xp=xp), x, x[::-1])
    >>> round(float(value), 4)
    1.5032
    """

    def __init__(self, *, tau: float = 0.1, within_view: bool = True,
                 normalize: bool = True) -> None:
        self.tau = check_positive("InfoNCELoss", "tau", tau)
        self.within_view = _check_flag("InfoNCELoss", "within_view", within_view)
        self.normalize = _check_flag("InfoNCELoss", "normalize", normalize)

    def inputs(self) -> tuple[Input, ...]:
        return (Input("view1", ("batch", "features"), "score"),
                Input("view2", ("batch", "features"), "score"),
                Input("index", ("batch",), "index", keys="sample", optional=True))

    def key_spaces(self) -> dict[str, int | None]:
        return {"sample": None}  # any index >= 0: only equality matters

    def _loss(self, step: Step, state: Any, params: Any, view1: Array, view2: Array,
              index: Array | None) -> tuple[Array, Any]:
        xp, stop = step.xp, step.stop
        dtype = view1.dtype
        if self.normalize:
            view1, view2 = _unit_rows(xp, view1), _unit_rows(xp, view2)
        if index is None:
            index = xp.arange(axis_size(view1), dtype=step.backend.index_dtype,
                              device=step.backend.device(view1))
        groups = _groups(step, index, dtype)
        negative, is_negative = groups.negative, groups.is_negative
        cross = view1 @ _transpose(xp, view2) / self.tau
        positive = xp.sum(view1 * view2, axis=1) / self.tau
        rows = [[cross], [_transpose(xp, cross)]]
        if self.within_view:
            rows[0].append(view1 @ _transpose(xp, view1) / self.tau)
            rows[1].append(view2 @ _transpose(xp, view2) / self.tau)
        total = None
        for blocks in rows:
            # log-sum-exp over the positive and the negatives, shifted by a detached maximum
            top = stop(positive)
            for block in blocks:
                top = xp.maximum(top, stop(xp.max(xp.where(is_negative, block,
                                                           xp.expand_dims(positive, 1)),
                                                  axis=1)))
            sums = xp.exp(positive - top)
            for block in blocks:
                exponent = xp.where(is_negative, block - xp.expand_dims(top, 1),
                                    xp.zeros_like(block))
                sums = sums + xp.sum(xp.exp(exponent) * negative, axis=1)
            anchor = xp.log(sums) + top - positive
            total = anchor if total is None else total + anchor
        return xp.sum(total) / (2 * axis_size(view1, dtype=dtype)), state
