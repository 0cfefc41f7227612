"""torch habits: parameter groups, add_param_group, LR schedulers, state dicts that resume
exactly and refuse another model's state, torch.compile."""

from __future__ import annotations

import copy
import inspect
import io
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import xrisk
import xrisk.torch as xr
from xrisk.torch import optim as xr_optim


def _model(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).to(
        dtype)


def _data(dtype=torch.float64):
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(16, 3, generator=generator, dtype=dtype),
            torch.tensor([1, 0, 0, 1] * 4), torch.arange(16))


def _train(model, loss_fn, opt, steps, *, regularize_at=None):
    X, y, index = _data(next(model.parameters()).dtype)
    for step in range(steps):
        if step == regularize_at:
            opt.update_regularizer(decay_factor=10)
        opt.zero_grad()
        scores = torch.sigmoid(model(X)).squeeze(1)
        loss_fn(scores, y, index).backward() if isinstance(loss_fn, xr.APLoss) else \
            loss_fn(scores, y).backward()
        opt.step()


def test_parameter_groups_take_their_own_hyper_parameters():
    """weight_decay=0 for biases in a second group == two optimizers, one per group."""
    model, twin = _model(), _model()
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = xr.SOAP([{"params": weights}, {"params": biases, "weight_decay": 0.0, "lr": 0.05}],
                  learning_rate=0.01, weight_decay=0.1, mode="sgd")
    twin_weights = [p for n, p in twin.named_parameters() if n.endswith("weight")]
    twin_biases = [p for n, p in twin.named_parameters() if n.endswith("bias")]
    separate = [xr.SOAP(twin_weights, learning_rate=0.01, weight_decay=0.1, mode="sgd"),
                xr.SOAP(twin_biases, learning_rate=0.05, weight_decay=0.0, mode="sgd")]
    loss_fn, twin_loss = xr.APLoss(16, dtype="float64"), xr.APLoss(16, dtype="float64")
    X, y, index = _data()
    for _ in range(3):
        for m, fn, opts in ((model, loss_fn, [opt]), (twin, twin_loss, separate)):
            for o in opts:
                o.zero_grad()
            fn(torch.sigmoid(m(X)).squeeze(1), y, index).backward()
            for o in opts:
                o.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)
    assert opt.param_groups[1]["weight_decay"] == 0.0 and opt.param_groups[1]["lr"] == 0.05


def test_add_param_group_is_validated_and_then_trained():
    first, second = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    opt = xr.SOAP([first], learning_rate=0.1, mode="sgd", momentum=0.0)
    before = copy.deepcopy(opt.state_dict())
    with pytest.raises(ValueError, match="weight_decay=-1"):
        opt.add_param_group({"params": [second], "weight_decay": -1})
    with pytest.raises(TypeError, match=r"unknown parameter-group keys \['learning_rate'\]"):
        opt.add_param_group({"params": [second], "learning_rate": 0.1})
    assert len(opt.param_groups) == 1 and str(opt.state_dict()) == str(before)
    opt.add_param_group({"params": [second], "lr": 0.5, "clip_value": 10.0})
    first.grad, second.grad = torch.ones(2), torch.full((3,), 2.0)
    opt.step()
    assert torch.allclose(second.detach(), torch.full((3,), 1 - 0.5 * (2 + 1e-5)))
    assert torch.allclose(first.detach(), torch.full((2,), 1 - 0.1 * (1 + 1e-5)))


def test_lr_schedulers_drive_group_lr():
    w = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    opt = xr.SGD([w], learning_rate=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        w.grad = torch.ones(2, dtype=torch.float64)
        opt.step()
        scheduler.step()
    assert torch.allclose(w.detach(), torch.full((2,), -(1.0 + 0.5 + 0.25), dtype=torch.float64))
    opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # the scheduler's "initial_lr" too


@pytest.mark.parametrize("name", ["SOAP", "PESG", "PDSCA", "LARS"])
def test_state_dict_resumes_exactly(name):
    def make():
        model = _model()
        if name in ("SOAP", "LARS"):  # LARS: its momentum in its plan's flat buffer
            loss_fn = xr.APLoss(16, dtype="float64")
            return model, loss_fn, (
                xr.SOAP(model.parameters(), epoch_decay=0.01, amsgrad=True) if name == "SOAP"
                else xr.LARS(model.parameters(), learning_rate=0.1, weight_decay=0.01))
        loss_fn = (xr.AUCMLoss if name == "PESG" else xr.CompositionalAUCLoss)(dtype="float64")
        return model, loss_fn, getattr(xr, name)(model.parameters(), loss_fn)

    model, loss_fn, opt = make()
    _train(model, loss_fn, opt, 3, regularize_at=2)
    saved = [copy.deepcopy(m.state_dict()) for m in (model, loss_fn)]
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    _train(model, loss_fn, opt, 3)
    model2, loss_fn2, opt2 = make()
    model2.load_state_dict(saved[0])
    loss_fn2.load_state_dict(saved[1])
    buffer.seek(0)
    opt2.load_state_dict(torch.load(buffer))
    for group in opt2.param_groups:
        assert int(group["step"]) == 3
        for p in group["params"]:
            for key in ("count", "average_count", "auc_count", "ce_count"):
                if key in opt2.state[p]:
                    assert opt2.state[p][key].dtype == torch.int32
    _train(model2, loss_fn2, opt2, 3)
    for a, b in zip([*model.parameters(), *loss_fn.parameters()],
                    [*model2.parameters(), *loss_fn2.parameters()], strict=True):
        assert torch.equal(a, b)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_state_dict_of_another_model_fails_at_load_and_changes_nothing():
    model = _model()
    opt = xr.SOAP(model.parameters(), epoch_decay=0.01)
    _train(model, xr.APLoss(16, dtype="float64"), opt, 2)
    before = copy.deepcopy(opt.state_dict())
    other = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(),
                                torch.nn.Linear(5, 1)).double()
    other_opt = xr.SOAP(other.parameters(), epoch_decay=0.01)
    with pytest.raises(ValueError, match=r"has shape \(5, 3\); the parameter has shape "
                                         r"\(4, 3\): the state_dict comes from another model"):
        opt.load_state_dict(other_opt.state_dict())
    damaged = copy.deepcopy(before)
    del damaged["state"][0]["reference"]
    with pytest.raises(ValueError, match=r"parameter 0 has state \['average_count', 'count', "
                                         r"'iterate_sum', 'momentum', 'second_moment'\]; "
                                         r"expected .*'reference'"):
        opt.load_state_dict(damaged)
    with pytest.raises(ValueError, match=r"group 0 of the state_dict lacks \['dampening', "
                                         r"'mode', 'momentum', 'nesterov'\]"):
        opt.load_state_dict(xr.Adam(_model().parameters(), epoch_decay=0.01).state_dict())
    with pytest.raises(ValueError, match="has 2 parameter groups; this optimizer has 1"):
        opt.load_state_dict(xr.PESG(_model().parameters(), xr.AUCMLoss()).state_dict())
    assert str(opt.state_dict()) == str(before)


def test_load_state_dict_keeps_float32_slots_of_bfloat16_parameters():
    w = torch.ones(3, dtype=torch.bfloat16, requires_grad=True)
    opt = xr.SOAP([w])
    w.grad = torch.full((3,), 1e-3, dtype=torch.bfloat16)
    opt.step()
    second = opt.state[w]["second_moment"].clone()
    opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # torch would cast it to bfloat16
    assert opt.state[w]["second_moment"].dtype == torch.float32
    assert torch.equal(opt.state[w]["second_moment"], second)


def test_named_parameters_work_with_a_min_max_loss():
    model = _model()
    opt = xr.PESG(model.named_parameters(), xr.AUCMLoss(dtype="float64"))
    assert opt.param_groups[1]["param_names"] == ["loss_fn.a", "loss_fn.b"]


def test_torch_compile_of_a_training_step_matches_eager():
    """APLoss + SOAP, loss + backward + step under torch.compile: the same parameters as
    eager after 3 steps (graph breaks are allowed)."""
    X, y, index = _data(torch.float32)
    runs = {}
    for compiled in (False, True):
        model = _model(dtype=torch.float32)
        loss_fn = xr.APLoss(16)
        opt = xr.SOAP(model.parameters(), learning_rate=1e-2)

        def step(model=model, loss_fn=loss_fn, opt=opt):
            opt.zero_grad()
            loss = loss_fn(torch.sigmoid(model(X)).squeeze(1), y, index)
            loss.backward()
            opt.step()
            return loss

        run = torch.compile(step) if compiled else step
        for _ in range(3):
            run()
        runs[compiled] = [p.detach().clone() for p in model.parameters()]
    torch._dynamo.reset()
    for eager, compiled in zip(runs[False], runs[True]):
        np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(p, q) for p, q in zip(runs[False], _model(dtype=torch.float32)
                                                      .parameters()))


@pytest.mark.parametrize("name", ["SOAP", "PESG"])
@pytest.mark.parametrize("edit", ["in_place", "load_state_dict", "rebind_data"])
def test_a_parameter_changed_between_steps_is_read_anew(name, edit):
    """The eager optimizer mirrors a group's parameters in one flat vector; a parameter written
    outside it (in place, by the model's load_state_dict, or by rebinding .data) must be read
    again at the next step, as a fresh optimizer with the same state reads it."""
    model = _model()
    loss_fn = xr.APLoss(16) if name == "SOAP" else xr.AUCMLoss()
    opt = getattr(xr, name)(model.parameters(), **({} if name == "SOAP" else
                                                   {"loss_fn": loss_fn}))
    _train(model, loss_fn, opt, 2)
    edited = {k: v * 0.5 for k, v in model.state_dict().items()}
    with torch.no_grad():
        if edit == "in_place":
            for param in model.parameters():
                param.mul_(0.5)
        elif edit == "load_state_dict":
            model.load_state_dict(edited)
        else:
            for param, key in zip(model.parameters(), edited, strict=True):
                param.data = edited[key].clone()
    twin = copy.deepcopy(model)
    twin_loss = copy.deepcopy(loss_fn)
    twin_opt = getattr(xr, name)(twin.parameters(), **({} if name == "SOAP" else
                                                       {"loss_fn": twin_loss}))
    twin_opt.load_state_dict(opt.state_dict())
    _train(model, loss_fn, opt, 1)
    _train(twin, twin_loss, twin_opt, 1)
    for got, want in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


# ------------------------------------------------------------------ the eager path's in-place tiles

#: Hyper-parameter values to draw from (each rule takes those of its signature).
_HYPER = {
    "learning_rate": st.sampled_from([0.05, 0.3]), "mode": st.sampled_from(["sgd", "adam"]),
    "clip_value": st.sampled_from([0.5, 2.0, math.inf]),
    "weight_decay": st.sampled_from([0.0, 0.01]), "epoch_decay": st.sampled_from([0.0, 0.05]),
    "momentum": st.sampled_from([0.0, 0.5, 0.9]), "nesterov": st.booleans(),
    "dampening": st.sampled_from([0.0, 0.3]),
    "betas": st.sampled_from([(0.9, 0.999), (0.5, 0.9)]),
    "eps": st.sampled_from([1e-8, 1e-3]), "amsgrad": st.booleans(),
    "ce_learning_rate": st.sampled_from([None, 0.2]), "beta1": st.sampled_from([0.0, 0.5]),
    "beta2": st.sampled_from([0.3, 1.0]), "trust_coefficient": st.sampled_from([0.001, 0.5]),
    "exclude_1d": st.booleans(),
}
_LOSSES = {"PESG": "AUCMLoss", "PDSCA": "CompositionalAUCLoss", "MIDAM": "AUCMLoss"}


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_eager_tiles_give_the_core_rule_s_update_bit_for_bit(data):
    """The eager step (the in-place kernels on tiles of the flat parameter vector, tiles that
    split a parameter or gather several, or step several on the members themselves by
    foreach operators; LARS's on the group, by foreach operators or tensor by tensor through
    its scratch) == the core rule's update_param per tensor with host counters: parameters
    and every slot, over several steps, for every rule; bit for bit in float64, and in
    float32 (where the updates run as torch's fused kernels, one rounding per multiply-add)
    to a few units in the last place. Each draw runs twice on the same inputs: every tile of
    whole members on its members, then every one gathered; and either in the CPU's layout or
    in a GPU's (see ``_ACCELERATORS``: tiles of ``ACCELERATOR_TILE``, a float32 fused step in
    one tile of all members with no scratch, its direction in new tensors)."""
    name = data.draw(st.sampled_from(sorted(xrisk.OPTIMIZERS)))
    rule_type = xrisk.OPTIMIZERS[name]
    names = [n for n in inspect.signature(rule_type).parameters if n != "loss_fn"]
    hyper = {n: data.draw(_HYPER[n], label=n) for n in names}
    loss = getattr(xr, _LOSSES[name])() if name in _LOSSES else None
    try:
        rule_type(*([loss.definition] if loss is not None else []), **hyper)
    except ValueError:  # e.g. nesterov with mode="adam"
        assume(False)
    dtype = data.draw(st.sampled_from([torch.float64, torch.float32]), label="dtype")
    shapes = data.draw(st.lists(st.lists(st.integers(1, 4), max_size=3).map(tuple),
                                min_size=1, max_size=4), label="shapes")
    tile = data.draw(st.integers(1, 40), label="tile")
    # LARS: 0 takes its larger groups' path (each tensor's step through the scratch)
    small_plan = data.draw(st.sampled_from([0, xr_optim.SMALL_PLAN]), label="small_plan")
    steps = data.draw(st.integers(1, 4), label="steps")
    # the CPU laid out as a GPU is (see _ACCELERATORS): tiles of whole members, none scratch
    accelerator = data.draw(st.booleans(), label="accelerator")
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16), label="seed"))
    initial = [torch.randn(s, generator=generator, dtype=dtype) for s in shapes]
    grads = [[torch.randn(s, generator=generator, dtype=dtype) for s in shapes]
             for _ in range(steps)]
    for on_members in (True, False):
        params = [value.clone().requires_grad_() for value in initial]
        if loss is not None:
            loss = getattr(xr, _LOSSES[name])()
        opt = getattr(xr, name)(params, *([loss] if loss is not None else []), **hyper)
        rule = opt.rule
        counters = [n for n, spec in rule.slot_specs().items() if spec.integer]
        values = [p.detach().clone() for p in params]
        slots = [rule.init_slots(v)._replace(**dict.fromkeys(counters, 0)) for v in values]
        group = opt.param_groups[0]
        for step, step_grads in enumerate(grads):
            for param, grad in zip(params, step_grads):
                param.grad = grad.clone()
            kept = (xr_optim._tile_length, xr_optim.SMALL_PLAN, xr_optim.MEMBER_SIZE,
                    xr_optim.MEMBER_TILE, xr_optim._on_members, xr_optim._ACCELERATORS,
                    xr_optim.ACCELERATOR_TILE)
            xr_optim._tile_length = lambda total: tile  # the plans' tiles, at any thread count
            xr_optim.ACCELERATOR_TILE = tile
            xr_optim._ACCELERATORS = ("cpu",) if accelerator else ("cuda",)
            xr_optim.SMALL_PLAN = small_plan
            # on the members wherever they are whole, or never
            xr_optim.MEMBER_SIZE = xr_optim.MEMBER_TILE = 0
            if not on_members:
                xr_optim._on_members = lambda *args: False
            try:
                opt.step()  # the first step builds the plans
            finally:
                (xr_optim._tile_length, xr_optim.SMALL_PLAN, xr_optim.MEMBER_SIZE,
                 xr_optim.MEMBER_TILE, xr_optim._on_members, xr_optim._ACCELERATORS,
                 xr_optim.ACCELERATOR_TILE) = kept
            rates = rule.rates(step, lr=group["lr"], ce_lr=group.get("ce_learning_rate"))
            for i, grad in enumerate(step_grads):
                values[i], slots[i] = rule.update_param(grad, values[i], slots[i], rates)
        plans = [plan for *_, made in opt._plans.values() for plan in made]
        # no temporary larger than a tile: a plan of one tile of all members (a step without
        # scratch, see _scratch_free) has a scratch of no elements
        assert all(stop - start <= max(tile, 1) for plan in plans if not plan.whole
                   for start, stop, _ in plan.tiles)
        assert all(plan.scratch.numel() == 0 for plan in plans if plan.whole)
        for param, value, slot in zip(params, values, slots):
            _assert_update_equal(param.detach(), value, on_members)
            for field, want in slot._asdict().items():
                if want is not None:
                    got = opt.state[param][field]
                    if field in counters:
                        assert int(got) == want, (field, on_members)
                    else:
                        _assert_update_equal(got, want, (field, on_members))


def _assert_update_equal(got, want, context):
    """Bit for bit in float64; in float32 (torch's fused kernels: one rounding per
    multiply-add where the core rounds twice) within a few units in the last place."""
    if got.dtype == torch.float64:
        assert torch.equal(got, want), context
    else:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7, msg=str(context))


@pytest.mark.parametrize("layers, width, soap, pesg", [
    (2, 8, False, False),    # 0.2 k elements: the step stays in the cache, gathering is cheaper
    (20, 60, True, False),   # 73 k, 1.8 k per tensor: PESG's two more foreach ops cost more
    (2, 200, True, True)])   # 80 k, 10 k per tensor
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tiles_are_stepped_on_their_members_where_that_saves_time(layers, width, soap, pesg,
                                                                   dtype, monkeypatch):
    """float64: a tile of whole members is stepped on them where it outgrows the cache
    (MEMBER_TILE elements) and either the member step takes no more foreach operators than
    gathering (SOAP) or the members are large on average (PESG, whose epoch decay takes two
    more). float32 (fused kernels): always."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    params = _layers(layers, width, dtype=dtype)
    assert sum(p.numel() for p in params) <= xr_optim.SMALL_PLAN  # one tile
    if dtype == torch.float32:
        soap = pesg = True
    for opt, want in ((xr.SOAP(params), soap),
                      (xr.PESG(params, xr.AUCMLoss(dtype=str(dtype)[6:])), pesg)):
        _step_ops(opt, params)
        tiles = opt._plans[0][2][0].prepared
        assert [tile.members is not None for tile in tiles] == [want], opt


# ------------------------------------------------------------------ the eager step's operators

class _OpNames(TorchDispatchMode):
    """Records the name of every dispatched operator."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


_VIEWS = {"view", "_unsafe_view", "alias", "detach", "slice", "select", "split",
          "split_with_sizes", "unbind", "_record_function_enter_new", "_record_function_exit"}


def _step_ops(opt, params):
    """Operator counts (views left out) of a steady-state eager step of ``opt``."""
    for _ in range(3):  # the first step builds the plans, the second leaves the first-step path
        for param in params:
            param.grad = torch.full_like(param, 0.1)
        with _OpNames() as mode:
            opt.step()
    return Counter(name for name in mode.names if name not in _VIEWS)


def _layers(count, width=3, dtype=torch.float32):
    torch.manual_seed(0)
    modules = [torch.nn.Linear(width, width) for _ in range(count)] + [torch.nn.Linear(width, 1)]
    return list(torch.nn.Sequential(*modules).to(dtype).parameters())


def test_a_group_up_to_small_plan_elements_is_one_tile_on_one_thread(monkeypatch):
    """On one thread a group of at most SMALL_PLAN elements (where a second tile buys little
    cache) is one tile, fewer operators than tiles of TILE elements; a larger one is cut into
    tiles of TILE elements (the weight's, then the bias's own)."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    for width, tiles in ((300, 1), (600, -(-(600 * 600) // xr_optim.TILE) + 1)):  # + bias
        params = _layers(1, width)
        assert xr_optim.TILE < sum(p.numel() for p in params) or width == 600
        opt = xr.SOAP(params)
        _step_ops(opt, params)
        assert [len(plan.tiles) for plan in opt._plans[0][2]] == [tiles], width


@given(sizes=st.lists(st.integers(0, 40), max_size=8), tile=st.integers(1, 16))
def test_tiles_cover_the_members_in_order_and_gather_only_whole_ones(sizes, tile):
    """Tiles are consecutive ranges of at most ``tile`` elements covering every member in
    order; a tile of several pieces holds whole members only (a piece of a member gathered
    with others costs copies in and out; alone it is sliced in place), and a member that fits
    in a tile is never cut."""
    tiles = xr_optim._tiles(sizes, tile)
    covered, start = [], 0
    for first, stop, pieces in tiles:
        assert first == start and stop - first <= tile and (stop > first or len(tiles) == 1)
        assert sum(b - a for _, a, b in pieces) == stop - first
        if len(pieces) > 1:
            assert all(a == 0 and b == sizes[i] for i, a, b in pieces), (sizes, tile, pieces)
        covered += [piece for piece in pieces if piece[2] > piece[1]]
        start = stop
    assert start == sum(sizes)
    offsets = [(i, a) for i, a, _ in covered]
    assert offsets == sorted(offsets)
    cut = {i for i, a, b in covered if not (a == 0 and b == sizes[i])}
    assert all(sizes[i] > tile for i in cut), (sizes, tile, cut)


@pytest.mark.parametrize("mode", ["sgd", "adam"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_tile_takes_one_operator_per_term_of_the_update(mode, dtype, monkeypatch):
    """float64: each ``x + c·y`` of the rule is one pass over the tile (``addcmul_`` with a
    0-d one: bit for bit the product and the sum, as the property test above checks): SOAP's
    SGD (clip, weight decay, dampened momentum) is 5 passes, its Adam 13, besides one copy of
    the gradients. float32: the update after the clip is one fused kernel, weight decay
    included. A tile of several whole members on the CPU is stepped on the members
    themselves (foreach operators where a parameter takes part): no copy of the values in
    and back out (here for 5 small members too)."""
    params = _layers(2, dtype=dtype)
    opt = xr.SOAP(params, mode=mode, learning_rate=0.1)
    monkeypatch.setattr(xr_optim, "MEMBER_TILE", 0)
    ops = _step_ops(opt, params)
    moving = {"_foreach_copy_": 1, "fill_": 1, "add_": 1}  # the gradients; counter; step
    if dtype == torch.float32:  # clamp; the fused update with wd·θ (+ Adam's step tensor)
        kernel = {"clamp_": 1, "_fused_sgd_": 1} if mode == "sgd" else {
            "clamp_": 1, "full": 1, "_fused_adam_": 1}
    elif mode == "sgd":  # clamp; d + wd·θ; μ·buf; + (1 - dampening)·d; θ - lr·buf
        kernel = {"clamp_": 1, "_foreach_addcmul_": 2, "addcmul_": 1, "mul_": 1}
    else:  # clamp; d + wd·θ; β1·m + (1 - β1)·d; β2·v + (1 - β2)·d·d; √v/√c2 + ε; θ - step/den
        kernel = {"clamp_": 1, "_foreach_addcmul_": 1, "addcmul_": 1, "mul_": 3, "mul": 2,
                  "add_": 2, "sqrt": 1, "div_": 1, "_foreach_addcdiv_": 1}
    expected = Counter(moving) + Counter(kernel)
    assert ops == expected, (ops, expected)


def _fused_twins():
    """``benchmarks/gpu_smoke.py``'s ``FUSED_TWINS``: the xrisk optimizers whose arithmetic is
    a ``torch.optim`` optimizer's, which the GPU check and this test both step."""
    benchmarks = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, benchmarks)
    try:
        import gpu_smoke
    finally:
        sys.path.remove(benchmarks)
    return gpu_smoke.FUSED_TWINS


@pytest.mark.parametrize("name, options, baseline, baseline_options", _fused_twins())
@pytest.mark.parametrize("threads", [1, 3, "accelerator"])
def test_float32_steps_are_torch_s_fused_kernels(name, options, baseline, baseline_options,
                                                 threads, monkeypatch):
    """A float32 step runs torch's fused kernels on each whole parameter: where the rule's
    arithmetic is torch.optim's (no clip; weight decay coupled, AdamW's decoupled, both in
    the kernel as torch.optim has them), the parameters after 4 steps equal
    ``torch.optim``'s with ``fused=True`` bit for bit, on one thread (one tile) and with the
    tiles of several (here of 256 elements: a weight of 1,200 is cut into slices, each
    starting on a multiple of 64 elements; a step needing no scratch takes one tile of all
    members, see test_a_step_without_scratch_takes_one_tile_of_all_members). A tile of whole
    members is stepped on them, never gathered: a fused kernel's bits depend on where an
    element falls in its vectors. ``"accelerator"``: the CPU laid out as a GPU is (see
    ``_ACCELERATORS``): one tile of all members, whatever the thread count."""
    if threads == "accelerator":
        monkeypatch.setattr(xr_optim, "_ACCELERATORS", ("cpu",))
        monkeypatch.setattr(xr_optim, "ACCELERATOR_TILE", 256)  # one tile all the same
        threads = 3
    else:
        monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    if threads > 1:
        monkeypatch.setattr(xr_optim, "TILE", 1)  # tiles of ceil(1850 / 512)·64 = 256
    generator = torch.Generator().manual_seed(3)
    initial = [torch.randn(s, generator=generator) for s in [(40, 30), (30,), (30, 20), (20,)]]
    grads = [[torch.randn(v.shape, generator=generator) for v in initial] for _ in range(4)]
    options = {"clip_value": math.inf, "weight_decay": 0.0} | options
    results = {}
    for who in ("xrisk", "torch"):
        params = [v.clone().requires_grad_() for v in initial]
        opt = (getattr(xr, name)(params, **options) if who == "xrisk"
               else baseline(params, fused=True, **baseline_options))
        for step_grads in grads:
            for param, grad in zip(params, step_grads):
                param.grad = grad.clone()
            opt.step()
        results[who] = [p.detach() for p in params]
        plan = opt._plans[0][2][0] if who == "xrisk" else None
        if plan is not None and threads > 1 and not plan.whole:  # the weight was sliced
            assert [stop - start for start, stop, _ in plan.tiles][:2] == [256] * 2
        if plan is not None and xr_optim._ACCELERATORS == ("cpu",):
            assert plan.whole and plan.scratch.numel() == 0
    for got, want in zip(results["xrisk"], results["torch"]):
        assert torch.equal(got, want)


@pytest.mark.parametrize("name, options", [
    ("SOAP", {"mode": "adam"}), ("SOAP", {"mode": "sgd"}), ("PESG", {}), ("PDSCA", {}),
    ("AdamW", {"weight_decay": 1e-2}),
    ("SGD", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3})])
def test_an_accelerator_steps_float32_members_with_no_scratch(name, options, monkeypatch):
    """On a GPU (the CPU laid out as one, ``_ACCELERATORS``) a float32 step with a fused
    kernel steps all the members of a plan as one tile and keeps no scratch: a clipped or
    epoch-decayed direction is a new list of tensors for the step (transient memory, as
    torch.optim's foreach steps make), not two vectors as long as the model kept beside it.
    Within float32's tolerance of the core rule, as the tiles of the CPU's layout."""
    monkeypatch.setattr(xr_optim, "_ACCELERATORS", ("cpu",))
    monkeypatch.setattr(xr_optim, "ACCELERATOR_TILE", 64)
    params = _layers(2, 30)
    assert sum(p.numel() for p in params) > 64  # several tiles with a scratch
    loss = getattr(xr, _LOSSES[name])() if name in _LOSSES else None
    opt = getattr(xr, name)(params, *[loss] if loss is not None else [], **options)
    rule = opt.rule
    counters = [n for n, spec in rule.slot_specs().items() if spec.integer]
    values = [p.detach().clone() for p in params]
    slots = [rule.init_slots(v)._replace(**dict.fromkeys(counters, 0)) for v in values]
    group = opt.param_groups[0]
    for step in range(3):
        for param in params:
            param.grad = torch.randn_like(param)
        opt.step()
        rates = rule.rates(step, lr=group["lr"], ce_lr=group.get("ce_learning_rate"))
        for i, param in enumerate(params):
            values[i], slots[i] = rule.update_param(param.grad, values[i], slots[i], rates)
    assert [(plan.whole, plan.scratch.numel()) for plan in opt._plans[0][2]] == [(True, 0)]
    for param, value in zip(params, values):
        _assert_update_equal(param.detach(), value, name)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_a_step_without_scratch_takes_one_tile_of_all_members(momentum, monkeypatch):
    """A momentum or plain SGD step whose direction is the gradient itself (no clip, no
    weight decay or epoch decay: MIDAM's) reads the gradients where they are, so it needs no
    scratch and steps all the members of a plan at once, however large: the same operators
    as one small tile (the momentum's flat scale, its foreach update, the parameters'), not
    a few per tile of TILE elements; bit for bit the core rule per tensor."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    params = _layers(1, 400, dtype=torch.float64)
    assert sum(p.numel() for p in params) > xr_optim.SMALL_PLAN  # several tiles otherwise
    opt = xr.SGD(params, learning_rate=0.1, momentum=momentum, clip_value=math.inf)
    rule = opt.rule
    values = [p.detach().clone() for p in params]
    slots = [rule.init_slots(v)._replace(count=0) for v in values]
    for step in range(3):
        for param in params:
            param.grad = torch.full_like(param, 0.1 * (step + 1))
        with _OpNames() as mode:
            opt.step()
        for i, param in enumerate(params):
            values[i], slots[i] = rule.update_param(param.grad, values[i], slots[i],
                                                    rule.rates(step, lr=0.1))
    ops = Counter(name for name in mode.names if name not in _VIEWS)
    want = Counter(_foreach_addcmul_=2, mul_=1) if momentum else Counter(_foreach_addcmul_=1)
    assert ops == want + Counter(fill_=1, add_=1), ops  # + the counter and the step count
    assert [len(plan.tiles) for plan in opt._plans[0][2]] == [1]
    for param, value in zip(params, values):
        assert torch.equal(param.detach(), value)


@pytest.mark.parametrize("name, options", [("SOAP", {"mode": "sgd"}), ("PDSCA", {}),
                                           ("SGD", {"clip_value": math.inf, "momentum": 0.9})])
def test_a_plan_of_gathered_and_member_tiles_steps_as_the_core(name, options, monkeypatch):
    """A plan whose first tile gathers small members and a later one steps on its members
    (each tile prepared with its own views: the member tile's scratch, unless the whole
    plan takes one tile): the core rule per tensor, bit for bit, over 4 steps (both of
    PDSCA's phases)."""
    monkeypatch.setattr(xr_optim, "_tile_length", lambda total: 40)
    monkeypatch.setattr(xr_optim, "MEMBER_TILE", 20)
    monkeypatch.setattr(xr_optim, "MEMBER_SIZE", 0)
    shapes = [(4,), (4,), (5, 7), (4, 5), (5, 4)]  # tiles: [4, 4] gathered, [35], [20, 20]
    generator = torch.Generator().manual_seed(2)
    params = [torch.randn(s, generator=generator, dtype=torch.float64).requires_grad_()
              for s in shapes]
    loss = [xr.CompositionalAUCLoss(k=1, dtype="float64")] if name == "PDSCA" else []
    opt = getattr(xr, name)(params, *loss, learning_rate=0.1, **options)
    rule = opt.rule
    counters = [n for n, spec in rule.slot_specs().items() if spec.integer]
    values = [p.detach().clone() for p in params]
    slots = [rule.init_slots(v)._replace(**dict.fromkeys(counters, 0)) for v in values]
    for step in range(4):
        grads = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
        for param, grad in zip(params, grads):
            param.grad = grad.clone()
        for aux in (loss[0].a, loss[0].b, loss[0].alpha) if loss else ():
            aux.grad = torch.ones_like(aux)
        opt.step()
        rates = rule.rates(step, lr=0.1, ce_lr=opt.param_groups[0].get("ce_learning_rate"))
        for i, grad in enumerate(grads):
            values[i], slots[i] = rule.update_param(grad, values[i], slots[i], rates)
    plan = opt._plans[0][2][0]
    kinds = [("members" if tile.members is not None else "gathered" if tile.gathered
              is not None else "slice") for tile in plan.prepared]
    assert kinds == (["members"] if name == "SGD" else ["gathered", "slice", "members"]), kinds
    for param, value in zip(params, values):
        assert torch.equal(param.detach(), value)


def test_a_gathering_tile_copies_the_members_in_and_out(monkeypatch):
    """Where a tile of several members is not stepped on the members (here: bfloat16, whose
    rule computes in float32), it gathers their values and gradients and scatters the values
    back."""
    params = _layers(2, dtype=torch.bfloat16)
    opt = xr.SOAP(params, mode="sgd", learning_rate=0.1)
    ops = _step_ops(opt, params)
    assert ops["_foreach_copy_"] == 3 and "_foreach_addcmul_" not in ops, ops


def test_lars_steps_a_group_with_foreach_operators(monkeypatch):
    """LARS on a group of up to SMALL_PLAN scaled elements (its plan): the squared norms of
    all tensors of one size by one row-wise sum each (θ·θ, then d·d, after one copy of all
    parameters and one of all gradients into the scratch), the trust ratios of all tensors
    at once, d·q in place by block, the update as foreach operators and one operator on the
    flat momentum: a fixed number of operators, however many tensors (here 2 sizes of
    weight matrices, weight decay: 24 operators; θ·θ: copy, square, 2 sums; d: copy, ·wd,
    + g; d·d, 2 sums; 7 for the ratios; d·q: 2; the update: 4; the step count). A larger
    group goes tensor by tensor: its two squared norms (a product into the scratch and a
    sum each, and d = g + wd·θ for the second), the trust ratios and the update as foreach
    operators. (float64: float32 takes the fused step, see the next test.)"""
    counts = []
    for layers in (1, 6):
        params = _layers(layers, dtype=torch.float64)
        ops = _step_ops(xr.LARS(params, learning_rate=0.1, weight_decay=0.01), params)
        assert ops["sum"] == 4 and ops.total() == 24, ops
        counts.append(ops)
    assert counts[0] == counts[1], counts
    monkeypatch.setattr(xr_optim, "SMALL_PLAN", 0)
    for layers in (1, 6):
        params = _layers(layers, dtype=torch.float64)
        ops = _step_ops(xr.LARS(params, learning_rate=0.1, weight_decay=0.01), params)
        scaled = layers + 1  # the weight matrices; the biases are excluded
        assert ops["sum"] == 2 * scaled and ops["mul"] >= 3 * scaled, ops
        assert ops["_foreach_sub_"] == 1 and ops["where"] == 2, ops  # biases; the ratios


@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu", "accelerator"])
@pytest.mark.parametrize("momentum", [0.9, 0.0])
def test_lars_steps_float32_by_fused_kernels(momentum, accelerator, monkeypatch):
    """float32 LARS: the norms by ``torch._foreach_norm`` (no squares written out, no sums),
    one fused SGD pass per scaled tensor (its own ``lr·q``) and one for all unscaled
    tensors; the core rule's parameters and momentum to a few units in the last place over
    3 steps. A step ``lr·q`` under ``_LARS_FUSED_LEAST_STEP`` (which the kernel could not
    carry as ``1 - (1 - lr·q)``) takes the exact step instead. On an accelerator (the CPU
    laid out as one, ``_ACCELERATORS``) nothing is read to the host: the ratios stay
    tensors, each direction is multiplied by its ``lr·q`` and one fused pass (new weight
    exactly 1, so no step is too small for it) steps all the scaled tensors."""
    if accelerator:
        monkeypatch.setattr(xr_optim, "_ACCELERATORS", ("cpu",))
        read = []
        monkeypatch.setattr(torch.Tensor, "tolist", lambda self: read.append(self) or [])
        monkeypatch.setattr(torch.Tensor, "item", lambda self: read.append(self) or 0.0)
    for tiny in (False, True):
        params = _layers(3)  # 4 weight matrices, 4 biases
        opt = xr.LARS(params, learning_rate=1e-9 if tiny else 0.1, weight_decay=0.01,
                      momentum=momentum)
        rule = opt.rule
        values = [p.detach().clone() for p in params]
        slots = [rule.init_slots(v) for v in values]
        generator = torch.Generator().manual_seed(2)
        for step in range(3):
            grads = [torch.randn(p.shape, generator=generator) for p in params]
            for param, grad in zip(params, grads):
                param.grad = grad.clone()
            with _OpNames() as mode:
                opt.step()
            for i, grad in enumerate(grads):
                values[i], slots[i] = rule.update_param(
                    grad, values[i], slots[i], rule.rates(step, lr=opt.param_groups[0]["lr"]))
        ops = Counter(mode.names)
        # the biases together; a tiny lr with momentum: the biases the exact way
        fused = (2 - (tiny and momentum > 0) if accelerator
                 else 0 if tiny and momentum else 5)
        assert ops["_fused_sgd_"] == fused and ops["_foreach_norm"] == 2, ops
        assert (ops["sum"] == 0) == bool(fused), ops  # the exact step's norms: sums
        if accelerator:
            assert not read and ops["_foreach_mul_"] == 1, ops  # d + λθ new: scaled in place
        for param, value, slot in zip(params, values, slots):
            _assert_update_equal(param.detach(), value, tiny)
            if momentum:
                _assert_update_equal(opt.state[param]["momentum"], slot.momentum, tiny)


def test_lars_plans_only_cpu_parameters():
    """The plan's row-wise sums equal the per-tensor sums by ATen's CPU reduction; an
    accelerator's kernels pick their order by shape, so a group elsewhere (here "meta", a
    device that is not the CPU) keeps the per-tensor step, as the member path does."""
    for device, planned in (("cpu", True), ("meta", False)):
        params = [torch.nn.Parameter(torch.ones(3, 4, device=device)),
                  torch.nn.Parameter(torch.ones(4, device=device))]
        for param in params:
            param.grad = torch.ones_like(param)
        opt = xr.LARS(params, learning_rate=0.1)
        plan = xr_optim._LarsPlan.make(params, opt.rule, opt.state)
        assert (plan is not None) == planned, device


@pytest.mark.parametrize("threads", [1, 2])
def test_lars_plan_sums_equal_tensors_row_wise_as_the_core_sums_each(threads):
    """The plan sums the squares of equal-sized tensors as rows of one matrix: on one thread
    and for rows under ATen's reduction grain that is each tensor's own sum, bit for bit;
    on several threads a tensor of the grain or more is summed by the threads together
    (other bits than a row), so it forms a block of its own. float64 (float32 takes the
    fused step), tensors of 1.2 and 0.4 times the grain: the core rule per tensor, bit for
    bit, over 3 steps."""
    kept = torch.get_num_threads()
    torch.set_num_threads(threads)  # ATen's own: the bits of its sums depend on it
    try:
        _check_lars_plan_sums(threads)
    finally:
        torch.set_num_threads(kept)


def _check_lars_plan_sums(threads):
    generator = torch.Generator().manual_seed(5)
    for fraction in (1.2, 0.4):
        size = 8 * (int(fraction * xr_optim._SUM_GRAIN) // 8)
        shapes = [(size,), (size // 8, 8), (8, size // 8), (3, 7)]
        params = [torch.randn(s, generator=generator, dtype=torch.float64).requires_grad_()
                  for s in shapes]
        opt = xr.LARS(params, learning_rate=0.3, weight_decay=0.01, exclude_1d=False,
                      trust_coefficient=0.02)
        rule = opt.rule
        values = [p.detach().clone() for p in params]
        slots = [rule.init_slots(v) for v in values]
        for step in range(3):
            grads = [torch.randn(s, generator=generator, dtype=torch.float64) * 10 ** step
                     for s in shapes]
            for param, grad in zip(params, grads):
                param.grad = grad.clone()
            opt.step()
            for i, grad in enumerate(grads):
                values[i], slots[i] = rule.update_param(grad, values[i], slots[i],
                                                        rule.rates(step, lr=0.3))
        plan = opt._lars_plans[0]
        rows = sorted(len(block[0]) for block in plan.blocks)
        assert rows == ([1, 1, 1, 1] if threads > 1 and size > xr_optim._SUM_GRAIN
                        else [1, 3]), rows
        for param, value, slot in zip(params, values, slots):
            assert torch.equal(param.detach(), value)
            assert torch.equal(opt.state[param]["momentum"], slot.momentum)


@pytest.mark.parametrize("aux_lr", [None, 0.05], ids=["same_lr", "own_lr"])
def test_pesg_steps_the_model_and_the_loss_s_a_b_in_one_plan(aux_lr):
    """PESG's model group and the group of the loss's a, b take the same clipped step, so
    one plan holds them (a dozen operators fewer a step than a plan of their own): bit for
    bit the core rule per tensor. A group with its own learning rate keeps its own plan."""
    params = _layers(1, dtype=torch.float64)
    loss = xr.AUCMLoss(dtype="float64")
    opt = xr.PESG(params, loss, learning_rate=0.1, epoch_decay=0.01, weight_decay=0.01)
    if aux_lr is not None:
        opt.param_groups[1]["lr"] = aux_lr
    tensors = [*params, loss.a, loss.b]
    rule = opt.rule
    values = [t.detach().clone() for t in tensors]
    slots = [rule.init_slots(v)._replace(count=0, average_count=0) for v in values]
    generator = torch.Generator().manual_seed(3)
    for step in range(4):
        grads = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in tensors]
        for tensor, grad in zip(tensors, grads):
            tensor.grad = grad.clone()
        opt.step()
        for i, grad in enumerate(grads):
            lr = opt.param_groups[1 if i >= len(params) else 0]["lr"]
            values[i], slots[i] = rule.update_param(grad, values[i], slots[i],
                                                    rule.rates(step, lr=lr))
    assert len(opt._plans) == (1 if aux_lr is None else 2)
    for tensor, value, slot in zip(tensors, values, slots):
        assert torch.equal(tensor.detach(), value)
        for field, want in slot._asdict().items():
            if want is not None:
                got = opt.state[tensor][field]
                assert int(got) == want if "count" in field else torch.equal(got, want), field


@pytest.mark.parametrize("name", ["PESG", "PDSCA"])
def test_min_max_steps_read_the_step_once_and_take_no_views_of_the_auxiliaries(name):
    """The fixed cost of a min-max step: PDSCA's phase comes from the step count of each
    group read once as a Python int at the first step and known from then on (not a
    remainder, a comparison and a read of the result on the device at every step), PESG
    (whose rates ignore the step) reads nothing; the ascent gets the loss's auxiliaries
    themselves (no detached views: step() runs under no_grad), and in PDSCA's cross-entropy
    phase, which moves neither a, b nor alpha, none of them is written at all."""
    params = _layers(2)
    loss = xr.CompositionalAUCLoss(k=2) if name == "PDSCA" else xr.AUCMLoss()
    opt = getattr(xr, name)(params, loss, epoch_decay=1e-3)
    for step in range(6):
        for param in [*params, loss.a, loss.b, loss.alpha]:
            param.grad = torch.full_like(param, 0.1)
        version = loss.alpha._version
        with _OpNames() as mode:
            opt.step()
        ops = Counter(mode.names)
        assert ops["detach"] == ops["remainder"] == ops["lt"] == 0, ops
        assert ops["_local_scalar_dense"] == (2 if name == "PDSCA" and step == 0 else 0), ops
        alpha_written = loss.alpha._version != version
        assert alpha_written == (name == "PESG" or step % 4 >= 2), (step, ops)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_pdsca_s_cross_entropy_phase_leaves_a_and_b_alone(dtype):
    """In PDSCA's cross-entropy phase the loss's a and b keep their values and counters: the
    step does not touch them (float64: no write at all, no gathering and scattering back, no
    direction computed for nothing, by their version counters; float32's fused kernels leave
    version counters alone, so there by their values); in the AUC phase they move.
    (Versions read outside an operator-recording mode: under one, foreach operators leave
    version counters alone.)"""
    params = _layers(2, dtype=getattr(torch, dtype))
    loss = xr.CompositionalAUCLoss(k=2, dtype=dtype)
    opt = xr.PDSCA(params, loss, epoch_decay=1e-3)
    for step in range(8):
        for param in [*params, loss.a, loss.b, loss.alpha]:
            param.grad = torch.full_like(param, 0.1)
        versions = [loss.a._version, loss.b._version]
        values = [loss.a.detach().clone(), loss.b.detach().clone()]
        opt.step()
        if dtype == "float64":
            moved = [loss.a._version != versions[0], loss.b._version != versions[1]]
            assert moved == [step % 4 >= 2] * 2, step
        moved = [not torch.equal(loss.a, values[0]), not torch.equal(loss.b, values[1])]
        assert moved == [step % 4 >= 2] * 2, step


@pytest.mark.parametrize("edit", ["step", "counter"])
def test_counts_written_outside_the_step_are_read_anew(edit):
    """The eager step knows the step count and the counters on the host after reading them
    once; a write from outside (the group's step count set in place, a counter slot set in
    place through ``opt.state``) is seen at the next step, as by a fresh optimizer loaded
    with that state: here PDSCA's phase and the first-step rule of its momentum."""
    runs = []
    for fresh in (False, True):
        params = _layers(2, dtype=torch.float64)
        loss = xr.CompositionalAUCLoss(k=1, dtype="float64")
        opt = xr.PDSCA(params, loss, epoch_decay=1e-3)
        generator = torch.Generator().manual_seed(0)
        for step in range(5):
            for param in [*params, loss.a, loss.b, loss.alpha]:
                param.grad = torch.randn(param.shape, generator=generator, dtype=param.dtype)
            if step == 3:
                if edit == "step":
                    for group in opt.param_groups:
                        group["step"].fill_(0)  # the cross-entropy phase again
                else:
                    for param in params:
                        opt.state[param]["auc_count"].fill_(0)  # momentum starts anew
                if fresh:
                    twin_loss = copy.deepcopy(loss)
                    twin = xr.PDSCA(params, twin_loss, epoch_decay=1e-3)
                    twin.load_state_dict(opt.state_dict())
                    opt, loss = twin, twin_loss
            opt.step()
        runs.append([p.detach().clone() for p in params])
    for got, want in zip(*runs, strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("name, options", [("SOAP", {"mode": "sgd"}), ("PESG", {}),
                                           ("LARS", {"learning_rate": 0.1,
                                                     "weight_decay": 0.01})])
@pytest.mark.parametrize("tile, on_members", [(7, False), (10**6, False), (10**6, True)],
                         ids=["sliced", "gathered", "on_members"])
def test_channels_last_parameters_train_as_contiguous_ones(name, options, tile, on_members,
                                                           monkeypatch):
    """Non-contiguous parameters (channels_last convolutions, with gradients of that layout)
    are read and written in their logical order, sliced by tiles, gathered whole or stepped
    on themselves by foreach operators: the same values as the contiguous model, and they
    keep their layout."""
    monkeypatch.setattr(xr_optim, "_tile_length", lambda total: tile)
    if on_members:
        monkeypatch.setattr(xr_optim, "MEMBER_TILE", 0)
        monkeypatch.setattr(xr_optim, "MEMBER_SIZE", 0)
    runs = []
    for layout in (torch.contiguous_format, torch.channels_last):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3), torch.nn.Conv2d(5, 4, 3),
                                    torch.nn.Linear(4, 2)).double().to(memory_format=layout)
        params = list(model.parameters())
        loss = [xr.AUCMLoss()] if name == "PESG" else []
        opt = getattr(xr, name)(params, *loss, **options)
        generator = torch.Generator().manual_seed(1)
        for _ in range(3):
            for p in params:
                grad = torch.randn(p.shape, generator=generator, dtype=p.dtype)
                p.grad = grad.contiguous(memory_format=layout) if p.ndim == 4 else grad
            opt.step()
        assert all(p.is_contiguous(memory_format=layout) for p in params if p.ndim == 4)
        runs.append([p.detach().contiguous() for p in params])
    for plain, last in zip(*runs, strict=True):
        assert torch.equal(plain, last)
