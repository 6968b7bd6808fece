"""attrs validators for message and settings fields: the one home of the checks every package makes.

Each function is an attrs field validator (``attrs.field(validator=positive_int)``) and raises
``ValueError("Owner.field must be <what it may be>, got <the value, quoted short>")``, the owner
being the class under construction. ``fail`` raises the same error from a hand-written check,
as a message built on a hot path makes in its ``__attrs_post_init__`` (one call fewer per field).
Plain functions, not validator objects: a message is validated each time one is built.
"""

from __future__ import annotations

from typing import Any, NoReturn

import attrs

from ._errors import is_finite_number, quote

__all__ = [
    "fail",
    "non_empty_str",
    "non_negative_int",
    "non_negative_number",
    "non_negative_seconds",
    "optional_non_empty_str",
    "optional_non_negative_seconds",
    "optional_positive_int",
    "optional_positive_seconds",
    "positive_int",
    "positive_number",
    "positive_seconds",
]


def fail(owner: str, field: str, allowed: str, value: object) -> NoReturn:
    """Raise ``ValueError("<owner>.<field> must be <allowed>, got <value>")``, the value quoted short."""
    msg = f"{owner}.{field} must be {allowed}, got {quote(value)}"
    raise ValueError(msg)


def positive_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An int >= 1 (not a bool)."""
    if type(value) is not int or value < 1:
        fail(type(instance).__name__, attribute.name, "an int >= 1", value)


def non_negative_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An int >= 0 (not a bool)."""
    if type(value) is not int or value < 0:
        fail(type(instance).__name__, attribute.name, "an int >= 0", value)


def positive_number(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A finite int or float > 0 (not a bool)."""
    if not is_finite_number(value) or value <= 0:
        fail(type(instance).__name__, attribute.name, "a finite number > 0", value)


def non_negative_number(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A finite int or float >= 0 (not a bool)."""
    if not is_finite_number(value) or value < 0:
        fail(type(instance).__name__, attribute.name, "a finite number >= 0", value)


def positive_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A duration: a finite int or float > 0 (not a bool)."""
    if not is_finite_number(value) or value <= 0:
        fail(type(instance).__name__, attribute.name, "a finite number of seconds > 0", value)


def non_negative_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A duration or a time: a finite int or float >= 0 (not a bool)."""
    if not is_finite_number(value) or value < 0:
        fail(type(instance).__name__, attribute.name, "a finite number of seconds >= 0", value)


def non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A str that is not empty."""
    if not isinstance(value, str) or not value:
        fail(type(instance).__name__, attribute.name, "a non-empty str", value)


def optional_positive_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """None, or an int >= 1 (the error names the int only: None is the default, seldom passed)."""
    if value is not None:
        positive_int(instance, attribute, value)


def optional_positive_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """None, or a finite number of seconds > 0."""
    if value is not None and (not is_finite_number(value) or value <= 0):
        fail(type(instance).__name__, attribute.name, "None or a finite number of seconds > 0", value)


def optional_non_negative_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """None, or a finite number of seconds >= 0."""
    if value is not None and (not is_finite_number(value) or value < 0):
        fail(type(instance).__name__, attribute.name, "None or a finite number of seconds >= 0", value)


def optional_non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """None, or a str that is not empty."""
    if value is not None and (not isinstance(value, str) or not value):
        fail(type(instance).__name__, attribute.name, "None or a non-empty str", value)
