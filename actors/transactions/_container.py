"""The listener container (the seed's ``QueueListenerContainer``): a listener call per item, on workers.

``ListenerContainerActor`` runs ``workers`` transactions at a time. Each worker takes an item
(waiting for one), runs the listener on it as a job (off the actor: user code may block), and
commits the item with whatever the listener ``put_on_commit``; a listener that raises, or a commit
that is refused, rolls the transaction back, and the consume policy decides whether the item is
offered again or dead-lettered. The container is the session: if it stops or fails, the backend
releases its locks. ``StopContainer`` stops taking, lets the running listeners finish and commit,
then answers ``ContainerStopped`` and stops. ``QueueListenerContainer`` is the blocking face.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, ActorSystemBase, JobDone, JobFailed

from ._protocol import CancelTake, NothingTaken, RollbackTx, Taken, TxAborted, TxCommitted, TxRolledBack
from ._unit import TransactionError, UnitOfWork
from ._values import TxItem, TxPut

POLL_S = 1.0
"""How long each worker's take waits for an item before asking again."""

OVERDUE_MARGIN_S = 5.0
"""A take not answered ``poll_s`` plus this long is given up (a store that restarted lost it)."""


@final
class ListenerConsumer:
    """What a listener is given beside the item: ``put_on_commit`` records a put for its transaction."""

    def __init__(self) -> None:
        self.puts: list[TxPut] = []

    def put_on_commit(self, queue: str, body: bytes) -> None:
        """Create ``body`` in ``queue`` if, and only if, this item's transaction commits."""
        self.puts.append(TxPut(queue, body))


Listener = Callable[[ListenerConsumer, TxItem], None]
"""``listener(consumer, item)``: handle one item; raise to roll its transaction back."""


def _run_listener(listener: Listener, item: TxItem) -> tuple[TxPut, ...]:
    consumer = ListenerConsumer()
    listener(consumer, item)
    return tuple(consumer.puts)


@final
@attrs.frozen
class _TakeOverdue:
    """Transaction ``tx``'s take should have been answered by now."""

    tx: int


@final
@attrs.frozen
class _TakeAgain:
    """A worker whose take was refused asks again now."""


@final
@attrs.frozen
class StopContainer:
    """Stop taking, let running listeners finish; answered ``ContainerStopped`` when none runs."""


@final
@attrs.frozen
class ContainerStopped:
    """Every listener has finished and every transaction has ended; the container is stopping."""

    committed: int
    rolled_back: int


@final
@attrs.frozen
class GetContainerStats:
    """Ask the container's counts so far; answered ``ContainerStats``."""


@final
@attrs.frozen
class ContainerStats:
    """The container's counts so far."""

    committed: int
    rolled_back: int
    running: int


@final
class ListenerContainerActor(Actor):
    """Runs ``listener`` on the items of ``queue``, ``workers`` transactions at a time."""

    def __init__(self, store: ActorRef, queue: str, listener: Listener, *, workers: int = 1,
                 poll_s: float = POLL_S) -> None:
        if type(workers) is not int or workers < 1:
            msg = f"ListenerContainerActor.workers must be an int >= 1, got {workers!r}"
            raise ValueError(msg)
        self.store = store
        self.queue = queue
        self.listener = listener
        self.workers = workers
        self.poll_s = poll_s
        self.numbers = itertools.count(1)
        self.units: dict[int, UnitOfWork] = {}
        self.jobs: dict[int, int] = {}
        self.stopping: list[ActorRef | None] = []
        self.committed = 0
        self.rolled_back = 0

    def on_start(self) -> None:
        """Start every worker taking."""
        for _ in range(self.workers):
            self._next_take()

    def _next_take(self) -> None:
        if self.stopping:
            self._maybe_stopped()
            return
        unit = UnitOfWork(self.ctx.self_ref, next(self.numbers))
        self.units[unit.tx] = unit
        self.ctx.send(self.store, unit.take_request(self.queue, self.poll_s))
        self.ctx.schedule(self.poll_s + OVERDUE_MARGIN_S, _TakeOverdue(unit.tx))

    def receive(self, message: Any) -> None:
        """Drive each worker's transaction: take, listen, commit or roll back."""
        match message:
            case Taken(tx=tx) if tx in self.units:
                unit = self.units[tx]
                item = unit.took(message)
                if self.stopping:  # never reached the listener: its take does not count
                    self._rollback(unit, failed=False, handed_over=False)
                elif item is not None:
                    self.jobs[self.ctx.run_job(_run_listener, self.listener, item)] = tx
            case Taken(tx=tx):  # for a take given up as overdue: hand it back uncounted
                self.ctx.send(self.store, RollbackTx(self.ctx.self_ref, tx, failed=False, handed_over=False))
            case NothingTaken(tx=tx, reason=reason) if tx in self.units:
                del self.units[tx]
                if reason:  # refused (an expired session, an unknown queue): ask again in poll_s, not at once
                    self.ctx.schedule(self.poll_s, _TakeAgain())
                else:
                    self._next_take()
            case _TakeAgain():
                self._next_take()
            case _TakeOverdue(tx=tx) if tx in self.units and not self.units[tx].taken:
                del self.units[tx]  # the store lost the take (it restarted): ask again
                self._next_take()
            case JobDone(job_id=job, result=puts) if job in self.jobs:
                unit = self.units[self.jobs.pop(job)]
                for put in puts:
                    unit.puts.append(put)
                self.ctx.send(self.store, unit.commit_request())
            case JobFailed(job_id=job) if job in self.jobs:
                self._rollback(self.units[self.jobs.pop(job)], failed=True, handed_over=True)
            case TxCommitted(tx=tx) | TxAborted(tx=tx) if tx in self.units:
                unit = self.units.pop(tx)
                try:
                    unit.committed(message)
                    self.committed += 1
                except TransactionError:
                    self.rolled_back += 1
                self._next_take()
            case TxRolledBack(tx=tx) if tx in self.units:
                self.units.pop(tx).rolled_back(message)
                self.rolled_back += 1
                self._next_take()
            case StopContainer():
                self.stopping.append(self.ctx.sender)
                for tx, unit in self.units.items():
                    if not unit.taken:
                        self.ctx.send(self.store, CancelTake(self.ctx.self_ref, tx))
                self._maybe_stopped()
            case GetContainerStats():
                self.ctx.reply(ContainerStats(self.committed, self.rolled_back, len(self.units)))

    def _rollback(self, unit: UnitOfWork, *, failed: bool, handed_over: bool) -> None:
        request = unit.rollback_request(failed=failed, handed_over=handed_over)
        if request is not None:
            self.ctx.send(self.store, request)

    def _maybe_stopped(self) -> None:
        if self.units:
            return
        for asker in self.stopping:
            if asker is not None:
                self.ctx.send(asker, ContainerStopped(self.committed, self.rolled_back))
        self.stopping.clear()
        self.ctx.stop()


@final
class QueueListenerContainer:
    """The blocking face: ``start()`` spawns the container actor, ``stop()`` waits for its listeners."""

    def __init__(self, system: ActorSystemBase, store: ActorRef, queue: str, listener: Listener, *,
                 workers: int = 1, poll_s: float = POLL_S) -> None:
        self.system = system
        self.ref: ActorRef | None = None
        self._factory = lambda: ListenerContainerActor(store, queue, listener, workers=workers, poll_s=poll_s)

    def start(self) -> None:
        """Start serving items; once only."""
        if self.ref is not None:
            msg = "QueueListenerContainer.start() was called already"
            raise RuntimeError(msg)
        self.ref = self.system.spawn(self._factory)

    def stop(self, timeout: float = 60.0) -> ContainerStopped:
        """Stop taking, wait for the running listeners and their commits; returns the final counts."""
        if self.ref is None:
            msg = "QueueListenerContainer.stop() before start()"
            raise RuntimeError(msg)
        result: ContainerStopped = self.system.ask_from_thread(self.ref, StopContainer(), timeout)
        return result
