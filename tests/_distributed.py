"""Data-parallel harness: the batches every worker (torch rank, JAX device, TF replica) rebuilds.

Every registered loss (``tests._cases.CASES``) gets a :class:`Plan`: its definition, the model's
initial weights and, per step, each rank's part of the batch. Workers rebuild the plan from
its seed, so no data travels between processes. Binary losses are fed by
``DualSampler.shard(rank, world)`` over a small data set with few positives (every positive
appears twice in a global batch, so indices repeat within and across ranks); other losses by
their case's ``batch`` drawer: rank 0 takes a drawn batch and each other rank a row-permuted
copy with other features, so every key repeats across ranks.

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
from tests._cases import CASES, NUM_FEATURES, binary_batch
from xrisk.distributed import gather_plan
from xrisk.samplers import DualSampler

WORLD = 2
STEPS = 3
LR = 0.1
TOLERANCE = 1e-12
#: Binary data set: 2 positives among 12 samples, global batch 6 + 6 (each rank 3 + 3), so
#: every positive repeats within a rank and across ranks.
BINARY_LABELS = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0])
BINARY_BATCH, BINARY_POSITIVES = 12, 6


class Plan(NamedTuple):
    name: str
    definition: Any
    link: str
    w0: np.ndarray  # (NUM_FEATURES,)
    params0: dict[str, np.ndarray]
    #: parts[t][r]: rank r's inputs at step t by name; score inputs as features (..., F).
    parts: list[list[dict[str, np.ndarray]]]

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
        binary = case.batch is binary_batch
        definition = case.make(len(BINARY_LABELS) if binary else 12, hyper)
        if binary:
            parts = _sampler_parts(definition, rng, world, steps, seed)
        else:
            # One drawn batch, its rows permuted and features redrawn at every step: the
            # shapes stay fixed, so compiled steps (jit, tf.function) compile once.
            drawn = case.batch(draw, definition, rng)
            parts = [_drawn_parts(_reshuffled(drawn, definition, rng) if t else drawn,
                                  definition, rng, world) for t in range(steps)]
    params0 = {k: np.asarray(v, dtype=np.float64)
               for k, v in case.initial_params(rng).items()}
    return Plan(name, definition, case.link, rng.normal(size=NUM_FEATURES) * 0.5, params0,
                parts)


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
