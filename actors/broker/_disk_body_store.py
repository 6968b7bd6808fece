"""DiskBodyStore: a paged queue's bodies on disk, addressed by seq, so a paged body costs almost no RAM.

A queue's body keys are its entries' seqs, handed out increasing: the bodies go to a
``SeqRangeIndex`` (segment files of ``seqs_per_segment`` seqs each, RAM a bit per seq and a few
counters per segment, never a key per body), and a segment whose bodies are all deleted is deleted
whole. Delta chunks (negative keys, one per chunk of entries: few) go to a small ``SegmentLog`` beside
it, opened the first time one is written. Both check a CRC per record and cut a torn tail at open.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from typing import Final, final

from conveyor.actors.storage import FileSystem, OsFileSystem, SegmentLog, SeqRangeIndex

SEQS_PER_SEGMENT: Final = 1024
"""Seqs per body segment file: 1 MiB of 1 KiB bodies, the most a read of one body parses."""
PARSED_SEGMENTS: Final = 4
"""Body segments whose offsets reads keep: the heads of a few priority levels, read in turn, parse once."""
BODIES_SUBDIRECTORY: Final = "seqs"
CHUNKS_SUBDIRECTORY: Final = "chunks"
_KEY: Final = 8  # bytes of a chunk key in the chunk log


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


@final
class _Opened:
    """The store's files once opened (a holder the finaliser can see filled without holding the store)."""

    __slots__ = ("bodies", "chunks")

    def __init__(self) -> None:
        self.bodies: SeqRangeIndex | None = None
        self.chunks: SegmentLog | None = None


def _close(opened: _Opened) -> None:
    """When a transient store is collected while the process runs: close its files."""
    for files in (opened.bodies, opened.chunks):
        if files is not None:
            with contextlib.suppress(OSError):  # a simulated crash invalidated its descriptors: nothing to close
                files.close()


OLD_LAYOUT_SUFFIX: Final = ".seg"
"""A segment file right in a durable store's directory: the layout before bodies were kept by seq."""


def refuse_old_layout(fs: FileSystem, directory: str) -> None:
    """Raise if ``directory`` holds a durable body store of the earlier layout (one ``SegmentLog``).

    Its bodies are not read by this store; opening it anyway would read every body as lost and drop
    the confirmed messages' entries, so the queue fails with a clear error instead.
    """
    try:
        names = fs.listdir(directory)
    except FileNotFoundError:
        return
    old = sorted(name for name in names if name.endswith(OLD_LAYOUT_SUFFIX))
    if old:
        msg = (f"body store {directory!r} was written by an earlier conveyor (segment files {old[:3]} in the "
               f"directory itself, not in {BODIES_SUBDIRECTORY}/ and {CHUNKS_SUBDIRECTORY}/); this version cannot "
               "read it, and opening it would drop its messages: drain the queue with the earlier version first")
        raise RuntimeError(msg)


def _sync_found(fs: FileSystem, directory: str) -> None:
    """Make durable every file and name a durable store finds at open: an earlier store in this process
    may have failed before its sync (it would append to a file whose name a crash still loses)."""
    for name in fs.listdir(directory):
        fd = fs.open_append(os.path.join(directory, name))
        try:
            fs.fsync(fd)
        finally:
            fs.close(fd)
    fs.fsync_dir(directory)
    fs.fsync_dir(os.path.dirname(directory.rstrip(os.sep)))


def _chunk_key(key: int) -> bytes:
    return key.to_bytes(_KEY, "big", signed=True)


@final
class DiskBodyStore:
    """Bodies by seq in a ``SeqRangeIndex``, delta chunks in a ``SegmentLog``: RAM per segment, not per body.

    A transient queue's store syncs nothing (its syncs are no-ops): a paged body is a copy of RAM
    that dies with the process, so a crash loses nothing a restart would keep. A durable queue's
    (``durable=True``) syncs every write and delete before the job ends, so the queue confirms a
    publish only once its body is on disk; after a crash it may lack the body of a publish whose
    journal write reached the disk but whose body did not (never confirmed): such a body reads as
    None and the queue drops the entry. Args:
        directory: where the files go (``seqs/`` and ``chunks/`` in it); None makes a temporary
            directory on first use, removed with the store (a durable store needs one).
        fs: the file operations (a simulated disk plugs in here); None for the real ones.
        collect_every: compact sparse segments after this many deletes.
        durable: sync writes and deletes, keep the directory, and read a missing body as None.
        seqs_per_segment: seqs per body segment file.
    """

    def __init__(
        self, directory: str | None = None, fs: FileSystem | None = None, collect_every: int = 8192,
        durable: bool = False, seqs_per_segment: int = SEQS_PER_SEGMENT,
    ) -> None:
        if collect_every < 1:
            msg = f"DiskBodyStore.collect_every must be an int >= 1, got {collect_every!r}"
            raise ValueError(msg)
        if durable and directory is None:
            msg = "DiskBodyStore(durable=True) needs a directory: a temporary one dies with the process"
            raise ValueError(msg)
        if not isinstance(seqs_per_segment, int) or seqs_per_segment < 1:
            msg = f"DiskBodyStore.seqs_per_segment must be an int >= 1, got {seqs_per_segment!r}"
            raise ValueError(msg)
        self._directory = directory
        self.durable = durable
        self.generation = 0  # bumped by each queue instance that recovers with this store (``PageBatch``)
        real = OsFileSystem() if fs is None else fs
        self._fs: FileSystem = real if durable else _Unsynced(real)
        self._collect_every = collect_every
        self._seqs_per_segment = seqs_per_segment
        self._deleted = 0
        self._opened = _Opened()

    def _bodies(self) -> SeqRangeIndex:
        bodies = self._opened.bodies
        if bodies is not None:
            return bodies
        owned = self._directory is None
        directory = tempfile.mkdtemp(prefix="conveyor-pages-") if self._directory is None else self._directory
        self._directory = directory
        if self.durable and not owned:
            refuse_old_layout(self._fs, directory)
        where = os.path.join(directory, BODIES_SUBDIRECTORY)
        bodies = self._opened.bodies = SeqRangeIndex(where, fs=self._fs, ids_per_segment=self._seqs_per_segment,
                                                     parsed_segments=PARSED_SEGMENTS)
        if self.durable:
            _sync_found(self._fs, where)
            self._fs.fsync_dir(os.path.dirname(directory.rstrip(os.sep)))
        else:  # a durable store lives as long as its journal: the process (a simulated crash invalidates
            # its descriptors, whose numbers a new store may hold by the time this one is collected)
            closing = weakref.finalize(self, _close, self._opened)
            closing.atexit = False  # at exit a job may still be using the files, and the process's end closes them
            if owned:
                weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)
        return bodies

    def _chunks(self) -> SegmentLog:
        chunks = self._opened.chunks
        if chunks is not None:
            return chunks
        self._bodies()  # makes the directory
        assert self._directory is not None
        where = os.path.join(self._directory, CHUNKS_SUBDIRECTORY)
        chunks = self._opened.chunks = SegmentLog(where, fs=self._fs)
        if self.durable:
            _sync_found(self._fs, where)
        return chunks

    def write(self, bodies: Sequence[tuple[int, bytes]]) -> None:
        """Keep each (seq, body), then sync once (a no-op unless durable; durable: replacing an older copy)."""
        index = self._bodies()
        durable = self.durable
        chunks: SegmentLog | None = None
        for seq, body in bodies:
            if seq < 0:
                chunks = self._chunks()
                key = _chunk_key(seq)
                if durable and key in chunks:
                    chunks.delete(key)
                chunks.put(key, body)
                continue
            if not durable and seq in index:
                msg = f"body of entry {seq} is stored already"
                raise ValueError(msg)
            index.publish(seq, body)
        index.sync()
        if chunks is not None:  # transient: hands the log's buffer (up to 1 MiB) to the kernel
            chunks.sync()

    def read(self, seqs: Sequence[int]) -> list[bytes | None]:
        """The bodies of ``seqs``, each checked against its CRC (durable: None for a body not stored).

        Raises:
            KeyError: a transient store does not hold one of them.
        """
        found = iter(self._bodies().read_each([seq for seq in seqs if seq >= 0]))
        bodies = [next(found) if seq >= 0 else self._read_chunk(seq) for seq in seqs]
        if not self.durable:
            for seq, body in zip(seqs, bodies, strict=True):
                if body is None:
                    msg = f"body of entry {seq} is not in the store"
                    raise KeyError(msg)
        return bodies

    def _read_chunk(self, key: int) -> bytes | None:
        chunks = self._chunks()
        stored = _chunk_key(key)
        return chunks.get(stored) if stored in chunks else None

    def delete(self, seqs: Sequence[int]) -> None:
        """Drop the bodies of ``seqs``; now and then compact the segments they leave sparse.

        Durable: a body not stored is skipped, and the deletes are synced (what a crash would keep
        of them is only disk space: each entry's settle was synced before its delete was asked).
        Raises:
            KeyError: a transient store does not hold one of them.
        """
        index = self._bodies()
        durable = self.durable
        chunks: SegmentLog | None = None
        for seq in seqs:
            if seq < 0:
                chunks = self._chunks()
                key = _chunk_key(seq)
                if not durable or key in chunks:
                    chunks.delete(key)
            elif not durable or seq in index:
                index.ack(seq)
        index.sync()
        if chunks is not None:  # transient: hands the log's buffer (up to 1 MiB) to the kernel
            chunks.sync()
        self._count_deletes(len(seqs))

    def forget_from(self, seq: int) -> None:
        """Drop every body keyed ``seq`` or above (synced: new bodies will reuse these keys)."""
        index = self._bodies()
        doomed = index.seq_ids(max(seq, 0))
        for stored in doomed:
            index.ack(stored)
        index.sync()
        forgotten = len(doomed)
        if seq < 0:
            chunks = self._chunks()
            keys = [key for key in chunks if int.from_bytes(key, "big", signed=True) >= seq]
            for key in keys:
                chunks.delete(key)
            chunks.sync()
            forgotten += len(keys)
        self._count_deletes(forgotten)

    def _count_deletes(self, count: int) -> None:
        self._deleted += count
        if self._deleted >= self._collect_every:
            self._deleted = 0
            self._bodies().collect_garbage()
            if self._opened.chunks is not None:
                self._opened.chunks.collect_garbage()

    @property
    def directory(self) -> str | None:
        """Where the store's files are (None until first used, when the directory is temporary)."""
        return self._directory
