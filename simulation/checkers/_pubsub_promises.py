"""More of the Pub/Sub front's promises (docs/pubsub.md), judged from its clients' history alone.

The notes are the clients' (``_pubsub.py``: ``PublishSent``, ``PublishDone``, ``BatchReceived``,
``SettleSent``, and here ``SeekSent`` / ``SeekDone``); what they must match is the subscription's
terms (``SubscriptionTerms``):

* ``filter_respected``: a client is never given, on a subscription, a message its filter rejects.
* ``key_order``: on an ordered subscription, the messages of one ordering key are first given to
  its clients in publish order (the topic's numbering), within each queue generation (a Seek
  starts a new one, and gives the messages again from the start).
* ``stream_flow``: a stream never holds more unsettled messages with its client than the client's
  flow control (``max_outstanding_messages``) allows.
* ``seek_effect``: after a Seek to a time, a message published before that time and confirmed to
  its publisher before the Seek was asked is never given again in a later queue generation (Seek
  marks it acked).

A delivery's queue generation is read from its ack id (``subscription-generation-binding-...``),
which its client holds; nothing here asks the front what it did.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from conveyor.actors.pubsub import SettleKind
from conveyor.runtime import EventKind, TraceEvent

from ._pubsub import BatchReceived, PublishDone, PublishSent, SeekSent, SettleSent, SubscriptionTerms
from ._result import CheckResult

_NOTE = EventKind.NOTE


def generation_of(ack_id: str) -> int:
    """The queue generation an ack id names (-1 for text without an ack id's shape)."""
    parts = ack_id.split("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdecimal() else -1


def _notes(trace: Iterable[TraceEvent]) -> Iterable[tuple[TraceEvent, Any]]:
    for event in trace:
        if event.kind is _NOTE:
            yield event, event.message


def _label(data: bytes) -> str:
    return data.decode(errors="replace")


def filter_respected(trace: Iterable[TraceEvent], terms: Sequence[SubscriptionTerms]) -> CheckResult:
    """No client is given, on a subscription, a message that subscription's filter rejects."""
    filters = {term.name: term.filter for term in terms}
    violations: list[str] = []
    judged = rejected = 0
    for event, note in _notes(trace):
        if type(note) is PublishSent:
            for message in note.messages:
                rejected += sum(not accepts.matches(dict(message.attributes)) for accepts in filters.values())
        if type(note) is not BatchReceived:
            continue
        accepts = filters.get(note.subscription)
        if accepts is None:
            continue
        for _, message, _ in note.received:
            judged += 1
            if not accepts.matches(dict(message.attributes)):
                violations.append(f"t={event.time:g}: {event.sender} was given {_label(message.data)} (message "
                                  f"{message.message_id}, attributes {dict(message.attributes)}) on "
                                  f"{note.subscription}, whose filter rejects it")
    return CheckResult.of("filter_respected", violations, judged=judged, rejected=rejected)


def key_order(trace: Iterable[TraceEvent], terms: Sequence[SubscriptionTerms]) -> CheckResult:
    """On an ordered subscription, one ordering key's messages are first given to clients in publish order.

    Publish order is the topic's numbering (message ids count up in the order the topic took the
    publishes). Only first deliveries are judged: a redelivery keeps its place and may follow
    later messages already given (conveyor keeps a key with one client while it holds any of its
    messages, docs/pubsub.md). Each queue generation (a Seek's) is judged afresh.
    """
    ordered = {term.name for term in terms if term.ordered}
    given: set[tuple[str, int, str]] = set()  # (subscription, generation, message id)
    last: dict[tuple[str, int, str], tuple[int, str]] = {}  # (subscription, generation, key) -> latest first given
    violations: list[str] = []
    judged = 0
    for event, note in _notes(trace):
        if type(note) is not BatchReceived or note.subscription not in ordered:
            continue
        for ack_id, message, _ in note.received:
            key = message.ordering_key
            if not key or not message.message_id.isdecimal():
                continue
            generation = generation_of(ack_id)
            seen = (note.subscription, generation, message.message_id)
            if seen in given:
                continue
            given.add(seen)
            judged += 1
            number = int(message.message_id)
            where = (note.subscription, generation, key)
            before = last.get(where)
            if before is not None and before[0] > number:
                violations.append(f"t={event.time:g}: {event.sender} was first given message {number} "
                                  f"({_label(message.data)}) of key {key!r} on {note.subscription} after message "
                                  f"{before[0]} ({before[1]}), published after it")
            else:
                last[where] = (number, _label(message.data))
    return CheckResult.of("key_order", violations, judged=judged)


def stream_flow(trace: Iterable[TraceEvent], limits: Mapping[str, int]) -> CheckResult:
    """A stream's client never holds more unsettled messages from it than its flow control allows.

    ``limits``: each streaming client's path -> its ``max_outstanding_messages``. Per stream
    (binding) and queue generation, a message counts from its first delivery to the client until
    the client acks or nacks the latest delivery of it it was given; a deadline extension, or a
    settlement of an older delivery's id, frees nothing. The front's own count can only be
    higher (it frees a unit when the settlement arrives), so a client holding more than its
    limit means the front sent more than it was asked for.
    """
    holding: dict[tuple[str, str, int], dict[str, str]] = defaultdict(dict)  # stream -> message id -> latest ack id
    by_id: dict[tuple[str, str], tuple[str, str, int]] = {}  # (client, ack id) -> (binding, message id, generation)
    violations: list[str] = []
    peak = 0
    for event, note in _notes(trace):
        client = event.sender or "?"
        limit = limits.get(client)
        if limit is None:
            continue
        if type(note) is BatchReceived:
            for ack_id, message, _ in note.received:
                generation = generation_of(ack_id)
                stream = (client, note.binding, generation)
                holding[stream][message.message_id] = ack_id
                by_id[(client, ack_id)] = (note.binding, message.message_id, generation)
            for stream in {(client, note.binding, generation_of(ack_id)) for ack_id, _, _ in note.received}:
                held = len(holding[stream])
                peak = max(peak, held)
                if held > limit:
                    violations.append(f"t={event.time:g}: {client} holds {held} unsettled messages from "
                                      f"{stream[1]} (generation {stream[2]}); its flow control allows {limit}")
        elif type(note) is SettleSent and (note.kind is SettleKind.ACK or note.seconds == 0):
            for ack_id in note.ack_ids:
                known = by_id.get((client, ack_id))
                if known is None:
                    continue
                binding, message_id, generation = known
                messages = holding[(client, binding, generation)]
                if messages.get(message_id) == ack_id:
                    del messages[message_id]
    return CheckResult.of("stream_flow", violations, peak=peak)


def seek_effect(trace: Iterable[TraceEvent]) -> CheckResult:
    """After a Seek to a time, what was published before it and confirmed before the Seek is not given again.

    Seek marks every message published before its time acked (docs/pubsub.md: without retained
    acked messages or topic retention it can only do that), so no later queue generation of the
    subscription may hold it. A later generation is one above every generation its clients were
    given before the Seek was sent; a message counts when its publish was confirmed before the
    Seek was sent, so it was the subscription's already (or refused).
    """
    published: dict[bytes, int] = {}  # data -> publish time (ns), confirmed messages
    newest: dict[str, int] = defaultdict(lambda: -1)  # subscription -> highest generation given so far
    seeks: dict[str, list[tuple[float, int, int, frozenset[bytes]]]] = defaultdict(list)
    violations: list[str] = []
    judged = 0
    for event, note in _notes(trace):
        cls = type(note)
        if cls is PublishDone and not note.failure:
            for message in note.messages:
                published[message.data] = message.publish_time_ns
        elif cls is SeekSent:
            before = frozenset(data for data, at in published.items() if at < note.time_ns)
            seeks[note.subscription].append((event.time, note.time_ns, newest[note.subscription], before))
        elif cls is BatchReceived:
            for ack_id, message, _ in note.received:
                generation = generation_of(ack_id)
                newest[note.subscription] = max(newest[note.subscription], generation)
                for sent_at, time_ns, was, before in seeks.get(note.subscription, ()):
                    if generation <= was:
                        continue
                    judged += 1
                    if message.data in before:
                        violations.append(
                            f"t={event.time:g}: {event.sender} was given {_label(message.data)} (published at "
                            f"{message.publish_time_ns} ns) on {note.subscription} in generation {generation}, after a "
                            f"Seek to {time_ns} ns sent at t={sent_at:g} (generation {was} then) marked it acked")
    return CheckResult.of("seek_effect", violations, judged=judged, seeks=sum(len(s) for s in seeks.values()))

