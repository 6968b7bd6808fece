"""StreamingPullManager: wires the subscriber's components and routes between them (seed 003).

It is the client of one broker ``ConsumerActor`` (its child), whose credit is the
flow control's limits (the server honours them, as Pub/Sub's does); every delivery
fans out to the load controller, leaser and ordered-key handler; settlements from
user code come back here, go to the dispatcher, and release load and lease.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

from conveyor.actors.broker import Ack, AckResult, ConsumerActor, ConsumerSettings, Delivery, MatchAll, Selector
from conveyor.runtime import Actor, ActorRef

from ._components import Dispatcher, Heartbeater, Leaser, LoadController, OrderedKeyHandler, WorkerPool
from ._message import SubscriberMessage
from ._protocol import (
    AckResponse,
    AckWithResponse,
    CallbackEnded,
    Cancel,
    Done,
    Heartbeat,
    Received,
    Settle,
    SettleKind,
    ack_id_of,
    split_ack_id,
)
from ._settings import FlowControl


@final
class StreamingPullManager(Actor):
    """One subscription: a consumer of ``queue`` whose messages run ``callback`` on workers."""

    def __init__(
        self,
        queue: ActorRef,
        callback: Callable[[SubscriberMessage], object],
        flow: FlowControl | None = None,
        workers: int = 4,
        selector: Selector | None = None,
        heartbeat_s: float = 30.0,
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
        self.heartbeats = 0
        self.confirming: dict[int, tuple[ActorRef, str]] = {}  # tag -> (asker, ack id)
        self.consumer: ActorRef | None = None
        self.parts: dict[str, ActorRef] = {}

    def on_start(self) -> None:
        """Spawn the broker consumer and the components."""
        flow = self.flow
        settings = ConsumerSettings(
            prefetch_messages=flow.max_messages,
            prefetch_bytes=flow.max_bytes,
            selector=self.selector if self.selector is not None else MatchAll(),
        )
        me = self.ctx.self_ref
        consumer = self.ctx.spawn(lambda: ConsumerActor(self.queue, me, settings), name="consumer")
        self.consumer = consumer
        dispatcher = self.ctx.spawn(lambda: Dispatcher(consumer), name="dispatcher")
        workers = self.ctx.spawn(lambda: WorkerPool(me, self.callback, self.workers), name="workers")
        self.parts = {
            "dispatcher": dispatcher,
            "workers": workers,
            "load": self.ctx.spawn(lambda: LoadController(consumer, flow), name="load"),
            "leaser": self.ctx.spawn(lambda: Leaser(me, dispatcher, flow), name="leaser"),
            "keys": self.ctx.spawn(lambda: OrderedKeyHandler(me, workers), name="keys"),
            "heartbeat": self.ctx.spawn(lambda: Heartbeater(me, self.heartbeat_s), name="heartbeat"),
        }

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
            if message.ack_id not in self.pending:
                return  # settled before, or dropped: the first decision stands
            if message.kind is not SettleKind.MODACK:
                del self.pending[message.ack_id]
                done = Done(message.ack_id)
                self.ctx.send(parts["load"], done)
                self.ctx.send(parts["leaser"], done)
            self.ctx.send(parts["dispatcher"], message)
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

    def _ack_with_response(self, ack_id: str) -> None:
        asker = self.ctx.sender
        if ack_id not in self.pending or self.consumer is None:
            if asker is not None:
                self.ctx.reply(AckResponse(ack_id, False))  # settled or dropped before
            return
        del self.pending[ack_id]
        done = Done(ack_id)
        self.ctx.send(self.parts["load"], done)
        self.ctx.send(self.parts["leaser"], done)
        consumer_id, tag = split_ack_id(ack_id)
        if asker is not None:
            self.confirming[tag] = (asker, ack_id)
        self.ctx.send(self.consumer, Ack(consumer_id, (tag,), confirm=True))

    def _cancel(self) -> None:
        """Send what is batched, then stop: the queue takes back everything not acked."""
        self.ctx.send(self.parts["dispatcher"], "flush")
        self.ctx.stop()
