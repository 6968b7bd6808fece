"""Liveness over a trace, in the manner of Coyote's hot and cold monitors.

The safety checkers say that nothing bad happened; these say that something good kept
happening. Each replays one queue's story (``queue_story``) into a model of what could be
delivered *now*: an entry that is AVAILABLE (not held, its delay and retry backoff over, not
behind an earlier entry of its group that waits out a backoff, its group free, not
reserved for a higher-priority consumer) and an acquiring consumer that is subscribed,
matches the entry's selector and **has credit**. Credit is the queue's own view of it: a
``ConsumerActor`` tells the queue ``SetInterest(False)`` when its prefetch is used up or it
is suspended, and ``SetInterest(True)`` when acks give credit back. ``Subscribe`` carries
no prefetch, so a checker may be given one (``prefetch``): a consumer then also needs
fewer entries held than that. A consumer frozen by a fault (a ``Pause`` of its process, a
``Delay`` of a channel it sends or receives on, read from the trace's ``FAULT`` events) has
no credit while frozen: it could not pull.

* ``prompt_delivery``: the monitor of an entry is *hot* while some consumer with credit
  could take it, and must turn *cold* (the entry delivered, settled, or nobody able to
  take it any more) within ``within_s`` virtual seconds.
* ``starvation``: a consumer with credit is not left unwoken for ``within_s`` while others of
  its priority or lower get, turn after turn, entries it could have taken.
* ``stall``: the run ended (the queue's ``QueueClosed``) with work pending and nothing
  scheduled to do it: an entry was deliverable at the end, or the queue had made no
  progress for ``within_s`` before it closed while entries a consumer wanted waited.

Virtual time moves only when nothing is ready to deliver, so in the simulator the state at
the end of an instant is quiescent, whatever the strategy (PCT included: it reorders
deliveries within an instant, it cannot hold one back across a tick of the clock). A
monitor hot then stays hot until a timer fires, and a correct queue is never hot at the
end of an instant; ``within_s`` gives faults and the real backends (whose clocks move
while messages travel) room.

Two more checks live here because they replay the same model and the planted bugs of issue
5 needed them; neither is liveness in the strict sense:

* ``queue_order``: no entry starves behind later ones: each acquiring delivery is the first
  entry, in queue order, that its consumer could take then (the promise of ``EntryList``'s
  pointers; a release that re-queues at the tail breaks it).
* ``single_wakeup``: the consumer manager wakes at most one acquiring consumer per piece of
  work (no thundering herd), the rule the promptness of the hot monitor rests on.

``liveness(...)`` runs the first four over one replay of the story, and ``single_wakeup``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Literal, final

import attrs

from conveyor.actors.broker import (
    AddConsumer,
    ConsumerExhausted,
    Delivery,
    EntryEnqueued,
    EntryReturned,
    EntrySettled,
    Message,
    NotifyWork,
    Pull,
    WorkAvailable,
    priority_level,
)
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation import Delay, FaultApplied, Pause, covers

from ._history import DeliveryReceived, DeliverySettled
from ._queue_view import ConsumerInfo, ConsumerRoster, Observation, is_available_at, queue_story
from ._result import CheckResult

# --- faults: who was frozen when -------------------------------------------------------------------


@final
@attrs.frozen
class _Frozen:
    """Actors under any of ``paths`` could neither send nor receive from ``start`` to ``end``."""

    start: float
    end: float
    paths: tuple[str, ...]  # a Pause: its prefix; a Delay: the sender and the receiver of its channel

    def covers(self, path: str) -> bool:
        return any(covers(prefix, path) for prefix in self.paths)


def _freezes(events: Iterable[TraceEvent]) -> tuple[_Frozen, ...]:
    """The pauses and delays the simulator applied, as windows of virtual time."""
    windows: list[_Frozen] = []
    for event in events:
        if event.kind is not EventKind.FAULT or not isinstance(event.message, FaultApplied):
            continue
        fault = event.message.fault
        if isinstance(fault, Pause):
            windows.append(_Frozen(event.time, event.time + fault.duration_s, (fault.prefix,)))
        elif isinstance(fault, Delay):
            windows.append(_Frozen(event.time, event.time + fault.duration_s, (fault.sender, fault.receiver)))
    return tuple(windows)


# --- the model: what could be delivered now --------------------------------------------------------


@final
class _Entry:
    """A live entry as the trace shows it."""

    __slots__ = ("delivered", "enqueued_at", "group", "headers", "message", "position", "ready_at")

    def __init__(self, message: Message, enqueued_at: float, position: tuple[int, int]) -> None:
        self.message = message
        self.enqueued_at = enqueued_at
        self.position = position  # (rank, tag): queue order, as EntryList's
        self.group = message.group
        self.headers = message.header_map()
        self.ready_at = 0.0  # after a nack's backoff
        self.delivered = False  # its backoff then holds back the later entries of its group


class _Board(ConsumerRoster):
    """One queue's entries and consumers, rebuilt from its story, with credit and faults."""

    def __init__(self, priorities: int, prefetch: int | None, freezes: tuple[_Frozen, ...]) -> None:
        super().__init__()
        self.priorities = priorities
        self.prefetch = prefetch
        self.freezes = freezes
        self.entries: dict[int, _Entry] = {}  # live (enqueued, not settled), in publish order
        self.backoff: dict[str, dict[int, None]] = {}  # group -> delivered entries returned with a backoff
        self.held: dict[int, int] = {}  # tag -> consumer id
        self.holding: Counter[int] = Counter()  # consumer id -> entries held
        self.group_holders: dict[str, Counter[int]] = {}
        self.pulls: Counter[int] = Counter()  # consumer id -> Pulls the queue received from it
        self.progress = 0
        """Enqueues, deliveries and settlements so far: the work the queue did."""
        self.unanswered: Counter[int] = Counter()
        """Consumer id -> deliveries its client noted receiving and never answered, over the whole run."""

    # --- feeding it -------------------------------------------------------------------------------

    def apply(self, obs: Observation) -> None:
        """Apply one observation other than a delivery."""
        if self.track_consumers(obs):
            return
        match obs.kind:
            case "enqueued":
                note: EntryEnqueued = obs.data
                rank = self.priorities - 1 - priority_level(note.message.priority, self.priorities)
                self.entries[note.tag] = _Entry(note.message, obs.time, (rank, note.tag))
                self.progress += 1
            case "returned":
                returned: EntryReturned = obs.data
                self._release(returned.tag)
                entry = self.entries.get(returned.tag)
                if entry is not None:
                    entry.ready_at = returned.available_at
                    if entry.group is not None and entry.delivered and returned.available_at > obs.time:
                        self.backoff.setdefault(entry.group, {})[returned.tag] = None
            case "settled":
                settled: EntrySettled = obs.data
                self._release(settled.tag)
                gone = self.entries.pop(settled.tag, None)
                if gone is not None and gone.group is not None:
                    self.backoff.get(gone.group, {}).pop(settled.tag, None)
                self.progress += 1

    def hold(self, delivery: Delivery) -> None:
        """An acquiring consumer took ``delivery``."""
        self._release(delivery.tag)  # a redelivery after a lapsed lease replaces the old holder
        self.held[delivery.tag] = delivery.consumer_id
        self.holding[delivery.consumer_id] += 1
        self.progress += 1
        entry = self.entries.get(delivery.tag)
        if entry is not None:
            entry.delivered = True
            entry.ready_at = 0.0
            if entry.group is not None:
                self.backoff.get(entry.group, {}).pop(delivery.tag, None)
                self.group_holders.setdefault(entry.group, Counter())[delivery.consumer_id] += 1

    def _release(self, tag: int) -> None:
        consumer_id = self.held.pop(tag, None)
        if consumer_id is None:
            return
        self.holding[consumer_id] -= 1
        entry = self.entries.get(tag)
        if entry is not None and entry.group is not None:
            holders = self.group_holders[entry.group]
            holders[consumer_id] -= 1
            if holders[consumer_id] <= 0:
                del holders[consumer_id]

    # --- questions --------------------------------------------------------------------------------

    def frozen(self, path: str, now: float) -> bool:
        """Whether a fault holds the actor at ``path`` at ``now``."""
        return any(window.start <= now < window.end and window.covers(path) for window in self.freezes)

    def has_credit(self, consumer_id: int, now: float) -> bool:
        """Subscribed, acquiring, interested, under its prefetch (if known) and not frozen."""
        info = self.consumers.get(consumer_id)
        if info is None or not info.acquiring or not self.interested.get(consumer_id, True):
            return False
        if self.prefetch is not None and self.holding[consumer_id] >= self.prefetch:
            return False
        return not (self.freezes and self.frozen(info.path, now))

    def available(self, tag: int, entry: _Entry, now: float) -> bool:
        """Not held, delay and backoff over, TTL not passed, not behind its group's backoff."""
        if tag in self.held or entry.ready_at > now or not is_available_at(entry.message, entry.enqueued_at, now):
            return False
        if entry.group is None:
            return True
        for other_tag in self.backoff.get(entry.group, ()):
            other = self.entries[other_tag]
            if other_tag != tag and other.ready_at > now and other.position < entry.position:
                return False
        return True

    def group_free_for(self, entry: _Entry, consumer_id: int) -> bool:
        """No other consumer holds an entry of the entry's group."""
        if entry.group is None:
            return True
        holders = self.group_holders.get(entry.group)
        return not holders or all(holder == consumer_id for holder in holders)

    def reserved_for_higher(self, entry: _Entry, info: ConsumerInfo) -> bool:
        """A higher-priority consumer that the queue counts as wanting work would take the entry."""
        for consumer_id, other in self.consumers.items():
            if (
                other.priority > info.priority
                and other.acquiring
                and self.interested.get(consumer_id, True)
                and other.selector.matches(entry.headers)
                and self.group_free_for(entry, consumer_id)
            ):
                return True
        return False

    def may_take(self, info: ConsumerInfo, entry: _Entry) -> bool:
        """The entry, known to be available, would go to this acquiring consumer if it pulled now."""
        return (
            info.selector.matches(entry.headers)
            and self.group_free_for(entry, info.consumer_id)
            and not self.reserved_for_higher(entry, info)
        )

    def behind_reserved(self, info: ConsumerInfo, tag: int, entry: _Entry, now: float) -> bool:
        """An earlier entry of its group, available and matching, is left to a higher-priority consumer:
        the queue keeps the group's later entries from this one too (group order)."""
        if entry.group is None:
            return False
        for other_tag, other in self.entries.items():
            if (
                other_tag != tag and other.group == entry.group and other.position < entry.position
                and self.available(other_tag, other, now) and info.selector.matches(other.headers)
                and self.reserved_for_higher(other, info)
            ):
                return True
        return False

    def deliverable(self, now: float) -> dict[int, int]:
        """Every entry some consumer with credit could take now, with the first such consumer."""
        found: dict[int, int] = {}
        able = [self.consumers[cid] for cid in self.consumers if self.has_credit(cid, now)]
        if not able:
            return found
        for tag, entry in self.entries.items():
            if not self.available(tag, entry, now):
                continue
            for info in able:
                if self.may_take(info, entry) and not self.behind_reserved(info, tag, entry, now):
                    found[tag] = info.consumer_id
                    break
        return found

    def since(self, tag: int, consumer_id: int, after: float, until: float) -> float:
        """When, in ``(after, until]``, an entry became deliverable with no event of the queue: the
        latest time trigger (a backoff or delay over, a freeze lifted) that fell in the window."""
        entry = self.entries[tag]
        triggers = [entry.ready_at, entry.enqueued_at + (entry.message.delay_s or 0.0)]
        if entry.group is not None:
            triggers.extend(self.entries[other].ready_at for other in self.backoff.get(entry.group, ()))
        info = self.consumers.get(consumer_id)
        if info is not None:
            triggers.extend(w.end for w in self.freezes if w.covers(info.path))
        return max([after, *(trigger for trigger in triggers if after < trigger <= until)])

    def waiting_on_client(self) -> set[int]:
        """Consumers that want nothing (``SetInterest(False)``) while the queue holds nothing for them and
        whose clients never answered deliveries they received: their credit is spent on deliveries whose
        leases lapsed (the queue took them back), so no queue step serves them until their clients answer."""
        return {
            consumer_id for consumer_id, count in self.unanswered.items()
            if count > 0 and not self.interested.get(consumer_id, True) and self.holding[consumer_id] <= 0
        }

    def wanted(self) -> dict[int, tuple[int, ...]]:
        """Entries not held that subscribed acquiring consumers match (credit or not), with every such
        consumer but those waiting on their own clients."""
        found: dict[int, tuple[int, ...]] = {}
        exempt = self.waiting_on_client()
        for tag, entry in self.entries.items():
            if tag in self.held:
                continue
            wanting = tuple(
                consumer_id for consumer_id, info in self.consumers.items()
                if consumer_id not in exempt and info.acquiring and info.selector.matches(entry.headers)
                and self.group_free_for(entry, consumer_id)
            )
            if wanting:
                found[tag] = wanting
        return found


# --- the replay: moments the monitors look at ------------------------------------------------------


@final
@attrs.frozen
class _Point:
    """A moment of the replay.

    ``start``: an instant at ``time`` begins; the board still shows the end of the previous one
    (at ``before``), so only changes driven by time (backoffs, freezes) show.
    ``delivery``: ``delivery`` to acquiring ``info`` is about to be applied to the board; ``batch``
    numbers the queue's ``Delivered`` answers (one per Pull), so deliveries of one answer share it.
    ``end``: the instant at ``time`` is over (all its observations applied).
    ``closed``: the queue closed at ``time`` holding ``remaining`` (right after that instant's end).
    """

    kind: Literal["start", "delivery", "end", "closed"]
    time: float
    before: float = 0.0
    delivery: Delivery | None = None
    info: ConsumerInfo | None = None
    batch: int = 0
    remaining: tuple[int, ...] = ()


def _replay(events: list[TraceEvent], queue_path: str, board: _Board) -> Iterator[_Point]:
    """Feed the queue's story to ``board`` and yield the points the monitors look at.

    The story leaves out ``Pull``; the board counts them as the story reads past them, so at
    each point it knows every Pull the queue had received by then.
    """

    def feed() -> Iterator[TraceEvent]:
        delivered = EventKind.DELIVERED  # read once: an enum member through its class costs a lookup per event
        for event in events:
            if event.kind is delivered and event.receiver == queue_path and type(event.message) is Pull:
                board.pulls[event.message.consumer_id] += 1
            yield event

    now: float | None = None
    batch = 0
    for obs in queue_story(feed(), queue_path):
        if now is not None and obs.time > now:
            yield _Point("end", now)
            yield _Point("start", obs.time, before=now)
        now = obs.time
        if obs.kind == "delivered":
            batch += 1
            for delivery in obs.data:
                info = board.consumers.get(delivery.consumer_id)
                if info is None or not info.acquiring:
                    continue  # browsers take nothing
                yield _Point("delivery", obs.time, delivery=delivery, info=info, batch=batch)
                board.hold(delivery)
        elif obs.kind == "closed":
            yield _Point("end", obs.time)
            yield _Point("closed", obs.time, remaining=obs.data.remaining)
            return
        else:
            board.apply(obs)
    if now is not None:
        yield _Point("end", now)


class _Monitor:
    """Watches the replay; ``result`` gives its verdict."""

    def see(self, point: _Point, board: _Board) -> None:
        raise NotImplementedError

    def result(self) -> CheckResult:
        raise NotImplementedError


def _run(
    trace: Iterable[TraceEvent], queue_path: str, monitors: list[_Monitor], prefetch: int | None, priorities: int
) -> list[CheckResult]:
    events = trace if isinstance(trace, list) else list(trace)
    board = _Board(priorities, prefetch, _freezes(events))
    if any(isinstance(monitor, _StallMonitor) for monitor in monitors):  # the only reader: skip the scan otherwise
        board.unanswered = _unanswered(events, queue_path)
    for point in _replay(events, queue_path, board):
        for monitor in monitors:
            monitor.see(point, board)
    return [monitor.result() for monitor in monitors]


def _unanswered(events: list[TraceEvent], queue_path: str) -> Counter[int]:
    """Per consumer id: acquired deliveries of ``queue_path`` its client noted and never answered."""
    open_by: dict[tuple[int, int, int], int] = {}
    for event in events:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        if isinstance(note, DeliveryReceived) and note.queue == queue_path and note.acquiring:
            open_by[note.consumer_id, note.tag, note.attempt] = note.consumer_id
        elif isinstance(note, DeliverySettled) and note.queue == queue_path:
            open_by.pop((note.consumer_id, note.tag, note.attempt), None)
    return Counter(open_by.values())


# --- the hot / cold monitor ------------------------------------------------------------------------


@attrs.define
class _Heat:
    since: float
    consumer: int
    reported: bool = False


class _PromptMonitor(_Monitor):
    """Per entry: hot from when it became deliverable until it cools; hot too long is a violation."""

    def __init__(self, within_s: float) -> None:
        self.within_s = within_s
        self.hot: dict[int, _Heat] = {}
        self.violations: list[str] = []
        self.periods = 0
        self.longest = 0.0

    def see(self, point: _Point, board: _Board) -> None:
        now = point.time
        if point.kind == "end":  # observations made the changes: at ``now`` exactly
            self._update(now, board.deliverable(now), cooled_at=now, board=None, after=now)
        elif point.kind == "start":  # only time made the changes, somewhere in (before, now]
            self._update(now, board.deliverable(now), cooled_at=point.before, board=board, after=point.before)

    def _update(
        self, now: float, deliverable: dict[int, int], cooled_at: float, board: _Board | None, after: float
    ) -> None:
        for tag in [tag for tag in self.hot if tag not in deliverable]:
            self._measure(tag, self.hot.pop(tag), cooled_at, "", closing=True)
        for tag, consumer_id in deliverable.items():
            heat = self.hot.get(tag)
            if heat is None:
                since = now if board is None else board.since(tag, consumer_id, after, now)
                heat = self.hot[tag] = _Heat(since, consumer_id)
            self._measure(tag, heat, now, ", still hot", closing=False)

    def _measure(self, tag: int, heat: _Heat, at: float, how: str, *, closing: bool) -> None:
        length = max(0.0, at - heat.since)
        if closing and length > 0:
            self.periods += 1
        self.longest = max(self.longest, length)
        if length > self.within_s and not heat.reported:
            heat.reported = True
            self.violations.append(
                f"t={at:g}: tag {tag} waited {length:g} s > {self.within_s:g} s undelivered (hot since "
                f"t={heat.since:g}{how}) while consumer {heat.consumer} (interested, with credit) could take it"
            )

    def result(self) -> CheckResult:
        periods = self.periods + sum(1 for heat in self.hot.values() if heat.reported)
        return CheckResult.of(
            "prompt_delivery", self.violations, hot_periods=periods, longest_hot_s=self.longest,
            within_s=self.within_s,
        )


def prompt_delivery(
    trace: Iterable[TraceEvent], queue_path: str, within_s: float, *, prefetch: int | None = None,
    priorities: int = 10,
) -> CheckResult:
    """An available entry with an interested consumer that has credit is delivered within ``within_s``.

    The monitor of each entry is hot while some consumer with credit could take it (see the
    module docstring) and cold otherwise; a hot period longer than ``within_s`` virtual
    seconds (a lost wake-up that only a later timer or publish repaired, or nothing did) is a
    violation. Metrics: ``hot_periods`` (hot periods that outlasted their instant) and
    ``longest_hot_s``.

    Args:
        trace: a run's trace (with the queue's notes).
        queue_path: the queue actor's path.
        within_s: the longest a monitor may stay hot, in virtual seconds.
        prefetch: the consumers' prefetch, if known: a consumer holding that many has no credit.
        priorities: the queue's priority levels (queue order depends on them).
    """
    return _run(trace, queue_path, [_PromptMonitor(within_s)], prefetch, priorities)[0]


# --- starvation ------------------------------------------------------------------------------------


@attrs.define
class _Passed:
    """A consumer with credit, passed over since ``first`` without pulling: ``count`` entries it could take
    went to ``takers`` (taker -> the Delivered answers that carried them). ``pulls`` is how many Pulls
    it had made when this began."""

    first: float
    pulls: int
    count: int = 0
    reported: bool = False
    takers: dict[int, set[int]] = attrs.field(factory=dict)

    def lapped(self) -> bool:
        """Some taker was served in two turns (two Pulls) while this consumer waited for one."""
        return any(len(batches) >= 2 for batches in self.takers.values())


class _StarvationMonitor(_Monitor):
    def __init__(self, within_s: float) -> None:
        self.within_s = within_s
        self.passed: dict[int, _Passed] = {}
        self.violations: list[str] = []
        self.passes = 0
        self.longest = 0.0

    def see(self, point: _Point, board: _Board) -> None:
        now = point.time
        if point.kind in ("start", "end"):
            for consumer_id in [cid for cid in self.passed if not board.has_credit(cid, now)]:
                del self.passed[consumer_id]  # out of credit (or gone): it is not waiting
            return
        if point.kind != "delivery":
            return
        delivery, taker = point.delivery, point.info
        assert delivery is not None and taker is not None
        self.passed.pop(taker.consumer_id, None)
        entry = board.entries.get(delivery.tag)
        if entry is None:
            return
        for consumer_id, info in board.consumers.items():
            if (
                consumer_id == taker.consumer_id
                or info.priority < taker.priority
                or not board.has_credit(consumer_id, now)
                or not info.selector.matches(entry.headers)
                or not board.group_free_for(entry, consumer_id)
            ):
                continue
            self.passes += 1
            record = self.passed.get(consumer_id)
            pulls = board.pulls[consumer_id]
            if record is None or record.pulls != pulls:  # it pulled meanwhile: it was woken, and lost a race
                record = self.passed[consumer_id] = _Passed(now, pulls)
            record.count += 1
            record.takers.setdefault(taker.consumer_id, set()).add(point.batch)
            length = now - record.first
            self.longest = max(self.longest, length)
            if length >= self.within_s and record.lapped() and not record.reported:
                record.reported = True
                takers = ", ".join(str(cid) for cid in record.takers)
                self.violations.append(
                    f"t={now:g}: consumer {consumer_id} (interested, with credit) was passed over since "
                    f"t={record.first:g} ({length:g} s >= {self.within_s:g} s) without being woken: {record.count} "
                    f"entries it could take went to consumer(s) {takers}, served in several turns meanwhile"
                )

    def result(self) -> CheckResult:
        return CheckResult.of(
            "starvation", self.violations, passed_over=self.passes, longest_passed_s=self.longest,
            within_s=self.within_s,
        )


def starvation(
    trace: Iterable[TraceEvent], queue_path: str, within_s: float, *, prefetch: int | None = None,
    priorities: int = 10,
) -> CheckResult:
    """No consumer starves: one with credit is not left unwoken for ``within_s`` while others get its work.

    A delivery to consumer B of an entry that consumer A could have taken (A has credit,
    matches, the entry's group is free for A, and B's priority is not above A's) passes A
    over. If A is passed over from ``t0`` until ``t >= t0 + within_s`` without getting a
    delivery, pulling, or running out of credit in between, and meanwhile some consumer was
    served in two turns (two Pulls) while A waited for one, A starved: the rotation of
    Interested consumers skipped it. Waiting a round (the others' turns, one each) is
    fairness, however long sparse work makes the round; and a consumer that pulls and finds
    the work gone has had its turn and lost a race, which the scheduler decides (under PCT
    one channel may lose every race), not the queue: both restart its count. Metrics:
    ``passed_over`` (consumers passed over, summed over deliveries) and ``longest_passed_s``.
    """
    return _run(trace, queue_path, [_StarvationMonitor(within_s)], prefetch, priorities)[0]


# --- stall -----------------------------------------------------------------------------------------


class _StallMonitor(_Monitor):
    def __init__(self, within_s: float) -> None:
        self.within_s = within_s
        self.violations: list[str] = []
        self.progress = -1
        self.progress_at: float | None = None
        self.waiting: dict[int, tuple[int, ...]] = {}  # wanted entries (and by whom) at the last instant with progress
        self.closed = False
        self.idle = 0.0

    def see(self, point: _Point, board: _Board) -> None:
        now = point.time
        if point.kind == "end" and board.progress != self.progress:
            self.progress = board.progress
            self.progress_at = now
            self.waiting = board.wanted()
        elif point.kind == "closed":
            self.closed = True
            deliverable = board.deliverable(now)
            if deliverable:
                tags = list(deliverable)
                shown = ", ".join(str(tag) for tag in tags[:10]) + (" ..." if len(tags) > 10 else "")
                self.violations.append(
                    f"t={now:g}: the run ended with {len(tags)} entries (tags {shown}) deliverable to consumer "
                    f"{deliverable[tags[0]]} (interested, with credit) and nothing scheduled to deliver them "
                    "(a lost wake-up)"
                )
            remaining = set(point.remaining)
            since = now if self.progress_at is None else self.progress_at
            self.idle = now - since
            exempt = board.waiting_on_client()  # some may have come to wait on their own clients since
            left = [
                (tag, wanting[0]) for tag, cids in self.waiting.items() if tag in remaining
                for wanting in [[cid for cid in cids if cid not in exempt]] if wanting
            ]
            if self.idle > self.within_s and left:
                shown = ", ".join(str(tag) for tag, _ in left[:10]) + (" ..." if len(left) > 10 else "")
                self.violations.append(
                    f"t={now:g}: no progress for {self.idle:g} s > {self.within_s:g} s before the queue closed, "
                    f"while tags {shown} waited that consumer {left[0][1]} wanted (stalled since t={since:g})"
                )

    def result(self) -> CheckResult:
        if not self.closed:
            return CheckResult.of("stall", ["the queue never closed: run the system to quiet and shut it down"])
        return CheckResult.of("stall", self.violations, idle_at_end_s=self.idle, within_s=self.within_s)


def stall(
    trace: Iterable[TraceEvent], queue_path: str, within_s: float, *, prefetch: int | None = None,
    priorities: int = 10,
) -> CheckResult:
    """A run that ends with work pending and nothing scheduled to do it is a stall.

    Read at the queue's close (``QueueClosed``, written once the run is over and the system
    shut down), two things are stalls:

    * an entry was deliverable: a consumer with credit could take it, yet the run had gone
      quiet (Coyote: a hot monitor when the program terminates);
    * the queue had made no progress (no enqueue, delivery or settlement) for more than
      ``within_s`` before it closed while entries that a subscribed consumer wanted (credit
      or not) waited: the run only ticked over (heartbeats, leases) until its horizon.

    A trace without ``QueueClosed`` is reported as such.
    """
    return _run(trace, queue_path, [_StallMonitor(within_s)], prefetch, priorities)[0]


# --- queue order -----------------------------------------------------------------------------------


class _OrderMonitor(_Monitor):
    def __init__(self) -> None:
        self.violations: list[str] = []
        self.checked = 0

    def see(self, point: _Point, board: _Board) -> None:
        if point.kind != "delivery":
            return
        delivery, info = point.delivery, point.info
        assert delivery is not None and info is not None
        entry = board.entries.get(delivery.tag)
        if entry is None:
            return
        self.checked += 1
        for tag, other in board.entries.items():
            if (
                other.position < entry.position
                and board.available(tag, other, point.time)
                and board.may_take(info, other)
                and not board.behind_reserved(info, tag, other, point.time)
            ):
                self.violations.append(
                    f"t={point.time:g}: consumer {info.consumer_id} got tag {delivery.tag} (delivery "
                    f"{delivery.delivery_count}) while tag {tag}, earlier in queue order, was available to it"
                )
                return

    def result(self) -> CheckResult:
        return CheckResult.of("queue_order", self.violations, checked=self.checked)


def queue_order(trace: Iterable[TraceEvent], queue_path: str, priorities: int = 10) -> CheckResult:
    """No entry starves behind later ones: each acquiring delivery is the first entry its consumer could take.

    At each delivery, no entry earlier in queue order (a higher priority level, or the same
    level and published earlier) may be available to that consumer: not held, its backoff
    over, matching, its group free, not reserved for a higher-priority consumer. This is
    ``EntryList``'s promise that no AVAILABLE entry hides behind a pointer, so a returned
    message goes out again from its original position; ``priority_order`` is its special
    case across levels, ``strict_order`` its special case for first deliveries.
    """
    return _run(trace, queue_path, [_OrderMonitor()], None, priorities)[0]


# --- one wake-up per piece of work -----------------------------------------------------------------


def single_wakeup(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """The consumer manager wakes at most one acquiring consumer per piece of work (no thundering herd).

    Reads the manager (``<queue>/consumers``): while it handles a ``WorkAvailable`` or a
    ``ConsumerExhausted``, the ``NotifyWork`` it sends go to at most one acquiring consumer
    (every interested browser is told, by design). Events of one actor keep its processing
    order on every backend, so the sends belong to the message delivered before them.
    """
    manager = f"{queue_path}/consumers"
    acquiring: dict[str, bool] = {}
    violations: list[str] = []
    handled = 0
    current: tuple[float, str] | None = None
    woken: list[str] = []

    def close() -> None:
        if current is not None and len(woken) > 1:
            violations.append(
                f"t={current[0]:g}: {current[1]} woke {len(woken)} acquiring consumers ({', '.join(woken)}); "
                "one per piece of work"
            )

    delivered, sent = EventKind.DELIVERED, EventKind.SENT  # read once, not per event
    for event in trace:
        message = event.message
        if event.kind is delivered and event.receiver == manager:
            close()
            current = None
            woken = []
            if isinstance(message, AddConsumer):
                acquiring[str(message.consumer.path)] = message.acquiring
            elif isinstance(message, (WorkAvailable, ConsumerExhausted)):
                handled += 1
                current = (event.time, type(message).__name__)
        elif (
            event.kind is sent
            and event.sender == manager
            and isinstance(message, NotifyWork)
            and event.receiver is not None
            and acquiring.get(event.receiver, True)
        ):
            woken.append(event.receiver)
    close()
    return CheckResult.of("single_wakeup", violations, handled=handled)


# --- the set the registry runs ---------------------------------------------------------------------


def liveness(
    trace: Iterable[TraceEvent], queue_path: str, within_s: float, *, prefetch: int | None = None,
    priorities: int = 10,
) -> list[CheckResult]:
    """``prompt_delivery``, ``starvation``, ``stall`` and ``queue_order`` over one replay, and ``single_wakeup``.

    Args:
        trace: a run's trace (with the queue's notes and the simulator's faults).
        queue_path: the queue actor's path.
        within_s: how long a monitor may stay hot, a consumer be passed over, or the queue
            sit idle before its close, in virtual seconds.
        prefetch: the consumers' prefetch, if known.
        priorities: the queue's priority levels.
    """
    events = trace if isinstance(trace, list) else list(trace)
    monitors: list[_Monitor] = [
        _PromptMonitor(within_s), _StarvationMonitor(within_s), _StallMonitor(within_s), _OrderMonitor(),
    ]
    return [*_run(events, queue_path, monitors, prefetch, priorities), single_wakeup(events, queue_path)]
