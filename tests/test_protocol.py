"""The loss protocol carries the inputs and state of the ranking and contrastive families.

The math of NDCG (SONG, K-SONG), listwise CE and the contrastive losses (SogCLR, iSogCLR,
bimodal) comes in later issues; their *shapes* must fit the protocol now. Each is declared
here as a small test-local :class:`~xrisk.losses.LossDefinition` with the inputs and state of
LibAUC 2.0.1's ListwiseCELoss, NDCGLoss, GCLoss_v1 and GCLoss_v2, and a trivial ``_loss`` that
gathers the batch's rows, writes new rows with ``step.write_rows`` (a 2-D interaction index
included) and returns a simple differentiable value. Checked in numpy, array-api-strict,
torch, JAX (eager and ``jax.jit``) and TensorFlow (eager and ``tf.function``), through the
adapters' generic base classes (``xrisk.<framework>.XRiskLoss(definition)``):

- allocation: shapes and fills of every state table from the declarations;
- one step agrees across frameworks, and only the batch's rows change (O(batch) writes);
- export / load round trip between frameworks;
- named dimensions (queries, candidates, positives, features) are validated;
- index ranges are checked per key space;
- a bad traced batch (``jax.jit``, ``tf.function``) writes nothing and returns NaN.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import array_api_compat.numpy as np_xp
import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from numpy.testing import assert_allclose, assert_array_equal

import xrisk.jax
import xrisk.tensorflow
import xrisk.torch
from xrisk._adapter_support import METADATA_KEY
from xrisk._arguments import check_count, check_fraction, check_positive
from xrisk.backends import get_backend
from xrisk.losses import Input, LossDefinition, StateTable, Step

Array = Any

# Sizes: every table is larger than a batch's keys, so "only the batch's rows" is visible.
NUM_QUERIES = 5  # users
NUM_ITEMS = 40
NUM_INTERACTIONS = 12  # relevant (query, item) pairs: the ranking state's key space
NUM_POSITIVES, NUM_NEGATIVES = 2, 3  # per query in a batch (TriSampler's num_pos, num_neg)
NUM_SAMPLES = 9  # contrastive data set
TEMPERATURE = 0.1


# -- test-local definitions -------------------------------------------------------------
def _gather(step: Step, table: Array, index: Array) -> Array:
    """Rows of ``table`` at ``index`` of any shape: shape ``index.shape + row``."""
    xp = step.xp
    flat = xp.take(table, xp.reshape(index, (-1,)), axis=0)
    return xp.reshape(flat, tuple(index.shape) + tuple(table.shape[1:]))


def _sigmoid(xp: Any, x: Array) -> Array:
    return 1 / (1 + xp.exp(-x))


class _Ranking(LossDefinition):
    """Shared declarations of the ranking family (ListwiseCE, NDCG): per query of a batch, the
    first ``num_positives`` of the ``candidates`` scores are its sampled relevant items."""

    def __init__(self, num_interactions: int, num_queries: int, num_items: int,
                 num_positives: int, num_negatives: int, *, gamma: float = 0.9,
                 margin: float = 1.0) -> None:
        self.num_interactions = check_count(self.name, "num_interactions", num_interactions)
        self.num_queries = check_count(self.name, "num_queries", num_queries)
        self.num_items = check_count(self.name, "num_items", num_items)
        self.num_positives = check_count(self.name, "num_positives", num_positives)
        self.num_negatives = check_count(self.name, "num_negatives", num_negatives)
        self.gamma = check_fraction(self.name, "gamma", gamma)
        self.margin = check_positive(self.name, "margin", margin)

    def dims(self) -> dict[str, int]:
        # The sampler fixes both per query, so a batch of another width is a caller's error.
        return {"positives": self.num_positives,
                "candidates": self.num_positives + self.num_negatives}

    def key_spaces(self) -> dict[str, int | None]:
        return {"query": self.num_queries, "interaction": self.num_interactions}

    def _moving_average(self, step: Step, table: Array, index: Array, estimate: Array):
        old = _gather(step, table, index)
        new = (1 - self.gamma) * old + self.gamma * step.stop(estimate)
        return new, step.write_rows(table, index, new)


class ListwiseState(NamedTuple):
    u: Array  #: (num_interactions,)


class ListwiseCE(_Ranking):
    """ListwiseCELoss: predictions (Q, P+M) and the interaction ids of the positives (Q, P)."""

    state_type = ListwiseState

    def inputs(self) -> tuple[Input, ...]:
        return (Input("scores", ("queries", "candidates"), "score"),
                Input("interaction", ("queries", "positives"), "index", keys="interaction"))

    def key_spaces(self) -> dict[str, int | None]:
        return {"interaction": self.num_interactions}

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("interaction")}

    def _loss(self, step, state, params, scores, interaction):
        xp, count = step.xp, self.num_positives
        positive, negative = scores[:, :count], scores[:, count:]
        diff = xp.expand_dims(negative, 1) - xp.expand_dims(positive, 2)  # (Q, P, M)
        weight = xp.exp(step.stop(diff))
        new, u = self._moving_average(step, state.u, interaction,
                                      xp.sum(weight, axis=2) / self.num_negatives)
        loss = xp.sum(diff * step.stop(weight / xp.expand_dims(new, 2))) / scores.shape[0]
        return loss, ListwiseState(u)


class SONGState(NamedTuple):
    u: Array  #: (num_interactions,)


class SONG(_Ranking):
    """NDCGLoss (SONG): scores, relevance, query, interaction, num_relevant, ideal_dcg."""

    state_type = SONGState

    def inputs(self) -> tuple[Input, ...]:
        return (
            Input("scores", ("queries", "candidates"), "score"),
            Input("relevance", ("queries", "positives"), "relevance"),
            Input("query", ("queries",), "index", keys="query"),
            Input("interaction", ("queries", "positives"), "index", keys="interaction"),
            Input("num_relevant", ("queries",), "data"),
            Input("ideal_dcg", ("queries",), "data"),
        )

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("interaction")}

    def _song(self, step, state, scores, relevance, interaction, num_relevant, ideal_dcg,
              psi=None):
        xp = step.xp
        positive = scores[:, :self.num_positives]
        gap = self.margin - (xp.expand_dims(positive, 2) - xp.expand_dims(scores, 1))
        hinge = xp.maximum(gap, xp.zeros_like(gap))
        g = xp.sum(hinge * hinge, axis=2) / scores.shape[1]  # (Q, P)
        new, u = self._moving_average(step, state.u, interaction, g)
        gain = 2.0 ** xp.astype(relevance, scores.dtype) - 1
        weight = gain * self.num_items / (1 + self.num_items * new) ** 2
        if psi is not None:
            weight = weight * psi
        scale = xp.expand_dims(num_relevant / ideal_dcg, 1)
        loss = xp.sum(scale * step.stop(weight) * g) / (scores.shape[0] * self.num_positives)
        return loss, u

    def _loss(self, step, state, params, scores, relevance, query, interaction, num_relevant,
              ideal_dcg):
        loss, u = self._song(step, state, scores, relevance, interaction, num_relevant,
                             ideal_dcg)
        return loss, SONGState(u)


class KSONGState(NamedTuple):
    u: Array  #: (num_interactions,)
    lambda_q: Array  #: (num_queries,) top-K threshold per query
    s_q: Array  #: (num_queries,) moving average of the threshold's curvature


class KSONG(SONG):
    """NDCGLoss with topk (K-SONG): SONG's inputs; λ_q and s_q keyed by query, weights from
    the old λ."""

    state_type = KSONGState

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("interaction"), "lambda_q": StateTable("query"),
                "s_q": StateTable("query")}

    def _loss(self, step, state, params, scores, relevance, query, interaction, num_relevant,
              ideal_dcg):
        xp = step.xp
        old_lambda = _gather(step, state.lambda_q, query)  # (Q,)
        above = _sigmoid(xp, (scores - xp.expand_dims(old_lambda, 1)) / 0.5)  # (Q, C)
        new_lambda = old_lambda - 0.1 * (0.4 - xp.sum(step.stop(above), axis=1)
                                         / scores.shape[1])
        lambda_q = step.write_rows(state.lambda_q, query, new_lambda)
        old_s = _gather(step, state.s_q, query)
        curvature = xp.sum(step.stop(above * (1 - above)), axis=1) / scores.shape[1]
        s_q = step.write_rows(state.s_q, query, 0.9 * curvature + 0.1 * old_s)
        psi = above[:, :self.num_positives]
        loss, u = self._song(step, state, scores, relevance, interaction, num_relevant,
                             ideal_dcg, psi=psi)
        return loss, KSONGState(u, lambda_q, s_q)


class _Contrastive(LossDefinition):
    """Shared declarations of the contrastive family (GCLoss_v1, GCLoss_v2): two views and the
    dataset index of every pair."""

    def __init__(self, num_samples: int, *, temperature: float = TEMPERATURE,
                 gamma: float = 0.9) -> None:
        self.num_samples = check_count(self.name, "num_samples", num_samples)
        self.temperature = check_positive(self.name, "temperature", temperature)
        self.gamma = check_fraction(self.name, "gamma", gamma)

    def inputs(self) -> tuple[Input, ...]:
        return (Input("view1", ("batch", "features"), "score"),
                Input("view2", ("batch", "features"), "score"),
                Input("index", ("batch",), "index", keys="sample"))

    def key_spaces(self) -> dict[str, int | None]:
        return {"sample": self.num_samples}

    @staticmethod
    def _similarity(xp, left, right):
        """(B, B) inner products, left rows against right rows (shim functions only)."""
        return xp.sum(xp.expand_dims(left, 1) * xp.expand_dims(right, 0), axis=2)


class SogCLRState(NamedTuple):
    u: Array  #: (num_samples,)


class SogCLR(_Contrastive):
    """GCLoss_v1, unimodal SogCLR: u keyed by sample."""

    state_type = SogCLRState

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("sample")}

    def _step(self, step, state, view1, view2, index, tau):
        xp = step.xp
        similarity = self._similarity(xp, view1, view2)
        weight = xp.exp(step.stop(similarity) / xp.expand_dims(tau, 1))
        old = _gather(step, state.u, index)
        new = (1 - self.gamma) * old + self.gamma * xp.sum(weight, axis=1) / view1.shape[0]
        u = step.write_rows(state.u, index, new)
        loss = xp.sum(step.stop(weight / xp.expand_dims(new, 1)) * similarity) / view1.shape[0]
        return loss, u, new

    def _loss(self, step, state, params, view1, view2, index):
        tau = step.xp.full_like(step.xp.astype(index, view1.dtype), self.temperature)
        loss, u, _ = self._step(step, state, view1, view2, index, tau)
        return loss, SogCLRState(u)


class ISogCLRState(NamedTuple):
    u: Array  #: (num_samples,)
    tau: Array  #: (num_samples,) individual temperature, starts at ``temperature``
    grad_tau: Array  #: (num_samples,) momentum of its gradient


class ISogCLR(SogCLR):
    """GCLoss_v1, iSogCLR: adds τ_i and its momentum, keyed by sample."""

    state_type = ISogCLRState

    def state_tables(self) -> dict[str, StateTable]:
        return {"u": StateTable("sample"), "tau": StateTable("sample", fill=self.temperature),
                "grad_tau": StateTable("sample")}

    def _loss(self, step, state, params, view1, view2, index):
        xp = step.xp
        old_tau = _gather(step, state.tau, index)
        loss, u, new_u = self._step(step, state, view1, view2, index, old_tau)
        old_grad = _gather(step, state.grad_tau, index)
        new_grad = 0.9 * old_grad + 0.1 * (new_u - 1)
        tau = step.write_rows(state.tau, index,
                              xp.clip(old_tau - 0.01 * new_grad, 0.05, 0.7))
        grad_tau = step.write_rows(state.grad_tau, index, new_grad)
        return loss, ISogCLRState(u, tau, grad_tau)


class BimodalState(NamedTuple):
    u1: Array  #: (num_samples,) image anchors
    u2: Array  #: (num_samples,) text anchors
    b1: Array  #: (num_samples,) running max shift of the image rows
    b2: Array  #: (num_samples,) running max shift of the text rows


class Bimodal(_Contrastive):
    """GCLoss_v2, bimodal (image, text): u1, u2, b1, b2 keyed by sample."""

    state_type = BimodalState
    _names = (("u1", "b1", "tau_img", "grad_tau_img"), ("u2", "b2", "tau_txt", "grad_tau_txt"))

    def state_tables(self) -> dict[str, StateTable]:
        return {name: StateTable("sample") for name in ("u1", "u2", "b1", "b2")}

    def _direction(self, step, anchor, other, tau):
        """Margins L_ij = s_ij - s_ii of one direction (B, B) and their detached L_ij / τ_i."""
        xp = step.xp
        similarity = self._similarity(xp, anchor, other)
        own = xp.sum(anchor * other, axis=1)
        margin = similarity - xp.expand_dims(own, 1)  # L_ij = s_ij - s_ii
        scaled = step.stop(margin) / xp.expand_dims(tau, 1)
        return margin, scaled

    def _shifted(self, step, table_u, table_b, index, margin, scaled):
        """One direction's loss, its written u and b tables and its new u rows."""
        xp = step.xp
        old_b = _gather(step, table_b, index)
        new_b = xp.maximum(old_b, xp.max(scaled, axis=1))
        weight = xp.exp(scaled - xp.expand_dims(new_b, 1))
        old_u = _gather(step, table_u, index)
        new_u = ((1 - self.gamma) * old_u * xp.exp(old_b - new_b)
                 + self.gamma * xp.sum(weight, axis=1) / margin.shape[0])
        loss = xp.sum(step.stop(weight / xp.expand_dims(new_u, 1)) * margin) / margin.shape[0]
        return (loss, step.write_rows(table_u, index, new_u),
                step.write_rows(table_b, index, new_b), new_u)

    def _directions(self, step, state, view1, view2, index, taus):
        out = []
        for (u_name, b_name, *_), (anchor, other), tau in zip(
                self._names, ((view1, view2), (view2, view1)), taus, strict=True):
            margin, scaled = self._direction(step, anchor, other, tau)
            out.append(self._shifted(step, getattr(state, u_name), getattr(state, b_name),
                                     index, margin, scaled))
        return out

    def _loss(self, step, state, params, view1, view2, index):
        tau = step.xp.full_like(step.xp.astype(index, view1.dtype), self.temperature)
        (loss1, u1, b1, _), (loss2, u2, b2, _) = self._directions(
            step, state, view1, view2, index, (tau, tau))
        return (loss1 + loss2) / 2, BimodalState(u1, u2, b1, b2)


class BimodalIndividualState(NamedTuple):
    u1: Array
    u2: Array
    b1: Array
    b2: Array
    tau_img: Array  #: (num_samples,) individual temperature of each image
    tau_txt: Array  #: (num_samples,) individual temperature of each text
    grad_tau_img: Array
    grad_tau_txt: Array


class BimodalIndividual(Bimodal):
    """GCLoss_v2 with individual learnable temperatures
    (temperature_scheme='individual_learnable')."""

    state_type = BimodalIndividualState

    def state_tables(self) -> dict[str, StateTable]:
        tables = super().state_tables()
        tables.update({"tau_img": StateTable("sample", fill=self.temperature),
                       "tau_txt": StateTable("sample", fill=self.temperature),
                       "grad_tau_img": StateTable("sample"),
                       "grad_tau_txt": StateTable("sample")})
        return tables

    def _loss(self, step, state, params, view1, view2, index):
        xp = step.xp
        old_taus = [_gather(step, getattr(state, names[2]), index) for names in self._names]
        directions = self._directions(step, state, view1, view2, index, old_taus)
        written = {}
        for names, old_tau, (_, u, b, new_u) in zip(self._names, old_taus, directions,
                                                    strict=True):
            u_name, b_name, tau_name, grad_name = names
            old_grad = _gather(step, getattr(state, grad_name), index)
            new_grad = 0.9 * old_grad + 0.1 * (new_u - 1)
            written.update({
                u_name: u, b_name: b,
                grad_name: step.write_rows(getattr(state, grad_name), index, new_grad),
                tau_name: step.write_rows(getattr(state, tau_name), index,
                                          xp.clip(old_tau - 0.01 * new_grad, 0.005, 0.05)),
            })
        loss = (directions[0][0] + directions[1][0]) / 2
        return loss, BimodalIndividualState(**written)


def _ranking(cls):
    return lambda: cls(NUM_INTERACTIONS, NUM_QUERIES, NUM_ITEMS, NUM_POSITIVES, NUM_NEGATIVES)


DEFINITIONS = {
    "ListwiseCE": _ranking(ListwiseCE),
    "SONG": _ranking(SONG),
    "KSONG": _ranking(KSONG),
    "SogCLR": lambda: SogCLR(NUM_SAMPLES),
    "iSogCLR": lambda: ISogCLR(NUM_SAMPLES),
    "Bimodal": lambda: Bimodal(NUM_SAMPLES, temperature=0.01),
    "BimodalIndividual": lambda: BimodalIndividual(NUM_SAMPLES, temperature=0.01),
}
NAMES = sorted(DEFINITIONS)
RANKING = ("ListwiseCE", "SONG", "KSONG")

# -- what LibAUC 2.0.1's ranking and contrastive losses take and keep ------------------------
_SONG_INPUTS = (
    ("scores", ("queries", "candidates"), "score", None),
    ("relevance", ("queries", "positives"), "relevance", None),
    ("query", ("queries",), "index", "query"),
    ("interaction", ("queries", "positives"), "index", "interaction"),
    ("num_relevant", ("queries",), "data", None),
    ("ideal_dcg", ("queries",), "data", None),
)
_VIEWS = (("view1", ("batch", "features"), "score", None),
          ("view2", ("batch", "features"), "score", None),
          ("index", ("batch",), "index", "sample"))
SPEC_INPUTS = {
    "ListwiseCE": (_SONG_INPUTS[0], _SONG_INPUTS[3]),
    "SONG": _SONG_INPUTS,
    "KSONG": _SONG_INPUTS,
    "SogCLR": _VIEWS, "iSogCLR": _VIEWS, "Bimodal": _VIEWS, "BimodalIndividual": _VIEWS,
}
_I, _Q, _S = (NUM_INTERACTIONS,), (NUM_QUERIES,), (NUM_SAMPLES,)
# name -> {state entry: (key space, shape, fill)}
SPEC_STATE = {
    "ListwiseCE": {"u": ("interaction", _I, 0.0)},
    "SONG": {"u": ("interaction", _I, 0.0)},
    "KSONG": {"u": ("interaction", _I, 0.0), "lambda_q": ("query", _Q, 0.0),
              "s_q": ("query", _Q, 0.0)},
    "SogCLR": {"u": ("sample", _S, 0.0)},
    "iSogCLR": {"u": ("sample", _S, 0.0), "tau": ("sample", _S, TEMPERATURE),
                "grad_tau": ("sample", _S, 0.0)},
    "Bimodal": {name: ("sample", _S, 0.0) for name in ("u1", "u2", "b1", "b2")},
    "BimodalIndividual": {
        **{name: ("sample", _S, 0.0) for name in ("u1", "u2", "b1", "b2")},
        "tau_img": ("sample", _S, 0.01), "tau_txt": ("sample", _S, 0.01),
        "grad_tau_img": ("sample", _S, 0.0), "grad_tau_txt": ("sample", _S, 0.0),
    },
}


# -- batches ----------------------------------------------------------------------------
def make_batch(name: str, seed: int, queries: int = 3, batch: int = 4,
               features: int = 3) -> dict[str, np.ndarray]:
    """A float64 batch with duplicate keys (a repeated query, interaction and sample)."""
    rng = np.random.default_rng(seed)
    if name in RANKING:
        interaction = rng.choice(NUM_INTERACTIONS, size=(queries, NUM_POSITIVES), replace=False)
        interaction[-1, -1] = interaction[0, 0]  # one relevant pair sampled twice
        query = rng.integers(0, NUM_QUERIES, queries)
        query[-1] = query[0]
        out = {
            "scores": rng.normal(size=(queries, NUM_POSITIVES + NUM_NEGATIVES)),
            "relevance": rng.integers(0, 4, (queries, NUM_POSITIVES)).astype(np.float64),
            "query": query,
            "interaction": interaction,
            "num_relevant": rng.integers(NUM_POSITIVES, 6, queries).astype(np.float64),
            "ideal_dcg": rng.uniform(1.0, 4.0, queries),
        }
        return {spec.name: out[spec.name] for spec in DEFINITIONS[name]().inputs()}
    views = rng.normal(size=(2, batch, features))
    views /= np.linalg.norm(views, axis=2, keepdims=True)
    index = rng.choice(NUM_SAMPLES, size=batch, replace=False)
    index[-1] = index[0]
    return {"view1": views[0], "view2": views[1], "index": index}


def _keys_of(definition, batch) -> dict[str, set[int]]:
    """Key space -> the keys this batch addresses."""
    keys: dict[str, set[int]] = {}
    for spec in definition.inputs():
        if spec.kind == "index":
            keys.setdefault(spec.keys, set()).update(np.ravel(batch[spec.name]).tolist())
    return keys


def _score_names(definition) -> list[str]:
    return [spec.name for spec in definition.inputs() if spec.kind == "score"]


# -- one step in every framework ----------------------------------------------------------
class Result(NamedTuple):
    loss: float
    grads: dict[str, np.ndarray] | None  # d loss / d score inputs (None without autodiff)
    state: dict[str, np.ndarray]


def _no_autodiff(convert):
    def run(definition, state, batch):
        state_t = definition.state_type(**{k: convert(v) for k, v in state.items()})
        loss, new = definition.apply(state_t, **{k: convert(v) for k, v in batch.items()})
        assert tuple(loss.shape) == ()
        return Result(float(loss), None, {k: np.asarray(v) for k, v in new._asdict().items()})
    return run


def _entries(export):
    """An export's state entries, its metadata left out (the harness compares entries)."""
    return {k: v for k, v in export.items() if k != METADATA_KEY}


def _torch(definition, state, batch):
    loss_fn = xrisk.torch.XRiskLoss(definition, dtype="float64")
    loss_fn.load_state(state, reinterpret=True)  # made by the harness for this loss
    scored = _score_names(definition)
    inputs = {k: torch.tensor(v, requires_grad=k in scored) for k, v in batch.items()}
    loss = loss_fn(**inputs)
    loss.backward()
    return Result(float(loss.detach()), {k: inputs[k].grad.numpy() for k in scored},
                  _entries(loss_fn.export_state()))


def _jax(jit: bool):
    def run(definition, state, batch):
        loss_fn = xrisk.jax.XRiskLoss(definition, dtype="float64")
        state_j, params = loss_fn.load_state(state, reinterpret=True)
        scored = _score_names(definition)

        def value(scores, others, state_j):
            return loss_fn.apply(state_j, **scores, **others, params=params)

        step = jax.value_and_grad(value, has_aux=True)
        step = jax.jit(step, donate_argnums=2) if jit else step
        (loss, new), grads = step({k: jnp.asarray(batch[k]) for k in scored},
                                  {k: jnp.asarray(v) for k, v in batch.items()
                                   if k not in scored}, state_j)
        return Result(float(loss), {k: np.asarray(v) for k, v in grads.items()},
                      _entries(loss_fn.export_state(new)))
    return run


def _tensorflow(graph: bool):
    def run(definition, state, batch):
        loss_fn = xrisk.tensorflow.XRiskLoss(definition, dtype="float64")
        loss_fn.load_state(state, reinterpret=True)
        scored = _score_names(definition)

        def step(inputs):
            with tf.GradientTape() as tape:
                for name in scored:
                    tape.watch(inputs[name])
                loss = loss_fn(**inputs)
            return loss, tape.gradient(loss, {k: inputs[k] for k in scored})

        step = tf.function(step) if graph else step
        loss, grads = step({k: tf.constant(v) for k, v in batch.items()})
        return Result(float(loss), {k: v.numpy() for k, v in grads.items()},
                      _entries(loss_fn.export_state()))
    return run


def _jax_apply(definition, state, batch):
    """Eager JAX without a transformation: the values are concrete, so bad ones raise."""
    loss_fn = xrisk.jax.XRiskLoss(definition, dtype="float64")
    state_j, params = loss_fn.load_state(state, reinterpret=True)
    loss, new = loss_fn.apply(state_j, **{k: jnp.asarray(v) for k, v in batch.items()},
                              params=params)
    return Result(float(loss), None, _entries(loss_fn.export_state(new)))


RUNNERS = {
    "numpy": _no_autodiff(np.asarray),
    "array_api_strict": _no_autodiff(array_api_strict.asarray),
    "torch": _torch,
    "jax": _jax(jit=False),
    "jax.jit": _jax(jit=True),
    "tensorflow": _tensorflow(graph=False),
    "tf.function": _tensorflow(graph=True),
}
# Under jax.grad (the "jax" runner), jax.jit and tf.function the values are traced: a bad
# batch cannot raise, so it must write nothing and return NaN.
TRACED = ("jax", "jax.jit", "tf.function")


def _initial(definition) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in
            definition.init(xp=np_xp, dtype=np_xp.float64)._asdict().items()}


# -- declarations and allocation -----------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_declarations_are_those_of_the_spec(name):
    definition = DEFINITIONS[name]()
    declared = tuple((s.name, s.shape, s.kind, s.keys) for s in definition.inputs())
    assert declared == SPEC_INPUTS[name]
    tables = {field: (table.keys, table.shape(definition.key_spaces()), table.fill)
              for field, table in definition.state_tables().items()}
    assert tables == SPEC_STATE[name]
    assert tuple(definition.state_tables()) == definition.state_type._fields


def test_ranking_state_grows_with_relevant_pairs_not_queries_times_items():
    """u has one entry per relevant (query, item) pair; only λ_q and s_q are per query."""
    small, large = (KSONG(NUM_INTERACTIONS, q, NUM_ITEMS, 2, 3) for q in (5, 5000))
    wide = KSONG(NUM_INTERACTIONS, 5, 10**6, 2, 3)
    for definition in (small, large, wide):
        shapes = definition.state_shapes()
        assert shapes["u"] == (NUM_INTERACTIONS,)
        assert shapes["lambda_q"] == shapes["s_q"] == (definition.num_queries,)
    assert wide.state_shapes() == small.state_shapes()  # the item count allocates nothing


def _allocated(framework, definition):
    if framework == "numpy":
        return _initial(definition)
    if framework == "array_api_strict":
        state = definition.init(xp=array_api_strict, dtype=array_api_strict.float64)
        return {k: np.asarray(v) for k, v in state._asdict().items()}
    if framework == "torch":
        return _entries(xrisk.torch.XRiskLoss(definition, dtype="float64").export_state())
    if framework == "tensorflow":
        return _entries(xrisk.tensorflow.XRiskLoss(definition, dtype="float64").export_state())
    loss_fn = xrisk.jax.XRiskLoss(definition, dtype="float64")
    return _entries(loss_fn.export_state(loss_fn.init(), loss_fn.init_params()))


@pytest.mark.parametrize("framework", ["numpy", "array_api_strict", "torch", "tensorflow",
                                       "jax"])
@pytest.mark.parametrize("name", NAMES)
def test_allocation_follows_the_declarations(name, framework):
    definition = DEFINITIONS[name]()
    state = _allocated(framework, definition)
    assert set(state) == set(SPEC_STATE[name])
    for field, (_, shape, fill) in SPEC_STATE[name].items():
        assert state[field].shape == shape, (field, state[field].shape)
        assert state[field].dtype == np.float64, field
        assert_array_equal(state[field], np.full(shape, fill), err_msg=field)



def test_building_a_zero_filled_table_holds_it_once():
    """A zero fill is the zeros themselves: adding it allocated a second full-size table, so
    building the state peaked at twice its bytes (``bench_ndcg_step.py``'s init figure)."""
    import tracemalloc

    import xrisk

    definition = xrisk.losses.NDCGLoss(num_interactions=2_000_000, num_queries=10,
                                       num_items=50)
    tracemalloc.start()
    try:
        state = definition.init(xp=np_xp, dtype=np_xp.float64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    held = sum(np.asarray(v).nbytes for v in state._asdict().values())
    assert held >= 16_000_000 and peak < 1.1 * held, (peak, held)

# -- one step: agreement, only the batch's rows --------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_steps_agree_across_frameworks_and_touch_only_the_batch_rows(name):
    definition = DEFINITIONS[name]()
    states = {framework: _initial(definition) for framework in RUNNERS}
    for seed in (0, 1):  # two steps, each framework from its own state
        batch = make_batch(name, seed)
        keys = _keys_of(definition, batch)
        results = {fw: RUNNERS[fw](definition, states[fw], batch) for fw in RUNNERS}
        reference = results["numpy"]
        assert np.isfinite(reference.loss)
        for framework, result in results.items():
            where = f"{name}, step {seed}, {framework}"
            assert_allclose(result.loss, reference.loss, rtol=1e-12, err_msg=where)
            assert set(result.state) == set(reference.state), where
            for field, value in result.state.items():
                table = definition.state_tables()[field]
                before = states[framework][field]
                assert_allclose(value, reference.state[field], rtol=1e-12, atol=1e-15,
                                err_msg=f"{field}, {where}")
                untouched = np.setdiff1d(np.arange(value.shape[0]), sorted(keys[table.keys]))
                assert untouched.size > 0
                assert_array_equal(value[untouched], before[untouched],
                                   err_msg=f"{field} outside the batch, {where}")
                if field in ("u", "u1", "u2"):  # moving averages of positive estimates
                    touched = sorted(keys[table.keys])
                    assert np.all(value[touched] != before[touched]), f"{field}, {where}"
            states[framework] = result.state
        gradients = {fw: r.grads for fw, r in results.items() if r.grads is not None}
        assert set(gradients) == {"torch", "jax", "jax.jit", "tensorflow", "tf.function"}
        for framework, grads in gradients.items():
            for field, value in grads.items():
                assert np.all(np.isfinite(value)) and np.any(value != 0), (framework, field)
                assert_allclose(value, gradients["torch"][field], rtol=1e-10, atol=1e-13,
                                err_msg=f"d/d{field}, {name}, {framework}")


@pytest.mark.parametrize("name", NAMES)
def test_each_table_is_written_once_per_step_with_the_batch_keys_only(name, monkeypatch):
    """O(batch): every write addresses as many rows as the batch has keys, never the table."""
    numpy_backend = get_backend("numpy")
    original = numpy_backend.write_rows
    writes = []

    def spy(table, index, rows):
        writes.append((tuple(table.shape), int(np.asarray(index).size)))
        return original(table, index, rows)

    monkeypatch.setattr(numpy_backend, "write_rows", spy)
    definition = DEFINITIONS[name]()
    batch = make_batch(name, 0)
    sizes = {spec.keys: batch[spec.name].size for spec in definition.inputs()
             if spec.kind == "index"}
    RUNNERS["numpy"](definition, _initial(definition), batch)
    expected = sorted((table.shape(definition.key_spaces()), sizes[table.keys])
                      for table in definition.state_tables().values())
    assert sorted(writes) == expected
    assert all(written < shape[0] for shape, written in writes)


# -- export / load -------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_export_load_round_trip_between_frameworks(name):
    definition = DEFINITIONS[name]()
    trained = RUNNERS["torch"](definition, _initial(definition), make_batch(name, 0)).state
    assert any(np.any(value != _initial(definition)[k]) for k, value in trained.items())

    torch_loss = xrisk.torch.XRiskLoss(definition, dtype="float64")
    tf_loss = xrisk.tensorflow.XRiskLoss(definition, dtype="float64")
    jax_loss = xrisk.jax.XRiskLoss(definition, dtype="float64")
    torch_loss.load_state(trained, reinterpret=True)  # the harness's arrays
    tf_loss.load_state(torch_loss.export_state())
    jax_state, jax_params = jax_loss.load_state(tf_loss.export_state())
    for exported in (torch_loss.export_state(), tf_loss.export_state(),
                     jax_loss.export_state(jax_state, jax_params)):
        assert set(exported) == {*trained, METADATA_KEY}
        for field, value in trained.items():
            assert isinstance(exported[field], np.ndarray)
            assert_array_equal(exported[field], value, err_msg=field)

    field = next(iter(trained))
    bad = {**torch_loss.export_state(), field: np.zeros(trained[field].shape[0] + 1)}
    for loss_fn in (torch_loss, tf_loss):
        with pytest.raises(ValueError, match=rf"state\['{field}'\] has shape"):
            loss_fn.load_state(bad)
        assert_array_equal(loss_fn.export_state()[field], trained[field])
    with pytest.raises(ValueError, match=rf"state\['{field}'\] has shape"):
        jax_loss.load_state(bad)


# -- validation ----------------------------------------------------------------------------
def _mismatches(name) -> list[tuple[str, str, tuple[int, ...]]]:
    """(dimension, input to reshape, its wrong shape) for every named dimension of the loss."""
    if name in RANKING:
        out = [("candidates", "scores", (3, NUM_POSITIVES + NUM_NEGATIVES + 1)),
               ("positives", "interaction", (3, NUM_POSITIVES + 1))]
        if name != "ListwiseCE":
            out += [("queries", "query", (2,)), ("positives", "relevance", (3, 1))]
        else:
            out += [("queries", "interaction", (2, NUM_POSITIVES))]
        return out
    return [("features", "view2", (4, 5)), ("batch", "index", (3,))]


def _reshaped(batch, field, shape):
    value = batch[field]
    rng = np.random.default_rng(7)
    if np.issubdtype(value.dtype, np.integer):
        return {**batch, field: rng.integers(0, 2, shape)}
    return {**batch, field: rng.uniform(0.5, 1.5, shape)}


CASES_MISMATCH = [(name, *case) for name in NAMES for case in _mismatches(name)]


@pytest.mark.parametrize("framework", list(RUNNERS))
@pytest.mark.parametrize(("name", "dim", "field", "shape"), CASES_MISMATCH,
                         ids=[f"{n}-{d}-{f}" for n, d, f, _ in CASES_MISMATCH])
def test_a_named_dimension_mismatch_raises_naming_it(name, dim, field, shape, framework):
    definition = DEFINITIONS[name]()
    batch = _reshaped(make_batch(name, 0), field, shape)
    with pytest.raises(ValueError, match=rf"{dim} sizes differ: .*{field}") as caught:
        RUNNERS[framework](definition, _initial(definition), batch)
    message = str(caught.value)
    assert "expected" in message and "Fix:" in message, message


def test_a_fixed_dimension_names_the_size_the_loss_was_built_with():
    definition = DEFINITIONS["SONG"]()
    batch = _reshaped(make_batch("SONG", 0), "scores", (3, 9))
    with pytest.raises(ValueError, match=r"candidates sizes differ: \{'scores': 9\}; "
                                         r"expected candidates = 5"):
        RUNNERS["numpy"](definition, _initial(definition), batch)


EAGER = {**{fw: RUNNERS[fw] for fw in ("numpy", "array_api_strict", "torch", "tensorflow")},
         "jax": _jax_apply}


@pytest.mark.parametrize("framework", list(EAGER))
def test_index_range_is_checked_per_key_space(framework):
    """An id valid for "interaction" (< 12) but not for "query" (>= 5) is rejected as a query
    and accepted as an interaction; each key space has its own bound."""
    definition = DEFINITIONS["KSONG"]()
    run = EAGER[framework]
    good = make_batch("KSONG", 0)
    key = NUM_QUERIES + 2
    assert NUM_QUERIES <= key < NUM_INTERACTIONS
    as_interaction = good["interaction"].copy()
    as_interaction[1, 1] = key
    run(definition, _initial(definition), {**good, "interaction": as_interaction})
    as_query = good["query"].copy()
    as_query[1] = key
    with pytest.raises(ValueError, match=rf"query values \[{key}\] are outside "
                                         rf"\[0, query count={NUM_QUERIES}\)"):
        run(definition, _initial(definition), {**good, "query": as_query})
    as_interaction[0, 0] = NUM_INTERACTIONS
    with pytest.raises(ValueError, match=rf"interaction values \[{NUM_INTERACTIONS}\] are "
                                         rf"outside \[0, interaction count={NUM_INTERACTIONS}"):
        run(definition, _initial(definition), {**good, "interaction": as_interaction})
    contrastive = DEFINITIONS["iSogCLR"]()
    views = make_batch("iSogCLR", 0)
    views["index"] = views["index"].copy()
    views["index"][2] = NUM_SAMPLES
    with pytest.raises(ValueError, match=rf"sample count={NUM_SAMPLES}"):
        run(contrastive, _initial(contrastive), views)


def _bad_batches(name):
    """(index input, bad batch): one key out of its space, and one negative key."""
    definition = DEFINITIONS[name]()
    spaces = definition.key_spaces()
    out = []
    for spec in definition.inputs():
        if spec.kind != "index":
            continue
        for bad in (spaces[spec.keys], -1):
            batch = make_batch(name, 0)
            values = batch[spec.name].copy()
            values.reshape(-1)[-1] = bad
            out.append((f"{spec.name}={bad}", {**batch, spec.name: values}))
    return out


CASES_BAD = [(name, label, batch) for name in NAMES for label, batch in _bad_batches(name)]


@pytest.mark.parametrize("framework", TRACED)
@pytest.mark.parametrize(("name", "label", "batch"), CASES_BAD,
                         ids=[f"{n}-{label}" for n, label, _ in CASES_BAD])
def test_a_bad_traced_batch_writes_nothing_and_returns_nan(name, label, batch, framework):
    definition = DEFINITIONS[name]()
    # Start from a trained state so that "unchanged" is not just "still the fill value".
    state = RUNNERS["numpy"](definition, _initial(definition), make_batch(name, 1)).state
    result = RUNNERS[framework](definition, state, batch)
    assert np.isnan(result.loss), (label, result.loss)
    for field, value in result.state.items():
        assert_array_equal(value, state[field], err_msg=f"{field} after {label}")
    # and the same batch on concrete values raises before touching anything
    with pytest.raises(ValueError, match="outside"):
        RUNNERS["numpy"](definition, state, batch)
