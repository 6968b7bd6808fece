"""The transaction protocol: what a client (a session) asks a transaction backend, and its answers.

One protocol, several backends: the broker backend's ``TxStoreActor`` answers it now, and a
ZooKeeper backend answers the same messages (a take creates a ``lock-N`` znode, a commit is one
multi-op). ``session`` is the client's actor: the backend watches it, and when it stops every lock
of every transaction in it is released at once, as ZooKeeper removes a dead session's ephemeral
znodes. ``tx`` numbers a transaction within its session.
"""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime import ActorRef
from conveyor.runtime.lowlevel import checked_when_built
from conveyor.runtime.validators import fail

from ._values import DeadLetter, ItemKey, TxItem, TxPut, TxQueueSettings


def _check_owner(owner: str, session: object, tx: object) -> None:
    if not isinstance(session, ActorRef):
        fail(owner, "session", "the client's ActorRef", session)
    if type(tx) is not int or tx < 1:
        fail(owner, "tx", "a transaction number (int >= 1)", tx)


@final
@attrs.frozen
class DeclareTxQueue:
    """Create a transactional queue (idempotent with equal settings); answered ``TxQueueDeclared``."""

    settings: TxQueueSettings = attrs.field(validator=attrs.validators.instance_of(TxQueueSettings))


@final
@attrs.frozen
class TxQueueDeclared:
    """The queue exists with these settings."""

    name: str


@final
@checked_when_built
@attrs.frozen
class TakeItem:
    """Lock one item of ``queue`` for transaction ``tx``; wait up to ``wait_s`` for one.

    Answered ``Taken`` or ``NothingTaken``.
    """

    session: ActorRef
    tx: int
    queue: str
    wait_s: float = 0.0

    def __attrs_post_init__(self) -> None:
        _check_owner("TakeItem", self.session, self.tx)
        if type(self.queue) is not str or not self.queue:
            fail("TakeItem", "queue", "a queue name", self.queue)
        if isinstance(self.wait_s, bool) or not isinstance(self.wait_s, (int, float)) or not 0 <= self.wait_s <= 3600:
            fail("TakeItem", "wait_s", "a number of seconds from 0 to 3600", self.wait_s)


@final
@attrs.frozen
class CancelTake:
    """Stop waiting for transaction ``tx``'s take; its ``NothingTaken`` (or a ``Taken`` already sent) follows."""

    session: ActorRef
    tx: int


@final
@checked_when_built
@attrs.frozen
class Taken:
    """Transaction ``tx`` holds ``item`` locked."""

    tx: int
    item: TxItem


@final
@checked_when_built
@attrs.frozen
class NothingTaken:
    """No item of ``queue`` was offered in time; ``reason`` is set when the request was refused."""

    tx: int
    queue: str
    reason: str = ""


@final
@checked_when_built
@attrs.frozen
class CommitTx:
    """Remove the taken items and create the puts, all or nothing; answered ``TxCommitted`` or ``TxAborted``."""

    session: ActorRef
    tx: int
    takes: tuple[ItemKey, ...] = ()
    puts: tuple[TxPut, ...] = ()

    def __attrs_post_init__(self) -> None:
        _check_owner("CommitTx", self.session, self.tx)
        if type(self.takes) is not tuple or not all(type(key) is ItemKey for key in self.takes):
            fail("CommitTx", "takes", "a tuple of ItemKey", self.takes)
        if type(self.puts) is not tuple or not all(type(put) is TxPut for put in self.puts):
            fail("CommitTx", "puts", "a tuple of TxPut", self.puts)


@final
@checked_when_built
@attrs.frozen
class TxCommitted:
    """Transaction ``tx`` is committed; ``created`` are its puts' items."""

    tx: int
    created: tuple[ItemKey, ...]


@final
@checked_when_built
@attrs.frozen
class TxAborted:
    """Transaction ``tx`` changed nothing and holds no lock; ``reason`` says why."""

    tx: int
    reason: str


@final
@checked_when_built
@attrs.frozen
class RollbackTx:
    """Release every lock of transaction ``tx``; answered ``TxRolledBack``.

    ``failed``: the consumer gave up on the items (an error); ``handed_over=False``: the items never
    reached user code (a container stopping), so their takes do not count.
    """

    session: ActorRef
    tx: int
    failed: bool = True
    handed_over: bool = True

    def __attrs_post_init__(self) -> None:
        _check_owner("RollbackTx", self.session, self.tx)


@final
@checked_when_built
@attrs.frozen
class TxRolledBack:
    """Transaction ``tx`` holds no lock; ``released`` are the items it had."""

    tx: int
    released: tuple[ItemKey, ...]


@final
@attrs.frozen
class ReadDeadLetters:
    """Ask for a queue's DLQ; answered ``DeadLetters``."""

    queue: str


@final
@attrs.frozen
class DeadLetters:
    """A queue's dead letters, oldest first."""

    queue: str
    items: tuple[DeadLetter, ...]


@final
@attrs.frozen
class ReadItems:
    """Ask for a queue's items (locked ones included), in order; answered ``QueueItems``."""

    queue: str


@final
@attrs.frozen
class QueueItems:
    """A queue's items at one instant, as (key, body), in order."""

    queue: str
    items: tuple[tuple[ItemKey, bytes], ...]


@final
@attrs.frozen
class GetTxStats:
    """Ask for a queue's counts; answered ``TxQueueStats``."""

    queue: str


@final
@attrs.frozen
class TxRefused:
    """A request named something the backend does not have; ``reason`` says what exists."""

    request: str
    reason: str
