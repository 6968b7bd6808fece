"""A nack that reaches the queue after the queue delivered its message again changes nothing.

The queue gives a lapsed message back to the same consumer under the same tag. Here the real
queue, broker consumer and subscription play the order the 5000-5299 sweep found (``flow_bound``,
paused-process seed 5079): the subscription nacks delivery 1, the nack is held up on its way to the
broker consumer (a stalled channel, as a pause does) while the lease lapses, the queue delivers the
message again (delivery 2) and the subscription, having settled delivery 1, takes delivery 2 in as
new and runs it. When the held nack arrives it names delivery 1 (``Nack.attempts``): the broker
consumer keeps delivery 2's credit and the queue keeps it leased, so the ack of its run takes.
Before, the nack returned delivery 2: the broker consumer gave its credit back while the subscription
still counted the message, and the ack of the run came too late.
"""

from __future__ import annotations

from conveyor.actors.broker import (
    AckResult,
    ConsumerActor,
    GetStats,
    Message,
    Nack,
    Publish,
    QueueActor,
    QueueConfig,
    QueueStats,
    StaleNackIgnored,
)
from conveyor.actors.subscriber import StreamingPullManager, SubscriberMessage
from conveyor.runtime import ActorRef, EventKind, TraceEvent
from conveyor.simulation import Delay, Simulation, uniform_job_duration

LEASE_S = 10.0
HELD_S = 15.0
"""The subscription's channel to its broker consumer stalls this long from when all is started (at 0 s):
past the first lease's lapse (at ``LEASE_S``), before the second's (at twice that)."""


def _handled(trace: list[TraceEvent], receiver: str, cls: type) -> list[object]:
    """What the actor at ``receiver`` handled of class ``cls``, in order."""
    return [
        e.message for e in trace if e.kind is EventKind.DELIVERED and e.receiver == receiver and type(e.message) is cls
    ]


def _started(faults: tuple[Delay, ...] = ()) -> tuple[Simulation, ActorRef, list[int]]:
    """A queue and a subscription whose callback nacks delivery 1 and acks the others, once started."""
    sim = Simulation(seed=1, job_duration=uniform_job_duration(0.05, 0.05), faults=faults)
    runs: list[int] = []

    def callback(message: SubscriberMessage) -> None:
        runs.append(message.delivery_attempt)
        if message.delivery_attempt == 1:
            message.nack()
        else:
            message.ack()

    queue = sim.spawn(lambda: QueueActor(QueueConfig("q", ack_deadline_s=LEASE_S)), name="q")
    sim.spawn(lambda: StreamingPullManager(queue, callback), name="sub")
    sim.run(until=0.5)
    return sim, queue, runs


def test_a_nack_arriving_after_the_redelivery_leaves_it_leased_counted_once_and_run_once() -> None:
    started, _, _ = _started()  # the same run without the stall: how many steps starting takes
    stall = Delay("/sub", "/sub/consumer", at_step=started.steps, duration_s=HELD_S)
    sim, queue, runs = _started((stall,))
    queue.tell(Publish(Message(b"m")))
    sim.run(until=HELD_S - 0.5)
    assert runs == [1, 2], "delivery 1 was nacked; delivery 2, made after its lease lapsed, ran as new"
    # The broker consumer's own count of what it has out (its credit), read off the actor itself.
    consumer: ConsumerActor = sim._find_live("/sub/consumer").actor  # type: ignore[union-attr,assignment]
    (tag,) = consumer.outstanding
    consumer_id = consumer.consumer_id
    assert consumer_id is not None
    assert not _handled(sim.trace, "/sub/consumer", Nack), "the nack is still held on its way"

    # Step until the broker consumer has forwarded the held nack (the run's ack is right behind it).
    while not _handled(sim.trace, "/sub/consumer", Nack):
        assert sim.step()
    assert list(consumer.outstanding) == [tag], "delivery 2 still holds its credit: the queue ignores the nack"
    (nack,) = _handled(sim.trace, "/sub/consumer", Nack)
    assert nack == Nack(consumer_id, (tag,), attempts=(1,)), "the nack names the delivery it is for"

    sim.run(until=HELD_S + 5.0)
    assert _handled(sim.trace, "/sub", AckResult) == [AckResult((tag,), ())], "the run's ack took: still leased"
    assert runs == [1, 2], "run once more, not again"
    assert consumer.outstanding == {} and consumer.attempts == {}
    stats: QueueStats = sim.ask(queue, GetStats())
    assert (stats.delivered, stats.redelivered, stats.acked, stats.in_flight, stats.depth) == (2, 1, 1, 0, 0)
    stale = [e.message for e in sim.trace if e.kind is EventKind.NOTE and type(e.message) is StaleNackIgnored]
    assert stale == [StaleNackIgnored("q", tag, consumer_id, 1, 2)]
