"""The framework-free part of a run: schedule, evaluation, early stopping, checkpoints, logs.

The framework's part is a *session* (``xrisk.<framework>.runner.Session``): it holds the
model, the loss and the optimizer and trains one epoch in its own idiom (an ``nn.Module``
loop, a ``tf.function`` step, a ``jax.jit`` step). :func:`run_seed` drives it:

.. code-block:: text

    for epoch in range(start, epochs):
        start the phase (warm-up or X-risk) if it begins here; decay at the stage epochs
        for loss in session.epoch(task.batches(phase, epoch)): ...   # the framework's loop
        task.evaluate("val"), ("test"); log; keep the best; checkpoint; stop early?

The loop is the same for every task; a :class:`Task` (binary here, ranking, contrastive and
multi-label in their modules) builds the data, session, sampler and phases and supplies the
batches, the evaluation and the final predictions. A run resumed from its checkpoint (model,
loss state, optimizer, sampler position, RNG, history) continues bit-exactly where the
uninterrupted run would be.
"""

from __future__ import annotations

import csv
import importlib
import inspect
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

import xrisk

from .checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint, write_json_atomic
from .data import Splits, load_splits
from .models import (
    Weights,
    conv_encoder_weights,
    glorot_layer,
    layer_paths,
    layers_weights,
    mlp_weights,
    resnet20_weights,
)
from .recipe import BACKBONE_MIN_SIZE, BACKBONES, CONV_MODELS, Recipe, RecipeError
from .tensorboard_log import TensorBoardLog, require_tensorboard

__all__ = ["Phase", "Session", "RunResult", "phases", "loss_arguments", "run_seed",
           "session_class", "initial_weights", "check_backbone_images"]


@dataclass(frozen=True)
class Phase:
    """What trains during part of a run: a loss and an optimizer, by class name.

    ``probability``: the loss takes sigmoid scores (the AUC family), not logits;
    ``min_max``: the optimizer takes the loss (its auxiliaries a, b, alpha);
    ``loss_scale``: the factor of the loss in the objective that is differentiated (the
    reported loss stays unscaled): 2 tau for InfoNCE against SogCLR (docs/runner.md).
    """

    name: str
    loss: str
    loss_options: dict[str, Any]
    optimizer: str
    optimizer_options: dict[str, Any]
    probability: bool
    min_max: bool
    loss_scale: float = 1.0


def _takes_probabilities(loss: str) -> bool:
    definition_type = xrisk.LOSSES[loss]
    interval = getattr(definition_type, "score_interval", None)
    return interval == (0.0, 1.0)


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _phase(name: str, loss: str, loss_options: dict[str, Any], optimizer: str,
           optimizer_options: dict[str, Any]) -> Phase:
    min_max = "loss_fn" in inspect.signature(xrisk.OPTIMIZERS[optimizer]).parameters
    return Phase(name, loss, {k: _plain(v) for k, v in loss_options.items()}, optimizer,
                 {k: _plain(v) for k, v in optimizer_options.items() if v is not None},
                 _takes_probabilities(loss), min_max)


def phases(recipe: Recipe) -> tuple[Phase | None, Phase]:
    """The warm-up phase (cross-entropy; None without warm-up epochs) and the main one."""
    main = _phase("main", recipe.loss.name, dict(recipe.loss.options), recipe.optimizer.name,
                  dict(recipe.optimizer.options))
    schedule = recipe.schedule
    if not schedule.warmup_epochs:
        return None, main
    warmup = _phase("warmup", "CrossEntropyLoss", {}, schedule.warmup_optimizer,
                    {"learning_rate": schedule.warmup_learning_rate})
    return warmup, main


def loss_arguments(phase: Phase, num_samples: int, num_labels: int | None = None
                   ) -> dict[str, Any]:
    """The keyword arguments of ``xr.<phase.loss>(...)``: the options, and the training
    set's size where the loss keeps per-sample state (and the labels' count, multi-label)."""
    options = dict(phase.loss_options)
    parameters = inspect.signature(xrisk.LOSSES[phase.loss]).parameters
    if "num_samples" in parameters:
        options["num_samples"] = num_samples
    if "num_labels" in parameters and num_labels is not None:
        options["num_labels"] = num_labels
    return options


class Session(Protocol):
    """What a framework adapter provides (``xrisk.<framework>.runner.Session``)."""

    def __init__(self, splits: Splits, weights: Weights, *, model: str, activation: str, dtype: str,
                 seed: int) -> None:
        """Build ``model`` from its canonical ``weights`` (:func:`initial_weights`); a backbone
        with ``weights`` ``{}`` is the framework's own model, initialised from ``seed``."""

    def start(self, phase: Phase) -> None:
        """Build the phase's loss and optimizer (fresh state) for the current model."""

    def epoch(self, batches: Iterable[np.ndarray]) -> Iterator[Any]:
        """Train on each index batch; yield each batch's loss."""

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Logits (N,) as numpy."""

    def weights(self) -> Weights:
        """The model's weights as numpy, in :mod:`xrisk.runner.models`' canonical layout."""

    def set_weights(self, weights: Weights) -> None: ...

    def decay(self, factor: float, *, regularizer: bool) -> None:
        """``update_regularizer(factor)`` (a new proximal stage) or ``update_lr(factor)``."""

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The loss's and optimizer's state (and the framework's RNG): arrays and JSON."""

    def load_state(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None: ...


def session_class(framework: str, name: str = "Session") -> Any:
    """``xrisk.<framework>.runner.<name>`` (``Session``, ``RankingSession``,
    ``ContrastiveSession``), imported now (not at ``import xrisk``).

    The core imports no framework: the adapter's runner module imports its own. For
    TensorFlow the start-up options are set first (no effect if it is loaded already): quiet
    logs, and oneDNN's fused kernels off so that sums are reproducible run to run."""
    if framework == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    try:
        module = importlib.import_module(f"xrisk.{framework}.runner")
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing in ("xrisk", ""):
            raise
        extra = {"tensorflow": "tensorflow-cpu"}.get(framework, framework)
        raise ImportError(f"framework: {framework!r} needs {missing!r}, which is not installed "
                          f"({error}). Fix: pip install \"xrisk[{extra}]\" or choose another "
                          "framework.") from None
    if not hasattr(module, name):
        raise RecipeError(f"framework: received {framework!r}; xrisk.{framework}.runner has no "
                          f"{name}. Fix: choose a framework that runs this task.")
    return getattr(module, name)


@dataclass
class RunResult:
    """One seed's run: where it lives, its per-epoch history, the selected epoch and the
    test metrics of the model selected on validation."""

    run_dir: Path
    seed: int
    history: list[dict[str, Any]]
    best_epoch: int
    test: dict[str, float]
    validation: dict[str, float]
    seconds: float
    stopped_early: bool


def _metrics(recipe: Recipe, y: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    from xrisk.metrics import evaluate

    if y.size == 0 or y.min() == y.max():
        return {}
    names = list(dict.fromkeys([*recipe.evaluation.metrics, recipe.metric]))
    values = evaluate(y, logits, metrics=names, max_fpr=recipe.evaluation.max_fpr,
                      min_tpr=recipe.evaluation.min_tpr)
    return {name: float(value) for name, value in values.items()}


def _write_logs(run_dir: Path, history: list[dict[str, Any]]) -> None:
    """metrics.jsonl and metrics.csv, rewritten from the history (a resumed run's logs hold
    exactly the epochs it kept)."""
    lines = "".join(json.dumps(row, sort_keys=True) + "\n" for row in history)
    (run_dir / "metrics.jsonl").write_text(lines)
    columns = list(dict.fromkeys(key for row in history for key in row))
    with (run_dir / "metrics.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(history)


def _what_trains(recipe: dict[str, Any]) -> dict[str, Any]:
    """A recipe's plain data without its logging switch (``evaluation.tensorboard``): what
    a checkpoint's recipe must equal to resume (so a run resumes with TensorBoard turned on
    or off, and checkpoints written before the switch existed resume)."""
    evaluation = {k: v for k, v in recipe.get("evaluation", {}).items() if k != "tensorboard"}
    return {**recipe, "evaluation": evaluation}


def track_best(recipe: Recipe, epoch: int, watched: float | None, is_main: bool,
               best: dict[str, Any], best_weights: Weights,
               session: Any) -> tuple[dict[str, Any], Weights, bool]:
    """The selection rule of both loops (binary and ranking): in the main phase, an epoch
    whose validation ``watched`` beats the best so far (or that has no such metric) becomes
    the best and its weights are kept; otherwise it counts towards ``patience``. Returns the
    new best, its weights, and whether early stopping ends the run now."""
    if is_main:
        if watched is None or watched > best["value"]:
            best = {"value": -math.inf if watched is None else watched, "epoch": epoch,
                    "bad_epochs": 0}
            best_weights = session.weights()
        else:
            best["bad_epochs"] += 1
    stopped_early = (recipe.evaluation.early_stopping and is_main and watched is not None
                     and best["bad_epochs"] >= recipe.evaluation.patience)
    return best, best_weights, stopped_early


def _prefixed(prefix: str, weights: Weights) -> dict[str, np.ndarray]:
    return {f"{prefix}/{key}": value for key, value in weights.items()}


def _unprefixed(prefix: str, arrays: dict[str, np.ndarray]) -> Weights:
    return {key[len(prefix) + 1:]: value for key, value in arrays.items()
            if key.startswith(f"{prefix}/")}


def initial_weights(recipe: Recipe, splits: Splits, seed: int, num_outputs: int = 1
                    ) -> Weights:
    """The model of ``recipe.model`` for ``splits``, drawn from ``seed`` by its weight
    constructor (:mod:`xrisk.runner.models`), ``num_outputs`` logits (one per label of a
    multi-label run): the MLP over flattened features (N, D), ResNet20 and the conv encoder
    over images (N, H, W, C).

    A backbone (:data:`xrisk.runner.recipe.BACKBONES`) has no numpy weights: this checks
    that its images fit (:func:`check_backbone_images`) and returns ``{}``, and the session
    builds the framework's own model, initialised from ``seed``."""
    model = recipe.model
    if model.name in BACKBONES:
        check_backbone_images(model.name, splits.x_train.shape, recipe.data.name)
        return {}
    if model.name == "resnet20":
        return resnet20_weights(num_outputs, in_channels=splits.x_train.shape[-1], seed=seed,
                                dtype=recipe.dtype)
    if model.name == "conv_encoder":
        return conv_encoder_weights(in_channels=splits.x_train.shape[-1], widths=model.widths,
                                    projection=(*model.hidden, num_outputs), seed=seed,
                                    dtype=recipe.dtype)
    return layers_weights(mlp_weights(splits.x_train.shape[1], model.hidden, num_outputs,
                                      seed=seed, dtype=recipe.dtype))


def check_backbone_images(name: str, shape: tuple[int, ...], data: str) -> None:
    """Refuse images (N, H, W, C) a backbone cannot take: sides under its minimum
    (DenseNet121: 32), or other than 1 (gray: repeated to the three input channels) or 3
    channels. Raises :class:`RecipeError` naming the field, the images and the fix (a
    MedMNIST file's size is known only once it is read)."""
    height, width, channels = (int(n) for n in shape[1:4])
    smallest = BACKBONE_MIN_SIZE[name]
    if min(height, width) < smallest:
        raise RecipeError(
            f"model.name: received {name!r} with data.name {data!r} holding {height}x{width} "
            f"images; expected images of at least {smallest}x{smallest} ({name} halves the "
            "resolution five times). Fix: use model.name resnet20 or conv_encoder for these "
            f"images, or larger images (e.g. MedMNIST+ files at 64, 128 or 224 pixels).")
    if channels not in (1, 3):
        raise RecipeError(
            f"model.name: received {name!r} with data.name {data!r} holding {channels}-channel "
            "images; expected gray (1 channel, repeated to 3) or RGB (3) images. Fix: convert "
            "the images to gray or RGB, or use model.name resnet20 or conv_encoder.")


#: The layer that gives the logits, by model (a reference model's, then the backbones': Keras
#: DenseNet121's ``predictions``, torchvision's ``fc`` (ResNet-18) and ``classifier``).
_OUTPUT_LAYERS = ("out", "linear", "predictions", "fc", "classifier")


def _output_layer(weights: Weights) -> str:
    """The path of the layer that gives the logit (the last dense layer)."""
    for path in _OUTPUT_LAYERS:
        if f"{path}/kernel" in weights:
            return path
    return layer_paths(weights, "head.dense")[-1]


class _Progress:
    """tqdm over epochs when installed and wanted; otherwise a line per epoch or nothing."""

    def __init__(self, total: int, initial: int, label: str, enabled: bool) -> None:
        self.bar = None
        self.enabled = enabled
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total, initial=initial, desc=label, unit="epoch",
                            leave=False)
        self.label = label

    def update(self, shown: dict[str, str]) -> None:
        if self.bar is not None:
            self.bar.set_postfix(shown)
            self.bar.update(1)
        elif self.enabled:
            print(f"{self.label} " + " ".join(f"{k}={v}" for k, v in shown.items()), flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


BatchCallback = Callable[[int, int, float], None]


class Task(Protocol):
    """What a kind of run (binary, ranking, contrastive, multi-label) adds to the one loop of
    :func:`run_seed`: its data, session, sampler and phases, built by the task's constructor
    ``(recipe, seed)``, and four hooks.

    ``reinit_stream``: the stream of ``np.random.default_rng([seed, reinit_stream])`` that
    redraws the last layer after the warm-up (kept per task so old checkpoints stay valid).
    """

    session: Any
    sampler: Any
    warmup: Phase | None
    main: Phase
    reinit_stream: int

    def start(self, phase: Phase) -> None:
        """Build the phase's loss and optimizer in the session (fresh state)."""

    def decay(self, factor: float) -> None:
        """A decay point of the schedule (``update_regularizer`` or ``update_lr``)."""

    def batches(self, phase: Phase, epoch: int) -> Iterable[Any]:
        """What ``session.epoch`` trains on this epoch (the sampler's epoch is set)."""

    def evaluate(self, split: str) -> dict[str, float]:
        """The metrics of the current model on ``"val"`` or ``"test"`` (binary and
        multi-label tasks: also ``"train"``)."""

    def finish(self) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
        """Test and validation metrics of the current (selected) model, and the arrays of
        ``predictions.npz`` (``test_logits``, ``y_test``, ``val_logits``, ``y_val`` for the
        report's ROC and PR figures)."""


class BinaryTask:
    """Binary classification: :func:`load_splits`, a reference model, Dual/Random batches of
    indices, the metrics of :func:`xrisk.metrics.evaluate`."""

    reinit_stream = 1

    def __init__(self, recipe: Recipe, seed: int) -> None:
        self.recipe = recipe
        self.splits = splits = load_splits(recipe.data, seed=seed, dtype=recipe.dtype,
                                           images=recipe.model.name in CONV_MODELS)
        self.session = session_class(recipe.framework)(
            splits, initial_weights(recipe, splits, seed), model=recipe.model.name,
            activation=recipe.model.activation, dtype=recipe.dtype, seed=seed)
        self.warmup, self.main = phases(recipe)
        self.sampler = make_sampler(recipe, splits.y_train, seed)
        self.stages = main_stages(recipe)

    def start(self, phase: Phase) -> None:
        self.session.start(phase)

    def decay(self, factor: float) -> None:
        self.session.decay(factor, regularizer=self.stages)

    def batches(self, phase: Phase, epoch: int) -> Iterable[Any]:
        return self.sampler

    def score(self, labels: np.ndarray, logits: np.ndarray) -> dict[str, float]:
        """The recipe's metrics of ``logits`` against ``labels``."""
        return _metrics(self.recipe, labels, logits)

    def evaluate(self, split: str) -> dict[str, float]:
        x, y = getattr(self.splits, f"x_{split}"), getattr(self.splits, f"y_{split}")
        return self.score(y, self.session.predict(x))

    def finish(self) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
        splits = self.splits
        test_logits = self.session.predict(splits.x_test)
        val_logits = self.session.predict(splits.x_val)
        return (self.score(splits.y_test, test_logits), self.score(splits.y_val, val_logits),
                {"test_logits": test_logits, "y_test": splits.y_test,
                 "val_logits": val_logits, "y_val": splits.y_val})


def make_sampler(recipe: Recipe, labels: np.ndarray, seed: int) -> Any:
    """The recipe's batches of training indices: DualSampler (a share of positives) or
    RandomSampler."""
    if recipe.sampler.name == "dual":
        from xrisk.samplers import DualSampler
        return DualSampler(labels, recipe.sampler.batch_size,
                           sampling_rate=recipe.sampler.sampling_rate, seed=seed)
    from xrisk.samplers import RandomSampler
    return RandomSampler(len(labels), recipe.sampler.batch_size, seed=seed)


def _task_class(recipe: Recipe) -> Callable[[Recipe, int], Task]:
    if recipe.task == "ranking":
        from .ranking import RankingTask
        return RankingTask
    if recipe.task == "contrastive":
        from .contrastive import ContrastiveTask
        return ContrastiveTask
    if recipe.task == "multilabel":
        from .multilabel import MultiLabelTask
        return MultiLabelTask
    return BinaryTask


def reinit_output_layer(session: Any, rng: np.random.Generator, dtype: str) -> None:
    """Redraw the layer that gives the logits (Glorot, zero bias) from ``rng``."""
    now = session.weights()
    last = _output_layer(now)
    fan_in, fan_out = now[f"{last}/kernel"].shape
    kernel, bias = glorot_layer(rng, fan_in, fan_out, dtype)
    session.set_weights({**now, f"{last}/kernel": kernel, f"{last}/bias": bias})


def run_seed(recipe: Recipe, seed: int, run_dir: Path, *, resume: bool = False,
             progress: bool = True, on_batch: BatchCallback | None = None,
             on_epoch: Callable[[int, dict[str, Any]], None] | None = None) -> RunResult:
    """Train one seed of ``recipe`` into ``run_dir``; see the module docstring. Every task
    (binary, ranking, contrastive, multi-label) runs this loop with its :class:`Task` hooks.

    ``on_batch(epoch, batch, loss)`` runs after every step; ``on_epoch(epoch, row)`` after
    every epoch's evaluation (``xrisk tune`` prunes there by raising).
    """
    if recipe.evaluation.tensorboard:  # before anything loads or trains
        require_tensorboard()
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoints = run_dir / "checkpoints"
    if not resume and latest_checkpoint(checkpoints) is not None:
        raise FileExistsError(
            f"{run_dir}: holds a run already (checkpoints/latest.json). Fix: pass --resume "
            "to continue it, or choose another output folder (--out).")
    task = _task_class(recipe)(recipe, seed)
    session, sampler, warmup, main = task.session, task.sampler, task.warmup, task.main
    schedule, epochs = recipe.schedule, recipe.epochs
    main_epochs = epochs - schedule.warmup_epochs
    decay_epochs = {schedule.warmup_epochs + max(1, round(f * main_epochs))
                    for f in schedule.decay_at} - {epochs}
    rng = np.random.default_rng([seed, task.reinit_stream])  # the last layer's redraw

    target = recipe.metric
    best: dict[str, Any] = {"value": -math.inf, "epoch": -1, "bad_epochs": 0}
    history: list[dict[str, Any]] = []
    best_weights = session.weights()
    start, started, seconds_before, stopped_early = 0, None, 0.0, False
    if resume and latest_checkpoint(checkpoints) is not None:
        arrays, meta = load_checkpoint(checkpoints)
        if _what_trains(meta["recipe"]) != _what_trains(recipe.to_dict()):
            raise RecipeError(f"{run_dir}: the checkpoint was written by another recipe. Fix: "
                              "resume with the recipe the run started with (its recipe.json).")
        start, history, best = meta["epoch"] + 1, meta["history"], meta["best"]
        seconds_before, stopped_early = meta["seconds"], meta["stopped_early"]
        session.set_weights(_unprefixed("model", arrays))
        best_weights = _unprefixed("best", arrays)
        rng.bit_generator.state = meta["rng"]
        sampler.load_state_dict(meta["sampler"])
        phase_now = warmup if warmup is not None and start < schedule.warmup_epochs else main
        if meta["phase"] == phase_now.name:
            task.start(phase_now)
            session.load_state(_unprefixed("session", arrays), meta["session"])
            started = phase_now.name
    write_json_atomic(run_dir / "recipe.json", recipe.to_dict(), sort_keys=False)
    board = TensorBoardLog(run_dir, history) if recipe.evaluation.tensorboard else None
    began = time.perf_counter()
    bar = _Progress(epochs, start, f"{recipe.framework} {recipe.method or recipe.loss.name} "
                    f"seed {seed}", progress)
    for epoch in range(start, epochs if not stopped_early else start):
        phase = warmup if warmup is not None and epoch < schedule.warmup_epochs else main
        if started != phase.name:
            if phase is main and warmup is not None and schedule.reinit_last_layer:
                reinit_output_layer(session, rng, recipe.dtype)
            task.start(phase)
            started = phase.name
        if epoch in decay_epochs:
            task.decay(schedule.decay_factor)
        sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for batch, loss in enumerate(session.epoch(task.batches(phase, epoch))):
            value = float(loss)
            total, count = total + value, count + 1
            if on_batch is not None:
                on_batch(epoch, batch, value)
        row: dict[str, Any] = {"epoch": epoch, "phase": phase.name,
                               "loss": total / max(count, 1)}
        validation = task.evaluate("val")
        row.update({f"val_{k}": v for k, v in validation.items()})
        row.update({f"test_{k}": v for k, v in task.evaluate("test").items()})
        if recipe.evaluation.train_metrics:  # convergence: the objective's own split
            row.update({f"train_{k}": v for k, v in task.evaluate("train").items()})
        history.append(row)
        watched = validation.get(target)
        best, best_weights, stopped_early = track_best(recipe, epoch, watched, phase is main,
                                                       best, best_weights, session)
        session_arrays, session_meta = session.state()
        save_checkpoint(checkpoints, epoch, {
            **_prefixed("model", session.weights()), **_prefixed("best", best_weights),
            **_prefixed("session", session_arrays)}, {
            "recipe": recipe.to_dict(), "history": history, "best": best,
            "rng": rng.bit_generator.state, "sampler": sampler.state_dict(),
            "phase": phase.name, "session": session_meta, "stopped_early": stopped_early,
            "seconds": seconds_before + time.perf_counter() - began})
        _write_logs(run_dir, history)
        if board is not None:
            board.write(row)
        bar.update({"loss": f"{row['loss']:.4f}",
                    f"val_{target}": "-" if watched is None else f"{watched:.4f}",
                    "best": f"{best['value']:.4f}" if best["epoch"] >= 0 else "-"})
        if on_epoch is not None:
            on_epoch(epoch, row)
        if stopped_early:
            break
    bar.close()
    return _finish(recipe, seed, run_dir, task, history, best, best_weights,
                   seconds_before + time.perf_counter() - began, stopped_early)


def main_stages(recipe: Recipe) -> bool:
    """Whether decay points start proximal stages (``update_regularizer``): optimizers with
    an epoch-decay reference point that is in use; else ``update_lr``."""
    options = recipe.optimizer.options
    decay = options.get("epoch_decay", inspect.signature(
        xrisk.OPTIMIZERS[recipe.optimizer.name]).parameters.get("epoch_decay"))
    if isinstance(decay, inspect.Parameter):
        decay = decay.default
    return bool(decay)


def _finish(recipe: Recipe, seed: int, run_dir: Path, task: Task,
            history: list[dict[str, Any]], best: dict[str, Any], best_weights: Weights,
            seconds: float, stopped_early: bool) -> RunResult:
    """Select the best epoch's model, score it, write predictions.npz and result.json."""
    best_epoch = best["epoch"] if best["epoch"] >= 0 else history[-1]["epoch"]
    task.session.set_weights(best_weights)
    test, validation, arrays = task.finish()
    with (run_dir / "predictions.tmp.npz").open("wb") as handle:
        np.savez(handle, **arrays)  # type: ignore[arg-type]
    os.replace(run_dir / "predictions.tmp.npz", run_dir / "predictions.npz")
    result = RunResult(run_dir, seed, history, best_epoch, test, validation, seconds,
                       stopped_early)
    write_json_atomic(run_dir / "result.json", {
        "seed": seed, "best_epoch": best_epoch, "test": test, "validation": validation,
        "seconds": seconds, "stopped_early": stopped_early, "epochs_run": len(history),
        "framework": recipe.framework, "loss": recipe.loss.name,
        "optimizer": recipe.optimizer.name, "metric": recipe.metric}, sort_keys=False)
    return result
