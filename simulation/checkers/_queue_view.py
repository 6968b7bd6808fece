"""Reads one queue's story out of a trace, in the queue's own order.

Only events in which the queue is the actor are used (messages it received,
messages it sent, its notes), so the order is the queue's processing order on
every backend, threads included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, final

import attrs

from conveyor.actors.broker import (
    Delivered,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    Message,
    QueueClosed,
    Selector,
    SetInterest,
    Subscribe,
    Subscribed,
    Unsubscribe,
)
from conveyor.runtime import EventKind, Terminated, TraceEvent


@final
@attrs.frozen
class ConsumerInfo:
    """A subscription as the trace shows it."""

    consumer_id: int
    path: str
    priority: int
    selector: Selector
    acquiring: bool


@final
@attrs.frozen
class Observation:
    """One step of the queue's story: ``kind`` and its data, at ``time``."""

    kind: str  # subscribed, interest, unsubscribed, enqueued, delivered, returned, settled, closed
    time: float
    data: Any


def _path(ref: Any) -> str:
    return str(ref.path)


_DELIVERED, _SENT, _NOTE = EventKind.DELIVERED, EventKind.SENT, EventKind.NOTE
_NOTE_KINDS: dict[type, str] = {
    EntryEnqueued: "enqueued", EntryReturned: "returned", EntrySettled: "settled", QueueClosed: "closed"
}
"""The queue's notes that are steps of its story, by exact type (the classes are final)."""


@final
class SharedTrace:
    """A trace that several checkers read: each queue's story is read from it once, then replayed.

    ``check_broker_run`` hands one to every broker checker, which would otherwise each read the
    whole trace again. The events must not change while it is in use.
    """

    __slots__ = ("_stories", "events")

    def __init__(self, events: Iterable[TraceEvent]) -> None:
        self.events: list[TraceEvent] = events if isinstance(events, list) else list(events)
        self._stories: dict[str, tuple[Observation, ...]] = {}

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events)

    def story(self, queue_path: str) -> tuple[Observation, ...]:
        """The observations of the queue at ``queue_path`` (read on the first request)."""
        story = self._stories.get(queue_path)
        if story is None:
            story = self._stories[queue_path] = tuple(_read_story(self.events, queue_path))
        return story


def queue_story(trace: Iterable[TraceEvent], queue_path: str) -> Iterator[Observation]:
    """The observations of the queue at ``queue_path``, in its processing order (lazily read,
    or replayed from a ``SharedTrace``)."""
    if type(trace) is SharedTrace:
        return iter(trace.story(queue_path))
    return _read_story(trace, queue_path)


def _read_story(trace: Iterable[TraceEvent], queue_path: str) -> Iterator[Observation]:
    """Every checker reads a whole trace through this, so it dispatches on the event kind and the
    message's exact type (the protocol classes are final) rather than ``match`` class patterns,
    which try one ``isinstance`` after another on every event: 3x faster.
    """
    pending: dict[str, Subscribe] = {}
    by_path: dict[str, int] = {}
    for event in trace:
        kind = event.kind
        message = event.message
        cls = type(message)
        if kind is _DELIVERED:
            if event.receiver != queue_path:
                continue
            if cls is SetInterest:
                yield Observation("interest", event.time, (message.consumer_id, message.interested))
            elif cls is Subscribe:
                pending[_path(message.consumer)] = message
            elif cls is Unsubscribe:
                yield Observation("unsubscribed", event.time, message.consumer_id)
            elif cls is Terminated:
                path = _path(message.ref)
                if path in by_path:
                    yield Observation("unsubscribed", event.time, by_path.pop(path))
        elif kind is _SENT:
            if event.sender != queue_path:
                continue
            if cls is Delivered:
                if message.deliveries:
                    yield Observation("delivered", event.time, message.deliveries)
            elif cls is Subscribed and event.receiver in pending:
                receiver = event.receiver
                request = pending.pop(receiver)
                by_path[receiver] = message.consumer_id
                info = ConsumerInfo(message.consumer_id, receiver, request.priority, request.selector,
                                    request.acquiring)
                yield Observation("subscribed", event.time, (info, request.interested))
        elif kind is _NOTE and event.sender == queue_path:
            note = _NOTE_KINDS.get(cls)
            if note is not None:
                yield Observation(note, event.time, message)


class ConsumerRoster:
    """The queue's consumers and their interest, as its story tells them; checkers extend it."""

    def __init__(self) -> None:
        self.consumers: dict[int, ConsumerInfo] = {}  # subscribed, in subscription order
        self.interested: dict[int, bool] = {}

    def track_consumers(self, obs: Observation) -> bool:
        """Apply a subscribed / interest / unsubscribed observation; False for any other kind."""
        match obs.kind:
            case "subscribed":
                info, interested = obs.data
                self.consumers[info.consumer_id] = info
                self.interested[info.consumer_id] = interested
            case "interest":
                consumer_id, interested = obs.data
                self.interested[consumer_id] = interested
            case "unsubscribed":
                self.consumers.pop(obs.data, None)
            case _:
                return False
        return True


def queue_paths(trace: Iterable[TraceEvent]) -> list[str]:
    """Paths of every queue that enqueued something in the trace, in first-seen order."""
    seen: dict[str, None] = {}
    for event in trace:
        if event.kind is EventKind.NOTE and isinstance(event.message, EntryEnqueued) and event.sender:
            seen.setdefault(event.sender, None)
    return list(seen)


def is_available_at(message: Message, enqueued_at: float, now: float) -> bool:
    """Whether a message's delay has passed and its TTL has not."""
    if message.delay_s and now < enqueued_at + message.delay_s:
        return False
    return not (message.ttl_s is not None and now >= enqueued_at + message.ttl_s)
