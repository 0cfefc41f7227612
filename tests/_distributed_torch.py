"""Worker of tests/test_distributed.py: one rank of a 2-process torch DDP run on gloo.

``python -m tests._distributed_torch RANK WORLD PORT OUT`` runs every registered loss (one
process pair for all losses, to pay the start-up once): the single-process run on the global
batch, the DDP run with :func:`xrisk.torch.distributed.gather_batch` (replicated state) and
with :class:`xrisk.torch.distributed.ShardedLoss`, then the detected misuses. It writes the
mismatches it found (a list of strings) as JSON to ``OUT``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

import xrisk.torch as xr  # noqa: E402
from tests._distributed import LR, compare, loss_names, make_plan, score_names  # noqa: E402
from xrisk import distributed as core  # noqa: E402
from xrisk._adapter_support import METADATA_KEY  # noqa: E402
from xrisk.torch.distributed import ShardedLoss, gather_batch  # noqa: E402


class Linear(nn.Module):
    """The harness's model: scores = link(features @ w)."""

    def __init__(self, w0: np.ndarray, link: str) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w0, dtype=torch.float64))
        self.link = link

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        z = features @ self.w
        return torch.sigmoid(z) if self.link == "sigmoid" else z


def make_loss(plan, sharded: bool) -> nn.Module:
    definition = plan.definition
    if sharded:
        loss_fn = ShardedLoss(definition, dtype="float64")
    else:
        loss_fn = getattr(xr, plan.name)(**definition.config(), dtype="float64")
    with torch.no_grad():
        for name, value in plan.params0.items():
            getattr(loss_fn, name).copy_(torch.as_tensor(value))
    return loss_fn


def _tensors(plan, part: dict, model: nn.Module) -> dict:
    scores = score_names(plan.definition)
    return {k: (None if v is None else
                model(torch.as_tensor(v)) if k in scores else torch.as_tensor(v))
            for k, v in part.items()}


def train(plan, rank: int, world: int, *, distributed: bool, sharded: bool) -> dict:
    """Steps of SGD on w and the auxiliaries; returns the final numbers as numpy."""
    net = Linear(plan.w0, plan.link)
    model = nn.parallel.DistributedDataParallel(net) if distributed else net
    loss_fn = make_loss(plan, sharded)
    losses = []
    for step in range(len(plan.parts)):
        if distributed:
            local = _tensors(plan, plan.parts[step][rank], model)
            loss = loss_fn(**gather_batch(loss_fn, **local))
        else:
            loss = loss_fn(**_tensors(plan, plan.global_batch(step), model))
        for p in (*net.parameters(), *loss_fn.parameters()):
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in (*net.parameters(), *loss_fn.parameters()):
                if p.grad is not None:
                    p -= LR * p.grad
        losses.append(float(loss.detach()))
    state = loss_fn.export_state()
    return {"w": net.w.detach().numpy().copy(), "loss": np.array(losses), **state,
            "_loss_fn": loss_fn}


def check_loss(name: str, rank: int, world: int) -> list[str]:
    plan = make_plan(name)
    want = train(plan, rank, world, distributed=False, sharded=False)
    want.pop("_loss_fn")
    problems = []
    replicated = train(plan, rank, world, distributed=True, sharded=False)
    replicated.pop("_loss_fn")
    problems += compare(name, replicated, want, f"rank {rank} replicated")
    sharded = train(plan, rank, world, distributed=True, sharded=True)
    loss_fn = sharded.pop("_loss_fn")
    problems += compare(name, sharded, want, f"rank {rank} sharded")
    problems += stored_shapes(plan.definition, loss_fn, rank, world)
    # Per-shard checkpoints reassemble into the single-process export, and load back.
    shards: list = [None] * world
    dist.all_gather_object(shards, loss_fn.export_shard())
    assembled = core.assemble_shards(plan.definition, shards)
    state_keys = {*plan.definition.state_shapes(), METADATA_KEY}  # the export names its loss
    problems += compare(name, assembled, {k: want[k] for k in state_keys}, "assembled")
    fresh = ShardedLoss(plan.definition, dtype="float64")
    fresh.load_shard(shards[rank])
    problems += compare(name, fresh.export_shard(), loss_fn.export_shard(), "reloaded shard")
    return problems


def stored_shapes(definition, loss_fn, rank: int, world: int) -> list[str]:
    """Each sharded table holds this rank's rows only (plus the scratch row)."""
    sizes = definition.table_sizes()
    problems = []
    for name in definition.state_tables():
        if not core.sharded(definition, name):
            continue
        rows = core.local_size(sizes[core.row_space(definition, name)], rank, world) + 1
        expected = (rows, *core.stored_row(definition, name))
        if tuple(getattr(loss_fn, name).shape) != expected:
            problems.append(f"{definition.name} rank {rank}: {name} has shape "
                            f"{tuple(getattr(loss_fn, name).shape)}, expected {expected}")
    return problems


def check_misuse(rank: int, world: int) -> list[str]:
    problems = []
    loss_fn = xr.APLoss(num_samples=4, dtype="float64")
    scores = torch.tensor([0.9, 0.2], dtype=torch.float64)
    labels, index = torch.tensor([1, 0]), torch.tensor([rank, 2 + rank])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(scores, labels, index)
        loss_fn(scores, labels, index)
    naive = [w for w in caught if issubclass(w.category, xr.distributed.DistributedWarning)]
    if len(naive) != 1 or "gather_batch" not in str(naive[0].message):
        problems.append(f"naive call: expected one DistributedWarning, got {naive}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(**gather_batch(loss_fn, scores, labels, index))
    if caught:
        problems.append(f"gathered call warned: {[str(w.message) for w in caught]}")

    class Inside(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones((), dtype=torch.float64))
            self.loss_fn = xr.APLoss(num_samples=4, dtype="float64")

        def forward(self, s: torch.Tensor) -> torch.Tensor:
            return self.loss_fn(**gather_batch(self.loss_fn, s * self.w, labels, index))

    for broadcast in (True, False):
        module = nn.parallel.DistributedDataParallel(Inside(), broadcast_buffers=broadcast)
        try:
            module(scores)
            raised = False
        except RuntimeError as error:
            raised = "broadcast_buffers" in str(error)
        if raised != broadcast:
            problems.append(f"DDP broadcast_buffers={broadcast}: raised={raised}")
    return problems


def main() -> None:
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    problems: list[str] = []
    timings: dict[str, float] = {}
    names = loss_names()
    for name in names:
        start = time.perf_counter()
        try:
            problems += check_loss(name, rank, world)
        except Exception as error:  # report, and keep the ranks in step for the next loss
            problems.append(f"{name}: {type(error).__name__}: {error}")
        timings[name] = time.perf_counter() - start
    problems += check_misuse(rank, world)
    with open(out, "w") as f:
        json.dump({"losses": names, "problems": problems, "seconds": timings}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
