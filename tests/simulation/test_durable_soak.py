"""Durable queues under crashes and disk errors: every checker green over many seeds.

The fast slice runs in ``make test``; the soak (``make test-slow``) runs hundreds of seeds under
both strategies, the fault plans mixed, and the subscriber scenarios on a crashing queue.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conveyor.simulation.scenarios import run_scenario


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Injected crashes and disk errors log tracebacks by design."""
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _failures(name: str, seeds: range, strategy: str, faults: str) -> list[str]:
    failing = []
    for seed in seeds:
        report = run_scenario(name, seed, strategy=strategy, faults=faults).report
        if not report.ok:
            failing.append(f"{report.replay_command}: {report.violations[:2]}")
    return failing


@pytest.mark.parametrize("faults", ["queue-crash", "disk-error"])
def test_a_durable_queue_under_crashes_and_disk_errors(faults: str) -> None:
    assert _failures("queue-crash", range(20), "random", faults) == []


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["random", "pct"])
@pytest.mark.parametrize(
    "faults", ["queue-crash", "disk-error", "queue-crash,disk-error,crash,delay,never-ack"]
)
def test_soak_broker(strategy: str, faults: str) -> None:
    assert _failures("queue-crash", range(1000, 1200), strategy, faults) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["leases", "ordering-keys", "flow-control", "subscriber-crash"])
@pytest.mark.parametrize("faults", ["queue-crash", "disk-error"])
def test_soak_subscriber_on_a_crashing_queue(name: str, faults: str) -> None:
    assert _failures(name, range(60), "random", faults) == []
