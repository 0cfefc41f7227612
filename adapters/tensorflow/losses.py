"""TensorFlow losses: one ``tf.Module`` per core loss definition.

State is held in non-trainable ``tf.Variable``\\ s and trainable auxiliaries (AUC-M's a, b, α)
in trainable ones, all created at construction (never inside ``tf.function``). A call runs the
core's pure ``apply``; the TensorFlow backend scatters the new rows into the variables in
place (O(batch)), eagerly or inside ``tf.function``. Each class below only fixes its
constructor signature and its examples (written by ``tools/generate_adapters.py`` from the
core signatures); :class:`XRiskLoss` reads the rest from the core definition's declarations.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import numpy as np
import tensorflow as tf

import xrisk
from xrisk import LossDefinition
from xrisk.adapter_api import (
    LossContainer,
    calls_through,
    checked_state_arrays,
    compose_doc,
    definition_attribute,
    dtype_name,
    exported_state,
    guard_init,
    refuse_assignment,
)
from xrisk.losses.midam import midam_class
from xrisk.losses.pauc import pauc_class

from .distributed import check_call as check_distributed_call
from .distributed import variable_options

# One class per entry of the core registry (a missing one fails this import).
__all__ = ["XRiskLoss", *xrisk.LOSSES, "pAUCLoss", "MIDAMLoss"]

DType: TypeAlias = str | tf.dtypes.DType | None
Device: TypeAlias = str | None


#: This adapter's class of each core definition (the front doors build by it).
ADAPTED: dict[type[LossDefinition], type[XRiskLoss]] = {}


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
            ADAPTED[cls.definition_type] = cls
        if "__init__" in cls.__dict__:  # LibAUC names (data_len=, surr_loss=, ...) name ours
            cls.__init__ = guard_init(cls.__init__)  # type: ignore[method-assign]

    def __init__(self, definition: LossDefinition, *, dtype: DType = None,
                 device: Device = None) -> None:
        super().__init__(name=definition.name)
        # The user's line -> the do_not_convert wrapper -> __call__ -> definition.apply: an
        # InputWarning about a batch names the user's line (xrisk.adapter_api.calls_through).
        calls_through(definition, 3)
        self.definition = definition
        float_dtype = tf.as_dtype(tf.keras.backend.floatx() if dtype is None
                                  else dtype_name(definition.name, dtype))
        namespace = xrisk.backends.get_backend("tensorflow").namespace
        with tf.init_scope(), tf.device(device or ""):
            state = definition.init(xp=namespace, dtype=float_dtype)
            params = definition.init_params(xp=namespace, dtype=float_dtype)
            # Under a tf.distribute strategy: mirrored, written from the first replica
            # (xrisk.tensorflow.distributed.state_variables chooses otherwise).
            options = variable_options()
            for name, value in state._asdict().items():
                setattr(self, name, tf.Variable(value, trainable=False, name=name, **options))
            specs = definition.auxiliaries()
            for name, value in params._asdict().items():
                # An ascent auxiliary's projection as the variable's constraint: Keras
                # optimizers apply it after their step, so a plain one (keras.optimizers.Adam)
                # takes the whole projected saddle-point update (the loss reverses the
                # gradient); the xrisk optimizers project it themselves.
                constraint = (functools.partial(_project, specs[name], namespace)
                              if specs[name].role == "ascent" else None)
                setattr(self, name, tf.Variable(value, trainable=True, name=name,
                                                constraint=constraint))

    def __getattr__(self, name: str) -> Any:
        return definition_attribute(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        refuse_assignment(self, name, value)
        super().__setattr__(name, value)

    # AutoGraph stays out of the loss (the core has no tensor-dependent Python branches);
    # converting it recursively (strategy.run does) breaks on the definitions' methods.
    @tf.autograph.experimental.do_not_convert
    def __call__(self, *inputs: Any, **named: Any) -> tf.Tensor:
        """Loss of one mini-batch; updates the state variables of the batch's rows.

        Inputs follow ``self.definition.inputs()`` (e.g. scores, labels, index).
        """
        check_distributed_call(self, inputs, named)  # warns on per-replica parts
        loss, new_state = self.definition.apply(
            self.state, *inputs, params=self.aux_params, **named
        )
        self._write_state(new_state)
        return loss

    def _write_state(self, new_state: Any) -> None:
        """Assign the entries of ``new_state`` (the core's pure result) to the variables."""
        for name, value in zip(new_state._fields, new_state, strict=True):
            variable = getattr(self, name)
            if value is not variable:  # the backend scatters into variables; keep that contract
                variable.assign(value)

    def export_state(self) -> dict[str, np.ndarray]:
        """State and trainable auxiliaries as a dict of numpy arrays (framework-neutral).

        Each array is a copy in its entry's dtype, except bfloat16, which numpy lacks: it is
        exported as float32, exactly. The ``"__xrisk__"`` entry names the loss, its
        meaning-giving hyper-parameters and the format (see the README's checkpoint format);
        ``np.savez`` stores the dict as it is.
        """
        backend = xrisk.backends.get_backend("tensorflow")
        return exported_state(self.definition, {
            name: np.array(backend.to_numpy(getattr(self, name)), copy=True)
            for name in self.definition.state_shapes()})

    def load_state(self, arrays: Mapping[str, Any], *, reinterpret: bool = False) -> None:
        """Load a dict from ``export_state`` of any framework; nothing changes on error.

        The export must name this loss and its meaning-giving hyper-parameters (its
        ``"__xrisk__"`` metadata), and every entry is checked first (keys, shapes, values in
        their declared domains; see :func:`xrisk.adapter_api.checked_state_arrays`); a
        float export of more precision than the loss is rounded with a
        :class:`xrisk.StateCastWarning`. ``reinterpret=True`` loads the arrays of another
        loss's export (or of an export without metadata whose layout several losses share,
        or of arrays made by hand) as this loss's state, on purpose: keys, shapes and
        domains are still checked.
        """
        variables = {name: getattr(self, name) for name in self.definition.state_shapes()}
        checked = checked_state_arrays(
            self.definition, arrays, {name: v.dtype.name for name, v in variables.items()},
            reinterpret=reinterpret)
        # Convert everything before the first assignment, so a failure changes nothing.
        tensors = {name: tf.cast(tf.constant(value), variables[name].dtype)
                   for name, value in checked.items()}
        for name, tensor in tensors.items():
            variables[name].assign(tensor)

    def __repr__(self) -> str:
        return f"xrisk.tensorflow.{self.definition!r}"


def _project(spec: xrisk.losses.Auxiliary, namespace: Any, variable: Any) -> tf.Tensor:
    """The value of ``variable`` projected onto the bounds of ``spec`` (a constraint)."""
    return spec.project(tf.convert_to_tensor(variable), namespace)


# --- generated by tools/generate_adapters.py: edit the core (or a docstring), run it ---

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
    definition: xrisk.APLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, gamma: float = 0.9, margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.APLoss(num_samples, gamma=gamma, margin=margin, surrogate=surrogate,
                                  scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


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
    definition: xrisk.AUCMLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, margin: float = 1.0, version: str = "v1", imratio: float | None = None,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.AUCMLoss(margin=margin, version=version, imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class PairwiseAUCLoss(XRiskLoss):
    """Pairwise AUC loss (mean surrogate over positive-negative pairs) as a ``tf.Module``;
    no state.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.PairwiseAUCLoss(surrogate="squared_hinge", dtype="float64")
    >>> scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    >>> round(float(loss_fn(scores, tf.constant([1, 0, 1, 0]))), 4)
    0.335
    """

    definition_type = xrisk.PairwiseAUCLoss
    definition: xrisk.PairwiseAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, surrogate: str = "logistic", margin: float = 1.0, scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.PairwiseAUCLoss(surrogate=surrogate, margin=margin, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class CrossEntropyLoss(XRiskLoss):
    """Binary cross-entropy of logits as a ``tf.Module``; no state.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.CrossEntropyLoss()
    >>> logits = tf.constant([0.0, 100.0, -100.0])  # float32, stable
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(logits)
    ...     loss = loss_fn(logits, tf.constant([1, 0, 0]))
    >>> round(float(loss), 4), [round(float(g), 4) for g in tape.gradient(loss, logits)]
    (33.5644, [-0.1667, 0.3333, 0.0])
    """

    definition_type = xrisk.CrossEntropyLoss
    definition: xrisk.CrossEntropyLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.CrossEntropyLoss()
        super().__init__(definition, dtype=dtype, device=device)


class FocalLoss(XRiskLoss):
    """Focal loss of logits as a ``tf.Module``; no state.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.FocalLoss(alpha=0.25, gamma=2.0)
    >>> round(float(loss_fn(tf.constant([0.0, 0.0]), tf.constant([1, 0]))), 6)
    0.086643
    """

    definition_type = xrisk.FocalLoss
    definition: xrisk.FocalLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, alpha: float = 0.25, gamma: float = 2.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.FocalLoss(alpha=alpha, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)


class CompositionalAUCLoss(XRiskLoss):
    """Compositional AUC loss (k cross-entropy steps, then k AUC-M steps) as a ``tf.Module``;
    a, b, alpha are trainable variables, the call counter ``step`` an int32 variable.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.CompositionalAUCLoss(k=1, version="v2", dtype="float64")
    >>> _ = loss_fn.a.assign(0.3), loss_fn.b.assign(0.2), loss_fn.alpha.assign(0.5)
    >>> scores = tf.constant([0.1, 0.4, 0.35, 0.8], dtype=tf.float64)
    >>> labels = tf.constant([0, 0, 1, 1])
    >>> ce, auc = loss_fn(scores, labels), loss_fn(scores, labels)  # step 0: BCE, 1: AUC-M
    >>> round(float(ce), 5), round(float(auc), 5), int(loss_fn.step.numpy())
    (0.47229, 0.57625, 2)
    """

    definition_type = xrisk.CompositionalAUCLoss
    definition: xrisk.CompositionalAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, *, k: int = 1, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.CompositionalAUCLoss(k=k, margin=margin, version=version,
                                                imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class GlobalContrastiveLoss(XRiskLoss):
    """Unimodal global contrastive loss (SogCLR; iSogCLR with individual temperatures) as
    a ``tf.Module``; the shifted estimators ``u`` = [u~, c] (u = u~ exp(c)) and the
    individual temperatures ``temperature`` = [tau_i, momentum] live in tf.Variables.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.GlobalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0, dtype="float64")
    >>> x = tf.constant([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=tf.float64)
    >>> with tf.GradientTape() as tape:
    ...     _ = tape.watch(x)
    ...     loss = loss_fn(x, tf.reverse(x, axis=[0]), tf.constant([0, 1, 3]))
    >>> grad = tape.gradient(loss, x)
    >>> u = loss_fn.u[:, 0] * tf.exp(loss_fn.u[:, 1])  # u = u~ exp(c) of every sample
    >>> round(float(loss), 4), u.numpy().round(4).tolist()
    (0.0288, [4.1656, 2.9765, 0.0, 4.1656, 0.0])
    """

    definition_type = xrisk.GlobalContrastiveLoss
    definition: xrisk.GlobalContrastiveLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, tau: float = 0.1, gamma: float = 0.9,
                 gamma_schedule: str = "constant", gamma_decay_epochs: int | None = None,
                 epoch: int = 0, temperature_scheme: str = "global", tau_min: float = 0.05,
                 tau_max: float = 0.7, rho: float = 0.3, eta: float = 0.01, beta: float = 0.9,
                 normalize: bool = True, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.GlobalContrastiveLoss(num_samples, tau=tau, gamma=gamma,
                                                 gamma_schedule=gamma_schedule,
                                                 gamma_decay_epochs=gamma_decay_epochs, epoch=epoch,
                                                 temperature_scheme=temperature_scheme,
                                                 tau_min=tau_min, tau_max=tau_max, rho=rho, eta=eta,
                                                 beta=beta, normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class BimodalContrastiveLoss(XRiskLoss):
    """Bimodal (image-text) global contrastive loss as a ``tf.Module``; one
    estimator table per direction, ``u_image`` and ``u_text`` (and ``temperature_image``,
    ``temperature_text`` with individual temperatures), in tf.Variables.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.BimodalContrastiveLoss(num_samples=5, tau=0.5, gamma=1.0, dtype="float64")
    >>> image = tf.constant([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=tf.float64)
    >>> text = tf.constant([[0.8, 0.6], [0.0, 1.0], [1.0, 0.0]], dtype=tf.float64)
    >>> with tf.GradientTape() as tape:
    ...     _ = tape.watch(image)
    ...     loss = loss_fn(image, text, tf.constant([0, 1, 3]))
    >>> grad = tape.gradient(loss, image)
    >>> u = loss_fn.u_image[:, 0] * tf.exp(loss_fn.u_image[:, 1])  # image anchors
    >>> round(float(loss), 4), u[:2].numpy().round(4).tolist()
    (-0.0295, [0.8469, 0.2923])
    """

    definition_type = xrisk.BimodalContrastiveLoss
    definition: xrisk.BimodalContrastiveLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, tau: float = 0.01, gamma: float = 0.9,
                 gamma_schedule: str = "constant", gamma_decay_epochs: int | None = None,
                 epoch: int = 0, temperature_scheme: str = "global", tau_min: float = 0.005,
                 tau_max: float = 0.05, rho: float = 6.0, eta: float = 0.01, beta: float = 0.9,
                 negative_reduction: str = "mean", normalize: bool = True, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.BimodalContrastiveLoss(num_samples, tau=tau, gamma=gamma,
                                                  gamma_schedule=gamma_schedule,
                                                  gamma_decay_epochs=gamma_decay_epochs,
                                                  epoch=epoch,
                                                  temperature_scheme=temperature_scheme,
                                                  tau_min=tau_min, tau_max=tau_max, rho=rho,
                                                  eta=eta, beta=beta,
                                                  negative_reduction=negative_reduction,
                                                  normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class InfoNCELoss(XRiskLoss):
    """In-batch InfoNCE (SimCLR, CLIP) as a ``tf.Module``, the baseline of the
    global contrastive losses (no state).

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.InfoNCELoss(tau=0.5, dtype="float64")
    >>> x = tf.constant([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=tf.float64)
    >>> round(float(loss_fn(x, tf.reverse(x, axis=[0]))), 4)
    1.5032
    """

    definition_type = xrisk.InfoNCELoss
    definition: xrisk.InfoNCELoss  # the type __init__ builds (typed methods)

    def __init__(self, *, tau: float = 0.1, within_view: bool = True, normalize: bool = True,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.InfoNCELoss(tau=tau, within_view=within_view, normalize=normalize)
        super().__init__(definition, dtype=dtype, device=device)


class EntLossClassification(XRiskLoss):
    """Compositional entropy loss for extreme classification (SCENT or SOX) as a
    ``tf.Module``; the per-sample rows ``nu`` = [nu, seen] and the SOX weight ``smoothing``
    are variables.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.EntLossClassification(num_samples=4, mode="SOX", dtype="float64")
    >>> logits = tf.Variable([[2.0, 0.0, 1.0]], dtype=tf.float64)
    >>> with tf.GradientTape() as tape:
    ...     shifted = logits - logits[:, 1:2]  # z_k - z_y, label 1
    ...     loss = loss_fn(shifted, tf.constant([3]))
    >>> tape.gradient(loss, logits).numpy().round(4).tolist()  # CE's at a first visit
    [[0.6652, -0.91, 0.2447]]
    >>> loss_fn.adjust_gamma(10, 10)  # SOX's cosine schedule, down to gamma at the end
    >>> round(float(loss_fn.smoothing), 4)
    0.9
    """

    definition_type = xrisk.EntLossClassification
    definition: xrisk.EntLossClassification  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, mode: str = "SCENT", alpha: float = 10.0,
                 gamma: float = 0.9, alpha_multiplier: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.EntLossClassification(num_samples, mode=mode, alpha=alpha, gamma=gamma,
                                                 alpha_multiplier=alpha_multiplier)
        super().__init__(definition, dtype=dtype, device=device)

    def adjust_gamma(self, epoch: int, num_epochs: int) -> None:
        """The core's :meth:`xrisk.EntLossClassification.adjust_gamma`, its new state written into
        this loss's state in place."""
        self._write_state(self.definition.adjust_gamma(self.state, epoch, num_epochs))


class MIDAM_softmax_pooling_loss(XRiskLoss):
    """Multi-instance AUC with softmax pooling (MIDAM) as a ``tf.Module``; the bag estimators
    ``s`` and the current weight ``smoothing`` are variables, a, b, alpha trainable ones.
    Train with :class:`xrisk.tensorflow.MIDAM`.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.MIDAM_softmax_pooling_loss(num_samples=3, tau=1.0, gamma=1.0, dtype="float64")
    >>> scores = tf.math.log(tf.constant([[1.0, 3.0], [1.0, 1.0]], dtype=tf.float64))
    >>> round(float(loss_fn(scores, tf.constant([1, 0]), tf.constant([0, 2]))), 4)
    0.4805
    >>> loss_fn.update_smoothing(2)  # gamma / 2, a variable: saved and loaded with the state
    >>> float(loss_fn.smoothing)
    0.5
    """

    definition_type = xrisk.MIDAM_softmax_pooling_loss
    definition: xrisk.MIDAM_softmax_pooling_loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 1.0, tau: float = 0.1,
                 gamma: float = 0.9, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MIDAM_softmax_pooling_loss(num_samples, margin=margin, tau=tau,
                                                      gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)

    def update_smoothing(self, decay_factor: float) -> None:
        """The core's :meth:`xrisk.MIDAM_softmax_pooling_loss.update_smoothing`, its new state
        written into this loss's state in place."""
        self._write_state(self.definition.update_smoothing(self.state, decay_factor))


class MIDAM_attention_pooling_loss(XRiskLoss):
    """Multi-instance AUC with attention pooling (MIDAM) as a ``tf.Module``; the bag
    estimators ``s`` and the current weight ``smoothing`` are variables, a, b, alpha
    trainable ones. Train with :class:`xrisk.tensorflow.MIDAM`.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.MIDAM_attention_pooling_loss(num_samples=2, gamma=1.0, dtype="float64")
    >>> scores = tf.constant([[2.0, 0.0], [-1.0, 1.0]], dtype=tf.float64)
    >>> attention = tf.math.log(tf.constant([[1.0, 1.0], [3.0, 1.0]], dtype=tf.float64))
    >>> _ = loss_fn(scores, attention, tf.constant([1, 0]), tf.constant([0, 1]))
    >>> (loss_fn.s[:, 0] / loss_fn.s[:, 1]).numpy().round(4).tolist()  # weighted means
    [1.0, -0.5]
    """

    definition_type = xrisk.MIDAM_attention_pooling_loss
    definition: xrisk.MIDAM_attention_pooling_loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 1.0, gamma: float = 0.9,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MIDAM_attention_pooling_loss(num_samples, margin=margin, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)

    def update_smoothing(self, decay_factor: float) -> None:
        """The core's :meth:`xrisk.MIDAM_attention_pooling_loss.update_smoothing`, its new state
        written into this loss's state in place."""
        self._write_state(self.definition.update_smoothing(self.state, decay_factor))


class MultiLabelAUCMLoss(XRiskLoss):
    """Multi-label AUC-margin loss as a ``tf.Module``; a, b, alpha are trainable variables of
    shape (num_labels,), trained with :class:`xrisk.tensorflow.PESG`.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.MultiLabelAUCMLoss(2, version="v2", dtype="float64")
    >>> _ = loss_fn.a.assign([0.3, 0.3]), loss_fn.b.assign([0.2, 0.2])
    >>> _ = loss_fn.alpha.assign([0.5, 0.5])
    >>> scores = tf.constant([[0.1, 0.9], [0.4, 0.2], [0.35, 0.6], [0.8, 0.3]], tf.float64)
    >>> nan = float("nan")  # a missing label
    >>> labels = tf.constant([[0, 1], [0, 0], [1, nan], [1, 0]], tf.float64)
    >>> round(float(loss_fn(scores, labels)), 5), tuple(loss_fn.alpha.shape)
    (0.52063, (2,))
    """

    definition_type = xrisk.MultiLabelAUCMLoss
    definition: xrisk.MultiLabelAUCMLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, *, margin: float = 1.0, version: str = "v1",
                 imratio: float | None = None, dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.MultiLabelAUCMLoss(num_labels, margin=margin, version=version,
                                              imratio=imratio)
        super().__init__(definition, dtype=dtype, device=device)


class meanAveragePrecisionLoss(XRiskLoss):
    """Mean average precision (SOAP per label) as a ``tf.Module``; the (label, sample) table
    ``u`` is a ``tf.Variable``.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.meanAveragePrecisionLoss(2, num_samples=4, dtype="float64")
    >>> scores = tf.constant([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]], tf.float64)
    >>> labels = tf.constant([[1, 0], [0, 1], [1, float("nan")], [0, 1]], tf.float64)
    >>> loss = loss_fn(scores, labels, tf.constant([0, 1, 2, 3]))
    >>> tf.reshape(loss_fn.u, (2, 4, 2))[0, :, 0].numpy().round(4).tolist()  # label 0's u_all
    [0.4118, 0.0, 0.8303, 0.0]
    """

    definition_type = xrisk.meanAveragePrecisionLoss
    definition: xrisk.meanAveragePrecisionLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, num_samples: int, *, gamma: float = 0.9,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.meanAveragePrecisionLoss(num_labels, num_samples, gamma=gamma,
                                                    margin=margin, surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class MultiLabelpAUCLoss(XRiskLoss):
    """Multi-label partial AUC (every mode of ``pAUCLoss``, STACO included) as a
    ``tf.Module``; every label's state rows are variables of their own.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.MultiLabelpAUCLoss(2, num_samples=4, mode="STACO", margin=1.0,
    ...                                 dtype="float64")
    >>> scores = tf.constant([[0.9, 0.1], [0.2, 0.7], [0.6, 0.5], [0.4, 0.3]], tf.float64)
    >>> labels = tf.constant([[1, 0], [0, 1], [1, 0], [0, 1]])
    >>> task = tf.constant([0, 0, 0, 0])  # a TriSampler batch of task 0 only
    >>> loss = loss_fn(scores, labels, tf.constant([0, 1, 2, 3]), task)
    >>> round(float(loss), 4), loss_fn.s2.numpy().tolist()  # label 1 is not in the batch
    (1.34, [0.1, 0.0])
    """

    definition_type = xrisk.MultiLabelpAUCLoss
    definition: xrisk.MultiLabelpAUCLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_labels: int, num_samples: int, *, mode: str = "1w",
                 beta: float | None = None, eta: float | None = None, margin: float | None = None,
                 gamma: float | None = None, lam: float | None = None, tau: float | None = None,
                 gammas: tuple[float, float] | None = None, alpha: float | None = None,
                 beta_0: float | None = None, beta_1: float | None = None,
                 theta_0: float | None = None, theta_1: float | None = None,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.MultiLabelpAUCLoss(num_labels, num_samples, mode=mode, beta=beta,
                                              eta=eta, margin=margin, gamma=gamma, lam=lam, tau=tau,
                                              gammas=gammas, alpha=alpha, beta_0=beta_0,
                                              beta_1=beta_1, theta_0=theta_0, theta_1=theta_1,
                                              surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class pAUC_CVaR_Loss(XRiskLoss):
    """One-way partial AUC by CVaR (SOPA) as a ``tf.Module``; the per-sample
    ``threshold`` is a ``tf.Variable``.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.pAUC_CVaR_Loss(num_samples=4, beta=0.5, dtype="float64")
    >>> scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    >>> loss = loss_fn(scores, tf.constant([1, 0, 1, 0]), tf.constant([0, 1, 2, 3]))
    >>> round(float(loss), 4), loss_fn.threshold.numpy().round(4).tolist()
    (0.67, [0.1, 0.0, 0.1, 0.0])
    """

    definition_type = xrisk.pAUC_CVaR_Loss
    definition: xrisk.pAUC_CVaR_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, beta: float = 0.2, eta: float = 0.1,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.pAUC_CVaR_Loss(num_samples, beta=beta, eta=eta, margin=margin,
                                          surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class pAUC_DRO_Loss(XRiskLoss):
    """One-way partial AUC by KL-DRO (SOPAs) as a ``tf.Module``; the shifted
    estimators ``u`` = [u~, c] (u = u~ exp(c)) are a ``tf.Variable``.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.pAUC_DRO_Loss(num_samples=4, gamma=1.0, dtype="float64")
    >>> scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    >>> with tf.GradientTape() as tape:
    ...     _ = tape.watch(scores)
    ...     loss = loss_fn(scores, tf.constant([1, 0, 1, 0]), tf.constant([0, 1, 2, 3]))
    >>> grad = tape.gradient(loss, scores)
    >>> u = loss_fn.u[:, 0] * tf.exp(loss_fn.u[:, 1])  # mean_j exp(l_ij) of positives 0, 2
    >>> round(float(loss), 4), u.numpy().round(4).tolist()
    (0.3479, [1.1891, 0.0, 1.6649, 0.0])
    """

    definition_type = xrisk.pAUC_DRO_Loss
    definition: xrisk.pAUC_DRO_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, gamma: float = 0.9, lam: float = 1.0,
                 margin: float = 1.0, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.pAUC_DRO_Loss(num_samples, gamma=gamma, lam=lam, margin=margin,
                                         surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class tpAUC_KL_Loss(XRiskLoss):
    """Two-way partial AUC by KL-DRO (SOTAs) as a ``tf.Module``; the shifted
    estimators ``u`` (per sample) and ``w`` (global) are ``tf.Variable``\\ s.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.tpAUC_KL_Loss(num_samples=4, tau=0.5, dtype="float64")
    >>> scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    >>> loss = loss_fn(scores, tf.constant([1, 0, 1, 0]), tf.constant([0, 1, 2, 3]))
    >>> round(float(loss), 4), round(float(loss_fn.w[0] * tf.exp(loss_fn.w[1])), 4)
    (0.4982, 1.5257)
    """

    definition_type = xrisk.tpAUC_KL_Loss
    definition: xrisk.tpAUC_KL_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, tau: float = 1.0, lam: float = 1.0,
                 gammas: tuple[float, float] = (0.9, 0.9), margin: float = 1.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.tpAUC_KL_Loss(num_samples, tau=tau, lam=lam, gammas=gammas,
                                         margin=margin, surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class tpAUC_CVaR_Loss(XRiskLoss):
    """Two-way partial AUC by double CVaR (STACO) as a ``tf.Module``; the rows
    ``u`` = [u, s1, dual] and the scalar ``s2`` are ``tf.Variable``\\ s.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.tpAUC_CVaR_Loss(num_samples=4, margin=1.0, dtype="float64")
    >>> scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    >>> loss = loss_fn(scores, tf.constant([1, 0, 1, 0]), tf.constant([0, 1, 2, 3]))
    >>> round(float(loss), 4), loss_fn.u[0].numpy().round(4).tolist(), float(loss_fn.s2)
    (1.34, [0.34, 0.2, 1.0], 0.1)
    """

    definition_type = xrisk.tpAUC_CVaR_Loss
    definition: xrisk.tpAUC_CVaR_Loss  # the type __init__ builds (typed methods)

    def __init__(self, num_samples: int, *, margin: float = 0.5, alpha: float = 0.1,
                 beta_0: float = 0.1, beta_1: float = 0.1, theta_0: float = 0.5,
                 theta_1: float = 0.5, surrogate: str = "squared_hinge", scale: float = 1.0,
                 dtype: DType = None, device: Device = None) -> None:
        definition = xrisk.tpAUC_CVaR_Loss(num_samples, margin=margin, alpha=alpha, beta_0=beta_0,
                                           beta_1=beta_1, theta_0=theta_0, theta_1=theta_1,
                                           surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


class ListwiseCELoss(XRiskLoss):
    """Listwise cross-entropy (the warm-up of SONG) as a ``tf.Module``; the rows
    ``u`` = [u~, log-shift] per interaction are a ``tf.Variable``.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.ListwiseCELoss(num_interactions=5, gamma=1.0, dtype="float64")
    >>> scores = tf.constant([[2.0, 0.5, 1.0], [1.0, 0.0, 3.0]], dtype=tf.float64)
    >>> loss = loss_fn(scores, tf.constant([[0], [3]]))  # per query: 1 positive, 2 negatives
    >>> round(float(loss), 4), float(loss_fn.u[3, 0] * tf.exp(loss_fn.u[3, 1])) > 3
    (0.669, True)
    """

    definition_type = xrisk.ListwiseCELoss
    definition: xrisk.ListwiseCELoss  # the type __init__ builds (typed methods)

    def __init__(self, num_interactions: int, *, gamma: float = 0.9, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.ListwiseCELoss(num_interactions, gamma=gamma)
        super().__init__(definition, dtype=dtype, device=device)


class NDCGLoss(XRiskLoss):
    """NDCG (SONG) or top-K NDCG (K-SONG, ``top_k=K``) as a ``tf.Module``; ``u`` per
    interaction and ``lambda_q``, ``s_q`` per query are ``tf.Variable``\\ s.

    Examples
    --------
    >>> import tensorflow as tf, xrisk.tensorflow as xr
    >>> loss_fn = xr.NDCGLoss(num_interactions=4, num_queries=2, num_items=10, dtype="float64")
    >>> scores = tf.constant([[0.9, 0.1, 0.3], [0.2, 0.8, 0.5]], dtype=tf.float64)
    >>> loss = loss_fn(scores, relevance=tf.constant([[3.0, 1.0], [2.0, 2.0]]),
    ...                query=tf.constant([0, 1]), interaction=tf.constant([[0, 1], [2, 3]]),
    ...                num_relevant=tf.constant([2.0, 2.0], dtype=tf.float64),
    ...                ideal_dcg=tf.constant([7.63, 4.89], dtype=tf.float64))
    >>> round(float(loss), 4), loss_fn.u.numpy().round(4).tolist()
    (0.2142, [0.36, 1.704, 1.575, 0.495])
    """

    definition_type = xrisk.NDCGLoss
    definition: xrisk.NDCGLoss  # the type __init__ builds (typed methods)

    def __init__(self, num_interactions: int, num_queries: int, num_items: int | None, *,
                 gamma0: float = 0.9, gamma1: float = 0.9, eta0: float = 0.01, margin: float = 1.0,
                 top_k: int | None = None, top_k_version: str = "theo", tau_1: float = 0.01,
                 tau_2: float = 0.0001, sigmoid_alpha: float = 2.0,
                 surrogate: str = "squared_hinge", scale: float = 1.0, dtype: DType = None,
                 device: Device = None) -> None:
        definition = xrisk.NDCGLoss(num_interactions, num_queries, num_items, gamma0=gamma0,
                                    gamma1=gamma1, eta0=eta0, margin=margin, top_k=top_k,
                                    top_k_version=top_k_version, tau_1=tau_1, tau_2=tau_2,
                                    sigmoid_alpha=sigmoid_alpha, surrogate=surrogate, scale=scale)
        super().__init__(definition, dtype=dtype, device=device)


# --- end of the generated classes ---


def pAUCLoss(mode: str = "1w", **kwargs: Any) -> XRiskLoss:
    """The partial-AUC loss of ``mode``, built with ``kwargs`` (LibAUC's front door).

    ``"SOPA"`` -> :class:`pAUC_CVaR_Loss`, ``"SOPAs"`` / ``"1w"`` -> :class:`pAUC_DRO_Loss`,
    ``"SOTAs"`` / ``"2w"`` -> :class:`tpAUC_KL_Loss`, ``"STACO"`` -> :class:`tpAUC_CVaR_Loss`;
    another mode raises a ValueError that lists these.

    Examples
    --------
    >>> import xrisk.tensorflow as xr
    >>> loss_fn = xr.pAUCLoss("2w", num_samples=100, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau
    ('tpAUC_KL_Loss', 0.5)
    """
    return ADAPTED[pauc_class(mode)](**kwargs)


def MIDAMLoss(mode: str = "attention", **kwargs: Any) -> XRiskLoss:  # noqa: N802
    """The multi-instance AUC loss of ``mode``, built with ``kwargs`` (LibAUC's front door).

    ``"softmax"`` -> :class:`MIDAM_softmax_pooling_loss`, ``"attention"`` ->
    :class:`MIDAM_attention_pooling_loss`; another mode raises a ValueError that lists these.

    Examples
    --------
    >>> import xrisk.tensorflow as xr
    >>> loss_fn = xr.MIDAMLoss("softmax", num_samples=100, tau=0.5)
    >>> type(loss_fn).__name__, loss_fn.tau
    ('MIDAM_softmax_pooling_loss', 0.5)
    """
    return ADAPTED[midam_class(mode)](**kwargs)
