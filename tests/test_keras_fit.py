"""Keras-native training (issue 20, point 5): ``model.compile(loss=xr.KerasLoss(...))`` and
``model.fit`` train exactly like a GradientTape loop, min-max losses included; the epoch
callbacks; ``fit_dataset``'s known cardinality and its peek-safe epoch; the loss's state in
Keras checkpoints; lazily read sources in ``tf.data``."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

import xrisk
import xrisk.tensorflow as xr
from tests._cases import CASES, NUM_FEATURES

N, BATCH = 24, 6


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    # float32 values: Keras casts float numpy inputs to floatx before the float64 model
    x = rng.normal(size=(N, 3)).astype("float32").astype("float64")
    labels = (rng.random(N) < 0.35).astype("int64")
    labels[:2] = 1
    return x, labels


def _model(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((3,), dtype="float64"),
                             keras.layers.Dense(4, activation="tanh", dtype="float64"),
                             keras.layers.Dense(1, activation="sigmoid", dtype="float64")])


# --------------------------------------------------------------------- why y is one tensor

def test_keras_refuses_a_dict_y_for_a_single_output_model():
    """The premise of KerasLoss.pack: Keras 3's CompileLoss needs y_true shaped like y_pred,
    so a dict (or tuple) of label and index cannot reach a single-output model's loss."""
    class Probe(keras.losses.Loss):
        def __call__(self, y_true, y_pred, sample_weight=None):
            return tf.reduce_mean(y_pred)

    model = _model()
    model.compile(loss=Probe(), optimizer="sgd")
    x, labels = _data()
    with pytest.raises(ValueError, match="different structures"):
        model.fit(x, {"labels": labels, "index": np.arange(N)}, batch_size=BATCH, verbose=0)


# --------------------------------------------------------- every loss: Keras == by hand

def _batch_inputs(name, data):
    """One batch of the case's inputs (scores from the harness's features and link)."""
    case = CASES[name]
    definition = case.make(6, data.draw(case.hyper, label="hyper"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    inputs = case.batch(data.draw, definition, rng)
    w = rng.normal(size=NUM_FEATURES)
    score_names = [s.name for s in definition.inputs() if s.kind == "score"]
    return definition, inputs, w, score_names, case.link


def _twin(definition):
    cls = getattr(xr, type(definition).__name__)
    loss = cls.__new__(cls)
    xr.XRiskLoss.__init__(loss, definition, dtype="float64")
    return loss


@pytest.mark.parametrize("name", sorted(xrisk.LOSSES))
@settings(max_examples=2, deadline=None)
@given(data=st.data())
def test_every_loss_through_keras_equals_the_loss_called_by_hand(name, data):
    """KerasLoss in a training step (a GradientTape) gives the wrapped loss's value,
    gradient and new state; evaluated outside a tape, the same value and no write."""
    definition, inputs, w0, score_names, link = _batch_inputs(name, data)
    targets = {k: v for k, v in inputs.items() if k not in score_names and v is not None}
    by_hand, wrapped = _twin(definition), _twin(definition)
    loss = xr.KerasLoss(wrapped, targets=tuple(targets))
    loss.attach(keras.Sequential([keras.Input((1,))]))
    y_true = loss.pack(**targets) if targets else None

    def scores(w):
        out = [tf.einsum("...f,f->...", tf.constant(inputs[k], tf.float64), w)
               for k in score_names]
        return [tf.sigmoid(s) if link == "sigmoid" else s for s in out]

    def run(call):
        w = tf.Variable(w0, dtype=tf.float64)
        with tf.GradientTape() as tape:
            value = call(scores(w))
        return float(value), tape.gradient(value, w).numpy()

    def direct(s):
        named = {k: tf.constant(v) for k, v in targets.items()}
        return by_hand(**dict(zip(score_names, s, strict=True)), **named)

    def through_keras(s):
        return loss(y_true, s[0] if len(s) == 1 else tf.stack(s, axis=1))

    before = wrapped.export_state()
    evaluated = float(through_keras(scores(tf.constant(w0))))  # outside a tape: no write
    for key, value in wrapped.export_state().items():
        assert_array_equal(value, before[key])
    want, want_grad = run(direct)
    got, got_grad = run(through_keras)
    assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert_allclose(evaluated, want, rtol=1e-12, atol=1e-14)
    assert_allclose(got_grad, want_grad, rtol=1e-10, atol=1e-14)
    for key, value in by_hand.export_state().items():
        if key != "__xrisk__":
            assert_allclose(wrapped.export_state()[key], value, rtol=1e-12, atol=1e-14)
    assert int(loss.batches_trained) == 1


# ----------------------------------------------------------------- fit == a tape loop

def _tape_loop(model, loss_fn, optimizer, batches, *, epochs, with_aux, decay_at=()):
    variables = [*model.trainable_variables,
                 *(loss_fn.trainable_variables if with_aux else ())]

    @tf.function
    def step(xb, yb, ib):
        with tf.GradientTape() as tape:
            value = loss_fn(model(xb)[:, 0], yb, ib)
        optimizer.apply_gradients(zip(tape.gradient(value, variables), variables))

    for epoch in range(epochs):
        if epoch in decay_at:
            optimizer.update_regularizer(10.0)
        for xb, yb, ib in batches:
            step(xb, yb, ib)


def _batches(x, labels):
    return [(x[s:s + BATCH], labels[s:s + BATCH], np.arange(N)[s:s + BATCH])
            for s in range(0, N, BATCH)]


#: label -> (loss, optimizer of the loss, whether the loss has auxiliaries to train)
FIT_RUNS = {
    "APLoss": (lambda: xr.APLoss(num_samples=N, dtype="float64"),
               lambda loss_fn: xr.SOAP(learning_rate=1e-2, epoch_decay=0.01), False),
    "AUCMLoss-PESG": (lambda: xr.AUCMLoss(dtype="float64"), lambda loss_fn: xr.PESG(
        loss_fn=loss_fn, learning_rate=0.1, epoch_decay=2e-3), True),
    "AUCMLoss-Adam": (lambda: xr.AUCMLoss(dtype="float64"),
                      lambda loss_fn: keras.optimizers.Adam(0.05), True),
}

@pytest.mark.parametrize(("label", "jit_compile"), [
    ("APLoss", False), ("AUCMLoss-PESG", False), ("AUCMLoss-Adam", False),
    ("AUCMLoss-Adam", True), ("AUCMLoss-PESG", True), ("APLoss", True)])
def test_fit_trains_exactly_like_a_gradient_tape_loop(label, jit_compile):
    make_loss, make_optimizer, with_aux = FIT_RUNS[label]
    x, labels = _data()
    fitted, fitted_fn = _model(), make_loss()
    loss = xr.KerasLoss(fitted_fn, targets=("labels", "index"))
    optimizer = make_optimizer(fitted_fn)
    fitted.compile(optimizer=optimizer, loss=loss.attach(fitted), jit_compile=jit_compile)
    decay = [xr.UpdateRegularizer(epochs=[1])] if label == "AUCMLoss-PESG" else []
    fitted.fit(x, loss.pack(labels=labels, index=np.arange(N)), batch_size=BATCH, epochs=2,
               shuffle=False, verbose=0, callbacks=decay)

    manual, manual_fn = _model(), make_loss()
    _tape_loop(manual, manual_fn, make_optimizer(manual_fn), _batches(x, labels), epochs=2,
               with_aux=with_aux, decay_at=(1,) if decay else ())
    for got, want in zip(fitted.layers, manual.layers, strict=True):
        for a, b in zip(got.get_weights(), want.get_weights(), strict=True):
            assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    for key, value in manual_fn.export_state().items():
        if key != "__xrisk__":
            assert_allclose(fitted_fn.export_state()[key], value, rtol=1e-9, atol=1e-12)
    assert int(loss.batches_trained) == 2 * N // BATCH
    if with_aux:
        assert float(fitted_fn.alpha) != 0.0  # alpha trained in fit
        assert float(fitted_fn.a) != 0.0


def test_a_keras_optimizer_keeps_alpha_projected_in_fit():
    """The attached alpha keeps its projection as the variable's constraint: from alpha =
    -1, one Adam step of 0.01 could not reach 0 without it."""
    x, labels = _data()
    model, loss_fn = _model(), xr.AUCMLoss(dtype="float64")
    loss_fn.alpha.assign(-1.0)
    loss = xr.KerasLoss(loss_fn)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss.attach(model))
    history = []
    model.fit(x, loss.pack(labels=labels), batch_size=BATCH, epochs=2, shuffle=False,
              verbose=0, callbacks=[keras.callbacks.LambdaCallback(
                  on_train_batch_end=lambda b, logs: history.append(float(loss_fn.alpha)))])
    assert min(history) >= 0.0
    assert history[-1] > 0.0  # and it ascends from the bound


def test_validation_and_evaluate_write_no_state():
    x, labels = _data()
    runs = []
    for validation in (None, (x[::-1].copy(), labels[::-1].copy())):
        model, loss_fn = _model(), xr.APLoss(num_samples=N, dtype="float64")
        loss = xr.KerasLoss(loss_fn)
        model.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=loss.attach(model))
        val = None if validation is None else (
            validation[0], loss.pack(labels=validation[1], index=np.arange(N)))
        model.fit(x, loss.pack(labels=labels, index=np.arange(N)), batch_size=BATCH,
                  epochs=2, shuffle=False, verbose=0, validation_data=val)
        if val is not None:
            before = loss_fn.u.numpy().copy()
            model.evaluate(*val, batch_size=BATCH, verbose=0)
            assert_array_equal(loss_fn.u.numpy(), before)
        runs.append(loss_fn.u.numpy())
        assert int(loss.batches_trained) == 2 * N // BATCH
    assert_array_equal(runs[1], runs[0])


# ------------------------------------------------------------------------ callbacks

def test_stage_wise_decay_divides_the_learning_rate_at_the_chosen_epochs():
    x, labels = _data()
    seen = {}
    for name, optimizer in (("keras", keras.optimizers.SGD(0.5)),
                            ("xrisk", xr.SGD(learning_rate=0.5))):
        model, loss_fn = _model(), xr.AUCMLoss(dtype="float64")
        loss = xr.KerasLoss(loss_fn)
        model.compile(optimizer=optimizer, loss=loss.attach(model))
        rates = []
        model.fit(x, loss.pack(labels=labels), batch_size=2 * BATCH, epochs=3, verbose=0,
                  callbacks=[xr.StageWiseDecay(epochs=[1, 2], decay_factor=10),
                             keras.callbacks.LambdaCallback(
                                 on_epoch_end=lambda e, logs, rates=rates, model=model: (
                                     rates.append(float(model.optimizer.learning_rate))))])
        seen[name] = rates
    assert_allclose(seen["keras"], [0.5, 0.05, 0.005], rtol=1e-6)
    assert_allclose(seen["xrisk"], [0.5, 0.05, 0.005], rtol=1e-12)


def test_callbacks_refuse_bad_schedules_and_optimizers():
    with pytest.raises(ValueError, match="epochs="):
        xr.UpdateRegularizer(epochs=[-1])
    with pytest.raises(ValueError, match="decay_factor="):
        xr.StageWiseDecay(epochs=[2], decay_factor=0)
    x, labels = _data()
    model, loss_fn = _model(), xr.AUCMLoss(dtype="float64")
    loss = xr.KerasLoss(loss_fn)
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss=loss.attach(model))
    with pytest.raises(TypeError, match="expected an xrisk optimizer"):
        model.fit(x, loss.pack(labels=labels), epochs=1, verbose=0,
                  callbacks=[xr.UpdateRegularizer(epochs=[1])])


# -------------------------------------------------------------------- fit_dataset

def _pipeline(seed=0, lazy=False):
    x, labels = _data(seed)
    if lazy:
        class Rows:  # a map-style source, read row by row
            reads = 0

            def __len__(self):
                return N

            def __getitem__(self, i):
                Rows.reads += 1
                return x[i]
        data = xr.IndexedDataset(Rows(), labels)
    else:
        data = xr.IndexedDataset(x, labels)
    sampler = xr.DualSampler(labels, BATCH, sampling_rate=0.5, seed=3)
    loss_fn = xr.APLoss(num_samples=N, dtype="float64")
    loss = xr.KerasLoss(loss_fn)
    return x, labels, data, sampler, loss_fn, loss


def test_fit_dataset_has_known_cardinality_and_fit_does_not_run_out_of_data():
    x, labels, data, sampler, loss_fn, loss = _pipeline()
    ds = xr.fit_dataset(data, sampler, loss)
    assert int(ds.cardinality()) == len(sampler)
    assert int(ds.prefetch(2).cardinality()) == len(sampler)
    model = _model()
    model.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=loss.attach(model))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(ds, epochs=2, verbose=0)
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    assert int(loss.batches_trained) == 2 * len(sampler)


def test_peeking_loses_no_batch_and_epochs_follow_the_sampler():
    """fit on the pipeline (a lazily read source), after looking at batches (take, next, a
    prefetching iterator), trains the sampler's epochs 0 and 1 in order: like fit on those
    batches as arrays."""
    x, labels, data, sampler, loss_fn, loss = _pipeline(lazy=True)
    ds = xr.fit_dataset(data, sampler, loss).prefetch(2)
    for _ in ds.take(1):
        pass
    next(iter(ds))
    peeked = [y.numpy() for _, y in ds.take(2)]
    assert_array_equal(peeked[0][:, 1], sampler.batch(0, epoch=0))
    model = _model()
    model.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=loss.attach(model))
    model.fit(ds, epochs=2, verbose=0)

    order = np.concatenate([sampler.batch(p, epoch=e) for e in range(2)
                            for p in range(len(sampler))])
    twin, twin_fn = _model(), xr.APLoss(num_samples=N, dtype="float64")
    twin_loss = xr.KerasLoss(twin_fn)
    twin.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=twin_loss.attach(twin))
    twin.fit(x[order], twin_loss.pack(labels=labels[order], index=order), batch_size=BATCH,
             shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), twin.get_weights(), strict=True):
        assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    next(iter(ds))  # the next epoch's first batch, after two trained epochs
    assert_array_equal(next(iter(ds))[1][:, 1].numpy(), sampler.batch(0, epoch=2))


def test_a_lazy_source_reads_only_the_batch_rows():
    x, labels, data, sampler, _, loss = _pipeline(lazy=True)
    first = next(iter(xr.fit_dataset(data, sampler, loss)))
    reads = type(data.data).reads
    # one example to learn the shapes, then the rows of the batch (and of the next one,
    # which tf.data's injected prefetch reads ahead): never the whole source
    assert reads <= 1 + 2 * BATCH < N
    assert_allclose(first[0].numpy(), x[sampler.batch(0, epoch=0)])
    xb, yb, ib = next(iter(data.as_dataset(xr.DualSampler(labels, BATCH, seed=1))))
    assert_allclose(xb.numpy(), x[ib.numpy()])
    assert_array_equal(yb.numpy(), labels[ib.numpy()])


# ----------------------------------------------------------------- checkpoints

def test_the_loss_state_round_trips_through_keras_and_tf_checkpoints(tmp_path):
    """With an xrisk optimizer (whose float64 learning rate once made tf.train.Checkpoint
    refuse to save: it replaced Keras's variable in a tracked, append-only list)."""
    x, labels, data, sampler, loss_fn, loss = _pipeline()
    model = _model()
    model.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=loss.attach(model))
    model.fit(xr.fit_dataset(data, sampler, loss), epochs=1, verbose=0)
    trained_u, trained_count = loss_fn.u.numpy().copy(), int(loss.batches_trained)
    steps = int(model.optimizer.iterations)
    assert np.any(trained_u != 0)
    model.save_weights(tmp_path / "run.weights.h5")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    saved = checkpoint.save(tmp_path / "ckpt")

    def from_checkpoint(fresh):
        tf.train.Checkpoint(model=fresh, optimizer=fresh.optimizer).restore(
            saved).expect_partial()
        assert int(fresh.optimizer.iterations) == steps

    for restore in (lambda m: m.load_weights(tmp_path / "run.weights.h5"), from_checkpoint):
        fresh, fresh_fn = _model(seed=1), xr.APLoss(num_samples=N, dtype="float64")
        fresh_loss = xr.KerasLoss(fresh_fn)
        fresh.compile(optimizer=xr.SOAP(learning_rate=1e-2), loss=fresh_loss.attach(fresh))
        restore(fresh)
        assert_array_equal(fresh_fn.u.numpy(), trained_u)
        assert int(fresh_loss.batches_trained) == trained_count
        assert fresh.optimizer.learning_rate.dtype == "float64"


# ------------------------------------------------------------------- bad input

def test_bad_targets_sample_weights_and_unattached_training_raise():
    loss_fn = xr.APLoss(num_samples=N)
    with pytest.raises(TypeError, match="expected an xrisk.tensorflow loss"):
        xr.KerasLoss(object())
    with pytest.raises(ValueError, match="missing \\['index'\\]"):
        xr.KerasLoss(loss_fn, targets=("labels",))
    with pytest.raises(ValueError, match="unknown \\['scores'\\]"):
        xr.KerasLoss(loss_fn, targets=("scores", "labels", "index"))
    loss = xr.KerasLoss(loss_fn)
    with pytest.raises(ValueError, match="missing \\['index'\\]"):
        loss.pack(labels=np.zeros(3))
    with pytest.raises(ValueError, match="leading lengths"):
        loss.pack(labels=np.zeros(3), index=np.arange(4))
    y = loss.pack(labels=np.array([0, 1]), index=np.array([0, 1]))
    scores = tf.constant([0.2, 0.7])
    with pytest.raises(ValueError, match="sample_weight"):
        loss(y, scores, sample_weight=tf.ones(2))
    before = loss_fn.u.numpy().copy()
    with tf.GradientTape(), pytest.raises(RuntimeError, match="attach"):
        loss(y, scores)
    assert_array_equal(loss_fn.u.numpy(), before)
    with pytest.raises(TypeError, match="keras.Model"):
        loss.attach(object())


def test_attach_works_before_a_subclassed_model_is_built_and_refuses_after():
    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.head = keras.layers.Dense(1, activation="sigmoid", dtype="float64")

        def call(self, inputs):
            return self.head(inputs)

    x, labels = _data()
    fresh, built = Net(), Net()
    built(x[:2])
    loss = xr.KerasLoss(xr.AUCMLoss(dtype="float64"))
    with pytest.raises(ValueError, match="attach right after constructing the model"):
        loss.attach(built)
    assert len(built.weights) == 2
    fresh.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss.attach(fresh))
    fresh.fit(x, loss.pack(labels=labels), batch_size=BATCH, epochs=1, verbose=0)
    assert float(loss.loss_fn.alpha) != 0.0
