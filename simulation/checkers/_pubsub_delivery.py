"""Promises of the Pub/Sub front about what a Seek replays, what a Pull takes, and when an idle stream ends.

* ``seek_replay``: a Seek to a time builds the subscription's next queue generation from what it
  retains: with ``retain_acked_messages``, every message it held that was published at or after
  the time, acked or not; without, none that its clients had acked before the Seek (an acked
  message is not retained, docs/pubsub.md "Seek"). Read from the queues' own notes
  (``EntryEnqueued``, ``EntrySettled``): what the new generation was given is the promise, and no
  client sees it whole.
* ``pull_fill``: a Pull's batch is the longest run of the deliveries its binding holds, in order,
  that fits its ``max_bytes`` and ``max_messages`` (the first always): it never goes over, and it
  never leaves out one that fits. Read from the kernel's record of each pull binding's mail.
* ``idle_stream``: a stream whose client asks for nothing for ``IDLE_STREAM_S`` (an hour) is
  closed then, and not before: asked after less it serves, after more it is gone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import final

import attrs

from conveyor.actors.broker import Delivery, EntryEnqueued, EntrySettled
from conveyor.actors.pubsub import IDLE_STREAM_S, Batch
from conveyor.runtime import EventKind, TraceEvent

from ._pubsub import BatchReceived, PublishSent, SeekDone, SeekSent, StreamBound
from ._result import CheckResult


@final
@attrs.frozen
class IdleStreamOpened:
    """Idle streamer's history: its stream on ``binding`` answered; it will ask again after ``idle_s`` of silence."""

    subscription: str
    binding: str
    idle_s: float


@final
@attrs.frozen
class IdleStreamEnded:
    """Idle streamer's history: its stream ``served`` the batch it asked for, or was closed first (False)."""

    subscription: str
    served: bool


_GENERATION_PREFIX = "queue-"


def _queue_of(path: str) -> tuple[str, int] | None:
    """(subscription actor path, generation) of a queue under the front, or None."""
    parent, _, name = path.rpartition("/")
    number = name.removeprefix(_GENERATION_PREFIX)
    if number == name or not number.isdecimal():
        return None
    return parent, int(number)


def seek_replay(trace: Iterable[TraceEvent], retaining: frozenset[str]) -> CheckResult:
    """What each Seek's new queue generation was given, against what the subscription retained (module doc).

    ``retaining``: the names of the subscriptions with ``retain_acked_messages``. A Seek is judged once
    answered (``SeekDone``: its next generation was built), if a client was bound to its subscription
    before it was sent (which names the subscription's actor). What the queues held and acked is
    taken when the Seek is sent (all of it reached the subscription before the Seek did); a message
    dead-lettered before the Seek was answered is no longer retained.
    """
    actor_of: dict[str, str] = {}  # subscription name -> its actor's path
    published: dict[bytes, int] = {}  # data -> publish time (ns), from the publishers' notes
    held: dict[str, set[bytes]] = defaultdict(set)  # actor -> data its queues were given
    acked: dict[str, set[bytes]] = defaultdict(set)  # actor -> data its queues took an ack of
    gone: dict[str, dict[bytes, float]] = defaultdict(dict)  # actor -> data dead-lettered or expired -> when
    tags: dict[tuple[str, int], bytes] = {}  # (queue path, tag) -> data (queue names repeat across subscriptions)
    newest: dict[str, int] = defaultdict(int)  # actor -> highest generation seen
    given: dict[tuple[str, int], set[bytes]] = defaultdict(set)  # (actor, generation) -> data enqueued
    sent: dict[str, list[_Seek]] = defaultdict(list)  # subscription -> seeks sent, not yet answered
    seeks: list[tuple[_Seek, float]] = []
    for event in trace:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        cls = type(note)
        if cls is EntryEnqueued or cls is EntrySettled:
            where = _queue_of(event.sender or "")
            if where is None:
                continue
            actor, generation = where
            newest[actor] = max(newest[actor], generation)
            queue = event.sender or ""
            if cls is EntryEnqueued:
                data = note.message.body
                tags[(queue, note.tag)] = data
                given[(actor, generation)].add(data)
                held[actor].add(data)
            elif note.outcome == "acked":
                acked[actor].add(tags.get((queue, note.tag), b""))
            else:
                gone[actor][tags.get((queue, note.tag), b"")] = event.time
        elif cls is PublishSent:
            for message in note.messages:
                published[message.data] = message.publish_time_ns
        elif cls is BatchReceived or cls is StreamBound:
            actor_of.setdefault(note.subscription, note.binding.rpartition("/")[0])
        elif cls is SeekSent:
            known = actor_of.get(note.subscription)
            if known is not None:
                sent[note.subscription].append(_Seek(event.time, note.subscription, note.time_ns, known,
                                                     newest[known], frozenset(held[known]), frozenset(acked[known])))
        elif cls is SeekDone and sent.get(note.subscription):
            seeks.append((sent[note.subscription].pop(0), event.time))
    violations: list[str] = []
    judged = 0
    for seek, done_at in seeks:
        successor = given.get((seek.actor, seek.generation + 1), set())  # answered: it was built (maybe empty)
        judged += 1
        said = (f"Seek of {seek.subscription} to {seek.time_ns} ns sent at t={seek.sent_at:g} (generation "
                 f"{seek.generation + 1})")
        if seek.subscription in retaining:
            dropped = gone[seek.actor]
            for data in sorted(seek.held - successor):
                if published.get(data, -1) >= seek.time_ns and dropped.get(data, done_at + 1) > done_at:
                    state = "acked" if data in seek.acked else "unacked"
                    violations.append(f"{said}: {data[:40]!r}, published at {published[data]} ns, {state} and "
                                      "retained, is missing from the new generation")
        else:
            for data in sorted(seek.acked & successor):
                violations.append(f"{said}: {data[:40]!r}, acked before it and not retained, is in the new "
                                  "generation again")
    return CheckResult.of("seek_replay", violations, seeks=len(seeks), judged=judged)


@final
@attrs.frozen
class _Seek:
    """A Seek as sent, with what its subscription's queues had held and acked by then."""

    sent_at: float
    subscription: str
    time_ns: int
    actor: str
    generation: int
    held: frozenset[bytes]
    acked: frozenset[bytes]


def pull_fill(trace: Iterable[TraceEvent], pulls: Mapping[str, tuple[int, int]]) -> CheckResult:
    """Each pull binding's batch is the longest prefix of its unlapsed deliveries within the client's limits.

    ``pulls``: a pulling client's path -> (``max_messages``, ``max_bytes``). A binding's buffer is
    what its current consumer delivered to it (a ``Rebind`` empties it and names the next); a delivery whose lease ran
    out before the answer is dropped, as the binding drops it.
    """
    buffers: dict[str, list[Delivery]] = defaultdict(list)
    current: dict[str, str] = {}  # binding -> its current consumer, once a Rebind named it
    answered: set[str] = set()
    violations: list[str] = []
    judged = exact = 0
    for event in trace:
        kind = event.kind
        message = event.message
        cls = type(message)
        if kind is EventKind.DELIVERED and cls is Delivery:
            receiver, sender = event.receiver or "", event.sender or ""
            if "/binding-" in receiver and sender.startswith(receiver + "/consumer-") and current.get(
                    receiver, sender) == sender:  # an earlier generation's consumer, stopping: ignored
                buffers[receiver].append(message)
        elif kind is EventKind.DELIVERED and type(message).__name__ == "Rebind":
            receiver = event.receiver or ""
            buffers.pop(receiver, None)
            current[receiver] = f"{receiver}/consumer-{message.generation}"
        elif kind is EventKind.SENT and cls is Batch and event.receiver in pulls:
            binding = event.sender or ""
            if binding in answered or "/binding-" not in binding:
                continue
            answered.add(binding)
            max_messages, max_bytes = pulls[event.receiver or ""]
            deliveries = [d for d in buffers.pop(binding, []) if d.deadline is None or d.deadline > event.time]
            expected, size = 0, 0
            for index, delivery in enumerate(deliveries[:max_messages]):
                size += delivery.message.size
                if index and size > max_bytes:
                    break
                expected += 1
            judged += 1
            exact += size == max_bytes
            got = len(message.received)
            if got != expected:
                sizes = [d.message.size for d in deliveries]
                violations.append(f"t={event.time:g}: {binding} answered {event.receiver}'s Pull (max {max_messages} "
                                  f"messages, {max_bytes} bytes) with {got} messages; it held {len(deliveries)} of "
                                  f"sizes {sizes}, of which {expected} fit")
    return CheckResult.of("pull_fill", violations, judged=judged, exact=exact)


def idle_stream(trace: Iterable[TraceEvent]) -> CheckResult:
    """An idle stream is closed once its client asked nothing for ``IDLE_STREAM_S``, and not before."""
    opened: dict[str, tuple[float, float]] = {}  # streamer -> (opened at, idle_s)
    ended: dict[str, tuple[float, bool]] = {}
    for event in trace:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        if type(note) is IdleStreamOpened:
            opened[event.sender or "?"] = (event.time, note.idle_s)
        elif type(note) is IdleStreamEnded:
            ended[event.sender or "?"] = (event.time, note.served)
    violations: list[str] = []
    for streamer, (at, idle_s) in opened.items():
        end = ended.get(streamer)
        if end is None:
            violations.append(f"{streamer}'s stream, opened at t={at:g} and asked after {idle_s:g} s, never ended")
            continue
        when, served = end
        if served and idle_s > IDLE_STREAM_S:
            violations.append(f"t={when:g}: {streamer}'s stream, opened at t={at:g}, served a batch asked after "
                              f"{idle_s:g} s of silence: it should have closed after {IDLE_STREAM_S:g} s")
        elif not served and when < at + IDLE_STREAM_S:
            violations.append(f"t={when:g}: {streamer}'s stream, opened at t={at:g}, was closed after "
                              f"{when - at:g} s of silence, before {IDLE_STREAM_S:g} s")
    return CheckResult.of("idle_stream", violations, streams=len(opened))
