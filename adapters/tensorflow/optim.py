"""TensorFlow optimizers: ``tf.Module``\\ s driving the core update rules.

Slots (momentum, Adam moments, the epoch-decay reference point, the iterate sum), the
learning rate and the step counters are ``tf.Variable``\\ s created at construction, so a
``GradientTape`` loop may run eagerly or inside ``tf.function`` and ``tf.train.Checkpoint``
saves everything. Use ``apply_gradients(zip(grads, variables))`` as with Keras optimizers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from xrisk import OPTIMIZERS
from xrisk import optim as core_optim
from xrisk._adapter_support import build_optimizer_class, rule_from_arguments
from xrisk.optim import OptimizerState

__all__ = ["XRiskOptimizer", *OPTIMIZERS]

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


class XRiskOptimizer(tf.Module):
    """A TensorFlow optimizer whose update is a core rule (``rule_type``).

    Subclasses are generated from :data:`xrisk.OPTIMIZERS`. For PESG the loss's ``a`` and
    ``b`` join the parameters and its ``alpha`` takes the rule's projected ascent (its
    gradient, if given to ``apply_gradients``, is ignored).
    """

    rule_type: type[core_optim.ClippedOptimizer]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        params, loss_fn, rule = rule_from_arguments(type(self), args, kwargs)
        super().__init__(name=rule.name)
        self.rule = rule
        params = list(params) + ([] if loss_fn is None else [loss_fn.a, loss_fn.b])
        self.params = [_as_variable(p, rule.name) for p in params]
        if not self.params:
            raise ValueError(f"{rule.name}: got an empty parameter list.")
        self.alpha = None if loss_fn is None else _as_variable(loss_fn.alpha, rule.name)
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
            ref = _as_variable(var, self.name).ref()
            if self.alpha is not None and ref == self.alpha.ref():
                continue  # alpha takes the closed-form ascent, not its gradient
            position = self._position.get(ref)
            if position is None:
                raise ValueError(
                    f"{self.name}: got a gradient for variable {var.name!r}, which this optimizer "
                    "was not built with. Fix: build it with every variable you train, e.g. "
                    "model.trainable_variables (PESG adds the loss's a and b itself)."
                )
            grads[position] = None if grad is None else tf.convert_to_tensor(grad)
        return grads

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Any]]) -> None:
        """One update from ``(gradient, variable)`` pairs; missing variables are left alone."""
        grads = self._aligned_gradients(grads_and_vars)
        values = [tf.convert_to_tensor(p) for p in self.params]
        if self.alpha is None:
            updates, state = self.rule.update(grads, self._core_state(), values)
        else:
            updates, alpha_update, state = self.rule.update(
                grads, self._core_state(), values, alpha=tf.convert_to_tensor(self.alpha))
            self.alpha.assign_add(alpha_update)
        for variable, update in zip(self.params, updates, strict=True):
            variable.assign_add(update)
        self._store(state)

    def update_lr(self, decay_factor: float) -> None:
        """Divide the learning rate by ``decay_factor``."""
        self._store(core_optim.update_lr(self._core_state(), decay_factor))

    def update_regularizer(self, decay_factor: float | None = None) -> None:
        """New epoch-decay stage: reference ← average iterate; lr ÷ ``decay_factor`` if given."""
        self._store(core_optim.update_regularizer(self._core_state(), decay_factor))


globals().update({
    name: build_optimizer_class(rule, XRiskOptimizer, framework="TensorFlow (tf.Module)",
                                module="xrisk.tensorflow")
    for name, rule in OPTIMIZERS.items()
})
