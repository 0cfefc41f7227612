"""torchdata's ``StatefulDataLoader`` resumes an xrisk sampler exactly, workers and prefetch
included, with no ``batches_consumed`` bookkeeping.

The loader asks the sampler for ``state_dict()`` right after it draws each batch and keeps
the state of the last batch the loop received (its snapshot); ``loader.load_state_dict`` hands
that state back to a fresh sampler through ``sampler.load_state_dict``. The loop here is the
documented one (``set_epoch(epoch)`` at the top of every epoch, the checkpoint holds the
loop's epoch and ``loader.state_dict()``), interrupted after a batch: early in an epoch, at
the last batch of an epoch (the loader has drawn the whole epoch and is not finished), after
an epoch's loop ended (the loader is finished), at the first batch of the next epoch. The
resumed run's batches, appended to the interrupted run's, equal an uninterrupted run's.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader")
StatefulDataLoader = stateful_dataloader.StatefulDataLoader

LABELS = np.array([1] * 12 + [0] * 88)
DATA = np.arange(200, dtype=np.float64).reshape(100, 2)
EPOCHS = 2
BATCHES = 11  # DualSampler(LABELS, 10, num_pos=2): max(12 // 2, 88 // 8)
#: (epoch, i) of the last batch trained before the interruption; i = None: after the epoch's
#: loop ended, before the next epoch's set_epoch.
STOPS = [(0, 2), (0, BATCHES - 1), (0, None), (1, 0)]
# The workers are forked (spawn costs seconds per epoch); they index numpy arrays only.
FORKED_WORKERS = pytest.mark.filterwarnings(
    "ignore:os.fork:RuntimeWarning", "ignore:'set_vital' is deprecated:UserWarning")


def train(sampler, loader, *, start_epoch=0, stop=None):
    """The documented loop; return the index batches trained and the checkpoint at ``stop``."""
    seen = []
    for epoch in range(start_epoch, EPOCHS):
        sampler.set_epoch(epoch)
        for i, (_, _, index) in enumerate(loader):
            seen.append(np.asarray(index).tolist())
            if (epoch, i) == stop:
                return seen, saved({"epoch": epoch, "loader": loader.state_dict()})
        if (epoch, None) == stop:
            return seen, saved({"epoch": epoch + 1, "loader": loader.state_dict()})
    return seen, None


def saved(checkpoint):
    """The checkpoint after a round trip through a file, as a real resume reads it."""
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def check_resume(make_sampler, make_loader, stop):
    reference = make_sampler()
    expected, _ = train(reference, make_loader(reference))
    assert len(expected) == EPOCHS * len(reference)
    first = make_sampler()
    before, checkpoint = train(first, make_loader(first), stop=stop)
    resumed = make_sampler()
    loader = make_loader(resumed)
    loader.load_state_dict(checkpoint["loader"])
    after, _ = train(resumed, loader, start_epoch=checkpoint["epoch"])
    assert before + after == expected  # nothing skipped, nothing repeated, bit for bit


@FORKED_WORKERS
@pytest.mark.parametrize("stop", STOPS)
def test_workers_and_prefetch_resume_exactly(stop):
    from xrisk.torch.data import DualSampler, IndexedDataset

    dataset = IndexedDataset(DATA, LABELS)

    def make_loader(sampler):
        return StatefulDataLoader(dataset, sampler=sampler, batch_size=None, num_workers=2,
                                  prefetch_factor=2)

    check_resume(lambda: DualSampler(LABELS, 10, num_pos=2, seed=7), make_loader, stop)


@FORKED_WORKERS
def test_snapshots_every_few_steps_and_batch_sampler_form():
    """``snapshot_every_n_steps=3`` (the loader replays the batches since the snapshot) and
    ``batch_sampler=``, with persistent workers."""
    from xrisk.torch.data import DualSampler, IndexedDataset

    dataset = IndexedDataset(DATA, LABELS)

    def make_loader(sampler):
        return StatefulDataLoader(dataset, batch_sampler=sampler, num_workers=2,
                                  prefetch_factor=3, persistent_workers=True,
                                  snapshot_every_n_steps=3)

    check_resume(lambda: DualSampler(LABELS, 10, num_pos=2, seed=3), make_loader, (0, 7))


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("kind", ["random", "tri"])
def test_main_process_loader_resumes_every_sampler(kind, stop):
    """``num_workers=0``: the loader reads the sampler's state when asked."""
    from xrisk.torch.data import IndexedDataset, RandomSampler, TriSampler

    multi = np.stack([LABELS, np.roll(LABELS, 30)], axis=1)
    if kind == "random":
        dataset, make_sampler = IndexedDataset(DATA, LABELS), lambda: RandomSampler(
            100, 9, seed=1)
    else:
        dataset, make_sampler = IndexedDataset(DATA, multi), lambda: TriSampler(
            multi, 4, num_pos=1, seed=2)

    def make_loader(sampler):
        return StatefulDataLoader(dataset, sampler=sampler, batch_size=None)

    check_resume(make_sampler, make_loader, (stop[0], None if stop[1] is None else 1))


def test_bag_sampler_resumes():
    from xrisk.torch.data import BagSampler

    sizes = np.array([3, 1, 5, 2, 4, 2, 6, 1])

    class Bags(torch.utils.data.Dataset):  # a bag's key is (bag, instances, mask)
        def __len__(self):
            return sizes.size

        def __getitem__(self, key):
            bag, instances, mask = key
            return torch.as_tensor(instances), torch.as_tensor(mask), bag

    def make_loader(sampler):
        return StatefulDataLoader(Bags(), batch_sampler=sampler)

    for stop in [(0, 1), (0, None), (1, 0)]:
        check_resume(lambda: BagSampler(sizes, 2, 3, seed=4), make_loader, stop)


def test_sampler_is_torchdata_stateful():
    """The loader saves the sampler only if it is ``Stateful``: else it fast-forwards by
    replaying the batches (correct only because every batch is a pure function of the
    position, and slow)."""
    from torchdata.stateful_dataloader.stateful import Stateful

    from xrisk.torch.data import BagSampler, DualSampler, RandomSampler, TriSampler

    samplers = [DualSampler(LABELS, 10), RandomSampler(100, 10),
                TriSampler(np.stack([LABELS, LABELS], axis=1), 4), BagSampler([2, 3], 1, 2)]
    assert all(isinstance(sampler, Stateful) for sampler in samplers)
    loader = StatefulDataLoader(torch.utils.data.TensorDataset(torch.zeros(100)),
                                batch_sampler=samplers[0])
    state = loader.state_dict()
    assert state["_index_sampler_state"] == {"seed": 2023, "epoch": 0, "position": 0}


def test_pass_from_a_complete_epoch_moves_to_the_next_at_once():
    """A state saved right after an epoch's last batch is ``(epoch, len)``; a pass begun there
    is empty and a pass begun after it trains the next epoch, whether or not the first was
    ever advanced (a loader may build an iterator it never draws from)."""
    from xrisk.samplers import DualSampler

    sampler = DualSampler(LABELS, 10, num_pos=2, seed=5)
    sampler.load_state_dict({"seed": 5, "epoch": 0, "position": BATCHES})
    abandoned = iter(sampler)
    assert sampler.state_dict() == {"seed": 5, "epoch": 1, "position": 0}
    assert [b.tolist() for b in sampler] == sampler.epoch_batches(1).tolist()
    assert list(abandoned) == []
