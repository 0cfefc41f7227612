"""PyTorch Lightning runs an xrisk loss and optimizer exactly as a plain torch loop does.

The recipe of :mod:`xrisk.torch.lightning` (a ``LightningModule`` holding the network and the
loss, :class:`~xrisk.torch.lightning.XRiskCallback`) is trained with ``lightning`` itself on
the CPU in float64, for AP + SOAP and AUC-M + PESG with a stage-wise decay, and compared
bit for bit (weights, BatchNorm statistics, loss state and auxiliaries, optimizer state) with
the plain loop it stands for:

- one process: ``Trainer.fit`` against ``for epoch: for batch in loader: ...`` with
  ``update_regularizer`` at the decay epoch (called by the callback);
- a checkpoint written mid-epoch (``ModelCheckpoint(every_n_train_steps=...)``) or at an
  epoch's end, then an interrupted run resumed by ``fit(ckpt_path=...)``, against the
  uninterrupted run: loss state, optimizer and sampler resume exactly;
- two processes, Lightning's ``strategy="ddp"`` on gloo (this file, run as a module, is one
  rank; the two ranks start together as tests/test_distributed.py's workers do), against
  the plain DDP recipe of :mod:`xrisk.torch.distributed`, with every broadcast DDP makes
  recorded: the state tables are never sent (the BatchNorm buffers still are), and without
  the callback the loss refuses to run (the reason the callback exists).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pl = pytest.importorskip("lightning.pytorch")
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import xrisk.torch as xr  # noqa: E402
from xrisk.torch.distributed import gather_batch  # noqa: E402
from xrisk.torch.lightning import XRiskCallback, exclude_loss_state_from_ddp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = 3
NUM_SAMPLES, FEATURES, BATCH = 48, 5, 8
EPOCHS = 3
DECAY_EPOCHS = (1, 2)

#: loss -> (the loss, its optimizer over the network (and the loss, for min-max))
CASES = {
    "AP-SOAP": (lambda: xr.APLoss(num_samples=NUM_SAMPLES, margin=0.6, dtype="float64"),
                lambda net, loss_fn: xr.SOAP(net.parameters(), learning_rate=0.05)),
    "AUCM-PESG": (lambda: xr.AUCMLoss(margin=1.0, dtype="float64"),
                  lambda net, loss_fn: xr.PESG(net.parameters(), loss_fn, learning_rate=0.1,
                                               epoch_decay=0.01)),
}


def make_data() -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(SEED)
    labels = (rng.random(NUM_SAMPLES) < 0.3).astype(np.float64)
    features = rng.normal(size=(NUM_SAMPLES, FEATURES)) + labels[:, None]
    return xr.IndexedDataset(features, labels), labels


def make_sampler(labels: np.ndarray, rank: int = 0, world: int = 1) -> Any:
    sampler = xr.DualSampler(labels, BATCH, sampling_rate=0.25, seed=SEED)
    return sampler.shard(rank, world) if world > 1 else sampler


def make_net() -> nn.Module:
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(FEATURES, 4), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.Linear(4, 1)).double()


def scores_of(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(model(x)).squeeze(1)


class Recipe(pl.LightningModule):
    """The documented recipe: the network and the loss in the module, the loss on the
    global batch."""

    def __init__(self, case: str) -> None:
        super().__init__()
        self.case = case
        self.net = make_net()
        self.loss_fn = CASES[case][0]()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y, index = batch
        return self.loss_fn(**gather_batch(self.loss_fn, scores_of(self.net, x), y, index))

    def configure_optimizers(self) -> Any:
        return CASES[self.case][1](self.net, self.loss_fn)


def trainer(callbacks: list, **options: Any) -> Any:
    options = {"max_epochs": EPOCHS, "accelerator": "cpu", "devices": 1, "logger": False,
               "enable_checkpointing": False, "enable_progress_bar": False,
               "enable_model_summary": False, "num_sanity_val_steps": 0, **options}
    return pl.Trainer(callbacks=callbacks, **options)


def fit(case: str, *, world: int = 1, ckpt_path: str | None = None, callbacks: tuple = (),
        **options: Any) -> dict[str, Any]:
    """Lightning's run, set up as docs/lightning.md does; returns the final numbers (see
    :func:`snapshot`)."""
    data, labels = make_data()
    module = Recipe(case)
    callback = XRiskCallback(decay_epochs=DECAY_EPOCHS)
    run = trainer([callback, *callbacks], **options)
    sampler = make_sampler(labels, run.global_rank, world)  # the Trainer knows the rank
    callback.sampler = sampler
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*does not have many workers.*")
        warnings.filterwarnings("ignore", ".*dataloader is not resumable.*")
        warnings.filterwarnings("ignore", ".*callbacks used to create the checkpoint.*")
        run.fit(module, DataLoader(data, sampler=sampler, batch_size=None), ckpt_path=ckpt_path)
    # the loop's position, as the callback saves it (Lightning iterates ahead of the loop)
    return snapshot(module.net, module.loss_fn, run.optimizers[0],
                    callback.state_dict()["sampler"])


def plain(case: str, *, rank: int = 0, world: int = 1) -> dict[str, Any]:
    """The plain torch loop the recipe stands for (DDP(net) and the loss outside it with
    several ranks, as xrisk.torch.distributed documents)."""
    data, labels = make_data()
    sampler = make_sampler(labels, rank, world)
    net = make_net()
    model = nn.parallel.DistributedDataParallel(net) if world > 1 else net
    make_loss, make_optimizer = CASES[case]
    loss_fn = make_loss()
    optimizer = make_optimizer(net, loss_fn)
    loader = DataLoader(data, sampler=sampler, batch_size=None)
    for epoch in range(EPOCHS):
        if epoch in DECAY_EPOCHS:
            optimizer.update_regularizer(decay_factor=10)
        sampler.set_epoch(epoch)
        for x, y, index in loader:
            loss = loss_fn(**gather_batch(loss_fn, scores_of(model, x), y, index))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return snapshot(net, loss_fn, optimizer, sampler.state_dict())


def snapshot(net: nn.Module, loss_fn: nn.Module, optimizer: Any, position: dict[str, int]
             ) -> dict[str, Any]:
    """Every number a run ends with: weights and BatchNorm buffers, the loss's state and
    auxiliaries, the optimizer's state and learning rates, the sampler's position."""
    out = {f"net.{k}": v.detach().clone() for k, v in net.state_dict().items()}
    out.update({f"loss.{k}": v.detach().clone() for k, v in loss_fn.state_dict().items()})
    state = optimizer.state_dict()
    for index, slots in state["state"].items():
        out.update({f"opt.{index}.{k}": torch.as_tensor(v).clone() for k, v in slots.items()})
    out["opt.lr"] = torch.tensor([g["lr"] for g in state["param_groups"]], dtype=torch.float64)
    out["opt.step"] = torch.tensor([int(g["step"]) for g in state["param_groups"]])
    out["sampler"] = torch.tensor([position[k] for k in ("seed", "epoch", "position")])
    return out


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Names of the entries that are not bit-equal (or missing on one side)."""
    return sorted(k for k in got.keys() | want.keys()
                  if k not in got or k not in want or not torch.equal(got[k], want[k]))


@pytest.fixture(autouse=True)
def one_thread():
    """One intra-op thread, as the DDP ranks use: these models are tiny, and torch's thread
    pool on a shared machine made each float64 BatchNorm call take ~0.1 s (1 ms alone)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# -- one process ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES)
def test_fit_equals_the_plain_loop(case):
    """Trainer.fit with XRiskCallback(decay_epochs) is the plain loop with update_regularizer,
    bit for bit; the stage-wise decays did run (learning rate / 100)."""
    got, want = fit(case), plain(case)
    assert not differences(got, want), differences(got, want)
    first = CASES[case][1](make_net(), CASES[case][0]()).param_groups[0]["lr"]
    assert got["opt.lr"][0].item() == pytest.approx(first / 100, rel=1e-12)


@pytest.mark.parametrize("where", ["mid-epoch", "epoch-end"])
@pytest.mark.parametrize("case", CASES)
def test_checkpoint_resumes_loss_optimizer_and_sampler_exactly(case, where, tmp_path):
    """A run checkpointed by ModelCheckpoint (every_n_train_steps) inside epoch 1, after
    the decay of its start, or at the end of epoch 1, before the decay of epoch 2, and
    interrupted there (``max_steps``), then resumed by ``fit(ckpt_path=...)``, ends
    bit-equal to the uninterrupted run: weights, loss state, optimizer, sampler; each decay
    ran once."""
    per_epoch = len(make_sampler(make_data()[1]))
    stop = per_epoch + 3 if where == "mid-epoch" else 2 * per_epoch
    saver = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=stop,
                                         save_top_k=-1)
    fit(case, callbacks=(saver,), max_steps=stop, enable_checkpointing=True)
    (saved,) = tmp_path.glob("*.ckpt")
    callbacks = torch.load(saved, weights_only=False)["callbacks"]
    (state,) = [v for k, v in callbacks.items() if k.startswith("XRiskCallback")]
    assert (state["sampler"]["epoch"], state["sampler"]["position"]) == divmod(stop, per_epoch)
    assert state["decayed"] == [1]
    resumed = fit(case, ckpt_path=str(saved))
    want = fit(case)
    assert not differences(resumed, want), differences(resumed, want)


def test_ddp_ignore_list_holds_the_state_tables_only():
    module = Recipe("AP-SOAP")
    module._ddp_params_and_buffers_to_ignore = ["net.0.weight"]  # a user's own entry stays
    assert exclude_loss_state_from_ddp(module) == ["loss_fn.u"]
    assert module._ddp_params_and_buffers_to_ignore == ["net.0.weight", "loss_fn.u"]
    assert module.loss_fn.u._ddp_ignored and not hasattr(module.net[1].running_mean,
                                                         "_ddp_ignored")


# -- bad input --------------------------------------------------------------------------------
def test_callback_refuses_bad_arguments_and_states():
    sampler = make_sampler(make_data()[1])
    with pytest.raises(ValueError, match="decay_epochs holds 0"):
        XRiskCallback(sampler, decay_epochs=[0, 5])
    with pytest.raises(ValueError, match="decay_factor"):
        XRiskCallback(sampler, decay_factor=-1.0)
    with pytest.raises(TypeError, match="expected an xrisk sampler"):
        XRiskCallback([1, 2, 3])
    callback = XRiskCallback(sampler)
    before = sampler.state_dict()
    with pytest.raises(ValueError, match="another seed|seed="):
        callback.load_state_dict({"sampler": {"seed": SEED + 1, "epoch": 1, "position": 1},
                                  "decayed": [2]})
    assert sampler.state_dict() == before and callback.state_dict() == {"decayed": []}
    with pytest.raises(ValueError, match="no sampler"):
        XRiskCallback().load_state_dict({"sampler": before, "decayed": []})


def test_callback_refuses_a_loader_without_its_sampler():
    data, labels = make_data()
    run = trainer([XRiskCallback(make_sampler(labels))])
    with pytest.raises(ValueError, match="does not iterate the callback's sampler"):
        run.fit(Recipe("AP-SOAP"), DataLoader(data, sampler=make_sampler(labels),
                                              batch_size=None))


def test_decay_needs_xrisk_optimizers():
    class Adam(Recipe):
        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.net.parameters())

    data, labels = make_data()
    sampler = make_sampler(labels)
    run = trainer([XRiskCallback(sampler, decay_epochs=[1])], max_epochs=2)
    with pytest.raises(TypeError, match="update_regularizer"):
        run.fit(Adam("AP-SOAP"), DataLoader(data, sampler=sampler, batch_size=None))


# -- two processes: Lightning's DDP against the plain DDP recipe ------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lightning_ddp")
    port = str(_free_port())
    running = []
    for rank in range(2):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2",
               "NODE_RANK": "0", "LOCAL_RANK": str(rank)}  # Lightning: processes exist
        log = open(folder / f"rank{rank}.log", "w")  # noqa: SIM115
        running.append((subprocess.Popen(
            [sys.executable, "-m", "tests.test_lightning", str(rank), str(folder)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    reports = []
    for rank, (process, log) in enumerate(running):
        try:
            process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        path = folder / f"rank{rank}.json"
        if not path.exists():
            pytest.fail(f"rank {rank} wrote no report:\n"
                        f"{(folder / f'rank{rank}.log').read_text()[-4000:]}")
        reports.append(json.loads(path.read_text()))
    return reports


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_equals_the_plain_ddp_recipe_without_broadcasting_the_state(ddp_reports, rank):
    report = ddp_reports[rank]
    assert report["cases"] == list(CASES)
    assert not report["problems"], "\n".join(report["problems"])


def _broadcasts() -> list[tuple[int, ...]]:
    """Record the data pointers of every tensor DDP broadcasts (construction and forward
    syncs both go through torch.distributed._broadcast_coalesced)."""
    import torch.distributed as dist

    seen: list[tuple[int, ...]] = []
    original = dist._broadcast_coalesced

    def recording(group: Any, tensors: list, *args: Any) -> Any:
        seen.append(tuple(t.data_ptr() for t in tensors))
        return original(group, tensors, *args)

    dist._broadcast_coalesced = recording
    return seen


class _Probe(pl.Callback):
    """Keeps the module a fit trains (to find its tensors among the broadcast ones)."""

    def __init__(self) -> None:
        self.modules: list[Any] = []

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.modules.append(pl_module)


def _ddp_rank(rank: int, folder: Path) -> None:
    import logging

    import torch.distributed as dist

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)  # Lightning reuses it
    options = {"devices": 2, "strategy": "ddp", "use_distributed_sampler": False}
    problems: list[str] = []
    seen = _broadcasts()
    for case in CASES:
        try:
            want = plain(case, rank=rank, world=2)
            seen.clear()
            probe = _Probe()
            got = fit(case, world=2, callbacks=(probe,), **options)
            modules = probe.modules
            problems += [f"{case}: {k} differs from the plain DDP run"
                         for k in differences(got, want)]
            tables = {t.data_ptr() for t in modules[0].loss_fn.buffers()}
            norm = {t.data_ptr() for t in modules[0].net[1].buffers()}
            sent = [set(ptrs) for ptrs in seen]
            if any(ptrs & tables for ptrs in sent):
                problems.append(f"{case}: DDP broadcast the loss's state tables")
            steps = EPOCHS * len(make_sampler(make_data()[1]))
            if sum(ptrs == norm for ptrs in sent) < steps:  # one sync per forward
                problems.append(f"{case}: BatchNorm's buffers were broadcast "
                                f"{sum(ptrs == norm for ptrs in sent)} times in {steps} steps")
        except Exception as error:  # report it, and keep the ranks in step
            problems.append(f"{case}: {type(error).__name__}: {error}")
        dist.barrier()
    # Without the callback the state tables stay in DDP's broadcast: the loss refuses.
    data, labels = make_data()
    sampler = make_sampler(labels, rank, 2)
    try:
        trainer([], **options).fit(Recipe("AP-SOAP"),
                                   DataLoader(data, sampler=sampler, batch_size=None))
        problems.append("without XRiskCallback: DDP broadcast the state and nothing raised")
    except RuntimeError as error:
        if "exclude_loss_state_from_ddp" not in str(error):
            problems.append(f"without XRiskCallback: {error}")
    # A loss built after the callback's setup (in the module's setup) is refused at fit start.
    class LateLoss(Recipe):
        def __init__(self) -> None:
            pl.LightningModule.__init__(self)
            self.case, self.net = "AP-SOAP", make_net()

        def setup(self, stage: str) -> None:
            self.loss_fn = CASES[self.case][0]()

    try:
        trainer([XRiskCallback(sampler)], **options).fit(
            LateLoss(), DataLoader(data, sampler=sampler, batch_size=None))
        problems.append("a loss built in setup(): nothing raised")
    except RuntimeError as error:
        if "XRiskCallback: DDP broadcasts the loss state" not in str(error):
            problems.append(f"a loss built in setup(): {error}")
    # The callback refuses a sampler that is not this rank's shard, and Lightning's
    # DistributedSampler in place of the xrisk sampler.
    for what, given, use in (("an unsharded sampler", make_sampler(labels), False),
                             ("use_distributed_sampler", sampler, True)):
        try:
            trainer([XRiskCallback(given)], **{**options, "use_distributed_sampler": use}
                    ).fit(Recipe("AP-SOAP"), DataLoader(data, sampler=given, batch_size=None))
            problems.append(f"{what}: nothing raised")
        except ValueError as error:
            if "XRiskCallback" not in str(error) or "Fix:" not in str(error):
                problems.append(f"{what}: {error}")
    (folder / f"rank{rank}.json").write_text(json.dumps({"cases": list(CASES),
                                                         "problems": problems}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    _ddp_rank(int(sys.argv[1]), Path(sys.argv[2]))
