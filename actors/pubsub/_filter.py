"""Pub/Sub subscription filters: the documented attribute syntax, parsed into frozen predicates (sans-IO).

Grammar (Pub/Sub's, https://cloud.google.com/pubsub/docs/subscription-message-filter)::

    filter  := or
    or      := and ("OR" and)*
    and     := unary ("AND" unary)*
    unary   := "NOT" unary | "-" unary | atom
    atom    := "(" or ")" | attributes.KEY "=" STRING | attributes.KEY "!=" STRING
             | attributes ":" KEY | hasPrefix(attributes.KEY, STRING)

As in Pub/Sub, ``AND`` and ``OR`` may not be mixed without parentheses, a filter is at most
256 bytes, and a message without the attribute matches ``!=`` but not ``=`` or ``hasPrefix``.
The tree is data, never evaluated as code, so it can travel in actor messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, NoReturn, TypeAlias, final

import attrs

MAX_FILTER_BYTES: Final = 256


class FilterError(ValueError):
    """A subscription filter does not follow the documented syntax; the message says where."""


@final
@attrs.frozen
class Everything:
    """The empty filter: every message matches."""

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """True for every message."""
        return True


@final
@attrs.frozen
class Equals:
    """``attributes.key = "value"`` (or ``!=`` when ``negated``)."""

    key: str
    value: str
    negated: bool = False

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """Compare the attribute with the value; a missing attribute is unequal."""
        return (attributes.get(self.key) == self.value) != self.negated


@final
@attrs.frozen
class Has:
    """``attributes:key``: the attribute is present."""

    key: str

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """True when the message carries the attribute."""
        return self.key in attributes


@final
@attrs.frozen
class HasPrefix:
    """``hasPrefix(attributes.key, "prefix")``."""

    key: str
    prefix: str

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """True when the attribute exists and starts with the prefix."""
        value = attributes.get(self.key)
        return value is not None and value.startswith(self.prefix)


@final
@attrs.frozen
class Negation:
    """``NOT expr``."""

    inner: Filter

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """The inner filter's answer, inverted."""
        return not self.inner.matches(attributes)


@final
@attrs.frozen
class Conjunction:
    """``a AND b AND ...``."""

    parts: tuple[Filter, ...]

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """True when every part matches."""
        return all(part.matches(attributes) for part in self.parts)


@final
@attrs.frozen
class Disjunction:
    """``a OR b OR ...``."""

    parts: tuple[Filter, ...]

    def matches(self, attributes: Mapping[str, str]) -> bool:
        """True when any part matches."""
        return any(part.matches(attributes) for part in self.parts)


Filter: TypeAlias = Everything | Equals | Has | HasPrefix | Negation | Conjunction | Disjunction

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<op>!=|=|:|\(|\)|,|-)
      | (?P<word>[A-Za-z_][A-Za-z0-9_.\-]*)
    )""",
    re.VERBOSE,
)
_KEY = re.compile(r"^[A-Za-z0-9_\-.~%+]+$")


@final
class _Parser:
    """Recursive descent over the token list; every error names the offending token and position."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            match = _TOKEN.match(text, position)
            if match is None:
                self._fail(f"unexpected character {text[position:].lstrip()[:1]!r}", position)
            kind = match.lastgroup or "op"
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            position = match.end()
        self.index = 0

    def _fail(self, what: str, position: int) -> NoReturn:
        msg = f"filter: {what} at character {position} of {self.text!r}"
        raise FilterError(msg)

    def _peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def _take(self, literal: str | None = None, what: str = "") -> tuple[str, str, int]:
        token = self._peek()
        if token is None:
            self._fail(f"expected {what or repr(literal)} but the filter ended", len(self.text))
        if literal is not None and token[1] != literal:
            self._fail(f"expected {literal!r}, found {token[1]!r}", token[2])
        self.index += 1
        return token

    def parse(self) -> Filter:
        if not self.tokens:
            return Everything()
        tree = self._or()
        token = self._peek()
        if token is not None:
            self._fail(f"unexpected {token[1]!r}", token[2])
        return tree

    def _or(self) -> Filter:
        parts = [self._and()]
        while (token := self._peek()) is not None and token[1] == "OR":
            self.index += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else Disjunction(tuple(parts))

    def _and(self) -> Filter:
        parts = [self._unary()]
        while (token := self._peek()) is not None and token[1] == "AND":
            self.index += 1
            parts.append(self._unary())
        if (token := self._peek()) is not None and token[1] == "OR" and len(parts) > 1:
            self._fail("AND and OR mixed without parentheses", token[2])
        return parts[0] if len(parts) == 1 else Conjunction(tuple(parts))

    def _unary(self) -> Filter:
        token = self._peek()
        if token is not None and token[1] in ("NOT", "-"):
            self.index += 1
            return Negation(self._unary())
        return self._atom()

    def _atom(self) -> Filter:
        kind, value, position = self._take(what="an attribute test")
        if value == "(":
            inner = self._or()
            self._take(")")
            return inner
        if kind == "word" and value == "hasPrefix":
            self._take("(")
            key = self._attribute_key(self._take(what="attributes.KEY"))
            self._take(",")
            prefix = self._string(self._take(what="a quoted prefix"))
            self._take(")")
            return HasPrefix(key, prefix)
        if kind == "word" and value == "attributes":
            self._take(":")
            key_token = self._take(what="an attribute name")
            if key_token[0] == "string":
                return Has(self._string(key_token))
            return Has(self._check_key(key_token[1], key_token[2]))
        if kind == "word" and value.startswith("attributes."):
            key = self._attribute_key((kind, value, position))
            operator = self._take(what="'=' or '!='")
            if operator[1] not in ("=", "!="):
                self._fail(f"expected '=' or '!=', found {operator[1]!r}", operator[2])
            text = self._string(self._take(what="a quoted value"))
            return Equals(key, text, negated=operator[1] == "!=")
        return self._fail(f"expected attributes.KEY, attributes:KEY, hasPrefix(...), NOT or '(', found {value!r}",
                          position)

    def _attribute_key(self, token: tuple[str, str, int]) -> str:
        kind, value, position = token
        if kind != "word" or not value.startswith("attributes."):
            self._fail(f"expected attributes.KEY, found {value!r}", position)
        return self._check_key(value.removeprefix("attributes."), position)

    def _check_key(self, key: str, position: int) -> str:
        if not key or not _KEY.match(key):
            self._fail(f"bad attribute name {key!r}", position)
        return key

    def _string(self, token: tuple[str, str, int]) -> str:
        kind, value, position = token
        if kind != "string":
            self._fail(f"expected a quoted string, found {value!r}", position)
        body = value[1:-1]
        return re.sub(r"\\(.)", r"\1", body)


def parse_filter(text: str) -> Filter:
    """Parse a subscription filter; ``""`` matches everything.

    Raises:
        FilterError: the text is longer than 256 bytes or not in the documented syntax.
    """
    if not isinstance(text, str):
        msg = f"filter must be a str, got {type(text).__qualname__}"
        raise FilterError(msg)
    if len(text.encode()) > MAX_FILTER_BYTES:
        msg = f"filter: {len(text.encode())} bytes, more than the {MAX_FILTER_BYTES} bytes Pub/Sub allows"
        raise FilterError(msg)
    return _Parser(text).parse()
