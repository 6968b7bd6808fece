"""A scenario written in the user's own module (``tests/simulation/user_bank.py``) on every path a built-in one takes.

``conveyor simulate MODULE:NAME`` finds its planted bug, the replay command it prints reproduces the
failure when run as printed (in a fresh process), ``replay --shrink`` shrinks it and replays the
shrunk run, an installed plugin is found by its entry point's name, and a bad name says what it found.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.runtime import EventKind
from conveyor.simulation import Delay
from conveyor.simulation.scenarios import (
    ActorScenario,
    ActorWorkload,
    get_scenario,
    list_scenarios,
    parse_scenario_names,
    portfolio_choice,
    run_scenario,
    scenario_names,
    shrink,
)
from conveyor.simulation.scenarios._plugins import find_scenario
from tests.simulation import user_bank

ROOT = Path(__file__).resolve().parents[2]
BANK = "tests.simulation.user_bank:bank"
runner = CliRunner()


def _flat(text: str) -> str:
    """The output without rich's box drawing and line wrapping, so a message reads as one line."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.fixture(autouse=True)
def _fresh_lookups() -> Iterator[None]:
    """Resolved names are cached per process: each test starts (and leaves) with none."""
    find_scenario.cache_clear()
    yield
    find_scenario.cache_clear()


def test_module_name_finds_the_scenario_by_attribute_or_by_its_name() -> None:
    by_name = get_scenario(BANK)
    by_attribute = get_scenario("tests.simulation.user_bank:BANK")
    assert by_name.family == by_attribute.family == "actors"
    assert by_name.summary == user_bank.BANK.summary
    work = by_name.build(3)
    assert isinstance(work, ActorWorkload) and work.data == user_bank.draw(3)


def test_simulate_finds_the_lost_update_and_prints_a_replay_command_that_reproduces_it() -> None:
    result = runner.invoke(app, ["simulate", BANK, "--seeds", "4", "--strategy", "random"])
    assert result.exit_code == 1, result.output
    failed = re.search(r"^FAILED (\S+) seed (\d+) .*\n  (no_lost_deposits: .*)\n  replay: (.*)$", result.output,
                       re.MULTILINE)
    assert failed is not None, result.output
    name, seed, violation, command = failed.groups()
    assert name == BANK
    assert command == f"conveyor replay {BANK} --seed {seed} --strategy random"
    # as printed: a fresh process, started from the project's folder, with the installed script on the PATH
    script = Path(sys.executable).parent
    env = os.environ | {"PATH": f"{script}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "200"}
    replayed = subprocess.run(shlex.split(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                              check=False)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert violation.split(": ", 1)[1] in replayed.stdout
    expected = run_scenario(BANK, int(seed), strategy="random").report.trace_hash
    assert f"trace hash {expected}" in replayed.stdout


def test_replay_shrink_shrinks_the_failure_then_replays_the_shrunk_run() -> None:
    choice = portfolio_choice(BANK, 1)
    args = ["replay", BANK, "--seed", "1", "--strategy", choice.strategy, "--depth", str(choice.depth),
            "--faults", choice.faults, "--shrink"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "Shrinking tests.simulation.user_bank:bank seed 1" in result.output
    assert "workload: ActorWorkload(data=Deposits(tellers=2, deposits=1))" in result.output
    assert re.search(r"/teller-\d -> /account: Write\(balance=1\)", result.output)
    assert "(the same as the shrunk run's)" in result.output
    assert result.output.count("the account holds 1 after 2 deposits of 1") >= 2  # the shrink's and the replay's


def test_replay_shrink_of_a_passing_run_only_replays() -> None:
    passing = next(seed for seed in range(20) if run_scenario(BANK, seed).report.ok)
    result = runner.invoke(app, ["replay", BANK, "--seed", str(passing), "--shrink"])
    assert result.exit_code == 0, result.output
    assert "every checker passed" in result.output
    assert "Shrinking" not in result.output


def test_the_shrinker_uses_the_scenarios_simpler_workloads_and_tells_its_actors_story() -> None:
    result = shrink(BANK, 0)
    assert result.workload == ActorWorkload(user_bank.Deposits(tellers=2, deposits=1), user_bank.BANK)
    assert result.checker == "no_lost_deposits"
    assert any("/auditor: notes Audited(balance=1)" in line for line in result.story)
    assert result.replay().report.trace_hash == result.report.trace_hash


def test_the_portfolio_rotates_the_scenarios_own_fault_plans() -> None:
    plans = {portfolio_choice(BANK, seed).faults for seed in range(4)}
    assert plans == {"none", "delay"}
    delayed = run_scenario(BANK, 1, faults="delay")
    applied = [event.message.fault for event in delayed.sim.trace if event.kind is EventKind.FAULT]
    assert [type(fault) for fault in applied] == [Delay]
    assert run_scenario(BANK, 1, faults="crash").sim.trace_hash() == run_scenario(BANK, 1).sim.trace_hash()


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("tests.simulation.no_such_module:bank",
         "module 'tests.simulation.no_such_module' does not import (ModuleNotFoundError"),
        ("tests.simulation.user_bank:bnk",
         "tests.simulation.user_bank.bnk is missing: module 'tests.simulation.user_bank' has no attribute 'bnk' and "
         "no scenario of that name; scenarios there: BANK (named bank)"),
        ("tests.simulation.user_bank:NOT_A_SCENARIO",
         "tests.simulation.user_bank.NOT_A_SCENARIO is a str ('a string'), not a scenario (an ActorScenario or a "
         "ScenarioSpec); scenarios there: BANK (named bank)"),
        ("tests.simulation.user_bank:draw", "user_bank.draw is a function"),
        (":bank", "names no module"),
        ("no-such-scenario", "unknown scenario 'no-such-scenario'; choose one of: fairness,"),
    ],
)
def test_a_bad_name_says_what_was_found_and_the_forms_a_name_takes(name: str, says: str) -> None:
    with pytest.raises(ValueError, match="MODULE:NAME") as error:
        get_scenario(name)
    assert says in str(error.value)
    result = runner.invoke(app, ["replay", name, "--seed", "0"])
    assert result.exit_code == 2
    assert says in _flat(result.output)


def test_a_scenario_name_that_would_not_parse_is_refused() -> None:
    for bad in ("", "a,b", "mod:x", "all"):
        with pytest.raises(ValueError, match="must be non-empty, without ','"):
            ActorScenario(bad, "", user_bank.draw, user_bank.spawn)
    with pytest.raises(TypeError, match="checks must be a tuple of checker functions"):
        ActorScenario("x", "", user_bank.draw, user_bank.spawn, checks=("no_lost_deposits",))  # type: ignore[arg-type]


def _install(folder: Path, entries: dict[str, str]) -> None:
    """A distribution installed in ``folder`` (its dist-info only) with ``entries`` in the scenarios' group."""
    info = folder / "bank_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bank-plugin\nVersion: 1.0\n", encoding="utf-8")
    lines = [f"{name} = {value}" for name, value in entries.items()]
    (info / "entry_points.txt").write_text("[conveyor.scenarios]\n" + "\n".join(lines) + "\n", encoding="utf-8")


def test_an_installed_plugin_is_named_by_its_entry_point_and_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bank = "tests.simulation.user_bank:BANK"
    _install(tmp_path, {"teller-bank": bank, "fairness": bank})
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = get_scenario("teller-bank")
    assert spec.name == "teller-bank" and spec.family == "actors"
    assert get_scenario("fairness").family == "broker"  # a built-in name is never taken over
    listed = {entry.name: entry for entry in list_scenarios()}
    assert listed["teller-bank"].origin == "plugin bank-plugin (tests.simulation.user_bank:BANK)"
    assert parse_scenario_names("plugins") == ("teller-bank",)
    assert "teller-bank" not in parse_scenario_names("all")  # all stays conveyor's own gate
    assert parse_scenario_names("all,plugins") == (*scenario_names(), "teller-bank")
    result = runner.invoke(app, ["simulate", "teller-bank", "--seeds", "2", "--strategy", "random"])
    assert "replay: conveyor replay teller-bank --seed 0 --strategy random" in result.output
    listing = runner.invoke(app, ["simulate", "--list"])
    assert listing.exit_code == 0
    assert "teller-bank" in listing.output and "bank-plugin" in listing.output


def test_a_broken_plugin_is_listed_as_broken_and_named_in_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, {"broken-bank": "tests.simulation.user_bank:NOT_A_SCENARIO"})
    monkeypatch.syspath_prepend(str(tmp_path))
    listed = {entry.name: entry for entry in list_scenarios()}
    assert listed["broken-bank"].summary.startswith("BROKEN: plugin scenario 'broken-bank'")
    with pytest.raises(ValueError, match=r"plugin scenario 'broken-bank' \(tests.simulation.user_bank:NOT_A_SCENARIO"
                       r", entry point group conveyor.scenarios\) is a str"):
        parse_scenario_names("plugins")


DOCS = ROOT / "docs" / "simulation.md"


def _docs_examples() -> list[str]:
    """The Python blocks of docs/simulation.md, "Writing a scenario": a ScenarioSpec's module, an ActorScenario's."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Writing a scenario\n") : text.index("## Writing a checker\n")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_docs_actor_scenario_is_the_tested_module_word_for_word() -> None:
    source = Path(user_bank.__file__).read_text(encoding="utf-8")
    module = source[source.index("from __future__ import annotations") : source.index("# --- end of the docs")]
    assert _docs_examples()[1].strip() == module.strip()


@pytest.mark.parametrize(("index", "name", "fails"), [(0, "docs_stragglers:stragglers", False),
                                                      (1, "docs_bank:bank", True)])
def test_the_docs_examples_run_from_a_users_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: int, name: str, fails: bool
) -> None:
    module = name.partition(":")[0]
    (tmp_path / f"{module}.py").write_text(_docs_examples()[index], encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = runner.invoke(app, ["simulate", name, "--seeds", "2", "--strategy", "random"])
    finally:
        sys.modules.pop(module, None)
    assert result.exit_code == (1 if fails else 0), result.output
    assert re.search(rf"^│ {re.escape(name)} +│ random +│ none +│ +2 │", result.output, re.MULTILINE), result.output
    if fails:
        assert f"replay: conveyor replay {name} --seed 0 --strategy random" in result.output
