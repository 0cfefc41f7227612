"""The registry of loss cases the verification harness runs: one entry per loss.

A new loss plugs into every cross-backend, jit, export and bad-input test by adding a
:class:`LossCase`: how to draw its hyper-parameters and its numpy reference step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st

import xrisk
from tests import _reference

SURROGATE_NAMES = ("squared_hinge", "hinge", "squared", "logistic", "barrier_hinge")


class LossCase(NamedTuple):
    """How the harness builds and checks one loss.

    make : (num_samples, hyper) -> definition
    hyper : hypothesis strategy of constructor keyword arguments
    reference : (definition, state, params, scores, labels, index)
                -> (loss, grad_scores, grad_params, new_state)
    initial_params : numpy values of the trainable auxiliaries to start from
    """

    make: Callable[[int, dict], Any]
    hyper: st.SearchStrategy
    reference: Callable[..., tuple]
    initial_params: Callable[[np.random.Generator], dict]


def _ap_reference(definition, state, params, scores, labels, index):
    loss, grad, u_all, u_pos = _reference.ap_step(
        state["u"][:, 0], state["u"][:, 1], scores, labels, index, gamma=definition.gamma,
        margin=definition.margin, surrogate_name=definition.surrogate, scale=definition.scale)
    return loss, grad, {}, {"u": np.stack([u_all, u_pos], axis=1)}


def _aucm_reference(definition, state, params, scores, labels, index):
    loss, grad, g_a, g_b, g_alpha = _reference.aucm_loss(
        scores, labels, params["a"], params["b"], params["alpha"], margin=definition.margin,
        version=definition.version, imratio=definition.imratio)
    return loss, grad, {"a": g_a, "b": g_b, "alpha": g_alpha}, {}


CASES: dict[str, LossCase] = {
    "APLoss": LossCase(
        make=lambda n, hyper: xrisk.APLoss(n, **hyper),
        hyper=st.fixed_dictionaries({
            "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
            "margin": st.sampled_from([0.5, 1.0, 1.3]),
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "scale": st.sampled_from([1.0, 2.0]),
        }),
        reference=_ap_reference,
        initial_params=lambda rng: {},
    ),
    "AUCMLoss": LossCase(
        make=lambda n, hyper: xrisk.AUCMLoss(**hyper),
        hyper=st.fixed_dictionaries({
            "margin": st.sampled_from([0.5, 1.0]),
            "version": st.sampled_from(["v1", "v2"]),
            "imratio": st.sampled_from([None, 0.3]),
        }),
        reference=_aucm_reference,
        initial_params=lambda rng: {k: rng.uniform(0, 1) for k in ("a", "b", "alpha")},
    ),
}
