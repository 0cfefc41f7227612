"""PyTorch optimizers: ``torch.optim.Optimizer`` subclasses driving the core update rules.

The per-parameter buffers (momentum, Adam moments, the epoch-decay reference point and the
iterate sum) live in ``self.state[p]``; the step counters live in the parameter group, so
``state_dict()`` holds every counter and reference point and ``load_state_dict`` resumes.
The learning rate is ``param_groups[0]["lr"]``, so torch LR schedulers work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from xrisk import optim as core_optim
from xrisk.optim import OptimizerState

import torch

__all__ = ["SOAP", "PESG"]

_BUFFERS = ("momentum", "second_moment", "max_second_moment", "reference", "iterate_sum")


class _RuleOptimizer(torch.optim.Optimizer):
    """A torch optimizer whose update is a core rule; one parameter group."""

    def __init__(self, params: Iterable[Any], rule: core_optim.ClippedOptimizer) -> None:
        params = list(params)
        if any(isinstance(p, dict) for p in params):
            raise TypeError(
                f"{type(self).__name__}: got parameter groups (dicts); expected one iterable of "
                "tensors. Fix: pass model.parameters(); use one optimizer per group if groups "
                "need different hyper-parameters."
            )
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list.")
        self.rule = rule
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

    def _apply(self, params: list[Any], updates: list[Any]) -> None:
        for param, update in zip(params, updates, strict=True):
            param.add_(update)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = self.param_groups[0]["params"]
        updates, state = self.rule.update(
            [p.grad for p in params], self._core_state(), [p.detach() for p in params]
        )
        self._apply(params, updates)
        self._store(state)
        return loss

    def update_lr(self, decay_factor: float) -> None:
        """Divide the learning rate by ``decay_factor``."""
        self._store(core_optim.update_lr(self._core_state(), decay_factor))

    def update_regularizer(self, decay_factor: float | None = None) -> None:
        """New epoch-decay stage: reference ← average iterate; lr ÷ ``decay_factor`` if given."""
        with torch.no_grad():
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
                "alpha and margin). Fix: PESG(model.parameters(), loss_fn=AUCMLoss(), ...)."
            )
        rule = core_optim.PESG(
            margin=loss_fn.margin, lr=lr, mode=mode, clip_value=clip_value,
            weight_decay=weight_decay, epoch_decay=epoch_decay, momentum=momentum,
            betas=betas, eps=eps, amsgrad=amsgrad,
        )
        self.alpha = loss_fn.alpha
        super().__init__([*params, loss_fn.a, loss_fn.b], rule)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Descent on the model and a, b; then the projected ascent on alpha."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params = self.param_groups[0]["params"]
        updates, alpha_update, state = self.rule.update(
            [p.grad for p in params], self._core_state(), [p.detach() for p in params],
            alpha=self.alpha.detach(),
        )
        self._apply(params, updates)
        self.alpha.add_(alpha_update)
        self._store(state)
        return loss
