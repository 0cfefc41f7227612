"""Samplers: exact batch composition, coverage, determinism, resume, sharding, bad input."""

from __future__ import annotations

import doctest
import importlib
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xrisk.samplers import DualSampler, RandomSampler, TriSampler


def binary(num_pos: int, num_neg: int, seed: int = 0) -> np.ndarray:
    labels = np.array([1] * num_pos + [0] * num_neg)
    return np.random.default_rng(seed).permutation(labels)


def assert_cycles(stream: np.ndarray, pool: np.ndarray) -> None:
    """Every complete cycle of the stream is a permutation of the pool; the tail is distinct."""
    n = pool.size
    for start in range(0, stream.size, n):
        part = stream[start : start + n]
        if part.size == n:
            np.testing.assert_array_equal(np.sort(part), np.sort(pool))
        else:
            assert np.unique(part).size == part.size
            assert np.isin(part, pool).all()


# -- DualSampler ----------------------------------------------------------------------------


def test_dual_composition_length_and_cycles():
    labels = binary(37, 500)
    sampler = DualSampler(labels, 32, sampling_rate=0.25, seed=3)
    assert (sampler.num_pos, sampler.num_neg) == (8, 24)
    assert len(sampler) == max(37 // 8, 500 // 24) == 20
    plan = sampler.epoch_batches()
    assert plan.shape == (20, 32) and plan.dtype == np.int64
    assert (labels[plan[:, :8]] == 1).all() and (labels[plan[:, 8:]] == 0).all()
    for row in plan:
        assert np.unique(row).size == row.size
    assert_cycles(plan[:, :8].ravel(), np.flatnonzero(labels == 1))
    assert_cycles(plan[:, 8:].ravel(), np.flatnonzero(labels == 0))
    # every positive is seen floor or ceil(160 / 37) times in the epoch
    counts = np.bincount(plan[:, :8].ravel(), minlength=labels.size)[labels == 1]
    assert counts.min() >= 160 // 37 and counts.max() <= 160 // 37 + 1


def test_dual_recycles_leftovers_without_loss_b10():
    # LibAUC 2.0.1 with pos=[1, 2, 0], num_pos=2 drops leftovers; here each cycle is complete.
    labels = np.array([1, 1, 1] + [0] * 60)
    sampler = DualSampler(labels, 8, num_pos=2, seed=0)
    stream = sampler.epoch_batches()[:, :2].ravel()
    assert_cycles(stream, np.array([0, 1, 2]))
    for row in sampler.epoch_batches():
        assert np.unique(row[:2]).size == 2


def test_dual_more_negatives_asked_than_exist_b11():
    labels = np.array([1] * 30 + [0] * 3)
    sampler = DualSampler(labels, 10, num_pos=5, seed=1)  # num_neg 5 > 3 negatives
    plan = sampler.epoch_batches()
    assert len(sampler) == 30 // 5
    for row in plan:
        counts = np.bincount(row[5:], minlength=33)[30:]
        assert counts.min() == 1 and counts.max() == 2  # 5 // 3 or 5 // 3 + 1


def test_dual_fewer_positives_than_num_pos():
    labels = np.array([1] + [0] * 40)
    plan = DualSampler(labels, 8, num_pos=4, seed=0).epoch_batches()
    assert (plan[:, :4] == 0).all()


def test_dual_shuffle_false_is_sequential():
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0])
    plan = DualSampler(labels, 4, num_pos=1, shuffle=False).epoch_batches()
    np.testing.assert_array_equal(plan[:, 0], [0, 1, 2])
    np.testing.assert_array_equal(plan[:, 1:].ravel(), [3, 4, 5, 6, 7, 8, 3, 4, 5])


def test_dual_determinism_and_epochs():
    labels = binary(50, 450)
    a = DualSampler(labels, 20, sampling_rate=0.3, seed=7)
    b = DualSampler(labels, 20, sampling_rate=0.3, seed=7)
    c = DualSampler(labels, 20, sampling_rate=0.3, seed=8)
    np.testing.assert_array_equal(a.epoch_batches(0), b.epoch_batches(0))
    assert not np.array_equal(a.epoch_batches(0), c.epoch_batches(0))
    assert not np.array_equal(a.epoch_batches(0), a.epoch_batches(1))
    np.testing.assert_array_equal(a.batch(5, epoch=2), b.epoch_batches(2)[5])
    first = [x.copy() for x in a]  # a full pass moves to the next epoch
    assert a.epoch == 1
    np.testing.assert_array_equal(np.stack(first), b.epoch_batches(0))
    np.testing.assert_array_equal(np.stack(list(a)), b.epoch_batches(1))
    a.set_epoch(0)
    np.testing.assert_array_equal(next(iter(a)), b.epoch_batches(0)[0])


def test_dual_never_touches_global_rng():
    np.random.seed(123)  # noqa: NPY002 (the global RNG is what we check)
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    list(DualSampler(binary(10, 90), 10, seed=1))
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # noqa: NPY002


def test_dual_resume_replays_remaining_batches():
    labels = binary(30, 300)
    run = DualSampler(labels, 16, sampling_rate=0.25, seed=5)
    run.set_epoch(3)
    iterator = iter(run)
    seen = [next(iterator) for _ in range(4)]
    state = run.state_dict()
    assert state == {"seed": 5, "epoch": 3, "position": 4}
    resumed = DualSampler(labels, 16, sampling_rate=0.25, seed=5)
    resumed.load_state_dict(state)
    rest = list(resumed)
    reference = DualSampler(labels, 16, sampling_rate=0.25, seed=5).epoch_batches(3)
    np.testing.assert_array_equal(np.stack(seen + rest), reference)
    with pytest.raises(ValueError, match="seed=5"):
        DualSampler(labels, 16, sampling_rate=0.25, seed=6).load_state_dict(state)


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_dual_shards_partition_the_global_batch(world_size):
    labels = binary(40, 400)
    sampler = DualSampler(labels, 32, num_pos=8, seed=2)
    shards = [sampler.shard(r, world_size) for r in range(world_size)]
    for position in (0, 3, len(sampler) - 1):
        parts = [s.batch(position, epoch=1) for s in shards]
        glob = sampler.batch(position, epoch=1)
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.sort(glob))
        for part in parts:
            assert part.size == 32 // world_size
            assert (labels[part[: 8 // world_size]] == 1).all()
            assert (labels[part[8 // world_size :]] == 0).all()
    assert all(len(s) == len(sampler) for s in shards)
    with pytest.raises(ValueError, match="world_size=3"):
        sampler.shard(0, 3)


@settings(max_examples=40, deadline=None)
@given(
    num_pos=st.integers(1, 30),
    num_neg=st.integers(1, 60),
    batch=st.integers(2, 20),
    rate=st.floats(0.05, 0.95),
    seed=st.integers(0, 2**31),
)
def test_dual_properties(num_pos, num_neg, batch, rate, seed):
    labels = binary(num_pos, num_neg, seed % 97)
    if batch > labels.size:
        with pytest.raises(ValueError, match="larger than the data"):
            DualSampler(labels, batch, sampling_rate=rate, seed=seed)
        return
    sampler = DualSampler(labels, batch, sampling_rate=rate, seed=seed)
    p = sampler.num_pos
    plan = sampler.epoch_batches()
    assert len(sampler) == max(num_pos // p, num_neg // (batch - p), 1)
    assert (labels[plan[:, :p]] == 1).all() and (labels[plan[:, p:]] == 0).all()
    for part, pool in ((plan[:, :p], labels == 1), (plan[:, p:], labels == 0)):
        n = int(pool.sum())
        for row in part:
            counts = np.bincount(row, minlength=labels.size)[pool]
            if row.size <= n:
                assert counts.max() <= 1
            else:
                assert counts.min() >= row.size // n and counts.max() <= row.size // n + 1
        if part.shape[1] <= n:
            assert_cycles(part.ravel(), np.flatnonzero(pool))


@pytest.mark.parametrize(
    ("labels", "kwargs", "match"),
    [
        ([1.0, np.nan, 0.0, 0.0], {}, "NaN"),
        ([1, -1, 0, 0], {}, "negative"),
        ([1, 0.5, 0, 0], {}, "non-integer"),
        ([1, 2, 0, 0], {}, r"contains \[2\]"),
        ([1, 1, 1, 1], {}, "single class"),
        ([1, 0, 0, 0], {"sampling_rate": 0.0}, "sampling_rate=0.0"),
        ([1, 0, 0, 0], {"sampling_rate": 1.0}, "sampling_rate=1.0"),
        ([1, 0, 0, 0], {"sampling_rate": 1.5}, "sampling_rate=1.5"),
        ([1, 0, 0, 0], {"batch_size": 5}, "batch_size=5 is larger than the data"),
        ([1, 0, 0, 0], {"num_pos": 2, "sampling_rate": 0.5}, "both sampling_rate"),
        ([1, 0, 0, 0], {"num_pos": 2}, "num_pos=2"),
        ([1, 0, 0, 0], {"seed": -1}, "seed=-1"),
        ([[1, 0], [0, 1]], {}, r"shape \(2, 2\)"),
    ],
)
def test_dual_bad_input(labels, kwargs, match):
    options = {"batch_size": 2, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        DualSampler(np.asarray(labels), options.pop("batch_size"), **options)


def test_position_beyond_epoch():
    sampler = DualSampler(binary(5, 20), 5, seed=0)
    with pytest.raises(IndexError, match=f"position={len(sampler)}"):
        sampler.batch(len(sampler))
    with pytest.raises(ValueError, match="rank=2"):
        sampler.shard(2, 2)


# -- TriSampler, classification ------------------------------------------------------------


def multilabel(n=120, tasks=5, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random((n, tasks)) < np.linspace(0.05, 0.4, tasks)).astype(int)
    y[0], y[1] = 1, 0  # every task has both classes
    return y


@pytest.mark.parametrize("sampled", [2, 3, 5])
def test_tri_classification_composition(sampled):
    y = multilabel()
    sampler = TriSampler(y, 6, num_sampled_tasks=sampled, num_pos=2, seed=4)
    assert len(sampler) == 120 // (6 * sampled)
    index, task = sampler.epoch_batches()
    assert index.shape == task.shape == (len(sampler), sampled * 6)
    for row_index, row_task in zip(index, task, strict=True):
        blocks = row_index.reshape(sampled, 6)
        block_tasks = row_task.reshape(sampled, 6)
        assert (block_tasks == block_tasks[:, :1]).all()
        assert np.unique(block_tasks[:, 0]).size == sampled  # distinct tasks per batch
        for items, t in zip(blocks, block_tasks[:, 0], strict=True):
            assert (y[items[:2], t] == 1).all() and (y[items[2:], t] == 0).all()
            assert np.unique(items).size == 6 or y[:, t].sum() < 2
    # every task's positives are read in complete cycles
    for t in range(5):
        chosen = (task.reshape(-1, 6)[:, 0]) == t
        stream = index.reshape(-1, 6)[chosen, :2].ravel()
        if stream.size:
            assert_cycles(stream, np.flatnonzero(y[:, t] == 1))


def test_tri_classification_tasks_cover_evenly():
    y = multilabel(n=600, tasks=6)
    sampler = TriSampler(y, 5, num_sampled_tasks=4, num_pos=1, seed=1)
    tasks = sampler.epoch_batches()[1].reshape(-1, 5)[:, 0]
    counts = np.bincount(tasks, minlength=6)
    assert counts.max() - counts.min() <= 1


def test_tri_classification_multiclass_one_hot_and_determinism():
    classes = np.repeat(np.arange(4), 10)
    a = TriSampler(classes, 4, num_pos=1, seed=9)
    assert a.num_tasks == 4 and a.num_sampled_tasks == 4
    index, task = a.batch(0)
    assert (classes[index.reshape(4, 4)[:, 0]] == task.reshape(4, 4)[:, 0]).all()
    b = TriSampler(classes, 4, num_pos=1, seed=9)
    np.testing.assert_array_equal(b.epoch_batches(2)[0], a.epoch_batches(2)[0])


def test_tri_classification_shard():
    y = multilabel()
    sampler = TriSampler(y, 4, num_sampled_tasks=4, num_pos=1, seed=0)
    shards = [sampler.shard(r, 2) for r in range(2)]
    index, task = sampler.batch(1)
    parts = [s.batch(1) for s in shards]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), index)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), task)
    with pytest.raises(ValueError, match="num_sampled_tasks=4"):
        sampler.shard(0, 3)


@given(seed=st.integers(0, 2**16), missing=st.floats(0.1, 0.6))
def test_tri_classification_never_draws_a_missing_label(seed, missing):
    """NaN marks a missing label (Tox21 and most real multi-label data): the example is
    neither a positive nor a negative of that task; the known entries are drawn as before."""
    y = multilabel(seed=seed).astype(float)
    rng = np.random.default_rng(seed)
    y[rng.random(y.shape) < missing] = np.nan
    y[0], y[1] = 1, 0  # every task keeps both classes
    sampler = TriSampler(y, 6, num_sampled_tasks=3, num_pos=2, seed=seed)
    for epoch in range(2):
        index, task = sampler.epoch_batches(epoch)
        blocks, tasks = index.reshape(-1, 6), task.reshape(-1, 6)[:, 0]
        assert (y[blocks[:, :2], tasks[:, None]] == 1).all()
        assert (y[blocks[:, 2:], tasks[:, None]] == 0).all()  # NaN compares False: never drawn


@pytest.mark.parametrize(
    ("labels", "kwargs", "match"),
    [
        (np.array([[1, 0], [1, 0], [1, 1], [1, 0]]), {}, "no negative"),
        (np.array([[1, 0], [0, 0], [1, 0], [0, 0]]), {}, "no positive"),
        (np.array([[1, 0], [0, 1], [1, 0], [0, 1]]), {"num_sampled_tasks": 3}, "only 2 tasks"),
        (np.array([[1, 0], [0, 1], [1, 0], [0, 1]]), {"batch_size_per_task": 3}, "larger"),
        (np.array([[1, 0], [np.nan, 1], [1, 0], [np.nan, 1]]), {}, "have no negative"),
        (np.array([[1, 0], [0, 2.0], [1, np.nan], [0, 1]]), {}, r"contains \[2.0\]"),
        (np.array([[1, 0], [0, 1], [1, 0], [0, 1]]), {"mode": "dense"}, "mode='dense'"),
    ],
)
def test_tri_classification_bad_input(labels, kwargs, match):
    options = {"batch_size_per_task": 2, "num_pos": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        TriSampler(labels, options.pop("batch_size_per_task"), **options)


# -- TriSampler, ranking -------------------------------------------------------------------


def interactions(num_queries=40, num_items=60, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(num_queries):
        rated = rng.choice(num_items, size=rng.integers(1, 30), replace=False)
        relevance = rng.integers(0, 6, size=rated.size)  # 0 = rated but not relevant
        relevance[0] = 4
        rows += [(q, i, r) for i, r in zip(rated, relevance, strict=True)]
    return np.array(rows, dtype=np.float64)


def test_tri_ranking_composition_against_dense_reference():
    data = interactions()
    rated = np.zeros((40, 60), dtype=bool)
    relevant = np.zeros((40, 60), dtype=bool)
    q, i, r = data[:, 0].astype(int), data[:, 1].astype(int), data[:, 2]
    rated[q, i] = True
    relevant[q[r > 0], i[r > 0]] = True
    sampler = TriSampler(data, 13, num_sampled_tasks=8, num_pos=3, mode="ranking", seed=2)
    assert len(sampler) == 40 // 8
    seen = []
    for items, queries in sampler:
        assert items.shape == (8, 13) and queries.shape == (8,)
        seen.append(queries)
        for row, query in zip(items, queries, strict=True):
            pos, neg = row[:3], row[3:]
            assert relevant[query, pos].all()
            if relevant[query].sum() >= 3:
                assert np.unique(pos).size == 3
            assert not rated[query, neg].any()
            assert np.unique(neg).size == 10
    assert np.unique(np.concatenate(seen)).size == 40  # distinct queries within an epoch


def test_tri_ranking_small_rows_repeat_evenly_and_negatives_uniform():
    data = np.array([[0, 0, 1], [0, 1, 0], [0, 2, 0], [1, 3, 1], [1, 4, 2]], dtype=float)
    sampler = TriSampler(data, 8, num_sampled_tasks=2, num_pos=4, mode="ranking",
                         num_items=6, seed=0)  # fmt: skip
    items, queries = sampler.batch(0)
    for row, query in zip(items, queries, strict=True):
        pos_counts = np.bincount(row[:4], minlength=6)
        relevant = [0] if query == 0 else [3, 4]
        assert set(np.flatnonzero(pos_counts)) == set(relevant)
        assert pos_counts[relevant].max() - pos_counts[relevant].min() <= 1
        unrated = [3, 4, 5] if query == 0 else [0, 1, 2, 5]
        neg_counts = np.bincount(row[4:], minlength=6)
        assert set(np.flatnonzero(neg_counts)) <= set(unrated)
        assert neg_counts[unrated].max() - neg_counts[unrated].min() <= 1
    # uniform negatives: over many epochs every unrated item is drawn about equally often
    big = TriSampler(interactions(10, 200, seed=1), 21, num_sampled_tasks=10, num_pos=1,
                     mode="ranking", seed=3)  # fmt: skip
    counts = np.zeros(200)
    for epoch in range(30):
        items, queries = big.batch(0, epoch=epoch)
        mask = queries == 0
        counts += np.bincount(items[mask, 1:].ravel(), minlength=200)
    drawn = counts[counts > 0]
    assert drawn.size > 150 and drawn.max() < 4 * drawn.mean()


def test_tri_ranking_sparse_input_and_determinism():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    data = interactions()
    matrix = scipy_sparse.csr_matrix(
        (data[:, 2], (data[:, 0].astype(int), data[:, 1].astype(int))), shape=(40, 60)
    )
    kwargs = {"num_sampled_tasks": 4, "num_pos": 2, "mode": "ranking", "seed": 11}
    from_rows = TriSampler(data, 10, num_items=60, **kwargs)
    from_matrix = TriSampler(matrix, 10, **kwargs)
    for epoch in (0, 1):
        a, b = from_rows.batch(3, epoch=epoch), from_matrix.batch(3, epoch=epoch)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(from_rows.batch(3, epoch=0)[1], from_rows.batch(3, epoch=1)[1])
    shards = [from_rows.shard(r, 2) for r in range(2)]
    parts = [s.batch(1) for s in shards]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), from_rows.batch(1)[0])


@pytest.mark.parametrize(
    ("rows", "kwargs", "match"),
    [
        ([[0, 1, 1], [0, 1, 2]], {}, r"pair \(0, 1\) occurs more than once"),
        ([[0, 0, 1], [0, 1, 1]], {"num_items": 2}, "rated all 2 items"),
        ([[0, 5, 1]], {"num_items": 3}, r"item ids \[5\] are beyond num_items=3"),
        ([[0, 1, 0]], {}, "no query has a relevant item"),
        ([[0, -1, 1]], {}, "negative"),
        ([[0, 1, np.nan]], {"num_items": 4}, "NaN"),
        (np.zeros((0, 2)), {}, "no interactions"),
        ([[0, 1, 1], [1, 2, 1]], {"num_sampled_tasks": 3, "num_items": 5}, "only 2 queries"),
    ],
)
def test_tri_ranking_bad_input(rows, kwargs, match):
    with pytest.raises(ValueError, match=match):
        TriSampler(np.asarray(rows, dtype=float), 3, num_pos=1, mode="ranking", **kwargs)


# -- RandomSampler -------------------------------------------------------------------------


def test_random_sampler():
    sampler = RandomSampler(23, 5, seed=1)
    assert len(sampler) == 4
    plan = sampler.epoch_batches()
    assert np.unique(plan).size == 20
    keep = RandomSampler(23, 5, drop_last=False, seed=1)
    batches = list(keep)
    assert len(batches) == 5 and batches[-1].size == 3
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(23))
    np.testing.assert_array_equal(batches[0], plan[0])
    assert not np.array_equal(sampler.epoch_batches(0), sampler.epoch_batches(1))
    shards = [RandomSampler(24, 6, seed=2).shard(r, 3) for r in range(3)]
    whole = RandomSampler(24, 6, seed=2).batch(2)
    np.testing.assert_array_equal(np.concatenate([s.batch(2) for s in shards]), whole)
    np.testing.assert_array_equal(RandomSampler(5, 5, shuffle=False).batch(0), np.arange(5))
    with pytest.raises(ValueError, match="batch_size=6 is larger"):
        RandomSampler(5, 6)
    with pytest.raises(TypeError, match="num_samples=2.5"):
        RandomSampler(2.5, 1)


@pytest.mark.parametrize("module", ["dual", "tri", "random", "_base"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"xrisk.samplers.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


# -- resume: set_epoch, several iterators, state validation ---------------------------------


def test_set_epoch_after_load_keeps_the_restored_position():
    labels = binary(20, 200)
    reference = DualSampler(labels, 10, num_pos=2, seed=4)
    sampler = DualSampler(labels, 10, num_pos=2, seed=4)
    sampler.load_state_dict({"seed": 4, "epoch": 2, "position": 3})
    sampler.set_epoch(2)  # the DistributedSampler habit, right after resuming
    assert sampler.state_dict() == {"seed": 4, "epoch": 2, "position": 3}
    rest = np.stack(list(sampler))
    np.testing.assert_array_equal(rest, reference.epoch_batches(2)[3:])
    assert sampler.state_dict() == {"seed": 4, "epoch": 3, "position": 0}
    # without a pending resume set_epoch starts the epoch at 0, as DistributedSampler does
    partial = iter(sampler)
    next(partial), next(partial)
    sampler.set_epoch(3)
    np.testing.assert_array_equal(next(iter(sampler)), reference.batch(0, epoch=3))
    # another epoch than the restored one starts at 0 (and says the restored position is left)
    sampler.load_state_dict({"seed": 4, "epoch": 2, "position": 3})
    with pytest.warns(UserWarning, match="position=3 of epoch 2"):
        sampler.set_epoch(5)
    assert sampler.state_dict() == {"seed": 4, "epoch": 5, "position": 0}
    sampler.load_state_dict({"seed": 4, "epoch": 2, "position": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler.set_epoch(4)  # nothing of epoch 2 was consumed: no warning


def test_each_iterator_starts_at_the_saved_position_and_the_newest_one_leads():
    labels = binary(20, 200)
    sampler = DualSampler(labels, 10, num_pos=2, seed=1)
    plan = sampler.epoch_batches(0)
    first = iter(sampler)
    np.testing.assert_array_equal(next(first), plan[0])
    np.testing.assert_array_equal(next(first), plan[1])
    second = iter(sampler)  # starts where the sampler stands, then leads it
    np.testing.assert_array_equal(next(second), plan[2])
    assert sampler.state_dict()["position"] == 3
    np.testing.assert_array_equal(next(first), plan[2])  # the old one keeps its own order ...
    assert sampler.state_dict()["position"] == 3  # ... but no longer moves the sampler
    assert len(list(first)) == len(plan) - 3
    assert sampler.state_dict() == {"seed": 1, "epoch": 0, "position": 3}
    assert len(list(second)) == len(plan) - 3
    assert sampler.state_dict() == {"seed": 1, "epoch": 1, "position": 0}
    # set_epoch and load_state_dict detach a running iterator too
    third = iter(sampler)
    next(third)
    sampler.set_epoch(7)
    next(third)
    assert sampler.state_dict() == {"seed": 1, "epoch": 7, "position": 0}


GOOD_STATE = {"seed": 5, "epoch": 2, "position": 3}


@pytest.mark.parametrize(
    ("state", "error", "match"),
    [
        ({**GOOD_STATE, "epoch": 2.0}, TypeError, r"epoch.*2\.0"),
        ({**GOOD_STATE, "position": 3.5}, TypeError, r"position.*3\.5"),
        ({**GOOD_STATE, "position": "3"}, TypeError, r"position.*'3'"),
        ({**GOOD_STATE, "epoch": True}, TypeError, "epoch.*True"),
        ({**GOOD_STATE, "seed": 5.0}, TypeError, r"seed.*5\.0"),
        ({**GOOD_STATE, "position": np.array(3.0)}, TypeError, "position"),
        ({**GOOD_STATE, "epoch": -1}, ValueError, "epoch.*-1"),
        ({**GOOD_STATE, "position": -2}, ValueError, "position.*-2"),
        ({"seed": 5, "epoch": 2}, ValueError, r"missing \['position'\]"),
        ({**GOOD_STATE, "step": 9}, ValueError, r"unknown \['step'\]"),
        ({**GOOD_STATE, "seed": 6}, ValueError, "seed=6"),
        ({**GOOD_STATE, "position": 999}, ValueError, "position=999"),
        ([5, 2, 3], TypeError, "list"),
    ],
)
def test_load_state_dict_rejects_bad_state_and_changes_nothing(state, error, match):
    sampler = DualSampler(binary(20, 200), 10, num_pos=2, seed=5)
    sampler.load_state_dict({"seed": 5, "epoch": 1, "position": 4})
    with pytest.raises(error, match=match):
        sampler.load_state_dict(state)
    assert sampler.state_dict() == {"seed": 5, "epoch": 1, "position": 4}
    sampler.set_epoch(1)  # the earlier load is still the pending resume
    assert sampler.state_dict()["position"] == 4


def test_load_state_dict_accepts_integer_scalars():
    sampler = DualSampler(binary(20, 200), 10, num_pos=2, seed=5)
    sampler.load_state_dict({"seed": np.int64(5), "epoch": np.array(2), "position": np.int32(3)})
    assert sampler.state_dict() == GOOD_STATE
    assert all(type(v) is int for v in sampler.state_dict().values())


# -- yielded indices: int64 numpy arrays the caller owns ------------------------------------


def all_samplers():
    y = multilabel(n=60, tasks=3)
    pairs = interactions(num_queries=6, num_items=30)
    return [
        DualSampler(binary(10, 50), 8, num_pos=2, seed=0),
        DualSampler(binary(10, 50), 8, num_pos=2, seed=0).shard(1, 2),
        RandomSampler(23, 5, seed=0),
        RandomSampler(23, 5, drop_last=False, seed=0),
        TriSampler(y, 4, num_sampled_tasks=2, num_pos=1, seed=0),
        TriSampler(pairs, 5, num_sampled_tasks=2, num_pos=1, mode="ranking", seed=0),
    ]


@pytest.mark.parametrize("index", range(6))
def test_batches_are_int64_arrays_that_the_caller_may_modify(index):
    sampler = all_samplers()[index]
    fresh = all_samplers()[index]

    def arrays(out):
        return list(out) if isinstance(out, tuple) else [out]

    outputs = [*list(sampler), sampler.batch(0)]
    if index != 3:  # drop_last=False cannot be stacked
        outputs.append(sampler.epoch_batches(0))
    for out in outputs:
        for part in arrays(out):
            assert type(part) is np.ndarray and part.dtype == np.int64
            part[...] = -1  # must not corrupt the sampler's cached epoch
    for position in range(len(sampler)):
        for got, want in zip(
            arrays(sampler.batch(position, epoch=0)),
            arrays(fresh.batch(position, epoch=0)),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)


# -- LibAUC spellings ---------------------------------------------------------------------


class _LibAUCStyleDataset:
    """What LibAUC's samplers take first: a dataset with ``.targets``."""

    def __init__(self, targets):
        self.targets = targets

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return np.zeros(2), self.targets[i], i


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda y, ds: DualSampler(ds, 8), r"DualSampler\(dataset\.targets"),
        (lambda y, ds: DualSampler(ds, 8, labels=y), r"DualSampler\(labels, batch_size"),
        (lambda y, ds: DualSampler(y, 8, random_seed=1), "seed=1"),
        (lambda y, ds: DualSampler(y, 8, num_sampled_tasks=2), "TriSampler"),
        (lambda y, ds: DualSampler(y, batch_size_per_gpu=4), r"batch_size=.*shard"),
        (lambda y, ds: DualSampler(y, batch_size_per_task=4), "batch_size=4"),
        (lambda y, ds: DualSampler(y, 8, None, True), "keyword-only"),
        (lambda y, ds: DualSampler(dataset=ds, batch_size=8), r"DualSampler\(dataset\.targets"),
        (lambda y, ds: TriSampler(ds, 4), r"TriSampler\(dataset\.targets"),
        (lambda y, ds: TriSampler(y, batch_size=4), "batch_size_per_task=4"),
        (lambda y, ds: TriSampler(y, 4, random_seed=3), "seed=3"),
        (lambda y, ds: TriSampler(y, 4, num_sampled_tasks_per_gpu=1), "num_sampled_tasks=1"),
        (lambda y, ds: TriSampler(y, 4, 2, 0.5), "keyword-only"),
        (lambda y, ds: RandomSampler(ds, 8), r"len\(dataset\)"),
        (lambda y, ds: RandomSampler(60, 8, random_seed=2), "seed=2"),
    ],
)
def test_libauc_argument_names_get_the_xrisk_spelling(build, match):
    y = binary(10, 50)
    with pytest.raises(TypeError, match=match):
        build(y, _LibAUCStyleDataset(y))


@given(values=st.lists(st.integers(0, 40), max_size=300),
       items=st.lists(st.integers(0, 40), max_size=300))
def test_cycle_boundary_membership_equals_isin(values, items):
    """The broadcast membership test of small draws (sampler epochs cross cycle boundaries
    with it) answers exactly what np.isin answers, on both sides of its size switch."""
    from xrisk.samplers._base import _member

    values, items = np.asarray(values, np.int64), np.asarray(items, np.int64)
    np.testing.assert_array_equal(_member(values, items), np.isin(values, items))
