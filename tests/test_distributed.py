"""Data parallelism equals one process on the global batch, for every registered loss.

Three workers run at once, each in its own processes (a process group, forced host devices
and logical CPUs must be set up before their framework starts): a 2-process torch DDP pair on
gloo (tests/_distributed_torch.py), 2 JAX host devices (tests/_distributed_jax.py) and a
TensorFlow MirroredStrategy over 2 logical CPUs (tests/_distributed_tf.py). Each runs every
loss of ``xrisk.LOSSES`` for several SGD steps, each rank fed by ``DualSampler.shard``
(binary losses), ``TriSampler.shard`` (multi-label and ranking losses) or the case's batch
drawer, with keys repeated within and across ranks (tests/_distributed.py), and reports
where the parameters, the losses or any state table differ from the single-process run on
the global batch by more than 1e-12 (float64) — with the state replicated and with it
sharded by rows (multi-label (label, sample) tables included) — and whether the detected
misuses raise or warn.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests._distributed import loss_names

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 900


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Start the three workers together and collect their JSON reports by framework."""
    folder = tmp_path_factory.mktemp("distributed")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3",
           "TF_ENABLE_ONEDNN_OPTS": "0", "OMP_NUM_THREADS": "1"}
    port = str(_free_port())
    commands = {
        "torch0": [sys.executable, "-m", "tests._distributed_torch", "0", "2", port,
                   str(folder / "torch.json")],
        "torch1": [sys.executable, "-m", "tests._distributed_torch", "1", "2", port,
                   str(folder / "torch1.json")],
        "jax": [sys.executable, "-m", "tests._distributed_jax", str(folder / "jax.json")],
        "tensorflow": [sys.executable, "-m", "tests._distributed_tf",
                       str(folder / "tensorflow.json")],
    }
    logs = {name: open(folder / f"{name}.log", "w") for name in commands}  # noqa: SIM115
    running = {name: subprocess.Popen(command, cwd=ROOT, env=env, stdout=logs[name],
                                      stderr=subprocess.STDOUT)
               for name, command in commands.items()}
    codes = {}
    for name, process in running.items():
        try:
            codes[name] = process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            codes[name] = "timeout"
        logs[name].close()
    out = {}
    for framework, files in (("torch", ("torch", "torch1")), ("jax", ("jax",)),
                             ("tensorflow", ("tensorflow",))):
        found = [folder / f"{f}.json" for f in files]
        if all(path.exists() for path in found):
            data = [json.loads(path.read_text()) for path in found]
            out[framework] = {"losses": data[0]["losses"],
                              "problems": [p for d in data for p in d["problems"]]}
        else:
            tails = {f: (folder / f"{f}.log").read_text()[-3000:] for f in files}
            out[framework] = {"error": f"exit codes { {f: codes[f] for f in files} }: {tails}"}
    return out


FRAMEWORKS = ("torch", "jax", "tensorflow")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_worker_covers_every_registered_loss(reports, framework):
    report = reports[framework]
    assert "error" not in report, report.get("error")
    assert report["losses"] == loss_names()


@pytest.mark.parametrize("name", loss_names())
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_distributed_equals_single_process(reports, framework, name):
    report = reports[framework]
    if "error" in report:
        pytest.fail(report["error"])
    mine = [p for p in report["problems"] if p.split(" ", 1)[0].rstrip(":") == name]
    assert not mine, "\n".join(mine)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_misuse_is_detected(reports, framework):
    report = reports[framework]
    if "error" in report:
        pytest.fail(report["error"])
    names = set(loss_names())
    other = [p for p in report["problems"] if p.split(" ", 1)[0].rstrip(":") not in names]
    assert not other, "\n".join(other)
