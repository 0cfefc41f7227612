"""Harness pieces of the multi-instance (MIDAM) and extreme-classification (SCENT/SOX)
losses (tests/_cases.py registers them).

MIDAM: one step draws B bags of K instances (features (B, K, NUM_FEATURES); the identity link
makes the instance scores and attention logits ``features @ w``), bag labels with none to all
positive, bag indices with replacement (duplicates common) and, in some steps, a mask with
missing instances, whole bags without any included. Extreme: logit differences (B, C) made
the same way, sample indices with replacement, sometimes a mask.
"""

from __future__ import annotations

import numpy as np
from hypothesis import event
from hypothesis import strategies as st

from tests import _reference_extreme, _reference_midam
from tests._sizes import MAX_KEYS, draw_shape

NUM_FEATURES = 3  # as tests._cases.NUM_FEATURES (not imported: _cases imports this module)


def _index(draw, size, batch):
    index = np.asarray(draw(st.lists(st.integers(0, size - 1), min_size=batch,
                                     max_size=batch), label="index"), dtype=np.int64)
    if len(np.unique(index)) < batch:
        event("duplicate indices")
    return index


def _mask(draw, batch, width):
    if not draw(st.booleans(), label="mask"):
        return None
    cells = draw(st.lists(st.sampled_from([0, 1, 1]), min_size=batch * width,
                          max_size=batch * width), label="mask cells")
    mask = np.asarray(cells, dtype=np.int64).reshape(batch, width)
    if (mask.sum(axis=1) == 0).any():
        event("a position without instances")
    return mask


#: (bags B, instances per bag K): one bag of one instance, a few, the largest batch (a few
#: whole shapes, tests/_sizes.py; every B in 1..6 and K in 1..4 when thorough).
BAG_SHAPES = ((1, 1), (3, 4), (6, 2))
#: (samples B, classes C) of an extreme-classification batch, as BAG_SHAPES (C in 1..5).
EXTREME_SHAPES = ((1, 1), (3, 5), (6, 2))


def bag_batch(draw, definition, rng, *, shapes=BAG_SHAPES) -> dict:
    """Instance features (B, K, F) per score input, bag labels (B,), bag index (B,), and
    sometimes a mask (B, K)."""
    batch, width = draw_shape(draw, shapes, label="batch size, instances per bag K")
    size = definition.key_spaces().get("bag") or MAX_KEYS
    labels = np.asarray(draw(st.lists(st.integers(0, 1), min_size=batch, max_size=batch),
                             label="labels"), dtype=np.int64)
    if labels.sum() in (0, batch):
        event("one-class batch")
    out = {spec.name: rng.normal(size=(batch, width, NUM_FEATURES))
           for spec in definition.inputs() if spec.kind == "score"}
    out.update(labels=labels, index=_index(draw, size, batch))
    mask = _mask(draw, batch, width)
    if mask is not None:
        out["mask"] = mask
    return out


def extreme_batch(draw, definition, rng, *, shapes=EXTREME_SHAPES) -> dict:
    """Logit-difference features (B, C, F), sample index (B,), and sometimes a mask (B, C)."""
    batch, width = draw_shape(draw, shapes, label="batch size, classes C")
    out = {"logits": rng.normal(size=(batch, width, NUM_FEATURES)),
           "index": _index(draw, definition.num_samples, batch)}
    mask = _mask(draw, batch, width)
    if mask is not None:
        out["mask"] = mask
    return out


def softmax_reference(definition, state, params, scores, labels, index, mask=None):
    return _reference_midam.softmax_step(state, params, scores, labels, index, mask,
                                         tau=definition.tau, margin=definition.margin)


def attention_reference(definition, state, params, scores, attention, labels, index,
                        mask=None):
    return _reference_midam.attention_step(state, params, scores, attention, labels, index,
                                           mask, margin=definition.margin)


def extreme_reference(definition, state, params, logits, index, mask=None):
    return _reference_extreme.step(state, logits, index, mask, mode=definition.mode,
                                   alpha=definition.alpha,
                                   alpha_multiplier=definition.alpha_multiplier)


def midam_params(rng):
    return {k: rng.uniform(0, 1) for k in ("a", "b", "alpha")}


SOFTMAX_HYPER = st.fixed_dictionaries({
    "margin": st.sampled_from([0.5, 1.0]),
    "tau": st.sampled_from([0.1, 0.5, 1.0]),
    "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
})
ATTENTION_HYPER = st.fixed_dictionaries({
    "margin": st.sampled_from([0.5, 1.0]),
    "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
})
EXTREME_HYPER = st.fixed_dictionaries({
    "mode": st.sampled_from(["SCENT", "SOX"]),
    "alpha": st.sampled_from([0.5, 1.0, 10.0]),
    "gamma": st.sampled_from([0.1, 0.5, 0.9, 1.0]),
    "alpha_multiplier": st.sampled_from([0.5, 1.0, 2.0]),
})
