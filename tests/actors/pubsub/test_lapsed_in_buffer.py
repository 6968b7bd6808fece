"""A delivery whose lease lapsed while its stream's binding held it unasked is not handed out afterwards.

Found by the simulator (``pubsub-crash``, seed 29, with a client paused past its leases): the
binding gave a paused client a delivery from its buffer whose lease had lapsed meanwhile; the
queue had delivered the message again to another client, whose exactly-once ack was confirmed.
The message reached a client again after a confirmed ack. Run on the simulator's clock.
"""

from __future__ import annotations

from conveyor.actors.pubsub import (
    Batch,
    NextBatch,
    OpenStream,
    Publish,
    PubMessage,
    Settle,
    SettleKind,
    SettleOutcome,
    StreamOpened,
    StreamSettings,
)
from tests.actors.pubsub.helpers import simulated_front, topic


def test_a_lapsed_delivery_held_unasked_is_not_handed_out_after_an_exactly_once_ack_elsewhere() -> None:
    sim, registry, name = simulated_front(5, "held", ack_deadline_s=10, exactly_once=True)
    slow: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, 0, 1, 0)))
    sim.ask(registry, Publish(topic("held"), (PubMessage(b"once", publish_time_ns=1),)))
    sim.run(until=sim.now() + 15.0)  # held by the slow stream's binding, unasked, past its 10 s lease
    fast: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, 0, 1, 0)))
    batch: Batch = sim.ask(fast.binding, NextBatch(1.0))
    ((ack_id, message, attempt),) = batch.received
    assert (message.data, attempt) == (b"once", 2)
    assert sim.ask(registry, Settle(name, SettleKind.ACK, (ack_id,))) == SettleOutcome(())  # confirmed
    late: Batch = sim.ask(slow.binding, NextBatch(1.0))
    assert [m.data for _, m, _ in late.received] == []  # not again, after a confirmed ack
