"""``IndexedDataset`` gives any map-style dataset its index, read lazily, driven by the samplers.

The samplers need only the labels, so the wrapper holds them and reads an example only when a
batch asks for it: an image folder read file by file (a torchvision ``ImageFolder`` where
torchvision imports, and the same convention through a small reader of our own, which runs
everywhere), a Hugging Face ``datasets.Dataset``, a ``numpy.memmap``. Each test checks that
nothing is read up front, that a batch reads exactly its examples, and that the batches equal
those of the in-memory path (the same examples as one numpy array) for the same sampler seed,
in torch (``DataLoader`` with two workers, both of torch's batch-sampler forms) and in JAX.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from xrisk.datasets import IndexedDataset  # noqa: E402
from xrisk.samplers import DualSampler, TriSampler  # noqa: E402

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: Images per class of the folder the tests write: imbalanced, as X-risk data sets are.
CLASS_SIZES = {"cat": 4, "dog": 14}
SHAPE = (6, 5, 3)
# The DataLoader workers are forked (spawn costs seconds per loader); they read files and
# numpy arrays, never JAX, so JAX's warning about forking its threads does not apply.
FORKED_WORKERS = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


class ReadCounter:
    """A map-style dataset that counts its reads (``len()`` and ``[i]`` only)."""

    def __init__(self, items):
        self.items = items
        self.reads = 0

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        self.reads += 1
        return self.items[i]


class ImageFiles(torch.utils.data.Dataset):
    """torchvision's ``ImageFolder`` convention without torchvision: classes are the sorted
    sub-folders, their files sorted; ``.targets`` lists the labels without opening a file,
    item ``i`` reads file ``i``: ``(image as float32 HWC in [0, 1], target)``."""

    def __init__(self, root):
        self.classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
        self.samples = [(os.path.join(root, name, file), target)
                        for target, name in enumerate(self.classes)
                        for file in sorted(os.listdir(os.path.join(root, name)))]
        self.targets = [target for _, target in self.samples]
        self.reads = 0

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        from PIL import Image

        self.reads += 1
        path, target = self.samples[i]
        with Image.open(path) as image:
            return to_float(image), target


def to_float(image):
    return np.asarray(image.convert("RGB"), dtype=np.float32) / np.float32(255)


@pytest.fixture(scope="module")
def image_root(tmp_path_factory):
    """A small image folder on disk: PNG files (lossless) of distinct random pixels."""
    from PIL import Image

    root = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    for name, count in CLASS_SIZES.items():
        (root / name).mkdir()
        for k in range(count):
            pixels = rng.integers(0, 256, size=SHAPE, dtype=np.uint8)
            Image.fromarray(pixels).save(root / name / f"{k:03d}.png")
    return str(root)


def in_memory(source):
    """The in-memory path: every example read into one array, the labels alongside."""
    pairs = [source[i] for i in range(len(source))]
    return IndexedDataset(np.stack([x for x, _ in pairs]), np.array([y for _, y in pairs]))


def loader_batches(dataset, sampler, *, form, workers):
    """Every batch of an epoch of a torch ``DataLoader`` in one of torch's two forms."""
    if form == "sampler":
        loader = DataLoader(dataset, sampler=sampler, batch_size=None, num_workers=workers)
    else:
        loader = DataLoader(dataset, batch_sampler=sampler, num_workers=workers)
    return [tuple(field.numpy() for field in batch) for batch in loader]


def torch_in_memory(source):
    from xrisk.torch.data import IndexedDataset as TorchIndexed

    reference = in_memory(source)
    return TorchIndexed(reference.data, reference.targets)


def assert_same_batches(got, expected):
    assert len(got) == len(expected)
    for fields, reference in zip(got, expected, strict=True):
        for field, ref in zip(fields, reference, strict=True):
            assert field.dtype == ref.dtype and field.shape == ref.shape
            np.testing.assert_array_equal(field, ref)


def test_folder_is_read_lazily_and_batches_equal_the_in_memory_path(image_root):
    files = ImageFiles(image_root)
    dataset = IndexedDataset(files)  # labels from .targets, x from the (image, target) pairs
    assert files.reads == 0 and len(dataset) == sum(CLASS_SIZES.values())
    np.testing.assert_array_equal(dataset.targets, files.targets)
    reference = in_memory(ImageFiles(image_root))
    sampler = DualSampler(dataset.targets, 6, num_pos=2, seed=11)
    for position in range(len(sampler)):
        index = sampler.batch(position)
        before = files.reads
        got = dataset.batch(index)
        assert files.reads - before == index.size  # exactly the batch's examples
        assert_same_batches([got], [reference.batch(index)])
    x, y, i = dataset[5]
    np.testing.assert_array_equal(x, reference[5][0])
    assert (int(y), i) == (int(reference.targets[5]), 5)


@FORKED_WORKERS
@pytest.mark.parametrize("form", ["sampler", "batch_sampler"])
def test_folder_through_a_dataloader_with_two_workers(image_root, form):
    from xrisk.torch.data import DualSampler as TorchDual
    from xrisk.torch.data import IndexedDataset as TorchIndexed

    files = ImageFiles(image_root)
    labels = np.asarray(files.targets)
    reference = torch_in_memory(ImageFiles(image_root))
    got = loader_batches(TorchIndexed(files), TorchDual(labels, 6, num_pos=2, seed=3),
                         form=form, workers=2)
    expected = loader_batches(reference, TorchDual(labels, 6, num_pos=2, seed=3),
                              form=form, workers=0)
    assert files.reads == 0  # the workers read (forked copies), not this process
    assert_same_batches(got, expected)


@FORKED_WORKERS
def test_torchvision_image_folder(image_root):
    datasets_module = pytest.importorskip("torchvision.datasets")
    from xrisk.torch.data import DualSampler as TorchDual
    from xrisk.torch.data import IndexedDataset as TorchIndexed

    folder = datasets_module.ImageFolder(image_root, transform=to_float)
    dataset = TorchIndexed(folder)
    np.testing.assert_array_equal(dataset.targets, ImageFiles(image_root).targets)
    reference = torch_in_memory(ImageFiles(image_root))
    got = loader_batches(dataset, TorchDual(dataset.targets, 6, num_pos=2, seed=3),
                         form="sampler", workers=2)
    expected = loader_batches(reference, TorchDual(dataset.targets, 6, num_pos=2, seed=3),
                              form="sampler", workers=0)
    assert_same_batches(got, expected)


@pytest.fixture(scope="module")
def rows():
    """A Hugging Face dataset built in memory (no hub access), in numpy format."""
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(1)
    pixels = rng.normal(size=(30, 2, 3)).astype(np.float32)
    labels = np.array([1] * 6 + [0] * 24)
    table = datasets.Dataset.from_dict({"pixels": pixels.tolist(), "label": labels.tolist()})
    return table.with_format("numpy"), pixels, labels


@FORKED_WORKERS
def test_hugging_face_dataset(rows, monkeypatch):
    import datasets

    table, pixels, labels = rows
    reads = []
    read_many = datasets.Dataset.__getitems__

    def counted(self, keys):
        reads.append(len(keys))
        return read_many(self, keys)

    def row_by_row(self):
        raise AssertionError("the label column was read row by row")

    monkeypatch.setattr(datasets.Dataset, "__getitems__", counted)
    monkeypatch.setattr(datasets.arrow_dataset.Column, "__iter__", row_by_row)
    dataset = IndexedDataset(table, table["label"], inputs="pixels")  # one read of the column
    assert reads == []
    np.testing.assert_array_equal(dataset.targets, labels)
    reference = IndexedDataset(pixels, labels)
    sampler = DualSampler(labels, 10, num_pos=3, seed=2)
    for index in sampler:
        assert_same_batches([dataset.batch(index)], [reference.batch(index)])
    assert reads == [10] * len(sampler)  # one query of the table per batch
    from xrisk.torch.data import DualSampler as TorchDual
    from xrisk.torch.data import IndexedDataset as TorchIndexed

    for form in ("sampler", "batch_sampler"):
        got = loader_batches(TorchIndexed(table, labels, inputs="pixels"),
                             TorchDual(labels, 10, num_pos=3, seed=2), form=form, workers=2)
        expected = loader_batches(TorchIndexed(pixels, labels),
                                  TorchDual(labels, 10, num_pos=3, seed=2), form=form,
                                  workers=0)
        assert_same_batches(got, expected)


def test_hugging_face_rows_as_examples(rows):
    """``inputs=None``: the whole row is the example, stacked field by field."""
    table, pixels, labels = rows
    x, y, index = IndexedDataset(table, labels, inputs=None).batch([3, 0])
    assert sorted(x) == ["label", "pixels"]
    np.testing.assert_array_equal(x["pixels"], pixels[[3, 0]])
    np.testing.assert_array_equal(x["label"], y)
    from xrisk.torch.data import DualSampler as TorchDual
    from xrisk.torch.data import IndexedDataset as TorchIndexed

    dataset = TorchIndexed(table, labels, inputs=None)
    for form in ("sampler", "batch_sampler"):  # torch stacks the rows as default_collate does
        sampler = TorchDual(labels, 10, num_pos=3, seed=1)
        loader = (DataLoader(dataset, sampler=sampler, batch_size=None) if form == "sampler"
                  else DataLoader(dataset, batch_sampler=sampler))
        for (x, y, index), want in zip(loader, sampler.epoch_batches(0), strict=True):
            assert isinstance(x["pixels"], torch.Tensor) and x["pixels"].dtype == torch.float32
            np.testing.assert_array_equal(x["pixels"].numpy(), pixels[want])
            assert index.tolist() == want.tolist() and y.tolist() == labels[want].tolist()


def test_jax_batches_of_a_lazy_dataset(image_root, rows):
    from xrisk.jax.data import IndexedDataset as JaxIndexed

    files = ImageFiles(image_root)
    reference = in_memory(ImageFiles(image_root))
    lazy = JaxIndexed(files)
    assert files.reads == 0
    sampler = DualSampler(lazy.targets, 6, num_pos=2, seed=4)
    for (x, y, index), batch in zip(lazy.batches(sampler), sampler.epoch_batches(0),
                                    strict=True):
        want = reference.batch(batch)
        assert_same_batches([tuple(np.asarray(f) for f in (x, y, index))], [want])
    table, pixels, labels = rows
    x, y, index = next(JaxIndexed(table, labels, inputs=None).batches(DualSampler(labels, 10)))
    np.testing.assert_array_equal(np.asarray(x["pixels"]), pixels[np.asarray(index)])


def test_memmap_stays_on_disk(tmp_path):
    values = np.random.default_rng(2).normal(size=(40, 3))
    path = tmp_path / "x.npy"
    np.save(path, values)
    mapped = np.load(path, mmap_mode="r")
    labels = np.array([1] * 8 + [0] * 32)
    dataset = IndexedDataset(mapped, labels)
    assert np.shares_memory(dataset.data, mapped)  # no copy into memory
    reference = IndexedDataset(values, labels)
    for index in DualSampler(labels, 8, num_pos=2, seed=0):
        assert_same_batches([dataset.batch(index)], [reference.batch(index)])


def test_task_pairs_of_a_lazy_dataset():
    multi = np.array([[1, 0], [0, 1], [0, 0], [1, 1]] * 5)
    source = ReadCounter([np.full(2, float(i)) for i in range(20)])
    dataset = IndexedDataset(source, multi)
    sampler = TriSampler(multi, 4, num_pos=1, seed=0)
    index, task = sampler.batch(0)
    x, y, (got_index, got_task) = dataset[np.stack([index, task], axis=1)]
    np.testing.assert_array_equal(x[:, 0], index)
    np.testing.assert_array_equal(y, multi[index])
    assert got_index.tolist() == index.tolist() and got_task.tolist() == task.tolist()
    x, y, key = dataset[(int(index[1]), int(task[1]))]
    assert key == (int(index[1]), int(task[1])) and x[0] == index[1]


@FORKED_WORKERS
def test_bags_of_a_lazy_instance_dataset():
    """BagSampler: the dataset holds the instances bag after bag, each labelled with its bag's
    label; a batch of bags reads each distinct instance once (padding repeats one)."""
    from xrisk.jax.data import IndexedDataset as JaxIndexed
    from xrisk.samplers import BagSampler
    from xrisk.torch.data import BagSampler as TorchBags
    from xrisk.torch.data import IndexedDataset as TorchIndexed

    sizes = np.array([3, 1, 5, 2, 4, 2, 6, 1])
    bag_labels = np.array([1, 0, 0, 1, 0, 0, 1, 0])
    values = np.random.default_rng(5).normal(size=(sizes.sum(), 2, 2))
    labels = np.repeat(bag_labels, sizes)
    source = ReadCounter(list(values))
    lazy, reference = IndexedDataset(source, labels), IndexedDataset(values, labels)
    sampler = BagSampler(sizes, 3, 4, seed=1)
    for bags, instances, mask in sampler:
        before = source.reads
        x, y, got_bags, got_mask = lazy.bag_batch(bags, instances, mask)
        assert source.reads - before == np.unique(instances).size
        np.testing.assert_array_equal(x, values[instances])
        np.testing.assert_array_equal(y, bag_labels[bags])
        assert got_bags.tolist() == bags.tolist() and got_mask.tolist() == mask.tolist()
        assert_same_batches([(x, y)], [reference.bag_batch(bags, instances, mask)[:2]])
    expected = [(values[i], bag_labels[b], b, m)
                for b, i, m in zip(*sampler.epoch_batches(0), strict=True)]
    for form in ("sampler", "batch_sampler"):
        batches = loader_batches(TorchIndexed(source, labels), TorchBags(sizes, 3, 4, seed=1),
                                 form=form, workers=2)
        assert_same_batches(batches, expected)
    jax_batches = JaxIndexed(source, labels).batches(BagSampler(sizes, 3, 4, seed=1))
    assert_same_batches([tuple(np.asarray(f) for f in b) for b in jax_batches], expected)
    x, y, bag, mask = lazy[(2, np.array([4, 5, 4]), np.array([1, 1, 0]))]
    np.testing.assert_array_equal(x, values[[4, 5, 4]])
    assert (int(y), bag, mask.tolist()) == (0, 2, [1, 1, 0])


@given(st.lists(st.integers(0, 19), min_size=1, max_size=12),
       st.sampled_from(["auto", 0, None]))
def test_drawn_batches_read_exactly_their_examples(index, inputs):
    """Whatever the indices (repeats included), a batch reads each of them once and equals
    the in-memory gather; ``inputs`` picks the example out of an item."""
    values = np.arange(40.0).reshape(20, 2)
    labels = np.arange(20) % 3
    items = ([(row, int(label)) for row, label in zip(values, labels, strict=True)]
             if inputs != None else list(values))  # noqa: E711
    source = ReadCounter(items)
    if inputs == "auto":
        source.targets = labels
        dataset = IndexedDataset(source)
    else:
        dataset = IndexedDataset(source, labels, inputs=inputs)
    x, y, got = dataset.batch(index)
    assert source.reads == len(index)
    np.testing.assert_array_equal(x, values[index])
    np.testing.assert_array_equal(y, labels[index])
    assert got.tolist() == index


def test_bad_sources_raise_with_the_fix():
    labels = np.array([0, 1, 1])
    with pytest.raises(TypeError, match=r"no \.targets.*IndexedDataset\(hf_dataset"):
        IndexedDataset(ReadCounter([1, 2, 3]))
    with pytest.raises(TypeError, match="expected an array or a map-style dataset"):
        IndexedDataset(iter([1, 2, 3]), labels)
    with pytest.raises(ValueError, match="data has 3 rows but targets has 2 rows"):
        IndexedDataset(ReadCounter([1, 2, 3]), labels[:2])
    with pytest.raises(ValueError, match="targets has a scalar"):
        IndexedDataset(ReadCounter([1, 2, 3]), 1)
    with pytest.raises(TypeError, match="inputs=0 with an array"):
        IndexedDataset(np.zeros((3, 2)), labels, inputs=0)
    with pytest.raises(TypeError, match=r"inputs=1\.5 is a float"):
        IndexedDataset(ReadCounter([1, 2, 3]), labels, inputs=1.5)
    plain = ReadCounter([np.zeros(2)] * 3)
    plain.targets = labels
    with pytest.raises(TypeError, match="is a ndarray.*pass inputs=None"):
        IndexedDataset(plain)[0]
    with pytest.raises(TypeError, match=r"no inputs='image' \(keys \['x'\]"):
        IndexedDataset(ReadCounter([{"x": 1}] * 3), labels, inputs="image")[1]
    ragged = IndexedDataset(ReadCounter([np.zeros(2), np.zeros(3), np.zeros(2)]), labels)
    with pytest.raises(ValueError, match=r"shapes \[\(2,\), \(3,\)\].*transform"):
        ragged.batch([0, 1])
    with pytest.raises(IndexError, match=r"\[3\] are beyond the data"):
        ragged.batch([3])


@pytest.mark.parametrize("stop", [2, 4, 5])  # mid-epoch, the last batch of epoch 0, epoch 1
def test_grain_pipeline_reads_ahead_and_resumes_exactly(stop):
    """A grain pipeline over a lazily read dataset, read ahead by two threads, gives the
    batches of ``batches()`` epoch after epoch; its iterator's state, saved after batch
    ``stop``, resumes in a new pipeline with exactly the remaining batches."""
    grain = pytest.importorskip("grain")
    from xrisk.jax.data import DualSampler as JaxDual
    from xrisk.jax.data import IndexedDataset as JaxIndexed

    values = np.random.default_rng(3).normal(size=(40, 3))
    labels = np.array([1] * 8 + [0] * 32)
    dataset = JaxIndexed(ReadCounter(list(values)), labels)
    sampler = JaxDual(labels, 8, num_pos=2, seed=6)
    assert len(sampler) == 5
    expected = []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        expected += dataset.batches(sampler)
    options = grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)

    def pipeline():
        source = JaxIndexed(ReadCounter(list(values)), labels)
        return source.grain_dataset(JaxDual(labels, 8, num_pos=2, seed=6), epochs=2
                                    ).to_iter_dataset(options)

    first = iter(pipeline())
    before = [next(first) for _ in range(stop + 1)]
    saved = first.get_state()
    resumed = iter(pipeline())
    resumed.set_state(saved)
    got = before + list(resumed)
    assert_same_batches([tuple(np.asarray(f) for f in b) for b in got],
                        [tuple(np.asarray(f) for f in b) for b in expected])
    with pytest.raises(TypeError, match="epochs"):
        dataset.grain_dataset(sampler, epochs=1.5)
