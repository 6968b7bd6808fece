"""The subscriber's components as actors (seed 003's proposal): each owns one concern.

LoadController (flow control), Leaser (lease extension), OrderedKeyHandler (messages
on hold), Dispatcher (batched ack / nack / modack), Heartbeater, and the WorkerPool
that runs user callbacks off the actors. None shares state; the seed's locks became
the mailboxes of these actors.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.actors.broker import Ack, Delivery, ModifyAckDeadline, Nack, Resume, Suspend
from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, TimerHandle

from ._batching import AckRequest, DropRequest, Flush, ModAckRequest, NackRequest, RequestBatcher
from ._flow import FlowDecision, LoadTracker
from ._histogram import Histogram
from ._leases import LeaseTable
from ._message import SubscriberMessage
from ._ordering import OrderingKeyHolds
from ._protocol import (
    CallbackEnded,
    CallbackStarted,
    Done,
    Drain,
    Drained,
    FenceLifted,
    Heartbeat,
    Idle,
    Received,
    Run,
    Settle,
    SettleKind,
    StopRunning,
    Tick,
    split_ack_id,
)
from ._settings import FlowControl

log = logging.getLogger("conveyor.subscriber")


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
        elif type(message) is Done:
            if not self.tracker.remove(message.ack_id):
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
    """Extends leases of messages in progress by the p99 processing time; gives up past the max."""

    def __init__(self, manager: ActorRef, dispatcher: ActorRef, flow: FlowControl) -> None:
        self.manager = manager
        self.dispatcher = dispatcher
        self.table = LeaseTable(flow)
        self.histogram = Histogram()
        self.timer: TimerHandle | None = None
        self.timer_at: float | None = None

    def receive(self, message: Any) -> None:
        """Lease, release, or maintain."""
        now = self.ctx.now()
        if type(message) is Received:
            self.table.add(message.ack_id, message.size, now)
            # The first extension right away, as the Pub/Sub client does for each batch received.
            extension = self.table.deadline_for(self.histogram)
            self.ctx.send(self.dispatcher, Settle(SettleKind.MODACK, message.ack_id, extension))
            next_check = self.table.next_check_at
            if next_check is not None:
                self._arm(next_check)
        elif type(message) is Done:
            duration = self.table.remove(message.ack_id, now)
            if duration is not None and message.acked:
                self.histogram.add(duration)
        elif type(message) is Tick:
            self.timer = None
            self.timer_at = None
            work = self.table.maintain(now, self.histogram)
            for ack_id in work.extend:
                self.ctx.send(self.dispatcher, Settle(SettleKind.MODACK, ack_id, work.extension_s))
            for ack_id in work.expired:
                self.ctx.send(self.manager, Settle(SettleKind.DROP, ack_id))
            if work.next_check_at is not None:
                self._arm(work.next_check_at)

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

    When a keyed message is nacked, what is held behind it goes back to the queue too. A message
    may then run only if no earlier message of its key is still out being redelivered: later ones
    that were already on their way are sent back as well, so the key's messages run again in
    publish order (the queue keeps positions). The wait for a key lifts by itself after
    ``fence_s``, in case a message never returns (dead-lettered, expired).
    """

    def __init__(self, manager: ActorRef, workers: ActorRef, fence_s: float = 60.0) -> None:
        self.manager = manager
        self.workers = workers
        self.fence_s = fence_s
        self.holds = OrderingKeyHolds()
        self.waiting: dict[str, Received] = {}
        self.out: dict[str, set[int]] = {}  # key -> tags sent back and not yet returned
        self.fence_of: dict[str, int] = {}  # key -> id of the fence now up (so an old timer lifts nothing)
        self.fences = 0

    def receive(self, message: Any) -> None:
        """Release what may run now."""
        if type(message) is Received:
            self._arrive(message)
        elif type(message) is CallbackEnded:
            if message.nacked and message.key:
                self._send_back_from(message.key, split_ack_id(message.ack_id)[1])
            for ack_id in self.holds.finished(message.ack_id):
                self._run(self.waiting.pop(ack_id))
        elif type(message) is FenceLifted and self.fence_of.get(message.key) == message.fence:
            del self.fence_of[message.key]
            self.out.pop(message.key, None)

    def _arrive(self, message: Received) -> None:
        key = message.key or None
        tag = message.delivery.tag
        out = None if key is None else self.out.get(key)
        if out:
            if tag > min(out):
                out.add(tag)  # an earlier message of its key is still coming back
                self.ctx.send(self.manager, Settle(SettleKind.NACK, message.ack_id))
                return
            out.discard(tag)
            if not out:
                self.fence_of.pop(key, None)  # type: ignore[arg-type]  # everything came back
        released = self.holds.arrive(message.ack_id, key)
        if message.ack_id not in released:
            self.waiting[message.ack_id] = message
        for ack_id in released:
            self._run(message if ack_id == message.ack_id else self.waiting.pop(ack_id))

    def _send_back_from(self, key: str, tag: int) -> None:
        out = self.out.get(key)
        if not out:
            out = self.out[key] = set()
            self.fences += 1
            self.fence_of[key] = self.fences
            self.ctx.schedule(self.fence_s, FenceLifted(key, self.fences))
        out.add(tag)
        for ack_id in self.holds.drop_key(key):
            out.add(self.waiting.pop(ack_id).delivery.tag)
            self.ctx.send(self.manager, Settle(SettleKind.NACK, ack_id))

    def _run(self, received: Received) -> None:
        self.ctx.send(self.workers, Run(received.ack_id, received.key, received.delivery))


def _invoke(
    callback: Callable[[SubscriberMessage], object],
    delivery: Delivery,
    settle: Callable[[object], None],
    ask: Callable[..., object],
) -> SettleKind | None:
    """Run the user's callback in a worker; an exception nacks the message (unless it was settled).

    Returns what the callback decided, so the ordered-key handler learns it with the callback's end.
    """
    message = SubscriberMessage(delivery, settle, ask)
    try:
        callback(message)
    except Exception as error:
        log.exception("subscriber callback raised on %r; nacking it", message)
        message.nack()
        raise CallbackRaised(error) from error
    return message.decision


class CallbackRaised(Exception):
    """The user's callback raised ``error`` and its message was nacked (a job failing otherwise was not)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


@final
class WorkerPool(Actor):
    """Runs user callbacks as jobs, at most ``workers`` at once; the rest wait in arrival order."""

    def __init__(self, manager: ActorRef, callback: Callable[[SubscriberMessage], object], workers: int) -> None:
        self.manager = manager
        self.callback = callback
        self.workers = workers
        self.waiting: deque[Run] = deque()
        self.running: dict[int, Run] = {}
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
                self.ctx.send(self.manager, Settle(SettleKind.NACK, message.ack_id))  # never started
                return
            self.waiting.append(message)
        elif type(message) is StopRunning:
            self.stopping = True
            while self.waiting:
                self.ctx.send(self.manager, Settle(SettleKind.NACK, self.waiting.popleft().ack_id))
        elif type(message) is JobDone:
            run = self.running.pop(message.job_id)
            nacked = message.result is SettleKind.NACK
            self.ctx.send(self.manager, CallbackEnded(run.ack_id, run.key, None, nacked))
        elif type(message) is JobFailed:
            run = self.running.pop(message.job_id)
            error = message.error
            if isinstance(error, CallbackRaised):
                error = error.error
            else:  # the job died outside the callback (a worker's failure): nobody nacked it yet
                self.ctx.send(self.manager, Settle(SettleKind.NACK, run.ack_id))
            self.ctx.send(self.manager, CallbackEnded(run.ack_id, run.key, repr(error), True))
        if self.stopping and not self.running:
            self.ctx.send(self.manager, Idle())
            return
        while self.waiting and len(self.running) < self.workers:
            run = self.waiting.popleft()
            assert self.settle is not None and self.ask is not None
            if self.ctx.tracing:
                delivery = run.delivery
                self.ctx.note(CallbackStarted(run.ack_id, run.key, delivery.tag, delivery.delivery_count))
            self.running[self.ctx.run_job(_invoke, self.callback, run.delivery, self.settle, self.ask)] = run


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
        if type(message) is Settle:
            self._hand_over(self.batcher.add(self._request(message), now))
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
    def _request(settle: Settle) -> AckRequest | NackRequest | ModAckRequest | DropRequest:
        match settle.kind:
            case SettleKind.ACK:
                return AckRequest(settle.ack_id)
            case SettleKind.NACK:
                return NackRequest(settle.ack_id)
            case SettleKind.MODACK:
                return ModAckRequest(settle.ack_id, settle.seconds)
            case _:
                return DropRequest(settle.ack_id)

    def _hand_over(self, flush: Flush | None) -> None:
        if flush is not None:
            self.ctx.send(self.manager, flush)


def broker_requests(flush: Flush) -> list[Ack | Nack | ModifyAckDeadline]:
    """The broker messages that carry out one batch (drops tell the broker nothing)."""
    requests: list[Ack | Nack | ModifyAckDeadline] = [
        Ack(consumer_id, tags) for consumer_id, tags in _by_consumer(flush.acks).items()
    ]
    requests.extend(Nack(consumer_id, tags) for consumer_id, tags in _by_consumer(flush.nacks).items())
    for seconds, ids in flush.modacks:
        requests.extend(
            ModifyAckDeadline(consumer_id, tags, min(600.0, seconds))
            for consumer_id, tags in _by_consumer(ids).items()
        )
    return requests


def _by_consumer(ack_ids: tuple[str, ...]) -> dict[int, tuple[int, ...]]:
    grouped: dict[int, list[int]] = {}
    for ack_id in ack_ids:
        consumer_id, tag = split_ack_id(ack_id)
        grouped.setdefault(consumer_id, []).append(tag)
    return {consumer_id: tuple(tags) for consumer_id, tags in grouped.items()}


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
