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
from tests import (
    _midam_cases,
    _ranking_cases,
    _reference,
    _reference_classification,
    _reference_multilabel,
)
from tests._contrastive_cases import (
    BIMODAL_HYPER,
    GLOBAL_HYPER,
    INFO_NCE_HYPER,
    bimodal_reference,
    contrastive_batch,
    global_reference,
    info_nce_reference,
)
from tests._sizes import MAX_KEYS, draw_size

SURROGATE_NAMES = ("squared_hinge", "hinge", "squared", "logistic", "barrier_hinge")
#: Features per score element of the harness's linear model, ``scores = link(features @ w)``.
NUM_FEATURES = 3
#: Batch sizes of the binary and multi-label drawers (tests/_sizes.py: few, so compiled
#: primitives are reused; free under the "thorough" profile).
BATCH_SIZES = (1, 3, 9)


def binary_batch(draw, definition, rng, *, batch_sizes=BATCH_SIZES) -> dict:
    """One step of a binary loss: features (B, F), labels in {0, 1} (from none to all
    positives) and dataset indices drawn with replacement from the loss's sample space."""
    batch = draw_size(draw, batch_sizes, label="batch size")
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

    make : (size, hyper) -> definition; ``size`` (tests._sizes.KEY_SPACES: 1..MAX_KEYS) sizes
           its key spaces
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


# --------------------------------------------------------------------------- multi-label
#: Labels of the harness's multi-label losses (K): small, so each label's rows are few.
NUM_LABELS = 3


def multilabel_batch(draw, definition, rng, *, batch_sizes=BATCH_SIZES) -> dict:
    """One step of a multi-label loss: features (B, K, F); labels (B, K) of 0, 1 or NaN
    (missing), so that columns without a positive, without a negative or without any
    observed entry occur; dataset indices with replacement; and, in some steps, the task id
    of every row as the TriSampler yields it (only those labels are active)."""
    batch = draw_size(draw, batch_sizes, label="batch size")
    num_labels = definition.num_labels
    size = definition.key_spaces().get("sample") or MAX_KEYS
    cells = draw(st.lists(st.sampled_from([0.0, 1.0, np.nan]), min_size=batch * num_labels,
                          max_size=batch * num_labels), label="labels (NaN: missing)")
    labels = np.asarray(cells).reshape(batch, num_labels)
    index = np.asarray(draw(st.lists(st.integers(0, size - 1), min_size=batch,
                                     max_size=batch), label="index"), dtype=np.int64)
    missing = np.isnan(labels)
    if missing.any():
        event("missing labels")
    elif draw(st.booleans(), label="integer labels"):
        labels = labels.astype(np.int64)
    if ((labels == 1).sum(axis=0) == 0).any():
        event("a label without a positive")
    if any(len(np.unique(index[labels[:, t] == 1])) < int((labels[:, t] == 1).sum())
           for t in range(num_labels)):
        event("duplicate positive indices")
    out = {"scores": rng.normal(size=(batch, num_labels, NUM_FEATURES)), "labels": labels,
           "index": index}
    if draw(st.booleans(), label="task ids"):
        out["task"] = np.asarray(draw(st.lists(st.integers(0, num_labels - 1), min_size=batch,
                                               max_size=batch), label="task"), dtype=np.int64)
    return out


def _ml_aucm_reference(definition, state, params, scores, labels, index=None, task=None):
    loss, grad, grad_params, new_state = _reference_multilabel.multilabel_aucm(
        scores, labels, params, margin=definition.margin, version=definition.version,
        imratio=definition.imratio, task=task)
    return loss, {"scores": grad}, grad_params, new_state


def _ml_ap_reference(definition, state, params, scores, labels, index, task=None):
    loss, grad, grad_params, new_state = _reference_multilabel.mean_ap(
        scores, labels, index, state, num_samples=definition.num_samples,
        gamma=definition.gamma, margin=definition.margin, surrogate_name=definition.surrogate,
        scale=definition.scale, task=task)
    return loss, {"scores": grad}, grad_params, new_state


def _ml_pauc_reference(definition, state, params, scores, labels, index, task=None):
    _, _, names = _reference_multilabel.PAUC_STEPS[definition.mode]
    loss, grad, grad_params, new_state = _reference_multilabel.multilabel_pauc(
        scores, labels, index, state, mode=definition.mode,
        num_samples=definition.num_samples,
        options={key: getattr(definition, attribute) for key, attribute in names.items()},
        surrogate_name=definition.surrogate, scale=definition.scale, task=task)
    return loss, {"scores": grad}, grad_params, new_state


_SURROGATE_HYPER = {"surrogate": st.sampled_from(SURROGATE_NAMES),
                    "scale": st.sampled_from([1.0, 2.0])}
#: Every mode of MultiLabelpAUCLoss with its options (values as the single-label cases').
_ML_PAUC_HYPER = st.one_of(
    st.fixed_dictionaries({"mode": st.just("SOPA"), "beta": st.sampled_from([0.1, 0.5, 1.0]),
                           "eta": st.sampled_from([0.1, 0.5]),
                           "margin": st.sampled_from([0.5, 1.0]), **_SURROGATE_HYPER}),
    st.fixed_dictionaries({"mode": st.sampled_from(["SOPAs", "1w"]),
                           "gamma": st.sampled_from([0.1, 0.9, 1.0]),
                           "lam": st.sampled_from([0.1, 1.0]),
                           "margin": st.sampled_from([0.5, 1.0]), **_SURROGATE_HYPER}),
    st.fixed_dictionaries({"mode": st.sampled_from(["SOTAs", "2w"]),
                           "tau": st.sampled_from([0.1, 1.0, 3.0]),
                           "lam": st.sampled_from([0.1, 1.0]),
                           "gammas": st.sampled_from([(0.9, 0.9), (0.1, 0.7), (1.0, 1.0)]),
                           "margin": st.sampled_from([0.5, 1.0]), **_SURROGATE_HYPER}),
    st.fixed_dictionaries({"mode": st.just("STACO"), "margin": st.sampled_from([0.5, 1.0]),
                           "alpha": st.sampled_from([0.1, 0.5]),
                           "beta_0": st.sampled_from([0.1, 0.3]),
                           "beta_1": st.sampled_from([0.1, 0.3]),
                           "theta_0": st.sampled_from([0.3, 1.0]),
                           "theta_1": st.sampled_from([0.3, 1.0]), **_SURROGATE_HYPER}),
)


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
    # Multi-label: K = NUM_LABELS labels, missing labels, task ids in some steps.
    "MultiLabelAUCMLoss": LossCase(
        make=lambda n, hyper: xrisk.MultiLabelAUCMLoss(NUM_LABELS, **hyper),
        hyper=st.fixed_dictionaries({
            "margin": st.sampled_from([0.5, 1.0]),
            "version": st.sampled_from(["v1", "v2"]),
            "imratio": st.sampled_from([None, 0.3]),
        }),
        reference=_ml_aucm_reference,
        initial_params=lambda rng: {k: rng.uniform(0, 1, NUM_LABELS)
                                    for k in ("a", "b", "alpha")},
        batch=multilabel_batch,
    ),
    "meanAveragePrecisionLoss": LossCase(
        make=lambda n, hyper: xrisk.meanAveragePrecisionLoss(NUM_LABELS, n, **hyper),
        hyper=st.fixed_dictionaries({
            "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
            "margin": st.sampled_from([0.5, 1.0, 1.3]),
            **_SURROGATE_HYPER,
        }),
        reference=_ml_ap_reference,
        initial_params=lambda rng: {},
        batch=multilabel_batch,
    ),
    "MultiLabelpAUCLoss": LossCase(
        make=lambda n, hyper: xrisk.MultiLabelpAUCLoss(NUM_LABELS, n, **hyper),
        hyper=_ML_PAUC_HYPER,
        reference=_ml_pauc_reference,
        initial_params=lambda rng: {},
        batch=multilabel_batch,
    ),
    # Ranking: Q queries x (P positives + M negatives), padded rows, repeated queries and
    # interactions (tests/_ranking_cases.py); "size" is the interaction and query count.
    "ListwiseCELoss": LossCase(
        make=lambda n, hyper: xrisk.ListwiseCELoss(n, **hyper),
        hyper=_ranking_cases.LISTWISE_HYPER,
        reference=_ranking_cases.listwise_reference,
        initial_params=lambda rng: {},
        batch=_ranking_cases.ranking_batch,
        link="identity",
    ),
    "NDCGLoss": LossCase(
        make=lambda n, hyper: xrisk.NDCGLoss(n, n, **{"num_items": 1000, **hyper}),
        hyper=_ranking_cases.NDCG_HYPER,
        reference=_ranking_cases.ndcg_reference,
        initial_params=lambda rng: {},
        batch=_ranking_cases.ranking_batch,
    ),
    # Contrastive: two views (B, D) made by the identity link, duplicate indices common
    # (tests/_contrastive_cases.py); "size" is the number of samples.
    "GlobalContrastiveLoss": LossCase(
        make=lambda n, hyper: xrisk.GlobalContrastiveLoss(n, **hyper),
        hyper=GLOBAL_HYPER,
        reference=global_reference,
        initial_params=lambda rng: {},
        batch=contrastive_batch,
        link="identity",
    ),
    "BimodalContrastiveLoss": LossCase(
        make=lambda n, hyper: xrisk.BimodalContrastiveLoss(n, **hyper),
        hyper=BIMODAL_HYPER,
        reference=bimodal_reference,
        initial_params=lambda rng: {},
        batch=contrastive_batch,
        link="identity",
    ),
    "InfoNCELoss": LossCase(
        make=lambda n, hyper: xrisk.InfoNCELoss(**hyper),
        hyper=INFO_NCE_HYPER,
        reference=info_nce_reference,
        initial_params=lambda rng: {},
        batch=contrastive_batch,
        link="identity",
    ),
    # Multi-instance (MIDAM): instance scores / attention logits (B, K) by the identity link,
    # bags with duplicates and masks (tests/_midam_cases.py); "size" is the number of bags.
    "MIDAM_softmax_pooling_loss": LossCase(
        make=lambda n, hyper: xrisk.MIDAM_softmax_pooling_loss(n, **hyper),
        hyper=_midam_cases.SOFTMAX_HYPER,
        reference=_midam_cases.softmax_reference,
        initial_params=_midam_cases.midam_params,
        batch=_midam_cases.bag_batch,
        link="identity",
    ),
    "MIDAM_attention_pooling_loss": LossCase(
        make=lambda n, hyper: xrisk.MIDAM_attention_pooling_loss(n, **hyper),
        hyper=_midam_cases.ATTENTION_HYPER,
        reference=_midam_cases.attention_reference,
        initial_params=_midam_cases.midam_params,
        batch=_midam_cases.bag_batch,
        link="identity",
    ),
    # Extreme classification (SCENT / SOX): logit differences (B, C) by the identity link.
    "EntLossClassification": LossCase(
        make=lambda n, hyper: xrisk.EntLossClassification(n, **hyper),
        hyper=_midam_cases.EXTREME_HYPER,
        reference=_midam_cases.extreme_reference,
        initial_params=lambda rng: {},
        batch=_midam_cases.extreme_batch,
        link="identity",
    ),
}
