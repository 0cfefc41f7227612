"""The two layouts of a batch's pairs: compact on an eager CPU batch, masked elsewhere.

An eager CPU batch, whose labels the input checks read on the host, gives the pairwise losses
their pairs compact (``xrisk.losses._binary.Pairs``): n+ positive rows by n- negative
columns, LibAUC's layout; AP and mean AP compute their per-positive terms for the positives
only (``PositivePicks``): a (B, n+) pair matrix. A traced or device batch gives them masked:
B x B with a mask. Both are the same math; these tests run every such loss both ways on drawn
batches (duplicate indices, one-class batches, missing multi-label entries, inactive labels,
mixed state dtypes) and compare loss, gradient and state over several steps, and check that
the compact layout is the one an eager batch gets.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import xrisk
import xrisk.losses._binary as binary
import xrisk.losses.ap as ap
import xrisk.losses.multilabel as multilabel
import xrisk.tensorflow as xtf
from tests._frameworks import masked_pairs

NUM_SAMPLES = 6  # a small key space: duplicate indices are common
NUM_LABELS = 3
BINARY = {
    "pAUC_CVaR_Loss": {"num_samples": NUM_SAMPLES, "beta": 0.5},
    "pAUC_DRO_Loss": {"num_samples": NUM_SAMPLES, "gamma": 0.7, "lam": 0.5},
    "tpAUC_KL_Loss": {"num_samples": NUM_SAMPLES, "tau": 0.5, "gammas": (0.8, 0.6)},
    "tpAUC_CVaR_Loss": {"num_samples": NUM_SAMPLES, "margin": 1.0},
    "PairwiseAUCLoss": {"surrogate": "squared_hinge"},
    "APLoss": {"num_samples": NUM_SAMPLES, "gamma": 0.7},
}
MULTILABEL = {
    **{f"MultiLabelpAUCLoss {mode}": (xrisk.MultiLabelpAUCLoss, {"mode": mode})
       for mode in ("SOPA", "1w", "2w", "STACO")},
    "meanAveragePrecisionLoss": (xrisk.meanAveragePrecisionLoss, {"gamma": 0.7}),
}


@contextlib.contextmanager
def _pair_shapes(shapes):
    """Record the shape of every pair matrix the surrogate is evaluated on."""
    real = binary.surrogate_loss

    def recording(name, t, **kwargs):
        shapes.append(tuple(t.shape))
        return real(name, t, **kwargs)
    with mock.patch.object(binary, "surrogate_loss", recording), \
            mock.patch.object(ap, "surrogate_loss", recording):
        yield


def _run(definition, batches, state_dtype):
    """(loss, d loss / d scores, state) after each batch, one eager torch float64 run."""
    state = definition.init(xp=xrisk.backends.get_backend("torch").namespace,
                            dtype=state_dtype)
    out = []
    for scores, labels, index, task in batches:
        s = torch.tensor(scores, requires_grad=True)
        extra = () if task is None else (torch.as_tensor(task),)
        loss, state = definition.apply(state, s, torch.as_tensor(labels),
                                       torch.as_tensor(index), *extra)
        loss.backward()
        out.append((float(loss.detach()), s.grad.numpy().copy(),
                    {k: v.detach().numpy().copy() for k, v in state._asdict().items()}))
    return out


def _assert_same_runs(compact, masked):
    for step, ((loss, grad, state), (want, want_grad, want_state)) in enumerate(
            zip(compact, masked, strict=True)):
        assert_allclose(loss, want, rtol=1e-12, atol=1e-15, err_msg=f"loss, step {step}")
        assert_allclose(grad, want_grad, rtol=1e-11, atol=1e-14, err_msg=f"grad, step {step}")
        for field, table in state.items():
            assert table.dtype == want_state[field].dtype
            assert_allclose(table, want_state[field], rtol=1e-12, atol=1e-14,
                            err_msg=f"{field}, step {step}")


@st.composite
def _batches(draw, multilabel):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    size = draw(st.integers(2, 16))
    share = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))  # one-class batches included
    batches = []
    for _ in range(3):
        shape = (size, NUM_LABELS) if multilabel else (size,)
        labels = (rng.random(shape) < share).astype(np.float64)
        if multilabel:
            labels[rng.random(shape) < 0.2] = np.nan  # missing entries
        index = rng.integers(0, NUM_SAMPLES, size)
        task = rng.integers(0, NUM_LABELS, size) if multilabel and rng.random() < 0.5 else None
        batches.append((rng.random(shape), labels if multilabel else labels.astype(np.int64),
                        index, task))
    return batches


@given(batches=_batches(multilabel=False), state_dtype=st.sampled_from(["float64", "float32"]))
def test_compact_pairs_equal_masked_pairs_for_every_binary_pairwise_loss(batches, state_dtype):
    for name, hyper in BINARY.items():
        definition = xrisk.LOSSES[name](**hyper)
        dtype = getattr(torch, state_dtype)
        compact = _run(definition, batches, dtype)
        with masked_pairs():
            masked = _run(definition, batches, dtype)
        _assert_same_runs(compact, masked)


@given(batches=_batches(multilabel=True), name=st.sampled_from(sorted(MULTILABEL)))
def test_compact_pairs_equal_masked_pairs_for_the_multilabel_losses(batches, name):
    build, hyper = MULTILABEL[name]
    definition = build(NUM_LABELS, num_samples=NUM_SAMPLES, **hyper)
    compact = _run(definition, batches, torch.float64)
    with masked_pairs():
        masked = _run(definition, batches, torch.float64)
    _assert_same_runs(compact, masked)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_an_eager_cpu_batch_pairs_only_its_positives_with_its_negatives(name):
    definition = xrisk.LOSSES[name](**BINARY[name])
    labels = np.array([1, 0, 0, 1, 0, 0, 0], dtype=np.int64)
    batch = [(np.linspace(0.1, 0.9, 7), labels, np.arange(7) % NUM_SAMPLES, None)]
    shapes: list[tuple[int, ...]] = []
    with _pair_shapes(shapes):
        _run(definition, batch, torch.float64)
    # n+ x n- (AP: every example x n+), not 7 x 7
    assert shapes == ([(7, 2)] if name == "APLoss" else [(2, 5)])
    shapes.clear()
    with _pair_shapes(shapes), masked_pairs():
        _run(definition, batch, torch.float64)
    assert shapes == [(7, 7)]


def test_mean_ap_picks_each_label_columns_positives():
    definition = xrisk.meanAveragePrecisionLoss(NUM_LABELS, num_samples=NUM_SAMPLES)
    labels = np.array([[1, 0, 1], [0, 1, 0], [0, np.nan, 1], [1, 0, 0]])
    shapes: list[tuple[int, ...]] = []
    with _pair_shapes(shapes):
        _run(definition, [(np.full((4, 3), 0.5), labels, np.arange(4), None)], torch.float64)
    assert shapes == [(4, 2), (4, 1), (4, 2)]
    shapes.clear()  # an inactive label has no positive: every label masked
    with _pair_shapes(shapes):
        _run(definition, [(np.full((4, 3), 0.5), labels, np.arange(4), np.array([0, 0, 2, 2]))],
             torch.float64)
    assert shapes == [(4, 4)] * 3


def test_mean_ap_gathers_every_labels_positives_at_once():
    """One gather of the (1, B * K) scores for all labels' candidates (its gradient one
    scatter), not one per label."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Gathers(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.sources = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ == "index_select":
                self.sources.append(tuple(args[0].shape))
            return func(*args, **(kwargs or {}))

    definition = xrisk.meanAveragePrecisionLoss(NUM_LABELS, num_samples=NUM_SAMPLES)
    labels = np.array([[1, 0, 1], [0, 1, 0], [0, 1, 1], [1, 0, 0]])
    with Gathers() as gathers:
        _run(definition, [(np.full((4, 3), 0.5), labels, np.arange(4), None)], torch.float64)
    assert gathers.sources.count((1, 4 * NUM_LABELS)) == 1, gathers.sources
    assert (1, 4) not in gathers.sources, gathers.sources  # no per-label gather


def test_multilabel_pauc_pairs_each_label_column_compactly_and_skips_inactive_labels():
    definition = xrisk.MultiLabelpAUCLoss(NUM_LABELS, num_samples=NUM_SAMPLES, mode="1w")
    labels = np.array([[1, 0, 1], [0, 1, 0], [0, np.nan, 1], [1, 0, 0], [0, 0, 0]])
    task = np.array([0, 0, 2, 2, 0])  # label 1 inactive: NaN throughout, no pair
    batch = [(np.full((5, 3), 0.5), labels, np.arange(5), task)]
    shapes: list[tuple[int, ...]] = []
    with _pair_shapes(shapes):
        _run(definition, batch, torch.float64)
    # one pair matrix for every label: the 2 + 2 positives of labels 0 and 2, each row
    # against its label's 3 negatives (label 1 has no row)
    assert shapes == [(4, 3)]
    shapes.clear()
    with _pair_shapes(shapes), masked_pairs():
        _run(definition, batch, torch.float64)
    assert shapes == [(3, 5, 5)]  # every label's B x B block, stacked


def _label_by_label(definition, batches, state_dtype):
    """The reference of a multi-label pAUC run: the single-label loss, through its public
    ``apply``, on each active label column's observed rows (index shifted by t *
    num_samples, the label's row of every global entry), the mean over the active labels."""
    inner = definition.inner
    per_label = {name for name, table in inner.state_tables().items() if table.keys is None}
    state = definition.init(xp=xrisk.backends.get_backend("torch").namespace,
                            dtype=state_dtype)
    out = []
    for scores, labels, index, task in batches:
        s = torch.tensor(scores, requires_grad=True)
        active = range(NUM_LABELS) if task is None else sorted(set(task.tolist()))
        tables = dict(state._asdict())
        rows = {name: list(torch.unbind(tables[name])) for name in per_label}
        total = 0 * s.sum()  # a batch without an observed active entry: 0, gradient 0
        for t in active:
            seen = np.flatnonzero(~np.isnan(labels[:, t]))
            if not seen.size:
                continue
            own = inner.state_type(**{name: rows[name][t] if name in per_label else value
                                      for name, value in tables.items()})
            value, new = inner.apply(own, s[torch.as_tensor(seen), t],
                                     torch.as_tensor(labels[seen, t].astype(np.int64)),
                                     torch.as_tensor(index[seen] + t * NUM_SAMPLES))
            for name, entry in new._asdict().items():
                if name in per_label:
                    rows[name][t] = entry
                else:
                    tables[name] = entry
            total = total + value
        tables.update({name: torch.stack(entries) for name, entries in rows.items()})
        state = inner.state_type(**tables)
        loss = total / len(active)
        loss.backward()
        out.append((float(loss.detach()), s.grad.numpy().copy(),
                    {k: v.detach().numpy().copy() for k, v in state._asdict().items()}))
    return out


@given(batches=_batches(multilabel=True), mode=st.sampled_from(["SOPA", "1w", "2w", "STACO"]),
       state_dtype=st.sampled_from(["float64", "float32"]),
       budget=st.sampled_from([None, 1, 20, 60]))
def test_multilabel_pauc_runs_every_label_at_once_as_the_single_label_loss_on_each(
        batches, mode, state_dtype, budget):
    """One pass over the pairs of all labels (one surrogate evaluation per step, compact or
    masked), or passes over chunks of labels where the pairs exceed ``PAIRS_PER_PASS``, give
    each label column the single-label loss's loss, gradient and state."""
    definition = xrisk.MultiLabelpAUCLoss(NUM_LABELS, num_samples=NUM_SAMPLES, mode=mode)
    dtype = getattr(torch, state_dtype)
    want = _label_by_label(definition, batches, dtype)
    limit = (contextlib.nullcontext() if budget is None
             else mock.patch.object(multilabel, "PAIRS_PER_PASS", budget))
    for layout in (contextlib.nullcontext, masked_pairs):
        shapes: list[tuple[int, ...]] = []
        with _pair_shapes(shapes), layout(), limit:
            got = _run(definition, batches, dtype)
        if budget is None:  # every batch fits one pass
            assert len(shapes) == len(batches), shapes
        elif budget == 1 and layout is masked_pairs:  # a label per pass
            assert len(shapes) == NUM_LABELS * len(batches), shapes
        _assert_same_runs(got, want)


def test_tensorflow_gradient_of_compact_pairs_is_a_dense_tensor():
    loss_fn = xtf.pAUC_DRO_Loss(num_samples=4, dtype="float64")
    scores = tf.constant([0.9, 0.2, 0.6, 0.4], dtype=tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        loss = loss_fn(scores, tf.constant([1, 0, 1, 0]), tf.constant([0, 1, 2, 3]))
    grad = tape.gradient(loss, scores)
    assert isinstance(grad, tf.Tensor)  # not IndexedSlices
    assert np.all(np.isfinite(grad.numpy())) and np.any(grad.numpy() != 0)
