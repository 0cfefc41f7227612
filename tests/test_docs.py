"""The shipped docs stand alone: no pointers to files or numbering that users do not have.

The library's sources, docstrings, README and documentation site (``docs/``, ``mkdocs.yml``)
must say what LibAUC does differently in plain words, not refer to internal notes
(``libauc-reference.md``, ``design.md``), their section numbers (``§4.4``) or their bug
numbers (``B12``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What users get: the packages (core, backends, adapters), the examples, the README and the
#: documentation site.
SHIPPED = ("xrisk_core", "backends", "adapters", "examples", "README.md", "docs", "mkdocs.yml")

#: Pattern -> what it points at.
FORBIDDEN = {
    r"libauc-reference": "an internal notes file",
    r"design\.md": "an internal notes file",
    r"§": "a section of an internal notes file",
    r"\bB\d{1,2}\b": "an internal bug number (say what LibAUC does instead)",
}
_PATTERN = re.compile("|".join(f"(?:{pattern})" for pattern in FORBIDDEN))


def _text_files() -> list[Path]:
    files = []
    for name in SHIPPED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [f for f in candidates if f.is_file() and "__pycache__" not in f.parts]
    return files


def _text(path: Path) -> str | None:
    """The file's text, or None for binary files (compressed data sets, archives)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _references(text: str) -> list[tuple[int, str]]:
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if _PATTERN.search(line)]


@pytest.mark.parametrize(("line", "found"), [
    ("see libauc-reference.md §4.4", True),
    ("(design.md, section 3)", True),
    ("deterministic (LibAUC B28).", True),
    ("bug B3)", True),
    ("shape (B,) and (B, 1); float16, bfloat16, B=128", False),
    ("LibAUC 2.0.1 lets the last write win, which is nondeterministic on GPU", False),
])
def test_the_pattern_finds_internal_references(line, found):
    assert bool(_PATTERN.search(line)) is found


def test_shipped_files_do_not_point_at_internal_notes():
    files = _text_files()
    assert any(f.name == "README.md" for f in files) and len(files) > 20  # the walk works
    assert any(f.parts[-2:] == ("docs", "index.md") for f in files)  # the site is walked
    hits = []
    for path in files:
        text = _text(path)
        if text is None:
            continue
        hits += [f"{path.relative_to(ROOT)}:{number}: {line}"
                 for number, line in _references(text)]
    assert not hits, (
        "Shipped files refer to internal notes (libauc-reference.md, design.md, § sections) or "
        "bug numbers (B1-B29) that users do not have; say what LibAUC 2.0.1 does in plain "
        "words instead:\n" + "\n".join(hits)
    )
