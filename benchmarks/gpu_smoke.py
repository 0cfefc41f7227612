"""Question: does every loss train on a GPU as on the CPU, without host syncs, and how fast
against LibAUC 2.0.1 on the same GPU? (issue 20, point 10). One command, a few minutes::

    .venv/bin/python benchmarks/gpu_smoke.py                 # every framework installed
    .venv/bin/python benchmarks/gpu_smoke.py --frameworks torch --families "AP + SOAP"

torch, for every registered loss with its optimizer (benchmarks/_families.py, batch 64):

1. ``--steps`` training steps on the GPU in float64 against the same steps on the CPU in
   float64: the model's parameters must agree (rtol 1e-9), and every state table and
   auxiliary of the loss must still be on the GPU;
2. host syncs: after one warm-up step (the optimizer reads its step counters once, when it
   plans its flat buffers), ``torch.cuda.set_sync_debug_mode("warn")`` over ``--steps``
   steps, counting the synchronizing operations it reports (target 0: the default checks
   run in the graph on a device, nothing is read back);
3. time: the float32 step at batch 256 against LibAUC 2.0.1's on the same GPU, interleaved
   rounds (``torch.cuda.synchronize`` around each round), ratio xrisk / LibAUC.

TensorFlow and JAX, for every loss on the same batch: the loss and its gradient with
respect to the scores (and the auxiliaries), compiled (``tf.function`` / ``jax.jit``), on
the GPU in float32, against the torch CPU float64 values (rtol 1e-3), and the state
placed on the GPU (the TF variables' device, the JAX arrays' devices).

Without a GPU the script says so, runs the checks that hold on the CPU, and exits 0:
each loss's step on torch's "meta" device (not host-readable, like a GPU: a tensor made
without ``device=`` lands on the CPU and fails there; reported, not fatal), ``Module.to``
moving every table, and the TensorFlow and JAX loss and gradient on the CPU against torch
(float64). The exit status is 1 when a GPU check fails (a mismatch, a table off the device,
a host sync); timings are printed, not judged.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _families import FAMILIES, select  # noqa: E402
from _libauc_shim import load_libauc  # noqa: E402
from _timing import interleaved, machine_load, paired_summary, step_runner  # noqa: E402

RTOL_F64, RTOL_F32 = 1e-9, 1e-3


def _where(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "xrisk" in f.filename]
    at = f" @ {frames[-1].filename.rsplit('xrisk/', 1)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}: {str(error).splitlines()[0][:110]}{at}"


def _held(loss: Any) -> dict[str, torch.Tensor]:
    held = dict(loss.named_buffers())
    held.update(loss.named_parameters())
    return held


# ---------------------------------------------------------------------------------------------
# torch
# ---------------------------------------------------------------------------------------------
def params_after(family: Any, device: str, dtype: torch.dtype, steps: int) -> tuple[list, Any]:
    built = family.build("xrisk", 64, None, device=device, dtype=dtype)
    for k in range(steps):
        built.step(built.batches[k % len(built.batches)])
    return [p.detach().to("cpu", torch.float64) for p in built.model.parameters()], built


def torch_gpu(family: Any, args: argparse.Namespace, lib: Any) -> tuple[list[str], str]:
    """Checks and the timing of one family on the GPU; returns (failures, printed row)."""
    failures = []
    want, _ = params_after(family, "cpu", torch.float64, args.steps)
    try:
        got, built = params_after(family, "cuda", torch.float64, args.steps)
        worst = max(float(((a - b).abs() / b.abs().clamp_min(1e-12)).max())
                    for a, b in zip(got, want, strict=True))
        if worst > RTOL_F64:
            failures.append(f"parameters differ from CPU float64 by {worst:.1e}")
        away = [k for k, t in _held(built.loss).items() if t.device.type != "cuda"]
        if away:
            failures.append(f"left the GPU: {away}")
    except Exception as error:  # noqa: BLE001  (report every family)
        return [f"GPU step failed: {_where(error)}"], "n/a"
    built = family.build("xrisk", 64, None, device="cuda")
    built.step(built.batches[0])
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for k in range(1, args.steps + 1):
                built.step(built.batches[k % len(built.batches)])
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # (the mode's own notice, "Synchronization debug mode is a prototype feature", comes at
    # its first use in a process: not a sync)
    syncs = [w for w in caught if "synchroniz" in str(w.message)
             and "debug mode is a prototype" not in str(w.message)]
    if syncs:
        where = sorted({f"{Path(w.filename).name}:{w.lineno}" for w in syncs})
        failures.append(f"{len(syncs)} host syncs in {args.steps} steps at {where}")
    row = "(no LibAUC)"
    if family.libauc and lib is not None:
        runs = {}
        for impl in ("xrisk", "libauc"):
            try:
                b = family.build(impl, 256, lib, device="cuda")
                for k in range(5):
                    b.step(b.batches[k % len(b.batches)])
            except Exception as error:  # noqa: BLE001  (LibAUC's own, e.g. a CPU table)
                if impl == "xrisk":
                    raise
                return failures, f"(LibAUC fails on the GPU: {_where(error)[:90]})"
            runs[impl] = step_runner(b.step, b.batches, args.time_steps, torch.cuda.synchronize)
        times = interleaved(runs, args.rounds)
        s = paired_summary(times["xrisk"], times["libauc"])
        row = (f"{s['a_med']:8.0f} µs vs LibAUC {s['b_med']:8.0f} µs: {s['ratio']:.2f}x "
               f"[{s['r_lo']:.2f}, {s['r_hi']:.2f}]")
    return failures, row


#: torch.optim's fused optimizers with the arithmetic of an xrisk one (no clip; coupled weight
#: decay, AdamW's decoupled): xrisk name and options, torch.optim class and options
#: (tests/test_optim_torch.py steps them on the CPU, in its layout and a GPU's).
FUSED_TWINS = [
    ("Adam", {}, torch.optim.Adam, {}),
    ("Adam", {"amsgrad": True, "weight_decay": 1e-2}, torch.optim.Adam,
     {"amsgrad": True, "weight_decay": 1e-2}),
    ("AdamW", {"weight_decay": 1e-2}, torch.optim.AdamW, {"weight_decay": 1e-2}),
    ("SGD", {"momentum": 0.9, "learning_rate": 0.1}, torch.optim.SGD,
     {"momentum": 0.9, "lr": 0.1}),
    ("SGD", {"momentum": 0.9, "nesterov": True, "learning_rate": 0.1, "weight_decay": 1e-3},
     torch.optim.SGD, {"momentum": 0.9, "nesterov": True, "lr": 0.1, "weight_decay": 1e-3}),
    ("SGD", {"learning_rate": 0.1}, torch.optim.SGD, {"lr": 0.1}),
]
#: An MLP's and a conv net's tensors: sizes from 1 to 0.3 M elements.
OPTIMIZER_SHAPES = [(512, 600), (512,), (64, 32, 3, 3), (64,), (64,), (1, 512), (1,)]


def _optimizer_steps(name: str, options: dict, device: str, dtype: torch.dtype,
                     baseline: Any = None, steps: int = 4) -> list[torch.Tensor]:
    """The parameters (on the CPU, float64) after ``steps`` steps of xrisk's ``name`` (or of
    ``baseline``, a torch.optim class, with ``fused=True``) on fixed random gradients."""
    import xrisk.torch as xr

    generator = torch.Generator().manual_seed(5)
    initial = [torch.randn(s, generator=generator, dtype=torch.float64)
               for s in OPTIMIZER_SHAPES]
    grads = [[torch.randn(s, generator=generator, dtype=torch.float64) * 0.5
              for s in OPTIMIZER_SHAPES] for _ in range(steps)]
    params = [v.to(device, dtype).requires_grad_() for v in initial]
    if baseline is not None:
        opt = baseline(params, fused=True, **options)
    else:
        loss = {"PESG": "AUCMLoss", "PDSCA": "CompositionalAUCLoss",
                "MIDAM": "AUCMLoss"}.get(name)
        extra = [getattr(xr, loss)().to(device, dtype)] if loss else []
        opt = getattr(xr, name)(params, *extra, **options)
    for step_grads in grads:
        for param, grad in zip(params, step_grads):
            param.grad = grad.to(device, dtype)
        opt.step()
    return [p.detach().to("cpu", torch.float64) for p in params]


def torch_optimizers_gpu(device: str = "cuda") -> list[str]:
    """The optimizers on the GPU (printed, failures returned): float32 steps on torch's fused
    kernels equal ``torch.optim``'s ``fused=True`` bit for bit where the arithmetic is the
    same; every optimizer's GPU steps against its CPU steps in the same dtype, within
    ``tol·(1 + |CPU|)`` (float32: 1e-5, the kernels' roundings differ; float64: 1e-12, and
    the share of elements equal bit for bit is printed)."""
    failures = []
    for name, options, baseline, baseline_options in FUSED_TWINS:
        got = _optimizer_steps(name, {"clip_value": math.inf, "weight_decay": 0.0} | options,
                               device, torch.float32)
        want = _optimizer_steps(name, baseline_options, device, torch.float32, baseline)
        equal = all(torch.equal(a, b) for a, b in zip(got, want))
        worst = max(float((a - b).abs().max()) for a, b in zip(got, want))
        label = f"{name} {options}"
        verdict = "== torch.optim fused" if equal else f"FAIL max |diff| {worst:.1e}"
        print(f"  {label:<75} {verdict}")
        if not equal:
            failures.append(f"optimizer {label}: float32 on the GPU != torch.optim fused=True")
    import xrisk

    for name in sorted(xrisk.OPTIMIZERS):
        options = ({"learning_rate": 0.1} if name in ("SGD", "LARS", "SONG", "MIDAM")
                   else {})
        try:
            steps = {dtype: (_optimizer_steps(name, options, "cpu", dtype),
                             _optimizer_steps(name, options, device, dtype))
                     for dtype in (torch.float32, torch.float64)}
        except Exception as error:  # noqa: BLE001  (report every optimizer)
            failures.append(f"optimizer {name}: {_where(error)}")
            print(f"  {name:<10} FAIL {_where(error)}")
            continue
        # |GPU - CPU| in units of the tolerance atol + rtol·|CPU| (<= 1: within it)
        units = {dtype: max(float(((a - b).abs() / (tol * (1 + b.abs()))).max())
                            for b, a in zip(*steps[dtype]))
                 for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12))}
        cpu64, gpu64 = steps[torch.float64]
        same = (sum(int((a == b).sum()) for a, b in zip(gpu64, cpu64))
                / sum(b.numel() for b in cpu64))
        bad = [str(dtype)[6:] for dtype, unit in units.items() if unit > 1]
        print(f"  {name:<10} GPU vs CPU / tolerance: float32 {units[torch.float32]:.2f} "
              f"(1e-5), float64 {units[torch.float64]:.2f} (1e-12; {same:.1%} of elements "
              f"equal)  {'ok' if not bad else 'FAIL'}")
        failures += [f"optimizer {name}: {what} GPU steps off the CPU's" for what in bad]
    return failures


def torch_cpu_side(family: Any) -> list[str]:
    """What holds without a GPU: Module.to moves every table; a step on "meta" stays there."""
    notes = []
    built = family.build("xrisk", 16, None)
    built.loss.to("meta")
    away = [k for k, t in _held(built.loss).items() if t.device.type != "meta"]
    if away:
        notes.append(f"Module.to('meta') left {away}")
    try:
        meta = family.build("xrisk", 16, None, device="meta")
        loss = meta.loss_call(meta.batches[0])
        loss.backward()
        away = [k for k, t in _held(meta.loss).items() if t.device.type != "meta"]
        if loss.device.type != "meta" or away:
            notes.append(f"meta step: loss on {loss.device}, tables off the device: {away}")
    except Exception as error:  # noqa: BLE001
        notes.append(f"meta step: {_where(error)}")
    return notes


# ---------------------------------------------------------------------------------------------
# TensorFlow and JAX: the loss and its gradient against torch's CPU float64
# ---------------------------------------------------------------------------------------------
def torch_reference(family: Any) -> tuple[dict, dict, dict, float, dict]:
    """The first batch's loss inputs (numpy, by name), their kinds, the constructor keywords,
    and torch's CPU float64 loss and gradients with respect to the score inputs."""
    built = family.build("xrisk", 64, None, dtype=torch.float64)
    definition = built.loss.definition
    captured: dict[str, Any] = {}
    original = built.loss.forward

    def capture(*inputs: Any, **named: Any) -> Any:
        captured.update(definition.bind(inputs, named))
        return original(*inputs, **named)

    built.loss.forward = capture
    built.loss_call(built.batches[0])
    del built.loss.forward
    kinds = {spec.name: spec.kind for spec in definition.inputs()}
    arrays = {k: v.detach().numpy() for k, v in captured.items() if v is not None}
    fresh = family.build("xrisk", 64, None, dtype=torch.float64).loss
    tensors = {k: torch.tensor(v, requires_grad=kinds[k] == "score") for k, v in arrays.items()}
    loss = fresh(**tensors)
    scores = [k for k in tensors if kinds[k] == "score"]
    grads = torch.autograd.grad(loss, [tensors[k] for k in scores])
    return (arrays, kinds, built.loss_kwargs, float(loss.detach()),
            {k: g.numpy() for k, g in zip(scores, grads, strict=True)})


def _compare(label: str, value: float, grads: dict, want_value: float, want: dict,
             rtol: float) -> list[str]:
    out = []
    scale = max(abs(want_value), 1e-12)
    if not abs(value - want_value) <= rtol * scale + 1e-9:
        out.append(f"{label}: loss {value:.6e} vs torch {want_value:.6e}")
    for key, expected in want.items():
        got = np.asarray(grads[key], dtype=np.float64)
        bound = rtol * max(float(np.abs(expected).max()), 1e-12) + 1e-9
        if not np.all(np.abs(got - expected) <= bound):
            out.append(f"{label}: d/d{key} differs by {float(np.abs(got - expected).max()):.1e}")
    return out


def tensorflow_check(family: Any, ref: tuple, device: str, dtype: str) -> list[str]:
    import tensorflow as tf

    import xrisk.tensorflow as xtf

    arrays, kinds, ctor, want_value, want = ref
    with tf.device(device):
        loss_fn = getattr(xtf, family.loss)(**ctor, dtype=dtype, device=device)
        named = {k: tf.constant(v.astype(dtype) if kinds[k] == "score" else v)
                 for k, v in arrays.items()}
        scores = [k for k in arrays if kinds[k] == "score"]

        @tf.function
        def step(named: dict) -> Any:
            with tf.GradientTape() as tape:
                tape.watch([named[k] for k in scores])
                loss = loss_fn(**named)
            return loss, tape.gradient(loss, [named[k] for k in scores])

        loss, grads = step(named)
    out = _compare(f"tensorflow {device}", float(loss),
                   {k: g.numpy() for k, g in zip(scores, grads, strict=True)}, want_value, want,
                   RTOL_F32 if dtype == "float32" else 1e-7)
    want_spec = tf.DeviceSpec.from_string(device)

    def placed(variable: Any) -> bool:
        spec = tf.DeviceSpec.from_string(variable.device)
        return (spec.device_type == want_spec.device_type
                and (spec.device_index or 0) == (want_spec.device_index or 0))

    away = [v.name for v in loss_fn.variables if not placed(v)]
    if away:
        out.append(f"tensorflow: variables off {device}: {away}")
    return out


def jax_check(family: Any, ref: tuple, device: Any, dtype: str) -> list[str]:
    import jax

    import xrisk.jax as xjax

    arrays, kinds, ctor, want_value, want = ref
    loss_fn = getattr(xjax, family.loss)(**ctor, dtype=dtype, device=device)
    state, params = loss_fn.init(), loss_fn.init_params()
    named = {k: jax.device_put(v.astype(dtype) if kinds[k] == "score" else v, device)
             for k, v in arrays.items()}
    scores = {k: named.pop(k) for k in list(named) if kinds[k] == "score"}

    def objective(scores: dict, params: Any, state: Any, named: dict) -> Any:
        return loss_fn.apply(state, **scores, **named, params=params)

    (loss, new_state), (grads, _) = jax.jit(jax.value_and_grad(
        objective, argnums=(0, 1), has_aux=True))(scores, params, state, named)
    out = _compare(f"jax {device.platform}", float(loss), grads, want_value, want,
                   RTOL_F32 if dtype == "float32" else 1e-7)
    away = [i for i, leaf in enumerate(jax.tree_util.tree_leaves(new_state))
            if device not in leaf.devices()]
    if away:
        out.append(f"jax: state leaves off {device}: {away}")
    return out


# ---------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--families", default="all",
                        help=f"comma-separated or 'all', from {[f.name for f in FAMILIES]}")
    parser.add_argument("--frameworks", default="torch,tensorflow,jax")
    parser.add_argument("--steps", type=int, default=3, help="steps compared and sync-checked")
    parser.add_argument("--rounds", type=int, default=7, help="timing: interleaved rounds")
    parser.add_argument("--time-steps", type=int, default=10, help="timing: steps per round")
    args = parser.parse_args(argv)
    args.families = select(args.families)
    args.frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    if set(args.frameworks) - {"torch", "tensorflow", "jax"}:
        parser.error(f"--frameworks: got {args.frameworks}; expected torch,tensorflow,jax")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    installed = [f for f in args.frameworks if importlib.util.find_spec(f) is not None]
    start = time.perf_counter()
    has_cuda = torch.cuda.is_available()
    print(f"torch {torch.__version__}; frameworks {installed}; {machine_load()}")
    if has_cuda:
        print(f"GPU: {torch.cuda.get_device_name(0)}")
    else:
        print("No GPU here (torch.cuda.is_available() is False): running the CPU-side checks "
              "only; the GPU checks and timings need a CUDA machine.")
    failures: list[str] = []
    lib = load_libauc() if has_cuda else None
    if "torch" in installed:
        print("\n-- torch" + (": GPU float64 vs CPU float64, host syncs, step vs LibAUC "
                              "(float32, batch 256)" if has_cuda else
                              ": CPU-side (Module.to, a step on the meta device)"))
        for family in args.families:
            if has_cuda:
                bad, row = torch_gpu(family, args, lib)
                failures += [f"torch {family.name}: {b}" for b in bad]
                print(f"  {family.name:<22}{'ok' if not bad else 'FAIL'}  {row}")
                for b in bad:
                    print(f"      {b}")
            else:
                notes = torch_cpu_side(family)
                print(f"  {family.name:<22}{'ok' if not notes else 'device-less tensor'}")
                for note in notes:
                    print(f"      {note}")
    if "torch" in installed and has_cuda:
        print("\n-- torch optimizers: fused float32 steps vs torch.optim(fused=True), GPU vs "
              "CPU")
        failures += torch_optimizers_gpu()
    compiled = [f for f in ("tensorflow", "jax") if f in installed]
    if compiled:
        if "tensorflow" in compiled:
            import tensorflow as tf
            tf.get_logger().setLevel("ERROR")  # one tf.function per loss: retracing is expected
            tf_gpu = bool(tf.config.list_physical_devices("GPU"))
        if "jax" in compiled:
            import jax
            jax.config.update("jax_enable_x64", True)  # the CPU float64 comparison
            jax_gpus = [d for d in jax.devices() if d.platform == "gpu"] \
                if jax.default_backend() == "gpu" else []
        print("\n-- TensorFlow / JAX: compiled loss + gradient against torch CPU float64")
        for family in args.families:
            ref = torch_reference(family)
            problems: list[str] = []
            on_gpu: list[str] = []
            for framework in compiled:
                try:
                    if framework == "tensorflow":
                        if tf_gpu:
                            on_gpu += tensorflow_check(family, ref, "/GPU:0", "float32")
                        problems += tensorflow_check(family, ref, "/CPU:0", "float64")
                    else:
                        if jax_gpus:
                            on_gpu += jax_check(family, ref, jax_gpus[0], "float32")
                        problems += jax_check(family, ref, jax.devices("cpu")[0], "float64")
                except Exception as error:  # noqa: BLE001
                    problems.append(f"{framework}: {_where(error)}")
            failures += [f"{family.name}: {p}" for p in on_gpu]
            failures += [f"{family.name}: {p}" for p in problems]
            print(f"  {family.name:<22}{'ok' if not (problems or on_gpu) else 'FAIL'}")
            for p in problems + on_gpu:
                print(f"      {p}")
    print(f"\n(total {time.perf_counter() - start:.0f} s; {machine_load()})")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
