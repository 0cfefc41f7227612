"""TensorBoard scalars of a run (``evaluation.tensorboard: true``), framework-free.

Written with the ``tensorboard`` package alone (``pip install "xrisk[tensorboard]"``),
imported only when a recipe asks for it: each epoch's row of ``metrics.jsonl`` becomes one
scalar per numeric field (``loss``, ``val_<metric>``, ``test_<metric>``,
``train_<metric>``, same names) at step = epoch, in the seed folder's ``tensorboard/``
(``tensorboard --logdir runs/NAME`` shows every method and seed as a run). The file is
TensorBoard's event format: TFRecord frames of ``Event`` protocol buffers, the first naming
the format version, each epoch one ``Summary`` of ``simple_value`` scalars (float32,
TensorBoard's scalar type; ``metrics.jsonl`` keeps float64).

Writes are synchronous, one epoch at a time, the file closed in between (no writer thread:
nothing is left open when ``xrisk tune`` prunes a trial by raising). A run that starts or
resumes writes a new event file holding the whole history it keeps (the checkpoint's), each
epoch with the wall time it was first logged at, and then removes the earlier event files:
the folder holds each epoch of ``metrics.jsonl`` once, with its value, whatever a kill left
behind (an epoch checkpointed but not yet logged, a torn last record, epochs logged after
the checkpoint it resumes from).

>>> import tempfile
>>> from pathlib import Path
>>> run_dir = Path(tempfile.mkdtemp())
>>> board = TensorBoardLog(run_dir, [{"epoch": 0, "phase": "main", "loss": 0.5}])
>>> board.write({"epoch": 1, "phase": "main", "loss": 0.25, "val_ap": 0.75})
>>> [(e.step, [(v.tag, v.simple_value) for v in e.summary.value])
...  for e in read_events(board.path) if e.HasField("summary")]
[(0, [('loss', 0.5)]), (1, [('loss', 0.25), ('val_ap', 0.75)])]
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TensorBoardLog", "require_tensorboard", "read_events", "FOLDER", "INSTALL_FIX"]

#: The seed folder's sub-folder of event files.
FOLDER = "tensorboard"
#: What installs the package.
INSTALL_FIX = 'pip install "xrisk[tensorboard]"'
#: Event files, by TensorBoard's naming rule (it reads files whose name holds "tfevents").
_EVENT_FILES = "events.out.tfevents.*"
#: A TFRecord frame: uint64 length, uint32 masked CRC of the length (little-endian), the data,
#: uint32 masked CRC of the data.
_HEADER, _CRC = struct.Struct("<Q"), struct.Struct("<I")


def require_tensorboard() -> None:
    """Raise ImportError, naming the fix, when the ``tensorboard`` package cannot be
    imported (a run checks this before it loads data or trains)."""
    try:
        import tensorboard.compat.proto.event_pb2  # noqa: F401
        import tensorboard.summary.writer.record_writer  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"evaluation.tensorboard: received True, but the 'tensorboard' package cannot be "
            f"imported ({error}); expected it installed to write TensorBoard logs. Fix: "
            f"{INSTALL_FIX}, or set evaluation.tensorboard: false (metrics.jsonl and "
            "metrics.csv hold the same numbers).") from None


def read_events(path: Path) -> Iterator[Any]:
    """The ``Event`` protocol buffers of an event file, in order, up to the first torn or
    corrupt record (a run killed while writing leaves at most its last one torn)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    data = path.read_bytes()
    offset = 0
    while offset + _HEADER.size + _CRC.size <= len(data):
        header = data[offset:offset + _HEADER.size]
        (length,) = _HEADER.unpack(header)
        (header_crc,) = _CRC.unpack_from(data, offset + _HEADER.size)
        start = offset + _HEADER.size + _CRC.size
        end = start + length
        if header_crc != masked_crc32c(header) or end + _CRC.size > len(data):
            return
        payload = data[start:end]
        if _CRC.unpack_from(data, end)[0] != masked_crc32c(payload):
            return
        event = Event()
        try:
            event.ParseFromString(payload)
        except DecodeError:
            return
        yield event
        offset = end + _CRC.size


def _scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The numeric fields of a history row but its step (``epoch``); ``phase`` is text."""
    return {key: float(value) for key, value in row.items()
            if key != "epoch" and isinstance(value, (int, float)) and not isinstance(value, bool)}


class TensorBoardLog:
    """The event file of one seed's run in ``run_dir / "tensorboard"``: starts with
    ``history`` (the epochs the run keeps), then :meth:`write` appends each new epoch.

    Parameters
    ----------
    run_dir : Path
        The seed's folder.
    history : sequence of mapping
        The rows already logged (a resumed run's checkpoint history; empty on a fresh run),
        rewritten into the new file with the wall times earlier event files gave them.
    """

    def __init__(self, run_dir: Path, history: Sequence[Mapping[str, Any]]) -> None:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._event_pb2, self._summary, self._record_writer = event_pb2, Summary, RecordWriter
        folder = run_dir / FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        earlier = sorted(folder.glob(_EVENT_FILES))
        logged_at: dict[int, float] = {}
        for path in earlier:
            for event in read_events(path):
                if event.HasField("summary"):
                    logged_at[event.step] = event.wall_time
        stamp = f"{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}"
        index = 0
        while (folder / f"events.out.tfevents.{stamp}.{index}").exists():
            index += 1
        self.path = folder / f"events.out.tfevents.{stamp}.{index}"
        now = time.time()
        self._append([event_pb2.Event(
            wall_time=now, file_version="brain.Event:2",
            source_metadata=event_pb2.SourceMetadata(writer="xrisk.runner"))]
            + [self._event(row, logged_at.get(int(row["epoch"]), now)) for row in history])
        for path in earlier:  # only once the new file holds the history: a kill before this
            path.unlink()     # leaves both, and the next start rewrites and removes both

    def _event(self, row: Mapping[str, Any], wall_time: float) -> Any:
        values = [self._summary.Value(tag=tag, simple_value=value)
                  for tag, value in _scalars(row).items()]
        return self._event_pb2.Event(wall_time=wall_time, step=int(row["epoch"]),
                                     summary=self._summary(value=values))

    def _append(self, events: Sequence[Any]) -> None:
        with self.path.open("ab") as handle:
            writer = self._record_writer(handle)
            for event in events:
                writer.write(event.SerializeToString())
            writer.flush()

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one epoch's row (step ``row["epoch"]``), on disk when this returns."""
        self._append([self._event(row, time.time())])
