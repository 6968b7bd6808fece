"""Checkers of the broker's per-message promises (docs/broker.md), judged from the messages clients saw.

Each reads the raw trace around one queue: the publishes it received (``DELIVERED`` to the queue),
the ``Delivered`` batches it sent consumers, the nacks, acks and releases it received, the dead
letters it published and the answers it sent publishers. Those are kernel events, not the queue's
own notes, so a queue that misreports itself cannot hide from them. Only ``length_limit`` needs the
queue's state (how many entries are AVAILABLE), which no message shows; it replays the queue's story.

* ``expiry``: no acquiring delivery of a message at or after its TTL (counted from the instant the
  queue took the publish).
* ``not_before``: no acquiring delivery of a delayed message before its delay, and none of a nacked
  one before the nack's delay or the queue's retry backoff.
* ``delivery_count``: a message's acquiring deliveries carry delivery counts 1, 2, 3, ... in order:
  a browser never acquires and never counts as a delivery, and nothing is delivered twice as one.
* ``delivery_limit``: a message is delivered at most ``max_deliveries`` times; one dead-lettered for
  its delivery limit had exactly that many deliveries, and says so (``x-delivery-count``).
* ``exclusive_lease``: a message is not delivered again while a lease on it runs (extensions count).
* ``selector_match``: a consumer is given only messages its selector matches.
* ``length_limit``: a publish leaves at most ``max_length`` entries AVAILABLE (or no more than
  before it, when returns had filled the queue past its limit); only a
  ``reject-publish`` queue refuses a publish as full; a refused message is never delivered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import final

from conveyor.actors.broker import (
    DEAD_LETTER_REASON,
    DELIVERY_COUNT,
    Ack,
    Delivered,
    Delivery,
    MatchAll,
    ModifyAckDeadline,
    Nack,
    Overflow,
    Publish,
    PublishBatch,
    PublishRejected,
    Reconfigure,
    Release,
    RetryPolicy,
    Selector,
    Subscribe,
    Subscribed,
    Unsubscribe,
)
from conveyor.runtime import EventKind, Terminated, TraceEvent

from ._queue_view import SharedTrace, queue_story
from ._result import CheckResult

_DELIVERED = EventKind.DELIVERED
_SENT = EventKind.SENT
_FULL = "queue is full"
"""How a queue's refusal of a publish past ``max_length`` begins (``QueueActor._enqueue``)."""


def _events(trace: Iterable[TraceEvent]) -> Iterable[TraceEvent]:
    return trace.events if type(trace) is SharedTrace else trace


def _published(message: object) -> tuple[object, ...]:
    """The messages of a publish the queue received (one, or a batch's)."""
    if type(message) is Publish:
        return (message.message,)
    if type(message) is PublishBatch:
        return message.messages
    return ()


@final
class _Holding:
    """One acquiring delivery as the clients saw it: who got it, which attempt, until when."""

    __slots__ = ("consumer_id", "count", "deadline")

    def __init__(self, delivery: Delivery) -> None:
        self.consumer_id = delivery.consumer_id
        self.count = delivery.delivery_count
        self.deadline = delivery.deadline


@final
class _QueueTraffic:
    """The kernel's record of one queue's traffic, walked once: what each checker here reads.

    ``browsers`` are path prefixes of consumers the workload made non-acquiring (its intent, not the
    consumer's own declaration).
    """

    def __init__(self, queue_path: str, browsers: tuple[str, ...]) -> None:
        self.queue_path = queue_path
        self.browsers = browsers
        self.paths: dict[int, str] = {}  # consumer id -> path, from Subscribed

    def is_browser(self, consumer_id: int) -> bool:
        path = self.paths.get(consumer_id, "")
        return any(path.startswith(prefix) for prefix in self.browsers)

    def let_go_of_the_dead(self, holding: dict[int, _Holding], terminated: object) -> None:
        """Forget every lease held by the consumer a ``Terminated`` names: the queue takes its leases back."""
        path = getattr(getattr(terminated, "ref", None), "path", None)
        gone = {cid for cid, known in self.paths.items() if known == path}
        for tag in [tag for tag, held in holding.items() if held.consumer_id in gone]:
            del holding[tag]

    def walk(self, trace: Iterable[TraceEvent]) -> Iterator[tuple[TraceEvent, object]]:
        """The events to or from the queue (consumers' paths learnt on the way)."""
        queue = self.queue_path
        for event in _events(trace):
            kind = event.kind
            if kind is _DELIVERED and event.receiver == queue:
                yield event, event.message
            elif kind is _SENT and event.sender == queue:
                message = event.message
                if type(message) is Subscribed and event.receiver is not None:
                    self.paths[message.consumer_id] = event.receiver
                yield event, message


def expiry(trace: Iterable[TraceEvent], queue_path: str, browsers: tuple[str, ...] = ()) -> CheckResult:
    """No acquiring delivery of a message at or after its TTL, counted from the queue's receipt of the publish."""
    traffic = _QueueTraffic(queue_path, browsers)
    expires: dict[str, float] = {}
    violations: list[str] = []
    judged = 0
    for event, message in traffic.walk(trace):
        cls = type(message)
        if event.kind is _DELIVERED:
            for published in _published(message):
                ttl = getattr(published, "ttl_s", None)
                if ttl is not None:
                    # a publish handed twice (a retried write) counts from the later receipt
                    expires[published.message_id] = event.time + ttl  # type: ignore[attr-defined]
        elif cls is Delivered:
            for delivery in message.deliveries:  # type: ignore[attr-defined]
                at = expires.get(delivery.message.message_id)
                if at is None or traffic.is_browser(delivery.consumer_id):
                    continue
                judged += 1
                if event.time >= at:
                    violations.append(
                        f"t={event.time:g}: {delivery.message.message_id!r} (tag {delivery.tag}, delivery "
                        f"{delivery.delivery_count}) given to consumer {delivery.consumer_id} after its TTL ran out "
                        f"at t={at:g}"
                    )
    return CheckResult.of("expiry", violations, judged=judged)


def not_before(
    trace: Iterable[TraceEvent], queue_path: str, retry: RetryPolicy | None, browsers: tuple[str, ...] = ()
) -> CheckResult:
    """No acquiring delivery before its time: a delayed message's delay, a nacked one's backoff (a
    ``ModifyAckDeadline`` of 0 s is a nack: its message waits out the backoff too).

    A nack counts only when it reached the queue while its consumer still held that delivery by
    what the clients saw: the consumer was given it last, had not settled it, its lease had not
    run out and it named no other attempt (a nack the queue rightly ignored sets no time). Its
    backoff is the retry policy's in force when the queue took the nack (``retry``, then each
    ``Reconfigure``'s).
    """
    traffic = _QueueTraffic(queue_path, browsers)
    ready_at: dict[str, tuple[float, str]] = {}  # message id -> earliest next delivery, and why
    received: dict[str, float] = {}
    holding: dict[int, _Holding] = {}  # tag -> its latest acquiring delivery, while unsettled
    ids: dict[int, str] = {}
    violations: list[str] = []
    judged = 0
    for event, message in traffic.walk(trace):
        cls = type(message)
        now = event.time
        if event.kind is _DELIVERED:
            for published in _published(message):
                delay = getattr(published, "delay_s", None)
                message_id: str = published.message_id  # type: ignore[attr-defined]
                if message_id not in received:
                    received[message_id] = now
                    if delay:
                        ready_at[message_id] = (now + delay, f"published at t={now:g} with delay {delay:g} s")
            zero_deadline = cls is ModifyAckDeadline and message.seconds == 0  # type: ignore[attr-defined]
            if cls is Nack or zero_deadline:  # ModifyAckDeadline(0) is Pub/Sub's nack: backoff and all
                attempts = () if zero_deadline else message.attempts  # type: ignore[attr-defined]
                for index, tag in enumerate(message.tags):  # type: ignore[attr-defined]
                    held = holding.get(tag)
                    if held is None or held.consumer_id != message.consumer_id:  # type: ignore[attr-defined]
                        continue
                    if attempts and attempts[index] != held.count:
                        continue  # a stale nack: the queue ignores it
                    del holding[tag]
                    if held.deadline is not None and now >= held.deadline:
                        continue  # the lease had run out: the entry came back by itself
                    delay_s = None if zero_deadline else message.delay_s  # type: ignore[attr-defined]
                    if delay_s is None:
                        delay_s = retry.backoff(held.count) if retry is not None else 0.0
                    if delay_s > 0 and tag in ids:
                        ready_at[ids[tag]] = (now + delay_s, f"nacked at t={now:g} after delivery {held.count}, "
                                                             f"backoff {delay_s:g} s")
            elif cls is Ack or cls is Release or cls is ModifyAckDeadline:
                for tag in message.tags:  # type: ignore[attr-defined]
                    held = holding.get(tag)
                    if held is not None and held.consumer_id == message.consumer_id:  # type: ignore[attr-defined]
                        del holding[tag]
            elif cls is Terminated:
                traffic.let_go_of_the_dead(holding, message)
            elif cls is Reconfigure:
                retry = message.config.retry  # type: ignore[attr-defined]  # backoffs of the nacks from here on
        elif cls is Delivered:
            for delivery in message.deliveries:  # type: ignore[attr-defined]
                if traffic.is_browser(delivery.consumer_id):
                    continue
                message_id = delivery.message.message_id
                ids[delivery.tag] = message_id
                holding[delivery.tag] = _Holding(delivery)
                due = ready_at.pop(message_id, None)
                if due is None:
                    continue
                judged += 1
                if now < due[0]:
                    violations.append(
                        f"t={now:g}: {message_id!r} (tag {delivery.tag}, delivery {delivery.delivery_count}) given "
                        f"to consumer {delivery.consumer_id} before t={due[0]:g} ({due[1]})"
                    )
    return CheckResult.of("not_before", violations, judged=judged)


def delivery_count(trace: Iterable[TraceEvent], queue_path: str, browsers: tuple[str, ...] = ()) -> CheckResult:
    """A message's acquiring deliveries carry delivery counts 1, 2, 3, ... in the order the queue sent them.

    A browser's view is no delivery (it never acquires), so a browser that acquired, or counted,
    shows as a gap; a message delivered twice as the same attempt shows as a repeat.
    """
    traffic = _QueueTraffic(queue_path, browsers)
    last: dict[int, int] = {}
    violations: list[str] = []
    for event, message in traffic.walk(trace):
        if event.kind is _SENT and type(message) is Delivered:
            for delivery in message.deliveries:
                if traffic.is_browser(delivery.consumer_id):
                    continue
                expected = last.get(delivery.tag, 0) + 1
                last[delivery.tag] = delivery.delivery_count
                if delivery.delivery_count != expected:
                    violations.append(
                        f"t={event.time:g}: {delivery.message.message_id!r} (tag {delivery.tag}) given to consumer "
                        f"{delivery.consumer_id} as delivery {delivery.delivery_count}, but it was its acquiring "
                        f"delivery number {expected}"
                    )
    return CheckResult.of("delivery_count", violations, messages=len(last))


def delivery_limit(
    trace: Iterable[TraceEvent], queue_path: str, max_deliveries: int | None, browsers: tuple[str, ...] = ()
) -> CheckResult:
    """At most the delivery limit's acquiring deliveries of a message; a delivery-limit dead letter had that many.

    Counted from the ``Delivered`` batches the queue sent acquiring consumers and the dead letters it
    published (``x-dead-letter-reason`` ``delivery-limit``, whose ``x-delivery-count`` must agree).
    A ``Reconfigure`` changes the limit from the next nack or lapse on, so a delivery or a dead letter
    is judged against every limit in force since the message's previous delivery (``max_deliveries``
    first): one more delivery needs a limit above the count, a dead letter one the count reached
    (a limit lowered below a message's count dead-letters it at its next nack or lapse).
    """
    traffic = _QueueTraffic(queue_path, browsers)
    limits: list[float] = [_limit(max_deliveries)]  # each limit in force, in the order the queue took them
    given: dict[str, int] = {}
    since: dict[str, int] = {}  # message id -> the index in ``limits`` at its last delivery
    reported: set[str] = set()
    violations: list[str] = []
    dead = 0
    for event, message in traffic.walk(trace):
        cls = type(message)
        if event.kind is not _SENT:
            if cls is Reconfigure:  # handled by the queue: in force from here on
                limits.append(_limit(message.config.max_deliveries))  # type: ignore[attr-defined]
            continue
        if cls is Delivered:
            for delivery in message.deliveries:  # type: ignore[attr-defined]
                if traffic.is_browser(delivery.consumer_id):
                    continue
                message_id = delivery.message.message_id
                count = given[message_id] = given.get(message_id, 0) + 1
                allowed = max(limits[since.get(message_id, 0):])
                since[message_id] = len(limits) - 1
                if count > allowed and message_id not in reported:
                    reported.add(message_id)
                    violations.append(
                        f"t={event.time:g}: {message_id!r} (tag {delivery.tag}) given to consumer "
                        f"{delivery.consumer_id} as its acquiring delivery number {count}; "
                        f"max_deliveries is {_shown(allowed)}"
                    )
        elif cls is Publish and event.receiver != queue_path:
            headers = dict(message.message.headers)  # type: ignore[attr-defined]
            if headers.get(DEAD_LETTER_REASON) != "delivery-limit":
                continue
            dead += 1
            message_id = message.message.message_id  # type: ignore[attr-defined]
            count = given.get(message_id, 0)
            in_force = limits[since.get(message_id, 0):]
            if count < min(in_force) or headers.get(DELIVERY_COUNT) != count:  # a lowered limit may be passed
                violations.append(
                    f"t={event.time:g}: {message_id!r} dead-lettered for its delivery limit "
                    f"({'/'.join(_shown(limit) for limit in sorted(set(in_force)))}) after {count} acquiring "
                    f"deliveries (its dead letter says {headers.get(DELIVERY_COUNT)})"
                )
    return CheckResult.of("delivery_limit", violations, dead_lettered=dead, reconfigured=len(limits) - 1)


def _limit(max_deliveries: int | None) -> float:
    return float("inf") if max_deliveries is None else max_deliveries


def _shown(limit: float) -> str:
    return "None" if limit == float("inf") else str(int(limit))


def length_limit(
    trace: Iterable[TraceEvent], queue_path: str, max_length: int | None, overflow: Overflow,
    browsers: tuple[str, ...] = (),
) -> CheckResult:
    """A publish never leaves more than ``max_length`` AVAILABLE entries (or more than were there before it).

    AVAILABLE counts every entry enqueued and not settled, less those held, delayed ones included
    (``QueueConfig.max_length``). Returns are never refused, so a release can leave the queue above
    its limit; a publish then must not add to it (``drop-head`` evicts one, ``reject-publish``
    refuses). The count is the queue's state, so it is replayed from the queue's story; a publish's
    effect is judged once its eviction, if any, is done. Refusals come from what the publisher was
    told: only a ``reject-publish`` queue refuses as full, and a refused message is never delivered.
    """
    if max_length is None:
        return CheckResult.of("length_limit", [], judged=0)
    live: set[int] = set()
    held: set[int] = set()
    acquiring: dict[int, bool] = {}
    violations: list[str] = []
    peak = 0
    pending: tuple[float, int] | None = None  # a publish not yet judged: its time, the count before it

    def judge() -> None:
        nonlocal pending, peak
        if pending is None:
            return
        available = len(live) - len(held)
        peak = max(peak, available)
        if available > max(max_length, pending[1]):
            violations.append(f"t={pending[0]:g}: {available} entries available after a publish "
                              f"({pending[1]} before it); max_length is {max_length} ({overflow.value})")
        pending = None

    for obs in queue_story(trace, queue_path):
        kind = obs.kind
        if kind == "settled":
            live.discard(obs.data.tag)
            held.discard(obs.data.tag)
            continue
        judge()
        if kind == "subscribed":
            info = obs.data[0]
            acquiring[info.consumer_id] = info.acquiring and not any(info.path.startswith(p) for p in browsers)
        elif kind == "enqueued":
            pending = (obs.time, len(live) - len(held))
            live.add(obs.data.tag)
        elif kind == "delivered":
            for delivery in obs.data:
                if acquiring.get(delivery.consumer_id, True):
                    held.add(delivery.tag)
        elif kind == "returned":
            held.discard(obs.data.tag)
    judge()
    # Refusals, from what the publisher was told: a full queue refuses only when full, and never delivers it.
    refused: set[str] = set()
    traffic = _QueueTraffic(queue_path, browsers)
    for event, message in traffic.walk(trace):
        if event.kind is _SENT and type(message) is PublishRejected and message.reason.startswith(_FULL):
            refused.add(message.message_id)
            if overflow is not Overflow.REJECT_PUBLISH:
                violations.append(f"t={event.time:g}: {message.message_id!r} refused as full by a "
                                  f"{overflow.value} queue")
        elif event.kind is _SENT and type(message) is Delivered:
            for delivery in message.deliveries:
                if delivery.message.message_id in refused:
                    violations.append(f"t={event.time:g}: {delivery.message.message_id!r} delivered after its "
                                      "publish was refused")
    return CheckResult.of("length_limit", violations, peak=peak, refused=len(refused))


def selector_match(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """A consumer is given only messages its selector matches (browsers too).

    The selector is the one the consumer subscribed with (its ``Subscribe``, as the queue
    received it), tied to the consumer id the queue answered it with (``Subscribed``).
    """
    asked: dict[str, Selector] = {}  # consumer path -> the selector it subscribed with
    selectors: dict[int, Selector] = {}
    violations: list[str] = []
    judged = 0
    for event in _events(trace):
        message = event.message
        cls = type(message)
        if event.kind is _DELIVERED and event.receiver == queue_path and cls is Subscribe:
            asked[message.consumer.path] = message.selector
        elif event.kind is _SENT and event.sender == queue_path:
            if cls is Subscribed and event.receiver in asked:
                selectors[message.consumer_id] = asked[event.receiver]
            elif cls is Delivered:
                for delivery in message.deliveries:
                    selector = selectors.get(delivery.consumer_id)
                    if selector is None or type(selector) is MatchAll:
                        continue
                    judged += 1
                    if not selector.matches(delivery.message.header_map()):
                        violations.append(
                            f"t={event.time:g}: {delivery.message.message_id!r} (tag {delivery.tag}) given to "
                            f"consumer {delivery.consumer_id}, whose selector {selector} does not match it"
                        )
    return CheckResult.of("selector_match", violations, judged=judged)


def exclusive_lease(trace: Iterable[TraceEvent], queue_path: str, browsers: tuple[str, ...] = ()) -> CheckResult:
    """A message is leased to one consumer at a time: not delivered again while a lease on it runs.

    A lease runs from an acquiring delivery until its deadline, moved by the holder's
    ``ModifyAckDeadline`` (0 ends it), or until the holder acks, nacks (that delivery) or releases
    it, unsubscribes or stops. All of it from the kernel's record: the batches the queue sent and the
    requests it received. An extension that reaches the queue at its lease's very deadline may come
    before or after the lapse, so that lease is not judged further.
    """
    traffic = _QueueTraffic(queue_path, browsers)
    holding: dict[int, _Holding] = {}
    violations: list[str] = []
    judged = 0
    for event, message in traffic.walk(trace):
        cls = type(message)
        now = event.time
        if event.kind is _DELIVERED:
            if cls is Ack or cls is Release or cls is Nack or cls is ModifyAckDeadline:
                consumer_id = message.consumer_id  # type: ignore[attr-defined]
                attempts = message.attempts if cls is Nack else ()  # type: ignore[attr-defined]
                for index, tag in enumerate(message.tags):  # type: ignore[attr-defined]
                    held = holding.get(tag)
                    if held is None or held.consumer_id != consumer_id:
                        continue
                    if attempts and attempts[index] != held.count:
                        continue  # a stale nack changes nothing
                    seconds = message.seconds if cls is ModifyAckDeadline else 0.0  # type: ignore[attr-defined]
                    if held.deadline is not None and now >= held.deadline:
                        del holding[tag]  # lapsed (or lapsing this instant): the queue decides
                    elif seconds > 0:
                        held.deadline = now + seconds
                    else:
                        del holding[tag]
            elif cls is Unsubscribe:
                gone = message.consumer_id  # type: ignore[attr-defined]
                for tag in [tag for tag, held in holding.items() if held.consumer_id == gone]:
                    del holding[tag]
            elif cls is Terminated:
                traffic.let_go_of_the_dead(holding, message)
        elif cls is Delivered:
            for delivery in message.deliveries:  # type: ignore[attr-defined]
                if traffic.is_browser(delivery.consumer_id):
                    continue
                judged += 1
                held = holding.get(delivery.tag)
                if held is not None and held.deadline is not None and now < held.deadline:
                    violations.append(
                        f"t={now:g}: {delivery.message.message_id!r} (tag {delivery.tag}, delivery "
                        f"{delivery.delivery_count}) given to consumer {delivery.consumer_id} while consumer "
                        f"{held.consumer_id}'s lease on delivery {held.count} ran until t={held.deadline:g}"
                    )
                holding[delivery.tag] = _Holding(delivery)
    return CheckResult.of("exclusive_lease", violations, judged=judged)
