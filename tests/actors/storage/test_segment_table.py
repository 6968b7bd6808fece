"""SegmentTable, the pure bookkeeping: its running counts against liveness recomputed from every record."""

from __future__ import annotations

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.storage import RecordLocation, SegmentTable, TableBuilder

KEYS = [b"a", b"b", b"c", b"d", b"e"]


@attrs.frozen
class Written:
    """A record as the model keeps it: where, what, and its sequence number."""

    record: RecordLocation
    seq: int
    key: bytes
    target: int  # -1 for a put


class TableAgainstRecords(RuleBasedStateMachine):
    """Appends, deletes, compactions and removals; live bytes per segment must match a recount."""

    def __init__(self) -> None:
        super().__init__()
        self.table = SegmentTable()
        self.records: list[Written] = []
        self.present = {1}
        self.active = 1
        self.next_segment = 2
        self.end = {1: 0}
        self.seq = 0
        self.table.add_segment(1)

    def _append(self, size: int) -> RecordLocation:
        record = RecordLocation(self.active, self.end[self.active], size)
        self.end[self.active] += size
        self.seq += 1
        return record

    def live(self) -> list[Written]:
        """Liveness from scratch: a put while it is its key's latest record; a tombstone while its target exists."""
        latest: dict[bytes, Written] = {}
        for written in self.records:
            if written.record.segment in self.present and (
                    written.key not in latest or written.seq > latest[written.key].seq):
                latest[written.key] = written
        puts = [w for w in latest.values() if w.target < 0]
        tombstones = [w for w in self.records if w.target >= 0 and w.record.segment in self.present
                      and w.target in self.present]
        return puts + tombstones

    @rule(key=st.sampled_from(KEYS), size=st.integers(min_value=10, max_value=50))
    def put(self, key: bytes, size: int) -> None:
        if key in self.table:
            return
        record = self._append(size)
        self.table.add_put(key, record)
        self.records.append(Written(record, self.seq, key, -1))

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key: bytes) -> None:
        if key not in self.table:
            return
        target = self.table.location(key).segment
        record = self._append(9)
        self.table.delete(key)
        self.table.add_tombstone(record, target)
        self.records.append(Written(record, self.seq, key, target))

    @rule()
    def rotate(self) -> None:
        self.active = self.next_segment
        self.next_segment += 1
        self.present.add(self.active)
        self.end[self.active] = 0
        self.table.add_segment(self.active)

    @precondition(lambda self: len(self.present) > 1)
    @rule(threshold=st.sampled_from([0.3, 0.7, 1.0]))
    def compact(self, threshold: float) -> None:
        batch = self.table.next_compaction(threshold, {self.active}, 10_000)
        if batch:
            self._compact(batch)

    @precondition(lambda self: len(self.present) > 1)
    @rule(data=st.data())
    def compact_any(self, data: st.DataObject) -> None:
        closed = sorted(self.present - {self.active})
        chosen = data.draw(st.lists(st.sampled_from(closed), min_size=1, unique=True), label="batch")
        self._compact(tuple(sorted(chosen)))

    def _compact(self, batch: tuple[int, ...]) -> None:
        output = self.next_segment
        self.next_segment += 1
        self.table.add_segment(output, 5)
        self.present.add(output)
        self.end[output] = 5
        for written in sorted(self.records, key=lambda w: w.record):
            if written.record.segment not in batch:
                continue
            copy = RecordLocation(output, self.end[output], written.record.size)
            if written.target < 0 and self.table.is_live_put(written.key, written.record):
                self.table.move_put(written.key, copy)
            elif written.target >= 0 and self.table.tombstone_needed(written.target, batch):
                self.table.move_tombstone(written.record, written.target, copy)
            else:
                continue
            self.end[output] += copy.size
            self.records.append(attrs.evolve(written, record=copy))
        self.table.remove_segments(batch)
        self.present -= set(batch)

    @invariant()
    def counts_match_a_recount(self) -> None:
        live = self.live()
        stats = self.table.stats()
        assert stats.keys == sum(1 for w in live if w.target < 0)
        assert stats.tombstones == sum(1 for w in live if w.target >= 0)
        assert stats.live_bytes == sum(w.record.size for w in live)
        for segment in self.present:
            size = self.end[segment]
            in_segment = sum(w.record.size for w in live if w.record.segment == segment)
            assert self.table.live_fraction(segment) == (in_segment / size if size else 1.0)
        for w in live:
            if w.target < 0:
                assert self.table.location(w.key) == w.record

    @invariant()
    def a_builder_fed_every_record_on_disk_agrees(self) -> None:
        builder = TableBuilder()
        for segment in sorted(self.present):
            builder.add(segment, [(w.record.offset, w.record.size, w.seq, w.key, w.target)
                                  for w in self.records if w.record.segment == segment])
        rebuilt = builder.build({segment: self.end[segment] for segment in self.present})
        assert rebuilt.stats() == self.table.stats()
        assert sorted(rebuilt.locations()) == sorted(self.table.locations())


TestTable = TableAgainstRecords.TestCase
TestTable.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)
