"""A message's TTL ends it no sooner than ``ttl_s`` after the queue took its publish (docs/broker.md, TTLs).

``expiry`` judges the other side (nothing is delivered once the TTL ran out); a queue that drops
messages early passes it, and ``total_queue`` forgives a missing message whose TTL ran out by the
end of the run. This checker times each expiry the queue carries out (its ``EntrySettled`` with
outcome ``expired``) against the kernel's record of when the queue received the publish
(``DELIVERED``, a publish handed twice counting from the later receipt) and the TTL the
publisher gave it, never against the queue's own account of the deadline.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import EntryEnqueued, EntrySettled, Publish, PublishBatch
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult

_EXPIRED = "expired"


def expiry_not_early(trace: Iterable[TraceEvent], queue_path: str) -> CheckResult:
    """No message of ``queue_path`` expires before its TTL, counted from the queue's receipt of its publish."""
    lapses: dict[str, float] = {}  # message id -> receipt + ttl
    tags: dict[int, str] = {}  # tag -> message id, from the queue's EntryEnqueued
    violations: list[str] = []
    judged = 0
    for event in trace:
        kind = event.kind
        message = event.message
        if kind is EventKind.DELIVERED and event.receiver == queue_path:
            cls = type(message)
            if cls is Publish or cls is PublishBatch:
                for published in (message.message,) if cls is Publish else message.messages:
                    if published.ttl_s is not None:
                        lapses[published.message_id] = event.time + published.ttl_s
        elif kind is EventKind.NOTE and event.sender == queue_path:
            if type(message) is EntryEnqueued:
                tags[message.tag] = message.message.message_id
            elif type(message) is EntrySettled and message.outcome == _EXPIRED:
                message_id = tags.get(message.tag)
                at = lapses.get(message_id) if message_id is not None else None
                if at is None:
                    continue
                judged += 1
                if event.time < at:
                    violations.append(f"t={event.time:g}: {message_id!r} (tag {message.tag}) expired before its "
                                      f"TTL ran out at t={at:g}")
    return CheckResult.of("expiry_not_early", violations, judged=judged)
