"""TensorBoard scalars of a run (``evaluation.tensorboard: true``): the events TensorBoard
reads hold the values of metrics.jsonl, a resumed run shows exactly an uninterrupted run's
values (whatever the kill left in the folder), the switch is off by default and a missing
package is refused before the run starts, naming the extra."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pydantic")
pytest.importorskip("yaml")
pytest.importorskip("tensorboard")

from xrisk.runner import load_recipe, train  # noqa: E402
from xrisk.runner.checkpoint import latest_checkpoint  # noqa: E402

# A warm-up epoch, a decay point and the training split's metrics: every kind of logged
# column (loss, val_*, test_*, train_*) and both phases.
RECIPE = {
    "name": "tiny", "method": "pesg", "dtype": "float64", "epochs": 3, "framework": "torch",
    "data": {"name": "breast_cancer", "imratio": 0.2, "limit": 200},
    "model": {"hidden": [8]}, "sampler": {"batch_size": 16},
    "schedule": {"warmup_epochs": 1, "reinit_last_layer": True, "decay_at": [0.5]},
    "evaluation": {"metrics": ["auroc", "ap"], "early_stopping": False,
                   "train_metrics": True, "tensorboard": True},
}
SEED_DIR = Path("torch-pesg") / "seed-0"


class _Interrupt(Exception):
    pass


def _interrupt_at(epoch: int, batch: int):
    def on_batch(now_epoch, now_batch, loss):
        if (now_epoch, now_batch) == (epoch, batch):
            raise _Interrupt
    return on_batch


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _event_files(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "tensorboard").glob("events.out.tfevents.*"))


def _shown(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """What TensorBoard shows: each tag's (step, value) series as its EventAccumulator
    reads the folder (a repeated step keeps the value written last)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    return {tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}


def _wall_times(run_dir: Path) -> list[float]:
    """The wall time TensorBoard shows for each epoch's loss."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    return [event.wall_time for event in accumulator.Scalars("loss")]


def _expected(history: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """metrics.jsonl's numeric columns as float32 (TensorBoard's scalars) per epoch."""
    tags = [key for key in history[0] if key not in ("epoch", "phase")]
    return {tag: [(row["epoch"], float(np.float32(row[tag]))) for row in history]
            for tag in tags}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run with TensorBoard logs."""
    out = tmp_path_factory.mktemp("reference")
    train(RECIPE, out, progress=False, write_report=False)
    return out / SEED_DIR


def test_the_events_hold_every_logged_value_of_metrics_jsonl(reference):
    history = _history(reference)
    assert len(history) == 3
    expected = _expected(history)
    assert {"loss", "val_auroc", "val_ap", "test_auroc", "train_ap"} <= expected.keys()
    assert _shown(reference) == expected
    assert len(_event_files(reference)) == 1


def test_tensorflow_reads_the_same_events(reference):
    tf = pytest.importorskip("tensorflow")
    read: dict[str, list[tuple[int, float]]] = {}
    versions = []
    for event in tf.compat.v1.train.summary_iterator(str(_event_files(reference)[0])):
        if event.file_version:
            versions.append(event.file_version)
        for value in event.summary.value:
            read.setdefault(value.tag, []).append((event.step, value.simple_value))
    assert versions == ["brain.Event:2"]
    assert read == _expected(_history(reference))


def _event_bytes(step: int, tag: str, value: float, wall_time: float) -> bytes:
    """One TFRecord frame of an Event, written with tensorboard's own RecordWriter."""
    import io

    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    buffer = io.BytesIO()
    event = Event(step=step, wall_time=wall_time,
                  summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)]))
    RecordWriter(buffer).write(event.SerializeToString())
    return buffer.getvalue()


def test_a_resumed_run_shows_the_uninterrupted_runs_values(reference, tmp_path):
    """Killed in epoch 2 (checkpoint: epoch 1), leaving what a kill can leave: epoch 1's
    event torn (killed while writing it, after its checkpoint) and, in another event file,
    an epoch after the checkpoint with another value (logged before the kill by a run that
    checkpointed it later, e.g. a checkpoint that failed to write). The resumed run's folder
    shows each epoch once, with the uninterrupted run's value; epoch 0 keeps its wall time."""
    with pytest.raises(_Interrupt):
        train(RECIPE, tmp_path, progress=False, write_report=False,
              on_batch=_interrupt_at(2, 1))
    run_dir = tmp_path / SEED_DIR
    assert latest_checkpoint(run_dir / "checkpoints") == 1
    [events] = _event_files(run_dir)
    assert [step for step, _ in _shown(run_dir)["loss"]] == [0, 1]
    epoch0_logged_at = _wall_times(run_dir)[0]
    events.write_bytes(events.read_bytes()[:-7])  # epoch 1's record torn
    stray = run_dir / "tensorboard" / (events.name + ".stray")
    stray.write_bytes(_event_bytes(2, "loss", 123.0, 1.0) + _event_bytes(1, "loss", -5.0, 1.0))

    train(RECIPE, tmp_path, resume=True, progress=False, write_report=False)
    assert _history(run_dir) == _history(reference)
    assert _shown(run_dir) == _shown(reference) == _expected(_history(reference))
    assert len(_event_files(run_dir)) == 1
    assert _wall_times(run_dir)[0] == epoch0_logged_at


def test_off_by_default_and_switched_on_at_resume_logs_every_epoch(reference, tmp_path):
    """The default writes no TensorBoard folder; the switch is not part of what trains, so a
    run resumes with it turned on, and its events then hold the epochs before the resume."""
    quiet = {**RECIPE, "evaluation": {k: v for k, v in RECIPE["evaluation"].items()
                                      if k != "tensorboard"}}
    assert load_recipe(quiet).evaluation.tensorboard is False
    with pytest.raises(_Interrupt):
        train(quiet, tmp_path, progress=False, write_report=False,
              on_batch=_interrupt_at(2, 0))
    run_dir = tmp_path / SEED_DIR
    assert (run_dir / "metrics.jsonl").exists()
    assert not (run_dir / "tensorboard").exists()

    train(RECIPE, tmp_path, resume=True, progress=False, write_report=False)
    assert _shown(run_dir) == _expected(_history(reference))


def test_a_missing_tensorboard_is_refused_before_the_run_starts(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    batches = []
    with pytest.raises(ImportError, match=r"evaluation\.tensorboard.*'tensorboard'.*"
                                          r"pip install \"xrisk\[tensorboard\]\""):
        train(RECIPE, tmp_path / "out", progress=False, write_report=False,
              on_batch=lambda *args: batches.append(args))
    assert batches == []
    assert not (tmp_path / "out" / SEED_DIR).exists()


def test_reading_stops_at_the_first_damaged_or_torn_record(tmp_path):
    """What a kill or a bad disk leaves: a record whose data fails its CRC, or whose end is
    missing, ends the read there (its event and the ones after it are not trusted)."""
    from xrisk.runner.tensorboard_log import read_events

    first, second = _event_bytes(0, "loss", 0.5, 1.0), _event_bytes(1, "loss", 0.25, 2.0)
    corrupt = bytearray(second)
    corrupt[-6] ^= 0xFF  # a byte of the value: the data's CRC no longer matches
    path = tmp_path / "events.out.tfevents.0"
    for tail in (bytes(corrupt), second[:-3], struct.pack("<Q", 1 << 40) + second[8:]):
        path.write_bytes(first + tail + first)
        assert [(e.step, e.summary.value[0].simple_value) for e in read_events(path)] == [
            (0, 0.5)]
    path.write_bytes(first + second)
    assert [e.step for e in read_events(path)] == [0, 1]
