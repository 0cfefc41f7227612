"""The examples in the core's docstrings run and print what they claim (numpy only)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import xrisk

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(xrisk.__path__, prefix="xrisk.")
    if not info.name.startswith(("xrisk.torch", "xrisk.tensorflow", "xrisk.jax"))
)


@pytest.mark.parametrize("name", ["xrisk", *MODULES])
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
