"""The subscriber runs a message once at a time, and never again once the queue took its ack (docs/subscriber.md).

The queue names a delivery by its tag and gives a lapsed message back to the same consumer under
the same tag, so one ack id can reach a subscription twice while its first copy still waits or
runs; the manager's ``AckLedger`` promises that it "never runs a message twice that it still holds
or has acked". ``runs_once`` judges that from the worker pool's ``CallbackStarted`` notes and
``CallbackEnded`` reports and from the queue's ``AckResult`` answers to the subscription's consumer
(what the queue told the client, not the queue's notes).
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import AckResult
from conveyor.actors.subscriber import CallbackStarted, Part
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult
from ._subscriber import _callbacks_ended


def runs_once(trace: Iterable[TraceEvent], subscription_path: str, queue_path: str) -> CheckResult:
    """No callback of a message starts while another of it runs in the subscription, or after one acked it.

    Messages are told apart by their ack id (one subscription's consumer keeps the tag across
    redeliveries). A callback acked its message when it ended without raising or nacking; an ack
    took when the queue's ``AckResult`` to the subscription's consumer lists the tag. Either way the
    message is not run again here: an ack the queue refused (the lease had lapsed) is sent again
    when the message comes back.
    """
    workers = f"{subscription_path}/{Part.WORKERS}"
    consumer = f"{subscription_path}/{Part.CONSUMER}"
    running: dict[str, int] = {}  # ack id -> the attempt running
    tags: dict[str, int] = {}
    acked: dict[int, float] = {}  # tag -> when the queue said its ack took
    handled: dict[str, float] = {}  # ack id -> when a callback of it ended acking it
    violations: list[str] = []
    started = 0
    for event in trace:
        kind = event.kind
        message = event.message
        if kind is EventKind.NOTE:
            if event.sender == workers and type(message) is CallbackStarted:
                started += 1
                where = f"t={event.time:g}: {subscription_path} started tag {message.tag} (attempt {message.attempt})"
                if message.ack_id in running:
                    violations.append(f"{where} while attempt {running[message.ack_id]} of it still ran")
                elif message.tag in acked:
                    violations.append(f"{where} after the queue took its ack at t={acked[message.tag]:g}")
                elif message.ack_id in handled:
                    violations.append(f"{where} after a callback of it ended acking it at "
                                      f"t={handled[message.ack_id]:g} (a refused ack is sent again, not run again)")
                running[message.ack_id] = message.attempt
                tags[message.ack_id] = message.tag
        elif kind is EventKind.SENT:
            if event.sender == workers:
                for ended in _callbacks_ended(message):
                    running.pop(ended.ack_id, None)
                    if ended.error is None and not ended.nacked:
                        handled.setdefault(ended.ack_id, event.time)
            elif event.sender == queue_path and event.receiver == consumer and type(message) is AckResult:
                for tag in message.acked:
                    acked.setdefault(tag, event.time)
    return CheckResult.of("runs_once", violations, started=started)
