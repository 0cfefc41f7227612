"""Every page of the documentation site runs as written.

Each ``docs/**/*.md`` page's ```` ```python ```` blocks run in order in one namespace per page
(a page reads as one script: later blocks use what earlier ones built). Tracebacks name the
page and its line, and the page's text is the source that ``inspect`` (and so AutoGraph)
reads. Blocks that must not run are fenced ```` ```text ```` (or ``bash``, ``yaml``, ...);
the Python spellings that would hide an unrun block (``py``, ``python3``, ``pycon``) are
refused. The site's navigation (``mkdocs.yml``) lists every page, and every page it lists
exists, so a page cannot be written and left out of the site.
"""

from __future__ import annotations

import importlib.util
import linecache
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md") if "_ext" not in path.parts)

#: An opening fence: its indentation (pages nest blocks in lists and admonitions), its
#: backticks and its info string.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`\n]*)$")
#: Info strings that look like Python but would not run.
_UNRUN_PYTHON = {"py", "py3", "python3", "pycon", "ipython", "pyi"}


def code_blocks(text: str) -> list[tuple[str, int, str]]:
    """``(language, first code line, code)`` of each fenced block of a Markdown ``text``.

    The code line is 1-based; the code is dedented by the fence's indentation.
    """
    blocks = []
    lines = text.split("\n")
    number = 0
    while number < len(lines):
        opening = _FENCE.match(lines[number])
        if not opening:
            number += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        language = opening["info"].strip().split(" ")[0].lower()
        body = []
        number += 1
        while number < len(lines) and not re.match(
                rf"^{re.escape(indent)}{ticks}`*\s*$", lines[number]):
            body.append(lines[number][len(indent):] if lines[number].startswith(indent)
                        else lines[number].lstrip())
            number += 1
        blocks.append((language, number - len(body) + 1, "\n".join(body) + "\n"))
        number += 1
    return blocks


#: A pymdownx.snippets include line: ``--8<-- "path"`` or ``--8<-- "path:section"``.
_INCLUDE = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$', re.MULTILINE)
#: Files whose blocks another test runs (a page including them does not run them again).
_TESTED_ELSEWHERE = {"README.md": "tests/test_readme.py"}


def page_text(page: Path, root: Path = ROOT) -> str:
    """The page as the site shows it: its snippet includes expanded (paths from the root).

    Includes of a file that another test runs (:data:`_TESTED_ELSEWHERE`) stay as they are.
    """

    def include(match: re.Match[str]) -> str:
        if match["path"] in _TESTED_ELSEWHERE:
            return match[0]
        text = (root / match["path"]).read_text()
        if match["section"]:
            text = text.split(f"[start:{match['section']}]", 1)[1]
            text = text.split(f"[end:{match['section']}]", 1)[0].split("\n", 1)[1]
        return text

    return _INCLUDE.sub(include, page.read_text())


def _page_id(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def test_the_site_has_pages_with_code():
    assert len(PAGES) >= 10
    assert sum(language == "python" for page in PAGES
               for language, _, _ in code_blocks(page_text(page))) >= 10


def test_included_files_are_part_of_the_page(tmp_path):
    (tmp_path / "notes.md").write_text("Intro.\n\n```python\nx = 1\n```\n")
    page = tmp_path / "page.md"
    page.write_text('# Page\n\n--8<-- "notes.md"\n\n--8<-- "README.md:quickstart"\n')
    text = page_text(page, root=tmp_path)
    assert code_blocks(text) == [("python", 6, "x = 1\n")]  # README's blocks run elsewhere
    assert '--8<-- "README.md:quickstart"' in text


def test_code_blocks_are_found_with_their_lines():
    text = "Text.\n\n```python\nx = 1\n```\n\n- item\n\n    ```text\n    not run\n    ```\n"
    assert code_blocks(text) == [("python", 4, "x = 1\n"), ("text", 10, "not run\n")]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_no_python_block_hides_under_another_name(page):
    hidden = [f"{_page_id(page)}:{line - 1}: ```{language}"
              for language, line, _ in code_blocks(page_text(page))
              if language in _UNRUN_PYTHON]
    assert not hidden, ("fence Python that runs as ```python and Python that must not run as "
                        "```text:\n" + "\n".join(hidden))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_page_runs(page):
    text = page_text(page)
    filename = str(page)
    # The page is the source of its code: tracebacks and inspect.getsource (AutoGraph's
    # transformation in tf.function) read the page's own lines.
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace = {"__name__": "docs_page"}
    for language, line, code in code_blocks(text):
        if language == "python":
            # Blank lines in front keep the page's line numbers in tracebacks.
            exec(compile("\n" * (line - 1) + code, filename, "exec"), namespace)


def _nav_pages(entries) -> list[str]:
    pages = []
    for entry in entries:
        if isinstance(entry, str):
            pages.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_the_navigation_lists_every_page_and_only_pages():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = [page for page in _nav_pages(config["nav"]) if not page.startswith("http")]
    missing = sorted({_page_id(page) for page in PAGES} - set(listed))
    absent = sorted(page for page in listed if not (DOCS / page).is_file())
    assert not missing, f"pages not in mkdocs.yml's nav (add them): {missing}"
    assert not absent, f"mkdocs.yml's nav lists pages that do not exist: {absent}"


def _rst_to_markdown():
    spec = importlib.util.spec_from_file_location("rst_to_markdown",
                                                  DOCS / "_ext" / "rst_to_markdown.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_fences_loose_doctest_runs_only():
    fence = _rst_to_markdown().fence_doctest_runs
    loose = "Intro.\n\n>>> [1, 2]\n[1, 2]\n\nMore."
    assert fence(loose) == "Intro.\n\n```pycon\n>>> [1, 2]\n[1, 2]\n```\n\nMore."
    assert fence(fence(loose)) == fence(loose)  # griffe may visit an object twice
    numpydoc = "Sum.\n\nExamples\n--------\n>>> 1 + 1\n2\n"
    assert fence(numpydoc) == numpydoc  # the numpydoc parser renders these itself
    notes = "Sum.\n\nNotes\n-----\n    >>> f()\n    3\n"
    assert fence(notes) == "Sum.\n\nNotes\n-----\n    ```pycon\n    >>> f()\n    3\n    ```\n"


def test_api_reference_turns_rst_math_and_roles_into_markdown():
    convert = _rst_to_markdown().markdown_math_and_roles
    assert convert(r"See :class:`~xrisk.APLoss` and :func:`xrisk.set_checks`.") == (
        "See `APLoss` and `xrisk.set_checks`.")
    assert convert(":math:`u \\leftarrow\n    v` wraps") == "$u \\leftarrow v$ wraps"
    aligned = ".. math::\n\n    a &= 1 \\\\\n    b &= 2\n\nEnd."
    assert convert(aligned).split("\n") == [
        "$$", "\\begin{aligned}", "a &= 1 \\\\", "b &= 2", "\\end{aligned}", "$$", "", "End."]
    assert convert(".. math:: x = 1\n") == "$$\nx = 1\n$$\n"
    fenced = "```pycon\n>>> f(':math:`x`')\n```"
    assert convert(fenced) == fenced  # code stays code
    assert convert("mode on exit::\n\n    code") == "mode on exit:\n\n    code"
