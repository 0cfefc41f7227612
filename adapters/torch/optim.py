"""PyTorch optimizers: ``torch.optim.Optimizer`` subclasses driving the core update rules.

The per-parameter buffers (momentum, Adam moments, the epoch-decay reference point and the
iterate sum) live in ``self.state[p]``; the step counters live in the parameter group, so
``state_dict()`` holds every counter and reference point and ``load_state_dict`` resumes.
The learning rate is ``param_groups[0]["lr"]``, so torch LR schedulers work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from xrisk import OPTIMIZERS
from xrisk import optim as core_optim
from xrisk._adapter_support import build_optimizer_class, rule_from_arguments
from xrisk.optim import OptimizerState

__all__ = ["XRiskOptimizer", *OPTIMIZERS]

_BUFFERS = ("momentum", "second_moment", "max_second_moment", "reference", "iterate_sum")


class XRiskOptimizer(torch.optim.Optimizer):
    """A torch optimizer whose update is a core rule (``rule_type``); one parameter group.

    Subclasses are generated from :data:`xrisk.OPTIMIZERS`. For PESG the loss's ``a`` and
    ``b`` join the parameters and its ``alpha`` takes the rule's projected ascent.
    """

    rule_type: type[core_optim.ClippedOptimizer]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        params, loss_fn, rule = rule_from_arguments(type(self), args, kwargs)
        params = list(params)
        if any(isinstance(p, dict) for p in params):
            raise TypeError(
                f"{rule.name}: got parameter groups (dicts); expected one iterable of tensors. "
                "Fix: pass model.parameters(); use one optimizer per group if groups need "
                "different hyper-parameters."
            )
        if not params:
            raise ValueError(f"{rule.name}: got an empty parameter list.")
        self.rule = rule
        self.alpha = None if loss_fn is None else loss_fn.alpha
        if loss_fn is not None:
            params += [loss_fn.a, loss_fn.b]
        super().__init__(params, {"lr": rule.lr})
        group = self.param_groups[0]
        group.setdefault("step", 0)
        group.setdefault("steps_since_reference", 0)
        with torch.no_grad():
            self._store(rule.init([p.detach() for p in group["params"]]))

    # The core state is assembled from torch containers for each call and written back.
    def _core_state(self) -> OptimizerState:
        group = self.param_groups[0]
        params = group["params"]
        first = params[0]
        counters = {"dtype": torch.int32, "device": first.device}
        return OptimizerState(
            learning_rate=torch.tensor(group["lr"], dtype=first.dtype, device=first.device),
            step=torch.tensor(group["step"], **counters),
            steps_since_reference=torch.tensor(group["steps_since_reference"], **counters),
            **{
                name: tuple(self.state[p][name] for p in params)
                if name in self.state[first] else ()
                for name in _BUFFERS
            },
        )

    def _store(self, state: OptimizerState) -> None:
        group = self.param_groups[0]
        group["lr"] = float(state.learning_rate)
        group["step"] = int(state.step)
        group["steps_since_reference"] = int(state.steps_since_reference)
        for name in _BUFFERS:
            for param, value in zip(group["params"], getattr(state, name)):
                self.state[param][name] = value

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient (and of alpha, for PESG)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = self.param_groups[0]["params"]
        grads, values = [p.grad for p in params], [p.detach() for p in params]
        if self.alpha is None:
            updates, state = self.rule.update(grads, self._core_state(), values)
        else:
            updates, alpha_update, state = self.rule.update(
                grads, self._core_state(), values, alpha=self.alpha.detach())
            self.alpha.add_(alpha_update)
            self.alpha.grad = None  # unused (closed-form ascent); zero_grad() does not see it
        for param, update in zip(params, updates, strict=True):
            param.add_(update)
        self._store(state)
        return loss

    def update_lr(self, decay_factor: float) -> None:
        """Divide the learning rate by ``decay_factor``."""
        self._store(core_optim.update_lr(self._core_state(), decay_factor))

    def update_regularizer(self, decay_factor: float | None = None) -> None:
        """New epoch-decay stage: reference ← average iterate; lr ÷ ``decay_factor`` if given."""
        with torch.no_grad():
            self._store(core_optim.update_regularizer(self._core_state(), decay_factor))


globals().update({
    name: build_optimizer_class(rule, XRiskOptimizer, framework="PyTorch (torch.optim)",
                                module="xrisk.torch")
    for name, rule in OPTIMIZERS.items()
})
