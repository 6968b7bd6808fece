"""Which records of which segments are live, with no I/O: the bookkeeping behind appends, GC and recovery.

A put is live while it is its key's latest record. A tombstone (``Delete``) is live while the
segment holding the put it cancels still exists: until then, recovery could find that put and needs
the tombstone's higher sequence number to know the key is gone. Everything else is garbage, and a
segment whose live bytes fall under a fraction of its size is worth compacting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import final

import attrs

from ._segment_codec import Head


@final
@attrs.frozen(order=True)
class Record:
    """Where a record is: its segment, its offset there and its framed size."""

    segment: int
    offset: int
    size: int


@final
@attrs.define(eq=False)
class _Segment:
    size: int = 0
    live_bytes: int = 0
    live: dict[int, bytes | int] = attrs.Factory(dict)
    """Live records by offset: the key of a put, or the target segment of a tombstone."""
    sizes: dict[int, int] = attrs.Factory(dict)


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
    """Live puts and tombstones per segment, and which segments to compact."""

    def __init__(self) -> None:
        self._keys: dict[bytes, Record] = {}
        self._segments: dict[int, _Segment] = {}
        self._tombstones_by_target: dict[int, set[Record]] = {}
        self._tombstones = 0

    # -- building -------------------------------------------------------------------------------

    def add_segment(self, segment: int, size: int = 0) -> None:
        """A new (or recovered) segment of ``size`` bytes, none of them live yet."""
        if segment in self._segments:
            msg = f"segment {segment} is already in the table"
            raise ValueError(msg)
        self._segments[segment] = _Segment(size=size)

    def grow(self, segment: int, end: int) -> None:
        """Segment ``segment`` now holds ``end`` bytes (a record that is never live, such as a header)."""
        state = self._segment(segment)
        state.size = max(state.size, end)

    def add_put(self, key: bytes, record: Record) -> None:
        """``key``'s value is at ``record``.

        Raises:
            ValueError: ``key`` is already live (overwriting would leave an older put that a later
                delete's tombstone does not cover).
        """
        if key in self._keys:
            msg = f"key {key!r} is already stored at {self._keys[key]}; delete it before storing it again"
            raise ValueError(msg)
        self._keys[key] = record
        self._add_live(record, key)

    def delete(self, key: bytes) -> Record:
        """``key`` is deleted: its put stops being live. Returns where the put is (the tombstone's target).

        Raises:
            KeyError: ``key`` is not live.
        """
        record = self._keys.pop(key)
        self._drop_live(record)
        return record

    def add_tombstone(self, record: Record, target: int) -> bool:
        """A tombstone at ``record`` cancelling a put in segment ``target``; live only if ``target`` exists."""
        if target not in self._segments:
            self.grow(record.segment, record.offset + record.size)
            return False
        self._tombstones_by_target.setdefault(target, set()).add(record)
        self._tombstones += 1
        self._add_live(record, target)
        return True

    def move(self, old: Record, new: Record) -> None:
        """The live record at ``old`` was copied to ``new`` (by garbage collection)."""
        what = self._segment(old.segment).live[old.offset]
        self._drop_live(old)
        if isinstance(what, bytes):
            self._keys[what] = new
        else:
            self._tombstones_by_target[what].discard(old)
            self._tombstones_by_target[what].add(new)
        self._add_live(new, what)

    def remove_segments(self, segments: Iterable[int]) -> None:
        """These segments are deleted: tombstones that cancel puts in them stop being live.

        Raises:
            ValueError: one of them still holds other live records (they must be moved first).
        """
        gone = set(segments)
        for segment in gone:
            self._segment(segment)
            for tombstone in self._tombstones_by_target.pop(segment, set()):
                self._drop_live(tombstone)
                self._tombstones -= 1
        for segment in sorted(gone):
            live = self._segments[segment].live
            if live:
                msg = f"segment {segment} still holds {len(live)} live records at offsets {sorted(live)[:5]}"
                raise ValueError(msg)
        for segment in gone:
            del self._segments[segment]

    def _add_live(self, record: Record, what: bytes | int) -> None:
        state = self._segment(record.segment)
        state.live[record.offset] = what
        state.sizes[record.offset] = record.size
        state.live_bytes += record.size
        state.size = max(state.size, record.offset + record.size)

    def _drop_live(self, record: Record) -> None:
        state = self._segments[record.segment]
        del state.live[record.offset]
        state.live_bytes -= state.sizes.pop(record.offset)

    def _segment(self, segment: int) -> _Segment:
        try:
            return self._segments[segment]
        except KeyError:
            msg = f"segment {segment} is not in the table (present: {sorted(self._segments)[:10]})"
            raise KeyError(msg) from None

    # -- reading --------------------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def location(self, key: bytes) -> Record:
        """Where ``key``'s value is. Raises KeyError if it is not live."""
        return self._keys[key]

    def keys(self) -> Iterable[bytes]:
        """The live keys, in no particular order."""
        return self._keys.keys()

    def segments(self) -> list[int]:
        """The segments present, in ascending order."""
        return sorted(self._segments)

    def stats(self) -> TableStats:
        """Counts and byte totals, for reports and benchmarks."""
        return TableStats(
            segments=len(self._segments),
            keys=len(self._keys),
            tombstones=self._tombstones,
            live_bytes=sum(s.live_bytes for s in self._segments.values()),
            total_bytes=sum(s.size for s in self._segments.values()),
        )

    def live_fraction(self, segment: int) -> float:
        """Live bytes over all bytes of ``segment`` (1.0 for an empty one)."""
        state = self._segment(segment)
        return state.live_bytes / state.size if state.size else 1.0

    def records_to_copy(self, batch: Iterable[int]) -> list[Record]:
        """The live records of the segments in ``batch``, in order, that a compaction of them must copy.

        A tombstone whose target is in the batch is left behind: the compacted segment names its
        sources, and recovery deletes all of them together, so that put and its tombstone go at once.
        """
        sources = set(batch)
        found = []
        for segment in sorted(sources):
            state = self._segment(segment)
            for offset, what in state.live.items():
                if isinstance(what, int) and what in sources:
                    continue
                found.append(Record(segment, offset, state.sizes[offset]))
        found.sort()
        return found

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
        for segment in sorted(self._segments):
            state = self._segments[segment]
            if segment in skip or state.size == 0 or state.live_bytes >= threshold * state.size:
                continue
            if batch and live + state.live_bytes > max_bytes:
                break
            batch.append(segment)
            live += state.live_bytes
        return tuple(batch)

    # -- recovery -------------------------------------------------------------------------------

    @classmethod
    def rebuild(cls, sizes: Mapping[int, int], heads: Mapping[int, Iterable[Head]]) -> tuple[SegmentTable, int]:
        """The table recovery finds: each key resolved by its highest sequence number on disk.

        Args:
            sizes: every segment present, and its valid length.
            heads: every put and delete read from each segment (``read_heads``).

        Returns:
            The table and the highest sequence number seen (0 if none).
        """
        table = cls()
        for segment, size in sizes.items():
            table.add_segment(segment, size)
        latest: dict[bytes, tuple[int, int, int, int, int]] = {}
        tombstones: list[tuple[Record, int]] = []
        top = 0
        for segment, found in heads.items():
            for offset, size, seq, key, target in found:
                top = max(top, seq)
                if target >= 0:
                    tombstones.append((Record(segment, offset, size), target))
                best = latest.get(key)
                if best is None or seq > best[0]:
                    latest[key] = (seq, segment, offset, size, target)
        for key, (_, segment, offset, size, target) in latest.items():
            if target < 0:
                table.add_put(key, Record(segment, offset, size))
        for record, target in tombstones:
            table.add_tombstone(record, target)
        return table, top
