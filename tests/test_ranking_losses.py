"""Ranking losses (ListwiseCELoss, NDCGLoss: SONG and K-SONG) and the ranking TriSampler.

- the gamma = 1 oracle: with every item of each query in the batch, SONG's gradient is the
  gradient of its objective (finite differences), padded positives included;
- SONG and K-SONG ('theo' with sigmoid_alpha = 1, and 'prac') agree with a line-by-line
  transcription of LibAUC 2.0.1's NDCGLoss: u, lambda_q, s_q, loss and gradient;
- ListwiseCE keeps every stored u on one scale across steps whose batch-global maximum
  changes (LibAUC's shift does not), and equals LibAUC at gamma = 1;
- the ranking TriSampler: LibAUC's dense matrix with 2 or 3 users, rows without a relevance
  column, and ``ranking_inputs`` (interaction ids from the CSR rows, relevance, mask, counts,
  ideal DCG) feeding the losses;
- bad inputs raise naming the value, the expectation and a fix, and leave the state as it
  was; under ``jax.jit`` they give NaN and write nothing.

Cross-backend identity and jit/no-retrace checks run from the cases in tests/_cases.py.
"""

from __future__ import annotations

import functools
import math

import array_api_compat.numpy as np_xp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
import xrisk.torch as xt
from tests import _reference_ranking
from xrisk.metrics import ideal_dcg
from xrisk.samplers import TriSampler


def _torch_step(definition, state, scores, **inputs):
    """One step through the core on torch float64: (loss, d loss / d scores, new state)."""
    s = torch.tensor(scores, dtype=torch.float64, requires_grad=True)
    st = definition.state_type(*(torch.tensor(np.asarray(v)) for v in state))
    named = {k: torch.tensor(v) for k, v in inputs.items() if v is not None}
    loss, new = definition.apply(st, s, **named)
    loss.backward()
    return loss.item(), s.grad.numpy(), type(new)(*(v.detach().numpy() for v in new))


# -- SONG: the gamma = 1 oracle ----------------------------------------------------------------
@pytest.mark.parametrize("surrogate", ["squared_hinge", "logistic"])
def test_song_gradient_at_gamma_one_is_the_objective_gradient(surrogate):
    """Every item of each query in the batch, gamma0 = 1: the gradient is that of SONG's
    objective F (central differences), with a per-query candidate count N_q and a query with
    fewer relevant items than positive slots (its padded slot repeats an item, masked)."""
    rng = np.random.default_rng(0)
    x0, x1 = rng.normal(size=7), rng.normal(size=6)  # item scores of query 0 and query 1
    relevance = np.array([[3.0, 1.0, 2.0], [2.0, 4.0, 0.0]])
    num_relevant, idcg = np.array([3.0, 2.0]), np.array([9.1, 17.3])

    def batch_scores(a, b):  # query 0: items 0-2 relevant; query 1: items 0-1, slot 2 pads
        return np.stack([a, np.concatenate([b[:2], b[:1], b[2:]])])

    def objective(a, b):
        return (_reference_ranking.song_objective(
                    a[None], relevance[:1], num_relevant[:1], idcg[:1], num_items=7,
                    surrogate_name=surrogate)
                + _reference_ranking.song_objective(
                    b[None], relevance[1:, :2], num_relevant[1:], idcg[1:], num_items=6,
                    surrogate_name=surrogate)) / 2

    definition = xrisk.NDCGLoss(5, 2, None, gamma0=1.0, surrogate=surrogate)
    _, grad, _ = _torch_step(
        definition, definition.init(xp=np_xp, dtype=np_xp.float64), batch_scores(x0, x1),
        relevance=relevance, query=np.array([0, 1]), interaction=np.array([[0, 1, 2], [3, 4, 3]]),
        num_relevant=num_relevant, ideal_dcg=idcg, mask=np.array([[1, 1, 1], [1, 1, 0]]),
        num_candidates=np.array([7.0, 6.0]))
    assert grad[1, 2] == 0.0  # the padded slot is no term and no competitor
    got = np.concatenate([grad[0], grad[1, :2], grad[1, 3:]])
    flat = np.concatenate([x0, x1])
    numeric = np.zeros_like(flat)
    for k in range(flat.size):
        bump = np.zeros_like(flat)
        bump[k] = 1e-6
        up, down = flat + bump, flat - bump
        numeric[k] = (objective(up[:7], up[7:]) - objective(down[:7], down[7:])) / 2e-6
    assert_allclose(got, numeric, rtol=1e-6, atol=1e-9)


def test_song_batch_of_two_queries_is_the_mean_of_its_rows():
    """Rows with a padded positive and without: the batch loss and gradient are the mean
    of the one-row steps (the padded slot is no competitor: the padded row equals a row
    without that column)."""
    rng = np.random.default_rng(1)
    definition = xrisk.NDCGLoss(6, 2, 50, gamma0=1.0)
    state = definition.init(xp=np_xp, dtype=np_xp.float64)
    scores = rng.normal(size=(2, 5))
    common = {"relevance": np.array([[2.0, 1.0], [3.0, 3.0]]), "query": np.array([0, 1]),
              "interaction": np.array([[0, 1], [2, 2]]), "num_relevant": np.array([2.0, 1.0]),
              "ideal_dcg": np.array([4.0, 7.0]), "mask": np.array([[1, 1], [1, 0]])}
    loss, grad, _ = _torch_step(definition, state, scores, **common)
    one = {k: v[1:2] for k, v in common.items()}
    alone, alone_grad, _ = _torch_step(
        definition, state, np.delete(scores[1:2], 1, axis=1),
        **{**one, "relevance": one["relevance"][:, :1], "interaction": one["interaction"][:, :1],
           "mask": None})
    first, first_grad, _ = _torch_step(definition, state, scores[0:1],
                                       **{k: v[0:1] for k, v in common.items()})
    assert loss == pytest.approx((first + alone) / 2, rel=1e-12)
    assert_allclose(grad[1, [0, 2, 3, 4]], alone_grad[0] / 2, rtol=1e-12)
    assert_allclose(grad[0], first_grad[0] / 2, rtol=1e-12)


# -- K-SONG and SONG against LibAUC 2.0.1 (transcribed) -----------------------------------------
def _libauc_ndcg(state, predictions, rating, user_id, num_pos_items, ideal, user_item_id, *,
                 num_pos, num_item, gamma0, gamma1, eta0, margin, topk, topk_version, tau_1,
                 tau_2, sigmoid_alpha):
    """LibAUC 2.0.1 NDCGLoss.forward (squared hinge), transcribed in torch: (loss, new state)."""
    u, lambda_q, s_q = (state[k].clone() for k in ("u", "lambda_q", "s_q"))
    ratings = rating[:, :num_pos]
    batch_size = ratings.shape[0]
    predictions_expand = torch.repeat_interleave(predictions, num_pos, dim=0)
    predictions_pos = torch.cat(torch.chunk(predictions[:, :num_pos], batch_size, dim=0),
                                dim=1).permute(1, 0)
    g = torch.mean(torch.clamp(margin - (predictions_pos - predictions_expand), min=0) ** 2,
                   dim=-1).reshape(batch_size, num_pos)
    big_g = 2.0 ** ratings - 1
    ids = user_item_id[:, :num_pos].reshape(-1)
    new_u = (1 - gamma0) * u[ids] + gamma0 * g.clone().detach().reshape(-1)
    u[ids] = new_u
    g_u = new_u.reshape(batch_size, num_pos)
    nabla = (big_g * num_item) / ((torch.log2(1 + num_item * g_u)) ** 2
                                  * (1 + num_item * g_u) * np.log(2))
    if topk > 0:
        pos_diff = predictions[:, :num_pos].detach() - lambda_q[user_id][:, None]
        diff = predictions.detach() - lambda_q[user_id][:, None]
        grad_lambda = topk / num_item + tau_2 * lambda_q[user_id] - torch.mean(
            torch.sigmoid(diff / tau_1), dim=-1)
        lambda_q[user_id] = lambda_q[user_id] - eta0 * grad_lambda
        nabla = nabla * torch.sigmoid(pos_diff * sigmoid_alpha)
        if topk_version == "theo":
            d_psi = torch.sigmoid(pos_diff * sigmoid_alpha) * (
                1 - torch.sigmoid(pos_diff * sigmoid_alpha))
            f_g_u = -big_g / torch.log2(1 + num_item * g_u)
            temp = torch.sigmoid(diff / tau_1) * (1 - torch.sigmoid(diff / tau_1)) / tau_1
            hess = tau_2 + torch.mean(temp, dim=1)
            s_q[user_id] = gamma1 * hess + (1 - gamma1) * s_q[user_id]
            hessian_term = torch.mean(temp * predictions, dim=1) / s_q[user_id]
            loss = (num_pos_items * torch.mean(
                nabla * g + d_psi * f_g_u * (predictions[:, :num_pos] - hessian_term[:, None]),
                dim=-1) / ideal).mean()
            return loss, {"u": u, "lambda_q": lambda_q, "s_q": s_q}
    loss = (num_pos_items * torch.mean(nabla * g, dim=-1) / ideal).mean()
    return loss, {"u": u, "lambda_q": lambda_q, "s_q": s_q}


@pytest.mark.parametrize(("top_k", "version"), [(None, "theo"), (3, "theo"), (3, "prac")])
def test_ndcg_matches_libauc_transcription_over_steps(top_k, version):
    rng = np.random.default_rng(2)
    queries, positives, negatives, num_items = 3, 2, 4, 30
    hyper = {"gamma0": 0.7, "gamma1": 0.6, "eta0": 0.5, "tau_1": 0.3, "tau_2": 0.01,
             "sigmoid_alpha": 1.0}  # alpha = 1: LibAUC drops the factor alpha of psi'
    definition = xrisk.NDCGLoss(6, 4, num_items, top_k=top_k, top_k_version=version, **hyper)
    state = definition.init(xp=np_xp, dtype=np_xp.float64)
    libauc = {"u": torch.zeros(6, dtype=torch.float64),
              "lambda_q": torch.zeros(4, dtype=torch.float64),
              "s_q": torch.zeros(4, dtype=torch.float64)}
    user = np.array([0, 2, 3])
    interaction = np.array([[0, 1], [2, 3], [4, 5]])  # distinct: LibAUC has no pooling
    for _ in range(3):
        scores = rng.normal(size=(queries, positives + negatives))
        rating = rng.integers(1, 5, size=(queries, positives)).astype(np.float64)
        # Relevant-item counts are whole numbers (their declared domain).
        counts = rng.integers(2, 6, queries).astype(np.float64)
        idcg = rng.uniform(3, 9, queries)
        loss, grad, state = _torch_step(
            definition, state, scores, relevance=rating, query=user, interaction=interaction,
            num_relevant=counts, ideal_dcg=idcg)
        predictions = torch.tensor(scores, requires_grad=True)
        want, libauc = _libauc_ndcg(
            libauc, predictions, torch.tensor(rating), torch.tensor(user), torch.tensor(counts),
            torch.tensor(idcg), torch.tensor(interaction), num_pos=positives,
            num_item=num_items, topk=top_k or -1, topk_version=version, margin=1.0, **hyper)
        want.backward()
        assert loss == pytest.approx(want.item(), rel=1e-12)
        assert_allclose(grad, predictions.grad.numpy(), rtol=1e-10, atol=1e-14)
        assert_allclose(state.u, libauc["u"].numpy(), rtol=1e-12)
        if top_k is not None:
            assert_allclose(state.lambda_q, libauc["lambda_q"].numpy(), rtol=1e-12)
            if version == "theo":  # LibAUC's 'prac' leaves s_q at 0; ours tracks it
                assert_allclose(state.s_q, libauc["s_q"].numpy(), rtol=1e-12)
        for field in state._fields:
            libauc[field] = torch.tensor(np.array(getattr(state, field)))


def test_ksong_theo_uses_the_chain_rule_factor_alpha():
    """With sigmoid_alpha = 2, the implicit-gradient term is alpha x LibAUC's (psi' =
    alpha psi (1 - psi)); the rest of the loss is the same."""
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(2, 5))
    inputs = {"relevance": np.array([[2.0, 1.0], [3.0, 1.0]]), "query": np.array([0, 1]),
              "interaction": np.array([[0, 1], [2, 3]]), "num_relevant": np.array([2.0, 3.0]),
              "ideal_dcg": np.array([4.0, 7.0])}
    parts = {}
    for version in ("theo", "prac"):
        definition = xrisk.NDCGLoss(4, 2, 20, top_k=2, top_k_version=version, sigmoid_alpha=2.0,
                                    tau_1=0.5)
        parts[version] = _torch_step(definition, definition.init(xp=np_xp, dtype=np_xp.float64),
                                     scores, **inputs)[0]
    libauc, _ = _libauc_ndcg(
        {"u": torch.zeros(4, dtype=torch.float64), "lambda_q": torch.zeros(2, dtype=torch.float64),
         "s_q": torch.zeros(2, dtype=torch.float64)},
        torch.tensor(scores), torch.tensor(inputs["relevance"]), torch.tensor(inputs["query"]),
        torch.tensor(inputs["num_relevant"]), torch.tensor(inputs["ideal_dcg"]),
        torch.tensor(inputs["interaction"]), num_pos=2, num_item=20, gamma0=0.9, gamma1=0.9,
        eta0=0.01, margin=1.0, topk=2, topk_version="theo", tau_1=0.5, tau_2=1e-4,
        sigmoid_alpha=2.0)
    implicit_ours = parts["theo"] - parts["prac"]
    implicit_libauc = libauc.item() - parts["prac"]
    assert abs(implicit_ours) > 1e-6
    assert implicit_ours == pytest.approx(2.0 * implicit_libauc, rel=1e-10)


def test_ksong_repeated_query_pools_lambda_and_s():
    """Two rows of one query make one update of lambda_q and s_q, from the mean of their
    estimates (LibAUC: one of the two rows' writes wins)."""
    definition = xrisk.NDCGLoss(4, 3, 10, top_k=1, eta0=0.5, tau_1=0.5, gamma1=0.5)
    state = definition.init(xp=np_xp, dtype=np_xp.float64)
    scores = np.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.5]])
    inputs = {"relevance": np.ones((2, 1)), "interaction": np.array([[0], [1]]),
              "num_relevant": np.ones(2), "ideal_dcg": np.ones(2)}
    _, _, pooled = _torch_step(definition, state, scores, query=np.array([1, 1]), **inputs)
    rows = [_torch_step(definition, state, scores[r:r + 1], query=np.array([1]),
                        **{k: v[r:r + 1] for k, v in inputs.items()})[2] for r in (0, 1)]
    for field in ("lambda_q", "s_q"):
        want = (getattr(rows[0], field)[1] + getattr(rows[1], field)[1]) / 2
        assert getattr(pooled, field)[1] == pytest.approx(want, rel=1e-12)
        assert getattr(pooled, field)[[0, 2]].tolist() == [0.0, 0.0]


# -- ListwiseCE: one scale across steps ---------------------------------------------------------
def _libauc_listwise(u, predictions, ids, *, num_pos, gamma, eps=1e-10):
    """LibAUC 2.0.1 ListwiseCELoss.forward, transcribed: (loss, new u)."""
    u = u.clone()
    batch_size = predictions.shape[0]
    neg = torch.repeat_interleave(predictions[:, num_pos:], num_pos, dim=0)
    pos = torch.cat(torch.chunk(predictions[:, :num_pos], batch_size, dim=0),
                    dim=1).permute(1, 0)
    margin = neg - pos
    exp_margin = torch.exp(margin - torch.max(margin)).detach()
    flat = ids[:, :num_pos].reshape(-1)
    new = (1 - gamma) * u[flat] + gamma * torch.mean(exp_margin, dim=1)
    u[flat] = new
    loss = torch.sum(margin * exp_margin / (new[:, None] + eps)) / batch_size
    return loss, u


def test_listwise_ce_keeps_one_scale_when_the_batch_maximum_changes():
    gamma = 0.5
    definition = xrisk.ListwiseCELoss(3, gamma=gamma)
    state = definition.init(xp=np_xp, dtype=np_xp.float64)
    libauc_u = torch.zeros(3, dtype=torch.float64)
    query_a = np.array([[1.0, 0.2, 0.5]])  # interaction 0: one positive, two negatives
    steps = [
        (query_a, np.array([[0]])),
        # query A's scores shift by a constant (its margins are unchanged) and a query with
        # large margins joins the batch: LibAUC's batch-global shift moves by ~8.
        (np.concatenate([query_a + 3.0, [[-4.0, 4.0, 4.5]]]), np.array([[0], [1]])),
    ]
    truth = 0.0  # the moving average of mean_j exp(h_j - h_i) of interaction 0, unshifted
    for scores, ids in steps:
        fresh = np.mean(np.exp(scores[0, 1:] - scores[0, 0]))
        truth = (1 - gamma) * truth + gamma * fresh
        loss, grad, state = _torch_step(definition, state, scores, interaction=ids)
        _, libauc_u = _libauc_listwise(libauc_u, torch.tensor(scores), torch.tensor(ids),
                                       num_pos=1, gamma=gamma)
    stored = state.u[0, 0] * math.exp(state.u[0, 1])
    assert stored == pytest.approx(truth, rel=1e-12)
    # LibAUC's u for interaction 0 mixes e^{-0.5}-scaled and e^{-8.5}-scaled terms.
    libauc_unshifted = libauc_u[0].item()
    assert abs(libauc_unshifted * math.exp(8.5) - truth) > 0.1 * truth
    # The weights of query A in the last step are exp(d_j) / u with the true u.
    weights = np.exp(steps[1][0][0, 1:] - steps[1][0][0, 0]) / truth / 2  # 2 queries
    assert_allclose(grad[0, 1:], weights, rtol=1e-12)


def test_listwise_ce_equals_libauc_at_gamma_one():
    rng = np.random.default_rng(4)
    definition = xrisk.ListwiseCELoss(8, gamma=1.0)
    state = definition.init(xp=np_xp, dtype=np_xp.float64)
    scores = rng.normal(size=(3, 5)) * 4
    ids = np.array([[0, 1], [2, 3], [4, 5]])
    loss, grad, _ = _torch_step(definition, state, scores, interaction=ids)
    predictions = torch.tensor(scores, requires_grad=True)
    want, _ = _libauc_listwise(torch.zeros(8, dtype=torch.float64), predictions,
                               torch.tensor(ids), num_pos=2, gamma=1.0, eps=0.0)
    want.backward()
    assert loss == pytest.approx(want.item(), rel=1e-12)
    assert_allclose(grad, predictions.grad.numpy(), rtol=1e-12)


def test_listwise_ce_large_margins_stay_finite_in_float32():
    definition = xrisk.ListwiseCELoss(2, gamma=0.9)
    state = definition.init(xp=np_xp, dtype=np_xp.float32)
    for shift in (0.0, 200.0):  # exp(200) overflows float32
        scores = np.array([[0.0, 100.0 + shift, -50.0]], dtype=np.float32)
        loss, state = definition.apply(state, scores, np.array([[1]]))
        assert np.isfinite(loss) and np.isfinite(state.u).all()


# -- the ranking TriSampler ----------------------------------------------------------------------
def test_tri_ranking_reads_libauc_dense_matrices_with_two_or_three_users():
    for users in (2, 3):
        matrix = np.zeros((9, users))  # LibAUC's (num_items, num_users) relevance matrix
        matrix[[0, 2, 5], 0] = [4.0, 1.0, 2.0]
        matrix[[1, 2], 1] = [3.0, 5.0]
        if users == 3:
            matrix[[7, 8], 2] = [1.0, 2.0]
        item, user = np.nonzero(matrix)
        rows = np.column_stack([user, item, matrix[item, user]])
        options = {"num_sampled_tasks": 2, "num_pos": 2, "mode": "ranking", "seed": 5}
        dense = TriSampler(matrix, 4, layout="items_by_queries", **options)
        assert (dense.num_items, dense.num_queries) == (9, users)
        from_rows = TriSampler(rows, 4, num_items=9, **options)
        for position in range(len(dense)):
            for a, b in zip(dense.batch(position), from_rows.batch(position), strict=True):
                np.testing.assert_array_equal(a, b)
        # Read as rows by default, the matrix is not (query, item[, relevance]) triples: the
        # error says how to declare the layout.
        with pytest.raises(ValueError, match="layout='items_by_queries'"):
            TriSampler(matrix, 4, **options)


def test_tri_ranking_rows_without_relevance_sample_their_own_items():
    rows = np.array([[0, 3], [0, 5], [0, 7], [1, 2], [1, 6]])
    sampler = TriSampler(rows, 4, num_sampled_tasks=2, num_pos=2, mode="ranking",
                         num_items=10, seed=0)
    rated = {0: {3, 5, 7}, 1: {2, 6}}
    for epoch in range(5):
        items, queries = sampler.batch(0, epoch=epoch)
        for row, query in zip(items, queries, strict=True):
            assert set(row[:2].tolist()) <= rated[int(query)]
            assert not set(row[2:].tolist()) & rated[int(query)]


def test_tri_ranking_inputs_feed_the_losses():
    data = np.array([[0, 3, 5.0], [0, 7, 4.0], [0, 1, 0.0], [1, 2, 1.0], [2, 1, 2.0],
                     [2, 5, 3.0], [2, 6, 1.0], [2, 8, 2.0]])
    sampler = TriSampler(data, 5, num_sampled_tasks=3, num_pos=3, mode="ranking",
                         num_items=10, seed=1)
    assert sampler.num_interactions == 7  # relevance > 0
    items, queries = sampler.batch(0)
    inputs = sampler.ranking_inputs(items, queries)
    relevant = {(int(q), int(i)): r for q, i, r in data if r > 0}
    ids = {}
    for row, query in enumerate(queries):
        count = sum(1 for q, _ in relevant if q == query)
        assert inputs["mask"][row].sum() == min(count, 3)
        assert inputs["num_relevant"][row] == count
        ratings = [r for (q, _), r in relevant.items() if q == query]
        assert inputs["ideal_dcg"][row] == pytest.approx(ideal_dcg(np.array([ratings]))[0])
        for slot in range(3):
            key = (int(query), int(items[row, slot]))
            assert inputs["relevance"][row, slot] == relevant[key]
            assert ids.setdefault(key, inputs["interaction"][row, slot]) == \
                inputs["interaction"][row, slot]
    assert len(set(ids.values())) == len(ids)  # one id per (query, item) pair
    assert all(0 <= v < sampler.num_interactions for v in ids.values())
    top = sampler.ranking_inputs(items, queries, ideal_k=1)["ideal_dcg"]
    assert_allclose(top, [2.0 ** max(r for (q, _), r in relevant.items() if q == query) - 1
                          for query in queries])
    scores = np.random.default_rng(0).normal(size=items.shape)
    ndcg = xrisk.NDCGLoss(sampler.num_interactions, sampler.num_queries, sampler.num_items)
    listwise = xrisk.ListwiseCELoss(sampler.num_interactions)
    loss, _ = ndcg.apply(ndcg.init(xp=np_xp, dtype=np_xp.float64), scores, **inputs)
    value, _ = listwise.apply(listwise.init(xp=np_xp, dtype=np_xp.float64), scores,
                              interaction=inputs["interaction"], mask=inputs["mask"])
    assert np.isfinite(loss) and np.isfinite(value)


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_float64_sampler_data_meets_float32_scores(framework):
    """The sampler's counts and ideal DCGs are float64 numpy; float32 scores take them in every
    framework (TensorFlow refused the mixed product inside the loss) with the float32 result
    of float32 data."""
    import jax.numpy as jnp
    import tensorflow as tf

    data = np.array([[0, 3, 5.0], [0, 7, 4.0], [1, 2, 1.0], [2, 1, 2.0], [2, 5, 3.0]])
    sampler = TriSampler(data, 5, num_sampled_tasks=3, num_pos=2, mode="ranking",
                         num_items=10, seed=1)
    items, queries = sampler.batch(0)
    inputs = sampler.ranking_inputs(items, queries)
    assert inputs["ideal_dcg"].dtype == np.float64
    scores = np.random.default_rng(0).normal(size=items.shape).astype(np.float32)
    convert = {"torch": torch.as_tensor, "tensorflow": tf.constant, "jax": jnp.asarray}[framework]
    module = {"torch": xt, "tensorflow": __import__("xrisk.tensorflow").tensorflow,
              "jax": __import__("xrisk.jax").jax}[framework]
    results = []
    for cast in (np.float64, np.float32):
        loss_fn = module.NDCGLoss(sampler.num_interactions, sampler.num_queries,
                                  sampler.num_items, top_k=2, dtype="float32")
        batch = {k: convert(v.astype(cast) if v.dtype == np.float64 else v)
                 for k, v in inputs.items()}
        if framework == "jax":
            loss, _ = loss_fn.apply(loss_fn.init(), convert(scores), **batch)
        else:
            loss = loss_fn(convert(scores), **batch)
        results.append(np.asarray(loss))
    assert results[0].dtype == np.float32
    assert_allclose(results[0], results[1], rtol=1e-6)


def test_tri_ranking_inputs_bad_batch():
    data = np.array([[0, 3, 5.0], [0, 7, 4.0], [1, 2, 1.0]])
    sampler = TriSampler(data, 3, num_sampled_tasks=2, num_pos=1, mode="ranking",
                         num_items=10, seed=1)
    items, queries = sampler.batch(0)
    bad = items.copy()
    bad[0, 0] = 9  # not relevant to its query
    with pytest.raises(ValueError, match=r"item 9 at positive slot 0 is not a relevant item"):
        sampler.ranking_inputs(bad, queries)
    with pytest.raises(ValueError, match=r"expected integer arrays of shapes \(Q, 3\)"):
        sampler.ranking_inputs(items[:, :2], queries)
    with pytest.raises(ValueError, match="layout"):
        TriSampler(data, 3, num_pos=1, mode="ranking", layout="dense")


# -- bad inputs ----------------------------------------------------------------------------------
def _ndcg_inputs():
    return {"relevance": torch.tensor([[2.0, 1.0]]), "query": torch.tensor([1]),
            "interaction": torch.tensor([[0, 3]]), "num_relevant": torch.tensor([2.0]),
            "ideal_dcg": torch.tensor([3.0])}


@pytest.mark.parametrize(("change", "match"), [
    ({"interaction": torch.tensor([[0, 7]])},
     r"interaction values \[7\] are outside \[0, interaction count=4\).*Fix:"),
    ({"query": torch.tensor([5])}, r"query values \[5\] are outside \[0, query count=2\)"),
    ({"relevance": torch.tensor([[2.0, -1.0]])}, r"negative values \[-1(\.0)?\].*Fix:"),
    ({"mask": torch.tensor([[1, 2]])}, r"mask must be 0 or 1; received \[2\].*Fix:"),
    ({"ideal_dcg": torch.tensor([float("nan")])}, r"non-finite values \[nan\]"),
    ({"num_candidates": torch.tensor([9.0])}, r"num_candidates was given.*num_items=20.*Fix:"),
])
def test_ndcg_bad_input_raises_and_keeps_the_state(change, match):
    loss_fn = xt.NDCGLoss(4, 2, 20, top_k=1, dtype="float64")
    loss_fn(torch.rand(1, 4, dtype=torch.float64), **_ndcg_inputs())
    before = {k: v.clone() for k, v in loss_fn.state_dict().items()}
    with pytest.raises(ValueError, match=match):
        loss_fn(torch.rand(1, 4, dtype=torch.float64), **{**_ndcg_inputs(), **change})
    for key, value in loss_fn.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_ranking_losses_refuse_rows_without_negatives_and_missing_counts():
    listwise = xt.ListwiseCELoss(4, dtype="float64")
    with pytest.raises(ValueError, match=r"scores has 2 columns per query and the positives'"
                                         r" inputs have 2; expected .*at least one negative"):
        listwise(torch.rand(1, 2, dtype=torch.float64), torch.tensor([[0, 1]]))
    assert not listwise.u.any()
    per_query = xt.NDCGLoss(4, 2, None, dtype="float64")
    with pytest.raises(ValueError, match="num_candidates is None"):
        per_query(torch.rand(1, 4, dtype=torch.float64), **_ndcg_inputs())
    with pytest.raises(ValueError, match=r"top_k=0; expected an integer >= 1.*topk=-1"):
        xrisk.NDCGLoss(4, 2, 20, top_k=0)
    with pytest.raises(ValueError, match=r"top_k_version='fast'; expected one of"):
        xrisk.NDCGLoss(4, 2, 20, top_k=2, top_k_version="fast")


def test_bad_interaction_under_jax_jit_gives_nan_and_writes_nothing():
    import jax
    import jax.numpy as jnp

    import xrisk.jax as xj

    loss_fn = xj.NDCGLoss(4, 2, 20, top_k=2, dtype="float64")
    state = loss_fn.init()
    step = jax.jit(loss_fn.apply)
    inputs = {k: jnp.asarray(v.numpy()) for k, v in _ndcg_inputs().items()}
    scores = jnp.asarray(np.random.default_rng(0).uniform(size=(1, 4)))
    good, state = step(state, scores, **inputs)
    assert np.isfinite(float(good))
    kept = {k: np.asarray(v).copy() for k, v in state._asdict().items()}
    bad, new = step(state, scores, **{**inputs, "interaction": jnp.array([[0, 9]])})
    assert np.isnan(float(bad))
    for field, value in kept.items():
        np.testing.assert_array_equal(np.asarray(getattr(new, field)), value)


# -- keys ranked on the host or on the device: one grouping ---------------------------------
@settings(max_examples=max(20, settings().max_examples), deadline=None)
@given(case=st.sampled_from(["listwise", "song", "ksong-theo", "ksong-prac"]),
       dtypes=st.sampled_from([(torch.float32, torch.float32), (torch.float64, torch.float32),
                               (torch.float64, torch.float64)]),
       shape=st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),
       repeats=st.booleans(), seed=st.integers(0, 2**16))
def test_host_ranked_keys_change_no_value(case, dtypes, shape, repeats, seed):
    """An eager CPU batch ranks its interactions (and queries) on the host, where the checks
    read them (xrisk._grouping.group_keys(host=...)); a batch whose values the host cannot
    read ranks them on the device. Loss, gradient and new state are the same bit for bit,
    with repeated keys or not, and the rows of masked positions keep their stored values
    exactly, in a float64 state under float32 scores too."""
    from unittest import mock

    from xrisk.backends import get_backend

    state_dtype, score_dtype = dtypes
    queries, positives, negatives = shape
    rng = np.random.default_rng(seed)
    num_interactions, num_queries = 30, 8
    interaction = rng.choice(num_interactions if not repeats else 4, (queries, positives),
                             replace=repeats)
    mask = rng.uniform(size=(queries, positives)) < 0.7
    inputs = {"interaction": torch.from_numpy(interaction), "mask": torch.from_numpy(mask)}
    if case == "listwise":
        build = functools.partial(xt.ListwiseCELoss, num_interactions)
    else:
        top_k = None if case == "song" else 2
        build = functools.partial(xt.NDCGLoss, num_interactions, num_queries, 50, top_k=top_k,
                                  top_k_version=case.partition("-")[2] or "theo")
        inputs.update(
            relevance=torch.from_numpy(rng.integers(0, 5, (queries, positives)).astype(
                np.float64)).to(score_dtype),
            query=torch.from_numpy(rng.choice(num_queries, queries, replace=repeats)),
            num_relevant=torch.full((queries,), float(positives), dtype=score_dtype),
            ideal_dcg=torch.from_numpy(rng.uniform(1.0, 5.0, queries)).to(score_dtype))
    start = {name: value if name.startswith("__")  # the export's metadata, kept
             else rng.uniform(0.5, 2.0, np.shape(value)).astype(value.dtype)
             for name, value in build(dtype=state_dtype).export_state().items()}
    scores = rng.normal(size=(queries, positives + negatives))
    runs = []
    for on_device in (False, True):
        loss_fn = build(dtype=state_dtype)
        loss_fn.load_state(start)
        s = torch.tensor(scores, dtype=score_dtype, requires_grad=True)
        # Values the host cannot read (as on an accelerator): checks and ranks in the graph.
        patch = (mock.patch.object(get_backend("torch"), "inspectable", return_value=False)
                 if on_device else mock.patch("xrisk._grouping.np.sort", wraps=np.sort))
        with patch as sort:
            loss = loss_fn(s, **inputs)
        assert on_device or sort.called  # the host path ranked the keys
        (grad,) = torch.autograd.grad(loss, s)
        runs.append((loss.detach().numpy(), grad.numpy(), loss_fn.export_state()))
    (loss_a, grad_a, state_a), (loss_b, grad_b, state_b) = runs
    np.testing.assert_array_equal(loss_a, loss_b)
    np.testing.assert_array_equal(grad_a, grad_b)
    for name in state_a:
        np.testing.assert_array_equal(state_a[name], state_b[name], err_msg=name)
    untouched = np.ones(num_interactions, bool)
    untouched[interaction[mask]] = False
    np.testing.assert_array_equal(state_a["u"][untouched], start["u"][untouched])
