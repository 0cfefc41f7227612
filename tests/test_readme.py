"""The README's Python blocks run as written (each in a fresh namespace, in order)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_block_runs(number):
    code = BLOCKS[number]
    exec(compile(code, f"README.md python block {number + 1}", "exec"), {"__name__": "readme"})
