"""Planted bugs in the transactions store (issue 19), each a ``TxStore`` variant for ``Variant(tx_store=...)``.

* ``LocksNotEphemeral``: a dead session keeps its locks (ZooKeeper locks created persistent);
* ``PutsBeforeTakesChecked``: a commit writes its puts, then checks its takes;
* ``CountsPerSession``: a dead session's takes are given back (ConsumeTimes counted per session);
* ``RollbackKeepsLocks``: a failed transaction's rollback leaves its locks;
* ``CommitsWithoutItsLocks``: a commit removes items it does not hold;
* ``LosesDeadLetters``: the DLQ keeps nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from conveyor.actors.transactions import Aborted, Committed, DeadLetter, ItemKey, TxPut, TxStore


class LocksNotEphemeral(TxStore):
    """A dead session keeps its locks (ZooKeeper locks created persistent, not ephemeral)."""

    def end_session(self, session: Hashable, now: float) -> tuple[ItemKey, ...]:
        return ()


class PutsBeforeTakesChecked(TxStore):
    """A commit writes its puts, then checks its takes: an aborted commit leaves them behind."""

    def commit(self, owner: tuple[Hashable, int], takes: Iterable[ItemKey], puts: Iterable[TxPut],
               now: float) -> Committed | Aborted:
        puts = tuple(puts)
        outcome = super().commit(owner, takes, puts, now)
        if isinstance(outcome, Aborted):
            super().commit(("planted", 0), (), puts, now)
        return outcome


class CountsPerSession(TxStore):
    """A take is counted only while its session lives: a dead session's takes are given back (K per session)."""

    def end_session(self, session: Hashable, now: float) -> tuple[ItemKey, ...]:
        released: list[ItemKey] = []
        for owner in [owner for owner, _ in self.locked() if owner[0] == session]:
            released.extend(self.rollback(owner, now, failed=False, handed_over=False))
        return tuple(released)


class RollbackKeepsLocks(TxStore):
    """A failed transaction's rollback answers but leaves its locks."""

    def rollback(self, owner: tuple[Hashable, int], now: float, *, failed: bool = True,
                 handed_over: bool = True) -> tuple[ItemKey, ...]:
        if failed:
            return self.locks_of(owner)
        return super().rollback(owner, now, failed=failed, handed_over=handed_over)


class CommitsWithoutItsLocks(TxStore):
    """A commit removes the items it names without checking that it still holds their locks."""

    def commit(self, owner: tuple[Hashable, int], takes: Iterable[ItemKey], puts: Iterable[TxPut],
               now: float) -> Committed | Aborted:
        takes = tuple(takes)
        for key in takes:
            if key not in self.locks_of(owner) and any(k == key for k, _ in self.items(key.queue)):
                stolen = self.take(owner, key.queue, now)  # takes the first offered item: often the one named
                if stolen is None or stolen.key != key:
                    break
        return super().commit(owner, takes, puts, now)


class LosesDeadLetters(TxStore):
    """The DLQ keeps nothing: an item past its policy's limit is lost instead of dead-lettered."""

    def dead_letters(self, queue_name: str) -> tuple[DeadLetter, ...]:
        return ()
