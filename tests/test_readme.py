"""The README's Python blocks run as written (each in a fresh namespace, in order).

The README is the front page: two set-up commands (the first is the install that ``.ci/run``
runs in a clean clone), one quick start per framework and the stacks; the rest lives in
``docs/``, whose pages ``tests/test_docs_pages.py`` runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.DOTALL)
COMMANDS = re.findall(r"```bash\n(.*?)```", TEXT, flags=re.DOTALL)


def test_the_readme_has_one_quick_start_per_framework():
    """Then the stacks' block (torch data loading and metrics): the README shows each stack
    users train in, in a block that runs."""
    adapters = [re.findall(r"import xrisk\.(torch|tensorflow|jax) as", block) for block in BLOCKS]
    assert adapters[:3] == [["torch"], ["tensorflow"], ["jax"]]
    assert "KerasLoss" in BLOCKS[1] and "nnx" in BLOCKS[2] and "StatefulDataLoader" in BLOCKS[3]


def test_the_readme_has_two_set_up_commands_and_ci_runs_the_first():
    assert len(COMMANDS) == 2
    install, tests = (command.strip() for command in COMMANDS)
    assert tests == ".venv/bin/python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    pip = re.search(r"\.venv/bin/pip install (.*?) && ", install)[1]
    # .ci/run spells the same install over two lines, with -q.
    ci_pip = " ".join(re.search(r"\.venv/bin/pip install -q (.*?)\n\n", ci, re.DOTALL)[1]
                      .replace("\\\n", " ").split())
    assert ci_pip == " ".join(pip.split())
    assert tests in ci


def test_the_readme_stays_a_front_page():
    assert len(TEXT.splitlines()) <= 230  # the manual is docs/


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_readme_block_runs(number):
    code = BLOCKS[number]
    exec(compile(code, f"README.md python block {number + 1}", "exec"), {"__name__": "readme"})
