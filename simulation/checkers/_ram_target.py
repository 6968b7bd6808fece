"""A paged queue keeps no more in RAM than its memory target: its bodies' bytes and ``ENTRY_RAM_BYTES`` for each
(docs/storage.md, paging).

The queue notes ``BodiesInRam`` after each handler that changed what it holds: the pager balances
after every handler, so each note must be within the target, a durable queue's after a crash and
its recovery as much as a transient one's.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import BodiesInRam
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult


def ram_under_target(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """Every ``BodiesInRam`` note of ``queue_path`` is within its target."""
    violations: list[str] = []
    judged = 0
    peak = 0
    for event in trace:
        if event.kind is EventKind.NOTE and event.sender == queue_path and type(event.message) is BodiesInRam:
            note = event.message
            judged += 1
            peak = max(peak, note.held_bytes)
            if note.held_bytes > note.target_bytes:
                violations.append(f"t={event.time:g}: {queue_path} held {note.held_bytes} bytes of messages in RAM "
                                  "(bodies and ENTRY_RAM_BYTES each), "
                                  f"over its target of {note.target_bytes}")
    return CheckResult.of("ram_under_target", violations, judged=judged, peak=peak)
