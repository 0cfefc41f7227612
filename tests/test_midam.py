"""Multi-instance AUC (MIDAM): the gamma = 1 full-batch oracle, stability, the smoothing
schedule, the bag sampler, the MIDAM optimizer and bad inputs.

Cross-backend identity of the losses over several steps (duplicates, masks, one-class
batches) runs in tests/test_cross_backend.py and tests/test_jit.py through their cases.
"""

from __future__ import annotations

import json

import array_api_compat.numpy as xp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import xrisk
from tests import _reference_midam
from xrisk.samplers import BagSampler

MARGIN = 0.7


def _auc_objective(h, labels, a, b, alpha, margin):
    """F of the paper, in torch, from exact bag values h (B,)."""
    positive = labels == 1
    negative = ~positive
    mean = lambda v, m: (v * m).sum() / max(int(m.sum()), 1)  # noqa: E731
    return (mean((h - a) ** 2, positive) + mean((h - b) ** 2, negative)
            + 2 * alpha * (margin + mean(h, negative) - mean(h, positive)) - alpha ** 2)


def _full_batch(rng, num_samples, width):
    """Every bag of the data set once, all its instances (a mask for smaller bags)."""
    sizes = rng.integers(1, width + 1, size=num_samples)
    mask = (np.arange(width)[None, :] < sizes[:, None]).astype(np.int64)
    labels = rng.integers(0, 2, size=num_samples)
    return mask, labels, np.arange(num_samples)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), num_samples=st.integers(1, 6), width=st.integers(1, 4),
       tau=st.sampled_from([0.1, 0.5, 2.0]))
def test_softmax_pooling_gamma_one_full_batch_is_the_exact_gradient(seed, num_samples, width,
                                                                     tau):
    rng = np.random.default_rng(seed)
    mask, labels, index = _full_batch(rng, num_samples, width)
    scores = torch.tensor(rng.normal(size=(num_samples, width)) * 3, requires_grad=True)
    params = [torch.tensor(v, requires_grad=True) for v in rng.uniform(0, 1, 3)]
    definition = xrisk.MIDAM_softmax_pooling_loss(num_samples, tau=tau, gamma=1.0, margin=MARGIN)
    state = definition.init(xp=_torch_xp(), dtype=torch.float64)
    loss, _ = definition.apply(state, scores, torch.tensor(labels), torch.tensor(index),
                               mask=torch.tensor(mask), params=xrisk.AUCMParams(*params))
    got = torch.autograd.grad(loss, [scores, *params])

    exact_scores = scores.detach().clone().requires_grad_(True)
    exact_params = [p.detach().clone().requires_grad_(True) for p in params]
    masked = torch.where(torch.tensor(mask) > 0, exact_scores / tau, -torch.inf)
    sizes = torch.tensor(mask.sum(1), dtype=torch.float64)
    h = tau * (torch.logsumexp(masked, dim=1) - torch.log(sizes))
    objective = _auc_objective(h, torch.tensor(labels), *exact_params, MARGIN)
    want = _saddle_point(definition, torch.autograd.grad(objective,
                                                         [exact_scores, *exact_params]))
    np.testing.assert_allclose(loss.item(), objective.item(), rtol=1e-10, atol=1e-12)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), num_samples=st.integers(1, 6), width=st.integers(1, 4))
def test_attention_pooling_gamma_one_full_batch_is_the_exact_gradient(seed, num_samples, width):
    rng = np.random.default_rng(seed)
    mask, labels, index = _full_batch(rng, num_samples, width)
    scores = torch.tensor(rng.normal(size=(num_samples, width)), requires_grad=True)
    attention = torch.tensor(rng.normal(size=(num_samples, width)) * 3, requires_grad=True)
    params = [torch.tensor(v, requires_grad=True) for v in rng.uniform(0, 1, 3)]
    definition = xrisk.MIDAM_attention_pooling_loss(num_samples, gamma=1.0, margin=MARGIN)
    state = definition.init(xp=_torch_xp(), dtype=torch.float64)
    loss, _ = definition.apply(state, scores, attention, torch.tensor(labels),
                               torch.tensor(index), mask=torch.tensor(mask),
                               params=xrisk.AUCMParams(*params))
    got = torch.autograd.grad(loss, [scores, attention, *params])

    leaves = [t.detach().clone().requires_grad_(True) for t in (scores, attention, *params)]
    weights = torch.where(torch.tensor(mask) > 0, leaves[1], -torch.inf).softmax(dim=1)
    h = torch.sigmoid((weights * leaves[0]).sum(dim=1))
    objective = _auc_objective(h, torch.tensor(labels), *leaves[2:], MARGIN)
    want = _saddle_point(definition, torch.autograd.grad(objective, leaves))
    np.testing.assert_allclose(loss.item(), objective.item(), rtol=1e-10, atol=1e-12)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)


def _saddle_point(definition, grads):
    """The exact gradients (inputs, then the auxiliaries in declaration order) as the loss
    reports them: an ascent auxiliary's reversed (LossDefinition._saddle_point)."""
    roles = [aux.role for aux in definition.auxiliaries().values()]
    inputs = len(grads) - len(roles)
    return [*grads[:inputs], *(-g if role == "ascent" else g
                               for g, role in zip(grads[inputs:], roles, strict=True))]


def _torch_xp():
    return xrisk.backends.get_backend("torch").namespace


def test_moving_average_is_the_naive_one_in_float64():
    """The shifted state [s~, c] holds the plain moving average of mean exp(phi / tau)."""
    rng = np.random.default_rng(0)
    definition = xrisk.MIDAM_softmax_pooling_loss(3, tau=0.5, gamma=0.3)
    state = definition.init(xp=xp, dtype=xp.float64)
    params = definition.init_params(xp=xp, dtype=xp.float64)
    naive = np.zeros(3)
    for _ in range(4):
        scores = rng.normal(size=(3, 2)) * 2
        _, state = definition.apply(state, scores, np.array([1, 0, 1]), np.array([0, 1, 2]),
                                    params=params)
        naive = 0.7 * naive + 0.3 * np.exp(scores / 0.5).mean(axis=1)
    np.testing.assert_allclose(state.s[:, 0] * np.exp(state.s[:, 1]), naive, rtol=1e-12)


@pytest.mark.parametrize("mode", ["softmax", "attention"])
def test_huge_instance_scores_stay_finite_in_float32(mode):
    """phi / tau = 1e4: LibAUC's caller-side exp overflows; here the state is shifted."""
    definition = xrisk.MIDAMLoss(mode, num_samples=4, **({"tau": 0.1} if mode == "softmax"
                                                      else {}))
    state = definition.init(xp=_torch_xp(), dtype=torch.float32)
    params = definition.init_params(xp=_torch_xp(), dtype=torch.float32)
    scores = torch.tensor([[1000.0, -1000.0], [999.0, 998.0], [-5.0, 3.0]],
                          requires_grad=True)
    inputs = [scores] if mode == "softmax" else [scores, (scores * 0.9).detach()]
    labels, index = torch.tensor([1, 0, 1]), torch.tensor([0, 1, 2])
    for _ in range(3):
        loss, state = definition.apply(state, *inputs, labels, index, params=params)
        (grad,) = torch.autograd.grad(loss, scores)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        assert all(torch.isfinite(v).all() for v in state)
    if mode == "softmax":  # log s after three visits from 0: log s^ + log(1 - 0.1**3)
        s = state.s[:3, 0].double().log() + state.s[:3, 1].double()
        want = (torch.logsumexp(scores.detach().double() / 0.1, dim=1) - np.log(2)
                + np.log(1 - 0.1**3))
        np.testing.assert_allclose(s.numpy(), want.numpy(), rtol=1e-6)


def test_duplicate_bags_pool_into_one_update():
    definition = xrisk.MIDAM_softmax_pooling_loss(2, tau=1.0, gamma=1.0)
    state = definition.init(xp=xp, dtype=xp.float64)
    scores = np.log(np.array([[1.0, 1.0], [3.0, 3.0], [5.0, 5.0]]))
    _, state = definition.apply(state, scores, np.array([1, 1, 0]), np.array([0, 0, 1]),
                                params=definition.init_params(xp=xp))
    s = state.s[:, 0] * np.exp(state.s[:, 1])
    np.testing.assert_allclose(s, [2.0, 5.0], rtol=1e-12)


# --------------------------------------------------------------------------- smoothing

def test_update_smoothing_divides_gamma_in_the_state():
    definition = xrisk.MIDAM_attention_pooling_loss(5, gamma=0.8)
    state = definition.init(xp=xp, dtype=xp.float64)
    state = definition.update_smoothing(state, 2)
    state = definition.update_smoothing(state, 2.0)
    assert float(state.smoothing) == pytest.approx(0.2)
    assert definition.gamma == 0.8  # the definition stays frozen: gamma is the initial value


@pytest.mark.parametrize("factor", [0.5, 0, -1, float("nan"), "2", True])
def test_update_smoothing_refuses_a_bad_factor(factor):
    definition = xrisk.MIDAM_softmax_pooling_loss(5)
    state = definition.init(xp=xp, dtype=xp.float64)
    with pytest.raises(ValueError, match=r"decay_factor=.*expected.*Fix"):
        definition.update_smoothing(state, factor)
    assert float(state.smoothing) == 0.9


def test_adapters_update_smoothing_in_place_and_export_it():
    import tensorflow as tf

    import xrisk.jax as xj
    import xrisk.tensorflow as xt
    import xrisk.torch as xr

    torch_loss = xr.MIDAM_softmax_pooling_loss(3, gamma=0.9, dtype="float64")
    torch_loss.update_smoothing(3)
    assert torch_loss.smoothing.item() == pytest.approx(0.3)
    assert torch_loss.export_state()["smoothing"] == pytest.approx(0.3)
    assert "smoothing" in torch_loss.state_dict()
    tf_loss = xt.MIDAM_attention_pooling_loss(3, gamma=0.9, dtype="float64")
    step = tf.function(lambda s, a: tf_loss(s, a, tf.constant([1, 0]), tf.constant([0, 1])))
    step(tf.zeros((2, 2), tf.float64), tf.zeros((2, 2), tf.float64))
    tf_loss.update_smoothing(3)
    step(tf.zeros((2, 2), tf.float64), tf.zeros((2, 2), tf.float64))  # the same trace
    assert step.experimental_get_tracing_count() == 1
    assert float(tf_loss.smoothing) == pytest.approx(0.3)
    jax_loss = xj.MIDAM_softmax_pooling_loss(3, gamma=0.9)
    state = jax_loss.update_smoothing(jax_loss.init(), 3)
    assert float(state.smoothing) == pytest.approx(0.3)
    resumed = xr.MIDAM_softmax_pooling_loss(3, gamma=0.9, dtype="float64")
    resumed.load_state(jax_loss.export_state(state, jax_loss.init_params()))
    assert resumed.smoothing.item() == pytest.approx(0.3, rel=1e-6)


# --------------------------------------------------------------------------- bag sampler

@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=12), data=st.data())
def test_bag_sampler_batches(sizes, data):
    batch_size = data.draw(st.integers(1, len(sizes)), label="batch_size")
    width = data.draw(st.integers(1, 6), label="num_instances")
    seed = data.draw(st.integers(0, 100), label="seed")
    sampler = BagSampler(sizes, batch_size, width, seed=seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    seen = []
    for bags, instances, mask in sampler:
        assert bags.shape == (batch_size,) and instances.shape == mask.shape == (batch_size,
                                                                                  width)
        assert all(x.dtype == np.int64 for x in (bags, instances, mask))
        for bag, row, keep in zip(bags, instances, mask):
            local = row - offsets[bag]
            assert ((local >= 0) & (local < sizes[bag])).all()  # from its own bag only
            drawn = local[keep == 1]
            assert len(drawn) == min(sizes[bag], width) == len(set(drawn.tolist()))
            assert (keep[: len(drawn)] == 1).all()  # real instances first, padding after
        assert (sampler.bag_of(instances) == bags[:, None]).all()
        seen.extend(bags.tolist())
    assert len(seen) == len(set(seen)) == len(sampler) * batch_size  # each bag once an epoch
    again = BagSampler(sizes, batch_size, width, seed=seed)
    for epoch in range(2):
        for position in range(len(sampler)):
            for x, y in zip(sampler.batch(position, epoch), again.batch(position, epoch)):
                np.testing.assert_array_equal(x, y)


def test_bag_sampler_resumes_and_shards():
    sizes = [3, 1, 5, 2, 7, 1, 4, 4]
    full = [b for epoch in range(2) for b in _epoch(BagSampler(sizes, 2, 3, seed=5), epoch)]
    first = BagSampler(sizes, 2, 3, seed=5)
    head = []
    for i, batch in enumerate(first):
        head.append(batch)
        if i == 1:
            saved = json.dumps(first.state_dict(batches_consumed=i + 1))
            break
    resumed = BagSampler(sizes, 2, 3, seed=5)
    resumed.load_state_dict(json.loads(saved))
    tail = [b for epoch in range(2) for b in _epoch(resumed, epoch)]
    for x, y in zip(head + tail, full, strict=True):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    whole = BagSampler(sizes, 4, 3, seed=1).batch(1)
    parts = [BagSampler(sizes, 4, 3, seed=1).shard(r, 2).batch(1) for r in range(2)]
    for k in range(3):
        np.testing.assert_array_equal(np.concatenate([p[k] for p in parts]), whole[k])


def _epoch(sampler, epoch):
    sampler.set_epoch(epoch)
    return list(sampler)


def test_bag_sampler_draws_differ_between_epochs_and_follow_the_seed():
    sizes = [20] * 6
    a = BagSampler(sizes, 3, 4, seed=0)
    assert not np.array_equal(a.batch(0, 0)[1], a.batch(0, 1)[1])
    assert not np.array_equal(a.batch(0, 0)[1], BagSampler(sizes, 3, 4, seed=1).batch(0, 0)[1])
    ordered = BagSampler([3, 5], 2, 2, shuffle=False)
    bags, instances, mask = ordered.batch(0)
    assert bags.tolist() == [0, 1] and instances.tolist() == [[0, 1], [3, 4]]


@pytest.mark.parametrize(("sizes", "kwargs", "error", "match"), [
    ([3, 0, 2], {}, ValueError, r"bag_sizes holds 0.*expected.*Fix"),
    ([[3, 2]], {}, ValueError, r"bag_sizes has shape.*expected.*Fix"),
    ([1.5, 2.0], {}, TypeError, r"bag_sizes has dtype float.*expected.*Fix"),
    ([3, 2], {"batch_size": 3}, ValueError, r"batch_size=3.*expected.*Fix"),
    ([3, 2], {"num_instances": 0}, ValueError, r"num_instances=0.*expected.*Fix"),
])
def test_bag_sampler_refuses_bad_arguments(sizes, kwargs, error, match):
    options = {"batch_size": 1, "num_instances": 2, **kwargs}
    with pytest.raises(error, match=match):
        BagSampler(sizes, **options)


def test_torch_tensorflow_and_jax_data_faces_of_the_bag_sampler():
    import tensorflow as tf
    from torch.utils.data import DataLoader

    from xrisk.jax.data import BagSampler as JaxBags
    from xrisk.tensorflow.data import BagSampler as TFBags
    from xrisk.torch.data import BagSampler as TorchBags

    sizes = [3, 1, 5, 2]
    core = BagSampler(sizes, 2, 3, seed=0).batch(0)
    class Echo(torch.utils.data.Dataset):  # __getitem__ receives one (bag, instances, mask)
        def __getitem__(self, key):
            return key

    loader = DataLoader(Echo(), batch_sampler=TorchBags(sizes, 2, 3, seed=0),
                        collate_fn=lambda rows: rows)
    got = next(iter(loader))
    np.testing.assert_array_equal(np.array([bag for bag, _, _ in got]), core[0])
    np.testing.assert_array_equal(np.stack([inst for _, inst, _ in got]), core[1])
    tf_batch = next(iter(TFBags(sizes, 2, 3, seed=0).as_dataset()))
    assert tf_batch[1].shape == (2, 3) and tf_batch[1].dtype == tf.int64
    np.testing.assert_array_equal(tf_batch[1].numpy(), core[1])
    np.testing.assert_array_equal(next(iter(JaxBags(sizes, 2, 3, seed=0)))[2], core[2])


# --------------------------------------------------------------------------- optimizer

@pytest.mark.parametrize(("momentum", "weight_decay"), [(0.0, 0.0), (0.9, 0.01), (0.5, 0.0)])
def test_midam_rule_matches_the_reference(momentum, weight_decay):
    rng = np.random.default_rng(1)
    loss_fn = xrisk.MIDAM_softmax_pooling_loss(4, margin=MARGIN)
    opt = xrisk.MIDAM(loss_fn, learning_rate=0.3, momentum=momentum, weight_decay=weight_decay)
    params = [rng.normal(size=(2, 3)), rng.normal(size=3)]
    aux = xrisk.AUCMParams(*(np.float64(v) for v in rng.uniform(0, 1, 3)))
    state = opt.init(params, aux)
    ref_params, ref_aux, buffers = [p.copy() for p in params], dict(aux._asdict()), None
    for _ in range(3):
        grads = [rng.normal(size=p.shape) * 5 for p in params]  # large: no clipping
        aux_grads = xrisk.AUCMParams(*(np.float64(v) for v in rng.normal(size=3)))
        params, aux, state = opt.update(grads, state, params, aux, aux_grads)
        ref_params, ref_aux, buffers = _reference_midam.midam_optimizer(
            ref_params, grads, ref_aux, aux_grads._asdict(), lr=0.3, momentum=momentum,
            weight_decay=weight_decay, margin=MARGIN, steps_state=buffers)
        for p, r in zip(params, ref_params):
            np.testing.assert_allclose(p, r, rtol=1e-12)
        for name in ("a", "b", "alpha"):
            np.testing.assert_allclose(getattr(aux, name), ref_aux[name], rtol=1e-12,
                                       atol=1e-15)


def test_midam_adapters_agree_with_the_core_rule():
    import jax
    import jax.numpy as jnp
    import optax
    import tensorflow as tf

    import xrisk.jax as xj
    import xrisk.tensorflow as xt
    import xrisk.torch as xr

    rng = np.random.default_rng(2)
    start, grad = rng.normal(size=3), rng.normal(size=3)
    aux_grad = rng.normal(size=3)  # d loss / d (a, b, alpha)
    core = xrisk.MIDAM(xrisk.MIDAM_softmax_pooling_loss(4), learning_rate=0.2, momentum=0.5,
                       weight_decay=0.1)
    want, want_aux = [start], xrisk.AUCMParams(np.float64(0.0), np.float64(0.0),
                                               np.float64(0.0))
    state = core.init(want, want_aux)
    for _ in range(2):  # the same gradients twice: the second step uses the momentum
        want, want_aux, state = core.update([grad], state, want, want_aux,
                                            xrisk.AUCMParams(*aux_grad))
    want = want[0]

    torch_loss = xr.MIDAM_softmax_pooling_loss(4, dtype="float64")
    weight = torch.nn.Parameter(torch.tensor(start))
    opt = xr.MIDAM([weight], torch_loss, learning_rate=0.2, momentum=0.5, weight_decay=0.1)
    for _ in range(2):
        weight.grad = torch.tensor(grad)
        for name, g in zip(("a", "b", "alpha"), aux_grad):
            getattr(torch_loss, name).grad = torch.tensor(g)
        opt.step()
    np.testing.assert_allclose(weight.detach().numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(torch_loss.alpha.item(), want_aux.alpha, rtol=1e-12)

    with jax.enable_x64(True):  # restores the session's setting afterwards
        jax_loss = xj.MIDAM_softmax_pooling_loss(4, dtype="float64")
        tx = xj.MIDAM(loss_fn=jax_loss, learning_rate=0.2, momentum=0.5, weight_decay=0.1)
        params = {"w": jnp.asarray(start), "loss": jax_loss.init_params()}
        grads = {"w": jnp.asarray(grad), "loss": xrisk.AUCMParams(*map(jnp.asarray, aux_grad))}
        opt_state = tx.init(params)
        for _ in range(2):
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        np.testing.assert_allclose(np.asarray(params["w"]), want, rtol=1e-12)
        np.testing.assert_allclose(float(params["loss"].alpha), want_aux.alpha, rtol=1e-12)

    tf_loss = xt.MIDAM_softmax_pooling_loss(4, dtype="float64")
    variable = tf.Variable(start)
    keras_opt = xt.MIDAM(loss_fn=tf_loss, learning_rate=0.2, momentum=0.5, weight_decay=0.1)
    pairs = [(tf.constant(grad), variable),
             *((tf.constant(g), getattr(tf_loss, n)) for n, g in zip(("a", "b", "alpha"),
                                                                    aux_grad))]
    for _ in range(2):
        keras_opt.apply_gradients(pairs)
    np.testing.assert_allclose(variable.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(float(tf_loss.alpha), want_aux.alpha, rtol=1e-12)


def test_midam_refuses_a_loss_without_ascent_auxiliary():
    with pytest.raises(TypeError, match=r"MIDAM: loss_fn is APLoss.*expected a min-max loss"):
        xrisk.MIDAM(xrisk.APLoss(4), learning_rate=0.1)


# --------------------------------------------------------------------------- bad inputs

@pytest.mark.parametrize(("change", "match"), [
    ({"mask": np.ones((2, 3), dtype=np.int64)}, r"instances sizes differ.*expected.*Fix"),
    ({"mask": np.array([[1, 2], [1, 1]])}, r"mask must be 0 or 1; received \[2\].*Fix"),
    ({"labels": np.array([1, 3])}, r"labels must be 0 or 1; received \[3\].*Fix"),
    ({"index": np.array([0, 5])}, r"index values \[5\] are outside \[0, bag count=3\).*Fix"),
    ({"scores": np.array([[0.0, np.nan], [1.0, 1.0]])}, r"non-finite values.*Fix"),
])
def test_bad_inputs_raise_and_leave_the_state(change, match):
    import xrisk.torch as xr

    loss_fn = xr.MIDAM_softmax_pooling_loss(3, dtype="float64")
    before = loss_fn.export_state()
    inputs = {"scores": np.zeros((2, 2)), "labels": np.array([1, 0]), "index": np.array([0, 1])}
    inputs.update(change)
    tensors = {k: torch.as_tensor(v) for k, v in inputs.items()}
    with pytest.raises(ValueError, match=match):
        loss_fn(**tensors)
    for name, value in loss_fn.export_state().items():
        np.testing.assert_array_equal(value, before[name])


@pytest.mark.parametrize(("call", "match"), [
    (lambda: xrisk.MIDAM_softmax_pooling_loss(0), r"num_samples=0; expected an integer >= 1"),
    (lambda: xrisk.MIDAM_softmax_pooling_loss(3, tau=0.0), r"tau=0.0; expected.*> 0"),
    (lambda: xrisk.MIDAM_attention_pooling_loss(3, gamma=1.5), r"gamma=1.5; expected"),
    (lambda: xrisk.MIDAMLoss("max", num_samples=3), r"mode='max'; expected one of.*Fix"),
])
def test_bad_hyper_parameters_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name", ["MIDAM_softmax_pooling_loss", "MIDAM_attention_pooling_loss",
                                  "EntLossClassification"])
def test_a_bad_traced_batch_returns_nan_and_writes_nothing(name):
    """Under jax.jit the checks run in the graph: an index outside the table or a label of 2
    gives NaN and leaves every row as it was (no clamped or wrapped write)."""
    import jax
    import jax.numpy as jnp

    definition = xrisk.LOSSES[name](3)
    state = definition.init(xp=jnp, dtype=jnp.float32)
    params = definition.init_params(xp=jnp, dtype=jnp.float32)
    scores = jnp.ones((2, 2))
    if name == "EntLossClassification":
        batches = [{"logits": scores, "index": jnp.array([0, 3])}]
    else:
        extra = {"attention": scores} if "attention" in name else {}
        batches = [{"scores": scores, **extra, "labels": jnp.array([1, 0]),
                    "index": jnp.array([0, 3])},
                   {"scores": scores, **extra, "labels": jnp.array([1, 2]),
                    "index": jnp.array([0, 1])}]
    step = jax.jit(lambda s, b: definition.apply(s, **b, params=params))
    for batch in batches:
        loss, new = step(state, batch)
        assert np.isnan(float(loss))
        for field in state._fields:
            np.testing.assert_array_equal(np.asarray(getattr(new, field)),
                                          np.asarray(getattr(state, field)))


@pytest.mark.parametrize("name", ["MIDAM_softmax_pooling_loss", "MIDAM_attention_pooling_loss",
                                  "EntLossClassification"])
@pytest.mark.parametrize("gamma", [0.5, 1.0])
def test_no_overflow_or_log_zero_even_in_unused_branches(name, gamma):
    """Rows revisited with far lower scores, and positions without any instance: every exp
    and log runs on a safe operand (jit-safe code computes both sides of a where)."""
    import warnings

    definition = xrisk.LOSSES[name](4, gamma=gamma)
    state = definition.init(xp=xp, dtype=xp.float64)
    params = definition.init_params(xp=xp, dtype=xp.float64)
    mask = np.array([[1, 0], [0, 0], [1, 1]])
    index = np.array([0, 0, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for scale in (500.0, -500.0, 500.0):
            scores = np.full((3, 2), scale) + np.arange(6).reshape(3, 2)
            if name == "EntLossClassification":
                inputs = [scores, index]
            else:
                extra = [scores] if "attention" in name else []
                inputs = [scores, *extra, np.array([1, 0, 1]), index]
            loss, state = definition.apply(state, *inputs, mask=mask, params=params)
            assert np.isfinite(loss) and all(np.isfinite(v).all() for v in state)
