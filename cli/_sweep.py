"""``conveyor sweep`` (and ``conveyor analyze`` on Spark, cli/_analyze.py): the driver side of the Spark jobs.

What is here and not in ``conveyor.simulation.sweep``: the wall clock (how long the
sweep took), the thread that polls Spark's status tracker for the progress bar, the
session's lifetime, and the printing. The simulation package keeps no clock and no
thread (``tests/test_standing_rules.py``), so everything that needs one lives here.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import SparkSession
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from conveyor.simulation.scenarios import spell_fault_plan
from conveyor.simulation.sweep import (
    SweepOutcome,
    SweepSpec,
    execute_sweep,
    parse_fault_plans,
    parse_scenarios,
    parse_strategies,
    prepare_report,
    ship_code,
    spark_session,
    summary_cells,
)

from ._simulate import importable_from_cwd

POLL_S = 0.25
"""How often the progress bar asks Spark's status tracker."""
SHOWN_FAILURES = 12


class SparkProgress:
    """Runs one Spark action under a rich progress bar fed by ``statusTracker()``.

    The action's jobs are tagged with a fresh job group; a thread polls the group's
    stages for completed / total tasks until the action returns. Each task is a
    partition of many runs, so the bar moves a partition at a time; the run count
    beside it is estimated from the task fraction.
    """

    def __init__(self, spark: SparkSession, console: Console, description: str, runs: int, unit: str = "runs") -> None:
        self.spark = spark
        self.console = console
        self.description = description
        self.runs = runs
        self.unit = unit

    def _tasks(self, group: str) -> tuple[int, int]:
        tracker = self.spark.sparkContext.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        return done, total

    def run(self, action: Callable[[], None]) -> None:
        """Run ``action`` (a Spark action) and show its progress until it returns."""
        context = self.spark.sparkContext
        group = f"conveyor-{uuid.uuid4().hex[:12]}"
        context.setJobGroup(group, self.description)
        columns = (
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("tasks"),
            TextColumn(f"~{{task.fields[runs]}} {self.unit}"), TimeElapsedColumn(),
        )
        stop = threading.Event()
        with Progress(*columns, console=self.console, transient=False) as progress:
            bar = progress.add_task(self.description, total=None, runs=f"0/{self.runs}")

            def show(done: int, total: int) -> None:
                if total:
                    runs = round(self.runs * done / total)
                    progress.update(bar, completed=done, total=total, runs=f"{runs}/{self.runs}")

            def poll() -> None:
                while not stop.wait(POLL_S):
                    show(*self._tasks(group))

            watcher = threading.Thread(target=poll, name="conveyor-spark-progress", daemon=True)
            watcher.start()
            try:
                action()
            finally:
                stop.set()
                watcher.join()
                context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            show(*self._tasks(group))


def _wide_console() -> Console:
    """A console that does not squeeze the summary into 80 columns when output is piped (make, CI logs)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=150)
    return console


def print_summary(outcome: SweepOutcome, console: Console) -> None:
    """The aggregates as a table, then each group's first failure with its replay command."""
    table = Table(title=f"conveyor sweep: {outcome.runs} runs, {outcome.failed} with violations")
    shown = (0, 1, 2, 3, 4, 5, 6, 9, 11, 12)  # of SUMMARY_HEADER: the columns that fit a terminal
    headers = ("scenario", "strategy", "faults", "runs", "failed", "violations", "1st failing seed",
               "fairness p50", "latency p50 ms", "latency p99 ms")
    for index, header in enumerate(headers):
        table.add_column(header, justify="left" if index < 3 else "right", no_wrap=index < 3)
    for group in outcome.summary:
        cells = summary_cells(group)
        table.add_row(*(cells[i] for i in shown), style="red" if group.failed else None)
    console.print(table)
    for failure in outcome.failures[:SHOWN_FAILURES]:
        faults = spell_fault_plan(failure.faults)  # a combined plan as --faults spells it: crash+delay
        console.print(f"[red]{failure.scenario} / {failure.strategy} / {faults}[/red] seed {failure.seed}: "
                      f"{failure.violations[0][:140]}")
        console.print(f"  replay: [bold]{failure.replay_command}[/bold]", soft_wrap=True)
    if len(outcome.failures) > SHOWN_FAILURES:
        console.print(f"... and {len(outcome.failures) - SHOWN_FAILURES} more groups with failures (see the report)")


def run_sweep(
    *,
    scenarios: str = "all",
    seeds: int = 20,
    strategies: str = "random,pct",
    faults: str = "default",
    depth: int = 3,
    seed_start: int = 0,
    master: str | None = None,
    out: Path = Path("reports/sweep"),
    partitions_per_core: int = 4,
    max_steps: int = 500_000,
    console: Console | None = None,
    spark: SparkSession | None = None,
    py_files: Sequence[Path] = (),
) -> tuple[SweepOutcome, Path]:
    """Run a sweep end to end and print its summary; return the outcome and the report's path.

    Starts the SparkSession for ``master`` (and stops it) unless ``spark`` is given; ``py_files``
    (the user's own modules) go to the executors beside conveyor's code, on a given session too.

    Raises:
        ValueError: an unknown scenario, strategy or fault plan, no seeds, or a missing ``py_files`` entry.
    """
    console = console or _wide_console()
    importable_from_cwd(scenarios)
    spec = SweepSpec(
        scenarios=parse_scenarios(scenarios), seeds=seeds, strategies=parse_strategies(strategies),
        fault_plans=parse_fault_plans(faults), seed_start=seed_start, depth=depth,
        partitions_per_core=partitions_per_core, max_steps=max_steps,
    )
    runs = len(spec.cells())
    started = time.perf_counter()
    if spark is not None:
        ship_code(spark, py_files)  # checks them first: a missing file fails before anything runs
    session = spark or spark_session(master, app_name="conveyor-sweep", py_files=py_files)
    try:
        ready = time.perf_counter()
        chosen = session.sparkContext.master
        cores = session.sparkContext.defaultParallelism
        console.print(
            f"Spark {session.version} on {chosen} ({cores} cores) "
            f"ready in {ready - started:.1f} s; {runs} runs"
        )
        progress = SparkProgress(session, console, "simulating", runs)
        outcome = execute_sweep(session, spec, out, run_action=progress.run)
        swept = time.perf_counter()
        draft = prepare_report(session, outcome)
        reported = time.perf_counter()
    finally:
        if spark is None:
            session.stop()
    total = time.perf_counter() - started
    report = draft.write({
        "master": f"`{chosen}` ({cores} cores)",
        "wall time": f"{total:.1f} s in all: Spark start-up {ready - started:.1f} s, runs and aggregates "
                     f"{swept - ready:.1f} s, plots {reported - swept:.1f} s, Spark shutdown "
                     f"{total - (reported - started):.1f} s",
    })
    print_summary(outcome, console)
    console.print(f"Sweep done in {total:.1f} s. Report: [bold]{report}[/bold] (rows: {outcome.runs_path})")
    return outcome, report
