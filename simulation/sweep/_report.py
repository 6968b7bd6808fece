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
from conveyor.simulation.scenarios import FAIRNESS_MIN_JAIN, run_scenario, spell_fault_plan

from ._pipeline import FirstFailure, GroupSummary, SweepOutcome

QUEUE_PATH = "/queue"
"""The main queue of every built-in broker and subscriber scenario (a Pub/Sub front has one per subscription)."""
REPORT_NAME = "report.md"
FAIRNESS_PNG = "fairness_by_consumers.png"
LATENCY_PNG = "latency_by_scenario.png"
DEPTH_PNG = "queue_depth.png"


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


FAIRNESS_EXPLAINED = {
    "groups": "each message group is pinned to the consumer that owns it, so consumers are served as their "
                      "groups are large, not evenly",
    "consumer-priorities": "a consumer of a lower priority is served only when no higher one can take",
    "priorities": "nacks, releases, lapses and crashes move messages between consumers unevenly",
    "selectors": "a consumer with a selector receives only the messages it matches",
}
"""Why a scenario's fairness sits below the threshold by design: the report says so under the plot."""


def plot_fairness(spark: SparkSession, runs: DataFrame, target: Path) -> bool:
    """Each scenario on its own row: the spread of its runs' Jain's index, the threshold drawn. False: no data.

    Per scenario, because what fairness to expect differs by design: equal consumers
    (``fairness``) should be served evenly, consumers of different priorities, selectors
    or message groups should not. A row per scenario rather than a curve against the
    consumer count: fifteen curves crossed one another and hid the threshold.
    """
    points = ", ".join(f"{p:.2f}" for p in SPREAD_QUANTILES)
    rows = spark.sql(
        f"""
        SELECT scenario, count(*) AS runs, min(consumers) AS fewest, max(consumers) AS most,
               percentile_approx(fairness, array({points}), 10000) AS spread
        FROM {{runs}} WHERE fairness IS NOT NULL
        GROUP BY scenario ORDER BY scenario
        """,
        runs=runs,
    ).collect()
    if not rows:
        return False
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(9, 0.42 * len(rows) + 1.8))
    colours = {"checked": "tab:green", "by design": "tab:grey", "other": "tab:blue"}
    for index, row in enumerate(rows):
        kind = ("checked" if row.scenario == "fairness" else
                "by design" if row.scenario in FAIRNESS_EXPLAINED else "other")
        _spread_row(axes, index, tuple(row.spread), colours[kind])
    axes.set_yticks(range(len(rows)),
                    [f"{row.scenario} ({row.runs} runs, {row.fewest}-{row.most} consumers)" for row in rows])
    axes.invert_yaxis()
    axes.axvline(FAIRNESS_MIN_JAIN, color="red", linestyle=":", linewidth=1.5)
    axes.set_xlim(0, 1.02)
    axes.set_xlabel("Jain's fairness index of a run's deliveries per consumer (1.0: an even split)")
    figure.suptitle("Fairness per scenario over its runs: box 25-75 %, whiskers 5-95 %, dot the median")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour, alpha=0.6) for colour in colours.values()]
    handles.append(plt.Line2D([], [], color="red", linestyle=":"))
    axes.legend(handles, ["equal consumers: checked", "uneven by design", "other: faults, slow or misbehaving clients",
                          f"threshold {FAIRNESS_MIN_JAIN}"], fontsize="small", loc="lower left")
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return True


def _spread_row(axes: Any, row: int, spread: tuple[float, ...], colour: str) -> None:
    """One row of a spread plot: whiskers from the first to the last quantile, a box between the
    second and the fourth, a dot at the median (``SPREAD_QUANTILES``)."""
    low, q1, median, q3, high = spread
    axes.hlines(row, low, high, color="grey", linewidth=1)
    axes.barh(row, q3 - q1, left=q1, height=0.5, color=colour, alpha=0.6)
    axes.plot([median], [row], marker="o", color="black", markersize=4)


SPREAD_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
"""Over runs: the whiskers (5 % to 95 %), the box (25 % to 75 %) and the median of each scenario's run figures."""


@final
@attrs.frozen
class LatencySpread:
    """One scenario's runs: the ``SPREAD_QUANTILES`` of their p50 and of their p99 latency (virtual ms)."""

    scenario: str
    runs: int
    p50: tuple[float, ...]
    p99: tuple[float, ...]


def latency_spreads(spark: SparkSession, runs: DataFrame) -> list[LatencySpread]:
    """Per scenario, the spread over runs of each run's p50 and p99 delivery latency, by name."""
    points = ", ".join(f"{p:.2f}" for p in SPREAD_QUANTILES)
    rows = spark.sql(
        f"""
        SELECT scenario, count(*) AS runs,
               percentile_approx(latency_p50_ms, array({points}), 10000) AS p50,
               percentile_approx(latency_p99_ms, array({points}), 10000) AS p99
        FROM {{runs}} WHERE latency_p50_ms IS NOT NULL
        GROUP BY scenario ORDER BY scenario
        """,
        runs=runs,
    ).collect()
    return [LatencySpread(row.scenario, int(row.runs), tuple(row.p50), tuple(row.p99)) for row in rows]


def plot_latency(spark: SparkSession, runs: DataFrame, target: Path) -> list[LatencySpread]:
    """Each scenario on its own row: the spread over runs of their p50 and p99 latency; the rows drawn.

    A row per scenario (not one curve per strategy, where scenarios with the same figures hid one
    another): a box from the 25th to the 75th percentile of the runs, whiskers from the 5th to the
    95th, a dot at the median; p50 on the left, p99 on the right.
    """
    spreads = latency_spreads(spark, runs)
    if not spreads:
        return spreads
    plt = _pyplot()
    figure, panels = plt.subplots(1, 2, sharey=True, figsize=(10, 0.45 * len(spreads) + 1.6))
    rows = range(len(spreads))
    for panel, which in zip(panels, ("p50", "p99"), strict=True):
        for row, spread in zip(rows, spreads, strict=True):
            _spread_row(panel, row, getattr(spread, which), "tab:blue" if which == "p50" else "tab:orange")
        panel.set_xscale("symlog", linthresh=1.0)
        panel.set_xlabel(f"each run's {which} (virtual ms, publish to first delivery)")
        panel.grid(axis="x", alpha=0.3)
    panels[0].set_yticks(list(rows), [f"{s.scenario} ({s.runs})" for s in spreads])
    panels[0].invert_yaxis()
    figure.suptitle("Delivery latency per scenario over its runs: box 25-75 %, whiskers 5-95 %, dot the median")
    figure.tight_layout()
    figure.savefig(target, dpi=110)
    plt.close(figure)
    return spreads


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
        group.scenario, group.strategy, spell_fault_plan(group.faults), str(group.runs), str(group.failed),
        f"{group.violation_rate:.1%}", _seed(group.first_failing_seed), _seed(group.seeds_to_first_failure),
        _number(group.fairness_min), _number(group.fairness_p50), _number(group.fairness_mean),
        _number(group.latency_p50_ms, 1), _number(group.latency_p99_ms, 1),
    )


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows)
    return lines


@final
@attrs.frozen
class ReportDraft:
    """The report with its plots drawn, waiting for the facts only its caller knows (the wall time).

    ``prepare_report`` needs Spark; ``write`` does not, so a command can stop Spark first and
    put in the report the same total time it prints.
    """

    folder: Path
    head: tuple[str, ...]
    body: tuple[str, ...]

    def write(self, notes: Mapping[str, str] | None = None) -> Path:
        """Write ``report.md`` with ``notes`` (e.g. master, wall time) after the head's facts; return its path."""
        lines = [*self.head, *(f"- {key}: {value}" for key, value in (notes or {}).items()), *self.body]
        target = self.folder / REPORT_NAME
        target.write_text("\n".join(lines), encoding="utf-8")
        return target


def prepare_report(spark: SparkSession, outcome: SweepOutcome) -> ReportDraft:
    """Draw the plots into the sweep's folder and compose the report around them, each plot explained."""
    folder = outcome.out
    runs = spark.read.parquet(str(outcome.runs_path.resolve()))
    spec = outcome.spec
    head = [
        "# conveyor sweep",
        "",
        f"- scenarios: {', '.join(spec.scenarios)}",
        f"- seeds: {spec.seed_start} to {spec.seed_start + spec.seeds - 1} ({spec.seeds} per group)",
        f"- strategies: {', '.join(spec.strategies)} (PCT depth {spec.depth})",
        f"- fault plans: {', '.join(spec.fault_plans)}; step budget {spec.max_steps:,} per run",
        f"- runs: {outcome.runs} in {outcome.partitions} Spark partitions; {outcome.failed} with violations",
        f"- rows: `{outcome.runs_path.name}/` (Parquet, one row per run); aggregates: `summary.parquet/`",
    ]
    lines = ["", "## Per scenario, strategy and fault plan", ""]
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
                (f.scenario, f.strategy, spell_fault_plan(f.faults), str(f.seed), f.violations[0][:160],
                 f"`{f.replay_command}`")
                for f in outcome.failures
            ),
        )
    else:
        lines.append("No run violated a checked property.")
    lines += ["", "## Plots", ""]
    if missing_modules("plots"):
        lines += ["No plots: drawing them needs the 'plots' extra: pip install 'conveyor[plots]'.", ""]
        return ReportDraft(folder, tuple(head), tuple(lines))
    if plot_fairness(spark, runs, folder / FAIRNESS_PNG):
        below = [f"`{name}` ({why})" for name, why in FAIRNESS_EXPLAINED.items() if name in spec.scenarios]
        lines += [
            f"![fairness against consumer count]({FAIRNESS_PNG})",
            "",
            "How evenly each scenario's consumers were served, one row per scenario over its runs (Jain's index: "
            "1.0 is an even split, 1/n all to one of n consumers). The dotted line is the "
            f"{FAIRNESS_MIN_JAIN} the `fairness` scenario's checker requires of equal consumers."
            + (" Below it by design: " + "; ".join(below) + "." if below else "")
            + " Runs with crashes, pauses or slow consumers sit lower too: a consumer that is down is rightly "
            "served less.",
            "",
        ]
    drawn = plot_latency(spark, runs, folder / LATENCY_PNG)
    if drawn:
        without = [name for name in spec.scenarios if name not in {spread.scenario for spread in drawn}]
        lines += [
            f"![delivery latency per scenario]({LATENCY_PNG})",
            "",
            "How long messages waited between publish and first delivery, in virtual ms, one row per scenario "
            "(its run count in brackets): the box holds the middle half of its runs, the whiskers 90 % of them, "
            "the dot the median run; the left panel is each run's typical message (p50), the right its slowest "
            "1 % (p99)."
            + (f" Not drawn, as their runs measure no delivery latency: {', '.join(without)}." if without else ""),
            "",
        ]
    sample = choose_sample(spark, runs, outcome)
    plot_queue_depth(sample, folder / DEPTH_PNG)
    lines += [
        f"![queue depth of {sample.scenario} seed {sample.seed}]({DEPTH_PNG})",
        "",
        f"The queue of one run ({sample.why}), re-run in the driver: the solid line counts messages "
        "enqueued and not yet settled, the dashed one those of them delivered and not yet acked or returned; "
        "a gap between the two is work waiting for a consumer.",
        "",
    ]
    return ReportDraft(folder, tuple(head), tuple(lines))


def write_report(
    spark: SparkSession, outcome: SweepOutcome, *, notes: Mapping[str, str] | None = None
) -> Path:
    """Write ``report.md`` and its plots into the sweep's folder; return the report's path.

    Args:
        spark: the session the sweep ran on (the plots' aggregates run there).
        outcome: what ``execute_sweep`` returned.
        notes: extra facts for the report's head (master, wall time), in order.
    """
    return prepare_report(spark, outcome).write(notes)
