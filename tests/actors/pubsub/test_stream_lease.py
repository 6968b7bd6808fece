"""A stream's ack deadline leases each delivery when the queue hands it over, whatever the subscription's.

The binding's consumer asks the queue for the stream's lease (``ConsumerSettings.lease_s``), so a
delivery needs no deadline change to reach it: one lease a delivery, not a lease and a modack per batch.
Run on the simulator's clock.
"""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.actors.broker import Subscribe
from conveyor.actors.broker._queue import _Consumer
from conveyor.actors.pubsub import Batch, NextBatch, OpenStream, Publish, PubMessage, StreamOpened, StreamSettings
from tests.actors.pubsub.helpers import simulated_front, topic


@pytest.mark.parametrize(("subscription_s", "stream_s"), [(10, 30), (30, 10)], ids=["longer", "shorter"])
def test_a_stream_delivery_is_leased_for_the_streams_deadline_not_the_subscriptions(
        subscription_s: int, stream_s: int) -> None:
    sim, registry, name = simulated_front(3, f"lease-{stream_s}", ack_deadline_s=subscription_s)
    held: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, stream_s, 1, 0)))
    sim.ask(registry, Publish(topic(f"lease-{stream_s}"), (PubMessage(b"m", publish_time_ns=1),)))
    first: Batch = sim.ask(held.binding, NextBatch(1.0))
    assert [(m.data, attempt) for _, m, attempt in first.received] == [(b"m", 1)]
    other: StreamOpened = sim.ask(registry, OpenStream(StreamSettings(name, 60, 10, 0)))
    shortest, longest = sorted((subscription_s, stream_s))
    sim.run(until=sim.now() + (shortest + longest) / 2)  # past one deadline, before the other
    early: Batch = sim.ask(other.binding, NextBatch(1.0))
    if stream_s == longest:
        assert early.received == (), "leased for the stream's 30 s: not given out again at 20 s"
    else:
        assert [m.data for _, m, _ in early.received] == [b"m"], "the stream's 10 s lease lapsed by 20 s"
    sim.run(until=sim.now() + longest)
    later = [received for binding in (held.binding, other.binding)
             for received in sim.ask(binding, NextBatch(1.0)).received]
    assert [(m.data, attempt) for _, m, attempt in (*early.received, *later)] == [(b"m", 2)]  # once, after its lease


def test_a_subscribe_journaled_before_consumer_leases_recovers_with_the_queues_deadline() -> None:
    """A journal written before ``Subscribe.lease_s`` existed holds Subscribes pickled without it."""
    _, ref, _ = simulated_front(4, "journaled")  # any live ref
    state: dict[str, Any] = Subscribe(ref, lease_s=15.0).__getstate__()  # type: ignore[assignment]
    assert state["lease_s"] == 15.0
    del state["lease_s"]  # as pickled before
    old = Subscribe.__new__(Subscribe)
    old.__setstate__(state)  # type: ignore[attr-defined]  # what unpickling does
    assert not hasattr(old, "lease_s")
    assert _Consumer(old, True).lease_s is None
    assert _Consumer(Subscribe(ref, lease_s=15.0), True).lease_s == 15.0
