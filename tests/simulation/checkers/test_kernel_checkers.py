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
