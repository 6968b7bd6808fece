"""The manager's typed messages: its counts answer ``GetSubscriptionStats``; a message of no known type is ignored."""

from __future__ import annotations

from conveyor.actors.broker import Message, Publish, QueueActor, QueueConfig
from conveyor.actors.subscriber import (
    GetSubscriptionStats,
    StreamingPullManager,
    SubscriberMessage,
    SubscriptionStats,
)
from conveyor.simulation import Simulation, uniform_job_duration


def test_the_manager_answers_its_counts_as_a_typed_value() -> None:
    sim = Simulation(seed=1, job_duration=uniform_job_duration(5.0, 5.0))
    queue = sim.spawn(lambda: QueueActor(QueueConfig("q", ack_deadline_s=60)), name="q")
    sub = sim.spawn(lambda: StreamingPullManager(queue, SubscriberMessage.ack, heartbeat_s=1.0), name="sub")
    sim.run(until=0.5)
    assert sim.ask(sub, GetSubscriptionStats()) == SubscriptionStats(pending=0, heartbeats=0)
    for n in range(3):
        queue.tell(Publish(Message(str(n).encode())))
    sim.run(until=2.5)  # the callbacks run 5 virtual seconds: all three are pending
    # each of the three got its lease extended once, on receipt (the leaser's first MODACK)
    assert sim.ask(sub, GetSubscriptionStats()) == SubscriptionStats(pending=3, heartbeats=2, lease_extensions=3)
    sim.run(until=20.0)
    assert sim.ask(sub, GetSubscriptionStats()).pending == 0


def test_a_message_of_no_known_type_is_ignored() -> None:
    sim = Simulation(seed=1)
    queue = sim.spawn(lambda: QueueActor(QueueConfig("q")), name="q")
    sub = sim.spawn(lambda: StreamingPullManager(queue, SubscriberMessage.ack), name="sub")
    sub.tell("stats")  # the string it once answered: no longer a message of its protocol
    sub.tell(42)
    sim.run(until=1.0)
    assert sim.ask(sub, GetSubscriptionStats()) == SubscriptionStats(pending=0, heartbeats=0)
