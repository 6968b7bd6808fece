"""The simulator's journal store: a real disk store over the ``SimDisk``, its syncs in virtual time.

The simulation's durable actors journal through a store the caller builds over the simulation's
``SimDisk`` (``conveyor.actors.storage.DiskJournalStore(..., fs=disk, threaded=False)``: the real
segment log, its recovery included). No thread writes it: when a handler queues a write or a sync
request, ``SimJournal`` has the simulation call ``write_queued`` a drawn instant later (one group
commit), and the ``JournalSynced`` answers arrive as messages in virtual time. At a process crash
the store's queue dies with the process and a new store is opened on what the disk kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, final

from conveyor.runtime import ActorRef
from conveyor.runtime.lowlevel import Backend, WriteKind

from ._disk import SimDisk


class SteppedJournalStore(Protocol):
    """A ``JournalStore`` without a writer of its own: its driver calls ``write_queued``."""

    failure: BaseException | None

    @property
    def queued(self) -> bool:
        """Whether writes or sync requests wait."""

    def start(self, system: Backend) -> None:
        """Begin work for ``system``."""

    def recovered(self, path: str) -> tuple[bool, bool]:
        """Whether the store recovered a snapshot for ``path``, and events after it."""

    def read_snapshot(self, path: str) -> object:
        """The latest snapshot written for ``path``, queued writes included."""

    def read_events(self, path: str) -> Iterator[object]:
        """The events written for ``path`` after its snapshot, queued writes included."""

    def write(self, path: str, kind: WriteKind, value: object) -> int:
        """Queue one write; its number."""

    def notify_when_synced(self, ref: ActorRef, path: str, through: int) -> None:
        """Queue a request for ``JournalSynced``."""

    def write_queued(self) -> None:
        """Write what is queued, sync once, answer (a failure is kept in ``failure``)."""

    def body_location(self, path: str) -> tuple[str, Any]:
        """A directory for the actor at ``path`` to keep data beside its journal, and the file operations."""

    def close(self) -> None:
        """Write what is queued and release the files."""


OpenStore = Callable[[SimDisk, int], SteppedJournalStore]
"""Opens the store on the disk, numbering writes from the given number (recovery runs here)."""


@final
class SimJournal:
    """The ``JournalStore`` a Simulation hands its journals: the current store, flushed at virtual times.

    Args:
        disk: the simulation's disk.
        open_store: opens a store on it (again after every process crash).
        schedule: asks the simulation to call a function after its drawn disk latency.
    """

    def __init__(self, disk: SimDisk, open_store: OpenStore, schedule: Callable[[Callable[[], None]], None]) -> None:
        self.disk = disk
        self._open_store = open_store
        self._schedule = schedule
        self._system: Backend | None = None
        self._last_write = 0
        self._flush_due = False
        self._generation = 0
        self.store = open_store(disk, 1)
        self.flushes = 0
        """Group commits made (each one fsync per file written)."""

    def start(self, system: Backend) -> None:
        """Start the store for ``system``."""
        self._system = system
        self.store.start(system)

    def recovered(self, path: str) -> tuple[bool, bool]:
        """What the current store recovered for ``path``: a snapshot, events."""
        return self.store.recovered(path)

    def read_snapshot(self, path: str) -> object:
        """The current store's latest snapshot of ``path`` (read from the disk, or still queued)."""
        return self.store.read_snapshot(path)

    def read_events(self, path: str) -> Iterator[object]:
        """The current store's events of ``path`` after its snapshot (read from the disk, or still queued)."""
        return self.store.read_events(path)

    def write(self, path: str, kind: WriteKind, value: object) -> int:
        """Queue a write in the store; a flush follows after the disk's latency."""
        number = self.store.write(path, kind, value)
        self._last_write = max(self._last_write, number)
        self._flush_later()
        return number

    def notify_when_synced(self, ref: ActorRef, path: str, through: int) -> None:
        """Queue the request; the flush that syncs ``through`` answers it."""
        self.store.notify_when_synced(ref, path, through)
        self._flush_later()

    def body_location(self, path: str) -> tuple[str, object]:
        """Where the actor at ``path`` keeps data beside its journal: the current store's, on the simulated disk."""
        return self.store.body_location(path)

    def close(self) -> None:
        """Write what is queued (a clean stop)."""
        self.store.close()

    def _flush_later(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            generation = self._generation
            self._schedule(lambda: self._flush(generation))

    def _flush(self, generation: int) -> None:
        if generation != self._generation:
            return  # queued by a store that died with its process
        self._flush_due = False
        if self.store.failure is None and self.store.queued:
            self.store.write_queued()
            self.flushes += 1

    @property
    def failure(self) -> BaseException | None:
        """What failed the current store's last flush (the process must crash and reopen it)."""
        return self.store.failure

    def reopen(self) -> None:
        """After a crash: forget the dead store (its queue died with it) and recover a new one from the disk."""
        self._generation += 1
        self._flush_due = False
        self.store = self._open_store(self.disk, self._last_write + 1)
        if self._system is not None:
            self.store.start(self._system)
