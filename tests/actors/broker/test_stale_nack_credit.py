"""The broker consumer's credit stays exact when a nack names an older delivery than one it passed on.

The queue gives a lapsed message back to the same consumer under the same tag, and ignores a nack
that names an older delivery (``Nack.attempts``). So the consumer frees a tag's credit for a nack
only if the nack names the latest delivery of that tag it has seen; if the redelivery comes after
it forwarded the nack, the tag is no longer out and the redelivery counts anew.
"""

from __future__ import annotations

from typing import Any

from conveyor.actors.broker import ConsumerActor, ConsumerSettings, Delivered, Delivery, Message, Nack, Subscribed
from conveyor.runtime import Actor
from conveyor.simulation import Simulation


class Recorder(Actor):
    """Stands in for the queue and the client: records what it receives."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        self.log.append(message)


def _consumer() -> tuple[Simulation, Any, list[Any]]:
    sim = Simulation(seed=3)
    log: list[Any] = []
    other = sim.spawn(lambda: Recorder(log), name="other")
    consumer = sim.spawn(lambda: ConsumerActor(other, other, ConsumerSettings(prefetch_messages=10)), name="consumer")
    consumer.tell(Subscribed("q", 1))
    sim.run(until=1.0)
    return sim, consumer, log


def _delivered(tag: int, count: int) -> Delivered:
    return Delivered("q", (Delivery("q", tag, Message(b"m"), count, 10.0, 1),), exhausted=True)


def _outstanding(sim: Simulation) -> dict[int, int]:
    actor: ConsumerActor = sim._find_live("/consumer").actor  # type: ignore[union-attr,assignment]
    return dict(actor.outstanding)


def test_a_nack_of_an_older_delivery_than_the_latest_passed_on_frees_no_credit() -> None:
    sim, consumer, log = _consumer()
    consumer.tell(_delivered(4, 1))
    consumer.tell(_delivered(4, 2))  # its lease lapsed: the queue delivered it again, same tag
    consumer.tell(Nack(1, (4,), attempts=(1,)))
    sim.run(until=2.0)
    assert Nack(1, (4,), attempts=(1,)) in log, "forwarded: the queue decides, and ignores it"
    assert list(_outstanding(sim)) == [4], "delivery 2 is still out"
    consumer.tell(Nack(1, (4,), attempts=(2,)))
    sim.run(until=3.0)
    assert _outstanding(sim) == {}


def test_a_redelivery_after_the_nack_went_counts_anew() -> None:
    sim, consumer, _ = _consumer()
    consumer.tell(_delivered(5, 1))
    consumer.tell(Nack(1, (5,), attempts=(1,)))
    sim.run(until=2.0)
    assert _outstanding(sim) == {}
    consumer.tell(_delivered(5, 2))  # made before the queue took the nack, which it therefore ignores
    sim.run(until=3.0)
    assert list(_outstanding(sim)) == [5]


def test_a_nack_without_attempts_frees_the_credit_as_before() -> None:
    sim, consumer, _ = _consumer()
    consumer.tell(_delivered(6, 1))
    consumer.tell(_delivered(6, 2))
    consumer.tell(Nack(1, (6,)))
    sim.run(until=2.0)
    assert _outstanding(sim) == {}
