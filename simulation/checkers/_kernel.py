"""Checkers of the kernel's promises (docs/architecture.md), read from the raw trace.

Every actor library rests on three rules of the kernel, and a run's trace shows each of them
without any actor's own account: what was sent (``SENT``), what was handled (``DELIVERED``) or
refused for being too late (``DEAD_LETTER``), and the lifecycle (``FAILED``, ``RESTARTED``,
``STOPPED``).

* ``mailbox_fifo``: messages from one sender to one receiver arrive in the order sent.
* ``nothing_vanishes``: every message sent to an actor is handled or becomes a dead letter.
* ``supervision``: a failed actor is restarted or stopped before it handles anything else, as its
  restart budget says; a restart stops its children; a stopped actor's watchers are sent its
  ``Terminated``; ``Start`` comes first; a failed message is retried only when ``retry_failed``
  asked, and once.

Only pairs with an actor on both ends are followed: timers, finished jobs and code outside any
actor have no sender, and an ask's answer goes to a promise (``/ask-N``), which traces nothing
when it takes it. Three kernel rules explain a send with no matching delivery, and each is
allowed: a ``Drop`` fault (its ``FAULT`` event follows the send), a ``Terminated`` that reaches a
watcher which unwatched meanwhile (discarded without a trace), and a failed message handed once
more to the restarted actor (``Actor.retry_failed``: delivered twice, sent once).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import final

from conveyor.runtime import EventKind, Terminated, TraceEvent
from conveyor.simulation import Drop, FaultApplied

from ._kernel_notices import KernelNotices
from ._restart_budget import RestartBudgetWatch, SupervisionDeclared
from ._result import CheckResult
from ._timers import _Timers

_ASK_PREFIX = "/ask-"
"""Paths of an ask's promise: it takes its answer without a trace event."""
_TERMINATED = "Terminated"
_STOP = "Stop"
"""The kernel's system messages (``Start``, ``Stop``, ``Watch``, ``Unwatch``) are not public: matched by name."""


def _same(a: object, b: object) -> bool:
    """One message: the same object (always, in a live trace), or an equal one (a trace read back)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a message that cannot compare is not this one
        return False


def _find(channels: list[deque[object]], message: object) -> tuple[deque[object], int] | None:
    """Where ``message`` waits: the very object first (at a channel's head, then anywhere), then an equal one.

    Identity first, because two incarnations at one path may hold equal messages (a restarted
    queue sends its new consumer manager the same ``AddConsumer`` values as the old one); equality
    only serves a trace read back from a file, where identity is lost.
    """
    for same in (_identical, _same):
        for channel in channels:
            if same(channel[0], message):
                return channel, 0
        for channel in channels:
            for position, queued in enumerate(channel):
                if same(queued, message):
                    return channel, position
    return None


def _identical(a: object, b: object) -> bool:
    return a is b


@final
class _Incarnation:
    """One actor at a path: its incoming channels ((sender path, which actor at that path) -> messages
    sent and not yet taken)."""

    __slots__ = ("alive", "channels")

    def __init__(self) -> None:
        self.alive = True
        self.channels: dict[tuple[str, int], deque[object]] = {}


@final
class _Mailboxes:
    """Follows every (sender, receiver) channel of a trace: what was sent and not yet taken.

    ``observe`` each event in order; ``fifo``, ``phantoms`` and ``vanished()`` then hold the
    violations. A path may hold several actors over a run (a restarted queue spawns a new
    consumer manager at the same path while the old one still drains its mailbox): each has its
    own channels, told apart by the ``Start`` sent to the path. A message is delivered by a live
    one and dead-lettered by a stopped one (the oldest live one is the one a ``STOPPED`` ends);
    among those, the one holding the message at the head of its channel takes it.
    """

    def __init__(self) -> None:
        self.actors: dict[str, list[_Incarnation]] = {}
        self.last_sent: deque[object] | None = None
        self.last_taken: dict[str, object] = {}  # receiver -> the message it took last
        self.failed_since: set[str] = set()  # receivers that failed after taking their last message
        self.fifo: list[str] = []
        self.phantoms: list[str] = []
        self.sent = self.taken = self.retried = self.dropped = self.discarded = 0
        self.shut_down = False
        self.ambiguous: set[tuple[str, str]] = set()  # (sender, receiver) pairs FIFO cannot be judged on
        self.living: dict[str, int] = {}  # path -> how many actors live there
        self.retry_asked: dict[str, object] = {}  # receiver -> the failed message retry_failed asked to hand again
        self.unasked: list[str] = []  # a failed message handed again that retry_failed had not asked for

    def _actors(self, path: str) -> list[_Incarnation]:
        found = self.actors.get(path)
        if found is None:
            found = self.actors[path] = [_Incarnation()]  # sent to before any Start was seen
            self.living[path] = 1
        return found

    def observe(self, event: TraceEvent) -> None:
        """Follow one event."""
        last_sent, self.last_sent = self.last_sent, None
        kind = event.kind
        sender, receiver = event.sender, event.receiver
        if kind is EventKind.SENT:
            if receiver is None or receiver.startswith(_ASK_PREFIX):
                return
            if type(event.message).__name__ == "Start":  # a new actor at this path: channels of its own
                known = self.actors.get(receiver)
                if known is None or known[-1].channels:
                    self.actors.setdefault(receiver, []).append(_Incarnation())
                    self.living[receiver] = self.living.get(receiver, 0) + 1
            if sender is None:
                return
            actors = self._actors(receiver)
            senders = self.actors.get(sender, ())
            key = (sender, max(len(senders) - 1, 0))  # the newest actor at the sender's path sent it
            channel = actors[-1].channels.get(key)
            if channel is None:
                channel = actors[-1].channels[key] = deque()
            channel.append(event.message)
            if self._twice(sender):
                self.ambiguous.add((sender, receiver))
            self.sent += 1
            self.last_sent = channel
        elif kind is EventKind.DELIVERED or kind is EventKind.DEAD_LETTER:
            if sender is None or receiver is None or receiver.startswith(_ASK_PREFIX):
                return
            self._take(event, sender, receiver)
        elif kind is EventKind.FAULT:
            applied = event.message
            if isinstance(applied, FaultApplied) and isinstance(applied.fault, Drop) and last_sent is not None:
                last_sent.pop()  # the send just recorded never entered its channel
                self.dropped += 1
        elif kind is EventKind.FAILED and receiver is not None:
            self.failed_since.add(receiver)
        elif kind is EventKind.RESTARTED and receiver is not None and event.message is not None:
            self.retry_asked[receiver] = event.message
        elif kind is EventKind.STOPPED and receiver is not None:
            self.retry_asked.pop(receiver, None)
            for actor in self.actors.get(receiver, ()):
                if actor.alive:
                    actor.alive = False
                    self.living[receiver] -= 1
                    break
            if isinstance(event.message, Terminated) and event.message.reason == "shutdown":
                self.shut_down = True

    def _twice(self, path: str) -> bool:
        """Whether two actors live at ``path`` (a restarted parent's old child, still draining, and its successor)."""
        return self.living.get(path, 0) > 1

    def _take(self, event: TraceEvent, sender: str, receiver: str) -> None:
        """Take a delivered or dead-lettered message off its channel, checking it was the oldest there."""
        message = event.message
        live = event.kind is EventKind.DELIVERED
        actors = self.actors.get(receiver, ())
        channels = [channel for actor in actors if actor.alive == live
                    for key, channel in actor.channels.items() if key[0] == sender and channel]
        channels += [channel for actor in actors if actor.alive != live  # should the guess be wrong
                     for key, channel in actor.channels.items() if key[0] == sender and channel]
        if len(channels) > 1 or self._twice(sender):
            # Two actors at one path (a restarted parent's new child beside the old one, still
            # draining) both hold messages from this sender, or both send to this receiver. The
            # trace names paths, not actors, and senders reuse message objects (a queue's one
            # WorkAvailable), so which of them sent or took a message cannot always be told: this
            # pair is not judged from here on (``ambiguous``).
            self.ambiguous.add((sender, receiver))
        found = _find(channels, message)
        asked = self.retry_asked.pop(receiver, None)
        if (asked is not None and _same(asked, message)) or (
            (found is None or found[1] != 0)
            and receiver in self.failed_since and _same(self.last_taken.get(receiver), message)
        ):
            # Handed once more to the restarted actor (retry_failed): sent once, delivered twice. A
            # sender that reuses one message object (a consumer's one SetInterest) may have sent it
            # again since, further down the channel: that later send is not this delivery.
            if asked is None:
                self.unasked.append(
                    f"t={event.time:g}: {receiver} was handed {type(message).__name__} from {sender} once more "
                    "after failing on it, though its retry_failed had not asked for it (or it was handed again already)"
                )
            self.retried += 1
            self.failed_since.discard(receiver)
            return
        if found is None:
            if (sender, receiver) in self.ambiguous:
                return
            self.phantoms.append(
                f"t={event.time:g}: {receiver} {event.kind.value} {type(message).__name__} from {sender}, "
                "which that sender never sent it (or it was taken already)"
            )
            return
        channel, index = found
        overtaken = [queued for queued in list(channel)[:index] if type(queued) is not Terminated]
        if overtaken and (sender, receiver) not in self.ambiguous:
            self.fifo.append(
                f"t={event.time:g}: {receiver} {event.kind.value} {type(message).__name__} from {sender} ahead of "
                f"{len(overtaken)} earlier message(s) on that channel (first: {type(overtaken[0]).__name__})"
            )
        # Terminated ahead of it were discarded by a watcher that unwatched (no trace): allowed.
        self.discarded += index - len(overtaken)
        for _ in range(index + 1):
            channel.popleft()
        self.taken += 1
        self.last_taken[receiver] = message
        self.failed_since.discard(receiver)

    def vanished(self) -> list[str]:
        """What was sent and never handled nor dead-lettered (read once the run was shut down)."""
        lost: list[str] = []
        for receiver, actors in self.actors.items():
            for actor in actors:
                for (sender, _), channel in actor.channels.items():
                    for message in channel:
                        if type(message) is not Terminated:
                            lost.append(f"{type(message).__name__} from {sender} to {receiver} was never "
                                        "handled nor dead-lettered")
        return lost


def _read(trace: Iterable[TraceEvent]) -> _Mailboxes:
    boxes = _Mailboxes()
    for event in trace:
        boxes.observe(event)
    return boxes


def mailbox_fifo(trace: Iterable[TraceEvent]) -> CheckResult:
    """Messages from one sender to one receiver are handled (or dead-lettered) in the order sent.

    Each channel's sends are queued in order; every delivery or dead letter on it must take the
    oldest one still queued. One that takes a later one overtook the earlier ones (a
    ``Terminated`` overtaken is allowed: the watcher discarded it, having unwatched). A delivery
    that matches no send on its channel is reported too (``phantoms``): the kernel handed an
    actor something nobody sent it.
    """
    boxes = _read(trace)
    return CheckResult.of("mailbox_fifo", boxes.fifo + boxes.phantoms, sent=boxes.sent, taken=boxes.taken,
                          retried=boxes.retried, phantoms=len(boxes.phantoms))


def nothing_vanishes(trace: Iterable[TraceEvent]) -> CheckResult:
    """Every message sent to an actor is handled or becomes a dead letter: nothing vanishes silently.

    Read at the end of a run that was shut down (``STOPPED`` with reason ``shutdown``: the
    simulator's ``shutdown`` turns whatever is still queued into dead letters). A message still
    queued then was lost by the kernel: a restart that dropped a mailbox, a channel that lost a
    message. Messages a ``Drop`` fault removed are counted apart (``dropped``). A trace without a
    shutdown is not judged (``judged`` = 0).
    """
    boxes = _read(trace)
    violations = boxes.vanished() if boxes.shut_down else []
    return CheckResult.of("nothing_vanishes", violations, sent=boxes.sent, dropped=boxes.dropped,
                          judged=float(boxes.shut_down))


@final
class _Lifecycles:
    """Failures, restarts, stops, watches and children of every actor, as the trace tells them."""

    def __init__(self) -> None:
        self.failing: dict[str, float] = {}  # actor -> when it failed, not yet restarted or stopped
        self.watchers: dict[str, dict[str, None]] = {}  # actor -> watcher paths
        self.children: dict[str, dict[str, None]] = {}  # parent -> children started and not stopped
        self.owed: list[tuple[str, str, str, float]] = []  # (from, to, message type name, since) due this step
        self.retry_owed: dict[str, tuple[object, float]] = {}  # actor -> (message retry_failed asked for, since)
        self.retried: dict[str, object] = {}  # actor -> the message it was just handed once more
        self.unstarted: dict[str, float] = {}  # path -> when its newest actor was sent Start, not yet handled
        self.alive: dict[str, int] = {}  # path -> actors started there and not stopped
        self.violations: list[str] = []
        self.failures = self.restarts = self.stops = self.retries = self.starts = 0
        self.budget = RestartBudgetWatch()

    def observe(self, event: TraceEvent) -> None:
        kind = event.kind
        receiver = event.receiver
        message = event.message
        if kind is EventKind.SENT:
            self._paid(event)
            if type(message).__name__ == "Start" and receiver is not None:
                self.unstarted[receiver] = event.time
                self.alive[receiver] = self.alive.get(receiver, 0) + 1
                if event.sender is not None and receiver.rpartition("/")[0] == event.sender:
                    self.children.setdefault(event.sender, {})[receiver] = None
            return
        if kind is EventKind.DELIVERED or kind is EventKind.DEAD_LETTER:
            retry = self._retry_due(event) if self.retry_owed else False
            self._settle_step(event.time)
            if receiver is None:
                return
            if kind is EventKind.DELIVERED:
                self._handled(event, receiver, retry)
            name = type(message).__name__
            if name == "Watch" and event.sender is not None:
                watcher = str(getattr(getattr(message, "watcher", None), "path", event.sender))
                if kind is EventKind.DELIVERED:
                    self.watchers.setdefault(receiver, {})[watcher] = None
                else:  # a Watch that reaches a stopped actor is answered with its Terminated
                    self.owed.append((receiver, watcher, _TERMINATED, event.time))
            elif name == "Unwatch" and kind is EventKind.DELIVERED:
                watcher = str(getattr(getattr(message, "watcher", None), "path", event.sender))
                self.watchers.get(receiver, {}).pop(watcher, None)
            return
        if kind is EventKind.NOTE and type(message) is SupervisionDeclared and event.sender is not None:
            self.budget.declare(event.sender, message)
            return
        if receiver is None:
            return
        if kind is EventKind.FAILED:
            self.failures += 1
            self.failing[receiver] = event.time
            self.budget.failed(receiver, event.time)
        elif kind is EventKind.RESTARTED:
            self.restarts += 1
            self.failing.pop(receiver, None)
            self.budget.restarted_at(receiver, event.time)
            for child in self.children.pop(receiver, {}):
                self.owed.append((receiver, child, _STOP, event.time))
            if message is not None:  # retry_failed asked to hand the failed message to the fresh instance
                if _same(self.retried.get(receiver), message):
                    self.violations.append(
                        f"t={event.time:g}: {receiver} failed on {type(message).__name__} handed to it once more, "
                        "and it is to be handed again: a failed message is retried once"
                    )
                self.retry_owed[receiver] = (message, event.time)
        elif kind is EventKind.STOPPED:
            self.stops += 1
            self.failing.pop(receiver, None)
            self.retry_owed.pop(receiver, None)
            living = self.alive.get(receiver, 0)
            if living <= 1:  # else the old one of two at this path stopped; the new one's Start may be pending
                self.unstarted.pop(receiver, None)
            if living > 0:
                self.alive[receiver] = living - 1
            self.budget.stopped(receiver, event.time)
            for watcher in self.watchers.pop(receiver, {}):
                self.owed.append((receiver, watcher, _TERMINATED, event.time))
            parent = receiver.rpartition("/")[0]
            self.children.get(parent, {}).pop(receiver, None)

    def _handled(self, event: TraceEvent, receiver: str, retry: bool) -> None:
        """An actor handled a message: not while failed, not before its ``Start``, a retry only once."""
        message = event.message
        if receiver in self.failing:
            self.violations.append(
                f"t={event.time:g}: {receiver} handled {type(message).__name__} after failing at "
                f"t={self.failing[receiver]:g}, without being restarted or stopped first"
            )
            del self.failing[receiver]
        if receiver in self.unstarted:
            if type(message).__name__ == "Start":
                del self.unstarted[receiver]
                self.starts += 1
            elif self.alive.get(receiver, 0) <= 1:  # two at one path: the old one may still be draining
                self.violations.append(
                    f"t={event.time:g}: {receiver} handled {type(message).__name__} before its Start "
                    f"(sent at t={self.unstarted[receiver]:g}): on_start runs before any other message"
                )
                del self.unstarted[receiver]
        if self.retried and not retry:
            self.retried.pop(receiver, None)

    def _retry_due(self, event: TraceEvent) -> bool:
        """A restarted actor whose ``retry_failed`` asked for its failed message gets it before anything else
        happens (the kernel hands it at once); True if ``event`` is that retry."""
        receiver = event.receiver
        retry = False
        for actor, (message, since) in list(self.retry_owed.items()):
            if actor == receiver and event.kind is EventKind.DELIVERED and _same(event.message, message):
                self.retries += 1
                self.retried[actor] = message
                retry = True
            else:
                self.violations.append(
                    f"t={since:g}: {actor} restarted and its retry_failed asked to handle {type(message).__name__} "
                    f"once more, but {receiver} {event.kind.value} {type(event.message).__name__} first"
                )
            del self.retry_owed[actor]
        return retry

    def _paid(self, event: TraceEvent) -> None:
        """A send may be one the kernel owes: a Terminated to a watcher, a Stop to a child."""
        if not self.owed:
            return
        name = type(event.message).__name__
        for index, (source, target, kind, _) in enumerate(self.owed):
            if event.sender == source and event.receiver == target and name == kind:
                del self.owed[index]
                return

    def _settle_step(self, now: float) -> None:
        """A new step began: whatever the kernel owed from the last one and did not send is a violation."""
        for source, target, kind, since in self.owed:
            what = "its Terminated" if kind == _TERMINATED else "Stop"
            why = "it stopped" if kind == _TERMINATED else "it restarted"
            self.violations.append(f"t={since:g}: {source} never sent {target} {what} when {why}")
        self.owed.clear()

    def finish(self) -> None:
        self._settle_step(0.0)
        for actor, (message, since) in self.retry_owed.items():
            self.violations.append(f"t={since:g}: {actor} restarted and its retry_failed asked to handle "
                                   f"{type(message).__name__} once more, which it never was")
        self.retry_owed.clear()
        self.budget.finish()
        self.violations += self.budget.violations


def supervision(trace: Iterable[TraceEvent]) -> CheckResult:
    """Supervision as the kernel promises it, from the lifecycle events of every actor.

    * A failed actor (``FAILED``) is restarted (``RESTARTED``) or stopped (``STOPPED``) before it
      handles another message: no message reaches the instance that failed.
    * A restart stops the actor's children: each child it had started and that had not stopped
      is sent ``Stop`` by it in the same step (the fresh instance spawns its own).
    * A stopped actor sends its ``Terminated`` to every actor watching it (a ``Watch`` it handled
      and no ``Unwatch`` after), in the step it stopped; a ``Watch`` that reaches it after it
      stopped is answered with its ``Terminated`` too. That is how a queue takes back what a
      consumer that died held (ephemeral ownership, docs/architecture.md).
    * ``Start`` comes first: an actor handles its ``Start`` (``on_start``) before any other
      message (judged while one actor lives at its path: a restarted parent's old child, still
      draining beside its successor, cannot be told from it).
    * A failed message is handed once more to the restarted actor only when its ``retry_failed``
      said so, and once: ``RESTARTED`` carries the message it asked for (or None); that message is
      the next thing the fresh instance handles, nothing else comes first, and a retry that fails
      again is not retried. A failed message handed again unasked is reported too.

    * The restart budget: a failure is answered by a restart while the actor has restarts left
      (3 within 60 s, the default ``SupervisorStrategy`` that every scenario actor keeps), by a stop
      once it has none (``RestartBudgetWatch``); a ``Crash`` fault's restart spends nothing.
    """
    boxes = _Mailboxes()
    lives = _Lifecycles()
    for event in trace:
        boxes.observe(event)
        lives.observe(event)
    lives.finish()
    return _supervision_result(boxes, lives)


def _supervision_result(boxes: _Mailboxes, lives: _Lifecycles) -> CheckResult:
    return CheckResult.of("supervision", lives.violations + boxes.unasked, failures=lives.failures,
                          restarts=lives.restarts, stops=lives.stops, retries=lives.retries, starts=lives.starts)


def kernel_checks(trace: Iterable[TraceEvent]) -> list[CheckResult]:
    """``mailbox_fifo``, ``nothing_vanishes``, ``supervision`` and ``timers`` over one pass of the trace,
    then ``escalation``, ``termination_cause``, ``timer_cancel`` and ``ask_answers`` (``_kernel_notices.py``)."""
    boxes = _Mailboxes()
    lives = _Lifecycles()
    clocks = _Timers()
    notices = KernelNotices()
    for event in trace:
        boxes.observe(event)
        lives.observe(event)
        clocks.observe(event)
        notices.observe(event)
    lives.finish()
    return [
        CheckResult.of("mailbox_fifo", boxes.fifo + boxes.phantoms, sent=boxes.sent, taken=boxes.taken,
                       retried=boxes.retried, phantoms=len(boxes.phantoms)),
        CheckResult.of("nothing_vanishes", boxes.vanished() if boxes.shut_down else [], sent=boxes.sent,
                       dropped=boxes.dropped, judged=float(boxes.shut_down)),
        _supervision_result(boxes, lives),
        clocks.result(),
        *notices.results(),
    ]
