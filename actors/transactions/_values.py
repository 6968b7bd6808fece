"""The values of the transaction API: consume policies, redelivery backoff, queue settings, items.

Every value is frozen and checked when built, naming the field and the values it allows, so bad
input fails at the edge and never inside a store.
"""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime.lowlevel import checked_when_built
from conveyor.runtime.validators import fail


def _positive_int(owner: str, field: str, value: object) -> None:
    if type(value) is not int or value < 1:
        fail(owner, field, "an int >= 1", value)


def _seconds(owner: str, field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        fail(owner, field, "a finite number of seconds >= 0", value)


@attrs.frozen
class ConsumeTimes:
    """An item is taken at most ``times`` times; a release after the last take sends it to the queue's DLQ.

    Counted per item when it is taken (the seed's meta node), so a client that dies after a take
    has used one of the item's ``times``: this is the at-most-K guarantee.
    """

    times: int

    def __attrs_post_init__(self) -> None:
        _positive_int(type(self).__name__, "times", self.times)


@final
@attrs.frozen
class ConsumeOnce(ConsumeTimes):
    """``ConsumeTimes(1)``: an item is taken at most once; if that transaction does not commit, it is dead-lettered."""

    times: int = 1

    def __attrs_post_init__(self) -> None:
        if self.times != 1:
            fail("ConsumeOnce", "times", "1 (use ConsumeTimes(k) for more)", self.times)


@final
@attrs.frozen
class AtLeastOnce:
    """An item is offered until a transaction commits it: a lost client never dead-letters it.

    Only explicit rollbacks (a listener that raised) count; after ``max_rollbacks`` of them the
    item goes to the DLQ (``None``: never).
    """

    max_rollbacks: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.max_rollbacks is not None:
            _positive_int("AtLeastOnce", "max_rollbacks", self.max_rollbacks)


ConsumePolicy = ConsumeTimes | AtLeastOnce
"""How often an item may be consumed before the queue gives up on it."""


@final
@attrs.frozen
class RedeliveryBackoff:
    """An item released ``n`` times is not offered again for ``min_s * 2**(n-1)`` seconds, capped at ``max_s``."""

    min_s: float = 0.1
    max_s: float = 60.0

    def __attrs_post_init__(self) -> None:
        _seconds("RedeliveryBackoff", "min_s", self.min_s)
        _seconds("RedeliveryBackoff", "max_s", self.max_s)
        if self.max_s < self.min_s:
            fail("RedeliveryBackoff", "max_s", f"a number of seconds >= min_s ({self.min_s})", self.max_s)

    def delay(self, releases: int) -> float:
        """Seconds an item released ``releases`` (>= 1) times waits before it is offered again."""
        exponent = min(releases - 1, 64)
        return float(min(self.max_s, self.min_s * 2**exponent))


def _check_policy(value: object) -> None:
    if not isinstance(value, (ConsumeTimes, AtLeastOnce)):
        fail("TxQueueSettings", "policy", "ConsumeTimes(k), ConsumeOnce() or AtLeastOnce()", value)


def _check_backoff(value: object) -> None:
    if value is not None and not isinstance(value, RedeliveryBackoff):
        fail("TxQueueSettings", "backoff", "None or a RedeliveryBackoff", value)


@final
@attrs.frozen
class TxQueueSettings:
    """A transactional queue: its name, consume policy and redelivery backoff."""

    name: str
    policy: ConsumePolicy = attrs.field(factory=ConsumeOnce)
    backoff: RedeliveryBackoff | None = None

    def __attrs_post_init__(self) -> None:
        if type(self.name) is not str or not self.name or "/" in self.name:
            fail("TxQueueSettings", "name", "a non-empty str without '/'", self.name)
        _check_policy(self.policy)
        _check_backoff(self.backoff)


@final
@checked_when_built
@attrs.frozen(order=True)
class ItemKey:
    """One item: its queue and its number there (the seed's ``item-N``)."""

    queue: str
    number: int


@final
@checked_when_built
@attrs.frozen
class TxItem:
    """An item as a transaction sees it: ``takes`` counts this take too."""

    key: ItemKey
    body: bytes
    takes: int

    @property
    def queue(self) -> str:
        """The queue the item was taken from."""
        return self.key.queue


@final
@checked_when_built
@attrs.frozen
class TxPut:
    """A body to create in ``queue`` when the transaction commits."""

    queue: str
    body: bytes

    def __attrs_post_init__(self) -> None:
        if type(self.queue) is not str or not self.queue:
            fail("TxPut", "queue", "a non-empty queue name", self.queue)
        if type(self.body) is not bytes:
            fail("TxPut", "body", "bytes (encode a str first)", self.body)


@final
@attrs.frozen
class DeadLetter:
    """An item its queue gave up on: ``reason`` says which policy limit it reached."""

    key: ItemKey
    body: bytes
    takes: int
    rollbacks: int
    reason: str
