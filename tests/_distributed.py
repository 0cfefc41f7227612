"""Data-parallel harness: the batches every worker (torch rank, JAX device, TF replica) rebuilds.

Every registered loss (``tests._cases.CASES``) gets a :class:`Plan`: its definition, the model's
initial weights and, per step, each rank's part of the batch. Workers rebuild the plan from
its seed, so no data travels between processes. Each rank's part comes from the sampler that
serves the loss, sharded as in training:

- binary losses: ``DualSampler(...).shard(rank, world)`` over a small data set with few
  positives (every positive appears twice in a global batch, so indices repeat within and
  across ranks);
- multi-label losses: ``TriSampler(labels, ...).shard(rank, world)`` (one task per rank) over
  labels with missing entries where each label has 2 positives for 3 positive slots (a
  positive repeats within its rank) and sample 0 is a positive of every label (on both ranks
  at every step);
- ranking losses: ``TriSampler(pairs, mode="ranking").shard(rank, world)`` and its
  ``ranking_inputs`` (Q queries x (P positives + M negatives)): a query with fewer relevant
  items than P pads its row with a repeated interaction (keys repeat within a rank). The
  sampler draws distinct queries per global batch, so a key never repeats across ranks
  within one step; the same query is owned by one rank and read by the other over the steps.
- other losses (contrastive, multi-instance, extreme): their case's ``batch`` drawer: rank 0
  takes a drawn batch followed by a permuted copy of it (other features), each other rank a
  row-permuted copy of that with other features, so every key repeats within and across
  ranks.

The single-process reference runs the same loss on the global batch, the concatenation of the
ranks' parts in rank order, which is what ``gather_batch`` builds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from random import Random
from typing import Any, NamedTuple

import numpy as np
from hypothesis.control import BuildContext
from hypothesis.internal.conjecture.data import ConjectureData

import xrisk
from tests import _ranking_cases
from tests._cases import CASES, NUM_FEATURES, binary_batch, multilabel_batch
from xrisk.distributed import gather_plan
from xrisk.samplers import DualSampler, TriSampler

WORLD = 2
STEPS = 3
LR = 0.1
TOLERANCE = 1e-12
#: Binary data set: 2 positives among 12 samples, global batch 6 + 6 (each rank 3 + 3), so
#: every positive repeats within a rank and across ranks.
BINARY_LABELS = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0])
BINARY_BATCH, BINARY_POSITIVES = 12, 6
_ = np.nan
#: Multi-label data set (12 samples x 3 labels, NaN: missing): 2 positives per label for
#: ML_POSITIVES = 3 positive slots per task, sample 0 a positive of every label.
ML_LABELS = np.array([[1, 1, 1], [1, 0, _], [0, 1, 0], [_, 0, 1], [0, _, 0], [0, 0, 0],
                      [0, 0, _], [0, 0, 0], [_, 0, 0], [0, 0, 0], [0, _, 0], [0, 0, 0]])
ML_PER_TASK, ML_POSITIVES, ML_TASKS = 6, 3, 2
#: Ranking interactions (query, item, relevance): queries with 1, 2, 3 and 4 relevant items
#: among 12, P = 2 positives + M = 2 negatives per query, the 4 queries in every batch.
RANK_PAIRS = np.array([[0, 3, 2], [1, 0, 1], [1, 5, 3], [2, 1, 1], [2, 4, 2], [2, 7, 4],
                       [3, 2, 1], [3, 6, 2], [3, 8, 3], [3, 9, 4]])
RANK_ITEMS, RANK_POSITIVES, RANK_PER_QUERY, RANK_QUERIES = 12, 2, 4, 4


class Plan(NamedTuple):
    name: str
    definition: Any
    link: str
    w0: np.ndarray  # (NUM_FEATURES,)
    params0: dict[str, np.ndarray]
    #: parts[t][r]: rank r's inputs at step t by name; score inputs as features (..., F).
    parts: list[list[dict[str, np.ndarray]]]
    #: What fed the ranks: "DualSampler", "TriSampler" or "drawer".
    feed: str

    def global_batch(self, step: int) -> dict[str, np.ndarray]:
        """The single-process batch of ``step``: the ranks' parts concatenated on axis 0."""
        gathered = gather_plan(self.definition).gathered
        ranks = self.parts[step]
        return {name: (np.concatenate([part[name] for part in ranks], axis=0)
                       if name in gathered and value is not None else value)
                for name, value in ranks[0].items()}


@contextlib.contextmanager
def seeded_draw(seed: int) -> Iterator[Callable[..., Any]]:
    """A hypothesis ``draw(strategy, label=None)`` driven by a fixed seed (outside @given)."""
    data = ConjectureData(random=Random(seed))
    with BuildContext(data, is_final=False, wrapped_test=None):
        yield lambda strategy, label=None: data.draw(strategy)


def make_plan(name: str, seed: int = 0, world: int = WORLD, steps: int = STEPS) -> Plan:
    case = CASES[name]
    rng = np.random.default_rng(seed)
    with seeded_draw(seed) as draw:
        hyper = draw(case.hyper)
        if case.batch is binary_batch:
            definition = case.make(len(BINARY_LABELS), hyper)
            parts, feed = _sampler_parts(definition, rng, world, steps, seed), "DualSampler"
        elif case.batch is multilabel_batch:
            definition = case.make(len(ML_LABELS), hyper)
            parts, feed = _multilabel_parts(definition, rng, world, steps, seed), "TriSampler"
        elif case.batch is _ranking_cases.ranking_batch:
            sampler = ranking_sampler(seed)
            definition = case.make(max(sampler.num_interactions, sampler.num_queries), hyper)
            parts = _ranking_parts(definition, sampler, rng, world, steps)
            feed = "TriSampler"
        else:
            # One drawn batch, its rows permuted and features redrawn at every step: the
            # shapes stay fixed, so compiled steps (jit, tf.function) compile once.
            definition = case.make(12, hyper)
            drawn = _doubled(case.batch(draw, definition, rng), definition, rng)
            parts = [_drawn_parts(_reshuffled(drawn, definition, rng) if t else drawn,
                                  definition, rng, world) for t in range(steps)]
            feed = "drawer"
    params0 = {k: np.asarray(v, dtype=np.float64)
               for k, v in case.initial_params(rng).items()}
    return Plan(name, definition, case.link, rng.normal(size=NUM_FEATURES) * 0.5, params0,
                parts, feed)


def multilabel_sampler(seed: int) -> TriSampler:
    """The unsharded sampler of the multi-label plans (2 tasks x 6 items per batch)."""
    return TriSampler(ML_LABELS, ML_PER_TASK, num_sampled_tasks=ML_TASKS,
                      num_pos=ML_POSITIVES, seed=seed)


def ranking_sampler(seed: int) -> TriSampler:
    """The unsharded sampler of the ranking plans (4 queries x (2 + 2) items per batch)."""
    return TriSampler(RANK_PAIRS, RANK_PER_QUERY, num_sampled_tasks=RANK_QUERIES,
                      num_pos=RANK_POSITIVES, mode="ranking", num_items=RANK_ITEMS, seed=seed)


def _multilabel_parts(definition: Any, rng: np.random.Generator, world: int, steps: int,
                      seed: int) -> list[list[dict[str, np.ndarray]]]:
    num_labels = ML_LABELS.shape[1]
    if definition.num_labels != num_labels:
        raise ValueError(f"{definition.name}: num_labels={definition.num_labels}; expected "
                         f"{num_labels}, the columns of ML_LABELS. Fix: widen ML_LABELS.")
    features = rng.normal(size=(*ML_LABELS.shape, NUM_FEATURES))  # per (sample, label)
    shards = [multilabel_sampler(seed).shard(r, world) for r in range(world)]
    out = []
    for t in range(steps):
        ranks = []
        for shard in shards:
            index, task = shard.batch(t % len(shard), epoch=t // len(shard))
            ranks.append({"scores": features[index], "labels": ML_LABELS[index],
                          "index": index, "task": task})
        out.append(ranks)
    return out


def _ranking_parts(definition: Any, sampler: TriSampler, rng: np.random.Generator,
                   world: int, steps: int) -> list[list[dict[str, np.ndarray]]]:
    features = rng.normal(size=(sampler.num_queries, sampler.num_items, NUM_FEATURES))
    declared = {spec.name: spec for spec in definition.inputs()}
    shards = [sampler.shard(r, world) for r in range(world)]
    out = []
    for t in range(steps):
        ranks = []
        for shard in shards:
            items, queries = shard.batch(t % len(shard), epoch=t // len(shard))
            inputs = shard.ranking_inputs(items, queries,
                                          ideal_k=getattr(definition, "top_k", None))
            # The candidate count of losses without num_items: every item of the data set.
            inputs["num_candidates"] = np.full(queries.shape, float(sampler.num_items))
            part = {name: value for name, value in inputs.items()
                    if name in declared and not (name == "num_candidates"
                                                 and declared[name].optional)}
            part["scores"] = features[queries[:, None], items]
            ranks.append(part)
        out.append(ranks)
    return out


def _sampler_parts(definition: Any, rng: np.random.Generator, world: int, steps: int,
                   seed: int) -> list[list[dict[str, np.ndarray]]]:
    features = rng.normal(size=(len(BINARY_LABELS), NUM_FEATURES))
    sampler = DualSampler(BINARY_LABELS, BINARY_BATCH, num_pos=BINARY_POSITIVES, seed=seed)
    shards = [sampler.shard(r, world) for r in range(world)]
    out = []
    for t in range(steps):
        ranks = []
        for shard in shards:
            index = shard.batch(t % len(shard), epoch=t // len(shard))
            ranks.append({"scores": features[index], "labels": BINARY_LABELS[index],
                          "index": index})
        out.append(ranks)
    return out


def index_keys(plan: Plan, step: int, rank: int) -> dict[str, np.ndarray]:
    """Key space -> the keys (flattened) of rank ``rank``'s index inputs at ``step``."""
    out: dict[str, np.ndarray] = {}
    for spec in plan.definition.inputs():
        value = plan.parts[step][rank].get(spec.name)
        if spec.kind == "index" and spec.keys is not None and value is not None:
            flat = np.asarray(value).reshape(-1)
            out[spec.keys] = np.concatenate([out.get(spec.keys, flat[:0]), flat])
    return out


def _drawn_parts(batch: dict[str, np.ndarray], definition: Any, rng: np.random.Generator,
                 world: int) -> list[dict[str, np.ndarray]]:
    plan = gather_plan(definition)
    scores = {s.name for s in definition.inputs() if s.kind == "score"}
    size = next(np.shape(batch[name])[0] for name in plan.gathered
                if batch.get(name) is not None)
    ranks = [batch]
    for _ in range(1, world):
        order = rng.permutation(size)
        part = {}
        for name, value in batch.items():
            if value is None or name not in plan.gathered:
                part[name] = value
            elif name in scores:
                part[name] = np.asarray(value)[order] + rng.normal(size=np.shape(value)) * 0.3
            else:
                part[name] = np.asarray(value)[order]
        ranks.append(part)
    return ranks


def _doubled(batch: dict[str, np.ndarray], definition: Any, rng: np.random.Generator,
             ) -> dict[str, np.ndarray]:
    """``batch`` followed by a row-permuted copy of itself with other features: every key
    of the batch appears twice (the drawer may draw a single row)."""
    plan = gather_plan(definition)
    scores = score_names(definition)
    size = next(np.shape(batch[name])[0] for name in plan.gathered
                if batch.get(name) is not None)
    order = rng.permutation(size)
    out = {}
    for name, value in batch.items():
        if value is None or name not in plan.gathered:
            out[name] = value
            continue
        copy = (rng.normal(size=np.shape(value)) if name in scores
                else np.asarray(value)[order])
        out[name] = np.concatenate([np.asarray(value), copy], axis=0)
    return out


def _reshuffled(batch: dict[str, np.ndarray], definition: Any, rng: np.random.Generator,
                ) -> dict[str, np.ndarray]:
    """``batch`` with its batch rows permuted and new features (the same shapes)."""
    plan = gather_plan(definition)
    scores = score_names(definition)
    size = next(np.shape(batch[name])[0] for name in plan.gathered
                if batch.get(name) is not None)
    order = rng.permutation(size)
    return {name: (value if value is None or name not in plan.gathered else
                   rng.normal(size=np.shape(value)) if name in scores else
                   np.asarray(value)[order])
            for name, value in batch.items()}


def loss_names() -> list[str]:
    """Every registered loss that has a case (the harness covers new ones by itself;
    tests/test_cross_backend.py fails for a loss without a case)."""
    return sorted(set(xrisk.LOSSES) & set(CASES))


def score_names(definition: Any) -> set[str]:
    return {s.name for s in definition.inputs() if s.kind == "score"}


def compare(name: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray],
            what: str) -> list[str]:
    """Mismatches between two dicts of arrays (empty when equal to TOLERANCE)."""
    problems = []
    if set(got) != set(want):
        return [f"{name} {what}: keys {sorted(got)} != {sorted(want)}"]
    for key in want:
        a, b = np.asarray(got[key], dtype=np.float64), np.asarray(want[key], dtype=np.float64)
        if a.shape != b.shape or not np.allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE,
                                                 equal_nan=True):
            gap = np.max(np.abs(a - b)) if a.shape == b.shape else "shape"
            problems.append(f"{name} {what}[{key}]: max gap {gap}")
    return problems
