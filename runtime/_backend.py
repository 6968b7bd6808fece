"""Backend: the one declared boundary between the actor kernel and the system that runs it.

Cells, contexts and refs (the kernel) reach their system only through the members below,
as pykka's actor core reaches its backend through a few hooks and an inbox ``Protocol``.
``ActorSystemBase`` implements the shared part once (spawning, dead letters, journals, the
plain ``send`` and ``tell``) and leaves each backend the hooks marked abstract: the clock,
the running cell, queueing a message, timers and jobs. ``TrioSystem``, ``ThreadSystem`` and
``Simulation`` fill them; a new kind of I/O (a disk store, a ZooKeeper session) or a new
fault enters here as a declared member, never as an undeclared override.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    import random

    from ._actor import Actor
    from ._cell import ActorCell, CellBase
    from ._journal import Journal, JournalStore
    from ._messages import TimerHandle
    from ._ref import ActorRef
    from ._trace import Tracer

T = TypeVar("T")

StoreHook: TypeAlias = Callable[[], None]
"""Called before each durable write of a store; what it raises fails that write (a disk fault)."""


class Backend(Protocol):
    """What a system provides to the cells it runs; mypy checks every backend against it."""

    tracer: Tracer | None
    """Where trace events go; None when tracing is off (then recording costs nothing)."""

    journal_store: JournalStore | None
    """Where journals persist beyond the process; None keeps them in memory only."""

    @property
    def random(self) -> random.Random:
        """The system's seeded generator, handed to actors as ``ctx.random``."""

    # --- each backend fills these -------------------------------------------------------

    @abc.abstractmethod
    def now(self) -> float:
        """Seconds on this system's clock (virtual in the simulator)."""

    @abc.abstractmethod
    def current_cell(self) -> ActorCell | None:
        """The actor whose handler runs on this thread or task, if any."""

    @abc.abstractmethod
    def enqueue(self, target: CellBase, sender: CellBase | None, message: object) -> None:
        """Queue ``message`` for ``target`` so that it reaches ``target.process`` later (unchecked, untraced)."""

    @abc.abstractmethod
    def schedule_timer(self, cell: ActorCell, delay_s: float, message: object) -> TimerHandle:
        """Arm a timer that queues ``TimerFired(message)`` to ``cell`` after ``delay_s`` seconds."""

    @abc.abstractmethod
    def cancel_timer(self, handle: TimerHandle) -> bool:
        """Disarm a timer; True if it had not fired."""

    @abc.abstractmethod
    def start_job(self, cell: ActorCell, job_id: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        """Run ``fn(*args)`` off the actor and queue ``JobDone`` / ``JobFailed`` to ``cell``."""

    def attach(self, cell: CellBase) -> None:
        """Give a new cell (an actor or an asker) what the backend needs: a thread, a registration."""

    def detach(self, cell: ActorCell) -> None:
        """An actor has terminated: release what ``attach`` gave it."""

    def store_hook(self, path: str) -> StoreHook | None:
        """The hook the durable store of the actor at ``path`` calls before each write; None for none.

        The simulator's disk faults enter here; the journal calls it today, a disk store will too.
        """

    def ask(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        """Send ``message`` with a temporary sender; its first reply is the answer (``ActorRef.ask`` reaches it).

        Awaitable on trio; the answer itself on threads (blocking) and in the simulator (stepping it).
        """

    # --- the hot path: ActorSystemBase's forms, which a backend may replace ---------------

    def send(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        """Trace and queue an already checked message (``ctx.send``, ``ctx.reply``, lifecycle notices)."""

    def tell(self, target: CellBase, message: object) -> None:
        """``ActorRef.tell`` of a checked message: the sender is the running actor, if any.

        Raises:
            ActorDeadError: sent from outside any actor to a stopped target.
        """

    # --- provided once by ActorSystemBase -----------------------------------------------

    def dead_letter(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        """A message reached a stopped target: count it, trace it, answer what must be answered."""

    def spawn_child(self, parent: ActorCell, factory: Callable[[], Actor], name: str | None) -> ActorRef:
        """Start an actor built by ``factory`` under ``parent``, which supervises it (``ctx.spawn``)."""

    def root_failure(self, cell: ActorCell, error: BaseException) -> None:
        """A top-level actor escalated ``error``: record and log it; the actor stops."""

    def journal(self, path: str) -> Journal:
        """The durable journal of the actor at ``path``, opened on first use and kept across restarts."""

    def gone_ref(self, path: str) -> ActorRef:
        """A ref to the actor that sat at ``path`` in an earlier process: stopped (watching it says so)."""

    def open_journal(self, path: str) -> Journal:
        """A new, empty journal for ``path``, its writes guarded by ``store_hook(path)``."""

    def tell_from_thread(self, ref: ActorRef, message: object) -> None:
        """Send from any thread; a stopped target makes the message a dead letter, not an error."""

    def ask_from_thread(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        """Ask from a thread that is not the system's own (a job's worker), blocking that thread."""

    def proxy(self, ref: ActorRef, interface: Callable[..., T], *, timeout: float = 5.0) -> T:
        """A typed proxy of ``ref`` whose method calls ask it ``MethodCall`` messages (``ActorRef.proxy``)."""

    def live_cells(self) -> list[ActorCell]:
        """Every live actor, parents before children (what the registry reads); on threads, from any thread."""
