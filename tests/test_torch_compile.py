"""``torch.compile`` captures every registered loss's call in one graph (issue 18, point 2).

The loss call is compiled with ``fullgraph=True`` and a backend that counts the graphs Dynamo
hands it and runs them as they are (no inductor: nothing is compiled to code, which keeps
the test to tracing time). ``fullgraph=True`` raises at any graph break: a break splits the
step into several compiled pieces with eager Python between them, which costs the speed-up
documented in docs/performance.md, so every loss must trace as exactly one graph. The
compiled call must then give the eager loss and the eager state update.

The inputs are those of the training-step workloads of benchmarks/_families.py (one per
registered loss, the loss's own input layout), in float64 at batch 16.

Tracing costs 1-20 s per loss on this machine (Dynamo interprets xrisk's Python: the
multi-label pAUC loss, which builds one pAUC per label, is the slowest), about a minute for
all of them on two quiet cores, more than the suite's budget allows. So APLoss (state table,
index, pairwise surrogate), CrossEntropyLoss (stateless) and AUCMLoss (trainable
auxiliaries) always run, and the sweep over
every registered loss is marked ``slow`` and runs when asked for:
``pytest -m slow tests/test_torch_compile.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")

import xrisk  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
#: Always run: a state table with an index and a pairwise surrogate; a stateless loss; and a
#: loss with trainable auxiliaries (nn.Parameters), whose backend lookup once broke the graph.
ALWAYS = ("APLoss", "CrossEntropyLoss", "AUCMLoss")

def _families():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import _families
    finally:
        sys.path.remove(str(BENCHMARKS))
    return _families


def _loss_and_inputs(name: str):
    """The torch loss of ``name`` and its call's inputs by name (scores requiring grad)."""
    families = _families()
    family = next(f for f in families.FAMILIES if f.loss == name)
    built = family.build("xrisk", 16, None, dtype=torch.float64)
    definition = built.loss.definition
    captured: dict = {}
    original = built.loss.forward

    def capture(*inputs, **named):
        captured.update(definition.bind(inputs, named))
        return original(*inputs, **named)

    built.loss.forward = capture
    try:
        built.loss_call(built.batches[0])
    finally:
        del built.loss.forward  # the instance attribute goes; the class's forward is back
    kinds = {spec.name: spec.kind for spec in definition.inputs()}
    named = {}
    for key, value in captured.items():
        if value is None:
            continue
        value = value.detach().clone()
        if kinds[key] == "score":
            value.requires_grad_(True)
        named[key] = value
    return built.loss, named


def test_every_registered_loss_has_a_workload():
    covered = {f.loss for f in _families().FAMILIES}
    assert covered == set(xrisk.LOSSES), (
        f"benchmarks/_families.py lacks {set(xrisk.LOSSES) - covered}; "
        f"names no loss: {covered - set(xrisk.LOSSES)}")


def _params():
    for name in sorted(xrisk.LOSSES):
        marks = [] if name in ALWAYS else [pytest.mark.slow]
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_loss_call_is_one_graph(name, request):
    if name not in ALWAYS and "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the sweep over every loss runs with -m slow (see the module docstring)")
    loss_fn, named = _loss_and_inputs(name)
    eager_fn, same = _loss_and_inputs(name)
    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    dynamo.reset()
    compiled = torch.compile(lambda **inputs: loss_fn(**inputs), backend=counting_backend,
                             fullgraph=True)
    value = compiled(**named)
    assert len(graphs) == 1, f"{name}: {len(graphs)} graphs"
    torch.testing.assert_close(value, eager_fn(**same), rtol=1e-12, atol=1e-12)
    for key, table in eager_fn.state_dict().items():
        if key.endswith("_extra_state"):
            continue
        torch.testing.assert_close(loss_fn.state_dict()[key], table, rtol=1e-12, atol=1e-12,
                                   msg=f"{name}: state {key}")


#: Always run in the gradient check: the losses of ALWAYS and CompositionalAUCLoss, whose
#: phase (``step % 2k < k``) torch's partitioner once recomputed after the step was written.
GRADIENTS_ALWAYS = (*ALWAYS, "CompositionalAUCLoss")


def _gradient_params():
    for name in sorted(xrisk.LOSSES):
        marks = [] if name in GRADIENTS_ALWAYS else [pytest.mark.slow]
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_gradient_params()))
def test_compiled_gradients_equal_the_eager_ones(name, request):
    """Backward through AOTAutograd's min-cut partitioner (``aot_eager_decomp_partition``:
    the graphs inductor gets, run without generating code): the gradients of the scores and
    of the trainable auxiliaries equal the eager ones. The partitioner may recompute a read of
    a state buffer in the backward, after the forward has written the buffer; the adapter
    reads 0-d state through an identity it must save (``_saved_scalars``). Without it
    CompositionalAUCLoss raised a version-counter error here (and took the other phase's
    gradient under inductor)."""
    if name not in GRADIENTS_ALWAYS and "slow" not in (request.config.getoption("markexpr")
                                                        or ""):
        pytest.skip("the sweep over every loss runs with -m slow (see the module docstring)")
    loss_fn, named = _loss_and_inputs(name)
    eager_fn, same = _loss_and_inputs(name)
    dynamo.reset()
    compiled = torch.compile(lambda **inputs: loss_fn(**inputs),
                             backend="aot_eager_decomp_partition", fullgraph=True)
    value, expected = compiled(**named), eager_fn(**same)
    value.backward()
    expected.backward()
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-12)
    for key, tensor in named.items():
        if tensor.requires_grad:
            torch.testing.assert_close(tensor.grad, same[key].grad, rtol=1e-12, atol=1e-12,
                                       msg=f"{name}: gradient of {key}")
    for (key, param), other in zip(loss_fn.named_parameters(), eager_fn.parameters(),
                                   strict=True):
        torch.testing.assert_close(param.grad, other.grad, rtol=1e-12, atol=1e-12,
                                   msg=f"{name}: gradient of {key}")
