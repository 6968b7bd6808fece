"""Checkers of a run on the simulated ZooKeeper, read from the protocol messages its clients sent and got.

They read the kernel's record of ``ZkCall`` (client -> session) and ``ZkReply`` (session -> client)
and the server's note of each session it ended (``ZkSessionEnded``), never the model's state: a
model that forgets to delete a node is caught by what a client is told.

* ``ephemerals_die_with_their_session``: no read asked after a session ended is answered with an
  ephemeral node that session owned. (A read asked before may be answered after: the server may
  have applied it before the end, so only requests sent after the end note are judged.)
* ``sequential_names_never_repeat``: no two successful sequential creates (alone or in a multi)
  are answered with the same path.
"""

from __future__ import annotations

from collections.abc import Iterable

from conveyor.runtime import EventKind, TraceEvent
from conveyor.runtime.lowlevel import ZkCall, ZkCreate, ZkExists, ZkGetData, ZkMulti, ZkNode, ZkReply
from conveyor.simulation import ZkSessionEnded

from ._result import CheckResult

_Seen = ZkCall | ZkReply | ZkSessionEnded


def _calls_and_replies(trace: Iterable[TraceEvent]) -> Iterable[tuple[TraceEvent, _Seen]]:
    """Each SENT ``ZkCall`` and ``ZkReply`` and NOTE ``ZkSessionEnded``, in trace order."""
    for event in trace:
        message = event.message
        sent = event.kind is EventKind.SENT and isinstance(message, (ZkCall, ZkReply))
        if sent or (event.kind is EventKind.NOTE and isinstance(message, ZkSessionEnded)):
            yield event, message


def ephemerals_die_with_their_session(trace: Iterable[TraceEvent]) -> CheckResult:
    """No read asked after a session ended finds an ephemeral node of that session."""
    ended: dict[int, float] = {}
    asked: dict[tuple[str, int], tuple[ZkCall, frozenset[int]]] = {}  # (client, request) -> call, ended when asked
    violations: list[str] = []
    reads = 0
    for event, message in _calls_and_replies(trace):
        if isinstance(message, ZkSessionEnded):
            ended.setdefault(message.session_id, event.time)
        elif isinstance(message, ZkCall):
            if isinstance(message.operation, (ZkGetData, ZkExists)):
                asked[(message.reply_to.path, message.request_id)] = (message, frozenset(ended))
        elif event.receiver is not None:
            found = asked.pop((event.receiver, message.request_id), None)
            if found is None or not isinstance(message.value, ZkNode):
                continue
            reads += 1
            call, ended_before = found
            owner = message.value.ephemeral_owner
            if owner in ended_before:
                path = call.operation.path  # type: ignore[union-attr]
                violations.append(
                    f"t={event.time:g}: {event.receiver} read {path}, an ephemeral node of session {owner}, "
                    f"which ended at t={ended[owner]:g}, before the read was asked")
    return CheckResult.of("ephemerals_die_with_their_session", violations, reads=reads, sessions_ended=len(ended))


def sequential_names_never_repeat(trace: Iterable[TraceEvent]) -> CheckResult:
    """No path is given to two successful sequential creates."""
    asked: dict[tuple[str, int], tuple[bool, ...]] = {}  # which of a call's operations are sequential creates
    first: dict[str, tuple[float, str]] = {}
    violations: list[str] = []
    for event, message in _calls_and_replies(trace):
        if isinstance(message, ZkCall):
            operations = message.operation.operations if isinstance(message.operation, ZkMulti) else (
                message.operation,)
            marks = tuple(isinstance(op, ZkCreate) and op.sequential for op in operations)
            if any(marks):
                asked[(message.reply_to.path, message.request_id)] = marks
        elif isinstance(message, ZkReply) and event.receiver is not None:
            marks = asked.pop((event.receiver, message.request_id), ())
            if not marks or message.error is not None:
                continue
            values = message.value if len(marks) > 1 or isinstance(message.value, tuple) else (message.value,)
            for sequential, value in zip(marks, values, strict=False):  # type: ignore[call-overload]
                if not sequential or not isinstance(value, str):
                    continue
                if value in first:
                    when, who = first[value]
                    violations.append(f"t={event.time:g}: {event.receiver} was given {value}, already given to "
                                      f"{who} at t={when:g}")
                else:
                    first[value] = (event.time, event.receiver)
    return CheckResult.of("sequential_names_never_repeat", violations, names=len(first))


def zk_counts(trace: Iterable[TraceEvent]) -> tuple[int, int, int]:
    """(calls sent, replies given, replies without an error): a ZooKeeper run's figures, from its clients' mail."""
    calls = replies = successes = 0
    for _, message in _calls_and_replies(trace):
        if isinstance(message, ZkCall):
            calls += 1
        elif isinstance(message, ZkReply):
            replies += 1
            successes += message.error is None
    return calls, replies, successes


def every_call_answered_once(trace: Iterable[TraceEvent]) -> CheckResult:
    """Every ``ZkCall`` gets exactly one ``ZkReply`` (the protocol's promise), whatever befell its session."""
    open_calls: dict[tuple[str, int], float] = {}
    violations: list[str] = []
    for event, message in _calls_and_replies(trace):
        if isinstance(message, ZkCall):
            open_calls[(message.reply_to.path, message.request_id)] = event.time
        elif isinstance(message, ZkReply) and event.receiver is not None and open_calls.pop(
                (event.receiver, message.request_id), None) is None:
            violations.append(f"t={event.time:g}: {event.receiver} got a reply to request {message.request_id}, "
                              "which was not open")
    violations.extend(f"{client}: request {request} sent at t={time:g} was never answered"
                      for (client, request), time in open_calls.items())
    return CheckResult.of("every_call_answered_once", violations)
