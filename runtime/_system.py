"""ActorSystemBase: what all three backends share, written once over the ``Backend`` protocol.

The hooks each backend fills (``now``, ``current_cell``, ``enqueue``, ``schedule_timer``,
``cancel_timer``, ``start_job``, and optionally ``attach``, ``detach``, ``store_hook``) are
declared in ``_backend.py``. Spawning, dead letters, tracing, journals and root supervision
are written once here.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ._actor import Actor
from ._backend import Backend, StoreHook
from ._cell import ActorCell, CellBase, GoneCell, PromiseCell, fail_promise_if_asked
from ._errors import ActorDeadError, ActorNameTaken, AskTimeout, ConveyorError
from ._immutability import ensure_immutable
from ._journal import Journal, JournalStore
from ._messages import SYSTEM_MESSAGE_TYPES, Start, Stop, Terminated, Watch
from ._proxy import make_proxy
from ._ref import ActorRef
from ._registry import ActorRegistry
from ._supervision import SupervisorStrategy
from ._trace import EventKind, TraceEvent, Tracer

log = logging.getLogger("conveyor.runtime")

P = TypeVar("P", bound=PromiseCell)
T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_.:\-]+$")


class ActorSystemBase(Backend):
    """Spawning, sending, dead letters and tracing, shared by every backend (an abstract class)."""

    cell_type: ClassVar[type[ActorCell]] = ActorCell
    """The cell class this backend runs: a backend with per-actor state subclasses ``ActorCell``."""
    asks_are_awaited: ClassVar[bool] = False
    """Whether ``ask`` returns an awaitable (trio) rather than the answer (threads, the simulator)."""

    def __init__(
        self,
        *,
        supervisor_strategy: SupervisorStrategy | None = None,
        trace: bool | Tracer = False,
        seed: int | str | None = None,
        journal_store: JournalStore | None = None,
    ) -> None:
        if supervisor_strategy is not None and not isinstance(supervisor_strategy, SupervisorStrategy):
            msg = f"supervisor_strategy must be a SupervisorStrategy, got {type(supervisor_strategy).__qualname__}"
            raise TypeError(msg)
        self._strategy = supervisor_strategy or SupervisorStrategy()
        self.tracer: Tracer | None = Tracer() if trace is True else (trace or None)
        self._uids = itertools.count(1)
        self._top: dict[str, ActorCell] = {}
        self._random = random.Random(seed)
        self.dead_letters = 0
        """How many messages reached an actor after it stopped."""
        self.failures: list[tuple[str, BaseException]] = []
        """Escalations that reached the top: (actor path, error). Each is also logged."""
        self.journals: dict[str, Journal] = {}
        """Every actor's durable journal by path (``ctx.journal``); they outlive restarts."""
        self.journal_store = journal_store
        """Where journals also persist beyond the process (None: memory only)."""
        if journal_store is not None:
            journal_store.start(self)
        self.registry = ActorRegistry(self.live_cells)
        """Finds live actors by name or class: ``registry.by_name(name)``, ``by_class(cls)``, ``all()``."""

    # --- public API shared by all backends ----------------------------------------------

    @property
    def random(self) -> random.Random:
        """The system's random generator, handed to actors through ``ctx.random``."""
        return self._random

    @property
    def trace(self) -> list[TraceEvent]:
        """Events recorded so far (an empty list when tracing is off)."""
        return [] if self.tracer is None else self.tracer.events

    def journal(self, path: str) -> Journal:
        """The durable journal of the actor at ``path``, created empty on first use."""
        journal = self.journals.get(path)
        if journal is None:
            journal = self.journals.setdefault(path, self.open_journal(path))
        return journal

    def open_journal(self, path: str) -> Journal:
        """A new, empty journal for ``path``, its writes guarded by ``store_hook(path)``."""
        return Journal(path, self.store_hook(path), self.journal_store)

    def gone_ref(self, path: str) -> ActorRef:
        """A ref to the actor that sat at ``path`` in an earlier process (named in a recovered journal): stopped."""
        return GoneCell(self, next(self._uids), path).ref

    def close_journal_store(self) -> None:
        """Write and sync what the journal store holds, then close it (at shutdown; idempotent)."""
        store, self.journal_store = self.journal_store, None
        if store is not None:
            store.close()

    def store_hook(self, path: str) -> StoreHook | None:
        """No hook: writes to a store never fail (the simulator's ``FailWrite`` overrides this)."""
        return None

    def spawn(self, factory: Callable[[], Actor], *, name: str | None = None) -> ActorRef:
        """Start a top-level actor built by ``factory`` and supervised by the system."""
        return self._spawn(None, factory, name)

    def stop(self, ref: ActorRef) -> None:
        """Ask ``ref`` to stop once it reaches this request (messages before it are handled)."""
        if type(ref) is not ActorRef:
            msg = f"stop() expects an ActorRef, got {type(ref).__qualname__}"
            raise TypeError(msg)
        self.send(self.current_cell(), ref.cell, Stop())

    def tell_from_thread(self, ref: ActorRef, message: object) -> None:
        """Send ``message`` from code that may run on another thread (a job, user code).

        Thread-safe on every backend; a stopped target makes the message a dead letter
        rather than an error, since the caller cannot know. The default is for backends
        whose ``tell`` is already thread-safe or single-threaded.
        """
        ensure_immutable(message)
        target = ref.cell
        if target.alive:
            self.send(None, target, message)
        else:
            self.dead_letter(None, target, message)

    def ask_from_thread(self, ref: ActorRef, message: object, timeout: float = 5.0) -> Any:
        """Ask from a thread that is not the system's own (a job's worker thread), blocking it.

        Raises:
            ConveyorError: the backend cannot block a job for an answer (the Simulation runs
                jobs inside its own steps).
        """
        msg = f"{type(self).__name__} cannot answer ask_from_thread(); use messages instead"
        raise ConveyorError(msg)

    def proxy(self, ref: ActorRef, interface: Callable[..., T], *, timeout: float = 5.0) -> T:
        """A proxy of the ``MethodActor`` at ``ref``, typed as ``interface``: ``proxy.method(args)`` asks it.

        Each call sends an immutable ``MethodCall`` and returns what this system's ``ask`` returns:
        an awaitable on trio (so ``interface`` declares ``async def`` methods), the answer itself on
        threads and in the simulator (plain ``def`` methods). The method's exception is the ask's
        error. Attributes are not proxied: declare a method that returns the value.

        Args:
            ref: an actor of this system whose class subclasses ``MethodActor``.
            interface: a class (a ``typing.Protocol``) declaring the methods to call.
            timeout: seconds each call waits for its answer.

        Raises:
            TypeError: see ``make_proxy``: a bad interface, or an actor that does not serve it.
            ConveyorError: ``ref`` belongs to another system.
            ActorDeadError: the actor has stopped.
        """
        if type(ref) is ActorRef and ref.cell.system is not self:
            msg = f"{ref.path} is an actor of another system; make its proxy with ref.proxy() or on its own system"
            raise ConveyorError(msg)
        proxy: T = make_proxy(type(self).__name__, self.asks_are_awaited, ref, interface, timeout)
        return proxy

    def live_cells(self) -> list[ActorCell]:
        """Every live actor, parents before children (backends whose actors start on many threads override it)."""
        return self._live_cells()

    # --- shared machinery -------------------------------------------------------------

    def attach(self, cell: CellBase) -> None:
        """Nothing to give: a backend that keeps per-cell state elsewhere overrides this."""

    def detach(self, cell: ActorCell) -> None:
        """Nothing to release."""

    def spawn_child(self, parent: ActorCell, factory: Callable[[], Actor], name: str | None) -> ActorRef:
        """Start a child of ``parent`` built by ``factory`` (``ctx.spawn``)."""
        return self._spawn(parent, factory, name)

    def _spawn(self, parent: ActorCell | None, factory: Callable[[], Actor], name: str | None) -> ActorRef:
        if not callable(factory):
            msg = f"spawn() factory must be callable returning an Actor, got {type(factory).__qualname__}"
            raise TypeError(msg)
        uid = next(self._uids)
        siblings = self._top if parent is None else parent.children
        if name is None:
            base = getattr(factory, "__name__", "actor").lower().strip("<>") or "actor"
            name = f"{base}-{uid}"
        elif not isinstance(name, str) or not _NAME.match(name):
            msg = f"spawn() name must be a non-empty str of letters, digits, '_', '.', ':' or '-', got {name!r}"
            raise ValueError(msg)
        existing = siblings.get(name)
        if existing is not None and existing.alive:
            where = parent.path if parent is not None else "the system"
            msg = f"an actor named {name!r} already runs under {where}; pick another name or stop it first"
            raise ActorNameTaken(msg)
        strategy = self._strategy if parent is None else parent.actor.supervisor_strategy
        cell = self.cell_type(self, uid, name, parent, factory, strategy)
        siblings[name] = cell
        self.attach(cell)
        self.send(parent, cell, Start())
        return cell.ref

    def _send_question(self, ref: ActorRef, message: object, promise_type: type[P]) -> P:
        """Start an ``ask``: check the question, send it from a fresh promise, return the promise."""
        if type(ref) is not ActorRef:
            msg = f"ask() target must be an ActorRef, got {type(ref).__qualname__}"
            raise TypeError(msg)
        ensure_immutable(message)
        target = ref.cell
        if not target.alive:
            termination = getattr(target, "termination", None)
            why = f"stopped when its {type(self).__name__} shut down" if termination is not None and (
                termination.reason == "shutdown") else "has stopped"
            msg = f"{target.path} {why}; cannot ask it {type(message).__qualname__}"
            raise ActorDeadError(msg)
        promise = promise_type(self, next(self._uids))
        self.attach(promise)
        self.send(promise, target, message)
        return promise

    @staticmethod
    def _answer(promise: PromiseCell, ref: ActorRef, message: object, why_no_reply: str) -> Any:
        """Finish an ``ask``: the reply, the actor's exception, or ``AskTimeout``."""
        if not promise.settled:
            promise.settle()  # a late reply becomes a dead letter
            msg = f"no reply from {ref.path} to {type(message).__qualname__}: {why_no_reply}"
            raise AskTimeout(msg)
        if promise.error is not None:
            raise promise.error
        # The asked actor remembers its last unanswered asks (``ActorCell.unanswered``): an actor that
        # forwards asks would keep up to 64 answers alive, a Pub/Sub Pull's messages included.
        result, promise.result = promise.result, None
        return result

    def send(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        """Trace and queue an already checked message; a reply to an asker marks it answered."""
        if target.is_promise and isinstance(target, PromiseCell):
            target.answered = True
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.SENT, self.now(), sender, target, message)
        self.enqueue(target, sender, message)

    def tell(self, target: CellBase, message: object) -> None:
        """``ActorRef.tell``: from the running actor if any; from outside, a stopped target raises."""
        sender = self.current_cell()
        if sender is None and not target.alive:
            msg = f"{target.path} has stopped; tell() cannot deliver {type(message).__qualname__}"
            raise ActorDeadError(msg)
        self.send(sender, target, message)

    def dead_letter(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        """A message reached a stopped target: count it, trace it, answer what must be answered.

        ``dead_letters`` counts user messages only; the runtime's own lifecycle
        notices (``Terminated``, system messages) to stopped actors are expected.
        """
        if type(message) not in SYSTEM_MESSAGE_TYPES and type(message) is not Terminated:
            self.dead_letters += 1
        tracer = self.tracer
        if tracer is not None:
            tracer.record(EventKind.DEAD_LETTER, self.now(), sender, target, message)
        if type(message) is Watch and isinstance(target, (ActorCell, GoneCell)) and target.termination is not None:
            self.send(target, message.watcher.cell, target.termination)
            return
        fail_promise_if_asked(sender, target, message)
        log.debug("dead letter: %s -> %s: %s", getattr(sender, "path", None), target.path, type(message).__qualname__)

    def root_failure(self, cell: ActorCell, error: BaseException) -> None:
        """A top-level actor escalated ``error``: kept in ``failures`` and logged."""
        self.failures.append((cell.path, error))
        log.critical("actor %s escalated %r to the system; it is stopped", cell.path, error)

    def _live_cells(self) -> list[ActorCell]:
        """Every live actor, parents before children."""
        found: list[ActorCell] = []
        stack = list(reversed(self._top.values()))
        while stack:
            cell = stack.pop()
            if cell.alive:
                found.append(cell)
            stack.extend(reversed(cell.children.values()))
        return found
