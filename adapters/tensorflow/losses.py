"""TensorFlow losses: ``tf.Module``\\ s generated from the core registry ``xrisk.LOSSES``.

State is held in non-trainable ``tf.Variable``\\ s and trainable auxiliaries (AUC-M's a, b, α)
in trainable ones, all created at construction (never inside ``tf.function``). A call runs
the core's pure ``apply``; the TensorFlow backend scatters the new rows into the variables in
place (O(batch)), eagerly or inside ``tf.function``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from xrisk import LOSSES, LossDefinition
from xrisk._adapter_support import (
    LossContainer,
    build_loss_class,
    checked_state_arrays,
    definition_attribute,
    dtype_name,
)

__all__ = ["XRiskLoss", *LOSSES]


class XRiskLoss(LossContainer, tf.Module):
    """Base of the generated TensorFlow losses; ``definition_type`` names the definition."""

    definition_type: ClassVar[type[LossDefinition]]

    def __init__(self, *args: Any, dtype: Any = "float32", device: Any = None, **kwargs: Any):
        definition = self.definition_type(*args, **kwargs)
        super().__init__(name=definition.name)
        self.definition = definition
        tf_dtype = tf.as_dtype(dtype_name(definition.name, dtype))
        fields = [(name, field, False) for name, field in definition.state_fields().items()]
        fields += [(name, field, True) for name, field in definition.param_fields().items()]
        with tf.init_scope(), tf.device(device or ""):
            for name, field, trainable in fields:
                field_dtype = tf_dtype if field.kind == "float" else tf.int32
                value = tf.fill(field.shape, tf.constant(field.fill, dtype=field_dtype))
                setattr(self, name, tf.Variable(value, trainable=trainable, name=name))

    def __getattr__(self, name: str) -> Any:
        return definition_attribute(self, name)

    def __call__(self, scores: Any, labels: Any, index: Any = None) -> tf.Tensor:
        """Loss of one mini-batch; updates the state variables of the rows in ``index``.

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
            variable = getattr(self, name)
            if value is not variable:  # the backend scatters into variables; keep that contract
                variable.assign(value)
        return loss

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral)."""
        names = [*self.definition.state_fields(), *self.definition.param_fields()]
        return {name: getattr(self, name).numpy().copy() for name in names}

    def load_state(self, arrays: Mapping[str, Any]) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error."""
        for name, value in checked_state_arrays(self.definition, arrays).items():
            variable = getattr(self, name)
            variable.assign(tf.convert_to_tensor(value, dtype=variable.dtype))

    def __repr__(self) -> str:
        return f"xrisk.tensorflow.{self.definition!r}"


globals().update({
    name: build_loss_class(definition, XRiskLoss, framework="TensorFlow (tf.Module)",
                           module="xrisk.tensorflow")
    for name, definition in LOSSES.items()
})
