"""The benchmarks' acking client and its count question, in a module that imports only the broker.

The storage benchmark runs conveyor's side in a child process of its own (``_throughput_child``),
which must not import what ``broker.py`` does (the simulator and, through it, every client library).
"""

from __future__ import annotations

import attrs

from conveyor.actors.broker import Ack, Delivery
from conveyor.runtime import Actor, ActorRef

FLUSH_S = 0.002
"""The batch-acking client acks whatever is pending after this long."""


@attrs.frozen
class GetCount:
    """Asks an acking client for the deliveries it acked, or the confirming publisher for its confirms."""


@attrs.frozen
class _Flush:
    """The batch-acking client's timer: ack what is pending."""


class BatchAckingClient(Actor):
    """Acks deliveries ``every`` at a time with one ``Ack(tags)`` (RabbitMQ's multiple ack), and
    whatever is left after ``FLUSH_S``, so a tail shorter than a batch is not held forever."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.count = 0
        self.pending: list[int] = []
        self.consumer_id = 0
        self.consumer: ActorRef | None = None
        self.timer_armed = False

    def receive(self, message: object) -> None:
        if type(message) is Delivery:
            self.count += 1
            self.consumer = self.ctx.sender
            self.consumer_id = message.consumer_id
            self.pending.append(message.tag)
            if len(self.pending) >= self.every:
                self._flush()
            elif not self.timer_armed:
                self.timer_armed = True
                self.ctx.schedule(FLUSH_S, _Flush())
        elif type(message) is _Flush:
            self.timer_armed = False
            self._flush()
        elif type(message) is GetCount:
            self.ctx.reply(self.count)

    def _flush(self) -> None:
        if self.pending and self.consumer is not None:
            self.ctx.send(self.consumer, Ack(self.consumer_id, tuple(self.pending)))
            self.pending = []
