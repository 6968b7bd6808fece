"""``PubSubConsumer`` against a fake transport: how deliveries, acks, nacks and deadline changes become calls.

No server here: the fake records each settlement job and answers it when the test says so, so
the batching and the answers to the manager can be checked exactly. (The system is never quiet
while the stream job runs, so the tests wait for what they expect, each wait bounded.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conveyor.actors.broker import Ack, AckResult, ConsumerSettings, Delivery, Message, ModifyAckDeadline, Nack
from conveyor.actors.pubsub import PubSubConsumer, StreamHandle
from conveyor.actors.pubsub import _transport as transport_module
from conveyor.actors.pubsub._transport import Received, Settlements
from conveyor.runtime import Actor, ActorRef, ThreadSystem

SUBSCRIPTION = "projects/p/subscriptions/s"


CHANGED = threading.Condition()  # notified whenever the fake or the recorder records something


def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    with CHANGED:
        assert CHANGED.wait_for(predicate, timeout), "timed out"


class FakeTransport:
    """Stands in for ``PubSubTransport``: the stream is the test's; a settlement blocks while ``blocking``."""

    def __init__(self) -> None:
        self.deliver: Callable[[object], None] | None = None
        self.opened = threading.Event()
        self.sent: list[Settlements] = []
        self.refuse: frozenset[str] = frozenset()
        self.gate = threading.Event()  # set: settlements answer at once
        self.gate.set()
        self.idle = threading.Event()  # never set: the stream's wait between checks

    def stream(self, subscription: str, settings: ConsumerSettings, deadline_s: int, alive: Callable[[], bool],
               deliver: Callable[[object], None], handle: StreamHandle | None = None) -> str:
        self.deliver = deliver
        self.opened.set()
        try:
            while alive() and not (handle is not None and handle.closing):
                self.idle.wait(0.05)  # a job thread, standing in for the blocking stream
        finally:
            if handle is not None:
                handle.ended.set()
        return "stream ended"

    def close_then_settle(self, subscription: str, settlements: Settlements, stream: StreamHandle | None,
                          ) -> frozenset[str]:
        if stream is not None:
            stream.close()
        return self.settle(subscription, settlements) if not settlements.empty else frozenset()

    def settle(self, subscription: str, settlements: Settlements) -> frozenset[str]:
        with CHANGED:
            self.sent.append(settlements)
            CHANGED.notify_all()
        assert self.gate.wait(10)
        return self.refuse & frozenset(settlements.acks)


class Recorder(Actor):
    """The manager's place: keeps what the consumer tells it."""

    def __init__(self, got: list[object]) -> None:
        self.got = got

    def receive(self, message: Any) -> None:
        with CHANGED:
            self.got.append(message)
            CHANGED.notify_all()


@pytest.fixture
def system() -> Iterator[ThreadSystem]:
    with ThreadSystem() as system:
        yield system


def start(system: ThreadSystem, transport: FakeTransport) -> tuple[ActorRef, list[object]]:
    got: list[object] = []
    manager = system.spawn(lambda: Recorder(got))
    consumer = system.spawn(lambda: PubSubConsumer(transport, SUBSCRIPTION, manager, ConsumerSettings()))  # type: ignore[arg-type]
    assert transport.opened.wait(5)
    return consumer, got


def receive(transport: FakeTransport, *items: tuple[str, str, int]) -> None:
    """The stream brings (ack id, message id, attempt) for each item."""
    assert transport.deliver is not None
    transport.deliver(Received(tuple((ack_id, Message(b"x", message_id=message_id), attempt)
                                     for ack_id, message_id, attempt in items)))


def deliveries(got: list[object]) -> list[tuple[int, str, int]]:
    return [(m.tag, m.message.message_id, m.delivery_count) for m in got if isinstance(m, Delivery)]


def results(got: list[object]) -> list[AckResult]:
    return [m for m in got if isinstance(m, AckResult)]


def test_a_redelivered_message_keeps_its_tag_and_the_newest_ack_id_is_used(system: ThreadSystem) -> None:
    transport = FakeTransport()
    consumer, got = start(system, transport)
    receive(transport, ("a1", "m1", 1), ("b1", "m2", 1))
    until(lambda: len(deliveries(got)) == 2)
    assert deliveries(got) == [(1, "m1", 1), (2, "m2", 1)]
    consumer.tell(Nack(1, (1,)))
    until(lambda: len(transport.sent) == 1)
    receive(transport, ("a2", "m1", 2))
    until(lambda: len(deliveries(got)) == 3)
    consumer.tell(Ack(1, (1, 2), confirm=True))
    until(lambda: bool(results(got)))
    assert deliveries(got)[-1] == (1, "m1", 2)
    assert transport.sent == [Settlements(modacks=((0, ("a1",)),)), Settlements(acks=("a2", "b1"))]
    assert results(got) == [AckResult((1, 2), ())]


def test_a_nack_names_its_delivery_and_a_stale_one_returns_nothing(system: ThreadSystem) -> None:
    """Without a dead-letter policy the server sends no attempt (0): the consumer counts deliveries itself."""
    transport = FakeTransport()
    consumer, got = start(system, transport)
    receive(transport, ("a1", "m1", 0))
    receive(transport, ("a2", "m1", 0))  # the lease lapsed and the server sent it again
    until(lambda: len(deliveries(got)) == 2)
    assert deliveries(got) == [(1, "m1", 1), (1, "m1", 2)]
    consumer.tell(Nack(1, (1,), attempts=(1,)))  # the manager's nack of the first delivery, late
    consumer.tell(Ack(1, (1,), confirm=True))
    until(lambda: bool(results(got)))
    assert transport.sent == [Settlements(acks=("a2",))]  # nothing nacked the delivery the ack is for
    assert results(got) == [AckResult((1,), ())]
    receive(transport, ("b1", "m2", 3))  # with a dead-letter policy, the server's count
    until(lambda: len(deliveries(got)) == 3)
    assert deliveries(got)[-1] == (2, "m2", 3)
    consumer.tell(Nack(1, (2,), attempts=(3,)))
    until(lambda: len(transport.sent) == 2)
    assert transport.sent[-1] == Settlements(modacks=((0, ("b1",)),))


def test_two_settlement_jobs_at_a_time_and_the_rest_gathers_behind_them(system: ThreadSystem) -> None:
    transport = FakeTransport()
    consumer, got = start(system, transport)
    receive(transport, *((f"a{n}", f"m{n}", 1) for n in range(1, 6)))
    until(lambda: len(deliveries(got)) == 5)
    transport.gate.clear()
    consumer.tell(Ack(1, (1,), confirm=True))
    until(lambda: len(transport.sent) == 1)  # the first call is out, and waits
    consumer.tell(Ack(1, (2,), confirm=True))
    until(lambda: len(transport.sent) == 2)  # a second call goes out beside it (SETTLE_CALLS)
    consumer.tell(Ack(1, (3,), confirm=True))
    consumer.tell(ModifyAckDeadline(1, (4,), 30.0))
    consumer.tell(Ack(1, (4,)))
    receive(transport, ("a6", "m6", 1))  # delivered only once the consumer has handled the four above
    until(lambda: len(deliveries(got)) == 6)
    assert len(transport.sent) == 2, "two calls out: the rest gathers for the next"
    transport.gate.set()
    until(lambda: len(results(got)) == 3)
    assert transport_module.SETTLE_CALLS == 2
    assert transport.sent == [Settlements(acks=("a1",)), Settlements(acks=("a2",)),
                              Settlements(acks=("a3", "a4"), modacks=((30, ("a4",)),))]
    assert results(got) == [AckResult((1,), ()), AckResult((2,), ()), AckResult((3,), ())]


class OrderedGates(FakeTransport):
    """A settlement call waits for its own gate (the n-th call for ``gates[n]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.gates = [threading.Event() for _ in range(4)]

    def settle(self, subscription: str, settlements: Settlements) -> frozenset[str]:
        with CHANGED:
            self.sent.append(settlements)
            number = len(self.sent) - 1
            CHANGED.notify_all()
        assert self.gates[number].wait(10)
        return self.refuse & frozenset(settlements.acks)


def test_answers_keep_the_order_the_calls_went_out_in_when_a_later_call_ends_first(system: ThreadSystem) -> None:
    transport = OrderedGates()
    transport.refuse = frozenset({"a2"})
    consumer, got = start(system, transport)
    receive(transport, *((f"a{n}", f"m{n}", 1) for n in range(1, 4)))
    until(lambda: len(deliveries(got)) == 3)
    consumer.tell(Ack(1, (1,), confirm=True))
    until(lambda: len(transport.sent) == 1)
    consumer.tell(Ack(1, (2,), confirm=True))
    until(lambda: len(transport.sent) == 2)
    consumer.tell(Ack(1, (1,), confirm=True))  # again: its tag is settled already, nothing to send
    transport.gates[1].set()  # the second call ends first
    with CHANGED:
        assert not CHANGED.wait_for(lambda: results(got), 0.3), "no answer before the first call's"
    transport.gates[0].set()
    until(lambda: len(results(got)) == 3)
    assert results(got) == [AckResult((1,), ()), AckResult((), (2,)), AckResult((), (1,))], (
        "in the order asked: the first call's ack, the second's refused one, the repeat (its tag gone)")


def test_a_refused_ack_is_reported_and_its_message_keeps_its_tag(system: ThreadSystem) -> None:
    transport = FakeTransport()
    transport.refuse = frozenset({"a1"})
    consumer, got = start(system, transport)
    receive(transport, ("a1", "m1", 1), ("b1", "m2", 1))
    until(lambda: len(deliveries(got)) == 2)
    consumer.tell(Ack(1, (1, 2), confirm=True))
    until(lambda: bool(results(got)))
    assert results(got) == [AckResult((2,), (1,))]
    receive(transport, ("a2", "m1", 2), ("b2", "m2", 2))  # m2's ack took: a new message to the manager
    until(lambda: len(deliveries(got)) == 4)
    assert deliveries(got)[-2:] == [(1, "m1", 2), (3, "m2", 2)]
    consumer.tell(Ack(1, (5,), confirm=True))  # a tag never delivered
    until(lambda: len(results(got)) == 2)
    assert results(got)[-1] == AckResult((), (5,))


def test_stopping_gives_back_every_unsettled_message(system: ThreadSystem) -> None:
    transport = FakeTransport()
    consumer, got = start(system, transport)
    receive(transport, ("a1", "m1", 1), ("b1", "m2", 1), ("c1", "m3", 1))
    until(lambda: len(deliveries(got)) == 3)
    consumer.tell(Ack(1, (2,), confirm=True))
    until(lambda: bool(results(got)))
    system.stop(consumer)
    until(lambda: len(transport.sent) == 2)
    assert transport.sent == [Settlements(acks=("b1",)), Settlements(modacks=((0, ("a1", "c1")),))]


def test_only_the_newest_given_back_messages_keep_their_tags(system: ThreadSystem,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport_module, "RELEASED_MEMORY", 2)
    transport = FakeTransport()
    consumer, got = start(system, transport)
    receive(transport, ("a1", "m1", 1), ("b1", "m2", 1), ("c1", "m3", 1))
    until(lambda: len(deliveries(got)) == 3)
    consumer.tell(Nack(1, (1, 2, 3)))
    receive(transport, ("a2", "m1", 2), ("c2", "m3", 2))  # m1 was forgotten (a dead letter, say)
    until(lambda: len(deliveries(got)) == 5)
    assert deliveries(got)[-2:] == [(4, "m1", 2), (3, "m3", 2)]
