"""Run one step of a core loss definition in each framework, with that framework's autodiff.

Every runner takes numpy float64 inputs and returns numpy results, so tests compare
frameworks with plain ``assert_allclose``. The model is a small linear one,
``scores = sigmoid(X @ w)``, so gradients with respect to the scores and to the weights are
both checked.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
import torch

FRAMEWORKS = ("torch", "jax", "tensorflow")
NO_AUTODIFF = ("numpy", "array_api_strict")


class StepResult(NamedTuple):
    loss: float
    grad_scores: np.ndarray | None
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


def run_step(framework: str, definition, state: dict, params: dict, X, w, labels, index,
             dtype=np.float64) -> StepResult:
    """One ``definition.apply`` on ``scores = sigmoid(X @ w)`` in ``framework``."""
    runner = {"torch": _torch, "jax": _jax, "tensorflow": _tensorflow,
              "numpy": _no_autodiff, "array_api_strict": _no_autodiff}[framework]
    kinds = {name: table.kind for name, table in definition.state_tables().items()}
    return runner(framework, definition, _numpy_like(state, dtype, kinds),
                  _numpy_like(params, dtype),
                  np.asarray(X, dtype), np.asarray(w, dtype), labels, index)


def _no_autodiff(framework, definition, state, params, X, w, labels, index):
    convert = np.asarray if framework == "numpy" else array_api_strict.asarray
    scores = convert(_sigmoid(X @ w))
    state_t = definition.state_type(**{k: convert(v) for k, v in state.items()})
    params_t = definition.params_type(**{k: convert(v) for k, v in params.items()})
    idx = None if index is None else convert(np.asarray(index))
    loss, new = definition.apply(state_t, scores, convert(np.asarray(labels)), idx,
                                 params=params_t)
    return StepResult(float(loss), None, None, {},
                      {k: np.asarray(v) for k, v in new._asdict().items()})


def _torch(framework, definition, state, params, X, w, labels, index):
    w_t = torch.tensor(w, requires_grad=True)
    params_t = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    scores = torch.sigmoid(torch.as_tensor(X) @ w_t)
    scores.retain_grad()
    state_t = definition.state_type(**{k: torch.tensor(v) for k, v in state.items()})
    idx = None if index is None else torch.as_tensor(np.asarray(index))
    loss, new = definition.apply(state_t, scores, torch.as_tensor(np.asarray(labels)), idx,
                                 params=definition.params_type(**params_t))
    loss.backward()
    return StepResult(
        float(loss.detach()), scores.grad.numpy(), w_t.grad.numpy(),
        {k: (np.zeros(()) if v.grad is None else v.grad.numpy()) for k, v in params_t.items()},
        {k: v.detach().numpy() for k, v in new._asdict().items()},
    )


def _jax(framework, definition, state, params, X, w, labels, index):
    state_j = definition.state_type(**{k: jnp.asarray(v) for k, v in state.items()})
    params_j = definition.params_type(**{k: jnp.asarray(v) for k, v in params.items()})
    labels_j = jnp.asarray(np.asarray(labels))
    idx = None if index is None else jnp.asarray(np.asarray(index))

    def from_scores(scores, aux):
        return definition.apply(state_j, scores, labels_j, idx, params=aux)

    # One differentiated pass: d/ds by value_and_grad, d/dw by JAX's own vjp of the model.
    # (Eager JAX compiles every primitive per new shape; one pass halves that cost.)
    scores, pull_back = jax.vjp(lambda v: jax.nn.sigmoid(jnp.asarray(X) @ v), jnp.asarray(w))
    (loss, new), (g_scores, g_params) = jax.value_and_grad(
        from_scores, argnums=(0, 1), has_aux=True)(scores, params_j)
    (g_weights,) = pull_back(g_scores)
    return StepResult(float(loss), np.asarray(g_scores), np.asarray(g_weights),
                      {k: np.asarray(v) for k, v in g_params._asdict().items()},
                      {k: np.asarray(v) for k, v in new._asdict().items()})


def _tensorflow(framework, definition, state, params, X, w, labels, index):
    w_t = tf.Variable(w)
    params_t = {k: tf.Variable(v) for k, v in params.items()}
    state_t = definition.state_type(**{k: tf.constant(v) for k, v in state.items()})
    idx = None if index is None else tf.constant(np.asarray(index))
    with tf.GradientTape() as tape:
        scores = tf.sigmoid(tf.constant(X) @ w_t[:, None])[:, 0]
        tape.watch(scores)
        loss, new = definition.apply(state_t, scores, tf.constant(np.asarray(labels)), idx,
                                     params=definition.params_type(**params_t))
    grads = tape.gradient(loss, [scores, w_t, *params_t.values()])
    g_params = {k: (np.zeros(()) if g is None else g.numpy())
                for k, g in zip(params_t, grads[2:], strict=True)}
    return StepResult(float(loss), grads[0].numpy(), grads[1].numpy(), g_params,
                      {k: v.numpy() for k, v in new._asdict().items()})


def reference_weight_grad(X, w, grad_scores):
    """d loss / d w of ``scores = sigmoid(X @ w)`` from d loss / d scores."""
    s = _sigmoid(np.asarray(X) @ np.asarray(w))
    return np.asarray(X).T @ (grad_scores * s * (1 - s))


def sigmoid(z: Any) -> np.ndarray:
    return _sigmoid(np.asarray(z))
