"""Multi-label losses: oracles, missing labels, per-label independence, PESG, bad input.

The cross-backend identity against the numpy references (tests/_reference_multilabel.py),
with duplicate indices, missing labels, labels without a positive and task ids, runs in the
generic harness (tests/test_cross_backend.py, tests/test_jit.py) through the cases of
tests/_cases.py. Here: the properties that define the multi-label semantics.
"""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal

import xrisk
import xrisk.torch as xt
from xrisk.losses.pauc import PAUC_MODES

K, N = 3, 8
#: One mode per pAUC class (its first name: "SOPA", "SOPAs", "SOTAs", "STACO"), from the
#: classes' own ``modes``.
MODES = tuple(cls.modes[0] for cls in dict.fromkeys(PAUC_MODES.values()))


def _definitions():
    """One definition of each multi-label loss (every pAUC mode), by name."""
    out = {"AUCM-v1": xrisk.MultiLabelAUCMLoss(K, margin=0.7),
           "AUCM-v2": xrisk.MultiLabelAUCMLoss(K, version="v2"),
           "mAP": xrisk.meanAveragePrecisionLoss(K, N, gamma=0.7)}
    out.update({f"pAUC-{mode}": xrisk.MultiLabelpAUCLoss(K, N, mode=mode) for mode in MODES})
    return out


DEFINITIONS = _definitions()


def _params(definition, rng):
    return {name: rng.uniform(0.1, 0.9, K) for name in definition.auxiliaries()}


def _batch(rng, batch=7, missing=0.2):
    scores = rng.uniform(0.05, 0.95, (batch, K))
    labels = (rng.random((batch, K)) < 0.45).astype(np.float64)
    labels[0, :], labels[1, :] = 1.0, 0.0  # every label has a positive and a negative
    labels[2:][rng.random((batch - 2, K)) < missing] = np.nan
    index = rng.integers(0, N, batch)
    return scores, labels, index


def _trained_state(definition, seed=0):
    """A state after two steps, so that "unchanged" is not just the fill value."""
    state = definition.init(xp=xp, dtype=xp.float64)
    rng = np.random.default_rng(seed)
    params = definition.params_type(**_params(definition, rng))
    for _ in range(2):
        _, state = definition.apply(state, *_batch(rng), params=params)
    return state


def _step(definition, state, params, scores, labels, index, task=None):
    """One torch step: loss, d/d scores (B, K), d/d each auxiliary, new state (numpy)."""
    s = torch.tensor(scores, requires_grad=True)
    aux = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    loss, new = definition.apply(
        definition.state_type(**{k: torch.tensor(np.asarray(v)) for k, v in
                                 state._asdict().items()}),
        s, torch.tensor(labels), torch.tensor(index),
        None if task is None else torch.tensor(task), params=definition.params_type(**aux))
    loss.backward()
    return (float(loss.detach()), s.grad.numpy(),
            {k: v.grad.numpy() for k, v in aux.items()},
            {k: v.detach().numpy() for k, v in new._asdict().items()})


# --------------------------------------------------------------------------- oracles

def _ap_objective(s, y):
    """mean over labels of -(1/n+) sum_i f_pos,i / f_all,i on the observed rows (torch)."""
    total = 0
    for t in range(y.shape[1]):
        rows = ~np.isnan(y[:, t])
        st, yt = s[rows, t], torch.tensor(y[rows, t])
        pair = torch.clamp(1.0 - (st[:, None] - st[None, :]), min=0) ** 2  # [i, j]
        f_all, f_pos = pair.mean(dim=1), (pair * yt[None, :]).mean(dim=1)
        positive = yt == 1
        total = total - (f_pos[positive] / f_all[positive]).mean()
    return total / y.shape[1]


def _kl_objective(s, y, *, lam, tau=None):
    """mean over labels of one-way (tau None) or two-way KL-DRO pAUC objectives (torch)."""
    total = 0
    for t in range(y.shape[1]):
        rows = ~np.isnan(y[:, t])
        st, yt = s[rows, t], y[rows, t]
        pos, neg = st[torch.tensor(yt == 1)], st[torch.tensor(yt == 0)]
        pair = torch.clamp(1.0 - (pos[:, None] - neg[None, :]), min=0) ** 2
        u = torch.exp(pair / lam).mean(dim=1)
        if tau is None:
            total = total + (lam * torch.log(u)).mean()
        else:
            total = total + tau * torch.log((u ** (lam / tau)).mean())
    return total / y.shape[1]


ORACLES = {
    "mAP": (lambda: xrisk.meanAveragePrecisionLoss(K, N, gamma=1.0), _ap_objective),
    "1w": (lambda: xrisk.MultiLabelpAUCLoss(K, N, mode="1w", gamma=1.0, lam=0.5),
           lambda s, y: _kl_objective(s, y, lam=0.5)),
    "2w": (lambda: xrisk.MultiLabelpAUCLoss(K, N, mode="2w", gammas=(1.0, 1.0), lam=0.5,
                                             tau=0.3),
           lambda s, y: _kl_objective(s, y, lam=0.5, tau=0.3)),
}


@pytest.mark.parametrize("name", sorted(ORACLES))
@pytest.mark.parametrize("seed", [0, 1])
def test_gamma_one_full_batch_gradient_is_the_objectives_gradient(name, seed):
    """With gamma = 1 and the whole data set (with missing labels) in one batch, the loss's
    gradient is the gradient of the mean over labels of the compositional objective."""
    make, objective = ORACLES[name]
    rng = np.random.default_rng(seed)
    scores, labels, _ = _batch(rng, batch=N, missing=0.25)
    index = rng.permutation(N)
    _, grad, _, _ = _step(make(), _trained_state(make()), {}, scores, labels, index)
    s = torch.tensor(scores, requires_grad=True)
    objective(s, labels).backward()
    assert_allclose(grad, s.grad.numpy(), rtol=1e-10, atol=1e-13)


# --------------------------------------------------------------------------- missing labels

@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_a_missing_label_is_the_entry_dropped_and_its_state_row_is_untouched(name):
    definition = DEFINITIONS[name]
    rng = np.random.default_rng(3)
    state = _trained_state(definition)
    params = _params(definition, rng)
    scores, labels, index = _batch(rng, missing=0.0)
    r, t = 3, 1
    index[r] = N - 1 if N - 1 not in np.delete(index, r) else index[r]
    index = np.where((index == index[r]) & (np.arange(len(index)) != r), (index[r] + 1) % N,
                     index)  # row r's sample appears once
    labels[r, t] = 1.0  # a positive if it were observed
    missing = labels.copy()
    missing[r, t] = np.nan
    task = np.full(len(index), t)  # label t alone is active: its loss is the whole loss
    loss, grad, grad_aux, new = _step(definition, state, params, scores, missing, index, task)
    keep = np.arange(len(index)) != r
    want = _step(definition, state, params, scores[keep], missing[keep], index[keep],
                 task[keep])
    assert loss == pytest.approx(want[0], rel=1e-12, abs=1e-15)
    assert_allclose(grad[keep], want[1], rtol=1e-12, atol=1e-15)
    assert_array_equal(grad[r], 0.0)
    for key, value in grad_aux.items():
        assert_allclose(value, want[2][key], rtol=1e-12, atol=1e-15)
    for field, value in new.items():
        assert_allclose(value, want[3][field], rtol=1e-12, atol=1e-15, err_msg=field)
    if name.startswith("AUCM"):
        return
    table = next(iter(new))  # the (label, sample) table
    row = t * N + index[r]
    assert_array_equal(new[table][row], np.asarray(getattr(state, table))[row])
    observed = _step(definition, state, params, scores, labels, index, task)[3][table]
    assert not np.array_equal(observed[row], new[table][row])  # observed: the row moves
    negative = labels.copy()
    negative[r, t] = 0.0
    as_negative = _step(definition, state, params, scores, negative, index, task)
    assert not np.allclose(as_negative[1], grad)  # a missing label is not a negative


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_a_label_without_observed_or_positive_entries_adds_zero_and_keeps_its_state(name):
    definition = DEFINITIONS[name]
    rng = np.random.default_rng(4)
    state = _trained_state(definition)
    params = _params(definition, rng)
    scores, labels, index = _batch(rng)
    for column in (np.nan, 0.0):  # all missing; observed but without a positive
        labels[:, 2] = column
        loss, grad, grad_aux, new = _step(definition, state, params, scores, labels, index)
        assert np.isfinite(loss)
        # (AUC-M's negatives-only column keeps its E-[(s - b)^2] term, as AUCMLoss does)
        if np.isnan(column) or not name.startswith("AUCM"):
            assert_array_equal(grad[:, 2], 0.0)
        if np.isnan(column):
            for value in grad_aux.values():
                assert value[2] == 0.0
        for field, value in new.items():
            old = np.asarray(getattr(state, field))
            rows = (slice(2 * N, 3 * N) if len(value) == K * N else 2)
            assert_array_equal(value[rows], old[rows], err_msg=field)


# --------------------------------------------------------------------------- independence

@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_each_label_depends_on_its_own_column_only(name):
    """Label t's gradient, auxiliaries' gradients and state are the same whatever the other
    labels' scores and labels are (SOTAs' w included: one row per label)."""
    definition = DEFINITIONS[name]
    rng = np.random.default_rng(5)
    state = _trained_state(definition)
    params = _params(definition, rng)
    scores, labels, index = _batch(rng)
    other_scores, other_labels, _ = _batch(np.random.default_rng(6))
    t = 1
    scores2, labels2 = other_scores.copy(), other_labels.copy()
    scores2[:, t], labels2[:, t] = scores[:, t], labels[:, t]
    one, two = (_step(definition, state, params, s, y, index)
                for s, y in ((scores, labels), (scores2, labels2)))
    assert_allclose(one[1][:, t], two[1][:, t], rtol=1e-12, atol=1e-15)
    assert not np.allclose(one[1], two[1])
    for key in one[2]:
        assert_allclose(one[2][key][t], two[2][key][t], rtol=1e-12, atol=1e-15)
    for field in one[3]:
        value = one[3][field]
        rows = slice(t * N, (t + 1) * N) if len(value) == K * N else t
        assert_allclose(value[rows], two[3][field][rows], rtol=1e-12, atol=1e-15)


def test_task_ids_select_the_active_labels_as_the_trisampler_yields_them():
    """A TriSampler batch (index, task) feeds the loss as is: the labels of the batch's tasks
    are active, each on every row; the other labels' state is untouched."""
    from xrisk.samplers import TriSampler

    rng = np.random.default_rng(7)
    targets = (rng.random((40, 4)) < 0.3).astype(np.int64)
    targets[:4] = np.eye(4, dtype=np.int64)
    sampler = TriSampler(targets, 4, num_sampled_tasks=2, num_pos=1, seed=0)
    index, task = sampler.batch(0)
    definition = xrisk.meanAveragePrecisionLoss(4, 40)
    state = definition.init(xp=xp, dtype=xp.float64)
    scores = rng.uniform(size=(len(index), 4))
    loss, new = definition.apply(state, scores, targets[index], index, task)
    touched = {int(k) // 40 for k in np.flatnonzero(np.any(new.u != 0, axis=1))}
    assert touched == set(np.unique(task).tolist())
    # the same as giving only the active labels, the others missing
    masked = targets[index].astype(np.float64)
    masked[:, ~np.isin(np.arange(4), task)] = np.nan
    alone, alone_state = definition.apply(state, scores, masked, index)
    assert float(loss) == pytest.approx(float(alone) * 4 / 2, rel=1e-12)
    assert_array_equal(new.u, alone_state.u)


# --------------------------------------------------------------------------- PESG

def test_pesg_descends_and_ascends_every_labels_auxiliaries_on_their_own():
    loss_fn = xrisk.MultiLabelAUCMLoss(3, margin=0.5)
    opt = xrisk.PESG(loss_fn, learning_rate=0.1, epoch_decay=0.0, weight_decay=0.0,
                     momentum=0.0)
    aux = xrisk.MultiLabelAUCMParams(np.zeros(3), np.array([0.0, 0.1, 0.2]), np.full(3, 0.3))
    grads = xrisk.MultiLabelAUCMParams(np.array([-0.4, 0.2, 2.0]), np.array([0.1, -0.3, 0.0]),
                                       np.full(3, 9.0))
    state = opt.init([np.array([0.5])], aux)
    _, new, _ = opt.update([np.array([0.2])], state, [np.array([0.5])], aux, grads)
    a = aux.a - 0.1 * np.clip(grads.a, -1, 1)  # the clipped step, label by label
    b = aux.b - 0.1 * np.clip(grads.b, -1, 1)
    alpha = np.maximum(aux.alpha + 0.1 * (2 * (0.5 + b - a) - 2 * aux.alpha), 0)
    assert_allclose(new.a, a, rtol=1e-15)
    assert_allclose(new.b, b, rtol=1e-15)
    assert_allclose(new.alpha, alpha, rtol=1e-15)  # alpha's gradient (9) is never used


def test_torch_pesg_trains_the_per_label_parameters_like_the_core_rule():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, K).double()
    loss_fn = xt.MultiLabelAUCMLoss(K, version="v2", dtype="float64")
    opt = xt.PESG(model.parameters(), loss_fn, learning_rate=0.1, epoch_decay=0.0)
    rule = xrisk.PESG(loss_fn.definition, learning_rate=0.1, epoch_decay=0.0)
    params = [p.detach().numpy().copy() for p in model.parameters()]
    aux = xrisk.MultiLabelAUCMParams(*(np.zeros(K) for _ in range(3)))
    state = rule.init(params, aux)
    rng = np.random.default_rng(8)
    for _ in range(3):
        x = torch.tensor(rng.normal(size=(6, 4)))
        _, labels, _ = _batch(rng, batch=6)
        opt.zero_grad()
        loss_fn(torch.sigmoid(model(x)), torch.tensor(labels)).backward()
        grads = [p.grad.numpy().copy() for p in model.parameters()]
        aux_grads = xrisk.MultiLabelAUCMParams(
            *(getattr(loss_fn, n).grad.numpy().copy() for n in ("a", "b", "alpha")))
        opt.step()
        params, aux, state = rule.update(grads, state, params, aux, aux_grads)
        for got, want in zip(model.parameters(), params):
            assert_allclose(got.detach().numpy(), want, rtol=1e-12)
        for name in ("a", "b", "alpha"):
            assert_allclose(getattr(loss_fn, name).detach().numpy(), getattr(aux, name),
                            rtol=1e-12, atol=1e-15)
    assert loss_fn.alpha.shape == (K,) and bool((loss_fn.alpha > 0).all())


# --------------------------------------------------------------------------- bad input

def _bad_inputs():
    scores, labels, index = _batch(np.random.default_rng(9))
    two = labels.copy()
    two[3, 1] = 2.0
    return [
        ("labels=2", (scores, two, index, None), r"labels must be 0, 1 or NaN \(missing\); "
         r"received \[2\.0\]\. Expected .* Fix: "),
        ("task=K", (scores, labels, index, np.full(len(index), K)),
         rf"task values \[{K}\] are outside \[0, label count={K}\).* Fix: "),
        ("index=N", (scores, labels, np.full(len(index), N), None),
         rf"index values \[{N}\] are outside \[0, sample count={N}\).* Fix: "),
        ("scores (B, K+1)", (np.hstack([scores, scores[:, :1]]), labels, index, None),
         rf"num_labels sizes differ: .*expected num_labels = {K}.* Fix: "),
        ("labels (B,)", (scores, labels[:, 0], index, None),
         r"labels has shape \(7,\); expected \(batch, num_labels\)\. Fix: "),
    ]


@pytest.mark.parametrize("name", ["AUCM-v1", "mAP", "pAUC-SOTAs", "pAUC-STACO"])
@pytest.mark.parametrize(("what", "inputs", "match"), _bad_inputs(),
                         ids=[case[0] for case in _bad_inputs()])
def test_bad_input_raises_naming_value_expectation_and_fix_and_changes_nothing(
        name, what, inputs, match):
    if name.startswith("AUCM") and what == "index=N":
        pytest.skip("AUC-M keeps no per-sample state: any index >= 0 is accepted")
    definition = DEFINITIONS[name]
    loss_fn = {"AUCM-v1": lambda: xt.MultiLabelAUCMLoss(K, margin=0.7, dtype="float64"),
               "mAP": lambda: xt.meanAveragePrecisionLoss(K, N, gamma=0.7, dtype="float64"),
               "pAUC-SOTAs": lambda: xt.MultiLabelpAUCLoss(K, N, mode="SOTAs",
                                                           dtype="float64"),
               "pAUC-STACO": lambda: xt.MultiLabelpAUCLoss(K, N, mode="STACO",
                                                           dtype="float64")}[name]()
    assert type(loss_fn.definition) is type(definition)
    loss_fn.load_state({**{k: np.asarray(v) for k, v in
                           _trained_state(loss_fn.definition)._asdict().items()},
                        **{k: np.full(K, 0.5) for k in definition.auxiliaries()}},
                       reinterpret=True)  # a state made here, for this loss
    before = loss_fn.export_state()
    tensors = [None if v is None else torch.as_tensor(v) for v in inputs]
    with pytest.raises(ValueError, match=match):
        loss_fn(*tensors)
    for key, value in loss_fn.export_state().items():
        assert_array_equal(value, before[key], err_msg=key)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mode": "SOPA", "gamma": 0.9}, r"mode='SOPA' got gamma=0\.9; expected only the options "
     r"of that mode: \['beta', 'eta', 'margin'\]\. Fix: drop gamma"),
    ({"mode": "3w"}, r"mode='3w'; expected one of .*'STACO'.*\. Fix: "),
    ({"mode": "1w", "gamma": 2.0}, r"MultiLabelpAUCLoss\(mode='1w'\): pAUC_DRO_Loss: gamma=2\.0;"
     r" expected a number in \(0, 1\]\. Fix: "),
    ({"mode": "STACO", "theta_0": 0.0}, r"theta_0=0\.0; expected .* Fix: "),
])
def test_bad_pauc_options_name_the_mode_value_and_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        xrisk.MultiLabelpAUCLoss(K, N, **kwargs)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: xrisk.MultiLabelAUCMLoss(0), r"num_labels=0; expected an integer >= 1\. Fix: "),
    (lambda: xrisk.meanAveragePrecisionLoss(K, 0), r"num_samples=0; expected an integer"),
    (lambda: xrisk.MultiLabelAUCMLoss(K, version="v3"), r"version='v3'; expected one of"),
])
def test_bad_constructor_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_staco_and_sotas_keep_one_global_row_per_label():
    """LibAUC raises "Out of options!" for STACO and shares SOTAs' w across labels."""
    for mode, field, shape in (("STACO", "s2", (K,)), ("SOTAs", "w", (K, 2))):
        definition = xrisk.MultiLabelpAUCLoss(K, N, mode=mode)
        state = _trained_state(definition)
        assert np.asarray(getattr(state, field)).shape == shape
    w = np.asarray(state.w)  # SOTAs: each label's own moving average
    assert len(np.unique(w[:, 0] * np.exp(w[:, 1]))) == K


# --------------------------------------------------------------------------- compiled steps

@pytest.mark.parametrize("mode", ["SOPA", "SOTAs", "STACO"])
def test_jax_jit_matches_torch_with_missing_labels_and_task_ids(mode):
    """The pAUC modes that tests/test_jit.py (default hyper-parameters: "1w") leaves out,
    under jax.jit, against the eager torch step."""
    import jax
    import jax.numpy as jnp

    definition = DEFINITIONS[f"pAUC-{mode}"]
    state = _trained_state(definition)
    scores, labels, index = _batch(np.random.default_rng(10))
    task = np.array([0, 2, 2, 0, 0, 2, 2])  # label 1 inactive
    loss, grad, _, new = _step(definition, state, {}, scores, labels, index, task)

    @jax.jit
    def step(state, s):
        return jax.value_and_grad(
            lambda x: definition.apply(state, x, jnp.asarray(labels), jnp.asarray(index),
                                       jnp.asarray(task)), has_aux=True)(s)

    (jit_loss, jit_new), jit_grad = step(
        definition.state_type(*(jnp.asarray(np.asarray(v)) for v in state)),
        jnp.asarray(scores))
    assert_allclose(float(jit_loss), loss, rtol=1e-12, atol=1e-15)
    assert_allclose(np.asarray(jit_grad), grad, rtol=1e-12, atol=1e-15)
    assert_array_equal(grad[:, 1], 0.0)
    for field, value in new.items():
        assert_allclose(np.asarray(getattr(jit_new, field)), value, rtol=1e-12, err_msg=field)
