"""SeqRangeIndex: segment files of a fixed id range, RAM per segment, torn tails, GC, the simulator's disk."""

from __future__ import annotations

import logging
import random
import re
import tracemalloc
from pathlib import Path

import pytest

from conveyor.actors.storage import CorruptRecord, SeqRangeIndex
from conveyor.simulation import DiskFaults, SimDisk

from .helpers import crash_index


def segment_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.name.endswith(".qidx"))


def test_reads_come_back_in_seq_order_across_segments_and_a_reopen(tmp_path: Path) -> None:
    index = SeqRangeIndex(tmp_path, ids_per_segment=10)
    for seq_id in (25, 3, 14, 7, 40):
        index.publish(seq_id, b"e%d" % seq_id)
    index.deliver(14)
    index.sync()
    assert index.read_from(5, 3) == [(7, b"e7"), (14, b"e14"), (25, b"e25")]
    index.close()
    reopened = SeqRangeIndex(tmp_path, ids_per_segment=10)
    assert [(r.seq_id, r.delivered) for r in reopened.read_records(0, 10)] == [
        (3, False), (7, False), (14, True), (25, False), (40, False)]
    assert reopened.span() == (3, 41)
    assert reopened.recovery.keys == 5
    assert segment_files(tmp_path) == ["0000000000.qidx", "0000000001.qidx", "0000000002.qidx", "0000000004.qidx"]


def test_a_segment_whose_ids_are_all_acked_is_deleted_whole_at_the_sync(tmp_path: Path) -> None:
    index = SeqRangeIndex(tmp_path, ids_per_segment=4)
    for seq_id in range(6):
        index.publish(seq_id, b"x")
    index.sync()
    for seq_id in range(4):
        index.ack(seq_id)
    assert len(segment_files(tmp_path)) == 2
    index.sync()
    assert segment_files(tmp_path) == ["0000000001.qidx"]
    index.close()
    assert SeqRangeIndex(tmp_path, ids_per_segment=4).seq_ids() == [4, 5]


def test_ram_is_per_segment_not_per_message(tmp_path: Path) -> None:
    with SeqRangeIndex(tmp_path) as index:
        for seq_id in range(100_000):
            index.publish(seq_id, b"body")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        reopened = SeqRangeIndex(tmp_path)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(reopened) == 100_000
    # 7 segments: a 2 KiB bitmap each, and the interpreter's free lists (about 110 KiB of small
    # tuples the scan freed); QueueIndex holds about 170 bytes per id, 16 MiB here
    assert held < 200 * 1024, f"{held} bytes held for 100,000 ids in 7 segments"


def test_a_torn_tail_is_cut_by_its_crc_and_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with SeqRangeIndex(tmp_path, ids_per_segment=100) as index:
        index.publish(1, b"kept")
        index.publish(2, b"torn")
    path = tmp_path / "0000000000.qidx"
    path.write_bytes(path.read_bytes()[:-3])
    with caplog.at_level(logging.WARNING, logger="conveyor.storage"):
        reopened = SeqRangeIndex(tmp_path, ids_per_segment=100)
    assert reopened.read_from(0, 10) == [(1, b"kept")]
    assert [t.segment for t in reopened.recovery.truncated] == [0]
    assert "torn record" in caplog.text
    reopened.publish(2, b"again")
    reopened.close()
    assert SeqRangeIndex(tmp_path, ids_per_segment=100).read_from(0, 10) == [(1, b"kept"), (2, b"again")]


def test_garbage_collection_rewrites_a_segment_acked_out_of_order(tmp_path: Path) -> None:
    index = SeqRangeIndex(tmp_path, ids_per_segment=100)
    for seq_id in range(100):
        index.publish(seq_id, bytes(200))
        index.deliver(seq_id)
    for seq_id in range(100):
        if seq_id % 10:
            index.ack(seq_id)
    index.sync()
    size = (tmp_path / "0000000000.qidx").stat().st_size
    collected = index.collect_garbage()
    assert collected.written == (0,)
    assert collected.copied == 10
    assert (tmp_path / "0000000000.qidx").stat().st_size < size / 8
    index.close()
    records = SeqRangeIndex(tmp_path, ids_per_segment=100).read_records(0, 100)
    assert [(r.seq_id, r.delivered) for r in records] == [(i, True) for i in range(0, 100, 10)]


def test_only_synced_records_survive_a_crash_of_the_simulated_disk() -> None:
    disk = SimDisk(random.Random(3), DiskFaults(torn_write=1.0))
    index = SeqRangeIndex("/q", fs=disk, ids_per_segment=8)
    for seq_id in range(12):
        index.publish(seq_id, b"m%d" % seq_id)
    index.ack(0)
    index.sync()
    index.ack(1)
    index.publish(12, b"m12")
    index.read_from(0, 1)  # writes the buffers to the page cache, not to the disk
    crash_index(index)
    disk.crash()
    recovered = SeqRangeIndex("/q", fs=disk, ids_per_segment=8)
    assert recovered.seq_ids()[:11] == list(range(1, 12))
    assert set(recovered.seq_ids()) <= set(range(1, 13))


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    index = SeqRangeIndex(tmp_path)
    with pytest.raises(ValueError, match=re.escape("seq_id must be an int in 0..2**64-1, got -1")):
        index.publish(-1, b"")
    with pytest.raises(KeyError, match="seq_id 5 is not in the index"):
        index.ack(5)
    with pytest.raises(ValueError, match=re.escape("threshold must be in 0..1, got 2")):
        index.collect_garbage(2)
    with pytest.raises(ValueError, match="ids_per_segment must be an int >= 1, got 0"):
        SeqRangeIndex(tmp_path, ids_per_segment=0)
    with pytest.raises(ValueError, match="parsed_segments must be an int >= 1, got 0"):
        SeqRangeIndex(tmp_path, parsed_segments=0)


def test_a_corrupt_record_inside_a_segment_is_set_aside_and_the_records_before_it_kept(tmp_path: Path) -> None:
    with SeqRangeIndex(tmp_path, ids_per_segment=100) as index:
        for seq_id in range(3):
            index.publish(seq_id, b"entry-%d" % seq_id)
    path = tmp_path / "0000000000.qidx"
    data = bytearray(path.read_bytes())
    second = len(data) // 3
    data[second + 10] ^= 0xFF  # a flipped bit in the second record's payload: records follow it
    path.write_bytes(bytes(data))
    reopened = SeqRangeIndex(tmp_path, ids_per_segment=100)
    assert reopened.read_from(0, 10) == [(0, b"entry-0")]
    assert [(d.segment, d.offset) for d in reopened.recovery.damaged] == [(0, second)]
    assert (tmp_path / "0000000000.qidx.corrupt").read_bytes() == bytes(data[second:])
    reopened.ack(0)
    reopened.close()
    assert SeqRangeIndex(tmp_path, ids_per_segment=100).seq_ids() == []


class _CountingDisk:
    """The simulator's disk, counting the descriptors open at once and the largest read."""

    def __init__(self) -> None:
        self.disk = SimDisk(random.Random(5))
        self.open = 0
        self.most = 0
        self.largest_read = 0
        self.preads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.disk, name)

    def _opened(self, fd: int) -> int:
        self.open += 1
        self.most = max(self.most, self.open)
        return fd

    def open_append(self, path: str) -> int:
        return self._opened(self.disk.open_append(path))

    def open_read(self, path: str) -> int:
        return self._opened(self.disk.open_read(path))

    def read(self, path: str) -> bytes:
        data = self.disk.read(path)
        self.largest_read = max(self.largest_read, len(data))
        return data

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self.preads += 1
        data = self.disk.pread(fd, size, offset)
        self.largest_read = max(self.largest_read, len(data))
        return data

    def close(self, fd: int) -> None:
        self.disk.close(fd)
        self.open -= 1


def test_read_each_reads_ids_across_segments_with_a_bounded_number_of_open_files() -> None:
    fs = _CountingDisk()
    index = SeqRangeIndex("/q", fs=fs, ids_per_segment=2)  # type: ignore[arg-type]
    for seq_id in range(40):  # 20 segments, each written, synced, read and acked in turn
        index.publish(seq_id, b"m%d" % seq_id)
        index.sync()
    assert index.read_each([39, 0, 7, 100, 7]) == [b"m39", b"m0", b"m7", None, b"m7"]
    assert [index.read(seq_id) for seq_id in range(0, 40, 3)] == [b"m%d" % seq_id for seq_id in range(0, 40, 3)]
    for seq_id in range(1, 40, 2):
        index.ack(seq_id)
        index.sync()
    assert index.read_each(list(range(6))) == [b"m0", None, b"m2", None, b"m4", None]
    assert fs.most <= 17  # 8 to read, 8 to append plus the one written since the sync, of 20 segments
    index.close()
    assert fs.open == 0


def test_a_segment_of_large_records_is_parsed_without_reading_it_whole_and_a_bad_crc_is_found_on_read() -> None:
    fs = _CountingDisk()
    index = SeqRangeIndex("/q", fs=fs, ids_per_segment=4)  # type: ignore[arg-type]
    large = [bytes([n]) * (1 << 20) for n in range(4)]
    for seq_id, entry in enumerate(large):
        index.publish(seq_id, entry)
    index.sync()
    assert index.read_each([3, 1]) == [large[3], large[1]]
    assert fs.largest_read < 2 << 20  # the record read; never the 4 MiB file
    index.ack(0)
    assert index.collect_garbage(1.0).written == (0,) and index.read(2) == large[2]
    assert fs.largest_read < 2 << 20
    index.publish(5, b"five")
    index.sync()
    file = fs.disk._names["/q/0000000001.qidx"]
    file.cached[-1] ^= 1  # a bit flipped on the disk since the open
    with pytest.raises(CorruptRecord, match="seq_id 5 in segment 1 fails its CRC"):
        index.read_each([5])


@pytest.mark.parametrize(("parsed", "preads"), [(1, 4), (2, 2)])
def test_reads_alternating_between_segments_parse_each_once_when_both_are_kept(parsed: int, preads: int) -> None:
    fs = _CountingDisk()
    index = SeqRangeIndex("/q", fs=fs, ids_per_segment=4, parsed_segments=parsed)  # type: ignore[arg-type]
    for seq_id in range(8):
        index.publish(seq_id, b"m%d" % seq_id)
    index.sync()
    assert index.read_each([0]) == [b"m0"] and index.read_each([4]) == [b"m4"]
    before = fs.preads
    assert index.read_each([1]) == [b"m1"] and index.read_each([5]) == [b"m5"]
    assert fs.preads - before == preads  # a record read each, and a parse each unless both are kept
