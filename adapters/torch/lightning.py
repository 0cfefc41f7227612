"""PyTorch Lightning: an xrisk loss and optimizer in a ``LightningModule``, on one or N ranks.

Import it on its own (``import xrisk.torch`` does not import Lightning)::

    import xrisk.torch.lightning as xl

**The recipe.** The network and the loss are attributes of the ``LightningModule``; the
training step scores this rank's part of the batch and calls the loss on the *global* batch
that :func:`xrisk.torch.distributed.gather_batch` builds (on one process it returns the
inputs unchanged, so the same module runs on 1 or N ranks); the optimizer steps the
network's parameters (a min-max optimizer such as PESG is given the loss and adds its
auxiliaries itself). :class:`XRiskCallback` does the rest:

- under ``strategy="ddp"`` it takes the loss's state tables out of DDP's buffer broadcast
  (:func:`exclude_loss_state_from_ddp`), so no step sends them and every rank keeps its own
  copy (its rows, for :class:`~xrisk.torch.distributed.ShardedLoss`); other buffers, such as
  BatchNorm's running statistics, are still broadcast;
- at the start of each epoch of ``decay_epochs`` it calls
  ``optimizer.update_regularizer(decay_factor)`` (LibAUC's stage-wise decay: a new
  reference point for the proximal term, learning rates divided by ``decay_factor``);
- it saves the sampler's position in Lightning's checkpoints and restores it, so that
  ``trainer.fit(module, loader, ckpt_path=...)`` continues with exactly the batches the
  interrupted run had not trained on, mid-epoch included.

With several ranks pass ``Trainer(use_distributed_sampler=False)`` and give the loader the
sampler's shard, ``sampler.shard(rank, world_size)``: Lightning's own distributed sampler
would replace the xrisk sampler (the callback refuses that case at set-up).

Examples
--------
>>> import lightning.pytorch as pl
>>> import numpy as np, torch
>>> from torch.utils.data import DataLoader
>>> import xrisk.torch as xr
>>> import xrisk.torch.lightning as xl
>>> from xrisk.torch.distributed import gather_batch
>>> class AUCModule(pl.LightningModule):
...     def __init__(self, num_samples):
...         super().__init__()
...         self.net = torch.nn.Linear(5, 1)
...         self.loss_fn = xr.AUCMLoss(margin=1.0)    # state and a, b, alpha: saved with the module
...     def training_step(self, batch, batch_idx):
...         x, y, index = batch
...         scores = torch.sigmoid(self.net(x)).squeeze(1)
...         return self.loss_fn(**gather_batch(self.loss_fn, scores, y, index))
...     def configure_optimizers(self):           # the network's parameters; PESG adds a, b, alpha
...         return xr.PESG(self.net.parameters(), self.loss_fn, learning_rate=0.1)
>>> rng = np.random.default_rng(0)
>>> labels = (rng.random(64) < 0.25).astype(np.float32)
>>> data = xr.IndexedDataset(rng.normal(size=(64, 5)).astype(np.float32), labels)
>>> sampler = xr.DualSampler(labels, 16, sampling_rate=0.25)
>>> trainer = pl.Trainer(max_epochs=3, callbacks=[xl.XRiskCallback(sampler, decay_epochs=[2])],
...                      accelerator="cpu", logger=False, enable_checkpointing=False,
...                      enable_progress_bar=False, enable_model_summary=False)
>>> module = AUCModule(len(data))
>>> trainer.fit(module, DataLoader(data, sampler=sampler, batch_size=None))
>>> trainer.optimizers[0].param_groups[0]["lr"]  # 0.1, divided by 10 at the start of epoch 2
0.01
>>> bool(module.loss_fn.alpha >= 0)
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import lightning.pytorch as pl
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from xrisk.adapter_api import check_interval as check_number

from .distributed import ShardedLoss
from .losses import XRiskLoss

__all__ = ["XRiskCallback", "exclude_loss_state_from_ddp", "loss_state_names"]


def loss_state_names(module: nn.Module) -> list[str]:
    """Names of the state tables of every xrisk loss inside ``module``, as
    ``module.named_buffers()`` gives them (e.g. ``["loss_fn.u"]``).

    The losses are the :class:`xrisk.torch.XRiskLoss` and
    :class:`xrisk.torch.distributed.ShardedLoss` submodules (``module`` itself included); their
    trainable auxiliaries (AUC-M's a, b, alpha) are parameters, not listed.

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> from xrisk.torch.lightning import loss_state_names
    >>> model = torch.nn.ModuleDict({"net": torch.nn.BatchNorm1d(3),
    ...                              "loss_fn": xr.pAUCLoss("1w", num_samples=10)})
    >>> loss_state_names(model)
    ['loss_fn.u']
    """
    return [name for prefix, sub in module.named_modules()
            if isinstance(sub, XRiskLoss | ShardedLoss)
            for name, _ in sub.named_buffers(prefix=prefix, recurse=False)]


def exclude_loss_state_from_ddp(module: nn.Module) -> list[str]:
    """Keep the xrisk losses' state tables in ``module`` out of DDP's buffer synchronisation.

    Call it on the module before ``DistributedDataParallel`` wraps it (Lightning wraps the
    ``LightningModule``; :class:`XRiskCallback` calls this in its ``setup`` hook, which runs
    before). DDP then neither copies rank 0's tables to the other ranks when it wraps the
    module nor broadcasts them before each forward (``broadcast_buffers=True``, the
    default): O(num_samples) per step otherwise, which would also overwrite the other
    ranks' rows of a :class:`~xrisk.torch.distributed.ShardedLoss`. The replicated tables
    need no broadcast: with :func:`~xrisk.torch.distributed.gather_batch` every rank runs
    the loss on the same global batch and writes the same rows. Other buffers (BatchNorm's
    running statistics) are still broadcast, and the loss's auxiliaries are still averaged
    as parameters.

    The names join those already in ``module._ddp_params_and_buffers_to_ignore`` (DDP's
    list, set through ``DistributedDataParallel._set_params_and_buffers_to_ignore_for_model``).

    Parameters
    ----------
    module : torch.nn.Module
        The module DDP will wrap (a ``LightningModule``), holding the losses.

    Returns
    -------
    list of str
        The state tables' names now ignored by DDP (see :func:`loss_state_names`).

    Examples
    --------
    >>> import torch, xrisk.torch as xr
    >>> from xrisk.torch.lightning import exclude_loss_state_from_ddp
    >>> model = torch.nn.ModuleDict({"net": torch.nn.Linear(3, 1),
    ...                              "loss_fn": xr.APLoss(num_samples=10)})
    >>> exclude_loss_state_from_ddp(model)
    ['loss_fn.u']
    >>> model._ddp_params_and_buffers_to_ignore
    ['loss_fn.u']
    """
    names = loss_state_names(module)
    ignored = list(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        module, [*ignored, *(name for name in names if name not in ignored)])
    return names


def _check_epochs(epochs: Iterable[int]) -> tuple[int, ...]:
    try:
        values = list(epochs)
    except TypeError:
        raise TypeError(
            f"XRiskCallback: decay_epochs is {epochs!r}; expected an iterable of epoch "
            "numbers. Fix: pass e.g. decay_epochs=[50, 75].") from None
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                f"XRiskCallback: decay_epochs holds {value!r}; expected epoch numbers >= 1 "
                "(the decay runs at the start of that epoch, counted from 0). Fix: pass "
                "integers such as decay_epochs=[50, 75]; for a smaller first learning rate "
                "build the optimizer with it.")
    return tuple(sorted(set(values)))


class XRiskCallback(pl.Callback):
    """Lightning callback of an xrisk training run: DDP placement of the loss state,
    stage-wise decay and the sampler's position in checkpoints.

    Parameters
    ----------
    sampler : xrisk torch sampler, optional
        The sampler of the training ``DataLoader`` (``DataLoader(data, sampler=sampler,
        batch_size=None)`` or ``batch_sampler=sampler``), the same object, sharded for this
        rank with several ranks (``sampler.shard(trainer.global_rank, trainer.world_size)``).
        Its position is saved in checkpoints (:meth:`state_dict`) and restored by
        ``trainer.fit(..., ckpt_path=...)``. Without it the checkpoints carry no position
        (a resumed run then restarts the checkpoint's epoch from its first batch).
    decay_epochs : iterable of int, optional
        Epochs (counted from 0, each >= 1) at whose start every optimizer of the module gets
        ``update_regularizer(decay_factor)``, as LibAUC's loops do
        (``if epoch in decay_epochs: optimizer.update_regularizer(decay_factor=10)``). Each
        epoch is applied once, also across a resumed run.
    decay_factor : float, optional
        Divisor of the learning rates at each decay (default 10); ``None`` starts a new
        proximal stage without changing them.

    Notes
    -----
    The position saved is the training loop's: the epoch and the number of batches the
    optimizer has stepped on in it (Lightning's ``fit_loop`` progress), whatever Lightning or
    the loader's workers have fetched ahead. ``state_dict()`` gives it only once the
    callback has been set up by a ``Trainer``. Lightning warns on a mid-epoch resume that the
    ``DataLoader`` is not resumable; with this callback's sampler position it is.

    Examples
    --------
    >>> import numpy as np
    >>> import xrisk.torch as xr
    >>> from xrisk.torch.lightning import XRiskCallback
    >>> sampler = xr.DualSampler(np.array([1, 0, 0, 0] * 8), 8, sampling_rate=0.25, seed=0)
    >>> callback = XRiskCallback(sampler, decay_epochs=[30, 45], decay_factor=10)
    >>> callback.decay_epochs
    (30, 45)
    >>> callback.load_state_dict({"sampler": {"seed": 0, "epoch": 3, "position": 2},
    ...                           "decayed": [30]})
    >>> sampler.state_dict()  # where trainer.fit(..., ckpt_path=...) continues
    {'seed': 0, 'epoch': 3, 'position': 2}
    """

    def __init__(self, sampler: Any = None, *, decay_epochs: Iterable[int] = (),
                 decay_factor: float | None = 10.0) -> None:
        self.decay_epochs = _check_epochs(decay_epochs)
        if decay_factor is not None:
            check_number("XRiskCallback", "decay_factor", decay_factor, low=0.0,
                         low_open=True, fix="pass decay_factor > 0 (10 divides the learning "
                         "rates by 10) or None")
        self.sampler = sampler
        self.decay_factor = decay_factor
        self._decayed: set[int] = set()
        self._trainer: pl.Trainer | None = None

    @property
    def sampler(self) -> Any:
        """The training loader's sampler; may be set after the ``Trainer`` is built (its
        ``global_rank`` and ``world_size`` then give the shard), before ``fit``."""
        return self._sampler

    @sampler.setter
    def sampler(self, sampler: Any) -> None:
        if sampler is not None and not all(callable(getattr(sampler, name, None)) for name in
                                           ("state_dict", "load_state_dict", "set_epoch")):
            raise TypeError(
                f"XRiskCallback: sampler is a {type(sampler).__name__}; expected an xrisk "
                "sampler (state_dict, load_state_dict, set_epoch). Fix: pass the "
                "xrisk.torch sampler that the training DataLoader iterates.")
        self._sampler = sampler

    # -- set-up -----------------------------------------------------------------------------
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        """Exclude the losses' state tables from DDP's broadcast; check the sampler's shard.

        Runs before Lightning wraps the module in DDP, and before the module's own
        ``setup`` and ``configure_model`` hooks: build the losses in ``__init__``."""
        self._trainer = trainer
        exclude_loss_state_from_ddp(pl_module)
        if self.sampler is None:
            return
        rank, world = trainer.global_rank, trainer.world_size
        placed = (getattr(self.sampler, "rank", 0), getattr(self.sampler, "world_size", 1))
        if placed != (rank, world):
            raise ValueError(
                f"XRiskCallback: the sampler is shard {placed[0]} of {placed[1]}; this is rank "
                f"{rank} of {world}. Expected each rank's loader to iterate its shard of the "
                f"global batches. Fix: sampler.shard(trainer.global_rank, trainer.world_size) "
                "(the same sampler object in the DataLoader and in XRiskCallback).")
        connector = getattr(trainer, "_accelerator_connector", None)
        if world > 1 and getattr(connector, "use_distributed_sampler", False):
            raise ValueError(
                f"XRiskCallback: Trainer(use_distributed_sampler=True) on {world} ranks would "
                "replace the xrisk sampler by torch's DistributedSampler (no controlled "
                "batches, no position). Expected use_distributed_sampler=False. Fix: "
                "Trainer(..., use_distributed_sampler=False) with the loader's sampler "
                "sharded by sampler.shard(rank, world_size).")

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Refuse a loss that DDP would broadcast (one built after :meth:`setup`)."""
        model = trainer.strategy.model
        # torch 2.13 renamed broadcast_buffers to forward_sync_buffers
        syncs = getattr(model, "forward_sync_buffers", getattr(model, "broadcast_buffers", False))
        if isinstance(model, DistributedDataParallel) and syncs:
            synced = sorted(set(loss_state_names(pl_module)) - model.parameters_to_ignore)
            if synced:
                raise RuntimeError(
                    f"XRiskCallback: DDP broadcasts the loss state {synced} from rank 0 at "
                    "each forward: those losses did not exist when the callback's setup "
                    "hook excluded them (built in the module's setup or configure_model). "
                    "Expected every xrisk loss built with the module. Fix: build the loss "
                    "in the LightningModule's __init__.")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Check that the training loader iterates this callback's sampler."""
        if self.sampler is None:
            return
        loaders = trainer.train_dataloader
        flat = (list(loaders.values()) if isinstance(loaders, Mapping) else
                list(loaders) if isinstance(loaders, list | tuple) else [loaders])
        if not any(self.sampler is getattr(loader, name, None)
                   for loader in flat for name in ("sampler", "batch_sampler")):
            raise ValueError(
                "XRiskCallback: the training DataLoader does not iterate the callback's "
                "sampler, so its saved position would be another sampler's. Expected "
                "DataLoader(data, sampler=sampler, batch_size=None) (or batch_sampler="
                "sampler) with the same object as XRiskCallback(sampler). Fix: build the "
                "sampler once (e.g. in the DataModule's __init__) and pass it to both.")

    # -- stage-wise decay -------------------------------------------------------------------
    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        """``update_regularizer(decay_factor)`` on every optimizer before the first step of
        a decay epoch.

        At the first batch rather than at ``on_train_epoch_start``: Lightning skips that hook
        for an epoch entered by resuming from a checkpoint written at the previous epoch's
        last batch; the epochs already decayed (saved in the checkpoint) are not decayed
        again."""
        epoch = trainer.current_epoch
        if epoch not in self.decay_epochs or epoch in self._decayed:
            return
        optimizers: list[Any] = list(trainer.optimizers)
        foreign = [type(o).__name__ for o in optimizers
                   if not callable(getattr(o, "update_regularizer", None))]
        if foreign:
            raise TypeError(
                f"XRiskCallback: decay_epochs needs optimizers with update_regularizer; "
                f"got {foreign}. Expected xrisk.torch optimizers. Fix: return an xrisk.torch "
                "optimizer from configure_optimizers, or drop decay_epochs and use a "
                "torch.optim.lr_scheduler (e.g. MultiStepLR) for a torch.optim optimizer.")
        for optimizer in optimizers:
            optimizer.update_regularizer(self.decay_factor)
        self._decayed.add(epoch)

    # -- checkpoints ------------------------------------------------------------------------
    def _loop_position(self, trainer: pl.Trainer) -> dict[str, int]:
        """The sampler state of the training loop's position (see the class notes)."""
        # the fit loop's trackers count ready/started/processed/completed (typed as the base)
        epochs: Any = trainer.fit_loop.epoch_progress.current
        epoch = epochs.processed  # epochs whose batches are all trained
        if epochs.started > epochs.processed:  # inside epoch `processed`
            batches: Any = trainer.fit_loop.epoch_loop.batch_progress.current
            done = batches.processed
            if done < trainer.num_training_batches:
                return {**self.sampler.state_dict(), "epoch": epoch, "position": done}
            epoch += 1
        return {**self.sampler.state_dict(), "epoch": epoch, "position": 0}

    def state_dict(self) -> dict[str, Any]:
        """``{"decayed": epochs already decayed, "sampler": the loop's sampler state}``
        (the latter with a sampler, once set up by a ``Trainer``)."""
        state: dict[str, Any] = {"decayed": sorted(self._decayed)}
        if self.sampler is not None and self._trainer is not None:
            state["sampler"] = self._loop_position(self._trainer)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (Lightning calls it when resuming from a checkpoint);
        the sampler then starts at the saved position. Nothing changes on error."""
        if not isinstance(state_dict, Mapping) or not set(state_dict) <= {"decayed", "sampler"}:
            raise ValueError(
                f"XRiskCallback: state {state_dict!r}; expected a dict with 'decayed' and "
                "optionally 'sampler' (XRiskCallback.state_dict()). Fix: resume from a "
                "checkpoint written with this callback.")
        decayed = _check_epochs(state_dict.get("decayed", ()))
        position = state_dict.get("sampler")
        if position is not None:
            if self.sampler is None:
                raise ValueError(
                    "XRiskCallback: the checkpoint holds a sampler position but this callback "
                    "has no sampler. Expected XRiskCallback(sampler) as in the run that "
                    "saved it. Fix: pass the training loader's sampler to XRiskCallback.")
            self.sampler.load_state_dict(position)  # checks everything before it changes
        self._decayed = set(decayed)
