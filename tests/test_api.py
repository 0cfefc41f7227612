"""The public face: one import root, framework-free core, identical adapters, portable state."""

from __future__ import annotations

import copy
import inspect
import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from numpy.testing import assert_allclose

import xrisk
import xrisk.jax as xjax
import xrisk.tensorflow as xtf
import xrisk.torch as xtorch

ADAPTERS = {"torch": xtorch, "tensorflow": xtf, "jax": xjax}
SHARED_NAMES = [*xrisk.LOSSES, *xrisk.OPTIMIZERS]


def _run_isolated(code, tmp_path):
    """Run ``code`` in a fresh interpreter outside the repository (the installed package)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_import_xrisk_with_no_framework_importable(tmp_path):
    """The core imports and computes with torch, TensorFlow and JAX all blocked."""
    result = _run_isolated("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"torch", "tensorflow", "jax", "jaxlib", "keras",
                                          "optax"}:
                    raise ImportError(f"blocked {name}")
        sys.meta_path.insert(0, Block())
        import numpy as np, array_api_compat.numpy as xp
        import xrisk
        loss = xrisk.APLoss(4)
        value, state = loss.apply(loss.init(xp=xp), np.array([0.3, 0.6]), np.array([1, 0]),
                                  np.array([0, 1]))
        frameworks = {"torch", "tensorflow", "jax"} & set(sys.modules)
        print("ok", sorted(frameworks), round(float(state.u[0, 0]), 6))
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0:2] == ["ok", "[]"]


def test_only_xrisk_is_installed_as_an_import_root(tmp_path):
    result = _run_isolated("""
        import importlib.util
        print([n for n in ("backends", "adapters", "xrisk_core")
               if importlib.util.find_spec(n) is not None])
        import xrisk.backends, xrisk.torch, xrisk.tensorflow, xrisk.jax
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_folder_named_xrisk_in_the_working_directory_does_not_shadow_the_package(tmp_path):
    """A clone named ``xrisk`` next to the user's script would be a namespace package on
    sys.path[0]; the README's strict editable install (and a normal install) wins over it."""
    (tmp_path / "xrisk").mkdir()
    result = _run_isolated("""
        import xrisk
        print(sorted(xrisk.LOSSES)[:1], xrisk.__file__ is not None)
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['APLoss'] True"


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_adapters_export_the_same_names_and_signatures(name):
    signatures = {fw: inspect.signature(getattr(module, name))
                  for fw, module in ADAPTERS.items()}
    parameters = {fw: [(p.name, p.kind, p.default) for p in sig.parameters.values()]
                  for fw, sig in signatures.items()}
    assert parameters["torch"] == parameters["tensorflow"] == parameters["jax"], parameters


def test_adapters_cover_every_registry_entry():
    for module in ADAPTERS.values():
        assert set(SHARED_NAMES) <= set(module.__all__)


def test_optimizer_defaults_match_the_core_rules():
    for name, rule in xrisk.OPTIMIZERS.items():
        core = {n: p.default for n, p in inspect.signature(rule).parameters.items()
                if n != "loss_fn"}
        adapter = {n: p.default for n, p in inspect.signature(xtorch.__dict__[name]).parameters
                   .items() if n in core}
        assert adapter == core, name


def _step(framework, loss_fn, state, scores, labels, index):
    if framework == "jax":
        value, new_state = loss_fn.apply(state, jnp.asarray(scores), jnp.asarray(labels),
                                         jnp.asarray(index))
        return float(value), loss_fn.export_state(new_state), new_state
    convert = torch.as_tensor if framework == "torch" else tf.constant
    value = loss_fn(convert(scores), convert(labels), convert(index))
    return float(value), loss_fn.export_state(), None


def test_state_exported_from_one_framework_resumes_in_the_others():
    rng = np.random.default_rng(4)
    batches = [(rng.uniform(size=6), rng.integers(0, 2, 6), rng.integers(0, 10, 6))
               for _ in range(3)]
    source = xtorch.APLoss(10, dtype="float64")
    for scores, labels, index in batches[:2]:
        source(torch.as_tensor(scores), torch.as_tensor(labels), torch.as_tensor(index))
    exported = source.export_state()
    results = {}
    for framework, module in ADAPTERS.items():
        loss_fn = module.APLoss(10, dtype="float64")
        state = loss_fn.load_state(exported)
        state = state[0] if framework == "jax" else None
        if framework != "jax":
            for key, value in exported.items():
                assert_allclose(loss_fn.export_state()[key], value, rtol=0)
        results[framework] = _step(framework, loss_fn, state, *batches[2])[:2]
    for framework, (value, state) in results.items():
        assert_allclose(value, results["torch"][0], rtol=1e-12, err_msg=framework)
        for key in state:
            assert_allclose(state[key], results["torch"][1][key], rtol=1e-12)
    assert np.any(results["torch"][1]["u"] != exported["u"])


def test_torch_state_dicts_resume_loss_and_optimizer_exactly():
    """Saving loss and optimizer state_dicts mid-run and resuming reproduces the run."""
    torch.manual_seed(0)
    X, y = torch.randn(12, 3, dtype=torch.float64), torch.tensor([1, 0] * 6)

    def make():
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 1).double()
        loss_fn = xtorch.AUCMLoss(dtype="float64")
        return model, loss_fn, xtorch.PESG(model.parameters(), loss_fn, learning_rate=0.1)

    def train(model, loss_fn, opt, steps):
        for _ in range(steps):
            opt.zero_grad()
            loss_fn(torch.sigmoid(model(X)), y).backward()
            opt.step()

    model, loss_fn, opt = make()
    train(model, loss_fn, opt, 2)
    opt.update_regularizer(decay_factor=10)
    train(model, loss_fn, opt, 2)
    saved = copy.deepcopy([m.state_dict() for m in (model, loss_fn, opt)])
    assert {"step", "lr"} <= set(saved[2]["param_groups"][0])
    assert {"count", "reference", "iterate_sum", "average_count", "momentum"} <= \
        set(saved[2]["state"][0])
    train(model, loss_fn, opt, 3)
    model2, loss_fn2, opt2 = make()
    for module, state in zip((model2, loss_fn2, opt2), saved, strict=True):
        module.load_state_dict(state)
    train(model2, loss_fn2, opt2, 3)
    for a, b in zip([*model.parameters(), *loss_fn.parameters()],
                    [*model2.parameters(), *loss_fn2.parameters()], strict=True):
        assert torch.equal(a, b)
    assert opt2.param_groups[0]["lr"] == pytest.approx(0.01)


def test_loss_buffers_follow_the_module():
    loss_fn = xtorch.APLoss(5)
    assert set(loss_fn.state_dict()) == {"u", "_extra_state"} and loss_fn.u.shape == (5, 2)
    assert loss_fn.double().u.dtype == torch.float64
    assert loss_fn.margin == 1.0 and "APLoss" in repr(loss_fn)


def test_jax_stateful_wrapper_matches_the_pure_calls():
    pure = xjax.APLoss(8, dtype="float64")
    eager = xjax.StatefulLoss(xjax.APLoss(8, dtype="float64"))
    state = pure.init()
    rng = np.random.default_rng(2)
    for _ in range(2):
        scores, labels = jnp.asarray(rng.uniform(size=5)), jnp.asarray([1, 0, 1, 0, 0])
        index = jnp.asarray(rng.choice(8, 5, replace=False))
        value, state = pure.apply(state, scores, labels, index)
        # The wrapper's step is jitted: XLA may order the sum differently (the loss is ~1e-17).
        np.testing.assert_allclose(float(eager(scores, labels, index)), float(value),
                                   rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(np.asarray(eager.state.u), np.asarray(state.u))
