"""The sweep's report: report.md with the aggregates, the first failures and three PNG plots.

The plots' data are Spark SQL aggregates over the Parquet rows (percentiles, not the
rows themselves), so a sweep of a million runs plots as fast as one of a hundred. The
queue-depth plot is the exception: one sample run is re-run in the driver, from its
row's parameters, and its queue's story read from the trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, final

import attrs
from pyspark.sql import DataFrame, SparkSession

from conveyor.actors.broker import Delivery, EntryEnqueued, EntrySettled
from conveyor.runtime import TraceEvent
from conveyor.runtime.extras import missing_modules
from conveyor.simulation.checkers import queue_paths, queue_story
from conveyor.simulation.scenarios import run_scenario

from ._pipeline import FirstFailure, GroupSummary, SweepOutcome

QUEUE_PATH = "/queue"
"""The main queue of every built-in broker and subscriber scenario (a Pub/Sub front has one per subscription)."""
REPORT_NAME = "report.md"
FAIRNESS_PNG = "fairness_by_consumers.png"
LATENCY_PNG = "latency_cdf.png"
DEPTH_PNG = "queue_depth.png"
CDF_POINTS = tuple(round(i / 100, 2) for i in range(101))


@final
@attrs.frozen
class DepthPoint:
    """The queue after one change: entries held (queued, available or not) and those in flight."""

    time: float
    queued: int
    in_flight: int


def queue_depth_series(trace: Iterable[TraceEvent], queue_path: str = QUEUE_PATH) -> list[DepthPoint]:
    """The queue's depth over virtual time, from its notes and deliveries.

    ``queued`` is +1 per ``EntryEnqueued`` and -1 per ``EntrySettled`` (acked, dead-lettered,
    expired); ``in_flight`` counts entries delivered to an acquiring consumer and not yet
    returned (``EntryReturned``) or settled. Browsers' deliveries hold nothing.
    """
    points: list[DepthPoint] = []
    queued = 0
    held: set[int] = set()
    acquiring: dict[int, bool] = {}
    for obs in queue_story(trace, queue_path):
        if obs.kind == "subscribed":
            info = obs.data[0]
            acquiring[info.consumer_id] = info.acquiring
            continue
        if obs.kind == "enqueued":
            assert isinstance(obs.data, EntryEnqueued)
            queued += 1
        elif obs.kind == "settled":
            assert isinstance(obs.data, EntrySettled)
            queued -= 1
            held.discard(obs.data.tag)
        elif obs.kind == "returned":
            held.discard(obs.data.tag)
        elif obs.kind == "delivered":
            deliveries: Sequence[Delivery] = obs.data
            held.update(d.tag for d in deliveries if acquiring.get(d.consumer_id, True))
        else:
            continue
        points.append(DepthPoint(obs.time, queued, len(held)))
    return points


@final
@attrs.frozen
class SampleRun:
    """The run the queue-depth plot shows, as its row names it."""

    scenario: str
    seed: int
    strategy: str
    depth: int
    faults: str
    max_steps: int
    why: str


def choose_sample(spark: SparkSession, runs: DataFrame, outcome: SweepOutcome) -> SampleRun:
    """The first failing run if any (its queue is the interesting one), else the busiest run.

    The busiest is the one with the highest in-flight peak (then the most published, then
    the first by name and seed), so the plot shows a queue under load rather than an idle one.
    """
    spec = outcome.spec
    if outcome.failures:
        first: FirstFailure = outcome.failures[0]
        return SampleRun(
            first.scenario, first.seed, first.strategy, spec.depth, first.faults, spec.max_steps,
            "the first failing run",
        )
    busiest = spark.sql(
        """
        SELECT scenario, seed, strategy, faults FROM {runs}
        ORDER BY max_outstanding DESC, published DESC, scenario, strategy, faults, seed LIMIT 1
        """,
        runs=runs,
    ).collect()[0]
    return SampleRun(
        busiest.scenario, int(busiest.seed), busiest.strategy, spec.depth, busiest.faults, spec.max_steps,
        "no run failed; the run with the highest in-flight peak",
    )


def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (no display needed), imported when first plotting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_fairness(spark: SparkSession, runs: DataFrame, target: Path) -> bool:
    """Jain's index against the consumer count: the median run per scenario. False: no data.

    Per scenario, because what fairness to expect differs by design: equal consumers
    (``fairness``) should be served evenly, consumers of different priorities, selectors
    or message groups should not.
    """
    rows = spark.sql(
        """
        SELECT scenario, consumers, percentile_approx(fairness, 0.5, 10000) AS median, count(*) AS runs
        FROM {runs} WHERE fairness IS NOT NULL
        GROUP BY scenario, consumers ORDER BY scenario, consumers
        """,
        runs=runs,
    ).collect()
    if not rows:
        return False
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for scenario in dict.fromkeys(row.scenario for row in rows):
        mine = [row for row in rows if row.scenario == scenario]
        axes.plot([row.consumers for row in mine], [row.median for row in mine], marker="o", label=scenario)
    axes.set_xlabel("consumers that received deliveries")
    axes.set_ylabel("Jain's fairness index (median run)")
    axes.set_ylim(0, 1.05)
    axes.set_title("Fairness against consumer count, per scenario (all strategies and fault plans)")
    axes.legend(fontsize="small", ncol=2)
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return True


def plot_latency_cdf(spark: SparkSession, runs: DataFrame, target: Path) -> bool:
    """CDF over runs of each run's p50 and p99 delivery latency (virtual ms), per strategy. False: no data."""
    points = ", ".join(f"{p:.2f}" for p in CDF_POINTS)
    rows = spark.sql(
        f"""
        SELECT strategy,
               percentile_approx(latency_p50_ms, array({points}), 10000) AS p50,
               percentile_approx(latency_p99_ms, array({points}), 10000) AS p99
        FROM {{runs}} WHERE latency_p50_ms IS NOT NULL
        GROUP BY strategy ORDER BY strategy
        """,
        runs=runs,
    ).collect()
    if not rows:
        return False
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for row in rows:
        axes.plot(row.p50, CDF_POINTS, label=f"{row.strategy}: run p50")
        axes.plot(row.p99, CDF_POINTS, linestyle="--", label=f"{row.strategy}: run p99")
    axes.set_xscale("symlog", linthresh=1.0)
    axes.set_xlabel("delivery latency, publish to first delivery (virtual ms)")
    axes.set_ylabel("fraction of runs")
    axes.set_title("Delivery latency CDF over runs")
    axes.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return True


def plot_queue_depth(sample: SampleRun, target: Path) -> int:
    """Re-run ``sample`` in the driver and plot its queue's depth over virtual time; return the points plotted."""
    run = run_scenario(
        sample.scenario, sample.seed, strategy=sample.strategy, depth=sample.depth, faults=sample.faults,
        max_steps=sample.max_steps,
    )
    paths = queue_paths(run.sim.trace)
    queue_path = QUEUE_PATH if QUEUE_PATH in paths or not paths else paths[0]  # a Pub/Sub run: its first queue
    series = queue_depth_series(run.sim.trace, queue_path)
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.2))
    times = [point.time for point in series]
    axes.step(times, [point.queued for point in series], where="post", linewidth=2.2,
              label="queued (enqueued, not settled)")
    axes.step(times, [point.in_flight for point in series], where="post", linestyle="--",
              label="of which in flight (delivered to a consumer)")
    axes.set_xlabel("virtual time (s)")
    axes.set_ylabel("entries")
    where = "" if queue_path == QUEUE_PATH else f" ({queue_path})"
    axes.set_title(f"{sample.scenario} seed {sample.seed}, {sample.strategy}, faults {sample.faults}{where}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return len(series)


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _seed(value: int | None) -> str:
    return "-" if value is None else str(value)


SUMMARY_HEADER = (
    "scenario", "strategy", "faults", "runs", "failed", "violation rate", "first failing seed",
    "seeds to 1st failure", "fairness min", "fairness p50", "fairness mean", "latency p50 ms", "latency p99 ms",
)


def summary_cells(group: GroupSummary) -> tuple[str, ...]:
    """One summary row as display strings (the report's table and the command's share them)."""
    return (
        group.scenario, group.strategy, group.faults, str(group.runs), str(group.failed),
        f"{group.violation_rate:.1%}", _seed(group.first_failing_seed), _seed(group.seeds_to_first_failure),
        _number(group.fairness_min), _number(group.fairness_p50), _number(group.fairness_mean),
        _number(group.latency_p50_ms, 1), _number(group.latency_p99_ms, 1),
    )


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows)
    return lines


def write_report(
    spark: SparkSession, outcome: SweepOutcome, *, notes: Mapping[str, str] | None = None
) -> Path:
    """Write ``report.md`` and its plots into the sweep's folder; return the report's path.

    Args:
        spark: the session the sweep ran on (the plots' aggregates run there).
        outcome: what ``execute_sweep`` returned.
        notes: extra facts for the report's head (master, wall time), in order.
    """
    folder = outcome.out
    runs = spark.read.parquet(str(outcome.runs_path.resolve()))
    spec = outcome.spec
    lines = [
        "# conveyor sweep",
        "",
        f"- scenarios: {', '.join(spec.scenarios)}",
        f"- seeds: {spec.seed_start} to {spec.seed_start + spec.seeds - 1} ({spec.seeds} per group)",
        f"- strategies: {', '.join(spec.strategies)} (PCT depth {spec.depth})",
        f"- fault plans: {', '.join(spec.fault_plans)}; step budget {spec.max_steps:,} per run",
        f"- runs: {outcome.runs} in {outcome.partitions} Spark partitions; {outcome.failed} with violations",
        f"- rows: `{outcome.runs_path.name}/` (Parquet, one row per run); aggregates: `summary.parquet/`",
    ]
    lines.extend(f"- {key}: {value}" for key, value in (notes or {}).items())
    lines += ["", "## Per scenario, strategy and fault plan", ""]
    lines += _table(SUMMARY_HEADER, (summary_cells(group) for group in outcome.summary))
    lines += [
        "",
        "Fairness is Jain's index over the deliveries to each consumer of a run (runs with two or more",
        "consumers). Latency is publish to first delivery in virtual ms: the median run's p50 and the",
        "99th percentile of the runs' p99.",
        "",
        "## First failure of each group",
        "",
    ]
    if outcome.failures:
        lines += _table(
            ("scenario", "strategy", "faults", "seed", "first violation", "replay"),
            (
                (f.scenario, f.strategy, f.faults, str(f.seed), f.violations[0][:160], f"`{f.replay_command}`")
                for f in outcome.failures
            ),
        )
    else:
        lines.append("No run violated a checked property.")
    lines += ["", "## Plots", ""]
    if missing_modules("plots"):
        lines += ["No plots: drawing them needs the 'plots' extra: pip install 'conveyor[plots]'.", ""]
        return _written(folder, lines)
    if plot_fairness(spark, runs, folder / FAIRNESS_PNG):
        lines += [f"![fairness against consumer count]({FAIRNESS_PNG})", ""]
    if plot_latency_cdf(spark, runs, folder / LATENCY_PNG):
        lines += [f"![delivery latency CDF]({LATENCY_PNG})", ""]
    sample = choose_sample(spark, runs, outcome)
    plot_queue_depth(sample, folder / DEPTH_PNG)
    lines += [
        f"Queue depth over time of one sample run ({sample.why}), re-run in the driver:",
        "",
        f"![queue depth of {sample.scenario} seed {sample.seed}]({DEPTH_PNG})",
        "",
    ]
    return _written(folder, lines)


def _written(folder: Path, lines: Sequence[str]) -> Path:
    """``lines`` written as the report in ``folder``; its path."""
    target = folder / REPORT_NAME
    target.write_text("\n".join(lines), encoding="utf-8")
    return target
