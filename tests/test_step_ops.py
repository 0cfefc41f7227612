"""Fewer operators per eager torch step, the same bits: the cuts of the losses' fixed cost.

Each test counts the aten operators a loss dispatches (a ``TorchDispatchMode``) and checks the
result against the longer computation it replaced, byte for byte:

- the stable softplus tests the sign of its input once (it took three tests, and the cross
  entropy losses negated their logits three times) and takes one exp and one log1p (its two
  branches took one each);
- NDCG without a mask builds no column mask and multiplies by no ones;
- the contrastive losses compare their (B, B) negatives mask with 0 once per step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import xrisk.torch as xr
from xrisk.backends import get_backend
from xrisk.surrogates import softplus, surrogate_loss

tx = get_backend("torch").namespace


class _Ops(TorchDispatchMode):
    """Records (name, input shapes) of every dispatched aten operator."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, tuple[tuple[int, ...], ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append((func.overloadpacket.__name__,
                         tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))))
        return func(*args, **(kwargs or {}))

    def named(self, name: str) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
        return [op for op in self.ops if op[0] == name]


def _bytes(x: torch.Tensor) -> bytes:
    return x.detach().contiguous().numpy().tobytes()


def _softplus_by_three_tests(z: torch.Tensor) -> torch.Tensor:
    """The formula the softplus replaced, operator for operator (the logistic surrogate at
    scale 1 of -z: ``-1 * -z``, three ``z > 0``)."""
    z = -1.0 * -z
    zero = torch.zeros_like(z)
    high = torch.where(z > 0, z, zero)
    low = torch.where(z > 0, zero, z)
    return torch.where(z > 0, high + torch.log1p(torch.exp(-high)), torch.log1p(torch.exp(low)))


_EDGES = [0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 89.0, -104.0, 710.0, -745.0, 1e300, -1e300]


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.one_of(st.sampled_from(_EDGES),
                                 st.floats(-1e4, 1e4, allow_nan=False)), min_size=1,
                       max_size=30),
       dtype=st.sampled_from([torch.float32, torch.float64]),
       seed=st.integers(0, 2**16))
def test_softplus_tests_the_sign_once_and_keeps_every_bit(values, dtype, seed):
    z = torch.tensor(values, dtype=torch.float64).to(dtype).requires_grad_(True)
    upstream = torch.randn(z.shape, generator=torch.Generator().manual_seed(seed),
                           dtype=dtype)
    with _Ops() as ops:
        got = softplus(z, tx)
    grad, = torch.autograd.grad(got, z, upstream)
    want = _softplus_by_three_tests(z)
    want_grad, = torch.autograd.grad(want, z, upstream)
    assert _bytes(got) == _bytes(want) and _bytes(grad) == _bytes(want_grad)
    assert len(ops.named("gt")) == 1, ops.ops
    # max(z, 0) + log1p(exp(-|z|)) on that one test: one exp and one log1p, 8 array
    # operators (and autograd's detach of exp's output), where the two branches (each its own
    # log1p(exp(.)), a third where to join them) took 11
    assert len(ops.named("exp")) == len(ops.named("log1p")) == 1, ops.ops
    assert len([op for op in ops.ops if op[0] != "detach"]) == 8, ops.ops
    # the logistic surrogate is the same softplus: scale 1 costs one negation, no product
    with _Ops() as ops:
        logistic = surrogate_loss("logistic", -z, xp=tx)
    assert _bytes(logistic) == _bytes(got)
    assert not ops.named("mul"), ops.ops


@pytest.mark.parametrize("name", ["CrossEntropyLoss", "FocalLoss"])
def test_cross_entropy_losses_negate_their_logits_once(name):
    logits = torch.linspace(-30, 30, 12, dtype=torch.float64).requires_grad_(True)
    labels = (torch.arange(12) % 3 == 0).double()
    with _Ops() as ops:
        getattr(xr, name)(dtype="float64")(logits, labels)
    # One softplus (CE: of -m) or two (focal: of m and -m), each with one sign test and one
    # negation of its own; the logits are negated once, for -m.
    softpluses = 1 if name == "CrossEntropyLoss" else 2
    assert len(ops.named("gt")) == softpluses, ops.ops
    assert len(ops.named("neg")) == softpluses + 1, ops.ops
    assert not ops.named("_to_copy"), "float labels of the scores' dtype are not copied"


def _ndcg_batch(queries: int, positives: int, negatives: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    relevance = rng.integers(1, 4, size=(queries, positives)).astype(np.float64)
    ranked = -np.sort(-relevance, axis=1)
    ideal = ((2.0 ** ranked - 1) / np.log2(np.arange(2, positives + 2))).sum(axis=1)
    interaction = rng.integers(0, 9, size=(queries, positives))
    interaction[1, 0] = interaction[0, 1]  # a repeated interaction pools with its twin
    return {"relevance": torch.tensor(relevance), "query": torch.arange(queries),
            "interaction": torch.tensor(interaction),
            "num_relevant": torch.full((queries,), float(positives), dtype=torch.float64),
            "ideal_dcg": torch.tensor(ideal)}


def test_ndcg_without_a_mask_builds_no_column_mask_and_gives_the_same_bits():
    """NDCG without ``mask``: no (queries, candidates) column selection, no product of the
    (queries, positives, candidates) pair losses with ones, no selection of kept positions;
    loss, gradient and state equal an all-ones mask's bit for bit over three steps."""
    queries, positives, negatives = 4, 3, 6
    width = positives + negatives
    results, counts = [], []
    for mask in (None, torch.ones((queries, positives), dtype=torch.int64)):
        loss_fn = xr.NDCGLoss(num_interactions=9, num_queries=4, num_items=50,
                              dtype="float64")
        for step in range(3):
            batch = _ndcg_batch(queries, positives, negatives, step)
            scores = torch.randn(queries, width, dtype=torch.float64,
                                 generator=torch.Generator().manual_seed(step)
                                 ).requires_grad_(True)
            with _Ops() as ops:
                loss = loss_fn(scores, mask=mask, **batch)
            grad, = torch.autograd.grad(loss, scores)
        counts.append(len(ops.ops))
        if mask is None:
            assert not [op for op in ops.named("where") if (queries, width) in op[1]]
            assert not [op for op in ops.named("mul")
                        if (queries, positives, width) in op[1]
                        and (queries, 1, width) in op[1]]
        results.append([loss, grad, *loss_fn.buffers()])
    for got, want in zip(*results, strict=True):
        assert got.dtype == want.dtype and _bytes(got) == _bytes(want)
    assert counts[0] < counts[1] - 6, counts


@pytest.mark.parametrize("name", ["GlobalContrastiveLoss", "BimodalContrastiveLoss",
                                  "InfoNCELoss"])
def test_contrastive_negatives_are_compared_with_zero_once(name):
    batch, dim = 6, 4
    generator = torch.Generator().manual_seed(0)
    views = [torch.randn(batch, dim, generator=generator, dtype=torch.float64) for _ in "ab"]
    index = torch.tensor([0, 2, 2, 5, 7, 1])
    kwargs = {} if name == "InfoNCELoss" else {"num_samples": 8}
    loss_fn = getattr(xr, name)(dtype="float64", **kwargs)
    with _Ops() as ops:
        loss_fn(*views, index)
    square = [op for op in ops.named("gt") if (batch, batch) in op[1]]
    assert len(square) == 1, square


_SURROGATES = ["squared_hinge", "logistic", "barrier_hinge"]


def _label_by_label(definition, step, state, scores, values, index):
    """The multi-label step as K single-label steps (the loop it replaced): label t on
    column t with the index shifted by t * num_samples and row t of every global entry."""
    inner, samples = definition.inner, definition.num_samples
    per_label = {name for name, table in inner.state_tables().items() if table.keys is None}
    tables = state._asdict()
    rows = {name: [] for name in per_label}
    total = None
    for t in range(definition.num_labels):
        own = inner.state_type(**{name: value[t] if name in per_label else value
                                  for name, value in tables.items()})
        value, new = inner._loss(step, own, None, scores[:, t], values[:, t],
                                 index + t * samples)
        for name, entry in new._asdict().items():
            if name in per_label:
                rows[name].append(entry)
            else:
                tables[name] = entry
        total = value if total is None else total + value
    tables.update({name: torch.stack(entries) for name, entries in rows.items()})
    return total / definition.num_labels, inner.state_type(**tables)


@pytest.mark.parametrize("surrogate", _SURROGATES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mean_ap_runs_every_label_at_once_with_each_labels_bits(surrogate, dtype):
    """mAP groups, gathers and writes the rows of all K labels in one pass (its operators do
    not grow with K but for the per-label pair work), and every loss, gradient and state bit
    is that of K single-label APLoss steps, over three steps with missing labels, a label
    without a positive and duplicate indices, with and without the host's reading of the
    index."""
    import xrisk
    from xrisk.losses._base import Step

    backend = get_backend("torch")
    counts = {}
    for labels_count in (2, 5):
        definition = xrisk.meanAveragePrecisionLoss(labels_count, num_samples=6,
                                                    surrogate=surrogate)
        batch = 9
        for host in (False, True):
            states = [definition.init(xp=tx, dtype=dtype) for _ in range(2)]
            for step_number in range(3):
                rng = np.random.default_rng(10 * step_number + labels_count)
                values = (rng.random((batch, labels_count)) < 0.4).astype(np.float64)
                values[rng.random((batch, labels_count)) < 0.15] = np.nan  # missing labels
                values[:, 0] = 0.0 if step_number == 1 else values[:, 0]  # no positive
                index = rng.integers(0, 6, size=batch)  # duplicates
                step = Step(backend, tx, None, {"index": index} if host else None)
                drawn = rng.random((batch, labels_count))
                results = []
                for at_once, state in zip((True, False), states, strict=True):
                    scores = torch.tensor(drawn, dtype=dtype, requires_grad=True)
                    labels_t, index_t = torch.tensor(values, dtype=dtype), torch.tensor(index)
                    if at_once:
                        with _Ops() as ops:
                            loss, new = definition._loss(step, state, None, scores, labels_t,
                                                         index_t, None)
                        counts.setdefault(labels_count, len(ops.named("index_add")))
                    else:
                        loss, new = _label_by_label(definition, step, state, scores,
                                                    labels_t, index_t)
                    grad, = torch.autograd.grad(loss, scores)
                    results.append([loss, grad, *new])
                    states[not at_once] = new
                for got, want in zip(*results, strict=True):
                    assert got.dtype == want.dtype and _bytes(got) == _bytes(want)
    # the grouping's segment sums run once for all labels, whatever their number
    assert counts[2] == counts[5], counts


@given(keys=st.lists(st.integers(0, 9), min_size=1, max_size=12), hosted=st.booleans())
def test_a_grouping_that_keeps_every_position_builds_no_anchor_and_no_mask(keys, hosted):
    """Every position kept (compact pairs, the positives of AP): no reduction reads an anchor
    or a mask, so none is built (an ``eq`` and a ``zeros`` per step before); the counts, one
    segment sum of ones on the device, are those of a mask of ones."""
    from xrisk._grouping import group_keys

    backend = get_backend("torch")
    index = torch.as_tensor(np.asarray(keys, dtype=np.int64))
    with _Ops() as ops:
        groups = group_keys(index, backend=backend, xp=tx, dtype=torch.float64,
                            host=np.asarray(keys) if hosted else None)
    assert groups.all_kept and groups.anchor is None and groups.keep is None
    assert not ops.named("eq") and not ops.named("zeros"), ops.ops
    masked = group_keys(index, torch.ones(len(keys), dtype=torch.bool), backend=backend, xp=tx,
                        dtype=torch.float64)
    assert _bytes(groups.count) == _bytes(masked.count)
    assert _bytes(groups.ids) == _bytes(masked.ids)


@given(keys=st.lists(st.integers(0, 40), min_size=1, max_size=12, unique=True),
       values=st.lists(st.floats(-50, 50), min_size=12, max_size=12))
def test_a_grouping_of_distinct_host_keys_reduces_with_no_operator(keys, values):
    """Distinct keys read on the host (an eager batch of distinct dataset indices): every
    group is one position, so sum, mean, max, log-mean-exp and spread return their values
    with no operator, the bytes the segment reductions give (a -0.0 aside, which their sums
    turn into +0.0); one duplicate key takes the segment path."""
    from xrisk._grouping import group_keys

    backend = get_backend("torch")
    index = torch.as_tensor(np.asarray(keys, dtype=np.int64))
    data = torch.tensor(values[:len(keys)], dtype=torch.float64) + 0.0  # no -0.0
    fresh = torch.tensor(values[::-1][:len(keys)], dtype=torch.float64) + 0.0
    hosted = group_keys(index, backend=backend, xp=tx, dtype=torch.float64,
                        host=np.asarray(keys))
    device = group_keys(index, backend=backend, xp=tx, dtype=torch.float64)
    assert hosted.distinct and not device.distinct
    with _Ops() as ops:
        got = [hosted.sum(data), hosted.mean(data), hosted.max(data, None),
               hosted.log_mean_exp(data), hosted.spread(fresh, data)]
    assert not ops.ops, ops.ops
    want = [device.sum(data), device.mean(data), device.max(data, None),
            device.log_mean_exp(data), device.spread(fresh, data)]
    for name, a, b in zip(("sum", "mean", "max", "log_mean_exp", "spread"), got, want,
                          strict=True):
        assert _bytes(a) == _bytes(b), name
    twice = np.asarray([*keys, keys[0]])
    assert not group_keys(torch.as_tensor(twice), backend=backend, xp=tx, dtype=torch.float64,
                          host=twice).distinct


def test_a_torch_row_write_detaches_only_rows_that_carry_a_gradient():
    """``write_rows`` writes under ``no_grad``; rows built from detached values (the usual
    ones) dispatch no ``detach`` before the write, rows with a gradient one."""
    backend = get_backend("torch")
    table = torch.zeros(5, 2, dtype=torch.float64)
    index = torch.tensor([3, 1])
    plain = torch.ones(2, 2, dtype=torch.float64)
    carried = torch.full((2, 2), 2.0, dtype=torch.float64, requires_grad=True) * 1
    for rows, detaches in ((plain, 0), (carried, 1)):
        with _Ops() as ops:
            backend.write_rows(table, index, rows)
        assert len(ops.named("detach")) == detaches, ops.ops
        assert _bytes(table[index]) == _bytes(rows)
        assert not table.requires_grad
