"""Lapsed leases and redeliveries, component by component, on the simulator with recording stand-ins.

The queue keeps a message's tag when it gives the message back to the same consumer, so one ack id
can reach a subscription more than once. These tests pin what each part then does: the ordered-key
handler never runs a copy whose lease ran out and keeps its key in order, the worker pool drops such
copies that have not started, and the manager never runs a message twice that it already acked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conveyor.actors.broker import Ack, AckResult, Delivery, Message, ModifyAckDeadline, Nack
from conveyor.actors.subscriber import OrderedKeyHandler, StreamingPullManager, SubscriberMessage, WorkerPool
from conveyor.actors.subscriber._protocol import (
    CallbackEnded,
    Lapsed,
    Received,
    ReceivedBatch,
    Run,
    RunBatch,
    Scheduled,
    Skipped,
)
from conveyor.actors.subscriber._protocol import (
    Settlement as Settle,
)
from conveyor.actors.subscriber._protocol import (
    SettlementKind as SettleKind,
)
from conveyor.runtime import Actor, ActorRef
from conveyor.simulation import Simulation, uniform_job_duration

Log = list[tuple[str, Any]]


class Recorder(Actor):
    """Stands in for a component: records what it receives, under its name."""

    def __init__(self, log: Log, name: str) -> None:
        self.log = log
        self.name = name

    def receive(self, message: Any) -> None:
        self.log.append((self.name, message))


def _delivery(tag: int, key: str | None = None, deadline: float | None = 100.0, count: int = 1) -> Delivery:
    return Delivery("q", tag, Message(f"m{tag}".encode(), group=key), count, deadline, 1)


def _received(tag: int, key: str | None = None, deadline: float | None = 100.0, count: int = 1) -> Received:
    delivery = _delivery(tag, key, deadline, count)
    return Received(f"1:{tag}", delivery.message.size, key, delivery)


def _nack(tag: int) -> tuple[str, Settle]:
    return ("manager", Settle(SettleKind.NACK, f"1:{tag}"))


def _to(name: str, log: Log) -> list[Any]:
    """What the stand-in ``name`` received, in order (the stand-ins' channels interleave freely).

    Leaves out ``Scheduled`` (the key handler's word that a keyed message was handed to the pool),
    which ``test_the_key_handler_reports_each_keyed_message_it_hands_to_the_pool`` checks.
    """
    return [message for who, message in log if who == name and type(message) is not Scheduled]


def _runs(log: Log) -> list[tuple[str, int]]:
    """The runs handed to the pool, one ``Run`` or a ``RunBatch`` (a key run) at a time, in order."""
    runs = [run for who, m in log if who == "workers"
            for run in ((m,) if type(m) is Run else m.runs if type(m) is RunBatch else ())]
    return [(run.ack_id, run.delivery.delivery_count) for run in runs]


def _key_handler(clock_at: float = 10.0) -> tuple[Simulation, ActorRef, Log]:
    """An ordered-key handler between recording stand-ins for the manager and the pool, at ``clock_at``."""
    sim = Simulation(seed=1)
    log: Log = []
    manager = sim.spawn(lambda: Recorder(log, "manager"), name="manager")
    workers = sim.spawn(lambda: Recorder(log, "workers"), name="workers")
    keys = sim.spawn(lambda: OrderedKeyHandler(manager, workers), name="keys")
    sim.run(until=clock_at)
    return sim, keys, log


def test_a_delivery_whose_lease_ran_out_on_the_way_is_sent_back_and_its_key_waits_for_it() -> None:
    sim, keys, log = _key_handler(clock_at=10.0)
    keys.tell(_received(1, "k", deadline=5.0))  # the queue's lease on it ran out at 5: it has it back
    keys.tell(_received(2, "k", deadline=40.0))  # a later message of its key, still leased
    keys.tell(_received(3, None, deadline=5.0))  # unordered and stale: sent back too
    sim.run(until=11.0)
    assert log == [_nack(1), _nack(2), _nack(3)], "nothing ran: tag 2 may not overtake tag 1"
    log.clear()
    keys.tell(_received(2, "k", deadline=40.0, count=2))  # back first: tag 1 is still out
    keys.tell(_received(1, "k", deadline=40.0, count=2))
    sim.run(until=12.0)
    assert _to("manager", log) == [_nack(2)[1]]
    assert _runs(log) == [("1:1", 2)]
    log.clear()
    keys.tell(_received(2, "k", deadline=40.0, count=3))
    keys.tell(CallbackEnded("1:1", "k"))
    sim.run(until=13.0)
    assert _runs(log) == [("1:2", 3)], "the key runs on in publish order"


def test_the_key_handler_reports_each_keyed_message_it_hands_to_the_pool() -> None:
    """Its max-lease clock starts then (``Scheduled``), not while it waited on hold behind its key."""
    sim, keys, log = _key_handler()
    keys.tell(_received(1, "k"))  # runs at once
    keys.tell(_received(2, "k"))  # held behind 1
    keys.tell(_received(3, None))  # unordered: its clock started on receipt, nothing to report
    sim.run(until=11.0)
    assert [m for who, m in log if type(m) is Scheduled] == [Scheduled(("1:1",))]
    log.clear()
    keys.tell(CallbackEnded("1:1", "k"))
    sim.run(until=12.0)
    assert [(who, m) for who, m in log if type(m) is Scheduled] == [("manager", Scheduled(("1:2",)))]
    assert _runs(log) == [("1:2", 1)]
    log.clear()
    keys.tell(ReceivedBatch((_received(4, "j"), _received(5, None), _received(6, "i"))))
    sim.run(until=13.0)
    assert [m for who, m in log if type(m) is Scheduled] == [Scheduled(("1:4", "1:6"))], "one per batch"
    assert [type(m) for m in _to("workers", log)] == [RunBatch]


def test_lapsed_sends_back_a_held_message_and_the_later_ones_of_its_key_but_not_the_earlier() -> None:
    sim, keys, log = _key_handler()
    for tag in (1, 2, 3, 4):
        keys.tell(_received(tag, "k"))  # 1 runs; 2, 3, 4 are held behind it
    keys.tell(_received(5, "j"))  # another key, running
    sim.run(until=11.0)
    assert _runs(log) == [("1:1", 1), ("1:5", 1)]
    log.clear()
    keys.tell(Lapsed(("1:3", "1:5")))  # 3 is held; 5 was handed to the pool
    sim.run(until=12.0)
    assert _to("manager", log) == [_nack(3)[1], _nack(4)[1]], "2 stays held: it precedes 3"
    assert _to("workers", log) == [Lapsed(("1:5",))], "the pool decides for what it was handed"
    log.clear()
    keys.tell(CallbackEnded("1:1", "k"))
    keys.tell(_received(4, "k", count=2))  # came back before 3: sent back again
    sim.run(until=13.0)
    assert _runs(log) == [("1:2", 1)]
    assert _to("manager", log) == [_nack(4)[1]]
    log.clear()
    keys.tell(_received(3, "k", count=2))
    keys.tell(_received(4, "k", count=3))
    keys.tell(CallbackEnded("1:2", "k"))
    keys.tell(CallbackEnded("1:3", "k"))
    sim.run(until=14.0)
    assert _runs(log) == [("1:3", 2), ("1:4", 3)]


def test_a_message_skipped_by_the_pool_fences_its_key_like_a_nack() -> None:
    sim, keys, log = _key_handler()
    keys.tell(_received(1, "k"))
    keys.tell(_received(2, "k"))
    keys.tell(Skipped("1:1", "k"))  # never started: the pool dropped it, its lease having lapsed
    keys.tell(_received(1, "k", count=2))
    keys.tell(CallbackEnded("1:1", "k"))
    keys.tell(_received(2, "k", count=2))
    sim.run(until=11.0)
    assert _to("manager", log) == [_nack(2)[1]]
    assert _runs(log) == [("1:1", 1), ("1:1", 2), ("1:2", 2)]


def test_a_new_delivery_that_overtakes_the_end_of_its_previous_run_waits_for_it() -> None:
    sim, keys, log = _key_handler()
    keys.tell(_received(1, "k"))
    keys.tell(_received(1, "k", count=2))  # the manager took it in again before CallbackEnded came
    sim.run(until=11.0)
    assert _runs(log) == [("1:1", 1)]
    keys.tell(CallbackEnded("1:1", "k"))
    sim.run(until=12.0)
    assert _runs(log) == [("1:1", 1), ("1:1", 2)]


def test_the_pool_drops_lapsed_messages_that_have_not_started() -> None:
    sim = Simulation(seed=1, job_duration=uniform_job_duration(10.0, 10.0))
    log: Log = []
    calls: list[str] = []
    manager = sim.spawn(lambda: Recorder(log, "manager"), name="manager")
    pool = sim.spawn(lambda: WorkerPool(manager, lambda message: calls.append(message.ack_id), 1), name="workers")
    for tag in (1, 2, 3):
        pool.tell(Run(f"1:{tag}", "k" if tag == 2 else None, _delivery(tag, "k" if tag == 2 else None)))
    sim.run(until=1.0)
    pool.tell(Lapsed(("1:1", "1:2")))  # 1 is running: it goes on; 2 waits for the one worker
    sim.run(until=30.0)
    assert calls == ["1:1", "1:3"]
    assert ("manager", Skipped("1:2", "k")) in log
    assert [m.ack_id for who, m in log if type(m) is CallbackEnded] == ["1:1", "1:3"]


# ---------------------------------------------------------------------- the manager


class _Subscription:
    """A real manager and components whose broker consumer is a recording stand-in, fed by hand."""

    def __init__(self, callback_s: float = 0.02, nack: bool = False) -> None:
        self.sim = Simulation(seed=2, job_duration=uniform_job_duration(callback_s, callback_s))
        self.log: Log = []
        self.calls: list[tuple[str, int]] = []
        log = self.log

        class Manager(StreamingPullManager):
            def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
                if name == "consumer":
                    return self.ctx.spawn(lambda: Recorder(log, "consumer"), name=name)
                return super().make_part(name, factory, *args)

        def callback(message: SubscriberMessage) -> None:
            self.calls.append((message.ack_id, message.delivery_attempt))
            if nack:
                message.nack()
            else:
                message.ack()

        queue = self.sim.spawn(lambda: Recorder(log, "queue"), name="queue")  # only the consumer would use it
        self.manager = self.sim.spawn(lambda: Manager(queue, callback), name="sub")
        self.sim.run(until=0.5)

    def tell(self, message: object) -> None:
        self.manager.tell(message)
        self.sim.run(until=self.sim.now() + 1.0)

    def acks(self) -> list[Ack]:
        return [m for who, m in self.log if who == "consumer" and type(m) is Ack]


def test_a_message_delivered_again_while_its_ack_is_on_the_way_is_not_run_again() -> None:
    sub = _Subscription()
    sub.tell(_delivery(1))
    assert sub.calls == [("1:1", 1)]
    assert sub.acks() == [Ack(1, (1,), confirm=True)], "acks ask the queue to confirm them"
    sub.tell(_delivery(1, count=2))  # the queue gave it back (lease lapsed) before it took our ack
    assert sub.calls == [("1:1", 1)]
    sub.tell(AckResult((1,), ()))  # the ack took: it settled that second delivery
    assert sub.acks() == [Ack(1, (1,), confirm=True), Ack(1, (1,))], "a plain ack frees the second one's credit"
    assert sub.calls == [("1:1", 1)]


def test_a_message_whose_ack_the_queue_refused_is_acked_again_not_run_again() -> None:
    sub = _Subscription()
    sub.tell(_delivery(2))
    sub.tell(AckResult((), (2,)))  # refused: its lease had lapsed before the ack arrived
    sub.tell(_delivery(2, count=2))
    assert sub.calls == [("1:2", 1)]
    assert sub.acks() == [Ack(1, (2,), confirm=True), Ack(1, (2,), confirm=True)]
    sub.tell(AckResult((2,), ()))
    sub.tell(_delivery(3))  # business as usual afterwards
    assert sub.calls == [("1:2", 1), ("1:3", 1)]


def test_a_message_delivered_again_while_still_held_renews_its_lease_and_runs_once() -> None:
    sub = _Subscription(callback_s=5.0)
    sub.tell(_delivery(4))
    sub.tell(_delivery(4, count=2))  # its callback still runs
    extensions = [m for who, m in sub.log if who == "consumer" and type(m) is ModifyAckDeadline and 4 in m.tags]
    assert len(extensions) == 2, "one on receipt, one at once for the lease of the second delivery"
    sub.sim.run(until=sub.sim.now() + 10.0)
    assert sub.calls == [("1:4", 1)]
    assert sub.acks() == [Ack(1, (4,), confirm=True)], "the one run's ack settles the second delivery too"


def _nacks(sub: _Subscription) -> list[Nack]:
    return [m for who, m in sub.log if who == "consumer" and type(m) is Nack]


def test_a_nack_names_the_delivery_it_is_for() -> None:
    sub = _Subscription(nack=True)
    sub.tell(_delivery(5, count=3))
    assert _nacks(sub) == [Nack(1, (5,), attempts=(3,))], "the queue ignores it if it has delivered 5 again since"


def test_the_nack_of_a_copy_held_while_delivered_again_names_the_newest_delivery() -> None:
    sub = _Subscription(callback_s=5.0, nack=True)
    sub.tell(_delivery(6))
    sub.tell(_delivery(6, count=2))  # its lease lapsed while the callback runs: the copy here settles this one
    sub.sim.run(until=sub.sim.now() + 10.0)
    assert sub.calls == [("1:6", 1)]
    assert _nacks(sub) == [Nack(1, (6,), attempts=(2,))]


def test_a_message_delivered_again_after_its_nack_went_runs_again() -> None:
    """The queue made this delivery after it took the nack, or before (then the nack, naming the older
    delivery, left it leased to us): either way it is ours to run."""
    sub = _Subscription(nack=True)
    sub.tell(_delivery(7))
    sub.tell(_delivery(7, count=2))
    assert sub.calls == [("1:7", 1), ("1:7", 2)]
    assert _nacks(sub) == [Nack(1, (7,), attempts=(1,)), Nack(1, (7,), attempts=(2,))]
