"""The framework-free parts of data parallelism: gather plans, compact tables, shards.

The compact step (the loss on a table of the batch's rows, written back) must equal the step
on the full table for every registered loss, with duplicate keys; shard exports reassemble
into the single-process export.
"""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import xrisk
from tests import _distributed as harness
from tests._cases import CASES, binary_batch, multilabel_batch
from tests._distributed import index_keys, loss_names, make_plan, score_names
from tests._ranking_cases import ranking_batch
from xrisk import distributed
from xrisk._apply import row_keys
from xrisk.losses import Sharding


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


@pytest.mark.parametrize("framework", ["torch", "jax", "jax jit", "tensorflow"])
@given(keys=st.lists(st.integers(0, 4) | st.sampled_from([2**24, 2**24 + 1, 2**53, 2**53 + 1,
                                                          2**62 + 1]),
                     min_size=1, max_size=10))
@example(keys=[2**53 + 1, 3, 2**53, 3])  # merged by a float64 comparison
def test_compact_keys_are_exact_for_any_key_on_every_backend(framework, keys):
    """The renumbering compares the integers themselves (the one grouping of duplicate keys):
    keys one apart beyond float64's exact integers (2**53, 2**53 + 1) stay distinct, on
    every backend and under jax.jit."""
    import jax

    from tests._frameworks import convert_index
    from xrisk.backends import get_backend

    keys = np.asarray(keys, dtype=np.int64)
    name, _, mode = framework.partition(" ")
    backend = get_backend(name)
    with jax.enable_x64(True):
        index = convert_index(name, keys)
        run = (jax.jit(lambda k: distributed.compact_keys(k, xp=backend.namespace))
               if mode else lambda k: distributed.compact_keys(k, xp=backend.namespace))
        slots, positions = (backend.to_numpy(v) for v in run(index))
    distinct = np.unique(keys)
    np.testing.assert_array_equal(positions, np.searchsorted(distinct, keys))
    np.testing.assert_array_equal(slots[: distinct.size], distinct)
    assert (slots[distinct.size:] == -1).all()


def test_compact_keys_build_nothing_quadratic():
    """O(m log m): traced by JAX, no intermediate holds m x m entries (the renumbering once
    compared every pair of keys in float64)."""
    import jax
    import jax.numpy as jnp
    from jax.extend import core as jax_core

    def equations(jaxpr):
        for eqn in jaxpr.eqns:
            yield eqn
            for param in eqn.params.values():
                inner = getattr(param, "jaxpr", param)
                if isinstance(inner, jax_core.Jaxpr):
                    yield from equations(inner)

    m = 11
    jaxpr = jax.make_jaxpr(lambda k: distributed.compact_keys(k, xp=jnp))(jnp.arange(m) % 4)
    sizes = [int(np.prod(v.aval.shape)) for eqn in equations(jaxpr.jaxpr) for v in eqn.outvars]
    assert max(sizes) <= m, max(sizes)


#: The sampler that feeds each family of the distributed plans (the others: their drawer).
FEEDS = {binary_batch: "DualSampler", multilabel_batch: "TriSampler",
         ranking_batch: "TriSampler"}


@pytest.mark.parametrize("name", loss_names())
def test_plans_are_sampler_shards_with_repeated_keys(name):
    """Every rank's part comes from the loss's sampler sharded as in training, and the keys
    of every sharded table repeat within a rank and across ranks."""
    plan = make_plan(name)
    assert plan.feed == FEEDS.get(CASES[name].batch, "drawer")
    steps, world = len(plan.parts), len(plan.parts[0])
    if plan.feed == "TriSampler":
        ranking = CASES[name].batch is ranking_batch
        sampler = harness.ranking_sampler(0) if ranking else harness.multilabel_sampler(0)
        for r in range(world):
            shard = sampler.shard(r, world)
            for t in range(steps):
                batch = shard.batch(t % len(shard), epoch=t // len(shard))
                if ranking:
                    batch = tuple(shard.ranking_inputs(*batch)[k] for k in ("interaction",
                                                                            "query"))
                part = plan.parts[t][r]
                got = (part["interaction"], part.get("query", batch[1])) if ranking else (
                    part["index"], part["task"])
                for mine, theirs in zip(got, batch, strict=True):
                    np.testing.assert_array_equal(mine, theirs)
    spaces = row_keys(plan.definition)
    if not spaces:
        return
    keys = [[index_keys(plan, t, r) for r in range(world)] for t in range(steps)]
    within = {s for t in range(steps) for r in range(world) for s in spaces
              if np.unique(keys[t][r][s]).size < keys[t][r][s].size}
    # TriSampler's ranking batches hold distinct queries: only interactions (padded
    # positives) repeat within a rank, and a key meets the other rank in another step.
    assert within, f"no key of {sorted(spaces)} repeats within a rank"
    later = plan.feed == "TriSampler" and CASES[name].batch is ranking_batch
    across = {s for t in range(steps) for u in range(steps) for s in spaces
              if (u != t if later else u == t)
              and np.intersect1d(keys[t][0][s], keys[u][1][s]).size}
    assert across == set(spaces), f"keys repeat across ranks only in {across}"


@pytest.mark.parametrize("name", loss_names())
def test_compact_step_equals_full_step(name):
    """apply_compact + write-back equals apply on the full table, step after step; the
    sharded tables are kept in their stored layout (one row per key of their row space)."""
    plan = make_plan(name)
    definition = plan.definition
    full = definition.init(xp=xp, dtype=xp.float64)
    tables = definition.state_tables()
    stored = {k: (distributed.key_rows(definition, k, v).copy()
                  if distributed.sharded(definition, k) else np.array(v, copy=True))
              for k, v in full._asdict().items()}
    params = definition.params_type(**{k: np.asarray(v) for k, v in plan.params0.items()})
    for step in range(len(plan.parts)):
        batch = _numpy_batch(plan, plan.global_batch(step))
        want, full = definition.apply(full, **batch, params=params)

        def fetch(table, slots):
            return np.take(stored[table], np.maximum(slots, 0), axis=0)

        globals_ = {k: stored[k] for k in tables if not distributed.sharded(definition, k)}
        got, compact, batch_plan = distributed.apply_compact(definition, batch, fetch, globals_,
                                                             params)
        for field in tables:
            new = np.asarray(getattr(compact, field))
            if not distributed.sharded(definition, field):
                stored[field] = new
                continue
            slots = batch_plan.slots[distributed.row_space(definition, field)]
            used = slots >= 0
            stored[field][slots[used]] = new[used]
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
        for field, value in full._asdict().items():
            mine = (distributed.table_rows(definition, field, stored[field])
                    if distributed.sharded(definition, field) else stored[field])
            np.testing.assert_allclose(mine, value, rtol=1e-13, atol=1e-15,
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


@pytest.mark.parametrize("world", [1, 2, 3])
def test_derived_tables_shard_by_their_inner_key(world):
    """The multi-label (label, sample) table is sharded by sample: a shard holds, for each of
    its samples, the rows of every label; the per-label global entries stay whole."""
    loss_fn = xrisk.MultiLabelpAUCLoss(3, num_samples=7, mode="SOTAs")
    assert distributed.keyed_tables(loss_fn) == {"sample": ("u",)}
    assert distributed.stored_row(loss_fn, "u") == (3, 2)
    rng = np.random.default_rng(world)
    export = {"u": rng.normal(size=(21, 2)), "w": rng.normal(size=(3, 2))}
    shards = [distributed.split_export(loss_fn, export, r, world) for r in range(world)]
    by_label = export["u"].reshape(3, 7, 2)
    for r, shard in enumerate(shards):
        np.testing.assert_array_equal(shard["u"], by_label[:, r::world].swapaxes(0, 1))
        np.testing.assert_array_equal(shard["w"], export["w"])
    back = distributed.assemble_shards(loss_fn, shards[::-1])
    np.testing.assert_array_equal(back["u"], export["u"])
    np.testing.assert_array_equal(back["w"], export["w"])


def test_resized_follows_the_sharding_declaration():
    """The compact step's loss: the multi-label loss with the compact sample count (the
    argument its Sharding declaration names), built once per size; a loss without derived
    keys is itself; a derived key whose size no constructor argument sets is refused when
    the class is defined."""
    loss_fn = xrisk.meanAveragePrecisionLoss(2, num_samples=9, gamma=0.5)
    small = distributed.resized(loss_fn, {"sample": 3})
    assert small.config() == {**loss_fn.config(), "num_samples": 3}
    assert small.state_shapes() == {"u": (6, 2)}
    assert distributed.resized(loss_fn, {"sample": 3}) is small
    plain = xrisk.APLoss(9)
    assert distributed.resized(plain, {"sample": 3}) is plain
    assert not hasattr(plain, "resized") and not hasattr(plain, "derived_keys")

    for sizes in ({}, {"sample": "num_rows"}):
        with pytest.raises(TypeError, match=r"Unsized.*label_sample.*'sample'.*Fix"):
            class Unsized(xrisk.meanAveragePrecisionLoss):
                sharding = Sharding(derived={"label_sample": ("label", "sample")},
                                    sizes=sizes)


@pytest.mark.parametrize("name", loss_names())
def test_every_table_addressed_by_an_index_is_sharded(name):
    """Tables keyed by the space of a required index input, or derived from one, are sharded;
    the rest (global entries, per-label rows) are replicated."""
    definition = make_plan(name).definition
    derived = definition.sharding.derived
    indexed = {s.keys for s in definition.inputs() if s.kind == "index" and not s.optional}
    for field, table in definition.state_tables().items():
        space = derived[table.keys][1] if table.keys in derived else table.keys
        assert distributed.sharded(definition, field) == (space in indexed), field


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
    # Multi-label (3 labels): a stored row holds the 3 labels' rows of one sample.
    part["scores"] = np.zeros((32, 3), np.float32)
    part["labels"] = np.zeros((32, 3), np.float32)
    mean_ap = xrisk.meanAveragePrecisionLoss(3, num_samples=10**6)
    assert distributed.exchanged_bytes(mean_ap, part, 2, sharded=True)["rows"] == 64 * 3 * 8
