"""Controlled mini-batch samplers: framework-free numpy index generators.

Every sampler yields numpy int64 index arrays (fresh ones, which the caller may modify), has
``len()`` = batches per epoch, and ``batch(position, epoch)``, ``epoch_batches(epoch)``,
``set_epoch``, ``state_dict`` / ``load_state_dict`` (resume by epoch and position) and
``shard(rank, world_size)``. Each batch is a pure function of ``(seed, epoch, position)``; the
global numpy RNG is never used. The framework adapters (``xrisk.torch``, ``xrisk.tensorflow``,
``xrisk.jax``) wrap them; with torch pass a sampler as ``DataLoader(dataset, sampler=sampler,
batch_size=None)`` (or ``batch_sampler=sampler``).

Iteration and resume
--------------------
* A sampler stands at ``(epoch, position)``. Each ``iter(sampler)`` (one pass, e.g. one
  ``iter(loader)``) starts there and the sampler then follows that newest iterator; an older
  iterator keeps yielding its own batches but no longer moves the sampler. After the last
  batch of an epoch the sampler stands at ``(epoch + 1, 0)``.
* ``set_epoch(e)`` selects epoch ``e`` from position 0, except right after
  ``load_state_dict`` for the same epoch, where it keeps the restored position.
* Save the **training loop's** position with ``sampler.state_dict(batches_consumed=i + 1)``,
  ``i`` from ``for i, batch in enumerate(loader)`` (batches taken from the current pass). A
  prefetching loader (torch ``DataLoader`` workers, ``tf.data`` ``prefetch``) runs ahead of the
  loop, and ``state_dict()`` without the argument gives the sampler's own, further position.
  Iterate the loader once per epoch (no ``.repeat()``).
* With torch, torchdata's ``StatefulDataLoader`` does this bookkeeping: save
  ``loader.state_dict()``, and ``loader.load_state_dict(saved)`` on a new loader of a new
  sampler; it resumes exactly, with workers and prefetch (see ``docs/datasets.md``).

Examples
--------
>>> import json
>>> import numpy as np
>>> from xrisk.samplers import DualSampler
>>> labels = np.array([1] * 10 + [0] * 90)
>>> def train(sampler, epochs, stop=None):
...     seen = []
...     for epoch in range(sampler.state_dict()["epoch"], epochs):
...         sampler.set_epoch(epoch)  # keeps a just-restored position of this epoch
...         for i, batch in enumerate(sampler):  # or enumerate(loader)
...             seen.append(batch.tolist())
...             if (epoch, i) == stop:  # checkpoint, then the run is interrupted
...                 return seen, json.dumps(sampler.state_dict(batches_consumed=i + 1))
...     return seen, None
>>> full, _ = train(DualSampler(labels, 10, seed=0), 2)
>>> head, saved = train(DualSampler(labels, 10, seed=0), 2, stop=(0, 4))
>>> saved
'{"seed": 0, "epoch": 0, "position": 5}'
>>> resumed = DualSampler(labels, 10, seed=0)
>>> resumed.load_state_dict(json.loads(saved))
>>> tail, _ = train(resumed, 2)
>>> head + tail == full
True
"""

from .bag import BagSampler
from .dual import DualSampler
from .random import RandomSampler
from .tri import TriSampler

__all__ = ["DualSampler", "TriSampler", "RandomSampler", "BagSampler"]
