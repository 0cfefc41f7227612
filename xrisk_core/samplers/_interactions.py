"""Sparse (CSR) storage of ranking interactions and the per-query samplers built on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._arguments import check_count
from .._inputs import class_labels, preview, to_numpy

__all__ = ["Interactions", "LAYOUTS"]


#: How a 2-D array of ranking labels is read (``TriSampler(..., layout=...)``).
LAYOUTS = ("rows", "items_by_queries")

_DENSE_FIX = (
    "LibAUC's dense (num_items, num_queries) relevance matrix is read with "
    "layout='items_by_queries' (or pass scipy.sparse.csr_matrix(matrix.T))"
)


def _rows_from(
    owner: str, labels: Any, layout: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, Any]:
    """Split ``labels`` into query ids, item ids, relevances and a default shape.

    ``layout=None`` reads a scipy sparse matrix as (queries, items) and a 2-D array as rows
    ``(query, item[, relevance])``; ``"items_by_queries"`` reads either as LibAUC's
    (num_items, num_queries) relevance matrix (nonzero entries are the rated pairs). A dense
    array is never guessed to be a matrix: with 2 or 3 queries its shape is that of rows.
    """
    if layout == "items_by_queries":
        if hasattr(labels, "tocoo"):
            coo = labels.tocoo()
            return (np.asarray(coo.col), np.asarray(coo.row), np.asarray(coo.data),
                    coo.shape[::-1])
        matrix = to_numpy(labels)
        if matrix.ndim != 2:
            raise ValueError(
                f"{owner}: layout='items_by_queries' labels have shape {matrix.shape}; "
                "expected a 2-D (num_items, num_queries) relevance matrix. Fix: pass the "
                "matrix, or rows (query, item[, relevance]) with layout='rows'."
            )
        values = np.asarray(matrix, dtype=np.float64)
        if np.isnan(values).any():
            raise ValueError(
                f"{owner}: the relevance matrix contains NaN at (item, query) "
                f"{preview(np.argwhere(np.isnan(values))[:3].tolist())}; expected numbers "
                "(0: not rated, > 0: relevant). Fix: replace NaN by 0."
            )
        item, query = np.nonzero(values)
        return query, item, values[item, query], (values.shape[1], values.shape[0])
    if hasattr(labels, "tocoo"):  # a scipy sparse matrix (queries x items)
        coo = labels.tocoo()
        return np.asarray(coo.row), np.asarray(coo.col), np.asarray(coo.data), coo.shape
    values = to_numpy(labels)
    if values.ndim != 2 or values.shape[1] not in (2, 3):
        raise ValueError(
            f"{owner}: ranking labels have shape {values.shape}; expected (num_interactions, 2) "
            "or (num_interactions, 3) rows of (query, item[, relevance]) or a scipy sparse "
            "(num_queries, num_items) matrix. Fix: e.g. np.column_stack([query, item, rating]); "
            f"{_DENSE_FIX}."
        )
    relevance = values[:, 2] if values.shape[1] == 3 else None
    return values[:, 0], values[:, 1], relevance, None


@dataclass(frozen=True)
class Interactions:
    """Rated and relevant items of every query as sorted CSR rows.

    ``relevant_keys`` holds ``query * num_items + item`` of the relevant pairs, sorted, with
    row pointers ``relevant_ptr`` (num_queries + 1,). For the rated pairs only
    ``skip_keys = query * num_items + item - (rank of the item within its row)`` is kept: it
    maps the r-th unrated item of a query to its id with one binary search.
    """

    num_items: int
    num_queries: int
    relevant_keys: np.ndarray
    relevant_ptr: np.ndarray
    skip_keys: np.ndarray
    rated_ptr: np.ndarray
    active_queries: np.ndarray
    #: (len(relevant_keys),) float64: the relevance of each relevant pair (1.0 when the
    #: labels had no relevance column), in the order of ``relevant_keys``.
    relevant_values: np.ndarray | None = None

    @classmethod
    def build(cls, owner: str, labels: Any, num_items: Any, layout: str | None = None,
              ) -> Interactions:
        """Validate the interactions and build the CSR rows (O(nnz log nnz), no dense matrix).

        ``layout``: see :func:`_rows_from`; ``"rows"`` is the same as ``None``.
        """
        hint = "" if layout is not None or hasattr(labels, "tocoo") else (
            f" (if these labels are a matrix rather than rows: {_DENSE_FIX})")
        layout = None if layout == "rows" else layout
        query_raw, item_raw, relevance, shape = _rows_from(owner, labels, layout)
        if np.asarray(query_raw).size == 0:
            raise ValueError(
                f"{owner}: no interactions were given (0 rows); expected at least one "
                "(query, item) pair. Fix: pass the rated pairs of the training split."
            )
        try:
            query = class_labels(owner, query_raw, name="query ids")
            item = class_labels(owner, item_raw, name="item ids")
        except ValueError as error:
            raise ValueError(f"{error}{hint}") from None
        if num_items is None:
            num_items = shape[1] if shape is not None else int(item.max()) + 1
        n_items = check_count(owner, "num_items", num_items)
        beyond = item[item >= n_items]
        if beyond.size:
            raise ValueError(
                f"{owner}: item ids {preview(np.unique(beyond))} are beyond num_items={n_items}; "
                f"expected ids in [0, {n_items}). Fix: pass num_items = max(item) + 1 or "
                "re-index the items."
            )
        n_queries = shape[0] if shape is not None else int(query.max()) + 1
        keys = query * n_items + item
        del query, item
        rated = np.sort(keys)
        repeated = rated[1:][rated[1:] == rated[:-1]]
        if repeated.size:
            pair = (int(repeated[0] // n_items), int(repeated[0] % n_items))
            raise ValueError(
                f"{owner}: the (query, item) pair {pair} occurs more than once "
                f"({repeated.size} repeats in all); expected each pair once. Fix: aggregate "
                f"repeated interactions, e.g. keep the latest rating{hint}."
            )
        if relevance is None:
            relevant = rated.copy()  # rated is turned into skip keys in place below
            relevant_values = np.ones(rated.size)
        else:
            rel = np.asarray(relevance, dtype=np.float64)
            if np.isnan(rel).any():
                raise ValueError(
                    f"{owner}: relevances contain NaN at rows "
                    f"{preview(np.flatnonzero(np.isnan(rel)))}; expected numbers (> 0 marks a "
                    "relevant item). Fix: drop those rows or set their relevance to 0."
                )
            chosen = rel > 0
            order = np.argsort(keys[chosen], kind="stable")
            relevant = keys[chosen][order]
            relevant_values = rel[chosen][order]
        del keys
        bounds = np.arange(n_queries + 1, dtype=np.int64) * n_items
        rated_ptr = np.searchsorted(rated, bounds)
        relevant_ptr = np.searchsorted(relevant, bounds)
        active = np.flatnonzero(np.diff(relevant_ptr) > 0)
        if active.size == 0:
            raise ValueError(
                f"{owner}: no query has a relevant item (all relevances <= 0); expected at "
                "least one relevance > 0. Fix: check the relevance column."
            )
        unrated = n_items - np.diff(rated_ptr)
        full = active[unrated[active] == 0]
        if full.size:
            raise ValueError(
                f"{owner}: queries {preview(full)} have rated all {n_items} items, so no "
                "negative can be drawn for them; expected at least one unrated item per query. "
                "Fix: drop those queries or pass a larger num_items."
            )
        # skip key: the item id minus its rank within the row (non-decreasing within a row)
        within_row = np.arange(rated.size, dtype=np.int64)
        within_row -= np.repeat(rated_ptr[:-1], np.diff(rated_ptr))
        rated -= within_row
        return cls(n_items, n_queries, relevant, relevant_ptr, rated, rated_ptr, active,
                   relevant_values)

    def sample_relevant(
        self, rng: np.random.Generator, queries: np.ndarray, count: int
    ) -> np.ndarray:
        """``count`` distinct relevant items per query, shape (len(queries), count).

        Rows with ``n >= count`` relevant items get a uniform random ordered sample without
        replacement (Floyd's algorithm, vectorised over queries, then a random order). Rows
        with ``n < count`` hold every relevant item ``count // n`` or ``count // n + 1`` times.
        """
        start = self.relevant_ptr[queries]
        length = self.relevant_ptr[queries + 1] - start
        picks = np.empty((queries.size, count), dtype=np.int64)
        full = length >= count
        if full.any():
            n = length[full]
            chosen = np.empty((n.size, count), dtype=np.int64)
            for step in range(count):
                top = n - count + step
                draw = rng.integers(0, top + 1)
                clash = (chosen[:, :step] == draw[:, None]).any(axis=1)
                chosen[:, step] = np.where(clash, top, draw)
            order = np.argsort(rng.random((n.size, count)), axis=1)
            picks[full] = np.take_along_axis(chosen, order, axis=1)
        short = ~full
        if short.any():
            n = length[short]
            offset = rng.integers(0, n)
            picks[short] = (np.arange(count) + offset[:, None]) % n[:, None]
        keys = self.relevant_keys[start[:, None] + picks]
        return keys - queries[:, None] * self.num_items

    def sample_unrated(
        self, rng: np.random.Generator, queries: np.ndarray, count: int
    ) -> np.ndarray:
        """``count`` distinct unrated items per query, shape (len(queries), count).

        Ranks ``r`` in ``[0, u)`` (``u`` unrated items) are drawn uniformly without replacement
        and mapped to item ids with one binary search per draw. Rows with ``u < count`` hold
        every unrated item ``count // u`` or ``count // u + 1`` times.
        """
        unrated = self.num_items - (self.rated_ptr[queries + 1] - self.rated_ptr[queries])
        ranks = np.empty((queries.size, count), dtype=np.int64)
        many = unrated >= 2 * count
        if many.any():
            ranks[many] = _distinct_by_rejection(rng, unrated[many], count)
        some = (unrated >= count) & ~many
        if some.any():
            u = unrated[some]
            keys = rng.random((u.size, int(u.max())))
            keys[np.arange(keys.shape[1])[None, :] >= u[:, None]] = np.inf
            ranks[some] = np.argsort(keys, axis=1)[:, :count]
        few = unrated < count
        if few.any():
            u = unrated[few]
            offset = rng.integers(0, u)
            ranks[few] = (np.arange(count) + offset[:, None]) % u[:, None]
        lookup = ranks + queries[:, None] * self.num_items
        before = np.searchsorted(self.skip_keys, lookup, side="right")
        return ranks + before - self.rated_ptr[queries][:, None]


def _distinct_by_rejection(rng: np.random.Generator, high: np.ndarray, count: int) -> np.ndarray:
    """Per row, ``count`` distinct integers uniform in ``[0, high)`` (``high >= 2 * count``)."""
    draws = rng.integers(0, high[:, None], size=(high.size, count))
    while True:
        order = np.argsort(draws, axis=1, kind="stable")
        ranked = np.take_along_axis(draws, order, axis=1)
        repeat = np.zeros(draws.shape, dtype=bool)
        repeat[:, 1:] = ranked[:, 1:] == ranked[:, :-1]
        rows, cols = np.nonzero(repeat)
        if rows.size == 0:
            return draws
        draws[rows, order[rows, cols]] = rng.integers(0, high[rows])
