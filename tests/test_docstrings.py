"""Every docstring example runs as written and prints what it claims.

The core (numpy examples) and the three adapter packages (``xrisk.torch``,
``xrisk.tensorflow``, ``xrisk.jax``: examples in their own framework) and the backends are
collected module by module. Each module is collected once, and each example belongs to exactly
one module: ``doctest`` keeps only the objects a module defines, so a class re-exported by a
package (``xrisk.torch.APLoss`` from ``xrisk.torch.losses``) is not run twice.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import xrisk

ADAPTERS = ("xrisk.torch", "xrisk.tensorflow", "xrisk.jax")
FLAGS = doctest.NORMALIZE_WHITESPACE


def _walk(package_name: str) -> list[str]:
    package = importlib.import_module(package_name)
    return [package_name, *(info.name for info in
                            pkgutil.walk_packages(package.__path__, prefix=package_name + "."))]


# xrisk.__path__ is the core folder only; backends and adapters are separate folders mapped
# into the xrisk package, so each is walked on its own.
MODULES = sorted({*_walk("xrisk"), *_walk("xrisk.backends"),
                  *(name for adapter in ADAPTERS for name in _walk(adapter))})


def _examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, name)
    return [test for test in tests if test.examples]


def test_each_module_is_collected_once_and_the_adapters_are_in():
    assert len(MODULES) == len(set(MODULES))
    for adapter in ADAPTERS:
        assert {adapter, f"{adapter}.losses", f"{adapter}.optim", f"{adapter}.data"} <= \
            set(MODULES), adapter


def test_no_example_is_collected_by_two_modules():
    # An example is identified by the object's own name and its docstring: a package that
    # re-collected a submodule's class would give the same pair under another prefix.
    owners: dict[tuple[str, str], list[str]] = {}
    for name in MODULES:
        for test in _examples(name):
            key = (test.name.rpartition(".")[2], test.docstring or "")
            owners.setdefault(key, []).append(f"{name}: {test.name}")
    twice = [names for names in owners.values() if len(names) > 1]
    assert not twice, twice


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_every_adapter_loss_has_an_example_in_its_framework(adapter):
    """The protocol's rule: each adapter class's Examples section runs in that adapter."""
    module = f"{adapter}.losses"
    found = {test.name.rpartition(".")[2] for test in _examples(module)}
    framework = adapter.rpartition(".")[2]
    missing = sorted(set(xrisk.LOSSES) - found)
    assert not missing, f"{module}: no docstring example for {missing}"
    for test in _examples(module):
        if test.name.rpartition(".")[2] in xrisk.LOSSES:
            source = "".join(example.source for example in test.examples)
            assert f"import {framework}" in source or f"{adapter} as" in source, test.name


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    tests = _examples(name)
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
