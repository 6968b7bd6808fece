"""When the leaser passes over its leases (docs/subscriber.md, Leases): soon enough, and not needlessly.

Read from the leaser's own mail, as ``lease_cap`` is: what it handled (``Received``,
``ReceivedBatch``, ``Scheduled``, ``Done``, ``Dones``, its ``Tick``) at what virtual time. A pass is
a ``Tick`` the leaser handled; each one sends an extension for every lease it holds, so both
directions matter:

* **Soon enough.** A fresh lease is looked at again within ``lead(min_duration_per_lease_extension_s)``
  (``max(0, 0.9 * d - 1)``) of its receipt, whatever first extension the leaser asked for: the
  receipt's extension is sent blind (the manager forwards only the ids still pending, the
  dispatcher may restart with it in its batch, the channel may hold it up), so the leaser trusts it
  no further than the shortest extension it ever asks for, the one the queue's deadline for a
  fresh delivery is sized against. A lease finished or given up before then needs no pass.
* **Not needlessly.** Two passes come at least that lead apart (each extension is at least
  ``min_duration``, and a pass is due ``lead(extension)`` after it), unless a max-lease boundary
  (a callback's scheduling plus ``max_lease_duration_s``) fell between them: the leaser must give
  that lease up on time, and the pass that does extends the others too.

* **On time at the cap.** A lease still held when its callback has been scheduled
  ``max_lease_duration_s`` is given up by a pass at that boundary, not at some later pass (the
  leaser schedules its next check no later than the earliest boundary, so an expiring lease is
  given up on time rather than extended once more): no pass finds a lease held whose boundary it
  is already past.

A pause of the leaser (``Pause`` covering it) excuses a late pass; a leaser that restarts or stops
starts afresh.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.subscriber import Done, Dones, FlowControl, Part, Received, ReceivedBatch
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation import FaultApplied, Pause, covers

from ._result import CheckResult

_TOLERANCE_S = 1e-6
"""Slack for the float rounding of a timer's ``now + (when - now)``."""


def _lead(extension_s: float) -> float:
    """How long after an extension of ``extension_s`` the leaser checks again (docs/subscriber.md)."""
    return max(0.0, extension_s * 0.9 - 1.0)


def lease_schedule(trace: Iterable[TraceEvent], subscription_path: str, flow: FlowControl) -> CheckResult:
    """The leaser's passes come within the lead of the shortest extension of each receipt, and no closer together
    than that lead unless a max-lease boundary fell between them."""
    leaser = f"{subscription_path}/{Part.LEASER}"
    lead = _lead(flow.min_duration_per_lease_extension_s)
    cap = flow.max_lease_duration_s
    fresh: dict[str, float] = {}  # ack id -> receipt, for leases not yet passed over
    boundaries: list[float] = []  # clock start + cap of every clock started since the last pass
    leased: set[str] = set()
    clocks: dict[str, float] = {}  # ack id -> its boundary (clock start + cap), for leases still held
    pauses: list[tuple[float, float]] = []  # (from, until) of pauses covering the leaser
    last_pass: float | None = None
    violations: list[str] = []
    passes = late_excused = 0
    for event in trace:
        kind = event.kind
        if kind is EventKind.FAULT and isinstance(event.message, FaultApplied):
            fault = event.message.fault
            if isinstance(fault, Pause) and covers(fault.prefix, leaser):
                pauses.append((event.time, event.time + fault.duration_s))
            continue
        if event.receiver != leaser:
            continue
        if kind in (EventKind.RESTARTED, EventKind.STOPPED):
            fresh.clear()
            boundaries.clear()
            leased.clear()
            clocks.clear()
            last_pass = None
            continue
        if kind is not EventKind.DELIVERED:
            continue
        now, message = event.time, event.message
        cls = type(message)
        if cls is Received or cls is ReceivedBatch:
            for item in (message,) if cls is Received else message.items:
                fresh.setdefault(item.ack_id, now)
                leased.add(item.ack_id)
                if not item.key:  # an unordered message's callback is scheduled as it arrives
                    boundaries.append(now + cap)
                    clocks.setdefault(item.ack_id, now + cap)
        elif cls is Done or cls is Dones:
            for done in (message,) if cls is Done else message.items:
                fresh.pop(done.ack_id, None)
                leased.discard(done.ack_id)
                clocks.pop(done.ack_id, None)
        elif cls.__name__ == "Scheduled":
            for ack_id in getattr(message, "ack_ids", ()):
                if ack_id in leased:
                    boundaries.append(now + cap)
                    clocks.setdefault(ack_id, now + cap)
        elif cls.__name__ == "Tick":
            passes += 1
            for ack_id, received in fresh.items():
                if now <= received + lead + _TOLERANCE_S:
                    continue
                if any(start <= now and until >= received for start, until in pauses):
                    late_excused += 1
                    continue
                violations.append(
                    f"t={now:g}: {leaser} first passed over lease {ack_id} {now - received:g} s after its receipt; "
                    f"a fresh lease is looked at within {lead:g} s (0.9 x min_duration_per_lease_extension_s "
                    f"{flow.min_duration_per_lease_extension_s:g} - 1)"
                )
            fresh.clear()
            due = any(last_pass is not None and last_pass - _TOLERANCE_S < boundary <= now + _TOLERANCE_S
                      for boundary in boundaries)
            if last_pass is not None and now - last_pass < lead - _TOLERANCE_S and not due:
                violations.append(
                    f"t={now:g}: {leaser} passed over its {len(leased)} lease(s) {now - last_pass:g} s after its "
                    f"previous pass, sooner than {lead:g} s, with no max-lease boundary between them"
                )
            for ack_id, boundary in tuple(clocks.items()):
                if boundary > now + _TOLERANCE_S:
                    continue
                del clocks[ack_id]  # given up by this pass (lease_cap judges that it is)
                leased.discard(ack_id)
                if boundary < now - _TOLERANCE_S and not any(start <= now and until >= boundary
                                                             for start, until in pauses):
                    violations.append(
                        f"t={now:g}: {leaser} passed over lease {ack_id} {now - boundary:g} s after its "
                        f"max-lease boundary (max_lease_duration_s={cap:g}); it is given up by a pass at the boundary"
                    )
            boundaries = [boundary for boundary in boundaries if boundary > now + _TOLERANCE_S]
            last_pass = now
    return CheckResult.of("lease_schedule", violations, passes=passes, late_excused=late_excused, lead_s=lead)
