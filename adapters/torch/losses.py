"""PyTorch losses: one ``nn.Module`` per core loss definition.

State lives in registered buffers and trainable auxiliaries (AUC-M's a, b, α) in
``nn.Parameter``\\ s, so ``state_dict()``, ``load_state_dict()``, ``.to(device)`` and DDP see
them. A call runs the core's pure ``apply``; the torch backend writes the new rows into the
buffers in place (O(batch)). Each class below only fixes its constructor signature and its
examples: :class:`XRiskLoss` reads everything else from the core definition's declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

import xrisk
from xrisk import LossDefinition
from xrisk._adapter_support import (
    LossContainer,
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    refuse_assignment,
)

# One class per entry of the core registry (a missing one fails this import).
__all__ = ["XRiskLoss", *xrisk.LOSSES]

DType = str | torch.dtype | None
Device = str | torch.device | None


class XRiskLoss(LossContainer, nn.Module):
    """Base of the torch losses: a core definition with its state in buffers.

    Call it with the inputs the definition declares (e.g. ``loss_fn(scores, labels, index)``),
    positionally or by name; the state rows of the batch are updated in place.
    """

    definition_type: ClassVar[type[LossDefinition]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "definition_type" in cls.__dict__:
            cls.__doc__ = compose_doc(cls.__doc__, cls.definition_type)

    def __init__(self, definition: LossDefinition, *, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__()
        self.definition = definition
        float_dtype = (torch.get_default_dtype() if dtype is None
                       else getattr(torch, dtype_name(definition.name, dtype)))
        state = definition.init(xp=_namespace(), dtype=float_dtype, device=device)
        for name, value in state._asdict().items():
            self.register_buffer(name, value)
        params = definition.init_params(xp=_namespace(), dtype=float_dtype, device=device)
        for name, value in params._asdict().items():
            self.register_parameter(name, nn.Parameter(value))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return definition_attribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        refuse_assignment(self, name, value)
        super().__setattr__(name, value)

    def forward(self, *inputs: torch.Tensor, **named: torch.Tensor) -> torch.Tensor:
        """Loss of one mini-batch; updates the state buffers of the batch's rows.

        Inputs follow ``self.definition.inputs()`` (e.g. scores, labels, index).
        """
        loss, new_state = self.definition.apply(
            self.state, *inputs, params=self.aux_params, **named
        )
        for name, value in zip(new_state._fields, new_state, strict=True):
            buffer = getattr(self, name)
            if value is not buffer:  # the torch backend writes in place; keep that contract
                with torch.no_grad():
                    buffer.copy_(value)
        return loss

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral)."""
        return {name: getattr(self, name).detach().cpu().numpy().copy()
                for name in self.definition.state_shapes()}

    def load_state(self, arrays: Mapping[str, Any]) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error."""
        checked = checked_state_arrays(self.definition, arrays)
        with torch.no_grad():
            for name, value in checked.items():
                target = getattr(self, name)
                target.copy_(torch.as_tensor(np.array(value), dtype=target.dtype,
                                             device=target.device))

    def extra_repr(self) -> str:
        return repr(self.definition)


def _namespace() -> Any:
    return xrisk.backends.get_backend("torch").namespace


class APLoss(XRiskLoss):
    """Average-precision loss (SOAP) as a ``torch.nn.Module``; state ``u`` is a buffer.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.APLoss(num_samples=6, dtype="float64")
    >>> scores = torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=torch.float64, requires_grad=True)
    >>> loss = loss_fn(scores, torch.tensor([1, 0, 1, 0]), torch.tensor([0, 1, 2, 3]))
    >>> loss.backward()
    >>> loss_fn.u[:4, 0].round(decimals=4).tolist()  # u_all of the first four samples
    [0.4118, 0.0, 0.8303, 0.0]
    """

    definition_type = xrisk.APLoss

    def __init__(self, num_samples: int, *, gamma: float = 0.9, margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.APLoss(num_samples, gamma=gamma, margin=margin,
                                      surrogate=surrogate, scale=scale),
                         dtype=dtype, device=device)


class AUCMLoss(XRiskLoss):
    """AUC-margin min-max loss as a ``torch.nn.Module``; a, b, alpha are ``nn.Parameter``\\ s.

    Train with :class:`xrisk.torch.PESG`, which descends on the model's parameters, a and b
    and ascends on alpha.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> loss_fn = xr.AUCMLoss(version="v2", dtype="float64")
    >>> with torch.no_grad():
    ...     _ = loss_fn.a.fill_(0.3), loss_fn.b.fill_(0.2), loss_fn.alpha.fill_(0.5)
    >>> scores = torch.tensor([0.1, 0.4, 0.35, 0.8], dtype=torch.float64)
    >>> round(loss_fn(scores, torch.tensor([0, 0, 1, 1])).item(), 5)
    0.57625
    """

    definition_type = xrisk.AUCMLoss

    def __init__(self, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio),
                         dtype=dtype, device=device)
