"""Harness pieces of the ranking losses (ListwiseCELoss, NDCGLoss): the batch drawer, the
reference wrappers and the hyper-parameter strategies that ``tests/_cases.py`` registers."""

from __future__ import annotations

import numpy as np
from hypothesis import event
from hypothesis import strategies as st

from tests import _reference_ranking
from tests._sizes import draw_shape

#: Must equal tests._cases.NUM_FEATURES (kept here to avoid a circular import).
NUM_FEATURES = 3
SURROGATE_NAMES = ("squared_hinge", "hinge", "squared", "logistic", "barrier_hinge")


#: (queries Q, positives P, negatives M) of a ranking batch: the smallest, the largest, and
#: one padded row with a single negative and one unpadded row with more negatives in between
#: (a few whole shapes, tests/_sizes.py; every Q in 1..4, P and M in 1..3 when thorough).
RANKING_SHAPES = ((1, 1, 1), (2, 3, 1), (4, 1, 3), (4, 3, 3))


def ranking_batch(draw, definition, rng, *, shapes=RANKING_SHAPES) -> dict:
    """One step of a ranking loss: Q queries (repeats included) x (P positives + M negatives).

    Rows may have fewer real positives than P: their tail repeats earlier positives (the same
    interaction id, as the TriSampler pads) with mask 0. Interaction ids are drawn with
    replacement from a small key space, so one interaction often appears twice in a batch.
    """
    queries, positives, negatives = draw_shape(
        draw, shapes, label="queries, positives per query, negatives per query")
    spaces = definition.key_spaces()
    num_interactions = spaces["interaction"]
    num_queries = spaces.get("query") or 4
    query = np.asarray(draw(st.lists(st.integers(0, num_queries - 1), min_size=queries,
                                     max_size=queries), label="query ids"), dtype=np.int64)
    interaction = np.asarray(draw(st.lists(
        st.integers(0, num_interactions - 1), min_size=queries * positives,
        max_size=queries * positives), label="interaction ids"), dtype=np.int64)
    interaction = interaction.reshape(queries, positives)
    real = np.asarray(draw(st.lists(st.integers(1, positives), min_size=queries,
                                    max_size=queries), label="real positives per row"))
    mask = np.arange(positives)[None, :] < real[:, None]
    for q in range(queries):  # padding repeats the row's real positives, as the sampler does
        for slot in range(real[q], positives):
            interaction[q, slot] = interaction[q, slot % real[q]]
    if not mask.all():
        event("padded positives")
    if len(np.unique(interaction[mask])) < mask.sum():
        event("duplicate interactions")
    if len(np.unique(query)) < queries:
        event("repeated queries")
    out = {
        "scores": rng.normal(size=(queries, positives + negatives, NUM_FEATURES)),
        "interaction": interaction,
        "mask": mask,
        "relevance": np.asarray(draw(st.lists(st.integers(0, 4), min_size=queries * positives,
                                              max_size=queries * positives),
                                     label="relevance"), dtype=np.float64
                                ).reshape(queries, positives),
        "query": query,
        # Counts are whole numbers (their declared domains): 1..5 relevant items among at
        # least 6 candidates and a row's columns, so num_relevant < num_candidates.
        "num_relevant": rng.integers(1, 6, queries).astype(np.float64),
        "ideal_dcg": rng.uniform(1.0, 10.0, queries),
        "num_candidates": rng.integers(max(positives + negatives, 6), 40,
                                       queries).astype(np.float64),
    }
    names = {spec.name for spec in definition.inputs()}
    if getattr(definition, "num_items", 0) is not None:
        names.discard("num_candidates")
    return {name: value for name, value in out.items() if name in names}


def listwise_reference(definition, state, params, scores, interaction, mask=None):
    loss, grad, new_state = _reference_ranking.listwise_ce_step(
        state["u"], scores, interaction, mask, gamma=definition.gamma)
    return loss, {"scores": grad}, {}, new_state


def ndcg_reference(definition, state, params, scores, relevance, query, interaction,
                   num_relevant, ideal_dcg, mask=None, num_candidates=None):
    loss, grad, new_state = _reference_ranking.ndcg_step(
        state, scores, relevance, query, interaction, num_relevant, ideal_dcg, mask,
        num_candidates, num_items=definition.num_items, gamma0=definition.gamma0,
        gamma1=definition.gamma1, eta0=definition.eta0, margin=definition.margin,
        top_k=definition.top_k, top_k_version=definition.top_k_version,
        tau_1=definition.tau_1, tau_2=definition.tau_2, sigmoid_alpha=definition.sigmoid_alpha,
        surrogate_name=definition.surrogate, scale=definition.scale)
    return loss, {"scores": grad}, {}, new_state


LISTWISE_HYPER = st.fixed_dictionaries({"gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0])})

NDCG_HYPER = st.fixed_dictionaries({
    "num_items": st.sampled_from([None, 20, 1000]),
    "gamma0": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
    "gamma1": st.sampled_from([0.3, 0.9, 1.0]),
    "eta0": st.sampled_from([0.01, 0.5]),
    "margin": st.sampled_from([0.5, 1.0]),
    "top_k": st.sampled_from([None, None, 1, 3]),
    "top_k_version": st.sampled_from(["theo", "prac"]),
    "tau_1": st.sampled_from([0.01, 0.3]),
    "tau_2": st.sampled_from([1e-4, 0.05]),
    "sigmoid_alpha": st.sampled_from([1.0, 2.0]),
    "surrogate": st.sampled_from(SURROGATE_NAMES),
    "scale": st.sampled_from([1.0, 2.0]),
})
