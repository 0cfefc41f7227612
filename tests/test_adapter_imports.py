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
