"""``dead_letter_target``: a queue's dead letters go where its configuration in force says, Reconfigure included.

Judged from the kernel's record alone: the ``Reconfigure`` messages the queue handled (from then on
their ``dead_letter`` is the target) and every dead letter it published (a ``Publish`` carrying
``x-dead-letter-reason``), which must reach the target in force when it was sent.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import DEAD_LETTER_REASON, Publish, Reconfigure
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult


def dead_letter_target(trace: Iterable[TraceEvent], queue_path: str, initial: str | None) -> CheckResult:
    """Each dead letter of ``queue_path`` goes to the dead-letter queue in force (``initial``, then Reconfigure's)."""
    target = initial
    violations: list[str] = []
    judged = switched = 0
    for event in trace:
        kind = event.kind
        message = event.message
        if kind is EventKind.DELIVERED and event.receiver == queue_path and type(message) is Reconfigure:
            dead_letter = message.config.dead_letter
            new = None if dead_letter is None else str(dead_letter.path)
            switched += new != target
            target = new
        elif kind is EventKind.SENT and event.sender == queue_path and type(message) is Publish:
            reason = dict(message.message.headers).get(DEAD_LETTER_REASON)
            if reason is None:
                continue
            judged += 1
            if event.receiver != target:
                violations.append(f"t={event.time:g}: {message.message.message_id!r} dead-lettered ({reason}) to "
                                  f"{event.receiver}, but the dead-letter queue in force was {target}")
    return CheckResult.of("dead_letter_target", violations, judged=judged, switched=switched)
