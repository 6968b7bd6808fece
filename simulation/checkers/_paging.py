"""Checkers for the paging scenario: the variable queue under a tiny memory target, on the simulated disk.

The client's history (``PagingSent``, ``PagingConfirmed``, ``PagingReceived``, ``PagingAcked``,
``PagingDrained``) judges order and loss, as a total-queue checker does; the shell's notes of the
core's ``status()`` (``PagingStatus``) judge the memory it holds:

* ``paging_order``: messages come to the client for the first time in the order they were published
  (a requeued one goes back to its place, so the first deliveries stay in publish order);
* ``paging_no_loss``: the client drained the queue; every confirmed message came back and was acked,
  whole; nothing came back that was never published;
* ``paging_ram``: after every request the bodies in RAM (ready and unacknowledged) are at most the
  target, and the positions in RAM outside q1 and q4 (betas: q2 and q3) at most the larger of the
  target and one index segment, plus the segment being read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import attrs

from conveyor.actors.storage import VariableQueueStatus
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult


@final
@attrs.frozen
class PagingSent:
    """Client history: it published ``msg_id`` (ids are ``p0``, ``p1``, ... in publish order)."""

    msg_id: str


@final
@attrs.frozen
class PagingConfirmed:
    """Client history: the shell confirmed these publishes (they are synced)."""

    msg_ids: tuple[str, ...]


@final
@attrs.frozen
class PagingReceived:
    """Client history: it fetched ``msg_id`` at ``seq_id``; ``intact``: the body was the one it published."""

    msg_id: str
    seq_id: int
    redelivered: bool
    intact: bool


@final
@attrs.frozen
class PagingAcked:
    """Client history: it acked ``msg_id``."""

    msg_id: str


@final
@attrs.frozen
class PagingDrained:
    """Client history: done with its operations, it fetched until the queue said it was empty."""


@final
@attrs.frozen
class PagingStatus:
    """The shell's note after each request: the core's ``status()`` and its index segment size."""

    status: VariableQueueStatus
    segment_entries: int


def _number(msg_id: str) -> int:
    return int(msg_id[1:]) if msg_id[1:].isdigit() else -1


def _notes(trace: Iterable[TraceEvent]) -> Iterable[tuple[float, object]]:
    for event in trace:
        if event.kind is EventKind.NOTE:
            yield event.time, event.message


def paging_order(trace: Iterable[TraceEvent]) -> CheckResult:
    """Each message's first delivery comes after the first deliveries of every message published before it."""
    seen: set[str] = set()
    latest = (-1, "")
    violations: list[str] = []
    for time, note in _notes(trace):
        if isinstance(note, PagingReceived) and note.msg_id not in seen:
            seen.add(note.msg_id)
            number = _number(note.msg_id)
            if number < latest[0]:
                violations.append(f"t={time:g}: {note.msg_id} came for the first time after {latest[1]}, "
                                  "published later")
            latest = max(latest, (number, note.msg_id))
    return CheckResult.of("paging_order", violations, first_deliveries=len(seen))


def paging_no_loss(trace: Iterable[TraceEvent]) -> CheckResult:
    """The queue was drained; every confirmed message came back whole and was acked; no phantom."""
    sent: set[str] = set()
    confirmed: set[str] = set()
    acked: set[str] = set()
    drained = False
    violations: list[str] = []
    for time, note in _notes(trace):
        if isinstance(note, PagingSent):
            sent.add(note.msg_id)
        elif isinstance(note, PagingConfirmed):
            confirmed.update(note.msg_ids)
        elif isinstance(note, PagingReceived):
            if note.msg_id not in sent:
                violations.append(f"t={time:g}: {note.msg_id} came back, but it was never published (a phantom)")
            if not note.intact:
                violations.append(f"t={time:g}: {note.msg_id} came back with a body that is not the one published")
        elif isinstance(note, PagingAcked):
            acked.add(note.msg_id)
        elif isinstance(note, PagingDrained):
            drained = True
    if not drained:
        violations.append("the client never finished draining the queue")
    missing = sorted(confirmed - acked, key=_number)
    if drained and missing:
        violations.append(f"{len(missing)} confirmed messages never came back before the queue said it was empty: "
                          f"{', '.join(missing[:10])}")
    return CheckResult.of("paging_no_loss", violations, sent=len(sent), confirmed=len(confirmed), acked=len(acked),
                          lost=len(missing) if drained else 0)


def paging_ram(trace: Iterable[TraceEvent]) -> CheckResult:
    """Bodies in RAM never above the target; betas never above max(target, one segment) plus one segment."""
    violations: list[str] = []
    peak_bodies = peak_betas = 0
    for time, note in _notes(trace):
        if not isinstance(note, PagingStatus):
            continue
        status = note.status
        target = status.target_ram_count
        if target is None:
            continue
        bodies = status.ram_msg_count + status.ram_ack_count
        betas = status.q2 + status.q3
        peak_bodies = max(peak_bodies, bodies)
        peak_betas = max(peak_betas, betas)
        if bodies > target:
            violations.append(f"t={time:g}: {bodies} bodies in RAM ({status.ram_msg_count} ready, "
                              f"{status.ram_ack_count} unacked) over the target of {target}")
        bound = max(target, note.segment_entries) + note.segment_entries
        if betas > bound:
            violations.append(f"t={time:g}: {betas} positions in q2 and q3 over {bound} (the target {target} or a "
                              f"segment of {note.segment_entries}, plus one being read)")
        if len(violations) >= 10:
            break
    return CheckResult.of("paging_ram", violations, peak_bodies=peak_bodies, peak_betas=peak_betas)


def paging_counts(trace: Iterable[TraceEvent]) -> tuple[int, int, int]:
    """A paging run's figures from its client's word: confirmed publishes, fetches, confirmed messages acked."""
    confirmed: set[str] = set()
    acked: set[str] = set()
    fetched = 0
    for _, note in _notes(trace):
        if isinstance(note, PagingConfirmed):
            confirmed.update(note.msg_ids)
        elif isinstance(note, PagingReceived):
            fetched += 1
        elif isinstance(note, PagingAcked):
            acked.add(note.msg_id)
    return len(confirmed), fetched, len(confirmed & acked)
