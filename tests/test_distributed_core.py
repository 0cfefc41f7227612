"""The framework-free parts of data parallelism: gather plans, compact tables, shards.

The compact step (the loss on a table of the batch's rows, written back) must equal the step
on the full table for every registered loss, with duplicate keys; shard exports reassemble
into the single-process export.
"""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xrisk
from tests._distributed import loss_names, make_plan, score_names
from xrisk import distributed


def _scores(features, w, link):
    z = np.asarray(features) @ w
    return 1 / (1 + np.exp(-z)) if link == "sigmoid" else z


def _numpy_batch(plan, part):
    scores = score_names(plan.definition)
    return {k: (_scores(v, plan.w0, plan.link) if k in scores else v)
            for k, v in part.items()}


@given(st.lists(st.integers(0, 6), min_size=0, max_size=12))
def test_compact_keys_renumber_by_order(keys):
    keys = np.asarray(keys, dtype=np.int64)
    slots, positions = distributed.compact_keys(keys, xp=xp)
    distinct = np.unique(keys)
    np.testing.assert_array_equal(positions, np.searchsorted(distinct, keys))
    np.testing.assert_array_equal(slots[: distinct.size], distinct)
    assert (slots[distinct.size:] == -1).all()


@pytest.mark.parametrize("name", loss_names())
def test_compact_step_equals_full_step(name):
    """apply_compact + write-back equals apply on the full table, step after step."""
    plan = make_plan(name)
    definition = plan.definition
    full = definition.init(xp=xp, dtype=xp.float64)
    sharded = {k: np.array(v, copy=True) for k, v in full._asdict().items()}
    params = definition.params_type(**{k: np.asarray(v) for k, v in plan.params0.items()})
    tables = definition.state_tables()
    for step in range(len(plan.parts)):
        batch = _numpy_batch(plan, plan.global_batch(step))
        want, full = definition.apply(full, **batch, params=params)

        def fetch(table, slots):
            return np.take(sharded[table], np.maximum(slots, 0), axis=0)

        globals_ = {k: sharded[k] for k in tables if not distributed.sharded(definition, k)}
        got, compact, batch_plan = distributed.apply_compact(definition, batch, fetch, globals_,
                                                             params)
        for field, table in tables.items():
            new = np.asarray(getattr(compact, field))
            if not distributed.sharded(definition, field):
                sharded[field] = new
                continue
            slots = batch_plan.slots[table.keys]
            used = slots >= 0
            sharded[field][slots[used]] = new[used]
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
        for field, value in full._asdict().items():
            np.testing.assert_allclose(sharded[field], value, rtol=1e-13, atol=1e-15,
                                       err_msg=f"{name}.{field} step {step}")


def test_bad_key_leaves_compact_state_unchanged():
    loss_fn = xrisk.APLoss(num_samples=4)
    state = loss_fn.init(xp=xp, dtype=xp.float64)
    batch = {"scores": np.array([0.9, 0.2]), "labels": np.array([1, 0]),
             "index": np.array([1, 4])}
    with pytest.raises(ValueError, match=r"index.*\[4\]"):
        distributed.apply_compact(loss_fn, batch, lambda n, s: state.u[np.maximum(s, 0)], {})


@pytest.mark.parametrize("world", [1, 2, 3])
def test_shard_exports_reassemble(world):
    loss_fn = xrisk.tpAUC_KL_Loss(num_samples=7)
    rng = np.random.default_rng(world)
    export = {"u": rng.normal(size=(7, 2)), "w": rng.normal(size=2)}
    shards = [distributed.split_export(loss_fn, export, r, world) for r in range(world)]
    assert [s["u"].shape[0] for s in shards] == [distributed.local_size(7, r, world)
                                                for r in range(world)]
    back = distributed.assemble_shards(loss_fn, shards[::-1])
    np.testing.assert_array_equal(back["u"], export["u"])
    np.testing.assert_array_equal(back["w"], export["w"])


def test_assemble_rejects_missing_rank():
    loss_fn = xrisk.APLoss(num_samples=5)
    export = {"u": np.zeros((5, 2))}
    shards = [distributed.split_export(loss_fn, export, r, 3) for r in (0, 2)]
    with pytest.raises(ValueError, match=r"ranks \[0, 2\].*Fix"):
        distributed.assemble_shards(loss_fn, shards)


def test_gather_plan_follows_declarations():
    plan = distributed.gather_plan(xrisk.APLoss(num_samples=3))
    assert plan == ("batch", ("scores", "labels", "index"), ("scores",), ())
    with pytest.raises(TypeError, match="expected an xrisk loss"):
        distributed.gather_plan(object())


def test_exchanged_bytes_counts_the_gather_and_the_rows():
    part = {"scores": np.zeros(32, np.float32), "labels": np.zeros(32, np.int64),
            "index": np.zeros(32, np.int64)}
    loss_fn = xrisk.APLoss(num_samples=10**9)
    replicated = distributed.exchanged_bytes(loss_fn, part, 2, sharded=False)
    assert replicated == {"gather": 32 * (4 + 8 + 8)}
    # Sharded: 64 keys of the global batch, rows of 2 float32, ring all-reduce over 2 ranks.
    assert distributed.exchanged_bytes(loss_fn, part, 2, sharded=True)["rows"] == 64 * 8
