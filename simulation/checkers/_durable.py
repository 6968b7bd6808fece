"""Checkers for a durable queue whose process crashes and whose disk misbehaves, from its clients' word alone.

After a kill -9 the queue's own notes are no witness (the crash takes back whatever it had not
synced), so these judge only what the clients saw, as Jepsen's total-queue checker does:

* ``durable_total_queue``: every confirmed message was acked by a client that was given it, or is
  found by the final browse (no confirmed message lost); nothing is given or found that no
  publisher sent; every publish is answered, or given up by its publisher (``EnqueueInDoubt``:
  its process crashed, its fsync failed or its disk was full, and the publisher told its user);
  a publish given up, or refused, is never confirmed afterwards. A message in doubt may be there
  or not: the crash decided.
* ``found_order``: the messages the final browse found that no client was ever given come, per
  priority, in the order they were published: recovery keeps the queue's order.
* ``acked_stays_acked``: a message whose ack the queue confirmed (``AckResult``, sent only once the
  ack is synced) is never given to a client again nor found at the end, crash or not; an ack not
  confirmed may come back (at-least-once).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import attrs

from conveyor.runtime import EventKind, TraceEvent

from ._history import AckConfirmed, DeliveryReceived, EnqueueAnswered, EnqueueSent, FoundAtEnd, _Ledger
from ._result import CheckResult


@final
@attrs.frozen
class EnqueueInDoubt:
    """Client history: the publisher gave up waiting for the answer to these publishes and told its user.

    What a client does when its connection dies or no confirm comes in time: the message may or
    may not be in the queue, but the publisher never counts it as confirmed.
    """

    queue: str
    message_ids: tuple[str, ...]


def durable_total_queue(trace: Iterable[TraceEvent]) -> CheckResult:
    """No confirmed message lost, no phantom, every publish answered or given up, none confirmed after it."""
    events = trace if isinstance(trace, list) else list(trace)
    ledger = _Ledger(events)
    violations = [f"t={time:g}: {client}: {message_id} {what}" for time, client, what, message_id in ledger.left
                  if message_id not in ledger.sent]  # a refused publish may still be there after a crash
    doubted: dict[str, float] = {}
    for event in events:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        if type(note) is EnqueueInDoubt:
            for message_id in note.message_ids:
                doubted.setdefault(message_id, event.time)
        elif type(note) is EnqueueAnswered:
            for message_id in note.confirmed:
                if message_id in doubted:
                    violations.append(f"t={event.time:g}: {message_id} was confirmed after its publisher gave it up "
                                      f"at t={doubted[message_id]:g} (its write was never known to be synced)")
                elif message_id in ledger.refused:
                    violations.append(f"t={event.time:g}: {message_id} was confirmed after it was refused")
    finished = bool(ledger.browsed)
    lost = unanswered = unresolved = in_doubt = 0
    for message_id, sent_at in ledger.sent.items():
        confirmed = message_id in ledger.confirmed
        if message_id in doubted and not confirmed:
            in_doubt += 1
            continue
        if message_id in ledger.refused or (confirmed and message_id in ledger.acked):
            continue
        if not finished:
            unresolved += 1
            continue
        if not confirmed:
            unanswered += 1
            violations.append(f"{message_id}, sent at t={sent_at:g}, was never confirmed, refused or given up")
        elif message_id not in ledger.found:
            lost += 1
            fate = "given but never acked" if ledger.received.get(message_id) else "never given to a client"
            violations.append(f"{message_id} was confirmed to its publisher, {fate}, and not found at the end in "
                              f"{' or '.join(sorted(ledger.browsed))}: a confirmed message was lost")
    return CheckResult.of(
        "durable_total_queue", violations, sent=len(ledger.sent), confirmed=len(ledger.confirmed),
        refused=len(ledger.refused), in_doubt=in_doubt, acked=len(ledger.acked), lost=lost,
        unanswered=unanswered, unresolved=unresolved, browsed=float(finished),
    )


def found_order(trace: Iterable[TraceEvent], queue: str) -> CheckResult:
    """Messages of ``queue`` the final browse found and no client was given come, per priority, in publish order."""
    published: dict[str, tuple[int, int]] = {}  # message id -> (priority, publish order)
    given: set[str] = set()
    found: list[str] = []
    for event in trace:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        cls = type(note)
        if cls is EnqueueSent and note.queue == queue:
            for sent in note.messages:
                if sent.message_id is not None:
                    published.setdefault(sent.message_id, (sent.priority, len(published)))
        elif cls is DeliveryReceived and note.acquiring:
            given.add(note.message_id)
        elif cls is FoundAtEnd and note.queue == queue and note.message_id not in found:
            found.append(note.message_id)
    last: dict[int, tuple[int, str]] = {}
    violations: list[str] = []
    checked = 0
    for message_id in found:
        if message_id in given or message_id not in published:
            continue
        priority, order = published[message_id]
        checked += 1
        before = last.get(priority)
        if before is not None and before[0] > order:
            violations.append(f"priority {priority}: {message_id} (published #{order}) was found after "
                              f"{before[1]} (published #{before[0]}), though neither was ever delivered")
        last[priority] = max(before, (order, message_id)) if before is not None else (order, message_id)
    return CheckResult.of("found_order", violations, checked=checked)


def acked_stays_acked(trace: Iterable[TraceEvent], queue: str) -> CheckResult:
    """A message of ``queue`` whose ack was confirmed is never given anew nor found by the final browse.

    A delivery made before the confirm may still reach a client late (it was paused, or its channel
    slow): it carries an attempt the clients had already seen by then, so only a receipt of a later
    attempt is a delivery made after the ack was confirmed.
    """
    seen: dict[str, int] = {}  # message id -> the highest attempt any client was given
    confirmed: dict[str, tuple[float, int]] = {}  # message id -> (when its ack was confirmed, attempts seen then)
    violations: list[str] = []
    for event in trace:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        cls = type(note)
        if cls is AckConfirmed and note.queue == queue:
            for message_id in note.message_ids:
                confirmed.setdefault(message_id, (event.time, seen.get(message_id, 0)))
        elif cls is DeliveryReceived and note.queue == queue and note.acquiring:
            message_id = note.message_id
            seen[message_id] = max(seen.get(message_id, 0), note.attempt)
            at = confirmed.get(message_id)
            if at is not None and note.attempt > at[1]:
                violations.append(f"t={event.time:g}: {message_id} was given again (delivery {note.attempt}) after "
                                  f"its ack was confirmed at t={at[0]:g}")
        elif cls is FoundAtEnd and note.queue == queue and note.message_id in confirmed:
            violations.append(f"{note.message_id} was found at the end though its ack was confirmed at "
                              f"t={confirmed[note.message_id][0]:g}: a confirmed ack was lost")
    return CheckResult.of("acked_stays_acked", violations, confirmed_acks=len(confirmed))


def client_counts(trace: Iterable[TraceEvent]) -> tuple[int, int, int, int]:
    """A durable run's figures from its clients' word: confirmed publishes, receipts, confirmed messages acked,
    confirmed messages found in a dead-letter queue at the end (the queue's own notes do not survive a crash)."""
    ledger = _Ledger(trace)
    confirmed = ledger.confirmed & set(ledger.sent)
    acked = sum(1 for message_id in confirmed if message_id in ledger.acked)
    dead = sum(1 for message_id in confirmed - set(ledger.acked)
               if ledger.browsed.get(ledger.found.get(message_id, ""), False))
    return len(confirmed), sum(ledger.received.values()), acked, dead
