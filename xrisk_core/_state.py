"""The state model: declared per-sample tables and the one way to update them.

A loss declares its state as :class:`StateTable` entries (key space, row shape, kind of dtype,
initial value). The adapters allocate those fields in framework-native containers; the
core gathers rows with ``take``, computes new rows and writes them back with
:func:`write_rows`, so a step costs O(batch) whatever ``num_samples`` is.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._domain import NONNEGATIVE, REAL, Domain
from ._grouping import last_occurrence
from ._typing import Array
from .backends import backend_of

__all__ = [
    "StateTable",
    "SHIFTED_MEAN",
    "SMOOTHING",
    "axis_size",
    "allocate_state",
    "initial_values",
    "masked_mean",
    "write_rows",
]


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


def masked_mean(values: Array, mask: Array, *, axis: int | None = None, xp: Any) -> Array:
    """Mean of ``values`` where ``mask`` is 1; 0 (not NaN) where the mask is empty.

    ``mask`` holds 0.0/1.0 floats of the dtype of ``values``; the result never divides by zero,
    so a batch without positives gives a defined, finite value and gradient.
    """
    count = xp.sum(mask, axis=axis)
    total = xp.sum(values * mask, axis=axis)
    return total / xp.maximum(count, xp.ones_like(count))


def write_rows(backend: Any, table: Array, index: Array, rows: Array, *, xp: Any,
               equal_duplicates: bool = False) -> Array:
    """Return ``table`` with ``table[index[k]] = rows[k]``; callers must rebind the result.

    Duplicate-index rule: when an index value appears several times in one batch, the row at
    its **last** position wins. The rule is applied here, before the backend's scatter, by
    giving every duplicate the row of its last position, so the scatter writes equal values
    and every backend (numpy, torch, JAX, TensorFlow, on CPU or GPU) produces the same table.
    The last positions come from the one grouping of duplicate keys
    (:func:`xrisk._grouping.last_occurrence`: a sort and a segment maximum, O(B log B)).
    ``equal_duplicates=True`` declares that the rows of one index are already equal (every
    built-in loss pools them through :func:`xrisk._grouping.group_keys`): any scatter order
    then gives the rule's table, and the search for last positions is skipped. On torch and
    TensorFlow variables the write is in place; on JAX it is ``.at[].set``, in place under
    ``jit`` with donated buffers.
    """
    if not equal_duplicates:
        rows = xp.take(rows, last_occurrence(index, backend=backend, xp=xp), axis=0)
    return backend.write_rows(table, index, rows if rows.dtype == table.dtype
                              else xp.astype(rows, table.dtype))

