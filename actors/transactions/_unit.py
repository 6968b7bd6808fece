"""UnitOfWork: one transaction's client-side state, sans-IO (what it took, what it will put, where it stands).

The sync and async faces and the listener container all drive this one core: it builds the
requests (``TakeItem``, ``CommitTx``, ``RollbackTx``) as data and is told their answers, so the
rules (no take or put after the end, a rollback is always allowed, a failed commit leaves the
transaction rolled back) live here once.
"""

from __future__ import annotations

import enum
from typing import final

from conveyor.runtime import ActorRef, ConveyorError

from ._protocol import CommitTx, NothingTaken, RollbackTx, TakeItem, Taken, TxAborted, TxCommitted, TxRolledBack
from ._values import TxItem, TxPut


class TxState(enum.Enum):
    """Where a transaction stands."""

    OPEN = "open"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"


class TransactionError(ConveyorError):
    """A transaction was used after its end, or its commit was refused (it is then rolled back)."""


@final
class UnitOfWork:
    """Takes and puts of one transaction, turned into protocol requests."""

    def __init__(self, session: ActorRef, tx: int) -> None:
        self.session = session
        self.tx = tx
        self.state = TxState.OPEN
        self.taken: list[TxItem] = []
        self.puts: list[TxPut] = []

    def _require_open(self, action: str) -> None:
        if self.state is not TxState.OPEN:
            msg = f"cannot {action}: transaction {self.tx} is {self.state.value}; open a new one with new_transaction()"
            raise TransactionError(msg)

    def take_request(self, queue: str, wait_s: float = 0.0) -> TakeItem:
        """The request that locks one item of ``queue`` for this transaction."""
        self._require_open(f"take from {queue!r}")
        return TakeItem(self.session, self.tx, queue, wait_s)

    def took(self, answer: object) -> TxItem | None:
        """Record the answer to ``take_request``: the item, or None."""
        match answer:
            case Taken(item=item):
                self.taken.append(item)
                return item
            case NothingTaken(reason=""):
                return None
            case NothingTaken(reason=reason):
                raise TransactionError(reason)
        msg = f"unexpected answer to a take: {answer!r}"
        raise TransactionError(msg)

    def put(self, queue: str, body: bytes) -> None:
        """Record a put; nothing is sent until commit."""
        self._require_open(f"put to {queue!r}")
        self.puts.append(TxPut(queue, body))

    def commit_request(self) -> CommitTx:
        """The request that commits every take and put at once."""
        self._require_open("commit")
        return CommitTx(self.session, self.tx, tuple(item.key for item in self.taken), tuple(self.puts))

    def committed(self, answer: object) -> None:
        """Record the answer to ``commit_request``.

        Raises:
            TransactionError: the backend refused the commit; the transaction is rolled back.
        """
        match answer:
            case TxCommitted():
                self.state = TxState.COMMITTED
                return
            case TxAborted(reason=reason):
                self.state = TxState.ROLLED_BACK
                msg = f"transaction {self.tx} was not committed (nothing changed, its locks are released): {reason}"
                raise TransactionError(msg)
        msg = f"unexpected answer to a commit: {answer!r}"
        raise TransactionError(msg)

    def rollback_request(self, *, failed: bool = True, handed_over: bool = True) -> RollbackTx | None:
        """The request that releases every lock, or None if the transaction has already ended."""
        if self.state is not TxState.OPEN:
            return None
        return RollbackTx(self.session, self.tx, failed=failed, handed_over=handed_over)

    def rolled_back(self, answer: object) -> None:
        """Record the answer to ``rollback_request``."""
        if type(answer) is not TxRolledBack:
            msg = f"unexpected answer to a rollback: {answer!r}"
            raise TransactionError(msg)
        self.state = TxState.ROLLED_BACK
