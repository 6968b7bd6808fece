"""Checkers of the broker's request-level promises (docs/broker.md), judged from the messages clients saw.

Like ``_deliveries``, each reads the kernel's record of one queue's traffic (the requests it
received, the answers and batches it sent), never the queue's own notes:

* ``stale_nack``: a nack naming an older delivery than the one its consumer holds changes nothing:
  that delivery is neither given again nor dead-lettered while its lease runs.
* ``ack_confirms``: ``Ack(confirm=True)`` is answered ``AckResult`` with every tag whose lease the
  consumer still held as acked, and every other (a lapsed lease, a tag it never held) as invalid.
* ``immediate_publish``: ``Publish(immediate=True)`` is taken only when an interested acquiring
  consumer whose selector matches could take it now (never a delayed message), and refused as
  immediate only when none could.
* ``publish_outcomes``: a message larger than the ``max_message_bytes`` in force is refused and one
  within it is not refused for its size; a ``PublishBatch`` is answered with one outcome per
  message, in order; a refused message is never delivered.
* ``reconfigure``: every acquiring delivery's lease is the ack deadline in force when it was made
  (a ``Reconfigure`` applies from its arrival on, and never to leases already given).

A request whose handler failed (``FAILED``, a disk error) changed nothing: the restarted queue
handles it again, and is judged on that.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from typing import final

from conveyor.actors.broker import (
    Ack,
    AckResult,
    BatchPublished,
    Delivered,
    Message,
    ModifyAckDeadline,
    Nack,
    Publish,
    PublishBatch,
    Published,
    PublishRejected,
    Reconfigure,
    Release,
    Selector,
    SetInterest,
    Subscribe,
    Subscribed,
    Unsubscribe,
)
from conveyor.runtime import EventKind, Terminated, TraceEvent

from ._deliveries import _events, _Holding, _QueueTraffic
from ._result import CheckResult

_DELIVERED = EventKind.DELIVERED
_SENT = EventKind.SENT
_FAILED = EventKind.FAILED
_IMMEDIATE = "immediate"
"""How a queue's refusal of an immediate publish begins (``QueueActor._enqueue``)."""
_TOO_BIG = "message of"
"""How a queue's refusal of a message over ``max_message_bytes`` begins."""


@final
class _Leases:
    """The acquiring deliveries consumers hold, from the kernel's record, with an undo for a failed request.

    ``holding`` maps a tag to its latest acquiring delivery until its holder settles it (an ack, a
    release, a nack of that delivery, ``ModifyAckDeadline`` 0), unsubscribes or stops; an extension
    moves its deadline. A lapse is read from the deadline, not removed.
    """

    def __init__(self, traffic: _QueueTraffic) -> None:
        self.traffic = traffic
        self.holding: dict[int, _Holding] = {}
        self.saved: tuple[object, dict[int, tuple[int, int, float | None] | None]] | None = None

    def held(self, tag: int, consumer_id: int, now: float) -> _Holding | None:
        """The delivery of ``tag`` that ``consumer_id`` holds with its lease running at ``now``, if any."""
        held = self.holding.get(tag)
        if held is None or held.consumer_id != consumer_id or (held.deadline is not None and now >= held.deadline):
            return None
        return held

    def request(self, now: float, message: object) -> None:
        """A request the queue received: settle, extend or forget what it names (undone if it fails)."""
        cls = type(message)
        holding = self.holding
        if cls is Ack or cls is Release or cls is Nack or cls is ModifyAckDeadline:
            self._save(message, message.tags)  # type: ignore[attr-defined]
            consumer_id = message.consumer_id  # type: ignore[attr-defined]
            attempts = message.attempts if cls is Nack else ()  # type: ignore[attr-defined]
            seconds = message.seconds if cls is ModifyAckDeadline else 0.0  # type: ignore[attr-defined]
            for index, tag in enumerate(message.tags):  # type: ignore[attr-defined]
                held = holding.get(tag)
                if held is None or held.consumer_id != consumer_id or (attempts and attempts[index] != held.count):
                    continue
                if seconds > 0 and (held.deadline is None or now < held.deadline):
                    held.deadline = now + seconds
                else:
                    del holding[tag]
        elif cls is Unsubscribe or cls is Terminated:
            if cls is Unsubscribe:
                gone = {message.consumer_id}  # type: ignore[attr-defined]
            else:
                path = getattr(getattr(message, "ref", None), "path", None)
                gone = {cid for cid, known in self.traffic.paths.items() if known == path}
            tags = [tag for tag, held in holding.items() if held.consumer_id in gone]
            self._save(message, tags)
            for tag in tags:
                del holding[tag]

    def delivered(self, message: Delivered) -> None:
        for delivery in message.deliveries:
            if not self.traffic.is_browser(delivery.consumer_id):
                self.holding[delivery.tag] = _Holding(delivery)

    def failed(self, message: object) -> None:
        """The queue's handler of ``message`` failed: what it would have settled is held again."""
        if self.saved is None or self.saved[0] is not message:
            return
        for tag, kept in self.saved[1].items():
            if kept is None:
                self.holding.pop(tag, None)
                continue
            restored = self.holding.get(tag)
            if restored is None:
                restored = self.holding[tag] = _Holding.__new__(_Holding)
            restored.consumer_id, restored.count, restored.deadline = kept
        self.saved = None

    def _save(self, message: object, tags: Iterable[int]) -> None:
        kept: dict[int, tuple[int, int, float | None] | None] = {}
        for tag in tags:
            held = self.holding.get(tag)
            kept[tag] = None if held is None else (held.consumer_id, held.count, held.deadline)
        self.saved = (message, kept)


def stale_nack(trace: Iterable[TraceEvent], queue_path: str, browsers: tuple[str, ...] = ()) -> CheckResult:
    """A nack naming an older delivery than the one its consumer holds changes nothing.

    The delivery the consumer holds stays leased to it: it is not given to anyone again, nor
    dead-lettered, until its holder settles it, its lease runs out or its holder goes.
    """
    traffic = _QueueTraffic(queue_path, browsers)
    leases = _Leases(traffic)
    kept: dict[int, tuple[_Holding, str]] = {}  # tag -> the delivery a stale nack left alone, and the nack
    ids: dict[int, str] = {}
    violations: list[str] = []
    judged = 0
    for event, message in traffic.walk(trace):
        cls = type(message)
        now = event.time
        if event.kind is _DELIVERED:
            if cls is Nack and message.attempts:  # type: ignore[attr-defined]
                for tag, attempt in zip(message.tags, message.attempts, strict=True):  # type: ignore[attr-defined]
                    held = leases.held(tag, message.consumer_id, now)  # type: ignore[attr-defined]
                    if held is not None and held.count != attempt:
                        judged += 1
                        kept[tag] = (held, f"consumer {held.consumer_id}'s nack of delivery {attempt} at t={now:g}")
            leases.request(now, message)
            for tag in [tag for tag, (held, _) in kept.items() if leases.holding.get(tag) is not held]:
                del kept[tag]  # settled by its holder, or its holder went
        elif cls is Delivered:
            for delivery in message.deliveries:  # type: ignore[attr-defined]
                if traffic.is_browser(delivery.consumer_id):
                    continue
                ids[delivery.tag] = delivery.message.message_id
                found = kept.pop(delivery.tag, None)
                if found is not None and (found[0].deadline is None or now < found[0].deadline):
                    violations.append(
                        f"t={now:g}: {delivery.message.message_id!r} (tag {delivery.tag}) given to consumer "
                        f"{delivery.consumer_id} as delivery {delivery.delivery_count} while delivery "
                        f"{found[0].count} was leased until t={found[0].deadline:g}, after {found[1]} (stale)"
                    )
            leases.delivered(message)  # type: ignore[arg-type]
        elif cls is Publish and event.kind is _SENT and event.receiver != queue_path:  # a dead letter
            dead_id = message.message.message_id  # type: ignore[attr-defined]
            for tag, (held, why) in list(kept.items()):
                if ids.get(tag) == dead_id and (held.deadline is None or now < held.deadline):
                    del kept[tag]
                    violations.append(f"t={now:g}: {dead_id!r} (tag {tag}) dead-lettered while delivery "
                                      f"{held.count} was leased until t={held.deadline:g}, after {why} (stale)")
    return CheckResult.of("stale_nack", violations, judged=judged)


def _with_failures_of(trace: Iterable[TraceEvent], queue_path: str) -> Iterable[TraceEvent]:
    """The trace without other actors' ``FAILED`` events: the queue's own say which request it must handle again."""
    return (event for event in _events(trace) if event.kind is not _FAILED or event.receiver == queue_path)


def ack_confirms(trace: Iterable[TraceEvent], queue_path: str, browsers: tuple[str, ...] = ()) -> CheckResult:
    """``Ack(confirm=True)`` is answered truly: held tags acked, a lapsed lease's tag (or one never held) invalid.

    A tag counts as held when its consumer was given it last, has not settled it since and its
    lease had not run out when the ack arrived (a lapsed message redelivered to the same consumer
    is held again: an ack names no delivery). An ack that arrives at its lease's very deadline may
    come before or after the lapse, so that tag is not judged.
    """
    traffic = _QueueTraffic(queue_path, browsers)
    leases = _Leases(traffic)
    asked: dict[str, deque[tuple[float, frozenset[int], frozenset[int]]]] = defaultdict(deque)
    violations: list[str] = []
    judged = 0
    for event in _with_failures_of(trace, queue_path):
        message = event.message
        cls = type(message)
        now = event.time
        if event.kind is _FAILED:
            leases.failed(message)
            if cls is Ack and message.confirm and asked[event.sender or ""]:
                asked[event.sender or ""].pop()  # handled again by the restarted queue
            continue
        if event.kind is _DELIVERED and event.receiver == queue_path:
            if cls is Ack and message.confirm:
                valid: set[int] = set()
                lapsed: set[int] = set()
                for tag in message.tags:
                    held = leases.holding.get(tag)
                    if held is None or held.consumer_id != message.consumer_id:
                        lapsed.add(tag)
                    elif held.deadline is None or now < held.deadline:
                        valid.add(tag)
                    elif now > held.deadline:
                        lapsed.add(tag)
                asked[event.sender or ""].append((now, frozenset(valid), frozenset(lapsed)))
            leases.request(now, message)
        elif event.kind is _SENT and event.sender == queue_path:
            if cls is Subscribed and event.receiver is not None:
                traffic.paths[message.consumer_id] = event.receiver
            elif cls is Delivered:
                leases.delivered(message)
            elif cls is AckResult:
                waiting = asked[event.receiver or ""]
                if not waiting:
                    violations.append(f"t={now:g}: {event.receiver} was sent an AckResult it never asked for")
                    continue
                at, valid_tags, lapsed_tags = waiting.popleft()
                judged += len(valid_tags) + len(lapsed_tags)
                for tag in sorted(lapsed_tags & set(message.acked)):
                    violations.append(f"t={now:g}: the confirmed ack of tag {tag} that {event.receiver} sent at "
                                      f"t={at:g} was reported acked, though its lease had lapsed or was not its own")
                for tag in sorted(valid_tags & set(message.invalid)):
                    violations.append(f"t={now:g}: the confirmed ack of tag {tag} that {event.receiver} sent at "
                                      f"t={at:g} was reported invalid, though it held the lease")
    return CheckResult.of("ack_confirms", violations, judged=judged)


@final
class _Roster:
    """Who could take a message now, from the requests the queue received: its consumers' declarations."""

    def __init__(self, traffic: _QueueTraffic) -> None:
        self.traffic = traffic
        self.asked: dict[str, Subscribe] = {}  # consumer path -> its Subscribe
        self.interested: dict[str, bool] = {}

    def request(self, message: object) -> None:
        cls = type(message)
        if cls is Subscribe:
            path = message.consumer.path  # type: ignore[attr-defined]
            if path not in self.asked:
                self.asked[path] = message  # type: ignore[assignment]
                self.interested[path] = message.interested  # type: ignore[attr-defined]
        elif cls is SetInterest:
            path = self.traffic.paths.get(message.consumer_id)  # type: ignore[attr-defined]
            if path in self.asked:
                self.interested[path] = message.interested  # type: ignore[attr-defined]
        elif cls is Unsubscribe:
            path = self.traffic.paths.get(message.consumer_id)  # type: ignore[attr-defined]
            if path is not None:
                self.asked.pop(path, None)
        elif cls is Terminated:
            self.asked.pop(getattr(getattr(message, "ref", None), "path", ""), None)

    def takers(self, sent: Message) -> list[str]:
        """The interested acquiring consumers whose selector matches ``sent`` (groups aside)."""
        headers = sent.header_map()
        found = []
        for path, subscribe in self.asked.items():
            selector: Selector = subscribe.selector
            if (subscribe.acquiring and self.interested.get(path, False) and selector.matches(headers)
                    and not any(path.startswith(prefix) for prefix in self.traffic.browsers)):
                found.append(path)
        return found


def immediate_publish(trace: Iterable[TraceEvent], queue_path: str, browsers: tuple[str, ...] = ()) -> CheckResult:
    """``Publish(immediate=True)`` is taken only if a consumer could take it now, and refused only if none could.

    Could take it now: an acquiring consumer (by the workload's intent and its own declaration)
    subscribed, interested (its latest ``SetInterest``, as the queue received it) and matching by
    selector; a delayed message never. A message of a group is not judged when refused (another
    consumer may own its group).
    """
    traffic = _QueueTraffic(queue_path, browsers)
    roster = _Roster(traffic)
    takers: dict[str, tuple[float, Message, list[str]]] = {}  # message id -> when received, what, who could take it
    violations: list[str] = []
    judged = 0
    for event, message in traffic.walk(trace):
        cls = type(message)
        now = event.time
        if event.kind is _DELIVERED:
            if cls is Publish and message.immediate:  # type: ignore[attr-defined]
                sent = message.message  # type: ignore[attr-defined]
                who = [] if sent.delay_s else roster.takers(sent)
                takers[sent.message_id] = (now, sent, who)  # a retried publish: the later receipt counts
            roster.request(message)
        elif cls is Published:
            found = takers.pop(message.message_id, None)  # type: ignore[attr-defined]
            if found is not None:
                judged += 1
                at, sent, who = found
                if not who:
                    why = "it is delayed" if sent.delay_s else "no interested acquiring consumer matched it"
                    violations.append(f"t={now:g}: {sent.message_id!r}, published immediate at t={at:g}, was taken "
                                      f"though {why}")
        elif cls is PublishRejected:
            found = takers.pop(message.message_id, None)  # type: ignore[attr-defined]
            if found is not None and message.reason.startswith(_IMMEDIATE):  # type: ignore[attr-defined]
                judged += 1
                at, sent, who = found
                if who and sent.group is None:
                    violations.append(f"t={now:g}: {sent.message_id!r}, published immediate at t={at:g}, was refused "
                                      f"though {', '.join(who)} could take it")
    return CheckResult.of("immediate_publish", violations, judged=judged)


def publish_outcomes(trace: Iterable[TraceEvent], queue_path: str, max_message_bytes: int) -> CheckResult:
    """Size limits and batches from the publisher's side: nothing half-applied, nothing refused delivered.

    A message larger than the ``max_message_bytes`` in force when the queue received it (its
    ``Reconfigure`` counted from its arrival) is refused, and one within it is not refused for
    its size; a ``PublishBatch`` is answered by a ``BatchPublished`` with one outcome per message,
    in order and naming it; a refused message, alone or in a batch, is never delivered.
    """
    limit = max_message_bytes
    previous = limit
    over: dict[str, tuple[bool, int, int]] = {}  # message id -> (over the limit, its size, the limit)
    batches: dict[str, deque[tuple[str, ...]]] = defaultdict(deque)  # publisher path -> its batches' ids
    refused: set[str] = set()
    violations: list[str] = []
    judged = 0

    def outcome(now: float, answer: object) -> None:
        nonlocal judged
        message_id: str = answer.message_id  # type: ignore[attr-defined]
        found = over.pop(message_id, None)
        if type(answer) is PublishRejected:
            refused.add(message_id)
        if found is None:
            return
        judged += 1
        too_big, size, bound = found
        if too_big and type(answer) is Published:
            violations.append(f"t={now:g}: {message_id!r} of {size} bytes was confirmed; max_message_bytes is {bound}")
        elif not too_big and type(answer) is PublishRejected and answer.reason.startswith(_TOO_BIG):
            violations.append(f"t={now:g}: {message_id!r} of {size} bytes was refused as too big; "
                              f"max_message_bytes is {bound}")

    for event in _with_failures_of(trace, queue_path):
        message = event.message
        cls = type(message)
        now = event.time
        if event.kind is _FAILED:
            if cls is PublishBatch and batches[event.sender or ""]:
                batches[event.sender or ""].pop()  # handled again by the restarted queue
            elif cls is Reconfigure:
                limit = previous
            continue
        if event.kind is _DELIVERED and event.receiver == queue_path:
            if cls is Publish or cls is PublishBatch:
                messages = (message.message,) if cls is Publish else message.messages
                for sent in messages:
                    over[sent.message_id] = (sent.size > limit, sent.size, limit)
                if cls is PublishBatch:
                    batches[event.sender or ""].append(tuple(sent.message_id for sent in messages))
            elif cls is Reconfigure:
                previous, limit = limit, message.config.max_message_bytes
        elif event.kind is _SENT and event.sender == queue_path:
            if cls is Published or cls is PublishRejected:
                outcome(now, message)
            elif cls is BatchPublished:
                waiting = batches[event.receiver or ""]
                ids = waiting.popleft() if waiting else None
                answered = tuple(answer.message_id for answer in message.outcomes)
                if ids != answered:
                    violations.append(f"t={now:g}: {event.receiver} was answered for {list(answered)}, "
                                      f"but its batch was {list(ids or ())}")
                for answer in message.outcomes:
                    outcome(now, answer)
            elif cls is Delivered:
                for delivery in message.deliveries:
                    if delivery.message.message_id in refused:
                        violations.append(f"t={now:g}: {delivery.message.message_id!r} given to consumer "
                                          f"{delivery.consumer_id} though its publish was refused")
    return CheckResult.of("publish_outcomes", violations, judged=judged, refused=len(refused))


def reconfigure(
    trace: Iterable[TraceEvent], queue_path: str, ack_deadline_s: float, browsers: tuple[str, ...] = ()
) -> CheckResult:
    """Every acquiring delivery is leased for its consumer's own lease, or else the ack deadline in force.

    ``Reconfigure`` takes effect when the queue receives it, for deliveries from then on; a
    delivery made before keeps its deadline (``exclusive_lease`` judges the leases themselves).
    A consumer that subscribed with ``lease_s`` (a Pub/Sub stream's deadline) is leased that long
    whatever the queue's deadline.
    """
    traffic = _QueueTraffic(queue_path, browsers)
    deadline_s = previous = ack_deadline_s
    leases: dict[str, float] = {}  # consumer path -> the lease it subscribed with
    violations: list[str] = []
    judged = changes = 0
    for event in _with_failures_of(trace, queue_path):
        message = event.message
        cls = type(message)
        if event.kind is _FAILED:
            if cls is Reconfigure:
                deadline_s = previous
                changes -= 1
            continue
        if event.kind is _DELIVERED and event.receiver == queue_path and cls is Reconfigure:
            previous, deadline_s = deadline_s, message.config.ack_deadline_s
            changes += 1
        elif event.kind is _DELIVERED and event.receiver == queue_path and cls is Subscribe:
            if message.lease_s is not None:
                leases[message.consumer.path] = message.lease_s
        elif event.kind is _SENT and event.sender == queue_path:
            if cls is Subscribed and event.receiver is not None:
                traffic.paths[message.consumer_id] = event.receiver
            elif cls is Delivered:
                for delivery in message.deliveries:
                    if traffic.is_browser(delivery.consumer_id) or delivery.deadline is None:
                        continue
                    judged += 1
                    lease_s = leases.get(traffic.paths.get(delivery.consumer_id, ""), deadline_s)
                    if abs(delivery.deadline - (event.time + lease_s)) > 1e-9:
                        own = "its consumer's own lease" if lease_s != deadline_s else "the ack deadline in force"
                        violations.append(
                            f"t={event.time:g}: {delivery.message.message_id!r} (tag {delivery.tag}) given to consumer "
                            f"{delivery.consumer_id} leased until t={delivery.deadline:g}; {own} "
                            f"is {lease_s:g} s ({changes} Reconfigure received)"
                        )
    return CheckResult.of("reconfigure", violations, judged=judged, reconfigured=changes)
