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

    def read(self, seqs: Sequence[int]) -> list[bytes]:
        """The bodies of ``seqs``, in that order (each written before)."""

    def delete(self, seqs: Sequence[int]) -> None:
        """Forget the bodies of ``seqs`` (each written before)."""


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


@final
@attrs.frozen
class PageDone:
    """What a batch read: bodies as (seq, body), delta chunks as (key, records)."""

    bodies: tuple[tuple[int, bytes], ...] = ()
    chunks: tuple[tuple[int, tuple[DeltaRecord, ...]], ...] = ()


def run_page_batch(store: BodyStore, batch: PageBatch) -> PageDone:
    """Carry out ``batch`` on ``store`` (in a job); returns what it read."""
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
        tuple((key, pickle.loads(value)) for key, value in zip(batch.chunk_reads, values[split:], strict=True)),
    )


@final
class MemoryBodyStore:
    """Bodies in a dict: the store's behaviour without a disk (it saves no RAM)."""

    def __init__(self) -> None:
        self.bodies: dict[int, bytes] = {}

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Keep each (seq, body)."""
        for seq, body in bodies:
            if seq in self.bodies:
                msg = f"body of entry {seq} is stored already"
                raise ValueError(msg)
            self.bodies[seq] = body

    def read(self, seqs: Sequence[int]) -> list[bytes]:
        """The bodies of ``seqs``."""
        return [self.bodies[seq] for seq in seqs]

    def delete(self, seqs: Sequence[int]) -> None:
        """Forget the bodies of ``seqs``."""
        for seq in seqs:
            del self.bodies[seq]


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


@final
class DiskBodyStore:
    """Bodies in a ``SegmentLog``: paged-out messages cost RAM only for their entries.

    Nothing is synced (the log's syncs are no-ops here): a paged body is a copy of RAM that dies
    with the process (a transient queue), so a crash loses nothing a restart would keep. Args:
        directory: where the segments go; None makes a temporary directory on first use, removed
            with the store.
        fs: the file operations (a simulated disk plugs in here); None for the real ones.
        collect_every: run the log's garbage collection after this many deletes.
    """

    def __init__(self, directory: str | None = None, fs: FileSystem | None = None, collect_every: int = 8192) -> None:
        if collect_every < 1:
            msg = f"DiskBodyStore.collect_every must be an int >= 1, got {collect_every!r}"
            raise ValueError(msg)
        self._directory = directory
        self._fs: FileSystem = _Unsynced(OsFileSystem() if fs is None else fs)
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
        weakref.finalize(self, _remove, self._opened, directory, owned)
        return self._opened[0]

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Append each (seq, body) to the log."""
        log = self._log()
        for seq, body in bodies:
            log.put(seq.to_bytes(_KEY, "big", signed=True), body)

    def read(self, seqs: Sequence[int]) -> list[bytes]:
        """The bodies of ``seqs``, each checked against its CRC."""
        log = self._log()
        return [log.get(seq.to_bytes(_KEY, "big", signed=True)) for seq in seqs]

    def delete(self, seqs: Sequence[int]) -> None:
        """Drop the bodies of ``seqs``; now and then compact the segments they leave sparse."""
        log = self._log()
        for seq in seqs:
            log.delete(seq.to_bytes(_KEY, "big", signed=True))
        self._deleted += len(seqs)
        if self._deleted >= self._collect_every:
            self._deleted = 0
            log.collect_garbage()

    @property
    def directory(self) -> str | None:
        """Where the segments are (None until first used, when the directory is temporary)."""
        return self._directory
