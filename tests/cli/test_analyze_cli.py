"""``conveyor analyze``: small traces judged in process (no Spark start-up), large ones on Spark, same verdicts.

The verdicts of both engines are compared on the same traces in tests/simulation/sweep/test_traces.py
(where the Spark session lives); here the engine choice, the command's outcome and its progress.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from typer.testing import CliRunner

from conveyor.cli import app
from conveyor.cli._analyze import Engine, choose_engine
from conveyor.simulation.checkers import accounting, strict_order
from conveyor.simulation.sweep import analyze_traces_in_process
from tests.simulation.sweep.traces import record_simulated, save, swap_first_deliveries, workload

runner = CliRunner()
QUEUE = "/queue"


@attrs.frozen
class Traces:
    good: Path
    swapped: Path
    damaged: Path
    parquet: Path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Traces:
    folder = tmp_path_factory.mktemp("analyze")
    # simulated: a real-time run's fairness is the OS scheduler's, and failed the "good" trace under load
    good = save(record_simulated(workload(120, nacks=True), seed=4), folder / "good.jsonl")
    swapped = folder / "swapped.jsonl"
    swap_first_deliveries(good, swapped)
    damaged = folder / "damaged.jsonl"
    damaged.write_text(good.read_text(encoding="utf-8") + "not json\n", encoding="utf-8")
    parquet = folder / "trace.parquet"
    parquet.mkdir()
    return Traces(good, swapped, damaged, parquet)


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any start of the Spark analysis fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr("conveyor.cli._analyze.analyze_on_spark", refuse)


def test_a_small_trace_is_analysed_in_process(traces: Traces, no_spark: None) -> None:
    result = runner.invoke(app, ["analyze", str(traces.good)])
    assert result.exit_code == 0, result.output
    assert "in process." in result.output
    assert "VIOLATED" not in result.output


def test_a_violation_found_in_process_fails_the_command(traces: Traces, no_spark: None) -> None:
    result = runner.invoke(app, ["analyze", str(traces.swapped)])
    assert result.exit_code == 1
    assert "VIOLATED" in result.output and "strict_order" in result.output


def test_lines_that_are_not_events_are_counted_and_fail_the_command(traces: Traces, no_spark: None) -> None:
    result = runner.invoke(app, ["analyze", str(traces.damaged)])
    assert result.exit_code == 1
    assert "1 lines are not trace events" in result.output


def test_the_in_process_verdicts_are_the_checkers_on_the_queues_own_events(traces: Traces) -> None:
    from conveyor.runtime import read_jsonl

    analysis = analyze_traces_in_process([traces.swapped])
    (verdict,) = [v for v in analysis.verdicts if v.queue == QUEUE]
    events = read_jsonl(traces.swapped)
    assert verdict.strict_order == strict_order(events, QUEUE, from_clients=False)
    assert not verdict.strict_order.ok
    assert verdict.accounting == accounting(events, QUEUE)
    assert dict(analysis.events)[str(traces.swapped)] == len(events)


def test_the_engine_is_chosen_by_size_and_format(traces: Traces) -> None:
    size_mb = traces.good.stat().st_size / 1024 / 1024
    assert choose_engine([traces.good], Engine.AUTO, max_mb=size_mb * 2) is Engine.IN_PROCESS
    assert choose_engine([traces.good, traces.swapped], Engine.AUTO, max_mb=size_mb * 1.5) is Engine.SPARK
    assert choose_engine([traces.good, traces.parquet], Engine.AUTO, max_mb=1000) is Engine.SPARK
    assert choose_engine([traces.good], Engine.SPARK, max_mb=1000) is Engine.SPARK
    assert choose_engine([traces.good], Engine.IN_PROCESS, max_mb=0) is Engine.IN_PROCESS


def test_the_command_sends_large_traces_to_spark(traces: Traces, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[list[Path]] = []

    def on_spark(paths: list[Path], **kwargs: object) -> object:
        started.append(paths)
        return analyze_traces_in_process([str(path.resolve()) for path in paths])

    monkeypatch.setattr("conveyor.cli._analyze.analyze_on_spark", on_spark)
    result = runner.invoke(app, ["analyze", str(traces.good), "--in-process-max-mb", "0"])
    assert result.exit_code == 0, result.output
    assert started == [[traces.good]]
    assert "on Spark" in result.output


def test_in_process_is_refused_for_parquet_naming_the_option(traces: Traces) -> None:
    result = runner.invoke(app, ["analyze", str(traces.parquet), "--engine", "in-process"])
    assert result.exit_code == 2
    assert "--engine in-process reads JSON Lines traces only" in " ".join(result.output.split())


def test_progress_counts_every_byte_and_names_every_queue(traces: Traces) -> None:
    read: list[int] = []
    judged: list[tuple[str, str]] = []
    analysis = analyze_traces_in_process([traces.good], on_bytes=read.append,
                                         on_queue=lambda trace, queue: judged.append((trace, queue)))
    assert sum(read) == traces.good.stat().st_size
    assert judged == [(v.trace, v.queue) for v in analysis.verdicts]


def test_a_large_in_process_analysis_shows_a_progress_bar(
    traces: Traces, no_spark: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("conveyor.cli._analyze.PROGRESS_MIN_BYTES", 0)
    result = runner.invoke(app, ["analyze", str(traces.good)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "judging /queue of good.jsonl" in result.output
