"""Min-max losses trained by any optimizer: the saddle-point update, never a silent descent.

A loss reverses the gradient of its ``ascent`` auxiliaries (AUC-M's alpha) and computes with
their projection onto the declared bounds (:meth:`xrisk.LossDefinition._saddle_point`), so a
plain descent optimizer ascends on them. The stored value is projected after the step where
the framework has a hook (torch: a global optimizer post-step hook; Keras: the variable's
constraint); JAX's pytree is the caller's, and the loss counts a stored value outside the
bounds as its projection (lazy projection).

Every test runs three consecutive steps of ``torch.optim.SGD`` / ``torch.optim.Adam``,
``optax.adam`` under ``jax.jit`` or a Keras Adam (eager and in ``tf.function``) on a linear
model and
each loss that declares an ascent auxiliary (read from the registry and the declarations),
and compares every parameter after every step with the step computed by hand from the numpy
reference gradients of LibAUC's math: descent on the model and the descent auxiliaries,
ascent (then projection) on the ascent ones. Without the reversal the ascent auxiliaries
descend (alpha reached -0.30 after three Adam steps) and every test fails.
"""

from __future__ import annotations

import array_api_compat.numpy as xp_numpy
import jax
import jax.numpy as jnp
import keras
import numpy as np
import optax
import pytest
import tensorflow as tf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax
import xrisk.tensorflow
import xrisk.torch
from tests._cases import CASES
from tests._frameworks import model_scores, reference_weight_grad, score_names
from tests._sizes import KEY_SPACES, draw_size

#: Every registered loss with trainable auxiliaries; the tests use those that declare an
#: ascent one (all of them today: AUC-M, compositional AUC, the MIDAM losses, multi-label AUC-M).
WITH_AUXILIARIES = sorted(name for name, cls in xrisk.LOSSES.items()
                          if cls.params_type is not xrisk.losses.NoParams)
STEPS = 3
TOLERANCE = {"rtol": 1e-9, "atol": 1e-12}
BETAS = (0.9, 0.999)
#: The compiled runs (a jit compilation or a tf.function trace per batch shape) take two thirds
#: of the profile's examples per loss.
COMPILED = settings(max_examples=max(1, settings.default.max_examples * 2 // 3))


def _ascent(definition):
    return {name: spec for name, spec in definition.auxiliaries().items()
            if spec.role == "ascent"}


def _scenario(draw, name):
    """A definition, the model's weights, the initial auxiliaries (an ascent one may start
    at its lower bound, where the projection binds) and three batches."""
    case = CASES[name]
    definition = case.make(draw_size(draw, KEY_SPACES, label="size"),
                           draw(case.hyper, label="hyper"))
    if not _ascent(definition):
        pytest.skip(f"{name} declares no ascent auxiliary")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    shapes = definition.state_shapes()
    params = {k: np.broadcast_to(np.asarray(v, np.float64), shapes[k]).copy()
              for k, v in case.initial_params(rng).items()}
    for aux_name, spec in _ascent(definition).items():
        if draw(st.booleans(), label=f"{aux_name} starts at its lower bound"):
            params[aux_name] = np.full(shapes[aux_name], spec.lower, np.float64)
    w = rng.normal(size=3)
    batches = [case.batch(draw, definition, rng) for _ in range(STEPS)]
    learning_rate = draw(st.sampled_from([0.05, 0.5]), label="learning rate")
    return definition, w, params, batches, learning_rate


class _HandOptimizer:
    """SGD or one framework's Adam on numpy float64 values (moments by parameter name)."""

    def __init__(self, kind, learning_rate, eps):
        self.kind, self.lr, self.eps = kind, learning_rate, eps
        self.moments, self.t = {}, 0

    def step(self, values, grads):
        self.t += 1
        t, lr, eps = self.t, self.lr, self.eps
        out = {}
        for name, g in grads.items():
            if self.kind == "sgd":
                out[name] = values[name] - lr * g
                continue
            m, v = self.moments.get(name, (0.0, 0.0))
            m, v = BETAS[0] * m + (1 - BETAS[0]) * g, BETAS[1] * v + (1 - BETAS[1]) * g * g
            self.moments[name] = (m, v)
            bias1, bias2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t
            if self.kind == "torch_adam":
                delta = (lr / bias1) * m / (np.sqrt(v) / np.sqrt(bias2) + eps)
            elif self.kind == "optax_adam":
                delta = lr * (m / bias1) / (np.sqrt(v / bias2) + eps)
            else:  # Keras: its learning rate and the betas of its bias corrections in float32
                bias1, bias2 = (1 - float(np.float32(BETAS[0])) ** t,
                                1 - float(np.float32(BETAS[1])) ** t)
                delta = (float(np.float32(lr)) * np.sqrt(bias2) / bias1 * m
                         / (np.sqrt(v) + eps))
            out[name] = values[name] - delta
        return out


def _projected(definition, params):
    return {k: np.clip(v, spec.lower, spec.upper) if spec.role == "ascent" else v
            for k, v in params.items() for spec in (definition.auxiliaries()[k],)}


def _expected_run(definition, name, w, params, batches, optimizer, *, store_projection):
    """The losses and the parameters after each step, by hand: reference gradients at the
    projected auxiliaries, descent on w and the descent auxiliaries, ascent on the ascent
    ones, then (where the framework projects the stored value) their projection."""
    case = CASES[name]
    state = {k: np.asarray(v) for k, v in
             definition.init(xp=xp_numpy, dtype=np.float64)._asdict().items()}
    values = {"w": w, **params}
    losses, trajectory = [], []
    for inputs in batches:
        names = score_names(definition, inputs)
        used = _projected(definition, {k: values[k] for k in params})
        loss, grads, grad_params, state = case.reference(
            definition, state, used,
            **{**inputs, **model_scores(inputs, names, values["w"], case.link)})
        descent = {"w": reference_weight_grad(inputs, values["w"], grads, case.link)}
        for field, spec in definition.auxiliaries().items():
            g = np.asarray(grad_params[field], np.float64)
            descent[field] = -g if spec.role == "ascent" else g  # ascent: descend on -grad
        values = optimizer.step(values, descent)
        if store_projection:
            values = {"w": values["w"], **_projected(definition, {k: values[k] for k in params})}
        losses.append(float(loss))
        trajectory.append(values)
    return losses, trajectory


def _check(definition, got_losses, got, want_losses, want):
    for step, (loss, values, expected_loss, expected) in enumerate(
            zip(got_losses, got, want_losses, want, strict=True)):
        where = f"{definition!r}, step {step}"
        assert_allclose(loss, expected_loss, **TOLERANCE, err_msg=f"loss, {where}")
        for field, value in expected.items():
            assert_allclose(values[field], value, **TOLERANCE, err_msg=f"{field}, {where}")


def _others(definition, inputs, names, convert):
    return {k: None if v is None else convert(v) for k, v in inputs.items() if k not in names}


# --------------------------------------------------------------------------- torch

def _torch_run(definition, name, w, params, batches, make_optimizer):
    case = CASES[name]
    loss_fn = xrisk.torch.XRiskLoss(definition, dtype="float64")
    with torch.no_grad():
        for field, value in params.items():
            getattr(loss_fn, field).copy_(torch.as_tensor(value))
    weights = torch.nn.Parameter(torch.tensor(w))
    optimizer = make_optimizer([weights, *loss_fn.parameters()])
    losses, trajectory = [], []
    for inputs in batches:
        names = score_names(definition, inputs)
        scores = {k: torch.as_tensor(inputs[k]) @ weights for k in names}
        if case.link == "sigmoid":
            scores = {k: torch.sigmoid(v) for k, v in scores.items()}
        optimizer.zero_grad()
        loss = loss_fn(**scores, **_others(definition, inputs, names, torch.as_tensor))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        trajectory.append({"w": weights.detach().numpy().copy(),
                           **{k: getattr(loss_fn, k).detach().numpy().copy() for k in params}})
    return losses, trajectory


@pytest.mark.parametrize("name", WITH_AUXILIARIES)
@pytest.mark.parametrize("kind", ["sgd", "torch_adam"])
@given(data=st.data())
def test_torch_optimizers_take_the_projected_saddle_point_step(name, kind, data):
    """``torch.optim.SGD`` / ``torch.optim.Adam`` over the model's and the loss's parameters:
    alpha ascends and is projected (alpha >= 0) after every step."""
    definition, w, params, batches, lr = _scenario(data.draw, name)
    if kind == "sgd":
        def make(p):
            return torch.optim.SGD(p, lr=lr)
    else:
        def make(p):
            return torch.optim.Adam(p, lr=lr, betas=BETAS, eps=1e-8)
    got = _torch_run(definition, name, w, params, batches, make)
    want = _expected_run(definition, name, w, params, batches, _HandOptimizer(kind, lr, 1e-8),
                         store_projection=True)
    _check(definition, *got, *want)
    for values in got[1]:
        for field, spec in _ascent(definition).items():
            assert np.all(values[field] >= spec.lower)


# --------------------------------------------------------------------------- JAX

def _jax_run(definition, name, w, params, batches, lr):
    case = CASES[name]
    loss_fn = xrisk.jax.XRiskLoss(definition, dtype="float64")
    optimizer = optax.adam(lr, b1=BETAS[0], b2=BETAS[1], eps=1e-8)
    tree = {"w": jnp.asarray(w),
            "loss": definition.params_type(**{k: jnp.asarray(v) for k, v in params.items()})}
    opt_state, state = optimizer.init(tree), loss_fn.init()

    @jax.jit
    def step(tree, opt_state, state, scores_features, others):
        def objective(tree):
            scores = {k: f @ tree["w"] for k, f in scores_features.items()}
            if case.link == "sigmoid":
                scores = {k: jax.nn.sigmoid(v) for k, v in scores.items()}
            return loss_fn.apply(state, **scores, **others, params=tree["loss"])

        (loss, state), grads = jax.value_and_grad(objective, has_aux=True)(tree)
        updates, opt_state = optimizer.update(grads, opt_state, tree)
        return optax.apply_updates(tree, updates), opt_state, state, loss

    losses, trajectory = [], []
    for inputs in batches:
        names = score_names(definition, inputs)
        tree, opt_state, state, loss = step(
            tree, opt_state, state, {k: jnp.asarray(inputs[k]) for k in names},
            _others(definition, inputs, names, jnp.asarray))
        losses.append(float(loss))
        trajectory.append({"w": np.asarray(tree["w"]),
                           **{k: np.asarray(v) for k, v in tree["loss"]._asdict().items()}})
    return losses, trajectory


@pytest.mark.parametrize("name", WITH_AUXILIARIES)
@COMPILED
@given(data=st.data())
def test_optax_adam_under_jit_ascends_and_the_loss_uses_the_projection(name, data):
    """``optax.adam`` on ``{"w": ..., "loss": loss_fn.init_params()}`` under ``jax.jit``:
    alpha ascends; optax keeps the stored value as it is, and the next step's loss and
    gradients are those at its projection (the hand computation's reference runs there)."""
    definition, w, params, batches, lr = _scenario(data.draw, name)
    got = _jax_run(definition, name, w, params, batches, lr)
    want = _expected_run(definition, name, w, params, batches,
                         _HandOptimizer("optax_adam", lr, 1e-8), store_projection=False)
    _check(definition, *got, *want)


# --------------------------------------------------------------------------- Keras

def _keras_run(definition, name, w, params, batches, lr, compiled):
    case = CASES[name]
    loss_fn = xrisk.tensorflow.XRiskLoss(definition, dtype="float64")
    for field, value in params.items():
        getattr(loss_fn, field).assign(value)
    weights = tf.Variable(w)
    variables = [weights, *(getattr(loss_fn, k) for k in definition.auxiliaries())]
    optimizer = keras.optimizers.Adam(lr, beta_1=BETAS[0], beta_2=BETAS[1], epsilon=1e-7)
    optimizer.build(variables)  # its slots made eagerly, not while the step is traced

    def step(scores_features, others):
        with tf.GradientTape() as tape:
            scores = {k: tf.tensordot(f, weights, axes=1) for k, f in scores_features.items()}
            if case.link == "sigmoid":
                scores = {k: tf.sigmoid(v) for k, v in scores.items()}
            loss = loss_fn(**scores, **others)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    if compiled:
        step = tf.function(step)
    losses, trajectory = [], []
    for inputs in batches:
        names = score_names(definition, inputs)
        loss = step({k: tf.constant(inputs[k]) for k in names},
                    _others(definition, inputs, names, tf.constant))
        losses.append(float(loss))
        trajectory.append({"w": weights.numpy(),
                           **{k: getattr(loss_fn, k).numpy() for k in params}})
    return losses, trajectory


#: MIDAM softmax pooling's gradient in the scores varies from run to run inside tf.function
#: (eagerly it does not), with or without the saddle-point rule: w differs from the
#: reference by up to 2e-4 relative in about one run of four. Eager runs check that loss.
_TF_FUNCTION_NONDETERMINISTIC = {"MIDAM_softmax_pooling_loss"}
KERAS_RUNS = [
    pytest.param(name, compiled, marks=[pytest.mark.xfail(
        strict=False, reason="MIDAM softmax's gradient is nondeterministic in tf.function")]
        if compiled and name in _TF_FUNCTION_NONDETERMINISTIC else [])
    for name in WITH_AUXILIARIES for compiled in (False, True)]


@pytest.mark.parametrize(("name", "compiled"), KERAS_RUNS)
@COMPILED
@given(data=st.data())
def test_keras_adam_takes_the_projected_saddle_point_step(name, compiled, data):
    """A Keras Adam in a GradientTape step (eager, or inside ``tf.function``) over the
    model's and the loss's variables: alpha ascends and the variable's constraint projects
    it."""
    definition, w, params, batches, lr = _scenario(data.draw, name)
    got = _keras_run(definition, name, w, params, batches, lr, compiled)
    want = _expected_run(definition, name, w, params, batches,
                         _HandOptimizer("keras_adam", lr, 1e-7), store_projection=True)
    _check(definition, *got, *want)


# --------------------------------------------------------------------------- the core rule

@pytest.mark.parametrize("name", WITH_AUXILIARIES)
@given(data=st.data())
def test_an_ascent_auxiliary_outside_its_bounds_counts_as_its_projection(name, data):
    """A stored alpha below its bound (a hand-written loop, optax without a projection) gives
    the loss, the state and the gradients at its projection, alpha's gradient reversed."""
    definition, w, params, batches, _ = _scenario(data.draw, name)
    below = {k: np.full_like(params[k], spec.lower - data.draw(
        st.sampled_from([1e-3, 0.5, 3.0]), label=f"{k} below its bound"))
        for k, spec in _ascent(definition).items()}
    case = CASES[name]
    inputs = batches[0]
    names = score_names(definition, inputs)
    state = {k: np.asarray(v) for k, v in
             definition.init(xp=xp_numpy, dtype=np.float64)._asdict().items()}
    loss, grads, grad_params, new_state = case.reference(
        definition, state, _projected(definition, {**params, **below}),
        **{**inputs, **model_scores(inputs, names, w, case.link)})
    aux = {k: torch.tensor(v, requires_grad=True) for k, v in {**params, **below}.items()}
    scores = {k: torch.tensor(v, requires_grad=True)
              for k, v in model_scores(inputs, names, w, case.link).items()}
    got, got_state = definition.apply(
        definition.state_type(**{k: torch.as_tensor(v) for k, v in state.items()}),
        **scores, **_others(definition, inputs, names, torch.as_tensor),
        params=definition.params_type(**aux))
    got.backward()
    assert_allclose(got.item(), loss, **TOLERANCE)
    for field, value in new_state.items():
        assert_allclose(getattr(got_state, field).numpy(), value, **TOLERANCE)
    for field, value in grads.items():
        assert_allclose(scores[field].grad.numpy(), value, **TOLERANCE)
    for field, spec in definition.auxiliaries().items():
        sign = -1 if spec.role == "ascent" else 1
        assert_allclose(aux[field].grad.numpy(), sign * np.asarray(grad_params[field]),
                        **TOLERANCE, err_msg=field)
