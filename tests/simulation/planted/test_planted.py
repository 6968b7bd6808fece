"""Proof of power (issues 5 and 17): each planted bug is found by the default portfolio within its seed budget
and shrinks to a story of at most 15 deliveries; the real actors pass the same runs."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator

import pytest

from conveyor.simulation.scenarios import ScenarioRun, portfolio_choice, run_portfolio, shrink

from .catalog import PLANTED, PlantedBug, checkers_of

MAX_SHRUNK_DELIVERIES = 15


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Broken components and failing callbacks log tracebacks by design."""
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


@functools.cache
def _first_failure(bug: PlantedBug) -> ScenarioRun | None:
    """The first failing run of the bug's scenario with its variant, under the default portfolio."""
    for seed in range(bug.budget):
        run = run_portfolio(bug.scenario, seed, variant=bug.variant)
        if not run.report.ok:
            return run
    return None


@pytest.mark.parametrize("bug", PLANTED, ids=lambda bug: bug.name)
def test_the_default_portfolio_finds_it_within_its_budget(bug: PlantedBug) -> None:
    run = _first_failure(bug)
    assert run is not None, f"{bug.name}: not found in {bug.budget} seeds of {bug.scenario!r}"
    report = run.report
    choice = portfolio_choice(bug.scenario, report.seed)
    assert (report.strategy, report.faults) == (choice.strategy, choice.faults)
    found = checkers_of(report.violations)
    assert found & bug.checkers, f"{bug.name}: found by {sorted(found)}, expected one of {sorted(bug.checkers)}"
    healthy = run_portfolio(bug.scenario, report.seed)
    assert healthy.report.ok, healthy.report.violations  # the bug is the variant's, not the scenario's


@pytest.mark.parametrize("bug", PLANTED, ids=lambda bug: bug.name)
def test_it_shrinks_to_at_most_15_delivery_steps(bug: PlantedBug) -> None:
    run = _first_failure(bug)
    assert run is not None
    report = run.report
    result = shrink(bug.scenario, report.seed, strategy=report.strategy, depth=report.depth, faults=report.faults,
                    variant=bug.variant, max_runs=bug.shrink_runs)
    assert result.checker in bug.checkers
    assert result.deliveries <= MAX_SHRUNK_DELIVERIES, "\n".join(result.story)
    assert result.deliveries <= result.original_deliveries
    assert any(line.startswith(f"{result.checker}:") for line in result.report.violations)
    again = result.replay(bug.variant)  # the shrunk workload and choice stream, the same faults
    assert again.report.trace_hash == result.report.trace_hash
    assert result.checker in checkers_of(again.report.violations)  # the short story replays


FRONT_BUGS = [bug for bug in PLANTED if bug.variant.topic is not None or bug.variant.subscription is not None]


@pytest.mark.parametrize("bug", FRONT_BUGS, ids=lambda bug: bug.name)
def test_the_default_simulate_all_finds_the_front_bugs(bug: PlantedBug, monkeypatch: pytest.MonkeyPatch) -> None:
    """``conveyor simulate all``, as shipped (default scenarios, strategy and fault plans), with the front's actor
    swapped for the planted one wherever the scenarios build it, fails the bug's scenario within its budget."""
    from conveyor.simulation.scenarios import _pubsub

    if bug.variant.topic is not None:
        monkeypatch.setattr(_pubsub, "TopicActor", bug.variant.topic)
    if bug.variant.subscription is not None:
        monkeypatch.setattr(_pubsub, "SubscriptionActor", bug.variant.subscription)
    _assert_simulate_all_fails(bug, bug.budget)


CLIENT_SIDE_BUGS = [bug for bug in PLANTED if bug.variant.consumer is not None or bug.variant.manager is not None]


@pytest.mark.parametrize("bug", CLIENT_SIDE_BUGS, ids=lambda bug: bug.name)
def test_the_default_simulate_all_finds_the_consumer_and_manager_bugs(
    bug: PlantedBug, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``conveyor simulate all``, as shipped, with the bug's variant (the broker clients' consumers, callback clients'
    too, or the subscription's manager) wherever a run takes the default, fails the bug's scenario by the seed the
    portfolio found it at (only that many seeds are run, to keep it cheap)."""
    from conveyor.simulation.scenarios import _registry

    run = _first_failure(bug)
    assert run is not None
    monkeypatch.setattr(_registry, "Variant", lambda: bug.variant)  # ``run_scenario``'s default: ``Variant()``
    _assert_simulate_all_fails(bug, run.report.seed + 1)


def _assert_simulate_all_fails(bug: PlantedBug, seeds: int) -> None:
    """``conveyor simulate all --seeds SEEDS`` exits 1, with failures in the bug's scenario by one of its checkers."""
    from typer.testing import CliRunner

    from conveyor.cli import app

    result = CliRunner().invoke(app, ["simulate", "all", "--seeds", str(seeds)])
    assert result.exit_code == 1, result.output
    row = next(line for line in result.output.splitlines() if line.startswith(f"│ {bug.scenario} "))
    failures = int(row.strip("│").split("│")[4])
    assert failures > 0, row
    assert any(f"{checker}:" in result.output for checker in bug.checkers)
