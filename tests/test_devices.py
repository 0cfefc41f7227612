"""Every state table, auxiliary and computed tensor follows the device of the model (issue
20, point 10).

Without a GPU, two CPU-side checks stand in for it:

- ``Module.to`` moves every table and auxiliary of every registered loss (to float64, and to
  the "meta" device), and ``loss.state`` / ``loss.aux_params`` then hold the moved tensors;
- a whole loss call with the model, the batch and the loss on the "meta" device. Meta
  tensors hold no values, so, like a GPU's, they are not host-readable: the loss takes the
  path of an accelerator (checks in the graph, no host ranking of keys), and any tensor the
  step creates without ``device=`` lands on the CPU and raises at its first use with a meta
  tensor, as it would against a CUDA tensor (13 losses did, through the grouping primitive,
  NDCG's column index and InfoNCE's default index, before those took the inputs' device).

Tests marked ``gpu`` run the same steps on a CUDA GPU against the CPU in float64, and with
``torch.cuda.set_sync_debug_mode("error")``; they skip cleanly without one. The workloads
are those of benchmarks/_families.py (one per registered loss).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import xrisk  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
HAS_CUDA = torch.cuda.is_available()

def _families():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _families
    finally:
        sys.path.remove(str(BENCHMARKS))
    return _families


def _family(name):
    return next(f for f in _families().FAMILIES if f.loss == name)


def _tensors(loss):
    """Every tensor the loss holds: tables, auxiliaries, and the state/aux views."""
    held = dict(loss.named_buffers())
    held.update(loss.named_parameters())
    held.update({f"state.{k}": v for k, v in loss.state._asdict().items()})
    held.update({f"aux_params.{k}": v for k, v in loss.aux_params._asdict().items()})
    return held


@pytest.mark.parametrize("name", sorted(xrisk.LOSSES))
def test_to_moves_every_table_and_auxiliary(name):
    built = _family(name).build("xrisk", 16, None)
    loss = built.loss
    before = {k: v.dtype for k, v in _tensors(loss).items()}
    declared = len(loss.definition.state_tables()) + len(loss.definition.auxiliaries())
    assert len(before) >= declared, f"{name}: {sorted(before)} lacks a declared table"
    loss.to(torch.float64)
    for key, tensor in _tensors(loss).items():
        want = torch.float64 if before[key].is_floating_point else before[key]
        assert tensor.dtype == want, f"{name}.{key}: {tensor.dtype}, expected {want}"
    loss.to("meta")
    for key, tensor in _tensors(loss).items():
        assert tensor.device.type == "meta", f"{name}.{key} stayed on {tensor.device}"


@pytest.mark.parametrize("name", sorted(xrisk.LOSSES))
def test_loss_call_stays_on_a_non_host_device(name):
    built = _family(name).build("xrisk", 16, None, device="meta")
    loss = built.loss_call(built.batches[0])
    assert loss.device.type == "meta"
    loss.backward()
    for key, tensor in _tensors(built.loss).items():
        assert tensor.device.type == "meta", f"{name}.{key} is on {tensor.device} after a step"
    grads = {k: p.grad for k, p in built.model.named_parameters() if p.grad is not None}
    assert grads, f"{name}: no gradient reached the model"
    for key, grad in grads.items():
        assert grad.device.type == "meta", f"{name}: the gradient of {key} is on {grad.device}"


# --------------------------------------------------------------------------------------------
# on a GPU
# --------------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (torch.cuda.is_available())")


def _params_after(name, device, dtype, steps):
    built = _family(name).build("xrisk", 64, None, device=device, dtype=dtype)
    for k in range(steps):
        built.step(built.batches[k % len(built.batches)])
    return [p.detach().to("cpu", torch.float64) for p in built.model.parameters()], built


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("name", sorted(xrisk.LOSSES))
def test_gpu_steps_match_cpu_float64(name):
    want, _ = _params_after(name, "cpu", torch.float64, 3)
    got, built = _params_after(name, "cuda", torch.float64, 3)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    for key, tensor in _tensors(built.loss).items():
        assert tensor.device.type == "cuda", f"{name}.{key} left the GPU: {tensor.device}"


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("name", sorted(xrisk.LOSSES))
def test_gpu_step_has_no_host_sync(name):
    built = _family(name).build("xrisk", 64, None, device="cuda")
    built.step(built.batches[0])  # the optimizer plans its flat buffers once (reads counters)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for k in range(1, 3):
            built.step(built.batches[k])
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("name", sorted(xrisk.OPTIMIZERS))
def test_optimizer_steps_read_nothing_back_from_a_non_host_device(name):
    """Two eager steps on "meta" parameters: a meta tensor cannot be read on the host, as a
    GPU tensor can only be read with a sync. The optimizer's flat plans take the counters it
    made as known zeros instead of reading them back (they were read, once, at the first
    step: a sync that set_sync_debug_mode("error") refuses)."""
    import xrisk.torch as xr

    weight = torch.nn.Parameter(torch.ones(3, 4, device="meta"))
    bias = torch.nn.Parameter(torch.ones(4, device="meta"))
    cls = getattr(xr, name)
    min_max = {"PESG": xr.AUCMLoss, "PDSCA": xr.CompositionalAUCLoss,
               "MIDAM": lambda: xr.MIDAM_softmax_pooling_loss(num_samples=4)}
    if name in min_max:
        loss_fn = min_max[name]().to("meta")
        optimizer = cls([weight, bias], loss_fn, learning_rate=0.1)
        auxiliaries = [p for p in loss_fn.parameters()]
    else:
        optimizer, auxiliaries = cls([weight, bias], learning_rate=0.1), []
    for _ in range(2):
        for param in (weight, bias, *auxiliaries):
            param.grad = torch.ones_like(param)
        optimizer.step()
    assert weight.device.type == "meta"
