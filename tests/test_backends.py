"""The backend boundary: stop_gradient, write_rows and its duplicate rule, the TF shim."""

from __future__ import annotations

import ast
import pathlib

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch

import xrisk
from xrisk import _state
from xrisk.backends import BACKEND_NAMES, backend_of, get_backend

CORE = pathlib.Path(xrisk.__file__).parent

CONVERT = {
    "numpy": np.asarray,
    "array_api_strict": array_api_strict.asarray,
    "torch": torch.as_tensor,
    "jax": jnp.asarray,
    "tensorflow": tf.constant,
}


def test_backend_detection_by_array_type():
    for name, convert in CONVERT.items():
        assert backend_of(convert(np.zeros(2))).name == name
    assert backend_of(tf.Variable(np.zeros(2))).name == "tensorflow"
    assert backend_of(None, torch.zeros(1)).name == "torch"
    assert set(CONVERT) == set(BACKEND_NAMES)


def test_stop_gradient_blocks_torch():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    backend = get_backend("torch")
    (x * backend.stop_gradient(x) + x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 3.0])  # d/dx (x·c + x) = c + 1


def test_stop_gradient_blocks_jax():
    backend = get_backend("jax")
    grad = jax.grad(lambda x: (x * backend.stop_gradient(x) + x).sum())(jnp.array([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(grad), [2.0, 3.0])


def test_stop_gradient_blocks_tensorflow():
    backend = get_backend("tensorflow")
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(x * backend.stop_gradient(x) + x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 3.0])


def test_write_rows_duplicate_rule_is_the_same_on_every_backend():
    """Duplicates: the row at the last position of an index wins, on every backend."""
    table = np.arange(8, dtype=np.float64) * 10
    index = np.array([5, 2, 5, 7, 2, 5])
    rows = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    expected = table.copy()
    for position, k in enumerate(index):  # sequential writes: the last one wins
        expected[k] = rows[position]
    results = {}
    for name, convert in CONVERT.items():
        backend = get_backend(name)
        got = _state.write_rows(backend, convert(table), convert(index), convert(rows),
                                xp=backend.namespace)
        results[name] = backend.to_numpy(got)
    variable = tf.Variable(table)
    backend = get_backend("tensorflow")
    out = _state.write_rows(backend, variable, tf.constant(index), tf.constant(rows),
                            xp=backend.namespace)
    assert out is variable  # in place on a tf.Variable
    results["tf.Variable"] = variable.numpy()
    for name, got in results.items():
        np.testing.assert_array_equal(got, expected, err_msg=name)


def test_write_rows_is_in_place_on_torch_and_keeps_dtype():
    backend = get_backend("torch")
    table = torch.zeros(6, dtype=torch.float32)
    out = _state.write_rows(backend, table, torch.tensor([1, 4]),
                            torch.tensor([0.5, 0.25], dtype=torch.float64), xp=backend.namespace)
    assert out.data_ptr() == table.data_ptr() and out.dtype == torch.float32
    np.testing.assert_array_equal(table.numpy(), [0, 0.5, 0, 0, 0.25, 0])


def test_write_rows_is_functional_on_jax():
    backend = get_backend("jax")
    table = jnp.zeros(4)
    out = _state.write_rows(backend, table, jnp.array([3]), jnp.array([1.0]),
                            xp=backend.namespace)
    assert float(table[3]) == 0.0 and float(out[3]) == 1.0


#: Host-side data code, outside the backend contract: it runs on numpy, torch or JAX arrays,
#: and TensorFlow's pipelines call it through numpy (the SimCLR views: tf.numpy_function).
HOST_SIDE = ("datasets", "runner")


def _core_namespace_calls() -> set[str]:
    """Every ``xp.<name>`` the core's code uses (docstrings excluded), but for its host-side
    data code."""
    names = set()
    for path in CORE.rglob("*.py"):
        if path.relative_to(CORE).parts[0] in HOST_SIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "xp"):
                names.add(node.attr)
    return names


def test_tensorflow_shim_lists_exactly_what_the_core_calls():
    shim = get_backend("tensorflow")
    assert set(shim.SHIM_FUNCTIONS) == _core_namespace_calls()
    assert set(vars(shim.namespace)) == set(shim.SHIM_FUNCTIONS)


@pytest.mark.parametrize("name", sorted(BACKEND_NAMES))
def test_every_backend_supplies_the_contract(name):
    backend = get_backend(name)
    for attribute in ("namespace", "stop_gradient", "write_rows", "device", "inspectable",
                      "to_numpy", "index_dtype", "has_autodiff"):
        assert hasattr(backend, attribute), f"{name} lacks {attribute}"
    for function in _core_namespace_calls():
        assert hasattr(backend.namespace, function), f"{name} namespace lacks {function}"


def test_backend_modules_stay_small():
    for path in pathlib.Path(xrisk.backends.__file__).parent.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 200, path.name


def test_torch_namespace_keeps_a_compiled_loss_in_one_graph():
    """The torch backend's namespace (array-api-compat with direct take/clip) must be a
    module TorchDynamo traces through: a custom namespace class broke an APLoss step into
    three graphs. Dynamo's tracing only (no Inductor compile)."""
    torch = pytest.importorskip("torch")
    import xrisk.torch as xr

    loss_fn = xr.APLoss(20)
    scores = torch.rand(8, requires_grad=True)
    labels, index = torch.tensor([1, 0] * 4), torch.arange(8)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda s, y, i: loss_fn(s, y, i))(scores, labels, index)
    assert explained.graph_break_count == 0, explained.break_reasons
