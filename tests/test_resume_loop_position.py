"""Resume from the training loop's position equals an uninterrupted run, prefetch included.

The loop saves ``sampler.state_dict(batches_consumed=i + 1)`` where ``i`` counts the batches
it took from the current pass (``enumerate(loader)``); a fresh sampler loads it, and the
loop calls ``set_epoch(epoch)`` at the top of every epoch, the resumed one included. With a
torch ``DataLoader`` with two workers or a ``tf.data`` pipeline with ``.prefetch(2)`` the
sampler has produced more batches than the loop consumed when the state is saved.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # before TensorFlow, as the project's conftest does

LABELS = np.array([1] * 12 + [0] * 88)
DATA = np.arange(200, dtype=np.float64).reshape(100, 2)
EPOCHS = 2
BATCHES = 11  # DualSampler(LABELS, 10, num_pos=2): max(12 // 2, 88 // 8)
# (epoch, i) of the last batch trained before the interruption: early in an epoch, the last
# batch of an epoch (the producer has already moved to the next epoch), the first of the next.
STOPS = [(0, 2), (0, BATCHES - 1), (1, 0)]
# The DataLoader workers are forked (spawn would cost seconds per epoch); they only index numpy
# arrays, never JAX, so JAX's warning about forking its threads does not apply to them.
FORKED_WORKERS = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


def train(sampler, loader, index_of, *, start_epoch=0, stop=None):
    """The documented loop; return the index batches trained and the state saved at ``stop``."""
    seen = []
    for epoch in range(start_epoch, EPOCHS):
        sampler.set_epoch(epoch)
        for i, batch in enumerate(loader):
            seen.append(index_of(batch))
            if (epoch, i) == stop:
                state = sampler.state_dict(batches_consumed=i + 1)
                return seen, json.loads(json.dumps(state)), sampler.state_dict()
    return seen, None, None


def check_resume(make_sampler, make_loader, index_of, stop):
    reference = make_sampler()
    expected, _, _ = train(reference, make_loader(reference), index_of)
    assert len(expected) == EPOCHS * len(reference)
    first = make_sampler()
    before, state, produced = train(first, make_loader(first), index_of, stop=stop)
    resumed = make_sampler()
    resumed.load_state_dict(state)
    after, _, _ = train(resumed, make_loader(resumed), index_of, start_epoch=state["epoch"])
    assert before + after == expected  # nothing skipped, nothing repeated
    return state, produced


def to_list(index):
    return np.asarray(index).tolist()


@FORKED_WORKERS
@pytest.mark.parametrize("stop", STOPS)
def test_torch_dataloader_with_workers_resumes_exactly(stop):
    from torch.utils.data import DataLoader

    from xrisk.torch.data import DualSampler, IndexedDataset

    dataset = IndexedDataset(DATA, LABELS)

    def make_loader(sampler):
        return DataLoader(
            dataset, batch_sampler=sampler, num_workers=2, prefetch_factor=2,
            persistent_workers=False,
        )  # fmt: skip

    state, produced = check_resume(
        lambda: DualSampler(LABELS, 10, num_pos=2, seed=7),
        make_loader,
        lambda batch: to_list(batch[2]),
        stop,
    )
    epoch, i = stop
    assert state == ({"seed": 7, "epoch": epoch, "position": i + 1} if i + 1 < BATCHES
                     else {"seed": 7, "epoch": epoch + 1, "position": 0})  # fmt: skip
    if i + 1 < BATCHES:  # the workers' prefetch ran ahead: the producer is not at the loop
        assert produced["position"] > state["position"]


@pytest.mark.parametrize("stop", STOPS)
def test_tf_data_with_prefetch_resumes_exactly(stop):
    pytest.importorskip("tensorflow")
    from xrisk.tensorflow.data import DualSampler, IndexedDataset

    dataset = IndexedDataset(DATA, LABELS)
    check_resume(
        lambda: DualSampler(LABELS, 10, num_pos=2, seed=7),
        lambda sampler: dataset.as_dataset(sampler).prefetch(2),
        lambda batch: to_list(batch[2].numpy()),
        stop,
    )


@pytest.mark.parametrize("stop", STOPS)
def test_jax_iterators_resume_exactly(stop):
    pytest.importorskip("jax")
    from xrisk.jax.data import DualSampler, IndexedDataset

    dataset = IndexedDataset(DATA, LABELS)

    class Batches:  # a re-iterable loader, one pass per epoch like the others
        def __init__(self, sampler):
            self.sampler = sampler

        def __iter__(self):
            return dataset.batches(self.sampler)

    check_resume(
        lambda: DualSampler(LABELS, 10, num_pos=2, seed=7),
        Batches,
        lambda batch: to_list(batch[2]),
        stop,
    )


@FORKED_WORKERS
def test_torch_tri_sampler_resumes_exactly_with_workers():
    from torch.utils.data import DataLoader

    from xrisk.torch.data import IndexedDataset, TriSampler

    y = np.column_stack([LABELS, LABELS[::-1], np.roll(LABELS, 30)])
    dataset = IndexedDataset(DATA, y)
    state, produced = check_resume(
        lambda: TriSampler(y, 5, num_sampled_tasks=2, num_pos=2, seed=3),
        lambda sampler: DataLoader(dataset, batch_sampler=sampler, num_workers=2),
        lambda batch: to_list(batch[2][0]) + to_list(batch[2][1]),
        (0, 4),
    )
    assert state["position"] == 5 and produced != state


def test_batches_consumed_beyond_the_pass_is_refused():
    from xrisk.samplers import DualSampler

    sampler = DualSampler(LABELS, 10, num_pos=2, seed=0)
    sampler.load_state_dict({"seed": 0, "epoch": 1, "position": 4})
    passing = iter(sampler)
    next(passing), next(passing)
    before = sampler.state_dict()
    assert sampler.state_dict(batches_consumed=2) == {"seed": 0, "epoch": 1, "position": 6}
    # e.g. a global step count or a .repeat()ed pipeline: more than this pass produced
    with pytest.raises(ValueError, match=r"batches_consumed=3.*produced 2"):
        sampler.state_dict(batches_consumed=3)
    for bad, error in ((1.0, TypeError), (True, TypeError), (-1, ValueError), ("2", TypeError)):
        with pytest.raises(error, match="batches_consumed"):
            sampler.state_dict(batches_consumed=bad)
    assert sampler.state_dict() == before
