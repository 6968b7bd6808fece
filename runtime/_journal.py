"""Journal: an actor's durable state, kept by the system and outliving the actor's instances.

A restart builds a fresh actor instance, so whatever lived in its attributes is gone. An
actor whose state must survive (a durable queue) writes what it did to its journal and,
in ``on_start`` (which ``on_restart`` calls), rebuilds itself from it: the latest snapshot,
then every event recorded after it, as event-sourced actors do (Akka Persistence's
``persist`` / ``receiveRecover`` / ``saveSnapshot``). Because an actor's core is sans-IO and
deterministic, replaying its recorded calls gives exactly the state it had.

A journal is keyed by the actor's path, so it survives supervision restarts, the
simulator's ``Crash`` faults and a stopped actor respawned at the same path. It lives in
the system's memory; given a ``JournalStore`` (``data_dir=`` on a system, see
``conveyor.actors.storage.DiskJournalStore``) it instead hands every write to the store, which
keeps it on disk off the actor and says so with a ``JournalSynced`` message when asked, so
the journal survives the process too. Such a journal keeps no event and no snapshot in RAM,
only counts: reading it (replay, ``snapshot``) reads them back from the store. Only the actor
at its path touches it, one handler at a time, so it needs no lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, final

import attrs

if TYPE_CHECKING:
    from ._backend import Backend
    from ._ref import ActorRef

WriteKind: TypeAlias = Literal["events", "snapshot", "clear"]
"""What a journal write records: events appended, a snapshot replacing all before it, or nothing left."""


@final
@attrs.frozen
class JournalSynced:
    """Every write of the journal at ``path`` numbered up to ``through`` is on disk (``Journal.when_synced``)."""

    path: str
    through: int


class JournalStore(Protocol):
    """Where journals persist beyond the process: a disk store, given to a system as ``journal_store=``.

    ``write`` is called inside handlers, so it only queues: the store writes and syncs off the
    actor and answers ``notify_when_synced`` with a ``JournalSynced`` message. It is used from the
    actors' threads, each journal by one actor at a time.
    """

    def start(self, system: Backend) -> None:
        """Begin work for ``system``: answers go through its ``tell_from_thread``, and refs to actors
        of an earlier process that recovered journals name come back as its ``gone_ref``."""

    def recovered(self, path: str) -> tuple[bool, bool]:
        """Whether the store held a snapshot for ``path`` when it opened, and whether it held events after it."""

    def read_snapshot(self, path: str) -> object:
        """The latest snapshot written for ``path`` (None if none since it was created or cleared).

        Every write made so far counts, whether or not the store has written it yet.
        """

    def read_events(self, path: str) -> Iterator[object]:
        """The events written for ``path`` after its latest snapshot, oldest first, every write so far included."""

    def write(self, path: str, kind: WriteKind, value: object) -> int:
        """Queue one write (``events``: a tuple of events; ``snapshot``: the state; ``clear``: None).

        Returns the write's number, increasing per journal. Raises if ``value`` cannot be stored,
        before anything is queued.
        """

    def notify_when_synced(self, ref: ActorRef, path: str, through: int) -> None:
        """Send ``JournalSynced(path, n)`` with ``n >= through`` to ``ref`` once write ``through`` is on disk."""

    def close(self) -> None:
        """Write and sync what is queued, then release the files (a clean stop)."""


@final
class Journal:
    """The events and the latest snapshot one actor recorded, in order.

    Without a store, values are kept by reference, not copied: record frozen values, or a private
    copy that nobody mutates afterwards. With one, they are kept only by the store (pickled when
    written): iterating the journal and ``snapshot`` read copies back from it, so read it in
    ``on_start`` (replay), not on every message; ``len`` and ``bool`` are counts, read nothing.

    Args:
        path: the owning actor's path.
        before_write: called before every write (``append``, ``save_snapshot``); what it raises
            fails the write, which then changes nothing. The simulator's ``FailWrite`` fault (a
            disk error) goes through here.
        store: where the writes also go to outlive the process; its recovered state is loaded.
    """

    __slots__ = ("_before_write", "_count", "_events", "_group_depth", "_has_snapshot", "_pending", "_snapshot",
                 "_snapshots", "_store", "attached", "last_write", "path", "writes")

    def __init__(
        self, path: str, before_write: Callable[[], None] | None = None, store: JournalStore | None = None,
    ) -> None:
        self.path = path
        self._before_write = before_write
        self._store = store
        self._events: list[object] = []
        self._snapshot: object = None
        self._snapshots = 0
        self.writes = 0
        """Writes that succeeded over the journal's life (an actor compares it to know if it wrote)."""
        self.last_write = 0
        """The store's number of the latest write (0 without a store): ``when_synced`` waits for it."""
        self._pending: list[object] = []  # events appended inside ``atomic``, not yet written
        self._group_depth = 0
        self.attached: dict[str, object] = {}
        """What the actor keeps beside its journal for its next instances in this process, never written to
        the store (a durable paged queue's body store: a restart must reuse it, not open a second one)."""
        # With a store: whether it holds a snapshot, and how many events after it (None: some, not yet
        # counted: recovered from disk, counted by the first read).
        self._has_snapshot = False
        self._count: int | None = 0
        if store is not None:
            has_snapshot, has_events = store.recovered(path)
            self._has_snapshot = has_snapshot
            self._count = None if has_events else 0

    @property
    def on_disk(self) -> bool:
        """True when writes also go to a disk store: an answer that promises durability waits for ``when_synced``."""
        return self._store is not None

    @property
    def store(self) -> JournalStore | None:
        """The disk store the writes also go to (None: memory only)."""
        return self._store

    def when_synced(self, ref: ActorRef) -> None:
        """Have ``JournalSynced(path, n)`` sent to ``ref`` once every write so far is on disk (needs ``on_disk``)."""
        if self._store is None:
            msg = f"journal of {self.path} has no disk store: nothing will ever say it is synced"
            raise RuntimeError(msg)
        self._store.notify_when_synced(ref, self.path, self.last_write)

    def _stored(self, kind: WriteKind, value: object) -> None:
        if self._store is not None:
            self.last_write = self._store.write(self.path, kind, value)

    def append(self, event: object) -> None:
        """Record one event after the latest snapshot (inside ``atomic``: when the group is written)."""
        if self._group_depth:
            self._pending.append(event)
            return
        if self._before_write is not None:
            self._before_write()
        if self._store is not None:
            self._stored("events", (event,))
            if self._count is not None:
                self._count += 1
        else:
            self._events.append(event)
        self.writes += 1

    @property
    def in_atomic(self) -> bool:
        """True inside ``atomic``: appends are held until the group is written as one."""
        return self._group_depth > 0

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Make every ``append`` inside the block one write: all of them are recorded, or none.

        For a handler whose work takes several events (a batch of publishes): a failed write
        (``before_write`` raising) or an exception inside the block records nothing, so a
        restart rolls the actor back to before the whole block, never into the middle of it.
        A nested block joins the outermost one. ``save_snapshot`` is refused inside a block.
        """
        self._group_depth += 1
        try:
            yield
        except BaseException:
            self._group_depth -= 1
            if not self._group_depth:
                self._pending.clear()
            raise
        self._group_depth -= 1
        if self._group_depth or not self._pending:
            return
        pending, self._pending = self._pending, []
        if self._before_write is not None:
            self._before_write()  # what it raises fails the whole group: nothing was recorded
        if self._store is not None:
            self._stored("events", tuple(pending))
            if self._count is not None:
                self._count += len(pending)
        else:
            self._events.extend(pending)
        self.writes += 1

    def save_snapshot(self, state: object) -> None:
        """Replace everything recorded so far by ``state`` (compaction): events start again empty."""
        if state is None:
            msg = f"journal of {self.path}: a snapshot cannot be None (None means 'no snapshot'); use clear()"
            raise ValueError(msg)
        if self._group_depth:
            msg = (f"journal of {self.path}: save_snapshot inside atomic() would record the group's "
                   "effects twice; save it after the block")
            raise RuntimeError(msg)
        if self._before_write is not None:
            self._before_write()
        if self._store is not None:
            self._stored("snapshot", state)
            self._has_snapshot = True
        else:
            self._snapshot = state
        self._snapshots += 1
        self._events.clear()
        self._count = 0
        self.writes += 1

    def clear(self) -> None:
        """Forget the snapshot and every event: the actor starts from nothing next time."""
        if self._store is not None and self:
            self._stored("clear", None)
        self._snapshot = None
        self._has_snapshot = False
        self._events.clear()
        self._count = 0

    @property
    def snapshot(self) -> object:
        """The latest snapshot, or None if none was saved since the journal was created or cleared.

        With a store, a copy read back from it each time.
        """
        if self._store is None or not self._has_snapshot:
            return self._snapshot
        return self._store.read_snapshot(self.path)

    @property
    def snapshots_saved(self) -> int:
        """How many snapshots were saved over the journal's life (compactions)."""
        return self._snapshots

    def __iter__(self) -> Iterator[object]:
        """The events recorded after the latest snapshot, oldest first (with a store, read back from it)."""
        if self._store is None or self._count == 0:
            return iter(self._events)
        return self._read_events(self._store)

    def _read_events(self, store: JournalStore) -> Iterator[object]:
        count = 0
        for event in store.read_events(self.path):
            count += 1
            yield event
        self._count = count  # a read to the end counts what was recovered

    def __len__(self) -> int:
        """How many events were recorded after the latest snapshot (a journal recovered from disk counts
        them once, when first read)."""
        if self._store is None:
            return len(self._events)
        if self._count is None:
            for _ in self._read_events(self._store):
                pass
        assert self._count is not None
        return self._count

    def __bool__(self) -> bool:
        """True when there is anything to recover: a snapshot or an event."""
        if self._store is None:
            return self._snapshot is not None or bool(self._events)
        return self._has_snapshot or self._count != 0

    def __repr__(self) -> str:
        has = "a snapshot and " if self._snapshot is not None or self._has_snapshot else ""
        count = len(self._events) if self._store is None else self._count
        return f"<Journal {self.path}: {has}{'some' if count is None else count} events>"
