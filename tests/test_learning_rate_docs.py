"""Each optimizer's docstring says what its adapter takes as ``learning_rate``, and does so.

The docstrings said that ``learning_rate`` may be a schedule (a callable) for every adapter,
and LARS's that the three frameworks agree "under a schedule"; the torch optimizers refuse a
callable (torch keeps the rate in ``param_groups``, where ``torch.optim.lr_scheduler``
changes it).
"""

from __future__ import annotations

import re

import jax.numpy as jnp
import keras
import optax
import pytest
import tensorflow as tf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import xrisk
import xrisk.jax as xj
import xrisk.tensorflow as xt
import xrisk.torch as xr

#: Optimizers whose constructor takes only parameters besides hyper-parameters.
PLAIN = sorted(name for name in xrisk.OPTIMIZERS if name not in ("PESG", "PDSCA", "MIDAM"))


def _learning_rate_entry(doc: str) -> str:
    match = re.search(r"learning_rate : float or callable, [^\n]*\n((?:    [^\n]*\n)+)", doc)
    assert match, doc[:400]
    return " ".join(match.group(1).split())


@pytest.mark.parametrize("name", sorted(xrisk.OPTIMIZERS))
def test_each_torch_docstring_says_torch_takes_a_number_and_lr_scheduler(name):
    entry = _learning_rate_entry(getattr(xr, name).__doc__)
    assert "torch takes a number only" in entry and "torch.optim.lr_scheduler" in entry, entry
    assert "JAX and TensorFlow also take a schedule" in entry, entry


def test_the_lars_docstring_tells_torch_users_to_use_lr_scheduler():
    for cls in (xrisk.LARS, xr.LARS):
        text = " ".join(cls.__doc__.split())
        assert "under a schedule (in JAX and TensorFlow a schedule passed as" in text
        assert "torch.optim.lr_scheduler" in text


@settings(max_examples=3, deadline=None)
@given(name=st.sampled_from(PLAIN), rate=st.floats(1e-4, 1.0))
def test_what_the_docstrings_promise_holds(name, rate):
    schedule = optax.exponential_decay(rate, 10, 0.5)
    params = [torch.nn.Parameter(torch.ones(2, 2, dtype=torch.float64))]
    with pytest.raises(TypeError, match=r"learning_rate is a callable.*torch\.optim\.lr_scheduler"):
        getattr(xr, name)(params, learning_rate=schedule)
    # torch: a number, then a scheduler changes group["lr"] as the docstring says.
    optimizer = getattr(xr, name)(params, learning_rate=rate)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    params[0].grad = torch.ones_like(params[0])
    optimizer.step()
    scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(rate / 2)
    # JAX: an optax schedule; TensorFlow: a Keras schedule or a callable of the step count.
    transformation = getattr(xj, name)(learning_rate=schedule)
    transformation.update({"w": jnp.ones((2, 2))}, transformation.init({"w": jnp.ones((2, 2))}),
                          {"w": jnp.ones((2, 2))})
    variable = tf.Variable(tf.ones([2, 2], tf.float64))
    for tf_schedule in (keras.optimizers.schedules.ExponentialDecay(rate, 10, 0.5),
                        lambda step: rate * 0.5 ** (step / 10)):
        tf_optimizer = getattr(xt, name)([variable], learning_rate=tf_schedule)
        tf_optimizer.apply_gradients([(tf.ones([2, 2], tf.float64), variable)])
