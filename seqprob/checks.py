"""One checker for integer and real arguments: every bad value raises
:class:`~seqprob.errors.InputError` naming the argument, the value and the limit.

Examples
--------
>>> check_int("steps", 3, low=1)
3
>>> check_int("steps", 0, low=1)
Traceback (most recent call last):
...
seqprob.errors.InputError: steps must be an integer >= 1, got 0
>>> check_real("lr", 1e-3, low=0, low_open=True)
0.001
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import InputError

__all__ = ["check_int", "check_real", "check_seed"]


def _range_text(kind: str, low, high, low_open: bool = False, high_open: bool = False) -> str:
    if low is not None and high is not None:
        return f"{kind} in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{kind} {'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{kind} {'<' if high_open else '<='} {high}"
    return kind


def check_int(name: str, value, low: int | None = None, high: int | None = None,
              whole_floats: bool = False) -> int:
    """``value`` as an ``int`` if it is an integer in ``[low, high]``.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object
        ``bool`` is refused (``True`` is not a count).
    low, high : int, optional
        Inclusive bounds.
    whole_floats : bool
        Also accept a float with an integer value (``3.0``).

    Returns
    -------
    int

    Raises
    ------
    InputError
        "NAME must be an integer >= LOW, got VALUE" (or "in [LOW, HIGH]"); ``.data`` holds
        ``value`` and ``limit``.
    """
    ok = not isinstance(value, bool) and (
        isinstance(value, numbers.Integral)
        or (whole_floats and isinstance(value, numbers.Real) and math.isfinite(value) and int(value) == value))
    if ok:
        value_int = int(value)
        ok = (low is None or value_int >= low) and (high is None or value_int <= high)
    if not ok:
        limit = low if low is not None else high
        raise InputError(f"{name} must be {_range_text('an integer', low, high)}, got {value!r}",
                         value=value, limit=limit)
    return value_int


def check_real(name: str, value, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite ``float`` in the interval from ``low`` to ``high``.

    Parameters
    ----------
    name : str
    value : object
        A real number (``bool`` and strings are refused); NaN and infinities are refused.
    low, high : float, optional
        Bounds, inclusive unless ``low_open`` / ``high_open``.

    Returns
    -------
    float

    Raises
    ------
    InputError
        "NAME must be a number > LOW, got VALUE" (or ">=", "in (LOW, HIGH]", ...).

    Examples
    --------
    >>> check_real("k", 0.5, low=0, high=1, low_open=True)
    0.5
    >>> check_real("k", float("nan"), low=0)
    Traceback (most recent call last):
    ...
    seqprob.errors.InputError: k must be a number >= 0, got nan
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        v = float(value)
        ok = ((low is None or (v > low if low_open else v >= low))
              and (high is None or (v < high if high_open else v <= high)))
    if not ok:
        limit = low if low is not None else high
        raise InputError(f"{name} must be {_range_text('a number', low, high, low_open, high_open)}, "
                         f"got {value!r}", value=value, limit=limit)
    return v


def check_seed(seed) -> np.random.Generator:
    """A ``numpy.random.Generator`` from ``seed`` (None, an integer >= 0, a SeedSequence, a
    BitGenerator or a Generator, as ``numpy.random.default_rng`` takes them); anything else is
    an :class:`InputError` naming it.

    Examples
    --------
    >>> float(check_seed(0).random()) == float(check_seed(0).random())
    True
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    seqprob.errors.InputError: seed must be None, an integer >= 0 or a SeedSequence, got -1 (...)
    """
    try:
        return np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise InputError(f"seed must be None, an integer >= 0 or a SeedSequence, got {seed!r} ({exc})",
                         value=seed) from None

