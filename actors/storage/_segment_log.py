"""An append-only, keyed segment log on real files: group commit, rotation, garbage collection, recovery.

Records are framed and checked by ``_segment_codec``; which of them are live is ``SegmentTable``'s
business; every system call goes through a ``FileSystem``. The log holds only locations in RAM, never
values. It blocks on the disk, so an actor never calls it from a handler: a job
(``ctx.run_job(log.sync)``) or an I/O actor's thread owns it, one call at a time (it holds no lock).

Durability is group commit: ``put`` and ``delete`` append to a buffer and return a write number,
``sync`` writes what is buffered, fsyncs every file written since the last sync (and the directory
when a segment was created), and answers ``Synced(through=n)``: every write numbered up to ``n`` is
on disk. Garbage collection copies a sparse segment's live records into a new file under a temporary
name, fsyncs it, renames it into place, fsyncs the directory, and only then deletes the sources: a
crash at any point leaves either the sources or a complete copy that names them (recovery then
finishes the deletion), so no live record is ever lost.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import ClassVar, Final, ParamSpec, TypeVar, final

import attrs

from conveyor.runtime import ConveyorError

from ._segment_codec import (
    Compacted,
    CorruptRecord,
    Delete,
    Heads,
    Put,
    decode_entry,
    encode_entry,
    frame,
    put_record,
    read_heads,
    scan,
    unframe,
)
from ._segment_files import FileSystem, OsFileSystem
from ._segment_table import RecordLocation, SegmentTable, TableBuilder, TableStats

logger = logging.getLogger("conveyor.storage")

_P = ParamSpec("_P")
_T = TypeVar("_T")

SEGMENT_SUFFIX: Final = ".seg"
TEMPORARY_SUFFIX: Final = ".seg.tmp"
SNAPSHOT_NAME: Final = "clean-shutdown.snapshot"
"""The table as a clean close left it: the next open reads it instead of scanning, then deletes it."""
DEFAULT_SEGMENT_SIZE: Final = 16 * 1024 * 1024
MAX_SEGMENT_SIZE: Final = 2**32 - 1
DEFAULT_FLUSH_BYTES: Final = 1024 * 1024
"""Buffered appends go to the kernel (without fsync) once this many bytes wait."""


class StorageFailed(ConveyorError):
    """A file operation failed, so what is on disk is no longer known: reopen the log to recover."""


class FailStop:
    """Fail-stop for a set of files: after one failed file operation nothing more is done until reopened.

    A failed write or fsync leaves the files in a state the process no longer knows (the page cache
    may or may not hold them), so the owner refuses every later call; reopening reads back what the
    disk kept. ``_what`` names the files in errors.
    """

    _what: ClassVar[str]
    _directory: str
    _closed: bool
    _failed: BaseException | None

    def _check_open(self) -> None:
        if self._closed:
            msg = f"{self._what} {self._directory} is closed"
            raise StorageFailed(msg)
        if self._failed is not None:
            msg = f"{self._what} {self._directory} failed earlier ({self._failed!r}): reopen it to recover"
            raise StorageFailed(msg) from self._failed

    def _guarded(self, operation: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``operation``; a failed file operation leaves the files unusable until they are reopened."""
        try:
            return operation(*args, **kwargs)
        except OSError as error:
            self._failed = error
            raise


@final
@attrs.frozen
class Truncation:
    """Bytes recovery stopped reading at in segment ``segment`` from ``offset`` on, and why."""

    segment: int
    offset: int
    discarded: int
    reason: str


@final
@attrs.frozen
class Recovery:
    """What opening a log found.

    ``truncated`` are torn tails (a write cut short by a crash), cut off the file. ``damaged`` are
    segments with a bad record followed by other bytes: reading stopped there, the file is left as
    it is for inspection and is never appended to or compacted. ``finished_compactions`` are source
    segments of a completed garbage collection that a crash left behind, now deleted.
    ``from_snapshot`` says a clean close's snapshot was read instead of the segments (``records`` is
    then 0)
    """

    segments: int
    records: int
    keys: int
    truncated: tuple[Truncation, ...]
    damaged: tuple[Truncation, ...]
    finished_compactions: tuple[int, ...]
    removed_temporary: tuple[str, ...]
    from_snapshot: bool = False


@final
@attrs.frozen
class Synced:
    """Every write numbered up to ``through`` is durable; ``records`` of them since the previous sync."""

    through: int
    records: int
    files: int


@final
@attrs.frozen
class Collected:
    """What ``collect_garbage`` did: segments deleted and written, records copied, bytes before and after."""

    removed: tuple[int, ...]
    written: tuple[int, ...]
    copied: int
    bytes_before: int
    bytes_after: int


def segment_name(segment: int) -> str:
    """The file name of segment number ``segment``."""
    return f"{segment:010d}{SEGMENT_SUFFIX}"


@final
class SegmentLog(FailStop):
    """A durable map from bytes keys to bytes values, as append-only segment files in ``directory``.

    Opening recovers what the directory holds (``recovery`` says what was found and repaired).

    Args:
        directory: where the segment files live (created if missing).
        segment_size: a segment is closed and a new one started once appending would pass this size.
        flush_bytes: buffered appends are handed to the kernel once this many wait.
        fs: the file operations to use (tests inject failures through it).
    """

    _what = "segment log"

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
        fs: FileSystem | None = None,
    ) -> None:
        if not 1 <= segment_size <= MAX_SEGMENT_SIZE:
            msg = f"segment_size must be 1 to {MAX_SEGMENT_SIZE} bytes (offsets are 32-bit), got {segment_size}"
            raise ValueError(msg)
        if flush_bytes < 1:
            msg = f"flush_bytes must be at least 1 byte, got {flush_bytes}"
            raise ValueError(msg)
        self._directory = os.fspath(directory)
        self._fs: FileSystem = fs if fs is not None else OsFileSystem()
        self._segment_size = segment_size
        self._flush_bytes = flush_bytes
        self._buffer = bytearray()
        self._buffer_start = 0
        self._active = 0
        self._active_fd = -1
        self._active_end = 0
        self._unsynced: dict[int, int] = {}
        self._directory_unsynced = False
        self._readers: dict[int, int] = {}
        self._damaged: set[int] = set()
        self._writes = 0
        self._synced = 0
        self._failed: BaseException | None = None
        self._closed = False
        self._table, self._next_seq, self._next_segment, self.recovery = self._guarded(self._recover)

    # -- writing --------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> int:
        """Store ``value`` under ``key`` (not yet durable). Returns the write's number for ``Synced``.

        Raises:
            ValueError: ``key`` is already stored (delete it first).
        """
        self._check_open()
        if key in self._table:
            msg = f"key {key!r} is already stored; delete it before storing it again"
            raise ValueError(msg)
        record = put_record(self._next_seq, key, value if type(value) is bytes else bytes(value))
        where = self._guarded(self._append, record)
        self._table.add_put(key, where)
        return self._wrote()

    def delete(self, key: bytes) -> int:
        """Delete ``key`` (not yet durable). Returns the write's number for ``Synced``.

        Raises:
            KeyError: ``key`` is not stored.
        """
        self._check_open()
        if key not in self._table:
            msg = f"key {key!r} is not stored"
            raise KeyError(msg)
        target = self._table.location(key).segment
        where = self._guarded(self._append, frame(encode_entry(Delete(self._next_seq, key, target))))
        self._table.delete(key)
        self._table.add_tombstone(where, target)
        return self._wrote()

    def _wrote(self) -> int:
        self._next_seq += 1
        self._writes += 1
        return self._writes

    def sync(self) -> Synced:
        """Write what is buffered and fsync once for every write since the last sync (group commit)."""
        self._check_open()
        return self._guarded(self._sync)

    def _sync(self) -> Synced:
        self._flush()
        files = len(self._unsynced)
        for fd in self._unsynced.values():
            self._fs.fsync(fd)
        if self._directory_unsynced:
            self._fs.fsync_dir(self._directory)
            self._directory_unsynced = False
        for segment, fd in self._unsynced.items():
            if segment != self._active:
                self._fs.close(fd)
        self._unsynced.clear()
        synced = Synced(through=self._writes, records=self._writes - self._synced, files=files)
        self._synced = self._writes
        return synced

    @property
    def unsynced(self) -> int:
        """Writes not yet covered by a sync."""
        return self._writes - self._synced

    def _append(self, record: bytes) -> RecordLocation:
        if self._active_end and self._active_end + len(record) > self._segment_size:
            self._rotate()
        where = RecordLocation(self._active, self._active_end, len(record))
        self._buffer += record
        self._active_end += len(record)
        if len(self._buffer) >= self._flush_bytes:
            self._flush()
        return where

    def _flush(self) -> None:
        if self._buffer:
            self._fs.write(self._active_fd, self._buffer)
            self._unsynced[self._active] = self._active_fd
            self._buffer.clear()
            self._buffer_start = self._active_end

    def _rotate(self) -> None:
        self._flush()
        if self._active not in self._unsynced:
            self._fs.close(self._active_fd)
        self._start_segment()

    def _start_segment(self) -> None:
        segment = self._next_segment
        self._next_segment += 1
        self._active_fd = self._fs.open_append(self._path(segment))
        self._directory_unsynced = True
        self._table.add_segment(segment)
        self._active, self._active_end, self._buffer_start = segment, 0, 0

    # -- reading --------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes:
        """The value stored under ``key``, read from its segment and checked against its CRC.

        Raises:
            KeyError: ``key`` is not stored.
            CorruptRecord: the bytes on disk no longer match their CRC.
        """
        self._check_open()
        entry = decode_entry(unframe(self._guarded(self._read, self._table.location(key))))
        if not isinstance(entry, Put) or entry.key != key:
            msg = f"record for key {key!r} holds {entry!r}"
            raise CorruptRecord(msg)
        return entry.value

    def __contains__(self, key: object) -> bool:
        return key in self._table

    def __len__(self) -> int:
        return len(self._table)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.keys())

    def keys(self) -> list[bytes]:
        """The stored keys, in the order their records lie on disk."""
        return sorted(self._table.keys(), key=self._table.disk_order)

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every stored (key, value), a segment at a time: each file is read once, every record checked."""
        self._check_open()
        self._guarded(self._flush)
        by_segment: dict[int, list[tuple[int, bytes]]] = {}
        for key, where in list(self._table.locations()):
            by_segment.setdefault(where.segment, []).append((where.offset, key))
        for segment in sorted(by_segment):
            data = memoryview(self._guarded(self._fs.read, self._path(segment)))
            for offset, key in sorted(by_segment[segment]):
                entry = decode_entry(unframe(data, offset))
                if not isinstance(entry, Put) or entry.key != key:
                    msg = f"record for key {key!r} in segment {segment} at {offset} holds {entry!r}"
                    raise CorruptRecord(msg)
                yield key, entry.value

    def stats(self) -> TableStats:
        """Segments, live keys and tombstones, live and total bytes."""
        return self._table.stats()

    def _read(self, where: RecordLocation) -> bytes:
        if where.segment == self._active and where.offset >= self._buffer_start:
            start = where.offset - self._buffer_start
            return bytes(self._buffer[start : start + where.size])
        fd = self._readers.get(where.segment)
        if fd is None:
            fd = self._readers[where.segment] = self._fs.open_read(self._path(where.segment))
        data = self._fs.pread(fd, where.size, where.offset)
        if len(data) != where.size:
            msg = f"segment {where.segment} ends inside the record at {where.offset}: {len(data)} of {where.size} bytes"
            raise CorruptRecord(msg)
        return data

    # -- garbage collection ---------------------------------------------------------------------

    def collect_garbage(self, threshold: float = 0.5) -> Collected:
        """Compact every segment whose live bytes are under ``threshold`` of its size.

        It syncs first (so what survives a crash is always every write up to some point), and seals
        a sparse active segment (appends go on in a new one).
        Each batch of sparse segments is copied (live records only) into a new segment, which is
        made durable under its final name before the sources are deleted. Repeats until no segment
        qualifies (deleting a segment can kill the tombstones that cancelled puts in it).
        """
        self._check_open()
        return self._guarded(self._collect, threshold)

    def _collect(self, threshold: float) -> Collected:
        self._sync()  # a copy must never make a delete durable before the writes that preceded it
        before = self._table.stats().total_bytes
        removed: list[int] = []
        written: list[int] = []
        copied = 0
        if self._active_end and self._table.live_fraction(self._active) < threshold:
            self._rotate()  # seal a sparse active segment so that it can be compacted too
        while batch := self._table.next_compaction(
            threshold, {self._active, *self._damaged, *written}, self._segment_size,  # outputs wait: this ends
        ):
            output, count = self._compact(batch)
            removed.extend(batch)
            written.extend([output] if output is not None else [])
            copied += count
        collected = Collected(tuple(removed), tuple(written), copied, before, self._table.stats().total_bytes)
        if removed:
            logger.info("segment log %s: garbage collection removed segments %s, wrote %s, copied %d records, "
                        "%d -> %d bytes", self._directory, collected.removed, collected.written, copied,
                        before, collected.bytes_after)
        return collected

    def _compact(self, batch: tuple[int, ...]) -> tuple[int | None, int]:
        copies: list[tuple[RecordLocation, bytes | int, bytes]] = []  # where, put key or tombstone target, bytes
        for segment in batch:
            if self._table.live_fraction(segment) > 0:  # a wholly dead segment is deleted unread
                copies.extend(self._live_records(segment, batch))
        output = None
        if copies:
            output = self._next_segment
            self._next_segment += 1
            temporary = self._path(output) + ".tmp"
            header = frame(encode_entry(Compacted(batch)))
            moves = []
            fd = self._fs.open_append(temporary)
            chunk = bytearray(header)
            end = len(header)
            for record, what, data in copies:
                moves.append((record, what, RecordLocation(output, end, record.size)))
                chunk += data
                end += record.size
                if len(chunk) >= self._flush_bytes:
                    self._fs.write(fd, chunk)
                    chunk.clear()
            self._fs.write(fd, chunk)
            self._fs.fsync(fd)
            self._fs.close(fd)
            self._fs.rename(temporary, self._path(output))
            self._fs.fsync_dir(self._directory)
            self._table.add_segment(output, len(header))
            for old, what, new in moves:
                if isinstance(what, bytes):
                    self._table.move_put(what, new)
                else:
                    self._table.move_tombstone(old, what, new)
        for segment in batch:
            for handles in (self._readers, self._unsynced):
                if segment in handles:
                    self._fs.close(handles.pop(segment))
            self._fs.unlink(self._path(segment))
        self._fs.fsync_dir(self._directory)
        self._table.remove_segments(batch)
        return output, len(copies)

    def _live_records(
        self, segment: int, batch: tuple[int, ...],
    ) -> list[tuple[RecordLocation, bytes | int, bytes]]:
        """The live records of ``segment`` that compacting ``batch`` must copy, read and checked.

        Raises:
            CorruptRecord: the file no longer holds what it held (nothing is copied or deleted then).
        """
        data = self._fs.read(self._path(segment))
        scanned = scan(data)
        heads = read_heads(data, scanned.spans)
        if heads.bad_offset is not None or scanned.end < self._table.size(segment):
            msg = (f"segment {segment} changed on disk: valid up to {scanned.end} of {self._table.size(segment)} "
                   f"bytes ({heads.reason or (scanned.damage.reason if scanned.damage else 'shorter')})")
            raise CorruptRecord(msg)
        found: list[tuple[RecordLocation, bytes | int, bytes]] = []
        for offset, size, _, key, target in heads.heads:
            record = RecordLocation(segment, offset, size)
            if target < 0 and self._table.is_live_put(key, record):
                found.append((record, key, data[offset : offset + size]))
            elif target >= 0 and self._table.tombstone_needed(target, batch):
                found.append((record, target, data[offset : offset + size]))
        return found

    # -- recovery -------------------------------------------------------------------------------

    def _recover(self) -> tuple[SegmentTable, int, int, Recovery]:
        fs = self._fs
        fs.makedirs(self._directory)
        names = sorted(fs.listdir(self._directory))
        temporary = tuple(name for name in names if name.endswith((TEMPORARY_SUFFIX, SNAPSHOT_NAME + ".tmp")))
        for name in temporary:
            logger.warning("segment log %s: removing %s, left by a compaction or a close that did not finish",
                           self._directory, name)
            fs.unlink(os.path.join(self._directory, name))
        present = sorted(int(name[: -len(SEGMENT_SUFFIX)]) for name in names
                         if name.endswith(SEGMENT_SUFFIX) and name[: -len(SEGMENT_SUFFIX)].isdigit())
        snapshot = self._load_snapshot(names, present)
        if snapshot is not None:
            return self._open_from(snapshot[0], snapshot[1], snapshot[2], present, Recovery(
                segments=len(present), records=0, keys=len(snapshot[0]), truncated=(), damaged=(),
                finished_compactions=(), removed_temporary=temporary, from_snapshot=True,
            ))
        sizes: dict[int, int] = {}
        compacted: dict[int, Compacted | None] = {}
        builder = TableBuilder()
        records = 0
        truncated: list[Truncation] = []
        damaged: list[Truncation] = []
        for segment in present:
            sizes[segment], heads, problem = self._read_segment(segment)
            builder.add(segment, heads.heads)
            compacted[segment] = heads.compacted
            records += len(heads.heads)
            del heads
            if problem is None:
                continue
            if problem[0] == "torn":
                logger.warning("segment log %s: segment %d has a torn tail at offset %d: truncating %d bytes (%s)",
                               self._directory, segment, problem[1].offset, problem[1].discarded, problem[1].reason)
                fs.truncate(self._path(segment), problem[1].offset)
                truncated.append(problem[1])
            else:
                logger.error("segment log %s: segment %d is corrupt at offset %d: ignoring its last %d bytes (%s); "
                             "the file is kept as it is and never appended to or compacted",
                             self._directory, segment, problem[1].offset, problem[1].discarded, problem[1].reason)
                damaged.append(problem[1])
                self._damaged.add(segment)
        finished = self._finish_compactions(compacted, {t.segment for t in truncated} | self._damaged)
        for segment in finished:
            del sizes[segment]
        table = builder.build(sizes)
        # A compaction's output is numbered above its sources, so present segments cover every number a
        # compaction header names; a tombstone may name a segment above every present one.
        return self._open_from(table, builder.top + 1, builder.top_target + 1, present, Recovery(
            segments=len(table.segments()),
            records=records,
            keys=len(table),
            truncated=tuple(truncated),
            damaged=tuple(damaged),
            finished_compactions=tuple(finished),
            removed_temporary=temporary,
        ))

    def _open_from(
        self, table: SegmentTable, next_seq: int, floor: int, present: list[int], recovery: Recovery,
    ) -> tuple[SegmentTable, int, int, Recovery]:
        """Take ``table`` as recovered: pick the segment to append to (a new one if the last is full or damaged).

        New segments are numbered from ``floor`` at least: a number once used is never used again.
        """
        self._table = table
        segments = table.segments()
        last = segments[-1] if segments else 0
        next_segment = max(floor, max(present, default=0) + 1)
        if segments and last not in self._damaged and table.size(last) < self._segment_size:
            self._active, self._active_end = last, table.size(last)
            self._buffer_start = self._active_end
            self._active_fd = self._fs.open_append(self._path(last))
        else:
            self._next_segment = next_segment
            self._start_segment()
            next_segment = self._next_segment
        logger.info("segment log %s: recovered %d keys from %s in %d segments", self._directory, recovery.keys,
                    "a clean shutdown's snapshot" if recovery.from_snapshot else f"{recovery.records} records",
                    recovery.segments)
        return table, next_seq, next_segment, recovery

    def _load_snapshot(self, names: list[str], present: list[int]) -> tuple[SegmentTable, int, int] | None:
        """The table a clean close saved, if there is one and the segments are still what it describes.

        The snapshot is deleted (durably) before the log writes anything, so a crash after this open
        can never bring back a stale one.
        """
        if SNAPSHOT_NAME not in names:
            return None
        path = os.path.join(self._directory, SNAPSHOT_NAME)
        loaded: tuple[SegmentTable, int, int] | None = None
        try:
            loaded = SegmentTable.load(self._fs.read(path))
            found = {segment: self._fs.size(self._path(segment)) for segment in present}
            described = {segment: loaded[0].size(segment) for segment in loaded[0].segments()}
            if found != described:
                msg = f"the segments on disk ({len(found)}) differ from the {len(described)} it describes"
                raise CorruptRecord(msg)
        except CorruptRecord as error:
            logger.warning("segment log %s: ignoring the clean-shutdown snapshot (%s): scanning the segments",
                           self._directory, error)
            loaded = None
        self._fs.unlink(path)
        self._fs.fsync_dir(self._directory)
        return loaded

    def _read_segment(
        self, segment: int,
    ) -> tuple[int, Heads, tuple[str, Truncation] | None]:
        """A segment's valid length, its entries' heads, and the damage that ended it (torn or corrupt), if any."""
        data = self._fs.read(self._path(segment))
        scanned = scan(data)
        heads = read_heads(data, scanned.spans)
        if heads.bad_offset is not None:
            reason = f"well-framed record is not an entry: {heads.reason}"
            damage = Truncation(segment, heads.bad_offset, len(data) - heads.bad_offset, reason)
            return heads.bad_offset, heads, ("corrupt", damage)
        if scanned.damage is None:
            return scanned.end, heads, None
        torn = scanned.damage
        return scanned.end, heads, (torn.kind, Truncation(segment, torn.offset, torn.discarded, torn.reason))

    def _finish_compactions(
        self, compacted: dict[int, Compacted | None], unsound: set[int],
    ) -> list[int]:
        """Delete sources a complete compacted segment names but a crash left behind; returns them."""
        finished: list[int] = []
        for segment in sorted(compacted, reverse=True):
            first = compacted[segment]
            if segment in finished or segment in unsound or first is None:
                continue
            for source in first.sources:
                if source in compacted and source != segment and source not in finished:
                    logger.warning("segment log %s: finishing a garbage collection: segment %d was copied "
                                   "into %d, deleting it", self._directory, source, segment)
                    self._fs.unlink(self._path(source))
                    self._damaged.discard(source)
                    finished.append(source)
        if finished:
            self._fs.fsync_dir(self._directory)
        return finished

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Sync what is pending and close every file. A failed log just closes its files."""
        if self._closed:
            return
        try:
            if self._failed is None:
                self._guarded(self._sync)
                if not self._damaged:
                    self._guarded(self._save_snapshot)
        finally:
            self._closed = True
            fds = {*self._readers.values(), *self._unsynced.values(), self._active_fd}
            for fd in fds:
                if fd >= 0:
                    try:
                        self._fs.close(fd)
                    except OSError:
                        logger.exception("segment log %s: closing a file failed", self._directory)
            self._readers.clear()
            self._unsynced.clear()

    def _save_snapshot(self) -> None:
        """Write the table for the next open (under a temporary name, synced, then renamed into place)."""
        path = os.path.join(self._directory, SNAPSHOT_NAME)
        fd = self._fs.open_append(path + ".tmp")
        try:
            self._fs.write(fd, self._table.dump(self._next_seq, self._next_segment))
            self._fs.fsync(fd)
        finally:
            self._fs.close(fd)
        self._fs.rename(path + ".tmp", path)
        self._fs.fsync_dir(self._directory)

    def __enter__(self) -> SegmentLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _path(self, segment: int) -> str:
        return os.path.join(self._directory, segment_name(segment))

