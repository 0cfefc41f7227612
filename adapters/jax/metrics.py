"""Pure streaming metrics for JAX: ``init``, ``update``, ``compute``, ``merge``, ``sync``.

Each metric object holds only its options; its state is a NamedTuple of arrays (a pytree),
so ``update`` runs under ``jax.jit``, ``shard_map`` and ``lax.scan`` and the state can be
carried, donated and checkpointed like any other:

- the classification metrics (``AUROC``, ``AveragePrecision``, ``OneWayPartialAUROC``,
  ``TwoWayPartialAUROC``) keep fixed-capacity buffers of the scores and labels seen and a
  ``num_seen`` of the samples seen (the first ``min(num_seen, capacity)`` rows are valid);
  ``compute`` applies the whole-array :mod:`xrisk.metrics` function to those rows on the host,
  so the value equals :func:`xrisk.metrics.auroc` (and friends) of every batch, bit for bit;
- the ranking metrics (``NDCGAtK``, ``MAPAtK``) keep three sums (per-query values, defined
  queries, queries without a relevant item); their per-query values come from the
  whole-array functions through a host callback, so they need no capacity.

Bad input. Concrete arrays are checked on the host: labels other than 0/1, non-finite scores,
mismatched shapes and a batch that would overflow the capacity raise a ValueError naming the
received and expected values and the fix (the state, immutable, is unchanged). Under ``jit``
shapes are still checked at trace time; a bad batch's values are not written, and the state's
``invalid`` flag (bad values) or ``num_seen > capacity`` (overflow) makes ``compute`` raise on
the host or return NaN when ``compute`` itself is traced.

Across devices: inside ``shard_map`` (or ``pmap``), ``metric.sync(state, axis_name)`` gathers
every device's state (``lax.all_gather`` of the buffers, ``lax.psum`` of the sums) into the
state of all the data; ``metric.merge(a, b)`` does the same for two states on the host.

Without ``jax_enable_x64`` the buffers and sums are float32: the classification values are
still those of the float32 scores, the ranking sums round in float32.

Examples
--------
>>> import jax, jax.numpy as jnp
>>> from xrisk.jax.metrics import AUROC
>>> metric = AUROC(capacity=8)
>>> state = metric.init()
>>> update = jax.jit(metric.update)
>>> state = update(state, jnp.array([0, 1]), jnp.array([0.1, 0.35]))
>>> state = update(state, jnp.array([0, 1]), jnp.array([0.4, 0.8]))
>>> metric.compute(state)
0.75
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from xrisk.metrics import streaming

__all__ = ["ClassificationState", "RankingState", "AUROC", "AveragePrecision",
           "OneWayPartialAUROC", "TwoWayPartialAUROC", "NDCGAtK", "MAPAtK"]


class ClassificationState(NamedTuple):
    """Buffers of a classification metric.

    scores : (capacity,) or (capacity, num_labels) float
    labels : same shape, int8
    num_seen : () int32, the samples seen (valid rows: the first ``min(num_seen, capacity)``)
    invalid : () bool, a traced batch held labels other than 0/1 or non-finite scores
    """

    scores: jax.Array
    labels: jax.Array
    num_seen: jax.Array
    invalid: jax.Array


class RankingState(NamedTuple):
    """Sums of a ranking metric (all () arrays).

    total : sum of the defined per-query values
    num_defined, num_undefined : queries with and without a relevant item
    invalid : a traced batch was rejected by the whole-array function's checks
    """

    total: jax.Array
    num_defined: jax.Array
    num_undefined: jax.Array
    invalid: jax.Array


def _traced(*arrays: Any) -> bool:
    return any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves(arrays))


def _float() -> Any:
    return jnp.zeros(()).dtype  # float64 with jax_enable_x64, else float32


class _Classification:
    core: streaming.ClassificationMetric

    def __init__(self, core: streaming.ClassificationMetric, capacity: int,
                 num_labels: int | None) -> None:
        from xrisk.adapter_api import check_count

        self.core = core
        self.capacity = check_count(core.owner, "capacity", capacity,
                                    fix="pass the most samples one state holds, e.g. "
                                        "capacity=len(validation_set)")
        self.num_labels = None if num_labels is None else check_count(
            core.owner, "num_labels", num_labels, fix="pass None for (N,) labels")
        self._columns = 0 if self.num_labels is None else self.num_labels

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self.core.config().items())
        return (f"{type(self).__name__}(capacity={self.capacity}, "
                f"num_labels={self.num_labels}{', ' if options else ''}{options})")

    def _row(self) -> tuple[int, ...]:
        return () if self.num_labels is None else (self.num_labels,)

    def init(self) -> ClassificationState:
        """The empty state (``num_seen`` 0) with buffers of ``capacity`` rows."""
        shape = (self.capacity, *self._row())
        return ClassificationState(jnp.zeros(shape, _float()), jnp.zeros(shape, jnp.int8),
                                   jnp.zeros((), jnp.int32), jnp.zeros((), bool))

    def update(self, state: ClassificationState, y_true: Any,
               y_score: Any) -> ClassificationState:
        """Write a batch of labels (0/1) and scores, shape (B,) or (B, num_labels), after the
        rows already seen; returns the new state."""
        owner = f"{self.core.owner}.update"
        y, s = jnp.asarray(y_true), jnp.asarray(y_score)
        if s.ndim == 2 and s.shape[1] == 1 and self.num_labels is None:
            s = s[:, 0]
        if y.ndim == 2 and y.shape[1] == 1 and self.num_labels is None:
            y = y[:, 0]
        expected = (y.shape[0] if y.ndim else 0, *self._row())
        if y.shape != s.shape or y.shape != expected:
            wanted = "(B,)" if self.num_labels is None else f"(B, {self.num_labels})"
            raise ValueError(
                f"{owner}: y_score has shape {s.shape} but y_true has shape {y.shape}; "
                f"expected both {wanted}. Fix: pass one score per label, e.g. "
                "y_score.reshape(y_true.shape)."
            )
        batch, capacity = y.shape[0], state.scores.shape[0]  # a merged state holds more
        if not _traced(state, y, s):
            self.core.check(np.asarray(y), np.asarray(s), self._columns)  # raises, host only
            num_seen = int(state.num_seen)
            if num_seen + batch > capacity:
                raise ValueError(self._overflow_message(owner, num_seen + batch, capacity))
        bad = ~jnp.all(jnp.isfinite(s)) | ~jnp.all((y == 0) | (y == 1))
        rows = state.num_seen + jnp.arange(batch, dtype=jnp.int32)
        rows = jnp.where(bad, capacity, rows)  # out of range: dropped
        return ClassificationState(
            state.scores.at[rows].set(s.astype(state.scores.dtype), mode="drop"),
            state.labels.at[rows].set(y.astype(jnp.int8), mode="drop"),
            state.num_seen + jnp.where(bad, 0, batch).astype(jnp.int32),
            state.invalid | bad,
        )

    def _overflow_message(self, owner: str, num_seen: int, capacity: int) -> str:
        return (f"{owner}: {num_seen} samples seen; expected at most capacity={capacity} "
                f"(the buffers' rows). Fix: build {type(self).__name__}(capacity=...) with "
                "room for every sample of one evaluation (per device before sync).")

    def _host(self, state: ClassificationState) -> tuple[np.ndarray, np.ndarray]:
        """The valid rows, or a ValueError for an overflowed or poisoned state."""
        owner = f"{self.core.owner}.compute"
        if bool(state.invalid):
            raise ValueError(
                f"{owner}: a batch updated under jit held labels other than 0/1 or non-finite "
                "scores (it was not written); expected valid batches. Fix: check the batches "
                "eagerly (update outside jit raises on the bad one) and reset with init()."
            )
        num_seen = int(state.num_seen)
        if num_seen > state.scores.shape[0]:
            raise ValueError(self._overflow_message(owner, num_seen, state.scores.shape[0]))
        return np.asarray(state.labels[:num_seen]), np.asarray(state.scores[:num_seen], np.float64)

    def compute(self, state: ClassificationState) -> Any:
        """The whole-array metric of the valid rows.

        On concrete states: a float (or per-label array with ``average=None``); raises
        ValueError when undefined, overflowed or invalid. Traced (inside ``jit``): a host
        callback returning NaN in those cases.
        """
        if not _traced(state):
            return self.core.value(*self._host(state))
        shape = (self.num_labels,) if self.num_labels and self.core.config().get(
            "average", "macro") is None else ()

        def value_or_nan(state: ClassificationState) -> np.ndarray:
            try:
                labels, scores = self._host(state)
                if self.core.undefined(labels) is not None:
                    return np.full(shape, np.nan, _float())
                return np.asarray(self.core.value(labels, scores), _float())
            except ValueError:
                return np.full(shape, np.nan, _float())

        return jax.pure_callback(value_or_nan, jax.ShapeDtypeStruct(shape, _float()), state)

    def merge(self, first: ClassificationState,
              second: ClassificationState) -> ClassificationState:
        """The state of ``first``'s rows followed by ``second``'s; capacity: the sum."""
        return self._concatenate(jax.tree.map(lambda a, b: jnp.stack([a, b]), first, second))

    def _concatenate(self, stacked: ClassificationState) -> ClassificationState:
        """Compact (D, C, ...) stacked states into one state of capacity D * C."""
        parts, capacity = stacked.scores.shape[0], stacked.scores.shape[1]
        counts = stacked.num_seen
        starts = jnp.cumsum(counts) - counts
        slot = jnp.arange(capacity, dtype=jnp.int32)
        valid = slot[None, :] < jnp.minimum(counts, capacity)[:, None]
        total = parts * capacity
        rows = jnp.where(valid, starts[:, None] + slot[None, :], total).reshape(-1)
        flat = (parts * capacity, *stacked.scores.shape[2:])
        scores = jnp.zeros(flat, stacked.scores.dtype).at[rows].set(
            stacked.scores.reshape(flat), mode="drop")
        labels = jnp.zeros(flat, jnp.int8).at[rows].set(stacked.labels.reshape(flat),
                                                        mode="drop")
        # An overflowed part stays overflowed: its num_seen exceeds what it holds.
        overflow = jnp.any(counts > capacity)
        num_seen = jnp.where(overflow, total + 1, jnp.sum(counts)).astype(jnp.int32)
        return ClassificationState(scores, labels, num_seen, jnp.any(stacked.invalid))

    def sync(self, state: ClassificationState, axis_name: Any) -> ClassificationState:
        """Inside ``shard_map``/``pmap`` over ``axis_name``: every device's rows, in device
        order, in one state of capacity ``devices * capacity`` (the same on every device)."""
        return self._concatenate(jax.lax.all_gather(state, axis_name))


class AUROC(_Classification):
    """Streaming AUROC (:func:`xrisk.metrics.auroc`) with fixed-capacity buffers.

    Parameters
    ----------
    capacity : int
        The most samples one state holds (rows of its buffers).
    num_labels : int, optional
        T for (B, T) multi-label batches; None for (B,).
    average : {"macro", None}, default "macro"

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from xrisk.jax.metrics import AUROC
    >>> metric = AUROC(capacity=4)
    >>> state = metric.update(metric.init(), jnp.array([0, 0, 1, 1]),
    ...                       jnp.array([0.1, 0.4, 0.35, 0.8]))
    >>> metric.compute(state)
    0.75
    """

    def __init__(self, *, capacity: int, num_labels: int | None = None,
                 average: str | None = "macro") -> None:
        super().__init__(streaming.AUROC(average=average), capacity, num_labels)


class AveragePrecision(_Classification):
    """Streaming average precision (:func:`xrisk.metrics.average_precision`).

    Same parameters as :class:`AUROC`.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from xrisk.jax.metrics import AveragePrecision
    >>> metric = AveragePrecision(capacity=4)
    >>> state = metric.update(metric.init(), jnp.array([0, 0, 1, 1]),
    ...                       jnp.array([0.1, 0.4, 0.35, 0.8]))
    >>> round(metric.compute(state), 4)
    0.8333
    """

    def __init__(self, *, capacity: int, num_labels: int | None = None,
                 average: str | None = "macro") -> None:
        super().__init__(streaming.AveragePrecision(average=average), capacity, num_labels)


class OneWayPartialAUROC(_Classification):
    """Streaming one-way partial AUROC (:func:`xrisk.metrics.one_way_partial_auroc`).

    Parameters
    ----------
    capacity : int
    max_fpr : float in (0, 1]
    scale : {"normalized", "raw", "mcclish"}, default "normalized"
    num_labels : int, optional
    average : {"macro", None}, default "macro"

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from xrisk.jax.metrics import OneWayPartialAUROC
    >>> metric = OneWayPartialAUROC(capacity=6, max_fpr=0.25)
    >>> state = metric.update(metric.init(), jnp.array([0, 0, 0, 0, 1, 1]),
    ...                       jnp.array([0.9, 0.2, 0.1, 0.3, 0.95, 0.5]))
    >>> metric.compute(state)
    0.5
    """

    def __init__(self, *, capacity: int, max_fpr: float, scale: str = "normalized",
                 num_labels: int | None = None, average: str | None = "macro") -> None:
        super().__init__(streaming.OneWayPartialAUROC(max_fpr=max_fpr, scale=scale,
                                                      average=average), capacity, num_labels)


class TwoWayPartialAUROC(_Classification):
    """Streaming two-way partial AUROC (:func:`xrisk.metrics.two_way_partial_auroc`).

    Parameters
    ----------
    capacity : int
    max_fpr : float in (0, 1]
    min_tpr : float in [0, 1)
    scale : {"normalized", "raw"}, default "normalized"
    num_labels : int, optional
    average : {"macro", None}, default "macro"

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from xrisk.jax.metrics import TwoWayPartialAUROC
    >>> metric = TwoWayPartialAUROC(capacity=6, max_fpr=0.5, min_tpr=0.5)
    >>> state = metric.update(metric.init(), jnp.array([0, 0, 0, 0, 1, 1]),
    ...                       jnp.array([0.9, 0.2, 0.1, 0.3, 0.95, 0.5]))
    >>> metric.compute(state)
    0.5
    """

    def __init__(self, *, capacity: int, max_fpr: float, min_tpr: float,
                 scale: str = "normalized", num_labels: int | None = None,
                 average: str | None = "macro") -> None:
        super().__init__(streaming.TwoWayPartialAUROC(
            max_fpr=max_fpr, min_tpr=min_tpr, scale=scale, average=average),
            capacity, num_labels)


class _Ranking:
    core: streaming.RankingMetric

    def __init__(self, core: streaming.RankingMetric) -> None:
        self.core = core

    def __repr__(self) -> str:
        return repr(self.core)

    def init(self) -> RankingState:
        """The empty state (no query seen)."""
        zero = jnp.zeros((), _float())
        return RankingState(zero, zero, zero, jnp.zeros((), bool))

    def update(self, state: RankingState, relevance: Any, scores: Any,
               query_ids: Any = None) -> RankingState:
        """Add the whole queries of a batch: (Q, M) rows, or (N,) with ``query_ids``."""
        if not _traced(state, relevance, scores, query_ids):
            total, defined, undefined = self.core.sums(relevance, scores, query_ids)
            bad = False
        else:
            relevance, scores = jnp.asarray(relevance), jnp.asarray(scores)
            if relevance.shape != scores.shape:
                raise ValueError(
                    f"{self.core.owner}.update: relevance has shape {relevance.shape} but "
                    f"scores have shape {scores.shape}; expected the same shape. Fix: pass "
                    "one score per candidate."
                )

            def host_sums(relevance: Any, scores: Any, query_ids: Any) -> tuple[Any, ...]:
                try:
                    sums = self.core.sums(np.asarray(relevance), np.asarray(scores),
                                          None if query_ids is None else np.asarray(query_ids))
                except ValueError:
                    return (*(np.zeros((), _float()) for _ in range(3)), np.ones((), bool))
                return (*(np.asarray(value, _float()) for value in sums), np.zeros((), bool))

            out = (*(jax.ShapeDtypeStruct((), _float()) for _ in range(3)),
                   jax.ShapeDtypeStruct((), bool))
            total, defined, undefined, bad = jax.pure_callback(host_sums, out, relevance,
                                                               scores, query_ids)
        return RankingState(state.total + total, state.num_defined + defined,
                            state.num_undefined + undefined, state.invalid | bad)

    def _host(self, state: RankingState) -> tuple[float, int, int]:
        if bool(state.invalid):
            raise ValueError(
                f"{self.core.owner}.compute: a batch updated under jit was rejected (shape, "
                "negative or non-finite relevance, NaN scores) and not counted; expected valid "
                "batches. Fix: run update eagerly once to see the error, and reset with init()."
            )
        return float(state.total), int(state.num_defined), int(state.num_undefined)

    def compute(self, state: RankingState) -> Any:
        """The mean over every query seen: a float (raises when undefined) or, traced, a host
        callback returning NaN when undefined or invalid."""
        if not _traced(state):
            return self.core.value(*self._host(state))

        def value_or_nan(state: RankingState) -> np.ndarray:
            try:
                return np.asarray(self.core.value(*self._host(state)), _float())
            except ValueError:
                return np.full((), np.nan, _float())

        return jax.pure_callback(value_or_nan, jax.ShapeDtypeStruct((), _float()), state)

    def merge(self, first: RankingState, second: RankingState) -> RankingState:
        """The state of both states' queries."""
        return RankingState(first.total + second.total,
                            first.num_defined + second.num_defined,
                            first.num_undefined + second.num_undefined,
                            first.invalid | second.invalid)

    def sync(self, state: RankingState, axis_name: Any) -> RankingState:
        """Inside ``shard_map``/``pmap``: the sums of every device (``lax.psum``)."""
        total, defined, undefined = jax.lax.psum(
            (state.total, state.num_defined, state.num_undefined), axis_name)
        return RankingState(total, defined, undefined,
                            jax.lax.psum(state.invalid.astype(jnp.int32), axis_name) > 0)


class NDCGAtK(_Ranking):
    """Streaming NDCG@k (:func:`xrisk.metrics.ndcg_at_k` averaged over every query seen).

    Parameters
    ----------
    k : int
    gain : {"exponential", "linear"}, default "exponential"
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from xrisk.jax.metrics import NDCGAtK
    >>> metric = NDCGAtK(k=3)
    >>> state = metric.update(metric.init(), jnp.array([[3, 0, 1]]),
    ...                       jnp.array([[0.2, 0.9, 0.1]]))
    >>> round(metric.compute(state), 4)
    0.6443
    """

    def __init__(self, k: int, *, gain: str = "exponential", ties: str = "pessimistic",
                 no_relevant: str = "skip") -> None:
        super().__init__(streaming.NDCGAtK(k, gain=gain, ties=ties, no_relevant=no_relevant))


class MAPAtK(_Ranking):
    """Streaming MAP@k (:func:`xrisk.metrics.map_at_k` averaged over every query seen).

    Parameters
    ----------
    k : int
    ties : {"pessimistic", "optimistic"}, default "pessimistic"
    no_relevant : {"skip", "zero", "one"}, default "skip"

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> from xrisk.jax.metrics import MAPAtK
    >>> metric = MAPAtK(k=4)
    >>> state = metric.update(metric.init(), jnp.array([[1, 0, 1, 0]]),
    ...                       jnp.array([[0.9, 0.8, 0.1, 0.2]]))
    >>> metric.compute(state)
    0.75
    """

    def __init__(self, k: int, *, ties: str = "pessimistic", no_relevant: str = "skip") -> None:
        super().__init__(streaming.MAPAtK(k, ties=ties, no_relevant=no_relevant))
