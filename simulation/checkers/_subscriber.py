"""Checkers of the streaming subscriber's promises (seed 003), as pure functions over a trace.

A subscription is named by its manager's path (``/sub``); its components are that path's
children, named by ``Part`` (``/sub/load``, ``/sub/leaser``, ``/sub/keys``, ``/sub/workers``, ``/sub/consumer``).
The checkers read what those actors record: the load controller's ``FlowNote`` after each
change, the worker pool's ``CallbackStarted`` note and ``CallbackEnded`` message around each
callback, and the queue's own notes (``EntryReturned``, ``EntrySettled``, ``QueueClosed``).
Events of one actor keep that actor's processing order on every backend, so each checker
only relates events whose order is causal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Literal, final

import attrs

from conveyor.actors.broker import EntryReturned, EntrySettled, ModifyAckDeadline, Nack, QueueClosed
from conveyor.actors.subscriber import (
    EXTENSION_ROUTE,
    SETTLEMENT_ROUTE,
    CallbackEnded,
    CallbackStarted,
    Done,
    Dones,
    FlowControl,
    FlowNote,
    Part,
    Received,
    ReceivedBatch,
    Run,
    RunBatch,
    RunsEnded,
)
from conveyor.runtime import EventKind, Terminated, TraceEvent
from conveyor.simulation import Delay, Drop, FaultApplied, Pause, covers

from ._broker import accounting
from ._queue_view import ConsumerInfo, Observation, queue_story
from ._result import CheckResult

LEASE_LAPSED = "lease lapsed"
"""``EntryReturned.reason`` of a lease the queue took back because its deadline passed."""


def _part(subscription_path: str, name: str) -> str:
    return f"{subscription_path}/{name}"


def _failures_of(event: TraceEvent, path: str) -> str | None:
    """A readable line if ``event`` is the actor at ``path`` failing or restarting, else None."""
    if event.receiver == path and event.kind in (EventKind.FAILED, EventKind.RESTARTED):
        return f"t={event.time:g}: {path} {event.kind.value}: {event.error}"
    return None


def _ack_id(consumer_id: int | None, tag: int) -> str:
    """The subscriber's ack id of a queue entry held by a consumer (``consumer_id:tag``)."""
    return f"{consumer_id}:{tag}"


def _pause_of(event: TraceEvent) -> Pause | None:
    """The ``Pause`` a FAULT event applied, or None for any other event."""
    if event.kind is EventKind.FAULT and isinstance(event.message, FaultApplied):
        fault = event.message.fault
        if isinstance(fault, Pause):
            return fault
    return None


def _paused_between(
    pauses: list[tuple[float, Pause]], subscription_path: str, route: tuple[str, ...], start: float, end: float
) -> bool:
    """Whether a pause froze the subscription's manager or a child on ``route`` at some time in ``[start, end]``.

    ``pauses`` holds each applied pause with the time it was applied; it froze its actors from
    then for ``duration_s``.
    """
    paths = (subscription_path, *(_part(subscription_path, name) for name in route))
    return any(
        applied <= end
        and applied + pause.duration_s >= start
        and any(covers(pause.prefix, path) for path in paths)
        for applied, pause in pauses
    )


_CONSUMER_SUFFIX = f"/{Part.CONSUMER}"


class _LateSends:
    """What each subscription's broker consumer sent the queue that has not reached it yet, and the delays that held it.

    A ``Delay`` fault stalls one channel (``sender`` -> ``receiver``) from the time it was applied
    for its ``duration_s``; what the sender put on it meanwhile (or had put on it and was not yet
    delivered) arrives late, in order. The simulator has no other latency: a message still in
    flight when the queue takes a lease back was held by such a stall (or sent in that very
    instant). ``observe`` every trace event in order; ``held`` then answers for the present
    moment of the walk.
    """

    __slots__ = ("_delays", "_in_flight", "_last_sent", "_queue")

    def __init__(self, queue_path: str) -> None:
        self._queue = queue_path
        self._delays: list[tuple[float, Delay]] = []  # (applied at, fault) on a channel into the queue
        self._in_flight: dict[str, list[tuple[float, object]]] = {}  # sender path -> (sent at, message)
        self._last_sent: str | None = None  # the sender of the previous event, if it was a send to the queue

    def observe(self, event: TraceEvent) -> None:
        """Follow one trace event: a send to the queue, its delivery (or dead letter, or drop), a Delay."""
        last_sent, self._last_sent = self._last_sent, None
        kind = event.kind
        if kind is EventKind.SENT:
            if event.receiver == self._queue and event.sender is not None and event.sender.endswith(_CONSUMER_SUFFIX):
                self._in_flight.setdefault(event.sender, []).append((event.time, event.message))
                self._last_sent = event.sender
        elif kind is EventKind.DELIVERED or kind is EventKind.DEAD_LETTER:
            if event.receiver == self._queue and event.sender is not None:
                sent = self._in_flight.get(event.sender)
                if sent:
                    message = event.message
                    for index, (_, queued) in enumerate(sent):  # FIFO: the first equal one is this
                        if queued == message:
                            del sent[index]
                            break
        elif kind is EventKind.FAULT and isinstance(event.message, FaultApplied):
            fault = event.message.fault
            if isinstance(fault, Delay) and fault.receiver == self._queue:
                self._delays.append((event.time, fault))
            elif isinstance(fault, Drop) and last_sent is not None:
                self._in_flight[last_sent].pop()  # the send just recorded never entered the channel

    def held(self, sender: str, time: float, saves: Callable[[float, object], bool]) -> bool:
        """Whether a Delay of ``sender`` -> queue stalled it at ``time`` with a message ``saves`` accepts still in it.

        ``saves(sent_at, message)`` says whether that message, had it arrived when sent, would
        have spared the entry what happened to it at ``time``.
        """
        if not any(
            fault.sender == sender and applied <= time <= applied + fault.duration_s
            for applied, fault in self._delays
        ):
            return False
        return any(saves(sent_at, message) for sent_at, message in self._in_flight.get(sender, ()))


def _extends(consumer_id: int | None, tag: int, lapse: float) -> Callable[[float, object], bool]:
    """Whether a message to the queue extends ``consumer_id``'s lease on ``tag`` past ``lapse``, had it come at once."""

    def saves(sent_at: float, message: object) -> bool:
        return (
            type(message) is ModifyAckDeadline
            and message.consumer_id == consumer_id
            and tag in message.tags
            and message.seconds > 0
            and sent_at <= lapse < sent_at + message.seconds
        )

    return saves


def _nacks(consumer_id: int | None, tag: int, raised: float) -> Callable[[float, object], bool]:
    """Whether a message to the queue is ``consumer_id``'s nack of ``tag``, sent after its callback raised."""

    def saves(sent_at: float, message: object) -> bool:
        if not (type(message) is Nack or (type(message) is ModifyAckDeadline and message.seconds == 0)):
            return False
        return message.consumer_id == consumer_id and tag in message.tags and sent_at >= raised

    return saves


def _callbacks_ended(message: object) -> tuple[CallbackEnded, ...]:
    """The worker pool's word that callbacks ended: one ``CallbackEnded``, or a job's ``RunsEnded``."""
    if type(message) is CallbackEnded:
        return (message,)
    if type(message) is RunsEnded:
        return message.ended
    return ()


def _runs(message: object) -> tuple[Run | Received, ...]:
    """The key handler's hand-over of callbacks to the worker pool: one ``Run``, or a ``RunBatch`` (of ``Received``)."""
    if type(message) is Run:
        return (message,)
    if type(message) is RunBatch:
        return message.runs
    return ()


def flow_bound(trace: Iterable[TraceEvent], subscription_path: str, flow: FlowControl) -> CheckResult:
    """Unfinished messages never exceed the flow control, and the load controller reports them truly.

    The truth is rebuilt from the load controller's inputs (``Received`` adds a message, a
    ``ReceivedBatch`` each of its items, ``Done`` removes one) and compared with the ``FlowNote``
    it must write after each such change: a missing note or one that disagrees is a violation (a controller that leaves
    some messages out of its load), and so is a count above ``max_messages`` or bytes above
    ``max_bytes``.

    One overshoot is allowed, the broker's own: the first message of a pull may exceed the
    consumer's remaining byte credit on its own (else a message larger than ``max_bytes``
    could never be delivered). So the bytes may pass ``max_bytes`` by less than one
    message: ``bytes - largest unfinished message < max_bytes``. A single message larger
    than ``max_bytes`` is the extreme case; two messages beyond the limit never are.
    """
    load = _part(subscription_path, Part.LOAD)
    sizes: dict[str, int] = {}
    total = 0
    violations: list[str] = []
    notes = most = most_bytes = 0
    unnoted: TraceEvent | None = None  # a change the load controller has not noted yet
    for event in trace:
        failure = _failures_of(event, load)
        if failure is not None:
            violations.append(failure)
        message = event.message
        if event.kind is EventKind.DELIVERED and event.receiver == load:
            if unnoted is not None:
                violations.append(f"t={unnoted.time:g}: {load} wrote no FlowNote after {unnoted.message!r}")
                unnoted = None
            if type(message) is Received or type(message) is ReceivedBatch:
                # A ReceivedBatch is its Received items, in order, with one note after the last.
                for item in (message,) if type(message) is Received else message.items:
                    if item.ack_id not in sizes:
                        sizes[item.ack_id] = item.size
                        total += item.size
                        unnoted = event
            elif type(message) is Done or type(message) is Dones:
                # Dones are their Done items, with one note after the last.
                for done in (message,) if type(message) is Done else message.items:
                    if done.ack_id in sizes:
                        total -= sizes.pop(done.ack_id)
                        unnoted = event
        elif event.kind is EventKind.NOTE and event.sender == load and isinstance(message, FlowNote):
            unnoted = None
            notes += 1
            count = len(sizes)
            most = max(most, count)
            most_bytes = max(most_bytes, total)
            where = f"t={event.time:g}: {load}"
            if (message.count, message.bytes) != (count, total):
                violations.append(
                    f"{where} noted {message.count} messages / {message.bytes} bytes but {count} / {total} "
                    "were unfinished"
                )
            if count > flow.max_messages:
                violations.append(f"{where}: {count} unfinished messages > max_messages={flow.max_messages}")
            if total > flow.max_bytes and total - max(sizes.values()) >= flow.max_bytes:
                violations.append(
                    f"{where}: {total} unfinished bytes > max_bytes={flow.max_bytes} by more than one message "
                    f"(largest {max(sizes.values())})"
                )
    if unnoted is not None:
        violations.append(f"t={unnoted.time:g}: {load} wrote no FlowNote after {unnoted.message!r}")
    return CheckResult.of("flow_bound", violations, notes=notes, max_count=most, max_bytes=most_bytes)


@attrs.define
class _KeyStart:
    """One callback start of an ordering key, and the lowest tag nacked since."""

    tag: int
    lowest_nacked_since: float = float("inf")


def _forget_run(running: dict[str, list[tuple[str, int, float]]], key: str, ack_id: str) -> None:
    """Take ``ack_id`` off its key's run of started callbacks: it ended."""
    busy = running.get(key)
    if busy is None:
        return
    busy[:] = [start for start in busy if start[0] != ack_id]
    if not busy:
        del running[key]


def ordering_keys(trace: Iterable[TraceEvent], subscription_path: str) -> CheckResult:
    """Per ordering key: one callback at a time, and callbacks start in publish (tag) order.

    A callback runs from the worker pool's ``CallbackStarted`` note to its ``CallbackEnded``;
    two of one key must not overlap. For order, the starts of a key are walked in time
    order: a start of tag ``t`` is a violation if an earlier start of the same key had a
    higher tag ``u > t`` and no callback of that key ended nacked (or raised) with a tag
    ``<= t`` between that earlier start and this one. That is: going back to a lower tag
    is allowed only because a nack at or below it sent the key's later messages back too.
    A message redelivered after a nack is thus allowed to run again, but a message that
    overtook an earlier one (still out after a nack, or never run) is caught when the
    earlier one finally runs.
    """
    workers = _part(subscription_path, Part.WORKERS)
    keys = _part(subscription_path, Part.KEYS)
    running: dict[str, list[tuple[str, int, float]]] = {}  # key -> its run started: (ack id, tag, started at)
    starts: dict[str, list[_KeyStart]] = {}
    violations: list[str] = []
    checked = 0
    for event in trace:
        for path in (workers, keys):
            failure = _failures_of(event, path)
            if failure is not None:
                violations.append(failure)
        message = event.message
        if event.kind is EventKind.NOTE and event.sender == workers and isinstance(message, CallbackStarted):
            key = message.key
            if not key:
                continue
            checked += 1
            where = f"t={event.time:g}: key {key!r} tag {message.tag}"
            busy = running.get(key)
            if busy and busy[-1][0] != message.after:
                violations.append(f"{where} started while tag {busy[-1][1]} (since t={busy[-1][2]:g}) still ran")
            # a key run's next message (``after`` the one before it, in the same job) runs once that one ends
            running.setdefault(key, []).append((message.ack_id, message.tag, event.time))
            earlier = starts.setdefault(key, [])
            for start in earlier:
                if start.tag > message.tag and start.lowest_nacked_since > message.tag:
                    violations.append(f"{where} started after tag {start.tag} with no nack at or below it between")
                    break
            earlier.append(_KeyStart(message.tag))
        elif event.kind is EventKind.SENT and event.sender == workers:
            for ended in _callbacks_ended(message):
                key = ended.key
                if not key:
                    continue
                _forget_run(running, key, ended.ack_id)
                if ended.nacked:
                    tag = int(ended.ack_id.partition(":")[2])
                    for start in starts.get(key, ()):
                        start.lowest_nacked_since = min(start.lowest_nacked_since, tag)
        elif event.kind is EventKind.STOPPED and event.receiver == workers:
            running.clear()  # the process is gone: its callbacks with it
    return CheckResult.of("ordering_keys", violations, checked=checked, keys=len(starts))


def _interleaved(trace: Iterable[TraceEvent], queue_path: str) -> Iterator[TraceEvent | Observation]:
    """Every trace event in order, each followed by the queue ``Observation`` it produced, if any."""
    pending: list[TraceEvent] = []

    def feed() -> Iterator[TraceEvent]:
        for event in trace:
            pending.append(event)
            yield event

    story = queue_story(feed(), queue_path)
    for observation in story:
        # queue_story pulled events up to (and including) the one behind ``observation``.
        yield from pending
        pending.clear()
        yield observation
    yield from pending


Excuse = Literal["paused", "delayed"]


@final
class _LapseWalk:
    """The walk ``lease_validity`` and ``no_loss`` share: one pass over a trace, the queue's story woven in.

    Iterating yields every trace event in order, each followed by the queue ``Observation`` it
    produced, if any (see ``queue_story``), so a checker relates the queue's story to other actors'
    events in one pass. On the way the walk follows what can excuse a lapsed lease: each applied
    ``Pause`` (kept, not yielded) and every send to the queue a ``Delay`` may hold up
    (``_LateSends``). ``excuse`` answers for the present moment of the walk.
    """

    __slots__ = ("_late", "_pauses", "_queue", "_trace")

    def __init__(self, trace: Iterable[TraceEvent], queue_path: str) -> None:
        self._trace = trace
        self._queue = queue_path
        self._pauses: list[tuple[float, Pause]] = []  # (applied at, fault)
        self._late = _LateSends(queue_path)

    def __iter__(self) -> Iterator[TraceEvent | Observation]:
        for item in _interleaved(self._trace, self._queue):
            if isinstance(item, Observation):
                yield item
                continue
            self._late.observe(item)
            pause = _pause_of(item)
            if pause is not None:
                self._pauses.append((item.time, pause))
            else:
                yield item

    def excuse(
        self, subscription_path: str, route: tuple[str, ...], since: float, lapse: float,
        saves: Callable[[float, object], bool],
    ) -> Excuse | None:
        """Why a lease of the subscription that lapsed at ``lapse`` (now) was no fault of its, or None.

        ``"paused"``: a pause froze its manager or a child on ``route`` at some time since
        ``since``. ``"delayed"``: a ``Delay`` held up, on the way from its consumer to the queue,
        a message ``saves`` accepts (see ``_LateSends.held``).
        """
        if _paused_between(self._pauses, subscription_path, route, since, lapse):
            return "paused"
        if self._late.held(_part(subscription_path, Part.CONSUMER), lapse, saves):
            return "delayed"
        return None


def lease_validity(
    trace: Iterable[TraceEvent], queue_path: str, subscription_path: str, flow: FlowControl
) -> CheckResult:
    """No lease of a running callback lapses at the queue, and the leaser lives while the subscription does.

    A lapse (``EntryReturned`` with reason ``"lease lapsed"``) of an entry whose callback is
    running in this subscription (between its ``CallbackStarted`` and ``CallbackEnded``) is a
    violation, with two exemptions:

    * **max_lease_duration.** The callback had been scheduled ``flow.max_lease_duration_s``
      before: past that the leaser rightly stops extending, and a redelivery that comes meanwhile
      is left to lapse (the running callback settles the message). The clock starts when the
      callback is scheduled, not at receipt: for a keyed message, when the key handler sent its
      ``Run`` to the worker pool (it may have waited on hold behind its key for longer than the
      cap, leased all the while); for an unordered one, at the delivery that callback runs on
      (matched by its attempt). Each precedes the leaser's own start of the clock, so the
      exemption is never too strict.
    * **A paused subscription.** The lease's *last extension window* is the time from the last
      moment the queue set the lapsing lease's deadline (the delivery that acquired the entry,
      or the latest ``ModifyAckDeadline`` the queue received for it from that consumer while it
      held the entry) to the lapse. If a ``Pause`` fault froze the subscription's manager,
      leaser, dispatcher or consumer (``EXTENSION_ROUTE``) at any time in that window, the lapse is
      exempt: an extension that would have saved the lease may have been frozen in the paused
      process, which no subscriber can prevent. Pauses are read from the trace's FAULT events
      (``FaultApplied(Pause(...))``), each freezing its prefix from the time it was applied for
      its ``duration_s``. (A pause that ended inside the window, in time for the leaser to
      extend again, is exempted too: the checker cannot see the leaser's schedule, so it errs
      towards leniency only for lapses a pause may have caused.)
    * **An extension held up on the way.** At the lapse, a ``Delay`` fault stalled the channel
      from the subscription's broker consumer to the queue, and on it was a ``ModifyAckDeadline``
      for that entry (its consumer, its tag, ``seconds > 0``), sent before the lapse and long
      enough to carry the deadline past it (``sent + seconds > lapse``). The subscriber did its
      part; the network held the extension longer than the lease had left (a delay of up to 3 s
      against a 1 s safety margin, or against the queue's own short ``ack_deadline_s`` before the
      receipt extension lands), which no Pub/Sub client can prevent. A lapse with no such
      extension in flight (the leaser never sent one, or sent it too late, or it arrived and was
      too short) is still a violation, delay or not.

    The leaser must not fail or restart, nor stop before its manager.
    """
    workers = _part(subscription_path, Part.WORKERS)
    leaser = _part(subscription_path, Part.LEASER)
    keys = _part(subscription_path, Part.KEYS)
    running: dict[str, tuple[float, float]] = {}  # ack id -> (callback started at, its max-lease clock's start)
    scheduled_at: dict[tuple[str, int], float] = {}  # (ack id, attempt) of a keyed run -> handed to the pool at
    delivered_at: dict[tuple[str, int], float] = {}  # (ack id, delivery count) -> when the queue delivered it
    deadline_set_at: dict[str, float] = {}  # held ack id -> when the queue last set its lease's deadline
    violations: list[str] = []
    lapses = during = exempt = 0
    excused: Counter[Excuse] = Counter()
    manager_stopped = False
    walk = _LapseWalk(trace, queue_path)
    for event in walk:
        if isinstance(event, Observation):
            kind, time, data = event.kind, event.time, event.data
            if kind == "delivered":
                for delivery in data:
                    ack_id = _ack_id(delivery.consumer_id, delivery.tag)
                    delivered_at[ack_id, delivery.delivery_count] = time
                    deadline_set_at[ack_id] = time
            elif kind in ("returned", "settled"):
                ack_id = _ack_id(data.consumer_id, data.tag)
                window_start = deadline_set_at.pop(ack_id, None)
                if kind == "settled" or data.reason != LEASE_LAPSED:
                    continue
                lapses += 1
                callback = running.get(ack_id)
                if callback is None:
                    continue
                during += 1
                started, leased_at = callback
                scheduled_for = time - leased_at
                if scheduled_for >= flow.max_lease_duration_s:
                    exempt += 1
                    continue
                start = leased_at if window_start is None else window_start
                excuse = walk.excuse(subscription_path, EXTENSION_ROUTE, start, time,
                                     _extends(data.consumer_id, data.tag, time))
                if excuse is not None:
                    excused[excuse] += 1
                    continue
                violations.append(
                    f"t={time:g}: the lease of {ack_id} lapsed while its callback ran (since t={started:g}; "
                    f"scheduled {scheduled_for:g} s before < max_lease_duration_s="
                    f"{flow.max_lease_duration_s:g}; no pause of {subscription_path} since its deadline was last "
                    f"set at t={start:g}, and no extension "
                    f"of it held up on the way)"
                )
            continue
        failure = _failures_of(event, leaser)
        if failure is not None:
            violations.append(failure)
        message = event.message
        if (
            event.kind is EventKind.DELIVERED
            and event.receiver == queue_path
            and type(message) is ModifyAckDeadline
            and message.seconds > 0
        ):
            for tag in message.tags:
                ack_id = _ack_id(message.consumer_id, tag)
                if ack_id in deadline_set_at:  # held by that consumer: the queue moved its deadline
                    deadline_set_at[ack_id] = event.time
        elif event.kind is EventKind.NOTE and event.sender == workers and isinstance(message, CallbackStarted):
            leased_at = delivered_at.get((message.ack_id, message.attempt), event.time)
            if message.key:
                leased_at = max(leased_at, scheduled_at.pop((message.ack_id, message.attempt), leased_at))
            running[message.ack_id] = (event.time, leased_at)
        elif event.kind is EventKind.SENT and event.sender == keys:
            for run in _runs(message):
                if run.key:
                    scheduled_at[run.ack_id, run.delivery.delivery_count] = event.time
        elif event.kind is EventKind.SENT and event.sender == workers:
            for ended in _callbacks_ended(message):
                running.pop(ended.ack_id, None)
        elif event.kind is EventKind.STOPPED:
            if event.receiver == subscription_path:
                manager_stopped = True
            elif event.receiver == workers:
                running.clear()
            elif event.receiver == leaser and not manager_stopped:
                reason = message.reason if isinstance(message, Terminated) else "?"
                if reason != "shutdown":
                    violations.append(f"t={event.time:g}: {leaser} stopped ({reason}) while {subscription_path} ran")
    return CheckResult.of(
        "lease_validity", violations, lapses=lapses, during_callbacks=during, exempt=exempt,
        paused=excused["paused"], delayed=excused["delayed"],
    )


def no_loss(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Nothing is lost (``accounting``), and a message whose callback raised is nacked, never acked.

    A callback raised when its worker pool's ``CallbackEnded`` carries an error. For each such
    callback of a subscription consuming ``queue_path``, the queue's next word on that entry
    from the same consumer must give it back (``nack``, or ``consumer stopped`` when the
    subscriber crashed before the nack left) or settle it as dead-lettered or expired; an
    ``acked`` is a violation (the failure was swallowed) and so is a lapsed lease (the nack
    never came). The entry then stays accounted for by ``accounting``: delivered again,
    dead-lettered or still queued at the end. Scenario callbacks never settle before raising,
    so an ack after a raise is never the user's own, unless the subscription ran the message
    again first.

    **Run again.** A callback of the same subscription that starts on a later delivery of the
    message (its ``CallbackStarted.attempt`` is higher than the raised one's) ends the follow-up:
    the message came back and is being retried, which is what the nack was for, and that run is
    followed on its own. Without this, a raise reported late (the worker pool was paused between
    the callback's end and its ``CallbackEnded``) after the queue had already redelivered the
    message under the same tag was charged to the redelivery, and the ack of that redelivery's
    own successful run was taken for a swallowed failure. (A redelivery the manager absorbs into
    the copy still running starts no callback, so the raise's nack, which settles it, is still
    followed.)

    Two cases are not a swallowed failure, both of a paused subscription (a ``Pause`` fault):

    * the callback raised on a delivery the queue had already taken back (its lease lapsed
      while the process was paused, and the queue did not hold the entry for that consumer when
      the callback raised): no nack can give back what the queue has already, and the message
      is safe in it; the raise is not followed;
    * the lease lapsed after the raise, and a pause froze the subscription's manager,
      dispatcher or consumer (``SETTLEMENT_ROUTE``, which carry the nack) at some time between the
      raise and the lapse: the nack was frozen in the paused process, and the lapse gave the
      message back instead.

    And one of a delayed channel: the lease lapsed after the raise while a ``Delay`` fault
    stalled the channel from the subscription's broker consumer to the queue with the nack on it
    (a ``Nack``, or a ``ModifyAckDeadline`` of 0 s, of that entry, sent after the raise and before
    the lapse). The subscriber nacked; the network held the nack past the lease, so the lapse gave
    the message back first, as it would to any Pub/Sub client, and the late nack finds nothing to
    return. A nack not yet sent at the lapse is still a violation.
    """
    events = list(trace)
    base = accounting(events, queue_path)
    consumers: dict[str, int] = {}  # consumer path -> consumer id
    held: set[str] = set()  # ack ids the queue has delivered and not taken back
    raised: dict[str, tuple[float, str, int]] = {}  # ack id -> (when its callback raised, its subscription, attempt)
    attempts: dict[tuple[str, str], int] = {}  # (worker pool, ack id) -> attempt of its latest callback started
    violations = list(base.violations)
    failures = stale = retried = 0
    excused: Counter[Excuse] = Counter()
    walk = _LapseWalk(events, queue_path)
    for event in walk:
        if isinstance(event, Observation):
            kind, time, data = event.kind, event.time, event.data
            if kind == "subscribed":
                info: ConsumerInfo = data[0]
                consumers[info.path] = info.consumer_id
            elif kind == "delivered":
                held.update(_ack_id(delivery.consumer_id, delivery.tag) for delivery in data)
            elif kind in ("returned", "settled"):
                outcome = data.reason if kind == "returned" else data.outcome
                ack_id = _ack_id(data.consumer_id, data.tag)
                held.discard(ack_id)
                record = raised.pop(ack_id, None)
                if record is None:
                    continue
                when, subscription, attempt = record
                if isinstance(data, EntrySettled) and data.outcome == "acked":
                    violations.append(
                        f"t={time:g}: {ack_id} was acked although its callback raised at t={when:g} "
                        f"(on delivery attempt {attempt}, and it was not run again)"
                    )
                elif isinstance(data, EntryReturned) and data.reason == LEASE_LAPSED:
                    excuse = walk.excuse(subscription, SETTLEMENT_ROUTE, when, time,
                                         _nacks(data.consumer_id, data.tag, when))
                    if excuse is not None:
                        excused[excuse] += 1
                        continue
                    violations.append(
                        f"t={time:g}: {ack_id} was never nacked after its callback raised at t={when:g} "
                        f"(its lease lapsed: {outcome}, and no nack of it held up on the way)"
                    )
            continue
        message = event.message
        if event.kind is EventKind.NOTE and type(message) is CallbackStarted and event.sender is not None:
            attempts[event.sender, message.ack_id] = message.attempt
            record = raised.get(message.ack_id)
            if record is not None and event.sender == _part(record[1], Part.WORKERS) and message.attempt > record[2]:
                del raised[message.ack_id]  # run again on a later delivery: the failure was not swallowed
                retried += 1
            continue
        for ended in _callbacks_ended(message) if event.kind is EventKind.SENT else ():
            if ended.error is None:
                continue
            subscription = event.receiver or ""
            consumer_id = consumers.get(_part(subscription, Part.CONSUMER))
            if consumer_id is not None and ended.ack_id.partition(":")[0] == str(consumer_id):
                failures += 1
                if ended.ack_id in held:
                    attempt = attempts.get((event.sender or "", ended.ack_id), 0)
                    raised[ended.ack_id] = (event.time, subscription, attempt)
                else:
                    stale += 1  # the queue took it back before the callback raised
    metrics = dict(base.metrics)
    return CheckResult.of(
        "no_loss",
        violations,
        raised=failures,
        raised_when_lapsed=stale,
        raised_then_run_again=retried,
        nack_paused=excused["paused"],
        nack_delayed=excused["delayed"],
        enqueued=metrics["enqueued"],
        lost=metrics["lost"],
        duplicated=metrics["duplicated"],
        closed=metrics["closed"],
    )


def all_settled(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Liveness of a run driven to completion: the queue closed with nothing left, all acked or dead-lettered.

    A subscriber that stalls (a lost wake-up, credit that leaks, a message never settled)
    leaves entries behind; they are listed.
    """
    enqueued = 0
    outcomes: dict[str, int] = {}
    remaining: tuple[int, ...] | None = None
    for obs in queue_story(trace, queue_path):
        if obs.kind == "enqueued":
            enqueued += 1
        elif obs.kind == "settled":
            outcomes[obs.data.outcome] = outcomes.get(obs.data.outcome, 0) + 1
        elif obs.kind == "closed":
            closing: QueueClosed = obs.data
            remaining = closing.remaining
    if remaining is None:
        return CheckResult.of("all_settled", ["the queue never closed: shut the system down at the end"])
    violations = [f"tag {tag} was still in the queue at the end (never acked or dead-lettered)" for tag in remaining]
    return CheckResult.of(
        "all_settled",
        violations,
        enqueued=enqueued,
        acked=outcomes.get("acked", 0),
        dead_lettered=outcomes.get("dead_lettered", 0),
        expired=outcomes.get("expired", 0),
        remaining=len(remaining),
    )
