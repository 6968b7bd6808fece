"""The checkers of ``_kernel_notices.py``: each holds on the real kernel and fails on a broken one.

The kernel probe (``_kernel_probe.py``) runs alone in a small simulation: asks answered twice and
late, a child that escalates. The planted variants of ``tests/simulation/planted/kernel_notices.py``
break one promise each; hand-made traces show the verdicts the probe cannot reach (an escalation
under ``STOP``, a stop that was asked for naming an error).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from conveyor.runtime import EscalatedError, EventKind, SupervisorStrategy, Terminated, TraceEvent
from conveyor.simulation import Simulation
from conveyor.simulation.checkers import SupervisionDeclared, kernel_checks, kernel_notices
from conveyor.simulation.scenarios._kernel_probe import KernelProbe, probe_kernel

from ..planted.kernel_notices import CauselessStop, LazyTimers, SilentEscalation, SwallowsLateAnswers
from ..planted.lifecycle import _simulation_with

_SimCell: Any = Simulation.cell_type
FULL = KernelProbe(twice=True, late=True, escalate=True)


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _verdicts(system: type[Simulation], probe: KernelProbe = FULL) -> dict[str, tuple[bool, dict[str, float]]]:
    sim = system(seed=3)
    probe_kernel(sim, probe, 10_000)
    sim.shutdown()
    return {result.checker: (result.ok, dict(result.metrics)) for result in kernel_notices(sim.trace)}


def test_the_real_kernel_keeps_all_three_promises_under_the_probe() -> None:
    verdicts = _verdicts(Simulation)
    assert all(ok for ok, _ in verdicts.values()), verdicts
    assert verdicts["escalation"][1]["escalations"] == 1
    assert verdicts["ask_answers"][1]["asks"] == 2
    assert verdicts["ask_answers"][1]["abandoned"] == 1
    assert verdicts["timer_cancel"][1]["cancels"] == 1
    assert verdicts["termination_cause"][1]["stops"] >= 4  # the escalating child, then every actor at shutdown


@pytest.mark.parametrize(
    ("system", "probe", "broken"),
    [
        (SilentEscalation, KernelProbe(escalate=True), "escalation"),
        (CauselessStop, KernelProbe(escalate=True), "termination_cause"),
        (SwallowsLateAnswers, KernelProbe(twice=True), "ask_answers"),
        (SwallowsLateAnswers, KernelProbe(late=True), "ask_answers"),
        (LazyTimers, KernelProbe(), "timer_cancel"),
    ],
)
def test_a_broken_kernel_fails_its_checker(system: type[Simulation], probe: KernelProbe, broken: str) -> None:
    verdicts = _verdicts(system, probe)
    assert not verdicts[broken][0]
    assert all(ok for name, (ok, _) in verdicts.items() if name != broken), verdicts


class _CauselessEscalationCell(_SimCell):  # type: ignore[misc]
    """Broken: the ``EscalatedError`` a parent fails with has lost its cause (the child's error)."""

    def _failed(self, error: Exception, sender: object, message: object) -> None:
        if isinstance(error, EscalatedError):
            error.__cause__ = None
        super()._failed(error, sender, message)


def test_an_escalation_that_lost_its_cause_is_reported() -> None:
    verdicts = _verdicts(_simulation_with(_CauselessEscalationCell), KernelProbe(escalate=True))
    assert not verdicts["escalation"][0]
    assert verdicts["termination_cause"][0]


def _event(kind: EventKind, sender: str | None, receiver: str | None, message: object,
           error: str | None = None) -> TraceEvent:
    return TraceEvent(kind, 1.0, sender, receiver, message, error=error)


def test_an_escalation_under_stop_is_reported() -> None:
    escalate = type("Escalate", (), {})()  # the kernel's own message is private: matched by name
    trace = [
        _event(EventKind.NOTE, "/poker", None, SupervisionDeclared("stop", 3, 60.0)),
        _event(EventKind.FAILED, None, "/poker/flaky", None, error="FlakyFailure('x')"),
        _event(EventKind.SENT, "/poker/flaky", "/poker", escalate),
    ]
    verdicts = {result.checker: result for result in kernel_notices(trace)}
    assert not verdicts["escalation"].ok
    assert "supervisor says stop" in verdicts["escalation"].violations[0]


def test_a_stop_names_its_failure_and_only_a_failure() -> None:
    sim = Simulation(seed=1)
    probe_kernel(sim, KernelProbe(escalate=True), 1000)
    ref = next(event.message.ref for event in sim.trace if event.kind is EventKind.STOPPED)
    failed = _event(EventKind.FAILED, None, "/a", None, error="ValueError('x')")
    trace = [
        _event(EventKind.STOPPED, None, "/b", Terminated(ref, "stopped", "ValueError('y')")),
        failed, _event(EventKind.STOPPED, None, "/a", Terminated(ref, "failed", "ValueError('z')")),
        _event(EventKind.STOPPED, None, "/c", Terminated(ref, "shutdown", None)),
    ]
    result = next(result for result in kernel_notices(trace) if result.checker == "termination_cause")
    assert len(result.violations) == 2
    assert "stopped (stopped)" in result.violations[0]
    assert "after failing with ValueError('x')" in result.violations[1]


class _EdgeKeepingBudget:
    """Broken: a restart exactly ``within_s`` old still counts (the window's edge is kept, not let go)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def try_spend(self, now: float, strategy: SupervisorStrategy) -> bool:
        self.times = [time for time in self.times if time >= now - strategy.within_s]
        if len(self.times) >= strategy.max_restarts:
            return False
        self.times.append(now)
        return True


class _EdgeKeepingCell(_SimCell):  # type: ignore[misc]
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.budget = _EdgeKeepingBudget()


def test_the_wardens_window_slides_and_a_budget_that_keeps_its_edge_is_reported() -> None:
    """``supervision`` judges the warden's five failures: four restarts as the window slides, then a stop."""

    def supervision_of(system: type[Simulation]) -> tuple[bool, dict[str, float]]:
        sim = system(seed=5)
        sim.run(until=3.3333)
        probe_kernel(sim, KernelProbe(window=True), 10_000)
        sim.shutdown()
        result = next(result for result in kernel_checks(sim.trace) if result.checker == "supervision")
        return result.ok, dict(result.metrics)

    ok, metrics = supervision_of(Simulation)
    assert ok
    assert (metrics["failures"], metrics["restarts"]) == (5, 4)
    broken = _simulation_with(_EdgeKeepingCell)
    assert not supervision_of(broken)[0]
