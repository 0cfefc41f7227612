r"""The update rules of the optimizers, as pure per-parameter functions on arrays.

Every optimizer is an :class:`UpdateRule`: frozen, validated hyper-parameters and three pure
functions the adapters call —

- :meth:`~UpdateRule.init_slots` ``(param) -> slots``: the per-parameter state (a NamedTuple;
  ``None`` for the buffers the hyper-parameters do not use);
- :meth:`~UpdateRule.update_param` ``(grad, param, slots, rates) -> (new_param, new_slots)``;
- :meth:`~UpdateRule.ascend` ``(aux, rates) -> aux``: the projected ascent of a min-max loss's
  ``ascent`` auxiliaries (PESG, PDSCA), read from the loss's declarations, never by name.

:class:`Rates` carries what one step shares across parameters (learning rates, PDSCA's
phase), so torch can take them from its parameter groups, Keras from its learning-rate
variable or schedule and JAX from its state. :meth:`UpdateRule.init` /
:meth:`UpdateRule.update` run a whole list of parameters with an :class:`OptimizerState`
(the JAX adapter and the numpy examples use them).

Arithmetic runs in a safe *compute dtype* per parameter — float64 for float64 parameters,
float32 otherwise — and the slots are stored in it, so bfloat16/float16 parameters train like
``torch.optim.Adam`` on float32 master values rounded once per step (a bias correction
``1 - 0.999**t`` or an ``eps`` of 1e-8 never rounds to 0). Counters are int32 arrays: jit-safe,
no Python branching on array values.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from .._arguments import check_choice, check_flag, real_number
from .._arguments import check_interval as check_number
from .._config import Configured
from .._registry import register
from .._typing import Array, compute_dtype, in_dtype
from ..backends import backend_of

__all__ = [
    "OPTIMIZERS",
    "Rates",
    "SlotSpec",
    "OptimizerState",
    "UpdateRule",
    "ClippedRule",
    "ClippedSlots",
    "ascent_step",
    "reset_reference",
    "update_lr",
    "update_regularizer",
]

#: A learning rate: a number, or a schedule (a callable of the step count, e.g. an optax or
#: Keras schedule).
LearningRate = float | Callable[[Any], Any]


# --------------------------------------------------------------------------- validation
# The scalar checks are xrisk._arguments' (check_number is its check_interval); these two
# are the optimizers' own.

def check_learning_rate(owner: str, name: str, value: object) -> LearningRate:
    """A learning rate: a finite number >= 0 (kept exactly as given) or a schedule."""
    if callable(value):
        return value  # a schedule: a callable of the step count
    fix = (f"pass {name} >= 0 as a number, or a schedule (a callable of the step count, "
           "e.g. optax.exponential_decay(...))")
    return check_number(owner, name, value, low=0.0, high=math.inf, fix=fix)


def check_betas(owner: str, value: object) -> tuple[float, float]:
    """Adam's ``(beta1, beta2)``, each in [0, 1)."""
    if (not isinstance(value, tuple | list) or len(value) != 2
            or any(real_number(beta) is None or not 0 <= float(beta) < 1 for beta in value)):
        raise ValueError(
            f"{owner}: betas={value!r}; expected two numbers in [0, 1) (decay rates of Adam's "
            "first and second moments). Fix: e.g. betas=(0.9, 0.999)."
        )
    return (check_number(owner, "betas[0]", value[0], low=0.0, high=1.0),
            check_number(owner, "betas[1]", value[1], low=0.0, high=1.0))


def _value_at(rate: LearningRate, step: Array) -> Any:
    return rate(step) if callable(rate) else rate


#: LibAUC's argument names that xrisk spells differently or drops, with the explanation.
FOREIGN_ARGUMENTS: dict[str, str] = {
    "lr": "the learning rate is called learning_rate in xrisk (optax's and Keras's name, the "
          "same in every adapter). Fix: {owner}(..., learning_rate={value!r})",
    "lr0": "PDSCA's learning rate of the cross-entropy phase is called ce_learning_rate. "
           "Fix: PDSCA(..., ce_learning_rate={value!r})",
    "margin": "margin comes from the loss: AUCMLoss(margin=...). Fix: drop margin= here and "
              "build the loss with it (the optimizer reads the loss's ascent direction)",
    "k": "k comes from the loss: CompositionalAUCLoss(k=...). Fix: drop k= here",
    "eta": "SOPA's eta had no effect in LibAUC and is dropped; the dual step size belongs to "
           "the loss. Fix: drop eta= here",
    "device": "the optimizer keeps each buffer on its parameter's device. Fix: drop device=",
    "verbose": "xrisk optimizers print nothing. Fix: drop verbose=",
    "loss_fn": "{owner} takes no loss: its X-risk logic lives in the loss (LibAUC ignored "
               "this argument). Fix: drop loss_fn=",
}


def check_foreign_arguments(owner: str, kwargs: Mapping[str, Any],
                            accepted: Sequence[str]) -> None:
    """Raise TypeError for a LibAUC argument name that ``owner`` does not take, naming ours."""
    for name, value in kwargs.items():
        if name in FOREIGN_ARGUMENTS and name not in accepted:
            explanation = FOREIGN_ARGUMENTS[name].format(owner=owner, value=value)
            raise TypeError(f"{owner}: unexpected argument {name}={value!r} (a LibAUC "
                            f"argument): {explanation}.")


def refuse_foreign_arguments(method: Callable[..., Any], owner: str | None = None
                             ) -> Callable[..., Any]:
    """Wrap a constructor (``__init__`` or ``__new__``) so LibAUC argument names raise the
    explanation of :data:`FOREIGN_ARGUMENTS` before Python's generic "unexpected keyword"
    error. The signature (``inspect.signature``, help, IDEs) stays the wrapped one."""
    accepted = tuple(inspect.signature(method).parameters)

    @functools.wraps(method)
    def guarded(first: Any, *args: Any, **kwargs: Any) -> Any:
        name = owner or (first.__name__ if isinstance(first, type) else type(first).__name__)
        check_foreign_arguments(name, kwargs, accepted)
        return method(first, *args, **kwargs)

    return guarded


# --------------------------------------------------------------------------- containers

class Rates(NamedTuple):
    """What one step shares across parameters.

    Attributes
    ----------
    lr : float or array of shape ()
        Learning rate of the step (of the AUC phase for PDSCA).
    ce_lr : float or array of shape (), or None
        PDSCA: learning rate of the cross-entropy phase.
    ce_phase : bool or array of shape () (bool), or None
        PDSCA: whether this step belongs to the cross-entropy phase.
    """

    lr: Any
    ce_lr: Any = None
    ce_phase: Any = None


class SlotSpec(NamedTuple):
    """How a slot is allocated: ``scalar`` (shape ()) or the parameter's shape; an int32
    counter or a float in the compute dtype; zeros or a copy of the parameter."""

    scalar: bool = False
    integer: bool = False
    copy_param: bool = False


class OptimizerState(NamedTuple):
    r"""State of an :class:`UpdateRule` over a list of parameters (see :meth:`UpdateRule.init`).

    Attributes
    ----------
    step : array of shape () (int32)
        Calls of ``update`` so far (schedules and PDSCA's phase read it).
    lr_divisor : array of shape () (float32, or float64 with float64 parameters)
        Product of the ``decay_factor``\ s of :func:`update_lr` / :func:`update_regularizer`;
        the learning rate of a step is ``learning_rate(step) / lr_divisor`` (0.1 / 10 is
        0.01 exactly, as torch's ``group["lr"] /= 10``), so a decay never recompiles a
        jitted step.
    slots : tuple of NamedTuple
        The slots of each parameter (model parameters first, then the loss's descent
        auxiliaries in declaration order).
    """

    step: Array
    lr_divisor: Array
    slots: tuple[Any, ...]


class ClippedSlots(NamedTuple):
    """Per-parameter state of :class:`ClippedRule` (``None``: unused by the hyper-parameters).

    The two counters are () int32 arrays, or Python ints where the caller keeps them on the
    host (:attr:`UpdateRule.host_counters`).
    """

    count: Array  #: () int32 — updates this parameter took (bias correction, first momentum)
    momentum: Array | None = None  #: SGD buffer or Adam's first moment
    second_moment: Array | None = None  #: Adam's second moment
    max_second_moment: Array | None = None  #: AMSGrad's running maximum
    reference: Array | None = None  #: θ_ref of epoch decay
    iterate_sum: Array | None = None  #: Σθ over the steps since update_regularizer
    average_count: Array | None = None  #: () int32 — those steps (this parameter's own count)


_NAMESPACES: dict[type, Any] = {}


def _namespace(*arrays: Array) -> Any:
    """The array namespace of ``arrays`` (one array's: looked up by its type once, so a step
    under ``torch.compile`` traces a dict lookup instead of the backend detection)."""
    if len(arrays) != 1:
        return backend_of(*arrays).namespace
    kind = type(arrays[0])
    namespace = _NAMESPACES.get(kind)
    if namespace is None:
        namespace = _NAMESPACES[kind] = backend_of(arrays[0]).namespace
    return namespace



def _as_compute(value: Any, dtype: Any, xp: Any) -> Any:
    """A rate in the compute dtype: Python numbers stay exact scalars, arrays are cast."""
    if isinstance(value, int | float):
        return value
    return xp.astype(value, dtype)



def _bias_corrections(count: Any, betas: tuple[float, float], dtype: Any, xp: Any
                      ) -> tuple[Any, Any]:
    """Adam's ``(1 - beta1**t, sqrt(1 - beta2**t))`` at step count ``t``.

    ``count`` is a () int32 array (jit, compiled steps: arrays of ``dtype``) or a Python int,
    a *host counter* (the torch adapter's eager path, see :attr:`UpdateRule.host_counters`):
    Python floats then, computed in float64 and free of tensor ops.
    """
    beta1, beta2 = betas
    if isinstance(count, int):
        return 1 - beta1**count, math.sqrt(1 - beta2**count)
    t = xp.astype(count, dtype)
    bias1 = 1 - xp.pow(xp.full_like(t, beta1), t)
    bias2 = 1 - xp.pow(xp.full_like(t, beta2), t)
    return bias1, xp.sqrt(bias2)


def _select(condition: Any, if_true: Array, if_false: Array, xp: Any) -> Array:
    """``where`` that takes a Python bool too (eager torch: no work for the other branch)."""
    if isinstance(condition, bool):
        return if_true if condition else if_false
    return xp.where(condition, if_true, if_false)


def _branch(condition: Any, if_true: Callable[[], Array], if_false: Callable[[], Array],
            xp: Any) -> Array:
    """:func:`_select` of two lazily computed values: a Python bool computes only its own
    branch (host counters), an array computes both and selects (jit)."""
    if isinstance(condition, bool):
        return if_true() if condition else if_false()
    return xp.where(condition, if_true(), if_false())


def _device(x: Array) -> Any:
    return backend_of(x).device(x)


# --------------------------------------------------------------------------- the base rule

_PARAMETER_DOCS = {
    "loss_fn": ("loss_fn : LossDefinition",
                "The min-max loss this optimizer trains (the adapters take their own loss "
                "object). Its ``descent`` auxiliaries join the parameters; each ``ascent`` one "
                "takes the projected step along the loss's ``ascent_direction``."),
    "learning_rate": ("learning_rate : float or callable",
                      "Step size, >= 0. JAX and TensorFlow also take a schedule: a callable of "
                      "the step count (an optax schedule, a Keras ``LearningRateSchedule``). "
                      "torch takes a number only (kept as ``group['lr']``) and refuses a "
                      "callable: schedule it with ``torch.optim.lr_scheduler``."),
    "ce_learning_rate": ("ce_learning_rate : float, callable or None",
                         "Step size of the cross-entropy phase (LibAUC's ``lr0``); ``None`` "
                         "uses ``learning_rate``. A callable as for ``learning_rate`` (JAX "
                         "and TensorFlow; not torch)."),
    "mode": ("mode : {'sgd', 'adam'}", "Momentum SGD or Adam on the clipped direction d."),
    "clip_value": ("clip_value : float",
                   "Gradients are clipped element-wise to [-clip_value, clip_value] "
                   "(``float('inf')`` disables clipping)."),
    "weight_decay": ("weight_decay : float",
                     "Coupled L2: ``weight_decay * θ`` is added to d (AdamW: decoupled, "
                     "θ ← θ(1 - lr·weight_decay) before the step)."),
    "epoch_decay": ("epoch_decay : float",
                    "Coefficient of ``θ - θ_ref``. θ_ref starts at the initial parameters "
                    "(LibAUC 2.0.1 draws it as N(0, 0.01²) noise from the torch RNG) and "
                    "becomes each parameter's average "
                    "iterate at ``update_regularizer`` (over the steps where it had a "
                    "gradient; a parameter without one keeps its θ_ref)."),
    "momentum": ("momentum : float", "SGD momentum (see Notes); 0 disables it."),
    "nesterov": ("nesterov : bool",
                 "Nesterov momentum, d + momentum·buf (mode 'sgd' with momentum > 0)."),
    "dampening": ("dampening : float", "SGD: buf ← momentum·buf + (1 - dampening)·d."),
    "betas": ("betas : (float, float)", "Adam: decay rates of the first and second moments."),
    "eps": ("eps : float", "Adam: added to the denominator."),
    "amsgrad": ("amsgrad : bool", "Adam: use the running maximum of the second moment."),
    "trust_coefficient": ("trust_coefficient : float",
                          "LARS: the trust ratio is trust_coefficient·‖θ‖/‖d‖ per tensor (> 0)."),
    "exclude_1d": ("exclude_1d : bool",
                   "LARS: vectors and scalars (biases, normalisation scales) take neither "
                   "weight decay nor the trust ratio (LibAUC's, MAE's and SimCLR's rule)."),
    "beta1": ("beta1 : float",
              "Weight average of the cross-entropy phase, wbuf ← (1 - beta1)·wbuf + beta1·θ, "
              "θ ← wbuf (0 disables it)."),
    "beta2": ("beta2 : float",
              "Momentum of the AUC phase, buf ← (1 - beta2)·buf + beta2·d (the weight of the "
              "new direction, LibAUC's convention)."),
}


def _format_default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    return f"default {value!r}"


def _rule_doc(cls: type[Configured]) -> str:
    """The class's own text with a numpydoc Parameters section built from its signature."""
    text = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
    # The Parameters section goes before the first of Notes / References / Examples.
    match = re.search(r"\n(Notes|References|Examples)\n-{3,}", text)
    head, rest = (text[:match.start()], text[match.start():]) if match else (text, "")
    lines = ["Parameters", "----------"]
    for name, parameter in inspect.signature(vars(cls)["__init__"]).parameters.items():
        if name == "self":
            continue
        entry, body = _PARAMETER_DOCS[name]
        lines.append(f"{entry}, {_format_default(parameter.default)}"
                     if name != "loss_fn" else entry)
        lines.append(textwrap.fill(body, 92, initial_indent="    ", subsequent_indent="    "))
    section = "\n".join(lines)
    return f"{head.rstrip()}\n\n{section}\n{rest.rstrip()}\n"


#: Every optimizer rule, by public class name (LibAUC's names), in the order of definition
#: (filled by :meth:`UpdateRule.__init_subclass__`, see :mod:`xrisk._registry`).
OPTIMIZERS: dict[str, type[UpdateRule]] = {}


class UpdateRule(Configured):
    """Base of every optimizer rule; see the module docstring for the protocol. A public
    subclass enters :data:`OPTIMIZERS` as it is defined."""

    #: The NamedTuple of one parameter's slots.
    slots_type: ClassVar[type] = ClippedSlots
    #: Whether :meth:`update_param` also takes its integer scalar slots (the counters) as
    #: Python ints (and PDSCA's phase as a Python bool) and returns them as Python ints. The
    #: torch adapter then keeps them on the host in eager mode and updates a group's
    #: parameters as one flat vector, tile by tile, with Adam's bias corrections as Python
    #: floats (no tensor op, no device read); so such a rule must be element-wise.
    host_counters: ClassVar[bool] = False
    learning_rate: LearningRate

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(OPTIMIZERS, cls)
        if "__init__" in cls.__dict__:
            cls.__init__ = refuse_foreign_arguments(cls.__init__)  # type: ignore[method-assign]
            cls.__doc__ = _rule_doc(cls)

    # -- declarations -------------------------------------------------------------------
    def slot_specs(self) -> dict[str, SlotSpec]:
        """The slots this configuration uses, by field of :attr:`slots_type`."""
        raise NotImplementedError

    @property
    def loss_definition(self) -> Any:
        """The loss whose auxiliaries the rule updates (``None`` for plain rules)."""
        return getattr(self, "loss_fn", None)

    # -- per-parameter pure functions ---------------------------------------------------
    def init_slots(self, param: Array) -> Any:
        """The initial slots of ``param`` (same library and device; compute dtype)."""
        xp = _namespace(param)
        dtype, device = compute_dtype(param, xp), _device(param)
        values: dict[str, Array] = {}
        for name, spec in self.slot_specs().items():
            if spec.copy_param:
                values[name] = xp.astype(param, dtype, copy=True)
            else:
                kind = xp.int32 if spec.integer else dtype
                shape = () if spec.scalar else tuple(param.shape)
                values[name] = (xp.zeros(shape, dtype=kind) if device is None
                                else xp.zeros(shape, dtype=kind, device=device))
        return self.slots_type(**values)

    def rates(self, step: Any, *, lr: Any, ce_lr: Any = None) -> Rates:
        """The :class:`Rates` of step number ``step`` (0-based) with learning rate ``lr``."""
        return Rates(lr=lr)

    def scheduled_rates(self, step: Array, lr_divisor: Array) -> Rates:
        """Rates from the configured learning rate(s) at ``step``, over ``lr_divisor``."""
        return self.rates(step, lr=_value_at(self.learning_rate, step) / lr_divisor)

    def update_param(self, grad: Array, param: Array, slots: Any, rates: Rates, *,
                     auxiliary: bool = False) -> tuple[Array, Any]:
        """Return ``(new_param, new_slots)`` (``new_param`` in ``param``'s dtype).

        ``auxiliary`` marks a loss's descent auxiliary (PDSCA leaves those alone in its
        cross-entropy phase).
        """
        raise NotImplementedError

    def ascend(self, aux: Any, rates: Rates) -> Any:
        """The loss's auxiliaries (a ``params_type`` NamedTuple) after the ascent step; the
        descent ones must already hold this step's new values (LibAUC's order)."""
        return aux

    # -- lists of parameters (JAX adapter, numpy) ----------------------------------------
    def _descent_names(self) -> list[str]:
        definition = self.loss_definition
        if definition is None:
            return []
        return [name for name, aux in definition.auxiliaries().items() if aux.role == "descent"]

    def init(self, params: Sequence[Array], aux: Any = None) -> OptimizerState:
        """State for ``params`` (and the descent fields of ``aux``, the loss's auxiliaries)."""
        values = [*params, *(getattr(aux, n) for n in self._descent_names() if aux is not None)]
        if not values:
            raise ValueError(f"{self.name}: got no parameter; expected at least one array. "
                             "Fix: pass the model's parameters.")
        xp = _namespace(*values)
        dtype = (xp.float64 if any(v.dtype == xp.float64 for v in values) else xp.float32)
        device = _device(values[0])
        options = {"dtype": dtype} if device is None else {"dtype": dtype, "device": device}
        counter = {"dtype": xp.int32} if device is None else {"dtype": xp.int32,
                                                              "device": device}
        return OptimizerState(step=xp.zeros((), **counter), lr_divisor=xp.ones_like(
            xp.zeros((), **options)), slots=tuple(self.init_slots(v) for v in values))

    def update(self, grads: Sequence[Array | None], state: OptimizerState,
               params: Sequence[Array], aux: Any = None, aux_grads: Any = None
               ) -> tuple[list[Array], Any, OptimizerState]:
        """One step: ``(new_params, new_aux, new_state)``.

        ``grads`` aligns with ``params``; a ``None`` gradient leaves that parameter and its
        slots unchanged (torch's rule). ``aux`` / ``aux_grads`` are the loss's auxiliaries and
        their gradients (``params_type`` NamedTuples; loss-aware rules only).
        """
        if len(grads) != len(params):
            raise ValueError(
                f"{self.name}: {len(grads)} gradients for {len(params)} parameters; expected "
                "one gradient (or None) per parameter, in the same order."
            )
        if (aux is None) != (self.loss_definition is None):
            expected = ("None (this rule trains no loss auxiliaries)"
                        if self.loss_definition is None else
                        f"the loss's auxiliaries ({self.loss_definition.name}.init_params())")
            raise ValueError(f"{self.name}: aux={aux!r}; expected {expected}. Fix: pass "
                             "aux only to the rules built with a loss (PESG, PDSCA).")
        names = self._descent_names() if aux is not None else []
        values = [*params, *(getattr(aux, n) for n in names)]
        gradients = [*grads, *(getattr(aux_grads, n) for n in names)]
        if len(state.slots) != len(values):
            raise ValueError(
                f"{self.name}: the state holds {len(state.slots)} parameters' slots; got "
                f"{len(values)} parameters. Fix: call init() with the same parameters."
            )
        rates = self.scheduled_rates(state.step, state.lr_divisor)
        new_values, new_slots = [], []
        for position, (grad, value, slots) in enumerate(zip(gradients, values, state.slots)):
            if grad is None:
                new_values.append(value)
                new_slots.append(slots)
                continue
            new_value, slots = self.update_param(grad, value, slots, rates,
                                                 auxiliary=position >= len(params))
            new_values.append(new_value)
            new_slots.append(slots)
        new_aux = aux
        if aux is not None:
            new_aux = self.ascend(
                aux._replace(**dict(zip(names, new_values[len(params):]))), rates)
        new_state = OptimizerState(step=state.step + 1, lr_divisor=state.lr_divisor,
                                   slots=tuple(new_slots))
        return new_values[:len(params)], new_aux, new_state


def reset_reference(slots: Any) -> Any:
    """One parameter's new proximal stage: θ_ref ← its average iterate since the last call.

    The average is over the steps where the parameter had a gradient; a parameter without
    any keeps its reference. Slots without epoch decay are returned unchanged.
    """
    reference = getattr(slots, "reference", None)
    if reference is None:
        return slots
    xp = _namespace(reference)
    count = slots.average_count
    safe = xp.maximum(count, xp.ones_like(count))
    average = slots.iterate_sum / xp.astype(safe, reference.dtype)
    return slots._replace(
        reference=xp.where(count > 0, average, reference),
        iterate_sum=xp.zeros_like(slots.iterate_sum),
        average_count=xp.zeros_like(count),
    )


def _check_decay_factor(owner: str, decay_factor: object) -> float:
    return check_number(owner, "decay_factor", decay_factor, low=0.0, low_open=True,
                        fix="pass decay_factor > 0 (e.g. 10 divides the learning rate by 10)")


def update_lr(state: OptimizerState, decay_factor: float) -> OptimizerState:
    """Return ``state`` with its learning rate(s) divided by ``decay_factor`` (> 0)."""
    factor = _check_decay_factor("update_lr", decay_factor)
    return state._replace(lr_divisor=state.lr_divisor * factor)


def update_regularizer(state: OptimizerState, decay_factor: float | None = None
                       ) -> OptimizerState:
    """Start a new proximal stage (:func:`reset_reference` for every parameter).

    Also divides the learning rate(s) by ``decay_factor`` when given. LibAUC's tutorials call
    it at 50 % and 75 % of training with ``decay_factor=10``.
    """
    if decay_factor is not None:
        state = update_lr(state, decay_factor)
    return state._replace(slots=tuple(reset_reference(s) for s in state.slots))


def ascent_step(definition: Any, aux: Any, lr: Any, active: Any = None) -> Any:
    """Projected ascent of ``definition``'s ``ascent`` auxiliaries held in ``aux``.

    ``x ← clip(x + lr·direction, lower, upper)`` with ``direction`` from
    ``definition.ascent_direction(aux)``, computed in the compute dtype and cast back;
    ``active`` (bool or array of shape ()) keeps the old values where false.
    """
    specs = definition.auxiliaries()
    directions = definition.ascent_direction(aux)
    new = {}
    for name, spec in specs.items():
        value = getattr(aux, name)
        if spec.role != "ascent":
            continue
        xp = _namespace(value)
        dtype = compute_dtype(value, xp)
        moved = (in_dtype(value, dtype, xp)
                 + _as_compute(lr, dtype, xp) * in_dtype(directions[name], dtype, xp))
        moved = in_dtype(spec.project(moved, xp), value.dtype, xp)
        new[name] = moved if active is None else _select(active, moved, value, xp)
    return aux._replace(**new)


# --------------------------------------------------------------------------- clipped SGD/Adam

#: A preset's value for an argument it requires (no default), e.g. SONG's learning rate.
REQUIRED: Any = inspect.Parameter.empty


def _preset_init(cls: type[ClippedRule]) -> Callable[..., None]:
    """The constructor of a preset: :class:`ClippedRule`'s keyword arguments with the
    preset's defaults, less its fixed ones, which it passes on."""
    base = inspect.signature(ClippedRule.__init__)
    unknown = sorted((set(cls.preset) | set(cls.fixed)) - (set(base.parameters) - {"self"}))
    if unknown:
        raise TypeError(f"{cls.__name__}: preset or fixed names {unknown}, which are not "
                        f"ClippedRule's arguments {list(base.parameters)[1:]}.")
    signature = base.replace(parameters=[
        parameter.replace(default=cls.preset.get(name, parameter.default))
        for name, parameter in base.parameters.items() if name not in cls.fixed])
    fixed = dict(cls.fixed)

    def __init__(self: ClippedRule, **arguments: Any) -> None:
        try:
            bound = signature.bind(self, **arguments)
        except TypeError as error:  # Python's words, with the class's name
            raise TypeError(f"{type(self).__name__}() {error}") from None
        bound.apply_defaults()
        values = {name: value for name, value in bound.arguments.items() if name != "self"}
        self._configure_clipped(**values, **fixed)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


class ClippedRule(UpdateRule):
    r"""LibAUC's shared clipped SGD/Adam with epoch decay (the update that LibAUC 2.0.1's
    SOAP, SOPA, SOPAs, SOTAs, STACO, SONG, SGD and Adam share).

    For each parameter :math:`\theta` with gradient :math:`g`:

    .. math::

        d = \mathrm{clip}(g, -c, c) + \lambda_{ed}(\theta - \theta_{ref})
            + \lambda_{wd}\,\theta

    then SGD (``buf ← momentum·buf + (1 - dampening)·d``, the first step takes d;
    :math:`\theta \leftarrow \theta - \eta\,buf`, or :math:`d + \mu\,buf` with Nesterov) or
    Adam (:math:`\theta \leftarrow \theta - \frac{\eta}{1-\beta_1^t}\,
    \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}`, t counted per parameter).
    SOAP, SOPA, SOPAs, SOTAs, STACO, SONG, SGD, Adam and AdamW are this rule with LibAUC's
    defaults: each is a *preset*, a subclass that names only the defaults it changes
    (``class SOAP(ClippedRule, preset={"weight_decay": 1e-5, "dampening": 0.1})``) and the
    arguments it fixes (``fixed={"mode": "sgd"}``: SGD takes no ``mode``); its constructor and
    signature are built from this class's. PESG and MIDAM use the rule with their own
    constructors (PESG with an EMA momentum).
    """

    #: "heavy_ball" (torch's SGD momentum) or "ema" (PESG: buf ← (1-μ)·buf + μ·d).
    sgd_rule: ClassVar[str] = "heavy_ball"
    #: AdamW: decoupled weight decay θ ← θ(1 - lr·wd) instead of the L2 term in d.
    decoupled_weight_decay: ClassVar[bool] = False
    host_counters = True
    #: A preset's defaults that differ from this class's (:data:`REQUIRED`: no default) ...
    preset: ClassVar[Mapping[str, Any]] = {}
    #: ... and the arguments it fixes (left out of its signature).
    fixed: ClassVar[Mapping[str, Any]] = {}

    def __init_subclass__(cls, *, preset: Mapping[str, Any] | None = None,
                          fixed: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        if preset is not None or fixed is not None:
            cls.preset, cls.fixed = dict(preset or {}), dict(fixed or {})
            cls.__init__ = _preset_init(cls)  # type: ignore[method-assign]
        super().__init_subclass__(**kwargs)

    def __init__(
        self,
        *,
        learning_rate: LearningRate = 1e-3,
        mode: str = "adam",
        clip_value: float = 1.0,
        weight_decay: float = 0.0,
        epoch_decay: float = 0.0,
        momentum: float = 0.9,
        nesterov: bool = False,
        dampening: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        self._configure_clipped(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                                weight_decay=weight_decay, epoch_decay=epoch_decay,
                                momentum=momentum, nesterov=nesterov, dampening=dampening,
                                betas=betas, eps=eps, amsgrad=amsgrad)

    def _configure_clipped(self, *, learning_rate: Any, mode: Any, clip_value: Any,
                           weight_decay: Any, epoch_decay: Any, momentum: Any, nesterov: Any,
                           dampening: Any, betas: Any, eps: Any, amsgrad: Any) -> None:
        """Validate and set the hyper-parameters (every named rule calls this)."""
        owner = self.name
        self.learning_rate = check_learning_rate(owner, "learning_rate", learning_rate)
        self.mode = check_choice(owner, "mode", mode, ("sgd", "adam"))
        self.clip_value = check_number(owner, "clip_value", clip_value, low=0.0, low_open=True,
                                       high_open=False)
        self.weight_decay = check_number(owner, "weight_decay", weight_decay, low=0.0)
        self.epoch_decay = check_number(owner, "epoch_decay", epoch_decay, low=0.0)
        if self.sgd_rule == "ema":
            self.momentum = check_number(
                owner, "momentum", momentum, low=0.0, high=1.0, high_open=False,
                fix="pass momentum in [0, 1] (the weight of the new direction; 0 disables it)")
        else:
            self.momentum = check_number(owner, "momentum", momentum, low=0.0, high=1.0)
        self.nesterov = check_flag(owner, "nesterov", nesterov)
        self.dampening = check_number(owner, "dampening", dampening, low=0.0, high=1.0,
                                      high_open=False)
        self.betas = check_betas(owner, betas)
        self.eps = check_number(owner, "eps", eps, low=0.0, low_open=True)
        self.amsgrad = check_flag(owner, "amsgrad", amsgrad)
        if self.nesterov and (self.mode != "sgd" or self.momentum == 0):
            raise ValueError(
                f"{owner}: nesterov=True with mode={self.mode!r}, momentum={momentum!r}; "
                "Nesterov momentum needs mode='sgd' and momentum > 0. Fix: pass "
                "mode='sgd' with a momentum, or nesterov=False."
            )
        if self.amsgrad and self.mode != "adam":
            raise ValueError(
                f"{owner}: amsgrad=True with mode={self.mode!r}; AMSGrad is a variant of "
                "Adam. Fix: pass mode='adam', or amsgrad=False."
            )

    def slot_specs(self) -> dict[str, SlotSpec]:
        specs = {"count": SlotSpec(scalar=True, integer=True)}
        if self.mode == "adam" or self.momentum > 0:
            specs["momentum"] = SlotSpec()
        if self.mode == "adam":
            specs["second_moment"] = SlotSpec()
            if self.amsgrad:
                specs["max_second_moment"] = SlotSpec()
        if self.epoch_decay > 0:
            specs.update(reference=SlotSpec(copy_param=True), iterate_sum=SlotSpec(),
                         average_count=SlotSpec(scalar=True, integer=True))
        return specs

    def _direction(self, g: Array, p: Array, reference: Array | None, xp: Any) -> Array:
        d = xp.clip(g, -self.clip_value, self.clip_value)
        if self.epoch_decay > 0:
            d = d + self.epoch_decay * (p - reference)
        if self.weight_decay > 0 and not self.decoupled_weight_decay:
            d = d + self.weight_decay * p
        return d

    def update_param(self, grad: Array, param: Array, slots: Any, rates: Rates, *,
                     auxiliary: bool = False) -> tuple[Array, Any]:
        xp = _namespace(param)
        dtype = compute_dtype(param, xp)
        p, g = in_dtype(param, dtype, xp), in_dtype(grad, dtype, xp)
        lr = _as_compute(rates.lr, dtype, xp)
        if self.decoupled_weight_decay and self.weight_decay > 0:
            p = p * (1 - lr * self.weight_decay)
        d = self._direction(g, p, slots.reference, xp)
        count = slots.count + 1  # an array, or a Python int (host counters)
        new_slots = {"count": count}
        if self.mode == "adam":
            beta1, beta2 = self.betas
            moment = beta1 * slots.momentum + (1 - beta1) * d
            second = beta2 * slots.second_moment + (1 - beta2) * d * d
            new_slots.update(momentum=moment, second_moment=second)
            if self.amsgrad:
                second = xp.maximum(slots.max_second_moment, second)
                new_slots["max_second_moment"] = second
            bias1, root2 = _bias_corrections(count, self.betas, dtype, xp)
            new = p - (lr / bias1) * moment / (xp.sqrt(second) / root2 + self.eps)
        elif self.momentum > 0:
            first = slots.count == 0  # a Python bool with host counters: no work for the other
            if first is True:
                buffer = d
            else:
                if self.sgd_rule == "ema":
                    later = (1 - self.momentum) * slots.momentum + self.momentum * d
                else:
                    later = self.momentum * slots.momentum + (1 - self.dampening) * d
                buffer = _select(first, d, later, xp)
            new_slots["momentum"] = buffer
            new = p - lr * (d + self.momentum * buffer if self.nesterov else buffer)
        else:
            new = p - lr * d
        new_param = in_dtype(new, param.dtype, xp)
        if self.epoch_decay > 0:
            new_slots.update(iterate_sum=slots.iterate_sum + in_dtype(new_param, dtype, xp),
                             average_count=slots.average_count + 1)
        return new_param, slots._replace(**new_slots)
