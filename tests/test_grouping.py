"""The one grouping of duplicate keys (:mod:`xrisk._grouping`) against a plain numpy oracle.

Every backend (numpy, array-api-strict, torch, JAX with and without x64, TensorFlow) gives the
oracle's groups, pooled sums, means, maxima, log-mean-exps, one-row-per-key rows and last
positions, in float64, for any keys (also beyond float32's exact integers) and any mask; the
same under ``jax.jit`` and under ``tf.function`` with a batch of run-time size; and the
grouping builds nothing of size B x B (O(B log B): one sort of the keys, no argsort).
"""

from __future__ import annotations

import array_api_strict
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st
from jax.extend import core as jax_core
from numpy.testing import assert_allclose, assert_array_equal

from tests._frameworks import convert_index
from xrisk._grouping import group_keys, last_occurrence
from xrisk.backends import get_backend

FRAMEWORKS = ("numpy", "array_api_strict", "torch", "jax", "jax without x64", "tensorflow")

#: Keys that float32 cannot tell apart (2**24, 2**24 + 1) and the int32 extremes.
_KEYS = st.one_of(st.integers(0, 6), st.sampled_from([2**24, 2**24 + 1, 2**31 - 2, 2**31 - 1]))


def _convert(name, values):
    """Float64 ``values`` as an array of backend ``name``."""
    values = np.asarray(values)
    if name == "array_api_strict":
        return array_api_strict.asarray(values)
    if name == "torch":
        import torch

        return torch.as_tensor(values)
    if name == "jax":
        return jnp.asarray(values)
    if name == "tensorflow":
        return tf.constant(values)
    return values


def _index(name, keys):
    if name == "array_api_strict":
        return array_api_strict.asarray(np.asarray(keys, dtype=np.int64))
    return convert_index(name, keys)


class _Oracle:
    """The documented groups, by hand: kept positions by key; the others join the first kept
    position's key (position 0's when nothing is kept)."""

    def __init__(self, keys, keep):
        self.keep = keep
        first = int(np.flatnonzero(keep)[0]) if keep.any() else 0
        self.rows = np.where(keep, keys, keys[first])
        self.members = [np.flatnonzero(keep & (self.rows == r)) for r in self.rows]
        self.count = np.array([len(m) for m in self.members], dtype=np.float64)

    def reduce(self, values, reduction, empty):
        return np.stack([reduction(values[m]) if len(m) else empty(values[i])
                         for i, m in enumerate(self.members)])


@pytest.mark.parametrize("framework", FRAMEWORKS)
@given(data=st.data())
def test_groups_and_reductions_match_the_oracle(framework, data):
    # Three batch sizes: eager JAX compiles every operation anew for every shape.
    size = data.draw(st.sampled_from([1, 5, 12]))
    keys = np.asarray(data.draw(st.lists(_KEYS, min_size=size, max_size=size)), dtype=np.int64)
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    everything = data.draw(st.booleans())  # no mask given: every position kept
    if everything:
        keep = np.ones(size, dtype=bool)
    # XLA flushes subnormals to 0: none in float32 either (JAX without x64 computes in it)
    floats = st.floats(-30, 30, width=32, allow_subnormal=False)
    values = np.asarray(data.draw(st.lists(floats, min_size=size, max_size=size)))
    wide = np.asarray(data.draw(st.lists(st.lists(floats, min_size=2, max_size=2),
                                         min_size=size, max_size=size)))
    name, _, mode = framework.partition(" ")
    if mode:  # JAX without x64 computes in float32: so does the oracle
        values, wide = values.astype(np.float32), wide.astype(np.float32)
    backend = get_backend(name)
    xp = backend.namespace
    oracle = _Oracle(keys, keep)
    with jax.enable_x64(mode != "without x64"):
        groups = group_keys(_index(name, keys), None if everything else _convert(name, keep),
                            backend=backend, xp=xp,
                            dtype=xp.float64 if mode != "without x64" else xp.float32,
                            host=keys if everything and name == "numpy" else None)
        got = {
            "rows": groups.rows, "count": groups.count, "ids": groups.ids,
            "sum": groups.sum(_convert(name, values)),
            "mean": groups.mean(_convert(name, wide)),
            "max": groups.max(_convert(name, values), -100.0),
            "log_mean_exp": groups.log_mean_exp(_convert(name, values)),
            "spread": groups.spread(_convert(name, wide), _convert(name, -wide)),
            "same": groups.same(xp.float64 if mode != "without x64" else xp.float32),
            "last": last_occurrence(_index(name, keys), backend=backend, xp=xp),
        }
        got = {k: backend.to_numpy(v) for k, v in got.items()}
    exact = mode != "without x64"  # float32 sums round
    close = {"rtol": 1e-13 if exact else 1e-5, "atol": 1e-12 if exact else 1e-4}
    assert_array_equal(got["rows"], oracle.rows)
    assert_array_equal(got["count"], oracle.count)
    # ids: equal exactly where rows are equal, all in [0, B)
    assert_array_equal(got["ids"][:, None] == got["ids"][None, :],
                       oracle.rows[:, None] == oracle.rows[None, :])
    assert got["ids"].min() >= 0 and got["ids"].max() < size
    assert_array_equal(got["same"], oracle.rows[:, None] == oracle.rows[None, :])
    assert_allclose(got["sum"], oracle.reduce(values, np.sum, lambda v: 0.0), **close)
    count = np.maximum(oracle.count, 1)[:, None]
    assert_allclose(got["mean"], oracle.reduce(wide, lambda v: v.sum(0), np.zeros_like) / count,
                    **close)
    assert_array_equal(got["max"], oracle.reduce(values, np.max, lambda v: -100.0))
    lme = oracle.reduce(values, lambda v: np.log(np.mean(np.exp(v - v.max()))) + v.max(),
                        lambda v: np.nan)
    assert_allclose(got["log_mean_exp"], np.where(oracle.count > 0, lme, values), **close)
    last_kept = oracle.reduce(np.arange(size), np.max, lambda v: -1)
    assert_array_equal(got["spread"], np.where(last_kept[:, None] >= 0,
                                               wide[np.maximum(last_kept, 0)], -wide))
    assert_array_equal(got["last"], [np.flatnonzero(keys == k).max() for k in keys])
    # one group, one value: every member of a group reads the same result (spread and
    # log_mean_exp: where the group has a kept member; else each position keeps its own)
    for i in range(size):
        for j in range(size):
            if oracle.rows[i] == oracle.rows[j]:
                for field in ("sum", "mean", "max", "log_mean_exp", "spread"):
                    if field not in ("spread", "log_mean_exp") or oracle.count[i] > 0:
                        assert_array_equal(got[field][i], got[field][j], err_msg=field)


@given(keys=st.lists(st.integers(0, 5), min_size=1, max_size=10), data=st.data())
def test_compiled_groups_equal_the_eager_ones(keys, data):
    """``jax.jit`` and ``tf.function`` (batch of run-time size: a run-time number of
    segments) give the eager numpy groups."""
    keys = np.asarray(keys, dtype=np.int64)
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=len(keys),
                                         max_size=len(keys))))
    values = np.arange(len(keys), dtype=np.float64) * 1.5 - 2.0

    def summary(name, keys, keep, values):
        backend = get_backend(name)
        xp = backend.namespace
        groups = group_keys(keys, keep, backend=backend, xp=xp, dtype=xp.float64)
        return (groups.rows, groups.count, groups.mean(values), groups.max(values, -1e3),
                groups.spread(values, -values))

    want = summary("numpy", keys, keep, values)
    with jax.enable_x64(True):
        got_jax = jax.jit(lambda k, m, v: summary("jax", k, m, v))(
            jnp.asarray(keys), jnp.asarray(keep), jnp.asarray(values))
    spec = [tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.bool),
            tf.TensorSpec([None], tf.float64)]
    got_tf = tf.function(lambda k, m, v: summary("tensorflow", k, m, v),
                         input_signature=spec)(keys, keep, values)
    for got in (got_jax, got_tf):
        for a, b in zip(got, want, strict=True):
            assert_array_equal(np.asarray(a), b)


def _equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", param)
            if isinstance(inner, jax_core.Jaxpr):
                yield from _equations(inner)


def test_grouping_builds_nothing_of_size_b_squared_and_sorts_the_keys_alone():
    """O(B log B): no intermediate has B x B elements (the old key test built several), and
    the one sort takes the keys alone (an argsort sorts (key, position) pairs, several
    times slower on XLA's CPU backend)."""
    batch = 64
    backend = get_backend("jax")

    def step(keys, keep, values):
        groups = group_keys(keys, keep, backend=backend, xp=jnp, dtype=jnp.float32)
        return groups.mean(values), groups.max(values, -1.0), groups.spread(values, values)

    jaxpr = jax.make_jaxpr(step)(jnp.arange(batch), jnp.ones(batch, bool), jnp.ones(batch))
    equations = list(_equations(jaxpr.jaxpr))
    sizes = [int(np.prod(v.aval.shape)) for eqn in equations for v in eqn.outvars]
    assert max(sizes) <= batch, max(sizes)
    sorts = [eqn for eqn in equations if eqn.primitive.name == "sort"]
    assert len(sorts) == 1 and len(sorts[0].invars) == 1, sorts


# --------------------------------------------------------------------------- the losses on it

#: Every loss that pools rows through the one grouping, beyond ranking, AP and the pAUC family
#: (tests/test_ranking_losses.py, tests/test_step_cost.py): name -> (options, inputs), the
#: inputs drawn for a batch of ``size`` from ``rng`` with the dataset ``index``.
def _views(rng, size, index):
    return {"view1": rng.normal(size=(size, 4)), "view2": rng.normal(size=(size, 4)),
            "index": index}


def _bimodal(rng, size, index):
    return {"image": rng.normal(size=(size, 4)), "text": rng.normal(size=(size, 4)),
            "index": index}


def _classes(rng, size, index):
    # a row without a counted column is left out: the absent positions join the anchor's group
    return {"logits": rng.normal(size=(size, 3)) * 3, "index": index,
            "mask": rng.random((size, 3)) < 0.6}


def _bags(rng, size, index, attention=False):
    inputs = {"scores": rng.normal(size=(size, 3)), "labels": rng.integers(0, 2, size),
              "index": index, "mask": rng.random((size, 3)) < 0.6}
    if attention:
        inputs["attention"] = rng.normal(size=(size, 3))
    return inputs


_POOLING = {
    "GlobalContrastiveLoss": ({}, _views),
    "GlobalContrastiveLoss individual": ({"temperature_scheme": "individual"}, _views),
    "BimodalContrastiveLoss": ({}, _bimodal),
    "BimodalContrastiveLoss individual": ({"temperature_scheme": "individual"}, _bimodal),
    "InfoNCELoss": (None, _views),
    "EntLossClassification SOX": ({"mode": "SOX", "gamma": 0.5}, _classes),
    "EntLossClassification SCENT": ({"mode": "SCENT"}, _classes),
    "MIDAM_softmax_pooling_loss": ({"gamma": 0.7}, _bags),
    "MIDAM_attention_pooling_loss": ({"gamma": 0.7},
                                     lambda rng, size, index: _bags(rng, size, index, True)),
}


def _pooling_loss(case, num_samples, dtype):
    import xrisk.torch as xr

    options, _ = _POOLING[case]
    build = getattr(xr, case.split()[0])
    if options is None:  # no state
        return build(dtype=dtype)
    return build(num_samples, dtype=dtype, **options)


@pytest.mark.parametrize("case", list(_POOLING))
@given(size=st.integers(1, 10), repeats=st.booleans(), seed=st.integers(0, 2**16),
       dtype=st.sampled_from(["float32", "float64"]))
def test_losses_group_host_and_device_ranked_keys_alike(case, size, repeats, seed, dtype):
    """The contrastive, extreme-classification and MIDAM losses group an eager CPU batch's
    index by the host values the checks read (ranked by numpy), a batch the host cannot
    read on the device: loss, gradients and new state are the same bit for bit, with
    repeated indices or not, from a state that earlier steps wrote."""
    from unittest import mock

    import torch

    from xrisk._adapter_support import METADATA_KEY

    rng = np.random.default_rng(seed)
    num_samples = 40
    make = _POOLING[case][1]
    warm = _pooling_loss(case, num_samples, dtype)
    for _ in range(2):  # a start state inside every declared domain: training wrote it
        warm(**{k: torch.as_tensor(v) for k, v in
                make(rng, 6, rng.choice(num_samples, 6, replace=False)).items()})
    start = warm.export_state()
    index = rng.choice(5 if repeats else num_samples, size, replace=repeats)
    inputs = make(rng, size, index)
    runs = []
    for on_device in (False, True):
        loss_fn = _pooling_loss(case, num_samples, dtype)
        if start:
            loss_fn.load_state(start)
        tensors = {k: torch.tensor(v, dtype=getattr(torch, dtype), requires_grad=True)
                   if v.dtype.kind == "f" else torch.as_tensor(v) for k, v in inputs.items()}
        # Values the host cannot read (as on an accelerator): checks and ranks in the graph.
        patch = (mock.patch.object(get_backend("torch"), "inspectable", return_value=False)
                 if on_device else mock.patch("xrisk._grouping.np.sort", wraps=np.sort))
        with patch as sort:
            loss = loss_fn(**tensors)
        assert on_device or sort.called  # the host path ranked the index
        floats = [t for t in tensors.values() if t.requires_grad]
        grads = torch.autograd.grad(loss, floats)
        runs.append((loss.detach().numpy(), [g.numpy() for g in grads],
                     loss_fn.export_state()))
    (loss_a, grads_a, state_a), (loss_b, grads_b, state_b) = runs
    assert_array_equal(loss_a, loss_b)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert_array_equal(a, b)
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        if key != METADATA_KEY:
            assert_array_equal(state_a[key], state_b[key], err_msg=key)


@pytest.mark.parametrize("case", list(_POOLING))
def test_no_loss_compares_keys_pairwise(case):
    """Design §3.1: a loss pools duplicate keys through the one grouping, not a B x B key
    test of its own. Traced by JAX, no B x B intermediate comes from an integer array (the
    keys), and the losses without pair terms (extreme classification, MIDAM) build nothing
    of size B x B at all. The contrastive negatives mask is the grouping's ``same``, a float
    test of the group ids."""
    from xrisk import LOSSES
    from xrisk.backends import get_backend as backend_named

    batch = 7  # unlike every other dimension of the inputs
    options, make = _POOLING[case]
    name = case.split()[0]
    definition = (LOSSES[name]() if options is None else LOSSES[name](40, **options))
    xp = backend_named("jax").namespace
    with jax.enable_x64(True):
        state = definition.init(xp=xp, dtype=jnp.float64)
        params = definition.init_params(xp=xp) if definition.auxiliaries() else None
        inputs = {k: jnp.asarray(v) for k, v in
                  make(np.random.default_rng(0), batch, np.arange(batch)).items()}

        def step(inputs):
            kwargs = {} if params is None else {"params": params}
            return definition.apply(state, **inputs, **kwargs)

        jaxpr = jax.make_jaxpr(step)(inputs)
    square = batch * batch
    pairwise = [eqn for eqn in _equations(jaxpr.jaxpr)
                if any(int(np.prod(v.aval.shape)) == square for v in eqn.outvars)]
    from_keys = [eqn for eqn in pairwise
                 if any(jnp.issubdtype(v.aval.dtype, jnp.integer) and v.aval.shape
                        for v in eqn.invars)]
    assert not from_keys, from_keys
    if name.startswith(("EntLoss", "MIDAM")):
        assert not pairwise, pairwise


def test_write_rows_resolves_duplicates_without_a_b_squared_search():
    """The duplicate rule of the general write (rows of one key not known to be equal) takes
    its last positions from the grouping: nothing of size B x B, one sort of the keys alone,
    and the rule's table."""
    from xrisk._state import write_rows

    batch, backend = 9, get_backend("jax")
    table = jnp.zeros(5)  # unlike B x B = 81
    index = jnp.asarray([3, 1, 3, 0, 1, 3, 4, 0, 2])
    rows = jnp.arange(batch, dtype=table.dtype)

    def write(table, index, rows):
        return write_rows(backend, table, index, rows, xp=jnp)

    equations = list(_equations(jax.make_jaxpr(write)(table, index, rows).jaxpr))
    sizes = [int(np.prod(v.aval.shape)) for eqn in equations for v in eqn.outvars]
    assert max(sizes) <= batch, max(sizes)
    sorts = [eqn for eqn in equations if eqn.primitive.name == "sort"]
    assert len(sorts) == 1 and len(sorts[0].invars) == 1, sorts
    want = np.zeros(5)
    for position, key in enumerate(np.asarray(index)):
        want[key] = position  # the last position wins
    assert_array_equal(np.asarray(jax.jit(write)(table, index, rows)), want)


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax", "tensorflow"])
@given(keys=st.lists(_KEYS, min_size=1, max_size=12), data=st.data())
def test_host_ranked_kept_groups_equal_the_device_ones(framework, keys, data):
    """Keys read on the host (an eager CPU batch) with a mask the host reads: group_keys
    computes the anchor, rows, ids and counts by numpy, which give the arrays of the path
    that ranks on the host and masks on the device (a mask the host cannot read), dtypes
    included: with nothing kept, with everything kept, from a host reading narrower than the
    device's keys (an int32 index is cast to int64 after its check) and from the reading of
    an input that the keys shift (the multi-label losses' per-label index)."""
    from unittest import mock

    keys = np.asarray(keys, dtype=np.int64)
    size = len(keys)
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    narrow = data.draw(st.sampled_from([np.int64, np.int32]))
    backend = get_backend(framework)
    xp = backend.namespace
    # the keys' own values, and those of an input the keys shift (all of them negative)
    for shift in (0, int(keys.max()) + 1):
        host = (keys - shift).astype(narrow)
        with jax.enable_x64(True):
            index, mask = _index(framework, keys), _convert(framework, keep)
            with mock.patch.object(backend, "inspectable", return_value=False):
                device = group_keys(index, mask, backend=backend, xp=xp, dtype=xp.float32,
                                    host=host)
            hosted = group_keys(index, mask, backend=backend, xp=xp, dtype=xp.float32,
                                host=host)
            for field in ("rows", "anchor", "ids", "count", "keep"):
                want, got = getattr(device, field), getattr(hosted, field)
                assert got.dtype == want.dtype, field
                assert_array_equal(backend.to_numpy(got), backend.to_numpy(want),
                                   err_msg=f"{field} (host = keys - {shift})")
        assert (hosted.segments, hosted.all_kept) == (device.segments, device.all_kept) == (
            size, False)


@pytest.mark.parametrize("everything", [True, False])
def test_log_mean_exp_gives_every_member_of_a_group_the_same_bits_on_tensorflow(everything):
    """TensorFlow's CPU ``log`` rounds by position (a vectorised body, a scalar tail): equal
    inputs at positions 0 and 4 may come out a unit in the last place apart. The members of
    a group read one value all the same (the duplicate rule writes one row per key)."""
    backend = get_backend("tensorflow")
    rng = np.random.default_rng(0)
    keys = np.zeros(9, dtype=np.int64)  # one group of 9: members in the body and the tail
    for _ in range(50):
        values = rng.normal(size=9)
        keep = None if everything else tf.constant(rng.random(9) < 0.8)
        groups = group_keys(tf.constant(keys), keep, backend=backend,
                            xp=backend.namespace, dtype=tf.float64)
        pooled = groups.log_mean_exp(tf.constant(values)).numpy()
        members = pooled if everything else pooled[groups.count.numpy() > 0]
        assert len({v.tobytes() for v in members}) == 1, pooled
