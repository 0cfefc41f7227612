r"""Multi-instance AUC (MIDAM): AUC-M on bag scores pooled from sampled instances.

A bag :math:`X_i` (a set of instances, e.g. the patches of one slide) has one label; the model
scores every instance, a pooling turns those scores into one bag prediction :math:`h_i`, and
the AUC-margin min-max objective (as :class:`xrisk.AUCMLoss` v2) is taken over bags:

.. math::

    \min_{w,a,b}\max_{\alpha\ge 0}\;
    \mathbb E_+[(h-a)^2] + \mathbb E_-[(h-b)^2] + 2\alpha\,(m + \mathbb E_-[h] - \mathbb E_+[h])
    - \alpha^2 .

Both poolings are compositions :math:`h_i = f(g_i(w))` of a mean over the bag's instances,
so a mini-batch that holds a few instances per bag gives a biased estimate of
:math:`\nabla h_i`. MIDAM tracks the inner means per bag by a moving average (state keyed by
the bag index) and multiplies detached weights into the fresh instance means, so that
autodiff of the returned value gives the MIDAM gradient estimate (Zhu et al., ICML 2023):

- softmax pooling: :math:`h_i = \tau\log\frac1{|X_i|}\sum_{x\in X_i} e^{\phi(x)/\tau}`;
- attention pooling: :math:`h_i = \sigma\Big(\frac{\sum_x e^{\omega(x)}\phi(x)}
  {\sum_x e^{\omega(x)}}\Big)` with instance scores :math:`\phi` and attention logits
  :math:`\omega`.

The inputs are the *instance* scores of the sampled instances, (B, K) with a mask for bags
that hold fewer than K (see :class:`xrisk.samplers.BagSampler`), pooled inside the loss.
LibAUC's losses take values pooled by the caller (``MIL_sampling``): that splits one
estimator over two functions whose contract (exp of what, which temperature, mean or sum) the
user must keep consistent, and makes the bag estimate's overflow (``exp(φ/τ)`` in float32
for φ/τ > 88) the caller's problem. Pooling here keeps the estimator in one place and in log
space.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

from .._arguments import check_count, check_fraction, check_positive
from .._domain import NONNEGATIVE, REAL
from .._grouping import KeyGroups, group_keys
from .._registry import by_mode, modes_of
from .._state import SHIFTED_MEAN, SMOOTHING, StateTable
from .._typing import Array, in_dtype
from ._base import LOSSES, Auxiliary, Input, LossDefinition, Step, state_update
from .auc import AUCMParams

__all__ = [
    "MIDAM_MODES",
    "MIDAMLoss",
    "MIDAM_softmax_pooling_loss",
    "MIDAM_softmax_pooling_State",
    "MIDAM_attention_pooling_loss",
    "MIDAM_attention_pooling_State",
    "midam_class",
]



class _Bags(NamedTuple):
    """The bags of one batch: which positions count and their positions grouped by bag."""

    #: (B, K) 1.0 where an instance is present; ``None`` without a mask (all present)
    mask: Array | None
    size: Array  #: (B,) instances per position, floored at 1
    #: (B,) bool: the position holds at least one instance; ``None`` without a mask (all do)
    present: Array | None
    #: positions by bag index, pooling the present ones (:func:`xrisk._grouping.group_keys`);
    #: ``rows`` (B,) to read and write, absent positions pointed at the first present one's
    groups: KeyGroups


class _MIDAMBase(LossDefinition):
    """What both poolings share: inputs, auxiliaries, the duplicate rule, the objective."""

    params_type = AUCMParams
    num_samples: int
    margin: float
    gamma: float

    def key_spaces(self) -> dict[str, int | None]:
        return {"bag": self.num_samples}

    def auxiliaries(self) -> dict[str, Auxiliary]:
        return {"a": Auxiliary(), "b": Auxiliary(), "alpha": Auxiliary(role="ascent", lower=0.0)}

    def ascent_direction(self, params: AUCMParams) -> dict[str, Array]:
        r"""The objective's gradient in α with :math:`\mathbb E_+h = a`,
        :math:`\mathbb E_-h = b`: :math:`2(m + b - a) - 2\alpha` (the paper's; LibAUC's MIDAM
        optimizer uses half of it, see the class Notes)."""
        a, b, alpha = params
        return {"alpha": 2 * (self.margin + b - a) - 2 * alpha}

    @state_update
    def update_smoothing(self, state: Any, decay_factor: float) -> Any:
        """The state with its moving-average weight γ divided by ``decay_factor`` (>= 1).

        Pure: returns a new state (the torch and TensorFlow losses write it in place). The
        current γ is the state entry ``smoothing`` (the constructor's ``gamma`` is its initial
        value), so a compiled step sees the change without retracing and a checkpoint
        (``export_state``) carries it. LibAUC's tutorial halves γ at 50 % and 75 % of the
        epochs: ``state = loss_fn.update_smoothing(state, 2)``.

        Raises
        ------
        ValueError
            ``decay_factor`` is not a finite number >= 1 (γ must stay in (0, 1]).
        """
        factor = check_positive(f"{self.name}.update_smoothing", "decay_factor", decay_factor,
                                fix="pass decay_factor >= 1, e.g. 2 halves gamma")
        if factor < 1:
            raise ValueError(
                f"{self.name}.update_smoothing: decay_factor={decay_factor!r}; expected a "
                "number >= 1 (gamma / decay_factor must stay in (0, 1]). Fix: pass e.g. "
                "decay_factor=2, which halves gamma."
            )
        return state._replace(smoothing=state.smoothing / factor)

    def _tail_inputs(self) -> tuple[Input, ...]:
        return (
            Input("labels", ("batch",), "label"),
            Input("index", ("batch",), "index", keys="bag"),
            Input("mask", ("batch", "instances"), "label", optional=True),
        )

    def _bags(self, step: Step, index: Array, mask: Array | None, like: Array) -> _Bags:
        xp = step.xp
        host = step.host.get("index")
        if mask is None:  # every instance present: no mask to apply (the same numbers)
            width = like.shape[1]  # None: known only at run time (TensorFlow)
            size = (xp.sum(xp.ones_like(like), axis=1) if width is None
                    else xp.full_like(like[:, 0], float(width)))
            groups = group_keys(index, None, backend=step.backend, xp=xp, dtype=like.dtype,
                                host=host)
            return _Bags(None, size, None, groups)
        mask_f = xp.astype(mask, like.dtype)
        size = xp.sum(mask_f, axis=1)
        present = size > 0
        groups = group_keys(index, present, backend=step.backend, xp=xp, dtype=like.dtype,
                            host=host)
        return _Bags(mask_f, xp.maximum(size, xp.ones_like(size)), present, groups)

    @staticmethod
    def _write(step: Step, table: Array, bags: _Bags, new: Array, old: Array,
               ) -> tuple[Array, Array]:
        """Write the bags' new rows (a batch without a present position writes back what it
        read); return the table and the rows as stored. Absent positions read the first
        present position's row and its bag's pooled values, so their new row is that
        position's: the rows of one bag are equal by construction."""
        xp = step.xp
        rows = new
        if bags.present is not None:  # without a mask every group has a member
            rows = xp.where(xp.expand_dims(bags.groups.count > 0, 1), new, old)
        stored = rows if rows.dtype == table.dtype else xp.astype(
            xp.astype(rows, table.dtype), rows.dtype)
        return (step.write_rows(table, bags.groups.rows, rows, equal_duplicates=True),
                stored)

    def _objective(self, step: Step, bags: _Bags, h: Array, q: Array, labels: Array,
                   params: AUCMParams) -> Array:
        r"""The AUC-M objective at the tracked (detached) bag values ``h``, plus
        :math:`\sum_i c_i (q_i - \mathrm{sg}(q_i))` with :math:`c_i = \mathrm{sg}(\partial F /
        \partial h_i)`: zero in value, and autodiff through ``q`` (whose gradient is the
        estimate of :math:`\nabla h_i`) gives the MIDAM gradient."""
        xp, stop = step.xp, step.stop
        a, b, alpha = params
        if bags.present is None:  # every position present: the same numbers, unmasked
            positive = in_dtype(labels, h.dtype, xp)
            negative = 1 - positive
        else:
            present = xp.astype(bags.present, h.dtype)
            positive = in_dtype(labels, h.dtype, xp) * present
            negative = present - positive
        n_pos = xp.clip(xp.sum(positive), 1, None)  # counts: at least 1
        n_neg = xp.clip(xp.sum(negative), 1, None)
        mean_pos = xp.sum(positive * h) / n_pos
        mean_neg = xp.sum(negative * h) / n_neg
        from_a, from_b = h - a, h - b
        # One 2α for the value and the detached weights: backward reaches it through the
        # value only, so the gradients are those of three separate products.
        two_alpha = 2 * alpha
        value = (xp.sum(positive * from_a ** 2) / n_pos
                 + xp.sum(negative * from_b ** 2) / n_neg
                 + two_alpha * (self.margin + mean_neg - mean_pos) - alpha * alpha)
        weights = stop(positive * (2 * from_a - two_alpha) / n_pos
                       + negative * (2 * from_b + two_alpha) / n_neg)
        return value + xp.sum(weights * (q - stop(q)))


def _shift_rows(xp: Any, old_tilde: Array, old_shift: Array, largest: Array, gamma: Array,
                ) -> tuple[Array, Array]:
    r"""New log-shift and decay of a shifted moving average :math:`u = \tilde u e^c`.

    ``shift = max(largest, c_old + log((1 - gamma) u~_old))`` (the second term left out when
    ``(1 - gamma) u~_old`` is 0: gamma = 1, or a zero row), and ``decay = (1 - gamma)
    exp(c_old - shift)``, the factor of every carried column, with ``decay * u~_old <= 1``.
    ``where`` on safe operands: no inf or NaN on either branch.
    """
    carried_weight = 1 - gamma
    carry = carried_weight * old_tilde
    has_carry = carry > 0
    ones, zeros = xp.ones_like(carry), xp.zeros_like(carry)  # detached fills, shared
    candidate = old_shift + xp.log(xp.where(has_carry, carry, ones))
    shift = xp.where(has_carry, xp.maximum(largest, candidate), largest)
    keep = xp.where(has_carry, carried_weight, ones)
    gap = xp.where(has_carry, old_shift - shift, zeros)  # <= -log(carry)
    decay = xp.where(has_carry, keep * xp.exp(gap), zeros)
    return shift, decay


def _bag_max(xp: Any, z: Array, mask: Array | None) -> tuple[Array, Any]:
    """``(largest, low)``: per row (B,) the largest ``z`` over the present instances, and a
    finite value below every ``z`` (the fill of a row without any; ``None`` without a mask,
    where every row has instances)."""
    if mask is None:
        return xp.max(z, axis=1), None
    low = xp.min(z)
    return xp.max(xp.where(mask > 0, z, low), axis=1), low


def _masked_exp_mean(xp: Any, z: Array, shift: Array, mask: Array | None, size: Array,
                     weights: Array | None = None) -> Array:
    """``sum_k mask * exp(z - shift) [* weights] / size`` per row (B,), no exp of a masked
    entry (its value may be anything finite); ``mask=None``: every entry counts."""
    if mask is None:
        terms = xp.exp(z - xp.expand_dims(shift, 1))
    else:
        exponent = xp.where(mask > 0, z - xp.expand_dims(shift, 1), xp.zeros_like(z))
        terms = xp.exp(exponent) * mask
    if weights is not None:
        terms = terms * weights
    return xp.sum(terms, axis=1) / size


def _masked_exp_means(xp: Any, z: Array, shift: Array, mask: Array | None, size: Array,
                      weights: Array) -> tuple[Array, Array]:
    """``(_masked_exp_mean(.., weights), _masked_exp_mean(..))`` from one ``exp``: for detached
    ``z`` only (a shared differentiable exp would sum its two gradients in another order)."""
    if mask is None:
        terms = xp.exp(z - xp.expand_dims(shift, 1))
    else:
        exponent = xp.where(mask > 0, z - xp.expand_dims(shift, 1), xp.zeros_like(z))
        terms = xp.exp(exponent) * mask
    return xp.sum(terms * weights, axis=1) / size, xp.sum(terms, axis=1) / size


# --------------------------------------------------------------------------- softmax pooling

class MIDAM_softmax_pooling_State(NamedTuple):
    """State of :class:`MIDAM_softmax_pooling_loss`."""

    #: (num_samples, 2) float — per bag, [s~, c]: the moving average s = s~ exp(c) of the
    #: bag's mean exp(phi / tau) over its sampled instances, with its log-shift c (zeros:
    #: unvisited).
    s: Array
    #: () float — the current moving-average weight gamma (see ``update_smoothing``).
    smoothing: Array


class MIDAM_softmax_pooling_loss(_MIDAMBase):
    r"""Multi-instance AUC with softmax (log-sum-exp) pooling: MIDAM.

    Parameters
    ----------
    num_samples : int
        Number of bags in the training set (a multi-instance data set's samples are its
        bags); the bag index of every example lies in ``[0, num_samples)`` (LibAUC's
        ``data_len``).
    margin : float, default 1.0
        Margin :math:`m` of the AUC-M objective.
    tau : float, default 0.1
        Temperature :math:`\tau > 0` of the pooling (small: close to max pooling).
    gamma : float, default 0.9
        Initial weight of the new mini-batch estimate in the moving average, in (0, 1];
        :meth:`update_smoothing` divides it.

    Notes
    -----
    Inputs: ``scores`` (B, K), the scores :math:`\phi` of K sampled instances per bag
    (logits: any real value); ``labels`` (B,) bag labels in {0, 1}; ``index`` (B,) bag
    indices; ``mask`` (B, K), optional, 1 where an instance is present (bags with fewer than K
    instances). A position without any instance is left out (no loss, no state write).

    Per bag i (index :math:`k_i`), with :math:`\hat s_i = \frac1{K_i}\sum_{k}
    e^{\phi_{ik}/\tau}` over its present instances:

    .. math::

        s_{k_i} &\leftarrow (1-\gamma)\,s_{k_i} + \gamma\,\mathrm{sg}(\hat s_i), \qquad
        h_i = \tau\log s_{k_i} \\
        L &= F(h, a, b, \alpha) + \sum_i c_i\,\tau\,\frac{\hat s_i - \mathrm{sg}(\hat s_i)}
             {s_{k_i}}, \qquad c_i = \mathrm{sg}\Big(\frac{\partial F}{\partial h_i}\Big)

    where F is the AUC-M objective of the module docstring over the batch's bags
    (:math:`\mathbb E_\pm` the means over its positive and negative bags). The value of L is
    F at the tracked :math:`h` (the second term is 0); its gradient in the scores is
    :math:`\sum_i c_i\,\tau\nabla\hat s_i / s_{k_i}`, the MIDAM estimate of
    :math:`\nabla F`, and in a, b, α that of F. With γ = 1 and every instance of every bag in
    one batch, :math:`h_i` is the exact pooled value and the gradient is that of F.

    *State*: s is stored shifted, :math:`s = \tilde s\,e^c` (:math:`c` follows the largest
    :math:`\phi/\tau`), so no ``exp`` overflows for any logit or temperature in float32;
    LibAUC's caller-side ``exp(φ/τ)`` overflows once :math:`\phi/\tau > 88`. Rows start at 0,
    as LibAUC's (the first visit gives :math:`s = \gamma\hat s`).

    *Duplicates*: positions of one bag index pool their estimates (mean) and get one update.

    *Differences from LibAUC 2.0.1* (``MIDAM_softmax_pooling_loss``): the α term is the
    paper's :math:`2\alpha(m + \mathbb E_-h - \mathbb E_+h) - \alpha^2`; LibAUC's loss drops
    the factor 2 (its gradient term is :math:`\alpha\tau(\ldots)`) and its optimizer ascends
    on half the gradient, :math:`(m+b-a) - \alpha`. Both have the same saddle point
    (:math:`\alpha^* = m + b - a`); the paper's form is the one its analysis covers and the
    one :class:`AUCMLoss` / PESG use, so AUC-M and MIDAM share one α convention (with it the
    α step of :class:`xrisk.MIDAM` is twice LibAUC's at equal learning rate). The margin is
    the loss's (LibAUC's loss ignores it; its optimizer reads it). The returned value is F
    (LibAUC returns a gradient surrogate whose value means nothing). Instances are pooled
    here, from instance scores and a mask.

    References
    ----------
    Zhu, Wang, Zhou, Xu, Yang. "Provable Multi-instance Deep AUC Maximization with
    Stochastic Pooling", ICML 2023.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = MIDAM_softmax_pooling_loss(num_samples=3, tau=1.0, gamma=1.0)
    >>> state, params = loss_fn.init(xp=xp, dtype=xp.float64), loss_fn.init_params(xp=xp)
    >>> scores = np.array([[0.0, np.log(3.0)], [0.0, 0.0]])  # two bags of two instances
    >>> value, state = loss_fn.apply(state, scores, np.array([1, 0]), np.array([0, 2]),
    ...                              params=params)
    >>> h = state.s[:, 0] * np.exp(state.s[:, 1])  # s = mean exp(phi / tau) per bag
    >>> h.round(4).tolist(), round(float(value), 4)  # F = log(2)^2 with a = b = alpha = 0
    ([2.0, 0.0, 1.0], 0.4805)
    """

    state_type = MIDAM_softmax_pooling_State
    modes = ("softmax",)  # MIDAMLoss's: log-sum-exp pooling of instance scores

    def __init__(self, num_samples: int, *, margin: float = 1.0, tau: float = 0.1,
                 gamma: float = 0.9) -> None:
        owner = "MIDAM_softmax_pooling_loss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.margin = check_positive(owner, "margin", margin)
        self.tau = check_positive(owner, "tau", tau)
        self.gamma = check_fraction(owner, "gamma", gamma)

    def inputs(self) -> tuple[Input, ...]:
        return (Input("scores", ("batch", "instances"), "score"), *self._tail_inputs())

    def state_tables(self) -> dict[str, StateTable]:
        return {"s": StateTable("bag", (2,), domain=SHIFTED_MEAN),
                "smoothing": StateTable(None, (), self.gamma, domain=SMOOTHING)}

    def state_meaning(self) -> dict[str, Any]:
        # s~ e^c is a mean of exp(phi / tau): tau is the unit of the stored exponent.
        return {"tau": self.tau}

    def _loss(self, step: Step, state: MIDAM_softmax_pooling_State, params: AUCMParams,
              scores: Array, labels: Array, index: Array, mask: Array | None,
              ) -> tuple[Array, MIDAM_softmax_pooling_State]:
        xp, stop = step.xp, step.stop
        dtype = scores.dtype
        bags = self._bags(step, index, mask, scores)
        gamma = xp.astype(state.smoothing, dtype)
        z = stop(scores) / self.tau
        largest = bags.groups.max(*_bag_max(xp, z, bags.mask))
        old = in_dtype(xp.take(state.s, bags.groups.rows, axis=0), dtype, xp)  # (B, 2)
        shift, decay = _shift_rows(xp, old[:, 0], old[:, 1], largest, gamma)
        fresh = bags.groups.mean(_masked_exp_mean(xp, z, shift, bags.mask, bags.size))
        new = xp.stack([decay * old[:, 0] + gamma * fresh, shift], axis=1)
        table, stored = self._write(step, state.s, bags, new, old)

        # log s at present bags (s~ > 0 there); 0 elsewhere, so nothing takes log 0.
        stored_tilde, stored_shift = stored[:, 0], stored[:, 1]
        if bags.present is None:
            tilde = xp.where(stored_tilde > 0, stored_tilde, xp.ones_like(stored_tilde))
            log_s = xp.log(tilde) + stored_shift
        else:
            tilde = xp.where(bags.present & (stored_tilde > 0), stored_tilde,
                             xp.ones_like(stored_tilde))
            log_s = xp.log(tilde) + xp.where(bags.present, stored_shift, xp.zeros_like(tilde))
        h = self.tau * log_s
        # q_i = tau * s^_i / s_i, differentiable in the scores; every exponent is bounded
        # above by log(K * duplicates / gamma), since c >= each phi / tau of the bag.
        q = self.tau * _masked_exp_mean(xp, scores / self.tau, log_s, bags.mask, bags.size)
        loss = self._objective(step, bags, stop(h), q, labels, params)
        return loss, MIDAM_softmax_pooling_State(s=table, smoothing=_fresh(state.smoothing))


# --------------------------------------------------------------------------- attention pooling

class MIDAM_attention_pooling_State(NamedTuple):
    """State of :class:`MIDAM_attention_pooling_loss`."""

    #: (num_samples, 3) float — per bag, [sn~, sd~, c]: the moving averages sn = sn~ exp(c) of
    #: the mean exp(omega) * phi and sd = sd~ exp(c) of the mean exp(omega) over the bag's
    #: sampled instances, with their shared log-shift c. Filled (1, 1, 0) as LibAUC's ones.
    s: Array
    #: () float — the current moving-average weight gamma (see ``update_smoothing``).
    smoothing: Array


class MIDAM_attention_pooling_loss(_MIDAMBase):
    r"""Multi-instance AUC with attention pooling: MIDAM.

    Parameters
    ----------
    num_samples : int
        Number of bags in the training set (a multi-instance data set's samples are its
        bags); the bag index of every example lies in ``[0, num_samples)`` (LibAUC's
        ``data_len``).
    margin : float, default 1.0
        Margin :math:`m` of the AUC-M objective.
    gamma : float, default 0.9
        Initial weight of the new mini-batch estimate in the moving averages, in (0, 1];
        :meth:`update_smoothing` divides it.

    Notes
    -----
    Inputs: ``scores`` (B, K), the instance scores :math:`\phi` of K sampled instances per
    bag; ``attention`` (B, K), their attention logits :math:`\omega`; ``labels`` (B,) bag
    labels; ``index`` (B,) bag indices; ``mask`` (B, K), optional, 1 where an instance is
    present. A position without any instance is left out.

    Per bag i, with :math:`\hat n_i = \frac1{K_i}\sum_k e^{\omega_{ik}}\phi_{ik}` and
    :math:`\hat d_i = \frac1{K_i}\sum_k e^{\omega_{ik}}` over its present instances:

    .. math::

        n_{k_i} &\leftarrow (1-\gamma)\,n_{k_i} + \gamma\,\mathrm{sg}(\hat n_i), \quad
        d_{k_i} \leftarrow (1-\gamma)\,d_{k_i} + \gamma\,\mathrm{sg}(\hat d_i), \quad
        h_i = \sigma(n_{k_i} / d_{k_i}) \\
        q_i &= h_i(1-h_i)\Big(\frac{\hat n_i}{d_{k_i}} - \frac{n_{k_i}}{d_{k_i}^2}\,
               \hat d_i\Big) \quad (h, n, d \text{ detached}) \\
        L &= F(h, a, b, \alpha) + \sum_i c_i\,(q_i - \mathrm{sg}(q_i)), \qquad
        c_i = \mathrm{sg}\Big(\frac{\partial F}{\partial h_i}\Big)

    with F the AUC-M objective of the module docstring. The value of L is F at the tracked
    :math:`h`; the gradient of :math:`q_i` is LibAUC's estimate of :math:`\nabla h_i`. With
    γ = 1 and every instance in one batch it is the exact gradient of F.

    *State*: n and d share one log-shift, :math:`n = \tilde n e^c`, :math:`d = \tilde d
    e^c`, which follows the largest attention logit, so ``exp(ω)`` never overflows (and the
    ratio :math:`\tilde n / \tilde d` needs no shift at all). Rows start at (1, 1), LibAUC's
    ones.

    *Duplicates*: positions of one bag index pool their estimates (mean) and get one update.

    *Differences from LibAUC 2.0.1*: the α term is the paper's (factor 2), as in
    :class:`MIDAM_softmax_pooling_loss`, whose notes explain it; instances are pooled here
    from their scores, attention logits and a mask; the value is F.

    References
    ----------
    Zhu, Wang, Zhou, Xu, Yang. "Provable Multi-instance Deep AUC Maximization with
    Stochastic Pooling", ICML 2023.

    Examples
    --------
    >>> import numpy as np, array_api_compat.numpy as xp
    >>> loss_fn = MIDAM_attention_pooling_loss(num_samples=2, gamma=1.0)
    >>> state, params = loss_fn.init(xp=xp, dtype=xp.float64), loss_fn.init_params(xp=xp)
    >>> scores = np.array([[2.0, 0.0], [-1.0, 1.0]])
    >>> attention = np.array([[0.0, 0.0], [np.log(3.0), 0.0]])
    >>> value, state = loss_fn.apply(state, scores, attention, np.array([1, 0]),
    ...                              np.array([0, 1]), params=params)
    >>> (state.s[:, 0] / state.s[:, 1]).round(4).tolist()  # attention-weighted mean score
    [1.0, -0.5]
    """

    state_type = MIDAM_attention_pooling_State
    modes = ("attention",)  # MIDAMLoss's: attention-weighted mean

    def __init__(self, num_samples: int, *, margin: float = 1.0, gamma: float = 0.9) -> None:
        owner = "MIDAM_attention_pooling_loss"
        self.num_samples = check_count(owner, "num_samples", num_samples)
        self.margin = check_positive(owner, "margin", margin)
        self.gamma = check_fraction(owner, "gamma", gamma)

    def inputs(self) -> tuple[Input, ...]:
        return (Input("scores", ("batch", "instances"), "score"),
                Input("attention", ("batch", "instances"), "score"), *self._tail_inputs())

    def state_tables(self) -> dict[str, StateTable]:
        # [n~, d~, c]: n~ a weighted mean of any scores, d~ one of exp (>= 0), c any shift.
        return {"s": StateTable("bag", (3,), fill=(1.0, 1.0, 0.0),
                                domain=(REAL, NONNEGATIVE, REAL)),
                "smoothing": StateTable(None, (), self.gamma, domain=SMOOTHING)}

    def _loss(self, step: Step, state: MIDAM_attention_pooling_State, params: AUCMParams,
              scores: Array, attention: Array, labels: Array, index: Array,
              mask: Array | None) -> tuple[Array, MIDAM_attention_pooling_State]:
        xp, stop = step.xp, step.stop
        dtype = scores.dtype
        bags = self._bags(step, index, mask, scores)
        gamma = xp.astype(state.smoothing, dtype)
        omega, phi = stop(attention), stop(scores)
        largest = bags.groups.max(*_bag_max(xp, omega, bags.mask))
        old = in_dtype(xp.take(state.s, bags.groups.rows, axis=0), dtype, xp)  # (B, 3)
        # The shift follows the denominator d (> 0); |n| <= max|phi| d, so n stays bounded too.
        shift, decay = _shift_rows(xp, old[:, 1], old[:, 2], largest, gamma)
        pooled_n, pooled_d = _masked_exp_means(xp, omega, shift, bags.mask, bags.size, phi)
        fresh_n = bags.groups.mean(pooled_n)
        fresh_d = bags.groups.mean(pooled_d)
        new = xp.stack([decay * old[:, 0] + gamma * fresh_n,
                        decay * old[:, 1] + gamma * fresh_d, shift], axis=1)
        table, stored = self._write(step, state.s, bags, new, old)

        stored_n, stored_d = stored[:, 0], stored[:, 1]
        valid = stored_d > 0 if bags.present is None else bags.present & (stored_d > 0)
        zeros = xp.zeros_like(stored_d)  # detached rows: one fill for both
        d_tilde = xp.where(valid, stored_d, xp.ones_like(stored_d))
        n_tilde = xp.where(valid, stored_n, zeros)
        shift = xp.where(valid, stored[:, 2], zeros)
        ratio = n_tilde / d_tilde
        h = _sigmoid(ratio, xp)
        slope = h * (1 - h)
        # Fresh means in the stored shift (differentiable in scores and attention): n^ / d
        # = n^~ / d~ and n / d^2 * d^ = (n~ / d~^2) d^~, both in the same shift.
        fresh_d = _masked_exp_mean(xp, attention, shift, bags.mask, bags.size)
        fresh_n = _masked_exp_mean(xp, attention, shift, bags.mask, bags.size, scores)
        q = slope * (fresh_n / d_tilde - ratio / d_tilde * fresh_d)
        loss = self._objective(step, bags, stop(h), q, labels, params)
        return loss, MIDAM_attention_pooling_State(s=table, smoothing=_fresh(state.smoothing))


def _sigmoid(x: Array, xp: Any) -> Array:
    """Logistic function without overflow: exp of -|x| only (``abs``: max(x, -x) in one
    operation, the same bits)."""
    small = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + small), small / (1 + small))


# --------------------------------------------------------------------------- front door

#: ``MIDAMLoss`` modes (LibAUC's names) -> loss class name.
#: ``MIDAMLoss`` modes -> loss class, from each MIDAM loss's ``modes``.
MIDAM_MODES: dict[str, type[_MIDAMBase]] = modes_of(
    cls for cls in LOSSES.values() if issubclass(cls, _MIDAMBase))


def midam_class(mode: object) -> type[_MIDAMBase]:
    """The class of ``MIDAMLoss(mode)``; ValueError listing the modes otherwise.

    >>> midam_class("softmax").__name__
    'MIDAM_softmax_pooling_loss'
    """
    return cast(type[_MIDAMBase], by_mode(
        "MIDAMLoss", MIDAM_MODES, mode, "MIDAMLoss('attention', num_samples=len(bags))"))


def MIDAMLoss(mode: str = "attention", **kwargs: Any) -> LossDefinition:  # noqa: N802
    """The MIDAM loss of ``mode``, built with ``kwargs`` (LibAUC's front door).

    ``"softmax"`` -> :class:`MIDAM_softmax_pooling_loss`, ``"attention"`` ->
    :class:`MIDAM_attention_pooling_loss` (each class's ``modes``).

    >>> loss_fn = MIDAMLoss("softmax", num_samples=10, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau, loss_fn.gamma
    ('MIDAM_softmax_pooling_loss', 0.5, 0.9)
    """
    return midam_class(mode)(**kwargs)


def _fresh(value: Array) -> Array:
    """``value`` as a new array: a state entry a step does not change is still returned as
    its own buffer, so donating the old state (``jax.jit(..., donate_argnums=0)``) never
    deletes an array that an earlier, eager result still holds."""
    return value * 1
