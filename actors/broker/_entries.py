"""EntryList: the queue's strictly ordered entries, the one home of entry-state transitions.

Sans-IO: it owns its state and is told the time; it sends nothing. The rules come
from the Qpid seeds (001 and 000):

* Entries keep publish order inside each priority level; a strict priority queue is
  the levels laid end to end, highest first (Qpid's ``PriorityQueueList``), so an
  entry's position is ``(rank, seq)`` with rank 0 the highest level.
* States: AVAILABLE -> ACQUIRED(consumer, deadline) -> DEQUEUED on ack; back to
  AVAILABLE on release, nack or lease expiry, *at its original position*;
  DEAD_LETTERED past the delivery limit; EXPIRED past its TTL.
* Each acquiring consumer has a pointer (its last seen position) and is given the next
  AVAILABLE entry after it that matches its selector. The pointer moves past entries
  the consumer can never take (acquired, removed, not matching); it stops in front of
  entries it merely cannot take *now* (delayed, group owned by another consumer,
  reserved for a higher-priority consumer). When an entry becomes available again, or
  a higher-priority entry arrives, pointers past it move back
  (``checkSubscriptionsNotAheadOfDelivery``).
* Browsers walk entries in publish order and see each live one once.
* A message group is owned by one consumer while it holds any of the group's entries.
  While an entry of a group waits out a nack's retry backoff, the group's later entries
  wait too, so a group is redelivered in publish order even to a new consumer.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, final

import attrs

from ._selectors import MatchAll, Selector
from ._values import PRIORITY_MAX, DeliveryError, HeaderValue, Message

_BEFORE_ALL = (-1, -1)


class EntryState(enum.Enum):
    """Where an entry is in its life; the last three are final."""

    AVAILABLE = "available"
    ACQUIRED = "acquired"
    DEQUEUED = "dequeued"
    DEAD_LETTERED = "dead_lettered"
    EXPIRED = "expired"


_AVAILABLE = EntryState.AVAILABLE
_ACQUIRED = EntryState.ACQUIRED
_DEQUEUED = EntryState.DEQUEUED
_DEAD_LETTERED = EntryState.DEAD_LETTERED
_EXPIRED = EntryState.EXPIRED
# An entry is live while AVAILABLE or ACQUIRED; the other three states are final. The hot paths
# test that by identity: a set of states would call Enum.__hash__, a Python-level function, for
# every entry visited.


def priority_level(priority: int, levels: int) -> int:
    """Map a message priority onto ``levels`` levels as Qpid's PriorityQueueList does.

    With 10 levels each of 0-9 has its own; with fewer, the middle priorities share: the offset
    ``5 - (levels + 1) // 2`` is subtracted and the result clamped into ``[0, levels - 1]``, so
    a priority beyond the levels (up to 255) lands on the nearest one.
    """
    offset = 5 - (levels + 1) // 2
    return min(levels - 1, max(0, priority - offset))


@final
class Entry:
    """One message in the queue. Owned and mutated by ``EntryList`` only."""

    __slots__ = (
        "available_at",
        "consumer",
        "deadline",
        "delivery_count",
        "expires_at",
        "last_consumer",
        "last_error",
        "lease",
        "message",
        "paged",
        "position",
        "seq",
        "size",
        "state",
        "stored",
    )

    def __init__(self, seq: int, rank: int, message: Message, now: float) -> None:
        self.seq = seq
        self.position = (rank, seq)
        self.message = message
        self.size = message.size
        self.state = _AVAILABLE
        self.consumer: int | None = None
        self.last_consumer = 0  # who held it last (kept after a return, for reports)
        self.last_error: DeliveryError | None = None  # why its last nack said it failed (for its dead letter)
        self.deadline: float | None = None
        self.delivery_count = 0
        self.lease = 0  # bumped on every acquire / extend, so stale lease-heap items are ignored
        self.available_at = now + message.delay_s if message.delay_s else 0.0
        self.expires_at = now + message.ttl_s if message.ttl_s is not None else None
        # Paging (``EntryList.page_out``): the body is in the queue's body store, and ``message``
        # holds it no more (it keeps headers and options, what the list's rules read).
        self.paged = False
        self.stored = False  # a copy of the body is in the body store (written once, kept until final)

    def __repr__(self) -> str:
        return f"<Entry {self.seq} {self.state.value} at {self.position}>"


def _note_errors(entries: list[Entry], tags: tuple[int, ...], errors: tuple[DeliveryError | None, ...]) -> None:
    """Keep on each entry given back the error its nack reported (``errors`` is parallel to ``tags``)."""
    reported = {tag: error for tag, error in zip(tags, errors, strict=True) if error is not None}
    for entry in entries:
        error = reported.get(entry.seq)
        if error is not None:
            entry.last_error = error


def _current(held: dict[int, Entry], tags: Iterable[int], attempts: tuple[int, ...]) -> list[Entry]:
    """The held entries of ``tags`` whose delivery is still the one named by ``attempts`` (parallel)."""
    entries = []
    for tag, attempt in zip(tags, attempts, strict=True):
        entry = held.get(tag)
        if entry is not None and entry.delivery_count == attempt:
            entries.append(entry)
    return entries


@final
@attrs.frozen
class Returned:
    """What came of giving entries back: available again, or dead-lettered (limit reached)."""

    available: tuple[Entry, ...] = ()
    dead_lettered: tuple[Entry, ...] = ()
    expired: tuple[Entry, ...] = ()


@final
class DeltaChunk:
    """A run of a level's entries that live in the body store, not in RAM: only their seqs stay.

    ``key`` names the chunk's record in the store; ``sizes`` are the entries' ``size``.
    """

    __slots__ = ("key", "seqs", "sizes")

    def __init__(self, key: int, seqs: array[int], sizes: array[int]) -> None:
        self.key = key
        self.seqs = seqs
        self.sizes = sizes


class _Level:
    """One priority level: entries in seq order, with lazily removed final ones.

    ``delta``, when not empty, is a run of the level's entries (seqs ``delta[0].seqs[0]`` to
    ``delta[-1].seqs[-1]``) kept out of RAM: ``entries`` holds the level's entries before it and
    after it. A walk that reaches it stops (``EntryList.blocked_rank``) until its first chunk is
    loaded back (``load_delta``).
    """

    __slots__ = ("dead", "delta", "entries", "head", "seqs", "trims")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.seqs: list[int] = []
        self.head = 0
        self.dead = 0
        self.delta: deque[DeltaChunk] = deque()
        self.trims = 0  # bumped whenever ``removed`` cuts or compacts ``entries``: a walk then finds its place again

    def gap_after(self, seq: int) -> int | None:
        """The first seq of the delta if some of it lies after ``seq`` (a walk from there meets it)."""
        delta = self.delta
        if delta and delta[-1].seqs[-1] > seq:
            return delta[0].seqs[0]
        return None

    def append(self, entry: Entry) -> None:
        self.entries.append(entry)
        self.seqs.append(entry.seq)

    def after(self, seq: int) -> int:
        """Index of the first entry with a larger seq."""
        return bisect_right(self.seqs, seq, self.head)

    def removed(self, count: int = 1) -> None:
        """``count`` entries of this level reached a final state: trim the head, compact when sparse."""
        self.dead += count
        entries = self.entries
        head = self.head
        end = len(entries)
        while head < end and (state := entries[head].state) is not _AVAILABLE and state is not _ACQUIRED:
            head += 1
            self.dead -= 1
        self.head = head
        sparse = self.dead > 64 and self.dead * 2 > end - head
        if sparse:  # most of what is left is final: a walk over it, paid for by the removals that made it so
            kept = [e for e in entries[head:] if e.state is _AVAILABLE or e.state is _ACQUIRED]
            self.entries = kept
            self.seqs = [e.seq for e in kept]
            self.dead = 0
        elif head == end or head > 1024:
            # Cut the final head off in place: a move of the rest, no walk over it. The final entries
            # after it stay counted in ``dead`` (acks out of order: a walk here would cost the whole
            # backlog every 1,024 acks).
            del entries[:head]
            del self.seqs[:head]
            if head == end:
                self.dead = 0  # nothing is left to be final
        else:
            return
        self.head = 0
        self.trims += 1


@final
class _Cursor:
    """A consumer as the entry list sees it."""

    __slots__ = ("acquiring", "held", "interested", "pointer", "priority", "selector")

    def __init__(self, selector: Selector, priority: int, acquiring: bool, pointer: tuple[int, int]) -> None:
        self.selector = selector
        self.priority = priority
        self.acquiring = acquiring
        self.interested = True
        self.pointer = pointer
        self.held: dict[int, Entry] = {}


@final
@attrs.frozen
class EntryListSnapshot:
    """Everything an ``EntryList`` holds, as an immutable value (``EntryList.snapshot``).

    ``entries`` has one tuple per live entry, in publish order: (seq, rank, key, message,
    state, consumer, last consumer, deadline, delivery count, lease, available at, expires at),
    where (rank, key) is its position. ``cursors`` has (consumer id, selector, priority,
    acquiring, interested, pointer, held seqs); ``groups`` (group, owner, entries held); the
    three heaps are kept as they are, stale items included, so the next wake-up is the same.
    ``errors`` has (seq, last error) for the live entries a nack said why of; a snapshot made
    before the field existed has none.
    """

    priorities: int
    max_deliveries: int | None
    next_seq: int
    used_ranks: tuple[int, ...]
    entries: tuple[tuple[Any, ...], ...]
    cursors: tuple[tuple[Any, ...], ...]
    groups: tuple[tuple[str, int, int], ...]
    leases: tuple[tuple[float, int, int], ...]
    ttls: tuple[tuple[float, int], ...]
    delays: tuple[tuple[float, int], ...]
    top_priority: int
    counters: tuple[int, ...]
    errors: tuple[tuple[int, DeliveryError], ...] = ()
    stored: tuple[tuple[int, int], ...] = ()
    """(seq, size) of the entries whose body is in a durable queue's body store, not in the snapshot
    (their message has an empty body): ``snapshot(unsynced=...)``."""
    deltas: tuple[tuple[int, tuple[DeltaChunk, ...]], ...] = ()
    """(rank, chunks) of the levels whose deltas hold entries out of RAM: each chunk's key, seqs and sizes
    only, its records (the entries) staying in the durable body store (``snapshot(unsynced_chunks=...)``)."""


_COUNTERS = ("available", "acquired", "published", "delivered", "redelivered", "acked", "dead_lettered", "expired",
             "returned")
"""The counters a snapshot keeps, in order. ``returned`` came last and later: a snapshot written before it has
one counter fewer, and restores with ``returned`` at 0."""


class EntryList:
    """The ordered entries of one queue, with every consumer's pointer and every lease.

    No ``__slots__``: a durable queue wraps this instance's state-changing methods to journal
    their calls (``_durable.journal_calls``).

    Args:
        priorities: number of strict priority levels (1-10).
        max_deliveries: an entry given back after this many deliveries is dead-lettered.
    """

    def __init__(self, priorities: int = 10, max_deliveries: int | None = None) -> None:
        if not 1 <= priorities <= 10:
            msg = f"priorities must be from 1 to 10, got {priorities}"
            raise ValueError(msg)
        self.priorities = priorities
        self.max_deliveries = max_deliveries
        self._levels = [_Level() for _ in range(priorities)]  # index = rank (0 = highest)
        self._used_ranks: list[int] = []  # ranks of the levels that ever held an entry, ascending
        # Rank by message priority, 0-255 (PRIORITY_MAX): one list index per publish.
        self._rank_of = [priorities - 1 - priority_level(p, priorities) for p in range(PRIORITY_MAX + 1)]
        self._next_seq = 1  # a plain int, not itertools.count: a durable queue's snapshot deep-copies it
        self._live: dict[int, Entry] = {}
        self._cursors: dict[int, _Cursor] = {}
        self._top_priority = 0  # the highest consumer priority registered: no one outranks it
        self._groups: dict[str, list[int]] = {}  # group -> [owner consumer, entries held]
        self._leases: list[tuple[float, int, int]] = []  # (deadline, seq, lease)
        self._ttls: list[tuple[float, int]] = []
        self._delays: list[tuple[float, int]] = []
        self.available = 0
        self.acquired = 0
        self.live_bytes = 0
        """Bytes (``Message.size``) of every entry not yet in a final state."""
        self.paged_bytes = 0
        """Bytes of the live entries whose body is paged out (``page_out``): not held in RAM."""
        self.paged = 0
        """How many live entries have their body paged out."""
        self.blocked: Entry | None = None
        """The entry whose paged-out body stopped the last ``take`` or ``browse`` (None: nothing did)."""
        self.blocked_rank: int | None = None
        """The level whose delta stopped the last ``take`` or ``browse`` (``load_delta`` it; None: none did)."""
        self.delta_count = 0
        """How many live entries are in the levels' deltas (out of RAM; counted as available and paged)."""
        self.delta_used = False  # once entries left RAM and came back, ``_live`` is no longer in publish order
        self.unstored: list[int] = []
        """Seqs of entries that reached a final state with a body in the store, to delete (``take_unstored``)."""
        self.replaying = False
        """A durable paged queue's recovery replays its calls: a paged body blocks a walk only where it did."""
        self.stop_at = 0
        """While replaying, the seq whose paged body stopped the take or browse being replayed (0: none)."""
        self.stop_before: tuple[int, int] | None = None
        """While replaying, the position (rank, seq) of the delta that stopped the walk being replayed
        (None: none did): the walk stops there whether or not those entries are in a delta now."""
        self.blocked_seq = 0
        """The first seq of the delta that stopped the last walk (with ``blocked_rank``; 0: none did)."""
        # counters
        self.published = 0
        self.delivered = 0
        self.redelivered = 0
        self.acked = 0
        self.returned = 0
        self.dead_lettered = 0
        self.expired = 0

    # --- entries in -------------------------------------------------------------------------

    def publish(self, message: Message, now: float) -> Entry:
        """Append ``message`` at the tail of its priority level and return its entry.

        ``now`` is read only for the message's TTL and delay, so a caller may skip reading
        its clock (and pass anything) for a message that has neither.
        """
        rank = self._rank_of[message.priority]
        seq = self._next_seq
        self._next_seq = seq + 1
        entry = Entry(seq, rank, message, now)
        level = self._levels[rank]
        if not level.seqs:
            self._note_used(rank)
        level.entries.append(entry)
        level.seqs.append(seq)
        self._live[seq] = entry
        self.available += 1
        self.live_bytes += message.size
        self.published += 1
        if entry.expires_at is not None:
            heapq.heappush(self._ttls, (entry.expires_at, seq))
        if entry.available_at > now:
            heapq.heappush(self._delays, (entry.available_at, seq))
        if rank != self._used_ranks[-1]:
            # Only a level below this one can hold a pointer past the new entry (every pointer sits
            # at an entry's position, or one before it, and this seq is the largest yet): a publish
            # to the lowest level in use moves no pointer.
            self._move_pointers_back(entry)
        return entry

    def publish_stored(self, message: Message, now: float, size: int) -> Entry:
        """Publish a message whose body is in the body store: ``message`` has none, ``size`` is the full one.

        How a durable paged queue's journal replays a publish (its events keep no body): the entry
        is the one ``publish`` made, its body paged out.
        """
        entry = self.publish(message, now)
        self.live_bytes += size - entry.size
        entry.size = size
        entry.paged = entry.stored = True
        self.paged += 1
        self.paged_bytes += size
        return entry

    def discard(self, seqs: Iterable[int]) -> list[Entry]:
        """Drop the available entries of ``seqs`` whose bodies are lost; returns them (final, not counted acked).

        A durable paged queue's recovery may hold the entry of a publish whose journal write
        reached the disk but whose body did not: it was never confirmed, so the queue drops it
        when it finds the body missing.
        """
        dropped = []
        for seq in seqs:
            entry = self._live.get(seq)
            if entry is not None and entry.state is _AVAILABLE:
                self._finish(entry, _DEQUEUED)
                dropped.append(entry)
        return dropped

    # --- durability -------------------------------------------------------------------------

    def snapshot(
        self, unsynced: Mapping[int, bytes] | None = None,
        unsynced_chunks: Mapping[int, Iterable[tuple[int, Message, int]]] | None = None,
    ) -> EntryListSnapshot:
        """Everything this list holds, as an immutable value that ``restore`` loads back.

        ``unsynced`` (a durable paged queue's): the entries whose body is stored are kept without it
        (``EntryListSnapshot.stored``), but for those whose store write is not yet synced, whose
        body ``unsynced`` gives. The levels' deltas are kept as their chunks' keys, seqs and sizes
        (``EntryListSnapshot.deltas``: the chunks are in the store), but for the chunks of
        ``unsynced_chunks`` (key -> records: their store write is not yet synced), whose entries are
        kept in full, as available pristine entries (a level's unsynced chunks are its delta's last).
        """
        stored: list[tuple[int, int]] = []

        def message_of(e: Entry) -> Message:
            if unsynced is None or not e.stored:
                return e.message
            body = unsynced.get(e.seq)
            if body is None:
                stored.append((e.seq, e.size))
                return e.message if e.paged else attrs.evolve(e.message, body=b"")
            return attrs.evolve(e.message, body=body) if e.paged else e.message

        entries = tuple(
            (e.seq, e.position[0], e.position[1], message_of(e), e.state, e.consumer, e.last_consumer, e.deadline,
             e.delivery_count, e.lease, e.available_at, e.expires_at)
            for e in self._live.values()
        )
        deltas: list[tuple[int, tuple[DeltaChunk, ...]]] = []
        if self.delta_count:
            pending = unsynced_chunks or {}
            full: list[tuple[Any, ...]] = []
            for rank, level in enumerate(self._levels):
                synced = tuple(chunk for chunk in level.delta if chunk.key not in pending)
                if synced:
                    deltas.append((rank, synced))
                for chunk in level.delta:
                    records = pending.get(chunk.key)
                    if records is None:
                        continue
                    for seq, kept, size in records:
                        body = None if unsynced is None else unsynced.get(seq)
                        if body is None:
                            stored.append((seq, size))
                        full.append((seq, rank, seq, kept if body is None else attrs.evolve(kept, body=body),
                                     _AVAILABLE, None, 0, None, 0, 0, 0.0, None))
            if full:  # in publish order, as ``restore`` keeps its live entries
                entries = tuple(sorted(entries + tuple(full), key=lambda row: row[0]))
        cursors = tuple(
            (cid, c.selector, c.priority, c.acquiring, c.interested, c.pointer, tuple(c.held))
            for cid, c in self._cursors.items()
        )
        return EntryListSnapshot(
            priorities=self.priorities,
            max_deliveries=self.max_deliveries,
            next_seq=self._next_seq,
            used_ranks=tuple(self._used_ranks),
            entries=entries,
            cursors=cursors,
            groups=tuple((group, owner[0], owner[1]) for group, owner in self._groups.items()),
            leases=tuple(self._leases),
            ttls=tuple(self._ttls),
            delays=tuple(self._delays),
            top_priority=self._top_priority,
            counters=tuple(getattr(self, name) for name in _COUNTERS),
            errors=tuple((e.seq, e.last_error) for e in self._live.values() if e.last_error is not None),
            stored=tuple(stored),
            deltas=tuple(deltas),
        )

    def restore(self, snapshot: EntryListSnapshot) -> None:
        """Load ``snapshot`` into this list, which must be new (nothing published, no consumer).

        Raises:
            ValueError: the list is not new, or was made with other priorities or delivery limit.
        """
        if self._next_seq != 1 or self._cursors:
            msg = f"restore() needs a new EntryList; this one has published {self.published} and has consumers"
            raise ValueError(msg)
        if (snapshot.priorities, snapshot.max_deliveries) != (self.priorities, self.max_deliveries):
            msg = (
                f"snapshot of an EntryList with priorities={snapshot.priorities}, max_deliveries="
                f"{snapshot.max_deliveries} cannot load into one with priorities={self.priorities}, "
                f"max_deliveries={self.max_deliveries}"
            )
            raise ValueError(msg)
        for seq, rank, key, message, state, consumer, last, deadline, count, lease, ready_at, expires_at in (
            snapshot.entries
        ):
            entry = Entry(seq, rank, message, 0.0)
            entry.position = (rank, key)
            entry.state = state
            entry.consumer = consumer
            entry.last_consumer = last
            entry.deadline = deadline
            entry.delivery_count = count
            entry.lease = lease
            entry.available_at = ready_at
            entry.expires_at = expires_at
            self._live[seq] = entry
            self._levels[rank].entries.append(entry)
        for seq, error in snapshot.errors:
            self._live[seq].last_error = error
        for seq, size in snapshot.stored:
            entry = self._live[seq]
            entry.size = size
            entry.paged = entry.stored = True
            if entry.state is _AVAILABLE or entry.state is _ACQUIRED:
                self.paged += 1
                self.paged_bytes += size
        for level in self._levels:
            level.entries.sort(key=lambda entry: entry.position[1])
            level.seqs = [entry.position[1] for entry in level.entries]
        delta_bytes = 0
        for rank, chunks in snapshot.deltas:
            self._levels[rank].delta.extend(chunks)
            for chunk in chunks:
                self.delta_count += len(chunk.seqs)
                delta_bytes += sum(chunk.sizes)
        if self.delta_count:
            self.delta_used = True
            self.paged += self.delta_count
            self.paged_bytes += delta_bytes
        for cid, selector, priority, acquiring, interested, pointer, held in snapshot.cursors:
            cursor = _Cursor(selector, priority, acquiring, pointer)
            cursor.interested = interested
            cursor.held = {seq: self._live[seq] for seq in held}
            self._cursors[cid] = cursor
        self._groups = {group: [owner, count] for group, owner, count in snapshot.groups}
        self._leases = list(snapshot.leases)
        self._ttls = list(snapshot.ttls)
        self._delays = list(snapshot.delays)
        self._used_ranks = list(snapshot.used_ranks)
        self._next_seq = snapshot.next_seq
        self._top_priority = snapshot.top_priority
        for name, value in zip(_COUNTERS, snapshot.counters, strict=False):  # an older snapshot: no ``returned``
            setattr(self, name, value)
        self.live_bytes = sum(entry.size for entry in self._live.values()) + delta_bytes

    def live_tags(self) -> tuple[int, ...]:
        """Tags of every entry not yet in a final state, in publish order (the deltas' included)."""
        if not self.delta_used:
            return tuple(self._live)
        tags = list(self._live)
        for level in self._levels:
            for chunk in level.delta:
                tags.extend(chunk.seqs)
        tags.sort()
        return tuple(tags)

    @property
    def next_seq(self) -> int:
        """The seq the next publish gets."""
        return self._next_seq

    def get(self, tag: int) -> Entry | None:
        """The live entry with this tag (seq), if any."""
        return self._live.get(tag)

    # --- consumers ----------------------------------------------------------------------------

    def add_consumer(self, consumer_id: int, selector: Selector, priority: int, acquiring: bool) -> None:
        """Register a consumer; its pointer starts before every entry (browsers: before every seq)."""
        if consumer_id in self._cursors:
            msg = f"consumer {consumer_id} is already registered"
            raise ValueError(msg)
        self._cursors[consumer_id] = _Cursor(selector, priority, acquiring, _BEFORE_ALL)
        self._top_priority = max(cursor.priority for cursor in self._cursors.values())

    def remove_consumer(self, consumer_id: int, now: float) -> Returned:
        """Unregister a consumer; everything it held returns, each entry at its own position."""
        cursor = self._cursors.get(consumer_id)
        if cursor is None:
            return Returned()
        returned = self.give_back(consumer_id, tuple(cursor.held), now, 0.0)
        del self._cursors[consumer_id]
        self._top_priority = max((cursor.priority for cursor in self._cursors.values()), default=0)
        return returned

    def set_interest(self, consumer_id: int, interested: bool) -> None:
        """Record whether the consumer can take work now (credit); used for priority reservation."""
        cursor = self._cursors.get(consumer_id)
        if cursor is not None:
            cursor.interested = interested

    def held_by(self, consumer_id: int) -> int:
        """How many entries the consumer holds."""
        cursor = self._cursors.get(consumer_id)
        return 0 if cursor is None else len(cursor.held)

    # --- taking ---------------------------------------------------------------------------

    def take(
        self, consumer_id: int, now: float, max_messages: int, max_bytes: int, deadline: float
    ) -> tuple[list[Entry], list[Entry], bool]:
        """Acquire up to ``max_messages`` / ``max_bytes`` for an acquiring consumer, in queue order.

        The first entry may exceed ``max_bytes`` alone (else a large message could never go).

        The walk stops in front of an entry it would acquire whose body is paged out
        (``page_out``): ``blocked`` names it, and the caller reads the body and asks again, so
        every entry is acquired with its body in RAM, at the moment it is handed over. While
        ``replaying`` (a durable paged queue's recovery) bodies block nothing but ``stop_at``, the
        seq that blocked the call being replayed.

        Returns:
            (entries acquired, entries found expired on the way, whether a limit stopped the
            walk, i.e. more might be there for this consumer).
        """
        self.blocked = self.blocked_rank = None
        self.blocked_seq = 0
        cursor = self._cursors[consumer_id]
        selector = cursor.selector
        match_all = type(selector) is MatchAll
        taken: list[Entry] = []
        expired: list[Entry] = []
        taken_bytes = 0
        advancing = True
        limited = False
        retrying: set[str] | None = None  # groups with an earlier entry waiting out a nack's backoff
        # Whether any higher-priority consumer could reserve entries: fixed for this walk (taking
        # changes no other consumer), so most walks never ask per entry.
        outranked = cursor.priority < self._top_priority and self._outranked(cursor)
        for entry in self._after(cursor.pointer):
            if entry.state is _AVAILABLE:
                group = entry.message.group
                if entry.expires_at is not None and entry.expires_at <= now:
                    self._finish(entry, _EXPIRED)
                    expired.append(entry)
                elif not match_all and not selector.matches(entry.message.header_map()):
                    pass
                elif (
                    (waiting := entry.available_at > now)
                    or (
                        group is not None
                        and ((retrying is not None and group in retrying) or not self._group_allows(entry, consumer_id))
                    )
                    or (outranked and self._reserved_for_higher(entry, cursor))
                ):
                    # A group's later entries wait behind one waiting out a nack's backoff, or one left
                    # for a higher-priority consumer (it would take the group with it): group order holds.
                    if group is not None and (entry.delivery_count or not waiting):
                        if retrying is None:
                            retrying = set()
                        retrying.add(group)
                    advancing = False
                    continue
                else:
                    if len(taken) >= max_messages or (taken and taken_bytes + entry.size > max_bytes):
                        limited = True
                        break
                    if (entry.paged and not self.replaying) or entry.seq == self.stop_at:
                        self.blocked = entry  # its body is in the store: the queue reads it, then asks again
                        limited = True
                        break
                    self._acquire(entry, consumer_id, cursor, deadline)
                    taken.append(entry)
                    taken_bytes += entry.size
            if advancing:
                cursor.pointer = entry.position
            if len(taken) >= max_messages:
                limited = True
                break
        return taken, expired, limited

    def browse(self, consumer_id: int, max_messages: int, max_bytes: int) -> list[Entry]:
        """The next live entries after a browser's pointer, in publish order, without acquiring.

        ``stop_at``: as in ``take``.
        """
        self.blocked = self.blocked_rank = None
        self.blocked_seq = 0
        cursor = self._cursors[consumer_id]
        selector = cursor.selector
        match_all = type(selector) is MatchAll
        seen: list[Entry] = []
        seen_bytes = 0
        last_seq = cursor.pointer[1]
        for entry in self._live_after_seq(last_seq):
            seq = entry.seq
            if match_all or selector.matches(entry.message.header_map()):
                if len(seen) >= max_messages or (seen and seen_bytes + entry.size > max_bytes):
                    break
                if (entry.paged and not self.replaying) or seq == self.stop_at:  # as in ``take``
                    self.blocked = entry
                    break
                seen.append(entry)
                seen_bytes += entry.size
            last_seq = seq
        cursor.pointer = (0, last_seq)
        return seen

    def could_take_now(self, message: Message) -> bool:
        """Whether some interested acquiring consumer could take ``message`` at once (``immediate``)."""
        if message.delay_s:
            return False
        headers = message.header_map()
        group = message.group
        owner = None if group is None else self._groups.get(group)
        for consumer_id, cursor in self._cursors.items():
            if (
                cursor.acquiring
                and cursor.interested
                and (owner is None or owner[0] == consumer_id)
                and cursor.selector.matches(headers)
            ):
                return True
        return False

    # --- settling ---------------------------------------------------------------------------

    def ack(self, consumer_id: int, tags: Iterable[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Dequeue entries the consumer holds; returns (acked, not held by it).

        ``_unhold`` and ``_finish`` are done inline, their counters and each level's head trim once
        per call: an ack settles many entries (50 a time in the benchmark), and the three calls per
        entry were two fifths of it.
        """
        cursor = self._cursors.get(consumer_id)
        if cursor is None:
            return (), tuple(tags)
        held = cursor.held
        live = self._live
        levels = self._levels
        groups = self._groups
        acked: list[int] = []
        invalid: list[int] = []
        freed = 0
        finished: dict[int, int] = {}  # entries settled per level: each level trims its head once per ack
        for tag in tags:
            entry = held.pop(tag, None)
            if entry is None:
                invalid.append(tag)
                continue
            entry.consumer = None
            entry.deadline = None
            group = entry.message.group
            if group is not None:
                owner = groups[group]
                owner[1] -= 1
                if owner[1] == 0:
                    del groups[group]
            entry.state = _DEQUEUED
            del live[tag]
            freed += entry.size
            if entry.stored:
                self._settle_stored(entry)
            rank = entry.position[0]
            finished[rank] = finished.get(rank, 0) + 1
            acked.append(tag)
        for rank, count in finished.items():
            levels[rank].removed(count)
        settled = len(acked)
        self.acquired -= settled
        self.live_bytes -= freed
        self.acked += settled
        if len(self._leases) > 4 * (self.acquired + 256):
            self._compact_leases()
        return tuple(acked), tuple(invalid)

    def current_tags(self, consumer_id: int, tags: Iterable[int], attempts: tuple[int, ...]) -> tuple[int, ...]:
        """The ``tags`` the consumer holds whose delivery is still the one ``attempts`` names (parallel)."""
        cursor = self._cursors.get(consumer_id)
        if cursor is None:
            return ()
        return tuple(entry.seq for entry in _current(cursor.held, tags, attempts))

    @property
    def consumer_count(self) -> int:
        """How many consumers are registered (browsers included)."""
        return len(self._cursors)

    @property
    def groups_held(self) -> bool:
        """Whether any consumer holds an entry of a message group (so a settlement may free one)."""
        return bool(self._groups)

    def _compact_leases(self) -> None:
        """Drop lease-heap items of settled entries (``ack`` calls this once they dominate).

        Filters the heap itself, whose size bounds the work, rather than walking every live entry:
        every acquired entry's current lease is in it (``_acquire`` and ``extend`` push it).
        """
        live = self._live
        self._leases = [
            item for item in self._leases
            if (entry := live.get(item[1])) is not None and entry.state is _ACQUIRED and entry.lease == item[2]
        ]
        heapq.heapify(self._leases)

    def give_back(
        self,
        consumer_id: int,
        tags: Iterable[int],
        now: float,
        delay_s: float,
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> Returned:
        """Return held entries to AVAILABLE at their positions (after ``delay_s``), or dead-letter them.

        ``attempts``, if not empty, is parallel to ``tags``: a tag is given back only while its
        entry's ``delivery_count`` is that attempt. A nack for an older delivery of a message the
        queue has delivered again since (same tag) changes nothing. ``errors``, if not empty, is
        parallel to ``tags`` too: each entry given back keeps its error as ``last_error``.
        """
        cursor = self._cursors.get(consumer_id)
        if cursor is None:
            return Returned()
        held = cursor.held
        tags = tuple(tags)
        entries = _current(held, tags, attempts) if attempts else [held[tag] for tag in tags if tag in held]
        if errors:
            _note_errors(entries, tags, errors)
        return self._return(entries, now, lambda _: delay_s)

    def give_back_with(
        self,
        consumer_id: int,
        tags: Iterable[int],
        now: float,
        delays: dict[int, float],
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> Returned:
        """Like ``give_back`` with a delay per tag (retry backoff by delivery count)."""
        cursor = self._cursors.get(consumer_id)
        if cursor is None:
            return Returned()
        held = cursor.held
        tags = tuple(tags)
        entries = _current(held, tags, attempts) if attempts else [held[tag] for tag in tags if tag in held]
        if errors:
            _note_errors(entries, tags, errors)
        return self._return(entries, now, lambda entry: delays.get(entry.seq, 0.0))

    def extend(self, consumer_id: int, tags: Iterable[int], deadline: float) -> tuple[int, ...]:
        """Move the lease deadline of held entries; returns the tags extended."""
        cursor = self._cursors.get(consumer_id)
        extended: list[int] = []
        for tag in tags:
            entry = None if cursor is None else cursor.held.get(tag)
            if entry is not None:
                entry.deadline = deadline
                entry.lease += 1
                heapq.heappush(self._leases, (deadline, entry.seq, entry.lease))
                extended.append(tag)
        return tuple(extended)

    # --- time -----------------------------------------------------------------------------------

    def expire_leases(self, now: float) -> Returned:
        """Every lease whose deadline passed: the entry returns (or is dead-lettered)."""
        lapsed: list[Entry] = []
        leases = self._leases
        while leases and leases[0][0] <= now:
            _, seq, lease = heapq.heappop(leases)
            entry = self._live.get(seq)
            if entry is not None and entry.state is _ACQUIRED and entry.lease == lease:
                lapsed.append(entry)
        return self._return(lapsed, now, lambda _: 0.0)

    def expire_ttls(self, now: float) -> list[Entry]:
        """Every AVAILABLE entry past its TTL becomes EXPIRED (acquired ones expire when returned)."""
        expired: list[Entry] = []
        ttls = self._ttls
        while ttls and ttls[0][0] <= now:
            _, seq = heapq.heappop(ttls)
            entry = self._live.get(seq)
            if entry is not None and entry.state is _AVAILABLE:
                self._finish(entry, _EXPIRED)
                expired.append(entry)
        return expired

    def release_delays(self, now: float) -> int:
        """Forget delays that have passed; returns how many entries just became available."""
        count = 0
        delays = self._delays
        while delays and delays[0][0] <= now:
            _, seq = heapq.heappop(delays)
            entry = self._live.get(seq)
            if entry is not None and entry.state is _AVAILABLE and entry.available_at <= now:
                count += 1
        return count

    def next_wakeup(self) -> float | None:
        """The earliest time a lease lapses, a TTL passes or a delay ends, if any.

        Lease items of settled entries are dropped from the heap's head first: a timer armed
        at a lease already acked would wake the queue once per message for nothing.
        """
        leases = self._leases
        live = self._live
        while leases:
            _, seq, lease = leases[0]
            entry = live.get(seq)
            if entry is not None and entry.state is _ACQUIRED and entry.lease == lease:
                break
            heapq.heappop(leases)
        wakeup = leases[0][0] if leases else None
        for heap in (self._ttls, self._delays):
            if heap and (wakeup is None or heap[0][0] < wakeup):
                wakeup = heap[0][0]
        return wakeup

    # --- overflow ---------------------------------------------------------------------------

    def evict_least_significant(self) -> Entry | None:
        """Dead-letter the oldest AVAILABLE entry of the lowest level that has one (a full ring's victim).

        Qpid's ring policy on a priority queue (``PriorityQueueList.getLeastSignificantOldestEntry``):
        the least important message goes, not the next one to be delivered; the caller publishes
        first, so the victim may be the message just published. Without priorities (one level in
        use) it is the oldest available entry, the head. Returns None if no entry is AVAILABLE.
        """
        levels = self._levels
        for rank in reversed(self._used_ranks):  # the highest rank is the lowest level
            level = levels[rank]
            entries = level.entries
            for index in range(level.head, len(entries)):
                entry = entries[index]
                if entry.state is _AVAILABLE:
                    self._finish(entry, _DEAD_LETTERED)
                    self.dead_lettered += 1
                    return entry
        return None

    # --- paging ---------------------------------------------------------------------------

    def page_out(self, entry: Entry) -> bytes | None:
        """Drop a live entry's body from RAM; returns the body to write if the store has no copy yet.

        ``entry.message`` keeps its headers and options (selectors, groups and priorities read
        them) with an empty body; ``entry.size`` keeps the full size. ``page_in`` brings it back.
        """
        if entry.paged:
            msg = f"entry {entry.seq} is paged out already"
            raise ValueError(msg)
        message = entry.message
        entry.message = attrs.evolve(message, body=b"")
        entry.paged = True
        self.paged += 1
        self.paged_bytes += entry.size
        if entry.stored:
            return None
        entry.stored = True
        return message.body

    def page_in(self, entry: Entry, body: bytes) -> None:
        """Give a paged-out entry its body back (read from the store, which keeps its copy)."""
        if not entry.paged:
            msg = f"entry {entry.seq} is not paged out"
            raise ValueError(msg)
        entry.message = attrs.evolve(entry.message, body=body)
        entry.paged = False
        if entry.state is _AVAILABLE or entry.state is _ACQUIRED:
            self.paged -= 1
            self.paged_bytes -= entry.size

    def take_unstored(self) -> list[int]:
        """Seqs whose entries reached a final state with a body in the store since the last call."""
        unstored = self.unstored
        self.unstored = []
        return unstored

    def _settle_stored(self, entry: Entry) -> None:
        """A final entry's stored body is no longer needed once read (dead letters read it first)."""
        self.unstored.append(entry.seq)
        if entry.paged:
            self.paged -= 1
            self.paged_bytes -= entry.size

    def delta_candidates(self, rank: int, count: int) -> list[Entry] | None:
        """``count`` entries of level ``rank`` that may join its delta, or None if there are none.

        They must be the level's last ``count`` entries in RAM (no delta yet) or the ``count`` right
        after its delta, so the delta stays one run; each available, never delivered, without TTL,
        delay or error, its body paged out; and no consumer's pointer may lie among them (a pointer
        before them meets the delta and waits for it; one after them has passed them for good).
        """
        level = self._levels[rank]
        if level.delta:
            start = level.after(level.delta[-1].seqs[-1])
            run = level.entries[start:start + count]
        else:
            run = level.entries[max(level.head, len(level.entries) - count):]
        if len(run) < count:
            return None
        for entry in run:
            if (entry.state is not _AVAILABLE or not entry.paged or entry.delivery_count or entry.expires_at is not None
                    or entry.available_at or entry.last_error is not None):
                return None
        first, last = run[0].seq, run[-1].seq
        for cursor in self._cursors.values():
            pointer_rank, pointer_seq = cursor.pointer
            if cursor.acquiring:
                if pointer_rank == rank and first <= pointer_seq < last:
                    return None
            elif first <= pointer_seq < last:
                return None
        return run

    def push_delta(self, rank: int, run: list[Entry], key: int) -> tuple[tuple[int, Message, int], ...]:
        """Move ``run`` (from ``delta_candidates``) out of RAM into level ``rank``'s delta as chunk ``key``.

        Returns what the store must keep for the chunk: (seq, body-less message, size) per entry.
        """
        level = self._levels[rank]
        start = bisect.bisect_left(level.seqs, run[0].seq, level.head)
        end = start + len(run)
        if level.entries[start:end] != run:
            msg = f"entries {run[0].seq}..{run[-1].seq} are not a run of level {rank}"
            raise ValueError(msg)
        del level.entries[start:end]
        del level.seqs[start:end]
        live = self._live
        for entry in run:
            del live[entry.seq]
        chunk = DeltaChunk(key, array("q", [e.seq for e in run]), array("q", [e.size for e in run]))
        if level.delta and run[0].seq < level.delta[0].seqs[0]:
            level.delta.appendleft(chunk)
        else:
            level.delta.append(chunk)
        self.delta_count += len(run)
        self.delta_used = True
        return tuple((entry.seq, entry.message, entry.size) for entry in run)

    def push_delta_run(self, rank: int, key: int, first: int, count: int) -> None:
        """Replay a durable queue's push: the ``count`` entries of level ``rank`` from seq ``first`` on go
        to its delta as chunk ``key`` (whose records the body store kept: nothing is returned)."""
        level = self._levels[rank]
        start = bisect.bisect_left(level.seqs, first, level.head)
        run = level.entries[start:start + count]
        if len(run) != count or run[0].seq != first:
            msg = f"level {rank} has no run of {count} entries from seq {first} to push to its delta"
            raise ValueError(msg)
        for entry in run:
            if not entry.paged:  # a snapshot kept its body (unsynced then): the push says it is synced now
                self.page_out(entry)
        self.push_delta(rank, run, key)

    def last_delta_chunk(self, rank: int) -> DeltaChunk:
        """The chunk pushed last to level ``rank``'s delta (``push_delta`` adds each after the others)."""
        return self._levels[rank].delta[-1]

    def delta_chunks(self, rank: int) -> tuple[DeltaChunk, ...]:
        """The chunks of level ``rank``'s delta, first to last."""
        return tuple(self._levels[rank].delta)

    def in_ram(self) -> Iterator[Entry]:
        """The live entries in RAM (not in a delta), in no particular order."""
        return iter(self._live.values())

    def paged_run(self, entry: Entry, limit: int) -> list[Entry]:
        """``entry`` and the live entries after it on its level whose bodies are paged out, up to ``limit``.

        What a pull stopped by ``entry`` would most likely hand over once their bodies are read: the
        queue reads them in one job. Stops at the level's delta.
        """
        level = self._levels[entry.position[0]]
        gap = level.gap_after(entry.seq) if level.delta else None
        run = [entry]
        entries = level.entries
        for index in range(level.after(entry.seq), len(entries)):
            if len(run) >= limit:
                break
            following = entries[index]
            if gap is not None and following.seq > gap:
                break
            if following.paged and (following.state is _AVAILABLE or following.state is _ACQUIRED):
                run.append(following)
        return run

    def first_delta_chunk(self, rank: int) -> DeltaChunk | None:
        """The chunk of level ``rank``'s delta to load next (the first), if any."""
        delta = self._levels[rank].delta
        return delta[0] if delta else None

    def load_delta(self, rank: int, records: Iterable[tuple[int, Message, int]]) -> list[Entry]:
        """Put level ``rank``'s first delta chunk back in RAM, from what the store kept; returns its entries.

        They come back as they left: available, never delivered, bodies paged out.
        """
        level = self._levels[rank]
        chunk = level.delta.popleft()
        loaded: list[Entry] = []
        for seq, message, size in records:
            entry = Entry(seq, rank, message, 0.0)
            entry.size = size
            entry.paged = entry.stored = True
            loaded.append(entry)
        if [entry.seq for entry in loaded] != list(chunk.seqs):
            msg = f"a delta chunk of level {rank} came back with other entries than it held"
            raise ValueError(msg)
        start = bisect.bisect_left(level.seqs, loaded[0].seq, level.head)
        level.entries[start:start] = loaded
        level.seqs[start:start] = [entry.seq for entry in loaded]
        live = self._live
        for entry in loaded:
            live[entry.seq] = entry
        self.delta_count -= len(loaded)
        return loaded

    def delta_ranks(self) -> list[int]:
        """The levels that have a delta, highest priority first."""
        return [rank for rank in self._used_ranks if self._levels[rank].delta]

    def ranks_in_use(self) -> tuple[int, ...]:
        """The levels that ever held an entry, highest priority (rank 0) first."""
        return tuple(self._used_ranks)

    def live_in_order(self) -> Iterator[Entry]:
        """Every live entry in queue order (the order a consumer with no selector is given them)."""
        return self._after(_BEFORE_ALL)

    # --- internals --------------------------------------------------------------------------

    def _note_used(self, rank: int) -> None:
        """Remember that level ``rank`` holds entries, so walks visit it (and no level that never did)."""
        if rank not in self._used_ranks:
            bisect.insort(self._used_ranks, rank)

    def _after(self, pointer: tuple[int, int]) -> Iterator[Entry]:
        """Live entries strictly after ``pointer``, in queue order."""
        rank, seq = pointer
        levels = self._levels
        for level_rank in self._used_ranks:
            if level_rank < rank:
                continue
            level = levels[level_rank]
            entries = level.entries
            trims = level.trims
            gap = level.gap_after(seq if level_rank == rank else -1) if level.delta else None
            stop = self.stop_before
            if stop is not None and stop[0] == level_rank:  # replaying: stop where a delta stopped the walk
                gap = stop[1] - 1 if gap is None else min(gap, stop[1] - 1)
            if level.head >= len(entries) and gap is None:
                continue  # nothing live on this level now
            start = level.after(seq) if level_rank == rank else level.head
            index = start
            while index < len(entries):
                entry = entries[index]
                if gap is not None and entry.seq > gap:
                    break  # the level's delta comes first
                index += 1
                state = entry.state
                if state is _AVAILABLE or state is _ACQUIRED:
                    yield entry
                if level.trims != trims:  # trimmed or compacted while iterating: resume by seq
                    entries = level.entries
                    trims = level.trims
                    index = level.after(entry.seq)
            if gap is not None:
                self.blocked_rank = level_rank  # its delta must be loaded before the walk goes on
                self.blocked_seq = gap
                return

    def _live_after_seq(self, seq: int) -> Iterator[Entry]:
        """Live entries with a larger seq, in publish order across levels (lazily merged)."""

        def level_entries(level: _Level) -> Iterator[Entry]:
            entries = level.entries
            for index in range(level.after(seq), len(entries)):
                entry = entries[index]
                if entry.state is _AVAILABLE or entry.state is _ACQUIRED:
                    yield entry

        merged = heapq.merge(*(level_entries(level) for level in self._levels), key=lambda entry: entry.seq)
        gaps = [(gap, rank) for rank, level in enumerate(self._levels)
                if level.delta and (gap := level.gap_after(seq)) is not None]
        if self.stop_before is not None:  # replaying: stop where a delta stopped the browse
            gaps.append((self.stop_before[1] - 1, self.stop_before[0]))
        if not gaps:
            return merged
        return self._before_gap(merged, min(gaps))

    def _before_gap(self, merged: Iterator[Entry], gap: tuple[int, int]) -> Iterator[Entry]:
        """Entries of ``merged`` before the first seq of a level's delta; then the walk is blocked on it."""
        first, rank = gap
        for entry in merged:
            if entry.seq > first:
                break
            yield entry
        self.blocked_rank = rank
        self.blocked_seq = first

    def _group_allows(self, entry: Entry, consumer_id: int) -> bool:
        group = entry.message.group
        if group is None:
            return True
        owner = self._groups.get(group)
        return owner is None or owner[0] == consumer_id

    def _outranked(self, cursor: _Cursor) -> bool:
        """Whether some higher-priority acquiring consumer wants work (so may reserve entries)."""
        priority = cursor.priority
        if priority >= self._top_priority:
            return False  # the common case of equal consumers: no walk over them per pull
        for other in self._cursors.values():
            if other.priority > priority and other.acquiring and other.interested:
                return True
        return False

    def _reserved_for_higher(self, entry: Entry, cursor: _Cursor) -> bool:
        """A higher-priority consumer that wants work and matches would take this entry."""
        headers: dict[str, HeaderValue] | None = None
        for consumer_id, other in self._cursors.items():
            if other.priority <= cursor.priority or not other.acquiring or not other.interested:
                continue
            if type(other.selector) is not MatchAll:
                if headers is None:
                    headers = entry.message.header_map()
                if not other.selector.matches(headers):
                    continue
            if self._group_allows(entry, consumer_id):
                return True
        return False

    def _acquire(self, entry: Entry, consumer_id: int, cursor: _Cursor, deadline: float) -> None:
        entry.state = _ACQUIRED
        entry.consumer = consumer_id
        entry.last_consumer = consumer_id
        entry.deadline = deadline
        entry.delivery_count += 1
        entry.lease += 1
        heapq.heappush(self._leases, (deadline, entry.seq, entry.lease))
        cursor.held[entry.seq] = entry
        self.available -= 1
        self.acquired += 1
        self.delivered += 1
        if entry.delivery_count > 1:
            self.redelivered += 1
        group = entry.message.group
        if group is not None:
            owner = self._groups.get(group)
            if owner is None:
                self._groups[group] = [consumer_id, 1]
            else:
                owner[1] += 1

    def _unhold(self, entry: Entry, cursor: _Cursor) -> None:
        del cursor.held[entry.seq]
        entry.consumer = None
        entry.deadline = None
        self.acquired -= 1
        self.available += 1  # _finish or the caller settles the final count
        group = entry.message.group
        if group is not None:
            owner = self._groups[group]
            owner[1] -= 1
            if owner[1] == 0:
                del self._groups[group]

    def _return(self, entries: list[Entry], now: float, delay_of: Callable[[Entry], float]) -> Returned:
        available: list[Entry] = []
        dead: list[Entry] = []
        expired: list[Entry] = []
        self.returned += len(entries)
        for entry in entries:
            cursor = self._cursors.get(entry.consumer) if entry.consumer is not None else None
            if cursor is not None:
                self._unhold(entry, cursor)
            entry.state = _AVAILABLE
            if entry.expires_at is not None and entry.expires_at <= now:
                self._finish(entry, _EXPIRED)
                expired.append(entry)
            elif self.max_deliveries is not None and entry.delivery_count >= self.max_deliveries:
                self._finish(entry, _DEAD_LETTERED)
                self.dead_lettered += 1
                dead.append(entry)
            else:
                delay = delay_of(entry)
                if delay > 0:
                    entry.available_at = now + delay
                    heapq.heappush(self._delays, (entry.available_at, entry.seq))
                else:
                    entry.available_at = 0.0
                self._move_pointers_back(entry)
                available.append(entry)
        return Returned(tuple(available), tuple(dead), tuple(expired))

    def _finish(self, entry: Entry, state: EntryState) -> None:
        """Move an AVAILABLE entry to a final state and out of the live set."""
        entry.state = state
        self.available -= 1
        if state is _EXPIRED:
            self.expired += 1
        del self._live[entry.seq]
        self.live_bytes -= entry.size
        if entry.stored:
            self._settle_stored(entry)
        self._levels[entry.position[0]].removed()

    def _move_pointers_back(self, entry: Entry) -> None:
        position = entry.position
        for cursor in self._cursors.values():
            if cursor.acquiring and cursor.pointer >= position:
                cursor.pointer = (position[0], position[1] - 1)
