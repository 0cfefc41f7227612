"""TensorFlow optimizers: Keras 3 optimizers (``keras.optimizers.Optimizer``) running the
core update rules.

They work in ``model.compile(optimizer=xr.SOAP(learning_rate=1e-3))`` / ``model.fit`` and in
a ``GradientTape`` loop with ``opt.apply_gradients(zip(grads, variables))`` (eager or inside
``tf.function``). The slots (momentum, Adam moments, the epoch-decay reference point, the
iterate sum, their counters) are Keras variables in each variable's compute dtype (float32
for bfloat16/float16 variables), created by ``build`` — on the first ``apply_gradients``, or
at construction when ``params`` is given. ``update_lr`` / ``update_regularizer`` work eagerly
or inside ``tf.function``; the learning rate is ``learning_rate(iterations) / divisor`` with the
divisor in a variable, so a decay never retraces.

For a min-max loss (PESG + AUCMLoss, PDSCA + CompositionalAUCLoss) pass the loss's variables
with the model's (``[*model.trainable_variables, *loss_fn.trainable_variables]``): its
``descent`` auxiliaries take the descent step and each ``ascent`` one the projected ascent
after it (its gradient, if given, is ignored). The optimizer finds them by the roles the
loss declares. (``model.fit`` differentiates the model's variables only, so train a min-max
loss in a ``GradientTape`` loop.)

``model.fit`` with an X-risk loss: the loss needs each example's dataset index, which Keras
passes the native way inside ``y_true``. Pack ``y = [label, index]`` as an int64 array of
shape (n, 2) and wrap the xrisk loss in a ``keras.losses.Loss`` of dtype float64 (so every
index below 2**53 reaches the loss exactly):

>>> import numpy as np, keras, tensorflow as tf, xrisk.tensorflow as xr
>>> class PackedLoss(keras.losses.Loss):
...     '''An xrisk loss taking ``y_true = [label, index]`` and logits ``y_pred``.'''
...     def __init__(self, loss_fn):
...         super().__init__(name=loss_fn.name, dtype="float64")
...         self.loss_fn = loss_fn
...     def call(self, y_true, y_pred):
...         scores = tf.cast(tf.sigmoid(y_pred[:, 0]), tf.float32)
...         labels, index = tf.cast(y_true[:, 0], tf.int32), tf.cast(y_true[:, 1], tf.int64)
...         return self.loss_fn(scores, labels, index)
>>> x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
>>> labels = (x[:, 0] > 0.5).astype("int64")
>>> y = np.stack([labels, np.arange(32)], axis=1)  # [label, dataset index]
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
>>> model.compile(optimizer=xr.SOAP(learning_rate=1e-2),
...               loss=PackedLoss(xr.APLoss(num_samples=32)))
>>> history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
>>> len(history.history["loss"])
2
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeAlias

import keras
import tensorflow as tf

import xrisk
from xrisk.adapter_api import check_interval, compose_doc, refuse_foreign_arguments
from xrisk.optim import ClippedRule, Rates, UpdateRule, reset_reference

__all__ = ["XRiskOptimizer", *xrisk.OPTIMIZERS]

LearningRate: TypeAlias = float | Callable[[Any], Any]
Params: TypeAlias = Iterable[Any] | None
Loss: TypeAlias = tf.Module | None


def _tf_variable(variable: Any) -> tf.Variable:
    """The ``tf.Variable`` of a Keras 3 variable (or the variable itself)."""
    return variable.value if isinstance(variable, keras.Variable) else variable


class XRiskOptimizer(keras.optimizers.Optimizer):
    """Base of the Keras optimizers: ``update_step`` runs a core
    :class:`xrisk.optim.UpdateRule`; subclasses only fix the constructor (``rule_type`` and
    its signature). See the module docstring."""

    rule_type: ClassVar[type[UpdateRule]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "rule_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.rule_type)
            cls.__init__ = refuse_foreign_arguments(cls.__init__)  # type: ignore[method-assign]

    def __init__(self, rule: UpdateRule, params: Params = None, loss_fn: Loss = None) -> None:
        rate = rule.learning_rate
        # Keras would keep a number in a floatx variable; float64 keeps the given value exactly
        # (get_config() returns 0.001, not 0.0010000000474974513). The variable is made here,
        # in Keras's order (after the step count), rather than swapped for Keras's own: an
        # untracked variable makes the tracked list non-append-only, which tf.train.Checkpoint
        # refuses to save.
        super().__init__(learning_rate=rate if callable(rate) else (lambda: rate),
                         name=rule.name)
        if not callable(rate):
            with keras.name_scope(self.name, caller=self):
                variable = keras.Variable(float(rate), name="learning_rate", dtype="float64",
                                          trainable=False, aggregation="only_first_replica")
            self._track_variable(variable)
            self._learning_rate = variable
        self.rule = rule
        self._lr_divisor = self.add_variable(shape=(), initializer="ones", dtype="float64",
                                             name="lr_divisor")
        definition = rule.loss_definition
        containers: dict[str, tf.Variable] = {}
        if definition is not None:
            containers = {n: getattr(loss_fn, n, None) for n in definition.auxiliaries()}
            if not all(isinstance(v, tf.Variable) for v in containers.values()):
                raise TypeError(
                    f"{rule.name}: loss_fn is {type(loss_fn).__name__}; expected an "
                    "xrisk.tensorflow loss holding its auxiliaries as tf.Variables. Fix: "
                    f"{rule.name}(loss_fn=xrisk.tensorflow.{definition.name}(...), ...).")
        roles = {} if definition is None else definition.auxiliaries()
        # Plain attributes (no checkpoint dependency: the loss saves its own variables).
        object.__setattr__(self, "_containers", containers)
        object.__setattr__(self, "_descent", [v for n, v in containers.items()
                                              if roles[n].role == "descent"])
        object.__setattr__(self, "_ascent_keys", {v.ref() for n, v in containers.items()
                                                  if roles[n].role == "ascent"})
        object.__setattr__(self, "_auxiliary_keys", set())
        if params is not None:
            variables = [_tf_variable(v) for v in params]
            known = {v.ref() for v in variables}
            self.build([*variables, *(v for v in self._descent if v.ref() not in known)])

    # -- variables --------------------------------------------------------------------------
    def build(self, variables: list[Any]) -> None:
        """Create the slots of ``variables`` (a loss's ascent auxiliaries take none)."""
        if self.built:
            return
        variables = [v for v in variables if _tf_variable(v).ref() not in self._ascent_keys]
        # fit builds the optimizer inside its first traced step; XLA (jit_compile=True, and
        # "auto" on a GPU) refuses variables created there, so the slots are lifted out of
        # the graph being traced, as Keras's own optimizers create theirs.
        with tf.init_scope():
            self._build_slots(variables)
        object.__setattr__(self, "_auxiliary_keys", {
            self._var_key(v) for v in self._descent})

    def _build_slots(self, variables: list[Any]) -> None:
        super().build(variables)
        specs = self.rule.slot_specs()
        slots = []
        for variable in variables:
            value = _tf_variable(variable)
            compute = "float64" if value.dtype == tf.float64 else "float32"
            prefix = str(getattr(variable, "path", value.name)).replace("/", "_").replace(":", "_")
            entry = {}
            for name, spec in specs.items():
                entry[name] = self.add_variable(
                    shape=() if spec.scalar else tuple(value.shape),
                    initializer=(lambda shape, dtype=None, v=value: tf.cast(v, dtype))
                    if spec.copy_param else "zeros",
                    dtype="int32" if spec.integer else compute, name=f"{prefix}_{name}")
            slots.append(entry)
        self._slot_variables = slots

    def _get_current_learning_rate(self) -> Any:
        base = self._learning_rate
        if not isinstance(base, keras.Variable):  # a schedule of the step count
            base = base(self._iterations)
        return tf.cast(base, tf.float64) / tf.convert_to_tensor(self._lr_divisor)

    def _rates(self) -> Rates:
        step = tf.convert_to_tensor(self.iterations)
        ce = getattr(self.rule, "ce_learning_rate", None)
        divisor = tf.convert_to_tensor(self._lr_divisor)
        if ce is not None:  # a Python number straight to float64 (tf.cast would round it)
            ce = tf.cast(ce(step), tf.float64) if callable(ce) else tf.constant(ce, tf.float64)
        ce_lr = None if ce is None else ce / divisor
        return self.rule.rates(step, lr=self.learning_rate, ce_lr=ce_lr)

    # -- the step ---------------------------------------------------------------------------
    def apply(self, grads: Any, trainable_variables: Any = None) -> None:
        """Keras's ``apply``; with a min-max loss, the ascent step follows the descent."""
        if not self._containers:
            return super().apply(grads, trainable_variables)
        if trainable_variables is not None:
            pairs = [(g, v) for g, v in zip(grads, trainable_variables)
                     if _tf_variable(v).ref() not in self._ascent_keys]
            keys = {_tf_variable(v).ref() for _, v in pairs}
            missing = [v.name for v in self._descent if v.ref() not in keys]
            if missing:
                raise ValueError(
                    f"{self.name}: the variables lack the loss's descent auxiliaries "
                    f"{missing}. Fix: apply_gradients(zip(grads, variables)) with variables = "
                    "[*model.trainable_variables, *loss_fn.trainable_variables].")
            grads, trainable_variables = [g for g, _ in pairs], [v for _, v in pairs]
        rates = self._rates()  # this step's, before apply() counts it
        super().apply(grads, trainable_variables)
        definition = self.rule.loss_definition
        aux = definition.params_type(**{n: tf.convert_to_tensor(v)
                                        for n, v in self._containers.items()})
        new = self.rule.ascend(aux, rates)
        for name, spec in definition.auxiliaries().items():
            if spec.role == "ascent":
                self._containers[name].assign(getattr(new, name))

    def update_step(self, gradient: Any, variable: Any, learning_rate: Any) -> None:
        index = self._get_variable_index(variable)
        entry = self._slot_variables[index]
        rule = self.rule
        if _in_place_clipped(rule):
            _clipped_step(self, rule, gradient, variable, learning_rate, entry)
            return
        slots = rule.slots_type(**{n: tf.convert_to_tensor(v) for n, v in entry.items()})
        rates = self._rates()._replace(lr=learning_rate)
        new_value, new_slots = rule.update_param(
            tf.convert_to_tensor(gradient), tf.convert_to_tensor(variable), slots, rates,
            auxiliary=self._var_key(variable) in self._auxiliary_keys)
        self.assign(variable, new_value)
        for name, slot in entry.items():
            self.assign(slot, getattr(new_slots, name))

    # -- LibAUC's schedule hooks ------------------------------------------------------------
    def update_lr(self, decay_factor: float) -> None:
        """Divide the learning rate(s) by ``decay_factor``."""
        factor = check_interval(f"{self.name}.update_lr", "decay_factor", decay_factor,
                              low=0.0, low_open=True,
                              fix="pass decay_factor > 0 (10 divides the learning rate by 10)")
        self._lr_divisor.assign(self._lr_divisor * factor)

    def update_regularizer(self, decay_factor: float | None = None) -> None:
        """New epoch-decay stage: each variable's reference point becomes its average iterate
        since the last call; the learning rate(s) are divided by ``decay_factor``."""
        if decay_factor is not None:
            self.update_lr(decay_factor)
        for entry in getattr(self, "_slot_variables", []):
            if "reference" not in entry:
                continue
            slots = self.rule.slots_type(**{n: tf.convert_to_tensor(v)
                                            for n, v in entry.items()})
            new = reset_reference(slots)
            for name, slot in entry.items():
                slot.assign(getattr(new, name))

    def get_config(self) -> dict[str, Any]:
        """The constructor's hyper-parameters (a min-max optimizer's loss is not included:
        pass ``loss_fn`` again when rebuilding it)."""
        base = super().get_config()
        config = {n: v for n, v in self.rule.config().items()
                  if n not in ("learning_rate", "loss_fn")}
        return {"learning_rate": base["learning_rate"], **config}

    def __repr__(self) -> str:
        return f"xrisk.tensorflow.{self.rule!r}"


def _in_place_clipped(rule: UpdateRule) -> bool:
    """Whether ``rule`` runs :class:`ClippedRule`'s own arithmetic (its presets, PESG, MIDAM),
    which :func:`_clipped_step` mirrors in place."""
    kind = type(rule)
    return (isinstance(rule, ClippedRule) and kind.update_param is ClippedRule.update_param
            and getattr(kind, "_direction", None) is ClippedRule._direction
            and kind.rates is UpdateRule.rates)


def _store(optimizer: XRiskOptimizer, slot: Any, value: tf.Tensor) -> tf.Tensor:
    """Assign ``value`` to ``slot`` and return the slot read back: the assignment is then the
    value's last user, so TensorFlow adopts its buffer instead of copying it (a value still
    used after its assignment is copied into the slot: one more pass over it)."""
    optimizer.assign(slot, value)
    return tf.convert_to_tensor(slot)


def _scale_and_add(optimizer: XRiskOptimizer, slot: Any, factor: float,
                   addend: tf.Tensor) -> tf.Tensor:
    """``slot ← factor·slot + addend`` (two roundings, the rule's), returned read back: the
    product is assigned, then ``addend`` added in place (``assign_add``). Eagerly this
    allocates one full-size tensor fewer than ``factor·slot + addend`` assigned (whose sum
    is a third, copied into the slot); in a graph it is no more work (the slot takes over
    the product's buffer). ``a + b`` is ``b + a`` bit for bit."""
    optimizer.assign(slot, factor * tf.convert_to_tensor(slot))
    optimizer.assign_add(slot, addend)
    return tf.convert_to_tensor(slot)


def _fusable(rule: Any) -> bool:
    """Whether TensorFlow's fused training kernels compute the update of ``rule`` after its
    direction: Adam (``ResourceApplyAdam``, with AMSGrad ``ResourceApplyAdamWithAmsgrad``)
    and momentum SGD but Nesterov's (``ResourceApplyMomentum``; its Nesterov step weighs
    the buffer otherwise than the rules' on the first step and with dampening)."""
    return rule.mode == "adam" or (rule.momentum > 0 and not rule.nesterov)


def _fused_update(rule: Any, direction: tf.Tensor, variable: Any, lr: tf.Tensor,
                  slots: dict[str, Any], count: tf.Tensor) -> None:
    """The update of :func:`_clipped_step` after its direction ``d``, float32, as one fused
    kernel over the variable and its slots (one pass where the rule's operations make 6 to
    13, each a new tensor that TensorFlow's CPU allocator maps and faults in afresh).

    Adam: TensorFlow's kernel steps ``θ - lr·√(1-β₂ᵗ)/(1-β₁ᵗ) · m / (√v + ε̂)``, the rule's
    ``(lr/b₁)·m / (√v/√b₂ + ε)`` with ``ε̂ = ε·√b₂``; its moments ``m + (d - m)(1 - β)``
    are the rule's ``β·m + (1 - β)·d`` in other roundings, with ``1 - β`` computed in
    float32 from the float32 β (β₂ = 0.999: 0.00099998713, 1.3e-5 off 0.001; its bias
    correction ``1 - β₂ᵗ`` is of the same β, so the kernel is Adam with β rounded to
    float32). SGD: ``buf ← μ̂·buf + ŵ·d``, ``θ ← θ - lr·buf`` with, on the first step
    (count 0), ``μ̂ = 0, ŵ = 1`` (the buffer becomes ``d``), else the heavy ball's
    ``μ, 1 - dampening`` or the EMA's ``1 - μ, μ``. float32 agrees with the rule to 1e-4
    relative (tests/test_optim_keras.py; the torch optimizers' fused kernels to 1e-5),
    float64 never comes here."""
    handle = _tf_variable(variable).handle
    if rule.mode == "adam":
        beta1, beta2 = rule.betas
        t = tf.cast(count + 1, tf.float32)
        beta1_power, beta2_power = tf.pow(beta1, t), tf.pow(beta2, t)
        common = dict(var=handle, m=_tf_variable(slots["momentum"]).handle,
                      v=_tf_variable(slots["second_moment"]).handle, beta1_power=beta1_power,
                      beta2_power=beta2_power, lr=lr, beta1=tf.constant(beta1, tf.float32),
                      beta2=tf.constant(beta2, tf.float32),
                      epsilon=rule.eps * tf.sqrt(1 - beta2_power), grad=direction)
        if rule.amsgrad:
            tf.raw_ops.ResourceApplyAdamWithAmsgrad(
                vhat=_tf_variable(slots["max_second_moment"]).handle, **common)
        else:
            tf.raw_ops.ResourceApplyAdam(**common)
        return
    momentum, weight = ((1 - rule.momentum, rule.momentum) if rule.sgd_rule == "ema"
                        else (rule.momentum, 1 - rule.dampening))
    first = tf.equal(count, 0)
    grad = direction if weight == 1 else direction * tf.where(first, 1.0, weight)
    tf.raw_ops.ResourceApplyMomentum(
        var=handle, accum=_tf_variable(slots["momentum"]).handle, lr=lr, grad=grad,
        momentum=tf.where(first, 0.0, momentum), use_nesterov=False)


def _clipped_step(optimizer: XRiskOptimizer, rule: Any, gradient: Any, variable: Any,
                  learning_rate: Any, slots: dict[str, Any]) -> None:
    """:meth:`ClippedRule.update_param` on Keras variables, updated in place, bit for bit.

    The same operations on the same values in the same order, less the work that changes
    no bit: the clip is one ``ClipByValue`` kernel (``min(max(g, -c), c)`` for ``c > 0``,
    NaN kept) and none at ``c = inf``; ``(1 - dampening)·d`` is ``d`` at dampening 0; SGD's
    first step picks its buffer with ``tf.cond`` (one branch runs) instead of a select of
    both; and where the rule computes ``x - y`` or ``x + y`` into a slot or the variable
    (θ - step, the iterate sum, the counters, an Adam moment's β·m + (1-β)·d and the SGD
    buffer's μ·b + (1-dampening)·d once the slot holds the product: :func:`_scale_and_add`),
    ``assign_sub`` / ``assign_add`` write it in place
    instead of a new tensor assigned over the old; a new slot value is read back from its
    slot (:func:`_store`), so it is never copied. ``x·y`` stays two roundings where the
    rule has them: TensorFlow has no fused multiply-add to change them. float32 variables
    take the direction so and then TensorFlow's fused kernel for the update
    (:func:`_fused_update`): float32 within the design's tolerance, not bit for bit.
    """
    value = _tf_variable(variable)
    dtype = tf.float64 if value.dtype == tf.float64 else tf.float32
    g = tf.convert_to_tensor(gradient)
    g = g if g.dtype == dtype else tf.cast(g, dtype)
    lr = tf.cast(learning_rate, dtype)
    decoupled = rule.decoupled_weight_decay and rule.weight_decay > 0
    # float32 variables: the update after the direction by a fused kernel (_fused_update)
    fused = dtype == tf.float32 and value.dtype == tf.float32 and _fusable(rule)
    # θ - step in place where θ is in the compute dtype; a read of θ still held at the
    # assign_sub would make TensorFlow copy the whole variable first, so θ is read only
    # where the rule uses it.
    in_place = value.dtype == dtype and not decoupled
    p: Any = None
    if not in_place or rule.epoch_decay > 0 or rule.weight_decay > 0:
        p = tf.convert_to_tensor(value)
        p = p if p.dtype == dtype else tf.cast(p, dtype)
    if decoupled:
        p = p * (1 - lr * rule.weight_decay)
        if fused:  # the kernel steps the variable: it holds θ·(1 - lr·λ) first
            p = _store(optimizer, variable, p)
    d = g
    if rule.clip_value != float("inf"):
        clip = tf.constant(rule.clip_value, dtype)
        d = tf.raw_ops.ClipByValue(t=g, clip_value_min=-clip, clip_value_max=clip)
    if rule.epoch_decay > 0:
        d = d + rule.epoch_decay * (p - tf.convert_to_tensor(slots["reference"]))
    if rule.weight_decay > 0 and not rule.decoupled_weight_decay:
        d = d + rule.weight_decay * p
    count = slots["count"]
    if fused:
        del p  # no read of θ held at the kernel (TensorFlow would copy θ for it)
        _fused_update(rule, d, variable, lr, slots, tf.convert_to_tensor(count))
        _count_step(optimizer, rule, slots, value, dtype)
        return
    if rule.mode == "adam":
        beta1, beta2 = rule.betas
        moment = _scale_and_add(optimizer, slots["momentum"], beta1, (1 - beta1) * d)
        second = _scale_and_add(optimizer, slots["second_moment"], beta2,
                                (1 - beta2) * d * d)
        if rule.amsgrad:
            second = _store(optimizer, slots["max_second_moment"], tf.maximum(
                tf.convert_to_tensor(slots["max_second_moment"]), second))
        t = tf.cast(tf.convert_to_tensor(count) + 1, dtype)
        bias1 = 1 - tf.pow(tf.constant(beta1, dtype), t)
        root2 = tf.sqrt(1 - tf.pow(tf.constant(beta2, dtype), t))
        step = (lr / bias1) * moment / (tf.sqrt(second) / root2 + rule.eps)
    elif rule.momentum > 0:
        if rule.sgd_rule == "ema":  # (1 - μ)·buffer + μ·d
            factor, addend = 1 - rule.momentum, lambda: rule.momentum * d
        elif rule.dampening == 0:  # μ·buffer + d: (1 - 0)·d is d, bit for bit
            factor, addend = rule.momentum, lambda: d
        else:  # μ·buffer + (1 - dampening)·d
            factor, addend = rule.momentum, lambda: (1 - rule.dampening) * d

        def later() -> None:
            _scale_and_add(optimizer, slots["momentum"], factor, addend())

        # The first step's buffer is d: a branch, each side assigning its own value (the
        # assignment of a value made inside the branch adopts its buffer; the cond's output
        # would be copied into the slot).
        tf.cond(tf.convert_to_tensor(count) == 0,
                lambda: optimizer.assign(slots["momentum"], d), later)
        buffer = tf.convert_to_tensor(slots["momentum"])
        step = lr * (d + rule.momentum * buffer if rule.nesterov else buffer)
    else:
        step = lr * d
    new: Any = value  # θ after the step (the variable, read back for the iterate sum)
    if in_place:
        optimizer.assign_sub(variable, step)
    else:
        new = tf.cast(p - step, value.dtype)
        optimizer.assign(variable, new)
    _count_step(optimizer, rule, slots, new, dtype)


def _count_step(optimizer: XRiskOptimizer, rule: Any, slots: dict[str, Any], new: Any,
                dtype: tf.DType) -> None:
    """The end of :func:`_clipped_step`: the step's count and, with an epoch decay, the
    iterate sum of ``new`` (θ after the step: the variable or its new value) in ``dtype``
    and its count."""
    optimizer.assign_add(slots["count"], tf.constant(1, tf.int32))
    if rule.epoch_decay > 0:
        new = tf.convert_to_tensor(new)
        optimizer.assign_add(slots["iterate_sum"], new if new.dtype == dtype
                             else tf.cast(new, dtype))
        optimizer.assign_add(slots["average_count"], tf.constant(1, tf.int32))


# --- generated by tools/generate_adapters.py: edit the core (or a docstring), run it ---

class SOAP(XRiskOptimizer):
    """Optimizer of :class:`xrisk.APLoss` (average precision): clipped Adam by default. As a
    Keras 3 optimizer.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> w = tf.Variable([1.0, -1.0], dtype=tf.float64)
    >>> opt = xr.SOAP(learning_rate=0.1, mode="sgd")
    >>> _ = opt.apply_gradients([(tf.constant([0.5, 3.0], dtype=tf.float64), w)])
    >>> w.numpy().round(6).tolist()  # the gradient 3.0 is clipped to 1.0
    [0.949999, -1.099999]
    """

    rule_type = xrisk.SOAP

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 1e-05,
                 epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                 dampening: float = 0.1, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-08, amsgrad: bool = False) -> None:
        rule = xrisk.SOAP(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class SOPA(XRiskOptimizer):
    """Optimizer of the one-way partial AUC by CVaR (pAUC_CVaR). As a Keras 3 optimizer."""

    rule_type = xrisk.SOPA

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 0.0,
                 epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                 dampening: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-08, amsgrad: bool = False) -> None:
        rule = xrisk.SOPA(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class SOPAs(XRiskOptimizer):
    """Optimizer of the one-way partial AUC by KL-DRO (pAUC_DRO); clips at 2. As a Keras 3
    optimizer."""

    rule_type = xrisk.SOPAs

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 mode: str = "adam", clip_value: float = 2.0, weight_decay: float = 1e-05,
                 epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                 dampening: float = 0.1, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-08, amsgrad: bool = False) -> None:
        rule = xrisk.SOPAs(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class SOTAs(XRiskOptimizer):
    """Optimizer of the two-way partial AUC by KL (tpAUC_KL). As a Keras 3 optimizer."""

    rule_type = xrisk.SOTAs

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 0.0,
                 epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                 dampening: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-08, amsgrad: bool = False) -> None:
        rule = xrisk.SOTAs(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class STACO(XRiskOptimizer):
    """Optimizer of the two-way partial AUC by double CVaR (tpAUC_CVaR). As a Keras 3
    optimizer."""

    rule_type = xrisk.STACO

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 0.0,
                 epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                 dampening: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-08, amsgrad: bool = False) -> None:
        rule = xrisk.STACO(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class SONG(XRiskOptimizer):
    """Optimizer of NDCG (SONG, K-SONG) and listwise CE: clipped momentum SGD by default. As a
    Keras 3 optimizer."""

    rule_type = xrisk.SONG

    def __init__(self, params: Params = None, *, learning_rate: LearningRate, mode: str = "sgd",
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.SONG(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class SGD(XRiskOptimizer):
    """LibAUC's SGD: torch's momentum SGD on the clipped direction, with epoch decay. As a
    Keras 3 optimizer."""

    rule_type = xrisk.SGD

    def __init__(self, params: Params = None, *, learning_rate: LearningRate,
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 momentum: float = 0.0, nesterov: bool = False, dampening: float = 0.0) -> None:
        rule = xrisk.SGD(learning_rate=learning_rate, clip_value=clip_value,
                         weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                         nesterov=nesterov, dampening=dampening)
        super().__init__(rule, params)


class Adam(XRiskOptimizer):
    """LibAUC's Adam: Adam on the clipped direction (coupled L2), with epoch decay. As a Keras
    3 optimizer."""

    rule_type = xrisk.Adam

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.Adam(learning_rate=learning_rate, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        super().__init__(rule, params)


class AdamW(XRiskOptimizer):
    """LibAUC's AdamW: decoupled weight decay θ ← θ(1 - lr·weight_decay), then Adam on the
    clipped direction (clip 10 by default), with epoch decay. As a Keras 3 optimizer."""

    rule_type = xrisk.AdamW

    def __init__(self, params: Params = None, *, learning_rate: LearningRate = 0.001,
                 clip_value: float = 10.0, weight_decay: float = 0.01, epoch_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.AdamW(learning_rate=learning_rate, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        super().__init__(rule, params)


class LARS(XRiskOptimizer):
    """Layer-wise adaptive rate scaling (LARS) with momentum, the optimizer of the contrastive
    losses. As a Keras 3 optimizer.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> w = tf.Variable([[3.0, 4.0]], dtype=tf.float64)
    >>> opt = xr.LARS(learning_rate=1.0, weight_decay=0.0, momentum=0.0,
    ...               trust_coefficient=0.1)
    >>> _ = opt.apply_gradients([(tf.constant([[0.0, 2.0]], dtype=tf.float64), w)])
    >>> w.numpy().tolist()  # the step's norm is 0.1 * |w| = 0.5
    [[3.0, 3.5]]
    """

    rule_type = xrisk.LARS

    def __init__(self, params: Params = None, *, learning_rate: LearningRate,
                 weight_decay: float = 0.0, momentum: float = 0.9, trust_coefficient: float = 0.001,
                 exclude_1d: bool = True) -> None:
        rule = xrisk.LARS(learning_rate=learning_rate, weight_decay=weight_decay, momentum=momentum,
                          trust_coefficient=trust_coefficient, exclude_1d=exclude_1d)
        super().__init__(rule, params)


class MIDAM(XRiskOptimizer):
    """Momentum descent-ascent for the multi-instance AUC losses (MIDAM). As a Keras 3
    optimizer.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> w = tf.Variable([0.5, -0.5])
    >>> loss_fn = xr.MIDAM_softmax_pooling_loss(num_samples=4)
    >>> opt = xr.MIDAM(loss_fn=loss_fn, learning_rate=0.1)
    >>> variables = [w, *loss_fn.trainable_variables]  # the loss's a, b, alpha included
    >>> x = tf.random.normal((2, 3, 2))  # 2 bags, 3 instances each, 2 features
    >>> with tf.GradientTape() as tape:
    ...     loss = loss_fn(tf.linalg.matvec(x, w), tf.constant([1, 0]), tf.constant([0, 3]))
    >>> _ = opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    >>> float(loss_fn.alpha) > 0  # alpha took the ascent step, not its gradient
    True
    """

    rule_type = xrisk.MIDAM

    def __init__(self, params: Params = None, loss_fn: Loss = None, *, learning_rate: LearningRate,
                 momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        rule = xrisk.MIDAM(loss_fn, learning_rate=learning_rate, momentum=momentum,
                           weight_decay=weight_decay)
        super().__init__(rule, params, loss_fn)


class PDSCA(XRiskOptimizer):
    """Primal-dual stochastic compositional adaptive method for :class:`CompositionalAUCLoss`.
    As a Keras 3 optimizer."""

    rule_type = xrisk.PDSCA

    def __init__(self, params: Params = None, loss_fn: Loss = None, *,
                 learning_rate: LearningRate = 0.1, ce_learning_rate: LearningRate | None = None,
                 beta1: float = 0.99, beta2: float = 0.999, clip_value: float = 1.0,
                 weight_decay: float = 1e-05, epoch_decay: float = 0.002) -> None:
        rule = xrisk.PDSCA(loss_fn, learning_rate=learning_rate, ce_learning_rate=ce_learning_rate,
                           beta1=beta1, beta2=beta2, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay)
        super().__init__(rule, params, loss_fn)


class PESG(XRiskOptimizer):
    """Proximal epoch stochastic gradient descent-ascent (PESG) for min-max losses. As a Keras
    3 optimizer.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> w = tf.Variable([0.5, -0.5])
    >>> loss_fn = xr.AUCMLoss()
    >>> opt = xr.PESG(loss_fn=loss_fn, learning_rate=0.1)
    >>> variables = [w, *loss_fn.trainable_variables]  # the loss's a, b, alpha included
    >>> with tf.GradientTape() as tape:
    ...     scores = tf.sigmoid(tf.constant([[1.0, 2.0], [2.0, 1.0]]) @ w[:, None])[:, 0]
    ...     loss = loss_fn(scores, tf.constant([1, 0]))
    >>> _ = opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    >>> float(loss_fn.alpha) > 0  # alpha took the ascent step, not its gradient
    True
    """

    rule_type = xrisk.PESG

    def __init__(self, params: Params = None, loss_fn: Loss = None, *,
                 learning_rate: LearningRate = 0.1, mode: str = "sgd", clip_value: float = 1.0,
                 weight_decay: float = 1e-05, epoch_decay: float = 0.002, momentum: float = 0.9,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                 amsgrad: bool = False) -> None:
        rule = xrisk.PESG(loss_fn, learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          betas=betas, eps=eps, amsgrad=amsgrad)
        super().__init__(rule, params, loss_fn)


# --- end of the generated classes ---


