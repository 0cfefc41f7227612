"""Every docstring example runs as written and prints what it claims.

The core (numpy examples) and the three adapter packages (``xrisk.torch``,
``xrisk.tensorflow``, ``xrisk.jax``: examples in their own framework) and the backends are
collected module by module. Each module is collected once, and each example belongs to exactly
one module: ``doctest`` keeps only the objects a module defines, so a class re-exported by a
package (``xrisk.torch.APLoss`` from ``xrisk.torch.losses``) is not run twice.

No example is skipped, except in the modules of :data:`SKIP_ALLOWED`, whose lines need what a
test process cannot provide (a process group of several ranks, several replicas). Those lines
are still compiled, and every name they use must be bound by the docstring's own examples or
be a builtin; an attribute of an object the runnable lines built (``xr.DualSampler``,
``torch.nn.parallel.DistributedDataParallel``) must exist.
"""

from __future__ import annotations

import ast
import builtins
import doctest
import importlib
import pkgutil
from typing import Any

import pytest

import xrisk

ADAPTERS = ("xrisk.torch", "xrisk.tensorflow", "xrisk.jax")
FLAGS = doctest.NORMALIZE_WHITESPACE
#: Module -> what its skipped lines need that a test process cannot provide.
SKIP_ALLOWED = {
    "xrisk.torch.distributed": "a process group of several ranks (torchrun)",
    "xrisk.tensorflow.distributed": "a MirroredStrategy over several replicas",
}


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


def _bound_names(tree: ast.AST) -> set[str]:
    """Names a piece of code binds: assignments, loop and ``with`` targets, imports, defs."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).partition(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound


def _chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    """``a.b.c`` -> ("a", ["b", "c"]); None when the chain does not start at a plain name."""
    attributes: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        attributes.insert(0, current.attr)
        current = current.value
    return (current.id, attributes) if isinstance(current, ast.Name) else None


def unresolved_names(test: doctest.DocTest, namespace: dict[str, Any]) -> list[str]:
    """What the skipped examples of ``test`` use that does not resolve.

    Each skipped example must compile; a name it reads must be bound by one of the docstring's
    examples (skipped or not) or be a builtin; ``a.b.c`` with ``a`` from ``namespace`` (what the
    runnable examples left) and not rebound by a skipped example must have those attributes.
    """
    trees = [compile(example.source, test.name, "single", ast.PyCF_ONLY_AST)
             for example in test.examples]
    skipped = [tree for tree, example in zip(trees, test.examples)
               if example.options.get(doctest.SKIP)]
    bound = set().union(*map(_bound_names, trees)) | set(dir(builtins))
    rebound = set().union(*map(_bound_names, skipped)) if skipped else set()
    problems = []
    for tree in skipped:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
                    and node.id not in bound:
                problems.append(f"{test.name}: name {node.id!r} is never bound")
            chain = _chain(node) if isinstance(node, ast.Attribute) else None
            if chain is None or chain[0] not in namespace or chain[0] in rebound:
                continue
            value = namespace[chain[0]]
            for depth, attribute in enumerate(chain[1], 1):
                if not hasattr(value, attribute):
                    dotted = ".".join([chain[0], *chain[1][:depth]])
                    problems.append(f"{test.name}: {dotted} does not exist")
                    break
                value = getattr(value, attribute)
    return sorted(set(problems))


def test_the_name_check_finds_unbound_names_and_missing_attributes():
    source = (">>> import xrisk.torch as xr\n"
              ">>> xr.NoSuchLoss(n)                 # doctest: +SKIP\n"
              ">>> loss = xr.APLoss(num_samples=k)  # doctest: +SKIP\n"
              ">>> k = len([1, 2])\n"
              ">>> loss.anything                    # doctest: +SKIP\n")
    test = doctest.DocTestParser().get_doctest(source, {}, "example", None, 0)
    namespace = {"xr": importlib.import_module("xrisk.torch"), "k": 2}
    assert unresolved_names(test, namespace) == [
        "example: name 'n' is never bound", "example: xr.NoSuchLoss does not exist"]
    with pytest.raises(SyntaxError):
        unresolved_names(doctest.DocTestParser().get_doctest(
            ">>> f(x   # doctest: +SKIP\n", {}, "broken", None, 0), {})


@pytest.mark.parametrize("name", MODULES)
def test_no_example_is_skipped_without_a_reason(name):
    skipped = [f"{test.name}: {example.source.strip()}" for test in _examples(name)
               for example in test.examples if example.options.get(doctest.SKIP)]
    if name in SKIP_ALLOWED:
        assert skipped, f"{name} skips nothing any more: drop it from SKIP_ALLOWED"
    else:
        assert not skipped, f"{name}: examples skipped from doctest (make them run):\n" + \
            "\n".join(skipped)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    tests = _examples(name)
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    unresolved = []
    for test in tests:
        runner.run(test, clear_globs=False)
        unresolved += unresolved_names(test, test.globs)
        test.globs.clear()
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
    assert not unresolved, "skipped examples use what does not exist:\n" + "\n".join(unresolved)
