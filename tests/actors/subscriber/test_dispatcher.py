"""The subscriber's ``Dispatcher`` actor: batches by count or delay, and with ``max_delay_s=0`` at once.

What must hold: every settlement reaches the manager in exactly one ``Flush``, in the order asked;
with no delay (as the Pub/Sub transport's manager runs it: its consumer batches its own calls and
wants them without a 10 ms wait), the requests go out at once, those in the mailbox together in
one flush; with the default delay, they wait for the timer. Times are the simulation's virtual clock.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.subscriber import Dispatcher
from conveyor.actors.subscriber._batching import Flush
from conveyor.actors.subscriber._protocol import Acks, Settlement, SettlementKind
from conveyor.runtime import Actor
from conveyor.simulation import Simulation


class Recorder(Actor):
    """Stands in for the manager: each message with the virtual time it came."""

    def __init__(self, log: list[tuple[float, Any]]) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        self.log.append((self.ctx.now(), message))


def _dispatcher(**options: Any) -> tuple[Simulation, Any, list[tuple[float, Any]]]:
    simulation = Simulation(seed=1)
    log: list[tuple[float, Any]] = []
    manager = simulation.spawn(lambda: Recorder(log), name="manager")
    dispatcher = simulation.spawn(lambda: Dispatcher(manager, **options), name="dispatcher")
    return simulation, dispatcher, log


def _ack(tag: int) -> Settlement:
    return Settlement(SettlementKind.ACK, f"1:{tag}")


def test_without_a_delay_the_requests_go_out_at_once_those_queued_together_in_one_flush() -> None:
    sim, dispatcher, log = _dispatcher(max_delay_s=0.0)
    for tag in range(1, 6):
        dispatcher.tell(_ack(tag))
    sim.run(until=1.0)
    flushes = [(when, message) for when, message in log if type(message) is Flush]
    assert [ack for _, message in flushes for ack in message.acks] == [f"1:{tag}" for tag in range(1, 6)]
    assert all(when == 0.0 for when, _ in flushes), "no timer's wait"
    assert len(flushes[0][1].acks) > 1, "what was in the mailbox together went out together"


def test_with_the_default_delay_the_requests_wait_for_the_timer() -> None:
    sim, dispatcher, log = _dispatcher()
    for tag in range(1, 6):
        dispatcher.tell(_ack(tag))
    sim.run(until=1.0)
    flushes = [(when, message) for when, message in log if type(message) is Flush]
    assert len(flushes) == 1 and flushes[0][0] >= 0.01


@settings(max_examples=40, deadline=None)
@given(bursts=st.lists(st.integers(min_value=1, max_value=250), min_size=1, max_size=6),
       gap_s=st.sampled_from([0.0, 0.001, 0.02]))
def test_without_a_delay_every_ack_goes_out_once_in_order_and_none_is_left(bursts: list[int], gap_s: float) -> None:
    sim, dispatcher, log = _dispatcher(max_delay_s=0.0)
    tag = 0
    for size in bursts:
        for _ in range(size):
            tag += 1
            dispatcher.tell(_ack(tag))
        sim.run(until=sim.now() + gap_s)
    sim.run(until=sim.now() + 1.0)
    flushes = [message for _, message in log if type(message) is Flush]
    assert [ack for flush in flushes for ack in flush.acks] == [f"1:{n}" for n in range(1, tag + 1)]
    assert all(flush.size <= 100 for flush in flushes), "max_batch still splits a large burst"


def test_a_jobs_acks_in_one_message_go_out_as_acks_in_order_and_an_ack_after_a_nack_wins() -> None:
    sim, dispatcher, log = _dispatcher(max_delay_s=0.0, max_batch=3)
    dispatcher.tell(Settlement(SettlementKind.NACK, "1:2", attempt=1))
    dispatcher.tell(Acks(tuple(f"1:{tag}" for tag in range(1, 8))))  # the third and the sixth fill a batch
    sim.run(until=1.0)
    flushes = [message for _, message in log if type(message) is Flush]
    assert flushes == [Flush(acks=("1:1", "1:2", "1:3")), Flush(acks=("1:4", "1:5", "1:6")), Flush(acks=("1:7",))]
