"""How fast the simulator explores schedules: deliveries per second and schedules per minute.

Why: every seed the simulator runs is one schedule explored, so its speed decides how many
interleavings a test budget, a sweep or a search covers (issue 5 sets >= 300,000
deliveries per second). This script runs the registry's broker ``fairness`` scenario (2-8
equal consumers sharing 40-200 messages published over 0.5-3 virtual seconds, about 1,400
deliveries a seed) and sets it beside the floor any simulator pays, in the same process and
the same minute. Absolute numbers are noisy (+-35% on a shared 2-core machine); ratios
within one run are steadier.

A *delivery* is one simulation step: one message taken from a channel and handled by its
actor (``Simulation.steps``). A *schedule* is one seed run to quiet. Measured, over seeds
``0 .. seeds-1``, each the best of ``repeat`` rounds (interleaved, each run after
``gc.collect()``):

1. bare limit: a ``collections.deque`` holding one message per delivery of (3), drained
   into a handler method: no channels, no strategy, no actors.
2. the kernel alone: the same number of deliveries in a ``Simulation(trace=False)`` whose
   actors do nothing (4 sinks, each told its share up front): channels, the random walk's
   choice, the cell and an empty ``receive``, without the broker's work.
3. ``Simulation(trace=False)`` with the default ``RandomWalk``: the scenario's actors
   spawned (``spawn_broker_scenario``) outside the clock, then ``sim.run()`` timed: the raw
   deliveries per second. Schedules per minute count spawning, running and shutting down.
4. the same under ``PCT`` (depth 3), whose choice costs a priority lookup per ready channel.
5. the same as (3) with ``trace=True``: every send, delivery and note recorded.
6. ``run_scenario("fairness", seed)``: what a test or a sweep pays per seed: the workload
   drawn, the traced run, every checker (the liveness monitors included) and the trace hash.
7. the same with ``hash_trace=False``: every checker on, no hash (what ``conveyor simulate``
   pays per seed).

Then **schedules per hour** with every checker on (issue 17, item 7; goal: 1,000,000 an hour for
the fairness scenario on this machine's two cores): (7) on one core, and the Spark sweep on
every core (``local[*]``: ``runs_frame`` over ``spark_seeds`` fairness cells, random walk, no
faults, rows collected; each run also computes its trace hash, which the sweep stores), each
beside the bare loop's rate (1) turned into schedules per hour at this run's deliveries per
schedule, and the ratio. The Spark session's start-up is outside the clock (a two-run warm-up job
first); ``--spark-seeds 0`` leaves Spark out.

``--profile`` adds a ``cProfile`` of (3): own time by layer (simulator, runtime, broker actors,
scenario clients) and the top functions.

Run: ``python benchmarks/simulation.py [--seeds N] [--repeat R] [--spark-seeds N] [--profile]``
(or ``conveyor bench simulation``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import time
from collections import deque
from collections.abc import Callable

import attrs
from rich.console import Console
from rich.table import Table

from conveyor.benchmarks._common import check_equal
from conveyor.runtime import Actor
from conveyor.simulation import PCT, Simulation, Strategy
from conveyor.simulation.scenarios import BrokerScenario, get_scenario, run_scenario, spawn_broker_scenario

SCENARIO = "fairness"
TARGET_DELIVERIES_PER_S = 300_000
TARGET_SCHEDULES_PER_HOUR = 1_000_000
"""Issue 17's goal for the fairness scenario with every checker on, on this machine's two cores."""
SPARK_MASTER = "local[*]"
SPARK_PARTITIONS_PER_CORE = 4
PROFILE_LINES = 15
SINKS = 4
"""Actors of the kernel-only run (2)."""
LAYERS = (
    ("simulator (simulation/)", "/simulation/_"),
    ("scenario clients and publisher", "/simulation/scenarios/"),
    ("runtime (runtime/)", "/runtime/"),
    ("broker actors (actors/broker/)", "/actors/broker/"),
)
"""Path fragments that place a profiled function in a layer (the last match wins)."""


@attrs.frozen
class _Measured:
    """One round of one measurement: deliveries, the seconds they took, and the seconds per whole schedule."""

    deliveries: int
    run_s: float
    total_s: float
    schedules: int

    @property
    def per_s(self) -> float:
        return self.deliveries / self.run_s

    @property
    def schedules_per_min(self) -> float:
        return 60.0 * self.schedules / self.total_s


def _workload(seed: int) -> BrokerScenario:
    workload = get_scenario(SCENARIO).build(seed)
    assert isinstance(workload, BrokerScenario)
    return workload


def bench_sim(seeds: int, trace: bool, strategy: Callable[[int], Strategy] | None = None) -> _Measured:
    """Deliveries/s of ``sim.run()`` over the fairness workloads of ``seeds`` seeds."""
    deliveries = 0
    run_s = total_s = 0.0
    for seed in range(seeds):
        workload = _workload(seed)
        gc.collect()
        begin = time.perf_counter()
        sim = Simulation(seed=seed, strategy=None if strategy is None else strategy(seed), trace=trace)
        spawn_broker_scenario(sim, workload)
        start = time.perf_counter()
        result = sim.run()
        ran = time.perf_counter() - start
        sim.shutdown()
        total_s += time.perf_counter() - begin
        if not result.quiet:
            msg = f"fairness seed {seed}: the simulation did not go quiet ({result!r})"
            raise RuntimeError(msg)
        deliveries += result.steps
        run_s += ran
    return _Measured(deliveries, run_s, total_s, seeds)


def bench_scenario(seeds: int, hash_trace: bool = True) -> _Measured:
    """Deliveries/s and schedules/min of ``run_scenario`` (traced run, every checker, the trace hash if asked)."""
    deliveries = 0
    total_s = 0.0
    for seed in range(seeds):
        gc.collect()
        start = time.perf_counter()
        run = run_scenario(SCENARIO, seed, hash_trace=hash_trace)
        total_s += time.perf_counter() - start
        if not run.report.ok:
            msg = f"fairness seed {seed} failed its checks: {run.report.violations[:3]}"
            raise RuntimeError(msg)
        deliveries += run.report.steps
    return _Measured(deliveries, total_s, total_s, seeds)


def bench_spark(seeds: int, repeat: int) -> tuple[float, int, float]:
    """The Spark sweep of ``seeds`` fairness runs on every local core, best of ``repeat``: (runs/s, cores, start-up s).

    Joins a running session if there is one (the test suite's), else starts ``local[*]`` and
    stops it after.
    """
    from pyspark.sql import SparkSession

    from conveyor.simulation.sweep import SweepCell, matrix_frame, partition_count, runs_frame, spark_session

    started = time.perf_counter()
    running = SparkSession.getActiveSession()
    spark = running or spark_session(SPARK_MASTER, app_name="conveyor-bench-simulation")
    startup = time.perf_counter() - started
    try:
        cores = spark.sparkContext.defaultParallelism
        cells = [SweepCell(SCENARIO, seed, "random", 3, "none") for seed in range(seeds)]
        runs_frame(spark, matrix_frame(spark, cells[:2], 2)).collect()  # workers up, conveyor imported
        partitions = partition_count(seeds, cores, SPARK_PARTITIONS_PER_CORE)
        best = 0.0
        for _ in range(repeat):
            start = time.perf_counter()
            rows = runs_frame(spark, matrix_frame(spark, cells, partitions)).collect()
            elapsed = time.perf_counter() - start
            check_equal("Spark sweep", "rows", seeds, len(rows))
            failed = [row for row in rows if row["violations"]]
            if failed:
                msg = f"Spark sweep: fairness seed {failed[0]['seed']} failed: {failed[0]['violations'][:3]}"
                raise RuntimeError(msg)
            best = max(best, seeds / elapsed)
    finally:
        if running is None:
            spark.stop()
    return best, cores, startup


@attrs.frozen
class _Note:
    """What the bare loop hands its handler: a frozen message, as actors send."""

    index: int


class _Handler:
    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: _Note) -> None:
        self.count += 1


def bench_bare(calls: int) -> _Measured:
    """Handler calls/s from a deque of ``calls`` prebuilt messages: the floor under any delivery."""
    handler = _Handler()
    mailbox = deque(_Note(index) for index in range(calls))
    gc.collect()
    start = time.perf_counter()
    while mailbox:
        handler.receive(mailbox.popleft())
    elapsed = time.perf_counter() - start
    check_equal("bare loop", "handler calls", calls, handler.count)
    return _Measured(calls, elapsed, elapsed, 1)


class _Sink(Actor):
    """Does nothing with what it is told: the kernel's cost per delivery, and nothing else."""

    def receive(self, message: object) -> None:
        pass


def bench_kernel(deliveries: int) -> _Measured:
    """Deliveries/s of ``sim.run()`` with ``SINKS`` do-nothing actors told ``deliveries`` messages up front."""
    sim = Simulation(seed=1, trace=False)
    sinks = [sim.spawn(_Sink) for _ in range(SINKS)]
    sim.run()
    per_sink = max(1, deliveries // SINKS)
    for index in range(per_sink):
        for sink in sinks:
            sink.tell(_Note(index))
    gc.collect()
    start = time.perf_counter()
    result = sim.run()
    elapsed = time.perf_counter() - start
    check_equal("kernel", "deliveries", per_sink * SINKS, result.steps)
    return _Measured(result.steps, elapsed, elapsed, 1)


def _layer(filename: str) -> str:
    found = "other (stdlib, attrs, builtins)"
    for name, fragment in LAYERS:
        if fragment in filename:
            found = name
    return found


def profile_raw(seeds: int, lines: int = PROFILE_LINES) -> str:
    """Own time by layer and the top ``lines`` functions of the raw simulation over ``seeds`` seeds."""
    sims = []
    for seed in range(seeds):
        sim = Simulation(seed=seed, trace=False)
        spawn_broker_scenario(sim, _workload(seed))
        sims.append(sim)
    profiler = cProfile.Profile()
    profiler.enable()
    for sim in sims:
        sim.run()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    by_layer: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        layer = _layer(filename)
        by_layer[layer] = by_layer.get(layer, 0.0) + own
    total = sum(by_layer.values())
    out.write("own time by layer (under the profiler, which inflates small calls):\n")
    for layer, own in sorted(by_layer.items(), key=lambda item: -item[1]):
        out.write(f"  {layer:40s} {own:7.3f} s  {own / total:6.1%}\n")
    stats.strip_dirs().sort_stats("tottime").print_stats(lines)
    return out.getvalue()


# --- report -----------------------------------------------------------------------------


@attrs.frozen
class _Row:
    key: str
    label: str


ROWS = (
    _Row("bare", "bare limit: deque -> handler, one call per delivery"),
    _Row("kernel", f"Simulation(trace=False), {SINKS} do-nothing actors"),
    _Row("sim_raw", "Simulation(trace=False), random walk"),
    _Row("sim_pct", "Simulation(trace=False), PCT depth 3"),
    _Row("sim_traced", "Simulation(trace=True), random walk"),
    _Row("scenario", "run_scenario: traced run + every checker + trace hash"),
    _Row("checked", "run_scenario(hash_trace=False): traced run + every checker"),
)


def _print_report(console: Console, best: dict[str, _Measured], seeds: int, repeat: int) -> None:
    raw = best["sim_raw"].per_s
    table = Table(
        title=f"conveyor simulator on the broker '{SCENARIO}' scenario: seeds 0-{seeds - 1}, best of {repeat}",
        title_justify="left",
        caption="delivery = one simulation step (a message taken from its channel and handled); schedule = one "
        "seed run to quiet (schedules/min include spawning and shutdown, and for run_scenario the checks). "
        "x raw: this rate / the raw simulation's, same run.",
        caption_justify="left",
    )
    for column in ("measurement", "deliveries", "deliveries/s", "us/delivery", "schedules/min", "x raw"):
        table.add_column(column, justify="left" if column == "measurement" else "right")
    for row in ROWS:
        measured = best[row.key]
        per_min = "-" if row.key in ("bare", "kernel") else f"{measured.schedules_per_min:,.0f}"
        table.add_row(
            row.label, f"{measured.deliveries:,}", f"{measured.per_s:,.0f}", f"{1e6 / measured.per_s:.2f}", per_min,
            f"{measured.per_s / raw:.3f}",
        )
    console.print(table)
    result = "[green]PASS[/green]" if raw >= TARGET_DELIVERIES_PER_S else "[red]MISS[/red]"
    console.print(
        f"target: >= {TARGET_DELIVERIES_PER_S:,} deliveries/s on the fairness scenario (trace off): "
        f"{raw:,.0f}/s ({raw / TARGET_DELIVERIES_PER_S:.0%} of it) {result}; the kernel alone does "
        f"{best['kernel'].per_s:,.0f}/s, so {1 - raw / best['kernel'].per_s:.0%} of a delivery here is the actors' "
        "own work and the sends it makes"
    )


def _print_per_hour(console: Console, figures: dict[str, float], spark_cores: int) -> None:
    """Schedules per hour with every checker on, one core and the Spark sweep, beside the bare loop's."""
    table = Table(
        title=f"schedules per hour, '{SCENARIO}' with every checker on (goal {TARGET_SCHEDULES_PER_HOUR:,} on 2 cores)",
        title_justify="left",
        caption="bare loop: its deliveries/s over this run's deliveries per schedule (no actor, no checker); "
        "x bare: this rate / the bare loop's on as many cores.",
        caption_justify="left",
    )
    for column in ("way", "cores", "schedules/hour", "x bare loop", "of the goal"):
        table.add_column(column, justify="left" if column == "way" else "right")
    bare = figures["bare_schedules_per_hour"]
    rows = [("bare loop (deque -> handler)", 1, bare),
            ("run_scenario, every checker, no hash: one core", 1, figures["checked_schedules_per_hour"])]
    if "spark_schedules_per_hour" in figures:
        rows.append((f"Spark sweep {SPARK_MASTER} (every checker + trace hash)", spark_cores,
                     figures["spark_schedules_per_hour"]))
    for label, cores, rate in rows:
        table.add_row(label, str(cores), f"{rate:,.0f}", f"{rate / (bare * cores):.4f}",
                      f"{rate / TARGET_SCHEDULES_PER_HOUR:.1%}")
    console.print(table)


def main(seeds: int = 20, repeat: int = 3, profile: bool = False, spark_seeds: int = 200) -> dict[str, float]:
    """Run every measurement, print the table and the target line, return the figures by stable name.

    Args:
        seeds: fairness seeds per round (each about 1,400 deliveries).
        repeat: rounds of every measurement; each figure keeps its fastest round.
        profile: also print the top functions of a ``cProfile`` of the raw simulation.
        spark_seeds: fairness runs in the Spark sweep's measurement (0: no Spark).

    Returns:
        ``*_deliveries_per_s`` (``bare_calls_per_s`` for the floor), ``*_schedules_per_min``,
        ``ratio_*``: each rate over the raw simulation's, and the raw simulation's over the floor
        and over the kernel alone; ``deliveries_per_schedule``; ``*_schedules_per_hour`` for the
        bare loop, the checked run on one core and (with ``spark_seeds``) the Spark sweep, with
        ``ratio_checked_vs_bare_per_hour`` and ``ratio_spark_vs_bare_per_hour`` (per core).
    """
    if seeds < 1 or repeat < 1 or spark_seeds < 0:
        msg = f"seeds and repeat must be >= 1 and spark_seeds >= 0, got seeds={seeds}, repeat={repeat}, " \
              f"spark_seeds={spark_seeds}"
        raise ValueError(msg)
    samples: dict[str, list[_Measured]] = {}
    for _ in range(repeat):
        raw = bench_sim(seeds, trace=False)
        samples.setdefault("sim_raw", []).append(raw)
        samples.setdefault("bare", []).append(bench_bare(raw.deliveries))
        samples.setdefault("kernel", []).append(bench_kernel(raw.deliveries))
        samples.setdefault("sim_pct", []).append(bench_sim(seeds, trace=False, strategy=PCT))
        samples.setdefault("sim_traced", []).append(bench_sim(seeds, trace=True))
        samples.setdefault("scenario", []).append(bench_scenario(seeds))
        samples.setdefault("checked", []).append(bench_scenario(seeds, hash_trace=False))
    best = {key: max(runs, key=lambda run: run.per_s) for key, runs in samples.items()}
    check_equal("traced run", "deliveries", best["sim_raw"].deliveries, best["sim_traced"].deliveries)
    check_equal("run_scenario", "deliveries", best["scenario"].deliveries, best["checked"].deliveries)

    raw_rate = best["sim_raw"].per_s
    figures = {"bare_calls_per_s": best["bare"].per_s, "kernel_deliveries_per_s": best["kernel"].per_s}
    for key in ("sim_raw", "sim_pct", "sim_traced", "scenario", "checked"):
        figures[f"{key}_deliveries_per_s"] = best[key].per_s
        figures[f"{key}_schedules_per_min"] = best[key].schedules_per_min
    for key in ("sim_pct", "sim_traced", "scenario", "checked"):
        figures[f"ratio_{key}_vs_raw"] = best[key].per_s / raw_rate
    figures["ratio_sim_raw_vs_bare"] = raw_rate / best["bare"].per_s
    figures["ratio_sim_raw_vs_kernel"] = raw_rate / best["kernel"].per_s
    figures["deliveries_per_schedule"] = best["sim_raw"].deliveries / seeds
    figures["bare_schedules_per_hour"] = 3600.0 * best["bare"].per_s / figures["deliveries_per_schedule"]
    figures["checked_schedules_per_hour"] = 60.0 * best["checked"].schedules_per_min
    figures["ratio_checked_vs_bare_per_hour"] = (
        figures["checked_schedules_per_hour"] / figures["bare_schedules_per_hour"]
    )
    spark_cores = 0
    if spark_seeds:
        spark_rate, spark_cores, startup = bench_spark(spark_seeds, repeat)
        figures["spark_schedules_per_hour"] = 3600.0 * spark_rate
        figures["spark_cores"] = float(spark_cores)
        figures["spark_startup_s"] = startup
        figures["ratio_spark_vs_bare_per_hour"] = (
            figures["spark_schedules_per_hour"] / (figures["bare_schedules_per_hour"] * spark_cores)
        )

    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)
    _print_report(console, best, seeds, repeat)
    _print_per_hour(console, figures, spark_cores)
    if profile:
        console.print(f"cProfile of the raw simulation (random walk, trace off), {seeds} seeds, by own time:")
        console.print(profile_raw(seeds), markup=False, highlight=False)
    return figures


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=20, help="fairness seeds per round (about 1,400 deliveries each)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each figure keeps its fastest")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the raw simulation")
    parser.add_argument("--spark-seeds", type=int, default=200, help="fairness runs in the Spark sweep (0: none)")
    args = parser.parse_args()
    main(seeds=args.seeds, repeat=args.repeat, profile=args.profile, spark_seeds=args.spark_seeds)


if __name__ == "__main__":
    _cli()
