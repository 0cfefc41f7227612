"""The registry of loss cases the verification harness runs: one entry per loss.

A new loss plugs into every cross-backend, jit, export and bad-input test by adding a
:class:`LossCase`: how to draw its hyper-parameters, one step's inputs and its numpy
reference step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from hypothesis import event
from hypothesis import strategies as st

import xrisk
from tests import _reference, _reference_classification

SURROGATE_NAMES = ("squared_hinge", "hinge", "squared", "logistic", "barrier_hinge")
#: Features per score element of the harness's linear model, ``scores = link(features @ w)``.
NUM_FEATURES = 3
#: Largest key space (and table) the harness draws: small, so duplicate indices are common.
MAX_KEYS = 12


def binary_batch(draw, definition, rng, *, max_batch: int = 9) -> dict:
    """One step of a binary loss: features (B, F), labels in {0, 1} (from none to all
    positives) and dataset indices drawn with replacement from the loss's sample space."""
    batch = draw(st.integers(1, max_batch), label="batch size")
    size = definition.key_spaces().get("sample") or MAX_KEYS
    positives = draw(st.integers(0, batch), label="positives in the batch")
    order = draw(st.permutations(range(batch)), label="positions of the positives")
    labels = np.zeros(batch, dtype=np.int64)
    labels[list(order[:positives])] = 1
    index = np.asarray(draw(st.lists(st.integers(0, size - 1), min_size=batch,
                                     max_size=batch), label="index"), dtype=np.int64)
    if len(np.unique(index[labels == 1])) < positives:
        event("duplicate positive indices")
    return {"scores": rng.normal(size=(batch, NUM_FEATURES)), "labels": labels, "index": index}


class LossCase(NamedTuple):
    """How the harness builds and checks one loss.

    make : (size, hyper) -> definition; ``size`` in 1..MAX_KEYS sizes its key spaces
    hyper : hypothesis strategy of constructor keyword arguments
    reference : (definition, state, params, **inputs) -> (loss, grad_inputs, grad_params,
                new_state); the score inputs are given as scores, ``grad_inputs`` maps each
                score input to d loss / d it
    initial_params : numpy values of the trainable auxiliaries to start from
    batch : (draw, definition, rng) -> one step's inputs by name, every score input given as
            features of shape ``input shape + (NUM_FEATURES,)``
    link : the model's link, ``scores = link(features @ w)``: "sigmoid" or "identity"
    """

    make: Callable[[int, dict], Any]
    hyper: st.SearchStrategy
    reference: Callable[..., tuple]
    initial_params: Callable[[np.random.Generator], dict]
    batch: Callable[..., dict] = binary_batch
    link: str = "sigmoid"


def is_binary(name: str) -> bool:
    """Whether the case ``name`` takes the binary (scores, labels, index) batch."""
    return CASES[name].batch is binary_batch


def _binary(reference):
    """A binary reference ``(..., scores, labels, index) -> (loss, grad, ...)`` in the
    harness's form, its gradient keyed by the input name."""
    def run(definition, state, params, scores, labels, index):
        loss, grad, grad_params, new_state = reference(definition, state, params, scores,
                                                       labels, index)
        return loss, {"scores": grad}, grad_params, new_state
    return run


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


def _pairwise_reference(definition, state, params, scores, labels, index):
    return _reference_classification.pairwise_auc(
        scores, labels, surrogate_name=definition.surrogate, margin=definition.margin,
        scale=definition.scale)


def _cross_entropy_reference(definition, state, params, scores, labels, index):
    return _reference_classification.cross_entropy(scores, labels)


def _focal_reference(definition, state, params, scores, labels, index):
    return _reference_classification.focal(scores, labels, alpha=definition.alpha,
                                           gamma=definition.gamma)


def _compositional_reference(definition, state, params, scores, labels, index):
    return _reference_classification.compositional_auc(
        scores, labels, params["a"], params["b"], params["alpha"], int(state["step"]),
        k=definition.k, margin=definition.margin, version=definition.version,
        imratio=definition.imratio)


def _pauc_cvar_reference(definition, state, params, scores, labels, index):
    return _reference_classification.pauc_cvar(
        scores, labels, index, state, beta=definition.beta, eta=definition.eta,
        margin=definition.margin, surrogate_name=definition.surrogate, scale=definition.scale)


def _pauc_dro_reference(definition, state, params, scores, labels, index):
    return _reference_classification.pauc_dro(
        scores, labels, index, state, gamma=definition.gamma, lam=definition.lam,
        margin=definition.margin, surrogate_name=definition.surrogate, scale=definition.scale)


def _tpauc_kl_reference(definition, state, params, scores, labels, index):
    return _reference_classification.tpauc_kl(
        scores, labels, index, state, tau=definition.tau, lam=definition.lam,
        gammas=definition.gammas, margin=definition.margin,
        surrogate_name=definition.surrogate, scale=definition.scale)


def _tpauc_cvar_reference(definition, state, params, scores, labels, index):
    return _reference_classification.tpauc_cvar(
        scores, labels, index, state, threshold=definition.margin, alpha=definition.alpha,
        beta0=definition.beta_0, beta1=definition.beta_1, theta0=definition.theta_0,
        theta1=definition.theta_1, surrogate_name=definition.surrogate, scale=definition.scale)


CASES: dict[str, LossCase] = {
    "APLoss": LossCase(
        make=lambda n, hyper: xrisk.APLoss(n, **hyper),
        hyper=st.fixed_dictionaries({
            "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
            "margin": st.sampled_from([0.5, 1.0, 1.3]),
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "scale": st.sampled_from([1.0, 2.0]),
        }),
        reference=_binary(_ap_reference),
        initial_params=lambda rng: {},
    ),
    "AUCMLoss": LossCase(
        make=lambda n, hyper: xrisk.AUCMLoss(**hyper),
        hyper=st.fixed_dictionaries({
            "margin": st.sampled_from([0.5, 1.0]),
            "version": st.sampled_from(["v1", "v2"]),
            "imratio": st.sampled_from([None, 0.3]),
        }),
        reference=_binary(_aucm_reference),
        initial_params=lambda rng: {k: rng.uniform(0, 1) for k in ("a", "b", "alpha")},
    ),
    "PairwiseAUCLoss": LossCase(
        make=lambda n, hyper: xrisk.PairwiseAUCLoss(**hyper),
        hyper=st.fixed_dictionaries({
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "margin": st.sampled_from([0.5, 1.0, 1.3]),
            "scale": st.sampled_from([1.0, 2.0, 10.0]),
        }),
        reference=_binary(_pairwise_reference),
        initial_params=lambda rng: {},
    ),
    "CrossEntropyLoss": LossCase(
        make=lambda n, hyper: xrisk.CrossEntropyLoss(**hyper),
        hyper=st.just({}),
        reference=_binary(_cross_entropy_reference),
        initial_params=lambda rng: {},
    ),
    "FocalLoss": LossCase(
        make=lambda n, hyper: xrisk.FocalLoss(**hyper),
        hyper=st.fixed_dictionaries({
            "alpha": st.sampled_from([0.0, 0.25, 0.5, 1.0]),
            "gamma": st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]),
        }),
        reference=_binary(_focal_reference),
        initial_params=lambda rng: {},
    ),
    # k <= 2 so that the harness's three steps cross a phase switch (BCE -> AUC-M).
    "CompositionalAUCLoss": LossCase(
        make=lambda n, hyper: xrisk.CompositionalAUCLoss(**hyper),
        hyper=st.fixed_dictionaries({
            "k": st.sampled_from([1, 2]),
            "margin": st.sampled_from([0.5, 1.0]),
            "version": st.sampled_from(["v1", "v2"]),
            "imratio": st.sampled_from([None, 0.3]),
        }),
        reference=_binary(_compositional_reference),
        initial_params=lambda rng: {k: rng.uniform(0, 1) for k in ("a", "b", "alpha")},
    ),
    # Partial AUC: temperatures down to 0.1 (l / lam up to ~40 with sigmoid scores), gamma = 1.
    "pAUC_CVaR_Loss": LossCase(
        make=lambda n, hyper: xrisk.pAUC_CVaR_Loss(n, **hyper),
        hyper=st.fixed_dictionaries({
            "beta": st.sampled_from([0.1, 0.5, 1.0]),
            "eta": st.sampled_from([0.1, 0.5]),
            "margin": st.sampled_from([0.5, 1.0]),
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "scale": st.sampled_from([1.0, 2.0]),
        }),
        reference=_binary(_pauc_cvar_reference),
        initial_params=lambda rng: {},
    ),
    "pAUC_DRO_Loss": LossCase(
        make=lambda n, hyper: xrisk.pAUC_DRO_Loss(n, **hyper),
        hyper=st.fixed_dictionaries({
            "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
            "lam": st.sampled_from([0.1, 0.5, 1.0, 2.0]),
            "margin": st.sampled_from([0.5, 1.0]),
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "scale": st.sampled_from([1.0, 2.0]),
        }),
        reference=_binary(_pauc_dro_reference),
        initial_params=lambda rng: {},
    ),
    "tpAUC_KL_Loss": LossCase(
        make=lambda n, hyper: xrisk.tpAUC_KL_Loss(n, **hyper),
        hyper=st.fixed_dictionaries({
            "tau": st.sampled_from([0.1, 0.5, 1.0, 3.0]),
            "lam": st.sampled_from([0.1, 0.5, 1.0]),
            "gammas": st.sampled_from([(0.9, 0.9), (0.5, 0.1), (0.1, 0.7), (1.0, 1.0)]),
            "margin": st.sampled_from([0.5, 1.0]),
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "scale": st.sampled_from([1.0, 2.0]),
        }),
        reference=_binary(_tpauc_kl_reference),
        initial_params=lambda rng: {},
    ),
    "tpAUC_CVaR_Loss": LossCase(
        make=lambda n, hyper: xrisk.tpAUC_CVaR_Loss(n, **hyper),
        hyper=st.fixed_dictionaries({
            "margin": st.sampled_from([0.5, 1.0]),
            "alpha": st.sampled_from([0.1, 0.5]),
            "beta_0": st.sampled_from([0.1, 0.3]),
            "beta_1": st.sampled_from([0.1, 0.3]),
            "theta_0": st.sampled_from([0.3, 0.5, 1.0]),
            "theta_1": st.sampled_from([0.3, 0.5, 1.0]),
            "surrogate": st.sampled_from(SURROGATE_NAMES),
            "scale": st.sampled_from([1.0, 2.0]),
        }),
        reference=_binary(_tpauc_cvar_reference),
        initial_params=lambda rng: {},
    ),
}
