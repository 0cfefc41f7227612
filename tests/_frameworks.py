"""Run one step of a core loss definition in each framework, with that framework's autodiff.

Every runner takes numpy inputs and returns numpy results, so tests compare frameworks with
plain ``assert_allclose``. The model is a small linear one: every input of kind ``"score"``
is given as *features* with one trailing axis more than the input, and the runner makes it
as ``link(features @ w)`` from one shared weight vector ``w``; gradients with respect to each
score input and to ``w`` are both checked.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple
from unittest import mock

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
import torch

FRAMEWORKS = ("torch", "jax", "tensorflow")
NO_AUTODIFF = ("numpy", "array_api_strict")
LINKS = ("sigmoid", "identity")


@contextlib.contextmanager
def masked_pairs():
    """Steps without the labels' host reading: the pairwise losses take their masked B x B
    layout (``xrisk.losses._binary.Pairs``), as a traced or device step does, where an eager
    CPU batch takes the compact n+ x n- one; every other host path is kept."""
    import xrisk._apply
    from xrisk.losses._base import Step

    def step(backend, xp, valid, host=None):
        return Step(backend, xp, valid, {k: v for k, v in (host or {}).items()
                                         if k != "labels"})
    with mock.patch.object(xrisk._apply, "Step", step):
        yield


class StepResult(NamedTuple):
    loss: float
    grad_inputs: dict[str, np.ndarray] | None  # d loss / d each score input
    grad_weights: np.ndarray | None
    grad_params: dict[str, np.ndarray]
    state: dict[str, np.ndarray]


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _numpy_like(values, dtype, kinds=None):
    """``values`` as numpy arrays: float entries in ``dtype``, declared ``int`` ones in int32."""
    kinds = kinds or {}
    return {k: np.asarray(v, dtype=np.int32 if kinds.get(k) == "int" else dtype)
            for k, v in values.items()}


def state_dtype(definition, field: str, dtype) -> np.dtype:
    """The dtype a state entry keeps: ``dtype`` for float tables, int32 for counters."""
    table = definition.state_tables().get(field)
    return np.dtype(np.int32 if table is not None and table.kind == "int" else dtype)


def score_names(definition, inputs: dict) -> list[str]:
    """The score inputs of ``definition`` present in ``inputs`` (given there as features)."""
    return [spec.name for spec in definition.inputs()
            if spec.kind == "score" and inputs.get(spec.name) is not None]


def model_scores(inputs: dict, names: list[str], w, link: str) -> dict[str, np.ndarray]:
    """The score inputs the numpy model makes from their features: ``link(features @ w)``."""
    made = {name: np.asarray(inputs[name]) @ np.asarray(w) for name in names}
    return {k: _sigmoid(v) for k, v in made.items()} if link == "sigmoid" else made


def run_step(framework: str, definition, state: dict, params: dict, inputs: dict, w, *,
             link: str = "sigmoid", dtype=np.float64) -> StepResult:
    """One ``definition.apply`` in ``framework`` on ``inputs``, its score inputs made by the
    linear model from the features ``inputs`` holds for them."""
    if link not in LINKS:
        raise ValueError(f"link={link!r}; expected one of {LINKS}")
    runner = {"torch": _torch, "jax": _jax, "jax.jit": _jax, "tensorflow": _tensorflow,
              "numpy": _no_autodiff, "array_api_strict": _no_autodiff}[framework]
    kinds = {name: table.kind for name, table in definition.state_tables().items()}
    names = score_names(definition, inputs)
    cast = {k: (None if v is None else
                np.asarray(v, dtype) if k in names or np.asarray(v).dtype.kind == "f"
                else np.asarray(v))
            for k, v in inputs.items()}
    return runner(framework, definition, _numpy_like(state, dtype, kinds),
                  _numpy_like(params, dtype), cast, names, np.asarray(w, dtype), link)


def _others(inputs, names, convert):
    return {k: (None if v is None else convert(v)) for k, v in inputs.items() if k not in names}


def _no_autodiff(framework, definition, state, params, inputs, names, w, link):
    convert = np.asarray if framework == "numpy" else array_api_strict.asarray
    scores = {k: convert(v) for k, v in model_scores(inputs, names, w, link).items()}
    state_t = definition.state_type(**{k: convert(v) for k, v in state.items()})
    params_t = definition.params_type(**{k: convert(v) for k, v in params.items()})
    loss, new = definition.apply(state_t, **scores, **_others(inputs, names, convert),
                                 params=params_t)
    return StepResult(float(loss), None, None, {},
                      {k: np.asarray(v) for k, v in new._asdict().items()})


def _torch(framework, definition, state, params, inputs, names, w, link):
    w_t = torch.tensor(w, requires_grad=True)
    params_t = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    scores = {}
    for name in names:
        made = torch.as_tensor(inputs[name]) @ w_t
        scores[name] = torch.sigmoid(made) if link == "sigmoid" else made
        scores[name].retain_grad()
    state_t = definition.state_type(**{k: torch.tensor(v) for k, v in state.items()})
    loss, new = definition.apply(state_t, **scores, **_others(inputs, names, torch.as_tensor),
                                 params=definition.params_type(**params_t))
    loss.backward()
    return StepResult(
        float(loss.detach()),
        {k: (np.zeros(v.shape) if v.grad is None else v.grad.numpy()) for k, v in scores.items()},
        np.zeros(w.shape) if w_t.grad is None else w_t.grad.numpy(),
        {k: (np.zeros(()) if v.grad is None else v.grad.numpy()) for k, v in params_t.items()},
        {k: v.detach().numpy() for k, v in new._asdict().items()},
    )


def _jax_step(definition, names, link, state, params, features, others, w):
    """One differentiated JAX step: the loss and new state, d/d each score input (by
    ``value_and_grad``), d/dw (by JAX's own vjp of the model) and d/d each auxiliary. Eager
    JAX compiles every primitive per new shape: one pass halves that cost."""

    def model(v):
        made = {name: features[name] @ v for name in names}
        return {k: jax.nn.sigmoid(m) for k, m in made.items()} if link == "sigmoid" else made

    def from_scores(scores, aux):
        return definition.apply(definition.state_type(**state), **scores, **others,
                                params=definition.params_type(**aux))

    scores, pull_back = jax.vjp(model, w)
    (loss, new), (g_scores, g_params) = jax.value_and_grad(
        from_scores, argnums=(0, 1), has_aux=True)(scores, params)
    (g_weights,) = pull_back(g_scores)
    return loss, g_scores, g_weights, g_params, new._asdict()


#: :func:`_jax_step` under ``jax.jit``, the definition, score names and link static: JAX's own
#: cache compiles it once per (definition, input shapes), as a JAX user's training step.
_jitted_step = jax.jit(_jax_step, static_argnums=(0, 1, 2))


def _jax(framework, definition, state, params, inputs, names, w, link):
    """``framework`` "jax" runs the step eagerly, "jax.jit" under ``jax.jit``."""
    step = _jitted_step if framework == "jax.jit" else _jax_step
    loss, g_scores, g_weights, g_params, new = step(
        definition, tuple(names), link, {k: jnp.asarray(v) for k, v in state.items()},
        {k: jnp.asarray(v) for k, v in params.items()},
        {name: jnp.asarray(inputs[name]) for name in names},
        _others(inputs, names, jnp.asarray), jnp.asarray(w))
    return StepResult(float(loss), {k: np.asarray(v) for k, v in g_scores.items()},
                      np.asarray(g_weights), {k: np.asarray(v) for k, v in g_params.items()},
                      {k: np.asarray(v) for k, v in new.items()})


def _tensorflow(framework, definition, state, params, inputs, names, w, link):
    w_t = tf.Variable(w)
    params_t = {k: tf.Variable(v) for k, v in params.items()}
    state_t = definition.state_type(**{k: tf.constant(v) for k, v in state.items()})
    with tf.GradientTape() as tape:
        scores = {}
        for name in names:
            made = tf.tensordot(tf.constant(inputs[name]), w_t, axes=1)
            scores[name] = tf.sigmoid(made) if link == "sigmoid" else made
            tape.watch(scores[name])
        loss, new = definition.apply(state_t, **scores, **_others(inputs, names, tf.constant),
                                     params=definition.params_type(**params_t))
    grads = tape.gradient(loss, [*scores.values(), w_t, *params_t.values()])
    count = len(scores)

    def numpy_or_zeros(g, like):
        return np.zeros(like.shape) if g is None else g.numpy()

    return StepResult(
        float(loss),
        {k: numpy_or_zeros(g, v) for (k, v), g in zip(scores.items(), grads[:count],
                                                       strict=True)},
        numpy_or_zeros(grads[count], w_t),
        {k: numpy_or_zeros(g, v) for (k, v), g in zip(params_t.items(), grads[count + 1:],
                                                       strict=True)},
        {k: v.numpy() for k, v in new._asdict().items()})


def reference_weight_grad(inputs: dict, w, grad_inputs: dict, link: str = "sigmoid"):
    """d loss / d w of the linear model from d loss / d each score input."""
    total = np.zeros(np.shape(w))
    for name, grad in grad_inputs.items():
        features = np.asarray(inputs[name])
        if link == "sigmoid":
            s = _sigmoid(features @ np.asarray(w))
            grad = grad * s * (1 - s)
        total = total + np.tensordot(grad, features, axes=np.ndim(grad))
    return total


def sigmoid(z: Any) -> np.ndarray:
    return _sigmoid(np.asarray(z))


def convert_index(framework: str, index) -> Any:
    """``index`` (numpy integers) as an array of ``framework`` in its index dtype."""
    index = np.asarray(index, dtype=np.int64)
    if framework == "torch":
        return torch.as_tensor(index)
    if framework == "tensorflow":
        return tf.constant(index)
    if framework == "jax":
        return jnp.asarray(index)  # int32 without x64: keys below 2**31
    return index
