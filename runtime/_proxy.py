"""Method-call style: typed proxies that ask ``MethodCall`` messages, and ``MethodActor`` that serves them.

As pykka's ``ActorProxy``, a proxy turns ``proxy.add(2)`` into a message to the actor and gives
back the answer; unlike it, a proxy shares nothing with the actor: each call is an immutable
``MethodCall`` asked of it, the method runs in the actor's own handler (one message at a time),
and only the immutable return value comes back. The interface is a class the caller names (a
``typing.Protocol`` of the methods), so mypy types every call; attribute reads are not proxied.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import FunctionType
from typing import Any, ClassVar, TypeVar, final

import attrs

from ._actor import Actor
from ._errors import ActorDeadError, is_finite_number, quote
from ._immutability import SCALAR_TYPES, ensure_immutable
from ._ref import ActorRef

T = TypeVar("T")


def _method_name(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value.isidentifier() or value.startswith("_"):
        msg = ("MethodCall.method must be the name of a public method (an identifier not starting with '_'), "
               f"got {quote(value)}")
        raise ValueError(msg)


def _positional(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not tuple:
        msg = f"MethodCall.args must be a tuple of the positional arguments, got {quote(value)}"
        raise TypeError(msg)


def _keywords(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(
        type(pair) is tuple and len(pair) == 2 and isinstance(pair[0], str) for pair in value
    ):
        msg = f"MethodCall.kwargs must be a tuple of (name, value) pairs, got {quote(value)}"
        raise TypeError(msg)


@final
@attrs.frozen
class MethodCall:
    """Call ``method(*args, **dict(kwargs))`` on a ``MethodActor``; the answer is what the method returns.

    A proxy builds these; an actor may also send one with ``ctx.send`` (it then receives the
    return value as a message).
    """

    method: str = attrs.field(validator=_method_name)
    args: tuple[Any, ...] = attrs.field(default=(), validator=_positional)
    kwargs: tuple[tuple[str, Any], ...] = attrs.field(default=(), validator=_keywords)


def _public_functions(cls: type, inherited: frozenset[str]) -> frozenset[str]:
    """Names of ``cls``'s public methods (plain, static or class methods) not in ``inherited``."""
    return frozenset(
        name
        for name in dir(cls)
        if not name.startswith("_")
        and name not in inherited
        and isinstance(inspect.getattr_static(cls, name), (FunctionType, staticmethod, classmethod))
    )


class MethodActor(Actor):
    """An actor whose public methods are called through typed proxies (``ref.proxy(Interface)``).

    A ``MethodCall`` runs the named method inside the actor's handler (so the method must not
    block, as any handler) and answers with what it returns, which must be immutable. When the
    method raises during an ask, the asker's ``ask`` raises that error and the actor keeps its
    state, as in pykka (the caller was told, so it is not a failure of the actor); a call nobody
    asked (``tell``) that raises goes to supervision like any handler failure. Other messages go to
    ``receive`` as usual: override it, and hand ``MethodCall`` on to ``super().receive(message)``.
    """

    proxy_methods: ClassVar[frozenset[str]] = frozenset()
    """What a proxy may call: the public methods the subclass defines (computed per class)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.proxy_methods = _public_functions(cls, _MACHINERY)

    def receive(self, message: Any) -> None:
        """Serve a ``MethodCall``; anything else is refused as by ``Actor.receive``."""
        if type(message) is MethodCall:
            self._serve(message)
        else:
            super().receive(message)

    def _serve(self, call: MethodCall) -> None:
        ctx = self.ctx
        try:
            if call.method not in self.proxy_methods:
                offered = ", ".join(sorted(self.proxy_methods)) or "none"
                msg = f"{type(self).__qualname__} has no method {call.method!r} to call (its methods: {offered})"
                raise AttributeError(msg)
            result = getattr(self, call.method)(*call.args, **dict(call.kwargs))
            if type(result) not in SCALAR_TYPES:
                ensure_immutable(result)
        except Exception as error:
            if ctx.fail_ask(error):
                return
            raise
        if ctx.sender is not None:
            ctx.reply(result)


_MACHINERY = frozenset(dir(MethodActor))
"""Members every actor has (``receive``, ``on_start``, ...): never callable through a proxy."""


def _interface_members(interface: type) -> tuple[dict[str, Callable[..., Any]], frozenset[str]]:
    """The public methods an interface declares, by name, and its other public members (attributes).

    The interface may be the actor's class itself, as in pykka (on threads and in the simulator,
    where its plain methods match the proxy's calls): what ``Actor`` itself defines is left out.
    """
    methods: dict[str, Callable[..., Any]] = {}
    attributes: set[str] = set()
    for klass in reversed(interface.__mro__):
        if klass in (object, Actor, MethodActor) or klass.__module__ in ("typing", "typing_extensions", "abc"):
            continue  # Protocol, Generic and ABC's own machinery, and an actor class's kernel members
        attributes.update(name for name in vars(klass).get("__annotations__", {}) if not name.startswith("_"))
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(function, FunctionType):
                methods[name] = function
                attributes.discard(name)
            else:
                methods.pop(name, None)
                attributes.add(name)
    if issubclass(interface, Actor):  # its own receive, on_start, ... are not for callers
        methods = {name: function for name, function in methods.items() if name not in _MACHINERY}
    return methods, frozenset(attributes)


def _check_interface(
    system_name: str, interface: object, awaitable: bool
) -> tuple[type, frozenset[str], frozenset[str]]:
    """The interface as a class, its method names and attribute names, checked against the system's kind of ask."""
    if not isinstance(interface, type):
        msg = f"proxy() interface must be a class (a typing.Protocol of the actor's methods), got {quote(interface)}"
        raise TypeError(msg)
    methods, attributes = _interface_members(interface)
    if not methods:
        msg = f"proxy() interface {interface.__qualname__} declares no public method to call"
        raise TypeError(msg)
    for name, function in sorted(methods.items()):
        if inspect.iscoroutinefunction(function) != awaitable:
            if awaitable:
                msg = (f"{system_name}.proxy(): {interface.__qualname__}.{name} must be declared `async def`: on "
                       f"{system_name} a proxy call returns an awaitable (declare the interface's methods async)")
            else:
                msg = (f"{system_name}.proxy(): {interface.__qualname__}.{name} must be a plain `def`: on "
                       f"{system_name} a proxy call returns the answer itself")
            raise TypeError(msg)
    return interface, frozenset(methods), attributes


def _check_actor(ref: ActorRef, interface: type, methods: frozenset[str]) -> None:
    """The actor behind ``ref`` serves every method of ``interface`` (an actor of an earlier process is not checked)."""
    actor = getattr(ref.cell, "actor", None)
    if actor is None:
        return
    if not isinstance(actor, MethodActor):
        msg = f"{ref.path} runs {type(actor).__qualname__}, not a MethodActor: subclass MethodActor to serve calls"
        raise TypeError(msg)
    missing = sorted(methods - type(actor).proxy_methods)
    if missing:
        msg = (f"{ref.path} ({type(actor).__qualname__}) does not define {', '.join(missing)} of "
               f"{interface.__qualname__}; a proxy can call only public methods the actor's class defines")
        raise TypeError(msg)


def make_proxy(system_name: str, awaitable: bool, ref: ActorRef, interface: object, timeout: float) -> Any:
    """A proxy of ``ref`` typed as ``interface``: each method call asks ``ref`` a ``MethodCall``.

    Raises:
        TypeError: ``interface`` is not a class with public methods, its methods are not ``async
            def`` on a system whose ask is awaited (or are on one whose ask is not), or the actor
            is not a ``MethodActor`` that defines them all.
        ValueError: ``timeout`` is not a positive number of seconds.
        ActorDeadError: the actor has stopped.
    """
    if type(ref) is not ActorRef:
        msg = f"proxy() target must be an ActorRef, got {type(ref).__qualname__}"
        raise TypeError(msg)
    if not is_finite_number(timeout) or timeout <= 0:
        msg = f"proxy() timeout must be a positive number of seconds, got {quote(timeout)}"
        raise ValueError(msg)
    checked, methods, attributes = _check_interface(system_name, interface, awaitable)
    if not ref.is_alive:
        msg = f"{ref.path} has stopped; cannot make a proxy of it"
        raise ActorDeadError(msg)
    _check_actor(ref, checked, methods)
    return _Proxy(ref, checked, methods, attributes, float(timeout))


def _caller(ref: ActorRef, qualname: str, name: str, timeout: float) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return ref.ask(MethodCall(name, args, tuple(kwargs.items())), timeout)

    call.__name__ = name
    call.__qualname__ = qualname
    return call


@final
class _Proxy:
    """Stands for an actor as its interface: ``proxy.method(...)`` asks the actor and returns the ask's result."""

    __slots__ = ("_attributes", "_calls", "_interface", "_ref")
    _attributes: frozenset[str]
    _calls: dict[str, Callable[..., Any]]
    _interface: type
    _ref: ActorRef

    def __init__(
        self, ref: ActorRef, interface: type, methods: frozenset[str], attributes: frozenset[str], timeout: float
    ) -> None:
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_interface", interface)
        object.__setattr__(self, "_attributes", attributes)
        calls = {name: _caller(ref, f"{interface.__qualname__}.{name}", name, timeout) for name in methods}
        object.__setattr__(self, "_calls", calls)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        call = self._calls.get(name)
        if call is not None:
            return call
        owner = self._interface.__qualname__
        if name in self._attributes:
            msg = (f"{owner}.{name} is an attribute: a proxy calls methods only, it does not read the actor's "
                   "state (declare a method that returns it)")
        else:
            msg = f"{owner} declares no method {name!r} (a proxy calls only the interface's public methods)"
        raise AttributeError(msg)

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"a proxy of {self._ref.path} cannot set {name!r}: an actor's state changes only through its methods"
        raise AttributeError(msg)

    def __repr__(self) -> str:
        return f"<proxy {self._interface.__qualname__} of {self._ref.path}>"

