"""Checkers of the broker's promises, as pure functions over a trace.

Each reads one queue's story (``queue_story``) and returns a ``CheckResult``.
They need a trace with notes, i.e. a system run with ``trace=True``; a queue
that stopped (``QueueClosed``) lets ``accounting`` prove that nothing was lost.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from conveyor.actors.broker import Delivery, EntryEnqueued, EntrySettled, Message, QueueClosed, priority_level
from conveyor.runtime import TraceEvent

from ._queue_view import ConsumerInfo, ConsumerRoster, Observation, is_available_at, queue_story
from ._result import CheckResult


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


def strict_order(trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10) -> CheckResult:
    """Each consumer gets its first deliveries in queue order within a priority level.

    Applies to messages without delay or group, for consumers of one consumer priority
    (a lower-priority consumer may rightly take a skipped entry later).
    """
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
    """A lower-priority consumer is served only when no higher-priority one could take the message."""
    violations: list[str] = []
    checked = 0
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


def fairness(trace: Iterable[TraceEvent], queue_path: str, min_jain: float = 0.9) -> CheckResult:
    """Jain's index over deliveries to the equal acquiring consumers of the top consumer priority."""
    counts: Counter[int] = Counter()
    consumers: dict[int, ConsumerInfo] = {}
    for obs in queue_story(trace, queue_path):
        if obs.kind == "subscribed":
            info: ConsumerInfo = obs.data[0]
            if info.acquiring:
                consumers[info.consumer_id] = info
        elif obs.kind == "delivered":
            for delivery in obs.data:
                if delivery.consumer_id in consumers:
                    counts[delivery.consumer_id] += 1
    if not consumers:
        return CheckResult.of("fairness", [], jain=1.0, consumers=0)
    top = max(info.priority for info in consumers.values())
    values = [float(counts[cid]) for cid, info in consumers.items() if info.priority == top]
    jain = jain_index(values)
    violations = [] if jain >= min_jain else [f"Jain's index {jain:.4f} < {min_jain} over deliveries {values}"]
    return CheckResult.of("fairness", violations, jain=jain, consumers=len(values), low=min(values), high=max(values))


def browser_completeness(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Browsers see each entry at most once, in publish order, and every entry still queued at the end."""
    browsers: dict[int, list[int]] = {}
    since: dict[int, int] = {}
    enqueued: list[int] = []
    remaining: set[int] | None = None
    violations: list[str] = []
    for obs in queue_story(trace, queue_path):
        match obs.kind:
            case "subscribed":
                info: ConsumerInfo = obs.data[0]
                if not info.acquiring:
                    browsers[info.consumer_id] = []
                    since[info.consumer_id] = enqueued[-1] if enqueued else 0
            case "enqueued":
                enqueued.append(obs.data.tag)
            case "delivered":
                for delivery in obs.data:
                    seen = browsers.get(delivery.consumer_id)
                    if seen is None:
                        continue
                    if seen and delivery.tag <= seen[-1]:
                        violations.append(
                            f"t={obs.time:g}: browser {delivery.consumer_id} saw tag {delivery.tag} after {seen[-1]}"
                        )
                    seen.append(delivery.tag)
            case "closed":
                remaining = set(obs.data.remaining)
    if remaining is not None:
        for browser, seen in browsers.items():
            missed = sorted(tag for tag in remaining if tag > since[browser] and tag not in set(seen))
            violations.extend(f"browser {browser} never saw tag {tag}, still queued at the end" for tag in missed)
    return CheckResult.of("browser_completeness", violations, browsers=len(browsers))


def group_exclusivity(trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10) -> CheckResult:
    """One consumer holds a message group at a time, and a group's first deliveries keep queue order.

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
