"""Planted bugs in durable storage (issue 18, item 7), run on the simulated disk.

For ``durable-crash``, a ``Simulation`` built with a broken journal store (``Variant(simulation=...)``):
the real ``DiskJournalStore`` and ``SegmentLog`` over a ``SimDisk``, one promise broken around them:

* ``EagerConfirms``: the store says a write is synced as soon as it is queued (confirm before sync);
* ``HidesLastSegment``: recovery never sees the newest segment file (recovery skips the last segment).

And a broken queue (``Variant(queue=...)``): ``EagerAckConfirms`` answers a confirmed ack before it is synced.

For ``paging``, a broken shell (``Variant(shell=...)``):

* ``KeepsQ1``: the variable queue never moves q1 to q4 when nothing is left on disk;
* ``DropsCopiedRecord``: garbage collection leaves the last live record out of the segment it writes
  (the message store loses a live body).
"""

from __future__ import annotations

from typing import Any, cast

from conveyor.actors.broker import AckResult, QueueActor
from conveyor.actors.storage import FileSystem, VariableQueue, scan
from conveyor.runtime import ActorRef, JournalSynced
from conveyor.runtime.lowlevel import Backend
from conveyor.simulation import SimDisk, Simulation, SteppedJournalStore
from conveyor.simulation.scenarios import PagingScenario, PagingShell, disk_store_opener


class EagerConfirms:
    """Broken: ``JournalSynced`` is sent when it is asked for, before the writes are on disk."""

    def __init__(self, store: SteppedJournalStore) -> None:
        self.store = store
        self.system: Backend | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)  # everything else is the store's own

    def start(self, system: Backend) -> None:
        self.system = system
        self.store.start(system)

    def notify_when_synced(self, ref: ActorRef, path: str, through: int) -> None:
        assert self.system is not None
        self.system.tell_from_thread(ref, JournalSynced(path, through))


class _Passthrough:
    """A ``FileSystem`` that hands every call to the disk underneath (the broken ones change one)."""

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk

    def __getattr__(self, name: str) -> Any:
        return getattr(self.disk, name)


class HidesLastSegment(_Passthrough):
    """Broken: listing the journal directory leaves out the newest segment, so recovery skips it."""

    def listdir(self, directory: str) -> list[str]:
        names = self.disk.listdir(directory)
        segments = sorted(name for name in names if name.endswith(".seg"))
        return [name for name in names if not segments or name != segments[-1]]


class DropsCopiedRecord(_Passthrough):
    """Broken: a compaction's output loses its last record (a live one GC meant to copy)."""

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        if self.disk.path_of(fd).endswith(".seg.tmp"):
            spans = scan(bytes(data)).spans
            if len(spans) > 1:  # the header, then the copies: leave the last copy out
                data = bytes(data)[: spans[-1][0]]
        self.disk.write(fd, data)


def eager_confirms(**kwargs: Any) -> Simulation:
    """The scenario's Simulation, its journal store confirming before it syncs."""
    opened = kwargs.get("journal_store")
    if opened is not None:
        kwargs["journal_store"] = lambda disk, first: EagerConfirms(opened(disk, first))
    return Simulation(**kwargs)


def hides_last_segment(**kwargs: Any) -> Simulation:
    """The scenario's Simulation, its journal store recovering without the newest segment."""
    if kwargs.get("journal_store") is not None:
        kwargs["journal_store"] = disk_store_opener(HidesLastSegment)
    return Simulation(**kwargs)


def drops_copied_record(**kwargs: Any) -> Simulation:
    """The scenario's Simulation, its journal store's garbage collection losing a live record."""
    if kwargs.get("journal_store") is not None:
        kwargs["journal_store"] = disk_store_opener(DropsCopiedRecord)
    return Simulation(**kwargs)


class KeepsQ1(VariableQueue):  # type: ignore[misc]
    """Broken: when q3 runs dry with nothing on disk, q1 is not moved to q4 (its messages are never fetched)."""

    def _q3_ran_dry(self) -> None:
        if self._load is None and self._delta.count:
            self._start_load()


def keeps_q1(fs: FileSystem, scenario: PagingScenario) -> PagingShell:
    """The paging shell over a core that never moves q1 to q4."""
    return PagingShell(fs, scenario, make_queue=KeepsQ1)


def collects_live_message(fs: FileSystem, scenario: PagingScenario) -> PagingShell:
    """The paging shell whose files' garbage collection leaves a live record out of what it copies."""
    return PagingShell(DropsCopiedRecord(cast("SimDisk", fs)), scenario)


class KeepsUnackedBodies(VariableQueue):  # type: ignore[misc]
    """Broken: reducing memory forgets that delivered, unacked bodies count against the target too."""

    def _reduce_memory_use(self) -> None:
        target = self._target
        if target is None:
            return
        over = self._ram_count() - target
        if over > 0 and self._q1:
            self.push_alphas_to_betas(over, 0)
        while self._ram_count() > target and self._q4 and self.push_alphas_to_betas(0, self._ram_count() - target):
            pass
        betas_over = len(self._q2) + len(self._q3) - max(target, self._segment_entries)
        if betas_over > 0:
            self.push_betas_to_deltas(betas_over)


def keeps_unacked_bodies(fs: FileSystem, scenario: PagingScenario) -> PagingShell:
    """The paging shell over a core that leaves unacked bodies in RAM whatever the target."""
    return PagingShell(fs, scenario, make_queue=KeepsUnackedBodies)


class EagerAckConfirms(QueueActor):
    """Broken: a confirmed ack is answered at once, before the journal synced it (a crash can bring it back)."""

    def _confirm(self, answer: object) -> None:
        if type(answer) is AckResult:
            self.ctx.reply(answer)
            return
        super()._confirm(answer)
