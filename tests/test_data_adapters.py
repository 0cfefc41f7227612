"""Framework faces of the samplers and datasets: torch DataLoader, tf.data, JAX iterators."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")  # before TensorFlow, as the project's conftest does

from xrisk import samplers as core  # noqa: E402
from xrisk.metrics import auroc  # noqa: E402

LABELS = np.array([1] * 12 + [0] * 88)
DATA = np.random.default_rng(0).normal(size=(100, 4))


def test_core_imports_no_framework():
    code = (
        "import sys, xrisk.samplers, xrisk.metrics, xrisk.datasets\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_torch_dataloader_dual():
    from torch.utils.data import DataLoader, Sampler

    from xrisk.torch.data import DualSampler, IndexedDataset

    sampler = DualSampler(torch.tensor(LABELS), 10, sampling_rate=0.3, seed=4)
    assert isinstance(sampler, Sampler)
    loader = DataLoader(IndexedDataset(DATA, LABELS), batch_sampler=sampler)
    assert len(loader) == len(sampler)
    reference = core.DualSampler(LABELS, 10, sampling_rate=0.3, seed=4).epoch_batches()
    for (x, y, index), expected in zip(loader, reference, strict=True):
        assert index.tolist() == expected.tolist()
        assert y.tolist() == [1, 1, 1] + [0] * 7
        np.testing.assert_allclose(x.numpy(), DATA[expected])
    assert sampler.epoch == 1


@pytest.mark.parametrize("x_dtype, y_dtype, y_shape", [
    (np.float32, np.int64, ()), (np.float64, np.float64, (3,)), (np.float16, np.bool_, ()),
    (np.float32, np.int32, ()), (np.float32, np.uint8, (2,)),
])
def test_torch_batches_are_gathered_at_once_with_the_per_item_values(x_dtype, y_dtype, y_shape):
    """A DataLoader reads a batch through one gather (no per-item __getitem__, whose numpy to
    tensor conversion of every item cost a fifth of a small model's epoch), and the collated
    tensors equal the per-item path's, dtype for dtype."""
    from torch.utils.data import DataLoader
    from torch.utils.data._utils.collate import default_collate

    from xrisk.torch.data import IndexedDataset

    rng = np.random.default_rng(1)
    data = IndexedDataset(rng.normal(size=(20, 2, 3)).astype(x_dtype),
                          rng.integers(0, 2, (20, *y_shape)).astype(y_dtype))
    keys = [[3, 3, 19, 0], [7], [5, 6, 7, 8, 9]]
    per_item = [default_collate([data[k] for k in batch]) for batch in keys]
    calls = []
    original = IndexedDataset.__getitem__

    def counted(self, key):
        calls.append(key)
        return original(self, key)

    IndexedDataset.__getitem__ = counted
    try:
        loaded = list(DataLoader(data, batch_sampler=keys))
    finally:
        IndexedDataset.__getitem__ = original
    assert calls == []
    for got, want in zip(loaded, per_item, strict=True):
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def test_torch_batches_with_a_transform_or_pairs_go_item_by_item():
    from torch.utils.data import DataLoader

    from xrisk.torch.data import IndexedDataset

    doubled = IndexedDataset(DATA, LABELS, transform=lambda row: row * 2)
    x, _, index = next(iter(DataLoader(doubled, batch_sampler=[[4, 1]])))
    np.testing.assert_allclose(x.numpy(), DATA[[4, 1]] * 2)
    assert IndexedDataset(DATA, LABELS).__getitems__([(4, 0)])[0][2] == (4, 0)
    with pytest.raises(IndexError, match="beyond the data"):
        IndexedDataset(DATA, LABELS).__getitems__([1, 100])


def test_torch_tri_and_random_batches():
    from torch.utils.data import DataLoader

    from xrisk.torch.data import IndexedDataset, RandomSampler, TriSampler

    y = np.column_stack([LABELS, LABELS[::-1], np.roll(LABELS, 30)])
    sampler = TriSampler(y, 5, num_sampled_tasks=2, num_pos=2, seed=1)
    loader = DataLoader(IndexedDataset(DATA, y), batch_sampler=sampler)
    x, labels, (index, task) = next(iter(loader))
    assert x.shape == (10, 4) and index.shape == task.shape == (10,)
    picked = labels[torch.arange(10), task]
    assert picked.tolist() == [1, 1, 0, 0, 0] * 2
    pairs = np.array([[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 0, 1]])
    ranking = TriSampler(pairs, 3, num_sampled_tasks=3, num_pos=1, mode="ranking", seed=0)
    batch = next(iter(ranking))
    assert len(batch) == 3 and batch[0][0].shape == (3,)
    random_batches = list(RandomSampler(100, 32, seed=0))
    assert len(random_batches) == 3 and all(len(b) == 32 for b in random_batches)
    with pytest.raises(IndexError, match="beyond the data"):
        IndexedDataset(DATA, LABELS)[100]


def test_torch_sharded_samplers_union_is_global_batch():
    from xrisk.torch.data import DualSampler

    sampler = DualSampler(LABELS, 20, num_pos=4, seed=3)
    ranks = [list(sampler.shard(r, 2)) for r in range(2)]
    for position, (a, b) in enumerate(zip(*ranks, strict=True)):
        assert sorted(a + b) == sorted(sampler.batch(position).tolist())
        assert not set(a) & set(b)


def test_tensorflow_sources():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")
    from xrisk.tensorflow.data import DualSampler, IndexedDataset, RandomSampler, TriSampler

    sampler = DualSampler(LABELS, 10, num_pos=2, seed=4)
    reference = core.DualSampler(LABELS, 10, num_pos=2, seed=4)
    got = [b.numpy() for b in sampler.as_dataset()]
    np.testing.assert_array_equal(np.stack(got), reference.epoch_batches(0))
    second = [b.numpy() for b in sampler.as_dataset()]  # the next epoch
    np.testing.assert_array_equal(np.stack(second), reference.epoch_batches(1))
    x, y, index = next(iter(IndexedDataset(DATA, LABELS).as_dataset(DualSampler(LABELS, 10))))
    assert x.dtype == tf.float64 and tuple(x.shape) == (10, 4)
    np.testing.assert_allclose(x.numpy(), DATA[index.numpy()])
    multi = np.column_stack([LABELS, LABELS[::-1]])
    tri = TriSampler(multi, 4, num_pos=1, seed=2)
    x, labels, (index, task) = next(iter(IndexedDataset(DATA, multi).as_dataset(tri)))
    assert tuple(index.shape) == (8,) and tuple(task.shape) == (8,)
    pairs = np.array([[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 0, 1]])
    ranking = TriSampler(pairs, 3, num_sampled_tasks=3, num_pos=1, mode="ranking", seed=0)
    items, queries = next(iter(ranking.as_dataset()))
    assert tuple(items.shape) == (3, 3) and tuple(queries.shape) == (3,)
    shard = RandomSampler(100, 20, seed=0).shard(1, 2)
    assert [tuple(b.shape) for b in shard.as_dataset()] == [(10,)] * 5
    assert auroc(tf.constant(LABELS), tf.constant(DATA[:, 0])) == pytest.approx(
        auroc(LABELS, DATA[:, 0])
    )


def test_jax_iterators():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from xrisk.jax.data import DualSampler, IndexedDataset, TriSampler

    data = IndexedDataset(DATA, LABELS)
    batches = list(data.batches(DualSampler(LABELS, 10, num_pos=5, seed=0)))
    assert len(batches) == len(core.DualSampler(LABELS, 10, num_pos=5))
    x, y, index = batches[0]
    assert isinstance(x, type(jnp.zeros(1))) and x.shape == (10, 4)
    assert y.tolist() == [1] * 5 + [0] * 5
    multi = np.column_stack([LABELS, LABELS[::-1]])
    _, _, (index, task) = next(IndexedDataset(DATA, multi).batches(TriSampler(multi, 4, num_pos=1)))
    assert index.shape == task.shape == (8,)


# -- LibAUC's DataLoader(sampler=...) idiom and list keys -----------------------------------


class _PlainDataset:  # a user's own map-style dataset, as ported from LibAUC
    def __init__(self, data, targets):
        self.data, self.targets = data, targets

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index], self.targets[index], index


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # workers never touch JAX
@pytest.mark.parametrize("num_workers", [0, 2])
def test_torch_sampler_slot_raises_and_names_batch_sampler(num_workers):
    from torch.utils.data import DataLoader

    from xrisk.torch.data import DualSampler, IndexedDataset, TriSampler

    multi = np.column_stack([LABELS, LABELS[::-1]])
    for dataset, sampler in (
        (IndexedDataset(DATA, LABELS), DualSampler(LABELS, 10, sampling_rate=0.2)),
        (_PlainDataset(DATA, LABELS), DualSampler(LABELS, 10, sampling_rate=0.2)),
        (IndexedDataset(DATA, multi), TriSampler(multi, 4, num_pos=1)),
    ):
        loader = DataLoader(dataset, batch_size=10, sampler=sampler, num_workers=num_workers)
        with pytest.raises(TypeError, match=r"batch_size=10.*batch_sampler=sampler"):
            next(iter(loader))
    # the batch_sampler= form of the same loader trains on whole, correct batches
    sampler = DualSampler(LABELS, 10, sampling_rate=0.2, seed=0)
    loader = DataLoader(_PlainDataset(DATA, LABELS), batch_sampler=sampler)
    _, y, index = next(iter(loader))
    assert y.tolist() == [1, 1] + [0] * 8 and index.tolist() == sampler.batch(0, epoch=0).tolist()


def test_indexed_dataset_reads_a_batch_key_at_once():
    from torch.utils.data import DataLoader

    from xrisk.torch.data import DualSampler, IndexedDataset

    data = IndexedDataset(DATA, LABELS)
    for key in ([3, 4, 3], np.array([3, 4, 3]), torch.tensor([3, 4, 3])):
        x, y, index = data[key]
        np.testing.assert_array_equal(x, DATA[[3, 4, 3]])
        np.testing.assert_array_equal(y, LABELS[[3, 4, 3]])
        assert index.tolist() == [3, 4, 3] and index.dtype == np.int64
    x, y, (index, task) = data[[(3, 0), (4, 1)]]  # TriSampler's (index, task id) pairs
    assert index.tolist() == [3, 4] and task.tolist() == [0, 1]
    np.testing.assert_array_equal(x, DATA[[3, 4]])
    with pytest.raises(IndexError, match="beyond the data"):
        data[[3, 100]]
    with pytest.raises(TypeError, match=r"batch key of shape \(1, 1, 2\)"):
        data[np.zeros((1, 1, 2), dtype=np.int64)]
    with pytest.raises(TypeError, match="bool"):
        data[True]
    with pytest.raises(TypeError, match="tuple of 3"):
        data[(1, 2, 3)]
    with pytest.raises(IndexError, match="beyond the data"):
        data[np.int64(100)]
    for key in (3, np.int64(3), np.array(3), torch.tensor(3)):
        x, y, i = data[key]
        assert i == 3 and type(i) is int and y == LABELS[3]
    assert data[(3, np.int64(1))][2] == (3, 1)
    # batch_size=None hands each sampler batch to __getitem__ as is: one gather per batch
    loader = DataLoader(data, batch_size=None, sampler=DualSampler(LABELS, 10, seed=1))
    x, y, index = next(iter(loader))
    assert isinstance(x, torch.Tensor) and x.shape == (10, DATA.shape[1])
    assert index.dtype == torch.int64 and torch.equal(y, torch.as_tensor(LABELS)[index])


@settings(max_examples=4, deadline=None)
@given(positives=st.integers(1, 30), batch_size=st.integers(2, 16), rate=st.sampled_from(
    [0.1, 0.25, 0.5]), seed=st.integers(0, 3), pairs=st.booleans())
def test_bulk_loader_equals_the_per_item_loader(positives, batch_size, rate, seed, pairs):
    """DataLoader(sampler=, batch_size=None) gives the batch_sampler= loader's batches, values
    and dtypes alike, for DualSampler and TriSampler's (index, task) pairs."""
    from torch.utils.data import DataLoader

    from xrisk.torch.data import DualSampler, IndexedDataset, TriSampler

    labels = np.zeros(60, dtype=np.int64)
    labels[:positives] = 1
    if pairs:
        targets = np.column_stack([labels, labels[::-1]])
        make = lambda: TriSampler(targets, 2, num_pos=1, seed=seed)  # noqa: E731
    else:
        targets = labels
        make = lambda: DualSampler(labels, batch_size, sampling_rate=rate, seed=seed)  # noqa: E731
    data = IndexedDataset(DATA[:60].astype(np.float32), targets)
    bulk = list(DataLoader(data, sampler=make(), batch_size=None))
    items = list(DataLoader(data, batch_sampler=make()))
    assert len(bulk) == len(items) > 0
    flat = lambda batch: [batch[0], batch[1], *(batch[2] if pairs else [batch[2]])]  # noqa: E731
    for got, want in zip(bulk, items, strict=True):
        for a, b in zip(flat(got), flat(want), strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b)


def test_torch_dataset_as_first_sampler_argument_names_the_labels():
    from torch.utils.data import TensorDataset

    from xrisk.torch.data import DualSampler, IndexedDataset, TriSampler

    plain = TensorDataset(torch.tensor(DATA), torch.tensor(LABELS))
    with pytest.raises(TypeError, match=r"TensorDataset.*DualSampler\(dataset\.targets"):
        DualSampler(plain, 10)
    indexed = IndexedDataset(DATA, LABELS)
    with pytest.raises(TypeError, match=r"has \.targets.*DualSampler\(dataset\.targets"):
        DualSampler(indexed, 10, labels=LABELS, random_seed=0)
    assert len(DualSampler(indexed.targets, 10)) == len(DualSampler(LABELS, 10))
    with pytest.raises(TypeError, match=r"TriSampler\(dataset\.targets"):
        TriSampler(indexed, 4)


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_adapter_data_docstrings(framework):
    import doctest
    import importlib

    pytest.importorskip(framework)
    module = importlib.import_module(f"xrisk.{framework}.data")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
