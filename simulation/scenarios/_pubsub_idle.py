"""A client of the Pub/Sub front that opens a stream and then says nothing for about an hour.

A stream whose client asks for no batch for ``IDLE_STREAM_S`` (an hour) has lost its client: the
binding ends it (and goes), so that a dead client does not keep its subscription from expiring for
ever. ``IdleStreamer`` waits for the runner's ``StartIdle`` (sent once every other client has
stopped, so it takes nothing from them and the hour of virtual time costs only its own timers),
opens a stream, takes one batch (or, half the time, none), and asks for the next ``idle_s`` later,
just under or just over the hour (the binding arms its idle timer when it starts and again after
each answer: both are tried). It
notes ``IdleStreamOpened`` when its silence starts, then ``IdleStreamEnded`` (served, or closed and
when), which ``idle_stream`` judges. Drawn last in ``pubsub-front``, from a generator of its own.
"""

from __future__ import annotations

from typing import Any, Final, final

import attrs

from conveyor.actors.pubsub import (
    IDLE_STREAM_S,
    Batch,
    Detach,
    Failed,
    NextBatch,
    OpenStream,
    Settle,
    SettleKind,
    StreamClosed,
    StreamOpened,
    StreamSettings,
)
from conveyor.runtime import Actor, ActorRef, Terminated
from conveyor.simulation import seeded_random
from conveyor.simulation.checkers import BatchReceived, IdleStreamEnded, IdleStreamOpened, SettleSent

MARGIN_S: Final = (1.0, 300.0)
"""How far from the hour an idle period is drawn (never at it: the timer and the ask would tie)."""


def draw_idle(seed: int) -> tuple[float, bool] | None:
    """A ``pubsub-front`` run's idle streamer (in 30% of runs): its silence, half under and half over the hour, and
    whether it takes a batch first (half the time: the binding arms its timer when it starts and after each answer)."""
    rng = seeded_random(f"pubsub-scenario:front:{seed}:idle")
    if rng.random() >= 0.3:
        return None
    side = 1.0 if rng.random() < 0.5 else -1.0
    return round(IDLE_STREAM_S + side * rng.uniform(*MARGIN_S), 3), rng.random() < 0.5


@final
@attrs.frozen
class StartIdle:
    """Runner -> idle streamer: the other clients have stopped; open the stream now."""


@final
@attrs.frozen
class _Ask:
    """Idle streamer's timer: the idle period is over; ask for a batch."""


@final
class IdleStreamer(Actor):
    """Opens a stream on ``subscription`` when told, asks for nothing for ``idle_s`` (after a first batch if
    ``asks_first``), then asks once; notes the answer."""

    def __init__(self, registry: ActorRef, subscription: str, idle_s: float, wait_s: float,
                 asks_first: bool = True) -> None:
        self.registry = registry
        self.asks_first = asks_first
        self.subscription = subscription
        self.idle_s = idle_s
        self.wait_s = wait_s
        self.binding: ActorRef | None = None
        self.asked = False  # its first batch came: it is silent now
        self.ended = False

    def receive(self, message: Any) -> None:
        """Open, take one batch, say nothing, ask; a close or the binding's end before the answer is what it notes."""
        cls = type(message)
        if cls is StartIdle:
            self.ctx.send(self.registry, OpenStream(StreamSettings(self.subscription, 0, 1, 0)))
        elif cls is StreamOpened:
            self.binding = message.binding
            self.ctx.watch(message.binding)
            if self.asks_first:
                self.ctx.send(message.binding, NextBatch(self.wait_s))
            else:  # silent from the start
                self._silence()
        elif cls is Failed:
            self.ctx.stop()  # no stream to judge (the subscription is gone)
        elif cls is _Ask:
            if self.binding is not None and not self.ended:
                self.ctx.send(self.binding, NextBatch(self.wait_s))
        elif cls is Batch:
            self._ack(message)
            if not self.asked:  # the first answer: the silence starts now
                self._silence()
                return
            self._end(served=True)
            if self.binding is not None:
                self.ctx.send(self.binding, Detach())
        elif (cls is StreamClosed or (cls is Terminated and message.ref == self.binding)) and self.asked:
            self._end(served=False)

    def _silence(self) -> None:
        self.asked = True
        binding = self.binding.path if self.binding is not None else "?"
        self.ctx.note(IdleStreamOpened(self.subscription, binding, self.idle_s))
        self.ctx.schedule(self.idle_s, _Ask())

    def _ack(self, batch: Batch) -> None:
        """Ack what a batch carried (nothing, mostly: the others have drained the subscription)."""
        if not batch.received:
            return
        sender = self.ctx.sender
        self.ctx.note(BatchReceived(self.subscription, sender.path if sender is not None else "?", batch.received))
        ids = tuple(ack_id for ack_id, _, _ in batch.received)
        self.ctx.note(SettleSent(self.subscription, SettleKind.ACK, 0, ids))
        self.ctx.send(self.registry, Settle(self.subscription, SettleKind.ACK, ids))

    def _end(self, served: bool) -> None:
        if self.ended:
            return
        self.ended = True
        self.ctx.note(IdleStreamEnded(self.subscription, served))
        if self.binding is not None:
            self.ctx.unwatch(self.binding)
