"""A queue index whose RAM is per segment, not per message: segment files of a fixed range of sequence ids.

Segment ``n`` holds every record about ids ``n * ids_per_segment`` up to the next segment's first:
publishes (the id and its entry), delivery marks and acks, appended in the order they happen, each
framed with its length and CRC (``_segment_codec.frame``). RAM holds, per segment, a few counters and
a bitmap of its live ids (2 KiB for 16,384 ids, an eighth of a byte per id), never the entries: a
read parses the one segment it needs. A segment whose ids are all acked is deleted whole, so with
ids acked roughly in order (a queue) nothing else ever reclaims space; ``collect_garbage`` rewrites
a segment that keeps a few live ids among many acked ones (a queue acked out of order). The design
is RabbitMQ's classic queue index (``rabbit_queue_index``): there a journal holds the recent
records; here each segment's unsynced records wait in its own buffer until ``sync``.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Sequence
from typing import Final, ParamSpec, TypeVar, final

import attrs

from ._segment_codec import HEADER, MAX_PAYLOAD, CorruptRecord, frame, scan
from ._segment_files import FileSystem, OsFileSystem
from ._segment_log import Collected, FailStop, Recovery, Synced, Truncation

logger = logging.getLogger("conveyor.storage")

DEFAULT_IDS_PER_SEGMENT: Final = 16_384
"""Sequence ids per segment file (RabbitMQ's ``SEGMENT_ENTRY_COUNT``)."""
SEGMENT_SUFFIX: Final = ".qidx"
_TEMPORARY_SUFFIX: Final = ".tmp"
_CORRUPT_SUFFIX: Final = ".corrupt"
_MAX_ID: Final = 1 << 64
_PARSE_WINDOW: Final = 64 << 10
"""Bytes a segment's parse reads at a time; of a longer record (a large body) only its head is read."""
_OPEN_FILES: Final = 8
"""Descriptors kept open for appending, and as many for reading (the segments used last): a long queue
spans many segments, and one descriptor each would run into the process's limit."""
_PUBLISH: Final = 1
_DELIVER: Final = 2
_ACK: Final = 3
_RECORD_HEAD: Final = struct.Struct("<BQ")  # kind, seq_id; a publish's entry follows
_HEAD_SIZE: Final = HEADER.size + _RECORD_HEAD.size

_P = ParamSpec("_P")
_T = TypeVar("_T")


@final
@attrs.frozen
class IndexRecord:
    """A live id's entry as read back, with whether a delivery mark was written for it since its publish."""

    seq_id: int
    entry: bytes
    delivered: bool


@final
class _Segment:
    """RAM kept per segment: live ids as a bitmap, counters, and the records written since the last sync."""

    __slots__ = ("bits", "fd", "live", "pending", "records", "size")

    def __init__(self, ids: int, size: int = 0) -> None:
        self.bits = bytearray((ids + 7) // 8)
        self.live = 0
        self.records = 0
        """Records in the file and the pending buffer: the garbage fraction is 1 - live / records."""
        self.size = size
        """Bytes in the file plus the pending buffer: where the next record lands."""
        self.pending = bytearray()
        self.fd = -1

    def is_live(self, offset: int) -> bool:
        return bool(self.bits[offset >> 3] & (1 << (offset & 7)))

    def set_live(self, offset: int) -> None:
        self.bits[offset >> 3] |= 1 << (offset & 7)

    def clear_live(self, offset: int) -> None:
        self.bits[offset >> 3] &= ~(1 << (offset & 7)) & 0xFF

    def live_offsets(self, first: int = 0, limit: int | None = None) -> list[int]:
        """Up to ``limit`` live ids' offsets from ``first`` on, ascending."""
        found: list[int] = []
        bits = self.bits
        for byte_index in range(first >> 3, len(bits)):
            byte = bits[byte_index]
            if byte:
                base = byte_index << 3
                found.extend(base + b for b in range(8) if byte >> b & 1 and base + b >= first)
                if limit is not None and len(found) >= limit:
                    return found[:limit]
        return found


def _check_id(seq_id: int) -> None:
    if not isinstance(seq_id, int) or not 0 <= seq_id < _MAX_ID:
        msg = f"seq_id must be an int in 0..2**64-1, got {seq_id!r}"
        raise ValueError(msg)


@final
class SeqRangeIndex(FailStop):
    """A queue's entries by sequence id in ``directory``, in segment files of ``ids_per_segment`` ids each.

    Same public shape as ``QueueIndex`` (``publish``, ``ack``, ``read``, ``read_from``, ``seq_ids``,
    ``span``, ``sync``, ``collect_garbage``, ``close``), plus ``deliver`` and ``read_records`` for
    delivery marks. Blocking file calls: use it from a job or an I/O actor, never from a handler.
    ``parsed_segments``: how many segments' record offsets reads keep (reads that alternate between
    segments, a body store's, parse each only once).
    """

    _what = "queue index"

    def __init__(self, directory: str | os.PathLike[str], *, fs: FileSystem | None = None,
                 ids_per_segment: int = DEFAULT_IDS_PER_SEGMENT, parsed_segments: int = 1) -> None:
        if not isinstance(ids_per_segment, int) or ids_per_segment < 1:
            msg = f"ids_per_segment must be an int >= 1, got {ids_per_segment!r}"
            raise ValueError(msg)
        if not isinstance(parsed_segments, int) or parsed_segments < 1:
            msg = f"parsed_segments must be an int >= 1, got {parsed_segments!r}"
            raise ValueError(msg)
        self._directory = os.fspath(directory)
        self._fs: FileSystem = fs if fs is not None else OsFileSystem()
        self._ids = ids_per_segment
        self._segments: dict[int, _Segment] = {}
        self._dirty: set[int] = set()
        """Segments with records written since the last sync (pending, or flushed but not fsynced)."""
        self._names_changed = False
        self._written = 0
        self._synced_through = 0
        self._unsynced_records = 0
        self._cache: dict[int, dict[int, tuple[int, int, bool]]] = {}
        """The last ``parsed_segments`` segments parsed for a read, the one used last at the end: each live
        id's record (offset, size, delivered)."""
        self._parsed_segments = parsed_segments
        self._readers: dict[int, int] = {}
        """Descriptors open for reading, by segment, the one used last at the end."""
        self._writers: dict[int, None] = {}
        """Segments whose append descriptor is open, the one written last at the end."""
        self._failed: BaseException | None = None
        self._closed = False
        self.recovery: Recovery = self._guarded(self._recover)
        """What opening the index found and repaired."""

    # -- writes -----------------------------------------------------------------------------------

    def publish(self, seq_id: int, entry: bytes) -> int:
        """Record ``entry`` under ``seq_id`` (durable after the next sync; a live id's entry is replaced).

        Returns the write's number."""
        _check_id(seq_id)
        self._check_open()
        number, offset = divmod(seq_id, self._ids)
        segment = self._segments.get(number)
        if segment is None:
            segment = self._segments[number] = _Segment(self._ids)
        record = frame(_RECORD_HEAD.pack(_PUBLISH, seq_id) + entry)
        locations = self._cache.get(number)
        if locations is not None:
            locations[seq_id] = (segment.size, len(record), False)
        if not segment.is_live(offset):
            segment.set_live(offset)
            segment.live += 1
        return self._append(number, segment, record)

    def deliver(self, seq_id: int) -> int:
        """Mark ``seq_id`` delivered (durable after the next sync). Raises KeyError if it is not live."""
        number, segment = self._live_segment(seq_id)
        locations = self._cache.get(number)
        if locations is not None:
            offset, size, _ = locations[seq_id]
            locations[seq_id] = (offset, size, True)
        return self._append(number, segment, frame(_RECORD_HEAD.pack(_DELIVER, seq_id)))

    def ack(self, seq_id: int) -> int:
        """Delete ``seq_id``'s entry (durable after the next sync). Raises KeyError if it is not live.

        A segment left with no live id is deleted at the next sync."""
        number, segment = self._live_segment(seq_id)
        segment.clear_live(seq_id - number * self._ids)
        segment.live -= 1
        locations = self._cache.get(number)
        if locations is not None:
            del locations[seq_id]
        return self._append(number, segment, frame(_RECORD_HEAD.pack(_ACK, seq_id)))

    def _live_segment(self, seq_id: int) -> tuple[int, _Segment]:
        _check_id(seq_id)
        self._check_open()
        number, offset = divmod(seq_id, self._ids)
        segment = self._segments.get(number)
        if segment is None or not segment.is_live(offset):
            msg = f"seq_id {seq_id} is not in the index"
            raise KeyError(msg)
        return number, segment

    def _append(self, number: int, segment: _Segment, record: bytes) -> int:
        segment.pending += record
        segment.size += len(record)
        segment.records += 1
        self._dirty.add(number)
        self._written += 1
        self._unsynced_records += 1
        return self._written

    def sync(self) -> Synced:
        """Group commit: make every publish, delivery mark and ack since the last sync durable at once."""
        self._check_open()
        return self._guarded(self._sync)

    def _sync(self) -> Synced:
        files = 0
        for number in sorted(self._dirty):
            segment = self._segments[number]
            if segment.live == 0:  # every id acked: the whole file goes, unwritten records with it
                self._delete_segment(number)
                continue
            self._flush(number, segment)
            self._fs.fsync(segment.fd)
            files += 1
        self._dirty.clear()
        if self._names_changed:
            self._fs.fsync_dir(self._directory)
            self._names_changed = False
        writers = self._writers
        while len(writers) > _OPEN_FILES:  # every segment is synced: any descriptor may close
            number = next(iter(writers))
            del writers[number]
            segment = self._segments[number]
            self._fs.close(segment.fd)
            segment.fd = -1
        synced = Synced(self._written, self._unsynced_records, files)
        self._synced_through, self._unsynced_records = self._written, 0
        return synced

    def _flush(self, number: int, segment: _Segment) -> None:
        """Write ``segment``'s pending records to its file (not yet durable: ``sync`` fsyncs)."""
        if not segment.pending:
            return
        if segment.fd < 0:
            path = self._path(number)
            if segment.size == len(segment.pending):  # no file yet: its name must be synced too
                self._names_changed = True
            segment.fd = self._fs.open_append(path)
        self._writers.pop(number, None)
        self._writers[number] = None
        self._fs.write(segment.fd, segment.pending)
        segment.pending = bytearray()

    def _delete_segment(self, number: int) -> None:
        segment = self._segments.pop(number)
        self._writers.pop(number, None)
        for fd in (segment.fd, self._readers.pop(number, -1)):
            if fd >= 0:
                self._fs.close(fd)
        if segment.size > len(segment.pending) or segment.fd >= 0:  # the file exists
            self._fs.unlink(self._path(number))
            self._names_changed = True
        self._cache.pop(number, None)

    # -- reads ------------------------------------------------------------------------------------

    def __contains__(self, seq_id: object) -> bool:
        if not isinstance(seq_id, int) or not 0 <= seq_id < _MAX_ID:
            return False
        number, offset = divmod(seq_id, self._ids)
        segment = self._segments.get(number)
        return segment is not None and segment.is_live(offset)

    def __len__(self) -> int:
        return sum(segment.live for segment in self._segments.values())

    def seq_ids(self, start: int = 0, limit: int | None = None) -> list[int]:
        """Up to ``limit`` live ids from ``start`` on, ascending (from the bitmaps: no file is read)."""
        found: list[int] = []
        for number in sorted(n for n in self._segments if (n + 1) * self._ids > start):
            base = number * self._ids
            found.extend(base + offset for offset in self._segments[number].live_offsets(max(0, start - base)))
            if limit is not None and len(found) >= limit:
                return found[:limit]
        return found

    def span(self) -> tuple[int, int] | None:
        """The first live id and one past the last (what a recovered queue's delta covers); None when empty."""
        live = sorted(n for n, segment in self._segments.items() if segment.live)
        if not live:
            return None
        first = live[0] * self._ids + self._segments[live[0]].live_offsets()[0]
        last = live[-1] * self._ids + self._segments[live[-1]].live_offsets()[-1]
        return first, last + 1

    def read(self, seq_id: int) -> bytes:
        """The entry of ``seq_id``. Raises KeyError if there is none."""
        records = self.read_records(seq_id, 1) if seq_id in self else []
        if not records or records[0].seq_id != seq_id:  # the id is live, so it is the first from itself
            msg = f"seq_id {seq_id} is not in the index"
            raise KeyError(msg)
        return records[0].entry

    def read_from(self, start: int, limit: int) -> list[tuple[int, bytes]]:
        """Up to ``limit`` (seq_id, entry) pairs from ``start`` on, ascending."""
        return [(record.seq_id, record.entry) for record in self.read_records(start, limit)]

    def read_records(self, start: int, limit: int) -> list[IndexRecord]:
        """Up to ``limit`` live records from ``start`` on, ascending, reading only the segments they are in."""
        self._check_open()
        return self._guarded(self._read_records, start, limit, _MAX_ID)

    def read_range(self, start: int, end: int) -> list[IndexRecord]:
        """Every live record with ``start <= seq_id < end``, ascending (what a queue's ``ReadIndex`` asks for).

        Unlike ``read_records(start, end - start)``, it never reads a segment past ``end`` when ids
        in the range are already acked."""
        self._check_open()
        return self._guarded(self._read_records, start, max(0, end - start), end)

    def _read_records(self, start: int, limit: int, end: int) -> list[IndexRecord]:
        found: list[IndexRecord] = []
        for number in sorted(n for n, s in self._segments.items() if s.live and (n + 1) * self._ids > start):
            if len(found) >= limit or number * self._ids >= end:
                break
            base = number * self._ids
            offsets = self._segments[number].live_offsets(max(0, start - base), limit - len(found))
            wanted = [base + offset for offset in offsets if base + offset < end]  # no sort of the segment
            if wanted:
                found.extend(self._read_segment(number, wanted))
        return found

    def read_each(self, seq_ids: Sequence[int]) -> list[bytes | None]:
        """The entry of each of ``seq_ids``, in that order, None for an id not live; one read per segment.

        Unlike ``read``, it finds each id's segment directly, never walking the others (a body store's reads)."""
        self._check_open()
        return self._guarded(self._read_each, seq_ids)

    def _read_each(self, seq_ids: Sequence[int]) -> list[bytes | None]:
        by_segment: dict[int, list[int]] = {}
        for seq_id in seq_ids:
            if seq_id in self:
                by_segment.setdefault(seq_id // self._ids, []).append(seq_id)
        found = {record.seq_id: record.entry for number, wanted in by_segment.items()
                 for record in self._read_segment(number, wanted)}
        return [found.get(seq_id) for seq_id in seq_ids]

    def _read_segment(self, number: int, wanted: list[int]) -> list[IndexRecord]:
        """The records of ``wanted`` (live ids of segment ``number``), each checked against its CRC.

        Records close together on disk are read with one pread; a gap over ``_PARSE_WINDOW`` starts another."""
        locations = self._locations(number)
        spans = sorted({locations[seq_id][:2] for seq_id in wanted})
        data: dict[int, tuple[int, memoryview]] = {}  # a record's offset -> (where its run starts, the run)
        run = 0
        while run < len(spans):
            last = run
            while last + 1 < len(spans) and spans[last + 1][0] - sum(spans[last]) <= _PARSE_WINDOW:
                last += 1
            first, end = spans[run][0], sum(spans[last])
            read = memoryview(self._pread(number, first, end - first))
            data.update((offset, (first, read)) for offset, _ in spans[run : last + 1])
            run = last + 1
        found: list[IndexRecord] = []
        for seq_id in wanted:
            offset, size, delivered = locations[seq_id]
            first, read = data[offset]
            start = offset - first
            if zlib.crc32(read[start + 4 : start + size]) != HEADER.unpack_from(read, start)[0]:
                msg = f"queue index {self._directory}: the record of seq_id {seq_id} in segment {number} fails its CRC"
                raise CorruptRecord(msg)
            found.append(IndexRecord(seq_id, bytes(read[start + _HEAD_SIZE : start + size]), delivered))
        return found

    def _locations(self, number: int) -> dict[int, tuple[int, int, bool]]:
        """Where each live id of segment ``number`` has its last publish, parsed from the file once and cached.

        The parse reads the file a window at a time and skips the payloads that run past it, so a
        segment of large records costs RAM for its heads only."""
        cache = self._cache
        cached = cache.pop(number, None)
        if cached is not None:
            cache[number] = cached
            return cached
        segment = self._segments[number]
        self._flush(number, segment)
        locations: dict[int, tuple[int, int, bool]] = {}
        unpack_header, unpack_head = HEADER.unpack_from, _RECORD_HEAD.unpack_from
        end = segment.size  # the file's size, now that it is flushed
        offset = window_start = 0
        window = b""
        while offset + _HEAD_SIZE <= end:  # record heads only: each record's CRC is checked when it is read
            at = offset - window_start
            if at + _HEAD_SIZE > len(window):
                window_start, at = offset, 0
                window = self._pread(number, offset, min(_PARSE_WINDOW, end - offset))
                if len(window) < _HEAD_SIZE:
                    break
            length = unpack_header(window, at)[1]
            if not _RECORD_HEAD.size <= length <= MAX_PAYLOAD:
                break  # a length damaged since the open: where the next record starts is unknowable
            kind, seq_id = unpack_head(window, at + HEADER.size)
            size = HEADER.size + length
            if kind == _PUBLISH:
                locations[seq_id] = (offset, size, False)
            elif kind == _DELIVER and seq_id in locations:
                place = locations[seq_id]
                locations[seq_id] = (place[0], place[1], True)
            offset += size
        base = number * self._ids
        locations = {i: place for i, place in locations.items() if segment.is_live(i - base)}
        if len(cache) >= self._parsed_segments:
            del cache[next(iter(cache))]
        cache[number] = locations
        return locations

    def _pread(self, number: int, offset: int, size: int) -> bytes:
        segment = self._segments[number]
        self._flush(number, segment)
        readers = self._readers
        fd = readers.pop(number, None)
        if fd is None:
            fd = self._fs.open_read(self._path(number))
            if len(readers) >= _OPEN_FILES:
                oldest = next(iter(readers))
                self._fs.close(readers.pop(oldest))
        readers[number] = fd
        return self._fs.pread(fd, size, offset)

    # -- garbage collection -----------------------------------------------------------------------

    def collect_garbage(self, threshold: float = 0.5) -> Collected:
        """Rewrite every segment whose live ids are under ``threshold`` of its records with its live ones only.

        Needed only when ids are acked out of order: a segment fully acked is deleted at sync anyway.
        Each rewrite goes to a temporary file, synced, then renamed over the segment."""
        if not 0 <= threshold <= 1:
            msg = f"threshold must be in 0..1, got {threshold!r}"
            raise ValueError(msg)
        self._check_open()
        self._guarded(self._sync)
        return self._guarded(self._collect, threshold)

    def _collect(self, threshold: float) -> Collected:
        before = sum(segment.size for segment in self._segments.values())
        written: list[int] = []
        copied = 0
        for number in sorted(self._segments):
            segment = self._segments[number]
            if segment.records == 0 or segment.live / segment.records >= threshold:
                continue
            locations = self._locations(number)
            parts: list[bytes] = []
            for seq_id in sorted(locations):
                offset, size, delivered = locations[seq_id]
                parts.append(self._pread(number, offset, size))  # the live records only, not the whole file
                if delivered:
                    parts.append(frame(_RECORD_HEAD.pack(_DELIVER, seq_id)))
            content = b"".join(parts)
            path = self._path(number)
            fd = self._fs.open_append(path + _TEMPORARY_SUFFIX)
            try:
                self._fs.write(fd, content)
                self._fs.fsync(fd)
            finally:
                self._fs.close(fd)
            for old in (segment.fd, self._readers.pop(number, -1)):
                if old >= 0:
                    self._fs.close(old)
            segment.fd = -1
            self._writers.pop(number, None)
            self._fs.rename(path + _TEMPORARY_SUFFIX, path)
            self._names_changed = True
            segment.size, segment.records = len(content), len(parts)
            self._cache.pop(number, None)
            written.append(number)
            copied += len(locations)
        if self._names_changed:
            self._fs.fsync_dir(self._directory)
            self._names_changed = False
        after = sum(segment.size for segment in self._segments.values())
        if written:
            logger.info("queue index %s: garbage collection rewrote segments %s, copied %d records, %d -> %d bytes",
                        self._directory, written, copied, before, after)
        return Collected((), tuple(written), copied, before, after)

    # -- recovery ---------------------------------------------------------------------------------

    def _recover(self) -> Recovery:
        """Scan every segment: live ids from its records in order; cut a torn tail; delete what is all acked."""
        self._fs.makedirs(self._directory)
        names = sorted(self._fs.listdir(self._directory))
        temporary = tuple(name for name in names if name.endswith(_TEMPORARY_SUFFIX))
        for name in temporary:  # a rewrite a crash cut short: the segment it would replace is intact
            logger.warning("queue index %s: removing %s, left by a garbage collection that did not finish",
                           self._directory, name)
            self._fs.unlink(os.path.join(self._directory, name))
        truncated: list[Truncation] = []
        damaged: list[Truncation] = []
        records = 0
        emptied = False
        unpack = _RECORD_HEAD.unpack_from
        for name in names:
            if not name.endswith(SEGMENT_SUFFIX) or not name[: -len(SEGMENT_SUFFIX)].isdigit():
                continue
            number = int(name[: -len(SEGMENT_SUFFIX)])
            path = os.path.join(self._directory, name)
            data = self._fs.read(path)
            scanned = scan(data)
            segment = _Segment(self._ids, scanned.end)
            base, top = number * self._ids, (number + 1) * self._ids
            bad: tuple[int, str] | None = None
            for offset, size in scanned.spans:
                kind, seq_id = unpack(data, offset + HEADER.size) if size >= _HEAD_SIZE else (0, -1)
                if kind not in (_PUBLISH, _DELIVER, _ACK) or not base <= seq_id < top:
                    bad = (offset, f"record of kind {kind} for seq_id {seq_id} in the segment of {base}..{top - 1}")
                    break
                segment.records += 1
                if kind == _PUBLISH and not segment.is_live(seq_id - base):
                    segment.set_live(seq_id - base)
                    segment.live += 1
                elif kind == _ACK and segment.is_live(seq_id - base):
                    segment.clear_live(seq_id - base)
                    segment.live -= 1
            records += segment.records
            if bad is not None:
                cut = Truncation(number, bad[0], len(data) - bad[0], bad[1])
                damaged.append(cut)
                logger.error("queue index %s: segment %d holds a record that is no index record at offset %d: "
                             "moving %d bytes to %s%s (%s)", self._directory, number, cut.offset, cut.discarded,
                             name, _CORRUPT_SUFFIX, cut.reason)
                self._set_aside(path, data, cut.offset)
                segment.size = cut.offset
            elif scanned.damage is not None:
                damage = scanned.damage
                cut = Truncation(number, damage.offset, damage.discarded, damage.reason)
                (truncated if damage.kind == "torn" else damaged).append(cut)
                logger.log(logging.WARNING if damage.kind == "torn" else logging.ERROR,
                           "queue index %s: segment %d has a %s record at offset %d: cutting %d bytes (%s)",
                           self._directory, number, damage.kind, damage.offset, damage.discarded, damage.reason)
                if damage.kind == "torn":
                    self._fs.truncate(path, damage.offset)
                else:
                    self._set_aside(path, data, damage.offset)
            if segment.live == 0:
                self._fs.unlink(path)
                emptied = True
                continue
            self._segments[number] = segment
        if temporary or emptied:
            self._fs.fsync_dir(self._directory)
        recovery = Recovery(segments=len(self._segments), records=records, keys=len(self),
                            truncated=tuple(truncated), damaged=tuple(damaged), finished_compactions=(),
                            removed_temporary=temporary)
        logger.info("queue index %s: recovered %d live ids from %d records in %d segments", self._directory,
                    recovery.keys, records, recovery.segments)
        return recovery

    def _set_aside(self, path: str, data: bytes, offset: int) -> None:
        """Copy a segment's bytes from a corrupt record on to ``path + .corrupt`` for inspection, then cut them.

        Unlike ``SegmentLog``, which leaves a corrupt segment as it is and never appends to it, the index
        must go on appending acks to the segment of their ids: the damaged tail is kept beside it."""
        fd = self._fs.open_append(path + _CORRUPT_SUFFIX)
        try:
            self._fs.write(fd, data[offset:])
            self._fs.fsync(fd)
        finally:
            self._fs.close(fd)
        self._fs.fsync_dir(self._directory)
        self._fs.truncate(path, offset)

    # -- lifecycle --------------------------------------------------------------------------------

    def close(self) -> None:
        """Sync what is pending and close every file (nothing else to save: recovery scans the segments)."""
        if self._closed:
            return
        try:
            if self._failed is None:
                self._guarded(self._sync)
        finally:
            self._closed = True
            fds = [segment.fd for segment in self._segments.values()] + list(self._readers.values())
            for fd in fds:
                if fd >= 0:
                    try:
                        self._fs.close(fd)
                    except OSError:
                        logger.exception("queue index %s: closing a file failed", self._directory)
            self._readers.clear()
            self._writers.clear()
            for segment in self._segments.values():
                segment.fd = -1

    def __enter__(self) -> SeqRangeIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _path(self, number: int) -> str:
        return os.path.join(self._directory, f"{number:010d}{SEGMENT_SUFFIX}")

