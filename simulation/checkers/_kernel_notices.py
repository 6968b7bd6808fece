"""Four more kernel promises (docs/architecture.md), read from the raw trace in ``kernel_checks``' one pass.

* ``escalation``: a failed child sends its parent ``Escalate`` exactly when its supervisor says
  ``ESCALATE`` (in the step it failed); under ``RESTART`` or ``STOP`` the parent is never failed
  for it. A parent that notes the cause of the ``EscalatedError`` it failed with (``EscalationCause``)
  must find the child's own error there.
* ``termination_cause``: a ``Terminated`` says why: its ``error`` is None for a stop that was asked
  for (``stopped``, ``shutdown``, ``gone``), the failure's description for ``failed`` and
  ``crashed``, the very text the ``FAILED`` event recorded when a failure stopped the actor.
* ``timer_cancel``: ``ctx.cancel`` of a timer the actor armed in the same step (it cannot have come
  due) answers True (an actor that says so in a ``TimerCancelAnswered`` note), and a timer whose
  cancel answered True never hands its message to the actor.
* ``ask_answers``: an ask's temporary sender (``/ask-N``) takes one answer; every further message
  sent to it, and any that reaches it after its asker gave up waiting (an ``AskAbandoned`` note),
  is a dead letter. Judged on a run that was shut down (shutdown hands each waiting message over).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import attrs

from conveyor.runtime import EventKind, Terminated, TraceEvent
from conveyor.runtime.lowlevel import TimerFired
from conveyor.simulation import Drop, FaultApplied

from ._restart_budget import SupervisionDeclared
from ._result import CheckResult

_ASK_PREFIX = "/ask-"
_ASKED_STOPS = frozenset({"stopped", "shutdown", "gone"})
"""Reasons of a stop nobody's failure caused: their ``Terminated`` carries no error."""
_FAILED_STOPS = frozenset({"failed", "crashed"})


def _equal(a: object, b: object) -> bool:
    """Equal messages (a trace read back from a file has lost identity)."""
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a message that cannot compare is not this one
        return False


@final
@attrs.frozen
class AskAbandoned:
    """Note (by the code that asked, outside any actor): the ask whose promise is at ``path`` gave up waiting."""

    path: str


@final
@attrs.frozen
class EscalationCause:
    """Note (by a parent restarted after a child escalated): ``repr`` of its ``EscalatedError``'s ``__cause__``."""

    cause: str | None


@final
@attrs.frozen
class TimerCancelAnswered:
    """Note (by the actor that called ``ctx.cancel``): what the cancel of its timer ``timer_id`` answered."""

    timer_id: int
    cancelled: bool


@final
class KernelNotices:
    """Follows escalations, stop causes and the answers to asks; ``results()`` gives the three verdicts."""

    def __init__(self) -> None:
        self.escalating: dict[str, str] = {}  # parent path -> the directive it declared for its children
        self.owed: dict[str, tuple[str, float]] = {}  # child -> (parent, when it failed): an Escalate due this step
        self.failure: dict[str, str | None] = {}  # actor -> its last failure's text, not yet restarted
        self.escalated: dict[str, tuple[str, str | None]] = {}  # parent -> (child, its failure) it was told of
        self.asked: dict[str, list[int]] = {}  # promise path -> [sent, dead-lettered, sent before it was abandoned]
        self.abandoned: set[str] = set()
        self.last_sent_to_ask: str | None = None
        self.shut_down = False
        self.armed_now: dict[int, tuple[str | None, object]] = {}  # timer id -> (owner, message), armed this step
        self.withdrawn: dict[str, list[object]] = {}  # actor -> messages of its timers a cancel answered True for
        self.cancels = 0
        self.cancel: list[str] = []
        self.escalations = self.causes = 0
        self.escalation: list[str] = []
        self.cause: list[str] = []

    def observe(self, event: TraceEvent) -> None:
        """Follow one event."""
        kind = event.kind
        last_ask, self.last_sent_to_ask = self.last_sent_to_ask, None
        receiver = event.receiver
        if kind is EventKind.SENT:
            self._sent(event, receiver)
        elif kind is EventKind.DELIVERED or kind is EventKind.DEAD_LETTER:
            if self.owed:
                self._settle_step()
            self.armed_now.clear()
            if self.withdrawn and event.sender is None and receiver in self.withdrawn:
                self._timer_delivered(event, receiver)
            if kind is EventKind.DEAD_LETTER and receiver is not None and receiver.startswith(_ASK_PREFIX):
                self._ask(receiver)[1] += 1
        elif kind is EventKind.FAILED and receiver is not None:
            self.failure[receiver] = event.error
            self._failed(event, receiver)
        elif kind is EventKind.RESTARTED and receiver is not None:
            self.failure.pop(receiver, None)
        elif kind is EventKind.STOPPED and receiver is not None and isinstance(event.message, Terminated):
            self._stopped(event, receiver, event.message)
        elif kind is EventKind.NOTE:
            note = event.message
            if type(note) is SupervisionDeclared and event.sender is not None:
                self.escalating[event.sender] = note.directive
            elif type(note) is EscalationCause and event.sender is not None:
                self._cause(event, event.sender, note)
            elif type(note) is TimerCancelAnswered:
                self._cancel_answered(event, note)
            elif type(note) is AskAbandoned:
                self.abandoned.add(note.path)
                self._ask(note.path)[2] = self._ask(note.path)[0]
        elif kind is EventKind.TIMER_ARMED and type(event.message) is TimerFired:
            self.armed_now[event.message.timer_id] = (receiver, event.message.message)
        elif kind is EventKind.FAULT and last_ask is not None:
            applied = event.message
            if isinstance(applied, FaultApplied) and isinstance(applied.fault, Drop):
                self._ask(last_ask)[0] -= 1  # the answer just sent never entered its channel

    def _ask(self, path: str) -> list[int]:
        found = self.asked.get(path)
        if found is None:
            found = self.asked[path] = [0, 0, 0]
        return found

    def _sent(self, event: TraceEvent, receiver: str | None) -> None:
        if receiver is None:
            return
        if receiver.startswith(_ASK_PREFIX):
            asked = self._ask(receiver)
            asked[0] += 1
            if receiver not in self.abandoned:
                asked[2] = asked[0]
            self.last_sent_to_ask = receiver
            return
        if type(event.message).__name__ != "Escalate" or event.sender is None:
            return
        self.escalations += 1
        self.escalated[receiver] = (event.sender, self.failure.get(event.sender))
        owed = self.owed.pop(event.sender, None)
        if owed is None or owed[0] != receiver:
            directive = self.escalating.get(event.sender.rpartition("/")[0], "restart")
            self.escalation.append(
                f"t={event.time:g}: {event.sender} sent {receiver} Escalate, though its supervisor says {directive} "
                "(only ESCALATE fails the parent)"
                if owed is None else
                f"t={event.time:g}: {event.sender} escalated to {receiver}, not to its parent {owed[0]}"
            )

    def _cancel_answered(self, event: TraceEvent, note: TimerCancelAnswered) -> None:
        self.cancels += 1
        armed = self.armed_now.get(note.timer_id)
        if note.cancelled and armed is not None:
            self.withdrawn.setdefault(str(armed[0]), []).append(armed[1])
        elif armed is not None and armed[0] == event.sender:
            self.cancel.append(f"t={event.time:g}: {event.sender} cancelled timer {note.timer_id}, armed in this very "
                               "step so it cannot have come due, and the cancel answered False")

    def _timer_delivered(self, event: TraceEvent, receiver: str) -> None:
        withdrawn = self.withdrawn[receiver]
        for index, message in enumerate(withdrawn):
            if message is event.message or _equal(message, event.message):
                del withdrawn[index]
                self.cancel.append(f"t={event.time:g}: {receiver} was handed {type(message).__name__} by a timer "
                                   "whose cancel had answered True")
                return

    def _cause(self, event: TraceEvent, parent: str, note: EscalationCause) -> None:
        child, failure = self.escalated.pop(parent, (None, None))
        if child is not None and note.cause != failure:
            self.escalation.append(f"t={event.time:g}: {parent} failed with the EscalatedError of {child}, whose "
                                   f"cause is {note.cause}, not the child's error {failure}")

    def _failed(self, event: TraceEvent, receiver: str) -> None:
        parent = receiver.rpartition("/")[0]
        if parent and self.escalating.get(parent) == "escalate":
            self.owed[receiver] = (parent, event.time)

    def _settle_step(self) -> None:
        """A new step began: an Escalate owed since the last one and never sent is a violation."""
        for child, (parent, since) in self.owed.items():
            self.escalation.append(f"t={since:g}: {child} failed under ESCALATE and never sent its parent {parent} "
                                   "Escalate: the parent was not told")
        self.owed.clear()

    def _stopped(self, event: TraceEvent, receiver: str, termination: Terminated) -> None:
        self.causes += 1
        failure = self.failure.pop(receiver, "")
        reason, error = termination.reason, termination.error
        if reason == "shutdown":
            self.shut_down = True
        if reason in _ASKED_STOPS and error is not None:
            self.cause.append(f"t={event.time:g}: {receiver} stopped ({reason}), yet its Terminated names an error "
                              f"({error}): only a failure has one")
        elif reason in _FAILED_STOPS and error is None:
            self.cause.append(f"t={event.time:g}: {receiver} stopped ({reason}) with no error in its Terminated: "
                              "its watchers cannot tell why")
        elif reason in _FAILED_STOPS and failure and error != failure:
            self.cause.append(f"t={event.time:g}: {receiver} stopped ({reason}) after failing with {failure}, yet its "
                              f"Terminated says {error}")

    def results(self) -> list[CheckResult]:
        """The verdicts: ``escalation``, ``termination_cause``, ``timer_cancel`` and ``ask_answers``."""
        self._settle_step()
        answers: list[str] = []
        if self.shut_down:
            for path, (sent, dead, before) in self.asked.items():
                allowed = min(1, before)
                if sent - dead > allowed:
                    why = ("after its asker gave up" if path in self.abandoned and sent - dead > 0 and allowed == 0
                           else "more than its one answer")
                    answers.append(f"{path} took {sent - dead} of the {sent} message(s) sent to it ({why}): every "
                                   "message an ask's promise does not take as its answer must be a dead letter")
        return [
            CheckResult.of("escalation", self.escalation, escalations=self.escalations),
            CheckResult.of("termination_cause", self.cause, stops=self.causes),
            CheckResult.of("timer_cancel", self.cancel, cancels=self.cancels),
            CheckResult.of("ask_answers", answers, asks=len(self.asked), abandoned=len(self.abandoned),
                           judged=float(self.shut_down)),
        ]


def kernel_notices(trace: Iterable[TraceEvent]) -> list[CheckResult]:
    """``escalation``, ``termination_cause``, ``timer_cancel`` and ``ask_answers`` over one pass of ``trace``."""
    notices = KernelNotices()
    for event in trace:
        notices.observe(event)
    return notices.results()
