"""The state model: declared per-sample tables and the one way to update them.

A loss declares its state as :class:`StateTable` entries (key space, row shape, kind of dtype,
initial value). The adapters allocate those fields in framework-native containers; the
core gathers rows with ``take``, computes new rows and writes them back with
:func:`write_rows`, so a step costs O(batch) whatever ``num_samples`` is.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._domain import NONNEGATIVE, REAL, Domain
from .backends import backend_of

__all__ = [
    "StateTable",
    "SHIFTED_MEAN",
    "SMOOTHING",
    "axis_size",
    "size_bound",
    "allocate_state",
    "initial_values",
    "masked_mean",
    "key_gaps",
    "last_occurrence",
    "focus_rows",
    "full_like",
    "write_rows",
]

Array = Any

#: Rows [u~, c] of a moving average stored shifted, u = u~ exp(c) (so that no exp overflows):
#: u~ >= 0 (0 before the first visit), any finite log-shift c.
SHIFTED_MEAN = (NONNEGATIVE, REAL)
#: A moving-average weight gamma scheduled in state (MIDAM's, SOX's): in (0, 1].
SMOOTHING = Domain(0.0, 1.0, low_open=True)


class StateTable(NamedTuple):
    """Declaration of one state entry: a table of rows indexed by a key space.

    Attributes
    ----------
    keys : str or None
        Key space of the rows (``"sample"``, ``"query"``, ``"interaction"``, ...), whose size
        :meth:`LossDefinition.key_spaces` gives; ``None`` for one global entry of shape ``row``.
    row : tuple of int
        Shape of one row (``()`` for one number per key).
    fill : float or tuple of float
        Initial value of every entry, or one value per column of the last row axis.
    kind : {"float", "int"}
        ``"float"`` entries take the loss's state dtype; ``"int"`` entries are int32 counters.
    domain : Domain or tuple of Domain
        The values an entry may hold (:class:`xrisk._domain.Domain`), or one domain per column
        of the last row axis (as ``fill``): every value that training produces, in the
        loss's dtype, and nothing else. ``load_state`` rejects an export with an entry
        outside it, and the state fuzzer draws values outside it. Default: any finite real.
    """

    keys: str | None
    row: tuple[int, ...] = ()
    fill: float | tuple[float, ...] = 0.0
    kind: str = "float"
    domain: Domain | tuple[Domain, ...] = REAL

    def shape(self, spaces: dict[str, int]) -> tuple[int, ...]:
        """Concrete shape: ``(size of the key space, *row)``, or ``row`` for a global entry."""
        return self.row if self.keys is None else (spaces[self.keys], *self.row)

    def domains(self) -> tuple[Domain, ...] | None:
        """The domain of each column of the last row axis, or ``None`` when one domain covers
        the whole entry."""
        return None if isinstance(self.domain, Domain) else self.domain


def allocate_state(tables: dict[str, StateTable], spaces: dict[str, int], *, xp: Any,
                   dtype: Any, device: Any = None) -> dict[str, Array]:
    """Allocate every declared entry in namespace ``xp`` (used by the neutral and JAX paths)."""
    out = {}
    for name, table in tables.items():
        table_dtype = dtype if table.kind == "float" else xp.int32
        options = {"dtype": table_dtype} if device is None else {"dtype": table_dtype,
                                                                 "device": device}
        value = xp.zeros(table.shape(spaces), **options)
        fill = initial_values(table)
        # A zero fill is the zeros themselves: adding it would hold a second full-size table
        # while the state is built (twice the state's bytes at peak, for the largest tables).
        if any(fill) if isinstance(fill, list) else fill:
            value = value + xp.asarray(fill, **options)
        out[name] = value
    return out


def initial_values(table: StateTable) -> Any:
    """The fill of ``table`` as a nested list that broadcasts against its shape."""
    cast = float if table.kind == "float" else int
    fill = table.fill
    return [cast(v) for v in fill] if isinstance(fill, tuple) else cast(fill)


def axis_size(x: Array, axis: int = 0, *, dtype: Any = None) -> Any:
    """The size of axis ``axis`` of ``x``: a Python int when it is static (always on numpy,
    torch and JAX), else a scalar array computed at run time (a TensorFlow ``None`` dimension,
    e.g. Keras ``fit``'s batch), cast to ``dtype`` if given (a divisor in float arithmetic:
    TensorFlow does not promote integer arrays). A static size costs no array operation.
    """
    size = x.shape[axis]
    if size is not None:
        return size
    backend = backend_of(x)
    size = backend.axis_size(x, axis)
    return size if dtype is None else backend.namespace.astype(size, dtype)


def size_bound(size: Any) -> Any:
    """A static upper bound of a batch size from :func:`axis_size`: the size itself, or
    :data:`RUN_TIME_BATCH_BOUND` for one known only at run time."""
    return RUN_TIME_BATCH_BOUND if hasattr(size, "dtype") else size


#: Bound of a batch size known only at run time, where a static one is needed (the keys of
#: :func:`key_gaps`, the scale of :func:`last_occurrence`): every such batch builds (B, B)
#: matrices, 64 TiB in float32 at B = 2**22, so a batch that runs is smaller.
RUN_TIME_BATCH_BOUND = 2**22


def masked_mean(values: Array, mask: Array, *, axis: int | None = None, xp: Any) -> Array:
    """Mean of ``values`` where ``mask`` is 1; 0 (not NaN) where the mask is empty.

    ``mask`` holds 0.0/1.0 floats of the dtype of ``values``; the result never divides by zero,
    so a batch without positives gives a defined, finite value and gradient.
    """
    count = xp.sum(mask, axis=axis)
    total = xp.sum(values * mask, axis=axis)
    return total / xp.maximum(count, xp.ones_like(count))


def key_gaps(row_keys: Array, column_keys: Array, *, bound: int, xp: Any,
             dtype: Any = None) -> Array:
    """``(row_keys[i] - column_keys[j])**2`` (B, B) in floats for small keys; for any keys,
    exactly 0 where two keys are equal and at least 1 where they differ.

    The keys (B,) are integers of magnitude at most ``bound``. The arithmetic runs in
    ``dtype`` (float32 or float64; default float32) if it represents them all exactly
    (float32: ``bound <= 2**24``); distinct exact integers differ by at least 1 and rounding
    is monotonic, so the test is exact. Larger keys are first replaced by their ranks among
    the keys of both arguments (a sort and a binary search of the B keys), which are small:
    the B x B test then costs the same whatever the table size, and stays exact where float64
    is missing (JAX without x64 silently computes "float64" in float32, which merged the keys
    ``2**24`` and ``2**24 + 1``). A float subtraction and product cost less than an integer
    comparison plus a cast of its boolean result (2-3 times less on CPUs, where the boolean
    B x B kernels are not vectorised).
    """
    if dtype is None or dtype != xp.float64:
        dtype = xp.float32
    if bound <= _FLOAT32_EXACT:
        return _squared_gaps(row_keys, column_keys, dtype, xp)
    if column_keys is row_keys:
        ranks = _equality_ranks(row_keys, xp)
        return _squared_gaps(ranks, ranks, xp.float32, xp)
    ranks = _equality_ranks(xp.concat([row_keys, column_keys]), xp)
    count = axis_size(row_keys)
    return _squared_gaps(ranks[:count], ranks[count:], xp.float32, xp)


#: Integers up to this magnitude are exact in float32.
_FLOAT32_EXACT = 2**24


def _equality_ranks(keys: Array, xp: Any) -> Array:
    """For each key of ``keys`` (n,), the number of keys smaller than it: equal keys share a
    rank, distinct keys get distinct ranks, all in [0, n). One sort and one binary search,
    static shapes; no argsort (a stable sort of keys and positions, several times slower on
    XLA's CPU backend: 0.87 ms against 0.13 ms for 5,120 keys)."""
    return xp.searchsorted(xp.sort(keys), keys)


def _squared_gaps(row_keys: Array, column_keys: Array, dtype: Any, xp: Any) -> Array:
    rows = xp.astype(row_keys, dtype)
    columns = rows if column_keys is row_keys else xp.astype(column_keys, dtype)
    gap = xp.expand_dims(rows, 1) - xp.expand_dims(columns, 0)
    return gap * gap


def last_occurrence(index: Array, *, bound: int | None = None, xp: Any) -> Array:
    """For each position, the position of the last entry with the same index value.

    ``index`` has shape (B,), values of magnitude at most ``bound`` (default: any; see
    :func:`key_gaps`, whose comparisons run in float32).
    The result (B,) lets callers make the rows of a duplicated index identical before a
    scatter, which is what makes :func:`write_rows` deterministic. O(B^2) float arithmetic,
    no data-dependent shapes (jit-safe).
    """
    batch = axis_size(index)
    gaps = key_gaps(index, index, bound=2**63 if bound is None else bound, xp=xp)
    # marks[i, j] = -j / 2**k (exact: a power of two, 2**k > batch) where index[j] == index[i],
    # in (-1, 0]; > 0 elsewhere (gap >= 1). The row minimum is -last / 2**k.
    scale = 2.0 ** size_bound(batch).bit_length()
    marks = gaps + xp.expand_dims(xp.arange(batch, dtype=gaps.dtype) * (-1 / scale), 0)
    return xp.astype(xp.min(marks, axis=1) * -scale, index.dtype)


def focus_rows(index: Array, keep: Array, *, xp: Any) -> tuple[Array, Array]:
    """Point the rows that are not kept at the first kept row: ``(rows, anchor)``.

    ``rows`` (B,) equals ``index`` where ``keep`` (B,) is true and, elsewhere, the index at
    the first kept position (position 0 if none is kept); ``anchor`` (1,) is that position.
    A loss whose state is written for some rows only gathers and writes at ``rows`` and gives
    the redirected rows the anchor's new value: the step touches only the kept rows of a
    large table, where every row touched costs a cache and TLB miss.
    """
    batch = axis_size(index)
    positions = xp.arange(batch, dtype=index.dtype)
    first = xp.min(xp.where(keep, positions, full_like(positions, batch, xp)))
    anchor = xp.reshape(first % batch, (1,))  # none kept: batch % batch = position 0
    return xp.where(keep, index, xp.take(index, anchor, axis=0)), anchor


def write_rows(backend: Any, table: Array, index: Array, rows: Array, *, xp: Any,
               equal_duplicates: bool = False) -> Array:
    """Return ``table`` with ``table[index[k]] = rows[k]``; callers must rebind the result.

    Duplicate-index rule: when an index value appears several times in one batch, the row at
    its **last** position wins. The rule is applied here, before the backend's scatter, by
    giving every duplicate the row of its last position, so the scatter writes equal values
    and every backend (numpy, torch, JAX, TensorFlow, on CPU or GPU) produces the same table.
    ``equal_duplicates=True`` declares that the rows of one index are already equal (APLoss's
    groups of positives make them so): any scatter order then gives the rule's table, and the
    O(B^2) search for last positions is skipped. On torch and TensorFlow variables the write
    is in place; on JAX it is ``.at[].set``, in place under ``jit`` with donated buffers.
    """
    if not equal_duplicates:
        # Valid indices lie in [0, len(table)): that bound keeps the comparisons in float32.
        rows = xp.take(rows, last_occurrence(index, bound=table.shape[0], xp=xp), axis=0)
    return backend.write_rows(table, index, rows if rows.dtype == table.dtype
                              else xp.astype(rows, table.dtype))


def full_like(x: Array, value: Any, xp: Any) -> Array:
    """``xp.full_like(x, value)`` for a Python scalar or a size from :func:`axis_size` (an
    array where known only at run time, which ``full_like`` does not take)."""
    if hasattr(value, "dtype"):
        return xp.zeros_like(x) + xp.astype(value, x.dtype)
    return xp.full_like(x, value)
