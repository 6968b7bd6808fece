"""``max_lease_duration_s`` (docs/subscriber.md): a lease is given up that long after its callback was scheduled.

Read from the leaser's own mail, which the trace holds whole: what it handled (``Received``,
``ReceivedBatch``, ``Scheduled``, ``Done``, ``Dones``, its ``Tick``) at what virtual time, and what
it sent (extensions: ``Settlement(MODACK)`` and ``Extend``; give-ups: ``Settlement(DROP)``). The
clock of a message starts as the leaser learns its callback is scheduled: on ``Received`` for an
unordered message, on ``Scheduled`` for a keyed one (held behind its key, it is extended for as
long as it waits, never given up).
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.actors.subscriber import Done, Dones, FlowControl, Part, Received, ReceivedBatch
from conveyor.runtime import EventKind, TraceEvent

from ._result import CheckResult


def _past(now: float, started: float, cap: float) -> bool:
    """Whether a clock started at ``started`` has run ``cap`` by ``now`` (either float reading: the leaser's test)."""
    return now - started >= cap or now >= started + cap


def _beyond(now: float, started: float, cap: float) -> bool:
    """Whether ``now`` is past the cap under both float readings (an extension then is late by any account)."""
    return now - started > cap and now > started + cap


def lease_cap(trace: Iterable[TraceEvent], subscription_path: str, flow: FlowControl) -> CheckResult:
    """The leaser gives a lease up ``flow.max_lease_duration_s`` after its callback was scheduled: not before,
    and never extends it after.

    * No extension of a lease whose clock ran past the cap (sent by the leaser after it).
    * Its first pass (``Tick``) at or after the cap gives the lease up (``Settlement(DROP)``).
    * No lease is given up before its clock ran the cap (nor one whose clock never started).

    A leaser that restarts or stops loses its table: its leases are forgotten (``lease_validity``
    reports the restart).
    """
    leaser = f"{subscription_path}/{Part.LEASER}"
    cap = flow.max_lease_duration_s
    leased: set[str] = set()
    clocks: dict[str, float] = {}  # ack id -> when its callback was scheduled, as the leaser learnt
    due: dict[str, float] = {}  # ack id -> clock start: to be given up in the pass under way
    violations: list[str] = []
    extensions = given_up = 0
    for event in trace:
        kind = event.kind
        if kind is EventKind.DELIVERED or kind is EventKind.DEAD_LETTER:
            for ack_id, started in due.items():
                violations.append(f"t={event.time:g}: {leaser} kept lease {ack_id} at its pass, "
                                  f"{event.time - started:g} s after its callback was scheduled (cap {cap:g} s)")
            due.clear()
            if kind is EventKind.DEAD_LETTER or event.receiver != leaser:
                continue
            now, message = event.time, event.message
            name = type(message).__name__
            if type(message) is Received:
                _lease(message, now, leased, clocks)
            elif type(message) is ReceivedBatch:
                for item in message.items:
                    _lease(item, now, leased, clocks)
            elif name == "Scheduled":
                for ack_id in getattr(message, "ack_ids", ()):
                    if ack_id in leased and ack_id not in clocks:
                        clocks[ack_id] = now
            elif type(message) is Done:
                leased.discard(message.ack_id)
                clocks.pop(message.ack_id, None)
            elif type(message) is Dones:
                for done in message.items:
                    leased.discard(done.ack_id)
                    clocks.pop(done.ack_id, None)
            elif name == "Tick":
                due = {ack_id: started for ack_id, started in clocks.items() if _past(now, started, cap)}
        elif kind is EventKind.SENT and event.sender == leaser:
            now, message = event.time, event.message
            name = type(message).__name__
            if name == "Extend":
                ids: tuple[str, ...] = getattr(message, "ack_ids", ())
            elif name == "Settlement" and getattr(getattr(message, "kind", None), "value", None) == "modack":
                ids = (str(getattr(message, "ack_id", "")),)
            elif name == "Settlement" and getattr(getattr(message, "kind", None), "value", None) == "drop":
                ack_id = str(getattr(message, "ack_id", ""))
                given_up += 1
                clock = clocks.pop(ack_id, None)
                leased.discard(ack_id)
                due.pop(ack_id, None)
                if clock is None or not _past(now, clock, cap):
                    since = "its callback was never scheduled" if clock is None else (
                        f"only {now - clock:g} s after its callback was scheduled")
                    violations.append(f"t={now:g}: {leaser} gave lease {ack_id} up {since} (cap {cap:g} s)")
                continue
            else:
                continue
            for ack_id in ids:
                extensions += 1
                clock = clocks.get(ack_id)
                if clock is not None and _beyond(now, clock, cap):
                    violations.append(f"t={now:g}: {leaser} extended lease {ack_id} {now - clock:g} s after its "
                                      f"callback was scheduled, past max_lease_duration_s={cap:g}")
        elif kind in (EventKind.RESTARTED, EventKind.STOPPED) and event.receiver == leaser:
            leased.clear()
            clocks.clear()
            due.clear()
    return CheckResult.of("lease_cap", violations, extensions=extensions, given_up=given_up, cap_s=cap)


def _lease(received: Received, now: float, leased: set[str], clocks: dict[str, float]) -> None:
    leased.add(received.ack_id)
    if not received.key:  # an unordered message's callback is scheduled as it arrives
        clocks[received.ack_id] = now
