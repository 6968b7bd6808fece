"""StreamingPullManager: wires the subscriber's components and routes between them (seed 003).

It is the client of one broker ``ConsumerActor`` (its child), whose credit is the
flow control's limits (the server honours them, as Pub/Sub's does); every delivery
fans out to the load controller, leaser and ordered-key handler; settlements from
user code come back here, go to the dispatcher, and release load and lease.

The queue names a delivery by its tag, and gives a message back to the same consumer under the
same tag when its lease lapses, so one ack id (``consumer_id:tag``) may be delivered here more
than once. Which copy runs, which is covered by an ack on its way and which is acked again is the
``AckLedger``'s to decide (``_ledger.py``, where the cases are listed); the manager carries it out.

To know which acks took, acks go out as ``Ack(confirm=True)`` (``broker_requests``): the queue
answers each with an ``AckResult`` naming the tags it acked and those it no longer held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.actors.broker import (
    Ack,
    AckResult,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    MatchAll,
    Selector,
    Suspend,
)
from conveyor.runtime import Actor, ActorRef, ConveyorError

from ._batching import Flush
from ._components import Dispatcher, Heartbeater, Leaser, LoadController, OrderedKeyHandler, WorkerPool, broker_requests
from ._ledger import AckLedger, Answer, Arrival
from ._message import SubscriberMessage
from ._parts import Part
from ._protocol import (
    AckResponse,
    AckWithResponse,
    CallbackEnded,
    CallbacksEnded,
    Cancel,
    Deliveries,
    Done,
    Dones,
    Drain,
    Drained,
    Extend,
    GetFlowStats,
    GetSubscriptionStats,
    GraceOver,
    Heartbeat,
    Idle,
    Lapsed,
    Received,
    ReceivedBatch,
    Redelivered,
    RunsEnded,
    Scheduled,
    Settlement,
    SettlementKind,
    Settles,
    Skipped,
    SourceGone,
    StopRunning,
    SubscriptionStats,
    acks_unchecked,
    dones_unchecked,
    received_batch_unchecked,
    received_unchecked,
    split_ack_id,
)
from ._settings import FlowControl, check_subscriber_settings

log = logging.getLogger("conveyor.subscriber")

CANCEL_GRACE_S = 0.25
"""How long ``cancel()`` without ``await_callbacks_on_shutdown`` lets running callbacks end. A job reports its
callbacks' acks when it ends: without this, an ack made just before ``cancel()`` was given back as a nack at
the stop, and the message delivered again. A callback running longer is not waited for; its message goes back."""

CALLBACKS_PER_JOB = 128
"""Most callbacks one worker job runs in turn when many unordered messages wait (``WorkerPool``)."""


class SubscriptionFailed(ConveyorError):
    """The subscription stopped because its source cannot be consumed any more (``SourceGone``)."""


class StreamingPullManager(Actor):
    """One subscription: a consumer of ``queue`` whose messages run ``callback`` on workers.

    The shell of an ``AckLedger``: it translates deliveries, settlements and the queue's answers
    into calls on the ledger, and the ledger's answers into messages to its parts. Messages are
    dispatched by their type through a table of bound methods (one dict lookup, however many kinds).

    Not final: ``make_part`` is an extension point (for planted bugs in simulations).
    """

    def __init__(
        self,
        queue: ActorRef,
        callback: Callable[[SubscriberMessage], object],
        flow: FlowControl | None = None,
        workers: int = 4,
        selector: Selector | None = None,
        heartbeat_s: float = 30.0,
        await_callbacks_on_shutdown: bool = False,
        callbacks_per_job: int = CALLBACKS_PER_JOB,
    ) -> None:
        check_subscriber_settings(callback, workers, heartbeat_s, await_callbacks_on_shutdown, callbacks_per_job)
        self.callbacks_per_job = callbacks_per_job
        self.queue = queue
        self.callback = callback
        self.flow = flow or FlowControl()
        self.workers = workers
        self.selector = selector
        self.heartbeat_s = heartbeat_s
        self.ledger = AckLedger()
        self.askers: dict[str, ActorRef] = {}  # ack_with_response: ack id -> who waits for the answer
        self.heartbeats = 0
        self.lease_extensions = 0
        self.consumer: ActorRef | None = None
        self.parts: dict[str, ActorRef] = {}
        self.closing = False
        self.draining = False  # the dispatcher was told to drain: the stop follows its Drained
        self.await_callbacks = await_callbacks_on_shutdown
        self.taken: list[Received] | None = None  # while a Deliveries batch is taken in: its new Received
        self.gathered: tuple[list[Done], list[Settlement]] | None = None  # while a RunsEnded is applied
        self.gone: str | None = None  # why the source cannot be consumed any more (SourceGone)
        # Bound here, so that a subclass's override of a handler (``_deliver``, say) is the one called.
        self._handlers: dict[type, Callable[[Any], None]] = {
            Delivery: self._deliver,
            Settlement: self._settle,
            Deliveries: self._on_deliveries,
            Extend: self._on_extend,
            Flush: self._send_batch,
            AckResult: self._answered,
            Scheduled: self._on_scheduled,
            Lapsed: self._on_lapsed,
            Skipped: self._on_skipped,
            Drained: self._on_drained,
            Idle: self._on_idle,
            GraceOver: self._on_grace_over,
            CallbackEnded: self._on_callback_ended,
            RunsEnded: self._on_runs_ended,
            Settles: self._on_settles,
            Heartbeat: self._on_heartbeat,
            Cancel: self._on_cancel,
            SourceGone: self._on_source_gone,
            AckWithResponse: self._on_ack_with_response,
            GetSubscriptionStats: self._on_get_stats,
            GetFlowStats: self._on_get_flow_stats,
        }

    @property
    def pending(self) -> Mapping[str, int]:
        """Received, not yet settled or dropped -> its delivery_count then (the ledger's live view)."""
        return self.ledger.pending

    @property
    def acking(self) -> dict[str, bool]:
        """Acked, the queue's answer not back yet -> delivered again meanwhile? (the ledger's live table)."""
        return self.ledger.acking

    def on_start(self) -> None:
        """Spawn the broker consumer and the components."""
        flow = self.flow
        settings = ConsumerSettings(
            prefetch_messages=flow.max_messages,
            prefetch_bytes=flow.max_bytes,
            selector=self.selector if self.selector is not None else MatchAll(),
        )
        me = self.ctx.self_ref
        consumer = self.make_part(Part.CONSUMER, ConsumerActor, self.queue, me, settings)
        self.consumer = consumer
        dispatcher = self.make_part(Part.DISPATCHER, Dispatcher, me)
        workers = self.make_part(Part.WORKERS, WorkerPool, me, self.callback, self.workers, self.callbacks_per_job)
        self.parts = {
            Part.DISPATCHER: dispatcher,
            Part.WORKERS: workers,
            Part.LOAD: self.make_part(Part.LOAD, LoadController, consumer, flow),
            # The leaser's extensions come through here, not straight to the dispatcher: then they
            # share one channel with the settlements and a late one for a message already nacked
            # or acked is dropped here, instead of superseding the nack in the dispatcher's batch.
            Part.LEASER: self.make_part(Part.LEASER, Leaser, me, me, flow),
            Part.KEYS: self.make_part(Part.KEYS, OrderedKeyHandler, me, workers),
            Part.HEARTBEAT: self.make_part(Part.HEARTBEAT, Heartbeater, me, self.heartbeat_s),
        }

    def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
        """Spawn the child ``name`` as ``factory(*args)``: the one place a subclass may swap a component.

        The simulation's planted bugs override it to run a broken component inside a real subscription.
        """
        return self.ctx.spawn(lambda: factory(*args), name=name)

    def receive(self, message: Any) -> None:
        """Route one event to its handler (anything else is ignored)."""
        handler = self._handlers.get(type(message))
        if handler is not None:
            handler(message)

    # ------------------------------------------------------------------ handlers, one per message type

    def _on_deliveries(self, message: Deliveries) -> None:
        self._deliver_batch(message.deliveries)

    def _on_extend(self, message: Extend) -> None:
        # The leaser's first extensions of a batch: on to the dispatcher for those still held here.
        ids = self.ledger.pending_of(message.ack_ids)
        if ids:
            self.lease_extensions += len(ids)
            self.ctx.send(self.parts[Part.DISPATCHER], Extend(ids, message.seconds) if len(ids) > 1 else
                          Settlement(SettlementKind.MODACK, ids[0], message.seconds))

    def _on_scheduled(self, message: Scheduled) -> None:
        # The key handler handed these keyed messages to the pool: their max-lease clocks start.
        ids = self.ledger.pending_of(message.ack_ids)
        if ids:
            self.ctx.send(self.parts[Part.LEASER], Scheduled(ids) if len(ids) < len(message.ack_ids) else message)

    def _on_lapsed(self, message: Lapsed) -> None:
        # Only what is still held here and still leased (a lease given up at the maximum is not).
        lapsed = self.ledger.leased_of(message.ack_ids)
        if lapsed:
            self.ctx.send(self.parts[Part.KEYS], Lapsed(lapsed))

    def _on_skipped(self, message: Skipped) -> None:
        # A lapsed message the pool dropped unstarted: the key handler fences its key, and the nack
        # gives the broker consumer its credit back (the queue has the message already).
        self.ctx.send(self.parts[Part.KEYS], message)
        self._settle(Settlement(SettlementKind.NACK, message.ack_id))

    def _on_drained(self, message: Drained) -> None:
        if self.closing and self.gone is not None:
            self.ctx.give_up(SubscriptionFailed(self.gone))
        elif self.closing:
            self.ctx.stop()

    def _on_idle(self, message: Idle) -> None:
        if self.closing:
            self._drain()  # every running callback has settled

    def _on_grace_over(self, message: GraceOver) -> None:
        if self.closing:
            self._drain()  # what still runs is not waited for: its message goes back with the rest

    def _drain(self) -> None:
        if not self.draining:
            self.draining = True
            self.ctx.send(self.parts[Part.DISPATCHER], Drain())

    def _on_callback_ended(self, message: CallbackEnded) -> None:
        self.ctx.send(self.parts[Part.KEYS], message)

    def _on_runs_ended(self, message: RunsEnded) -> None:
        self._settle_all(message.settled)
        self.ctx.send(self.parts[Part.KEYS], CallbacksEnded(message.ended))

    def _on_settles(self, message: Settles) -> None:
        self._settle_all(message.items)

    def _on_heartbeat(self, message: Heartbeat) -> None:
        self.heartbeats += 1

    def _on_cancel(self, message: Cancel) -> None:
        self._cancel()

    def _on_source_gone(self, message: SourceGone) -> None:
        log.error("%s: %s; the subscription stops", self.ctx.self_ref.path, message.reason)
        self.gone = message.reason
        self._cancel()

    def _on_ack_with_response(self, message: AckWithResponse) -> None:
        self._ack_with_response(message.ack_id)

    def _on_get_stats(self, message: GetSubscriptionStats) -> None:
        self.ctx.reply(SubscriptionStats(len(self.ledger), self.heartbeats, self.lease_extensions))

    def _on_get_flow_stats(self, message: GetFlowStats) -> None:
        # The load controller keeps the budget: it answers the asker itself.
        asker = message.reply_to or self.ctx.sender
        if asker is not None:
            self.ctx.send(self.parts[Part.LOAD], GetFlowStats(asker))

    # ------------------------------------------------------------------ deliveries

    def _deliver_batch(self, deliveries: tuple[Delivery, ...]) -> None:
        """Take several deliveries in, in order: one ``ReceivedBatch`` per component for those taken."""
        if type(self)._deliver is not StreamingPullManager._deliver:  # noqa: SLF001 - overridden or not
            taken = self._deliver_each(deliveries)  # a subclass's own _deliver (a planted bug) sees each one
        else:
            taken = []
            delivered = self.ledger.delivered
            new = Arrival.NEW
            for delivery in deliveries:  # _deliver's, inline: this loop runs once per message
                ack_id = f"{delivery.consumer_id}:{delivery.tag}"
                arrival = delivered(ack_id, delivery)
                if arrival is new:
                    message = delivery.message  # a checked Delivery's: its size an int, its group a str or None
                    taken.append(received_unchecked(ack_id, message.size, message.group, delivery))
                else:
                    self._arrived_again(ack_id, arrival)
        if len(taken) == 1:
            received: Received | ReceivedBatch = taken[0]
        elif taken:
            received = received_batch_unchecked(tuple(taken))
        else:
            return
        parts = self.parts
        send = self.ctx.send
        send(parts[Part.LOAD], received)
        send(parts[Part.LEASER], received)
        send(parts[Part.KEYS], received)

    def _deliver_each(self, deliveries: tuple[Delivery, ...]) -> list[Received]:
        """``_deliver`` each delivery in turn; return the ``Received`` of those taken in, not sent yet."""
        taken: list[Received] = []
        self.taken = taken
        try:
            for delivery in deliveries:
                self._deliver(delivery)
        finally:
            self.taken = None
        return taken

    def _deliver(self, delivery: Delivery) -> None:
        """Take a delivery in, unless it is one more copy of a message held or settled here.

        Within a batch (``taken`` is a list), a new delivery's ``Received`` is added to it, not sent.
        """
        ack_id = f"{delivery.consumer_id}:{delivery.tag}"  # ack_id_of(delivery), without the call
        arrival = self.ledger.delivered(ack_id, delivery)
        if arrival is not Arrival.NEW:
            self._arrived_again(ack_id, arrival)
            return
        message = delivery.message  # a checked Delivery's: its size an int, its group a str or None
        received = received_unchecked(ack_id, message.size, message.group, delivery)
        taken = self.taken
        if taken is not None:
            taken.append(received)
            return
        parts = self.parts
        self.ctx.send(parts[Part.LOAD], received)
        self.ctx.send(parts[Part.LEASER], received)
        self.ctx.send(parts[Part.KEYS], received)

    def _arrived_again(self, ack_id: str, arrival: Arrival) -> None:
        """One more copy of a message held or settled here (an ``arrival`` other than ``NEW``)."""
        if arrival is Arrival.RENEW:
            # Its lease lapsed and the queue gave it back to us while the copy here waits or runs:
            # that copy still runs (its settlement settles this delivery); the new lease is extended.
            self.ctx.send(self.parts[Part.LEASER], Redelivered(ack_id))
        elif arrival is Arrival.ACK_AGAIN:
            # Handled and acked here, but the ack reached the queue after the lease lapsed: ack it
            # again rather than run it again (after later messages of its key, perhaps).
            self._send_confirmed_ack(ack_id)

    # ------------------------------------------------------------------ settlements

    def _settle_all(self, settles: tuple[Settlement, ...]) -> None:
        """Settlements made in one worker job, in order: each part is told once for them all."""
        if not settles:
            return
        ack = SettlementKind.ACK
        ack_ids: list[str] = []
        for settle in settles:
            if settle.kind is not ack:
                break
            ack_ids.append(settle.ack_id)
        else:
            self._ack_all(ack_ids)
            return
        self.gathered = ([], [])
        try:
            for settle in settles:
                self._settle(settle)
        finally:
            self._send_gathered()

    def _ack_all(self, ack_ids: list[str]) -> None:
        """A job's settlements, all acks of ``ack_ids`` (the common case): as ``_settle`` each, with one ledger call.

        Each part is told once, as ``_settle_all`` does: the load controller and the leaser one
        ``Dones``, the dispatcher one ``Acks`` of those settled here (an ack of a message not pending,
        settled before or dropped, does nothing).
        """
        settled, released = self.ledger.ack_all(ack_ids)
        parts = self.parts
        if released:
            done = dones_unchecked(released, True)
            self.ctx.send(parts[Part.LOAD], done)
            self.ctx.send(parts[Part.LEASER], done)
        if settled:
            self.ctx.send(parts[Part.DISPATCHER], acks_unchecked(tuple(settled)))

    def _send_gathered(self) -> None:
        gathered, self.gathered = self.gathered, None
        if gathered is None:
            return
        dones, settles = gathered
        parts = self.parts
        if dones:
            done = Dones(tuple(dones))
            self.ctx.send(parts[Part.LOAD], done)
            self.ctx.send(parts[Part.LEASER], done)
        if settles:
            self.ctx.send(parts[Part.DISPATCHER], Settles(tuple(settles)))

    def _to_dispatcher(self, settle: Settlement) -> None:
        if self.gathered is not None:
            self.gathered[1].append(settle)
        else:
            self.ctx.send(self.parts[Part.DISPATCHER], settle)

    def _settle(self, message: Settlement) -> None:
        """Apply the first settlement of a pending message (later ones do nothing)."""
        ack_id = message.ack_id
        ledger = self.ledger
        kind = message.kind
        if kind is SettlementKind.MODACK:
            if not ledger.is_pending(ack_id):
                return  # settled before, or dropped: the first decision stands
            if message.seconds != 0:
                if self.ctx.sender == self.parts.get(Part.LEASER):
                    self.lease_extensions += 1
                self._to_dispatcher(message)
                return
            message = Settlement(SettlementKind.NACK, ack_id)  # Pub/Sub's nack: a zero deadline
            kind = SettlementKind.NACK
        elif kind is SettlementKind.DROP and self.ctx.sender == self.parts[Part.LEASER]:
            self._expire(ack_id)
            return
        if kind is SettlementKind.ACK:
            settled = ledger.ack(ack_id)
        elif kind is SettlementKind.NACK:
            settled = ledger.nack(ack_id)
        else:
            settled = ledger.drop(ack_id)
        if settled is None:
            return  # settled before, or dropped: the first decision stands
        if settled.release:
            done = Done(ack_id, acked=kind is SettlementKind.ACK)
            if self.gathered is not None:
                self.gathered[0].append(done)
            else:
                parts = self.parts
                self.ctx.send(parts[Part.LOAD], done)
                self.ctx.send(parts[Part.LEASER], done)
        if kind is SettlementKind.NACK:
            # The nack is for the newest delivery held here: one made after it (the lease lapses
            # again before the nack arrives) is not this nack's to return, and is taken in as new.
            message = Settlement(SettlementKind.NACK, ack_id, attempt=settled.attempt, error=message.error)
        self._to_dispatcher(message)
        if settled.redelivery is not None:
            # Dropped by the user, but the queue had already given the message back to us (its lease
            # lapsed): that delivery is the live one now. What was gathered goes first: the load
            # controller and leaser must forget the old copy before they hear of the new one.
            self._send_gathered()
            self._deliver(settled.redelivery)

    def _expire(self, ack_id: str) -> None:
        """The leaser gave up on a lease held ``max_lease_duration_s``: stop counting it, not settling it.

        Flow control and the leaser forget it (the queue will let the lease lapse and redeliver),
        but it stays pending: its callback's own ack or nack still goes to the queue, which takes
        it if the lease still holds, and either way the broker consumer's credit comes back.
        A redelivery meanwhile is ignored, as for any pending message, and its lease is not renewed.
        """
        if self.ledger.expire(ack_id):
            done = Done(ack_id)
            self.ctx.send(self.parts[Part.LOAD], done)
            self.ctx.send(self.parts[Part.LEASER], done)

    def _send_batch(self, flush: Flush) -> None:
        """Send one batch of the dispatcher's to the broker consumer.

        Every settlement reaches the consumer from here, so a final stop queues behind them.
        """
        if self.consumer is not None:
            for request in broker_requests(flush):
                self.ctx.send(self.consumer, request)

    # ------------------------------------------------------------------ confirmed acks

    def _send_confirmed_ack(self, ack_id: str) -> None:
        """Ack one message now, outside a batch, and have the queue say whether it took."""
        if self.consumer is not None:
            consumer_id, tag = split_ack_id(ack_id)
            self.ctx.send(self.consumer, Ack(consumer_id, (tag,), confirm=True))

    def _answered(self, result: AckResult) -> None:
        """The queue's answer to a confirmed Ack: which acks took, and which came after their lease lapsed."""
        consumer_id = self.ledger.consumer_id
        if self.askers:
            for tag in result.acked:
                self._ack_answered(f"{consumer_id}:{tag}", took=True)
        else:  # no ack_with_response waits: the acks that took ask for nothing, but a credit back
            for ack_id in self.ledger.took_all([f"{consumer_id}:{tag}" for tag in result.acked]):
                self._give_credit_back(ack_id)
        for tag in result.invalid:
            self._ack_answered(f"{consumer_id}:{tag}", took=False)

    def _ack_answered(self, ack_id: str, took: bool) -> None:
        asker = self.askers.pop(ack_id, None)
        if asker is not None:
            self.ctx.send(asker, AckResponse(ack_id, took))
        answer = self.ledger.answered(ack_id, took)
        if answer is Answer.REFUSED:
            self._refuse(ack_id)
        elif answer is Answer.CREDIT:
            self._give_credit_back(ack_id)

    def _give_credit_back(self, ack_id: str) -> None:
        """The queue took our ack of a message it had delivered again meanwhile: give that delivery's credit back.

        The broker consumer counted that second delivery after it had forwarded our ack. The entry is
        gone from the queue, so this ack can hit nothing else.
        """
        if self.consumer is not None:
            consumer_id, tag = split_ack_id(ack_id)
            self.ctx.send(self.consumer, Ack(consumer_id, (tag,)))

    def _refuse(self, ack_id: str) -> None:
        """Remember an ack the queue refused, until the message is delivered here again (or for a long while)."""
        self.ledger.refuse(ack_id, self.ctx.now())

    def _ack_with_response(self, ack_id: str) -> None:
        asker = self.ctx.sender
        if self.consumer is None or not self.ledger.is_pending(ack_id):
            if asker is not None:
                self.ctx.reply(AckResponse(ack_id, False))  # settled or dropped before
            return
        settled = self.ledger.ack(ack_id)
        assert settled is not None  # pending, checked above
        if settled.release:
            done = Done(ack_id)
            self.ctx.send(self.parts[Part.LOAD], done)
            self.ctx.send(self.parts[Part.LEASER], done)
        if asker is not None:
            self.askers[ack_id] = asker
        self._send_confirmed_ack(ack_id)

    # ------------------------------------------------------------------ shutting down

    def _cancel(self) -> None:
        """Stop: the queue takes back whatever is not acked.

        First take no more work and send back what never started. With ``await_callbacks_on_shutdown``,
        let the running callbacks end (their settlements go out); otherwise let them end for at most
        ``CANCEL_GRACE_S``, and the messages of those still running then go back to the queue like the rest.
        """
        if self.closing:
            return
        self.closing = True
        if self.consumer is None:
            self._drain()
            return
        self.ctx.send(self.consumer, Suspend())
        self.ctx.send(self.parts[Part.WORKERS], StopRunning())
        if not self.await_callbacks:
            # The running callbacks get CANCEL_GRACE_S: their jobs report the acks they made when they end.
            self.ctx.schedule(CANCEL_GRACE_S, GraceOver())
