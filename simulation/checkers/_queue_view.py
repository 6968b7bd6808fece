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


def queue_story(trace: Iterable[TraceEvent], queue_path: str) -> Iterator[Observation]:
    """Yield the observations of the queue at ``queue_path``, in its processing order."""
    pending: dict[str, Subscribe] = {}
    by_path: dict[str, int] = {}
    for event in trace:
        message = event.message
        kind = event.kind
        if kind is EventKind.DELIVERED and event.receiver == queue_path:
            match message:
                case Subscribe():
                    pending[_path(message.consumer)] = message
                case SetInterest(consumer_id=consumer_id, interested=interested):
                    yield Observation("interest", event.time, (consumer_id, interested))
                case Unsubscribe(consumer_id=consumer_id):
                    yield Observation("unsubscribed", event.time, consumer_id)
                case Terminated(ref=ref) if _path(ref) in by_path:
                    yield Observation("unsubscribed", event.time, by_path.pop(_path(ref)))
        elif kind is EventKind.SENT and event.sender == queue_path:
            match message:
                case Subscribed(consumer_id=consumer_id) if event.receiver in pending:
                    request = pending.pop(event.receiver)
                    by_path[event.receiver] = consumer_id
                    info = ConsumerInfo(consumer_id, event.receiver, request.priority, request.selector,
                                        request.acquiring)
                    yield Observation("subscribed", event.time, (info, request.interested))
                case Delivered(deliveries=deliveries) if deliveries:
                    yield Observation("delivered", event.time, deliveries)
        elif kind is EventKind.NOTE and event.sender == queue_path:
            match message:
                case EntryEnqueued():
                    yield Observation("enqueued", event.time, message)
                case EntryReturned():
                    yield Observation("returned", event.time, message)
                case EntrySettled():
                    yield Observation("settled", event.time, message)
                case QueueClosed():
                    yield Observation("closed", event.time, message)


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
