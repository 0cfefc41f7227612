"""What keeps a training step cheap, checked as properties rather than timings.

- the grouping of duplicate keys (:mod:`xrisk._grouping`) is exact for any key and sorts
  the keys alone, host-ranked keys giving the device's groups;
- AP's pair work has no boolean B x B kernel and no (B x B) @ (B x k) product (both take slow
  paths on CPUs), and its groups of positives give equal rows to equal indices;
- the squared hinge (``clip``, no ``where``) has the same subgradient on every backend;
- the torch optimizers update a group as one flat vector: their tensor ops do not grow with
  the number of parameters, a step reads no device value, and the flat buffers follow any
  state the user or a load puts in place.
"""

from __future__ import annotations

import copy

import array_api_compat.numpy as xp
import array_api_compat.torch as tx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.extend import core as jax_core
from numpy.testing import assert_allclose, assert_array_equal
from torch.utils._python_dispatch import TorchDispatchMode

import xrisk
import xrisk.torch as xr
from tests._frameworks import masked_pairs
from xrisk._grouping import group_keys, last_occurrence
from xrisk._state import write_rows
from xrisk.backends import get_backend
from xrisk.losses import Step
from xrisk.surrogates import surrogate_loss

# --------------------------------------------------------------------------- float index tests


def _last_by_hand(index):
    return np.array([max(j for j in range(len(index)) if index[j] == index[i])
                     for i in range(len(index))])


@given(index=st.lists(st.integers(0, 20), min_size=1, max_size=40),
       offset=st.sampled_from([0, 2**24 - 21, 2**40]))
def test_last_occurrence_is_exact_for_any_key(index, offset):
    """The duplicate rule's winners (the search of :func:`write_rows`): exact integers, also
    beyond float32's (2**24) and float64's (2**53, with the offset) exact integers."""
    index = np.asarray(index, dtype=np.int64) + offset
    want = _last_by_hand(index)
    for name, convert in (("numpy", np.asarray), ("torch", torch.as_tensor)):
        backend = get_backend(name)
        got = last_occurrence(convert(index), backend=backend, xp=backend.namespace)
        assert_array_equal(np.asarray(got), want)


def test_write_rows_with_equal_duplicates_skips_the_search_and_keeps_the_rule(monkeypatch):
    """Rows already equal per index: any scatter order gives the rule's table (here the
    adversarial first-write-wins scatter of tests/test_duplicate_rule.py), with no search."""
    from tests.test_duplicate_rule import _first_write_wins, _last_wins_by_hand

    backend = get_backend("numpy")
    monkeypatch.setattr(backend, "write_rows", _first_write_wins)
    monkeypatch.setattr("xrisk._state.last_occurrence", lambda *a, **k: pytest.fail("searched"))
    table = np.full((5, 2), -1.0)
    index = np.array([3, 1, 3, 3, 0])
    rows = np.array([[7.0, 8.0], [1.0, 2.0], [7.0, 8.0], [7.0, 8.0], [4.0, 5.0]])
    out = write_rows(backend, table, index, rows, xp=xp, equal_duplicates=True)
    assert_array_equal(out, _last_wins_by_hand(table, index, rows))


def test_groups_separate_neighbours_at_the_float32_limit():
    """Keys one apart at float32's last exact integers and beyond (2**24, 2**24 + 1 round to
    one float32) get distinct groups, and the pair mask of the group ids is exact in
    float32."""
    backend = get_backend("numpy")
    for keys in (np.array([2**24 - 2, 2**24 - 1, 2**24 - 1]), np.array([2**24, 2**24 + 1]),
                 np.array([2**31 - 1, 2**24 + 1, 2**31 - 2, 2**24, 2**24 + 1])):
        groups = group_keys(keys, backend=backend, xp=xp, dtype=np.float32)
        same = groups.same(np.float32)
        assert same.dtype == np.float32
        assert_array_equal(same == 1, keys[:, None] == keys[None, :])
        assert_array_equal(same[keys[:, None] != keys[None, :]], 0)


def _equations(jaxpr):
    """Every equation of ``jaxpr``, nested calls (``pjit``) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", param)
            if isinstance(inner, jax_core.Jaxpr):
                yield from _equations(inner)


def test_groups_of_large_keys_sort_only_the_keys():
    """Keys beyond float32's exact integers are grouped with one sort of the keys alone and a
    binary search: an argsort sorts (key, position) pairs, which XLA's CPU backend does
    about 7 times slower, and made an NDCG step on a table of 2e7 interactions 1.24 times
    the step on 1e4."""
    backend = get_backend("jax")
    keys = jnp.asarray([2**24, 5, 2**24 + 1, 5], dtype=jnp.int32)

    def ids(k):
        return group_keys(k, backend=backend, xp=jnp, dtype=jnp.float32).ids

    jaxpr = jax.make_jaxpr(ids)(keys)
    sorts = [eqn for eqn in _equations(jaxpr.jaxpr) if eqn.primitive.name == "sort"]
    assert sorts and all(len(eqn.invars) == 1 for eqn in sorts), sorts
    got = np.asarray(jax.jit(ids)(keys))
    assert_array_equal(got[:, None] == got[None, :],
                       np.asarray(keys)[:, None] == np.asarray(keys)[None, :])


# --------------------------------------------------------------------------- AP's groups


@given(labels=st.lists(st.integers(0, 1), min_size=1, max_size=12),
       data=st.data())
def test_positive_groups_give_equal_rows_to_equal_indices(labels, data):
    labels = np.asarray(labels)
    index = np.asarray(data.draw(st.lists(st.integers(0, 5), min_size=len(labels),
                                          max_size=len(labels))))
    positive = labels.astype(np.float64)
    loss = xrisk.APLoss(6)
    groups = loss.positive_groups(Step(get_backend("numpy"), xp, None), index, positive)
    keep = labels == 1
    if keep.any():
        anchor = index[np.flatnonzero(keep)[0]]  # the first positive's row
        assert_array_equal(groups.rows, np.where(keep, index, anchor))
    else:
        assert np.all(groups.rows == groups.rows[0])  # one row, written back unchanged
    members = keep[None, :] & (index[None, :] == groups.rows[:, None])
    assert_array_equal(groups.count, members.sum(axis=1))
    # positions sharing a row pool over the same members: equal estimates, equal rows
    values = np.random.default_rng(0).normal(size=(len(labels), 2))
    pooled = groups.mean(values)
    for i in range(len(labels)):
        for j in range(len(labels)):
            if groups.rows[i] == groups.rows[j]:
                assert_array_equal(pooled[i], pooled[j])


@settings(max_examples=max(30, settings().max_examples), deadline=None)
@given(name=st.sampled_from(["APLoss", "pAUC_CVaR_Loss", "pAUC_DRO_Loss", "tpAUC_KL_Loss",
                             "tpAUC_CVaR_Loss"]),
       labels=st.lists(st.integers(0, 1), min_size=1, max_size=16),
       dtypes=st.sampled_from([(torch.float32, torch.float32), (torch.float64, torch.float32),
                               (torch.float64, torch.float64)]),
       repeats=st.booleans(), seed=st.integers(0, 2**16))
def test_a_host_ranked_index_changes_no_value(name, labels, dtypes, repeats, seed):
    """AP and the pAUC family group an eager CPU batch's index by its host values (read by
    the checks, ranked by numpy), a batch the host cannot read on the device: loss, gradient
    and new state are the same bit for bit, with repeated indices or not, and a row that no
    positive of the batch holds keeps its value exactly, in a state wider than the scores
    too (float64 state, float32 scores: written back through float32 it lost its last
    digits). The pairs are masked in both runs: their compact layout, the labels' host path,
    sums in another order (tests/test_pair_layouts.py)."""
    from unittest import mock

    state_dtype, score_dtype = dtypes
    rng = np.random.default_rng(seed)
    num_samples, batch = 40, len(labels)
    index = torch.from_numpy(rng.choice(5 if repeats else num_samples, batch, replace=repeats))
    labels = torch.tensor(labels)
    build = getattr(xr, name)
    start = {key: value if key.startswith("__")  # the export's metadata, kept
             else rng.uniform(0.1, 0.9, np.shape(value)).astype(value.dtype)  # in every domain
             for key, value in build(num_samples, dtype=state_dtype).export_state().items()}
    scores = rng.uniform(size=batch)
    runs = []
    for on_device in (False, True):
        loss_fn = build(num_samples, dtype=state_dtype)
        loss_fn.load_state(start)
        s = torch.tensor(scores, dtype=score_dtype, requires_grad=True)
        # Values the host cannot read (as on an accelerator): checks and ranks in the graph.
        patch = (mock.patch.object(get_backend("torch"), "inspectable", return_value=False)
                 if on_device else mock.patch("xrisk._grouping.np.sort", wraps=np.sort))
        with patch as sort, masked_pairs():
            loss = loss_fn(s, labels, index)
        assert on_device or sort.called  # the host path ranked the index
        (grad,) = torch.autograd.grad(loss, s)
        runs.append((loss.detach().numpy(), grad.numpy(), loss_fn.export_state()))
    (loss_a, grad_a, state_a), (loss_b, grad_b, state_b) = runs
    assert_array_equal(loss_a, loss_b)
    assert_array_equal(grad_a, grad_b)
    untouched = np.ones(num_samples, bool)
    untouched[index.numpy()[labels.numpy() == 1]] = False
    for key, table in state_a.items():
        assert_array_equal(table, state_b[key], err_msg=key)
        if table.shape[:1] == (num_samples,):  # per-sample rows (not a global entry)
            assert_array_equal(table[untouched], start[key][untouched], err_msg=key)


@given(keys=st.lists(st.integers(-3, 3) | st.sampled_from([2**24, 2**24 + 1, 2**40]),
                    min_size=1, max_size=12),
       data=st.data())
def test_host_ranked_keys_give_the_device_groups(keys, data):
    """The host values of an index (read by the checks of an eager CPU batch) rank it by
    numpy: the same group ids, rows, anchor and counts as the ranking in the graph, with or
    without a mask, for any keys (an empty batch never reaches a loss's math eagerly)."""
    keys = np.asarray(keys, dtype=np.int64)
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=len(keys),
                                         max_size=len(keys))), dtype=bool)
    backend = get_backend("torch")
    for mask in (None, torch.as_tensor(keep)):
        device, host = (group_keys(torch.as_tensor(keys), mask, backend=backend, xp=tx,
                                   dtype=torch.float64, host=values)
                        for values in (None, keys))
        for field in ("ids", "rows", "anchor", "count", "keep"):
            if mask is None and field in ("anchor", "keep"):  # all kept: neither is built
                assert getattr(host, field) is None and getattr(device, field) is None, field
                continue
            assert_array_equal(getattr(host, field).numpy(), getattr(device, field).numpy(),
                               err_msg=field)
            assert getattr(host, field).dtype == getattr(device, field).dtype, field
        assert host.all_kept == device.all_kept


class _Ops(TorchDispatchMode):
    """Records (op name, input shapes, output dtype) of every dispatched op."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, tuple, object]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))
        dtype = out.dtype if isinstance(out, torch.Tensor) else None
        self.ops.append((func.overloadpacket.__name__, shapes, dtype))
        return out


def test_ap_forward_has_no_boolean_matrix_and_no_skinny_product():
    batch = 24
    loss_fn = xr.APLoss(1000)
    generator = torch.Generator().manual_seed(0)
    labels = (torch.arange(batch) % 4 == 0).long()
    index = torch.randint(0, 1000, (batch,), generator=generator)
    index[1] = index[0]  # a duplicate, as DualSampler's oversampling gives
    scores = torch.rand(batch, generator=generator, requires_grad=True)
    with _Ops() as forward:
        loss = loss_fn(scores, labels, index)
    with _Ops() as backward:  # autograd's own kernels (clip's mask) are not ours to choose
        loss.backward()
    square = (batch, batch)
    boolean = [op for op in forward.ops if op[2] == torch.bool and square in op[1]]
    assert not boolean, boolean
    skinny = [op for op in forward.ops + backward.ops
              if op[0] in ("mm", "matmul") and op[1][0] == square]
    assert not skinny, skinny


# --------------------------------------------------------------------------- the squared hinge


@pytest.mark.parametrize("framework", ["torch", "jax", "tensorflow"])
def test_squared_hinge_subgradient_is_the_same_on_every_backend(framework):
    margin = 0.5
    t = np.array([0.5 - 1e-3, 0.5, 0.5 + 1e-3, -1.0, 2.0])  # the kink at t = margin
    expected = -2 * np.maximum(margin - t, 0)
    namespace = get_backend(framework).namespace
    if framework == "torch":
        x = torch.tensor(t, requires_grad=True)
        surrogate_loss("squared_hinge", x, margin=margin, xp=namespace).sum().backward()
        grad = x.grad.numpy()
    elif framework == "jax":
        grad = np.asarray(jax.grad(lambda x: surrogate_loss(
            "squared_hinge", x, margin=margin, xp=jnp).sum())(jnp.asarray(t)))
    else:
        x = tf.constant(t)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(surrogate_loss("squared_hinge", x, margin=margin, xp=namespace))
        grad = tape.gradient(y, x).numpy()
    assert_allclose(grad, expected, rtol=1e-12, atol=0)
    assert grad[1] == 0.0


# --------------------------------------------------------------------------- torch optimizers


def _model(layers, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    modules = []
    for _ in range(layers):
        modules += [torch.nn.Linear(3, 3), torch.nn.Tanh()]
    return torch.nn.Sequential(*modules, torch.nn.Linear(3, 1)).to(dtype)


_VIEWS = {"view", "_unsafe_view", "reshape", "as_strided", "alias", "detach", "slice",
          "select", "split", "split_with_sizes", "unbind", "narrow", "t", "transpose",
          "expand", "unsqueeze", "squeeze", "_record_function_enter_new",
          "_record_function_exit"}


def _step_ops(make_optimizer, layers):
    model = _model(layers)
    opt, loss_fn = make_optimizer(model)
    for _ in range(2):  # the first step builds the flat plans
        for p in model.parameters():
            p.grad = torch.full_like(p, 0.1)
        for p in (loss_fn.parameters() if loss_fn is not None else ()):
            p.grad = torch.full_like(p, 0.1)
        with _Ops() as mode:
            opt.step()
    return [op[0] for op in mode.ops if op[0] not in _VIEWS]


_MAKERS = {
    "SOAP": lambda m: (xr.SOAP(m.parameters(), learning_rate=1e-2), None),
    "SGD": lambda m: (xr.SGD(m.parameters(), learning_rate=1e-2, momentum=0.5,
                              epoch_decay=0.1), None),
    "PESG": lambda m: (lambda f: (xr.PESG(m.parameters(), f), f))(
        xr.AUCMLoss(dtype="float64")),
}


@pytest.mark.parametrize("name", sorted(_MAKERS))
def test_torch_optimizer_ops_do_not_grow_with_the_number_of_parameters(name):
    small, large = (_step_ops(_MAKERS[name], layers) for layers in (1, 6))
    assert sorted(small) == sorted(large), (small, large)


def test_torch_flat_step_cuts_no_views_of_whole_members_or_scratch():
    """A group of small parameters is one tile: its members are gathered whole (no slice of
    each value, gradient and write-back) into buffers cut once per plan (no slice or select
    of the scratch, no unbind of it)."""
    model = _model(3)
    opt = xr.SOAP(model.parameters(), learning_rate=1e-2)
    for _ in range(3):
        for p in model.parameters():
            p.grad = torch.full_like(p, 0.1)
        with _Ops() as mode:
            opt.step()
    cuts = [op for op in mode.ops if op[0] in ("slice", "select", "unbind", "narrow")]
    assert not cuts, cuts


def test_torch_loss_fills_its_declarations_at_construction():
    """A torch loss evaluates its definition's declarations when built: a first step (the
    first torch.compile'd call among them) then reads a cache it does not fill, so the
    second call does not recompile."""
    from xrisk.losses._base import _DECLARATIONS

    for loss_fn in (xr.APLoss(num_samples=8),
                    xr.NDCGLoss(num_interactions=12, num_queries=3, num_items=5),
                    xr.MIDAMLoss(mode="softmax", num_samples=4)):
        cached = loss_fn.definition.__dict__.get("_declared", {})
        for name in _DECLARATIONS:
            method = getattr(type(loss_fn.definition), name)
            if hasattr(method, "__wrapped__"):  # the base class's defaults are not cached
                assert method.__wrapped__.__qualname__ in cached, (loss_fn, name)


def test_torch_training_step_reads_no_device_value():
    """``item()``/``int()``/``float()`` of a tensor dispatch ``_local_scalar_dense``: a device
    sync on an accelerator. None in a steady-state step of the loss, backward or optimizer."""
    model = _model(1, dtype=torch.float32)
    loss_fn = xr.APLoss(16)
    opt = xr.SOAP(model.parameters(), learning_rate=1e-2, epoch_decay=0.01)
    X, y, index = torch.randn(8, 3), torch.tensor([1, 0, 0, 1] * 2), torch.arange(8)
    for step in range(3):
        with _Ops() as mode:
            opt.zero_grad()
            loss_fn(torch.sigmoid(model(X)).squeeze(1), y, index).backward()
            opt.step()
        if step > 0:
            reads = [op for op in mode.ops if op[0] == "_local_scalar_dense"]
            assert not reads, reads


def _per_tensor(monkeypatch_context, opt):
    """Run ``opt.step()`` on the per-tensor path (as under torch.compile)."""
    with monkeypatch_context() as patch:
        patch.setattr(torch.compiler, "is_compiling", lambda: True)
        opt.step()


def _set_grads(params, step):
    for k, p in enumerate(params):
        # the third parameter has no gradient on step 2: counters part ways
        p.grad = None if (k == 2 and step == 2) else torch.full_like(p, 0.05 * (k + 1 + step))


@pytest.mark.parametrize("hyper", [dict(mode="adam", amsgrad=True, epoch_decay=0.1),
                                   dict(mode="sgd", momentum=0.9, nesterov=True,
                                        weight_decay=0.1)])
def test_flat_steps_follow_replaced_state_like_the_per_tensor_path(hyper):
    flat_model, each_model = _model(2), _model(2)
    flat, each = (xr.SOAP(m.parameters(), learning_rate=0.1, **hyper)
                  for m in (flat_model, each_model))
    pairs = ((flat_model, flat), (each_model, each))
    for step in range(6):
        for model in (flat_model, each_model):
            _set_grads(list(model.parameters()), step)
        flat.step()
        _per_tensor(pytest.MonkeyPatch.context, each)
        if step == 1:  # the user replaces a buffer: the flat path must use the new one
            for model, opt in pairs:
                first = next(model.parameters())
                opt.state[first]["momentum"] = torch.full_like(first, 0.3)
        if step == 3:
            for _, opt in pairs:
                opt.update_regularizer(decay_factor=2)
                opt.load_state_dict(copy.deepcopy(opt.state_dict()))
        for a, b in zip(flat_model.parameters(), each_model.parameters(), strict=True):
            assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-14, atol=1e-15)
            for name, value in each.state[b].items():
                assert_allclose(flat.state[a][name].numpy(), value.numpy(), rtol=1e-14,
                                atol=1e-15, err_msg=f"{name} after step {step}")


# --------------------------------------------------------------------------- losses without a mask

_MASKABLE = {
    "EntLossClassification SCENT": (lambda: xr.EntLossClassification(12), 1),
    "EntLossClassification SOX": (lambda: xr.EntLossClassification(12, mode="SOX"), 1),
    "MIDAM softmax": (lambda: xr.MIDAMLoss(mode="softmax", num_samples=12), 1),
    "MIDAM attention": (lambda: xr.MIDAMLoss(mode="attention", num_samples=12), 2),
}


@pytest.mark.parametrize("name", sorted(_MASKABLE))
def test_a_loss_without_a_mask_applies_none_and_gives_the_same_bits(name):
    """A batch without ``mask`` runs no masking (no selection over the (batch, instances)
    scores, fewer operators than the same batch with an all-ones mask) and gives the same
    loss, gradients and state bit for bit, duplicate indices included."""
    build, scored = _MASKABLE[name]
    shape = (10, 5)
    index = torch.tensor([0, 3, 3, 7, 1, 0, 11, 5, 3, 2])
    labels = torch.tensor([1, 0, 0, 1, 1, 1, 0, 0, 0, 1])
    results, counts = [], []
    for mask in (None, torch.ones(shape, dtype=torch.int64)):
        loss_fn = build().to(torch.float64)
        for step in range(2):
            scores = [(torch.randn(shape, generator=torch.Generator().manual_seed(step + k),
                                   dtype=torch.float64) * 3).requires_grad_(True)
                      for k in range(scored)]
            tail = (index,) if name.startswith("Ent") else (labels, index)
            with _Ops() as forward:
                loss = loss_fn(*scores, *tail, mask=mask)
            grads = torch.autograd.grad(loss, [*scores, *loss_fn.parameters()])
        counts.append(len(forward.ops))
        if mask is None:
            masking = [op for op in forward.ops if op[0] == "where" and shape in op[1]]
            assert not masking, masking
        results.append([loss, *grads, *loss_fn.buffers()])
    for got, want in zip(*results, strict=True):
        assert got.dtype == want.dtype and torch.equal(got, want), name
    assert counts[0] < counts[1], counts


def test_listwise_ce_without_a_mask_selects_nothing_and_gives_the_same_bits():
    """ListwiseCE without ``mask``: no selection over the (queries x positives, negatives)
    exponents, and the loss, gradient and state of an all-ones mask bit for bit (repeated
    interactions included)."""
    interaction = torch.tensor([[0, 4], [4, 9], [2, 3], [0, 7]])
    results, exponents = [], (8, 5)  # 4 queries x 2 positives, 7 - 2 negatives
    for mask in (None, torch.ones(interaction.shape, dtype=torch.int64)):
        loss_fn = xr.ListwiseCELoss(num_interactions=12, gamma=0.7).to(torch.float64)
        for step in range(2):
            scores = torch.randn(4, 7, generator=torch.Generator().manual_seed(step),
                                 dtype=torch.float64).requires_grad_(True)
            with _Ops() as forward:
                loss = loss_fn(scores, interaction, mask=mask)
            grad, = torch.autograd.grad(loss, scores)
        if mask is None:
            masking = [op for op in forward.ops if op[0] == "where" and exponents in op[1]]
            assert not masking, masking
        results.append([loss, grad, *loss_fn.buffers()])
    for got, want in zip(*results, strict=True):
        assert got.dtype == want.dtype and torch.equal(got, want)
