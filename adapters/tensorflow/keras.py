"""Keras 3 face of the TensorFlow losses: ``model.compile(loss=...)``, ``model.fit`` and callbacks.

Three pieces make an xrisk loss train in ``model.fit`` as it does in a ``GradientTape`` loop:

- :class:`KerasLoss` wraps any :mod:`xrisk.tensorflow` loss as a ``keras.losses.Loss``;
  :meth:`KerasLoss.attach` makes the model own the loss's state tables and auxiliaries (so
  ``fit`` differentiates a min-max loss's a, b, alpha, and ``model.save_weights`` /
  ``tf.train.Checkpoint(model=model)`` carry the state).
- :func:`fit_dataset` is the ``tf.data`` pipeline of a sampler's batches with known
  cardinality, whose epoch advances only with the batches the loss trained on.
- :class:`UpdateRegularizer` and :class:`StageWiseDecay` are LibAUC's epoch recipe as
  ``keras.callbacks.Callback``\\ s.

How the targets reach the loss
------------------------------
Keras hands a compiled loss ``(y_true, y_pred)`` only, never ``x``, and its ``CompileLoss``
requires ``y_true`` to have the structure of ``y_pred``: a dict or tuple ``y`` of label and
index for a single-output model fails with "y_true and y_pred have different structures"
(Keras 3.15, checked by the tests). So the targets travel as one tensor, the columns of the
loss's target inputs side by side (``labels``, then ``index``, ...), which
:meth:`KerasLoss.pack` builds and the loss splits again by the inputs the core loss declares.
The packed tensor is int64 when every target is integral (labels, index, task: exact at any
size) and float64 otherwise (e.g. multi-label targets with NaN for a missing label).
``KerasLoss.__call__`` keeps that dtype (``keras.losses.Loss`` would cast ``y_true`` to the
float dtype of the loss). Keras casts float numpy arrays given to ``fit`` to ``floatx``, which
keeps indices exact below 2**24 only: give float targets through ``tf.data``
(:func:`fit_dataset`) instead.

A loss with several score inputs (the two views of a contrastive loss, MIDAM's scores and
attention weights) takes them stacked on axis 1 of ``y_pred``: ``keras.ops.stack([z1, z2],
axis=1)`` as the model's output.

Examples
--------
>>> import numpy as np, keras, xrisk.tensorflow as xr
>>> x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
>>> labels = (x[:, 0] > 0.5).astype("int64")
>>> loss = xr.KerasLoss(xr.APLoss(num_samples=32))
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, activation="sigmoid")])
>>> model.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=loss.attach(model))
>>> y = loss.pack(labels=labels, index=np.arange(32))  # int64, shape (32, 2)
>>> history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
>>> int(loss.batches_trained), bool(np.any(loss.loss_fn.u.numpy() != 0))
(8, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

# Whether a GradientTape is recording: the one signal that tells fit's train_step (inside a
# tape) from its test_step (evaluate, validation_data) at trace time; Keras passes the loss
# neither ``training`` nor the model.
from tensorflow.python.eager import record as _tape_record

from .data import BagSampler, IndexedDataset, TriSampler, _TFSource
from .losses import XRiskLoss
from .optim import XRiskOptimizer

__all__ = ["KerasLoss", "fit_dataset", "UpdateRegularizer", "StageWiseDecay"]

#: Input kinds that Keras's y_true carries (the "score" inputs are y_pred).
_INTEGER_KINDS = ("index", "label")
#: 2**53: float64 holds every integer up to it exactly.
_FLOAT64_EXACT = 2**53


class KerasLoss(keras.losses.Loss):
    """An :mod:`xrisk.tensorflow` loss as a ``keras.losses.Loss`` for ``model.compile``.

    ``y_pred`` is the loss's score input (several score inputs stacked on axis 1);
    ``y_true`` is :meth:`pack`'s tensor of the target inputs. In ``fit``'s training step (a
    recording ``GradientTape``) a call is the wrapped loss's call: it writes the batch's state
    rows and counts :attr:`batches_trained`. Anywhere else (``evaluate``, ``fit``'s
    ``validation_data``, a call outside a tape) it computes the same value from the current
    state and auxiliaries and writes nothing, so validation batches never overwrite the
    training rows of their indices.

    Parameters
    ----------
    loss_fn : xrisk.tensorflow.XRiskLoss
        The loss (its state and auxiliaries stay in it: ``loss_fn.export_state()``,
        ``update_smoothing``, ... work as usual).
    targets : sequence of str, optional
        The target inputs that ``y_true`` packs, in the order the loss declares its inputs.
        Default: the loss's required non-score inputs (e.g. ``("labels", "index")`` for
        :class:`~xrisk.tensorflow.APLoss`, ``("labels",)`` for
        :class:`~xrisk.tensorflow.AUCMLoss`). Add optional ones by name, e.g.
        ``("labels", "index", "task")`` for a multi-label loss fed by a ``TriSampler``.
    name : str, optional
        The loss's name in Keras's logs. Default: the core loss's name.

    Attributes
    ----------
    loss_fn : xrisk.tensorflow.XRiskLoss
    targets : tuple of str
    batches_trained : tf.Variable, int64 scalar
        Training calls so far; :func:`fit_dataset` reads the epoch from it, and
        :meth:`attach` saves it with the model's weights.

    Raises
    ------
    TypeError
        ``loss_fn`` is not an :mod:`xrisk.tensorflow` loss.
    ValueError
        ``targets`` names a score input, an unknown input, a duplicate, or leaves out a
        required one.

    Examples
    --------
    >>> import numpy as np, tensorflow as tf, xrisk.tensorflow as xr
    >>> loss = xr.KerasLoss(xr.AUCMLoss(dtype="float64"))
    >>> loss.targets
    ('labels',)
    >>> y_true = loss.pack(labels=np.array([0, 0, 1, 1]))
    >>> y_pred = tf.constant([[0.1], [0.4], [0.35], [0.8]], tf.float64)
    >>> by_hand = loss.loss_fn(y_pred[:, 0], tf.constant([0, 0, 1, 1]))  # outside a tape:
    >>> float(loss(y_true, y_pred)) == float(by_hand)  # the same value, nothing written
    True
    """

    def __init__(self, loss_fn: XRiskLoss, *, targets: Sequence[str] | None = None,
                 name: str | None = None) -> None:
        if not isinstance(loss_fn, XRiskLoss):
            raise TypeError(
                f"KerasLoss: loss_fn is a {type(loss_fn).__name__} ({loss_fn!r:.80}); expected "
                "an xrisk.tensorflow loss. Fix: KerasLoss(xrisk.tensorflow.APLoss(...)); "
                "xrisk.torch and xrisk.jax losses do not run inside Keras's TensorFlow graph.")
        definition = loss_fn.definition
        inputs = definition.inputs()
        self._score_inputs = tuple(spec for spec in inputs if spec.kind == "score")
        others = {spec.name: spec for spec in inputs if spec.kind != "score"}
        required = tuple(name for name, spec in others.items() if not spec.optional)
        chosen = required if targets is None else tuple(targets)
        unknown = [t for t in chosen if t not in others]
        missing = [t for t in required if t not in chosen]
        if unknown or missing or len(set(chosen)) != len(chosen):
            raise ValueError(
                f"KerasLoss: targets={chosen!r} for {definition.name}, whose target inputs are "
                f"{tuple(others)} (required: {required}; the score inputs "
                f"{tuple(s.name for s in self._score_inputs)} are y_pred); "
                f"unknown {unknown}, missing {missing}. Fix: pass each target input once, "
                f"e.g. targets={required!r}.")
        # In the declared order, whatever order the user listed them in.
        self._target_inputs = tuple(others[n] for n in others if n in chosen)
        self.targets = tuple(spec.name for spec in self._target_inputs)
        super().__init__(name=name or definition.name)
        self.loss_fn = loss_fn
        with tf.init_scope():
            self.batches_trained = tf.Variable(0, dtype=tf.int64, trainable=False,
                                               name="batches_trained")
        self._attached = False

    # -- targets ----------------------------------------------------------------------------
    def pack(self, **targets: Any) -> Any:
        """``y_true`` for ``fit``: the target inputs side by side, shape (B, columns).

        Each target is flattened to (B, -1) and the columns concatenated in :attr:`targets`
        order: int64 if every target is integral, float64 otherwise. numpy in, numpy out; a
        TensorFlow tensor anywhere gives a tensor (usable inside ``tf.data`` maps).

        Raises
        ------
        ValueError
            A target missing or unknown, targets of different lengths, or an integer beyond
            2**53 packed beside float targets.
        """
        if not self.targets:
            raise ValueError(
                f"{self.name}.pack: this loss takes no targets (its inputs are the scores "
                "only). Fix: fit(x) without y; the loss ignores y_true.")
        unknown = sorted(set(targets) - set(self.targets))
        missing = [t for t in self.targets if t not in targets]
        if unknown or missing:
            raise ValueError(
                f"{self.name}.pack: got targets {sorted(targets)}; expected exactly "
                f"{list(self.targets)} (unknown {unknown}, missing {missing}). Fix: "
                f"loss.pack({', '.join(f'{t}=...' for t in self.targets)}), or build the "
                "KerasLoss with targets= naming the inputs you pack.")
        values = [targets[t] for t in self.targets]
        if any(isinstance(v, tf.Tensor | tf.Variable) for v in values):
            return self._pack_tensors(values)
        arrays = [np.asarray(v) for v in values]
        lengths = {t: a.shape[0] if a.ndim else None for t, a in zip(self.targets, arrays,
                                                                        strict=True)}
        if None in lengths.values() or len(set(lengths.values())) != 1:
            raise ValueError(
                f"{self.name}.pack: targets have leading lengths {lengths}; expected one row "
                "per example in every target. Fix: pass arrays of the same length B.")
        integral = all(a.dtype == bool or np.issubdtype(a.dtype, np.integer) for a in arrays)
        dtype = np.int64 if integral else np.float64
        if not integral:
            for t, a in zip(self.targets, arrays, strict=True):
                if np.issubdtype(a.dtype, np.integer) and a.size and np.abs(a).max() >= \
                        _FLOAT64_EXACT:
                    raise ValueError(
                        f"{self.name}.pack: {t} holds integers up to {np.abs(a).max()}, beside "
                        "float targets that make the packed dtype float64, which is exact "
                        f"below 2**53 only. Fix: renumber {t} below 2**53.")
        rows = int(arrays[0].shape[0])
        return np.concatenate([a.reshape(rows, -1).astype(dtype) for a in arrays], axis=1)

    def _pack_tensors(self, values: list[Any]) -> tf.Tensor:
        tensors = [tf.convert_to_tensor(v) for v in values]
        integral = all(t.dtype.is_integer or t.dtype == tf.bool for t in tensors)
        dtype = tf.int64 if integral else tf.float64
        rows = tf.shape(tensors[0], out_type=tf.int64)[0]
        flat = [tf.reshape(tf.cast(t, dtype), tf.stack([rows, -1])) for t in tensors]
        return tf.concat(flat, axis=1)

    def _unpack(self, y_true: tf.Tensor, y_pred: Any) -> tuple[list[tf.Tensor], dict]:
        """The score inputs from ``y_pred`` and the named target inputs from ``y_true``."""
        y_pred = tf.convert_to_tensor(y_pred)
        count = len(self._score_inputs)
        if count == 1:
            scores = [y_pred]
            score_shapes = [y_pred.shape]
        else:
            if y_pred.shape.rank is None or y_pred.shape.rank < 2 or y_pred.shape[1] != count:
                raise ValueError(
                    f"{self.name}: y_pred has shape {y_pred.shape}; expected the "
                    f"{count} score inputs {tuple(s.name for s in self._score_inputs)} stacked "
                    f"on axis 1, shape (B, {count}, ...). Fix: end the model with "
                    f"keras.ops.stack([...], axis=1).")
            scores = [y_pred[:, k] for k in range(count)]
            score_shapes = [s.shape for s in scores]
        sizes = dict(self.loss_fn.definition.dims())
        for spec, shape in zip(self._score_inputs, score_shapes, strict=True):
            for dim, size in zip(spec.shape[1:], shape[1:], strict=False):
                if size is not None:
                    sizes.setdefault(dim, size)
        if not self._target_inputs:  # scores only (InfoNCE): fit(x) gives y_true None
            return scores, {}
        y_true = tf.convert_to_tensor(y_true)
        if y_true.shape.rank == 1:
            y_true = y_true[:, None]
        widths = self._widths(sizes, y_true.shape[-1])
        columns = tf.split(y_true, widths, axis=1)
        named = {}
        for spec, column in zip(self._target_inputs, columns, strict=True):
            dims = [sizes[d] for d in spec.shape[1:]]
            value = tf.reshape(column, [-1, *dims]) if dims else column[:, 0]
            if spec.kind in _INTEGER_KINDS:
                value = tf.cast(value, tf.int64)
            named[spec.name] = value
        return scores, named

    def _widths(self, sizes: dict[str, int], total: int | None) -> list[int]:
        """Columns of each target: the product of its non-leading dims, one free dim solved
        from the packed width (e.g. a ranking loss's positives per query)."""
        unknown = {d for spec in self._target_inputs for d in spec.shape[1:] if d not in sizes}
        if len(unknown) > 1 or (unknown and total is None):
            raise ValueError(
                f"{self.name}: cannot split y_true of width {total} into {self.targets}: the "
                f"sizes of {sorted(unknown)} are unknown. Fix: give y_true a static width "
                "(tf.data batches of known shape) and at most one free dimension.")
        if unknown:
            (free,) = unknown
            known = sum(math.prod(sizes[d] for d in spec.shape[1:])
                        for spec in self._target_inputs if free not in spec.shape[1:])
            uses = sum(1 for spec in self._target_inputs if free in spec.shape[1:])
            size, remainder = divmod(int(total) - known, uses)  # type: ignore[arg-type]
            if remainder or size < 1:
                raise ValueError(
                    f"{self.name}: y_true has {total} columns, which do not split into "
                    f"{self.targets} ({known} fixed columns, {uses} of width {free}). Fix: "
                    "build y_true with loss.pack(...).")
            sizes[free] = size
        widths = [math.prod(sizes[d] for d in spec.shape[1:]) for spec in self._target_inputs]
        if total is not None and sum(widths) != total:
            raise ValueError(
                f"{self.name}: y_true has {total} columns; expected {sum(widths)} = "
                f"{dict(zip(self.targets, widths, strict=True))} for the targets. Fix: build "
                "y_true with loss.pack(...), with the targets this loss was built for.")
        return widths

    # -- the call ---------------------------------------------------------------------------
    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> tf.Tensor:
        """The loss of one batch (a scalar in the loss's dtype); see the class notes."""
        if sample_weight is not None:
            raise ValueError(
                f"{self.name}: received sample_weight (or class_weight); an X-risk is not a "
                "mean of per-example terms, so a weight per example has no meaning here. Fix: "
                "drop sample_weight/class_weight from fit (a DualSampler sets the share of "
                "positives per batch instead).")
        scores, named = self._unpack(y_true, y_pred)
        inputs = {spec.name: s for spec, s in zip(self._score_inputs, scores, strict=True)}
        inputs.update(named)
        if not _tape_record.could_possibly_record():
            return self._evaluate(inputs)
        if not self._attached:
            raise RuntimeError(
                f"{self.name}: trained before attach(model); fit would neither differentiate "
                "the loss's auxiliaries nor save its state with the model. Fix: "
                "model.compile(loss=loss.attach(model), ...) before fit.")
        loss = self.loss_fn(**inputs)
        self.batches_trained.assign_add(1)
        return loss

    def _evaluate(self, inputs: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """The loss from the current state, with the state and auxiliaries as tensors so the
        backend writes into copies (tensor_scatter), not into the variables."""
        definition = self.loss_fn.definition
        state = definition.state_type(*(tf.convert_to_tensor(v) for v in self.loss_fn.state))
        params = definition.params_type(*(tf.convert_to_tensor(v)
                                          for v in self.loss_fn.aux_params))
        loss, _ = definition.apply(state, params=params, **inputs)
        return loss

    # -- the model owns the variables -------------------------------------------------------
    def attach(self, model: keras.Model) -> KerasLoss:
        """Make ``model`` own the loss's variables; returns the loss (for ``compile``).

        Each state table, auxiliary and :attr:`batches_trained` becomes a weight of the model
        (a ``keras.Variable`` over the very ``tf.Variable`` the loss writes): the trainable
        auxiliaries join ``model.trainable_weights``, so ``fit`` differentiates them (a Keras
        optimizer takes the saddle-point step, an ascent auxiliary keeping its projection as
        the variable's constraint; :class:`~xrisk.tensorflow.PESG` ascends them itself), and
        ``model.save_weights`` / ``load_weights`` and ``tf.train.Checkpoint(model=model)``
        save and restore the state. Attach before the model's first ``fit`` (the optimizer
        builds its slots for the weights it first sees).

        Raises
        ------
        TypeError
            ``model`` is not a ``keras.Model``.
        ValueError
            ``model`` is a subclassed model that is already built (nothing is attached).
        """
        if not isinstance(model, keras.Model):
            raise TypeError(
                f"{self.name}.attach: model is a {type(model).__name__}; expected the "
                "keras.Model that is compiled with this loss. Fix: loss.attach(model).")
        variables = {"batches_trained": self.batches_trained}
        for name in self.loss_fn.definition.state_shapes():
            variables[name] = getattr(self.loss_fn, name)
        prefix = f"xrisk_{self.name}"
        locked = getattr(getattr(model, "_tracker", None), "locked", False)
        if locked:  # a built subclassed model (Sequential and functional ones stay open)
            raise ValueError(
                f"{self.name}.attach: the {type(model).__name__} model is already built, and "
                "Keras adds no weights to a built subclassed model; expected a model not yet "
                "called. Fix: attach right after constructing the model (or in its "
                "__init__, loss.attach(self)), before its first call or fit.")
        for name, variable in variables.items():
            wrapped = keras.Variable(initializer=variable, shape=variable.shape,
                                     dtype=variable.dtype.name, trainable=variable.trainable,
                                     name=f"{prefix}_{name}")
            if wrapped.value is not variable:  # Keras copied it: training would not reach it
                raise RuntimeError(
                    f"{self.name}.attach: this Keras version copies a tf.Variable given as a "
                    "keras.Variable's initializer; expected it to wrap it (Keras 3.x). Fix: "
                    "train in a GradientTape loop with the loss itself.")
            wrapped.constraint = getattr(variable, "constraint", None)
            setattr(model, f"{prefix}_{name}", wrapped)
        self._attached = True
        return self

    def get_config(self) -> dict[str, Any]:
        """Keras's config: the name and targets (the loss object itself is not serialised)."""
        return {"name": self.name, "targets": list(self.targets)}

    def __repr__(self) -> str:
        return f"xrisk.tensorflow.KerasLoss({self.loss_fn!r}, targets={self.targets!r})"


def fit_dataset(data: IndexedDataset, sampler: Any, loss: KerasLoss) -> tf.data.Dataset:
    """``tf.data`` pipeline of ``(x, loss.pack(...))`` batches for ``model.fit``.

    Batch ``p`` of an epoch is ``data[sampler.batch(p, epoch)]``, with ``epoch =
    loss.batches_trained // len(sampler)``: the pipeline maps batch numbers (so its
    cardinality is ``len(sampler)``, and ``fit`` knows the epoch's length from the first
    epoch on), and the epoch moves only when the loss has trained on a whole epoch. Taking a
    batch to look at it (``next(iter(ds))``, ``ds.take(1)``), a prefetching iterator or an
    evaluation pass consumes nothing. The sampler itself is only read (``sampler.batch`` is a
    pure function of seed, epoch and position). Checkpointing the model (with the loss
    attached) saves ``batches_trained``, so a run restored from it continues with the next
    epoch's order; a run stopped mid-epoch repeats that epoch's first batches.

    Parameters
    ----------
    data : xrisk.tensorflow.IndexedDataset
        In-memory arrays (gathered inside the graph) or any map-style dataset, read lazily
        (see :meth:`IndexedDataset.gather`).
    sampler : xrisk.tensorflow sampler
        A ``DualSampler``, ``RandomSampler``, or ``TriSampler`` in classification mode (its
        task ids are packed as the ``task`` target when the loss takes it).
    loss : KerasLoss
        The loss ``fit`` trains with: its targets are packed, its counter sets the epoch.

    Raises
    ------
    TypeError
        ``data`` is not the TensorFlow ``IndexedDataset``, ``loss`` not a :class:`KerasLoss`,
        or ``sampler`` has no ``batch(position, epoch)``.
    ValueError
        A sampler whose batches are not dataset rows, or a loss needing a target this
        pipeline does not have.

    Examples
    --------
    >>> import numpy as np, xrisk.tensorflow as xr
    >>> labels = np.array([1] * 4 + [0] * 12)
    >>> data = xr.IndexedDataset(np.arange(32.0).reshape(16, 2), labels)
    >>> sampler = xr.DualSampler(labels, 4, sampling_rate=0.5, seed=0)
    >>> loss = xr.KerasLoss(xr.APLoss(num_samples=16))
    >>> ds = xr.fit_dataset(data, sampler, loss)
    >>> int(ds.cardinality()) == len(sampler)
    True
    >>> x, y = next(iter(ds))  # a look: nothing moves
    >>> bool((y[:, 1].numpy() == sampler.batch(0, epoch=0)).all()), int(loss.batches_trained)
    (True, 0)
    """
    if not isinstance(data, IndexedDataset):
        raise TypeError(
            f"fit_dataset: data is a {type(data).__name__}; expected an "
            "xrisk.tensorflow.IndexedDataset. Fix: fit_dataset(xr.IndexedDataset(x, y), ...).")
    if not isinstance(loss, KerasLoss):
        raise TypeError(
            f"fit_dataset: loss is a {type(loss).__name__}; expected the KerasLoss that fit "
            "trains with. Fix: fit_dataset(data, sampler, xr.KerasLoss(loss_fn)).")
    index_batches = isinstance(sampler, _TFSource) and not isinstance(sampler, BagSampler)
    if not index_batches:  # (a flag, so that sampler keeps its Any type for mypy)
        raise TypeError(
            f"fit_dataset: sampler is a {type(sampler).__name__}; expected an "
            "xrisk.tensorflow DualSampler, RandomSampler or TriSampler (a BagSampler's "
            "batches are bags of instances). Fix: pass e.g. xr.DualSampler(labels, "
            "batch_size).")
    tri = isinstance(sampler, TriSampler)
    if tri and sampler.mode != "classification":
        raise ValueError(
            "fit_dataset: TriSampler(mode='ranking') yields item and query ids, not dataset "
            "rows; expected a binary or classification sampler. Fix: feed a ranking loss "
            "from your own pipeline with loss.pack(...).")
    available = {"labels", "index", *(("task",) if tri else ())}
    lacking = [t for t in loss.targets if t not in available]
    if lacking:
        raise ValueError(
            f"fit_dataset: {loss.name} takes targets {loss.targets}; this pipeline has "
            f"{sorted(available)}, not {lacking}. Fix: build the KerasLoss with "
            f"targets= among {sorted(available)}, or map your own dataset with loss.pack.")
    length = len(sampler)
    spec = sampler._signature()  # the sampler's batch shapes (tf.TensorSpec)
    specs = tuple(spec) if isinstance(spec, tuple) else (spec,)

    def batch_at(position: np.ndarray, trained: np.ndarray) -> list[np.ndarray]:
        epoch = int(trained) // length
        out = sampler.batch(int(position), epoch=epoch)
        return list(out) if isinstance(out, tuple) else [out]

    counter = loss.batches_trained

    def keys(position: tf.Tensor) -> tuple[tf.Tensor, ...]:
        parts = tf.numpy_function(batch_at, [position, counter.read_value()],
                                  [s.dtype for s in specs], stateful=True)
        for part, s in zip(parts, specs, strict=True):
            part.set_shape(s.shape)
        return tuple(parts)

    def example(position: tf.Tensor) -> tuple[Any, tf.Tensor]:
        parts = keys(position)
        index = parts[0]
        x, y = data.gather(index)
        named = {"labels": y, "index": index}
        if tri:
            named["task"] = parts[1]
        return x, loss.pack(**{t: named[t] for t in loss.targets})

    return tf.data.Dataset.range(length).map(example)


def _schedule(owner: str, epochs: Iterable[int]) -> frozenset[int]:
    values = list(epochs)
    bad = [e for e in values if type(e) is not int or e < 0]
    if bad or not values:
        raise ValueError(
            f"{owner}: epochs={values!r}; expected a non-empty list of epoch numbers >= 0 "
            "(Keras counts from 0). Fix: e.g. epochs=[50, 75].")
    return frozenset(values)


def _factor(owner: str, decay_factor: float) -> float:
    if isinstance(decay_factor, bool) or not isinstance(decay_factor, int | float) or \
            not decay_factor > 0 or not math.isfinite(decay_factor):
        raise ValueError(
            f"{owner}: decay_factor={decay_factor!r}; expected a finite number > 0 (10 divides "
            "the learning rate by 10). Fix: pass e.g. decay_factor=10.")
    return float(decay_factor)


class UpdateRegularizer(keras.callbacks.Callback):
    """LibAUC's stage-wise recipe for the epoch-decay optimizers (PESG, PDSCA, SOAP, ...):
    at the start of each epoch in ``epochs``, ``model.optimizer.update_regularizer(
    decay_factor)`` (the reference point becomes the average iterate of the stage and the
    learning rate is divided by ``decay_factor``).

    Parameters
    ----------
    epochs : iterable of int
        Keras's epoch numbers (from 0) that start a new stage, e.g. ``[50, 75]``.
    decay_factor : float, default 10.0

    Raises
    ------
    ValueError
        No epochs, a negative or non-integer epoch, a decay factor that is not > 0.
    TypeError
        (when training starts) the model's optimizer is not an xrisk optimizer.

    Examples
    --------
    >>> import xrisk.tensorflow as xr
    >>> callback = xr.UpdateRegularizer(epochs=[50, 75], decay_factor=10)
    >>> sorted(callback.epochs)
    [50, 75]
    """

    def __init__(self, epochs: Iterable[int], decay_factor: float = 10.0) -> None:
        super().__init__()
        self.epochs = _schedule("UpdateRegularizer", epochs)
        self.decay_factor = _factor("UpdateRegularizer", decay_factor)

    def on_train_begin(self, logs: Any = None) -> None:
        optimizer = self.model.optimizer
        if not isinstance(optimizer, XRiskOptimizer):
            raise TypeError(
                f"UpdateRegularizer: the model's optimizer is a {type(optimizer).__name__}; "
                "expected an xrisk optimizer (it keeps the epoch-decay reference point). Fix: "
                "compile with e.g. xr.PESG(...), or use StageWiseDecay for a Keras optimizer.")

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        if epoch in self.epochs:
            self.model.optimizer.update_regularizer(self.decay_factor)


class StageWiseDecay(keras.callbacks.Callback):
    """Stage-wise learning-rate decay: the learning rate is divided by ``decay_factor`` at
    the start of each epoch in ``epochs``.

    An xrisk optimizer decays through ``update_lr`` (its learning-rate divisor, saved with
    the optimizer's variables); a Keras optimizer with a constant learning rate has its
    ``learning_rate`` variable divided.

    Parameters
    ----------
    epochs : iterable of int
        Keras's epoch numbers (from 0), e.g. ``[50, 75]``.
    decay_factor : float, default 10.0

    Raises
    ------
    ValueError
        No epochs, a negative or non-integer epoch, a decay factor that is not > 0.
    TypeError
        (when training starts) a Keras optimizer whose learning rate is a schedule.

    Examples
    --------
    >>> import keras, numpy as np, xrisk.tensorflow as xr
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    >>> _ = model.fit(np.ones((1, 2)), np.ones((1, 1)), epochs=2, verbose=0,
    ...               callbacks=[xr.StageWiseDecay(epochs=[1], decay_factor=10)])
    >>> round(float(model.optimizer.learning_rate), 6)
    0.05
    """

    def __init__(self, epochs: Iterable[int], decay_factor: float = 10.0) -> None:
        super().__init__()
        self.epochs = _schedule("StageWiseDecay", epochs)
        self.decay_factor = _factor("StageWiseDecay", decay_factor)

    def on_train_begin(self, logs: Any = None) -> None:
        optimizer = self.model.optimizer
        if not isinstance(optimizer, XRiskOptimizer) and not isinstance(
                getattr(optimizer, "_learning_rate", None), keras.Variable):
            raise TypeError(
                f"StageWiseDecay: the {type(optimizer).__name__} optimizer's learning rate is "
                "a schedule; expected a constant one to divide. Fix: decay inside the "
                "schedule, or compile with a float learning_rate.")

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        if epoch not in self.epochs:
            return
        optimizer = self.model.optimizer
        if isinstance(optimizer, XRiskOptimizer):
            optimizer.update_lr(self.decay_factor)
        else:
            rate = optimizer.learning_rate
            optimizer.learning_rate.assign(rate / self.decay_factor)
