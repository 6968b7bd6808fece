"""The one place that decides whether a value may travel between actors.

Messages cross actor boundaries without copying, so anything an actor can still
change after sending would become shared mutable state. A message may be: an
attrs frozen instance whose field values are themselves allowed, a tuple or
frozenset of allowed values, str, bytes, int, float, complex, bool, None, an
``enum.Enum`` member, or an ``ActorRef``.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable
from typing import Any

import attrs
from attr._make import _frozen_setattrs  # attrs has no public "is frozen" test

from ._errors import MutableMessageError

_SCALARS: set[type] = {str, bytes, int, float, complex, bool, type(None)}
SCALAR_TYPES = _SCALARS
"""Types whose instances are immutable leaves (read-only view for fast paths)."""
# Per class: a getter returning the tuple of field values, for attrs frozen classes.
_FROZEN_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_REFUSED: set[type] = set()


def register_immutable_type(cls: type) -> None:
    """Declare instances of ``cls`` immutable leaves (e.g. ``ActorRef``)."""
    _SCALARS.add(cls)


def _frozen_getter(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    getter = _FROZEN_GETTERS.get(cls)
    if getter is not None:
        return getter
    if cls in _REFUSED or not attrs.has(cls):
        return None
    params = attrs.fields(cls)
    frozen = getattr(cls, "__setattr__", None) is _frozen_setattrs
    if not frozen:
        _REFUSED.add(cls)
        return None
    names = [a.name for a in params]
    _FIELD_NAMES[cls] = tuple(names)
    if not names:

        def getter(_: Any) -> tuple[Any, ...]:
            return ()

    else:
        # attrgetter with two or more names returns a tuple, all in C; a lone field is
        # simply read twice rather than wrapped in a Python function.
        getter = operator.attrgetter(*(names * 2 if len(names) == 1 else names))
    _FROZEN_GETTERS[cls] = getter
    return getter


def ensure_immutable(message: object, *, _path: str = "message") -> None:
    """Raise ``MutableMessageError`` (a ``TypeError``) unless ``message`` is deeply immutable.

    Args:
        message: the value about to be sent.

    Raises:
        MutableMessageError: naming the offending type and where it sits in the message.
    """
    cls = type(message)
    if cls in _SCALARS:
        return
    getter = _FROZEN_GETTERS.get(cls) or _frozen_getter(cls)
    if getter is not None:
        for index, value in enumerate(getter(message)):
            if type(value) not in _SCALARS:
                names = _FIELD_NAMES[cls]
                ensure_immutable(value, _path=f"{_path}.{names[index % len(names)]}")
        return
    if isinstance(message, (tuple, frozenset)):
        for index, value in enumerate(message):
            if type(value) not in _SCALARS:
                ensure_immutable(value, _path=f"{_path}[{index}]")
        return
    if isinstance(message, enum.Enum):
        _SCALARS.add(cls)
        return
    if isinstance(message, (str, bytes, int, float)) and not hasattr(message, "__dict__"):
        return  # a slotted subclass of a builtin immutable
    allowed = "attrs frozen instance, tuple, frozenset, str, bytes, int, float, bool, None, Enum or ActorRef"
    msg = (
        f"{_path} is a {cls.__module__}.{cls.__qualname__}, which can change after it is sent; "
        f"messages must be immutable ({allowed}). "
        "Use @attrs.frozen with tuple/frozenset fields instead of list/set/dict."
    )
    raise MutableMessageError(msg)
