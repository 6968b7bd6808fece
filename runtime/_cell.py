"""ActorCell: the backend-independent life of one actor.

This module is the one home of lifecycle and supervision: starting, handling a
message, failing, restarting, stopping, watching. Backends only move messages
into ``ActorCell.process`` (on the actor's own thread or task) and carry out the
few primitives of the ``Backend`` protocol, a cell's only door to its system.
Because every backend runs the same cell, an actor behaves the same on trio, on
threads and in the simulator.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._actor import Actor, Context
from ._errors import ActorDeadError, EscalatedError
from ._messages import (
    SYSTEM_MESSAGE_TYPES,
    ChildTerminated,
    Escalate,
    Start,
    Stop,
    Terminated,
    TimerFired,
    TimerHandle,
    Unwatch,
    Watch,
)
from ._ref import ActorRef
from ._supervision import Directive, RestartBudget, SupervisorStrategy
from ._trace import EventKind

if TYPE_CHECKING:
    from ._backend import Backend

log = logging.getLogger("conveyor.runtime")

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def described(error: BaseException) -> str:
    """``repr(error)`` without object addresses (``<X object at 0x7f...>``, as pytest's rewritten asserts
    write), so one seed still gives one trace, byte for byte."""
    text = repr(error)
    return _ADDRESS.sub(" at 0x?", text) if " at 0x" in text else text

_NOT_PLAIN: frozenset[type] = SYSTEM_MESSAGE_TYPES | {Terminated}
"""Message types ``process`` cannot hand straight to ``receive``."""


class CellBase:
    """What every message target has: its system, identity, a path, liveness.

    A backend that keeps state per cell (a mailbox, a thread) does so in its own subclass
    (``ActorSystemBase.cell_type``) or its own objects, never in slots here.
    """

    is_promise = False
    __slots__ = ("alive", "name", "path", "ref", "system", "uid")

    def __init__(self, system: Backend, uid: int, name: str, path: str) -> None:
        self.system = system
        self.uid = uid
        self.name = name
        self.path = path
        self.alive = True
        self.ref = ActorRef(self)

    def process(self, sender: CellBase | None, message: object) -> None:
        """Handle one message on this target's own thread or task."""
        raise NotImplementedError


class PromiseCell(CellBase):
    """The temporary sender of an ``ask``: its first message is the answer."""

    is_promise = True
    __slots__ = ("answered", "error", "result", "settled")

    def __init__(self, system: Backend, uid: int) -> None:
        super().__init__(system, uid, f"ask-{uid}", f"/ask-{uid}")
        self.answered = False  # a reply is on its way (it may not have arrived yet)
        self.settled = False
        self.result: object = None
        self.error: BaseException | None = None

    def process(self, sender: CellBase | None, message: object) -> None:
        """Take the first reply; later ones are dead letters."""
        if self.settled:
            self.system.dead_letter(sender, self, message)
            return
        self.result = message
        self.settle()

    def fail(self, error: BaseException) -> None:
        """Settle with an error (the actor failed on the question, or it was dead)."""
        if not self.settled:
            self.error = error
            self.settle()

    def settle(self) -> None:
        """Mark settled and wake whoever waits; backends extend this."""
        self.settled = True
        self.alive = False


class GoneCell(PromiseCell):
    """An actor of an earlier process, named in a journal recovered from disk: stopped for good.

    A ref to it can be stored and compared; what is sent to it is a dead letter, and watching
    it answers ``Terminated(ref, "gone")`` at once, so an actor that recovers its consumers or
    subscribers from disk learns they went with the process. (A settled promise, so every
    backend delivers to it as to an answered ask.)
    """

    __slots__ = ("termination",)

    def __init__(self, system: Backend, uid: int, path: str) -> None:
        CellBase.__init__(self, system, uid, path.rsplit("/", 1)[-1] or path, path)
        self.answered = self.settled = True
        self.alive = False
        self.result = None
        self.error = None
        self.termination = Terminated(self.ref, "gone", None)


class ActorCell(CellBase):
    """One actor's identity across restarts: its instance, children, watchers, timers."""

    __slots__ = (
        "actor",
        "budget",
        "children",
        "ctx",
        "current_sender",
        "early",
        "factory",
        "next_job_id",
        "parent",
        "retrying",
        "stop_error",
        "stop_requested",
        "supervisor",
        "termination",
        "timers",
        "unanswered",
        "watchers",
        "watching",
    )

    def __init__(
        self,
        system: Backend,
        uid: int,
        name: str,
        parent: ActorCell | None,
        factory: Callable[[], Actor],
        supervisor: SupervisorStrategy,
    ) -> None:
        path = f"{parent.path if parent is not None else ''}/{name}"
        super().__init__(system, uid, name, path)
        self.parent = parent
        self.factory = factory
        self.supervisor = supervisor
        self.budget = RestartBudget()
        self.children: dict[str, ActorCell] = {}
        self.watchers: dict[int, CellBase] = {}
        self.watching: dict[int, None] = {}
        self.timers: dict[int, None] = {}
        self.unanswered: dict[int, PromiseCell] = {}
        # Messages that overtook Start (possible when they come from another sender), held
        # until on_start has run; None once started.
        self.early: list[tuple[CellBase | None, object]] | None = []
        self.stop_requested = False
        self.stop_error: Exception | None = None  # why the actor stops itself (``ctx.give_up``), if it failed
        self.termination: Terminated | None = None
        self.next_job_id = 0
        self.retrying = False  # handling a failed message again (Actor.retry_failed)
        self.current_sender: CellBase | None = None  # of the message being handled (``ctx.sender``)
        self.ctx = Context(self)
        self.actor = self._instantiate()

    def _instantiate(self) -> Actor:
        actor = self.factory()
        if not isinstance(actor, Actor):
            msg = f"spawn() factory for {self.path} returned {type(actor).__qualname__}, not an Actor subclass instance"
            raise TypeError(msg)
        actor.ctx = self.ctx
        return actor

    # --- the hot path -----------------------------------------------------------------

    def process(self, sender: CellBase | None, message: object) -> None:
        """Deliver ``message`` to the actor; route failures to supervision.

        The common case (a user message to a started, live actor) runs straight through;
        anything else goes through ``_unusual`` first.
        """
        if type(message) in _NOT_PLAIN or self.early is not None or not self.alive:
            if not self._unusual(sender, message):
                return
            if type(message) is TimerFired:
                sender, message = None, message.message
        self.current_sender = sender
        tracer = self.system.tracer
        if tracer is not None:
            tracer.record(EventKind.DELIVERED, self.system.now(), sender, self, message)
        try:
            self.actor.receive(message)
        except Exception as error:  # noqa: BLE001 - every failure goes to supervision, logged
            self._failed(error, sender, message)
        self.current_sender = None
        if sender is not None and sender.is_promise and isinstance(sender, PromiseCell) and not sender.answered:
            self._remember_unanswered(sender)
        if self.stop_requested and self.alive:
            self._stop_as_requested()

    def _unusual(self, sender: CellBase | None, message: object) -> bool:
        """Dead letters, early arrivals, system messages and stale notices; True when ``receive`` gets it."""
        if not self.alive:
            self.system.dead_letter(sender, self, message)
            return False
        if self.early is not None and type(message) is not Start:
            self.early.append((sender, message))
            return False
        if type(message) is TimerFired:
            return self.timer_fired(message.timer_id)
        if type(message) is Terminated:
            return message.ref.cell.uid in self.watching  # else unwatched meanwhile
        if type(message) in SYSTEM_MESSAGE_TYPES:
            tracer = self.system.tracer
            if tracer is not None:
                tracer.record(EventKind.DELIVERED, self.system.now(), sender, self, message)
            self._system_message(sender, message)
            if self.stop_requested and self.alive:
                self._stop_as_requested()
            return False
        return True

    def _remember_unanswered(self, promise: PromiseCell) -> None:
        """An ask handled without a reply yet: fail it fast if this actor stops first."""
        unanswered = self.unanswered
        if len(unanswered) >= 64:
            for uid in [uid for uid, waiting in unanswered.items() if waiting.answered or waiting.settled]:
                del unanswered[uid]
        unanswered[promise.uid] = promise

    # --- lifecycle ----------------------------------------------------------------------

    def _system_message(self, sender: CellBase | None, message: object) -> None:
        match message:
            case Start():
                early, self.early = self.early, None
                try:
                    self.actor.on_start()
                except Exception as error:  # noqa: BLE001
                    self._failed(error, sender, message)
                for early_sender, early_message in early or ():
                    self.process(early_sender, early_message)
            case Stop(reason=reason):
                self.terminate(reason, None)
            case Watch(watcher=watcher):
                self.watchers[watcher.cell.uid] = watcher.cell
            case Unwatch(watcher=watcher):
                self.watchers.pop(watcher.cell.uid, None)
            case ChildTerminated(child=child):
                cell = child.cell
                if self.children.get(cell.name) is cell:
                    del self.children[cell.name]
            case Escalate(child=child, error=error):
                wrapped = EscalatedError(f"child {child.path} escalated {error!r}")
                wrapped.__cause__ = error
                self._failed(wrapped, sender, message)

    def _failed(self, error: Exception, sender: CellBase | None, message: object) -> None:
        system = self.system
        log.error(
            "actor %s failed handling %s: %r",
            self.path,
            type(message).__qualname__,
            error,
            exc_info=error,
        )
        tracer = system.tracer
        if tracer is not None:
            tracer.record(EventKind.FAILED, system.now(), sender, self, message, error=described(error))
        if isinstance(sender, PromiseCell):
            sender.fail(error)
        try:
            directive = self.supervisor.decide(error)
        except Exception as decider_error:  # noqa: BLE001
            log.error("supervisor decider of %s raised %r; stopping the actor", self.path, decider_error)
            directive = Directive.STOP
        if directive is Directive.RESTART:
            if self.budget.try_spend(system.now(), self.supervisor):
                retry = (
                    not self.retrying and type(message) not in SYSTEM_MESSAGE_TYPES
                    and not isinstance(sender, PromiseCell) and self._wants_retry(message)
                )
                self.restart(error, again=message if retry else None)
                if retry and self.alive:
                    self._retry(sender, message)
                return
            log.error(
                "actor %s exceeded %d restarts within %ss; stopping it",
                self.path,
                self.supervisor.max_restarts,
                self.supervisor.within_s,
            )
            self.terminate("failed", error)
        elif directive is Directive.STOP:
            self.terminate("failed", error)
        else:
            parent = self.parent
            if parent is None:
                system.root_failure(self, error)
            else:
                system.send(self, parent, Escalate(self.ref, error))
            self.terminate("failed", error)

    def _wants_retry(self, message: object) -> bool:
        try:
            return bool(self.actor.retry_failed(message))
        except Exception as error:  # a broken answer means no retry, logged
            log.error("actor %s raised in retry_failed: %r", self.path, error, exc_info=error)
            return False

    def _retry(self, sender: CellBase | None, message: object) -> None:
        """Hand the message the old instance failed on to the fresh one, once: a second failure drops it."""
        self.retrying = True
        try:
            self.process(sender, message)
        finally:
            self.retrying = False

    def restart(self, error: Exception, again: object = None) -> None:
        """Replace the actor by a fresh instance (its supervisor said restart; or the simulator's crash).

        ``again``: the failed message ``retry_failed`` asked to hand the fresh instance once more
        (None: no retry). The ``RESTARTED`` trace event carries it, so a checker can hold the
        retry that follows (or its absence) to the actor's answer.
        """
        system = self.system
        tracer = system.tracer
        if tracer is not None:
            tracer.record(EventKind.RESTARTED, system.now(), None, self, again, error=described(error))
        self._cancel_all_timers()
        self._stop_children("stopped")
        self.stop_requested = False
        self.stop_error = None
        try:
            self.actor = self._instantiate()
            if self.early is None:
                self.actor.on_restart(error)
            # else it had not started yet: the Start still on its way runs on_start, once.
        except Exception as restart_error:  # noqa: BLE001
            self._failed(restart_error, None, Start())

    def _stop_as_requested(self) -> None:
        error = self.stop_error
        self.terminate("stopped" if error is None else "failed", error)

    def terminate(self, reason: str, error: BaseException | None) -> None:
        """Stop for good: children, timers, ``on_stop``, watchers, parent, leftover mail."""
        if not self.alive:
            return
        system = self.system
        self.alive = False
        early, self.early = self.early, None
        for early_sender, early_message in early or ():
            system.dead_letter(early_sender, self, early_message)
        self.termination = Terminated(self.ref, reason, None if error is None else described(error))
        self._cancel_all_timers()
        self._stop_children(reason if reason == "shutdown" else "stopped")
        try:
            self.actor.on_stop()
        except Exception as stop_error:
            log.error("actor %s raised in on_stop: %r", self.path, stop_error, exc_info=stop_error)
        tracer = system.tracer
        if tracer is not None:
            tracer.record(EventKind.STOPPED, system.now(), None, self, self.termination)
        for watcher in self.watchers.values():
            system.send(self, watcher, self.termination)
        self.watchers.clear()
        for promise in self.unanswered.values():
            if not promise.answered:
                promise.fail(ActorDeadError(f"{self.path} stopped ({reason}) without answering"))
        self.unanswered.clear()
        if self.parent is not None:
            system.send(self, self.parent, ChildTerminated(self.ref))
        system.detach(self)

    def _stop_children(self, reason: str) -> None:
        for child in list(self.children.values()):
            self.system.send(self, child, Stop(reason))
        self.children.clear()

    # --- timers and jobs ------------------------------------------------------------------

    def schedule(self, delay_s: float, message: object) -> TimerHandle:
        """Arm a timer owned by this cell (cancelled on restart and stop)."""
        handle = self.system.schedule_timer(self, delay_s, message)
        self.timers[handle.timer_id] = None
        return handle

    def cancel_timer(self, handle: TimerHandle) -> bool:
        """Cancel one of this cell's timers; True if it had not been delivered yet."""
        if handle.timer_id not in self.timers:
            return False
        del self.timers[handle.timer_id]
        self.system.cancel_timer(handle)  # best effort: a queued TimerFired is dropped anyway
        return True

    def timer_fired(self, timer_id: int) -> bool:
        """Forget a timer whose ``TimerFired`` arrived; False if it was cancelled meanwhile."""
        if timer_id not in self.timers:
            return False
        del self.timers[timer_id]
        return True

    def _cancel_all_timers(self) -> None:
        for timer_id in self.timers:
            self.system.cancel_timer(TimerHandle(timer_id))
        self.timers.clear()

    def start_job(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
        """Hand ``fn(*args)`` to the backend's job runner; return its id."""
        self.next_job_id += 1
        self.system.start_job(self, self.next_job_id, fn, args)
        return self.next_job_id


def fail_promise_if_asked(sender: CellBase | None, target: CellBase, message: object) -> None:
    """A question that can never be answered fails its asker at once."""
    if isinstance(sender, PromiseCell):
        sender.fail(ActorDeadError(f"{target.path} stopped before handling {type(message).__qualname__}"))
