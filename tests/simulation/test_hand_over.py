"""A notified consumer frozen by a pause no longer holds its hand-over (the simulator's liveness find).

Before the consumer manager timed its hand-overs, a consumer told of work while its process was
paused kept that work from every other interested consumer with credit until the pause ended;
``prompt_delivery`` (4 virtual seconds) caught it in about 3 of 600 seeds under the ``pause``
fault plan. These tests replay the seeds that found it, show that the same runs fail with the
timeout switched off (so the tests can fail), and sweep the two scenarios under ``pause``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import attrs
import pytest

from conveyor.actors.broker import QueueActor, QueueConfig
from conveyor.runtime import EventKind
from conveyor.simulation.scenarios import ScenarioRun, Variant, run_scenario
from tests.simulation._sweeps import failing_seeds

FOUND = (
    ("selectors", 57, "pause"),
    ("selectors", 98, "queue-crash,pause"),
    ("selectors", 289, "pause"),
    ("priorities", 64, "pause"),
)
"""Every failure of seeds 0-299 of ``selectors`` and ``priorities`` under ``pause`` before the fix,
and the ``queue-crash,pause`` seed reported with them."""


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _untimed(config: QueueConfig) -> QueueActor:
    """The real queue with the hand-over timeout off: Qpid's wait-forever behaviour."""
    return QueueActor(attrs.evolve(config, hand_over_timeout_s=None))


UNTIMED = Variant(queue=_untimed)


def _verdict(run: ScenarioRun, checker: str) -> str | None:
    """None when ``checker`` passed, else its verdict as text."""
    (result,) = (result for result in run.results if result.checker == checker)
    return None if result.ok else str(result)


MANAGER = "/queue/consumers"


def _timeouts(run: ScenarioRun) -> int:
    """How often the consumer manager's hand-over timer fired."""
    return sum(
        1
        for event in run.sim.trace
        if event.kind is EventKind.DELIVERED and type(event.message).__name__ == "_HandOverDue"
    )


def _passed_on(run: ScenarioRun) -> int:
    """``NotifyWork`` the manager sent while handling its timer: work a timed-out hand-over passed on."""
    handling_timer = False
    passed = 0
    for event in run.sim.trace:
        if event.kind is EventKind.DELIVERED and event.receiver == MANAGER:
            handling_timer = type(event.message).__name__ == "_HandOverDue"
        elif handling_timer and event.kind is EventKind.SENT and event.sender == MANAGER:
            passed += type(event.message).__name__ == "NotifyWork"
    return passed


@pytest.mark.parametrize(("name", "seed", "faults"), FOUND)
def test_the_seeds_that_found_the_frozen_hand_over_pass(name: str, seed: int, faults: str) -> None:
    run = run_scenario(name, seed, faults=faults)
    assert run.report.ok, run.report.violations
    assert _passed_on(run) >= 1  # the timeout passed the work on, not some later event


@pytest.mark.parametrize(("name", "seed", "faults"), FOUND)
def test_the_same_runs_fail_prompt_delivery_without_the_timeout(name: str, seed: int, faults: str) -> None:
    run = run_scenario(name, seed, faults=faults, variant=UNTIMED)
    verdict = _verdict(run, "prompt_delivery")
    assert verdict is not None, "the frozen consumer should have held the work past 4 s"
    assert "(interested, with credit) could take it" in verdict
    assert _timeouts(run) == 0


def test_a_run_without_faults_never_passes_work_on() -> None:
    """Every consumer answers in the instant it is told: the manager's timer, never cancelled, may
    fire (about once per virtual second while hand-overs go on) but finds nothing overdue."""
    fired = 0
    for name in ("fairness", "priorities", "selectors", "groups", "consumer-priorities"):
        for seed in range(5):
            run = run_scenario(name, seed, faults="none")
            assert run.report.ok, run.report.violations
            assert _passed_on(run) == 0, f"{name} seed {seed}"
            timeouts = _timeouts(run)
            assert timeouts <= 2 * run.sim.now() + 2, f"{name} seed {seed}: {timeouts} in {run.sim.now():g} s"
            fired += timeouts
    assert fired > 0  # the timer did run (so the test can see a pass-on if one happened)


@pytest.mark.parametrize("name", ["selectors", "priorities"])
def test_a_short_sweep_under_pause_is_green(name: str) -> None:
    assert failing_seeds(name, range(40), "pause") == []


@pytest.mark.slow
@pytest.mark.parametrize("faults", ["pause", "queue-crash,pause"])
@pytest.mark.parametrize("name", ["selectors", "priorities"])
def test_300_seeds_under_pause_are_green(name: str, faults: str) -> None:
    assert failing_seeds(name, range(300), faults) == []
