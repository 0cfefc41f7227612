"""Packaging: the library requires ranges; the exact CPU builds live in constraints-cpu.txt.

``xrisk[torch]`` used to require ``torch==2.13.0+cpu`` (and ``tensorflow-cpu==2.21.*``,
``jax==0.10.2``) and the package Python ``>=3.11,<3.12``: on a GPU machine or on Python
3.12/3.13, ``pip install xrisk[torch]`` failed or replaced the user's framework. .ci/run
checks the built wheel's metadata and imports the wheel on Python 3.10 as well.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
CONSTRAINTS = ROOT / "constraints-cpu.txt"
FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "jax", "jaxlib", "optax", "keras")


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement)[0].lower()


def _requirements() -> list[str]:
    extras = PROJECT["optional-dependencies"].values()
    return [*PROJECT["dependencies"], *(r for group in extras for r in group)]


def test_requirements_are_ranges_without_builds():
    pinned = [r for r in _requirements() if "+" in r or re.search(r"===?|~=|<", r)]
    assert not pinned, f"exact, local-version or capped requirements: {pinned}"
    frameworks = [r for r in _requirements() if _name(r) in FRAMEWORKS]
    assert frameworks and all(">=" in r for r in frameworks), frameworks


def test_the_core_supports_python_3_10_and_up():
    assert PROJECT["requires-python"] == ">=3.10"
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py310"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == "3.10"


@pytest.mark.parametrize("folder", ["xrisk_core", "backends", "adapters"])
def test_the_package_parses_as_python_3_10(folder):
    for path in sorted((ROOT / folder).rglob("*.py")):
        ast.parse(path.read_text(), str(path), feature_version=(3, 10))


def test_the_constraints_pin_the_cpu_builds_this_project_tests():
    pins = {_name(line): line.strip() for line in CONSTRAINTS.read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    assert pins == {"torch": "torch==2.13.0+cpu", "tensorflow-cpu": "tensorflow-cpu==2.21.*",
                    "jax": "jax==0.10.2", "jaxlib": "jaxlib==0.10.2"}


def _install_arguments(command: str) -> list[str]:
    words = shlex.split(command)
    return words[words.index("install") + 1:]


def test_the_readme_and_ci_install_with_the_constraints_and_the_same_extras():
    readme = (ROOT / "README.md").read_text()
    setup = re.search(r"## Set-up.*?```bash\n(.*?)\n```", readme, flags=re.DOTALL)[1]
    assert setup.count("&&") == 2  # still one line: venv, install, the main example
    install = next(part for part in setup.split("&&") if "pip install" in part)
    ci = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    ci_install = next(line for line in ci.splitlines() if "pip install" in line and "-e" in line)
    for command in (install, ci_install):
        arguments = _install_arguments(command)
        assert arguments[arguments.index("-c") + 1] == "constraints-cpu.txt", command
    extras = {re.search(r"\.\[([^\]]*)\]", c)[1] for c in (install, ci_install)}
    assert len(extras) == 1, extras
    assert set(next(iter(extras)).split(",")) <= set(PROJECT["optional-dependencies"])
