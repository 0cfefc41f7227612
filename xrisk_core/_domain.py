"""Domains: the set of values one input or one stored entry may take, and relations between
inputs.

A loss declares a :class:`Domain` for every batch input (``Input.domain``, or its kind's
default, see :func:`default_domain`) and may declare :class:`Relation` s between inputs and
named widths (``LossDefinition.relations``); state tables declare the domain of their stored
entries. One validator (:mod:`xrisk._validation`) reads these declarations: on the host it
checks them with :meth:`Domain.admits` (a few vectorised reductions) and reports with
:meth:`Domain.violations` / :meth:`Domain.describe`; inside a traced step it computes
:meth:`Domain.holds` in the graph. The test suite's fuzzer reads the same declarations to draw
values outside them, so a new loss is checked without new test code.

Domains are sets of real numbers: infinities and NaN are never inside one, except NaN where
``allow_nan`` says so (a missing label).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ._typing import Array

__all__ = [
    "Domain", "Relation", "Size", "RELATION_OPS",
    "REAL", "FINITE", "NONNEGATIVE", "POSITIVE", "UNIT_INTERVAL", "BINARY",
    "BINARY_OR_MISSING", "COUNT", "POSITIVE_COUNT", "index_domain",
]



class Domain(NamedTuple):
    """The set of values one input or stored entry may take.

    An interval of real numbers from ``low`` to ``high`` (each end open or closed), optionally
    restricted to whole numbers, optionally admitting NaN. Infinity is never inside: a closed
    end at infinity reads as open.

    Attributes
    ----------
    low, high : float
        The interval's ends (default: every real number).
    low_open, high_open : bool
        Whether each end is excluded.
    integer : bool
        Whole numbers only: an integer dtype, or floats with integral values (a count passed
        as float64).
    allow_nan : bool
        Whether NaN is admitted (e.g. NaN marks a missing label).

    Examples
    --------
    >>> import numpy as np
    >>> COUNT.describe()
    'integers in [0, ∞)'
    >>> POSITIVE.violations(np.array([1.0, 0.0, np.inf])).tolist()
    [False, True, True]
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    allow_nan: bool = False

    def describe(self) -> str:
        """The domain in words, for messages: ``"integers in [1, ∞)"``, ``"finite reals in
        (0, ∞)"``, ``"{0, 1}"``."""
        if self.integer and self.low == 0 and self.high == 1 and not (
                self.low_open or self.high_open):
            text = "{0, 1}"
        else:
            left = "(" if self.low_open or math.isinf(self.low) else "["
            right = ")" if self.high_open or math.isinf(self.high) else "]"
            ends = f"{left}{self.low:g}, {self.high:g}{right}".replace("inf", "∞")
            text = f"{'integers' if self.integer else 'finite reals'} in {ends}"
        return text + (" or NaN" if self.allow_nan else "")

    def violations(self, values: np.ndarray) -> np.ndarray:
        """Boolean mask of the entries of ``values`` (numpy, any real or bool dtype) outside
        the domain; same shape as ``values``."""
        values = np.asarray(values)
        if values.dtype == bool:
            values = values.astype(np.int8)
        with np.errstate(invalid="ignore"):
            as_float = values.astype(np.float64) if values.dtype.kind in "iu" else values
            nan = np.isnan(as_float)
            inside = np.isfinite(as_float) & self._within(values)
            if self.integer and values.dtype.kind == "f":
                inside &= np.floor(values) == values
        return ~(inside | nan) if self.allow_nan else ~inside

    def admits(self, values: np.ndarray) -> bool:
        """Whether every entry of ``values`` (numpy) lies in the domain: a min and a max
        (NaN propagates through both), plus one pass for the integrality of floats. Cheap
        enough for every eager step; :meth:`violations` finds the offenders afterwards."""
        values = np.asarray(values)
        if values.size == 0:
            return True
        if values.dtype == bool:
            values = values.view(np.uint8)  # False, True read as 0, 1 (no copy)
        if self.allow_nan and values.dtype.kind == "f":
            return not bool(self.violations(values).any())
        smallest, largest = values.min(), values.max()
        if values.dtype.kind == "f" and not (np.isfinite(smallest) and np.isfinite(largest)):
            return False
        if not (bool(self._within(smallest)) and bool(self._within(largest))):
            return False
        if self.integer and values.dtype.kind == "f":
            return bool(np.all(np.floor(values) == values))
        return True

    def holds(self, x: Array, xp: Any) -> Array:
        """Elementwise bool array: whether each entry of ``x`` lies in the domain, computed in
        the graph with array-API operations (safe under ``jax.jit``, ``tf.function``,
        ``torch.compile``)."""
        if xp.isdtype(x.dtype, "bool"):
            x = xp.astype(x, xp.int32)
        if xp.isdtype(x.dtype, "integral"):
            return self._integers_within(x, xp)
        ok = self._within(x)
        if xp.isdtype(x.dtype, "real floating"):
            ok = ok & xp.isfinite(x)
            if self.integer:
                ok = ok & (xp.floor(x) == x)
            if self.allow_nan:
                ok = ok | (x != x)
        return ok

    def _integers_within(self, x: Array, xp: Any) -> Array:
        """:meth:`holds` for an integer dtype: the ends as integers of ``x``'s range (some
        frameworks refuse to compare an integer tensor with a float)."""
        info = xp.iinfo(x.dtype)
        low = -math.inf if math.isinf(self.low) else (
            math.floor(self.low) + 1 if self.low_open else math.ceil(self.low))
        high = math.inf if math.isinf(self.high) else (
            math.ceil(self.high) - 1 if self.high_open else math.floor(self.high))
        ok = x == x
        if low > info.max or high < info.min or low > high:
            return ok & (x != x)  # no value of this dtype is inside
        if low > info.min:
            ok = ok & (x >= int(low))
        if high < info.max:
            ok = ok & (x <= int(high))
        return ok

    def _within(self, x: Any) -> Any:
        """The interval test on ``x`` (array or scalar); NaN fails it."""
        ok = None
        if not math.isinf(self.low) or self.low > 0:
            ok = (x > self.low) if self.low_open else (x >= self.low)
        if not math.isinf(self.high) or self.high < 0:
            upper = (x < self.high) if self.high_open else (x <= self.high)
            ok = upper if ok is None else ok & upper
        if ok is None:
            return x == x  # every real number; False for NaN
        return ok


def index_domain(size: int | None) -> Domain:
    """The domain of an index into a key space of ``size`` keys: integers in
    ``[0, size)`` (``[0, ∞)`` when the space has no size)."""
    return Domain(0, math.inf if size is None else size, high_open=True, integer=True)


#: Every real number (finite, not NaN).
REAL = FINITE = Domain()
#: Finite reals >= 0 (graded relevance).
NONNEGATIVE = Domain(low=0.0)
#: Finite reals > 0 (an ideal DCG, a normaliser).
POSITIVE = Domain(low=0.0, low_open=True)
#: Reals in [0, 1] (probabilities).
UNIT_INTERVAL = Domain(low=0.0, high=1.0)
#: Binary labels {0, 1}.
BINARY = Domain(low=0.0, high=1.0, integer=True)
#: Binary labels {0, 1}, NaN where a label is missing.
BINARY_OR_MISSING = Domain(low=0.0, high=1.0, integer=True, allow_nan=True)
#: Whole numbers >= 0.
COUNT = Domain(low=0.0, integer=True)
#: Whole numbers >= 1.
POSITIVE_COUNT = Domain(low=1.0, integer=True)


class Size(NamedTuple):
    """The size of a named dimension of the batch (e.g. ``Size("candidates")``: the columns of
    a ranking row), as an operand of a :class:`Relation`."""

    dim: str


#: The comparisons a :class:`Relation` may state.
RELATION_OPS = ("<", "<=", ">", ">=")


class Relation(NamedTuple):
    """A relation between inputs that every row of a batch must satisfy:
    ``left op right``, on the rows where ``where`` has an entry > 0 (every row if ``None``).

    Operands are input names (arrays of one shape, e.g. (queries,)), a :class:`Size` of a
    named dimension or a number. ``where`` names an input whose leading axes are the operands'
    and whose further axes are reduced ("the row has a positive"). A relation that names an
    optional input that was omitted is not checked. A relation between sizes and numbers only
    is static: it raises even inside a traced step (shapes are known when tracing).

    Attributes
    ----------
    left : str or Size
        The input (or a dimension's size) on the left.
    op : {"<", "<=", ">", ">="}
    right : str, Size or float
        An input name, a dimension's size or a constant.
    where : str or None
        An input: the relation must hold on the rows where it has an entry > 0.
    fix : str or None
        The sentence after "Fix:" in the error (default: "pass consistent inputs").

    Examples
    --------
    >>> Relation("num_relevant", "<=", "num_candidates").describe()
    'num_relevant <= num_candidates'
    >>> Relation("ideal_dcg", ">", 0.0, where="relevance").describe()
    'ideal_dcg > 0 on every row where relevance has an entry > 0'
    """

    left: str | Size
    op: str
    right: str | Size | float
    where: str | None = None
    fix: str | None = None

    def describe(self) -> str:
        """The relation in words, for messages."""
        where = f" on every row where {self.where} has an entry > 0" if self.where else ""
        return f"{_term(self.left)} {self.op} {_term(self.right)}{where}"

    def names(self) -> tuple[str, ...]:
        """The inputs this relation reads."""
        out = [term for term in (self.left, self.right) if isinstance(term, str)]
        if self.where is not None:
            out.append(self.where)
        return tuple(out)

    def compare(self, left: Any, right: Any) -> Any:
        """``left op right`` elementwise (numpy or any array-API arrays)."""
        if self.op == "<":
            return left < right
        if self.op == "<=":
            return left <= right
        if self.op == ">":
            return left > right
        return left >= right


def _term(term: str | Size | float) -> str:
    """One operand of a relation in words."""
    if isinstance(term, Size):
        return f"the {term.dim} width"
    return term if isinstance(term, str) else f"{term:g}"
