"""The adapters reach the core through its public modules and ``xrisk.adapter_api`` only.

A private core module (``xrisk._validation``, ``xrisk.optim._rule``, ...) may change shape
between releases; an adapter importing it would break with it, so the one list of what an
adapter uses lives in :mod:`xrisk.adapter_api`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ADAPTERS = Path(__file__).resolve().parents[1] / "adapters"
FILES = sorted(ADAPTERS.rglob("*.py"))


def _core_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)]
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "xrisk"]


def test_there_are_adapter_files():
    assert len(FILES) >= 15


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ADAPTERS)))
def test_an_adapter_imports_no_private_core_module(path):
    private = [f"line {line}: {name}" for line, name in _core_imports(ast.parse(path.read_text()))
               if any(part.startswith("_") and not part.startswith("__")
                      for part in name.split(".")[1:])]
    assert not private, (
        f"{path.relative_to(ADAPTERS)} imports private core names {private}; expected only "
        "public modules and xrisk.adapter_api. Fix: add what it needs to xrisk.adapter_api.")


FRAMEWORKS = {"torch", "tensorflow", "keras", "jax", "jaxlib", "flax", "optax", "lightning",
              "torchmetrics", "torchdata"}
CORE = ADAPTERS.parent / "xrisk_core"


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: str(p.relative_to(CORE)))
def test_the_core_imports_no_framework(path):
    """The design contract: ``xrisk_core`` imports no framework, not even inside a function
    (the runner loads ``xrisk.<framework>.runner``, which imports its own)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)]
    framework = [f"line {line}: {name}" for line, name in found
                 if name.split(".")[0] in FRAMEWORKS]
    assert not framework, (
        f"xrisk_core/{path.relative_to(CORE)} imports {framework}; expected no framework in the "
        "core. Fix: move the framework code into adapters/<framework>/.")


def test_a_missing_framework_is_named_with_its_extra(monkeypatch):
    """A runner recipe for a framework whose dependency is missing: an ImportError naming
    the missing package and the extra that installs it."""
    pytest.importorskip("optax")
    import sys

    from xrisk.runner.engine import session_class

    monkeypatch.delitem(sys.modules, "xrisk.jax.runner", raising=False)
    monkeypatch.setitem(sys.modules, "optax", None)
    with pytest.raises(ImportError, match=r"'optax'.*pip install \"xrisk\[jax\]\""):
        session_class("jax")
