"""The subscriber's pause and resume of its stream (docs/subscriber.md, flow control), judged from its inputs.

``flow_bound`` judges the count and bytes the load controller reports; this judges what it does
with them. The truth is rebuilt from what the controller was handed (``Received`` and
``ReceivedBatch`` add messages, ``Done`` and ``Dones`` remove them), never from its own notes:

* when a change brings the load (the larger of count / ``max_messages`` and bytes / ``max_bytes``)
  to 1 or more while the stream runs, the controller sends its consumer ``Suspend`` in that step;
* when a change brings it below ``resume_threshold`` while the stream is suspended, ``Resume``;
* it sends neither at any other time, and its ``FlowNote`` says truly whether the stream is suspended.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.broker import Resume, Suspend
from conveyor.actors.subscriber import Done, Dones, FlowControl, FlowNote, Part, Received, ReceivedBatch
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult

_DECISIONS = {Suspend: "Suspend", Resume: "Resume"}


def flow_pause(trace: Iterable[TraceEvent], subscription_path: str, flow: FlowControl) -> CheckResult:
    """The stream is suspended exactly when the load reaches 1 and resumed exactly when it falls below the threshold.

    A restarted or stopped load controller starts again with nothing counted and the stream
    running, as its fresh instance does.
    """
    load_path = f"{subscription_path}/{Part.LOAD}"
    sizes: dict[str, int] = {}
    total = 0
    paused = False
    due: str | None = None  # the decision the change being handled calls for, until it is sent
    due_at: TraceEvent | None = None
    violations: list[str] = []
    suspends = resumes = 0

    def missed() -> None:
        nonlocal due, due_at
        if due is not None and due_at is not None:
            violations.append(f"t={due_at.time:g}: {load_path} did not send {due} after {due_at.message!r} "
                              f"({len(sizes)} messages / {total} bytes unfinished)")
        due = due_at = None

    for event in trace:
        kind = event.kind
        if event.receiver == load_path and kind in (EventKind.RESTARTED, EventKind.STOPPED):
            missed()
            sizes.clear()
            total = 0
            paused = False
            continue
        message = event.message
        if kind is EventKind.DELIVERED and event.receiver == load_path:
            missed()
            changed = False
            cls = type(message)
            if cls is Received or cls is ReceivedBatch:
                for item in (message,) if cls is Received else message.items:
                    if item.ack_id not in sizes:
                        sizes[item.ack_id] = item.size
                        total += item.size
                        changed = True
            elif cls is Done or cls is Dones:
                for done in (message,) if cls is Done else message.items:
                    if done.ack_id in sizes:
                        total -= sizes.pop(done.ack_id)
                        changed = True
            if not changed:
                continue
            load = max(len(sizes) / flow.max_messages, total / flow.max_bytes)
            if not paused and load >= 1:
                paused, due, due_at = True, "Suspend", event
            elif paused and load < flow.resume_threshold:
                paused, due, due_at = False, "Resume", event
        elif kind is EventKind.SENT and event.sender == load_path and type(message) in _DECISIONS:
            sent = _DECISIONS[type(message)]
            if sent == due:
                due = due_at = None
                if sent == "Suspend":
                    suspends += 1
                else:
                    resumes += 1
            else:
                violations.append(f"t={event.time:g}: {load_path} sent {sent} with {len(sizes)} messages / {total} "
                                  f"bytes unfinished (stream {'suspended' if paused else 'running'})")
        elif kind is EventKind.NOTE and event.sender == load_path and type(message) is FlowNote:
            missed()
            if message.paused is not paused:
                violations.append(f"t={event.time:g}: {load_path} noted paused={message.paused!r} while the stream "
                                  f"was {'suspended' if paused else 'running'}")
    missed()
    return CheckResult.of("flow_pause", violations, suspends=suspends, resumes=resumes)
