"""``queue_stats``: the statistics a queue reports (``GetStats``, docs/broker.md) agree with its clients' history.

At the end of a broker run, once it went quiet, a reader asks the queue for its ``QueueStats`` and
notes them (``QueueStatsRead``). Judged against what the clients noted and against themselves:

* every message the queue accepted is in exactly one place: ``published`` equals ``acked +
  dead_lettered + expired + depth + in_flight``;
* ``published`` is the number of publishes the publisher saw confirmed, ``rejected`` the number it
  saw refused;
* no message expired that was not published with a TTL (``expired`` is at most their number), and
  ``redelivered`` and ``returned`` are each at most ``delivered``;
* each consumer still registered was ``delivered`` exactly the deliveries its client noted
  receiving from it (``DeliveryReceived`` under its consumer id, or a callback client's job
  outcomes, ``callback_answer``): by the end everything sent to a
  live consumer has reached its client, queue crashes included (the counts are journaled).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import final

import attrs

from conveyor.actors.broker import QueueStats
from conveyor.runtime import EventKind, TraceEvent

from ._history import DeliveryReceived, EnqueueAnswered, EnqueueSent, callback_answer
from ._result import CheckResult


@final
@attrs.frozen
class QueueStatsRead:
    """Scenario history: what ``GetStats`` answered once the run went quiet."""

    queue: str
    stats: QueueStats


def queue_stats(trace: Iterable[TraceEvent], queue: str) -> CheckResult:
    """The last ``QueueStats`` read of ``queue`` adds up, and agrees with its publisher's and clients' history."""
    confirmed: set[str] = set()
    refused: set[str] = set()
    with_ttl: set[str] = set()
    receipts: Counter[int] = Counter()
    read: QueueStats | None = None
    for event in trace:
        if event.kind is EventKind.JOB_DONE and (answered := callback_answer(event)) is not None:
            if answered[1].queue == queue:  # a callback client's receipt: its job's outcome
                receipts[answered[1].consumer_id] += 1
            continue
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        cls = type(note)
        if cls is EnqueueAnswered and note.queue == queue:
            confirmed.update(note.confirmed)
            refused.update(note.refused)
        elif cls is EnqueueSent and note.queue == queue:
            with_ttl.update(m.message_id for m in note.messages if m.ttl_s is not None and m.message_id is not None)
        elif cls is DeliveryReceived and note.queue == queue and note.acquiring:
            receipts[note.consumer_id] += 1
        elif cls is QueueStatsRead and note.queue == queue:
            read = note.stats
    if read is None:
        return CheckResult.of("queue_stats", [], read=0)
    s = read
    violations: list[str] = []
    placed = s.acked + s.dead_lettered + s.expired + s.depth + s.in_flight
    if s.published != placed:
        violations.append(f"published={s.published} but acked={s.acked} + dead_lettered={s.dead_lettered} + "
                          f"expired={s.expired} + depth={s.depth} + in_flight={s.in_flight} = {placed}")
    if s.published != len(confirmed):
        violations.append(f"published={s.published}, but the publisher saw {len(confirmed)} publishes confirmed")
    if s.rejected != len(refused):
        violations.append(f"rejected={s.rejected}, but the publisher saw {len(refused)} publishes refused")
    if s.expired > len(with_ttl):
        violations.append(f"expired={s.expired}, but only {len(with_ttl)} messages were published with a TTL")
    if s.redelivered > s.delivered:
        violations.append(f"redelivered={s.redelivered} is more than delivered={s.delivered}")
    if s.returned > s.delivered:
        violations.append(f"returned={s.returned} is more than delivered={s.delivered}")
    for consumer in s.consumers:
        if not consumer.acquiring:
            continue
        got = receipts[consumer.consumer_id]
        if consumer.delivered != got:
            violations.append(f"consumer {consumer.consumer_id} ({consumer.path}): delivered={consumer.delivered}, "
                              f"but its client noted {got} deliveries from it")
    return CheckResult.of("queue_stats", violations, read=1, published=s.published,
                          consumers=len(s.consumers))
