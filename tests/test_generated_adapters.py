"""The adapter classes are generated from the core signatures (tools/generate_adapters.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "generate_adapters.py"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_adapters", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("generate_adapters", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_generated_classes_are_up_to_date(capsys):
    """``tools/generate_adapters.py --check`` (as .ci/run runs it) passes on the tree."""
    status = _generator().main(["--check"])
    assert status == 0, capsys.readouterr().out[-3000:]


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_a_default_edited_by_hand_is_drift_and_a_docstring_is_kept(framework):
    generator = _generator()
    text = (ROOT / "adapters" / framework / "losses.py").read_text()
    # A default restated by hand that differs from the core's is rewritten back ...
    edited = text.replace("gamma: float = 0.9, margin: float = 1.0", "gamma: float = 0.8, "
                          "margin: float = 1.0", 1)
    assert edited != text
    assert generator.render(edited, "losses", generator.FRAMEWORKS[framework]) == text
    # ... while a class's docstring is the part a person writes, kept as it stands.
    docs = generator.docstrings(text.split(generator.BEGIN)[1])
    old = docs["APLoss"].splitlines()[0]
    reworded = text.replace(old, old.replace('"""', '"""Reworded. ', 1), 1)
    assert generator.render(reworded, "losses", generator.FRAMEWORKS[framework]) == reworded


def test_a_core_class_without_an_adapter_class_is_drift():
    generator = _generator()
    text = (ROOT / "adapters" / "torch" / "optim.py").read_text()
    start = text.index("class SONG(XRiskOptimizer):")
    end = text.index("\n\n\nclass ", start) + 3
    rendered = generator.render(text[:start] + text[end:], "optim",
                                generator.FRAMEWORKS["torch"])
    # The class comes back whole, with a placeholder docstring for a person to complete.
    assert rendered[:start] == text[:start]
    body = "\n\n    rule_type = xrisk.SONG\n"
    assert rendered.split(body)[1] == text.split(body)[1]
    placeholder = rendered[start:rendered.index(body)]
    assert placeholder.startswith('class SONG(XRiskOptimizer):\n    """Optimizer of NDCG')


def test_check_fails_with_a_diff_on_a_stale_section(tmp_path, monkeypatch):
    generator = _generator()
    for framework in generator.FRAMEWORKS:
        for kind in ("losses", "optim"):
            source = ROOT / "adapters" / framework / f"{kind}.py"
            target = tmp_path / "adapters" / framework / f"{kind}.py"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source.read_text())
    stale = tmp_path / "adapters" / "jax" / "optim.py"
    stale.write_text(stale.read_text().replace("learning_rate: LearningRate = 0.001", "learning_"
                                               "rate: LearningRate = 0.002", 1))
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0  # rewrites it
    assert generator.main(["--check"]) == 0
