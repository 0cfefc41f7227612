"""TensorFlow optimizers: ``tf.Module``\\ s driving the core update rules.

Slots (momentum, Adam moments, the epoch-decay reference point, the iterate sum), the
learning rate and the step counters are ``tf.Variable``\\ s created at construction, so a
``GradientTape`` loop may run eagerly or inside ``tf.function`` and ``tf.train.Checkpoint``
saves everything. Use ``apply_gradients(zip(grads, variables))`` as with Keras optimizers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xrisk import optim as core_optim
from xrisk.optim import OptimizerState

import tensorflow as tf

__all__ = ["SOAP", "PESG"]

_BUFFERS = ("momentum", "second_moment", "max_second_moment", "reference", "iterate_sum")


def _as_variable(value: Any, owner: str) -> tf.Variable:
    """A tf.Variable, or the tf.Variable inside a Keras 3 variable."""
    if isinstance(value, tf.Variable):
        return value
    inner = getattr(value, "value", None)
    if isinstance(inner, tf.Variable):
        return inner
    raise TypeError(
        f"{owner}: got a parameter of type {type(value).__name__}; expected tf.Variable (or a "
        "Keras variable). Fix: pass model.trainable_variables."
    )


class _RuleOptimizer(tf.Module):
    """A TensorFlow optimizer whose update is a core rule."""

    def __init__(self, params: Iterable[Any], rule: core_optim.ClippedOptimizer) -> None:
        owner = type(rule).__name__
        super().__init__(name=owner)
        self.rule = rule
        self.params = [_as_variable(p, owner) for p in params]
        if not self.params:
            raise ValueError(f"{owner}: got an empty parameter list.")
        self._position = {p.ref(): i for i, p in enumerate(self.params)}
        with tf.init_scope():
            state = rule.init([tf.convert_to_tensor(p) for p in self.params])
            self.learning_rate = tf.Variable(state.learning_rate, trainable=False, name="lr")
            self.step_count = tf.Variable(state.step, trainable=False, name="step")
            self.steps_since_reference = tf.Variable(
                state.steps_since_reference, trainable=False, name="steps_since_reference"
            )
            self.slots = {
                name: [tf.Variable(v, trainable=False, name=name) for v in getattr(state, name)]
                for name in _BUFFERS
            }

    def _core_state(self) -> OptimizerState:
        return OptimizerState(
            learning_rate=tf.convert_to_tensor(self.learning_rate),
            step=tf.convert_to_tensor(self.step_count),
            steps_since_reference=tf.convert_to_tensor(self.steps_since_reference),
            **{name: tuple(tf.convert_to_tensor(v) for v in slot)
               for name, slot in self.slots.items()},
        )

    def _store(self, state: OptimizerState) -> None:
        self.learning_rate.assign(state.learning_rate)
        self.step_count.assign(state.step)
        self.steps_since_reference.assign(state.steps_since_reference)
        for name, slot in self.slots.items():
            for variable, value in zip(slot, getattr(state, name), strict=True):
                variable.assign(value)

    def _aligned_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> list[Any]:
        grads: list[Any] = [None] * len(self.params)
        for grad, var in grads_and_vars:
            position = self._position.get(_as_variable(var, self.name).ref())
            if position is None:
                raise ValueError(
                    f"{self.name}: got a gradient for variable {var.name!r}, which this optimizer "
                    "was not built with. Fix: build it with every variable you train, e.g. "
                    "model.trainable_variables (PESG adds the loss's a and b itself)."
                )
            grads[position] = None if grad is None else tf.convert_to_tensor(grad)
        return grads

    def _values(self) -> list[tf.Tensor]:
        return [tf.convert_to_tensor(p) for p in self.params]

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> None:
        """One update from ``(gradient, variable)`` pairs; missing variables are left alone."""
        updates, state = self.rule.update(
            self._aligned_gradients(grads_and_vars), self._core_state(), self._values()
        )
        for variable, update in zip(self.params, updates, strict=True):
            variable.assign_add(update)
        self._store(state)

    def update_lr(self, decay_factor: float) -> None:
        """Divide the learning rate by ``decay_factor``."""
        self._store(core_optim.update_lr(self._core_state(), decay_factor))

    def update_regularizer(self, decay_factor: float | None = None) -> None:
        """New epoch-decay stage: reference ← average iterate; lr ÷ ``decay_factor`` if given."""
        self._store(core_optim.update_regularizer(self._core_state(), decay_factor))


class SOAP(_RuleOptimizer):
    __doc__ = core_optim.SOAP.__doc__

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        mode: str = "adam",
        clip_value: float = 1.0,
        weight_decay: float = 1e-5,
        epoch_decay: float = 0.0,
        momentum: float = 0.9,
        nesterov: bool = False,
        dampening: float = 0.1,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        rule = core_optim.SOAP(
            lr=lr, mode=mode, clip_value=clip_value, weight_decay=weight_decay,
            epoch_decay=epoch_decay, momentum=momentum, nesterov=nesterov,
            dampening=dampening, betas=betas, eps=eps, amsgrad=amsgrad,
        )
        super().__init__(params, rule)


class PESG(_RuleOptimizer):
    __doc__ = core_optim.PESG.__doc__

    def __init__(
        self,
        params: Iterable[Any],
        loss_fn: Any,
        lr: float = 0.1,
        mode: str = "sgd",
        clip_value: float = 1.0,
        weight_decay: float = 1e-5,
        epoch_decay: float = 2e-3,
        momentum: float = 0.9,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        if not all(hasattr(loss_fn, name) for name in ("a", "b", "alpha", "margin")):
            raise TypeError(
                f"PESG: loss_fn is {type(loss_fn).__name__}; expected an AUCMLoss (with a, b, "
                "alpha and margin). Fix: PESG(model.trainable_variables, loss_fn=AUCMLoss())."
            )
        rule = core_optim.PESG(
            margin=loss_fn.margin, lr=lr, mode=mode, clip_value=clip_value,
            weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
            betas=betas, eps=eps, amsgrad=amsgrad,
        )
        alpha = _as_variable(loss_fn.alpha, "PESG")
        # alpha is updated by the closed-form ascent, never from its gradient.
        super().__init__([*params, loss_fn.a, loss_fn.b], rule)
        self.alpha = alpha
        self._position[alpha.ref()] = -1

    def _aligned_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> list[Any]:
        pairs = [(g, v) for g, v in grads_and_vars
                 if _as_variable(v, "PESG").ref() != self.alpha.ref()]
        return super()._aligned_gradients(pairs)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> None:
        """Descent on the model and a, b; then the projected ascent on alpha."""
        updates, alpha_update, state = self.rule.update(
            self._aligned_gradients(grads_and_vars), self._core_state(), self._values(),
            alpha=tf.convert_to_tensor(self.alpha),
        )
        for variable, update in zip(self.params, updates, strict=True):
            variable.assign_add(update)
        self.alpha.assign_add(alpha_update)
        self._store(state)
