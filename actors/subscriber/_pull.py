"""pull(): the single-batch synchronous pull of seed 003, as a short-lived actor per call.

A ``PullSession`` spawns a broker consumer whose credit is the batch size, answers
with what arrived within the timeout (or as soon as the batch is full), suspends the
consumer, and then forwards the caller's acks and nacks. Once everything is settled,
or ``settle_within_s`` passes, it stops: the queue takes back whatever was not acked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.actors.broker import Ack, ConsumerActor, ConsumerSettings, Delivery, Nack, Suspend
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, ConveyorError, TrioSystem, is_finite_number, quote

from ._protocol import ACK_IDS, Tick, ack_id_of, check_tuple, split_ack_id


@final
@attrs.frozen
class PullRequest:
    """Ask a session for its batch."""


@final
@attrs.frozen
class PulledBatch:
    """Up to ``max_messages`` deliveries; settle them with ``acknowledge`` / ``nack_pulled``."""

    session: ActorRef
    messages: tuple[Delivery, ...]

    def __attrs_post_init__(self) -> None:
        if type(self.session) is not ActorRef:
            msg = f"PulledBatch.session must be the ActorRef of a PullSession, got {quote(self.session)}"
            raise TypeError(msg)
        check_tuple("PulledBatch", "messages", self.messages, Delivery, "Delivery")

    @property
    def ack_ids(self) -> tuple[str, ...]:
        """The ack ids of the batch, in delivery order."""
        return tuple(ack_id_of(delivery) for delivery in self.messages)


@final
@attrs.frozen
class SettlePulled:
    """Ack (or nack) some of a pulled batch."""

    ack_ids: tuple[str, ...]
    nack: bool = False

    def __attrs_post_init__(self) -> None:
        check_tuple("SettlePulled", "ack_ids", self.ack_ids, str, ACK_IDS)
        if type(self.nack) is not bool:
            msg = f"SettlePulled.nack must be True or False, got {quote(self.nack)}"
            raise TypeError(msg)


@final
@attrs.frozen
class _GiveUp:
    """The session's deadline for settling."""


@final
class PullSession(Actor):
    """One pull: collect a batch, answer it, forward its settlements, then stop."""

    def __init__(self, queue: ActorRef, max_messages: int, timeout_s: float, settle_within_s: float) -> None:
        self.queue = queue
        self.max_messages = max_messages
        self.timeout_s = timeout_s
        self.settle_within_s = settle_within_s
        self.asker: ActorRef | None = None
        self.collected: list[Delivery] = []
        self.unsettled: set[str] = set()
        self.answered = False
        self.consumer: ActorRef | None = None

    def receive(self, message: Any) -> None:
        """Collect, answer, forward."""
        match message:
            case PullRequest() if self.asker is None:
                self.asker = self.ctx.sender
                settings = ConsumerSettings(prefetch_messages=self.max_messages)
                me = self.ctx.self_ref
                self.consumer = self.ctx.spawn(lambda: ConsumerActor(self.queue, me, settings), name="consumer")
                self.ctx.schedule(self.timeout_s, Tick())
            case Delivery() if not self.answered:
                self.collected.append(message)
                if len(self.collected) >= self.max_messages:
                    self._answer()
            case Delivery():
                # arrived after the answer: give it straight back
                assert self.consumer is not None
                self.ctx.send(self.consumer, Nack(message.consumer_id, (message.tag,), delay_s=0.0))
            case Tick() if not self.answered:
                self._answer()
            case SettlePulled(ack_ids=ack_ids, nack=nack):
                self._settle(ack_ids, nack)
            case _GiveUp():
                self.ctx.stop()

    def _answer(self) -> None:
        self.answered = True
        assert self.consumer is not None
        self.ctx.send(self.consumer, Suspend())
        batch = tuple(self.collected)
        self.unsettled = {ack_id_of(delivery) for delivery in batch}
        if self.asker is not None:
            self.ctx.send(self.asker, PulledBatch(self.ctx.self_ref, batch))
        if not batch:
            self.ctx.stop()
        else:
            self.ctx.schedule(self.settle_within_s, _GiveUp())

    def _settle(self, ack_ids: tuple[str, ...], nack: bool) -> None:
        assert self.consumer is not None
        tags_by_consumer: dict[int, list[int]] = {}
        for ack_id in ack_ids:
            if ack_id in self.unsettled:
                self.unsettled.discard(ack_id)
                consumer_id, tag = split_ack_id(ack_id)
                tags_by_consumer.setdefault(consumer_id, []).append(tag)
        for consumer_id, tags in tags_by_consumer.items():
            request = Nack(consumer_id, tuple(tags)) if nack else Ack(consumer_id, tuple(tags))
            self.ctx.send(self.consumer, request)
        if not self.unsettled:
            self.ctx.stop()  # the consumer stops with us once our settlements reach it first


def start_pull(
    system: ActorSystemBase, queue: ActorRef, max_messages: int = 100, timeout: float = 1.0,
    settle_within_s: float = 60.0,
) -> ActorRef:
    """Spawn a pull session; ask it ``PullRequest()`` for the ``PulledBatch``.

    ``system.ask(session, PullRequest(), timeout + 5)`` waits for it (awaited on trio, blocking on
    threads, run in the simulator); ``acknowledge`` settles the batch.

    Raises:
        ValueError: ``max_messages`` < 1 or ``timeout`` <= 0.
    """
    if type(max_messages) is not int or max_messages < 1:
        msg = f"pull() max_messages must be an int >= 1, got {quote(max_messages)}"
        raise ValueError(msg)
    if not is_finite_number(timeout) or not timeout > 0:
        msg = f"pull() timeout must be a finite number of seconds > 0, got {quote(timeout)}"
        raise ValueError(msg)
    return system.spawn(lambda: PullSession(queue, max_messages, float(timeout), settle_within_s))


def acknowledge(system: ActorSystemBase, batch: PulledBatch, ack_ids: tuple[str, ...] | None = None) -> None:
    """Ack the given ids of ``batch`` (all by default); thread-safe."""
    system.tell_from_thread(batch.session, SettlePulled(batch.ack_ids if ack_ids is None else tuple(ack_ids)))


def nack_pulled(system: ActorSystemBase, batch: PulledBatch, ack_ids: tuple[str, ...] | None = None) -> None:
    """Give the given ids of ``batch`` (all by default) back for redelivery; thread-safe."""
    ids = batch.ack_ids if ack_ids is None else tuple(ack_ids)
    system.tell_from_thread(batch.session, SettlePulled(ids, nack=True))


def pull(system: ActorSystemBase, queue: ActorRef, max_messages: int = 100, timeout: float = 1.0) -> PulledBatch:
    """The single-batch synchronous pull: up to ``max_messages`` within ``timeout`` seconds.

    Blocks on a ThreadSystem, runs the Simulation until answered; on a TrioSystem use
    ``await pull_async(...)``. Settle the batch with ``acknowledge`` / ``nack_pulled``.

    Raises:
        ConveyorError: on a TrioSystem.
        ValueError: ``max_messages`` < 1 or ``timeout`` <= 0.
    """
    if isinstance(system, TrioSystem):
        msg = "on a TrioSystem use `await pull_async(...)`"
        raise ConveyorError(msg)
    session = start_pull(system, queue, max_messages, timeout)
    ask: Callable[..., object] = getattr(system, "ask")  # noqa: B009 - ThreadSystem and Simulation ask synchronously
    batch = ask(session, PullRequest(), timeout + 5.0)
    assert isinstance(batch, PulledBatch)
    return batch


async def pull_async(system: TrioSystem, queue: ActorRef, max_messages: int = 100, timeout: float = 1.0) -> PulledBatch:
    """``pull`` on a TrioSystem."""
    session = start_pull(system, queue, max_messages, timeout)
    batch = await system.ask(session, PullRequest(), timeout + 5.0)
    assert isinstance(batch, PulledBatch)
    return batch
