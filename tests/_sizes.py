"""The sizes the harness's drawers draw: a few fixed values, every value free when thorough.

Eager JAX compiles every primitive once per new input shape (about 10-30 ms each, a hundred
and more per loss step); a drawer that drew its batch size from a free range paid those
compilations again at nearly every step of every example. Drawing each size, or each whole
shape, from a small fixed set keeps the properties drawn from strategies (the smallest size
and the largest are always among the choices, so one-element batches, one-key tables and
duplicate keys still occur) while the compiled primitives are reused across examples, steps
and losses: tests/test_cross_backend.py took 217 s with the former free sizes and 103 s with
these (3 examples, the XLA flags of tests/conftest.py, the same machine load; 361 s before
both changes). The profile ``HYPOTHESIS_PROFILE=thorough`` (500 examples) draws every size in
its whole range again, one dimension at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import settings
from hypothesis import strategies as st

#: Every size of the key spaces (the tables' rows) the harness builds: one key (every index a
#: duplicate), a few, and MAX_KEYS.
MAX_KEYS = 12
KEY_SPACES = (1, 4, MAX_KEYS)


def _free() -> bool:
    """Whether sizes are drawn from their whole ranges (the on-demand "thorough" profile)."""
    return settings.get_current_profile_name() == "thorough"


def draw_size(draw, choices: Sequence[int], *, label: str) -> int:
    """One size from ``choices`` (sorted, smallest and largest included); under the
    "thorough" profile any integer between the smallest and the largest."""
    if _free():
        return draw(st.integers(min(choices), max(choices)), label=label)
    return draw(st.sampled_from(tuple(choices)), label=label)


def draw_shape(draw, choices: Sequence[tuple[int, ...]], *, label: str) -> tuple[int, ...]:
    """One whole shape from ``choices`` (several dimensions drawn together, so that a batch of
    Q x P x M has a few signatures, not the product of every dimension's sizes); under the
    "thorough" profile each dimension independently within its smallest and largest value."""
    if _free():
        return tuple(draw(st.integers(min(c[i] for c in choices), max(c[i] for c in choices)),
                          label=f"{label}[{i}]") for i in range(len(choices[0])))
    return draw(st.sampled_from(tuple(choices)), label=label)
