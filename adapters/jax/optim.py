"""JAX optimizers: ``optax.GradientTransformationExtraArgs`` built on the core rules.

``SOAP(params, ...)`` and ``PESG(params, loss_fn, ...)`` return optax transformations (so
``optax.chain``, ``optax.apply_updates`` and ``jax.jit`` work) with two extra pure methods,
``update_lr(opt_state, decay_factor)`` and ``update_regularizer(opt_state, decay_factor)``,
returning a new state. The learning rate lives in the state: a decay never recompiles.
PESG finds the loss's ``AUCMParams`` node in the parameter pytree.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from xrisk import OPTIMIZERS
from xrisk import optim as core_optim
from xrisk._adapter_support import build_optimizer_class, rule_from_arguments
from xrisk.losses import AUCMParams
from xrisk.optim import OptimizerState

__all__ = ["XRiskOptimizer", *OPTIMIZERS]


def _require_params(params: Any, owner: str) -> Any:
    if params is None:
        raise ValueError(
            f"{owner}: update() needs the current params (weight and epoch decay use them). "
            "Fix: opt.update(grads, opt_state, params)."
        )
    return params


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


def _plain_transformation(rule: core_optim.ClippedOptimizer) -> tuple[Any, Any]:
    """init/update over every leaf of the parameter pytree."""

    def init(params: Any) -> OptimizerState:
        return rule.init(jax.tree.leaves(params))

    def update(grads: Any, state: OptimizerState, params: Any = None, **extra: Any
               ) -> tuple[Any, OptimizerState]:
        leaves = jax.tree.leaves(_require_params(params, rule.name))
        grad_leaves, treedef = jax.tree.flatten(grads)
        updates, state = rule.update(grad_leaves, state, leaves)
        return jax.tree.unflatten(treedef, updates), state

    return init, update


def _primal_dual_transformation(rule: core_optim.ClippedOptimizer) -> tuple[Any, Any]:
    """init/update where the pytree's AUCMParams node supplies a, b (primal) and alpha."""

    def primal(tree: Any) -> tuple[list[Any], Any]:
        others, aucm, _, _ = _split_aucm(tree)
        return [*others, aucm.a, aucm.b], aucm.alpha

    def init(params: Any) -> OptimizerState:
        return rule.init(primal(params)[0])

    def update(grads: Any, state: OptimizerState, params: Any = None, **extra: Any
               ) -> tuple[Any, OptimizerState]:
        values, alpha = primal(_require_params(params, rule.name))
        _, _, place, treedef = _split_aucm(grads)
        updates, alpha_update, state = rule.update(primal(grads)[0], state, values, alpha=alpha)
        leaves = updates[:-2]
        leaves.insert(place, AUCMParams(updates[-2], updates[-1], alpha_update))
        return jax.tree.unflatten(treedef, leaves), state

    return init, update


class XRiskOptimizer(optax.GradientTransformationExtraArgs):
    """An optax transformation built on a core rule, with LibAUC's schedule hooks.

    Subclasses are generated from :data:`xrisk.OPTIMIZERS`; ``PESG(params, loss_fn, ...)``
    finds the loss's ``AUCMParams`` node in the parameter pytree (``params`` is checked at
    construction).
    """

    __slots__ = ()
    rule_type: type[core_optim.ClippedOptimizer]

    def __new__(cls, *args: Any, **kwargs: Any) -> XRiskOptimizer:
        params, loss_fn, rule = rule_from_arguments(cls, args, kwargs, loss_containers=())
        if rule.takes_loss:
            _split_aucm(params)  # fails early without exactly one AUCMParams node
            init, update = _primal_dual_transformation(rule)
        else:
            jax.tree.leaves(params)  # fails early on a non-pytree
            init, update = _plain_transformation(rule)
        return super().__new__(cls, init, update)

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


globals().update({
    name: build_optimizer_class(rule, XRiskOptimizer, framework="JAX (optax)",
                                module="xrisk.jax")
    for name, rule in OPTIMIZERS.items()
})
