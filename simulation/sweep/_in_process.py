"""Trace analysis in this process: the Spark analysis's verdicts on small traces, without Spark's start-up.

No third implementation of the checks: each queue is judged by the broker checkers themselves
(``strict_order`` from the queue's ``Delivered`` messages, ``accounting``, ``fairness``), given
only the events the queue sent, received or noted, so ``fairness`` counts what the queue
delivered as the Spark analysis does (a client's receipts, which the in-run checkers prefer,
are not read). Lines are counted as ``_traces.read_trace`` counts them: a non-blank line is an
event, and one that is not a JSON object with a ``kind`` is unreadable. JSON Lines only: a
Parquet trace needs Spark.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from conveyor.runtime import TraceEvent
from conveyor.simulation.checkers import accounting, fairness, queue_paths, strict_order

from ._verdicts import QueueVerdict, TraceAnalysis, is_parquet_trace


def _no_progress(done: int) -> None:
    """The default progress callback: nothing to show."""


def read_trace_lines(
    path: str | Path, on_bytes: Callable[[int], None] = _no_progress
) -> tuple[list[TraceEvent], int, int]:
    """A JSON Lines trace's events, its event count and its unreadable count; ``on_bytes(n)`` after each line.

    An event whose message type is not importable here is counted but not judged (Spark reads
    it and finds no type its checks read).
    """
    events: list[TraceEvent] = []
    count = unreadable = 0
    with Path(path).open("rb") as handle:
        for raw in handle:
            on_bytes(len(raw))
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            count += 1
            try:
                encoded = json.loads(line)
            except ValueError:
                unreadable += 1
                continue
            if not isinstance(encoded, dict) or encoded.get("kind") is None:
                unreadable += 1
                continue
            try:
                events.append(TraceEvent.from_json(encoded))
            except (ValueError, KeyError, TypeError, AttributeError, ImportError):
                continue
    return events, count, unreadable


def judge_queue(
    trace: str, events: Sequence[TraceEvent], queue: str, *, priorities: int = 10, min_jain: float = 0.9
) -> QueueVerdict:
    """One queue's three verdicts, from the events it sent, received or noted."""
    own = [event for event in events if queue in (event.sender, event.receiver)]
    return QueueVerdict(
        trace=trace,
        queue=queue,
        strict_order=strict_order(own, queue, priorities, from_clients=False),
        accounting=accounting(own, queue),
        fairness=fairness(own, queue, min_jain),
    )


def analyze_traces_in_process(
    paths: Sequence[str | Path],
    *,
    priorities: int = 10,
    min_jain: float = 0.9,
    on_bytes: Callable[[int], None] = _no_progress,
    on_queue: Callable[[str, str], None] | None = None,
) -> TraceAnalysis:
    """Check every queue of every JSON Lines trace for strict order, accounting and fairness, here.

    The same verdicts as ``analyze_traces`` (Spark) on the same traces. ``on_bytes(n)`` is told
    each line's size as it is read, ``on_queue(trace, queue)`` each queue as it is judged (a
    progress bar's feeds). A trace's name is its path as given.

    Raises:
        ValueError: no paths, or a Parquet trace (only Spark reads those).
    """
    if not paths:
        msg = "no trace given: pass one or more JSON Lines files or Parquet trace folders"
        raise ValueError(msg)
    parquet = [str(path) for path in paths if is_parquet_trace(path)]
    if parquet:
        msg = f"in-process analysis reads JSON Lines traces only; Spark reads Parquet ones: {', '.join(parquet)}"
        raise ValueError(msg)
    counts: list[tuple[str, int]] = []
    unreadable: list[tuple[str, int]] = []
    verdicts: list[QueueVerdict] = []
    for path in paths:
        name = str(path)
        events, count, bad = read_trace_lines(path, on_bytes)
        counts.append((name, count))
        unreadable.append((name, bad))
        for queue in queue_paths(events):
            if on_queue is not None:
                on_queue(name, queue)
            verdicts.append(judge_queue(name, events, queue, priorities=priorities, min_jain=min_jain))
    return TraceAnalysis(
        events=tuple(sorted(counts)),
        unreadable=tuple(sorted(unreadable)),
        verdicts=tuple(sorted(verdicts, key=lambda verdict: (verdict.trace, verdict.queue))),
    )
