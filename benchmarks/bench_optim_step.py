"""Time and peak memory of one ``optimizer.step()`` of the xrisk torch optimizers.

Each xrisk optimizer is timed against ``torch.optim``'s nearest optimizer with
``foreach=True`` (Adam for the Adam modes, AdamW for AdamW, momentum SGD for the SGD modes,
PESG, PDSCA, MIDAM and LARS; the column ``/base``), against torch.optim doing the rule's own
arithmetic (``/base+``, below) and against LibAUC 2.0.1's optimizer of the same name, on an MLP
and a small conv net (with batch norms: many small tensors) of about 0.1 M, 1 M and 10 M
float32 parameters (``--large`` adds 25 M), with fixed random gradients, one thread and all
threads::

    python benchmarks/bench_optim_step.py
    python benchmarks/bench_optim_step.py --all --large --threads 1
    python benchmarks/bench_optim_step.py --threads 1 --clock cpu  # on a loaded machine
    git show HEAD~3:adapters/torch/optim.py > /tmp/old_optim.py  # before / after a change:
    python benchmarks/bench_optim_step.py --threads 1 --clock cpu --old /tmp/old_optim.py
    python benchmarks/bench_optim_step.py ... --old /tmp/old_optim.py --old-first  # the other order

The three optimizers of a row run in alternation (round 1 of each, then round 2, ...; each
round starts with the next one, so none always runs after the same other) on three copies of
the model; the ratios are medians over the rounds of the paired ratios (xrisk / torch.optim,
xrisk / LibAUC). Targets: xrisk <= 1.1x torch.optim doing the same arithmetic and <= 0.8x
LibAUC. The rules do arithmetic torch.optim's Adam and SGD lack: the clipped ones clip the
gradient, PESG and PDSCA add an epoch decay and sum the iterates, LARS scales each tensor's
step by a trust ratio, and the min-max rules (PESG, PDSCA, MIDAM) also step their loss's a
and b and ascend its α. Every row also times :class:`WithRuleExtras` (the baseline with
that arithmetic added in torch.optim's own style) or :class:`ForeachLARS` and prints xrisk /
it as ``/base+``, the ratio the verdict reads; ``/base`` is the plain baseline. ``--old`` adds a
fourth: the same optimizer from another copy of ``adapters/torch/optim.py`` (e.g. from git
history), with the paired ratio xrisk / old in the column ``/old``.

Peak memory: the step's transient bytes (peak resident memory during one step, reset with
``/proc/self/clear_refs``, minus the resident memory before it), as a multiple of the
parameters' bytes. glibc's mmap threshold is fixed at 128 KiB, so every buffer of 128 KiB or
more is mapped at allocation and unmapped at its release, and smaller ones are reused from a
heap that is never trimmed: the figure counts the buffers of 128 KiB or more (read it from
1 M parameters on). Target: no more than torch.optim's + 0.1x. The script exits with status 1
when a target fails (LibAUC's only when LibAUC is installed:
``pip install libauc==2.0.1 --no-deps``).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import importlib.util
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import import_frameworks, paired_ratio  # noqa: E402

# Every buffer of 128 KiB or more gets its own mapping, given back at free, so the resident set
# follows the live large buffers; the heap of the smaller ones is never trimmed (no page
# faults on reuse). Must run before torch allocates.
_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallopt(-3, 1 << 17)  # M_MMAP_THRESHOLD
_LIBC.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD

import torch  # noqa: E402

import xrisk  # noqa: E402
import xrisk.torch as xr  # noqa: E402

SIZES = (100_000, 1_000_000, 10_000_000)
LARGE = 25_000_000
TORCH_TARGET = 1.1
LIBAUC_TARGET = 0.8
MEMORY_SLACK = 0.1  # transient bytes / parameter bytes above torch.optim's

# name, xrisk constructor kwargs, the torch.optim baseline with the same arithmetic (class,
# kwargs), LibAUC's kwargs; "loss" marks the min-max optimizers (they take a loss).
ADAM = (torch.optim.Adam, {"lr": 1e-3, "weight_decay": 1e-5, "foreach": True})
SGD_M = (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1,
                           "weight_decay": 1e-5, "foreach": True})
CASES: list[tuple[str, str, dict[str, Any], tuple[type, dict[str, Any]], bool]] = [
    # (label, xrisk name, kwargs, baseline, representative)
    ("SOAP adam", "SOAP", {"mode": "adam"}, ADAM, True),
    ("SOAP sgd", "SOAP", {"mode": "sgd", "learning_rate": 0.1}, SGD_M, True),
    ("SOPA adam", "SOPA", {"mode": "adam"}, ADAM, False),
    ("SOPA sgd", "SOPA", {"mode": "sgd", "learning_rate": 0.1}, SGD_M, False),
    ("SOPAs adam", "SOPAs", {"mode": "adam"}, ADAM, False),
    ("SOPAs sgd", "SOPAs", {"mode": "sgd", "learning_rate": 0.1}, SGD_M, False),
    ("SOTAs adam", "SOTAs", {"mode": "adam"}, ADAM, False),
    ("SOTAs sgd", "SOTAs", {"mode": "sgd", "learning_rate": 0.1}, SGD_M, False),
    ("STACO adam", "STACO", {"mode": "adam"}, ADAM, False),
    ("STACO sgd", "STACO", {"mode": "sgd", "learning_rate": 0.1}, SGD_M, False),
    ("SONG adam", "SONG", {"mode": "adam", "learning_rate": 1e-3}, ADAM, False),
    ("SONG sgd", "SONG", {"learning_rate": 0.1}, SGD_M, False),
    ("Adam", "Adam", {}, ADAM, True),
    ("AdamW", "AdamW", {}, (torch.optim.AdamW, {"lr": 1e-3, "weight_decay": 1e-2,
                                                  "foreach": True}), False),
    ("SGD", "SGD", {"learning_rate": 0.1, "momentum": 0.9}, SGD_M, False),
    ("PESG sgd", "PESG", {"epoch_decay": 2e-3}, SGD_M, True),
    ("PESG adam", "PESG", {"mode": "adam", "learning_rate": 1e-3}, ADAM, False),
    ("PDSCA", "PDSCA", {}, SGD_M, True),
    # MIDAM: buf ← μ·buf + (1 - μ)·d, no weight decay: torch's SGD with dampening μ
    ("MIDAM", "MIDAM", {"learning_rate": 0.1, "momentum": 0.9},
     (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.9, "foreach": True}), True),
    ("LARS", "LARS", {"learning_rate": 0.1}, SGD_M, True),
]
# LibAUC's spelling of the same configuration (lr for learning_rate, device for its buffers).
LIBAUC_RENAMES = {"learning_rate": "lr"}


def mlp(num_params: int) -> torch.nn.Module:
    """Four square hidden layers and a head: about ``num_params`` parameters."""
    width = max(8, round(math.sqrt(num_params / 4)))
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))


def convnet(num_params: int) -> torch.nn.Module:
    """Eight 3x3 conv + batch-norm blocks and a head: about ``num_params`` parameters in
    ~26 tensors, most of them small."""
    channels = max(4, round(math.sqrt(num_params / 72)))
    layers: list[torch.nn.Module] = [torch.nn.Conv2d(3, channels, 3)]
    for _ in range(8):
        layers += [torch.nn.Conv2d(channels, channels, 3, padding=1),
                   torch.nn.BatchNorm2d(channels), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(channels, 1))


MODELS: dict[str, Callable[[int], torch.nn.Module]] = {"MLP": mlp, "conv": convnet}


def with_gradients(model: torch.nn.Module, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    params = list(model.parameters())
    for param in params:
        param.grad = (torch.randn(param.shape, generator=generator) * 0.01).to(param.device)
    return params


#: The device of the benchmark's models (``--device``).
DEVICE = torch.device("cpu")


def aux_gradients(loss: Any) -> None:
    for name in ("a", "b", "alpha"):
        tensor = getattr(loss, name)
        tensor.grad = torch.full_like(tensor, 0.01)


class WithRuleExtras:
    """A torch.optim optimizer (foreach) plus, written as torch.optim writes its updates
    (foreach operators, ``alpha=`` forms, in place on the gradients as
    ``torch.nn.utils.clip_grad_value_`` does), the arithmetic an xrisk rule adds to it: the
    gradient clipped to [-clip, clip], PESG's and PDSCA's epoch decay ``+ epoch_decay·(θ -
    θ_ref)`` and the running sum of the iterates; for a min-max rule the loss's a and b are
    parameters too and ``ascent`` steps α after them (see :func:`auc_margin_ascent`). It is
    "torch.optim doing the same arithmetic" (the column ``/base+``): plain momentum SGD does
    4 passes over the parameters, with PESG's extras 8. torch.optim's momentum (μ·buf +
    (1 - dampening)·d) takes the same operators as the rules' EMA ((1 - μ)·buf + μ·d)."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, clip: float,
                 epoch_decay: float, ascent: Callable[[], None] | None = None) -> None:
        self.optimizer = optimizer
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.clip, self.epoch_decay, self.ascent = clip, epoch_decay, ascent
        self.reference = [p.detach().clone() for p in self.params] if epoch_decay else []
        self.iterate_sum = [torch.zeros_like(p) for p in self.params] if epoch_decay else []

    def step(self) -> None:
        with torch.no_grad():
            grads = [p.grad for p in self.params]
            if self.clip != math.inf:
                torch._foreach_clamp_min_(grads, -self.clip)
                torch._foreach_clamp_max_(grads, self.clip)
            if self.epoch_decay > 0:
                torch._foreach_add_(grads, torch._foreach_sub(self.params, self.reference),
                                    alpha=self.epoch_decay)
            self.optimizer.step()
            if self.epoch_decay > 0:
                torch._foreach_add_(self.iterate_sum, self.params)
            if self.ascent is not None:
                self.ascent()


class ForeachLARS:
    """LARS (:class:`xrisk.optim.LARS`'s arithmetic: ``d = g + λθ``, ``q = c‖θ‖/‖d‖``,
    ``buf ← μ·buf + η·q·d``, ``θ ← θ - buf``; vectors and scalars unscaled) written as
    torch.optim writes an optimizer: foreach operators, ``torch._foreach_norm`` for the
    norms, the direction a new list of tensors (torch.optim's SGD makes one for its weight
    decay too). torch.optim has no LARS: this is "torch.optim doing the same arithmetic"
    for the LARS row (the column ``/base+``)."""

    def __init__(self, params: list[torch.Tensor], *, lr: float, momentum: float,
                 weight_decay: float, trust_coefficient: float, exclude_1d: bool) -> None:
        self.scaled = [p for p in params if not (exclude_1d and p.ndim <= 1)]
        self.plain = [p for p in params if exclude_1d and p.ndim <= 1]
        self.lr, self.momentum = lr, momentum
        self.weight_decay, self.trust = weight_decay, trust_coefficient
        self.buffers: list[torch.Tensor] = []

    def step(self) -> None:
        with torch.no_grad():
            grads = [p.grad for p in self.scaled]
            decayed = (torch._foreach_add(grads, self.scaled, alpha=self.weight_decay)
                       if self.weight_decay > 0 else grads)
            p_norms = torch.stack(torch._foreach_norm(self.scaled))
            d_norms = torch.stack(torch._foreach_norm(decayed))
            trusted = (p_norms > 0) & (d_norms > 0)
            factors = torch.where(trusted, self.trust * p_norms / torch.where(
                trusted, d_norms, torch.ones_like(d_norms)), torch.ones_like(p_norms))
            scalars = (factors * self.lr).tolist()
            if decayed is grads:  # a new list: the gradients stay the caller's
                directions = torch._foreach_mul(grads, scalars)
            else:
                directions = decayed
                torch._foreach_mul_(directions, scalars)
            directions += torch._foreach_mul([p.grad for p in self.plain], self.lr)
            params = self.scaled + self.plain
            if self.momentum <= 0:
                torch._foreach_sub_(params, directions)
            elif not self.buffers:
                self.buffers = directions
                torch._foreach_sub_(params, self.buffers)
            else:
                torch._foreach_mul_(self.buffers, self.momentum)
                torch._foreach_add_(self.buffers, directions)
                torch._foreach_sub_(params, self.buffers)


def auc_margin_ascent(loss: Any, lr: float) -> Callable[[], None]:
    """The projected ascent on α of the AUC-margin min-max losses, as a torch.optim user
    writes it: ``α ← max(α + lr·(2(m + b - a) - 2α), 0)`` (the rules' ascent)."""
    a, b, alpha = loss.a, loss.b, loss.alpha
    margin = loss.definition.margin

    def ascent() -> None:
        with torch.no_grad():
            alpha.add_(2 * (margin + b - a) - 2 * alpha, alpha=lr).clamp_(min=0)
    return ascent


def make_loss(name: str) -> Any:
    """The loss the min-max optimizer ``name`` takes in this benchmark, with gradients on its
    a, b and α; None for the other optimizers."""
    if name not in ("PESG", "PDSCA", "MIDAM"):
        return None
    loss = (xr.CompositionalAUCLoss() if name == "PDSCA" else
            xr.MIDAM_attention_pooling_loss(num_samples=8) if name == "MIDAM" else
            xr.AUCMLoss())
    loss.to(DEVICE)
    aux_gradients(loss)
    return loss


def same_arithmetic(label: str, name: str, rule: Any, model: torch.nn.Module,
                    baseline: tuple[type, dict[str, Any]]) -> Callable[[], Any]:
    """The step of torch.optim doing ``rule``'s arithmetic on ``model`` (the column
    ``/base+``): the rule's clip, epoch decay and iterate sum, and for a min-max rule the
    loss's a, b stepped with the model and the ascent on α."""
    params = with_gradients(model, 0)
    loss = make_loss(name)
    ascent = None
    if loss is not None:
        params += [loss.a, loss.b]
        ascent = auc_margin_ascent(loss, baseline[1]["lr"])
    if label == "LARS":
        return ForeachLARS(params, lr=rule.learning_rate, momentum=rule.momentum,
                           weight_decay=rule.weight_decay,
                           trust_coefficient=rule.trust_coefficient,
                           exclude_1d=rule.exclude_1d).step
    optimizer_class, kwargs = baseline
    return WithRuleExtras(optimizer_class(params, **kwargs),
                          clip=getattr(rule, "clip_value", math.inf),
                          epoch_decay=getattr(rule, "epoch_decay", 0.0), ascent=ascent).step


def build(case: tuple, model_fn: Callable[[], torch.nn.Module], libauc: Any,
          old: Any = None, old_first: bool = False) -> dict[str, Callable[[], Any]]:
    """``{"xrisk": step, "torch": step, "LibAUC": step}`` over three copies of the model
    (and ``"old"``: the optimizer of the module ``old`` on a fourth, built before xrisk's
    with ``old_first``)."""
    label, name, kwargs, (baseline, baseline_kwargs), _ = case
    steps: dict[str, Callable[[], Any]] = {}
    pairs = (("xrisk", xr), ("old", old))
    for key, module in pairs[::-1] if old_first else pairs:
        if module is None:
            continue
        params = with_gradients(model_fn(), 0)
        loss = make_loss(name)
        steps[key] = getattr(module, name)(params, *[loss] if loss else [], **kwargs).step
    steps["torch"] = baseline(with_gradients(model_fn(), 0), **baseline_kwargs).step
    steps["torch+"] = same_arithmetic(label, name, steps["xrisk"].__self__.rule, model_fn(),
                                      (baseline, baseline_kwargs))
    steps = {key: steps[key] for key in ("xrisk", "old") if key in steps} | steps
    if libauc is not None:
        params = with_gradients(model_fn(), 0)
        options = {LIBAUC_RENAMES.get(k, k): v for k, v in kwargs.items()}
        if name in ("PESG", "PDSCA", "MIDAM"):
            loss = (libauc.losses.CompositionalAUCLoss(device=DEVICE) if name == "PDSCA"
                    else libauc.losses.AUCMLoss(device=DEVICE))
            aux_gradients(loss)
            options.update(loss_fn=loss, device=DEVICE)
            if name == "PESG":
                options["verbose"] = False
        elif name != "LARS":
            options.update(verbose=False, device=DEVICE)
        if name == "SONG":  # LibAUC's SONG has no learning-rate default either
            options.setdefault("lr", 0.1)
        steps["LibAUC"] = getattr(libauc.optimizers, name)(params, **options).step
    return steps


def rss(key: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def transient_bytes(step: Callable[[], Any]) -> int:
    """Peak resident bytes of one step above those before it (on a GPU: the peak of
    torch's allocator above the bytes allocated before the step)."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM to the current resident set
    before = rss("VmRSS:")
    step()
    return rss("VmHWM:") - before


def synchronized_clock() -> float:
    """The wall clock once the GPU's queued work is done (a round's time is its steps')."""
    torch.cuda.synchronize()
    return time.perf_counter()


def time_rounds(steps: dict[str, Callable[[], Any]], repeats: int,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds per step of each optimizer in each round (alternating, each round starting
    one further along, after a warm-up), by ``clock`` (wall time, or the thread's CPU time:
    see ``--clock``)."""
    for step in steps.values():
        step()
        step()
    start = clock()
    steps["torch"]()
    per_round = max(1, min(20, round(0.05 / max(clock() - start, 1e-6))))
    times: dict[str, list[float]] = {k: [] for k in steps}
    keys = list(steps)
    for round_ in range(repeats):
        shift = round_ % len(keys)  # who runs after whom (its cache, its heap) changes
        for key in keys[shift:] + keys[:shift]:
            step = steps[key]
            start = clock()
            for _ in range(per_round):
                step()
            times[key].append((clock() - start) / per_round)
    return times


def mlp_shapes(num_params: int) -> list[tuple[int, ...]]:
    """The shapes of :func:`mlp`'s parameters (for JAX and Keras)."""
    return [tuple(p.shape) for p in mlp(num_params).parameters()]


def jax_steps(shapes: list[tuple[int, ...]]) -> dict[str, Callable[[], Any]]:
    """``{"SOAP adam|xrisk": step, "SOAP adam|optax": step, "SOAP adam|optax+": step, ...}``:
    ``jax.jit`` steps (update and apply, state donated) of xrisk's SOAP against
    ``optax.adam`` / ``optax.sgd`` with the same weight decay (optax.add_decayed_weights),
    and (``+``) with SOAP's clip too (optax.clip: the same arithmetic), on fixed random
    gradients."""
    import jax
    import jax.numpy as jnp
    import optax

    import xrisk.jax as xj

    keys = jax.random.split(jax.random.key(0), len(shapes))
    params = [jax.random.normal(k, s, jnp.float32) * 0.1 for k, s in zip(keys, shapes)]
    grads = [g * 0.01 for g in params]
    clip = xrisk.SOAP().clip_value
    pairs = {
        "SOAP adam": (xj.SOAP(learning_rate=1e-3), optax.adam(1e-3)),
        "SOAP sgd": (xj.SOAP(learning_rate=0.1, mode="sgd"), optax.sgd(0.1, 0.9)),
    }
    steps: dict[str, Callable[[], Any]] = {}
    for label, (ours, theirs) in pairs.items():
        decayed = optax.chain(optax.add_decayed_weights(1e-5), theirs)
        clipped = optax.chain(optax.clip(clip), optax.add_decayed_weights(1e-5), theirs)
        for who, transformation in (("xrisk", ours), ("optax", decayed), ("optax+", clipped)):
            @functools.partial(jax.jit, donate_argnums=(0, 1))
            def step(params, state, transformation=transformation):
                updates, state = transformation.update(grads, state, params)
                return optax.apply_updates(params, updates), state

            holder = [[jnp.array(p) for p in params], transformation.init(params)]

            def run(step=step, holder=holder):
                holder[0], holder[1] = step(*holder)
                jax.block_until_ready(holder[0])

            steps[f"{label}|{who}"] = run
    return steps


def keras_steps(shapes: list[tuple[int, ...]]) -> dict[str, Callable[[], Any]]:
    """xrisk's Keras SOAP and Adam against ``keras.optimizers.Adam`` / ``SGD`` (momentum),
    coupled weight decay off (Keras's ``weight_decay`` is decoupled), in the three ways a
    Keras user runs an optimizer: ``apply_gradients`` under ``tf.function`` on fixed random
    gradients (``fn``), ``model.train_on_batch`` (``fit``: the compiled train step of
    ``model.fit``, no XLA on a CPU-only machine, fresh gradients each step; an MLP of the
    same layers, batch 8, so the optimizer dominates) and ``apply_gradients`` eagerly
    (``eager``); ``Keras+`` is Keras's optimizer with the xrisk rule's clip (``clipvalue``: the
    same arithmetic). TensorFlow's default CPU allocator maps every new full-size tensor afresh
    and gives it back when freed, so its first touch page-faults: an optimizer pays for
    each new full-size tensor it makes (``TF_CPU_ALLOCATOR_USE_BFC=true`` keeps them)."""
    import keras
    import numpy as np
    import tensorflow as tf

    import xrisk.tensorflow as xt

    generator = tf.random.Generator.from_seed(0)
    clip = xrisk.SOAP().clip_value
    if xrisk.Adam().clip_value != clip:
        raise RuntimeError("xrisk.Adam's default clip is not SOAP's: give Keras+ its own")
    pairs = {
        "SOAP adam": (lambda: xt.SOAP(learning_rate=1e-3, weight_decay=0.0),
                      lambda: keras.optimizers.Adam(1e-3),
                      lambda: keras.optimizers.Adam(1e-3, clipvalue=clip)),
        "Adam": (lambda: xt.Adam(learning_rate=1e-3), lambda: keras.optimizers.Adam(1e-3),
                 lambda: keras.optimizers.Adam(1e-3, clipvalue=clip)),
        "SOAP sgd": (lambda: xt.SOAP(learning_rate=0.1, mode="sgd", weight_decay=0.0,
                                     dampening=0.0),
                     lambda: keras.optimizers.SGD(0.1, momentum=0.9),
                     lambda: keras.optimizers.SGD(0.1, momentum=0.9, clipvalue=clip)),
    }
    width = shapes[0][0]
    inputs = np.random.default_rng(0).normal(size=(8, width)).astype("float32")
    targets = np.ones((8, 1), "float32")
    steps: dict[str, Callable[[], Any]] = {}
    for mode in ("fn", "fit", "eager"):
        for label, makers in pairs.items():
            for who, make in zip(("xrisk", "Keras", "Keras+"), makers):
                if mode == "fit":
                    keras.utils.set_random_seed(0)
                    model = keras.Sequential([
                        keras.Input((width,)),
                        *(keras.layers.Dense(s[1], activation="relu") for s in shapes[:-2:2]),
                        keras.layers.Dense(1)])
                    model.compile(optimizer=make(), loss="mse")
                    steps[f"{label} {mode}|{who}"] = functools.partial(
                        model.train_on_batch, inputs, targets)
                    continue
                variables = [tf.Variable(generator.normal(s) * 0.1) for s in shapes]
                grads = [tf.constant(generator.normal(s) * 0.01) for s in shapes]
                optimizer = make()

                def apply(optimizer=optimizer, variables=variables, grads=grads):
                    optimizer.apply_gradients(zip(grads, variables))

                step = tf.function(apply) if mode == "fn" else apply

                def run(step=step, variables=variables):
                    step()
                    variables[0].numpy()

                steps[f"{label} {mode}|{who}"] = run
    return steps


def page_faults(step: Callable[[], Any]) -> float:
    """Minor page faults of one step (mean of two)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step()
    step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 2


def other_frameworks(args: argparse.Namespace) -> list[str]:
    """Rows of JAX (optax) and Keras, MLP only, all threads (Keras with ``--clock cpu``: one
    thread, the process's CPU time), with the page faults of a step (a new buffer's first
    touch); returns the failed rows."""
    failed = []
    for framework in (f for f in args.frameworks if f != "torch"):
        clock = time.perf_counter
        if framework == "tensorflow" and args.clock == "cpu":
            import tensorflow as tf  # before its first operation, which fixes the pools

            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
            clock = time.process_time
        maker = {"jax": jax_steps, "tensorflow": keras_steps}[framework]
        baseline = {"jax": "optax", "tensorflow": "Keras"}[framework]
        for size in args.sizes:
            shapes = mlp_shapes(size)
            count = sum(math.prod(s) for s in shapes)
            steps = maker(shapes)
            for label in dict.fromkeys(key.split("|")[0] for key in steps):
                pair = {"xrisk": steps[f"{label}|xrisk"], "torch": steps[f"{label}|{baseline}"],
                        "torch+": steps[f"{label}|{baseline}+"]}
                times = time_rounds(pair, args.repeats, clock)
                faults = {k: page_faults(step) for k, step in pair.items()}
                ratio = paired_ratio(times["torch"], times["xrisk"])
                plus = paired_ratio(times["torch+"], times["xrisk"])  # the target's reading
                verdict = "PASS" if plus <= TORCH_TARGET else f"FAIL {baseline}+"
                if plus > TORCH_TARGET:
                    failed.append(f"{framework} {count} {label}")
                print(f"{'all':>3} {framework[:5]:<5} {count / 1e6:>6.2f}M {label:<11} "
                      f"{statistics.median(times['xrisk']) * 1e3:>9.2f} "
                      f"{statistics.median(times['torch']) * 1e3:>9.2f} {'':>10} "
                      f"{ratio:>7.2f} {'':>8} {'':>6} {'':>7} {plus:>6.2f}  {verdict} "
                      f"(vs {baseline}; page faults {faults['xrisk']:.0f} / "
                      f"{faults['torch']:.0f} / {faults['torch+']:.0f})", flush=True)
    return failed


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--threads", default=f"1,{torch.get_num_threads()}",
                        help="comma-separated thread counts (torch.set_num_threads)")
    parser.add_argument("--models", default="MLP,conv")
    parser.add_argument("--sizes", default=",".join(f"{n:.0e}" for n in SIZES))
    parser.add_argument("--large", action="store_true", help=f"add {LARGE:.1e} parameters")
    parser.add_argument("--all", action="store_true",
                        help="every optimizer and mode (default: one of each update rule; "
                             "SOPA, SOPAs, SOTAs, STACO, SONG, SGD share SOAP's code path)")
    parser.add_argument("--only", default="", help="comma-separated row labels to run")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--no-libauc", action="store_true")
    parser.add_argument("--old", default="",
                        help="path of another copy of adapters/torch/optim.py (e.g. from git "
                             "history): its optimizers run in the rounds too, and the "
                             "columns /old and old x give xrisk / old and its memory")
    parser.add_argument("--old-first", action="store_true",
                        help="build the --old optimizer (its model, state) before xrisk's: at "
                             "0.1 M parameters the one built first ran ~5%% slower (memory "
                             "placement, the same code either way); take the geometric mean "
                             "of a run in each order")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time, or the CPU time of the timing thread (steadier on a "
                             "machine shared with other jobs; one thread only; the Keras rows "
                             "then run TensorFlow on one intra-op and one inter-op thread, "
                             "timed by the process's CPU time)")
    parser.add_argument("--device", default="cpu",
                        help="the torch rows' device, e.g. cuda (a GPU: wall clock, "
                             "synchronized around each round; memory from torch's allocator)")
    parser.add_argument("--frameworks", default="torch",
                        help="comma-separated among torch,jax,tensorflow (JAX: xrisk's optax "
                             "transformation against optax.adam/sgd under jit; tensorflow: "
                             "the Keras optimizer against keras.optimizers.Adam/SGD, under "
                             "tf.function (fn), in model.train_on_batch (fit) and eagerly)")
    args = parser.parse_args(argv)
    args.frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    if args.old_first and not args.old:
        parser.error("--old-first: no --old; expected --old PATH with it. Fix: add --old "
                     "/tmp/old_optim.py, or drop --old-first.")
    if args.old and not os.path.isfile(args.old):
        parser.error(f"--old: got {args.old!r}, which is not a file; expected the path of a "
                     "copy of adapters/torch/optim.py. Fix: git show "
                     "REV:adapters/torch/optim.py > /tmp/old_optim.py; --old /tmp/old_optim.py")
    unknown = sorted(set(args.frameworks) - {"torch", "jax", "tensorflow"})
    if unknown:
        parser.error(f"--frameworks: got {unknown}; expected names from torch,jax,tensorflow")
    args.threads = [int(t) for t in args.threads.split(",")]
    args.device = torch.device(args.device)
    if args.device.type != "cpu" and (args.clock == "cpu" or args.frameworks != ["torch"]):
        parser.error(f"--device {args.device} with --clock {args.clock} and --frameworks "
                     f"{','.join(args.frameworks)}: a GPU's rows are torch's, timed by the wall "
                     "clock. Fix: --device cuda --clock wall --frameworks torch.")
    if args.clock == "cpu" and (any(t != 1 for t in args.threads)
                                or not set(args.frameworks) <= {"torch", "tensorflow"}):
        parser.error(f"--clock cpu with --threads {','.join(map(str, args.threads))} and "
                     f"--frameworks {','.join(args.frameworks)}: the CPU time of the timing "
                     "thread misses the work of the others. Fix: --clock cpu --threads 1 "
                     "--frameworks torch,tensorflow, or --clock wall.")
    args.sizes = [int(float(n)) for n in args.sizes.split(",")] + ([LARGE] if args.large else [])
    args.models = [m.strip() for m in args.models.split(",")]
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    args.cases = [c for c in CASES if (args.all or c[4] or c[0] in only)
                  and (not only or c[0] in only)]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import_frameworks(args.frameworks)
    libauc = None
    if not args.no_libauc and "torch" in args.frameworks:
        try:
            from _libauc_shim import load_libauc
            libauc = load_libauc()
        except ImportError:
            from _libauc_shim import MISSING_MESSAGE
            print(MISSING_MESSAGE)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    global DEVICE
    DEVICE = args.device
    if DEVICE.type == "cuda":
        clock = synchronized_clock
    old = None
    if args.old:
        spec = importlib.util.spec_from_file_location("xrisk_old_torch_optim", args.old)
        old = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(old)  # type: ignore[union-attr]
    with open("/proc/loadavg") as load:
        print(f"load average: {load.read().strip()}; torch {torch.__version__}; device "
              f"{torch.cuda.get_device_name(DEVICE) if DEVICE.type == 'cuda' else DEVICE}")
    print(f"optimizer.step(), float32, fixed random gradients, {args.clock} clock; median of "
          f"{args.repeats} "
          f"alternating rounds; targets: xrisk <= {TORCH_TARGET}x torch.optim (foreach), "
          f"<= {LIBAUC_TARGET}x LibAUC, transient memory <= torch.optim's + {MEMORY_SLACK}x")
    header = (f"{'thr':>3} {'model':<5} {'params':>7} {'optimizer':<11} {'xrisk ms':>9} "
              f"{'base ms':>9} {'LibAUC ms':>10} {'/base':>7} {'/LibAUC':>8} "
              f"{'mem x':>6} {'torch x':>7} {'/base+':>6}"
              + (f" {'/old':>6} {'old x':>6}" if old else "")
              + "  verdict")
    print(header)
    print("-" * len(header))
    failed = []
    for threads in args.threads if "torch" in args.frameworks else []:
        torch.set_num_threads(threads)
        for model_name in args.models:
            for size in args.sizes:
                def model_fn(size=size, model_name=model_name):
                    torch.manual_seed(0)
                    return MODELS[model_name](size).to(DEVICE)

                count = sum(p.numel() for p in model_fn().parameters())
                for case in args.cases:
                    steps = build(case, model_fn, libauc, old, args.old_first)
                    times = time_rounds(steps, args.repeats, clock)
                    memory = {k: transient_bytes(steps[k]) / (4 * count)
                              for k in ("xrisk", "torch", "old") if k in steps}
                    del steps
                    median = {k: statistics.median(v) * 1e3 for k, v in times.items()}
                    to_torch = paired_ratio(times["torch"], times["xrisk"])
                    to_libauc = (paired_ratio(times["LibAUC"], times["xrisk"])
                                 if "LibAUC" in times else math.nan)
                    plus = paired_ratio(times["torch+"], times["xrisk"])
                    # the target reads torch.optim doing the rule's arithmetic (/base+)
                    misses = [what for what, bad in (
                        ("torch", plus > TORCH_TARGET),
                        ("LibAUC", to_libauc > LIBAUC_TARGET),
                        ("memory", memory["xrisk"] > memory["torch"] + MEMORY_SLACK)) if bad]
                    verdict = "PASS" if not misses else "FAIL " + ",".join(misses)
                    if misses:
                        failed.append(f"{threads} {model_name} {count} {case[0]}")
                    print(f"{threads:>3} {model_name:<5} {count / 1e6:>6.2f}M {case[0]:<11} "
                          f"{median['xrisk']:>9.2f} {median['torch']:>9.2f} "
                          f"{median.get('LibAUC', math.nan):>10.2f} {to_torch:>7.2f} "
                          f"{to_libauc:>8.2f} {memory['xrisk']:>6.2f} {memory['torch']:>7.2f}"
                          f" {plus:>6.2f}"
                          + (f" {paired_ratio(times['old'], times['xrisk']):>6.2f}"
                             f" {memory['old']:>6.2f}" if old else "")
                          + f"  {verdict}", flush=True)
    torch.set_num_threads(os.cpu_count() or 1)
    failed += other_frameworks(args)
    print(f"{len(failed)} row(s) failed" if failed else "all targets met")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
