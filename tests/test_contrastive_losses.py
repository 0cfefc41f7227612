"""The contrastive losses beyond the harness: the objective they estimate, float32 at tiny
temperatures, data-parallel semantics, the gamma schedule, InfoNCE against the textbook
formula, and bad input.

Cross-backend identity with the numpy references (tests/_reference_contrastive.py) over
several steps with duplicate indices runs in tests/test_cross_backend.py and
tests/test_jit.py through the cases of tests/_contrastive_cases.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numpy.testing import assert_allclose

import xrisk
import xrisk.torch as xt
from xrisk._adapter_support import METADATA_KEY
from xrisk.backends import get_backend
from xrisk.losses.contrastive import gamma_at


def _unit(x):
    return x / x.norm(dim=1, keepdim=True)


def _negatives(index):
    return (index[:, None] != index[None, :]).to(torch.float64)


def _log_mean_exp(z, mask):
    """log of the mean of exp(z) over the mask of each row (rows with a negative)."""
    top = torch.where(mask > 0, z, torch.full_like(z, -torch.inf)).max(dim=1).values
    total = (torch.exp(z - top[:, None]) * mask).sum(dim=1)
    return torch.log(total / mask.sum(dim=1)) + top


def gcl_objective(view1, view2, index, tau):
    """sum over both directions of mean_i tau_i log mean_{j in S_i^-} exp((l_ij - s_ii)/tau_i),
    the global contrastive objective on one batch (paper, CLR section), written directly;
    ``tau`` a number or one temperature per anchor (B, 1)."""
    x, y = _unit(view1), _unit(view2)
    mask = _negatives(index)
    s = x @ y.T
    positive = torch.diagonal(s)[:, None]
    total = 0
    for cross, within in ((s, x @ x.T), (s.T, y @ y.T)):
        z = torch.cat([cross, within], dim=1) - positive
        lme = _log_mean_exp(z / tau, torch.cat([mask, mask], dim=1))
        total = total + (torch.reshape(torch.as_tensor(tau, dtype=z.dtype), (-1,)) * lme).mean()
    return total


def bimodal_objective(image, text, index, tau):
    """tau * 1/2 sum over directions of mean_i log mean_{j in S_i^-} exp((s_ij - s_ii)/tau)."""
    x, y = _unit(image), _unit(text)
    mask = _negatives(index)
    s = x @ y.T
    positive = torch.diagonal(s)[:, None]
    return tau * 0.5 * sum(_log_mean_exp((m - positive) / tau, mask).mean()
                           for m in (s, s.T))


def _views(rng, batch, dim=5):
    return (torch.tensor(rng.normal(size=(batch, dim)), requires_grad=True),
            torch.tensor(rng.normal(size=(batch, dim)), requires_grad=True))


# -- the objective: at gamma = 1 the gradient is tau x the gradient of log-mean-exp ---------
@pytest.mark.parametrize("scheme", ["global", "individual"])
def test_gamma_one_gradient_is_tau_times_the_gcl_gradient(scheme):
    rng = np.random.default_rng(0)
    tau = 0.2
    loss_fn = xt.GlobalContrastiveLoss(10, tau=tau, gamma=1.0, temperature_scheme=scheme,
                                       eta=0.5, dtype="float64")
    # Three steps (state carried; gamma = 1 forgets it). Without duplicates: duplicates of a
    # sample pool their estimates into one u (see the duplicate test below).
    for index in ([0, 1, 2, 3, 4, 5], [5, 6, 7, 8], [1, 9, 2, 3, 0]):
        index = torch.tensor(index)
        view1, view2 = _views(rng, len(index))
        # the temperatures before the step (individual ones move after each step)
        taus = (torch.tensor(loss_fn.export_state()["temperature"][index.numpy(), :1])
                if scheme == "individual" else tau)
        loss_fn(view1, view2, index).backward()
        ours = (view1.grad.clone(), view2.grad.clone())
        view1.grad = view2.grad = None
        gcl_objective(view1, view2, index, taus).backward()
        for mine, theirs in zip(ours, (view1.grad, view2.grad)):
            assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)


def test_gamma_one_bimodal_gradient_and_libauc_batch_scale():
    rng = np.random.default_rng(1)
    tau = 0.05
    index = torch.tensor([3, 0, 7, 5, 1])
    image, text = _views(rng, len(index))
    grads = {}
    for reduction in ("mean", "sum"):
        loss_fn = xt.BimodalContrastiveLoss(8, tau=tau, gamma=1.0, dtype="float64",
                                            negative_reduction=reduction)
        loss_fn(image, text, index).backward()
        grads[reduction] = (image.grad.clone(), text.grad.clone())
        image.grad = text.grad = None
    bimodal_objective(image, text, index, tau).backward()
    for mine, theirs in zip(grads["mean"], (image.grad, text.grad)):
        assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-9, atol=1e-12)
    # LibAUC's scale: (B - 1) times larger, growing with the batch size.
    for summed, mean in zip(grads["sum"], grads["mean"]):
        assert_allclose(summed.numpy(), (len(index) - 1) * mean.numpy(), rtol=1e-12)


def test_a_moving_average_below_one_differs_from_the_batch_gradient():
    """gamma < 1 really carries the state (the relation above is not vacuous)."""
    rng = np.random.default_rng(2)
    loss_fn = xt.GlobalContrastiveLoss(6, tau=0.2, gamma=0.3, dtype="float64")
    index = torch.tensor([0, 1, 2, 3])
    loss_fn(*_views(rng, 4), index)  # first visit: gamma = 1
    view1, view2 = _views(rng, 4)
    loss_fn(view1, view2, index).backward()
    ours = view1.grad.clone()
    view1.grad = None
    gcl_objective(view1, view2, index, 0.2).backward()
    assert not np.allclose(ours.numpy(), view1.grad.numpy(), rtol=1e-3)


# -- float32 at temperatures down to 0.005 --------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: xt.GlobalContrastiveLoss(16, tau=0.005, tau_min=0.005, tau_max=0.05,
                                     temperature_scheme="individual", eta=0.05, gamma=0.5),
    lambda: xt.GlobalContrastiveLoss(16, tau=0.005, gamma=0.9),
    lambda: xt.BimodalContrastiveLoss(16, tau=0.005, temperature_scheme="individual",
                                      eta=0.05, gamma=0.5),
    lambda: xt.BimodalContrastiveLoss(16, tau=0.005, gamma=0.9),
], ids=["iSogCLR", "SogCLR", "bimodal-individual", "bimodal"])
def test_float32_stays_finite_at_temperature_0_005(make):
    torch.manual_seed(0)
    loss_fn = make()
    encoder = torch.nn.Linear(6, 8)
    opt = torch.optim.SGD(encoder.parameters(), lr=0.5)
    data = torch.randn(16, 6)
    # exp(similarity / tau) of LibAUC's raw estimator overflows float32 here: exp(1 / 0.005).
    assert torch.isinf(torch.exp(torch.tensor(1 / 0.005, dtype=torch.float32)))
    for step in range(40):
        index = torch.randint(0, 16, (8,))
        noise = 0.01 * torch.randn(8, 6)
        opt.zero_grad()
        loss = loss_fn(encoder(data[index]), encoder(data[index] + noise), index)
        loss.backward()
        assert torch.isfinite(loss), step
        assert all(torch.isfinite(p.grad).all() for p in encoder.parameters()), step
        opt.step()
        for name, table in loss_fn.export_state().items():
            if name == METADATA_KEY:
                continue
            assert np.isfinite(table).all(), (step, name)
            if name.startswith("u"):  # [u~, c]
                assert (table[:, 0] >= 0).all() and (table[:, 0] <= 2).all(), (step, name)
            else:  # [tau_i, momentum]
                assert (table[:, 0] >= 0.005 - 1e-9).all(), (step, name)
                assert (table[:, 0] <= loss_fn.tau_max + 1e-9).all(), (step, name)


def test_float32_agrees_with_float64_at_a_tiny_temperature():
    rng = np.random.default_rng(3)
    index = np.array([0, 1, 2, 2, 5])
    a, b = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    out = {}
    for dtype in ("float32", "float64"):
        loss_fn = xt.BimodalContrastiveLoss(6, tau=0.005, dtype=dtype)
        t = getattr(torch, dtype)
        for _ in range(3):
            loss = loss_fn(torch.tensor(a, dtype=t), torch.tensor(b, dtype=t),
                           torch.tensor(index))
        out[dtype] = (float(loss), loss_fn.export_state())
    assert_allclose(out["float32"][0], out["float64"][0], rtol=1e-3, atol=1e-4)
    for name, value in out["float64"][1].items():
        assert_allclose(out["float32"][1][name], value, rtol=1e-3, atol=1e-4)


# -- data parallelism ---------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["global", "bimodal"])
def test_two_simulated_ranks_match_the_single_process_step(kind, monkeypatch):
    """Split one global batch into two ranks; each rank gathers both views (as
    torch.distributed.nn.all_gather does, gradients included) and the index, and calls the
    loss on the global batch with its own full copy of the state. Each sample's positive is
    its own pair (row p of both gathered views, whichever rank it came from); the state rows
    of the whole global batch are written once per step; the DDP-averaged gradient of the
    shared encoder equals the single-process gradient of the global batch."""
    writes = []
    backend = get_backend("torch")
    original = backend.write_rows

    def spy(table, index, rows):
        writes.append(int(index.numel()))
        return original(table, index, rows)

    monkeypatch.setattr(backend, "write_rows", spy)
    world, local = 2, 4

    def make():
        if kind == "global":
            return xt.GlobalContrastiveLoss(10, tau=0.2, gamma=0.6, dtype="float64",
                                            temperature_scheme="individual")
        return xt.BimodalContrastiveLoss(10, tau=0.05, gamma=0.6, dtype="float64",
                                         temperature_scheme="individual")

    rng = np.random.default_rng(4)
    single, ranks = make(), [make() for _ in range(world)]
    weight = torch.tensor(rng.normal(size=(3, 5)))
    for step in range(3):
        # index 7 on both ranks: one sample drawn twice in the global batch
        index = torch.tensor([[7, 1, 2, 3], [4, 7, 8, 9], [0, 5, 5, 6]][step] + [
            [7, 0, 6, 5], [1, 2, 3, 7], [9, 8, 7, 5]][step])
        inputs = [torch.tensor(rng.normal(size=(world * local, 3))) for _ in range(2)]

        w = weight.clone().requires_grad_(True)
        writes.clear()
        expected = single(inputs[0] @ w, inputs[1] @ w, index)
        assert sorted(writes) == [world * local] * len(single.definition.state_shapes())
        expected.backward()
        expected_grad = w.grad.clone()

        # Forward: every rank's local views, gathered in rank order on every rank.
        encoders = [weight.clone().requires_grad_(True) for _ in range(world)]
        locals_ = [[x[r * local:(r + 1) * local] @ encoders[r] for x in inputs]
                   for r in range(world)]
        received = [[torch.zeros(local, 5, dtype=torch.float64) for _ in range(2)]
                    for _ in range(world)]
        for loss_fn in ranks:
            gathered = [[locals_[r][v].detach().requires_grad_(True) for r in range(world)]
                        for v in range(2)]
            writes.clear()
            loss = loss_fn(torch.cat(gathered[0]), torch.cat(gathered[1]), index)
            assert sorted(writes) == [world * local] * len(loss_fn.definition.state_shapes())
            assert_allclose(loss.item(), expected.item(), rtol=1e-12)
            loss.backward()
            for r in range(world):  # all_gather's backward: each slice's gradient to its rank
                for v in range(2):
                    received[r][v] += gathered[v][r].grad
        for r in range(world):
            torch.autograd.backward(locals_[r], received[r])
        ddp_grad = sum(e.grad for e in encoders) / world  # DDP averages over ranks
        assert_allclose(ddp_grad.numpy(), expected_grad.numpy(), rtol=1e-10, atol=1e-12)
        for loss_fn in ranks:
            for name, value in single.export_state().items():
                assert_allclose(loss_fn.export_state()[name], value, rtol=1e-12, atol=1e-15)


def test_duplicates_share_one_pooled_row_and_are_not_each_others_negatives():
    """Index 2 twice: its row takes the mean of the two batch estimates, once; the two
    positions of sample 2 never contrast with each other."""
    definition = xrisk.GlobalContrastiveLoss(4, tau=0.5, gamma=1.0)
    import array_api_compat.numpy as xp

    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    state = definition.init(xp=xp, dtype=xp.float64)
    _, pooled = definition.apply(state, a, b, np.array([2, 0, 2]))
    x = a / np.linalg.norm(a, axis=1, keepdims=True)
    y = b / np.linalg.norm(b, axis=1, keepdims=True)
    tau = 0.5

    def mean_exp(anchor, others):  # negatives of a sample-2 anchor: position 1 only
        return np.mean([np.exp(anchor @ o / tau) for o in others])

    direction1 = [mean_exp(x[p], [y[1], x[1]]) for p in (0, 2)]
    direction2 = [mean_exp(y[p], [x[1], y[1]]) for p in (0, 2)]
    expected = (np.mean(direction1) + np.mean(direction2)) / 2
    u = pooled.u[:, 0] * np.exp(pooled.u[:, 1])
    assert_allclose(u[2], expected, rtol=1e-12)
    assert u[1] == u[3] == 0.0


# -- the gamma schedule -------------------------------------------------------------------
def test_gamma_schedule_is_a_pure_function_of_the_epoch():
    cosine = [gamma_at(e, gamma=0.1, schedule="cosine", decay_epochs=10)
              for e in range(13)]
    assert cosine[0] == 1.0 and cosine[10] == cosine[12] == pytest.approx(0.1)
    assert all(a > b for a, b in zip(cosine[:10], cosine[1:11]))
    assert cosine[5] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)))
    assert [gamma_at(e, gamma=0.3) for e in (0, 7)] == [0.3, 0.3]
    loss = xrisk.GlobalContrastiveLoss(5, gamma=0.2, gamma_schedule="cosine",
                                       gamma_decay_epochs=4)
    later = loss.at_epoch(2)
    assert (loss.epoch, loss.current_gamma) == (0, 1.0)
    assert later.epoch == 2 and later.current_gamma == pytest.approx(0.6)
    assert later.replace(epoch=0).config() == loss.config()
    with pytest.raises(AttributeError, match="read-only"):
        loss.epoch = 3


@pytest.mark.parametrize("cls", [xrisk.GlobalContrastiveLoss, xrisk.BimodalContrastiveLoss])
def test_a_step_uses_the_gamma_of_its_epoch(cls):
    import array_api_compat.numpy as xp

    rng = np.random.default_rng(6)
    index = np.array([0, 1, 2])
    first = [rng.normal(size=(3, 4)) for _ in range(2)]
    second = [rng.normal(size=(3, 4)) for _ in range(2)]
    cosine = cls(3, tau=0.5, gamma=0.25, gamma_schedule="cosine", gamma_decay_epochs=2)
    results = []
    for schedule_loss, constant_gamma in ((cosine.at_epoch(1), 0.625),
                                          (cosine.at_epoch(2), 0.25)):
        states = []
        for loss in (schedule_loss, cls(3, tau=0.5, gamma=constant_gamma)):
            state = loss.init(xp=xp, dtype=xp.float64)
            _, state = loss.apply(state, *first, index)
            states.append(loss.apply(state, *second, index))
        for a, b in zip(states[0][1], states[1][1]):
            assert_allclose(a, b, rtol=1e-14)
        results.append(states[0][0])
    assert results[0] != results[1]


# -- InfoNCE against the textbook formulas -----------------------------------------------
def test_info_nce_is_simclr_nt_xent_and_clip():
    rng = np.random.default_rng(7)
    a, b = _views(rng, 6, 4)
    tau = 0.3
    x, y = _unit(a), _unit(b)
    # SimCLR: 2B anchors, each against the other 2B - 1 embeddings.
    z = torch.cat([x, y])
    logits = z @ z.T / tau
    logits = logits - torch.eye(12, dtype=torch.float64) * 1e9
    targets = torch.cat([torch.arange(6, 12), torch.arange(0, 6)])
    simclr = F.cross_entropy(logits, targets)
    assert_allclose(xt.InfoNCELoss(tau=tau, dtype="float64")(a, b).item(), simclr.item(),
                    rtol=1e-12)
    # CLIP: image -> text and text -> image cross-entropies, averaged.
    s = x @ y.T / tau
    clip = (F.cross_entropy(s, torch.arange(6)) + F.cross_entropy(s.T, torch.arange(6))) / 2
    ours = xt.InfoNCELoss(tau=tau, within_view=False, dtype="float64")(a, b)
    assert_allclose(ours.item(), clip.item(), rtol=1e-12)


# -- bad input ----------------------------------------------------------------------------
BAD_HYPER = [
    (xrisk.GlobalContrastiveLoss, dict(tau=0.0), r"tau=0.0; expected a finite number > 0"),
    (xrisk.GlobalContrastiveLoss, dict(gamma=0.0), r"gamma=0.0; expected a number in \(0, 1\]"),
    (xrisk.GlobalContrastiveLoss, dict(gamma_schedule="cosine"),
     r"gamma_schedule='cosine' with gamma_decay_epochs=None; expected"),
    (xrisk.GlobalContrastiveLoss, dict(gamma_schedule="linear"),
     r"gamma_schedule='linear'; expected one of \('constant', 'cosine'\)"),
    (xrisk.GlobalContrastiveLoss, dict(epoch=-1), r"epoch=-1; expected an integer >= 0"),
    (xrisk.GlobalContrastiveLoss, dict(temperature_scheme="learnable"),
     r"temperature_scheme='learnable'; expected one of \('global', 'individual'\)"),
    (xrisk.GlobalContrastiveLoss, dict(temperature_scheme="individual", tau=0.01),
     r"tau=0.01 outside \[tau_min, tau_max\] = \[0.05, 0.7\]; expected"),
    (xrisk.GlobalContrastiveLoss, dict(tau_min=0.5, tau_max=0.1), r"tau_min=0.5 > tau_max=0.1"),
    (xrisk.GlobalContrastiveLoss, dict(normalize="yes"), r"normalize='yes' \(type str\)"),
    (xrisk.BimodalContrastiveLoss, dict(negative_reduction="max"),
     r"negative_reduction='max'; expected one of \('mean', 'sum'\)"),
    (xrisk.BimodalContrastiveLoss, dict(beta=1.5), r"beta=1.5; expected a number in \(0, 1\]"),
]


@pytest.mark.parametrize(("cls", "kwargs", "message"), BAD_HYPER)
def test_bad_hyper_parameters_name_value_expectation_and_fix(cls, kwargs, message):
    with pytest.raises(ValueError, match=message) as raised:
        cls(8, **kwargs)
    assert "Fix:" in str(raised.value)


@pytest.mark.parametrize("name", ["GlobalContrastiveLoss", "BimodalContrastiveLoss"])
def test_a_bad_batch_raises_and_changes_no_state(name):
    loss_fn = getattr(xt, name)(5, temperature_scheme="individual", dtype="float64",
                                **({"tau": 0.1} if name == "GlobalContrastiveLoss" else {}))
    rng = np.random.default_rng(8)
    good = [torch.tensor(rng.normal(size=(3, 4))) for _ in range(2)]
    loss_fn(*good, torch.tensor([0, 1, 2]))
    before = loss_fn.export_state()
    bad_nan = good[1].clone()
    bad_nan[1, 2] = float("nan")
    cases = [
        ((good[0], good[1][:, :3], torch.tensor([0, 1, 2])), r"features sizes differ"),
        ((good[0], good[1], torch.tensor([0, 1, 5])),
         r"index values \[5\] are outside \[0, sample count=5\)"),
        ((good[0], bad_nan, torch.tensor([0, 1, 2])), r"contain non-finite values"),
        ((good[0], good[1], torch.tensor([0.0, 1.0, 2.0])), r"expected an integer dtype"),
    ]
    for args, message in cases:
        with pytest.raises((ValueError, TypeError), match=message) as raised:
            loss_fn(*args)
        assert "expected" in str(raised.value).lower() and "Fix:" in str(raised.value)
        for field, value in loss_fn.export_state().items():
            np.testing.assert_array_equal(value, before[field], err_msg=field)
