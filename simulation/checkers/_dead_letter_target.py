"""``dead_letter_target``: a queue's dead letters go where its configuration in force says, Reconfigure included.

Judged from the kernel's record alone: the ``Reconfigure`` messages the queue handled (from then on
their ``dead_letter`` is the target), when the queue last handed each message out (a ``Delivered``
carrying it) or took it in (its ``Publish`` / ``PublishBatch``), and every dead letter it published
(a ``Publish`` carrying ``x-dead-letter-reason``). A message is dead-lettered by the nack, lapse,
expiry or overflow that settles it, at some moment between the queue's last hand-out (or intake)
of it and the dead letter's send: a paged queue sends only once the body is read back, and
docs/broker.md gives a Reconfigure's target "to the next nack or lapse". So the dead letter must
reach a target that was in force at some moment of that window; a queue that keeps sending to a
target replaced before the message was even handed out breaks the promise.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import DEAD_LETTER_REASON, Delivered, Publish, PublishBatch, Reconfigure
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult


def dead_letter_target(trace: Iterable[TraceEvent], queue_path: str, initial: str | None) -> CheckResult:
    """Each dead letter of ``queue_path`` goes to a dead-letter queue in force since its message was last handed out."""
    history: list[tuple[float, str | None]] = [(float("-inf"), initial)]  # (from when, target)
    last_seen: dict[str | None, float] = {}  # message id -> last hand-out or intake by the queue
    violations: list[str] = []
    judged = switched = 0
    for event in trace:
        kind = event.kind
        message = event.message
        kind_of = type(message)
        if kind is EventKind.DELIVERED and event.receiver == queue_path:
            if kind_of is Reconfigure:
                dead_letter = message.config.dead_letter
                new = None if dead_letter is None else str(dead_letter.path)
                switched += new != history[-1][1]
                history.append((event.time, new))
            elif kind_of is Publish:
                last_seen[message.message.message_id] = event.time
            elif kind_of is PublishBatch:
                for item in message.messages:
                    last_seen[item.message_id] = event.time
        elif kind is EventKind.SENT and event.sender == queue_path:
            if kind_of is Delivered:
                for delivery in message.deliveries:
                    last_seen[delivery.message.message_id] = event.time
                continue
            if kind_of is not Publish:
                continue
            reason = dict(message.message.headers).get(DEAD_LETTER_REASON)
            if reason is None:
                continue
            judged += 1
            allowed = _in_force_between(history, last_seen.get(message.message.message_id, float("-inf")), event.time)
            if event.receiver not in allowed:
                shown = " or ".join(str(target) for target in allowed)
                violations.append(f"t={event.time:g}: {message.message.message_id!r} dead-lettered ({reason}) to "
                                  f"{event.receiver}, but the dead-letter queue in force was {shown}")
    return CheckResult.of("dead_letter_target", violations, judged=judged, switched=switched)


def _in_force_between(history: list[tuple[float, str | None]], start: float, end: float) -> list[str | None]:
    """The targets in force at some moment of ``[start, end]``, oldest first."""
    allowed: list[str | None] = []
    for index, (since, target) in enumerate(history):
        until = history[index + 1][0] if index + 1 < len(history) else float("inf")
        if since <= end and until > start and target not in allowed:
            allowed.append(target)
    return allowed
