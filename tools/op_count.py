"""Count (and time) the torch operators a piece of code dispatches, by the source line of
xrisk that dispatched each one.

A :class:`OpCounter` is a ``TorchDispatchMode`` (torch's private but stable
``torch.utils._python_dispatch``): every aten operator that reaches the dispatcher (forward,
backward and optimizer alike; the decomposed pieces of composite operators each once) calls
its ``__torch_dispatch__``, which counts it, times it and, with ``lines=True``, walks the
Python stack to the innermost frame of xrisk (core, backends or an adapter; frames of
array_api_compat are skipped, so an operator goes to the xrisk line that called the wrapper).

Deterministic, unlike timings: the operator count is the figure to compare across commits on
a noisy machine. The time inside operators is the sum of the per-operator times, without the
mode's own cost; "outside operators" = a plain step's wall time minus that sum (Python,
autograd bookkeeping, hooks: the fixed cost per step).

Used by benchmarks/bench_fixed_cost.py and tools/profile_step.py::

    with OpCounter(lines=True) as ops:
        step(batch)
    ops.total, ops.seconds, ops.top(10)
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["OpCounter", "source_roots"]


def source_roots() -> tuple[list[tuple[str, str]], str]:
    """(label, directory) of xrisk's packages, most specific first, and array_api_compat's
    directory (its frames are skipped so that ops go to the xrisk line that called it)."""
    import xrisk
    import xrisk.backends

    roots = []
    for label, module in (("adapters/torch/", "xrisk.torch"),
                          ("adapters/tensorflow/", "xrisk.tensorflow"),
                          ("adapters/jax/", "xrisk.jax")):
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, "__file__", None):
            roots.append((label, str(Path(loaded.__file__).parent) + os.sep))
    roots += [("backends/", str(Path(xrisk.backends.__file__).parent) + os.sep),
              ("xrisk_core/", str(Path(xrisk.__file__).parent) + os.sep)]
    try:
        import array_api_compat

        compat = str(Path(array_api_compat.__file__).parent) + os.sep
    except ImportError:
        compat = ""
    return roots, compat


class OpCounter(TorchDispatchMode):
    """Counts dispatched operators, their total time, and (``lines=True``) the xrisk source
    line behind each (``"xrisk_core/losses/ap.py:120 mul"``); operators called from outside
    xrisk (the model, torch.optim, LibAUC) count under ``"(outside xrisk) name"``."""

    def __init__(self, lines: bool = False) -> None:
        super().__init__()
        self.total = 0
        self.seconds = 0.0
        self.by_op: dict[str, int] = defaultdict(int)
        self.by_line: dict[str, int] = defaultdict(int)
        self._lines = lines
        self._roots, self._compat = source_roots() if lines else ([], "")

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        self.total += 1
        name = func.overloadpacket.__name__
        self.by_op[name] += 1
        if self._lines:
            self.by_line[self._where(name)] += 1
        start = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.seconds += time.perf_counter() - start
        return out

    def _where(self, name: str) -> str:
        frame: Any = sys._getframe(2)
        via = ""
        while frame is not None:
            filename = frame.f_code.co_filename
            if self._compat and filename.startswith(self._compat):
                via = " (via array_api_compat)"
            else:
                for label, root in self._roots:
                    if filename.startswith(root):
                        return f"{label}{filename[len(root):]}:{frame.f_lineno} {name}{via}"
            frame = frame.f_back
        return f"(outside xrisk) {name}"

    def top(self, n: int) -> list[tuple[str, int]]:
        """The ``n`` source lines dispatching the most operators."""
        return sorted(self.by_line.items(), key=lambda kv: -kv[1])[:n]
