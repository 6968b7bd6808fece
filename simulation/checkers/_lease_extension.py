"""The extension the leaser asks for (docs/subscriber.md, Leases), rebuilt from what the leaser was handed.

The promise: every extension is the 99th percentile of the processing times so far (from the
leaser's ``Received`` of a message to its ``Done`` with ``acked``), kept in whole seconds clamped
into [10, 600] (an empty record counts as 10), then clamped into the flow control's
[``min_duration_per_lease_extension_s``, ``max_duration_per_lease_extension_s``]. The percentile is
computed here from the leaser's inputs, not by the subscriber's ``Histogram``. A lease the leaser
gave up (``Settlement(DROP)`` to the manager) feeds nothing, as its later ``Done`` finds no lease.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.subscriber import Done, Dones, FlowControl, Part, Received, ReceivedBatch
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult

_FLOOR_S = 10
_CEILING_S = 600
"""The processing-time record's bounds, in whole seconds (the Pub/Sub client's)."""


def _p99(samples: list[int]) -> int:
    """The smallest recorded value v with at least 99% of the samples <= v; the floor with no samples."""
    needed = -(-99 * len(samples) // 100)
    if needed == 0:
        return _FLOOR_S
    return sorted(samples)[needed - 1]


def lease_extension(trace: Iterable[TraceEvent], subscription_path: str, flow: FlowControl) -> CheckResult:
    """Each extension the leaser asks for is the clamped 99th percentile of the processing times before it."""
    leaser = f"{subscription_path}/{Part.LEASER}"
    arrived: dict[str, float] = {}
    samples: list[int] = []
    violations: list[str] = []
    judged = recorded = above_floor = 0
    low, high = flow.min_duration_per_lease_extension_s, flow.max_duration_per_lease_extension_s
    for event in trace:
        kind = event.kind
        if event.receiver == leaser and kind in (EventKind.RESTARTED, EventKind.STOPPED):
            arrived.clear()
            samples.clear()  # a fresh leaser starts a fresh record
            continue
        message = event.message
        cls = type(message)
        if kind is EventKind.DELIVERED and event.receiver == leaser:
            if cls is Received or cls is ReceivedBatch:
                for item in (message,) if cls is Received else message.items:
                    arrived.setdefault(item.ack_id, event.time)
            elif cls is Done or cls is Dones:
                for done in (message,) if cls is Done else message.items:
                    start = arrived.pop(done.ack_id, None)
                    if start is not None and done.acked:
                        samples.append(min(max(int(event.time - start), _FLOOR_S), _CEILING_S))
                        recorded += 1
        elif kind is EventKind.SENT and event.sender == leaser:
            name = cls.__name__
            if name == "Settlement" and getattr(message.kind, "value", "") == "drop":
                arrived.pop(message.ack_id, None)  # given up: its lease is gone
                continue
            if (name == "Settlement" and getattr(message.kind, "value", "") == "modack") or name == "Extend":
                judged += 1
                p99 = _p99(samples)
                above_floor += p99 > _FLOOR_S and high > _FLOOR_S
                expected = float(min(max(p99, low), high))
                if message.seconds != expected:
                    violations.append(
                        f"t={event.time:g}: {leaser} asked for {message.seconds:g} s; the 99th percentile of "
                        f"{len(samples)} processing times, clamped into [{low:g}, {high:g}], is {expected:g} s"
                    )
    return CheckResult.of("lease_extension", violations, judged=judged, samples=recorded, above_floor=above_floor)
