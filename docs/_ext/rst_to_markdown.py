"""Griffe extension for the API reference: the reStructuredText of the docstrings as Markdown.

The docstrings are numpydoc, whose markup is reStructuredText; mkdocstrings renders
Markdown. The numpydoc parser handles the sections and the ``>>>`` lines of an ``Examples``
section; this extension rewrites what would otherwise reach Markdown as it is, before
mkdocstrings parses each docstring (loaded by ``mkdocs.yml``):

- a doctest run outside an ``Examples`` section (module docstrings show their recipes in
  their opening text and ``Notes``) becomes a ``pycon`` fence: as it stands, ``>>>`` opens
  three nested block quotes and an output line such as ``[True, True]`` reads as a link;
- ``:math:`x``` becomes ``$x$`` and a ``.. math::`` directive a ``$$`` block (aligned when
  its lines break with ``\\\\`` or align with ``&``, as Sphinx does), typeset by MathJax;
- a paragraph's closing ``::`` (a literal block follows, indented) becomes ``:``;
- the cross-reference roles (``:class:``, ``:func:``, ``:meth:``, ``:mod:``, ``:data:``,
  ``:attr:``, ``:exc:``, ``:obj:``) become code spans, ``~`` keeping the last name only.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SECTION_RULE = re.compile(r"^\s*-{3,}\s*$")
_PROMPT = re.compile(r"^(\s*)>>>( |$)")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")
_MATH_DIRECTIVE = re.compile(r"^(\s*)\.\. math::[ \t]*(.*)$")
_LITERAL_BLOCK_MARKER = re.compile(r"(?<=\S)::$", flags=re.MULTILINE)


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


def _role(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


def _inline(text: str) -> str:
    """The inline roles of ``text`` (no fences in it) as Markdown; a role may wrap lines."""
    text = _MATH_ROLE.sub(lambda match: "$" + " ".join(match.group(1).split()) + "$", text)
    text = _LITERAL_BLOCK_MARKER.sub(":", text)  # "... on exit::" before an indented block
    return _ROLE.sub(_role, text)


def markdown_math_and_roles(text: str) -> str:
    r"""``text`` with reStructuredText math and cross-reference roles as Markdown.

    >>> markdown_math_and_roles(r"See :class:`~xrisk.APLoss`, :math:`u \leftarrow v`.")
    'See `APLoss`, $u \\leftarrow v$.'
    >>> markdown_math_and_roles(":math:`a +\n    b` wraps")
    '$a + b$ wraps'
    >>> markdown_math_and_roles(".. math::\n\n    a &= 1 \\\\\n    b &= 2\n\nEnd.").split("\n")
    ['$$', '\\begin{aligned}', 'a &= 1 \\\\', 'b &= 2', '\\end{aligned}', '$$', '', 'End.']
    """
    lines = text.split("\n")
    out: list[str] = []
    prose: list[str] = []  # lines outside fences and math blocks, converted together

    def flush() -> None:
        out.extend(_inline("\n".join(prose)).split("\n") if prose else [])
        prose.clear()

    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            if not in_fence:
                flush()
            in_fence = not in_fence
            out.append(line)
            i += 1
            continue
        directive = None if in_fence else _MATH_DIRECTIVE.match(line)
        if directive is None:
            (out if in_fence else prose).append(line)
            i += 1
            continue
        flush()
        indent, body = directive.group(1), [directive.group(2)] if directive.group(2) else []
        i += 1
        # The directive's content: the indented lines (and blank lines) below it.
        while i < len(lines) and (not lines[i].strip()
                                  or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i].strip())
            i += 1
        equations = [line for line in body if line]
        if any("&" in line or line.endswith("\\\\") for line in equations):
            equations = ["\\begin{aligned}", *equations, "\\end{aligned}"]
        out += [f"{indent}$$", *(indent + line for line in equations), f"{indent}$$", ""]
    flush()
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring's reStructuredText as Markdown (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the top package's docstring (griffe fires ``on_object`` for its members)."""
        self.on_object(obj=pkg)

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring before mkdocstrings parses it (idempotent)."""
        if obj.docstring is not None:
            text = fence_doctest_runs(obj.docstring.value)
            obj.docstring.value = markdown_math_and_roles(text)
