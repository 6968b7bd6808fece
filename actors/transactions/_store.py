"""TxStore: the broker backend's transactional queues as one sans-IO core (items, locks, meta, DLQ).

It keeps what the seed keeps in ZooKeeper, per queue: the items (``item-N``), the lock each taken
item holds (bound to an owner: a session and a transaction in it), each item's meta (takes,
rollbacks, not-before time for redelivery backoff) and the dead letters. Every decision lives
here: which item a take gets, what a release does under the consume policy, whether a commit
applies. A commit is one call that checks everything first and then changes everything, so it is
all or nothing; the actor shell journals each call and replays them after a crash. The core reads
no clock: ``now`` is an argument.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import final

import attrs

from ._policy import ItemMeta, release
from ._values import DeadLetter, ItemKey, TxItem, TxPut, TxQueueSettings

Owner = tuple[Hashable, int]
"""Who holds a lock: (session, transaction number in that session)."""


@final
@attrs.define
class _Item:
    """An item's payload, its meta (the seed's ``meta-N``) and its lock (``lock-N``)."""

    body: bytes
    meta: ItemMeta = attrs.field(factory=ItemMeta)
    owner: Owner | None = None


@final
@attrs.define
class _Queue:
    settings: TxQueueSettings
    items: dict[int, _Item] = attrs.field(factory=dict)
    next_number: int = 1
    dead: list[DeadLetter] = attrs.field(factory=list)


@final
@attrs.frozen
class Committed:
    """The commit applied: ``created`` are the keys of the items its puts became."""

    created: tuple[ItemKey, ...]


@final
@attrs.frozen
class Aborted:
    """The commit changed nothing (its locks were released as by a rollback); ``reason`` says why."""

    reason: str


@final
@attrs.frozen
class TxQueueStats:
    """One queue at one instant: items (locked ones included), locked items, dead letters."""

    queue: str
    items: int
    locked: int
    dead_letters: int


@final
@attrs.frozen
class StoredItem:
    """One item in a snapshot: its number, body, meta and lock owner (None if unlocked)."""

    number: int
    body: bytes
    meta: ItemMeta
    owner: Owner | None


@final
@attrs.frozen
class StoredQueue:
    """One queue in a snapshot."""

    settings: TxQueueSettings
    next_number: int
    items: tuple[StoredItem, ...]
    dead: tuple[DeadLetter, ...]


@final
@attrs.frozen
class TxStoreSnapshot:
    """A ``TxStore`` as an immutable value: what a durable store's journal keeps when it compacts."""

    queues: tuple[StoredQueue, ...]


class UnknownQueue(KeyError):
    """A request named a queue that was never declared."""


class TxStore:
    """Transactional queues: takes lock items, commits remove and create atomically, releases follow the policy."""

    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}
        self._locks: dict[Owner, set[ItemKey]] = {}

    # --- queues ----------------------------------------------------------------------------------

    def declare(self, settings: TxQueueSettings) -> bool:
        """Create the queue; True if created, False if it exists with these settings.

        Raises:
            ValueError: it exists with other settings.
        """
        known = self._queues.get(settings.name)
        if known is None:
            self._queues[settings.name] = _Queue(settings)
            return True
        if known.settings != settings:
            msg = f"queue {settings.name!r} exists with {known.settings!r}, not {settings!r}"
            raise ValueError(msg)
        return False

    def _queue(self, name: str) -> _Queue:
        queue = self._queues.get(name)
        if queue is None:
            declared = ", ".join(sorted(self._queues)) or "none"
            msg = f"unknown queue {name!r}; declared queues: {declared}"
            raise UnknownQueue(msg)
        return queue

    @property
    def queue_names(self) -> tuple[str, ...]:
        """The declared queues, sorted."""
        return tuple(sorted(self._queues))

    # --- take ------------------------------------------------------------------------------------

    def take(self, owner: Owner, queue_name: str, now: float) -> TxItem | None:
        """Lock the first unlocked item whose backoff is over, and count the take; None if there is none."""
        queue = self._queue(queue_name)
        for number, item in queue.items.items():
            if item.owner is None and item.meta.not_before <= now:
                item.owner = owner
                item.meta = attrs.evolve(item.meta, takes=item.meta.takes + 1)
                key = ItemKey(queue_name, number)
                self._locks.setdefault(owner, set()).add(key)
                return TxItem(key, item.body, item.meta.takes)
        return None

    def next_offer(self, queue_name: str, now: float) -> float | None:
        """When an item of the queue is next offered: ``now`` if one is, the earliest backoff end, or None."""
        earliest: float | None = None
        for item in self._queue(queue_name).items.values():
            if item.owner is None:
                if item.meta.not_before <= now:
                    return now
                if earliest is None or item.meta.not_before < earliest:
                    earliest = item.meta.not_before
        return earliest

    # --- commit, rollback, session end -----------------------------------------------------------

    def commit(self, owner: Owner, takes: Iterable[ItemKey], puts: Iterable[TxPut], now: float) -> Committed | Aborted:
        """Remove every taken item and create every put, or (if a lock is not the owner's) change nothing.

        Any other lock the owner holds (a take it never saw answered) is released as not consumed.
        """
        takes = tuple(dict.fromkeys(takes))  # a key named twice is one take (a retried request, a client bug)
        puts = tuple(puts)
        held = self._locks.get(owner, set())
        problem = next((f"{key} is not locked by this transaction" for key in takes if key not in held), None)
        if problem is None:
            unknown = (put.queue for put in puts if put.queue not in self._queues)
            problem = next((f"put to unknown queue {name!r}" for name in unknown), None)
        if problem is not None:
            self.rollback(owner, now, failed=False)
            return Aborted(f"{problem}; declared queues: {', '.join(self.queue_names) or 'none'}")
        for key in takes:
            del self._queue(key.queue).items[key.number]
            held.discard(key)
        created = []
        for put in puts:
            queue = self._queues[put.queue]
            queue.items[queue.next_number] = _Item(put.body)
            created.append(ItemKey(put.queue, queue.next_number))
            queue.next_number += 1
        self._release(owner, now, failed=False, handed_over=False)
        return Committed(tuple(created))

    def rollback(
        self, owner: Owner, now: float, *, failed: bool = True, handed_over: bool = True
    ) -> tuple[ItemKey, ...]:
        """Release every lock of ``owner``; returns the items released, in order.

        ``failed``: the consumer gave up on them (counts toward ``AtLeastOnce.max_rollbacks``).
        ``handed_over=False``: the items never reached user code, so their takes are given back.
        """
        return self._release(owner, now, failed=failed, handed_over=handed_over)

    def end_session(self, session: Hashable, now: float) -> tuple[ItemKey, ...]:
        """The session's client is gone: release all of its locks at once, as not failed."""
        released: list[ItemKey] = []
        for owner in [owner for owner in self._locks if owner[0] == session]:
            released.extend(self._release(owner, now, failed=False, handed_over=True))
        return tuple(sorted(released))

    def _release(self, owner: Owner, now: float, *, failed: bool, handed_over: bool) -> tuple[ItemKey, ...]:
        keys = tuple(sorted(self._locks.pop(owner, ())))
        for key in keys:
            queue = self._queues[key.queue]
            item = queue.items[key.number]
            item.owner = None
            outcome = release(queue.settings, item.meta, now, failed=failed, handed_over=handed_over)
            item.meta = outcome.meta
            if outcome.dead_letter is not None:
                del queue.items[key.number]
                meta = outcome.meta
                queue.dead.append(DeadLetter(key, item.body, meta.takes, meta.rollbacks, outcome.dead_letter))
        return keys

    # --- snapshots -------------------------------------------------------------------------------

    def snapshot(self) -> TxStoreSnapshot:
        """The whole state as an immutable value (locks included: each item names its owner)."""
        return TxStoreSnapshot(tuple(
            StoredQueue(
                queue.settings,
                queue.next_number,
                tuple(StoredItem(n, item.body, item.meta, item.owner) for n, item in queue.items.items()),
                tuple(queue.dead),
            )
            for queue in self._queues.values()
        ))

    @classmethod
    def restore(cls, snapshot: TxStoreSnapshot) -> TxStore:
        """A store in the state ``snapshot`` recorded."""
        store = cls()
        store.load(snapshot)
        return store

    def load(self, snapshot: TxStoreSnapshot) -> None:
        """Replace this (empty) store's state by the one ``snapshot`` recorded."""
        store = self
        for stored in snapshot.queues:
            queue = _Queue(stored.settings, next_number=stored.next_number, dead=list(stored.dead))
            for item in stored.items:
                queue.items[item.number] = _Item(item.body, item.meta, item.owner)
                if item.owner is not None:
                    store._locks.setdefault(item.owner, set()).add(ItemKey(stored.settings.name, item.number))
            store._queues[stored.settings.name] = queue

    # --- reading ---------------------------------------------------------------------------------

    def locks_of(self, owner: Owner) -> tuple[ItemKey, ...]:
        """The items ``owner`` holds locked."""
        return tuple(sorted(self._locks.get(owner, ())))

    def locked(self) -> tuple[tuple[Owner, ItemKey], ...]:
        """Every lock, as (owner, item)."""
        return tuple((owner, key) for owner, keys in self._locks.items() for key in sorted(keys))

    def sessions(self) -> tuple[Hashable, ...]:
        """The sessions holding a lock."""
        return tuple(dict.fromkeys(owner[0] for owner in self._locks))

    def items(self, queue_name: str) -> tuple[tuple[ItemKey, bytes], ...]:
        """The queue's items in order, locked ones included."""
        return tuple((ItemKey(queue_name, n), item.body) for n, item in self._queue(queue_name).items.items())

    def dead_letters(self, queue_name: str) -> tuple[DeadLetter, ...]:
        """The queue's DLQ in the order items went there."""
        return tuple(self._queue(queue_name).dead)

    def stats(self, queue_name: str) -> TxQueueStats:
        """Counts for one queue."""
        queue = self._queue(queue_name)
        locked = sum(1 for item in queue.items.values() if item.owner is not None)
        return TxQueueStats(queue_name, len(queue.items), locked, len(queue.dead))
