r"""PDSCA: the optimizer of :class:`CompositionalAUCLoss` (k cross-entropy steps, then k AUC
steps, alternating)."""

from __future__ import annotations

from typing import Any, NamedTuple

from .._typing import Array, compute_dtype, in_dtype
from ._rule import (
    LearningRate,
    Rates,
    SlotSpec,
    UpdateRule,
    _as_compute,
    _branch,
    _namespace,
    _select,
    _value_at,
    ascent_step,
    check_learning_rate,
    check_number,
)
from .pesg import check_min_max_loss

__all__ = ["PDSCA", "PDSCASlots"]



class PDSCASlots(NamedTuple):
    """Per-parameter state of :class:`PDSCA` (``None``: unused by the hyper-parameters)."""

    auc_count: Array  #: () int32 — AUC-phase updates (the first one starts the momentum)
    ce_count: Array  #: () int32 — CE-phase updates (the first one starts the weight average)
    momentum: Array  #: the AUC phase's EMA of d
    weight_average: Array | None = None  #: the CE phase's weight average (beta1 > 0)
    reference: Array | None = None  #: θ_ref of epoch decay
    iterate_sum: Array | None = None  #: Σθ over the steps since update_regularizer
    average_count: Array | None = None  #: () int32 — those steps (this parameter's own count)


def _negate(flag: Any) -> Any:
    return (not flag) if isinstance(flag, bool) else ~flag


def _as_int(flag: Any, xp: Any) -> Any:
    return int(flag) if isinstance(flag, bool) else xp.astype(flag, xp.int32)


class PDSCA(UpdateRule):
    r"""Primal-dual stochastic compositional adaptive method for :class:`CompositionalAUCLoss`.

    Step t (0-based) belongs to the cross-entropy (CE) phase when ``t mod 2k < k`` and to the
    AUC phase otherwise, with ``k`` read from the loss — the loss's own rule for choosing BCE
    or AUC-M. With :math:`d = \mathrm{clip}(g) + \lambda_{ed}(\theta-\theta_{ref})
    + \lambda_{wd}\theta` (LibAUC 2.0.1's PDSCA update):

    - CE phase: :math:`\theta \leftarrow \theta - \eta_0 d`; then, if beta1 > 0, the weight
      average ``wbuf`` (the first CE step sets it to θ; later
      ``wbuf ← (1 - beta1)·wbuf + beta1·θ``) and θ ← wbuf. The loss's auxiliaries do not
      move (the CE objective does not involve them).
    - AUC phase: ``buf ← (1 - beta2)·buf + beta2·d`` (the first AUC step takes d),
      θ ← θ - η·buf, then the projected ascent of the loss's ``ascent`` auxiliaries as in
      :class:`PESG`.

    Notes
    -----
    The phase is taken from the optimizer's own step counter, which equals the loss's
    ``step`` when the loss is called once per optimizer step (the usual loop); a loop that
    calls the loss more often (e.g. for evaluation on training batches) must not mix its
    phases up, and the loss does not count a batch it rejects (empty, or invalid values under
    jit) while the optimizer counts every step. ``update_lr`` / ``update_regularizer``
    divide both learning rates by ``decay_factor`` (LibAUC's separate ``decay_factor0`` is
    dropped). LibAUC picks the branch by ``alpha.grad is None``; after the first AUC step
    ``alpha.grad`` stays set (``zero_grad`` does not see it), so every later step, CE steps
    included, takes the AUC branch and updates α. Here the schedule is the intended
    one. All of it is jit-safe: the phase is selected with ``where``.

    References
    ----------
    Yuan, Guo, Xu, Ying, Yang. "Compositional Training for End-to-End Deep AUC
    Maximization", ICLR 2022.
    """

    slots_type = PDSCASlots
    host_counters = True

    def __init__(self, loss_fn: Any, *, learning_rate: LearningRate = 0.1,
                 ce_learning_rate: LearningRate | None = None, beta1: float = 0.99,
                 beta2: float = 0.999, clip_value: float = 1.0, weight_decay: float = 1e-5,
                 epoch_decay: float = 2e-3) -> None:
        example = "CompositionalAUCLoss()"
        self.loss_fn = check_min_max_loss("PDSCA", loss_fn, example=example)
        k = getattr(self.loss_fn, "k", None)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise TypeError(
                f"PDSCA: loss_fn is {self.loss_fn.name}, whose k is {k!r}; expected a loss "
                f"that alternates k >= 1 cross-entropy and k AUC steps ({example}). Fix: "
                f"PDSCA(params, loss_fn={example}, ...)."
            )
        self.k = k  # not a constructor argument: it is the loss's (config() omits it)
        self.learning_rate = check_learning_rate("PDSCA", "learning_rate", learning_rate)
        self.ce_learning_rate = (None if ce_learning_rate is None else
                                 check_learning_rate("PDSCA", "ce_learning_rate",
                                                     ce_learning_rate))
        self.beta1 = check_number("PDSCA", "beta1", beta1, low=0.0, high=1.0, high_open=False)
        self.beta2 = check_number("PDSCA", "beta2", beta2, low=0.0, low_open=True, high=1.0,
                                  high_open=False,
                                  fix="pass beta2 in (0, 1] (the weight of the new direction)")
        self.clip_value = check_number("PDSCA", "clip_value", clip_value, low=0.0,
                                       low_open=True, high_open=False)
        self.weight_decay = check_number("PDSCA", "weight_decay", weight_decay, low=0.0)
        self.epoch_decay = check_number("PDSCA", "epoch_decay", epoch_decay, low=0.0)

    def slot_specs(self) -> dict[str, SlotSpec]:
        counter = SlotSpec(scalar=True, integer=True)
        specs = {"auc_count": counter, "ce_count": counter, "momentum": SlotSpec()}
        if self.beta1 > 0:
            specs["weight_average"] = SlotSpec()
        if self.epoch_decay > 0:
            specs.update(reference=SlotSpec(copy_param=True), iterate_sum=SlotSpec(),
                         average_count=counter)
        return specs

    def rates(self, step: Any, *, lr: Any, ce_lr: Any = None) -> Rates:
        return Rates(lr=lr, ce_lr=lr if ce_lr is None else ce_lr,
                     ce_phase=(step % (2 * self.k)) < self.k)

    def scheduled_rates(self, step: Array, lr_divisor: Array) -> Rates:
        lr = _value_at(self.learning_rate, step) / lr_divisor
        ce_lr = (None if self.ce_learning_rate is None
                 else _value_at(self.ce_learning_rate, step) / lr_divisor)
        return self.rates(step, lr=lr, ce_lr=ce_lr)

    def update_param(self, grad: Array, param: Array, slots: Any, rates: Rates, *,
                     auxiliary: bool = False) -> tuple[Array, Any]:
        xp = _namespace(param)
        dtype = compute_dtype(param, xp)
        p, g = in_dtype(param, dtype, xp), in_dtype(grad, dtype, xp)
        ce = rates.ce_phase  # an array under jit; a Python bool with host counters
        d = xp.clip(g, -self.clip_value, self.clip_value)
        if self.epoch_decay > 0:
            d = d + self.epoch_decay * (p - slots.reference)
        if self.weight_decay > 0:
            d = d + self.weight_decay * p
        new_slots: dict[str, Array] = {}
        ce_moves = False if auxiliary else ce
        # A Python bool phase computes only its own branch; an array phase computes both and
        # selects (the same numbers).
        ce_new = auc_new = p
        if ce is not False and not auxiliary:  # CE phase: a plain step, then the average
            ce_new = p - _as_compute(rates.ce_lr, dtype, xp) * d
            if self.beta1 > 0:
                average, plain = slots.weight_average, ce_new
                ce_new = _branch(slots.ce_count == 0, lambda: plain,
                                 lambda: (1 - self.beta1) * average + self.beta1 * plain, xp)
                new_slots["weight_average"] = _select(ce_moves, ce_new, average, xp)
        if ce is not True:  # AUC phase: LibAUC's EMA momentum
            buffer = slots.momentum
            momentum = _branch(slots.auc_count == 0, lambda: d,
                               lambda: (1 - self.beta2) * buffer + self.beta2 * d, xp)
            auc_new = p - _as_compute(rates.lr, dtype, xp) * momentum
            new_slots["momentum"] = _select(ce, buffer, momentum, xp)
        new_slots.update(ce_count=slots.ce_count + _as_int(ce_moves, xp),
                         auc_count=slots.auc_count + _as_int(_negate(ce), xp))
        new_param = in_dtype(_select(ce, ce_new, auc_new, xp), param.dtype, xp)
        if self.epoch_decay > 0:
            moved = _negate(ce) if auxiliary else True
            new_slots.update(
                iterate_sum=_select(moved, slots.iterate_sum + in_dtype(new_param, dtype, xp),
                                    slots.iterate_sum, xp),
                average_count=slots.average_count + _as_int(moved, xp),
            )
        return new_param, slots._replace(**new_slots)

    def ascend(self, aux: Any, rates: Rates) -> Any:
        return ascent_step(self.loss_fn, aux, rates.lr, active=_negate(rates.ce_phase))
