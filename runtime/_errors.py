"""Exceptions raised by the actor kernel."""

from __future__ import annotations

import math
from typing import TypeGuard


class ConveyorError(Exception):
    """Base class of every error conveyor raises on purpose."""


class ActorDeadError(ConveyorError):
    """The target actor has stopped, so the message or question cannot reach it."""


class AskTimeout(ConveyorError, TimeoutError):
    """No reply arrived within the timeout given to ``ask``."""


class MutableMessageError(ConveyorError, TypeError):
    """A message (or a part of it) is of a type that can be changed after sending."""


class ActorNameTaken(ConveyorError, ValueError):
    """``spawn`` was given a name that a live sibling already uses."""


class EscalatedError(ConveyorError):
    """A child escalated its failure; the original exception is ``__cause__``."""


QUOTE_LIMIT = 60
"""Most characters of a bad value that an error message quotes (then ``...`` and its length)."""
_LEADING_DIGITS = 20
_DIGITS_PER_BIT = math.log10(2)


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """Return ``repr(value)`` cut to a short prefix, for an error message that names a bad value.

    Never raises: an int too long for Python to print (past ``sys.get_int_max_str_digits()``)
    is quoted by its first digits and its length, and a failing ``__repr__`` by its type. A long
    value is cut, so an error made from it stays short (a 100,000-character name, say).
    """
    if isinstance(value, int) and value.bit_length() > 4 * _LEADING_DIGITS:
        return _quote_int(value)
    try:
        text = repr(value)
    except Exception as error:  # noqa: BLE001 - a user's __repr__ may raise anything; the error must still be told
        return f"<{type(value).__name__} (repr raised {type(error).__name__})>"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _quote_int(value: int) -> str:
    """A long int as its sign, first digits and digit count, without printing it whole."""
    magnitude = abs(value)
    estimate = int((magnitude.bit_length() - 1) * _DIGITS_PER_BIT) + 1  # the digit count, or one less
    cut = max(0, estimate - _LEADING_DIGITS)
    head = str(magnitude // 10**cut)  # 20 or 21 digits: the division's quotient is short, so it is cheap
    digits = len(head) + cut
    sign = "-" if value < 0 else ""
    if cut == 0:
        return f"{sign}{head}"
    return f"{sign}{head[:_LEADING_DIGITS]}... ({digits} digits)"


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """Return whether ``value`` is an int or float (not a bool) that is a finite float.

    An int too large for a float (``10**400``) is not: ``math.isfinite`` would raise
    ``OverflowError`` on it, and a time or duration made from it would overflow later.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
