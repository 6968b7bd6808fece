"""The sweep as a Spark job: matrix DataFrame -> mapPartitions of runs -> Parquet -> Spark SQL aggregates.

The matrix is dealt into a few partitions per core before Spark sees it (``plan_partitions``),
so each task runs many simulations and the tasks cost about the same. The rows are
computed once, by the action that writes them to Parquet; every aggregate reads the
Parquet back, so no simulation runs twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, final

import attrs
from pyspark.sql import DataFrame, Row, SparkSession

from conveyor.simulation.scenarios import scenario_search_path

from ._matrix import DEFAULT_MAX_STEPS, DEFAULT_PLAN, SweepCell, build_matrix, partition_count, plan_partitions
from ._rows import MATRIX_SCHEMA, ROW_SCHEMA, flatten, run_cells

RUNS_DIR = "runs.parquet"
SUMMARY_DIR = "summary.parquet"


@final
@attrs.frozen
class SweepSpec:
    """What to sweep: the matrix's axes, and how finely to split it.

    Attributes:
        scenarios: registry names.
        seeds: how many seeds per (scenario, strategy, fault plan), from ``seed_start``.
        strategies: strategy names.
        fault_plans: matrix entries (``default``: each scenario's own plan; ``crash,delay``: both at once).
        seed_start: the first seed.
        depth: PCT's bug depth.
        partitions_per_core: partitions = cores x this (never more than runs).
        max_steps: each run's step budget; a run that has not gone quiet by then fails.
    """

    scenarios: tuple[str, ...]
    seeds: int
    strategies: tuple[str, ...]
    fault_plans: tuple[str, ...] = (DEFAULT_PLAN,)
    seed_start: int = 0
    depth: int = 3
    partitions_per_core: int = 4
    max_steps: int = DEFAULT_MAX_STEPS

    def cells(self) -> list[SweepCell]:
        """The matrix, in order."""
        return build_matrix(
            self.scenarios, self.seeds, self.strategies, self.fault_plans, seed_start=self.seed_start,
            depth=self.depth, max_steps=self.max_steps,
        )


@final
@attrs.frozen
class GroupSummary:
    """The aggregates of one (scenario, strategy, fault plan) over its seeds.

    ``first_failing_seed`` is the smallest seed with a violation (what to replay);
    ``seeds_to_first_failure`` is how many seeds, counted from the first one swept, it
    took to find it (``None`` for both when every run passed). Fairness figures are
    over runs with at least two consumers; latency figures are the median run's median
    delivery latency and the 99th percentile of the runs' 99th percentiles, in virtual ms.
    """

    scenario: str
    strategy: str
    faults: str
    runs: int
    failed: int
    violation_rate: float
    first_failing_seed: int | None
    seeds_to_first_failure: int | None
    fairness_min: float | None
    fairness_p10: float | None
    fairness_p50: float | None
    fairness_mean: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    steps_mean: float
    virtual_time_mean: float


@final
@attrs.frozen
class FirstFailure:
    """The first failing run of a group: its seed, first violation and the command that replays it."""

    scenario: str
    strategy: str
    faults: str
    seed: int
    violations: tuple[str, ...]
    replay_command: str


@final
@attrs.frozen
class SweepOutcome:
    """A finished sweep: where its rows are, and what the aggregates say."""

    spec: SweepSpec
    out: Path
    partitions: int
    runs: int
    failed: int
    summary: tuple[GroupSummary, ...]
    failures: tuple[FirstFailure, ...]

    @property
    def runs_path(self) -> Path:
        """The Parquet folder of the rows (one row per run)."""
        return self.out / RUNS_DIR


def matrix_frame(spark: SparkSession, cells: Sequence[SweepCell], partitions: int) -> DataFrame:
    """The matrix as a DataFrame in ``partitions`` partitions of about equal cost (``plan_partitions``).

    Each planned group becomes exactly one partition: ``parallelize`` of N lists in N
    slices gives one list per slice, and ``flatMap`` keeps the partitioning.
    """
    groups = [[cell.as_tuple() for cell in group] for group in plan_partitions(cells, partitions)]
    rdd = spark.sparkContext.parallelize(groups, len(groups)).flatMap(flatten)
    return spark.createDataFrame(rdd, MATRIX_SCHEMA)


def runs_frame(spark: SparkSession, matrix: DataFrame, search_path: Sequence[str] = ()) -> DataFrame:
    """One row per matrix row (``ROW_SCHEMA``), each partition's runs made by one task (lazy).

    ``search_path``: folders the workers put on ``sys.path`` to import users' scenario modules.
    """
    runs = functools.partial(run_cells, search_path=tuple(search_path))
    return spark.createDataFrame(matrix.rdd.mapPartitions(runs), ROW_SCHEMA)


_SUMMARY_SQL = """
SELECT scenario, strategy, faults,
       count(*) AS runs,
       count_if(size(violations) > 0) AS failed,
       avg(CAST(size(violations) > 0 AS DOUBLE)) AS violation_rate,
       min(IF(size(violations) > 0, seed, NULL)) AS first_failing_seed,
       min(IF(size(violations) > 0, seed, NULL)) - min(seed) + 1 AS seeds_to_first_failure,
       min(fairness) AS fairness_min,
       percentile_approx(fairness, 0.1, 10000) AS fairness_p10,
       percentile_approx(fairness, 0.5, 10000) AS fairness_p50,
       avg(fairness) AS fairness_mean,
       percentile_approx(latency_p50_ms, 0.5, 10000) AS latency_p50_ms,
       percentile_approx(latency_p99_ms, 0.99, 10000) AS latency_p99_ms,
       avg(steps) AS steps_mean,
       avg(virtual_time) AS virtual_time_mean
FROM {runs}
GROUP BY scenario, strategy, faults
ORDER BY scenario, strategy, faults
"""

_FIRST_FAILURES_SQL = """
SELECT scenario, strategy, faults, seed, violations, replay_command
FROM (
    SELECT *, row_number() OVER (PARTITION BY scenario, strategy, faults ORDER BY seed) AS n
    FROM {runs}
    WHERE size(violations) > 0
)
WHERE n = 1
ORDER BY scenario, strategy, faults
"""


def summary_frame(spark: SparkSession, runs: DataFrame) -> DataFrame:
    """Spark SQL aggregates per (scenario, strategy, faults); see ``GroupSummary``."""
    return spark.sql(_SUMMARY_SQL, runs=runs)


def _summary(row: Row) -> GroupSummary:
    values: dict[str, Any] = row.asDict()
    for name in ("runs", "failed", "first_failing_seed", "seeds_to_first_failure"):
        if values[name] is not None:
            values[name] = int(values[name])
    return GroupSummary(**values)


def summarize(spark: SparkSession, runs: DataFrame) -> tuple[GroupSummary, ...]:
    """The aggregates, collected (one small row per group)."""
    return tuple(_summary(row) for row in summary_frame(spark, runs).collect())


def first_failures(spark: SparkSession, runs: DataFrame) -> tuple[FirstFailure, ...]:
    """The first failing run of each group that has one, with its replay command."""
    return tuple(
        FirstFailure(row.scenario, row.strategy, row.faults, int(row.seed), tuple(row.violations), row.replay_command)
        for row in spark.sql(_FIRST_FAILURES_SQL, runs=runs).collect()
    )


def _run_now(action: Callable[[], None]) -> None:
    action()


def execute_sweep(
    spark: SparkSession,
    spec: SweepSpec,
    out: str | Path,
    *,
    run_action: Callable[[Callable[[], None]], None] = _run_now,
) -> SweepOutcome:
    """Run the sweep: rows to ``out/runs.parquet``, aggregates to ``out/summary.parquet``.

    Args:
        spark: the session (its default parallelism counts as the cores).
        spec: the matrix.
        out: the report folder (created; its Parquet folders are overwritten).
        run_action: called with the one action that runs the simulations, so a caller can
            watch it (the command line draws a progress bar); by default it just runs it.

    Raises:
        ValueError: a bad spec (unknown scenario, no seeds).
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    cells = spec.cells()
    partitions = partition_count(len(cells), spark.sparkContext.defaultParallelism, spec.partitions_per_core)
    rows = runs_frame(spark, matrix_frame(spark, cells, partitions), scenario_search_path(spec.scenarios))
    runs_path = str((folder / RUNS_DIR).resolve())
    run_action(lambda: rows.write.mode("overwrite").parquet(runs_path))
    runs = spark.read.parquet(runs_path)
    summary_path = str((folder / SUMMARY_DIR).resolve())
    summary_frame(spark, runs).coalesce(1).write.mode("overwrite").parquet(summary_path)
    ordered = spark.read.parquet(summary_path).orderBy("scenario", "strategy", "faults")
    summary = tuple(_summary(row) for row in ordered.collect())
    return SweepOutcome(
        spec=spec,
        out=folder,
        partitions=partitions,
        runs=sum(group.runs for group in summary),
        failed=sum(group.failed for group in summary),
        summary=summary,
        failures=first_failures(spark, runs),
    )
