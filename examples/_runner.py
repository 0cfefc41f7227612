"""What the multi-label, multi-instance and extreme-classification examples share.

Each example (``tox21_multilabel.py``, ``multi_instance.py``, ``extreme_classification.py``)
prepares its data in numpy, names its methods and writes one trainer per framework (an
``nn.Module`` loop in PyTorch, a ``tf.function`` step in TensorFlow, a ``jax.jit`` step in
JAX). This module holds the rest: the command line, the MLP's initial weights (the same in
every framework), the epoch loop with its progress display, the per-run line and the results
table. The progress bars, the table and the framework import order are those of the binary
examples' engine, ``_training.py``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _training import FRAMEWORKS, format_table, import_frameworks, progress

__all__ = ["FRAMEWORKS", "Outcome", "Trainer", "initial_mlp", "jax_mlp", "keras_mlp", "parse_args",
           "positive", "run", "torch_mlp", "train"]


@dataclass
class Trainer:
    """What a framework section hands to the loop.

    ``step(batch)`` trains on one batch as the sampler yields it and returns the loss;
    ``predict()`` returns the test scores as numpy; ``start_epoch(epoch)`` runs before each
    epoch (schedules: PESG's stages, MIDAM's smoothing, SOX's gamma).
    """

    step: Callable[[Any], Any]
    predict: Callable[[], np.ndarray]
    start_epoch: Callable[[int], None] = field(default=lambda epoch: None)


@dataclass(frozen=True)
class Outcome:
    """One framework x method run: its test scores, test metrics and wall-clock seconds."""

    scores: np.ndarray
    metrics: dict[str, float]
    seconds: float


def initial_mlp(sizes: Sequence[int], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Glorot-uniform (kernel (in, out), zero bias) layers of an MLP with layer ``sizes``,
    float32: the one initialisation every framework copies."""
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        layers.append((rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32),
                       np.zeros(fan_out, np.float32)))
    return layers


Layers = list[tuple[np.ndarray, np.ndarray]]


def torch_mlp(layers: Layers) -> Any:
    """``nn.Sequential`` of Linear layers with ReLU between them, weights copied from
    ``layers`` (torch stores the kernel transposed)."""
    import torch
    from torch import nn

    modules: list[Any] = []
    for position, (kernel, bias) in enumerate(layers):
        if position:
            modules.append(nn.ReLU())
        linear = nn.Linear(*kernel.shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(kernel.T))
            linear.bias.copy_(torch.from_numpy(bias))
        modules.append(linear)
    return nn.Sequential(*modules)


def keras_mlp(layers: Layers) -> Any:
    """``keras.Sequential`` of Dense layers (ReLU on all but the last), weights from
    ``layers``."""
    import keras

    dense = [keras.layers.Dense(kernel.shape[1],
                                activation="relu" if position < len(layers) - 1 else None)
             for position, (kernel, _) in enumerate(layers)]
    model = keras.Sequential([keras.Input((layers[0][0].shape[0],)), *dense])
    model.set_weights([array for layer in layers for array in layer])
    return model


def jax_mlp(params: Any, x: Any) -> Any:
    """The MLP as a pure function of its parameters ``[(kernel, bias), ...]``."""
    import jax

    for position, (kernel, bias) in enumerate(params):
        if position:
            x = jax.nn.relu(x)
        x = x @ kernel + bias
    return x


def train(trainer: Trainer, batches: Any, epochs: int, label: str) -> np.ndarray:
    """The epoch loop: ``batches`` is an xrisk sampler (``set_epoch``, then iterate).

    The loss in the progress bar is the last batch's; for the X-risk losses it is an
    objective estimate or a gradient surrogate, so watch the test metrics, not it.
    """
    bar = progress(range(epochs), label)
    for epoch in bar:
        trainer.start_epoch(epoch)
        batches.set_epoch(epoch)
        loss = float("nan")
        for batch in batches:
            loss = trainer.step(batch)
        bar.set_postfix(loss=f"{float(loss):.4f}")
    return trainer.predict()


def parse_args(argv: Sequence[str] | None, *, description: str, methods: Iterable[str],
               epochs: int, add_options: Callable[[argparse.ArgumentParser], None],
               check: Callable[[argparse.Namespace], str | None]) -> argparse.Namespace:
    """The shared options (frameworks, methods, epochs, seed) plus the example's own.

    ``check(args)`` returns an error message for a bad combination of the example's options
    (the parser exits with it), or None.
    """
    methods = tuple(methods)
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                        help="comma-separated subset of torch,tensorflow,jax")
    parser.add_argument("--methods", default=",".join(methods),
                        help=f"comma-separated subset of {','.join(methods)}")
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    args = parser.parse_args(argv)
    for option, allowed in (("frameworks", FRAMEWORKS), ("methods", methods)):
        chosen = [name.strip() for name in getattr(args, option).split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown or not chosen:
            parser.error(f"--{option}: got {unknown or 'nothing'}; expected names from {allowed}")
        setattr(args, option, list(dict.fromkeys(chosen)))
    if args.epochs < 1:
        parser.error(f"--epochs: got {args.epochs}; expected at least 1")
    if args.seed < 0:
        parser.error(f"--seed: got {args.seed}; expected an integer >= 0")
    problem = check(args)
    if problem:
        parser.error(problem)
    return args


def positive(name: str, value: float, *, integer: bool = True) -> str | None:
    """An error message when option ``--name`` is not > 0, else None."""
    if value > 0:
        return None
    kind = "an integer" if integer else "a number"
    return f"--{name}: got {value}; expected {kind} > 0"


def run(args: argparse.Namespace, *, trainer: Callable[[str, str], Trainer],
        batches: Callable[[str], Any], evaluate: Callable[[np.ndarray], dict[str, float]],
        metrics: Sequence[str]) -> dict[tuple[str, str], Outcome]:
    """Train every requested framework x method; print a line per run, then the table.

    ``trainer(framework, method)`` builds a fresh trainer from the shared initial weights;
    ``batches(method)`` a fresh sampler (the same batches in every framework).
    """
    import_frameworks(args.frameworks)
    outcomes: dict[tuple[str, str], Outcome] = {}
    for framework in args.frameworks:
        for name in args.methods:
            start = time.perf_counter()
            scores = train(trainer(framework, name), batches(name), args.epochs,
                           label=f"{framework:<10} {name:<7}")
            values = evaluate(scores)
            outcome = Outcome(scores, values, time.perf_counter() - start)
            outcomes[framework, name] = outcome
            shown = "  ".join(f"{metric} {values[metric]:.4f}" for metric in metrics)
            print(f"{framework:<10} {name:<7}  test {shown}  ({outcome.seconds:.1f} s)",
                  flush=True)
    print()
    rows = {key: {**outcome.metrics, "seconds": outcome.seconds}
            for key, outcome in outcomes.items()}
    print(format_table(rows, list(metrics)), flush=True)
    return outcomes
