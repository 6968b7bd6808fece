"""Which records of which segments are live, with no I/O: the bookkeeping behind appends, GC and recovery.

A put is live while it is its key's latest record. A tombstone (``Delete``) is live while the
segment holding the put it cancels still exists: until then, recovery could find that put and needs
the tombstone's higher sequence number to know the key is gone. Everything else is garbage, and a
segment whose live bytes fall under a fraction of its size is worth compacting.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Final, final

import attrs

from ._segment_codec import CorruptRecord, Head


@final
@attrs.frozen(order=True)
class RecordLocation:
    """Where a record is: its segment, its offset there and its framed size."""

    segment: int
    offset: int
    size: int


def _pack(record: RecordLocation) -> int:
    """A location as one int (segment, offset, size): a live key costs one small int, not an object."""
    return (record.segment << 64) | (record.offset << 32) | record.size


def _unpack(location: int) -> RecordLocation:
    return RecordLocation(location >> 64, (location >> 32) & 0xFFFFFFFF, location & 0xFFFFFFFF)


@final
@attrs.frozen
class TableStats:
    """A snapshot: segments, live keys, live tombstones, live bytes and all bytes."""

    segments: int
    keys: int
    tombstones: int
    live_bytes: int
    total_bytes: int


@final
class SegmentTable:
    """Live puts and tombstones per segment, and which segments to compact.

    Held per live key: its packed location. Tombstones are held only as totals per (target segment,
    segment holding them), which is all their liveness needs: they all die when the target goes.
    Which records of a segment are live is answered record by record (``is_live_put``,
    ``tombstone_needed``) while garbage collection reads the segment.
    """

    def __init__(self) -> None:
        self._keys: dict[bytes, int] = {}
        self._sizes: dict[int, int] = {}
        self._live: dict[int, int] = {}
        self._tombstones: dict[int, dict[int, list[int]]] = {}
        """target segment -> segment holding tombstones for it -> [count, bytes]."""
        self._holding: dict[int, set[int]] = {}
        """segment -> the targets of the tombstones it holds."""
        self._tombstone_count = 0

    # -- building -------------------------------------------------------------------------------

    def add_segment(self, segment: int, size: int = 0) -> None:
        """A new (or recovered) segment of ``size`` bytes, none of them live yet."""
        if segment in self._sizes:
            msg = f"segment {segment} is already in the table"
            raise ValueError(msg)
        self._sizes[segment] = size
        self._live[segment] = 0

    def grow(self, segment: int, end: int) -> None:
        """Segment ``segment`` now holds ``end`` bytes (a record that is never live, such as a header)."""
        self._check_present(segment)
        self._sizes[segment] = max(self._sizes[segment], end)

    def add_put(self, key: bytes, record: RecordLocation) -> None:
        """``key``'s value is at ``record``.

        Raises:
            ValueError: ``key`` is already live (overwriting would leave an older put that a later
                delete's tombstone does not cover).
        """
        if key in self._keys:
            msg = f"key {key!r} is already stored at {_unpack(self._keys[key])}; delete it before storing it again"
            raise ValueError(msg)
        self.grow(record.segment, record.offset + record.size)
        self._keys[key] = _pack(record)
        self._live[record.segment] += record.size

    def delete(self, key: bytes) -> RecordLocation:
        """``key`` is deleted: its put stops being live. Returns where the put is (the tombstone's target).

        Raises:
            KeyError: ``key`` is not live.
        """
        record = _unpack(self._keys.pop(key))
        self._live[record.segment] -= record.size
        return record

    def add_tombstone(self, record: RecordLocation, target: int) -> bool:
        """A tombstone at ``record`` cancelling a put in segment ``target``; live only if ``target`` exists."""
        self.grow(record.segment, record.offset + record.size)
        if target not in self._sizes:
            return False
        self._count_tombstone(record.segment, target, record.size, 1)
        return True

    def _count_tombstone(self, holder: int, target: int, size: int, count: int) -> None:
        totals = self._tombstones.setdefault(target, {}).setdefault(holder, [0, 0])
        totals[0] += count
        totals[1] += size
        self._holding.setdefault(holder, set()).add(target)
        self._live[holder] += size
        self._tombstone_count += count

    def move_put(self, key: bytes, new: RecordLocation) -> None:
        """``key``'s live put was copied to ``new`` (by garbage collection)."""
        old = _unpack(self._keys[key])
        self._live[old.segment] -= old.size
        self.grow(new.segment, new.offset + new.size)
        self._keys[key] = _pack(new)
        self._live[new.segment] += new.size

    def move_tombstone(self, old: RecordLocation, target: int, new: RecordLocation) -> None:
        """A live tombstone for ``target`` was copied from ``old`` to ``new`` (by garbage collection)."""
        self.grow(new.segment, new.offset + new.size)
        self._count_tombstone(old.segment, target, -old.size, -1)
        self._count_tombstone(new.segment, target, new.size, 1)

    def remove_segments(self, segments: Iterable[int]) -> None:
        """These segments are deleted: tombstones that cancel puts in them stop being live.

        Raises:
            ValueError: one of them still holds other live records (they must be moved first).
        """
        gone = set(segments)
        for segment in gone:
            self._check_present(segment)
            for holder, (count, size) in self._tombstones.pop(segment, {}).items():
                self._live[holder] -= size
                self._tombstone_count -= count
                self._holding[holder].discard(segment)
        for segment in sorted(gone):
            if self._live[segment]:
                msg = f"segment {segment} still holds {self._live[segment]} live bytes"
                raise ValueError(msg)
        for segment in gone:
            for target in self._holding.pop(segment, set()):
                self._tombstones[target].pop(segment, None)
            del self._sizes[segment], self._live[segment]

    def _check_present(self, segment: int) -> None:
        if segment not in self._sizes:
            msg = f"segment {segment} is not in the table (present: {sorted(self._sizes)[:10]})"
            raise KeyError(msg)

    # -- reading --------------------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def location(self, key: bytes) -> RecordLocation:
        """Where ``key``'s value is. Raises KeyError if it is not live."""
        return _unpack(self._keys[key])

    def disk_order(self, key: bytes) -> int:
        """A sort key that orders live keys as their values lie on disk (segment, then offset): the packed location."""
        return self._keys[key]

    def keys(self) -> Iterable[bytes]:
        """The live keys, in no particular order."""
        return self._keys.keys()

    def locations(self) -> Iterable[tuple[bytes, RecordLocation]]:
        """Every live key and where its value is."""
        return ((key, _unpack(location)) for key, location in self._keys.items())

    def is_live_put(self, key: bytes, record: RecordLocation) -> bool:
        """Whether the put of ``key`` at ``record`` is the live one."""
        return self._keys.get(key) == _pack(record)

    def tombstone_needed(self, target: int, leaving: Iterable[int] = ()) -> bool:
        """Whether a tombstone for ``target`` must be kept when the segments ``leaving`` go together."""
        return target in self._sizes and target not in leaving

    def segments(self) -> list[int]:
        """The segments present, in ascending order."""
        return sorted(self._sizes)

    def stats(self) -> TableStats:
        """Counts and byte totals, for reports and benchmarks."""
        return TableStats(
            segments=len(self._sizes),
            keys=len(self._keys),
            tombstones=self._tombstone_count,
            live_bytes=sum(self._live.values()),
            total_bytes=sum(self._sizes.values()),
        )

    def size(self, segment: int) -> int:
        """The bytes ``segment`` holds."""
        self._check_present(segment)
        return self._sizes[segment]

    def live_fraction(self, segment: int) -> float:
        """Live bytes over all bytes of ``segment`` (1.0 for an empty one)."""
        self._check_present(segment)
        size = self._sizes[segment]
        return self._live[segment] / size if size else 1.0

    def next_compaction(self, threshold: float, exclude: Iterable[int], max_bytes: int) -> tuple[int, ...]:
        """Segments to compact together now: those under ``threshold`` live, at most ``max_bytes`` live in all.

        Returns:
            Ascending segment ids (empty when nothing is worth compacting). A batch always holds
            at least one segment, even one whose live bytes alone pass ``max_bytes``.
        """
        if not 0.0 < threshold <= 1.0:
            msg = f"threshold must be in (0, 1], got {threshold}"
            raise ValueError(msg)
        skip = set(exclude)
        batch: list[int] = []
        live = 0
        for segment in sorted(self._sizes):
            size, segment_live = self._sizes[segment], self._live[segment]
            if segment in skip or size == 0 or segment_live >= threshold * size:
                continue
            if batch and live + segment_live > max_bytes:
                break
            batch.append(segment)
            live += segment_live
        return tuple(batch)

    # -- clean shutdown -------------------------------------------------------------------------

    def dump(self, next_seq: int, next_segment: int) -> bytes:
        """The table, the log's next sequence number and next segment number, as bytes ending in a CRC.

        The next segment number is saved because a deleted segment's number must never come back: a
        tombstone elsewhere may still name it, and would be taken for one cancelling the newcomer's puts.
        """
        holders = [(holder, target, count, size) for target, by_holder in self._tombstones.items()
                   for holder, (count, size) in by_holder.items() if count]
        head = _SNAPSHOT_HEAD.pack(
            _SNAPSHOT_MAGIC, next_seq, next_segment, len(self._sizes), len(holders), len(self._keys))
        parts = [head]
        parts.extend(_SNAPSHOT_SEGMENT.pack(segment, self._sizes[segment]) for segment in sorted(self._sizes))
        parts.extend(_SNAPSHOT_TOMBSTONES.pack(*totals) for totals in holders)
        pack = _SNAPSHOT_KEY.pack
        for key, location in self._keys.items():
            parts.append(pack(len(key), location >> 64, (location >> 32) & 0xFFFFFFFF, location & 0xFFFFFFFF))
            parts.append(key)
        body = b"".join(parts)
        return body + _SNAPSHOT_CRC.pack(zlib.crc32(body))

    @classmethod
    def load(cls, data: bytes) -> tuple[SegmentTable, int, int]:
        """The table, next sequence number and next segment number ``dump`` wrote.

        Raises:
            CorruptRecord: the bytes are not a whole snapshot (wrong CRC, magic or length).
        """
        view = memoryview(data)
        if len(view) < _SNAPSHOT_HEAD.size + _SNAPSHOT_CRC.size or zlib.crc32(view[:-4]) != (
                _SNAPSHOT_CRC.unpack_from(view, len(view) - 4)[0]):
            msg = f"snapshot of {len(view)} bytes fails its CRC"
            raise CorruptRecord(msg)
        magic, next_seq, next_segment, segments, holders, keys = _SNAPSHOT_HEAD.unpack_from(view)
        if magic != _SNAPSHOT_MAGIC:
            msg = f"snapshot starts with {magic!r}, expected {_SNAPSHOT_MAGIC!r}"
            raise CorruptRecord(msg)
        table = cls()
        offset = _SNAPSHOT_HEAD.size
        try:
            listed = view[offset : offset + segments * _SNAPSHOT_SEGMENT.size]
            for segment, size in _SNAPSHOT_SEGMENT.iter_unpack(listed):
                table.add_segment(segment, size)
            offset += segments * _SNAPSHOT_SEGMENT.size
            tombstones = view[offset : offset + holders * _SNAPSHOT_TOMBSTONES.size]
            for holder, target, count, size in _SNAPSHOT_TOMBSTONES.iter_unpack(tombstones):
                table._count_tombstone(holder, target, size, count)
            offset += holders * _SNAPSHOT_TOMBSTONES.size
            unpack, head = _SNAPSHOT_KEY.unpack_from, _SNAPSHOT_KEY.size
            live, locations = table._live, table._keys
            for _ in range(keys):
                length, segment, record_offset, size = unpack(view, offset)
                offset += head
                locations[bytes(view[offset : offset + length])] = (segment << 64) | (record_offset << 32) | size
                live[segment] += size
                offset += length
        except (struct.error, KeyError, ValueError) as error:
            msg = f"snapshot does not parse: {error}"
            raise CorruptRecord(msg) from error
        if offset != len(view) - _SNAPSHOT_CRC.size or len(locations) != keys:
            msg = f"snapshot holds {len(view) - offset - _SNAPSHOT_CRC.size} bytes more or fewer than it says"
            raise CorruptRecord(msg)
        return table, next_seq, next_segment

    # -- recovery -------------------------------------------------------------------------------


_SNAPSHOT_MAGIC: Final = b"CVSNAP02"  # 01 had no next segment number: it is read as no snapshot (a scan)
_SNAPSHOT_HEAD: Final = struct.Struct("<8sQIIII")  # magic, next seq, next segment, segments, tombstone totals, keys
_SNAPSHOT_SEGMENT: Final = struct.Struct("<IQ")  # segment, size
_SNAPSHOT_TOMBSTONES: Final = struct.Struct("<IIQQ")  # holder, target, count, bytes
_SNAPSHOT_KEY: Final = struct.Struct("<HIII")  # key length, segment, offset, size; then the key
_SNAPSHOT_CRC: Final = struct.Struct("<I")

_PUT_FLAG: Final = 1 << 96
_LOCATION: Final = _PUT_FLAG - 1


@final
class TableBuilder:
    """Recovery's table, one segment at a time: each key resolved by its highest sequence number on disk.

    Per key it holds one int, ``seq | put? | location`` from the high bits down, so the largest is
    the latest record, and between equal copies (a compaction's source and its output, both present
    after a crash) the one in the higher segment. Tombstones are counted per (holder, target).
    """

    def __init__(self) -> None:
        self._latest: dict[bytes, int] = {}
        self._tombstones: dict[tuple[int, int], list[int]] = {}
        self.top = 0
        """The highest sequence number seen."""
        self.top_target = 0
        """The highest segment a tombstone names (it may be gone: its number must not be used again)."""

    def add(self, segment: int, heads: Iterable[Head]) -> None:
        """The heads read from ``segment`` (segments may come in any order)."""
        latest, top, top_target = self._latest, self.top, self.top_target
        base = segment << 64
        for offset, size, seq, key, target in heads:
            top = max(top, seq)
            location = base | (offset << 32) | size
            if target >= 0:
                top_target = max(top_target, target)
                totals = self._tombstones.setdefault((segment, target), [0, 0])
                totals[0] += 1
                totals[1] += size
                value = (seq << 97) | location
            else:
                value = (seq << 97) | _PUT_FLAG | location
            best = latest.get(key)
            if best is None or value > best:
                latest[key] = value
        self.top, self.top_target = top, top_target

    def build(self, sizes: Mapping[int, int]) -> SegmentTable:
        """The table of the segments in ``sizes`` (those still present, with their valid lengths)."""
        table = SegmentTable()
        for segment, size in sizes.items():
            table.add_segment(segment, size)
        latest, self._latest = self._latest, {}
        keys, live = table._keys, table._live  # noqa: SLF001  (the table's own builder, in bulk)
        for key, value in latest.items():
            if value & _PUT_FLAG:
                location = value & _LOCATION
                segment = location >> 64
                if segment in live:
                    keys[key] = location
                    live[segment] += location & 0xFFFFFFFF
        del latest
        for (holder, target), (count, size) in self._tombstones.items():
            if holder in sizes and target in sizes:
                table._count_tombstone(holder, target, size, count)  # noqa: SLF001
        return table
