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
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkCreate,
    ZkExists,
    ZkGetData,
    ZkMulti,
    ZkNode,
    ZkReply,
    ZkSessionEvent,
)
from conveyor.simulation import ZkFaultInjected, ZkSessionEnded

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


_VERBS = {"GetChildren": "children of", "GetData": "get", "SetData": "set", "Exists": "exists"}


def _describe(operation: object) -> str:
    """A ZooKeeper operation in a few words (``create ephemeral sequential /zk/e/c0-``)."""
    if isinstance(operation, ZkMulti):
        return f"multi [{'; '.join(_describe(op) for op in operation.operations)}]"
    if isinstance(operation, ZkCreate):
        kinds = [kind for kind, on in (("ephemeral", operation.ephemeral), ("sequential", operation.sequential)) if on]
        return " ".join(("create", *kinds, operation.path))
    name = type(operation).__name__.removeprefix("Zk")
    name = _VERBS.get(name, name.lower())
    return f"{name} {getattr(operation, 'path', '?')}"


def _answer(operation: object, reply: ZkReply) -> str:
    if reply.error is not None:
        return reply.error
    value = reply.value
    if value is None and isinstance(operation, ZkExists):
        return "no such node"
    if isinstance(value, ZkNode):
        return f"version {value.version}, owner {value.ephemeral_owner}" if value.ephemeral_owner else (
            f"version {value.version}")
    if isinstance(value, tuple):
        return f"[{', '.join(str(item) for item in value)}]"
    return "ok" if value is None else str(value)


class ZkStory:
    """Tells a ZooKeeper run's protocol (calls answered, session events, the faults drawn) as story lines."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, int], object] = {}

    def line(self, event: TraceEvent) -> str | None:
        """The event as a line (without its time), or None if it is not the ZooKeeper protocol's."""
        message = event.message
        if event.kind is EventKind.SENT:
            if isinstance(message, ZkCall):
                self._calls[(message.reply_to.path, message.request_id)] = message.operation
            elif isinstance(message, ZkReply) and event.receiver is not None:
                operation = self._calls.pop((event.receiver, message.request_id), None)
                return f"{event.sender} -> {event.receiver}: {_describe(operation)}: {_answer(operation, message)}"
            elif isinstance(message, ZkSessionEvent):
                return f"{event.sender}: session {message.session_id} {message.state}"
        elif event.kind is EventKind.NOTE and isinstance(message, ZkFaultInjected):
            return f"{event.sender}: fault: session {message.session_id}: {message.what}"
        elif event.kind is EventKind.NOTE and isinstance(message, ZkSessionEnded):
            return f"{event.sender}: ended session {message.session_id} ({message.state}), its ephemeral nodes with it"
        return None


def zk_replies(trace: Iterable[TraceEvent]) -> int:
    """How many ``ZkReply``s sessions gave their clients: a ZooKeeper run's steps, for the shrinker."""
    return sum(1 for event in trace if event.kind is EventKind.SENT and type(event.message) is ZkReply)
