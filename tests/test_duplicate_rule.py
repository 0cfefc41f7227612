"""The duplicate-index rule belongs to xrisk, not to whichever scatter a backend happens to use.

Documented rule (:func:`xrisk._state.write_rows`): when one index appears several times in a
write, the row at its **last** position wins. Every CPU scatter of numpy, torch, JAX and
TensorFlow happens to let the last write win too, so a suite running only those scatters
cannot tell whether xrisk applies the rule or merely inherits it. GPU scatters give no order
at all. Here the numpy backend's scatter is replaced by an adversarial one that applies the
writes in *reverse* order (the first write wins): the documented results must not change.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import array_api_compat.numpy as xp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

import xrisk
from tests import _reference
from xrisk._state import write_rows
from xrisk.backends import get_backend
from xrisk.losses import Input, LossDefinition, StateTable, Step
from xrisk.losses.pauc import PAUC_MODES

NUMPY = get_backend("numpy")


def _first_write_wins(table: Any, index: Any, rows: Any) -> Any:
    """A scatter as legal as any GPU's: duplicates resolved in the opposite order."""
    out = np.array(table, copy=True)
    index, rows = np.asarray(index), np.asarray(rows, dtype=out.dtype)
    for position in reversed(range(index.shape[0])):  # the first position is written last
        out[index[position]] = rows[position]
    return out


@pytest.fixture
def first_wins(monkeypatch):
    monkeypatch.setattr(NUMPY, "write_rows", _first_write_wins)
    return NUMPY


def _last_wins_by_hand(table, index, rows):
    out = np.array(table, copy=True)
    for position, key in enumerate(np.asarray(index).tolist()):
        out[key] = rows[position]
    return out


def test_the_adversarial_scatter_really_lets_the_first_write_win(first_wins):
    table = np.zeros((4, 2))
    rows = np.arange(6.0).reshape(3, 2)
    raw = first_wins.write_rows(table, np.array([2, 0, 2]), rows)
    assert_array_equal(raw[2], rows[0])  # the backend alone would break the rule


def test_write_rows_keeps_the_last_position_under_a_first_wins_scatter(first_wins):
    table = np.full((6, 2), -1.0)
    index = np.array([2, 0, 2, 5, 2])
    rows = np.arange(10.0).reshape(5, 2)
    out = write_rows(first_wins, table, index, rows, xp=xp)
    assert_array_equal(out[2], rows[4])
    assert_array_equal(out[0], rows[1])
    assert_array_equal(out[5], rows[3])
    assert_array_equal(out[[1, 3, 4]], table[[1, 3, 4]])  # rows outside the index untouched
    assert_array_equal(table, np.full((6, 2), -1.0))  # the input table is not modified


@given(index=st.lists(st.integers(0, 4), min_size=1, max_size=12), width=st.integers(1, 3))
def test_write_rows_rule_holds_for_any_index(index, width):
    table = np.full((5, width), -1.0)
    rows = np.arange(len(index) * width, dtype=np.float64).reshape(len(index), width)
    index = np.asarray(index)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(NUMPY, "write_rows", _first_write_wins)
        out = write_rows(NUMPY, table, index, rows, xp=xp)
    assert_array_equal(out, _last_wins_by_hand(table, index, rows))


def test_step_write_rows_with_a_2d_index_flattens_row_major(first_wins):
    """Ranking state is keyed by (queries, positives) interaction ids: the last position in
    row-major order wins."""
    table = np.zeros(6)
    index = np.array([[2, 0], [2, 5]])
    new = np.array([[10.0, 20.0], [30.0, 40.0]])
    out = Step(first_wins, xp, None).write_rows(table, index, new)
    assert_array_equal(out, [20.0, 0.0, 30.0, 0.0, 0.0, 40.0])


class _LastState(NamedTuple):
    last: Any  #: (num_samples,) the last score seen for each sample


class _LastScore(LossDefinition):
    """Test loss whose duplicates write *different* rows: each sample keeps its last score."""

    state_type = _LastState

    def __init__(self, num_samples: int) -> None:
        self.num_samples = num_samples

    def inputs(self):
        return (Input("scores", ("batch",), "score"),
                Input("index", ("batch",), "index", keys="sample"))

    def key_spaces(self):
        return {"sample": self.num_samples}

    def state_tables(self):
        return {"last": StateTable("sample")}

    def _loss(self, step, state, params, scores, index):
        new_state = _LastState(step.write_rows(state.last, index, step.stop(scores)))
        return step.xp.sum(scores), new_state


def test_a_loss_writing_different_duplicate_rows_keeps_the_last_one(first_wins):
    definition = _LastScore(4)
    state = definition.init(xp=xp, dtype=xp.float64)
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    _, state = definition.apply(state, scores, np.array([3, 1, 3, 3, 1]))
    assert_array_equal(state.last, [0.0, 0.5, 0.0, 0.4])


def _ap_steps(num_samples, batches, gamma=0.9):
    definition = xrisk.APLoss(num_samples, gamma=gamma)
    state = definition.init(xp=xp, dtype=xp.float64)
    u_all, u_pos = np.zeros(num_samples), np.zeros(num_samples)
    for scores, labels, index in batches:
        _, state = definition.apply(state, scores, labels, index)
        _, _, u_all, u_pos = _reference.ap_step(
            u_all, u_pos, scores, labels, index, gamma=gamma, margin=1.0,
            surrogate_name="squared_hinge", scale=1.0)
        yield np.asarray(state.u), np.stack([u_all, u_pos], axis=1), index, labels


def _duplicate_batches(seed, num_samples=5, batch=8, steps=4):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        labels = rng.integers(0, 2, batch)
        labels[:2] = 1
        index = rng.integers(0, num_samples, batch)
        index[1] = index[0]  # two positives share a dataset index in every batch
        yield rng.uniform(0.05, 0.95, batch), labels, index


@pytest.mark.parametrize("seed", range(4))
def test_ap_state_is_the_documented_table_under_a_first_wins_scatter(monkeypatch, seed):
    """APLoss over several steps with duplicate positives (and indices shared by positives
    and negatives): the state is the reference's table — duplicate positives pool their
    estimates and get one update, rows of negatives are never written — with the adversarial
    scatter exactly as with the ordinary one."""
    ordinary = [u for u, *_ in _ap_steps(5, _duplicate_batches(seed))]
    monkeypatch.setattr(NUMPY, "write_rows", _first_write_wins)
    previous = np.zeros((5, 2))
    steps = list(_ap_steps(5, _duplicate_batches(seed)))
    assert len(steps) == len(ordinary) == 4
    for (got, want, index, labels), plain in zip(steps, ordinary, strict=True):
        assert_allclose(got, want, rtol=1e-12, atol=1e-15)
        assert_array_equal(got, plain)
        untouched = np.setdiff1d(np.arange(5), index[labels == 1])
        assert_array_equal(got[untouched], previous[untouched])
        previous = got


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax", "jax without x64",
                                       "tensorflow"])
@given(keys=st.lists(st.sampled_from([0, 1, 2**24 - 1, 2**24, 2**24 + 1, 2**25 + 3,
                                      2**31 - 2, 2**31 - 1]), min_size=1, max_size=8),
       negatives=st.booleans())
def test_keys_beyond_float32_precision_stay_distinct(framework, keys, negatives):
    """Keys above 2**24 are not exact in float32, and JAX without x64 computes "float64" in
    float32: tables of more than 16.7M rows once merged the keys 2**24 and 2**24 + 1 there
    (two interactions pooled into one state row, a duplicate resolved onto the wrong row).
    The grouping of duplicate keys compares the integers themselves: its groups, its pair
    mask and the rule's last positions are exact for every key."""
    import jax

    from tests._frameworks import convert_index
    from xrisk._grouping import group_keys, last_occurrence

    keys = np.asarray([-1 - k if negatives and i % 2 else k for i, k in enumerate(keys)])
    name, _, mode = framework.partition(" ")
    backend = get_backend(name)
    xp_ = backend.namespace
    with jax.enable_x64(mode != "without x64"):
        index = convert_index(name, keys)
        groups = group_keys(index, backend=backend, xp=xp_, dtype=xp_.float32)
        ids = backend.to_numpy(groups.ids)
        pairs = backend.to_numpy(groups.same(xp_.float32))
        last = backend.to_numpy(last_occurrence(index, backend=backend, xp=xp_))
    same = keys[:, None] == keys[None, :]
    assert_array_equal(ids[:, None] == ids[None, :], same)
    assert_array_equal(pairs, same.astype(np.float32))
    assert_array_equal(last, [np.flatnonzero(keys == k).max() for k in keys])


def _pauc_losses():
    """Every pAUC class (from the registry's modes), alone and per label."""
    classes = list(dict.fromkeys(PAUC_MODES.values()))
    yield from (cls(5) for cls in classes)
    yield from (xrisk.LOSSES["MultiLabelpAUCLoss"](2, 5, mode=cls.modes[0]) for cls in classes)


@pytest.mark.parametrize("definition", list(_pauc_losses()), ids=repr)
def test_pauc_state_does_not_depend_on_the_scatter_order(monkeypatch, definition):
    """The pAUC family writes rows equal for every position of one index (duplicate
    positives pool, negatives repeat their anchor's row), so it skips the O(B^2) search for
    last positions: the table under the adversarial first-wins scatter equals the ordinary
    one over steps with duplicate positives and indices shared by positives and negatives."""
    multi = len(definition.inputs()[0].shape) == 2

    def run():
        state = definition.init(xp=xp, dtype=xp.float64)
        for scores, labels, index in _duplicate_batches(7):
            if multi:
                scores = np.stack([scores, scores[::-1]], axis=1)
                labels = np.stack([labels, labels[::-1]], axis=1)
            _, state = definition.apply(state, scores, labels, index)
            yield {k: np.asarray(v) for k, v in state._asdict().items()}

    ordinary = list(run())
    monkeypatch.setattr(NUMPY, "write_rows", _first_write_wins)
    for got, want in zip(run(), ordinary, strict=True):
        for name in want:
            assert_array_equal(got[name], want[name], err_msg=name)
