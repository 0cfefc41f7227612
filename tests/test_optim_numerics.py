"""The update rules' numbers: the core and the three adapters give the same update for every
rule; each parameter's own iterate average; safe arithmetic for 16-bit parameters; PDSCA's
k-step schedule."""

from __future__ import annotations

import inspect
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import tensorflow as tf
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch
from tests import _reference

# MIDAM trains any min-max loss; AUC-M has its ascent direction and needs no sizes.
MIN_MAX = {"PESG": "AUCMLoss", "PDSCA": "CompositionalAUCLoss", "MIDAM": "AUCMLoss"}
SHAPES = [(3,), (2, 2)]
STEPS, REGULARIZER_AFTER = 3, 1

# ----------------------------------------------------------------------------- one rule, four ways

CHOICES = {
    "learning_rate": [0.05, 0.3], "mode": ["sgd", "adam"], "clip_value": [0.5, math.inf],
    "weight_decay": [0.0, 0.01], "epoch_decay": [0.0, 0.05], "momentum": [0.0, 0.5, 0.9],
    "nesterov": [False, True], "dampening": [0.0, 0.3], "betas": [(0.9, 0.999), (0.5, 0.9)],
    "eps": [1e-8, 1e-3], "amsgrad": [False, True], "ce_learning_rate": [None, 0.2],
    "beta1": [0.0, 0.5], "beta2": [0.3, 1.0],
}


@st.composite
def _case(draw, name):
    rule_type = xrisk.OPTIMIZERS[name]
    names = [n for n in inspect.signature(rule_type).parameters if n != "loss_fn"]
    hyper = {n: draw(st.sampled_from(CHOICES[n])) for n in names}
    loss = [getattr(xrisk, MIN_MAX[name])()] if name in MIN_MAX else []
    try:
        rule_type(*loss, **hyper)
    except ValueError:  # e.g. nesterov with mode="adam"
        assume(False)
    values = st.floats(-2, 2, allow_nan=False)
    params = [draw(arrays(np.float64, shape, elements=values)) for shape in SHAPES]
    grads = [[draw(arrays(np.float64, shape, elements=values)) for shape in SHAPES]
             for _ in range(STEPS)]
    aux = aux_grads = None
    if name in MIN_MAX:
        aux = np.array([draw(values), draw(values), draw(st.floats(0, 2))])
        aux_grads = [draw(arrays(np.float64, 3, elements=values)) for _ in range(STEPS)]
    return hyper, params, grads, aux, aux_grads


def _core(name, hyper, params, grads, aux, aux_grads):
    loss = getattr(xrisk, MIN_MAX[name])() if name in MIN_MAX else None
    rule = xrisk.OPTIMIZERS[name](*([loss] if loss else []), **hyper)
    node = None if aux is None else xrisk.AUCMParams(*aux)
    state = rule.init(params, node)
    for step in range(STEPS):
        grad_node = None if aux is None else xrisk.AUCMParams(*aux_grads[step])
        params, node, state = rule.update(grads[step], state, params, node, grad_node)
        if step == REGULARIZER_AFTER:
            state = xrisk.update_regularizer(state, decay_factor=2)
    return [*params, *([] if node is None else [np.asarray(node, dtype=np.float64)])]


def _torch(name, hyper, params, grads, aux, aux_grads):
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    extra, loss_fn = [], None
    if name in MIN_MAX:
        loss_fn = getattr(xtorch, MIN_MAX[name])(dtype="float64")
        with torch.no_grad():
            for container, value in zip((loss_fn.a, loss_fn.b, loss_fn.alpha), aux):
                container.fill_(value)
        extra = [loss_fn]
    opt = getattr(xtorch, name)(tensors, *extra, **hyper)
    for step in range(STEPS):
        for tensor, grad in zip(tensors, grads[step]):
            tensor.grad = torch.tensor(grad)
        if loss_fn is not None:
            for container, grad in zip((loss_fn.a, loss_fn.b, loss_fn.alpha), aux_grads[step]):
                container.grad = torch.tensor(grad)  # alpha's is ignored (closed-form ascent)
        opt.step()
        if step == REGULARIZER_AFTER:
            opt.update_regularizer(decay_factor=2)
    out = [t.detach().numpy() for t in tensors]
    if loss_fn is not None:
        out += [np.asarray([float(c.detach()) for c in (loss_fn.a, loss_fn.b, loss_fn.alpha)])]
    return out


def _tensorflow(name, hyper, params, grads, aux, aux_grads):
    variables = [tf.Variable(p) for p in params]
    extra, loss_vars = {}, []
    if name in MIN_MAX:
        loss_fn = getattr(xtf, MIN_MAX[name])(dtype="float64")
        loss_vars = [loss_fn.a, loss_fn.b, loss_fn.alpha]
        for container, value in zip(loss_vars, aux):
            container.assign(value)
        extra = {"loss_fn": loss_fn}
    opt = getattr(xtf, name)(**extra, **hyper)
    for step in range(STEPS):
        pairs = [(tf.constant(g), v) for g, v in zip(grads[step], variables)]
        if loss_vars:
            pairs += [(tf.constant(g), v) for g, v in zip(aux_grads[step], loss_vars)]
        opt.apply_gradients(pairs)
        if step == REGULARIZER_AFTER:
            opt.update_regularizer(decay_factor=2)
    out = [v.numpy() for v in variables]
    if loss_vars:
        out += [np.asarray([float(v) for v in loss_vars])]
    return out


def _jax(name, hyper, params, grads, aux, aux_grads):
    tree = {"p": [jnp.asarray(p) for p in params]}
    extra = {}
    if name in MIN_MAX:
        loss_fn = getattr(xjax, MIN_MAX[name])(dtype="float64")
        tree["loss"] = xrisk.AUCMParams(*(jnp.asarray(v) for v in aux))
        extra = {"loss_fn": loss_fn}
    opt = getattr(xjax, name)(**extra, **hyper)
    state = opt.init(tree)
    update = opt.update  # eager: a compile per drawn example would dominate (jit: test_optim_jax)
    for step in range(STEPS):
        g = {"p": [jnp.asarray(x) for x in grads[step]]}
        if name in MIN_MAX:
            g["loss"] = xrisk.AUCMParams(*(jnp.asarray(v) for v in aux_grads[step]))
        updates, state = update(g, state, tree)
        tree = optax.apply_updates(tree, updates)
        if step == REGULARIZER_AFTER:
            state = opt.update_regularizer(state, decay_factor=2)
    out = [np.asarray(p) for p in tree["p"]]
    if name in MIN_MAX:
        out += [np.asarray([float(v) for v in tree["loss"]])]
    return out


#: LARS has its own agreement test (tests/test_optim_lars.py): its JAX face is optax.lars, which
#: takes schedules instead of update_regularizer.
OWN_TEST = {"LARS"}


@pytest.mark.parametrize("name", sorted(set(xrisk.OPTIMIZERS) - OWN_TEST))
def test_the_three_adapters_give_the_core_s_update(name):
    @given(case=_case(name))
    def check(case):
        expected = _core(name, *case)
        for run in (_torch, _tensorflow, _jax):
            for got, want in zip(run(name, *case), expected, strict=True):
                assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=run.__name__)

    check()


# ----------------------------------------------------------------------------- iterate averages

def _frozen_schedule():
    """Gradients of three parameters over 5 steps: w0 always, w1 on steps 0 and 2, w2 never."""
    rng = np.random.default_rng(3)
    return [[rng.normal(size=2), rng.normal(size=2) if step in (0, 2) else None, None]
            for step in range(5)]


def _frozen_reference(start):
    rule = _reference.ClippedOptimizer([np.array(p) for p in start], kind="heavy_ball",
                                       lr=0.1, mode="sgd", momentum=0.5, dampening=0.0,
                                       epoch_decay=0.5, weight_decay=0.0)
    params = [np.array(p) for p in start]
    trajectory = []
    for step, grads in enumerate(_frozen_schedule()):
        params = rule.step(params, grads)
        trajectory.append(params)
        if step == 3:
            rule.update_regularizer()
    return params, trajectory


HYPER = dict(learning_rate=0.1, mode="sgd", momentum=0.5, dampening=0.0, epoch_decay=0.5,
             weight_decay=0.0)
START = [np.array([0.5, -0.5]), np.array([1.0, 2.0]), np.array([-1.0, 0.3])]


def test_torch_reference_point_is_each_parameter_s_own_average():
    params = [torch.tensor(p, requires_grad=True) for p in START]
    opt = xtorch.SOAP(params, **HYPER)
    for step, grads in enumerate(_frozen_schedule()):
        for param, grad in zip(params, grads):
            param.grad = None if grad is None else torch.tensor(grad)
        opt.step()
        if step == 3:
            opt.update_regularizer()
            expected, trajectory = _frozen_reference(START)
            # w1 had a gradient on 2 of the 4 steps: the mean of those 2 iterates, not sum / 4.
            assert_allclose(opt.state[params[1]]["reference"].numpy(),
                            (trajectory[0][1] + trajectory[2][1]) / 2, rtol=1e-12)
            assert_allclose(opt.state[params[2]]["reference"].numpy(), START[2])  # kept
    expected, _ = _frozen_reference(START)
    for param, want in zip(params, expected):
        assert_allclose(param.detach().numpy(), want, rtol=1e-12)


def test_tensorflow_reference_point_is_each_parameter_s_own_average():
    variables = [tf.Variable(p) for p in START]
    opt = xtf.SOAP(variables, **HYPER)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Gradients do not exist")
        for step, grads in enumerate(_frozen_schedule()):
            opt.apply_gradients([(None if g is None else tf.constant(g), v)
                                 for g, v in zip(grads, variables)])
            if step == 3:
                opt.update_regularizer()
    expected, _ = _frozen_reference(START)
    for variable, want in zip(variables, expected):
        assert_allclose(variable.numpy(), want, rtol=1e-12)


# ----------------------------------------------------------------------------- 16-bit parameters

def _bf16_problem():
    rng = np.random.default_rng(0)
    start = rng.normal(size=(4, 3)).astype(np.float32)
    grads = [rng.uniform(-0.9, 0.9, size=(4, 3)).astype(np.float32) for _ in range(6)]
    for g in grads:
        g[0] = 0.0  # a row that never gets a gradient
    return start, grads


def test_torch_bfloat16_soap_trains_like_torch_adam():
    start, grads = _bf16_problem()
    ours = torch.tensor(start, dtype=torch.bfloat16, requires_grad=True)
    master = torch.tensor(start, dtype=torch.bfloat16).float().requires_grad_()
    opt = xtorch.SOAP([ours], learning_rate=1e-2, weight_decay=0.0)  # Adam mode, clip 1
    reference = torch.optim.Adam([master], lr=1e-2)
    for step, g in enumerate(grads):
        ours.grad = torch.tensor(g, dtype=torch.bfloat16)
        master.grad = ours.grad.float()
        opt.step()
        reference.step()
        if step == 0:  # Adam's first step moves every coordinate with a gradient by lr
            moved = (ours.detach().float() - torch.tensor(start).bfloat16().float()).abs()
            assert torch.all(moved[1:] > 5e-3)
    values = ours.detach().float()
    assert torch.isfinite(values).all() and opt.state[ours]["momentum"].dtype == torch.float32
    assert torch.equal(values[0], torch.tensor(start[0]).bfloat16().float())  # untouched row
    assert_allclose(values.numpy(), master.detach().numpy(), atol=2e-2)


def test_jax_bfloat16_soap_trains_like_optax_adam():
    start, grads = _bf16_problem()
    params = jnp.asarray(start, dtype=jnp.bfloat16)
    master = params.astype(jnp.float32)
    opt, reference = xjax.SOAP(learning_rate=1e-2, weight_decay=0.0), optax.adam(1e-2)
    state, reference_state = opt.init(params), reference.init(master)
    for g in grads:
        updates, state = opt.update(jnp.asarray(g, jnp.bfloat16), state, params)
        params = optax.apply_updates(params, updates)
        ref_updates, reference_state = reference.update(
            jnp.asarray(g, jnp.bfloat16).astype(jnp.float32), reference_state)
        master = optax.apply_updates(master, ref_updates)
    values = np.asarray(params.astype(jnp.float32))
    assert params.dtype == jnp.bfloat16 and np.all(np.isfinite(values))
    assert state.slots[0].second_moment.dtype == jnp.float32
    np.testing.assert_array_equal(values[0], np.asarray(jnp.asarray(start[0], jnp.bfloat16),
                                                         dtype=np.float32))
    assert_allclose(values, np.asarray(master), atol=2e-2)


def test_tensorflow_float16_soap_trains_like_torch_adam():
    start, grads = _bf16_problem()
    variable = tf.Variable(start.astype(np.float16))
    master = torch.tensor(start.astype(np.float16).astype(np.float32), requires_grad=True)
    opt, reference = xtf.SOAP(learning_rate=1e-2, weight_decay=0.0), torch.optim.Adam([master],
                                                                                      lr=1e-2)
    for g in grads:
        opt.apply_gradients([(tf.constant(g.astype(np.float16)), variable)])
        master.grad = torch.tensor(g.astype(np.float16).astype(np.float32))
        reference.step()
    values = variable.numpy().astype(np.float32)
    assert np.all(np.isfinite(values)) and np.array_equal(values[0], start[0].astype(np.float16))
    assert_allclose(values, master.detach().numpy(), atol=2e-2)


def test_learning_rates_are_stored_exactly_and_never_in_the_parameter_dtype():
    w = torch.zeros(3, dtype=torch.float16, requires_grad=True)
    opt = xtorch.SOAP([w], learning_rate=1e-8)
    w.grad = torch.ones(3, dtype=torch.float16)
    opt.step()
    assert opt.param_groups[0]["lr"] == 1e-8  # not rounded through float16 (0.0)
    opt = xtorch.SOAP([w], learning_rate=0.001)
    opt.step()
    opt.update_lr(10)
    lr = opt.param_groups[0]["lr"]
    assert type(lr) is float and lr == 0.001 / 10  # not 0.0010000000474974513 / 10
    tf_opt = xtf.SOAP([tf.Variable(np.zeros(3, np.float16))], learning_rate=1e-8)
    assert float(tf_opt.learning_rate) == 1e-8
    jax_opt = xjax.SOAP(learning_rate=1e-8)
    state = jax_opt.init(jnp.zeros(3, jnp.float16))
    assert float(jax_opt.current_learning_rate(state)) == pytest.approx(1e-8)


def test_pesg_with_a_bfloat16_model_and_float32_auxiliaries_stays_finite():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).to(torch.bfloat16)
    loss_fn = xtorch.AUCMLoss(dtype="float32")
    opt = xtorch.PESG(model.parameters(), loss_fn, learning_rate=0.1)
    x, y = torch.randn(8, 3, dtype=torch.bfloat16), torch.tensor([1, 0] * 4)
    for _ in range(5):
        opt.zero_grad()
        loss_fn(torch.sigmoid(model(x)).squeeze(1).float(), y).backward()
        opt.step()
    values = [*model.parameters(), loss_fn.a, loss_fn.b, loss_fn.alpha]
    assert all(torch.isfinite(v).all() for v in values)
    assert loss_fn.alpha.dtype == torch.float32 and loss_fn.alpha.item() > 0


# ----------------------------------------------------------------------------- PDSCA's schedule

def _pdsca_history(framework, k=1, steps=6):
    """(a, b, alpha) after each step of PDSCA on CompositionalAUCLoss(k)."""
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(8, 2)), np.array([1, 0] * 4)
    history = []
    if framework == "torch":
        w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
        loss_fn = xtorch.CompositionalAUCLoss(k=k, dtype="float64")
        opt = xtorch.PDSCA([w], loss_fn, learning_rate=0.1)
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(torch.sigmoid(torch.as_tensor(X) @ w), torch.as_tensor(y)).backward()
            opt.step()
            history.append([loss_fn.a.item(), loss_fn.b.item(), loss_fn.alpha.item()])
    elif framework == "tensorflow":
        w = tf.Variable(np.zeros(2))
        loss_fn = xtf.CompositionalAUCLoss(k=k, dtype="float64")
        opt = xtf.PDSCA([w], loss_fn, learning_rate=0.1)
        variables = [w, *loss_fn.trainable_variables]
        for _ in range(steps):
            with tf.GradientTape() as tape:
                loss = loss_fn(tf.sigmoid(tf.linalg.matvec(tf.constant(X), w)), tf.constant(y))
            opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            history.append([float(v) for v in (loss_fn.a, loss_fn.b, loss_fn.alpha)])
    else:
        loss_fn = xjax.CompositionalAUCLoss(k=k, dtype="float64")
        opt = xjax.PDSCA(loss_fn=loss_fn, learning_rate=0.1)
        params = {"w": jnp.zeros(2), "loss": loss_fn.init_params()}
        opt_state, state = opt.init(params), loss_fn.init()

        def objective(p, state):
            scores = jax.nn.sigmoid(jnp.asarray(X) @ p["w"])
            return loss_fn.apply(state, scores, jnp.asarray(y), params=p["loss"])

        @jax.jit
        def step(p, opt_state, state):
            grads, state = jax.grad(objective, has_aux=True)(p, state)
            updates, opt_state = opt.update(grads, opt_state, p)
            return optax.apply_updates(p, updates), opt_state, state

        for _ in range(steps):
            params, opt_state, state = step(params, opt_state, state)
            history.append([float(v) for v in params["loss"]])
    return np.asarray(history)


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_pdsca_cross_entropy_steps_leave_the_auxiliaries_alone_after_auc_steps(framework):
    """k=1: steps 0, 2, 4 are cross-entropy steps. LibAUC 2.0.1's PDSCA makes steps 2 and 4 take
    the AUC branch (alpha moves); here they leave a, b and alpha as they were."""
    history = _pdsca_history(framework)
    np.testing.assert_array_equal(history[0], [0.0, 0.0, 0.0])
    for ce_step in (2, 4):
        np.testing.assert_array_equal(history[ce_step], history[ce_step - 1])
    for auc_step in (1, 3, 5):
        assert np.all(history[auc_step] != history[auc_step - 1])
