"""The broker's hot-path shortcuts keep its promises: coalesced acks and skipped wake-ups.

``ConsumerActor`` forwards a client's plain acks as one ``Ack(tags)`` per pass over its
mailbox, and ``QueueActor`` skips a ``WorkAvailable`` that could notify nobody. These
tests pin what must not change because of it (every settlement reaches the queue, in the
client's order; nothing is left waiting), on every backend, and on trio, whose dispatcher
order is fixed, that the shortcuts actually happen. No test reads a clock.
"""

from __future__ import annotations

import pytest

from conveyor.actors.broker import (
    Ack,
    ConsumerSettings,
    Delivery,
    GetStats,
    MatchAll,
    Message,
    Nack,
    Publish,
    QueueActor,
    QueueConfig,
    QueueStats,
)
from conveyor.actors.broker._entries import EntryList
from conveyor.actors.broker._manager_protocol import WorkAvailable
from conveyor.runtime import ActorRef, EventKind, TraceEvent
from conveyor.runtime._immutability import ensure_immutable
from tests.actors.broker.clients import Action, consume, received, seen
from tests.conftest import Harness


def _queue(backend: Harness, name: str = "q") -> ActorRef:
    config = QueueConfig(name)
    return backend.spawn(lambda: QueueActor(config), name=name)


async def _stats(backend: Harness, queue: ActorRef) -> QueueStats:
    await backend.quiet()
    result: QueueStats = await backend.ask(queue, GetStats())
    return result


def _settlements_at(trace: list[TraceEvent], receiver: str, since: int = 0) -> list[tuple[str, tuple[int, ...]]]:
    """(kind, tags) of every Ack / Nack the actor at ``receiver`` handled, in its order."""
    found = []
    for event in trace[since:]:
        if event.kind is EventKind.DELIVERED and event.receiver == receiver and type(event.message) in (Ack, Nack):
            found.append((type(event.message).__name__, event.message.tags))
    return found


async def _held(backend: Harness, count: int, prefetch: int) -> tuple[ActorRef, ActorRef, ActorRef, list[Delivery]]:
    """A queue, and a client that holds ``count`` deliveries without answering; (queue, client, consumer, them)."""
    queue = _queue(backend)
    client, consumer = consume(backend, queue, Action.IGNORE, settings=ConsumerSettings(prefetch_messages=prefetch))
    await backend.quiet()
    for n in range(count):
        queue.tell(Publish(Message(str(n).encode())))
    await backend.quiet()
    deliveries = [s.delivery for s in await seen(backend, client)]
    assert len(deliveries) == count
    return queue, client, consumer, deliveries


async def test_acks_told_together_reach_the_queue_in_order_and_coalesce_on_trio(backend: Harness) -> None:
    queue, _, consumer, deliveries = await _held(backend, 5, prefetch=10)
    mark = len(backend.trace)
    for delivery in deliveries:  # one sender, so the consumer sees them in this order on every backend
        consumer.tell(Ack(delivery.consumer_id, (delivery.tag,)))
    result = await _stats(backend, queue)
    assert (result.acked, result.in_flight, result.depth) == (5, 0, 0)
    settlements = _settlements_at(backend.trace, "/q", mark)
    assert [tag for _, tags in settlements for tag in tags] == [d.tag for d in deliveries]
    assert {kind for kind, _ in settlements} == {"Ack"}
    if backend.name == "trio":  # all five wait in the consumer's mailbox before it runs
        assert len(settlements) == 1


async def test_a_nack_between_acks_reaches_the_queue_between_them(backend: Harness) -> None:
    queue, client, consumer, deliveries = await _held(backend, 4, prefetch=4)
    mark = len(backend.trace)
    first, second, third, fourth = deliveries
    consumer.tell(Ack(first.consumer_id, (first.tag,)))
    consumer.tell(Ack(second.consumer_id, (second.tag,)))
    consumer.tell(Nack(third.consumer_id, (third.tag,)))
    consumer.tell(Ack(fourth.consumer_id, (fourth.tag,)))
    result = await _stats(backend, queue)
    assert (result.acked, result.redelivered) == (3, 1)
    flat = [(kind, tag) for kind, tags in _settlements_at(backend.trace, "/q", mark) for tag in tags]
    assert flat == [("Ack", first.tag), ("Ack", second.tag), ("Nack", third.tag), ("Ack", fourth.tag)]
    assert (await received(backend, client))[-1] == (b"2", 2)  # the nacked one came back


async def test_acks_still_coalescing_when_the_consumer_stops_reach_the_queue(backend: Harness) -> None:
    # Credit is left (3 of 4 held) and nothing more is published, so the first ack sends no
    # SetInterest or Pull that would carry it along: it waits for the consumer's note to itself,
    # and the Stop told right behind it comes first on trio.
    queue, _, consumer, deliveries = await _held(backend, 3, prefetch=4)
    consumer.tell(Ack(deliveries[0].consumer_id, (deliveries[0].tag,)))
    backend.system.stop(consumer)
    result = await _stats(backend, queue)
    assert (result.acked, result.depth, result.in_flight, result.consumers) == (1, 2, 0, ())


async def test_a_confirmed_ack_is_answered_after_the_acks_before_it(backend: Harness) -> None:
    queue, _, consumer, deliveries = await _held(backend, 3, prefetch=10)
    mark = len(backend.trace)
    consumer.tell(Ack(deliveries[0].consumer_id, (deliveries[0].tag,)))
    consumer.tell(Ack(deliveries[1].consumer_id, (deliveries[1].tag, deliveries[2].tag), confirm=True))
    result = await _stats(backend, queue)
    assert result.acked == 3
    flat = [tag for _, tags in _settlements_at(backend.trace, "/q", mark) for tag in tags]
    assert flat == [d.tag for d in deliveries]


@pytest.mark.parametrize("consumers", [1, 3])
async def test_a_burst_of_publishes_wakes_the_manager_once_per_idle_consumer(backend: Harness, consumers: int) -> None:
    queue = _queue(backend)
    clients = [consume(backend, queue, settings=ConsumerSettings(prefetch_messages=50))[0] for _ in range(consumers)]
    await backend.quiet()
    mark = len(backend.trace)
    for n in range(20):
        queue.tell(Publish(Message(str(n).encode())))
    result = await _stats(backend, queue)
    assert (result.acked, result.depth, result.in_flight) == (20, 0, 0)
    got = [body for client in clients for body, _ in await received(backend, client)]
    assert sorted(got) == sorted(str(n).encode() for n in range(20))
    wakes = [
        event
        for event in backend.trace[mark:]
        if event.kind is EventKind.DELIVERED
        and event.receiver == "/q/consumers"
        and type(event.message) is WorkAvailable
    ]
    assert len(wakes) <= 20
    if backend.name == "trio":
        # The twenty publishes wait in the queue's mailbox together: one WorkAvailable per
        # consumer that could be notified, not one per publish.
        assert len(wakes) == consumers


def test_an_ack_validates_what_lets_sends_skip_looking_inside_it() -> None:
    with pytest.raises(ValueError, match=r"Ack\.consumer_id must be an int"):
        Ack("1", (1,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Ack\.confirm must be True or False"):
        Ack(1, (1,), confirm=1)  # type: ignore[arg-type]
    ensure_immutable(Ack(1, [2, 3]))  # the converter made a tuple
    ensure_immutable(Publish(Message(b"x")))


def test_groups_held_tells_whether_a_settlement_may_free_a_group() -> None:
    entries = EntryList()
    entries.add_consumer(1, MatchAll(), 0, True)
    entries.publish(Message(b"a"), 0.0)
    entries.publish(Message(b"b", group="g"), 0.0)
    assert not entries.groups_held
    taken, _, _ = entries.take(1, 0.0, 10, 1 << 20, 60.0)
    assert [e.seq for e in taken] == [1, 2]
    assert entries.groups_held
    entries.ack(1, (2,))
    assert not entries.groups_held
