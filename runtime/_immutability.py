"""The one place that decides whether a value may travel between actors.

Messages cross actor boundaries without copying, so anything an actor can still
change after sending would become shared mutable state. A message may be: an
attrs frozen instance whose field values are themselves allowed, a tuple or
frozenset of allowed values, str, bytes, int, float, complex, bool, None, an
``enum.Enum`` member, or an ``ActorRef``.

The check runs on every send, so it has a fast path: per attrs class, one C-level
``attrgetter`` fetches the field values and a set lookup clears each scalar one.
Anything else takes the slow path, which walks the value and names the culprit.
"""

from __future__ import annotations

import enum
import inspect
import operator
from collections.abc import Callable
from typing import Any, TypeVar, cast

import attrs
from attr._make import _frozen_setattrs  # attrs has no public "is frozen" test

from ._errors import MutableMessageError

_SCALARS: set[type] = {str, bytes, int, float, complex, bool, type(None)}
SCALAR_TYPES = _SCALARS
"""Types whose instances are immutable leaves (read-only view for fast paths)."""
_ONE_FIELD: dict[type, Callable[[Any], Any]] = {}
_FIELDS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_REFUSED: set[type] = set()
_T = TypeVar("_T")
_ALLOWED = "attrs frozen instance, tuple, frozenset, str, bytes, int, float, bool, None, Enum or ActorRef"


def register_immutable_type(cls: type) -> None:
    """Declare instances of ``cls`` immutable leaves, so sends skip looking inside them.

    For identity objects (``ActorRef``) and for frozen classes whose validators already
    guarantee every field is immutable (the broker's ``Message``).
    """
    _SCALARS.add(cls)


def checked_when_built(cls: type[_T]) -> type[_T]:
    """Class decorator for a frozen attrs message (put it above ``attrs.frozen``): each instance
    is checked once when built, and sends then treat it as a leaf.

    For messages sent often, or several times, or inside tuples: a send need not walk a
    value that could not have been built mutable.

    Raises:
        TypeError: ``cls`` is not a frozen attrs class with fields.
        MutableMessageError: (when an instance is built) a field holds a mutable value.
    """
    names = _learn_attrs_class(cls)
    if not names:
        msg = f"checked_when_built needs a frozen attrs class with fields, got {cls.__qualname__}"
        raise TypeError(msg)
    one = _ONE_FIELD.get(cls)
    many = _FIELDS.get(cls)
    build = cls.__init__

    def refuse(self: Any) -> None:
        for name in names:
            _walk(getattr(self, name), f"{cls.__qualname__}.{name}")  # raises, naming the field

    def build_and_check(self: Any, *args: Any, **kwargs: Any) -> None:
        build(self, *args, **kwargs)
        for value in (one(self),) if one is not None else many(self):  # type: ignore[misc]
            if type(value) not in _SCALARS and not _is_immutable(value):
                refuse(self)

    fused = _fused_init(build, names, refuse)
    if fused is None:
        build_and_check.__doc__ = build.__doc__
        fused = build_and_check
    cls.__init__ = fused  # type: ignore[method-assign]
    _SCALARS.add(cls)
    return cls


def _fused_init(build: Callable[..., None], names: tuple[str, ...],
                refuse: Callable[[Any], None]) -> Callable[..., None] | None:
    """attrs' generated ``__init__`` with the field checks appended, as one function; None if its source is unknown.

    The same checks as ``checked_when_built``'s wrapper, without the wrapper's call and argument
    forwarding, which cost as much as the attrs ``__init__`` itself (0.94 against 0.41 us for three fields).
    """
    try:
        source = inspect.getsource(build)
    except (OSError, TypeError):
        return None
    if not source.startswith("def __init__(self") or not all(name.isidentifier() for name in names):
        return None
    checks = " or ".join(f"(type(self.{name}) not in _conveyor_scalars and not _conveyor_immutable(self.{name}))"
                         for name in names)
    source = f"{source.rstrip()}\n    if {checks}:\n        _conveyor_refuse(self)\n"
    namespace: dict[str, Any] = dict(build.__globals__)
    namespace.update(_conveyor_scalars=_SCALARS, _conveyor_immutable=_is_immutable, _conveyor_refuse=refuse)
    try:
        exec(compile(source, f"<checked_when_built {build.__qualname__}>", "exec"), namespace)
    except SyntaxError:
        return None
    fused = namespace["__init__"]
    fused.__doc__ = build.__doc__
    fused.__qualname__ = build.__qualname__
    fused.__defaults__ = build.__defaults__
    fused.__kwdefaults__ = build.__kwdefaults__
    return cast("Callable[..., None]", fused)


def ensure_immutable(message: object) -> None:
    """Raise ``MutableMessageError`` (a ``TypeError``) unless ``message`` is deeply immutable.

    Raises:
        MutableMessageError: naming the offending type and where it sits in the message.
    """
    if type(message) in _SCALARS or _is_immutable(message):
        return
    _walk(message, "message")  # only to name the culprit


def _is_immutable(value: object) -> bool:
    """The fast check: no strings built, recursion only into nested values."""
    cls = type(value)
    if cls in _SCALARS:
        return True
    one = _ONE_FIELD.get(cls)
    if one is not None:
        return _is_immutable(one(value))
    values = _FIELDS.get(cls)
    if values is not None:
        items: Any = values(value)
    elif cls is tuple or cls is frozenset:
        items = value
    elif cls in _REFUSED:
        return False
    elif _learn_attrs_class(cls) is not None:
        return _is_immutable(value)
    elif isinstance(value, (tuple, frozenset)):
        items = value
    elif isinstance(value, enum.Enum):
        _SCALARS.add(cls)
        return True
    else:
        return isinstance(value, (str, bytes, int, float)) and not hasattr(value, "__dict__")
    for item in items:  # noqa: SIM110 - a plain loop is measurably cheaper than all() over a generator
        if type(item) not in _SCALARS and not _is_immutable(item):
            return False
    return True


is_immutable = _is_immutable
"""True when ``value`` is deeply immutable; builds no strings (``ensure_immutable`` names the culprit)."""


def _learn_attrs_class(cls: type) -> tuple[str, ...] | None:
    """Cache the field getter of a frozen attrs class; None if ``cls`` is not one."""
    names = _FIELD_NAMES.get(cls)
    if names is not None:
        return names
    if cls in _REFUSED:
        return None
    if not attrs.has(cls) or getattr(cls, "__setattr__", None) is not _frozen_setattrs:
        if not issubclass(cls, (tuple, frozenset, enum.Enum)):
            _REFUSED.add(cls)  # remembered: the fast path asks no more
        return None
    names = tuple(a.name for a in attrs.fields(cls))
    _FIELD_NAMES[cls] = names
    if len(names) == 1:
        _ONE_FIELD[cls] = operator.attrgetter(names[0])
    elif names:
        _FIELDS[cls] = operator.attrgetter(*names)
    else:
        _FIELDS[cls] = lambda _: ()
    return names


def _walk(value: object, path: str) -> None:
    cls = type(value)
    if cls in _SCALARS:
        return
    names = _learn_attrs_class(cls)
    if names is not None:
        for name in names:
            _walk(getattr(value, name), f"{path}.{name}")
        return
    if isinstance(value, (tuple, frozenset)):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]")
        return
    if isinstance(value, enum.Enum):
        _SCALARS.add(cls)
        return
    if isinstance(value, (str, bytes, int, float)) and not hasattr(value, "__dict__"):
        return  # a slotted subclass of a builtin immutable
    msg = (
        f"{path} is a {cls.__module__}.{cls.__qualname__}, which can change after it is sent; "
        f"messages must be immutable ({_ALLOWED}). "
        "Use @attrs.frozen with tuple/frozenset fields instead of list/set/dict."
    )
    raise MutableMessageError(msg)


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[object, object], None], ...]:
    """The slot setters of a frozen attrs class's fields, which must be ``names`` (all of them, in order).

    For builders that make a message from values known good without its checks (one per message on a
    hot path): they set each field as attrs' own ``__init__`` does, a third cheaper than
    ``object.__setattr__``. Checking the names when the builder is defined keeps it from leaving a
    field added later unset.

    Raises:
        TypeError: ``names`` are not all of ``cls``'s fields, in order.
    """
    fields = tuple(field.name for field in attrs.fields(cls))
    if fields != names:
        msg = f"{cls.__qualname__} has the fields {fields}; its unchecked builder sets {names}"
        raise TypeError(msg)
    return tuple(cls.__dict__[name].__set__ for name in names)


def unchecked_builder(cls: type[_T], names: tuple[str, ...]) -> Callable[..., _T]:
    """A function ``build(*values)`` that makes a ``cls`` from its fields' values, in order, without checks.

    For values known good on a hot path (an entry the queue already holds, a decoded protocol buffer):
    compiled as one function that sets each slot, it costs what an unrolled builder does, and a loop
    over ``slot_setters`` would not. ``names`` must be all of ``cls``'s fields, in order
    (``slot_setters``), so that a field added later is never left unset.

    Raises:
        TypeError: ``names`` are not all of ``cls``'s fields, in order.
    """
    setters = slot_setters(cls, names)
    arguments = ", ".join(f"v{index}" for index in range(len(names)))
    body = "".join(f"    s{index}(made, v{index})\n" for index in range(len(names)))
    source = f"def build({arguments}):\n    made = new(cls)\n{body}    return made\n"
    namespace: dict[str, Any] = {f"s{index}": setter for index, setter in enumerate(setters)}
    namespace.update(new=object.__new__, cls=cls)
    exec(compile(source, f"<unchecked_builder {cls.__qualname__}>", "exec"), namespace)
    build = namespace["build"]
    build.__qualname__ = f"unchecked {cls.__qualname__}"
    build.__doc__ = f"A {cls.__qualname__} from {', '.join(names)}, unchecked (``unchecked_builder``)."
    return cast("Callable[..., _T]", build)

