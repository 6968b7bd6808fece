"""The Spark sweep's throughput beside a plain loop and ``multiprocessing.Pool(2)``, in one run.

Why: a sweep only earns Spark's start-up and per-task costs (``../shared/PLATFORM.md``: a
cold ``local[2]`` session 4-8 s, a Python task 7-25 ms) if, once running, it keeps both
cores as busy as the simplest parallel peer does. This script measures the same matrix
three ways, in the same process and minute:

1. a plain loop calling ``run_cell`` (what ``conveyor simulate`` does);
2. ``multiprocessing.Pool(2)`` (fork) mapping ``run_cell_tuple`` over the cells, pool
   start-up inside the clock (it is part of what a user pays);
3. Spark on ``local[2]``: ``runs_frame(matrix_frame(...))`` collected to the driver, the
   matrix dealt into 4 partitions per core by estimated cost (``plan_partitions``), each
   task running its whole partition through ``mapPartitions``. The session is started
   and a two-run warm-up job run (Python workers up, conveyor imported in them) before
   the clock; the session's start-up is reported separately.

The matrix: ``seeds`` runs of a cheap scenario mix (priorities, crash-recovery,
consumer-priorities, selectors, about 50-75 ms a run here), scenario ``i % 4`` with seed
``i``, strategy random, each scenario's default fault plan. All three must return the same
rows (checked; a fast wrong answer is no figure). Each figure is the best of ``repeat``
rounds; the rounds interleave the three, so a burst of load from elsewhere spoils one
sample of each rather than every sample of one. Targets (issue 6): Spark >= 0.9x the
Pool's throughput and >= 1.7x the plain loop's.

Run: ``python benchmarks/sweep.py [--seeds N] [--repeat R]`` or ``conveyor bench sweep``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import SparkSession
from rich.console import Console
from rich.table import Table

from conveyor.benchmarks._common import check_equal
from conveyor.simulation.scenarios import get_scenario
from conveyor.simulation.sweep import (
    SweepCell,
    logging_off,
    matrix_frame,
    partition_count,
    run_cell_tuple,
    runs_frame,
    spark_session,
)

MIX = ("priorities", "crash-recovery", "consumer-priorities", "selectors")
"""The cheaper registry scenarios, cycled over the seeds."""
PROCESSES = 2
MASTER = f"local[{PROCESSES}]"
PARTITIONS_PER_CORE = 4
TARGET_VS_POOL = 0.9
TARGET_VS_LOOP = 1.7

Rows = list[tuple[Any, ...]]


def bench_cells(seeds: int) -> list[SweepCell]:
    """``seeds`` cells: scenario ``MIX[i % 4]`` with seed ``i``, random strategy, the scenario's default faults."""
    return [
        SweepCell(MIX[i % len(MIX)], i, "random", 3, get_scenario(MIX[i % len(MIX)]).default_faults)
        for i in range(seeds)
    ]


def bench_loop(cells: Sequence[SweepCell]) -> tuple[float, Rows]:
    """One process, one run after another; return (seconds, rows)."""
    start = time.perf_counter()
    rows = [run_cell_tuple(cell.as_tuple()) for cell in cells]
    return time.perf_counter() - start, rows


def bench_pool(cells: Sequence[SweepCell]) -> tuple[float, Rows]:
    """``multiprocessing.Pool(2)`` (fork) mapping the runs, pool start-up included; return (seconds, rows)."""
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(PROCESSES) as pool:
        rows = pool.map(run_cell_tuple, [cell.as_tuple() for cell in cells])
    return time.perf_counter() - start, rows


def bench_spark(spark: SparkSession, cells: Sequence[SweepCell]) -> tuple[float, Rows]:
    """The sweep's own pipeline on ``spark``, rows collected to the driver; return (seconds, rows)."""
    partitions = partition_count(len(cells), spark.sparkContext.defaultParallelism, PARTITIONS_PER_CORE)
    start = time.perf_counter()
    rows = [tuple(row) for row in runs_frame(spark, matrix_frame(spark, cells, partitions)).collect()]
    return time.perf_counter() - start, rows


def _normalised(rows: Rows) -> list[tuple[Any, ...]]:
    return sorted(tuple(tuple(v) if isinstance(v, list) else v for v in row) for row in rows)


def main(seeds: int = 500, repeat: int = 1) -> dict[str, float]:
    """Run the three ways ``repeat`` times, print the table and the targets, return the figures.

    Returns:
        ``loop_runs_per_s``, ``pool_runs_per_s``, ``spark_runs_per_s``, the ratios
        ``ratio_spark_vs_pool``, ``ratio_spark_vs_loop``, ``ratio_pool_vs_loop``, and
        ``spark_startup_s`` (session start-up, or the time to join a running one).
    """
    if seeds < 4 or repeat < 1:
        msg = f"seeds must be >= 4 and repeat >= 1, got seeds={seeds}, repeat={repeat}"
        raise ValueError(msg)
    with logging_off():  # every way runs with the actors' error logs off, as sweep workers do
        return _measure(seeds, repeat)


def _measure(seeds: int, repeat: int) -> dict[str, float]:
    cells = bench_cells(seeds)
    started = time.perf_counter()
    running = SparkSession.getActiveSession()
    spark = running or spark_session(MASTER, app_name="conveyor-bench-sweep")
    startup = time.perf_counter() - started
    try:
        warm_up = bench_cells(4)[1:3]
        bench_spark(spark, warm_up)
        bench_loop(warm_up)
        best: dict[str, float] = {}
        expected: list[tuple[Any, ...]] | None = None
        ways: dict[str, Callable[[], tuple[float, Rows]]] = {
            "loop": lambda: bench_loop(cells),
            "pool": lambda: bench_pool(cells),
            "spark": lambda: bench_spark(spark, cells),
        }
        for _ in range(repeat):
            for name, run in ways.items():
                seconds, rows = run()
                check_equal(f"sweep/{name}", "rows", seeds, len(rows))
                normalised = _normalised(rows)
                if expected is None:
                    expected = normalised
                elif normalised != expected:
                    msg = f"sweep/{name}: its rows differ from the plain loop's"
                    raise RuntimeError(msg)
                key = f"{name}_runs_per_s"
                best[key] = max(best.get(key, 0.0), seeds / seconds)
        cores = spark.sparkContext.defaultParallelism
    finally:
        if running is None:
            spark.stop()
    figures = dict(best)
    figures["ratio_spark_vs_pool"] = best["spark_runs_per_s"] / best["pool_runs_per_s"]
    figures["ratio_spark_vs_loop"] = best["spark_runs_per_s"] / best["loop_runs_per_s"]
    figures["ratio_pool_vs_loop"] = best["pool_runs_per_s"] / best["loop_runs_per_s"]
    figures["spark_startup_s"] = startup
    _print_report(figures, seeds, repeat, cores, joined=running is not None)
    return figures


def _print_report(figures: dict[str, float], seeds: int, repeat: int, cores: int, *, joined: bool) -> None:
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)
    partitions = partition_count(seeds, cores, PARTITIONS_PER_CORE)
    table = Table(title=f"sweep throughput: {seeds} runs ({', '.join(MIX)}), best of {repeat}")
    for column in ("way", "runs/s", "ms/run", "x plain loop"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for name, label in (
        ("loop", "plain loop, 1 process"),
        ("pool", f"multiprocessing.Pool({PROCESSES})"),
        ("spark", f"Spark {MASTER}, {partitions} partitions, mapPartitions"),
    ):
        rate = figures[f"{name}_runs_per_s"]
        table.add_row(label, f"{rate:,.1f}", f"{1000 / rate:.1f}", f"{rate / figures['loop_runs_per_s']:.2f}")
    console.print(table)
    verb = "joined a running session in" if joined else "session start-up"
    console.print(f"Spark {verb} {figures['spark_startup_s']:.1f} s (outside the clock).")
    for label, value, target in (
        ("Spark / Pool(2)", figures["ratio_spark_vs_pool"], TARGET_VS_POOL),
        ("Spark / plain loop", figures["ratio_spark_vs_loop"], TARGET_VS_LOOP),
    ):
        console.print(f"{label}: {value:.2f}x (target >= {target}x): {'PASS' if value >= target else 'MISS'}")


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=500, help="runs per measurement")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; each figure keeps its best")
    args = parser.parse_args()
    main(seeds=args.seeds, repeat=args.repeat)


if __name__ == "__main__":
    _cli()
