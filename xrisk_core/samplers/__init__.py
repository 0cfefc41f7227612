"""Controlled mini-batch samplers: framework-free numpy index generators.

Every sampler yields numpy int64 index arrays, has ``len()`` = batches per epoch, and
``batch(position, epoch)``, ``epoch_batches(epoch)``, ``set_epoch``, ``state_dict`` /
``load_state_dict`` (resume by epoch and position) and ``shard(rank, world_size)``. Each batch
is a pure function of ``(seed, epoch, position)``; the global numpy RNG is never used.
The framework adapters (``xrisk.torch``, ``xrisk.tensorflow``, ``xrisk.jax``) wrap them.
"""

from .dual import DualSampler
from .random import RandomSampler
from .tri import TriSampler

__all__ = ["DualSampler", "TriSampler", "RandomSampler"]
