"""Where a paged queue keeps the bodies it dropped from RAM: a narrow store, used only from jobs.

A ``BodyStore`` maps an entry's seq to its body. The queue never calls it from a handler: each
``PageBatch`` (writes, then reads, then deletes) runs in one job (``run_page_batch``), and the
bodies read come back in the job's ``JobDone``. One batch at a time per queue, so a read always
sees every write before it and the store needs no lock. ``DiskBodyStore`` keeps the bodies in a
``SegmentLog`` (CRC per record, garbage collection) in a directory of its own, made on first use;
``MemoryBodyStore`` keeps them in a dict (tests, and a simulator without a disk of its own). A
simulated disk plugs in as ``DiskBodyStore(fs=...)`` (the segment log's ``FileSystem``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from typing import Protocol, final

import attrs

from conveyor.actors.storage import FileSystem, OsFileSystem, SegmentLog

from ._values import Message


class BodyStore(Protocol):
    """Bytes by int key (an entry's seq, or a delta chunk's negative key); blocking, so called only from a job."""

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Keep each (seq, body); a seq is written at most once."""

    def read(self, seqs: Sequence[int]) -> Sequence[bytes | None]:
        """The bodies of ``seqs``, in that order (each written before; a durable store: None if lost)."""

    def delete(self, seqs: Sequence[int]) -> None:
        """Forget the bodies of ``seqs`` (each written before)."""

    def forget_from(self, seq: int) -> None:
        """Forget every body keyed ``seq`` or above (a durable queue's recovery: publishes its journal lost)."""


DeltaRecord = tuple[int, Message, int]
"""An entry of a delta chunk as the store keeps it: (seq, message without its body, size)."""


@final
@attrs.frozen
class PageBatch:
    """One job's work for a queue's body store, run in this order: writes, reads, deletes.

    Bodies are keyed by their entry's seq (> 0); delta chunks (``chunk_writes``: key and records)
    by their chunk key (< 0), pickled in the job.
    """

    writes: tuple[tuple[int, bytes], ...] = ()
    reads: tuple[int, ...] = ()
    deletes: tuple[int, ...] = ()
    chunk_writes: tuple[tuple[int, tuple[DeltaRecord, ...]], ...] = ()
    chunk_reads: tuple[int, ...] = ()
    chunk_deletes: tuple[int, ...] = ()
    forget_from: int | None = None
    """A durable queue's first batch after recovery: first forget the bodies of seqs the journal does not
    have (published, their body synced, but their journal write lost), as new publishes reuse the seqs."""
    generation: int = 0
    """A durable store's generation when the batch was made: a batch of an instance that died (its store
    recovered since by a new one) does nothing, so it cannot undo the new instance's work."""


@final
@attrs.frozen
class PageDone:
    """What a batch read: bodies as (seq, body), delta chunks as (key, records)."""

    bodies: tuple[tuple[int, bytes | None], ...] = ()
    """None: a durable store lost the body (a publish never confirmed, see ``DiskBodyStore``)."""
    chunks: tuple[tuple[int, tuple[DeltaRecord, ...]], ...] = ()


def run_page_batch(store: BodyStore, batch: PageBatch) -> PageDone:
    """Carry out ``batch`` on ``store`` (in a job); returns what it read (nothing, if the batch is stale)."""
    if batch.generation != getattr(store, "generation", 0):
        return PageDone()
    if batch.forget_from is not None:
        store.forget_from(batch.forget_from)
    writes = batch.writes
    if batch.chunk_writes:
        writes += tuple((key, pickle.dumps(records, pickle.HIGHEST_PROTOCOL)) for key, records in batch.chunk_writes)
    if writes:
        store.write(writes)
    keys = batch.reads + batch.chunk_reads
    values = store.read(keys) if keys else []
    deletes = batch.deletes + batch.chunk_deletes
    if deletes:
        store.delete(deletes)
    split = len(batch.reads)
    return PageDone(
        tuple(zip(batch.reads, values[:split], strict=True)),
        tuple((key, _chunk(key, value)) for key, value in zip(batch.chunk_reads, values[split:], strict=True)),
    )


def _chunk(key: int, value: bytes | None) -> tuple[DeltaRecord, ...]:
    """A delta chunk's records (deltas are a transient queue's, whose store never loses a value)."""
    if value is None:
        msg = f"delta chunk {key} is missing from the body store"
        raise KeyError(msg)
    records: tuple[DeltaRecord, ...] = pickle.loads(value)
    return records


@final
class MemoryBodyStore:
    """Bodies in a dict: the store's behaviour without a disk (it saves no RAM).

    ``durable``: the store of a durable queue whose journal is in memory (kept beside the journal, so
    it outlives the queue's instances): a body written twice is replaced, a lost one reads as None and
    deleting it does nothing, as ``DiskBodyStore(durable=True)``.
    """

    def __init__(self, durable: bool = False) -> None:
        self.bodies: dict[int, bytes] = {}
        self.durable = durable
        self.generation = 0  # bumped by each queue instance that recovers with this store (``PageBatch``)

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Keep each (seq, body)."""
        for seq, body in bodies:
            if seq in self.bodies and not self.durable:
                msg = f"body of entry {seq} is stored already"
                raise ValueError(msg)
            self.bodies[seq] = body

    def read(self, seqs: Sequence[int]) -> list[bytes | None]:
        """The bodies of ``seqs``."""
        if self.durable:
            return [self.bodies.get(seq) for seq in seqs]
        return [self.bodies[seq] for seq in seqs]

    def delete(self, seqs: Sequence[int]) -> None:
        """Forget the bodies of ``seqs``."""
        for seq in seqs:
            if self.durable:
                self.bodies.pop(seq, None)
            else:
                del self.bodies[seq]

    def forget_from(self, seq: int) -> None:
        """Forget every body keyed ``seq`` or above."""
        for key in [key for key in list(self.bodies) if key >= seq]:  # a copy: a dead instance's job may pop one
            self.bodies.pop(key, None)


_KEY = 8  # bytes of a seq as a segment-log key


@final
class _Unsynced:
    """A ``FileSystem`` whose syncs do nothing: paged bodies are copies of RAM, never needed after a crash."""

    def __init__(self, fs: FileSystem) -> None:
        self._fs = fs

    def makedirs(self, directory: str) -> None:
        self._fs.makedirs(directory)

    def listdir(self, directory: str) -> list[str]:
        return self._fs.listdir(directory)

    def read(self, path: str) -> bytes:
        return self._fs.read(path)

    def size(self, path: str) -> int:
        return self._fs.size(path)

    def open_append(self, path: str) -> int:
        return self._fs.open_append(path)

    def open_read(self, path: str) -> int:
        return self._fs.open_read(path)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        self._fs.write(fd, data)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return self._fs.pread(fd, size, offset)

    def fsync(self, fd: int) -> None:
        """Nothing: see the class."""

    def close(self, fd: int) -> None:
        self._fs.close(fd)

    def truncate(self, path: str, size: int) -> None:
        self._fs.truncate(path, size)

    def rename(self, source: str, destination: str) -> None:
        self._fs.rename(source, destination)

    def unlink(self, path: str) -> None:
        self._fs.unlink(path)

    def fsync_dir(self, directory: str) -> None:
        """Nothing: see the class."""


def _remove(log: list[SegmentLog], directory: str, owned: bool) -> None:
    """When the store is collected: delete the directory it made, then close the log's files."""
    if owned:
        shutil.rmtree(directory, ignore_errors=True)
    for opened in log:
        with contextlib.suppress(OSError):  # its directory is gone: closing the files is all that is left
            opened.close()


def _sync_all(fs: FileSystem, directory: str) -> None:
    """Make durable every file and name a durable store finds at open: an earlier store in this process
    may have failed before its sync (the log would append to a file whose name a crash still loses)."""
    for name in fs.listdir(directory):
        fd = fs.open_append(os.path.join(directory, name))
        try:
            fs.fsync(fd)
        finally:
            fs.close(fd)
    fs.fsync_dir(directory)
    fs.fsync_dir(os.path.dirname(directory.rstrip(os.sep)))


@final
class DiskBodyStore:
    """Bodies in a ``SegmentLog``: paged-out messages cost RAM only for their entries.

    A transient queue's store syncs nothing (the log's syncs are no-ops): a paged body is a copy
    of RAM that dies with the process, so a crash loses nothing a restart would keep. A durable
    queue's (``durable=True``) syncs every write before the job ends, so the queue confirms a
    publish only once its body is on disk; after a crash it may lack the body of a publish whose
    journal write reached the disk but whose body did not (never confirmed): such a body reads as
    None and the queue drops the entry. Args:
        directory: where the segments go; None makes a temporary directory on first use, removed
            with the store (a durable store needs one).
        fs: the file operations (a simulated disk plugs in here); None for the real ones.
        collect_every: run the log's garbage collection after this many deletes.
        durable: sync writes, keep the directory, and read a missing body as None.
    """

    def __init__(
        self, directory: str | None = None, fs: FileSystem | None = None, collect_every: int = 8192,
        durable: bool = False,
    ) -> None:
        if collect_every < 1:
            msg = f"DiskBodyStore.collect_every must be an int >= 1, got {collect_every!r}"
            raise ValueError(msg)
        if durable and directory is None:
            msg = "DiskBodyStore(durable=True) needs a directory: a temporary one dies with the process"
            raise ValueError(msg)
        self._directory = directory
        self.durable = durable
        self.generation = 0  # bumped by each queue instance that recovers with this store (``PageBatch``)
        real = OsFileSystem() if fs is None else fs
        self._fs: FileSystem = real if durable else _Unsynced(real)
        self._collect_every = collect_every
        self._deleted = 0
        self._opened: list[SegmentLog] = []  # the log, once opened (a list the finaliser can see filled)

    def _log(self) -> SegmentLog:
        if self._opened:
            return self._opened[0]
        owned = self._directory is None
        directory = tempfile.mkdtemp(prefix="conveyor-pages-") if self._directory is None else self._directory
        self._directory = directory
        self._opened.append(SegmentLog(directory, fs=self._fs))
        if self.durable:
            _sync_all(self._fs, directory)
        if not self.durable:  # a durable store lives as long as its journal: the process (a simulated crash
            # invalidates its descriptors, whose numbers a new store may hold by the time this one is collected)
            weakref.finalize(self, _remove, self._opened, directory, owned)
        return self._opened[0]

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Append each (seq, body) to the log (durable: replacing an older copy, then one sync for all)."""
        log = self._log()
        durable = self.durable
        for seq, body in bodies:
            key = seq.to_bytes(_KEY, "big", signed=True)
            if durable and key in log:
                log.delete(key)
            log.put(key, body)
        if durable and bodies:
            log.sync()

    def read(self, seqs: Sequence[int]) -> list[bytes | None]:
        """The bodies of ``seqs``, each checked against its CRC (durable: None for a body not stored)."""
        log = self._log()
        if self.durable:
            return [log.get(key) if (key := seq.to_bytes(_KEY, "big", signed=True)) in log else None for seq in seqs]
        return [log.get(seq.to_bytes(_KEY, "big", signed=True)) for seq in seqs]

    def delete(self, seqs: Sequence[int]) -> None:
        """Drop the bodies of ``seqs``; now and then compact the segments they leave sparse.

        Durable: a body not stored is skipped, and the deletes are synced (what a crash would keep
        of them is only disk space: each entry's settle was synced before its delete was asked).
        """
        log = self._log()
        durable = self.durable
        for seq in seqs:
            key = seq.to_bytes(_KEY, "big", signed=True)
            if durable and key not in log:
                continue
            log.delete(key)
        if durable and seqs:
            log.sync()
        self._count_deletes(len(seqs))

    def forget_from(self, seq: int) -> None:
        """Drop every body keyed ``seq`` or above (synced: new bodies will reuse these keys)."""
        log = self._log()
        stored = log.keys()  # a SegmentLog's keys: a list, not a dict's view
        doomed = [key for key in stored if int.from_bytes(key, "big", signed=True) >= seq]
        for key in doomed:
            log.delete(key)
        if doomed:
            log.sync()
            self._count_deletes(len(doomed))

    def _count_deletes(self, count: int) -> None:
        self._deleted += count
        if self._deleted >= self._collect_every:
            self._deleted = 0
            self._log().collect_garbage()

    @property
    def directory(self) -> str | None:
        """Where the segments are (None until first used, when the directory is temporary)."""
        return self._directory
