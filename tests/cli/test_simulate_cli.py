"""``conveyor simulate`` and ``conveyor replay`` through typer's test runner."""

from __future__ import annotations

import functools
import importlib
import re

import pytest
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.cli._simulate import compact, full_replay_command
from conveyor.simulation import scenarios
from conveyor.simulation.scenarios import BrokerScenario, ClientPolicy, Variant, run_scenario, scenario_names
from tests.simulation.test_broker_scenarios import Forgetful, _queue_with

simulation = importlib.import_module("conveyor.simulation.scenarios")  # the package whose ``shrink`` a test swaps
runner = CliRunner()


def _flat(text: str) -> str:
    """The output without rich's box drawing and line wrapping, so a message reads as one line."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_simulate_runs_the_seeds_and_prints_a_summary_table() -> None:
    result = runner.invoke(app, ["simulate", "fairness", "--seeds", "3", "--first-seed", "4", "--strategy", "random"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.startswith("│ fairness"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells[:5] == ["fairness", "random", "none", "3", "0"]
    assert float(cells[6]) >= 0.8  # mean Jain's index
    assert "All 3 runs passed every checker." in result.output


def test_simulate_all_runs_every_scenario() -> None:
    result = runner.invoke(app, ["simulate", "all", "--seeds", "1", "--strategy", "pct", "--depth", "2"])
    assert result.exit_code == 0, result.output
    for name in scenario_names():
        assert re.search(rf"^│ {re.escape(name)} +│ pct ", result.output, re.MULTILINE), name


def test_replay_prints_the_same_trace_hash_as_the_run() -> None:
    run = run_scenario("priorities", 7, strategy="pct", depth=2, faults="delay")
    result = runner.invoke(
        app, ["replay", "priorities", "--seed", "7", "--strategy", "pct", "--depth", "2", "--faults", "delay"]
    )
    assert result.exit_code == 0, result.output
    assert f"trace hash {run.report.trace_hash}" in result.output
    assert "strict_order: ok" in result.output
    assert "every checker passed" in result.output


def test_replay_can_tell_the_story() -> None:
    result = runner.invoke(app, ["replay", "fairness", "--seed", "2", "--story"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^  t=\d+\.\d{3} /queue -> /client-\d+/consumer: deliver m\d+ \(attempt 1\)$", result.output,
                     re.MULTILINE)


def test_the_replay_command_names_the_plan_when_it_is_not_the_scenario_default() -> None:
    report = run_scenario("crash-recovery", 2, faults="none").report
    command = full_replay_command(report)
    assert command == "conveyor replay crash-recovery --seed 2 --strategy random --faults none"
    result = runner.invoke(app, command.split()[1:])
    assert f"trace hash {report.trace_hash}" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["simulate", "nope"], "unknown scenario 'nope'; choose one of: fairness, priorities,"),
        (["simulate", "fairness", "--strategy", "dfs"], "'--strategy': unknown strategy 'dfs'; choose one of: "
                                                        "random, pct, round-robin"),
        (["simulate", "fairness", "--faults", "crash,fire"], "'--faults': unknown fault plan 'fire'"),
        (["simulate", "fairness", "--seeds", "0"], "'--seeds'"),
        (["replay", "all", "--seed", "1"], "unknown scenario 'all'"),
        (["replay", "fairness"], "--seed"),
    ],
)
def test_bad_arguments_name_the_option_and_the_allowed_values(arguments: list[str], message: str) -> None:
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2
    assert message in _flat(result.output)


def test_simulate_names_all_and_plugins_as_choices() -> None:
    result = runner.invoke(app, ["simulate", "nope"])
    choices = _flat(result.output).split("choose one of: ")[1].split(";")[0].split(", ")
    assert choices[-2:] == ["all", "plugins"]


def test_a_failing_run_prints_its_seed_messages_replay_command_and_shrunk_story(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The command line has no flag for planted bugs; the test swaps one in beneath it.
    variant = Variant(queue=_queue_with(Forgetful))
    monkeypatch.setattr(scenarios, "run_scenario",
                        functools.partial(run_scenario, variant=variant))
    monkeypatch.setattr(simulation, "shrink", functools.partial(simulation.shrink, variant=variant))
    result = runner.invoke(app, ["simulate", "priorities", "--seeds", "2", "--shrink"])
    assert result.exit_code == 1, result.output
    output = result.output
    failed = re.search(r"^FAILED priorities seed (\d+) \(random, faults none\): \d+ violation", output, re.MULTILINE)
    assert failed, output
    assert re.search(r"^  accounting: ", output, re.MULTILINE)
    assert f"  replay: conveyor replay priorities --seed {failed.group(1)} --strategy random" in output
    shrunk = re.search(r"^Shrunk to (\d+) delivery steps \(from (\d+)\)", output, re.MULTILINE)
    assert shrunk and int(shrunk.group(1)) <= 15
    story = output.split("story:\n", 1)[1].splitlines()
    assert sum(1 for line in story if ": deliver " in line) == int(shrunk.group(1))
    assert re.search(r"runs failed\.$", output, re.MULTILINE)


def test_a_shrunk_workload_prints_only_what_differs_from_the_defaults() -> None:
    workload = BrokerScenario(messages=2, consumers=(ClientPolicy(),) * 2, publish_span_s=0.0)
    assert compact(workload) == "BrokerScenario(messages=2, consumers=2 x ClientPolicy(), publish_span_s=0.0)"
    mixed = BrokerScenario(consumers=(ClientPolicy(nack=0.1), ClientPolicy()), consumer_priorities=(1, 0))
    assert compact(mixed) == (
        "BrokerScenario(consumers=(ClientPolicy(nack=0.1), ClientPolicy()), consumer_priorities=(1, 0))"
    )


@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_the_help_names_every_fault_plan(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for plan in scenarios.FAULT_PLANS:
        assert plan in text, f"{command} --help does not name {plan!r}"


_COMMANDS = {"simulate": ["simulate", "fairness", "--seeds", "1"], "replay": ["replay", "fairness", "--seed", "1"],
             "sweep": ["sweep", "--seeds", "1"]}
_EMPTY_PLANS = [(name, faults) for name in _COMMANDS for faults in ["", " ", ",", "crash,,delay", "crash+"]
                if faults != "crash+" or name == "sweep"]  # '+' joins plans in sweep only


@pytest.mark.parametrize(("name", "faults"), _EMPTY_PLANS)
def test_an_empty_fault_plan_is_refused_not_replaced_by_the_default(
    name: str, faults: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = _COMMANDS[name]
    swept: list[object] = []
    monkeypatch.setattr("conveyor.cli._sweep.run_sweep", lambda **kw: swept.append(kw))  # no Spark if it got by
    result = runner.invoke(app, [*command, "--faults", faults])
    text = _flat(result.output)
    assert result.exit_code == 2, text
    assert "Invalid value for '--faults'" in text
    assert "empty fault plan" in text and "choose one or more" in text and "none" in text
    assert swept == []
