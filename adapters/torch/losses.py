"""PyTorch losses: ``nn.Module``\\ s generated from the core registry ``xrisk.LOSSES``.

State lives in registered buffers and trainable auxiliaries (AUC-M's a, b, α) in
``nn.Parameter``\\ s, so ``state_dict()``, ``load_state_dict()``, ``.to(device)`` and DDP see
them. ``forward`` calls the core's pure ``apply``; the torch backend writes the new rows into
the buffers in place (O(batch)).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from xrisk import LOSSES, LossDefinition
from xrisk._adapter_support import (
    LossContainer,
    build_loss_class,
    checked_state_arrays,
    definition_attribute,
    dtype_name,
)

__all__ = ["XRiskLoss", *LOSSES]


class XRiskLoss(LossContainer, nn.Module):
    """Base of the generated torch losses; ``definition_type`` names the core definition."""

    definition_type: ClassVar[type[LossDefinition]]

    def __init__(self, *args: Any, dtype: Any = "float32", device: Any = None, **kwargs: Any):
        super().__init__()
        definition = self.definition_type(*args, **kwargs)
        self.definition = definition
        torch_dtype = getattr(torch, dtype_name(definition.name, dtype))
        for name, field in definition.state_fields().items():
            field_dtype = torch_dtype if field.kind == "float" else torch.int32
            self.register_buffer(
                name, torch.full(field.shape, field.fill, dtype=field_dtype, device=device)
            )
        for name, field in definition.param_fields().items():
            value = torch.full(field.shape, field.fill, dtype=torch_dtype, device=device)
            self.register_parameter(name, nn.Parameter(value))

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return definition_attribute(self, name)

    def forward(
        self, scores: torch.Tensor, labels: torch.Tensor, index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Loss of one mini-batch; updates the state buffers of the rows in ``index``.

        Parameters
        ----------
        scores : Tensor, shape (B,) or (B, 1)
        labels : Tensor, shape (B,) or (B, 1), values in {0, 1}
        index : Tensor, shape (B,), integer dataset indices (losses with per-sample state)
        """
        loss, new_state = self.definition.apply(
            self.state, scores, labels, index, params=self.aux_params
        )
        for name, value in zip(new_state._fields, new_state, strict=True):
            buffer = getattr(self, name)
            if value is not buffer:  # the torch backend writes in place; keep that contract
                with torch.no_grad():
                    buffer.copy_(value)
        return loss

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral)."""
        names = [*self.definition.state_fields(), *self.definition.param_fields()]
        return {name: getattr(self, name).detach().cpu().numpy().copy() for name in names}

    def load_state(self, arrays: Mapping[str, Any]) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error."""
        checked = checked_state_arrays(self.definition, arrays)
        with torch.no_grad():
            for name, value in checked.items():
                target = getattr(self, name)
                target.copy_(torch.as_tensor(value, dtype=target.dtype, device=target.device))

    def extra_repr(self) -> str:
        return repr(self.definition)


globals().update({
    name: build_loss_class(definition, XRiskLoss, framework="PyTorch (nn.Module)",
                           module="xrisk.torch")
    for name, definition in LOSSES.items()
})
