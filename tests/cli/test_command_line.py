"""The command line as a whole: one name per idea, one --faults grammar, --version, -h, flags, --log-level."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.cli._simulate import full_replay_command
from conveyor.simulation.scenarios import run_scenario

runner = CliRunner()
WIDE = {"COLUMNS": "400"}


def _commands(command: Any = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command of the app with its path (``("bench", "runtime")``), groups included."""
    command = command or typer.main.get_command(app)
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


COMMANDS = [path for path, _ in _commands()]
LEAVES = [path for path, command in _commands() if not hasattr(command, "commands")]


def _flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


# --- --version, -h, flags ---------------------------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"conveyor {version('conveyor')}"


def test_version_from_the_installed_script() -> None:
    script = Path(sys.executable).parent / "conveyor"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"conveyor {version('conveyor')}"


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "conveyor")
def test_dash_h_is_help_on_every_command(path: tuple[str, ...]) -> None:
    short = runner.invoke(app, [*path, "-h"], env=WIDE)
    long = runner.invoke(app, [*path, "--help"], env=WIDE)
    assert short.exit_code == 0, short.output
    assert "Usage:" in short.output
    assert short.output == long.output


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "conveyor")
def test_flags_are_shown_as_flags(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env=WIDE)
    assert "<bool>" not in result.output
    assert "--help -h Show this message" in _flat(result.output)


def test_every_boolean_option_is_a_flag() -> None:
    booleans = [(path, param) for path, command in _commands() for param in command.params
                if param.type_descriptor.annotation is bool]
    assert len(booleans) >= 5  # --version, --shrink twice, --story, --profile, --rabbitmq ...
    for path, param in booleans:
        assert param.is_flag, f"{' '.join(path)} {param.opts} takes a value"


# --- --log-level --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_command_takes_log_level(path: tuple[str, ...]) -> None:
    command = dict(_commands())[path]
    (option,) = [param for param in command.params if "--log-level" in param.opts]
    assert [level.value for level in option.type_descriptor.choices] == ["debug", "info", "warning", "error"]


@pytest.mark.parametrize(("level", "shown", "hidden"), [
    ("debug", ["DEBUG", "INFO", "WARNING"], []),
    ("info", ["INFO", "WARNING"], ["DEBUG"]),
    ("warning", ["WARNING"], ["DEBUG", "INFO"]),
    ("error", [], ["DEBUG", "INFO", "WARNING"]),
])
def test_log_level_sets_what_conveyor_logs_on_stderr(
    level: str, shown: list[str], hidden: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def logs(scenario: str, **kwargs: object) -> int:
        for name in ("debug", "info", "warning"):
            getattr(logging.getLogger("conveyor.replay"), name)("a %s line", name)
        return 0

    monkeypatch.setattr("conveyor.cli._simulate.run_replay", logs)
    handlers = list(logging.getLogger("conveyor").handlers)
    result = runner.invoke(app, ["replay", "fairness", "--seed", "1", "--log-level", level])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    for name in shown:
        assert any(re.fullmatch(rf"\S+ \S+ {name} conveyor\.replay: a {name.lower()} line", line) for line in lines)
    for name in hidden:
        assert f"a {name.lower()} line" not in result.stderr
    assert logging.getLogger("conveyor").handlers == handlers  # set up for the command, taken down after


def test_a_bad_log_level_names_the_allowed_values() -> None:
    result = runner.invoke(app, ["simulate", "fairness", "--log-level", "loud"])
    assert result.exit_code == 2
    assert "'loud' is not one of 'debug', 'info', 'warning', 'error'" in _flat(result.output)


# --- one name per idea ----------------------------------------------------------------------------------


@pytest.fixture
def swept(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``conveyor sweep`` would have run (no Spark): the arguments given to ``run_sweep``."""
    calls: list[dict[str, Any]] = []

    class Outcome:
        failed = 0

    def record(**kwargs: Any) -> tuple[Outcome, None]:
        calls.append(kwargs)
        return Outcome(), None

    monkeypatch.setattr("conveyor.cli._sweep.run_sweep", record)
    return calls


def test_sweep_and_simulate_share_first_seed_and_strategy(swept: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["sweep", "--seeds", "1", "--first-seed", "7", "--strategy", "pct,round-robin"])
    assert result.exit_code == 0, result.output
    assert (swept[0]["seed_start"], swept[0]["strategies"]) == (7, "pct,round-robin")
    assert "deprecated" not in result.stderr
    for command in ("simulate", "sweep"):
        text = _flat(runner.invoke(app, [command, "--help"], env=WIDE).output)
        assert "--first-seed" in text and "--strategy " in text
        assert "--seed-start" not in text and "--strategies" not in text  # the old names are hidden


def test_the_old_sweep_names_still_work_with_a_note(swept: list[dict[str, Any]]) -> None:
    result = runner.invoke(app, ["sweep", "--seeds", "1", "--seed-start", "5", "--strategies", "random"])
    assert result.exit_code == 0, result.output
    assert (swept[0]["seed_start"], swept[0]["strategies"]) == (5, "random")
    assert result.stderr.splitlines() == [
        "note: sweep --strategies is deprecated; use --strategy",
        "note: sweep --seed-start is deprecated; use --first-seed",
    ]


def test_simulate_takes_lists_of_strategies_and_plans_as_sweep_does() -> None:
    result = runner.invoke(app, ["simulate", "fairness", "--seeds", "1", "--strategy", "random,pct",
                                 "--faults", "none,crash+delay"], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = {tuple(line.split("│")[1:4]) for line in result.output.splitlines() if line.startswith("│ fairness")}
    assert {tuple(cell.strip() for cell in row) for row in rows} == {
        ("fairness", "random", "none"), ("fairness", "random", "crash+delay"),
        ("fairness", "pct", "none"), ("fairness", "pct", "crash+delay"),
    }
    assert "All 4 runs passed" in result.output


def test_a_comma_lists_plans_and_plus_joins_them_in_simulate_and_sweep(swept: list[dict[str, Any]]) -> None:
    from conveyor.cli._options import parse_fault_list

    assert parse_fault_list("none,crash+delay,default") == ("none", "crash,delay", "default")
    runner.invoke(app, ["sweep", "--seeds", "1", "--faults", "none,crash+delay"])
    assert swept[0]["faults"] == "none,crash+delay"
    simulated = runner.invoke(app, ["simulate", "fairness", "--seeds", "1", "--strategy", "random",
                                    "--faults", "none,crash+delay"], env=WIDE)
    assert "All 2 runs passed" in simulated.output


def test_simulate_says_once_that_a_list_of_plain_plans_no_longer_combines_them() -> None:
    result = runner.invoke(app, ["simulate", "fairness", "--seeds", "1", "--strategy", "random",
                                 "--faults", "none,crash"])
    assert "All 2 runs passed" in result.output
    assert result.stderr.splitlines() == [
        "note: --faults none,crash runs each plan in turn, as sweep does; none+crash runs them in the same run "
        "(what none,crash meant before)"
    ]
    joined = runner.invoke(app, ["simulate", "fairness", "--seeds", "1", "--faults", "none,crash+delay"])
    assert joined.stderr == ""


def test_a_combined_plan_replays_from_the_printed_command_and_from_the_old_spelling() -> None:
    report = run_scenario("fairness", 3, faults="crash,delay").report
    command = full_replay_command(report)
    assert command.endswith("--faults crash+delay")
    printed = runner.invoke(app, command.split()[1:])
    assert f"trace hash {report.trace_hash}" in printed.output
    assert printed.stderr == ""
    old = runner.invoke(app, ["replay", "fairness", "--seed", "3", "--faults", "crash,delay"])
    assert f"trace hash {report.trace_hash}" in old.output
    assert old.stderr.strip() == "note: --faults crash,delay is deprecated; use --faults crash+delay (+ joins plans)"


def test_replay_refuses_two_plans_one_of_them_the_default() -> None:
    result = runner.invoke(app, ["replay", "fairness", "--seed", "3", "--faults", "default,crash"])
    assert result.exit_code == 2
    assert "replay runs one fault plan" in _flat(result.output)


@pytest.mark.parametrize(("level", "shown"), [("warning", False), ("debug", True)])
def test_actor_crashes_during_runs_are_quiet_unless_debug(
    level: str, shown: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conveyor.simulation import scenarios

    def crashing(*args: Any, **kwargs: Any) -> Any:
        logging.getLogger("conveyor.runtime").error("actor /queue crashed")
        return run_scenario(*args, **kwargs)

    monkeypatch.setattr(scenarios, "run_scenario", crashing)
    result = runner.invoke(app, ["replay", "fairness", "--seed", "1", "--log-level", level])
    assert result.exit_code == 0, result.output
    assert ("ERROR conveyor.runtime: actor /queue crashed" in result.stderr) is shown
