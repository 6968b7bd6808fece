"""Checkers of the broker's promises, as pure functions over a trace.

Each returns a ``CheckResult``. They need a trace with notes, i.e. a system run with
``trace=True``. The promises about what consumers see (``strict_order``, ``group_exclusivity``,
``browser_completeness``, ``fairness``) are judged from the clients' side (issue 17, item 3):
what each client says it received (``DeliveryReceived``, in its own order, with its own intent
to acquire or browse) and what each publisher says it sent (``EnqueueSent``'s messages: their
priority, group and delay), never from the queue's ``Delivered`` messages or its consumers'
declarations. A queue whose clients write no such notes (one under the Pub/Sub front, whose
clients are the front's bindings) is judged from its own story (``queue_story``), as are the
checkers that replay the queue's state (``accounting``, ``priority_order``,
``consumer_priority``, ``drained``): which entries waited, and which consumer had credit, only
the queue knows.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Final, final

import attrs

from conveyor.actors.broker import (
    Delivery,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    Message,
    QueueClosed,
    Selector,
    priority_level,
)
from conveyor.runtime import EventKind, TraceEvent

from ._history import ConsumerAsked, DeliveryReceived, DeliverySettled, EnqueueSent
from ._queue_view import ConsumerInfo, ConsumerRoster, Observation, SharedTrace, is_available_at, queue_story
from ._result import CheckResult

_NOTE: Final = EventKind.NOTE
_QUEUE_OWN_RETURNS: Final = frozenset({"lease lapsed", "unsubscribed", "consumer stopped"})
"""``EntryReturned`` reasons that are the queue's own act, not a client's answer (which its client notes)."""


@final
@attrs.frozen
class Receipt:
    """One delivery as its client tells it: who got what (the publisher's message), when, meaning what."""

    time: float
    client: str
    consumer_id: int
    tag: int
    attempt: int
    acquiring: bool
    message: Message | None  # as its publisher sent it; None if no publisher said so


@final
class ClientView:
    """A queue's deliveries as its clients received and answered them, and its messages as their publishers sent them.

    ``events`` interleaves, in trace order, the ``Receipt`` of each delivery, each client answer
    (``DeliverySettled``) and the queue's own ``EntryReturned`` / ``EntrySettled`` notes (a lease
    that lapsed is the queue's act, which only it can tell).
    """

    __slots__ = ("asked", "events", "receipts")

    def __init__(self, trace: Iterable[TraceEvent], queue_path: str) -> None:
        sent: dict[str, Message] = {}
        self.events: list[Receipt | DeliverySettled | EntryReturned | EntrySettled] = []
        self.asked: dict[str, Selector] = {}  # client -> the selector it asked for (``ConsumerAsked``)
        self.receipts = 0
        for event in trace:
            if event.kind is not _NOTE:
                continue
            note = event.message
            cls = type(note)
            if cls is DeliveryReceived:
                if note.queue == queue_path:
                    self.receipts += 1
                    self.events.append(Receipt(event.time, event.sender or "?", note.consumer_id, note.tag,
                                               note.attempt, note.acquiring, sent.get(note.message_id)))
            elif cls is EnqueueSent:
                if note.queue == queue_path:
                    for message in note.messages:
                        sent.setdefault(message.message_id, message)
            elif cls is DeliverySettled:
                if note.queue == queue_path:
                    self.events.append(note)
            elif cls is ConsumerAsked:
                if note.queue == queue_path:
                    self.asked[event.sender or "?"] = note.selector
            elif (cls is EntryReturned or cls is EntrySettled) and event.sender == queue_path:
                self.events.append(note)


def client_view(trace: Iterable[TraceEvent], queue_path: str) -> ClientView | None:
    """The clients' view of ``queue_path``; None when no client of it wrote receipts (judge its own story)."""
    view = ClientView(trace, queue_path)
    return view if view.receipts else None


def accounting(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Jepsen total-queue: every enqueued message ends acked, dead-lettered, expired or still queued.

    Also: no message is delivered to two acquiring consumers at once, and nothing is
    delivered or settled that was never enqueued. Counts lost / unexpected / duplicated.
    """
    enqueued: set[int] = set()
    settled: Counter[int] = Counter()
    holder: dict[int, int] = {}
    remaining: set[int] | None = None
    violations: list[str] = []
    unexpected = duplicated = 0
    acquiring: dict[int, bool] = {}
    for obs in queue_story(trace, queue_path):
        match obs.kind:
            case "subscribed":
                info: ConsumerInfo = obs.data[0]
                acquiring[info.consumer_id] = info.acquiring
            case "enqueued":
                enqueued.add(obs.data.tag)
            case "delivered":
                for delivery in obs.data:
                    if delivery.tag not in enqueued:
                        unexpected += 1
                        violations.append(f"t={obs.time:g}: tag {delivery.tag} delivered but never enqueued")
                    if not acquiring.get(delivery.consumer_id, True):
                        continue
                    if delivery.tag in holder:
                        duplicated += 1
                        violations.append(
                            f"t={obs.time:g}: tag {delivery.tag} delivered to consumer {delivery.consumer_id} "
                            f"while consumer {holder[delivery.tag]} held it"
                        )
                    holder[delivery.tag] = delivery.consumer_id
            case "returned":
                holder.pop(obs.data.tag, None)
            case "settled":
                note: EntrySettled = obs.data
                settled[note.tag] += 1
                holder.pop(note.tag, None)
                if note.tag not in enqueued:
                    unexpected += 1
                    violations.append(f"t={obs.time:g}: tag {note.tag} {note.outcome} but never enqueued")
                elif settled[note.tag] > 1:
                    duplicated += 1
                    violations.append(f"t={obs.time:g}: tag {note.tag} settled twice (now {note.outcome})")
            case "closed":
                closing: QueueClosed = obs.data
                remaining = set(closing.remaining)
    lost = 0
    if remaining is not None:
        missing = sorted(enqueued - set(settled) - remaining)
        lost = len(missing)
        violations.extend(f"tag {tag} was enqueued, never settled, and not in the queue at the end" for tag in missing)
        both = sorted(remaining & set(settled))
        violations.extend(f"tag {tag} was settled yet still in the queue at the end" for tag in both)
    return CheckResult.of(
        "accounting",
        violations,
        enqueued=len(enqueued),
        settled=len(settled),
        remaining=len(remaining or ()),
        lost=lost,
        unexpected=unexpected,
        duplicated=duplicated,
        closed=float(remaining is not None),
    )


def strict_order(
    trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10, *, from_clients: bool = True
) -> CheckResult:
    """Each consumer gets its first deliveries in queue order within a priority level.

    Applies to messages without delay or group, for consumers of one consumer priority
    (a lower-priority consumer may rightly take a skipped entry later). Judged from the order
    each client received them in and the priority their publisher gave them; with
    ``from_clients=False`` (or no client receipts) from the queue's ``Delivered`` messages, as
    the Spark trace analysis (``conveyor analyze``) judges recorded traces.
    """
    view = client_view(trace, queue_path) if from_clients else None
    if view is None:
        return _strict_order_by_queue(trace, queue_path, priorities)
    last: dict[tuple[str, int, int], int] = {}
    violations: list[str] = []
    checked = 0
    for receipt in view.events:
        if type(receipt) is not Receipt:
            continue
        message = receipt.message
        if receipt.attempt != 1 or message is None or message.delay_s or message.group is not None:
            continue
        key = (receipt.client, receipt.consumer_id, priority_level(message.priority, priorities))
        previous = last.get(key, 0)
        checked += 1
        if receipt.tag < previous:
            violations.append(
                f"t={receipt.time:g}: {receipt.client} (consumer {receipt.consumer_id}) received tag {receipt.tag} "
                f"after tag {previous} (priority {message.priority})"
            )
        last[key] = max(previous, receipt.tag)
    return CheckResult.of("strict_order", violations, checked=checked)


def _strict_order_by_queue(trace: Iterable[TraceEvent], queue_path: str, priorities: int) -> CheckResult:
    """``strict_order`` from the queue's ``Delivered`` messages, for a queue whose clients write no receipts."""
    last: dict[tuple[int, int], int] = {}
    violations: list[str] = []
    checked = 0
    for obs in queue_story(trace, queue_path):
        if obs.kind != "delivered":
            continue
        for delivery in obs.data:
            message = delivery.message
            if delivery.delivery_count != 1 or message.delay_s or message.group is not None:
                continue
            key = (delivery.consumer_id, priority_level(message.priority, priorities))
            previous = last.get(key, 0)
            checked += 1
            if delivery.tag < previous:
                violations.append(
                    f"t={obs.time:g}: consumer {delivery.consumer_id} got tag {delivery.tag} after tag {previous} "
                    f"(priority {message.priority})"
                )
            last[key] = max(previous, delivery.tag)
    return CheckResult.of("strict_order", violations, checked=checked)


class _Availability(ConsumerRoster):
    """The queue's available entries, rebuilt from its story."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[int, tuple[Message, float]] = {}
        self.ready_at: dict[int, float] = {}  # after a nack's backoff
        self.held: dict[int, int] = {}
        self.group_holders: dict[str, Counter[int]] = defaultdict(Counter)

    def apply(self, obs: Observation) -> None:
        if self.track_consumers(obs):
            return
        match obs.kind:
            case "enqueued":
                note: EntryEnqueued = obs.data
                self.entries[note.tag] = (note.message, obs.time)
            case "returned":
                self._release(obs.data.tag)
                self.ready_at[obs.data.tag] = obs.data.available_at
            case "settled":
                self._release(obs.data.tag)
                self.entries.pop(obs.data.tag, None)
                self.ready_at.pop(obs.data.tag, None)

    def hold(self, delivery: Delivery) -> None:
        self.held[delivery.tag] = delivery.consumer_id
        group = delivery.message.group
        if group is not None:
            self.group_holders[group][delivery.consumer_id] += 1

    def _release(self, tag: int) -> None:
        consumer_id = self.held.pop(tag, None)
        entry = self.entries.get(tag)
        if consumer_id is not None and entry is not None and entry[0].group is not None:
            holders = self.group_holders[entry[0].group]
            holders[consumer_id] -= 1
            if holders[consumer_id] <= 0:
                del holders[consumer_id]

    def group_free_for(self, message: Message, consumer_id: int) -> bool:
        if message.group is None:
            return True
        return all(holder == consumer_id for holder in self.group_holders[message.group])

    def could_take(self, info: ConsumerInfo, tag: int, now: float) -> bool:
        message, enqueued_at = self.entries[tag]
        return (
            tag not in self.held
            and is_available_at(message, enqueued_at, now)
            and self.ready_at.get(tag, 0.0) <= now
            and self.group_free_for(message, info.consumer_id)
            and not self.behind_group_backoff(message, tag, now)
            and info.selector.matches(message.header_map())
        )

    def behind_group_backoff(self, message: Message, tag: int, now: float, priorities: int = 10) -> bool:
        """Whether an entry of its group earlier in queue order waits out a nack's backoff (the group waits too)."""
        group = message.group
        if group is None:
            return False
        position = (-priority_level(message.priority, priorities), tag)
        for other, ready in self.ready_at.items():
            if ready > now and other != tag and other not in self.held:
                entry = self.entries.get(other)
                if (entry is not None and entry[0].group == group
                        and (-priority_level(entry[0].priority, priorities), other) < position):
                    return True
        return False


def _acquiring_deliveries(obs: Observation, view: _Availability) -> Iterable[tuple[Delivery, ConsumerInfo]]:
    for delivery in obs.data:
        info = view.consumers.get(delivery.consumer_id)
        if info is not None and info.acquiring:
            yield delivery, info


def _replayed_deliveries(
    trace: Iterable[TraceEvent], queue_path: str
) -> Iterable[tuple[float, Delivery, ConsumerInfo, _Availability]]:
    """Each acquiring delivery with the queue's state just before it; it is held once the caller moves on."""
    view = _Availability()
    for obs in queue_story(trace, queue_path):
        if obs.kind != "delivered":
            view.apply(obs)
            continue
        for delivery, info in _acquiring_deliveries(obs, view):
            yield obs.time, delivery, info, view
            view.hold(delivery)


def priority_order(trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10) -> CheckResult:
    """No consumer is given a message while a higher-priority message it could take waits.

    Checked for consumers that no interested higher-priority consumer outranks (a
    lower-priority consumer rightly leaves such entries to the higher one).
    """
    violations: list[str] = []
    checked = 0
    for time, delivery, info, view in _replayed_deliveries(trace, queue_path):
        outranked = any(
            other.priority > info.priority and other.acquiring and view.interested.get(cid, True)
            for cid, other in view.consumers.items()
        )
        if outranked:
            continue
        checked += 1
        level = priority_level(delivery.message.priority, priorities)
        for tag, (message, _) in view.entries.items():
            if priority_level(message.priority, priorities) > level and view.could_take(info, tag, time):
                violations.append(
                    f"t={time:g}: consumer {info.consumer_id} got tag {delivery.tag} (priority "
                    f"{delivery.message.priority}) while tag {tag} (priority {message.priority}) waited"
                )
                break
    return CheckResult.of("priority_order", violations, checked=checked)


def consumer_priority(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """A lower-priority consumer is served only when no higher-priority one could take the message,
    and a client is given only messages its selector matches.

    The priority rule replays the queue's story (which consumers wanted work then only the queue
    knows). The selector rule is judged from the clients: the selector each asked for
    (``ConsumerAsked``), whatever its consumer declared, against the headers its publisher gave
    each message it received.
    """
    violations: list[str] = []
    checked = 0
    clients = client_view(trace, queue_path)
    if clients is not None:
        for event in clients.events:
            if type(event) is not Receipt or event.message is None:
                continue
            wanted = clients.asked.get(event.client)
            if wanted is not None and not wanted.matches(event.message.header_map()):
                violations.append(
                    f"t={event.time:g}: {event.client} (consumer {event.consumer_id}) was given "
                    f"{event.message.message_id} (tag {event.tag}), which the selector it asked for refuses"
                )
    for time, delivery, info, view in _replayed_deliveries(trace, queue_path):
        checked += 1
        message = delivery.message
        for cid, other in view.consumers.items():
            if (
                other.priority > info.priority
                and other.acquiring
                and view.interested.get(cid, True)
                and other.selector.matches(message.header_map())
                and view.group_free_for(message, cid)
            ):
                violations.append(
                    f"t={time:g}: tag {delivery.tag} went to consumer {info.consumer_id} (priority "
                    f"{info.priority}) while consumer {cid} (priority {other.priority}) wanted work and matched"
                )
                break
    return CheckResult.of("consumer_priority", violations, checked=checked)


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index: 1.0 when all equal, 1/n when one takes everything."""
    if not values:
        return 1.0
    total = sum(values)
    squares = sum(v * v for v in values)
    return 1.0 if squares == 0 else (total * total) / (len(values) * squares)


def _intents(view: ClientView | None) -> dict[int, bool]:
    """Consumer id -> whether its client meant to acquire, as its receipts say."""
    if view is None:
        return {}
    return {event.consumer_id: event.acquiring for event in view.events if type(event) is Receipt}


def fairness(trace: Iterable[TraceEvent], queue_path: str, min_jain: float = 0.9) -> CheckResult:
    """Jain's index over deliveries to the equal acquiring consumers of the top consumer priority.

    The deliveries counted are those the clients say they received, and a consumer acquires if
    its client meant to (whatever it declared); the consumers' priorities are their
    subscriptions' (the queue's story: the clients note none).
    """
    view = client_view(trace, queue_path)
    intents = _intents(view)
    counts: Counter[int] = Counter()
    consumers: dict[int, ConsumerInfo] = {}
    for obs in queue_story(trace, queue_path):
        if obs.kind == "subscribed":
            info: ConsumerInfo = obs.data[0]
            if intents.get(info.consumer_id, info.acquiring):
                consumers[info.consumer_id] = info
        elif obs.kind == "delivered" and view is None:
            for delivery in obs.data:
                if delivery.consumer_id in consumers:
                    counts[delivery.consumer_id] += 1
    if view is not None:
        for event in view.events:
            if type(event) is Receipt and event.acquiring and event.consumer_id in consumers:
                counts[event.consumer_id] += 1
    if not consumers:
        return CheckResult.of("fairness", [], jain=1.0, consumers=0)
    top = max(info.priority for info in consumers.values())
    values = [float(counts[cid]) for cid, info in consumers.items() if info.priority == top]
    jain = jain_index(values)
    violations = [] if jain >= min_jain else [f"Jain's index {jain:.4f} < {min_jain} over deliveries {values}"]
    return CheckResult.of("fairness", violations, jain=jain, consumers=len(values), low=min(values), high=max(values))


def browser_completeness(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Browsers see each entry at most once, in publish order, and every entry still queued at the end.

    What a browser saw is what its client says it received, and a browser is a consumer whose
    client meant to browse (a consumer that declared itself one while its client acquires is
    not judged as a browser; one that received nothing counts as its declaration says). Which
    entries were queued when it subscribed and at the close is the queue's story.
    """
    view = client_view(trace, queue_path)
    intents = _intents(view)
    browsers: dict[int, list[int]] = {}
    since: dict[int, int] = {}
    enqueued: list[int] = []
    remaining: set[int] | None = None
    violations: list[str] = []

    def seen_by(consumer_id: int, tag: int, time: float) -> None:
        seen = browsers.get(consumer_id)
        if seen is None:
            return
        if seen and tag <= seen[-1]:
            violations.append(f"t={time:g}: browser {consumer_id} saw tag {tag} after {seen[-1]}")
        seen.append(tag)

    for obs in queue_story(trace, queue_path):
        match obs.kind:
            case "subscribed":
                info: ConsumerInfo = obs.data[0]
                if not intents.get(info.consumer_id, info.acquiring):
                    browsers[info.consumer_id] = []
                    since[info.consumer_id] = enqueued[-1] if enqueued else 0
            case "enqueued":
                enqueued.append(obs.data.tag)
            case "delivered" if view is None:
                for delivery in obs.data:
                    seen_by(delivery.consumer_id, delivery.tag, obs.time)
            case "closed":
                remaining = set(obs.data.remaining)
    if view is not None:
        for event in view.events:
            if type(event) is Receipt and not event.acquiring:
                seen_by(event.consumer_id, event.tag, event.time)
    if remaining is not None:
        for browser, seen in browsers.items():
            missed = sorted(tag for tag in remaining if tag > since[browser] and tag not in set(seen))
            violations.extend(f"browser {browser} never saw tag {tag}, still queued at the end" for tag in missed)
    return CheckResult.of("browser_completeness", violations, browsers=len(browsers))


def group_exclusivity(
    trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10, *, from_clients: bool = True
) -> CheckResult:
    """One consumer holds a message group at a time, and a group's first deliveries keep queue order.

    Judged from the clients: a client that means to acquire (whatever its consumer declared)
    holds a group from receiving one of its messages until it answers it (its ``DeliverySettled``),
    or until the queue takes the message back by its own act (a lease that lapsed, a consumer
    gone: ``_QUEUE_OWN_RETURNS``), or gives it out again; a release the client never asked for
    frees nothing. The group is the one its publisher gave the message. With ``from_clients=False``
    (or no client receipts) it replays the queue's story instead, as it did before.

    Queue order (priority level first, then publish order; a delayed message joins its group's
    order when its delay ends) is judged by replaying the queue's story, as only the queue knows
    which earlier entry was waiting and could be taken then.
    """
    if not isinstance(trace, (list, SharedTrace)):
        trace = list(trace)
    by_queue = _group_exclusivity_by_queue(trace, queue_path, priorities)
    view = client_view(trace, queue_path) if from_clients else None
    if view is None:
        return by_queue
    holds: dict[int, Receipt] = {}  # tag -> the acquiring receipt that holds it
    holders: dict[str, Counter[tuple[str, int]]] = defaultdict(Counter)  # group -> (client, consumer) -> tags
    taken_back: set[int] = set()  # tags the queue took back by its own act since their last receipt
    settled: set[int] = set()  # tags settled for good (acked, expired, dead-lettered)
    latest: dict[int, int] = {}  # tag -> the newest attempt any client received
    violations: list[str] = []
    checked = 0

    def release(tag: int) -> None:
        held = holds.pop(tag, None)
        if held is not None and held.message is not None and held.message.group is not None:
            owners = holders[held.message.group]
            who = (held.client, held.consumer_id)
            owners[who] -= 1
            if owners[who] <= 0:
                del owners[who]

    for event in view.events:
        if isinstance(event, DeliverySettled):
            held = holds.get(event.tag)
            if held is not None and held.consumer_id == event.consumer_id:  # the broker settles by tag
                release(event.tag)
            continue
        if isinstance(event, EntryReturned):
            if event.reason in _QUEUE_OWN_RETURNS:
                release(event.tag)
                taken_back.add(event.tag)
            continue
        if isinstance(event, EntrySettled):
            if event.outcome != "acked":  # expired or dead-lettered: the queue's act; an ack is the client's
                release(event.tag)
                taken_back.add(event.tag)
            settled.add(event.tag)
            continue
        assert type(event) is Receipt
        message = event.message
        if not event.acquiring or message is None or message.group is None:
            continue
        group, tag = message.group, event.tag
        if event.attempt < latest.get(tag, 0) and (tag in taken_back or tag in settled):
            # an attempt the queue had taken back (its lease lapsed) before its client got it, or that a
            # paused client gets after a later attempt was settled (paged-swarm seed 298 under pause)
            continue
        latest[tag] = max(latest.get(tag, 0), event.attempt)
        taken_back.discard(tag)
        release(tag)  # given out again: the earlier holder's lease is over
        checked += 1
        me = (event.client, event.consumer_id)
        others = [who for who in holders[group] if who != me]
        if others:
            violations.append(
                f"t={event.time:g}: group {group!r} tag {tag} went to {event.client} (consumer {event.consumer_id}) "
                f"while {others[0][0]} (consumer {others[0][1]}) held the group"
            )
        holds[tag] = event
        holders[group][me] += 1
    violations += [line for line in by_queue.violations if "earlier in queue order" in line]
    return CheckResult.of("group_exclusivity", violations, checked=checked)




def _group_exclusivity_by_queue(trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10) -> CheckResult:
    """``group_exclusivity`` from the queue's story (for a queue whose clients write no receipts, and for queue order).

    Queue order is priority level first, then publish order (docs/broker.md). A message's first
    delivery is out of order when an entry of its group earlier in that order, never delivered yet,
    was waiting and the same consumer could have taken it then: its delay over (a delayed message
    joins its group's order when its delay ends), not held, its selector matching.
    """
    first_given: set[int] = set()
    violations: list[str] = []
    checked = 0
    for time, delivery, info, view in _replayed_deliveries(trace, queue_path):
        group = delivery.message.group
        if group is None:
            continue
        checked += 1
        others = [holder for holder in view.group_holders[group] if holder != info.consumer_id]
        if others:
            violations.append(
                f"t={time:g}: group {group!r} tag {delivery.tag} went to consumer {info.consumer_id} "
                f"while consumer {others[0]} held the group"
            )
        if delivery.delivery_count == 1:
            position = (-priority_level(delivery.message.priority, priorities), delivery.tag)
            for tag, (message, _) in view.entries.items():
                if (
                    message.group == group and tag not in first_given
                    and (-priority_level(message.priority, priorities), tag) < position
                    and view.could_take(info, tag, time)
                ):
                    violations.append(
                        f"t={time:g}: group {group!r} tag {delivery.tag} delivered while tag {tag}, earlier in "
                        "queue order, waited"
                    )
                    break
            first_given.add(delivery.tag)
    return CheckResult.of("group_exclusivity", violations, checked=checked)


def drained(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Liveness at the end of a run that went quiet: nothing stays queued that a live consumer could take.

    A message left behind while an acquiring consumer that matches it still runs and wants work
    (its last ``SetInterest`` said so: it has credit) is a stall (a lost notification, a
    consumer that stopped pulling). A consumer without credit cannot take it: its client may
    never have acked what it holds (``never-ack``), which no queue can repair.
    """
    view = _Availability()
    remaining: tuple[int, ...] | None = None
    for obs in queue_story(trace, queue_path):
        if obs.kind == "delivered":
            for delivery, _ in _acquiring_deliveries(obs, view):
                view.hold(delivery)
        elif obs.kind == "closed":
            remaining = obs.data.remaining
            break
        else:
            view.apply(obs)
    if remaining is None:
        return CheckResult.of("drained", ["the queue never closed: run the system to quiet and shut it down"])
    violations = []
    for tag in remaining:
        known = view.entries.get(tag)
        if known is None:  # settled (or never enqueued) by the story, yet the queue still holds it
            violations.append(f"tag {tag} is still in the queue at its close, but the queue had settled it")
            continue
        headers = known[0].header_map()
        takers = [
            cid for cid, info in view.consumers.items()
            if info.acquiring and view.interested.get(cid, True) and info.selector.matches(headers)
        ]
        if takers:
            violations.append(f"tag {tag} stayed queued while consumer {takers[0]} could take it (a stall)")
    return CheckResult.of("drained", violations, remaining=len(remaining))
