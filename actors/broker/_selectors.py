"""Declarative message selectors: filters on message headers, held as data and never evaluated as code.

A selector is a small tree of frozen values. Leaves test one header (``HeaderEquals``,
``HeaderIn``, ``HeaderExists``) or nothing at all (``MatchAll``); ``AllOf``, ``AnyOf`` and
``Not`` combine them. ``parse_selector`` builds a tree from JSON-like data and
``to_data`` turns it back, so selectors can travel in messages and config files.

Equality of header values is type-aware, the same in ``matches`` and in ``==``:

* a bool equals only a bool (``True`` is not ``1``);
* an int or float equals an int or float of the same numeric value (``1 == 1.0``);
* a str equals only a str (``"1"`` is not ``1``).

``NaN`` equals nothing, so a selector may not hold it. Trees are bounded (``MAX_DEPTH``,
``MAX_NODES``) when they go through ``parse_selector`` or ``check_limits``, so the cost of
``matches`` is bounded too: a ``HeaderIn`` is one hash lookup however many values it holds.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Iterable, Mapping
from typing import Final, TypeAlias, final

import attrs

from conveyor.runtime import ConveyorError, quote

HeaderValue: TypeAlias = str | int | float | bool
"""A header value a selector can compare with."""

MAX_DEPTH: Final = 32
"""Deepest selector tree allowed; a lone leaf has depth 1."""
MAX_NODES: Final = 1000
"""Most selector nodes (leaves and combinators) allowed in one tree."""

_BOOL: Final = "bool"
_NUMBER: Final = "number"
_STR: Final = "str"
_KIND_RANK: Final = {_BOOL: 0, _NUMBER: 1, _STR: 2}
_VALUE_TYPES: Final = "a str, int, float or bool"
_MISSING: Final = object()

class _ShortRepr(reprlib.Repr):
    """reprlib's short repr, with an int Python refuses to print (past its digit limit) quoted by its first digits."""

    def repr_int(self, x: int, level: int) -> str:
        return quote(x)


_REPR = _ShortRepr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdict = 8
_REPR.maxlevel = 3


class SelectorError(ConveyorError, ValueError):
    """A selector, or the data given to ``parse_selector``, is malformed or over the limits."""


def _show(value: object) -> str:
    """Return a repr of ``value`` short enough to quote in an error message."""
    return _REPR.repr(value)


def _kind(value: object) -> str | None:
    """Return the equality class of a header value, or None for a type that equals nothing."""
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, (int, float)):
        return _NUMBER
    if isinstance(value, str):
        return _STR
    return None


def _tag(value: HeaderValue) -> tuple[str | None, HeaderValue]:
    """Return a key that is equal (and hashes equal) exactly when two values match each other."""
    return (_kind(value), value)


def _same(found: object, value: HeaderValue) -> bool:
    """Tell whether header value ``found`` matches selector value ``value`` under type-aware equality."""
    return _kind(found) == _kind(value) and found == value


def _sort_key(value: HeaderValue) -> tuple[int, HeaderValue]:
    """Order values bools first, then numbers, then strs, so ``to_data`` output is stable."""
    return (_KIND_RANK[_kind(value) or _STR], value)


def _key_problem(key: object) -> str | None:
    """Return what is wrong with a header key, or None if it is usable."""
    if isinstance(key, str) and key:
        return None
    return f"must be a non-empty str, got {_show(key)}"


def _value_problem(value: object) -> str | None:
    """Return what is wrong with a selector value, or None if it is usable."""
    if _kind(value) is None:
        return f"must be {_VALUE_TYPES}, got {_show(value)}"
    if isinstance(value, float) and math.isnan(value):
        return "must not be NaN, which equals nothing (not even NaN)"
    return None


def _checked_value(value: object, where: str) -> HeaderValue:
    """Return ``value`` if a selector can compare with it, or raise a message that starts with ``where``."""
    problem = _value_problem(value)
    if problem is not None or not isinstance(value, (str, int, float)):
        msg = f"{where} {problem}"
        raise SelectorError(msg)
    return value


def _collect_values(items: Iterable[object], whole: str, item: Callable[[int], str]) -> frozenset[HeaderValue]:
    """Validate ``items`` as the values of a ``HeaderIn`` and return them as a frozenset.

    Args:
        items: the candidate values.
        whole: how an error message names the collection, e.g. ``"HeaderIn.values"``.
        item: how an error message names the value at an index, e.g. ``"HeaderIn.values[2]"``.

    Raises:
        SelectorError: if a value is not a usable header value, if there is none, or if a bool
            sits next to a number that a frozenset would merge it with.
    """
    seen: dict[tuple[str | None, HeaderValue], tuple[int, HeaderValue]] = {}
    for index, candidate in enumerate(items):
        value = _checked_value(candidate, item(index))
        kind = _kind(value)
        other = _NUMBER if kind == _BOOL else _BOOL if kind == _NUMBER else None
        clash = seen.get((other, value)) if other is not None else None
        if clash is not None:
            msg = (
                f"{whole} holds both {clash[1]!r} (at [{clash[0]}]) and {value!r} (at [{index}]), which a frozenset "
                "keeps as one value since Python counts True as 1 and False as 0; "
                "put them in two selectors under AnyOf (or 'or') instead"
            )
            raise SelectorError(msg)
        seen.setdefault(_tag(value), (index, value))
    if not seen:
        msg = f"{whole} must hold at least one value, got none"
        raise SelectorError(msg)
    return frozenset(value for _, value in seen.values())


def _check_key(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    problem = _key_problem(value)
    if problem is not None:
        msg = f"{type(instance).__name__}.{attribute.name} {problem}"
        raise SelectorError(msg)


def _check_value(instance: object, attribute: attrs.Attribute[HeaderValue], value: HeaderValue) -> None:
    problem = _value_problem(value)
    if problem is not None:
        msg = f"{type(instance).__name__}.{attribute.name} {problem}"
        raise SelectorError(msg)


def _check_selector(instance: object, attribute: attrs.Attribute[Selector], value: Selector) -> None:
    if not isinstance(value, _SELECTOR_TYPES):
        msg = f"{type(instance).__name__}.{attribute.name} must be a Selector, got {_show(value)}{_hint(value)}"
        raise SelectorError(msg)


def _hint(value: object) -> str:
    """Return advice for a caller who passed selector data where a Selector instance was expected."""
    return "; build Selectors from data with parse_selector" if value is None or isinstance(value, Mapping) else ""


def _iterable_problem(value: object, what: str) -> str | None:
    """Return what is wrong with ``value`` as an iterable of ``what``, or None if it can be iterated."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return f"must be an iterable of {what} (e.g. a list), got {_show(value)}"
    return None


def _header_in_values(value: Iterable[HeaderValue]) -> frozenset[HeaderValue]:
    """Convert the ``values`` given to ``HeaderIn`` to a validated frozenset."""
    problem = _iterable_problem(value, "values")
    if problem is not None:
        msg = f"HeaderIn.values {problem}"
        raise SelectorError(msg)
    return _collect_values(value, "HeaderIn.values", lambda index: f"HeaderIn.values[{index}]")


def _selector_tuple(value: Iterable[Selector], where: str) -> tuple[Selector, ...]:
    """Convert an iterable of selectors to a validated, non-empty tuple."""
    problem = _iterable_problem(value, "selectors")
    if problem is not None:
        msg = f"{where} {problem}"
        raise SelectorError(msg)
    selectors = tuple(value)
    if not selectors:
        msg = f"{where} must hold at least one selector, got none"
        raise SelectorError(msg)
    for index, selector in enumerate(selectors):
        if not isinstance(selector, _SELECTOR_TYPES):
            msg = f"{where}[{index}] must be a Selector, got {_show(selector)}{_hint(selector)}"
            raise SelectorError(msg)
    return selectors


def _all_of_selectors(value: Iterable[Selector]) -> tuple[Selector, ...]:
    """Convert the ``selectors`` given to ``AllOf``."""
    return _selector_tuple(value, "AllOf.selectors")


def _any_of_selectors(value: Iterable[Selector]) -> tuple[Selector, ...]:
    """Convert the ``selectors`` given to ``AnyOf``."""
    return _selector_tuple(value, "AnyOf.selectors")


@final
@attrs.frozen
class HeaderEquals:
    """Matches when header ``key`` is present and equals ``value`` (type-aware, so ``True`` is not ``1``).

    Attributes:
        key: the header name.
        value: the value to compare with; ``1`` and ``1.0`` make equal selectors.
    """

    key: str = attrs.field(validator=_check_key)
    value: HeaderValue = attrs.field(validator=_check_value, eq=_tag)

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Tell whether ``headers`` has ``key`` with a value equal to ``value``."""
        return _same(headers.get(self.key, _MISSING), self.value)

    def to_data(self) -> object:
        """Return the JSON-like form ``{"eq": [key, value]}`` that ``parse_selector`` reads back."""
        return {"eq": [self.key, self.value]}


@final
@attrs.frozen
class HeaderIn:
    """Matches when header ``key`` is present and equals one of ``values`` (one hash lookup).

    ``values`` accepts any iterable. A frozenset cannot hold both ``True`` and ``1`` (nor
    ``False`` and ``0``), so such a pair is refused rather than silently merged.

    Attributes:
        key: the header name.
        values: the accepted values, at least one.
    """

    key: str = attrs.field(validator=_check_key)
    values: frozenset[HeaderValue] = attrs.field(converter=_header_in_values, eq=False)
    _tagged: frozenset[tuple[str | None, HeaderValue]] = attrs.field(init=False, repr=False)

    @_tagged.default
    def _tag_values(self) -> frozenset[tuple[str | None, HeaderValue]]:
        return frozenset(_tag(value) for value in self.values)

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Tell whether ``headers`` has ``key`` with a value equal to one of ``values``."""
        found = headers.get(self.key, _MISSING)
        kind = _kind(found)
        return kind is not None and (kind, found) in self._tagged

    def to_data(self) -> object:
        """Return the JSON-like form ``{"in": [key, [value, ...]]}``, values in a stable order."""
        ordered = sorted(self.values, key=_sort_key)
        return {"in": [self.key, ordered]}


@final
@attrs.frozen
class HeaderExists:
    """Matches when header ``key`` is present, whatever its value.

    Attributes:
        key: the header name.
    """

    key: str = attrs.field(validator=_check_key)

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Tell whether ``headers`` has ``key``."""
        return self.key in headers

    def to_data(self) -> object:
        """Return the JSON-like form ``{"exists": key}``."""
        return {"exists": self.key}


@final
@attrs.frozen
class AllOf:
    """Matches when every one of ``selectors`` matches (a logical and).

    Attributes:
        selectors: at least one selector; any iterable is converted to a tuple.
    """

    selectors: tuple[Selector, ...] = attrs.field(converter=_all_of_selectors)

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Tell whether all ``selectors`` match ``headers``, stopping at the first that does not."""
        return all(selector.matches(headers) for selector in self.selectors)

    def to_data(self) -> object:
        """Return the JSON-like form ``{"and": [selector, ...]}``."""
        return {"and": [selector.to_data() for selector in self.selectors]}


@final
@attrs.frozen
class AnyOf:
    """Matches when at least one of ``selectors`` matches (a logical or).

    Attributes:
        selectors: at least one selector; any iterable is converted to a tuple.
    """

    selectors: tuple[Selector, ...] = attrs.field(converter=_any_of_selectors)

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Tell whether any of ``selectors`` matches ``headers``, stopping at the first that does."""
        return any(selector.matches(headers) for selector in self.selectors)

    def to_data(self) -> object:
        """Return the JSON-like form ``{"or": [selector, ...]}``."""
        return {"or": [selector.to_data() for selector in self.selectors]}


@final
@attrs.frozen
class Not:
    """Matches when ``selector`` does not (a logical not).

    Attributes:
        selector: the selector to negate.
    """

    selector: Selector = attrs.field(validator=_check_selector)

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Tell whether ``selector`` fails to match ``headers``."""
        return not self.selector.matches(headers)

    def to_data(self) -> object:
        """Return the JSON-like form ``{"not": selector}``."""
        return {"not": self.selector.to_data()}


@final
@attrs.frozen
class MatchAll:
    """Matches every message; the default selector of a consumer that asked for no filter."""

    def matches(self, headers: Mapping[str, HeaderValue]) -> bool:
        """Return True: every set of headers matches."""
        return True

    def to_data(self) -> object:
        """Return the JSON-like form ``{}`` (``parse_selector`` also reads ``None`` as ``MatchAll``)."""
        return {}


Selector: TypeAlias = HeaderEquals | HeaderIn | HeaderExists | AllOf | AnyOf | Not | MatchAll
"""Any selector node; a whole tree is named by its root."""

_SELECTOR_TYPES: Final = (HeaderEquals, HeaderIn, HeaderExists, AllOf, AnyOf, Not, MatchAll)


@final
class _Tally:
    """Counts the nodes of one tree while it is parsed or checked."""

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes = 0

    def visit(self, path: str, depth: int) -> None:
        """Count the node at ``path`` and ``depth``, raising once a limit is passed."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            msg = (
                f"{path}: the selector has more than {MAX_NODES} nodes (the limit); "
                "use 'in' for long lists of values, or split the selector"
            )
            raise SelectorError(msg)
        if depth > MAX_DEPTH:
            msg = f"{path}: the selector nests deeper than {MAX_DEPTH} levels (the limit); flatten it"
            raise SelectorError(msg)


def _check_tree(root: Selector, path: str, depth: int, tally: _Tally) -> None:
    """Walk a built tree without recursion, so even an absurdly deep one fails with a SelectorError."""
    stack: list[tuple[Selector, str, int]] = [(root, path, depth)]
    while stack:
        node, where, level = stack.pop()
        tally.visit(where, level)
        match node:
            case AllOf(selectors=children):
                branches = [(child, f"{where}.and[{index}]") for index, child in enumerate(children)]
            case AnyOf(selectors=children):
                branches = [(child, f"{where}.or[{index}]") for index, child in enumerate(children)]
            case Not(selector=child):
                branches = [(child, f"{where}.not")]
            case _:
                branches = []
        stack.extend((child, branch, level + 1) for child, branch in reversed(branches))


def check_limits(selector: Selector) -> None:
    """Check that a built selector tree is within ``MAX_DEPTH`` and ``MAX_NODES``, so matching stays cheap.

    Stops at the first node past a limit, so the check itself costs at most ``MAX_NODES`` steps.

    Raises:
        SelectorError: naming the path of the first node past a limit, or if ``selector`` is not a Selector.
    """
    if not isinstance(selector, _SELECTOR_TYPES):
        msg = f"check_limits expects a Selector, got {_show(selector)}{_hint(selector)}"
        raise SelectorError(msg)
    _check_tree(selector, "selector", 1, _Tally())


def parse_selector(data: object) -> Selector:
    """Build a selector tree from JSON-like data (the inverse of ``to_data``), within the limits.

    Accepted forms: ``None`` or ``{}`` (``MatchAll``), ``{"eq": [key, value]}``,
    ``{"in": [key, [value, ...]]}``, ``{"exists": key}``, ``{"and": [selector, ...]}``,
    ``{"or": [selector, ...]}``, ``{"not": selector}``, and a built ``Selector`` anywhere,
    which is kept as it is. Lists may also be tuples.

    Raises:
        SelectorError: naming the path of the fault inside the data, e.g. ``selector.and[1].eq``.
    """
    return _parse(data, "selector", 1, _Tally())


def _parse(data: object, path: str, depth: int, tally: _Tally) -> Selector:
    """Parse the node at ``path``; recursion is bounded by ``MAX_DEPTH`` because the tally checks first."""
    if isinstance(data, _SELECTOR_TYPES):
        _check_tree(data, path, depth, tally)
        return data
    tally.visit(path, depth)
    if data is None:
        return MatchAll()
    if not isinstance(data, Mapping):
        msg = f"{path}: expected a selector (a dict with one operator, {{}} or None), got {_show(data)}"
        raise SelectorError(msg)
    if not data:
        return MatchAll()
    if len(data) > 1:
        operators = ", ".join(_show(operator) for operator in data)
        msg = f"{path}: expected exactly one operator per dict, got {len(data)}: {operators}; combine them with 'and'"
        raise SelectorError(msg)
    [(operator, argument)] = data.items()
    parse = _OPERATORS.get(operator) if isinstance(operator, str) else None
    if parse is None:
        msg = f"{path}: unknown operator {_show(operator)}; expected one of {_ALLOWED}"
        raise SelectorError(msg)
    return parse(argument, f"{path}.{operator}", depth, tally)


def _pair(argument: object, where: str, form: str) -> tuple[object, object]:
    """Unpack a two-item list or tuple, or raise naming the expected ``form``."""
    if not isinstance(argument, (list, tuple)) or len(argument) != 2:
        msg = f"{where}: expected {form}, got {_show(argument)}"
        raise SelectorError(msg)
    return argument[0], argument[1]


def _parse_key(key: object, where: str) -> str:
    """Return ``key`` if it is a usable header key, or raise naming ``where``."""
    problem = _key_problem(key)
    if problem is not None or not isinstance(key, str):
        msg = f"{where}: the key {problem}"
        raise SelectorError(msg)
    return key


def _parse_eq(argument: object, where: str, depth: int, tally: _Tally) -> Selector:
    key, value = _pair(argument, where, "[key, value]")
    checked_key = _parse_key(key, f"{where}[0]")
    return HeaderEquals(checked_key, _checked_value(value, f"{where}[1]: the value"))


def _parse_in(argument: object, where: str, depth: int, tally: _Tally) -> Selector:
    key, values = _pair(argument, where, "[key, [value, ...]]")
    checked_key = _parse_key(key, f"{where}[0]")
    if not isinstance(values, (list, tuple, set, frozenset)):
        msg = f"{where}[1]: expected a list of values, got {_show(values)}"
        raise SelectorError(msg)
    collected = _collect_values(values, f"{where}[1]: the list", lambda index: f"{where}[1][{index}]: the value")
    return HeaderIn(checked_key, collected)


def _parse_exists(argument: object, where: str, depth: int, tally: _Tally) -> Selector:
    return HeaderExists(_parse_key(argument, where))


def _parse_children(argument: object, where: str, depth: int, tally: _Tally) -> list[Selector]:
    """Parse the list of selectors under an 'and' or 'or'."""
    if not isinstance(argument, (list, tuple)) or not argument:
        msg = f"{where}: expected a non-empty list of selectors, got {_show(argument)}"
        raise SelectorError(msg)
    return [_parse(item, f"{where}[{index}]", depth + 1, tally) for index, item in enumerate(argument)]


def _parse_and(argument: object, where: str, depth: int, tally: _Tally) -> Selector:
    return AllOf(_parse_children(argument, where, depth, tally))


def _parse_or(argument: object, where: str, depth: int, tally: _Tally) -> Selector:
    return AnyOf(_parse_children(argument, where, depth, tally))


def _parse_not(argument: object, where: str, depth: int, tally: _Tally) -> Selector:
    return Not(_parse(argument, where, depth + 1, tally))


_OPERATORS: Final[dict[str, Callable[[object, str, int, _Tally], Selector]]] = {
    "and": _parse_and,
    "eq": _parse_eq,
    "exists": _parse_exists,
    "in": _parse_in,
    "not": _parse_not,
    "or": _parse_or,
}
_ALLOWED: Final = ", ".join(repr(operator) for operator in _OPERATORS)

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "AllOf",
    "AnyOf",
    "HeaderEquals",
    "HeaderExists",
    "HeaderIn",
    "HeaderValue",
    "MatchAll",
    "Not",
    "Selector",
    "SelectorError",
    "check_limits",
    "parse_selector",
]
