"""The checks of scalar arguments (hyper-parameters of losses, optimizers, metrics, samplers
and data sets), written once.

Every message names the received value, the expectation and a fix, and a check raises before
anything is built or changed. Numbers are Python and numpy scalars and 0-d arrays of any
framework; bools are never numbers, and strings never flags.

>>> check_interval("SOAP", "clip_value", 2, low=0.0, low_open=True, high_open=False)
2.0
>>> try:
...     check_flag("SGD", "nesterov", "no")
... except TypeError as error:
...     print(error)
SGD: nesterov='no' (type str); expected True or False. Fix: pass nesterov=True or
nesterov=False.
"""

from __future__ import annotations

import math
import operator
from typing import Any

__all__ = ["check_interval", "check_count", "check_positive", "check_fraction",
           "check_choice", "check_flag", "real_number"]

# The one place for the checks of constructor and function arguments (losses, metrics,
# samplers, data sets, optimizers): every message names the received value, the expectation
# and a fix, and a check raises before anything is built or changed.


def real_number(value: object) -> float | None:
    """``value`` as a float if it is a real number: a Python or numpy scalar or a 0-d array
    of any framework; not a bool, a string, an array with axes, a complex number or NaN.
    Infinity is returned as is: the interval decides whether it is admitted."""
    if isinstance(value, bool | str | bytes) or getattr(value, "ndim", 0) != 0:
        return None
    if "bool" in str(getattr(value, "dtype", "")):  # numpy, torch, TF and JAX bool scalars
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _interval_text(low: float, high: float, low_open: bool, high_open: bool) -> str:
    text = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return text.replace("inf", "∞")


def check_interval(
    owner: str, name: str, value: object, *, low: float, high: float = math.inf,
    low_open: bool = False, high_open: bool = True, expected: str | None = None,
    fix: str | None = None, type_error: type[Exception] = TypeError,
) -> float:
    """Return ``value`` as a float if it is a real number in the interval; else raise.

    The interval runs from ``low`` to ``high``, each end open or closed. Infinity passes
    only through a closed infinite end (``high=math.inf, high_open=False`` admits
    ``float("inf")``, e.g. a clipping threshold that disables clipping); the default open
    ``high=math.inf`` requires a finite number. A Python float comes back unchanged
    (``0.001`` stays ``0.001``); ints, numpy scalars and 0-d arrays are converted. Its
    signature and messages are those of the optimizers' ``check_number``, so it can replace
    that one.

    Parameters
    ----------
    owner, name : str
        Who checks (``"APLoss"``) and the argument's name, both shown in the message.
    value : object
        The received value.
    low, high : float
        The interval's ends (``high`` defaults to infinity).
    low_open, high_open : bool
        Whether each end is excluded (default ``[low, high)``).
    expected : str, optional
        What the message says is expected (default ``"a number in [low, high)"``).
    fix : str, optional
        The sentence after "Fix:" (default ``"pass <name> in [low, high)"``).
    type_error : exception class, default TypeError
        Raised for a value that is not a real number (a string, a bool, an array with axes,
        NaN). Validators whose contract is "ValueError for any bad value" pass ValueError.

    Raises
    ------
    TypeError (or ``type_error``)
        ``value`` is not a real number.
    ValueError
        ``value`` lies outside the interval.
    """
    interval = _interval_text(low, high, low_open, high_open)
    fix = fix or f"pass {name} in {interval}"
    number = real_number(value)
    if number is None:
        raise type_error(
            f"{owner}: {name}={value!r} (type {type(value).__name__}); expected "
            f"{expected or 'a real number in ' + interval}. Fix: {fix}."
        )
    above = number > low or (not low_open and number == low)
    below = number < high or (not high_open and number == high)
    if not (above and below):
        raise ValueError(
            f"{owner}: {name}={value!r}; expected {expected or 'a number in ' + interval}. "
            f"Fix: {fix}."
        )
    return value if type(value) is float else number


def _integer(value: object) -> int | None:
    """``value`` as an int if it is an integer: Python or numpy integers and 0-d integer
    arrays of any framework (``operator.index``); bools and floats are refused."""
    if isinstance(value, bool) or "bool" in str(getattr(value, "dtype", "")):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def check_count(owner: str, name: str, value: object, *, minimum: int = 1,
                fix: str | None = None, type_error: type[Exception] = TypeError) -> int:
    """Return ``value`` as int if it is an integer >= ``minimum``; else raise.

    Integers are Python and numpy integers and 0-d integer arrays (e.g. from ``np.load``);
    bools, floats (``10.0`` included) and strings are refused. ``fix`` replaces the default
    sentence after "Fix:"; ``type_error`` the exception for a non-integer (as in
    :func:`check_interval`).

    Raises
    ------
    TypeError (or ``type_error``)
        ``value`` is not an integer.
    ValueError
        ``value`` is smaller than ``minimum``.
    """
    number = _integer(value)
    if number is None:
        raise type_error(
            f"{owner}: {name}={value!r} (type {type(value).__name__}); expected an integer >= "
            f"{minimum}. Fix: {fix or f'pass a whole number, e.g. {name}=int({name})'}."
        )
    if number < minimum:
        raise ValueError(
            f"{owner}: {name}={value!r}; expected an integer >= {minimum}. "
            f"Fix: {fix or f'pass {name} >= {minimum}'}."
        )
    return int(number)


def check_positive(owner: str, name: str, value: object, *, allow_zero: bool = False,
                   fix: str | None = None) -> float:
    """Return ``value`` as float if it is a finite number > 0 (or >= 0); else ValueError
    (also for a value that is not a number: the losses' hyper-parameter contract)."""
    bound = ">= 0" if allow_zero else "> 0"
    return check_interval(
        owner, name, value, low=0.0, low_open=not allow_zero, expected=f"a finite number {bound}",
        fix=fix or f"pass {name} as a finite number {bound}", type_error=ValueError,
    )


def check_fraction(owner: str, name: str, value: object, *, closed_low: bool = False,
                   fix: str | None = None) -> float:
    """Return ``value`` as float if it lies in (0, 1] (or [0, 1]); else ValueError (also for
    a value that is not a number)."""
    return check_interval(owner, name, value, low=0.0, high=1.0, low_open=not closed_low,
                          high_open=False, fix=fix, type_error=ValueError)


def check_choice(owner: str, name: str, value: object, choices: tuple[Any, ...], *,
                 fix: str | None = None) -> Any:
    """Return the entry of ``choices`` that ``value`` names; else ValueError listing them.

    Choices are strings (matched by equality, so a ``numpy.str_`` matches and the plain
    string comes back) or other constants such as ``None`` (matched by identity or equality
    of the same type, so ``1`` never matches ``True``).
    """
    for choice in choices:
        if value is choice or (
            isinstance(value, str) and isinstance(choice, str) and value == choice
        ) or (not isinstance(choice, str) and type(value) is type(choice) and value == choice):
            return choice
    raise ValueError(
        f"{owner}: {name}={value!r}; expected one of {choices}. "
        f"Fix: {fix or f'pass {name}={choices[0]!r}, for example'}."
    )


def check_flag(owner: str, name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (numpy bools too); a string such as ``"False"`` is
    refused rather than read as True."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(
        f"{owner}: {name}={value!r} (type {type(value).__name__}); expected True or False. "
        f"Fix: pass {name}=True or {name}=False."
    )
