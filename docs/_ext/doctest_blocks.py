"""Griffe extension for the API reference: fence the doctest runs that stand outside sections.

The numpydoc parser turns the ``>>>`` lines of an ``Examples`` section into code, but a doctest
run in a docstring's opening text or in its ``Notes`` (module docstrings show their recipes
there) reaches Markdown as it is: ``>>>`` opens three nested block quotes and an output line
such as ``[True, True]`` reads as a link reference. This extension wraps each such run (its
``>>>``/``...`` lines and the output lines up to the next blank line, as doctest reads them) in
a ``pycon`` fence before the docstring is parsed. Loaded by ``mkdocs.yml``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SECTION_RULE = re.compile(r"^\s*-{3,}\s*$")
_PROMPT = re.compile(r"^(\s*)>>>( |$)")


def fence_doctest_runs(text: str) -> str:
    """``text`` with each doctest run outside an ``Examples`` section fenced as ``pycon``.

    >>> fence_doctest_runs("Intro.\\n\\n>>> 1 + 1\\n2\\n\\nMore.").splitlines()
    ['Intro.', '', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
    """
    lines = text.split("\n")
    out: list[str] = []
    section = ""
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if i + 1 < len(lines) and line.strip() and _SECTION_RULE.match(lines[i + 1]):
            section = line.strip()
        prompt = _PROMPT.match(line)
        if prompt and not in_fence and section not in ("Examples", "Example"):
            indent = prompt.group(1)
            run = []
            while i < len(lines) and lines[i].strip():
                run.append(lines[i])
                i += 1
            out += [f"{indent}```pycon", *run, f"{indent}```"]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence the loose doctest runs of every docstring (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the top package's docstring (griffe fires ``on_object`` for its members)."""
        self.on_object(obj=pkg)

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring before mkdocstrings parses it (idempotent)."""
        if obj.docstring is not None:
            obj.docstring.value = fence_doctest_runs(obj.docstring.value)
