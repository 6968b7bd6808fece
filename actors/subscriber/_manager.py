"""StreamingPullManager: wires the subscriber's components and routes between them (seed 003).

It is the client of one broker ``ConsumerActor`` (its child), whose credit is the
flow control's limits (the server honours them, as Pub/Sub's does); every delivery
fans out to the load controller, leaser and ordered-key handler; settlements from
user code come back here, go to the dispatcher, and release load and lease.
"""

from __future__ import annotations

from collections.abc import Callable
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
from conveyor.runtime import Actor, ActorRef

from ._batching import Flush
from ._components import Dispatcher, Heartbeater, Leaser, LoadController, OrderedKeyHandler, WorkerPool, broker_requests
from ._message import SubscriberMessage
from ._protocol import (
    AckResponse,
    AckWithResponse,
    CallbackEnded,
    Cancel,
    Done,
    Drain,
    Drained,
    Heartbeat,
    Idle,
    Received,
    Settle,
    SettleKind,
    StopRunning,
    ack_id_of,
    split_ack_id,
)
from ._settings import FlowControl


class StreamingPullManager(Actor):
    """One subscription: a consumer of ``queue`` whose messages run ``callback`` on workers.

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
    ) -> None:
        if not callable(callback):
            msg = f"subscribe() callback must be callable, got {type(callback).__qualname__}"
            raise TypeError(msg)
        if type(workers) is not int or workers < 1:
            msg = f"subscribe() workers must be an int >= 1, got {workers!r}"
            raise ValueError(msg)
        self.queue = queue
        self.callback = callback
        self.flow = flow or FlowControl()
        self.workers = workers
        self.selector = selector
        self.heartbeat_s = heartbeat_s
        self.pending: dict[str, None] = {}  # received, not yet settled or dropped
        self.expired: set[str] = set()  # pending, but leased max_lease_duration_s: released, not extended
        self.heartbeats = 0
        self.confirming: dict[int, tuple[ActorRef, str]] = {}  # tag -> (asker, ack id)
        self.consumer: ActorRef | None = None
        self.parts: dict[str, ActorRef] = {}
        self.closing = False
        self.await_callbacks = await_callbacks_on_shutdown

    def on_start(self) -> None:
        """Spawn the broker consumer and the components."""
        flow = self.flow
        settings = ConsumerSettings(
            prefetch_messages=flow.max_messages,
            prefetch_bytes=flow.max_bytes,
            selector=self.selector if self.selector is not None else MatchAll(),
        )
        me = self.ctx.self_ref
        consumer = self.make_part("consumer", ConsumerActor, self.queue, me, settings)
        self.consumer = consumer
        dispatcher = self.make_part("dispatcher", Dispatcher, me)
        workers = self.make_part("workers", WorkerPool, me, self.callback, self.workers)
        self.parts = {
            "dispatcher": dispatcher,
            "workers": workers,
            "load": self.make_part("load", LoadController, consumer, flow),
            # The leaser's extensions come through here, not straight to the dispatcher: then they
            # share one channel with the settlements and a late one for a message already nacked
            # or acked is dropped here, instead of superseding the nack in the dispatcher's batch.
            "leaser": self.make_part("leaser", Leaser, me, me, flow),
            "keys": self.make_part("keys", OrderedKeyHandler, me, workers),
            "heartbeat": self.make_part("heartbeat", Heartbeater, me, self.heartbeat_s),
        }

    def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
        """Spawn the child ``name`` as ``factory(*args)``: the one place a subclass may swap a component.

        The simulation's planted bugs override it to run a broken component inside a real subscription.
        """
        return self.ctx.spawn(lambda: factory(*args), name=name)

    def receive(self, message: Any) -> None:
        """Route one event."""
        parts = self.parts
        if type(message) is Delivery:
            ack_id = ack_id_of(message)
            if ack_id in self.pending:
                # Redelivered (its lease lapsed) while its callback still runs: that run settles it.
                return
            self.pending[ack_id] = None
            received = Received(ack_id, message.message.size, message.message.group, message)
            self.ctx.send(parts["load"], received)
            self.ctx.send(parts["leaser"], received)
            self.ctx.send(parts["keys"], received)
        elif type(message) is Settle:
            ack_id = message.ack_id
            if ack_id not in self.pending:
                return  # settled before, or dropped: the first decision stands
            if message.kind is SettleKind.MODACK and message.seconds == 0:
                message = Settle(SettleKind.NACK, ack_id)  # Pub/Sub's nack: a zero deadline
            if message.kind is SettleKind.DROP and self.ctx.sender == parts["leaser"]:
                self._expire(ack_id)
                return
            if message.kind is not SettleKind.MODACK:
                del self.pending[ack_id]
                if ack_id in self.expired:
                    self.expired.discard(ack_id)  # load and leaser forgot it already
                else:
                    done = Done(ack_id, acked=message.kind is SettleKind.ACK)
                    self.ctx.send(parts["load"], done)
                    self.ctx.send(parts["leaser"], done)
            self.ctx.send(parts["dispatcher"], message)
        elif type(message) is Flush:
            # Every settlement reaches the consumer from here, so a final stop queues behind them.
            if self.consumer is not None:
                for request in broker_requests(message):
                    self.ctx.send(self.consumer, request)
        elif type(message) is Drained:
            if self.closing:
                self.ctx.stop()
        elif type(message) is Idle:
            if self.closing:
                self.ctx.send(self.parts["dispatcher"], Drain())  # every running callback has settled
        elif type(message) is CallbackEnded:
            self.ctx.send(parts["keys"], message)
        elif type(message) is Heartbeat:
            self.heartbeats += 1
        elif type(message) is Cancel:
            self._cancel()
        elif type(message) is AckWithResponse:
            self._ack_with_response(message.ack_id)
        elif type(message) is AckResult:
            for tags, success in ((message.acked, True), (message.invalid, False)):
                for tag in tags:
                    asker = self.confirming.pop(tag, None)
                    if asker is not None:
                        self.ctx.send(asker[0], AckResponse(asker[1], success))
        elif message == "stats":
            self.ctx.reply((len(self.pending), self.heartbeats))

    def _expire(self, ack_id: str) -> None:
        """The leaser gave up on a lease held ``max_lease_duration_s``: stop counting it, not settling it.

        Flow control and the leaser forget it (the queue will let the lease lapse and redeliver),
        but it stays pending: its callback's own ack or nack still goes to the queue, which takes
        it if the lease still holds, and either way the broker consumer's credit comes back.
        A redelivery meanwhile is ignored, as for any pending message.
        """
        if ack_id in self.expired:
            return
        self.expired.add(ack_id)
        done = Done(ack_id)
        self.ctx.send(self.parts["load"], done)
        self.ctx.send(self.parts["leaser"], done)

    def _ack_with_response(self, ack_id: str) -> None:
        asker = self.ctx.sender
        if ack_id not in self.pending or self.consumer is None:
            if asker is not None:
                self.ctx.reply(AckResponse(ack_id, False))  # settled or dropped before
            return
        del self.pending[ack_id]
        if ack_id in self.expired:
            self.expired.discard(ack_id)
        else:
            done = Done(ack_id)
            self.ctx.send(self.parts["load"], done)
            self.ctx.send(self.parts["leaser"], done)
        consumer_id, tag = split_ack_id(ack_id)
        if asker is not None:
            self.confirming[tag] = (asker, ack_id)
        self.ctx.send(self.consumer, Ack(consumer_id, (tag,), confirm=True))

    def _cancel(self) -> None:
        """Stop: the queue takes back whatever is not acked.

        With ``await_callbacks_on_shutdown``, first take no more work, send back what never started,
        and let the running callbacks end (their settlements go out); otherwise stop at once, and the
        running callbacks' messages go back to the queue like the rest.
        """
        if self.closing:
            return
        self.closing = True
        if self.await_callbacks and self.consumer is not None:
            self.ctx.send(self.consumer, Suspend())
            self.ctx.send(self.parts["workers"], StopRunning())
        else:
            self.ctx.send(self.parts["dispatcher"], Drain())
