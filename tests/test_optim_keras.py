"""Keras habits: ``model.compile(optimizer=xr.SOAP(...))`` + ``model.fit`` with an X-risk loss
(the index reaches the loss inside ``y_true``) trains exactly like a GradientTape loop;
schedules; the optimizer's variables resume a run."""

from __future__ import annotations

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf
from numpy.testing import assert_allclose

import xrisk.tensorflow as xr
import xrisk.tensorflow.optim as xr_optim
from xrisk.optim import Rates, reset_reference

N, BATCH = 24, 8


class PackedLoss(keras.losses.Loss):
    """An xrisk loss taking ``y_true = [label, index]`` (the module docstring's recipe)."""

    def __init__(self, loss_fn):
        super().__init__(name=loss_fn.name, dtype="float64")
        self.loss_fn = loss_fn

    def call(self, y_true, y_pred):
        scores = tf.cast(tf.sigmoid(y_pred[:, 0]), tf.float32)
        labels, index = tf.cast(y_true[:, 0], tf.int32), tf.cast(y_true[:, 1], tf.int64)
        return self.loss_fn(scores, labels, index)


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype("float32")
    labels = (rng.random(N) < 0.4).astype("int64")
    labels[0] = 1
    return x, labels, np.arange(N)


def _model():
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                             keras.layers.Dense(1)])


def test_model_fit_trains_like_a_gradient_tape_loop():
    x, labels, index = _data()
    fitted = _model()
    loss_fn = xr.APLoss(num_samples=N)
    fitted.compile(optimizer=xr.SOAP(learning_rate=1e-2, epoch_decay=0.01),
                   loss=PackedLoss(loss_fn))
    fitted.fit(x, np.stack([labels, index], axis=1), batch_size=BATCH, epochs=2,
               shuffle=False, verbose=0)

    manual = _model()
    manual_loss = xr.APLoss(num_samples=N)
    opt = xr.SOAP(manual.trainable_variables, learning_rate=1e-2, epoch_decay=0.01)

    @tf.function
    def step(xb, yb, ib):
        with tf.GradientTape() as tape:
            scores = tf.sigmoid(manual(xb)[:, 0])
            loss = manual_loss(scores, yb, ib)
        grads = tape.gradient(loss, manual.trainable_variables)
        opt.apply_gradients(zip(grads, manual.trainable_variables))

    for _ in range(2):
        for start in range(0, N, BATCH):
            batch = slice(start, start + BATCH)
            step(x[batch], labels[batch].astype("int32"), index[batch])
    assert int(fitted.optimizer.iterations) == int(opt.iterations) == 2 * N // BATCH
    for got, want in zip(fitted.get_weights(), manual.get_weights(), strict=True):
        assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert_allclose(loss_fn.u.numpy(), manual_loss.u.numpy(), rtol=1e-5, atol=1e-7)
    assert np.any(loss_fn.u.numpy() != 0)


def test_keras_schedules_and_update_lr_compose():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    w = tf.Variable([1.0, 1.0], dtype=tf.float64)
    opt = xr.SGD([w], learning_rate=schedule)
    steps = []
    for _ in range(3):
        before = w.numpy().copy()
        opt.apply_gradients([(tf.constant([1.0, 1.0], tf.float64), w)])
        steps.append(float(before[0] - w.numpy()[0]))
        opt.update_lr(2)
    assert_allclose(steps, [0.1, 0.1 * 0.5 / 2, 0.1 * 0.25 / 4], rtol=1e-6)


def test_optimizer_variables_resume_a_run():
    def run(opt, w, steps):
        for step in range(steps):
            opt.apply_gradients([(tf.constant([0.3, -2.0, step * 0.1], tf.float64), w)])

    w = tf.Variable([1.0, 2.0, 3.0], dtype=tf.float64)
    opt = xr.SOAP([w], epoch_decay=0.1)
    run(opt, w, 2)
    opt.update_regularizer(decay_factor=10)
    saved_w, saved = w.numpy().copy(), [v.numpy().copy() for v in opt.variables]
    run(opt, w, 2)
    w2 = tf.Variable(saved_w)
    opt2 = xr.SOAP([w2], epoch_decay=0.1)
    for variable, value in zip(opt2.variables, saved, strict=True):
        variable.assign(value)
    run(opt2, w2, 2)
    np.testing.assert_array_equal(w.numpy(), w2.numpy())


def test_lazily_built_inside_tf_function_gives_the_eager_numbers():
    eager_w, graph_w = (tf.Variable([1.0, -1.0], dtype=tf.float64) for _ in range(2))
    eager_opt, graph_opt = xr.SOAP(learning_rate=0.1), xr.SOAP(learning_rate=0.1)
    grad = tf.constant([0.5, 3.0], tf.float64)
    step = tf.function(lambda: graph_opt.apply_gradients([(grad, graph_w)]))
    for _ in range(3):
        eager_opt.apply_gradients([(grad, eager_w)])
        step()
    np.testing.assert_array_equal(eager_w.numpy(), graph_w.numpy())


# --- the clipped rules' in-place Keras step -------------------------------------------------

_CLIPPED_CONFIGS = {
    "adam": ("SOAP", {}),
    "amsgrad-epoch-decay": ("SOAP", {"amsgrad": True, "epoch_decay": 0.01}),
    "sgd-dampening": ("SOAP", {"mode": "sgd"}),
    "sgd-no-dampening-epoch-decay": ("SOAP", {"mode": "sgd", "dampening": 0.0,
                                              "epoch_decay": 0.003}),
    "nesterov-unclipped": ("SOAP", {"mode": "sgd", "nesterov": True, "dampening": 0.0,
                                    "clip_value": float("inf")}),
    "sgd-plain": ("SGD", {"weight_decay": 0.01}),
    "adamw-epoch-decay": ("AdamW", {"epoch_decay": 0.01}),
}


def _bits(x):
    x = tf.convert_to_tensor(x)
    return tf.bitcast(x, tf.uint16 if x.dtype.size == 2 else tf.uint8).numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("config", list(_CLIPPED_CONFIGS))
def test_in_place_clipped_step_is_the_core_rule_bit_for_bit(config, dtype):
    """The Keras step of a ClippedRule (in place, fewer kernels) equals the core's
    update_param on the same tensors bit for bit, eagerly and under tf.function, across
    update_regularizer; gradients include -0, zeros, huge and tiny values and NaN-free
    extremes that the clip and the first step's branch must keep exactly. float32 Adam and
    momentum SGD run TensorFlow's fused kernels (other roundings of the same update): to
    1e-4 relative (Adam's kernel weighs the new gradient by ``1 - β`` computed in float32
    from the float32 β: for β₂ = 0.999, 0.00099998713, 1.3e-5 off the rule's 0.001)."""
    name, arguments = _CLIPPED_CONFIGS[config]
    rng = np.random.default_rng(len(config) + len(dtype))
    edges = np.array([-0.0, 0.0, 1e30, -1e30, 1e-30, 0.999, -1.0, 2.5])
    start = rng.normal(size=(4, 5))
    grads = [rng.normal(size=(4, 5)) * 3 for _ in range(4)]
    grads[0].reshape(-1)[:8] = edges
    for compiled in (False, True):
        variable = tf.Variable(tf.cast(start, dtype))
        opt = getattr(xr, name)(learning_rate=0.05, **arguments)
        def apply(g, opt=opt, variable=variable):
            opt.apply_gradients([(g, variable)])

        step = tf.function(apply) if compiled else apply
        rule = opt.rule
        update = tf.function(rule.update_param) if compiled else rule.update_param
        param = tf.cast(start, dtype)
        slots, divisor = rule.init_slots(param), 1.0
        for index, grad in enumerate(grads):
            grad = tf.cast(grad, dtype)
            step(grad)
            lr = tf.constant(0.05, tf.float64) / tf.constant(divisor, tf.float64)
            param, slots = update(grad, param, slots, Rates(lr=lr))
            if index == 1:
                opt.update_regularizer(10.0)
                slots, divisor = reset_reference(slots), divisor * 10.0
        if dtype == "float32" and xr_optim._fusable(rule):
            np.testing.assert_allclose(variable.numpy(), param.numpy(), rtol=1e-4, atol=1e-7,
                                       err_msg=config)
            for slot_name, slot in opt._slot_variables[0].items():
                np.testing.assert_allclose(tf.convert_to_tensor(slot).numpy(),
                                           getattr(slots, slot_name).numpy(), rtol=1e-4,
                                           atol=1e-6, err_msg=f"{config} {slot_name}")
            continue
        np.testing.assert_array_equal(_bits(variable), _bits(param), err_msg=config)
        for slot_name, slot in opt._slot_variables[0].items():
            np.testing.assert_array_equal(_bits(slot), _bits(getattr(slots, slot_name)),
                                          err_msg=f"{config} {slot_name}")


def _full_size_operators(make, shape=(7, 5), dtype=tf.float64):
    """Operator types of the traced Keras step that write a tensor of the variable's shape
    (the passes over memory), less reads, constants and identities: ops whose output has
    that shape, and in-place variable updates (``AssignAddVariableOp`` ...) of such a
    value (float64: the rule's own operations; float32 takes the fused kernels)."""
    variable, grad, opt = tf.Variable(tf.ones(shape, dtype)), tf.ones(shape, dtype), make()
    graph = tf.function(lambda: opt.apply_gradients([(grad, variable)])
                        ).get_concrete_function().graph
    return collections.Counter(
        op.type for op in graph.get_operations()
        if (op.outputs[0].shape == shape if op.outputs else
            op.type.startswith("ResourceApply") or op.type.endswith("VariableOp")
            and len(op.inputs) > 1 and op.inputs[1].shape == shape)
        and op.type not in ("ReadVariableOp", "Const", "Identity", "IdentityN",
                            "AssignVariableOp"))


def test_clipped_keras_step_runs_the_rule_s_arithmetic_only():
    """Adam's step is its 13 rounded operations (clip 1, moments 3 + 4, step 5), each
    moment's sum an in-place AssignAddVariableOp into its slot (which holds the product by
    then: eagerly one new tensor fewer per moment), θ - step an in-place
    AssignSubVariableOp; SGD's first-step buffer is a branch, not a full-size select
    computing both. (Before: the moments' sums as new tensors assigned; a two-kernel clip,
    θ - step as a new tensor assigned over θ, and a select every SGD step.)"""
    adam = _full_size_operators(lambda: xr.SOAP(weight_decay=0.0))
    assert sum(adam.values()) == 14, adam  # 13 and the step's assign_sub
    assert adam["AssignAddVariableOp"] == 2 and adam["AddV2"] == 1, adam  # the sums; +eps
    assert adam["AssignSubVariableOp"] == 1 and adam["ClipByValue"] == 1, adam
    assert adam["Sub"] == 0, adam
    sgd = _full_size_operators(lambda: xr.SOAP(mode="sgd", weight_decay=0.0, dampening=0.0))
    assert sgd["SelectV2"] == 0 and sgd["Sub"] == 0 and sgd["ClipByValue"] == 1, sgd
    assert sgd["AssignSubVariableOp"] == 1, sgd
    variable, opt = tf.Variable(tf.ones((3,), tf.float64)), xr.SOAP(mode="sgd")
    graph = tf.function(lambda: opt.apply_gradients([(tf.ones((3,), tf.float64), variable)])
                        ).get_concrete_function().graph
    assert "AssignSubVariableOp" in {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("arguments", [{}, {"dampening": 0.0}, {"nesterov": True,
                                                                 "dampening": 0.0}])
def test_momentum_buffer_adds_in_place_after_the_first_step(arguments):
    """SGD's momentum buffer μ·b + (1 - dampening)·d is assigned as μ·b, then the rest
    added in place (one full-size tensor fewer eagerly): the later-steps branch of the
    first-step ``tf.cond`` holds an AssignAddVariableOp (before: the sum assigned)."""
    variable, opt = tf.Variable(tf.ones((7, 5), tf.float64)), xr.SOAP(mode="sgd", **arguments)
    function = tf.function(lambda: opt.apply_gradients([(tf.ones((7, 5), tf.float64),
                                                          variable)]))
    graph = function.get_concrete_function().graph
    branches = {f.signature.name: [n.op for n in f.node_def]
                for f in graph.as_graph_def().library.function}
    (cond,) = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    later = branches[cond.get_attr("else_branch").name]
    assert later.count("AssignAddVariableOp") == 1 and "AddV2" not in later, later


@pytest.mark.parametrize("name, arguments, kernel, passes", [
    ("SOAP", {}, "ResourceApplyAdam", {"ClipByValue": 1, "Mul": 1, "AddV2": 1}),
    ("SOAP", {"amsgrad": True, "weight_decay": 0.0}, "ResourceApplyAdamWithAmsgrad",
     {"ClipByValue": 1}),
    ("SOAP", {"mode": "sgd", "weight_decay": 0.0}, "ResourceApplyMomentum",
     {"ClipByValue": 1, "Mul": 1}),  # (1 - dampening)·d
    ("SOAP", {"mode": "sgd", "weight_decay": 0.0, "dampening": 0.0},
     "ResourceApplyMomentum", {"ClipByValue": 1}),
    ("SOAP", {"mode": "sgd", "weight_decay": 0.0, "dampening": 0.0, "epoch_decay": 0.01},
     "ResourceApplyMomentum", {"ClipByValue": 1, "Mul": 1, "Sub": 1, "AddV2": 1,
                               "AssignAddVariableOp": 1}),
])
def test_float32_keras_steps_run_one_fused_kernel(name, arguments, kernel, passes):
    """A float32 step is the direction's operations (the clip; coupled weight decay λθ;
    the epoch decay ε(θ - θ_ref) and, after the kernel, its iterate sum) and then one
    fused TensorFlow kernel for the update: no moment, square root or step as its own
    full-size tensor (Adam took 14 passes, SGD 5-6). Nesterov's momentum keeps the rule's
    operations (the kernel's Nesterov step is another)."""
    ops = _full_size_operators(lambda: getattr(xr, name)(**arguments), dtype=tf.float32)
    assert ops.pop(kernel, 0) == 1, ops
    assert ops == collections.Counter(passes), ops
    nesterov = _full_size_operators(
        lambda: xr.SOAP(mode="sgd", nesterov=True, dampening=0.0), dtype=tf.float32)
    assert not any(op.startswith("ResourceApply") for op in nesterov), nesterov
