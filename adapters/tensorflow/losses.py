"""TensorFlow losses: one ``tf.Module`` per core loss definition.

State is held in non-trainable ``tf.Variable``\\ s and trainable auxiliaries (AUC-M's a, b, α)
in trainable ones, all created at construction (never inside ``tf.function``). A call runs the
core's pure ``apply``; the TensorFlow backend scatters the new rows into the variables in
place (O(batch)), eagerly or inside ``tf.function``. Each class below only fixes its
constructor signature and its examples; :class:`XRiskLoss` reads the rest from the core
definition's declarations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

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

DType = str | tf.dtypes.DType | None
Device = str | None


class XRiskLoss(LossContainer, tf.Module):
    """Base of the TensorFlow losses: a core definition with its state in variables.

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
        super().__init__(name=definition.name)
        self.definition = definition
        float_dtype = tf.as_dtype(tf.keras.backend.floatx() if dtype is None
                                  else dtype_name(definition.name, dtype))
        namespace = xrisk.backends.get_backend("tensorflow").namespace
        with tf.init_scope(), tf.device(device or ""):
            state = definition.init(xp=namespace, dtype=float_dtype)
            params = definition.init_params(xp=namespace, dtype=float_dtype)
            for name, value in state._asdict().items():
                setattr(self, name, tf.Variable(value, trainable=False, name=name))
            for name, value in params._asdict().items():
                setattr(self, name, tf.Variable(value, trainable=True, name=name))

    def __getattr__(self, name: str) -> Any:
        return definition_attribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        refuse_assignment(self, name, value)
        super().__setattr__(name, value)

    def __call__(self, *inputs: Any, **named: Any) -> tf.Tensor:
        """Loss of one mini-batch; updates the state variables of the batch's rows.

        Inputs follow ``self.definition.inputs()`` (e.g. scores, labels, index).
        """
        loss, new_state = self.definition.apply(
            self.state, *inputs, params=self.aux_params, **named
        )
        for name, value in zip(new_state._fields, new_state, strict=True):
            variable = getattr(self, name)
            if value is not variable:  # the backend scatters into variables; keep that contract
                variable.assign(value)
        return loss

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral)."""
        return {name: getattr(self, name).numpy().copy()
                for name in self.definition.state_shapes()}

    def load_state(self, arrays: Mapping[str, Any]) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error."""
        for name, value in checked_state_arrays(self.definition, arrays).items():
            variable = getattr(self, name)
            variable.assign(tf.convert_to_tensor(value, dtype=variable.dtype))

    def __repr__(self) -> str:
        return f"xrisk.tensorflow.{self.definition!r}"


class APLoss(XRiskLoss):
    """Average-precision loss (SOAP) as a ``tf.Module``; state ``u`` is a ``tf.Variable``.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.APLoss(num_samples=6, dtype="float64")
    >>> scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    >>> loss = loss_fn(scores, tf.constant([1, 0, 1, 0]), tf.constant([0, 1, 2, 3]))
    >>> loss_fn.u[:4, 0].numpy().round(4).tolist()  # u_all of the first four samples
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
    """AUC-margin min-max loss as a ``tf.Module``; a, b, alpha are trainable variables.

    Train with :class:`xrisk.tensorflow.PESG`, which descends on the model's variables, a and
    b and ascends on alpha.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.AUCMLoss(version="v2", dtype="float64")
    >>> _ = loss_fn.a.assign(0.3), loss_fn.b.assign(0.2), loss_fn.alpha.assign(0.5)
    >>> scores = tf.constant([0.1, 0.4, 0.35, 0.8], dtype=tf.float64)
    >>> round(float(loss_fn(scores, tf.constant([0, 0, 1, 1]))), 5)
    0.57625
    """

    definition_type = xrisk.AUCMLoss

    def __init__(self, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio),
                         dtype=dtype, device=device)
