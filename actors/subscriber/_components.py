"""The subscriber's components as actors (seed 003's proposal): each owns one concern.

LoadController (flow control), Leaser (lease extension), OrderedKeyHandler (messages
on hold), Dispatcher (batched ack / nack / modack), Heartbeater, and the WorkerPool
that runs user callbacks off the actors. None shares state; the seed's locks became
the mailboxes of these actors.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, final

import attrs

from conveyor.actors.broker import Ack, Delivery, DeliveryError, ModifyAckDeadline, Nack, Resume, Suspend
from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, TimerHandle

from ._batching import AckRequest, DropRequest, Flush, ModAckRequest, NackRequest, RequestBatcher
from ._flow import FlowDecision, LoadTracker
from ._histogram import Histogram
from ._leases import LeaseTable
from ._message import SubscriberMessage
from ._ordering import Admission, OrderingKeyHolds
from ._protocol import (
    Acks,
    CallbackEnded,
    CallbacksEnded,
    CallbackStarted,
    Done,
    Dones,
    Drain,
    Drained,
    Extend,
    FenceLifted,
    GetFlowStats,
    Heartbeat,
    Idle,
    Lapsed,
    Received,
    ReceivedBatch,
    Redelivered,
    Run,
    RunBatch,
    RunsEnded,
    Scheduled,
    Settlement,
    SettlementKind,
    Settles,
    Skipped,
    StopRunning,
    Tick,
    callback_ended,
    split_ack_id,
)
from ._settings import FlowControl

log = logging.getLogger("conveyor.subscriber")

SETTLES_PER_HAND_OVER = 8
"""A job of several callbacks hands the settlements made in it to the manager in groups of this many (a job of
short callbacks, packed, in groups of ``PACKED_SETTLES_PER_HAND_OVER``: each group costs the manager's hand-overs
to the load controller, the leaser and the dispatcher)."""

PACKED_SETTLES_PER_HAND_OVER = 32
"""A packed job's settlements go to the manager this many at a time, not all with the job's end: with 128
callbacks a job, the first ack otherwise waited for the other 127 (12-16 ms of a message's 35-45 ms between its
arrival and its ack's return, measured unordered and with 1,000 keys), and until the ack reaches the server its
flow-control credit is not back."""

SHORT_CALLBACK_S = 0.001
"""Callbacks shorter than this on average (a job's time, hand-overs included, over its callbacks) gain nothing
from workers of their own: under the GIL only waiting overlaps, and a hand-over costs tens of microseconds. The
pool then packs what waits into full jobs instead of spreading it over the free workers."""

PACKED_JOB_MIN = 32
"""While callbacks prove short (packed) and a job runs, fewer waiting callbacks than this wait for the next job to
start (when one ends, or when more arrive) instead of making a job of their own. With many ordering keys the key
handler releases the next messages of a job's keys as it ends, a few at a time: started at once, each few made a
job (and its hand-overs) of their own. A backlog of this many or more is still spread over free workers."""

KEY_RUN_LIMIT = 16
"""The most messages of one ordering key the key handler releases at once, as a key run that one job runs in turn
(``OrderingKeyHolds.run_limit``): with 100 keys each key otherwise moved one message per job and hand-over."""

CALLBACK_TIME_WEIGHT = 0.25
"""The weight of the newest job in the pool's moving average of the time per callback."""


@final
@attrs.frozen
class FlowNote:
    """Note for checkers: the load controller's count and bytes after a change, and whether paused."""

    count: int
    bytes: int
    paused: bool


@final
class LoadController(Actor):
    """Counts every unfinished message (held ones too); pauses the stream at load >= 1."""

    def __init__(self, consumer: ActorRef, flow: FlowControl) -> None:
        self.consumer = consumer
        self.tracker = LoadTracker(flow)

    def receive(self, message: Any) -> None:
        """Track one arrival or completion and pause or resume the stream."""
        if type(message) is Received:
            self.tracker.add(message.ack_id, message.size)
        elif type(message) is ReceivedBatch:
            self.tracker.add_many(message.items)  # one decision and one note for the whole batch
        elif type(message) is Done:
            if not self.tracker.remove(message.ack_id):
                return
        elif type(message) is Dones:
            if not self.tracker.remove_many(message.items):
                return
        elif type(message) is GetFlowStats:
            if message.reply_to is not None:
                self.ctx.send(message.reply_to, self.tracker.snapshot())
            return
        else:
            return
        decision = self.tracker.update()
        if decision is FlowDecision.PAUSE:
            self.ctx.send(self.consumer, Suspend())
        elif decision is FlowDecision.RESUME:
            self.ctx.send(self.consumer, Resume())
        if self.ctx.tracing:
            self.ctx.note(FlowNote(self.tracker.count, self.tracker.bytes, self.tracker.paused))


@final
class Leaser(Actor):
    """Extends leases of messages in progress by the p99 processing time; gives up past the max.

    The max-lease clock of a message starts when its callback is scheduled: at receipt for an
    unordered message, at ``Scheduled`` for a keyed one, which may first wait on hold behind its key
    (extended all the while, never given up).

    A pass that finds leases whose last requested deadline already passed (the process was
    paused past it) tells the manager ``Lapsed``: the queue has taken those messages back.
    """

    def __init__(self, manager: ActorRef, dispatcher: ActorRef, flow: FlowControl,
                 granted_s: float | None = None) -> None:
        self.manager = manager
        self.dispatcher = dispatcher
        self.granted_s = granted_s
        """The lease every delivery is known to hold when it arrives, counted from its receipt (a Pub/Sub
        stream's ack deadline less a transit allowance), or None. While the extension asked for is no
        longer, a receipt sends no extension: the server already holds the message that long."""
        self.table = LeaseTable(flow)
        self.histogram = Histogram()
        self.timer: TimerHandle | None = None
        self.timer_at: float | None = None

    def receive(self, message: Any) -> None:
        """Lease, release, or maintain."""
        now = self.ctx.now()
        if type(message) is Received:
            # The first extension right away, as the Pub/Sub client does for each batch received,
            # unless the delivery came with a lease at least as long (``granted_s``).
            extension = self.table.deadline_for(self.histogram)
            granted = self.granted_s
            if granted is not None and granted >= extension:
                self.table.add(message.ack_id, message.size, now, granted, on_hold=bool(message.key))
            else:
                self.table.add(message.ack_id, message.size, now, extension, on_hold=bool(message.key))
                self.ctx.send(self.dispatcher, Settlement(SettlementKind.MODACK, message.ack_id, extension))
            next_check = self.table.next_check_at
            if next_check is not None:
                self._arm(next_check)
        elif type(message) is ReceivedBatch:
            # As for Received, with one extension request for the whole batch.
            extension = self.table.deadline_for(self.histogram)
            granted = self.granted_s
            if granted is not None and granted >= extension:
                self.table.add_many(message.items, now, granted)
            else:
                self.table.add_many(message.items, now, extension)
                self.ctx.send(self.dispatcher, Extend(tuple([item.ack_id for item in message.items]), extension))
            next_check = self.table.next_check_at
            if next_check is not None:
                self._arm(next_check)
        elif type(message) is Redelivered:
            # The queue's new lease is its short default: extend it now, not at the next pass.
            extension = self.table.deadline_for(self.histogram)
            if self.table.renew(message.ack_id, now, extension):
                self.ctx.send(self.dispatcher, Settlement(SettlementKind.MODACK, message.ack_id, extension))
                next_check = self.table.next_check_at
                if next_check is not None:
                    self._arm(next_check)
        elif type(message) is Scheduled:
            self.table.start_clocks(message.ack_ids, now)
            next_check = self.table.next_check_at
            if next_check is not None:
                self._arm(next_check)
        elif type(message) is Done:
            self._done(message, now)
        elif type(message) is Dones:
            self.histogram.add_many(self.table.remove_many(message.items, now))
        elif type(message) is Tick:
            self.timer = None
            self.timer_at = None
            work = self.table.maintain(now, self.histogram)
            for ack_id in work.extend:
                self.ctx.send(self.dispatcher, Settlement(SettlementKind.MODACK, ack_id, work.extension_s))
            for ack_id in work.expired:
                self.ctx.send(self.manager, Settlement(SettlementKind.DROP, ack_id))
            if work.lapsed:
                self.ctx.send(self.manager, Lapsed(work.lapsed))
            if work.next_check_at is not None:
                self._arm(work.next_check_at)

    def _done(self, done: Done, now: float) -> None:
        duration = self.table.remove(done.ack_id, now)
        if duration is not None and done.acked:
            self.histogram.add(duration)

    def _arm(self, when: float) -> None:
        if self.timer_at is not None and self.timer_at <= when:
            return
        if self.timer is not None:
            self.ctx.cancel(self.timer)
        self.timer_at = when
        self.timer = self.ctx.schedule(max(0.0, when - self.ctx.now()), Tick())


@final
class OrderedKeyHandler(Actor):
    """One message per ordering key at a time, in order; unordered ones go straight to the workers.

    The shell of an ``OrderingKeyHolds``, which owns the holds and the fences and decides: this actor
    translates ``Received``, ``CallbackEnded``, ``Lapsed`` and ``Skipped`` into calls on it, keeps
    each waiting message until the core releases it, and turns the core's answers into ``Run`` (one
    message) or ``RunBatch`` (the ``Received`` it kept, several at once: what a batch or a key run
    releases), nacks (``Settlement(NACK)`` to the manager) and fence timers.

    When a keyed message goes back to the queue before its key's later messages ran, they must
    not overtake it. That happens when its callback nacks (or raises), and when its lease lapsed
    before it started (``Lapsed`` from the leaser, ``Skipped`` from the pool, or a delivery that
    reached the handler with its lease already run out): the key is then *sent back* from its tag
    (``_send_back``, the one place that does it), and fenced until those messages return
    (``OrderingKeyHolds.send_back``). A copy whose lease lapsed is nacked too: the nack gives the
    broker consumer its credit back (the queue ignores it if it holds the message already). The
    fence lifts by itself after ``fence_s``, in case a message never returns (dead-lettered, expired).

    Each keyed message it hands to the pool is reported to the manager (``Scheduled``, one per batch),
    which tells the leaser: the message's max-lease clock starts then, not while it was on hold.
    """

    def __init__(self, manager: ActorRef, workers: ActorRef, fence_s: float = 60.0,
                 run_limit: int = KEY_RUN_LIMIT) -> None:
        self.manager = manager
        self.workers = workers
        self.fence_s = fence_s
        self.holds = OrderingKeyHolds(run_limit)
        self.waiting: dict[str, Received] = {}  # held by the core: the message to run when released
        self.early: dict[str, Received] = {}  # a new delivery of a message whose previous run has not ended here
        self.batch: list[Received] | None = None  # while a batch is handled: the messages it releases, sent together

    def receive(self, message: Any) -> None:
        """Release what may run now."""
        if type(message) is ReceivedBatch:
            self._arrive_all(message.items)
        elif type(message) is CallbacksEnded:
            self._end_all(message.items)
        elif type(message) is Received:
            self._arrive(message, self.ctx.now())
        elif type(message) is CallbackEnded:
            self._ended(message)
        elif type(message) is Lapsed:
            self._lapsed(message.ack_ids)
        elif type(message) is Skipped:
            if message.key:
                self._send_back(message.key, split_ack_id(message.ack_id)[1])
            self._finished(message.ack_id)
        elif type(message) is FenceLifted:
            self.holds.lift(message.key, message.fence)

    def _arrive_all(self, items: tuple[Received, ...]) -> None:
        """Admit a batch of deliveries; those that may run go to the pool as one ``RunBatch``."""
        now = self.ctx.now()  # one reading for the batch: its deliveries arrived together
        runs: list[Received] = []
        self.batch = runs
        admit = self.holds.admit
        try:
            for message in items:  # RUN, the common case, inline: with 1,000 keys nearly every message runs
                delivery = message.delivery
                admission = admit(message.ack_id, message.key, delivery.tag, delivery.deadline, now)
                if admission is Admission.RUN:
                    runs.append(message)
                else:
                    self._kept_or_sent_back(message, admission)
        finally:
            self.batch = None
        self._hand_over(runs)

    def _end_all(self, items: tuple[CallbackEnded, ...]) -> None:
        """Apply a batch of callbacks' ends; what they release goes to the pool as one ``RunBatch``."""
        runs: list[Received] = []
        self.batch = runs
        finished = self.holds.finished
        waiting = self.waiting
        try:
            for ended in items:
                if (ended.nacked and ended.key) or self.early:
                    self._ended(ended)  # the general way: a nack sends its key back, an early copy arrives
                    continue
                released = finished(ended.ack_id)  # the common case inline: one core call a message
                if released:
                    runs.extend([waiting.pop(item) for item in released])
        finally:
            self.batch = None
        self._hand_over(runs)

    def _hand_over(self, runs: list[Received]) -> None:
        """Send released messages to the pool (one ``Run``, or a ``RunBatch``) and report the keyed ones."""
        if not runs:
            return
        keyed = tuple([run.ack_id for run in runs if run.key])
        if keyed:
            self.ctx.send(self.manager, Scheduled(keyed))
        if len(runs) == 1:
            run = runs[0]
            self.ctx.send(self.workers, Run(run.ack_id, run.key, run.delivery))
        else:
            self.ctx.send(self.workers, RunBatch(tuple(runs)))

    def _ended(self, message: CallbackEnded) -> None:
        if message.nacked and message.key:
            self._send_back(message.key, split_ack_id(message.ack_id)[1])
        self._finished(message.ack_id)

    def _arrive(self, message: Received, now: float) -> None:
        delivery = message.delivery
        admission = self.holds.admit(message.ack_id, message.key, delivery.tag, delivery.deadline, now)
        if admission is Admission.RUN:
            self._run(message)
        else:
            self._kept_or_sent_back(message, admission)

    def _kept_or_sent_back(self, message: Received, admission: Admission) -> None:
        """Keep a message the core did not let run (held, or early), or send it back (lapsed, fenced)."""
        ack_id = message.ack_id
        if admission is Admission.HELD:
            self.waiting[ack_id] = message
        elif admission is Admission.EARLY:
            # The manager accepted a new delivery (its previous copy was settled) before that copy's
            # CallbackEnded reached us: it arrives once that copy has finished.
            self.early[ack_id] = message
        else:
            if admission is Admission.LAPSED and message.key:
                # Its lease ran out before it reached us (the process was paused): the queue has it back
                # and will deliver it again. Forget this copy; nothing of its key may overtake it.
                self._send_back(message.key, message.delivery.tag)
            self.ctx.send(self.manager, Settlement(SettlementKind.NACK, ack_id))

    def _finished(self, ack_id: str) -> None:
        released = self.holds.finished(ack_id)
        if released:
            waiting = self.waiting
            if self.batch is not None:
                self.batch.extend([waiting.pop(item) for item in released])
            else:  # a key run of several goes as one RunBatch, so that the pool keeps it in one job
                self._hand_over([waiting.pop(item) for item in released])
        if self.early:
            early = self.early.pop(ack_id, None)
            if early is not None:
                self._arrive(early, self.ctx.now())

    def _lapsed(self, ack_ids: tuple[str, ...]) -> None:
        """Send back the held copies whose lease lapsed, fencing their keys; the pool checks the others."""
        lapse = self.holds.lapse(ack_ids)
        for key, tag in lapse.send_back:
            self._send_back(key, tag)
        if lapse.to_pool:
            self.ctx.send(self.workers, Lapsed(lapse.to_pool))

    def _send_back(self, key: str, tag: int) -> None:
        """Fence ``key`` on ``tag`` and send back (nack) its held messages from ``tag`` on."""
        back = self.holds.send_back(key, tag)
        if back.fence is not None:
            self.ctx.schedule(self.fence_s, FenceLifted(key, back.fence))
        for ack_id in back.ids:
            del self.waiting[ack_id]
            self.ctx.send(self.manager, Settlement(SettlementKind.NACK, ack_id))

    def _run(self, received: Received) -> None:
        if self.batch is not None:
            self.batch.append(received)
        else:
            self._hand_over([received])


def _invoke(
    callback: Callable[[SubscriberMessage], object],
    delivery: Delivery,
    settle: Callable[[object], None],
    ask: Callable[..., object],
) -> SettlementKind | None:
    """Run the user's callback in a worker; an exception nacks the message (unless it was settled).

    Returns what the callback decided, so the ordered-key handler learns it with the callback's end.
    """
    message = SubscriberMessage(delivery, settle, ask)
    try:
        callback(message)
    except Exception as error:
        _report(delivery, message)
        message.nack(error)
        raise CallbackRaised(error) from error
    return message.decision


def _report(delivery: Delivery, message: SubscriberMessage) -> None:
    """Log the exception being handled: WARNING, with its traceback and the message's id."""
    log.warning("subscriber callback raised on message %r (ack id %s, delivery %d); nacking it",
                delivery.message.message_id, message.ack_id, delivery.delivery_count, exc_info=True)


@final
@attrs.frozen
class _JobEnds:
    """How a job of several callbacks ended (``_invoke_several``'s result, for the worker pool).

    Attributes:
        settled: the settlements its callbacks made on the job's thread, not handed over yet, in order.
        decisions: per message, what its callback decided (ACK, NACK, DROP, or None if it did not
            settle); NACK for one whose callback raised, and for one that did not run.
        raised: (index, repr of the exception) per callback that raised, in order.
        skipped: the indexes of the messages that did not run: an earlier message of their key nacked in
            this job (the pool nacks them and reports them ended nacked, as for a job that died).
    """

    settled: tuple[Settlement, ...]
    decisions: tuple[SettlementKind | None, ...]
    raised: tuple[tuple[int, str], ...] = ()
    skipped: tuple[int, ...] = ()


def _invoke_several(
    callback: Callable[[SubscriberMessage], object],
    runs: tuple[Run | Received, ...],
    settle: Callable[[object], None],
    ask: Callable[..., object],
    hand_over: int | None = SETTLES_PER_HAND_OVER,
) -> _JobEnds:
    """Run the callback on several messages (each ``Run`` or ``Received``) in turn, in one worker: one job
    instead of one each.

    Settlements a callback makes on this thread while the job runs are collected and returned
    with the outcomes, so the pool forwards them all as one message; one made on another
    thread, or after the job, goes straight to the manager as usual (only this thread appends,
    so nothing is lost between the two paths). They are handed over ``hand_over`` at a time as
    the job goes (None: all with its end). A callback that raises nacks its message, and the
    next callback still runs, except the rest of its key's run: a message whose key nacked earlier
    in this job does not run (``skipped``).
    """
    collected: list[Settlement] = []
    owner = threading.get_ident()
    collecting = True

    def settle_here(request: object) -> None:
        # A deadline change goes at once: the callback may be buying time for a long run.
        if collecting and type(request) is Settlement and request.kind is not SettlementKind.MODACK and (
            threading.get_ident() == owner
        ):
            collected.append(request)
            if hand_over is not None and len(collected) >= hand_over:  # a long job does not sit on its acks
                settle(Settles(tuple(collected)))
                collected.clear()
        else:
            settle(request)

    decisions: list[SettlementKind | None] = []
    raised: list[tuple[int, str]] = []
    skipped: list[int] = []
    stopped: set[str] = set()  # keys whose run in this job nacked: the rest of the run goes back unstarted
    nack = SettlementKind.NACK
    for index, run in enumerate(runs):
        key = run.key
        if stopped and key in stopped:
            decisions.append(nack)
            skipped.append(index)
            continue
        message = SubscriberMessage(run.delivery, settle_here, ask, run.ack_id)
        try:
            callback(message)
        except Exception as error:  # noqa: BLE001 - logged and nacked; the job's next callback still runs
            _report(run.delivery, message)
            message.nack(error)
            decisions.append(nack)
            raised.append((index, repr(error)))
            if key:
                stopped.add(key)
        else:
            decision = message.decision
            decisions.append(decision)
            if key and decision is nack:
                stopped.add(key)
    collecting = False
    return _JobEnds(tuple(collected), tuple(decisions), tuple(raised), tuple(skipped))


class CallbackRaised(Exception):
    """The user's callback raised ``error`` and its message was nacked (a job failing otherwise was not)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


@final
class WorkerPool(Actor):
    """Runs user callbacks as jobs, at most ``workers`` at once; the rest wait in arrival order.

    ``Lapsed`` names messages whose lease the queue took back: those still waiting are dropped
    from the queue unstarted (``Skipped``); a running callback cannot be stopped and settles as usual.

    When more messages wait than there are free workers, one job runs up to ``callbacks_per_job``
    of them in turn and reports them (and the settlements made in it) as one ``RunsEnded``: a
    hand-over between threads costs more than a short callback. A message in such a job counts as
    started with the job, as Google's client runs what its executor queued. Keyed messages share
    jobs too: the messages of a key waiting here are its one running *key run* (the key handler releases the
    next run only once this one's ends are reported), so they stay together in one job, in order, and
    after one of them nacks the rest of its run does not start (nacked, reported ended nacked).

    What waits is spread over the free workers, for callbacks that wait on I/O; once callbacks prove
    short (``SHORT_CALLBACK_S`` on the moving average of the time per callback), it is packed into jobs
    of ``callbacks_per_job`` instead: with many ordering keys few messages wait at a time, and spreading
    them made a job per message or two.
    """

    def __init__(
        self, manager: ActorRef, callback: Callable[[SubscriberMessage], object], workers: int,
        callbacks_per_job: int = 1,
    ) -> None:
        self.manager = manager
        self.callback = callback
        self.workers = workers
        self.callbacks_per_job = callbacks_per_job
        self.waiting: deque[Run | Received] = deque()  # a Run, or a Received that came in a RunBatch
        self.running: dict[int, Run | Received | tuple[Run | Received, ...]] = {}
        self.started_at: dict[int, float] = {}  # job id -> when it was handed to a worker
        self.callback_s: float | None = None  # moving average of a job's time per callback; None before the first
        self.settle: Callable[[object], None] | None = None
        self.ask: Callable[..., object] | None = None
        self.stopping = False

    def on_start(self) -> None:
        """Make the thread-safe paths by which callbacks settle their messages."""
        self.settle = self.ctx.teller_for_threads(self.manager)
        self.ask = self.ctx.asker_for_threads(self.manager)

    def receive(self, message: Any) -> None:
        """Start, queue, or finish callbacks."""
        if type(message) is Run:
            if self.stopping:
                self.ctx.send(self.manager, Settlement(SettlementKind.NACK, message.ack_id))  # never started
                return
            self.waiting.append(message)
        elif type(message) is RunBatch:
            if self.stopping:
                for received in message.runs:
                    self.ctx.send(self.manager, Settlement(SettlementKind.NACK, received.ack_id))  # never started
                return
            self.waiting.extend(message.runs)
        elif type(message) is StopRunning:
            self.stopping = True
            while self.waiting:
                self.ctx.send(self.manager, Settlement(SettlementKind.NACK, self.waiting.popleft().ack_id))
        elif type(message) is Lapsed:
            self._skip(frozenset(message.ack_ids))
        elif type(message) is JobDone:
            job = self._ended(message.job_id)
            if isinstance(job, tuple):
                self.ctx.send(self.manager, _runs_ended(job, message.result))
            else:
                nacked = message.result is SettlementKind.NACK
                self.ctx.send(self.manager, CallbackEnded(job.ack_id, job.key, None, nacked))
        elif type(message) is JobFailed:
            job = self._ended(message.job_id)
            runs = job if isinstance(job, tuple) else (job,)
            error = message.error
            if isinstance(error, CallbackRaised):
                error = error.error
            else:  # the job died outside the callbacks (a worker's failure): nack all it held
                for run in runs:
                    self.ctx.send(self.manager, Settlement(SettlementKind.NACK, run.ack_id))
            for run in runs:
                self.ctx.send(self.manager, CallbackEnded(run.ack_id, run.key, repr(error), True))
        if self.stopping and not self.running:
            self.ctx.send(self.manager, Idle())
            return
        self._start()

    def _start(self) -> None:
        """Start waiting callbacks on free workers, several per job when many wait."""
        waiting = self.waiting
        assert self.settle is not None and self.ask is not None
        pack = self.callback_s is not None and self.callback_s < SHORT_CALLBACK_S
        while waiting and len(self.running) < self.workers:
            if pack and self.running and len(waiting) < PACKED_JOB_MIN:
                break  # a few short ones join the next job to start rather than make one of their own
            # what waits, spread over free workers; or all of it, when callbacks are short
            share = len(waiting) if pack else -(-len(waiting) // (self.workers - len(self.running)))
            run = waiting.popleft()
            size = min(share, self.callbacks_per_job)
            if size > 1 or (run.key and waiting and waiting[0].key == run.key):
                runs = [run]
                while waiting and len(runs) < size:
                    runs.append(waiting.popleft())
                # a key's run (the key handler's release of several) stays in one job, in order
                while waiting and runs[-1].key and waiting[0].key == runs[-1].key:
                    runs.append(waiting.popleft())
                self._note_started(runs)
                several = tuple(runs)
                job = self.ctx.run_job(_invoke_several, self.callback, several, self.settle, self.ask,
                                       PACKED_SETTLES_PER_HAND_OVER if pack else SETTLES_PER_HAND_OVER)
                self.running[job] = several
            else:
                self._note_started((run,))
                job = self.ctx.run_job(_invoke, self.callback, run.delivery, self.settle, self.ask)
                self.running[job] = run
            self.started_at[job] = self.ctx.now()

    def _ended(self, job_id: int) -> Run | Received | tuple[Run | Received, ...]:
        """Forget a finished job and fold its time per callback into the moving average."""
        job = self.running.pop(job_id)
        per_callback = (self.ctx.now() - self.started_at.pop(job_id)) / (len(job) if isinstance(job, tuple) else 1)
        average = self.callback_s
        self.callback_s = per_callback if average is None else (
            average + CALLBACK_TIME_WEIGHT * (per_callback - average))
        return job

    def _note_started(self, runs: Sequence[Run | Received]) -> None:
        if self.ctx.tracing:
            previous: Run | Received | None = None
            for run in runs:
                delivery = run.delivery
                after = previous.ack_id if previous is not None and run.key and previous.key == run.key else None
                self.ctx.note(CallbackStarted(run.ack_id, run.key, delivery.tag, delivery.delivery_count, after))
                previous = run

    def _skip(self, lapsed: frozenset[str]) -> None:
        """Take the lapsed messages that have not started off the queue: the queue redelivers them."""
        if not any(run.ack_id in lapsed for run in self.waiting):
            return
        kept: deque[Run | Received] = deque()
        cut: set[str] = set()  # keys whose run lost a message: the rest of that run goes back too
        for run in self.waiting:
            if run.ack_id in lapsed or (run.key and run.key in cut):
                self.ctx.send(self.manager, Skipped(run.ack_id, run.key))
                if run.key:
                    cut.add(run.key)
            else:
                kept.append(run)
        self.waiting = kept


def _runs_ended(runs: tuple[Run | Received, ...], ends: _JobEnds) -> RunsEnded:
    """The pool's report of a job of several callbacks: its settlements, then one ``CallbackEnded`` each.

    A key run's message skipped after its key nacked goes back (nack) as if its callback had nacked. The
    ends are built unchecked (``callback_ended``): with short callbacks there is one per message.
    """
    nack = SettlementKind.NACK
    if ends.raised:
        errors = dict(ends.raised)
        ended = tuple([callback_ended(run.ack_id, run.key, errors.get(index), decision is nack)
                       for index, (run, decision) in enumerate(zip(runs, ends.decisions, strict=True))])
    else:
        ended = tuple([callback_ended(run.ack_id, run.key, None, decision is nack)
                       for run, decision in zip(runs, ends.decisions, strict=True)])
    settled = ends.settled
    if ends.skipped:
        settled = (*settled, *(Settlement(nack, runs[index].ack_id) for index in ends.skipped))
    return RunsEnded(settled, ended)


@final
class Dispatcher(Actor):
    """Batches acks, nacks and deadline changes (by count or a short delay) and hands each batch to
    the manager, which sends it to the broker: one path to the consumer keeps a final stop behind
    every settlement."""

    def __init__(self, manager: ActorRef, max_batch: int = 100, max_delay_s: float = 0.01) -> None:
        self.manager = manager
        self.batcher = RequestBatcher(max_batch, max_delay_s)
        self.timer: TimerHandle | None = None

    def receive(self, message: Any) -> None:
        """Batch one request, or hand over what is due."""
        now = self.ctx.now()
        if type(message) is Settlement:
            self._hand_over(self.batcher.add(self._request(message), now))
        elif type(message) is Acks:
            for flush in self.batcher.add_acks(message.ack_ids, now):
                self.ctx.send(self.manager, flush)
        elif type(message) is Settles:
            for settle in message.items:
                self._hand_over(self.batcher.add(self._request(settle), now))
        elif type(message) is Extend:
            add = self.batcher.add
            for ack_id in message.ack_ids:
                self._hand_over(add(ModAckRequest(ack_id, message.seconds), now))
        elif type(message) is Tick:
            self.timer = None
            self._hand_over(self.batcher.due(now))
        elif type(message) is Drain:
            self._hand_over(self.batcher.flush())
            self.ctx.send(self.manager, Drained())
        due = self.batcher.next_due_at()
        if due is not None and self.timer is None:
            self.timer = self.ctx.schedule(max(0.0, due - now), Tick())

    @staticmethod
    def _request(settle: Settlement) -> AckRequest | NackRequest | ModAckRequest | DropRequest:
        match settle.kind:
            case SettlementKind.ACK:
                return AckRequest(settle.ack_id)
            case SettlementKind.NACK:
                return NackRequest(settle.ack_id, settle.attempt, settle.error)
            case SettlementKind.MODACK:
                return ModAckRequest(settle.ack_id, settle.seconds)
            case _:
                return DropRequest(settle.ack_id)

    def _hand_over(self, flush: Flush | None) -> None:
        if flush is not None:
            self.ctx.send(self.manager, flush)


def broker_requests(flush: Flush) -> list[Ack | Nack | ModifyAckDeadline]:
    """The broker messages that carry out one batch (drops tell the broker nothing).

    Acks are ``Ack(confirm=True)``: the queue's ``AckResult`` tells the manager which took and
    which came after their lease had lapsed (see ``StreamingPullManager``).
    """
    requests: list[Ack | Nack | ModifyAckDeadline] = [
        Ack(consumer_id, tags, confirm=True) for consumer_id, tags in _by_consumer(flush.acks).items()
    ]
    if flush.nack_attempts or flush.nack_errors:
        requests.extend(_nacks(flush.nacks, flush.nack_attempts, flush.nack_errors))
    else:
        requests.extend(Nack(consumer_id, tags) for consumer_id, tags in _by_consumer(flush.nacks).items())
    for seconds, ids in flush.modacks:
        requests.extend(
            ModifyAckDeadline(consumer_id, tags, min(600.0, seconds))
            for consumer_id, tags in _by_consumer(ids).items()
        )
    return requests


def _nacks(
    ack_ids: tuple[str, ...], attempts: tuple[int, ...], errors: tuple[DeliveryError | None, ...] = ()
) -> list[Nack]:
    """One ``Nack`` per consumer naming the delivery each tag's nack is for (``Nack.attempts``), and why.

    The queue delivers a lapsed message again under the same tag; a nack without its attempt that
    arrives after that would return the newer delivery. A consumer's nacks go without attempts only
    if one of them has none (0: then each names the current delivery, as before attempts existed).
    ``errors`` (parallel to ``ack_ids``, or empty) become ``Nack.errors``: a callback's exception.
    """
    grouped: dict[int, tuple[list[int], list[int], list[DeliveryError | None]]] = {}
    for index, ack_id in enumerate(ack_ids):
        consumer_id, tag = split_ack_id(ack_id)
        tags, tried, why = grouped.setdefault(consumer_id, ([], [], []))
        tags.append(tag)
        tried.append(attempts[index] if attempts else 0)
        why.append(errors[index] if errors else None)
    return [
        Nack(consumer_id, tuple(tags), attempts=tuple(tried) if all(tried) else (),
             errors=tuple(why) if any(error is not None for error in why) else ())
        for consumer_id, (tags, tried, why) in grouped.items()
    ]


def _by_consumer(ack_ids: tuple[str, ...]) -> dict[int, tuple[int, ...]]:
    # Grouped by the consumer's text first (one consumer, as a rule): one int() per id, not two.
    grouped: dict[str, list[int]] = {}
    for ack_id in ack_ids:
        consumer, _, tag = ack_id.partition(":")
        tags = grouped.get(consumer)
        if tags is None:
            grouped[consumer] = tags = []
        tags.append(int(tag))
    return {int(consumer): tuple(tags) for consumer, tags in grouped.items()}


@final
class Heartbeater(Actor):
    """Tells the manager ``Heartbeat`` every ``period_s`` (the stream's keep-alive)."""

    def __init__(self, manager: ActorRef, period_s: float = 30.0) -> None:
        self.manager = manager
        self.period_s = period_s

    def on_start(self) -> None:
        """Arm the first beat."""
        self.ctx.schedule(self.period_s, Tick())

    def receive(self, message: Any) -> None:
        """Beat and re-arm."""
        if type(message) is Tick:
            self.ctx.send(self.manager, Heartbeat())
            self.ctx.schedule(self.period_s, Tick())
