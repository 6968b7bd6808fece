"""The default portfolio (issue 17, item 4): strategies and fault plans rotated across seeds, deterministically,
and written out in each run's replay command."""

from __future__ import annotations

import functools
import logging
import re
import shlex
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.simulation import scenarios
from conveyor.simulation.scenarios import (
    FAULTS_OF,
    PORTFOLIO_STRATEGIES,
    Variant,
    get_scenario,
    portfolio_choice,
    run_portfolio,
    run_scenario,
    scenario_names,
)
from tests.simulation.planted import broker

runner = CliRunner()


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


@pytest.mark.parametrize("name", scenario_names())
def test_seed_0_is_the_random_walk_under_the_scenarios_own_faults(name: str) -> None:
    choice = portfolio_choice(name, 0)
    assert (choice.strategy, choice.faults) == ("random", get_scenario(name).default_faults)


@pytest.mark.parametrize("name", scenario_names())
def test_28_consecutive_seeds_meet_every_strategy_and_fault_plan_together(name: str) -> None:
    spec = get_scenario(name)
    own = {plan for plan in spec.default_faults.split(",") if plan != "none"}
    met = set()
    for seed in range(100, 128):
        choice = portfolio_choice(name, seed)
        assert choice == portfolio_choice(name, seed)  # a function of (scenario, seed) alone
        extra = set(choice.faults.split(",")) - own - {"none"}
        met.add((choice.strategy, choice.depth, next(iter(extra), "none")))
    rotated = {plan if plan not in own else "none" for plan in FAULTS_OF[spec.family]}
    assert met == {(strategy, depth, plan) for strategy, depth in PORTFOLIO_STRATEGIES for plan in rotated}


def test_the_rotation_covers_pct_at_two_depths_and_every_fault_plan_but_none() -> None:
    assert {depth for strategy, depth in PORTFOLIO_STRATEGIES if strategy == "pct"} == {2, 5}
    plans = set().union(*FAULTS_OF.values())
    assert plans == set(scenarios.FAULT_PLANS)


def test_a_portfolio_run_is_run_scenario_under_its_choice() -> None:
    choice = portfolio_choice("priorities", 5)
    assert choice.strategy == "pct"
    direct = run_scenario("priorities", 5, strategy=choice.strategy, depth=choice.depth, faults=choice.faults)
    assert run_portfolio("priorities", 5).report == direct.report
    assert direct.report.replay_command == (
        f"conveyor replay priorities --seed 5 --strategy pct --depth {choice.depth} --faults {choice.faults}"
    )


def test_simulate_with_no_options_runs_the_portfolio_and_each_failure_replays_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A planted bug beneath the command line: every failure the default sweep prints replays, by its printed
    command, to the same verdicts and trace as the run under the portfolio's choice."""
    variant = Variant(queue=broker.SilentDrop)
    monkeypatch.setattr(scenarios, "run_scenario", functools.partial(run_scenario, variant=variant))
    result = runner.invoke(app, ["simulate", "fairness", "--seeds", "8"])
    assert result.exit_code == 1, result.output
    assert re.search(r"│ fairness +│ portfolio +│ rotated +│ +8 │ +8 │", result.output), result.output
    commands = re.findall(r"^  replay: (conveyor replay .*)$", result.output, re.MULTILINE)
    assert len(commands) == 8
    assert any("--strategy pct --depth" in command for command in commands)
    assert any("--faults" in command for command in commands)
    for seed, command in enumerate(commands):
        args = shlex.split(command)
        choice = portfolio_choice("fairness", seed)
        assert args[args.index("--seed") + 1] == str(seed)
        assert args[args.index("--strategy") + 1] == choice.strategy
        faults = args[args.index("--faults") + 1] if "--faults" in args else "none"
        assert faults == choice.faults
        depth = int(args[args.index("--depth") + 1]) if "--depth" in args else 3
        replayed = run_scenario("fairness", seed, strategy=choice.strategy, depth=depth, faults=faults,
                                variant=variant)
        assert replayed.report == run_portfolio("fairness", seed, variant=variant).report


def test_an_asked_strategy_keeps_the_scenarios_own_faults() -> None:
    result = runner.invoke(app, ["simulate", "crash-recovery", "--seeds", "2", "--strategy", "pct"])
    assert result.exit_code == 0, result.output
    assert re.search(r"│ crash-recovery +│ pct +│ crash +│", result.output), result.output
