r"""The shared update rule of LibAUC's optimizers, as pure functions on arrays.

For each parameter :math:`\theta` with gradient :math:`g` (libauc-reference.md §5.1):

.. math::

    d = \mathrm{clip}(g, -c, c) + \lambda_{ed}\,(\theta - \theta_{ref}) + \lambda_{wd}\,\theta

followed by a momentum rule (SGD, PESG's EMA or Adam) and :math:`\theta \leftarrow \theta + \Delta`.
The epoch-decay term pulls the iterate toward a reference point :math:`\theta_{ref}`, which
:func:`update_regularizer` replaces by the average of the iterates since the
previous call (the proximal-point stages of PESG/SOAP).

Every function is pure and jit-safe: no Python branching on array values, counters are int32
arrays, the learning rate lives in the state (so a decay never recompiles a jitted step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from .._config import Configured
from .._validation import check_choice, check_positive
from ..backends import backend_of

__all__ = ["OptimizerState", "ClippedOptimizer", "update_lr", "update_regularizer"]

Array = Any


class OptimizerState(NamedTuple):
    """State of a clipped optimizer; tuples hold one array per parameter (same shape)."""

    learning_rate: Array  #: () float — current learning rate
    step: Array  #: () int32 — steps taken
    steps_since_reference: Array  #: () int32 — steps since the last update_regularizer (T)
    momentum: tuple[Array, ...]  #: SGD/EMA buffer or Adam first moment; () without momentum
    second_moment: tuple[Array, ...]  #: Adam second moment; () in SGD modes
    max_second_moment: tuple[Array, ...]  #: AMSGrad running max; () unless amsgrad
    reference: tuple[Array, ...]  #: θ_ref of epoch decay; () unless epoch_decay > 0
    iterate_sum: tuple[Array, ...]  #: Σθ since the last update_regularizer; () likewise


def _namespace(arrays: Sequence[Array]) -> Any:
    return backend_of(*arrays).namespace


class ClippedOptimizer(Configured):
    """Base of the clipped SGD/Adam rules (SOAP and PESG); subclasses pick the SGD rule.

    Parameters are validated here; see :class:`xrisk.optim.SOAP` for their meaning.
    """

    sgd_rule = "heavy_ball"  # or "ema" (PESG)
    #: Whether the adapters' constructors take the loss (PESG: its a, b, alpha and margin).
    takes_loss: ClassVar[bool] = False
    #: Hyper-parameters the adapters read from the loss instead of taking them.
    read_from_loss: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        *,
        lr: float,
        mode: str,
        clip_value: float,
        weight_decay: float,
        epoch_decay: float,
        momentum: float,
        nesterov: bool = False,
        dampening: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        owner = type(self).__name__
        self.lr = check_positive(owner, "lr", lr)
        self.mode = check_choice(owner, "mode", mode, ("sgd", "adam"))
        self.clip_value = check_positive(owner, "clip_value", clip_value)
        self.weight_decay = check_positive(owner, "weight_decay", weight_decay, allow_zero=True)
        self.epoch_decay = check_positive(owner, "epoch_decay", epoch_decay, allow_zero=True)
        self.momentum = check_positive(owner, "momentum", momentum, allow_zero=True)
        if self.momentum >= 1 and self.sgd_rule == "heavy_ball":
            raise ValueError(f"{owner}: momentum={momentum!r}; expected a number in [0, 1).")
        if self.momentum > 1:
            raise ValueError(f"{owner}: momentum={momentum!r}; expected a number in [0, 1].")
        self.nesterov = bool(nesterov)
        self.dampening = check_positive(owner, "dampening", dampening, allow_zero=True)
        if (not isinstance(betas, tuple | list) or len(betas) != 2
                or not all(isinstance(b, int | float) and 0 <= b < 1 for b in betas)):
            raise ValueError(f"{owner}: betas={betas!r}; expected two numbers in [0, 1).")
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = check_positive(owner, "eps", eps)
        self.amsgrad = bool(amsgrad)

    @property
    def _uses_momentum_buffer(self) -> bool:
        return self.mode == "adam" or self.momentum > 0

    # -- pure functions -----------------------------------------------------------------
    def init(self, params: Sequence[Array]) -> OptimizerState:
        """Initial state for ``params`` (a sequence of arrays of one library).

        The epoch-decay reference point starts at the initial parameters
        (LibAUC draws N(0, 0.01²) noise instead, bug B4).
        """
        xp = _namespace(params)
        first = params[0]
        zeros = tuple(xp.zeros_like(p) for p in params)
        decay = self.epoch_decay > 0
        return OptimizerState(
            learning_rate=xp.asarray(self.lr, dtype=first.dtype, device=_device(first)),
            step=xp.zeros((), dtype=xp.int32, device=_device(first)),
            steps_since_reference=xp.zeros((), dtype=xp.int32, device=_device(first)),
            momentum=zeros if self._uses_momentum_buffer else (),
            second_moment=tuple(xp.zeros_like(p) for p in params) if self.mode == "adam" else (),
            max_second_moment=(
                tuple(xp.zeros_like(p) for p in params)
                if self.mode == "adam" and self.amsgrad else ()
            ),
            reference=tuple(p + xp.zeros_like(p) for p in params) if decay else (),
            iterate_sum=tuple(xp.zeros_like(p) for p in params) if decay else (),
        )

    def update(
        self, grads: Sequence[Array | None], state: OptimizerState, params: Sequence[Array]
    ) -> tuple[list[Array], OptimizerState]:
        """Return ``(updates, new_state)``; apply as ``param + update``.

        ``grads`` aligns with ``params``; a ``None`` gradient leaves that parameter and its
        buffers unchanged (its update is zero), as in torch.
        """
        if len(grads) != len(params):
            raise ValueError(
                f"{type(self).__name__}: {len(grads)} gradients for {len(params)} parameters; "
                "expected one gradient (or None) per parameter, in the same order."
            )
        xp = _namespace(params)
        lr = state.learning_rate
        first_step = state.step == 0
        t = xp.astype(state.step + 1, lr.dtype)
        beta1, beta2 = self.betas
        bias1 = 1 - xp.pow(xp.asarray(beta1, dtype=lr.dtype), t)
        bias2 = 1 - xp.pow(xp.asarray(beta2, dtype=lr.dtype), t)
        decay = self.epoch_decay > 0
        fields: dict[str, list[Array]] = {
            name: list(getattr(state, name))
            for name in ("momentum", "second_moment", "max_second_moment", "reference",
                         "iterate_sum")
        }
        updates = []
        for i, (grad, param) in enumerate(zip(grads, params, strict=True)):
            if grad is None:
                updates.append(xp.zeros_like(param))
                continue
            direction = xp.clip(grad, -self.clip_value, self.clip_value)
            if decay:
                direction = direction + self.epoch_decay * (param - fields["reference"][i])
            if self.weight_decay:
                direction = direction + self.weight_decay * param
            if self.mode == "adam":
                moment = beta1 * fields["momentum"][i] + (1 - beta1) * direction
                second = beta2 * fields["second_moment"][i] + (1 - beta2) * direction * direction
                fields["momentum"][i], fields["second_moment"][i] = moment, second
                if self.amsgrad:
                    second = xp.maximum(fields["max_second_moment"][i], second)
                    fields["max_second_moment"][i] = second
                denominator = xp.sqrt(second) / xp.sqrt(bias2) + self.eps
                update = -(lr / bias1) * moment / denominator
            elif self.momentum > 0:
                buffer = self._sgd_buffer(fields["momentum"][i], direction, first_step, xp)
                fields["momentum"][i] = buffer
                if self.nesterov:
                    update = -lr * (direction + self.momentum * buffer)
                else:
                    update = -lr * buffer
            else:
                update = -lr * direction
            updates.append(update)
            if decay:
                fields["iterate_sum"][i] = fields["iterate_sum"][i] + (param + update)
        new_state = OptimizerState(
            learning_rate=lr,
            step=state.step + 1,
            steps_since_reference=state.steps_since_reference + 1,
            **{name: tuple(values) for name, values in fields.items()},
        )
        return updates, new_state

    def _sgd_buffer(self, buffer: Array, direction: Array, first_step: Array, xp: Any) -> Array:
        """Momentum buffer: the first step takes ``direction`` itself (torch semantics)."""
        if self.sgd_rule == "ema":
            later = (1 - self.momentum) * buffer + self.momentum * direction
        else:
            later = self.momentum * buffer + (1 - self.dampening) * direction
        return xp.where(first_step, direction, later)


def update_lr(state: OptimizerState, decay_factor: float) -> OptimizerState:
    """Return ``state`` with the learning rate divided by ``decay_factor`` (> 0)."""
    factor = check_positive("update_lr", "decay_factor", decay_factor)
    return state._replace(learning_rate=state.learning_rate / factor)


def update_regularizer(state: OptimizerState, decay_factor: float | None = None
                       ) -> OptimizerState:
    """Start a new proximal stage: θ_ref ← mean of the iterates since the last call.

    Also divides the learning rate by ``decay_factor`` when given. With no step since the
    last call the reference point is kept (LibAUC's SogCLR divides by zero there, B7).
    Without epoch decay only the learning rate changes.
    """
    if decay_factor is not None:
        state = update_lr(state, decay_factor)
    if not state.reference:
        return state._replace(steps_since_reference=state.steps_since_reference * 0)
    xp = _namespace(state.reference)
    count = state.steps_since_reference
    safe = xp.maximum(count, xp.ones_like(count))
    reference = tuple(
        xp.where(count > 0, total / xp.astype(safe, total.dtype), ref)
        for total, ref in zip(state.iterate_sum, state.reference, strict=True)
    )
    return state._replace(
        reference=reference,
        iterate_sum=tuple(xp.zeros_like(total) for total in state.iterate_sum),
        steps_since_reference=count * 0,
    )


def _device(x: Array) -> Any:
    return backend_of(x).device(x)
