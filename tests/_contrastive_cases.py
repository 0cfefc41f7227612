"""Harness pieces of the contrastive losses (tests/_cases.py registers them).

One step draws B pairs of views (features (B, D, NUM_FEATURES); the identity link makes the
views ``features @ w``) and the dataset index of every pair, drawn with replacement from the
loss's key space so that duplicates are common (a whole batch of one sample included).
"""

from __future__ import annotations

import numpy as np
from hypothesis import event
from hypothesis import strategies as st

from tests import _reference_contrastive
from tests._sizes import MAX_KEYS, draw_shape

NUM_FEATURES = 3  # as tests._cases.NUM_FEATURES (not imported: _cases imports this module)


#: (batch B, feature dimension D) of a contrastive batch: one pair, a few, the largest batch
#: (a few whole shapes, tests/_sizes.py; every B in 1..6 and D in 2..3 when thorough).
CONTRASTIVE_SHAPES = ((1, 2), (3, 3), (6, 2))


def contrastive_batch(draw, definition, rng, *, shapes=CONTRASTIVE_SHAPES) -> dict:
    """Two views as features (B, D, F), with the dataset index (B,) of every pair (InfoNCE:
    sometimes no index). D >= 2: unit rows of one feature are +-1, whose gradients are
    rounding noise."""
    batch, width = draw_shape(draw, shapes, label="batch size, feature dimension D")
    size = definition.key_spaces().get("sample") or MAX_KEYS
    index = np.asarray(draw(st.lists(st.integers(0, size - 1), min_size=batch,
                                     max_size=batch), label="index"), dtype=np.int64)
    if len(np.unique(index)) < batch:
        event("duplicate indices")
    first, second = (spec.name for spec in definition.inputs() if spec.kind == "score")
    out = {first: rng.normal(size=(batch, width, NUM_FEATURES)),
           second: rng.normal(size=(batch, width, NUM_FEATURES)), "index": index}
    optional = next(spec for spec in definition.inputs() if spec.name == "index").optional
    if optional and draw(st.booleans(), label="no index"):
        out["index"] = None
    return out


_GAMMAS = st.fixed_dictionaries({
    "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
    "gamma_schedule": st.sampled_from(["constant", "cosine"]),
    "gamma_decay_epochs": st.just(3),
    "epoch": st.sampled_from([0, 1, 5]),
})

# Unnormalised views only with tau = 0.5: the float64 reference computes exp(z) unshifted.
GLOBAL_HYPER = st.builds(
    lambda gammas, rest, scale: {**gammas, **rest, **scale}, _GAMMAS,
    st.fixed_dictionaries({
        "temperature_scheme": st.sampled_from(["global", "individual"]),
        "rho": st.sampled_from([0.0, 0.3, 2.0]),
        "eta": st.sampled_from([0.01, 0.5]),
        "beta": st.sampled_from([0.5, 0.9, 1.0]),
    }),
    st.one_of(
        st.fixed_dictionaries({"tau": st.sampled_from([0.1, 0.5]), "normalize": st.just(True)}),
        st.fixed_dictionaries({"tau": st.just(0.5), "normalize": st.just(False)}),
    ))

# Normalised rows keep |margin| / tau <= 2 / 0.01 (the float64 reference is unshifted).
BIMODAL_HYPER = st.builds(
    lambda gammas, rest, scale: {**gammas, **rest, **scale}, _GAMMAS,
    st.fixed_dictionaries({
        "temperature_scheme": st.sampled_from(["global", "individual"]),
        "rho": st.sampled_from([0.0, 6.0]),
        "eta": st.sampled_from([0.01, 0.5]),
        "beta": st.sampled_from([0.5, 0.9]),
        "negative_reduction": st.sampled_from(["mean", "sum"]),
    }),
    st.one_of(
        st.fixed_dictionaries({"tau": st.sampled_from([0.01, 0.05]), "normalize": st.just(True)}),
        st.fixed_dictionaries({"tau": st.just(0.5), "tau_max": st.just(1.0),
                               "normalize": st.just(False)}),
    ))

INFO_NCE_HYPER = st.fixed_dictionaries({
    "tau": st.sampled_from([0.05, 0.1, 1.0]),
    "within_view": st.booleans(),
    "normalize": st.booleans(),
})


def global_reference(definition, state, params, view1, view2, index):
    return _reference_contrastive.global_contrastive(definition, state, params, view1, view2,
                                                     index)


def bimodal_reference(definition, state, params, image, text, index):
    return _reference_contrastive.bimodal_contrastive(definition, state, params, image, text,
                                                      index)


def info_nce_reference(definition, state, params, view1, view2, index=None):
    return _reference_contrastive.info_nce(definition, state, params, view1, view2, index)
