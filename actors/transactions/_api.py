"""The faces of the transaction API: ``TxQueue`` (blocking, for threads) and ``AsyncTxQueue`` (trio).

Both are thin wrappers over asks: a ``UnitOfWork`` builds each request and reads each answer, the
backend (``TxStoreActor`` now, a ZooKeeper backend later) does the work. A queue handle owns one
session actor; closing the handle stops it, and the backend releases every lock of the session.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, final

from conveyor.runtime import Actor, ActorRef, ActorSystemBase, ConveyorError

from ._protocol import DeadLetters, DeclareTxQueue, GetTxStats, ReadDeadLetters, TxQueueDeclared, TxRefused
from ._store import TxQueueStats
from ._unit import TransactionError, TxState, UnitOfWork
from ._values import ConsumeOnce, ConsumePolicy, DeadLetter, RedeliveryBackoff, TxItem, TxQueueSettings

SyncAsk = Callable[[ActorRef, object, float], Any]
AsyncAsk = Callable[[ActorRef, object, float], Awaitable[Any]]

AskT = TypeVar("AskT", SyncAsk, AsyncAsk)

ASK_MARGIN_S = 10.0
"""How much longer than a take may wait a client waits for the answer."""


@final
class SessionActor(Actor):
    """Stands for a client's session: the backend watches it, and its stop releases the session's locks."""

    def receive(self, message: Any) -> None:
        """A session answers nothing; it only exists."""


def _answer(answer: object, expected: type) -> Any:
    if isinstance(answer, TxRefused):
        raise ConveyorError(f"{answer.request} refused: {answer.reason}")
    if not isinstance(answer, expected):
        msg = f"expected {expected.__name__}, got {answer!r}"
        raise ConveyorError(msg)
    return answer


class _TransactionFace(Generic[AskT]):
    """What both faces of a transaction share: the unit of work, the backend, the ask, puts."""

    def __init__(self, ask: AskT, store: ActorRef, unit: UnitOfWork, timeout_s: float) -> None:
        self._ask: AskT = ask
        self._store = store
        self.unit = unit
        self._timeout_s = timeout_s

    @property
    def state(self) -> TxState:
        """Open, committed or rolled back."""
        return self.unit.state

    def put(self, queue: str, body: bytes) -> None:
        """Record ``body`` for ``queue``; it is created at commit."""
        self.unit.put(queue, body)


@final
class Transaction(_TransactionFace[SyncAsk]):
    """A blocking unit of work; as a context manager it rolls back unless committed."""

    def try_take(self, queue: str) -> TxItem | None:
        """Lock one item of ``queue`` without removing it; None if none is offered now."""
        return self.take(queue, 0.0)

    def take(self, queue: str, timeout: float) -> TxItem | None:
        """Lock one item of ``queue``, waiting up to ``timeout`` seconds; None if none came."""
        request = self.unit.take_request(queue, timeout)
        return self.unit.took(self._ask(self._store, request, timeout + self._timeout_s))

    def commit(self) -> None:
        """Remove every taken item and create every put, atomically.

        Raises:
            TransactionError: refused; nothing changed and the transaction is rolled back.
        """
        self.unit.committed(self._ask(self._store, self.unit.commit_request(), self._timeout_s))

    def rollback(self) -> None:
        """Release every lock and drop every put; a no-op once the transaction has ended."""
        request = self.unit.rollback_request()
        if request is not None:
            self.unit.rolled_back(self._ask(self._store, request, self._timeout_s))

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.rollback()


@final
class AsyncTransaction(_TransactionFace[AsyncAsk]):
    """An awaitable unit of work; as an async context manager it rolls back unless committed."""

    async def try_take(self, queue: str) -> TxItem | None:
        """Lock one item of ``queue`` without removing it; None if none is offered now."""
        return await self.take(queue, 0.0)

    async def take(self, queue: str, timeout: float) -> TxItem | None:
        """Lock one item of ``queue``, waiting up to ``timeout`` seconds; None if none came."""
        request = self.unit.take_request(queue, timeout)
        return self.unit.took(await self._ask(self._store, request, timeout + self._timeout_s))

    async def commit(self) -> None:
        """Remove every taken item and create every put, atomically (see ``Transaction.commit``)."""
        self.unit.committed(await self._ask(self._store, self.unit.commit_request(), self._timeout_s))

    async def rollback(self) -> None:
        """Release every lock and drop every put; a no-op once the transaction has ended."""
        request = self.unit.rollback_request()
        if request is not None:
            self.unit.rolled_back(await self._ask(self._store, request, self._timeout_s))

    async def __aenter__(self) -> AsyncTransaction:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.rollback()


class _Handle:
    """What both faces share: the store, the session, transaction numbers."""

    def __init__(self, system: ActorSystemBase, store: ActorRef, timeout_s: float) -> None:
        self.system = system
        self.store = store
        self.session = system.spawn(SessionActor)
        self.timeout_s = timeout_s
        self._numbers = itertools.count(1)

    def _unit(self) -> UnitOfWork:
        if not self.session.is_alive:
            msg = "this queue handle is closed (its session ended); open a new one"
            raise TransactionError(msg)
        return UnitOfWork(self.session, next(self._numbers))

    def close(self) -> None:
        """End the session: the backend releases every lock still held by its transactions."""
        self.system.stop(self.session)


@final
class TxQueue(_Handle):
    """A blocking handle on a transaction backend (the seed's ``ZkQueue``), for threads."""

    def __init__(self, system: ActorSystemBase, store: ActorRef, *, timeout_s: float = ASK_MARGIN_S) -> None:
        super().__init__(system, store, timeout_s)
        self._ask: SyncAsk = system.ask_from_thread

    def declare(self, name: str, policy: ConsumePolicy | None = None, backoff: RedeliveryBackoff | None = None) -> None:
        """Create the queue ``name`` (idempotent with the same settings)."""
        settings = TxQueueSettings(name, policy or ConsumeOnce(), backoff)
        _answer(self._ask(self.store, DeclareTxQueue(settings), self.timeout_s), TxQueueDeclared)

    def new_transaction(self) -> Transaction:
        """A new open transaction in this handle's session."""
        return Transaction(self._ask, self.store, self._unit(), self.timeout_s)

    def dead_letters(self, name: str) -> tuple[DeadLetter, ...]:
        """The DLQ of queue ``name``."""
        letters: DeadLetters = _answer(self._ask(self.store, ReadDeadLetters(name), self.timeout_s), DeadLetters)
        return letters.items

    def stats(self, name: str) -> TxQueueStats:
        """Counts of queue ``name``."""
        result: TxQueueStats = _answer(self._ask(self.store, GetTxStats(name), self.timeout_s), TxQueueStats)
        return result


@final
class AsyncTxQueue(_Handle):
    """An awaitable handle on a transaction backend; ``ask`` is ``TrioSystem.ask`` or any async ask."""

    def __init__(self, system: ActorSystemBase, store: ActorRef, *, ask: AsyncAsk | None = None,
                 timeout_s: float = ASK_MARGIN_S) -> None:
        super().__init__(system, store, timeout_s)
        self._ask: AsyncAsk = ask if ask is not None else system.ask

    async def declare(self, name: str, policy: ConsumePolicy | None = None,
                      backoff: RedeliveryBackoff | None = None) -> None:
        """Create the queue ``name`` (idempotent with the same settings)."""
        settings = TxQueueSettings(name, policy or ConsumeOnce(), backoff)
        _answer(await self._ask(self.store, DeclareTxQueue(settings), self.timeout_s), TxQueueDeclared)

    def new_transaction(self) -> AsyncTransaction:
        """A new open transaction in this handle's session."""
        return AsyncTransaction(self._ask, self.store, self._unit(), self.timeout_s)

    async def dead_letters(self, name: str) -> tuple[DeadLetter, ...]:
        """The DLQ of queue ``name``."""
        letters: DeadLetters = _answer(await self._ask(self.store, ReadDeadLetters(name), self.timeout_s), DeadLetters)
        return letters.items

    async def stats(self, name: str) -> TxQueueStats:
        """Counts of queue ``name``."""
        result: TxQueueStats = _answer(await self._ask(self.store, GetTxStats(name), self.timeout_s), TxQueueStats)
        return result
