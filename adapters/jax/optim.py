"""JAX optimizers: ``optax.GradientTransformationExtraArgs`` built on the core rules.

``SOAP(params, ...)`` and ``PESG(params, loss_fn, ...)`` return optax transformations (so
``optax.chain``, ``optax.apply_updates`` and ``jax.jit`` work) with two extra pure methods,
``update_lr(opt_state, decay_factor)`` and ``update_regularizer(opt_state, decay_factor)``,
returning a new state. The learning rate lives in the state: a decay never recompiles.
PESG finds the loss's ``AUCMParams`` node in the parameter pytree.
"""

from __future__ import annotations

from typing import Any

import optax
from xrisk import optim as core_optim
from xrisk.losses import AUCMParams
from xrisk.optim import OptimizerState

import jax

__all__ = ["SOAP", "PESG", "RuleTransformation"]


class RuleTransformation(optax.GradientTransformationExtraArgs):
    """An optax transformation with LibAUC's schedule hooks (pure, jit-safe)."""

    __slots__ = ()

    @staticmethod
    def update_lr(opt_state: OptimizerState, decay_factor: float) -> OptimizerState:
        """Return ``opt_state`` with the learning rate divided by ``decay_factor``."""
        return core_optim.update_lr(opt_state, decay_factor)

    @staticmethod
    def update_regularizer(
        opt_state: OptimizerState, decay_factor: float | None = None
    ) -> OptimizerState:
        """New epoch-decay stage: reference ← average iterate; lr ÷ ``decay_factor``."""
        return core_optim.update_regularizer(opt_state, decay_factor)


def _require_params(params: Any, owner: str) -> Any:
    if params is None:
        raise ValueError(
            f"{owner}: update() needs the current params (weight and epoch decay use them). "
            "Fix: opt.update(grads, opt_state, params)."
        )
    return params


class SOAP(RuleTransformation):
    __doc__ = core_optim.SOAP.__doc__

    __slots__ = ()

    def __new__(
        cls,
        params: Any,
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
    ) -> SOAP:
        rule = core_optim.SOAP(
            lr=lr, mode=mode, clip_value=clip_value, weight_decay=weight_decay,
            epoch_decay=epoch_decay, momentum=momentum, nesterov=nesterov,
            dampening=dampening, betas=betas, eps=eps, amsgrad=amsgrad,
        )
        jax.tree.leaves(params)  # fails early on a non-pytree

        def init(params: Any) -> OptimizerState:
            return rule.init(jax.tree.leaves(params))

        def update(grads: Any, state: OptimizerState, params: Any = None, **extra: Any
                   ) -> tuple[Any, OptimizerState]:
            leaves = jax.tree.leaves(_require_params(params, "SOAP"))
            grad_leaves, treedef = jax.tree.flatten(grads)
            updates, state = rule.update(grad_leaves, state, leaves)
            return jax.tree.unflatten(treedef, updates), state

        return super().__new__(cls, init, update)


def _split_aucm(tree: Any) -> tuple[list[Any], AUCMParams, int, Any]:
    """Leaves of ``tree`` apart from its one ``AUCMParams`` node, that node and its place."""
    leaves, treedef = jax.tree.flatten(tree, is_leaf=lambda x: isinstance(x, AUCMParams))
    places = [i for i, leaf in enumerate(leaves) if isinstance(leaf, AUCMParams)]
    if len(places) != 1:
        raise ValueError(
            f"PESG: the parameter pytree holds {len(places)} AUCMParams nodes; expected exactly "
            "one. Fix: params = {'model': model_params, 'loss': loss_fn.init_params()}."
        )
    place = places[0]
    return leaves[:place] + leaves[place + 1:], leaves[place], place, treedef


class PESG(RuleTransformation):
    __doc__ = core_optim.PESG.__doc__

    __slots__ = ()

    def __new__(
        cls,
        params: Any,
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
    ) -> PESG:
        if not hasattr(loss_fn, "margin"):
            raise TypeError(
                f"PESG: loss_fn is {type(loss_fn).__name__}; expected an AUCMLoss. "
                "Fix: PESG(params, loss_fn=AUCMLoss(), ...)."
            )
        rule = core_optim.PESG(
            margin=loss_fn.margin, lr=lr, mode=mode, clip_value=clip_value,
            weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
            betas=betas, eps=eps, amsgrad=amsgrad,
        )
        _split_aucm(params)  # fails early without exactly one AUCMParams node

        def primal(tree: Any) -> tuple[list[Any], Any]:
            others, aucm, _, _ = _split_aucm(tree)
            return [*others, aucm.a, aucm.b], aucm.alpha

        def init(params: Any) -> OptimizerState:
            return rule.init(primal(params)[0])

        def update(grads: Any, state: OptimizerState, params: Any = None, **extra: Any
                   ) -> tuple[Any, OptimizerState]:
            values, alpha = primal(_require_params(params, "PESG"))
            _, _, place, treedef = _split_aucm(grads)
            grad_values, _ = primal(grads)
            updates, alpha_update, state = rule.update(grad_values, state, values, alpha=alpha)
            leaves = updates[:-2]
            leaves.insert(place, AUCMParams(updates[-2], updates[-1], alpha_update))
            return jax.tree.unflatten(treedef, leaves), state

        return super().__new__(cls, init, update)
