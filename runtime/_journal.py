"""Journal: an actor's durable state, kept by the system and outliving the actor's instances.

A restart builds a fresh actor instance, so whatever lived in its attributes is gone. An
actor whose state must survive (a durable queue) writes what it did to its journal and,
in ``on_start`` (which ``on_restart`` calls), rebuilds itself from it: the latest snapshot,
then every event recorded after it, as event-sourced actors do (Akka Persistence's
``persist`` / ``receiveRecover`` / ``saveSnapshot``). Because an actor's core is sans-IO and
deterministic, replaying its recorded calls gives exactly the state it had.

A journal is keyed by the actor's path, so it survives supervision restarts, the
simulator's ``Crash`` faults and a stopped actor respawned at the same path. It lives in
the system's memory: it does not survive the process (a disk-backed store is the storage
layer's business). Only the actor at its path touches it, one handler at a time, so it
needs no lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import final


@final
class Journal:
    """The events and the latest snapshot one actor recorded, in order.

    Values are kept by reference, not copied: record frozen values, or a private copy that
    nobody mutates afterwards.

    Args:
        path: the owning actor's path.
        before_write: called before every write (``append``, ``save_snapshot``); what it raises
            fails the write, which then changes nothing. The simulator's ``FailWrite`` fault (a
            disk error) goes through here.
    """

    __slots__ = ("_before_write", "_events", "_group_depth", "_pending", "_snapshot", "_snapshots", "path", "writes")

    def __init__(self, path: str, before_write: Callable[[], None] | None = None) -> None:
        self.path = path
        self._before_write = before_write
        self._events: list[object] = []
        self._snapshot: object = None
        self._snapshots = 0
        self.writes = 0
        """Writes that succeeded over the journal's life (an actor compares it to know if it wrote)."""
        self._pending: list[object] = []  # events appended inside ``atomic``, not yet written
        self._group_depth = 0

    def append(self, event: object) -> None:
        """Record one event after the latest snapshot (inside ``atomic``: when the group is written)."""
        if self._group_depth:
            self._pending.append(event)
            return
        if self._before_write is not None:
            self._before_write()
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
        self._snapshot = state
        self._snapshots += 1
        self._events.clear()
        self.writes += 1

    def clear(self) -> None:
        """Forget the snapshot and every event: the actor starts from nothing next time."""
        self._snapshot = None
        self._events.clear()

    @property
    def snapshot(self) -> object:
        """The latest snapshot, or None if none was saved since the journal was created or cleared."""
        return self._snapshot

    @property
    def snapshots_saved(self) -> int:
        """How many snapshots were saved over the journal's life (compactions)."""
        return self._snapshots

    def __iter__(self) -> Iterator[object]:
        """The events recorded after the latest snapshot, oldest first."""
        return iter(self._events)

    def __len__(self) -> int:
        """How many events were recorded after the latest snapshot."""
        return len(self._events)

    def __bool__(self) -> bool:
        """True when there is anything to recover: a snapshot or an event."""
        return self._snapshot is not None or bool(self._events)

    def __repr__(self) -> str:
        has = "a snapshot and " if self._snapshot is not None else ""
        return f"<Journal {self.path}: {has}{len(self._events)} events>"
