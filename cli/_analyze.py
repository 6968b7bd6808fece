"""``conveyor analyze``: check recorded traces in this process when they are small, on Spark when large.

Spark costs ~20 s to start before it reads a byte, while the checkers read ~5 MB of JSON Lines a
second here: below ``IN_PROCESS_MAX_MB`` (total trace size) the traces are judged in process by
``analyze_traces_in_process``, which gives the Spark analysis's verdicts (a test compares both);
above it, or for Parquet traces, on Spark. ``--engine`` forces either. A large analysis shows a
progress bar: bytes read and queues judged in process, Spark's tasks on Spark.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from conveyor.simulation.sweep import TraceAnalysis, analyze_traces_in_process, is_parquet_trace

from ._simulate import _console

IN_PROCESS_MAX_MB: Final = 50
"""Total JSON Lines size analysed in process by default: ~10 s here, less than Spark's start-up alone."""
PROGRESS_MIN_BYTES: Final = 4 * 1024 * 1024
"""In-process analyses of fewer bytes end before a progress bar would tell anything."""


class Engine(enum.Enum):
    """``--engine``: where the checks run."""

    AUTO = "auto"
    IN_PROCESS = "in-process"
    SPARK = "spark"


def trace_bytes(path: Path) -> int:
    """A trace's size on disk (a Parquet folder's files summed)."""
    if path.is_dir():
        return sum(part.stat().st_size for part in path.rglob("*") if part.is_file())
    return path.stat().st_size


def choose_engine(traces: Sequence[Path], engine: Engine, max_mb: float) -> Engine:
    """``engine`` unless auto: in process for JSON Lines traces of at most ``max_mb`` MB in all, else Spark.

    Raises:
        ValueError: in process forced on a Parquet trace.
    """
    parquet = [str(path) for path in traces if is_parquet_trace(path)]
    if engine is Engine.IN_PROCESS and parquet:
        msg = f"--engine in-process reads JSON Lines traces only; use --engine spark for {', '.join(parquet)}"
        raise ValueError(msg)
    if engine is not Engine.AUTO:
        return engine
    if parquet or sum(trace_bytes(path) for path in traces) > max_mb * 1024 * 1024:
        return Engine.SPARK
    return Engine.IN_PROCESS


def print_analysis(analysis: TraceAnalysis, console: Console) -> None:
    """One row per (trace, queue) with each check's verdict and figures, then the violations."""
    events = dict(analysis.events)
    unreadable = dict(analysis.unreadable)
    table = Table(title="conveyor analyze: strict order, accounting and fairness per queue")
    for header in ("trace", "queue", "events", "strict_order", "accounting", "fairness"):
        table.add_column(header, no_wrap=header in ("queue", "events"))
    for verdict in analysis.verdicts:
        order, accounting, fairness = verdict.results

        def mark(ok: bool) -> str:
            return "[green]ok[/green]" if ok else "[red]VIOLATED[/red]"

        table.add_row(
            verdict.trace, verdict.queue, f"{events.get(verdict.trace, 0):,}",
            f"{mark(order.ok)} ({order.metric('checked'):,.0f} first deliveries)",
            f"{mark(accounting.ok)} ({accounting.metric('enqueued'):,.0f} enqueued, "
            f"{accounting.metric('settled'):,.0f} settled, {accounting.metric('remaining'):,.0f} left)",
            f"{mark(fairness.ok)} (Jain {fairness.metric('jain'):.4f} over {fairness.metric('consumers'):.0f})",
        )
    console.print(table)
    for trace, count in unreadable.items():
        if count:
            console.print(f"[red]{trace}: {count} lines are not trace events[/red]")
    for verdict in analysis.verdicts:
        for result in verdict.results:
            if not result.ok:
                console.print(f"[red]{verdict.trace} {verdict.queue}[/red] {result}")


def analyze_here(traces: Sequence[Path], *, priorities: int, min_jain: float, console: Console) -> TraceAnalysis:
    """The in-process analysis, with a progress bar over the bytes read when there are many."""
    names = [str(path.resolve()) for path in traces]
    total = sum(trace_bytes(path) for path in traces)
    if total < PROGRESS_MIN_BYTES:
        return analyze_traces_in_process(names, priorities=priorities, min_jain=min_jain)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        reading = progress.add_task("reading traces", total=total)

        def judging(trace: str, queue: str) -> None:
            progress.update(reading, description=f"judging {queue} of {Path(trace).name}")

        return analyze_traces_in_process(
            names, priorities=priorities, min_jain=min_jain,
            on_bytes=lambda size: progress.advance(reading, size), on_queue=judging,
        )


def analyze_on_spark(
    traces: Sequence[Path], *, master: str | None, priorities: int, min_jain: float, console: Console
) -> TraceAnalysis:
    """The Spark analysis (a session started and stopped here), under Spark's task progress bar."""
    from ._extras import needs_extra

    needs_extra("spark", "analyze")  # traces too large for --in-process-max-mb, or Parquet ones
    from conveyor.simulation.sweep import analyze_traces, default_master, spark_session

    from ._sweep import SparkProgress

    session = spark_session(master or default_master(), app_name="conveyor-analyze")
    found: list[TraceAnalysis] = []
    try:
        progress = SparkProgress(session, console, "analyzing", len(traces), unit="traces")
        progress.run(lambda: found.append(analyze_traces(
            session, [str(path.resolve()) for path in traces], priorities=priorities, min_jain=min_jain
        )))
    finally:
        session.stop()
    return found[0]


def run_analyze(
    traces: Sequence[Path],
    *,
    engine: Engine = Engine.AUTO,
    max_mb: float = IN_PROCESS_MAX_MB,
    master: str | None = None,
    priorities: int = 10,
    min_jain: float = 0.9,
    console: Console | None = None,
) -> TraceAnalysis:
    """Analyze traces on the engine chosen (``choose_engine``) and print the verdicts.

    Raises:
        FileNotFoundError: a trace that does not exist.
        ValueError: in process forced on a Parquet trace.
    """
    console = console or _console()
    missing = [str(path) for path in traces if not path.exists()]
    if missing:
        msg = f"no such trace: {', '.join(missing)}"
        raise FileNotFoundError(msg)
    chosen = choose_engine(traces, engine, max_mb)
    started = time.perf_counter()
    if chosen is Engine.SPARK:
        analysis = analyze_on_spark(traces, master=master, priorities=priorities, min_jain=min_jain, console=console)
    else:
        analysis = analyze_here(traces, priorities=priorities, min_jain=min_jain, console=console)
    print_analysis(analysis, console)
    where = "on Spark (start-up included)" if chosen is Engine.SPARK else "in process"
    console.print(f"Analyzed {sum(count for _, count in analysis.events):,} events in "
                  f"{time.perf_counter() - started:.1f} s {where}.")
    return analysis
