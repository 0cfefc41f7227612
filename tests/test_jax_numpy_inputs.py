"""The JAX adapter takes numpy batches outside ``jax.jit`` as it does inside (jit converts).

Before, an eager ``apply`` with numpy scores refused them with a torch spelling
(``torch.as_tensor``) while the same call inside ``jax.jit`` worked.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xrisk.jax as xr

NUM_SAMPLES = 16


@st.composite
def batches(draw):
    size = draw(st.integers(2, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    labels = np.array([1.0, 0.0] + list(rng.integers(0, 2, size - 2)), dtype=np.float32)
    scores = rng.uniform(0.05, 0.95, size).astype(np.float32)
    index = rng.choice(NUM_SAMPLES, size, replace=False)  # int64, as samplers give it
    return scores, labels, index


@settings(max_examples=5, deadline=None)
@given(batch=batches(), name=st.sampled_from(["APLoss", "AUCMLoss", "pAUC_DRO_Loss"]))
def test_numpy_batches_give_what_jax_batches_give(batch, name):
    if name == "AUCMLoss":  # no per-sample state; its auxiliaries travel as params
        loss_fn = xr.AUCMLoss(version="v2")
        extra = {"params": loss_fn.init_params()}
    else:
        loss_fn = getattr(xr, name)(num_samples=NUM_SAMPLES)
        extra = {}
    state = loss_fn.init()
    scores, labels, index = batch
    want_loss, want_state = loss_fn.apply(state, *map(jnp.asarray, batch), **extra)
    got_loss, got_state = loss_fn.apply(state, scores, labels, index, **extra)  # eager numpy
    named_loss, _ = loss_fn.apply(state, scores, labels=labels, index=index, **extra)
    jitted_loss, _ = jax.jit(lambda s: loss_fn.apply(s, scores, labels, index, **extra))(state)
    np.testing.assert_array_equal(got_loss, want_loss)
    np.testing.assert_array_equal(named_loss, want_loss)
    np.testing.assert_allclose(jitted_loss, want_loss, rtol=1e-6)
    for got, want in zip(jax.tree.leaves(got_state), jax.tree.leaves(want_state), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_numpy_index_beyond_int32_is_refused_before_the_conversion_wraps_it():
    enabled = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", False)  # JAX's default; the tests run in float64
    try:
        loss_fn = xr.APLoss(num_samples=NUM_SAMPLES)
        scores, labels = np.full(2, 0.5, np.float32), np.array([1.0, 0.0], np.float32)
        with pytest.raises(ValueError, match=r"index holds 4294967299, beyond int32"):
            loss_fn.apply(loss_fn.init(), scores, labels, np.array([0, 2**32 + 3]))
    finally:
        jax.config.update("jax_enable_x64", enabled)
