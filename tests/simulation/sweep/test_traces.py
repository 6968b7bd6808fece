"""Trace analysis on Spark gives the in-process checkers' verdicts, on real trio and thread traces.

Every trace of this module is analysed in one ``analyze_traces`` call (each Spark job has a
fixed cost, and one call over many traces is how the command line uses it too); each test
then reads its trace's verdicts.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from pyspark.sql import SparkSession

from conveyor.runtime import TraceEvent, iter_jsonl, read_jsonl
from conveyor.simulation.checkers import CheckResult, accounting, fairness, strict_order
from conveyor.simulation.scenarios import run_scenario
from conveyor.simulation.sweep import (
    QueueVerdict,
    TraceAnalysis,
    analyze_traces,
    analyze_traces_in_process,
    read_trace,
    write_trace_parquet,
)
from tests.simulation.sweep.traces import record_threads, record_trio, save, swap_first_deliveries, workload

QUEUE = "/queue"


def in_process(trace: list[TraceEvent], queue: str = QUEUE) -> tuple[CheckResult, CheckResult, CheckResult]:
    """The checkers' own verdicts, in the order ``QueueVerdict.results`` gives them."""
    return strict_order(trace, queue, from_clients=False), accounting(trace, queue), fairness(trace, queue)


@attrs.frozen
class Recorded:
    """The traces of this module: in memory where the checkers need them, and their files."""

    trio: list[TraceEvent]
    threads: list[TraceEvent]
    files: dict[str, Path]
    swapped_tags: tuple[int, int]
    analysis: TraceAnalysis

    def verdict(self, name: str, queue: str = QUEUE) -> QueueVerdict:
        (found,) = [v for v in self.analysis.verdicts if v.trace == str(self.files[name]) and v.queue == queue]
        return found


@pytest.fixture(scope="module")
def recorded(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    folder = tmp_path_factory.mktemp("traces")
    # 400 messages at three priorities, 4 consumers that sometimes nack or release, a browser
    trio_trace = record_trio(workload(400, browsers=1, nacks=True), seed=3)
    thread_trace = record_threads(workload(200, consumers=3, nacks=True), seed=5)
    files = {"trio": save(trio_trace, folder / "trio.jsonl"), "threads": save(thread_trace, folder / "threads.jsonl")}
    files["memory.parquet"] = folder / "memory.parquet"
    files["jsonl.parquet"] = folder / "jsonl.parquet"
    assert write_trace_parquet(spark, trio_trace, files["memory.parquet"]) == len(trio_trace)
    assert write_trace_parquet(spark, files["trio"], files["jsonl.parquet"]) == len(trio_trace)
    files["swapped"] = folder / "swapped.jsonl"
    tags = swap_first_deliveries(files["trio"], files["swapped"])
    files["damaged"] = folder / "damaged.jsonl"
    files["damaged"].write_text(files["trio"].read_text(encoding="utf-8") + "not json\n", encoding="utf-8")
    # a simulated run with crashes: its clients write receipts, which the in-run checkers prefer
    files["simulated"] = save(run_scenario("fairness", 2, faults="crash,delay").sim.trace, folder / "simulated.jsonl")
    analysis = analyze_traces(spark, list(files.values()))
    return Recorded(trio_trace, thread_trace, files, tags, analysis)


def test_a_trio_trace_gets_the_checkers_verdicts(recorded: Recorded) -> None:
    verdict = recorded.verdict("trio")
    assert verdict.results == in_process(recorded.trio)
    _sound(verdict)
    assert verdict.accounting.metric("enqueued") == 400
    assert verdict.fairness.metric("consumers") == 4  # the browser does not count
    assert dict(recorded.analysis.events)[str(recorded.files["trio"])] == len(recorded.trio)


def test_a_thread_trace_gets_the_checkers_verdicts(recorded: Recorded) -> None:
    verdict = recorded.verdict("threads")
    assert verdict.results == in_process(recorded.threads)
    _sound(verdict)


def _sound(verdict: QueueVerdict) -> None:
    """Order and accounting hold on every backend; fairness of a real-time run is the OS scheduler's
    to give (Jain 0.84-0.99 seen over runs of this workload under load), so only starvation fails it.
    The simulator checks fairness where the schedule is the test's own."""
    assert verdict.strict_order.ok, verdict.strict_order
    assert verdict.accounting.ok, verdict.accounting
    assert verdict.fairness.metric("jain") > 0.6, verdict.fairness


def test_every_queue_that_enqueued_is_checked(recorded: Recorded) -> None:
    queues = {v.queue for v in recorded.analysis.verdicts if v.trace == str(recorded.files["trio"])}
    assert QUEUE in queues
    assert queues <= {QUEUE, "/dead-letters"}


def test_parquet_traces_keep_the_order_and_give_the_same_verdicts(spark: SparkSession, recorded: Recorded) -> None:
    rows = read_trace(spark, recorded.files["memory.parquet"]).orderBy("seq").select("kind", "sender").collect()
    assert [(r.kind, r.sender) for r in rows] == [(e.kind.value, e.sender) for e in recorded.trio]
    expected = in_process(recorded.trio)
    assert recorded.verdict("memory.parquet").results == expected
    assert recorded.verdict("jsonl.parquet").results == expected


def test_an_injected_ordering_violation_is_reported(recorded: Recorded) -> None:
    low, high = recorded.swapped_tags
    verdict = recorded.verdict("swapped")
    assert not verdict.strict_order.ok
    assert any(f"got tag {low} after tag {high}" in line for line in verdict.strict_order.violations)
    # the in-process checker, reading the same file, finds the same lines
    assert verdict.strict_order == strict_order(read_jsonl(recorded.files["swapped"]), QUEUE, from_clients=False)
    assert verdict.accounting.ok  # only the order was touched
    assert not recorded.analysis.ok


def test_lines_that_are_not_events_are_counted(recorded: Recorded) -> None:
    unreadable = dict(recorded.analysis.unreadable)
    assert unreadable[str(recorded.files["damaged"])] == 1
    assert unreadable[str(recorded.files["trio"])] == 0
    assert recorded.verdict("damaged").results == recorded.verdict("trio").results


def test_the_in_process_analysis_gives_sparks_verdicts_on_the_same_traces(recorded: Recorded) -> None:
    """``conveyor analyze`` judges small traces in process: the same verdicts, counts and lines as Spark."""
    files = [recorded.files[name] for name in ("trio", "threads", "swapped", "damaged", "simulated")]
    here = analyze_traces_in_process(files)
    names = {str(path) for path in files}
    on_spark = TraceAnalysis(
        events=tuple(item for item in recorded.analysis.events if item[0] in names),
        unreadable=tuple(item for item in recorded.analysis.unreadable if item[0] in names),
        verdicts=tuple(verdict for verdict in recorded.analysis.verdicts if verdict.trace in names),
    )
    assert len(here.verdicts) >= 4
    assert any(not verdict.ok for verdict in here.verdicts)  # the swapped trace: a violation both find
    assert here == on_spark


@pytest.mark.slow
def test_a_million_event_trio_trace(spark: SparkSession, tmp_path: Path) -> None:
    """At least 1,000,000 events from one real TrioSystem run, checked on Spark and, streaming, in process."""
    trace = record_trio(workload(76_000), seed=11)
    assert len(trace) >= 1_000_000, len(trace)
    path = save(trace, tmp_path / "million.jsonl")
    del trace  # the analysis reads the file; the in-process check below streams it
    (verdict,) = [v for v in analyze_traces(spark, [path]).verdicts if v.queue == QUEUE]
    assert verdict.ok, verdict
    assert verdict.strict_order == strict_order(iter_jsonl(path), QUEUE)
    assert verdict.accounting == accounting(iter_jsonl(path), QUEUE)
    assert verdict.accounting.metric("enqueued") == 76_000
