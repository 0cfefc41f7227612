"""``import xrisk.<framework>`` costs little beyond importing the framework itself.

Guarded by counting modules, not by timing: in a fresh interpreter, the modules that
``import xrisk.torch`` (``.tensorflow``, ``.jax``) adds after the framework's own import must
be xrisk's, the framework's, numpy's or the standard library's, and none of the heavy
libraries that only some functions use (scikit-learn and SciPy: metrics and two data sets,
imported at their first call; matplotlib, pandas, tqdm, ...: the examples). scikit-learn with
SciPy used to be imported by ``xrisk.datasets`` and ``xrisk.metrics`` at import time: about
2-7 s of ``import xrisk.torch``'s 3-9 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: Never imported by ``import xrisk...``: imported inside the functions that use them.
HEAVY = ("sklearn", "scipy", "matplotlib", "pandas", "tqdm", "PIL", "rdkit", "lightgbm",
         "joblib", "narwhals", "rich", "libauc", "array_api_strict")

#: adapter -> (what importing the framework means, the framework's own top-level packages)
FRAMEWORKS = {
    "xrisk.torch": ("import torch", {"torch", "torchgen", "functorch"}),
    "xrisk.tensorflow": ("import tensorflow, keras", {"tensorflow", "keras", "tf_keras"}),
    "xrisk.jax": ("import jax, optax", {"jax", "jaxlib", "optax", "absl", "chex"}),
    "xrisk": ("", set()),
}

_PROBE = """
import json, sys
{framework}
before = set(sys.modules)
import {target}
for name in {extra!r}:
    __import__(name)
print(json.dumps({{"added": sorted(set(sys.modules) - before), "all": sorted(sys.modules)}}))
"""


def _imports(framework: str, target: str, extra: tuple[str, ...] = ()) -> dict[str, list[str]]:
    code = _PROBE.format(framework=framework, target=target, extra=extra)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _root(module: str) -> str:
    return module.partition(".")[0]


@pytest.mark.parametrize("target", sorted(FRAMEWORKS))
def test_importing_an_adapter_adds_only_xrisk_and_its_framework(target):
    framework, own = FRAMEWORKS[target]
    modules = _imports(framework, target)
    allowed = {"xrisk", "numpy", "array_api_compat", *own, *sys.stdlib_module_names}
    foreign = [m for m in modules["added"] if _root(m) not in allowed]
    assert not foreign, f"import {target} imports beyond its framework: {foreign[:40]}"
    heavy = sorted({_root(m) for m in modules["added"]} & set(HEAVY))
    assert not heavy, f"import {target} imports {heavy}"


def test_the_core_packages_import_without_scikit_learn_and_use_it_on_first_call():
    modules = _imports("", "xrisk", ("xrisk.datasets", "xrisk.metrics", "xrisk.samplers"))
    heavy = sorted({_root(m) for m in modules["all"]} & set(HEAVY))
    assert not heavy, f"xrisk's data sets, metrics and samplers load {heavy} at import"
