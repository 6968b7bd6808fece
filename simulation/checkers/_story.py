"""The story of a run: a trace told as one readable line per domain step.

``story_lines`` is what ``conveyor replay --story`` prints and what the shrinker hands back
with a shrunk run. It tells the queues' own decisions (publishes, deliveries, acks, nacks,
releases, lapses, dead letters, recoveries), the injected faults, actor failures and stops,
and, for the Pub/Sub front's scenarios, what its clients did and were told (publishes and
their answers, batches given, settlements sent and the ids refused), naming messages by what
their publisher called them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from conveyor.actors.broker import (
    Delivered,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    QueueRecovered,
)
from conveyor.actors.pubsub import PubMessage, SettleKind
from conveyor.runtime import EventKind, Terminated, TraceEvent
from conveyor.simulation import Crash, CrashAmong, Delay, Drop, FailJob, FailWrite, FaultApplied, Pause, ProcessCrash

from ._history import before_final_browse
from ._paging import PagingReceived
from ._pubsub import BatchReceived, PublishDone, SettleDone, SettleSent
from ._transactions import tx_steps, tx_story_line
from ._zookeeper import ZkStory, zk_replies

_ROUTINE_DEPTH = 3
"""Routine stops (reason ``stopped``) this deep are left out of a story: a Pub/Sub front ends a binding and
its consumer per Pull and per stream (``/pubsub/subscription-2/binding-5``); failures are always told."""


def _describe_fault(applied: FaultApplied) -> str:
    fault = applied.fault
    if isinstance(fault, Crash):
        what = f"crash {fault.path}"
    elif isinstance(fault, CrashAmong):
        what = f"crash a {fault.name} under {fault.prefix}"
    elif isinstance(fault, Pause):
        what = f"pause {fault.prefix} for {fault.duration_s:.3f}s"
    elif isinstance(fault, Delay):
        what = f"delay {fault.sender} -> {fault.receiver} by {fault.duration_s:.3f}s"
    elif isinstance(fault, Drop):
        what = f"drop {fault.message_type} sent under {fault.sender}"
    elif isinstance(fault, FailWrite):
        what = f"fail journal write #{fault.nth} under {fault.prefix}"
    elif isinstance(fault, FailJob):
        what = f"fail job #{fault.nth} under {fault.prefix}"
    elif isinstance(fault, ProcessCrash):
        what = "kill -9 the process of the durable actors"
    else:  # pragma: no cover - every fault type is listed above
        what = repr(fault)
    return f"fault: {what} ({applied.outcome})"


def story_lines(trace: Iterable[TraceEvent]) -> list[str]:
    """Tell a run as one readable line per domain step, in trace order.

    Publishes (as each queue enqueued them), deliveries of messages to consumers (with the
    attempt number), acks, nacks and releases (as the queue took them), lease lapses,
    returns from stopped consumers, dead letters and expiries, injected faults, actor
    failures and stops (other than the final shutdown). Messages are named by the
    publisher's ``message_id`` (``tag N`` when it has none), actors by path, e.g.
    ``t=0.213 /queue -> /client-1/consumer: deliver m3 (attempt 2)``.

    The line's sender of a queue's own decision (an ack, a publish) is whoever sent the
    message the queue was handling, read from the trace's DELIVERED events.

    A Pub/Sub front's run also tells its clients' history (``_ClientStory``), and names its
    messages by their data (``p0.1.2``: publisher 0, publish 1, message 2) rather than the
    topic's numbers; the routine end of its bindings is left out.
    """
    events = before_final_browse(trace)
    clients = _ClientStory(events)
    zookeeper = ZkStory()
    names: dict[tuple[str, int], str] = {}  # (queue path, tag) -> message name
    holders: dict[tuple[str, int], str] = {}  # (queue path, consumer id) -> consumer path
    cause: dict[str, str] = {}  # actor path -> sender of the message it is handling
    lines: list[str] = []

    def name_of(queue: str, tag: int) -> str:
        return names.get((queue, tag)) or f"tag {tag}"

    for event in events:
        kind = event.kind
        message = event.message
        stamp = f"t={event.time:.3f}"
        if kind is EventKind.DELIVERED:
            if event.receiver is not None:
                cause[event.receiver] = event.sender or "<outside>"
        elif (told := zookeeper.line(event) or tx_story_line(event)) is not None:
            lines.append(f"{stamp} {told}")
        elif kind is EventKind.SENT and type(message) is Delivered:
            queue = event.sender or "?"
            for delivery in message.deliveries:
                holders[(queue, delivery.consumer_id)] = event.receiver or "?"
                label = name_of(queue, delivery.tag)
                if delivery.deadline is None:
                    lines.append(f"{stamp} {event.sender} -> {event.receiver}: browse {label}")
                else:
                    lines.append(
                        f"{stamp} {event.sender} -> {event.receiver}: deliver {label} "
                        f"(attempt {delivery.delivery_count})"
                    )
        elif kind is EventKind.NOTE:
            path = event.sender or "?"
            if type(message) is EntryEnqueued:
                names[(path, message.tag)] = clients.label(message.message.message_id)
            line = _note_line(message, path, cause.get(path, "<outside>"), holders, name_of)
            if line is None:
                line = clients.line(path, message)
            if line is not None:
                lines.append(f"{stamp} {line}")
        elif kind is EventKind.FAULT and isinstance(message, FaultApplied):
            lines.append(f"{stamp} {_describe_fault(message)}")
        elif kind is EventKind.FAILED:
            lines.append(f"{stamp} {event.receiver}: failed on {type(message).__name__}: {event.error}")
        elif kind is EventKind.STOPPED and isinstance(message, Terminated) and message.reason != "shutdown":
            path = event.receiver or "?"
            if message.reason != "stopped" or path.count("/") < _ROUTINE_DEPTH:
                lines.append(f"{stamp} {path}: stopped ({message.reason})")
    return lines


def _note_line(
    message: object,
    path: str,
    cause: str,
    holders: dict[tuple[str, int], str],
    name_of: Callable[[str, int], str],
) -> str | None:
    """One queue note as a story line (without its time), or None for notes the story skips."""
    if isinstance(message, EntryEnqueued):
        label = name_of(path, message.tag)
        extra = f", group {message.message.group}" if message.message.group is not None else ""
        return f"{cause} -> {path}: publish {label} (priority {message.message.priority}{extra})"
    if isinstance(message, EntrySettled):
        label = name_of(path, message.tag)
        if message.outcome == "acked":
            return f"{cause} -> {path}: ack {label}"
        if message.outcome == "dead_lettered":
            return f"{path}: dead-letter {label} ({message.reason or 'limit'})"
        return f"{path}: {label} {message.outcome}"
    if isinstance(message, EntryReturned):
        label = name_of(path, message.tag)
        holder = holders.get((path, message.consumer_id), f"consumer {message.consumer_id}")
        if message.reason == "nack":
            return f"{cause} -> {path}: nack {label} (available again at t={message.available_at:.3f})"
        if message.reason == "release":
            return f"{cause} -> {path}: release {label}"
        if message.reason == "lease lapsed":
            return f"{path}: lease of {holder} on {label} lapsed"
        return f"{path}: {label} back from {holder} ({message.reason})"
    if isinstance(message, QueueRecovered):
        shown = ", ".join(name_of(path, tag) for tag in message.remaining[:8])
        more = f" and {len(message.remaining) - 8} more" if len(message.remaining) > 8 else ""
        held = f": {shown}{more}" if message.remaining else ""
        count, consumers = len(message.remaining), len(message.consumers)
        return (f"{path}: recovered from its journal {count} message{'' if count == 1 else 's'}{held}; "
                f"{consumers} consumer{'' if consumers == 1 else 's'}")
    return None


def _short(subscription: str) -> str:
    return subscription.rpartition("/")[2]


def _data(message: PubMessage) -> str:
    poison = any(not key for key, _ in message.attributes)
    return message.data.decode(errors="replace") + (" (poison)" if poison else "")


class _ClientStory:
    """The Pub/Sub clients' history notes as story lines, their messages named by data.

    Reads the publishers' answers once up front, so that a queue's enqueue (which may come
    before its publisher hears the ids) is already named by the message's data.
    """

    def __init__(self, events: list[TraceEvent]) -> None:
        self.labels: dict[str, str] = {}  # message id -> its data
        for event in events:
            if event.kind is EventKind.NOTE and type(event.message) is PublishDone:
                for message, message_id in zip(event.message.messages, event.message.ids, strict=False):
                    self.labels[message_id] = message.data.decode(errors="replace")
        self.given: dict[str, tuple[str, str, int]] = {}  # ack id -> (subscription, data, attempt)

    def label(self, message_id: str) -> str:
        return self.labels.get(message_id, message_id)

    def line(self, client: str, note: object) -> str | None:
        """A client's note as a story line (without its time), or None for other notes."""
        cls = type(note)
        if cls is PublishDone:
            assert isinstance(note, PublishDone)
            shown = ", ".join(_data(message) for message in note.messages)
            outcome = "confirmed" if not note.failure else f"refused: {note.failure}"
            return f"{client} -> {_short(note.topic)}: publish {shown}: {outcome}"
        if cls is BatchReceived:
            assert isinstance(note, BatchReceived)
            for ack_id, message, attempt in note.received:
                self.given[ack_id] = (note.subscription, _data(message), attempt)
            shown = ", ".join(f"{_data(message)} (attempt {attempt})" for _, message, attempt in note.received)
            return f"{note.binding} -> {client}: give {shown}"
        if cls is SettleSent:
            assert isinstance(note, SettleSent)
            what = "ack" if note.kind is SettleKind.ACK else "nack" if not note.seconds else f"extend {note.seconds}s"
            return f"{client} -> {_short(note.subscription)}: {what} {self._ids(note.ack_ids, note.subscription)}"
        if cls is SettleDone:
            assert isinstance(note, SettleDone)
            if note.failure:
                return f"{_short(note.subscription)} -> {client}: failed: {note.failure}"
            if note.invalid:
                return (f"{_short(note.subscription)} -> {client}: invalid: "
                        f"{self._ids(note.invalid, note.subscription)}")
        return None

    def _ids(self, ack_ids: tuple[str, ...], subscription: str) -> str:
        shown = []
        for ack_id in ack_ids:
            known = self.given.get(ack_id)
            if known is None:
                shown.append(f"a made-up id {ack_id[:12]}...")
            elif known[0] != subscription:
                shown.append(f"{known[1]} with an id given on {_short(known[0])}")
            else:
                shown.append(f"{known[1]} (attempt {known[2]})")
        return ", ".join(shown)


def delivery_steps(trace: Iterable[TraceEvent]) -> int:
    """Deliveries of messages to consumers: the Delivery items of each queue's Delivered events, before the browse
    (and the messages the paging scenario's client fetched, which has no broker queue, the items transaction stores
    gave, or else the answers ZooKeeper sessions gave their clients)."""
    events = before_final_browse(trace)
    delivered = sum(
        len(event.message.deliveries)
        for event in events
        if event.kind is EventKind.SENT and type(event.message) is Delivered
    )
    fetched = sum(1 for event in events if event.kind is EventKind.NOTE and type(event.message) is PagingReceived)
    taken = tx_steps(events)  # a transactions run: the items given, not the ZooKeeper answers underneath
    return delivered + fetched + (taken or zk_replies(events))


