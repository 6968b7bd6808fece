"""Actor: the base class users subclass, and Context: everything an actor may touch."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, cast, final

from ._errors import ConveyorError
from ._immutability import SCALAR_TYPES, ensure_immutable, is_immutable
from ._journal import Journal
from ._messages import AskFailed, Stop, TimerHandle, Unwatch, Watch
from ._ref import ActorRef
from ._supervision import SupervisorStrategy
from ._trace import EventKind

if TYPE_CHECKING:
    from ._cell import ActorCell, PromiseCell


class Actor:
    """Subclass and implement ``receive``; state lives in instance attributes.

    The same subclass runs on ``TrioSystem``, ``ThreadSystem`` and ``Simulation``
    because it touches the world only through ``self.ctx``: it must not block, read
    the clock, ``random``, files or the environment directly.
    """

    supervisor_strategy: ClassVar[SupervisorStrategy] = SupervisorStrategy()
    """How this actor supervises the children it spawns."""

    def retry_failed(self, message: Any) -> bool:
        """Asked of a failed instance that will restart: should the fresh one handle ``message`` again?

        For actors that rebuild their state from ``ctx.journal``: if the failing handler had written
        nothing that lasts (its first write failed), the restart rolled the state back to before
        it, and handling the message again is exactly-once, so a transient error (a disk) costs its
        sender nothing. Answer False when the handler had written part of its work: a retry would
        do that part twice. A message that fails again is dropped, so a poison message does not
        loop; asks and system messages are never retried. The default: never.
        """
        return False

    ctx: Context

    def receive(self, message: Any) -> None:
        """Handle one message. Must return quickly and never block."""
        msg = f"{type(self).__qualname__} received {type(message).__qualname__} but does not implement receive()"
        raise NotImplementedError(msg)

    def on_start(self) -> None:
        """Run once per incarnation, on the actor's own thread, before any message."""

    def on_stop(self) -> None:
        """Run once when the actor stops for good (not on restart)."""

    def on_restart(self, error: Exception) -> None:
        """Run on the fresh instance after a failure; the default calls ``on_start``."""
        self.on_start()


@final
class Context:
    """The actor's only door to the world: messaging, time, randomness, children, jobs."""

    __slots__ = ("_cell",)

    def __init__(self, cell: ActorCell) -> None:
        self._cell = cell

    @property
    def self_ref(self) -> ActorRef:
        """This actor's own ref."""
        return self._cell.ref

    @property
    def sender(self) -> ActorRef | None:
        """Who sent the message being handled; None for timers, jobs and outside code."""
        sender = self._cell.current_sender
        return None if sender is None else sender.ref

    def send(self, target: ActorRef, message: object) -> None:
        """Send ``message`` to ``target``; order per (sender, receiver) pair is kept."""
        if type(message) not in SCALAR_TYPES and not is_immutable(message):
            ensure_immutable(message)  # raises, naming where the mutable part sits
        if type(target) is not ActorRef:
            msg = f"send() target must be an ActorRef, got {type(target).__qualname__}"
            raise TypeError(msg)
        cell = self._cell
        cell.system.send(cell, target.cell, message)

    def reply(self, message: object) -> None:
        """Send ``message`` to the sender of the message being handled."""
        cell = self._cell
        sender = cell.current_sender
        if sender is None:
            msg = (
                f"{cell.path} called reply() but the current message has no sender "
                "(it came from a timer, a job or code outside any actor); use send() with an explicit ref"
            )
            raise ConveyorError(msg)
        if type(message) not in SCALAR_TYPES and not is_immutable(message):
            ensure_immutable(message)  # raises, naming where the mutable part sits
        cell.system.send(cell, sender, message)

    def fail_ask(self, error: Exception) -> bool:
        """Answer the ask being handled with ``error``: the asker's ``ask`` raises it, and this actor goes on.

        For a question the actor refuses without failing itself (``MethodActor`` answers so when a
        called method raises): no supervision, no restart. The trace notes it (``AskFailed``).

        Returns:
            True if the ask was answered; False, doing nothing, when the message being handled is
            not an unanswered ask (it came from an actor, a timer, a job or a ``tell``).
        """
        if not isinstance(error, Exception):
            msg = f"fail_ask() expects the exception to raise at the asker, got {type(error).__qualname__}"
            raise TypeError(msg)
        cell = self._cell
        sender = cell.current_sender
        if sender is None or not sender.is_promise:
            return False
        promise = cast("PromiseCell", sender)
        if promise.answered or promise.settled:
            return False
        promise.answered = True
        tracer = cell.system.tracer
        if tracer is not None:
            from ._cell import described  # _cell imports this module

            tracer.record(EventKind.NOTE, cell.system.now(), cell, promise, AskFailed(described(error)))
        promise.fail(error)
        return True

    def schedule(self, delay_s: float, message: object) -> TimerHandle:
        """Deliver ``message`` to this actor after ``delay_s`` seconds of the system's clock."""
        valid = isinstance(delay_s, (int, float)) and not isinstance(delay_s, bool)
        if not valid or not math.isfinite(delay_s) or delay_s < 0:
            msg = f"schedule() delay_s must be a finite number >= 0, got {delay_s!r}"
            raise ValueError(msg)
        ensure_immutable(message)
        return self._cell.schedule(float(delay_s), message)

    def cancel(self, handle: TimerHandle) -> bool:
        """Cancel a timer; True if it had not fired yet."""
        if type(handle) is not TimerHandle:
            msg = f"cancel() expects a TimerHandle, got {type(handle).__qualname__}"
            raise TypeError(msg)
        return self._cell.cancel_timer(handle)

    @property
    def tracing(self) -> bool:
        """True when the system records a trace (so building notes is worth it)."""
        return self._cell.system.tracer is not None

    def note(self, event: object) -> None:
        """Record ``event`` (an immutable value) in the trace as this actor's NOTE; free when off.

        Notes carry what no message shows, such as a message expiring inside a queue,
        so that checkers reading the trace can account for every message.
        """
        cell = self._cell
        tracer = cell.system.tracer
        if tracer is not None:
            ensure_immutable(event)
            tracer.record(EventKind.NOTE, cell.system.now(), cell, None, event)

    @property
    def journal(self) -> Journal:
        """This actor's durable journal: kept by the system under its path, it outlives restarts.

        Record what must survive a crash; rebuild from it in ``on_start`` (see ``Journal``).
        """
        cell = self._cell
        return cell.system.journal(cell.path)

    @property
    def journal_on_disk(self) -> bool:
        """True when the system keeps journals on disk too (``journal_store=``): they outlive the process.

        An actor that journals only to survive the process asks this before opening its journal.
        """
        return self._cell.system.journal_store is not None

    def now(self) -> float:
        """Seconds on the system's clock (virtual in the Simulation)."""
        return self._cell.system.now()

    @property
    def random(self) -> random.Random:
        """The system's ``random.Random`` (seeded, hence replayable, in the Simulation)."""
        return self._cell.system.random

    def spawn(self, factory: Callable[[], Actor], *, name: str | None = None) -> ActorRef:
        """Start a child built by ``factory``; this actor supervises it."""
        cell = self._cell
        return cell.system.spawn_child(cell, factory, name)

    def watch(self, target: ActorRef) -> None:
        """Receive ``Terminated(target, ...)`` when ``target`` stops (at once if it already has)."""
        cell = self._cell
        cell.watching[target.cell.uid] = None
        cell.system.send(cell, target.cell, Watch(cell.ref))

    def unwatch(self, target: ActorRef) -> None:
        """Stop watching ``target``; a ``Terminated`` already on its way is dropped."""
        cell = self._cell
        cell.watching.pop(target.cell.uid, None)
        cell.system.send(cell, target.cell, Unwatch(cell.ref))

    def stop(self, child: ActorRef | None = None) -> None:
        """Stop this actor once the current handler returns, or stop one of its children.

        Raises:
            ConveyorError: ``child`` is not a child of this actor.
        """
        cell = self._cell
        if child is None:
            cell.stop_requested = True
            return
        target = child.cell
        if cell.children.get(target.name) is not target:
            msg = f"{cell.path} can stop itself or its children, not {child.path}"
            raise ConveyorError(msg)
        cell.system.send(cell, target, Stop())

    def give_up(self, error: Exception) -> None:
        """Stop this actor for good once the current handler returns, as failed with ``error``.

        For an actor that knows it cannot go on (its subscription was deleted): no supervisor
        restarts it, watchers get ``Terminated(reason="failed")`` and ``ref.termination`` tells
        outside code why.
        """
        if not isinstance(error, Exception):
            msg = f"give_up() expects an exception saying why, got {type(error).__qualname__}"
            raise TypeError(msg)
        cell = self._cell
        cell.stop_error = error
        cell.stop_requested = True

    def teller_for_threads(self, target: ActorRef) -> Callable[[object], None]:
        """A callable that sends to ``target`` from any thread (hand it to user code in a job)."""
        return functools.partial(self._cell.system.tell_from_thread, target)

    def asker_for_threads(self, target: ActorRef, timeout: float = 30.0) -> Callable[[object], Any]:
        """A callable that asks ``target`` from a job's worker thread and blocks it for the answer."""
        return functools.partial(self._cell.system.ask_from_thread, target, timeout=timeout)

    def run_job(self, fn: Callable[..., Any], *args: Any) -> int:
        """Run blocking ``fn(*args)`` off the actor; ``JobDone`` / ``JobFailed`` come back.

        Returns:
            the job id carried by the resulting ``JobDone`` or ``JobFailed``.
        """
        if not callable(fn):
            msg = f"run_job() needs a callable, got {type(fn).__qualname__}"
            raise TypeError(msg)
        return self._cell.start_job(fn, args)
