"""What a trace analysis finds, whichever engine found it: per queue the three verdicts, per trace the counts.

Kept apart from ``_traces`` (Spark) so that the in-process analysis (``_in_process``) needs no pyspark.
"""

from __future__ import annotations

from pathlib import Path
from typing import final

import attrs

from conveyor.simulation.checkers import CheckResult


def is_parquet_trace(path: str | Path) -> bool:
    """A folder or a ``*.parquet`` path is a Parquet trace; anything else is JSON Lines."""
    target = Path(path)
    return target.is_dir() or target.suffix == ".parquet"


@final
@attrs.frozen
class QueueVerdict:
    """The three checks of one queue in one trace."""

    trace: str
    queue: str
    strict_order: CheckResult
    accounting: CheckResult
    fairness: CheckResult

    @property
    def results(self) -> tuple[CheckResult, ...]:
        """The checks in the order the command prints them."""
        return (self.strict_order, self.accounting, self.fairness)

    @property
    def ok(self) -> bool:
        """No check found a violation."""
        return all(result.ok for result in self.results)


@final
@attrs.frozen
class TraceAnalysis:
    """Every queue's verdicts, and per trace the events read and the lines that were not events."""

    events: tuple[tuple[str, int], ...]
    unreadable: tuple[tuple[str, int], ...]
    verdicts: tuple[QueueVerdict, ...]

    @property
    def ok(self) -> bool:
        """Every queue of every trace passed, and every line was an event."""
        return all(verdict.ok for verdict in self.verdicts) and not any(count for _, count in self.unreadable)
