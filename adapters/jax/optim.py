"""JAX optimizers: optax ``GradientTransformationExtraArgs`` running the core update rules.

Build them without parameters, as optax does — ``xr.SOAP(learning_rate=1e-3)``,
``xr.PESG(loss_fn=loss_fn, learning_rate=0.1)`` — then ``opt_state = opt.init(params)`` and
``updates, opt_state = opt.update(grads, opt_state, params)`` (``params`` is required: weight
and epoch decay read it). ``learning_rate`` is a number or an optax schedule (a callable of
the step count). They compose: ``optax.chain(optax.clip_by_global_norm(1.0), opt)``.

The state keeps the step count and a learning-rate divisor, so LibAUC's schedule hooks
``opt.update_lr(opt_state, decay_factor)`` / ``opt.update_regularizer(opt_state,
decay_factor)`` return a new state without recompiling a jitted step; they also take the
state of a chain (or of any optax wrapper) and update every xrisk state inside it.

A min-max loss's auxiliaries live in the parameter pytree as the node ``loss_fn.init_params()``
returns (e.g. ``{"model": model_params, "loss": loss_fn.init_params()}``); PESG and PDSCA find
that node by the loss definition's ``params_type``, descend on its ``descent`` fields and take
the projected ascent on its ``ascent`` fields (the returned update moves them to their new
values; their gradient is ignored).

>>> import jax.numpy as jnp, optax, xrisk.jax as xr
>>> opt = xr.SOAP(learning_rate=0.1)
>>> chain = optax.chain(optax.clip_by_global_norm(1.0), opt)
>>> params = {"w": jnp.ones(3)}
>>> state = chain.init(params)
>>> updates, state = chain.update({"w": jnp.ones(3)}, state, params)
>>> state = opt.update_regularizer(state, decay_factor=10)  # finds the SOAP state in the chain
>>> round(float(opt.current_learning_rate(state)), 6)
0.01
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias, cast

import jax
import optax

import xrisk
from xrisk.adapter_api import compose_doc, refuse_foreign_arguments
from xrisk.optim import OptimizerState, UpdateRule, update_lr, update_regularizer

__all__ = ["XRiskOptimizer", *xrisk.OPTIMIZERS]

LearningRate: TypeAlias = float | Callable[[Any], Any]
Params: TypeAlias = Any
Loss: TypeAlias = Any


class _Transformation:
    """``init`` / ``update`` of one rule; the optax tuple holds these bound methods."""

    def __init__(self, rule: UpdateRule) -> None:
        self.rule = rule
        definition = rule.loss_definition
        self.node_type = None if definition is None else definition.params_type

    def split(self, tree: Any, what: str) -> tuple[list[Any], Any, int, Any]:
        """Leaves of ``tree`` apart from the loss's auxiliaries node, that node and its place."""
        if self.node_type is None:
            leaves, treedef = jax.tree.flatten(tree)
            return leaves, None, -1, treedef
        node_type = self.node_type
        leaves, treedef = jax.tree.flatten(tree, is_leaf=lambda x: isinstance(x, node_type))
        places = [i for i, leaf in enumerate(leaves) if isinstance(leaf, node_type)]
        if len(places) != 1:
            name = self.rule.name
            raise ValueError(
                f"{name}: the {what} pytree holds {len(places)} {node_type.__name__} nodes; "
                f"expected exactly one, the loss's auxiliaries. Fix: params = {{'model': "
                "model_params, 'loss': loss_fn.init_params()}, with the same structure for "
                "the gradients."
            )
        place = places[0]
        return leaves[:place] + leaves[place + 1:], leaves[place], place, treedef

    def init(self, params: Any) -> OptimizerState:
        leaves, aux, _, _ = self.split(params, "params")
        return self.rule.init(leaves, aux)

    def update(self, updates: Any, state: OptimizerState, params: Any = None,
               **extra_args: Any) -> tuple[Any, OptimizerState]:
        name = self.rule.name
        if params is None:
            raise ValueError(f"{name}: update() needs the current params (weight and epoch "
                             "decay read them). Fix: opt.update(grads, opt_state, params).")
        if not isinstance(state, OptimizerState):
            raise TypeError(f"{name}: opt_state is {type(state).__name__}; expected the "
                            "OptimizerState from opt.init(params).")
        leaves, aux, place, treedef = self.split(params, "params")
        grads, aux_grads, _, grad_treedef = self.split(updates, "gradient")
        if grad_treedef != treedef:
            raise ValueError(f"{name}: the gradients' pytree {grad_treedef} differs from the "
                             f"params' {treedef}. Fix: pass gradients of the same params.")
        new_leaves, new_aux, state = self.rule.update(grads, state, leaves, aux, aux_grads)
        deltas = [new - old for new, old in zip(new_leaves, leaves)]
        if aux is not None:
            deltas.insert(place, jax.tree.map(lambda new, old: new - old, new_aux, aux))
        return jax.tree.unflatten(treedef, deltas), state


def _map_states(opt_state: Any, change: Callable[[OptimizerState], OptimizerState],
                owner: str) -> Any:
    """``opt_state`` with ``change`` applied to every xrisk state inside it (a chain's tuple,
    an optax wrapper's NamedTuple or the state itself)."""
    found = []

    def visit(node: Any) -> Any:
        if isinstance(node, OptimizerState):
            found.append(node)
            return change(node)
        return node

    new = jax.tree.map(visit, opt_state, is_leaf=lambda x: isinstance(x, OptimizerState))
    if not found:
        raise ValueError(f"{owner}: opt_state holds no xrisk optimizer state. Fix: pass the "
                         "state of opt.init(params) (or of an optax.chain holding opt).")
    return new


def _is_nnx_optimizer(value: Any) -> bool:
    """A Flax NNX ``nnx.Optimizer`` (its state in NNX variables, updated in place)."""
    return type(value).__module__.startswith("flax.") and hasattr(value, "opt_state") \
        and hasattr(value, "tx")


def _is_variable(node: Any) -> bool:
    from flax import nnx

    return isinstance(node, nnx.Variable)


def _nnx_state_values(optimizer: Any) -> Any:
    """The values of an ``nnx.Optimizer``'s state variables, as the optax state pytree."""
    return jax.tree.map(lambda v: v.get_value(), optimizer.opt_state, is_leaf=_is_variable)


def _in_nnx_optimizer(optimizer: Any, change: Callable[[Any], Any]) -> Any:
    """Apply ``change`` (a pure map of optax states) to an ``nnx.Optimizer``'s state: its
    variables' values go through ``change`` and the new values are written back in place
    (NNX refuses a new state assigned whole). Returns the optimizer."""
    new = change(_nnx_state_values(optimizer))
    jax.tree.map(lambda variable, value: variable.set_value(value), optimizer.opt_state, new,
                 is_leaf=_is_variable)
    return optimizer


class XRiskOptimizer(optax.GradientTransformationExtraArgs):
    """Base of the JAX optimizers: an optax transformation built on a core
    :class:`xrisk.optim.UpdateRule`; subclasses only fix the constructor (``rule_type`` and
    its signature). See the module docstring."""

    __slots__ = ()
    rule_type: ClassVar[type[UpdateRule]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "rule_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.rule_type)
            cls.__new__ = staticmethod(  # type: ignore[method-assign]
                refuse_foreign_arguments(cls.__new__))

    @classmethod
    def _create(cls, rule: UpdateRule, params: Params = None, loss_fn: Loss = None) -> Any:
        core = _Transformation(rule)
        if params is not None:  # optional here; checked now so a wrong pytree fails early
            core.split(params, "params")
        return optax.GradientTransformationExtraArgs.__new__(cls, core.init, core.update)

    @property
    def rule(self) -> UpdateRule:
        """The core rule (hyper-parameters, pure per-parameter functions)."""
        return self.init.__self__.rule

    def update_lr(self, opt_state: Any, decay_factor: float) -> Any:
        """Return ``opt_state`` with the learning rate(s) divided by ``decay_factor``.

        ``opt_state`` may also be a Flax ``nnx.Optimizer`` holding this transformation: its
        state is updated in place and the optimizer returned.
        """
        if _is_nnx_optimizer(opt_state):
            return _in_nnx_optimizer(opt_state, lambda s: self.update_lr(s, decay_factor))
        return _map_states(opt_state, lambda s: update_lr(s, decay_factor),
                           f"{self.rule.name}.update_lr")

    def update_regularizer(self, opt_state: Any, decay_factor: float | None = None) -> Any:
        """New epoch-decay stage (each parameter's reference point becomes its average iterate
        since the last call); the learning rate(s) are divided by ``decay_factor``.

        ``opt_state`` may also be a Flax ``nnx.Optimizer`` holding this transformation
        (``tx.update_regularizer(optimizer, 10)``): its state is updated in place and the
        optimizer returned.
        """
        if _is_nnx_optimizer(opt_state):
            return _in_nnx_optimizer(
                opt_state, lambda s: self.update_regularizer(s, decay_factor))
        return _map_states(opt_state, lambda s: update_regularizer(s, decay_factor),
                           f"{self.rule.name}.update_regularizer")

    def current_learning_rate(self, opt_state: Any) -> Any:
        """The learning rate of the next step (of the first xrisk state in ``opt_state``, an
        optax state or an ``nnx.Optimizer``)."""
        if _is_nnx_optimizer(opt_state):
            return self.current_learning_rate(_nnx_state_values(opt_state))
        found: list[OptimizerState] = []

        def keep(state: OptimizerState) -> OptimizerState:
            found.append(state)
            return state

        _map_states(opt_state, keep, f"{self.rule.name}.current_learning_rate")
        return self.rule.scheduled_rates(found[0].step, found[0].lr_divisor).lr

    def __repr__(self) -> str:
        return f"xrisk.jax.{self.rule!r}"


class _LARSGlue:
    """JAX's LARS is ``optax.lars`` itself (weight decay and trust ratio masked to the tensors
    of 2 or more axes when ``exclude_1d``): the generated :class:`LARS` derives from this. Its
    state is optax's, which keeps no learning-rate divisor or reference point: schedule the
    learning rate with an optax schedule (``update_lr`` / ``update_regularizer`` raise and
    say so)."""

    __slots__ = ()

    @classmethod
    def _create(cls, rule: UpdateRule, params: Params = None, loss_fn: Loss = None) -> Any:
        lars = cast(xrisk.LARS, rule)
        mask = _matrices if lars.exclude_1d else True
        core = _OptaxRule(lars, optax.lars(
            lars.learning_rate, weight_decay=lars.weight_decay, weight_decay_mask=mask,
            trust_coefficient=lars.trust_coefficient, eps=0.0, trust_ratio_mask=mask,
            momentum=lars.momentum))
        return optax.GradientTransformationExtraArgs.__new__(cls, core.init, core.update)

    def _refuse(self, what: str) -> TypeError:
        return TypeError(
            f"LARS.{what}: the JAX LARS is optax.lars, whose state keeps no learning-rate "
            "divisor or reference point; expected a schedule in the learning rate. Fix: "
            "xr.LARS(learning_rate=optax.cosine_decay_schedule(...), ...).")

    def update_lr(self, opt_state: Any, decay_factor: float) -> Any:
        raise self._refuse("update_lr")

    def update_regularizer(self, opt_state: Any, decay_factor: float | None = None) -> Any:
        raise self._refuse("update_regularizer")

    def current_learning_rate(self, opt_state: Any) -> Any:
        raise self._refuse("current_learning_rate")


# --- generated by tools/generate_adapters.py: edit the core (or a docstring), run it ---

class SOAP(XRiskOptimizer):
    """Optimizer of :class:`xrisk.APLoss` (average precision): clipped Adam by default. As an
    optax ``GradientTransformation``.

    Examples
    --------
    >>> import jax.numpy as jnp, optax, xrisk.jax as xr
    >>> opt = xr.SOAP(learning_rate=0.1, mode="sgd")
    >>> params = {"w": jnp.array([1.0, -1.0])}
    >>> opt_state = opt.init(params)
    >>> updates, opt_state = opt.update({"w": jnp.array([0.5, 3.0])}, opt_state, params)
    >>> [round(float(v), 6) for v in optax.apply_updates(params, updates)["w"]]
    [0.949999, -1.099999]
    """

    rule_type = xrisk.SOAP

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 1e-05,
                epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                dampening: float = 0.1, betas: tuple[float, float] = (0.9, 0.999),
                eps: float = 1e-08, amsgrad: bool = False) -> SOAP:
        rule = xrisk.SOAP(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        return cls._create(rule, params)


class SOPA(XRiskOptimizer):
    """Optimizer of the one-way partial AUC by CVaR (pAUC_CVaR). As an optax
    ``GradientTransformation``."""

    rule_type = xrisk.SOPA

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 0.0,
                epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                dampening: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                eps: float = 1e-08, amsgrad: bool = False) -> SOPA:
        rule = xrisk.SOPA(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        return cls._create(rule, params)


class SOPAs(XRiskOptimizer):
    """Optimizer of the one-way partial AUC by KL-DRO (pAUC_DRO); clips at 2. As an optax
    ``GradientTransformation``."""

    rule_type = xrisk.SOPAs

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                mode: str = "adam", clip_value: float = 2.0, weight_decay: float = 1e-05,
                epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                dampening: float = 0.1, betas: tuple[float, float] = (0.9, 0.999),
                eps: float = 1e-08, amsgrad: bool = False) -> SOPAs:
        rule = xrisk.SOPAs(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        return cls._create(rule, params)


class SOTAs(XRiskOptimizer):
    """Optimizer of the two-way partial AUC by KL (tpAUC_KL). As an optax
    ``GradientTransformation``."""

    rule_type = xrisk.SOTAs

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 0.0,
                epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                dampening: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                eps: float = 1e-08, amsgrad: bool = False) -> SOTAs:
        rule = xrisk.SOTAs(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        return cls._create(rule, params)


class STACO(XRiskOptimizer):
    """Optimizer of the two-way partial AUC by double CVaR (tpAUC_CVaR). As an optax
    ``GradientTransformation``."""

    rule_type = xrisk.STACO

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                mode: str = "adam", clip_value: float = 1.0, weight_decay: float = 0.0,
                epoch_decay: float = 0.0, momentum: float = 0.9, nesterov: bool = False,
                dampening: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                eps: float = 1e-08, amsgrad: bool = False) -> STACO:
        rule = xrisk.STACO(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                           nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        return cls._create(rule, params)


class SONG(XRiskOptimizer):
    """Optimizer of NDCG (SONG, K-SONG) and listwise CE: clipped momentum SGD by default. As an
    optax ``GradientTransformation``."""

    rule_type = xrisk.SONG

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate, mode: str = "sgd",
                clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                momentum: float = 0.9, nesterov: bool = False, dampening: float = 0.0,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                amsgrad: bool = False) -> SONG:
        rule = xrisk.SONG(learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          nesterov=nesterov, dampening=dampening, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        return cls._create(rule, params)


class SGD(XRiskOptimizer):
    """LibAUC's SGD: torch's momentum SGD on the clipped direction, with epoch decay. As an
    optax ``GradientTransformation``."""

    rule_type = xrisk.SGD

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate, clip_value: float = 1.0,
                weight_decay: float = 0.0, epoch_decay: float = 0.0, momentum: float = 0.0,
                nesterov: bool = False, dampening: float = 0.0) -> SGD:
        rule = xrisk.SGD(learning_rate=learning_rate, clip_value=clip_value,
                         weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                         nesterov=nesterov, dampening=dampening)
        return cls._create(rule, params)


class Adam(XRiskOptimizer):
    """LibAUC's Adam: Adam on the clipped direction (coupled L2), with epoch decay. As an optax
    ``GradientTransformation``."""

    rule_type = xrisk.Adam

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                clip_value: float = 1.0, weight_decay: float = 0.0, epoch_decay: float = 0.0,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                amsgrad: bool = False) -> Adam:
        rule = xrisk.Adam(learning_rate=learning_rate, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, betas=betas, eps=eps,
                          amsgrad=amsgrad)
        return cls._create(rule, params)


class AdamW(XRiskOptimizer):
    """LibAUC's AdamW: decoupled weight decay θ ← θ(1 - lr·weight_decay), then Adam on the
    clipped direction (clip 10 by default), with epoch decay. As an optax
    ``GradientTransformation``."""

    rule_type = xrisk.AdamW

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate = 0.001,
                clip_value: float = 10.0, weight_decay: float = 0.01, epoch_decay: float = 0.0,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                amsgrad: bool = False) -> AdamW:
        rule = xrisk.AdamW(learning_rate=learning_rate, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay, betas=betas, eps=eps,
                           amsgrad=amsgrad)
        return cls._create(rule, params)


class LARS(_LARSGlue, XRiskOptimizer):
    """Layer-wise adaptive rate scaling (LARS) with momentum, the optimizer of the contrastive
    losses: ``optax.lars`` itself (weight decay and trust ratio masked to the tensors of 2 or
    more axes when ``exclude_1d``), as an optax ``GradientTransformation``.

    Its state is optax's: schedule the learning rate with an optax schedule
    (``update_lr`` / ``update_regularizer`` raise and say so).

    Examples
    --------
    >>> import jax.numpy as jnp, optax, xrisk.jax as xr
    >>> opt = xr.LARS(learning_rate=1.0, weight_decay=0.0, momentum=0.0,
    ...               trust_coefficient=0.1)
    >>> params = {"w": jnp.array([[3.0, 4.0]]), "b": jnp.array([1.0])}
    >>> opt_state = opt.init(params)
    >>> grads = {"w": jnp.array([[0.0, 2.0]]), "b": jnp.array([0.5])}
    >>> updates, opt_state = opt.update(grads, opt_state, params)
    >>> new = optax.apply_updates(params, updates)
    >>> new["w"].tolist(), new["b"].tolist()  # |step of w| = 0.1 * |w|; b: plain SGD
    ([[3.0, 3.5]], [0.5])
    """

    rule_type = xrisk.LARS

    def __new__(cls, params: Params = None, *, learning_rate: LearningRate,
                weight_decay: float = 0.0, momentum: float = 0.9, trust_coefficient: float = 0.001,
                exclude_1d: bool = True) -> LARS:
        rule = xrisk.LARS(learning_rate=learning_rate, weight_decay=weight_decay, momentum=momentum,
                          trust_coefficient=trust_coefficient, exclude_1d=exclude_1d)
        return cls._create(rule, params)


class MIDAM(XRiskOptimizer):
    """Momentum descent-ascent for the multi-instance AUC losses (MIDAM). As an optax
    ``GradientTransformation``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, optax, xrisk.jax as xr
    >>> loss_fn = xr.MIDAM_softmax_pooling_loss(num_samples=4)
    >>> opt = xr.MIDAM(loss_fn=loss_fn, learning_rate=0.1)
    >>> params = {"w": jnp.zeros(2), "loss": loss_fn.init_params()}  # the AUCMParams node
    >>> opt_state = opt.init(params)
    >>> grads = jax.tree.map(jnp.zeros_like, params)
    >>> updates, opt_state = jax.jit(opt.update)(grads, opt_state, params)
    >>> round(float(optax.apply_updates(params, updates)["loss"].alpha), 6)  # 0.1*2*(1+b-a)
    0.2
    """

    rule_type = xrisk.MIDAM

    def __new__(cls, params: Params = None, loss_fn: Loss = None, *, learning_rate: LearningRate,
                momentum: float = 0.0, weight_decay: float = 0.0) -> MIDAM:
        rule = xrisk.MIDAM(loss_fn, learning_rate=learning_rate, momentum=momentum,
                           weight_decay=weight_decay)
        return cls._create(rule, params, loss_fn)


class PDSCA(XRiskOptimizer):
    """Primal-dual stochastic compositional adaptive method for :class:`CompositionalAUCLoss`.
    As an optax ``GradientTransformation``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, xrisk.jax as xr
    >>> loss_fn = xr.CompositionalAUCLoss(k=1)
    >>> opt = xr.PDSCA(loss_fn=loss_fn, learning_rate=0.1)
    >>> params = {"w": jnp.zeros(2), "loss": loss_fn.init_params()}
    >>> opt_state = opt.init(params)
    >>> grads = jax.tree.map(jnp.zeros_like, params)
    >>> alphas = []
    >>> for _ in range(2):  # step 0: cross-entropy phase; step 1: AUC phase
    ...     updates, opt_state = opt.update(grads, opt_state, params)
    ...     alphas.append(round(float(updates["loss"].alpha), 6))
    >>> alphas
    [0.0, 0.2]
    """

    rule_type = xrisk.PDSCA

    def __new__(cls, params: Params = None, loss_fn: Loss = None, *,
                learning_rate: LearningRate = 0.1, ce_learning_rate: LearningRate | None = None,
                beta1: float = 0.99, beta2: float = 0.999, clip_value: float = 1.0,
                weight_decay: float = 1e-05, epoch_decay: float = 0.002) -> PDSCA:
        rule = xrisk.PDSCA(loss_fn, learning_rate=learning_rate, ce_learning_rate=ce_learning_rate,
                           beta1=beta1, beta2=beta2, clip_value=clip_value,
                           weight_decay=weight_decay, epoch_decay=epoch_decay)
        return cls._create(rule, params, loss_fn)


class PESG(XRiskOptimizer):
    """Proximal epoch stochastic gradient descent-ascent (PESG) for min-max losses. As an optax
    ``GradientTransformation``.

    Examples
    --------
    >>> import jax, jax.numpy as jnp, optax, xrisk.jax as xr
    >>> loss_fn = xr.AUCMLoss()
    >>> opt = xr.PESG(loss_fn=loss_fn, learning_rate=0.1)
    >>> params = {"w": jnp.zeros(2), "loss": loss_fn.init_params()}  # the AUCMParams node
    >>> opt_state = opt.init(params)
    >>> grads = jax.tree.map(jnp.zeros_like, params)
    >>> updates, opt_state = jax.jit(opt.update)(grads, opt_state, params)
    >>> round(float(optax.apply_updates(params, updates)["loss"].alpha), 6)  # 0.1*2*(1+b-a)
    0.2
    """

    rule_type = xrisk.PESG

    def __new__(cls, params: Params = None, loss_fn: Loss = None, *,
                learning_rate: LearningRate = 0.1, mode: str = "sgd", clip_value: float = 1.0,
                weight_decay: float = 1e-05, epoch_decay: float = 0.002, momentum: float = 0.9,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-08,
                amsgrad: bool = False) -> PESG:
        rule = xrisk.PESG(loss_fn, learning_rate=learning_rate, mode=mode, clip_value=clip_value,
                          weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
                          betas=betas, eps=eps, amsgrad=amsgrad)
        return cls._create(rule, params, loss_fn)


# --- end of the generated classes ---


class _OptaxRule:
    """``init`` / ``update`` of an optax transformation and the core rule it implements (the
    ``rule`` property of :class:`XRiskOptimizer` reads it from the bound methods)."""

    def __init__(self, rule: UpdateRule, transformation: Any) -> None:
        self.rule = rule
        self.transformation = transformation

    def init(self, params: Any) -> Any:
        return self.transformation.init(params)

    def update(self, updates: Any, state: Any, params: Any = None,
               **extra_args: Any) -> tuple[Any, Any]:
        if params is None:
            raise ValueError(f"{self.rule.name}: update() needs the current params (the trust "
                             "ratio reads them). Fix: opt.update(grads, opt_state, params).")
        return self.transformation.update(updates, state, params)


def _matrices(tree: Any) -> Any:
    """True for the leaves with 2 or more axes (LARS's weight decay and trust ratio)."""
    return jax.tree.map(lambda leaf: getattr(leaf, "ndim", 0) > 1, tree)


