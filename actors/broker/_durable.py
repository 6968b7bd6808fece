"""Durable queues: the queue's state written to its journal as it changes, and rebuilt from it.

A durable ``QueueActor`` (``QueueConfig(durable=True)``) records in ``ctx.journal``:

* every state-changing call on its sans-IO ``EntryList`` (``CoreCall``), after the call
  returned, with the arguments it was given; the core is deterministic and reads no clock
  (it is told the time), so replaying the calls on a fresh list rebuilds it exactly: every
  entry in its place and state, every lease and its deadline, every consumer's pointer,
  group owners, delivery counts and counters;
* its consumer registry (``ConsumerRegistered``, ``ConsumerUnregistered``, ``InterestRecorded``)
  and its count of refused publishes (``PublishRefused``);
* now and then a ``QueueSnapshot`` (a private deep copy of the core and the registry) that
  replaces the events before it, so the journal stays proportional to the queue's contents.

After a crash, the fresh instance rebuilds from the journal in ``on_start``: leases still run,
consumers keep their ids and their acks still count, and nothing published and confirmed is
lost (``tests/actors/broker/test_durable.py``, the ``queue-crash`` simulation scenario).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, final

import attrs

from conveyor.runtime import Journal

from ._entries import EntryList
from ._model import Subscribe

RECORDED_CALLS = frozenset({
    "publish",
    "drop_head",
    "add_consumer",
    "remove_consumer",
    "set_interest",
    "take",
    "browse",
    "ack",
    "give_back",
    "give_back_with",
    "extend",
    "expire_leases",
    "expire_ttls",
    "release_delays",
})
"""The ``EntryList`` methods that change its state; everything else it offers only reads."""

COMPACT_AFTER_EVENTS = 1024
"""A journal is compacted once it holds this many events and ``COMPACT_FACTOR`` times the state's size."""
COMPACT_FACTOR = 4


@final
@attrs.frozen
class CoreCall:
    """One state-changing call on the queue's ``EntryList``, as it was made."""

    method: str
    args: tuple[Any, ...]


@final
@attrs.frozen
class ConsumerRegistered:
    """The queue accepted ``subscribe`` as consumer ``consumer_id``."""

    consumer_id: int
    subscribe: Subscribe


@final
@attrs.frozen
class ConsumerUnregistered:
    """Consumer ``consumer_id`` left the queue (unsubscribed or stopped)."""

    consumer_id: int


@final
@attrs.frozen
class InterestRecorded:
    """Consumer ``consumer_id`` said it wants work (or not)."""

    consumer_id: int
    interested: bool


@final
@attrs.frozen
class PublishRefused:
    """A publish was refused (counted in the queue's statistics)."""


@final
@attrs.frozen
class RegisteredConsumer:
    """A consumer as a snapshot keeps it: its subscription, interest and counters."""

    consumer_id: int
    subscribe: Subscribe
    interested: bool
    delivered: int
    acked: int


@final
@attrs.frozen(eq=False)
class QueueSnapshot:
    """Everything a durable queue must recover, at one moment; replaces the events before it.

    ``core`` is a private deep copy that nothing mutates: recovery copies it again.
    """

    core: EntryList
    consumers: tuple[RegisteredConsumer, ...]
    rejected: int
    next_consumer_id: int


def copy_core(core: EntryList) -> EntryList:
    """A deep copy of ``core`` sharing its immutable messages and selectors (they are never copied)."""
    memo: dict[int, Any] = {}
    for tag in core.live_tags():
        entry = core.get(tag)
        if entry is not None:
            memo[id(entry.message)] = entry.message
    for cursor in core._cursors.values():  # noqa: SLF001 - the durable layer is the core's own copier
        memo[id(cursor.selector)] = cursor.selector
    return copy.deepcopy(core, memo)


def _frozen(value: object) -> object:
    """An argument as the journal keeps it: iterables that a later change could alter become tuples."""
    if isinstance(value, (list, set, frozenset)) or (
        isinstance(value, Iterable) and not isinstance(value, (tuple, str, bytes, dict))
    ):
        return tuple(value)
    if isinstance(value, dict):
        return dict(value)
    return value


class JournaledEntries:
    """An ``EntryList`` whose every state-changing call is recorded in a journal once it returns.

    Reads go straight to the core. A call that raises is not recorded, so the journal holds only
    calls that succeeded, and replaying it cannot fail where the original did not. After each
    recorded call, ``compact`` is called when the journal has grown long enough (see
    ``needs_compaction``).
    """

    def __init__(self, core: EntryList, journal: Journal, compact: Callable[[], None]) -> None:
        self._core = core
        self._journal = journal
        self._compact = compact

    @property
    def core(self) -> EntryList:
        """The wrapped ``EntryList``."""
        return self._core

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._core, name)
        if name in RECORDED_CALLS:
            return _Recorder(self, name, attribute)
        return attribute

    def record(self, method: str, args: tuple[Any, ...]) -> None:
        """Append one successful call to the journal, compacting when it has grown long."""
        journal = self._journal
        journal.append(CoreCall(method, args))
        if needs_compaction(journal, self._core):
            self._compact()


@final
class _Recorder:
    """A bound state-changing method of the core that records its call after it returns."""

    __slots__ = ("_method", "_name", "_owner")

    def __init__(self, owner: JournaledEntries, name: str, method: Callable[..., Any]) -> None:
        self._owner = owner
        self._name = name
        self._method = method

    def __call__(self, *args: Any) -> Any:
        frozen = tuple(_frozen(arg) for arg in args)
        result = self._method(*frozen)
        self._owner.record(self._name, frozen)
        return result


def needs_compaction(journal: Journal, core: EntryList) -> bool:
    """Whether the journal's events outgrow the state they describe (entries and consumers)."""
    events = len(journal)
    if events < COMPACT_AFTER_EVENTS:
        return False
    size = core.available + core.acquired + len(core._cursors)  # noqa: SLF001
    return events > COMPACT_FACTOR * size


def replay_call(core: EntryList, call: CoreCall) -> Any:
    """Make one recorded call again on ``core`` and return its result."""
    if call.method not in RECORDED_CALLS:
        msg = f"journal holds a call to EntryList.{call.method}, which is not one of {sorted(RECORDED_CALLS)}"
        raise ValueError(msg)
    return getattr(core, call.method)(*call.args)
