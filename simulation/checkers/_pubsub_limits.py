"""The Pub/Sub front's request limits (docs/pubsub.md, "Limits"), judged from a prober client's history.

The prober (``simulation/scenarios/_pubsub_limits.py``) sends, now and then, a request just over
one limit or just at it, through the front's own door (the registry, so the topic's and the
subscription's ``request_refusal``), and notes each as ``LimitProbeSent`` and its answer as
``LimitProbeDone``. ``request_limits`` holds the front to its promise: a request over a limit is
refused with INVALID_ARGUMENT naming the field, and changes nothing (no message of a refused
publish is ever given to a client; an ack or nack the queues took because of a refused settlement
is unbacked, which ``acks_from_receivers`` reports, as the probe is no ``SettleSent``); one at the
limit is served (not refused for its size, nor failing otherwise: ids it names that were never
issued settle nothing). ``contained_failures``: no request makes a front actor raise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import attrs

from conveyor.actors.pubsub import HandlerFailed
from conveyor.runtime import EventKind, TraceEvent

from ._pubsub import BatchReceived
from ._result import CheckResult


@final
@attrs.frozen
class LimitProbeSent:
    """Prober history: probe ``number`` (``kind``) was sent, ``over`` a limit or at it.

    ``field`` is the request field a refusal must name first; ``data`` the data of the messages
    a probe publish carried (unique in the run).
    """

    number: int
    kind: str
    over: bool
    field: str
    data: tuple[bytes, ...] = ()


@final
@attrs.frozen
class LimitProbeDone:
    """Prober history: probe ``number`` was answered; ``code`` and ``message`` of a refusal, empty if it was done."""

    number: int
    code: str = ""
    message: str = ""


@final
@attrs.frozen
class ProbesFinished:
    """Prober history: every probe was made (or given up); the run may end."""


def request_limits(trace: Iterable[TraceEvent]) -> CheckResult:
    """Over a limit: refused with INVALID_ARGUMENT naming the field, and none of its messages given; at it: served.

    A request at a limit is well formed (its topic and subscription exist), so any failure of it is
    one. A probe never answered (its binding crashed, the run ended) is not judged.
    """
    sent: dict[int, tuple[float, LimitProbeSent]] = {}
    refused_data: dict[bytes, int] = {}  # data of a refused publish -> its probe
    given: list[tuple[float, str, bytes]] = []
    violations: list[str] = []
    judged = refused = 0
    for event in trace:
        if event.kind is not EventKind.NOTE:
            continue
        note = event.message
        cls = type(note)
        if cls is LimitProbeSent:
            sent[note.number] = (event.time, note)
        elif cls is LimitProbeDone:
            at, probe = sent[note.number]
            judged += 1
            what = f"probe {probe.number} ({probe.kind}, {'over' if probe.over else 'at'} the limit, sent at t={at:g})"
            if note.code == "INVALID_ARGUMENT":
                refused += 1
                for data in probe.data:
                    refused_data[data] = probe.number
            if probe.over and note.code != "INVALID_ARGUMENT":
                answer = f"{note.code}: {note.message[:120]}" if note.code else "done"
                violations.append(f"t={event.time:g}: {what} was not refused: {answer}")
            elif probe.over and not note.message.startswith(probe.field):
                violations.append(f"t={event.time:g}: {what} was refused without naming {probe.field} first: "
                                  f"{note.message[:160]}")
            elif not probe.over and note.code:
                violations.append(f"t={event.time:g}: {what} failed: {note.code}: {note.message[:160]}")
        elif cls is BatchReceived:
            for _, message, _ in note.received:
                given.append((event.time, event.sender or "?", message.data))
    for time, client, data in given:
        number = refused_data.get(data)
        if number is not None:
            violations.append(f"t={time:g}: {client} was given {data[:40]!r}, a message of refused probe {number}")
    return CheckResult.of("request_limits", violations, probes=len(sent), judged=judged, refused=refused)


def contained_failures(trace: Iterable[TraceEvent]) -> CheckResult:
    """No request of the simulated clients makes a front actor raise (``HandlerFailed``, answered INTERNAL).

    A topic, subscription or registry contains a raise to the request that caused it and answers
    it INTERNAL (``_containment.py``): its clients send only requests the front serves or refuses by
    name, so every such note is a bug. Read from the actors' own ``HandlerFailed`` notes.
    """
    violations = [f"t={event.time:g}: {note.actor} raised handling {note.request}: {note.error[:160]}"
                  for event in trace if event.kind is EventKind.NOTE and type(note := event.message) is HandlerFailed]
    return CheckResult.of("contained_failures", violations)
