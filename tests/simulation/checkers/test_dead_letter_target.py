"""``dead_letter_target`` on a paged queue: a dead letter decided before a Reconfigure and sent after it.

paged-swarm seed 830 (2026-11-26): m17 is handed out, nacked to its delivery limit under the old
dead-letter queue, and its body is still on disk when a Reconfigure names a new one; the dead letter
leaves after the read, to the old queue, as docs/broker.md says ("to the next nack or lapse"). Had
the Reconfigure come before m17 was handed out, the old queue would be wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import attrs
import pytest

from conveyor.actors.broker import Reconfigure
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation.checkers import dead_letter_target
from conveyor.simulation.scenarios import run_scenario

QUEUE = "/queue"


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _seed_830() -> list[TraceEvent]:
    return list(run_scenario("paged-swarm", 830, strategy="random", faults="pause").sim.trace)


def test_a_dead_letter_decided_before_a_reconfigure_may_leave_after_it() -> None:
    trace = _seed_830()
    result = dead_letter_target(trace, QUEUE, "/dead-letters")
    assert result.ok, result.violations
    assert result.metric("judged") >= 1 and result.metric("switched") == 1


def test_a_dead_letter_to_a_target_replaced_before_the_hand_out_is_caught() -> None:
    trace = _seed_830()
    reconfigure = next(e for e in trace if e.kind is EventKind.DELIVERED and type(e.message) is Reconfigure)
    moved = [attrs.evolve(e, time=0.0) if e is reconfigure else e for e in trace if e is not reconfigure]
    moved.insert(0, attrs.evolve(reconfigure, time=0.0))  # the new target was in force from the start
    result = dead_letter_target(moved, QUEUE, "/dead-letters")
    assert not result.ok
    assert "but the dead-letter queue in force was /dead-letters-2" in result.violations[0]
