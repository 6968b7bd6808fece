"""Deliveries taken in a batch (``Deliveries``, as the Pub/Sub transport hands them over).

The manager fans a batch out as one ``ReceivedBatch`` per component, the leaser asks for the
batch's first extension in one ``Extend``, and the ordered-key handler hands the runs to the pool
as one ``RunBatch``. Everything else must be as if the deliveries had come one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.actors.broker import Ack, Delivery, Message, ModifyAckDeadline, Suspend
from conveyor.actors.subscriber import Deliveries, FlowControl, StreamingPullManager, SubscriberMessage
from conveyor.actors.subscriber._histogram import Histogram
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation import Simulation, uniform_job_duration
from conveyor.simulation.checkers import flow_bound

Log = list[tuple[str, Any]]


class Recorder(Actor):
    """Stands in for the broker consumer and the queue: records what it receives."""

    def __init__(self, log: Log, name: str) -> None:
        self.log = log
        self.name = name

    def receive(self, message: Any) -> None:
        self.log.append((self.name, message))


def _delivery(tag: int, key: str | None = None, count: int = 1) -> Delivery:
    return Delivery("q", tag, Message(f"m{tag}".encode(), group=key), count, 100.0, 1)


class _Subscription:
    """A real manager and components whose broker consumer is a recording stand-in, fed by hand."""

    def __init__(
        self, callback_s: float = 0.02, flow: FlowControl | None = None, nack: frozenset[int] = frozenset()
    ) -> None:
        self.sim = Simulation(seed=3, job_duration=uniform_job_duration(callback_s, callback_s))
        self.log: Log = []
        self.calls: list[tuple[int, int]] = []
        self.running: dict[str, int] = {}
        self.overlaps: list[str] = []
        log = self.log

        class Manager(StreamingPullManager):
            def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
                if name == "consumer":
                    return self.ctx.spawn(lambda: Recorder(log, "consumer"), name=name)
                return super().make_part(name, factory, *args)

        def callback(message: SubscriberMessage) -> None:
            self.calls.append((message.tag, message.delivery_attempt))
            if message.tag in nack and message.delivery_attempt == 1:
                message.nack()
            else:
                message.ack()

        queue = self.sim.spawn(lambda: Recorder(log, "queue"), name="queue")
        self.manager = self.sim.spawn(lambda: Manager(queue, callback, flow, 4), name="sub")
        self.sim.run(until=0.5)

    def tell(self, message: object, for_s: float = 5.0) -> None:
        self.manager.tell(message)
        self.sim.run(until=self.sim.now() + for_s)

    def to_consumer(self, kind: type) -> list[Any]:
        return [m for who, m in self.log if who == "consumer" and type(m) is kind]

    def acked(self) -> list[int]:
        return sorted(tag for ack in self.to_consumer(Ack) for tag in ack.tags)


def test_a_batch_runs_each_message_once_and_extends_their_leases_in_one_request() -> None:
    sub = _Subscription()
    sub.tell(Deliveries(tuple(_delivery(tag) for tag in range(1, 8))))
    assert sorted(sub.calls) == [(tag, 1) for tag in range(1, 8)]
    assert sub.acked() == list(range(1, 8))
    first = sub.to_consumer(ModifyAckDeadline)[0]
    assert first.tags == tuple(range(1, 8)), "the batch's first extension goes out as one request"


def test_a_batch_keeps_each_ordering_key_in_order_and_one_at_a_time() -> None:
    sub = _Subscription(callback_s=0.5)
    sub.tell(Deliveries(tuple(_delivery(tag, key=f"k{tag % 2}") for tag in range(1, 9))), for_s=10.0)
    for key in (0, 1):
        assert [tag for tag, _ in sub.calls if tag % 2 == key] == [tag for tag in range(1, 9) if tag % 2 == key]
    assert sub.acked() == list(range(1, 9))


def test_a_nack_in_a_batch_sends_back_the_later_messages_of_its_key() -> None:
    sub = _Subscription(callback_s=0.5, nack=frozenset({2}))
    sub.tell(Deliveries(tuple(_delivery(tag, key="k") for tag in range(1, 5))), for_s=10.0)
    assert sub.calls == [(1, 1), (2, 1)], "3 and 4 were held behind 2, and go back with it"
    assert sub.acked() == [1]
    # The queue gives them back in order; they run in order.
    sub.tell(Deliveries(tuple(_delivery(tag, key="k", count=2) for tag in range(2, 5))), for_s=10.0)
    assert sub.calls == [(1, 1), (2, 1), (2, 2), (3, 2), (4, 2)]
    assert sub.acked() == [1, 2, 3, 4]


def test_a_message_delivered_again_within_a_batch_runs_once() -> None:
    sub = _Subscription(callback_s=2.0)
    sub.tell(Deliveries((_delivery(1), _delivery(2), _delivery(1, count=2))), for_s=10.0)
    assert sorted(sub.calls) == [(1, 1), (2, 1)]
    assert sub.acked() == [1, 2]


def test_a_batch_past_the_flow_control_suspends_the_consumer_and_the_checker_counts_each_item() -> None:
    flow = FlowControl(max_messages=3)
    sub = _Subscription(callback_s=5.0, flow=flow)
    sub.tell(Deliveries(tuple(_delivery(tag) for tag in range(1, 5))), for_s=1.0)
    assert sub.to_consumer(Suspend), "4 unfinished messages against max_messages=3"
    result = flow_bound(sub.sim.trace, "/sub", flow)
    assert not result.ok
    assert result.metric("max_count") == 4, str(result)
    assert any("4 unfinished messages > max_messages=3" in v for v in result.violations), str(result)
    sub.sim.run(until=sub.sim.now() + 10.0)
    assert sub.acked() == [1, 2, 3, 4]


def test_the_flow_checker_passes_a_batched_run_within_bounds() -> None:
    flow = FlowControl(max_messages=10)
    sub = _Subscription(flow=flow)
    sub.tell(Deliveries(tuple(_delivery(tag) for tag in range(1, 6))))
    sub.tell(Deliveries(tuple(_delivery(tag) for tag in range(6, 11))))
    result = flow_bound(sub.sim.trace, "/sub", flow)
    assert result.ok, str(result)
    assert result.metric("max_count") >= 5


def test_the_cached_percentile_follows_new_samples() -> None:
    histogram = Histogram()
    assert histogram.percentile(99) == 10
    for _ in range(99):
        histogram.add(30.0)
    assert histogram.percentile(99) == 30
    histogram.add(500.0)
    assert histogram.percentile(99) == 30
    histogram.add(500.0)
    assert histogram.percentile(99) == 500, "two of 101 above: the 99th percentile moves"
    assert histogram.percentile(99.0) == 500 == histogram.percentile(99)
