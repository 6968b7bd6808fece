"""A broker consumer built with ``batches=True`` hands its actor client each pull's deliveries as one message.

What must hold: the client gets every delivery once, in the queue's order, as the queue's own
``Delivered`` when a pull brought several and as the ``Delivery`` itself when it brought one; the
consumer's credit counts them as it does one by one; without ``batches`` nothing changes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import ConsumerActor, ConsumerSettings, Delivered, Delivery, Message, Subscribed
from conveyor.runtime import Actor
from conveyor.simulation import Simulation


class Recorder(Actor):
    """Stands in for the queue and the client: records the deliveries it receives."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        if type(message) in (Delivered, Delivery):
            self.log.append(message)


def _run(pulls: list[int], batches: bool) -> tuple[list[Any], dict[int, int]]:
    """Feed the consumer one ``Delivered`` per entry of ``pulls`` (that many deliveries each), record its client."""
    sim = Simulation(seed=5)
    log: list[Any] = []
    other = sim.spawn(lambda: Recorder(log), name="other")
    settings_ = ConsumerSettings(prefetch_messages=1000)
    consumer = sim.spawn(lambda: ConsumerActor(other, other, settings_, batches=batches), name="consumer")
    consumer.tell(Subscribed("q", 1))
    sim.run(until=1.0)
    log.clear()  # the recorder is the queue too: forget nothing of the client's; it got no delivery yet
    tag = 0
    for size in pulls:
        deliveries = []
        for _ in range(size):
            tag += 1
            deliveries.append(Delivery("q", tag, Message(b"m%d" % tag), 1, 10.0, 1))
        consumer.tell(Delivered("q", tuple(deliveries), exhausted=False))
    sim.run(until=2.0)
    actor: ConsumerActor = sim._find_live("/consumer").actor  # type: ignore[union-attr,assignment]
    return log, dict(actor.outstanding)


def _tags(log: list[Any]) -> list[int]:
    return [d.tag for m in log for d in (m.deliveries if type(m) is Delivered else (m,))]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=6), max_size=6))
def test_the_client_gets_every_delivery_once_in_order_either_way(pulls: list[int]) -> None:
    batched, batched_outstanding = _run(pulls, batches=True)
    single, single_outstanding = _run(pulls, batches=False)
    expected = list(range(1, sum(pulls) + 1))
    assert _tags(batched) == _tags(single) == expected
    assert batched_outstanding == single_outstanding, "credit counts the same"
    assert all(type(m) is Delivery for m in single), "without batches: one Delivery each"
    assert [len(m.deliveries) if type(m) is Delivered else 1 for m in batched] == pulls, "one message a pull"
    assert all(len(m.deliveries) > 1 for m in batched if type(m) is Delivered), "a lone delivery comes as itself"


def test_batches_must_be_a_bool() -> None:
    sim = Simulation(seed=1)
    ref = sim.spawn(lambda: Recorder([]), name="other")
    with pytest.raises(TypeError, match="batches must be True or False"):
        ConsumerActor(ref, ref, batches=1)  # type: ignore[arg-type]
