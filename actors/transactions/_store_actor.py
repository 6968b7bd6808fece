"""TxStoreActor: the broker backend of transactions, a thin shell around the sans-IO ``TxStore``.

It answers the transaction protocol (``_protocol.py``), keeps takes that wait for an item (with a
timer for their ``wait_s`` and one for the earliest backoff end), watches every session that
holds a lock and releases them all when it stops, and, when durable, journals each core call
before it answers, so a commit that was answered survives a crash and one that was not leaves
nothing (``docs/transactions.md``, "The broker backend").
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, JournalSynced, Terminated, TimerHandle

from ._protocol import (
    CancelTake,
    CommitTx,
    DeadLetters,
    DeclareTxQueue,
    GetTxStats,
    NothingTaken,
    QueueItems,
    ReadDeadLetters,
    ReadItems,
    RollbackTx,
    TakeItem,
    Taken,
    TxAborted,
    TxCommitted,
    TxQueueDeclared,
    TxRefused,
    TxRolledBack,
)
from ._store import Committed, TxStore, TxStoreSnapshot, UnknownQueue

COMPACT_AFTER_EVENTS = 1024
"""A durable store replaces its journal's events by a snapshot once it holds this many."""


@final
@attrs.frozen
class _WaitOver:
    """A waiting take's ``wait_s`` is up."""

    session: ActorRef
    tx: int


@final
@attrs.frozen
class _BackoffOver:
    """An item's redelivery backoff may have ended: serve the waiting takes."""


@final
@attrs.frozen
class _Waiter:
    request: TakeItem
    reply_to: ActorRef | None
    timer: TimerHandle | None


class TxStoreActor(Actor):
    """Transactional queues in one actor: a commit across queues is one handler and one journal write.

    ``core`` builds the sans-IO store (a planted bug's variant in the simulation tests).
    """

    def __init__(
        self,
        *,
        durable: bool = False,
        compact_after_events: int = COMPACT_AFTER_EVENTS,
        core: Callable[[], TxStore] = TxStore,
    ) -> None:
        if type(compact_after_events) is not int or compact_after_events < 1:
            msg = f"TxStoreActor.compact_after_events must be an int >= 1, got {compact_after_events!r}"
            raise ValueError(msg)
        self.durable = durable
        self.compact_after_events = compact_after_events
        self.new_core = core
        self.core = core()
        self.unsynced: deque[tuple[int, ActorRef, object]] = deque()
        self.waiters: dict[str, deque[_Waiter]] = {}
        self.watched: set[ActorRef] = set()
        self.backoff_wake: float | None = None

    # --- recovery --------------------------------------------------------------------------------

    def on_start(self) -> None:
        """A durable store replays its journal, then watches again every session that holds a lock."""
        if not self.durable:
            return
        journal = self.ctx.journal
        snapshot = journal.snapshot
        if isinstance(snapshot, TxStoreSnapshot):
            self.core = self.new_core()
            self.core.load(snapshot)
        for call in journal:
            self._apply(call)  # type: ignore[arg-type]
        for session in self.core.sessions():
            self._watch(session)  # type: ignore[arg-type]

    def _apply(self, call: tuple[Any, ...]) -> Any:
        """Run one recorded core call (the same path live calls take, so replay gives the same state)."""
        match call:
            case ("declare", settings):
                return self.core.declare(settings)
            case ("take", owner, queue, now):
                return self.core.take(owner, queue, now)
            case ("commit", owner, takes, puts, now):
                return self.core.commit(owner, takes, puts, now)
            case ("rollback", owner, now, failed, handed_over):
                return self.core.rollback(owner, now, failed=failed, handed_over=handed_over)
            case ("end_session", session, now):
                return self.core.end_session(session, now)
        msg = f"unknown journal record {call!r}"
        raise ValueError(msg)

    def _call(self, *call: Any) -> Any:
        """Run a core call and, when durable, journal it before anything is answered."""
        result = self._apply(call)
        if self.durable:
            journal = self.ctx.journal
            if len(journal) >= self.compact_after_events:
                journal.save_snapshot(self.core.snapshot())  # the state after this call: it replaces the events
            else:
                journal.append(call)
        return result

    def _answer_commit(self, answer: TxCommitted | TxAborted) -> None:
        """Answer a commit; on a disk journal, once what it wrote is synced (a returned commit survives the process)."""
        journal = self.ctx.journal if self.durable else None
        if journal is None or not journal.on_disk or isinstance(answer, TxAborted):
            self.ctx.reply(answer)
            return
        sender = self.ctx.sender
        if sender is not None:
            self.unsynced.append((journal.last_write, sender, answer))
            journal.when_synced(self.ctx.self_ref)

    def _synced(self, through: int) -> None:
        while self.unsynced and self.unsynced[0][0] <= through:
            _, sender, answer = self.unsynced.popleft()
            self.ctx.send(sender, answer)

    # --- messages --------------------------------------------------------------------------------

    def receive(self, message: Any) -> None:
        """Answer the transaction protocol."""
        match message:
            case TakeItem():
                self._take(message)
            case CommitTx(session=session, tx=tx, takes=takes, puts=puts):
                self._watch(session)
                outcome = self._call("commit", (session, tx), takes, puts, self.ctx.now())
                if isinstance(outcome, Committed):
                    self._answer_commit(TxCommitted(tx, outcome.created))
                else:
                    self._answer_commit(TxAborted(tx, outcome.reason))
                self._serve_waiters()
            case RollbackTx(session=session, tx=tx, failed=failed, handed_over=handed_over):
                self._drop_waiter(session, tx)
                released = self._call("rollback", (session, tx), self.ctx.now(), failed, handed_over)
                self.ctx.reply(TxRolledBack(tx, released))
                self._serve_waiters()
            case CancelTake(session=session, tx=tx):
                self._drop_waiter(session, tx)
            case _WaitOver(session=session, tx=tx):
                self._drop_waiter(session, tx, timer_fired=True)
            case JournalSynced(through=through):
                self._synced(through)
            case _BackoffOver():
                self.backoff_wake = None
                self._serve_waiters()
            case Terminated(ref=ref):
                self.watched.discard(ref)
                for queue in self.waiters.values():
                    for waiter in [w for w in queue if w.request.session == ref]:
                        queue.remove(waiter)
                        if waiter.timer is not None:
                            self.ctx.cancel(waiter.timer)
                if any(owner[0] == ref for owner, _ in self.core.locked()):
                    self._call("end_session", ref, self.ctx.now())
                    self._serve_waiters()
            case DeclareTxQueue(settings=settings):
                try:
                    self._call("declare", settings)
                except ValueError as error:
                    self.ctx.reply(TxRefused("DeclareTxQueue", str(error)))
                else:
                    self.ctx.reply(TxQueueDeclared(settings.name))
            case ReadDeadLetters(queue=queue):
                self._answer_read(lambda: DeadLetters(queue, self.core.dead_letters(queue)), "ReadDeadLetters")
            case ReadItems(queue=queue):
                self._answer_read(lambda: QueueItems(queue, self.core.items(queue)), "ReadItems")
            case GetTxStats(queue=queue):
                self._answer_read(lambda: self.core.stats(queue), "GetTxStats")

    def _answer_read(self, read: Any, request: str) -> None:
        try:
            self.ctx.reply(read())
        except UnknownQueue as error:
            self.ctx.reply(TxRefused(request, error.args[0]))

    def _watch(self, session: ActorRef) -> None:
        if session not in self.watched:
            self.watched.add(session)
            self.ctx.watch(session)

    # --- takes -----------------------------------------------------------------------------------

    def _take(self, request: TakeItem) -> None:
        if request.queue not in self.core.queue_names:
            declared = ", ".join(self.core.queue_names) or "none"
            reason = f"unknown queue {request.queue!r}; declared queues: {declared}"
            self.ctx.reply(NothingTaken(request.tx, request.queue, reason))
            return
        self._watch(request.session)
        self._serve_waiters()  # an item whose backoff just ended goes to the takes that waited first
        queue_waiters = self.waiters.get(request.queue)
        owner = (request.session, request.tx)
        item = None if queue_waiters else self._call("take", owner, request.queue, self.ctx.now())
        if item is not None:
            self.ctx.reply(Taken(request.tx, item))
        elif request.wait_s <= 0:
            self.ctx.reply(NothingTaken(request.tx, request.queue))
        else:
            timer = self.ctx.schedule(request.wait_s, _WaitOver(request.session, request.tx))
            self.waiters.setdefault(request.queue, deque()).append(_Waiter(request, self.ctx.sender, timer))
            self._arm_backoff_wake()

    def _drop_waiter(self, session: ActorRef, tx: int, *, timer_fired: bool = False) -> None:
        """Answer a waiting take of (session, tx) with ``NothingTaken``, if one waits."""
        for queue in self.waiters.values():
            for waiter in queue:
                if waiter.request.session == session and waiter.request.tx == tx:
                    queue.remove(waiter)
                    if not timer_fired and waiter.timer is not None:
                        self.ctx.cancel(waiter.timer)
                    if waiter.reply_to is not None:
                        self.ctx.send(waiter.reply_to, NothingTaken(tx, waiter.request.queue))
                    return

    def _serve_waiters(self) -> None:
        """Give offered items to the takes waiting for them, oldest first."""
        if not any(self.waiters.values()):
            return  # the common case: nothing waits, and no backoff timer is needed for nobody
        now = self.ctx.now()
        for name, queue in self.waiters.items():
            while queue:
                waiter = queue[0]
                item = self._call("take", (waiter.request.session, waiter.request.tx), name, now)
                if item is None:
                    break
                queue.popleft()
                if waiter.timer is not None:
                    self.ctx.cancel(waiter.timer)
                if waiter.reply_to is not None:
                    self.ctx.send(waiter.reply_to, Taken(waiter.request.tx, item))
        self._arm_backoff_wake()

    def _arm_backoff_wake(self) -> None:
        """Keep one timer at the earliest backoff end among queues with waiting takes."""
        now = self.ctx.now()
        ends = [self.core.next_offer(name, now) for name, queue in self.waiters.items() if queue]
        future = [end for end in ends if end is not None and end > now]
        if not future:
            return
        earliest = min(future)
        if self.backoff_wake is None or earliest < self.backoff_wake:
            self.backoff_wake = earliest
            self.ctx.schedule(earliest - now, _BackoffOver())

