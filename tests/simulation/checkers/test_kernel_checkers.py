"""The kernel checkers on runs where a restarted parent's old child drains beside its successor.

A durable queue that crashes spawns a new consumer manager at ``/queue/consumers`` while the old
one still drains its mailbox; the queue sends both the same message objects (its one
``WorkAvailable``), and the old manager's last ``NotifyWork`` may reach a consumer after the new
one's. These runs once made ``mailbox_fifo`` report reorderings that were not there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conveyor.simulation.checkers import kernel_checks
from conveyor.simulation.scenarios import run_scenario


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


@pytest.mark.parametrize(
    ("scenario", "seed", "faults"),
    [("queue-crash", 5, None), ("queue-crash", 13, None), ("paused-process", 10, "disk-error"),
     ("leases", 11, "disk-error")],
)
def test_two_actors_at_one_path_are_no_reordering(scenario: str, seed: int, faults: str | None) -> None:
    run = run_scenario(scenario, seed, faults=faults)
    results = {result.checker: result for result in kernel_checks(run.sim.trace)}
    assert all(result.ok for result in results.values()), [r.violations for r in results.values()]
    metrics = {name: dict(result.metrics) for name, result in results.items()}
    assert metrics["supervision"]["restarts"] >= 1
    assert metrics["nothing_vanishes"]["judged"] == 1.0


def test_a_retried_message_is_no_reordering_when_its_sender_reuses_the_object() -> None:
    """A consumer sends its one ``SetInterest`` object again and again; the queue fails on one, is restarted and
    handles it once more (``retry_failed``). That second delivery is the retry, not the later send of the same object
    further down the channel (``queue-crash`` seeds 1018 and 1141 under every fault once reported it as one)."""
    from conveyor.runtime import EventKind, TraceEvent
    from conveyor.simulation.checkers import mailbox_fifo, nothing_vanishes

    interest, pull = object(), object()
    consumer, queue = "/client-0/consumer", "/queue"

    def event(kind: EventKind, message: object) -> TraceEvent:
        return TraceEvent(kind, 0.0, consumer, queue, message)

    trace = [
        event(EventKind.SENT, interest), event(EventKind.SENT, pull), event(EventKind.SENT, interest),
        event(EventKind.DELIVERED, interest),
        TraceEvent(EventKind.FAILED, 0.0, None, queue, None, error="InjectedFault('disk')"),
        TraceEvent(EventKind.RESTARTED, 0.0, None, queue, interest, error="InjectedFault('disk')"),  # retry asked
        event(EventKind.DELIVERED, interest),  # the retry
        event(EventKind.DELIVERED, pull), event(EventKind.DELIVERED, interest),
    ]
    fifo = mailbox_fifo(trace)
    assert fifo.ok, fifo.violations
    assert fifo.metric("retried") == 1
    assert nothing_vanishes(trace).ok
