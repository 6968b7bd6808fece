"""The Spark sweep: its rows are the in-process runs, its aggregates find a planted failure, its replay works.

One small sweep (3 scenarios x 4 seeds x 2 strategies x 2 fault plans = 48 runs) runs once
for the module, through the command line's own driver (progress bar and printing included),
on the session-wide ``local[2]`` SparkSession.

The planted failure is a step budget: every run of the matrix is first run in process with
the registry's default budget, and the sweep then gets a budget one step below the longest
of them. Exactly the longest run(s) cannot go quiet in time, which ``run_scenario`` reports
as cut off ("step budget exhausted: ... budget of N delivery steps"), deterministically, for
seeds the test knows in advance, and ``conveyor replay ... --max-steps N`` reproduces it. It
depends on no bug in the actors, so fixing one elsewhere cannot make this test pass vacuously.
"""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import attrs
import pytest
from pyspark.sql import SparkSession
from rich.console import Console
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.cli._sweep import run_sweep
from conveyor.simulation.scenarios import RunReport, queue_figures, run_scenario
from conveyor.simulation.sweep import (
    COST_HINTS_MS,
    MATRIX_SCHEMA,
    ROW_SCHEMA,
    SweepCell,
    SweepOutcome,
    build_matrix,
    latency_spreads,
    matrix_frame,
    parse_fault_plans,
    plan_partitions,
    queue_depth_series,
    run_cells,
    sweep_replay_command,
)
from conveyor.simulation.sweep._rows import ROW_COLUMNS, report_row

SCENARIOS = ("leases", "crash-recovery", "fairness")
SEEDS = 4
STRATEGIES = ("random", "pct")
PLANS = ("none", "pause")
Key = tuple[str, int, str, str]


def _key(row: dict[str, object]) -> Key:
    return (str(row["scenario"]), int(str(row["seed"])), str(row["strategy"]), str(row["faults"]))


@attrs.frozen
class Swept:
    outcome: SweepOutcome
    report: Path
    printed: str
    rows: dict[Key, dict[str, object]]
    budget: int
    planted: frozenset[Key]


@pytest.fixture(scope="module")
def swept(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Swept:
    cells = build_matrix(SCENARIOS, SEEDS, STRATEGIES, PLANS)
    steps = {
        (c.scenario, c.seed, c.strategy, c.faults): run_scenario(
            c.scenario, c.seed, strategy=c.strategy, depth=c.depth, faults=c.faults
        ).report.steps
        for c in cells
    }
    budget = max(steps.values()) - 1
    buffer = io.StringIO()
    outcome, report = run_sweep(
        scenarios=",".join(SCENARIOS), seeds=SEEDS, strategies=",".join(STRATEGIES), faults=",".join(PLANS),
        max_steps=budget, out=tmp_path_factory.mktemp("sweep") / "report",
        console=Console(file=buffer, width=200), spark=spark,
    )
    rows = {_key(row.asDict()): row.asDict() for row in spark.read.parquet(str(outcome.runs_path)).collect()}
    planted = frozenset(key for key, count in steps.items() if count > budget)
    return Swept(outcome, report, buffer.getvalue(), rows, budget, planted)


def test_the_rows_are_the_in_process_runs_of_the_same_matrix(swept: Swept) -> None:
    cells = build_matrix(SCENARIOS, SEEDS, STRATEGIES, PLANS, max_steps=swept.budget)
    assert len(cells) == len(swept.rows) == 48
    direct = {}
    for c in cells:
        report = run_scenario(c.scenario, c.seed, strategy=c.strategy, depth=c.depth, faults=c.faults,
                              max_steps=c.max_steps).report
        row = report_row(report, swept.budget)
        direct[(c.scenario, c.seed, c.strategy, c.faults)] = dict(zip(ROW_COLUMNS, row, strict=True))
    assert swept.rows == direct


def test_a_row_is_the_registry_report_with_the_replay_command_in_full(swept: Swept) -> None:
    key = ("crash-recovery", 2, "random", "none")
    row = swept.rows[key]
    report = run_scenario("crash-recovery", 2, strategy="random", faults="none", max_steps=swept.budget).report
    assert {k: v for k, v in report.as_row().items() if k != "replay_command"} == {
        k: v for k, v in row.items() if k != "replay_command"
    }
    # without "--faults none" a replay would run crash-recovery's default plan (crash): another run
    assert row["replay_command"] == f"{report.replay_command} --max-steps {swept.budget}"
    assert row["replay_command"].count("--faults none") == 1


def test_the_planted_failure_is_found_with_its_first_seed(swept: Swept) -> None:
    assert swept.planted  # the longest run(s) of the matrix
    failing = {key for key, row in swept.rows.items() if row["violations"]}
    assert failing == swept.planted
    for key in swept.planted:
        assert any(line.startswith("step budget exhausted:") for line in swept.rows[key]["violations"])  # type: ignore[attr-defined]
    groups = {(g.scenario, g.strategy, g.faults): g for g in swept.outcome.summary}
    assert len(groups) == len(SCENARIOS) * len(STRATEGIES) * len(PLANS)
    for (scenario, strategy, faults), group in groups.items():
        seeds = sorted(seed for (s, seed, st, f) in swept.planted if (s, st, f) == (scenario, strategy, faults))
        assert group.runs == SEEDS
        assert group.failed == len(seeds)
        assert group.violation_rate == len(seeds) / SEEDS
        assert group.first_failing_seed == (seeds[0] if seeds else None)
        assert group.seeds_to_first_failure == (seeds[0] + 1 if seeds else None)
    assert swept.outcome.failed == len(swept.planted)
    assert {(f.scenario, f.seed, f.strategy, f.faults) for f in swept.outcome.failures} <= swept.planted


def test_the_failing_rows_replay_command_reproduces_it(swept: Swept) -> None:
    for key in sorted(swept.planted):
        row = swept.rows[key]
        command = str(row["replay_command"])
        assert f"--max-steps {swept.budget}" in command
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        assert result.exit_code == 1, result.output  # the replay fails as the sweep's run did
        assert f"trace hash {row['trace_hash']}" in result.output
        assert f"budget of {swept.budget} delivery steps" in result.output


def test_a_passing_row_replays_with_its_own_fault_plan(swept: Swept) -> None:
    row = swept.rows[("crash-recovery", 2, "random", "none")]
    assert not row["violations"]
    result = CliRunner().invoke(app, shlex.split(str(row["replay_command"]))[1:])
    assert result.exit_code == 0, result.output
    assert f"trace hash {row['trace_hash']}" in result.output


def test_the_command_prints_the_summary_and_the_report(swept: Swept) -> None:
    assert f"conveyor sweep: 48 runs, {len(swept.planted)} with violations" in swept.printed
    first = swept.outcome.failures[0]
    assert f"replay: {first.replay_command}" in swept.printed
    assert f"Report: {swept.report}" in swept.printed.replace("\n", "")
    text = swept.report.read_text(encoding="utf-8")
    assert "| leases | pct | pause | 4 |" in text
    assert f"`{first.replay_command}`" in text
    for image in ("fairness_by_consumers.png", "latency_by_scenario.png", "queue_depth.png"):
        assert f"]({image})" in text
        assert (swept.report.parent / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (swept.outcome.out / "summary.parquet").is_dir()


def test_each_plot_is_explained_in_a_sentence_under_it(swept: Swept) -> None:
    text = swept.report.read_text(encoding="utf-8")
    for image, words in (("fairness_by_consumers.png", "The dotted line is the 0.8"),
                         ("latency_by_scenario.png", "one row per scenario"),
                         ("queue_depth.png", "the solid line counts messages")):
        after = text.split(f"]({image})", 1)[1].strip().split("\n", 1)[0]
        assert words in after, after


def test_the_report_wall_time_is_the_one_the_command_prints(swept: Swept) -> None:
    printed = swept.printed.split("Sweep done in ", 1)[1].split(" s.", 1)[0]
    assert f"- wall time: {printed} s in all" in swept.report.read_text(encoding="utf-8")


def test_the_latency_plot_has_a_row_for_every_scenario_with_latencies(swept: Swept, spark: SparkSession) -> None:
    spreads = latency_spreads(spark, spark.read.parquet(str(swept.outcome.runs_path)))
    assert [s.scenario for s in spreads] == sorted(SCENARIOS)
    for spread in spreads:
        assert spread.runs == len(STRATEGIES) * len(PLANS) * SEEDS
        assert list(spread.p50) == sorted(spread.p50) and list(spread.p99) == sorted(spread.p99)


@pytest.mark.parametrize(("max_steps", "code"), [(10, 1), (500_000, 0)], ids=["a-run-fails", "all-pass"])
def test_the_command_exits_1_when_any_run_failed(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_steps: int, code: int
) -> None:
    # The command's own driver, on the session-wide SparkSession (a new one would cost 5-10 s).
    monkeypatch.setattr("conveyor.cli._sweep.run_sweep", lambda **kw: run_sweep(**kw, spark=spark))
    result = CliRunner().invoke(app, [
        "sweep", "--scenarios", "fairness", "--seeds", "2", "--strategy", "random", "--faults", "none",
        "--max-steps", str(max_steps), "--out", str(tmp_path / "report"),
    ])
    assert result.exit_code == code, result.output
    failed = 2 if code else 0
    assert f"conveyor sweep: 2 runs, {failed} with violations" in " ".join(result.output.split())


def test_the_matrix_frame_has_the_planned_partitions(spark: SparkSession) -> None:
    cells = build_matrix(["fairness", "groups", "priorities"], 10, ["random"], ["none"])
    planned = plan_partitions(cells, 4)
    frame = matrix_frame(spark, cells, 4)
    parts = frame.rdd.glom().collect()
    assert [[SweepCell(*row) for row in part] for part in parts] == planned


def test_the_partitions_balance_the_estimated_cost_and_mix_the_scenarios() -> None:
    cells = build_matrix(["fairness", "groups", "crash-recovery", "leases"], 50, ["random", "pct"])
    groups = plan_partitions(cells, 8)
    dealt = [cell for group in groups for cell in group]
    assert len(dealt) == len(cells) and set(dealt) == set(cells)
    loads = [sum(COST_HINTS_MS[cell.scenario] for cell in group) for group in groups]
    assert max(loads) - min(loads) <= max(COST_HINTS_MS.values())
    assert all(len({cell.scenario for cell in group}) >= 3 for group in groups)
    assert plan_partitions(cells, 8) == groups  # the same deal every time
    assert len(plan_partitions(cells[:3], 8)) == 3  # never an empty partition


def test_fault_plan_entries_and_defaults() -> None:
    assert parse_fault_plans("none, crash+delay ,default,none") == ("none", "crash,delay", "default")
    cells = build_matrix(["crash-recovery", "fairness"], 1, ["random"], ["default", "crash"])
    assert [(c.scenario, c.faults) for c in cells] == [("crash-recovery", "crash"), ("fairness", "none"),
                                                     ("fairness", "crash")]
    with pytest.raises(ValueError, match="unknown fault plan 'fire'"):
        parse_fault_plans("none,fire")
    for empty in ("", " ", "none,", "crash+", "crash++delay"):  # refused, never read as the default
        with pytest.raises(ValueError, match=r"empty fault plan in .*; choose one or more \(comma separated\) of: "
                                             r"default, none, crash"):
            parse_fault_plans(empty)


def test_a_run_that_raises_becomes_an_error_row() -> None:
    (row,) = list(run_cells([("no-such-scenario", 3, "random", 3, "none", 500_000)]))
    values = dict(zip(ROW_SCHEMA.names, row, strict=True))
    assert values["violations"][0].startswith("error: ValueError: unknown scenario 'no-such-scenario'")
    assert values["replay_command"] == "conveyor replay no-such-scenario --seed 3 --strategy random"
    assert sweep_replay_command("fairness", 1, "random", 3, "none") == (
        "conveyor replay fairness --seed 1 --strategy random"
    )


def test_the_schemas_follow_the_report_and_the_matrix() -> None:
    assert ROW_COLUMNS == tuple(ROW_SCHEMA.names) == tuple(field.name for field in attrs.fields(RunReport))
    assert tuple(MATRIX_SCHEMA.names) == tuple(field.name for field in attrs.fields(SweepCell))


def test_queue_depth_series_follows_the_queue() -> None:
    run = run_scenario("fairness", 4)
    series = queue_depth_series(run.sim.trace)
    figures = queue_figures(run.sim.trace)
    assert series[-1].queued == 0 and series[-1].in_flight == 0  # everything acked
    assert max(point.queued for point in series) <= figures.published
    assert max(point.in_flight for point in series) == figures.max_outstanding
    assert [point.time for point in series] == sorted(point.time for point in series)
