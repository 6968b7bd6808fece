"""Test clients for the broker behaviour suite: actors that record deliveries and answer them by policy.

A ``Client`` stands where a real application would: its ``ConsumerActor`` hands it each
``Delivery``; it records the delivery with the time it arrived, then answers with an
``Ack``, ``Nack``, ``Release`` or ``ModifyAckDeadline`` (or nothing) as its policy says,
one action for a first delivery and one for redeliveries. A test can also make it send
any settlement by hand (``Send``) and ask what it saw (``GetSeen``, ``GetAckResults``).
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from conveyor.actors.broker import (
    Ack,
    AckResult,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    ModifyAckDeadline,
    Nack,
    Release,
)
from conveyor.runtime import Actor, ActorRef
from tests.conftest import Harness


class Action(enum.Enum):
    """What a client does with a delivery."""

    ACK = "ack"
    NACK = "nack"
    RELEASE = "release"
    MODIFY_ZERO = "modify-ack-deadline-0"
    EXTEND = "extend"  # ModifyAckDeadline(extend_s), and keep holding
    IGNORE = "ignore"  # hold it, never answer


@attrs.frozen
class Seen:
    """One delivery as a client received it, and when (the system's clock)."""

    delivery: Delivery
    at: float

    @property
    def body(self) -> bytes:
        return self.delivery.message.body

    @property
    def count(self) -> int:
        return self.delivery.delivery_count


@attrs.frozen
class GetSeen:
    """Ask a client for the tuple of ``Seen`` it recorded, in arrival order."""


@attrs.frozen
class GetAckResults:
    """Ask a client for the tuple of ``AckResult`` its consumer passed on."""


@attrs.frozen
class Send:
    """Make a client send ``request`` to its consumer; answered ``"sent"``."""

    request: Ack | Nack | Release | ModifyAckDeadline


class Client(Actor):
    """Records deliveries and answers them: ``first`` for a first delivery, ``then`` for redeliveries."""

    def __init__(self, first: Action = Action.ACK, then: Action | None = None, extend_s: float = 1.0) -> None:
        self.first = first
        self.then = first if then is None else then
        self.extend_s = extend_s
        self.seen: list[Seen] = []
        self.results: list[AckResult] = []
        self.consumer: ActorRef | None = None

    def receive(self, message: Any) -> None:
        match message:
            case Delivery():
                self.consumer = self.ctx.sender
                self.seen.append(Seen(message, self.ctx.now()))
                self._answer(message)
            case AckResult():
                self.results.append(message)
            case GetSeen():
                self.ctx.reply(tuple(self.seen))
            case GetAckResults():
                self.ctx.reply(tuple(self.results))
            case Send(request=request):
                assert self.consumer is not None, "Send before any delivery: the client knows no consumer"
                self.ctx.send(self.consumer, request)
                self.ctx.reply("sent")

    def _answer(self, delivery: Delivery) -> None:
        action = self.first if delivery.delivery_count <= 1 else self.then
        tags = (delivery.tag,)
        consumer_id = delivery.consumer_id
        request: Ack | Nack | Release | ModifyAckDeadline
        match action:
            case Action.ACK:
                request = Ack(consumer_id, tags)
            case Action.NACK:
                request = Nack(consumer_id, tags)
            case Action.RELEASE:
                request = Release(consumer_id, tags)
            case Action.MODIFY_ZERO:
                request = ModifyAckDeadline(consumer_id, tags, 0)
            case Action.EXTEND:
                request = ModifyAckDeadline(consumer_id, tags, self.extend_s)
            case Action.IGNORE:
                return
        self.ctx.reply(request)


def consume(
    backend: Harness,
    queue: ActorRef,
    first: Action = Action.ACK,
    then: Action | None = None,
    *,
    settings: ConsumerSettings | None = None,
    extend_s: float = 1.0,
    name: str | None = None,
) -> tuple[ActorRef, ActorRef]:
    """Spawn a ``Client`` and a ``ConsumerActor`` feeding it; returns (client, consumer).

    The consumer subscribes when it starts: ``await backend.quiet()`` before relying on it.
    """
    client = backend.spawn(lambda: Client(first, then, extend_s), name=None if name is None else f"{name}-client")
    consumer = backend.spawn(lambda: ConsumerActor(queue, client, settings), name=name)
    return client, consumer


async def seen(backend: Harness, client: ActorRef) -> tuple[Seen, ...]:
    """What ``client`` received so far (call after ``backend.quiet()``)."""
    result: tuple[Seen, ...] = await backend.ask(client, GetSeen())
    return result


async def received(backend: Harness, client: ActorRef) -> list[tuple[bytes, int]]:
    """(body, delivery_count) of every delivery ``client`` received, in arrival order."""
    return [(s.body, s.count) for s in await seen(backend, client)]
