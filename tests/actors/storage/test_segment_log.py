"""The segment log on real files: group commit, rotation, recovery of torn and corrupt segments, GC."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conveyor.actors.storage import SNAPSHOT_NAME, CorruptRecord, QueueIndex, SegmentLog, StorageFailed

from .helpers import RecordingFileSystem, crash, key


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))


def fill(directory: Path, count: int, segment_size: int = 1 << 20) -> dict[bytes, bytes]:
    """A synced and closed log of ``count`` records; returns what it holds."""
    stored = {key(i): b"body-%d-" % i * 7 for i in range(count)}
    with SegmentLog(directory, segment_size=segment_size) as log:
        for name, value in stored.items():
            log.put(name, value)
    return stored


def contents(log: SegmentLog) -> dict[bytes, bytes]:
    return dict(log.items())


# -- group commit ---------------------------------------------------------------------------------


def test_one_sync_covers_every_write_before_it_with_one_fsync(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    log = SegmentLog(tmp_path, fs=fs)
    fs.operations.clear()
    numbers = [log.put(key(i), b"x" * 100) for i in range(500)]
    numbers.append(log.delete(key(3)))
    assert numbers == list(range(1, 502))
    assert log.unsynced == 501
    assert "fsync" not in fs.operations
    synced = log.sync()
    assert (synced.through, synced.records, synced.files) == (501, 501, 1)
    assert fs.operations.count("fsync") == 1
    assert log.unsynced == 0
    again = log.sync()
    assert (again.through, again.records) == (501, 0)
    crash(log)
    with SegmentLog(tmp_path) as reopened:
        assert len(reopened) == 499
        assert key(3) not in reopened


def test_a_sync_fsyncs_every_segment_written_since_the_last_and_the_directory(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    log = SegmentLog(tmp_path, segment_size=1000, fs=fs)
    log.sync()
    fs.operations.clear()
    for i in range(30):
        log.put(key(i), b"x" * 90)
    synced = log.sync()
    assert synced.files == len(segment_files(tmp_path)) >= 3
    assert fs.operations.count("fsync") == synced.files
    assert fs.operations.count("fsync_dir") == 1
    log.close()


def test_writes_after_the_last_sync_that_never_left_the_buffer_are_lost_in_a_crash(tmp_path: Path) -> None:
    log = SegmentLog(tmp_path)
    log.put(key(1), b"durable")
    log.sync()
    log.put(key(2), b"buffered")
    log.delete(key(1))
    assert log.get(key(2)) == b"buffered"
    crash(log)
    with SegmentLog(tmp_path) as reopened:
        assert contents(reopened) == {key(1): b"durable"}


def test_a_failed_fsync_makes_the_log_refuse_further_work(tmp_path: Path) -> None:
    fs = RecordingFileSystem()
    log = SegmentLog(tmp_path, fs=fs)
    log.put(key(1), b"x")
    fs.fail_at = len(fs.operations) + 1  # the write goes through, its fsync fails
    with pytest.raises(OSError, match="injected"):
        log.sync()
    with pytest.raises(StorageFailed, match="reopen it to recover"):
        log.put(key(2), b"y")
    log.close()


def test_storing_a_key_twice_or_deleting_a_missing_one_is_refused(tmp_path: Path) -> None:
    with SegmentLog(tmp_path) as log:
        log.put(key(1), b"x")
        with pytest.raises(ValueError, match="already stored"):
            log.put(key(1), b"y")
        with pytest.raises(KeyError, match="not stored"):
            log.delete(key(2))
        log.delete(key(1))
        log.put(key(1), b"again")
        assert log.get(key(1)) == b"again"
    with SegmentLog(tmp_path) as reopened:
        assert contents(reopened) == {key(1): b"again"}


def test_bad_options_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="segment_size must be 1 to 4294967295 bytes"):
        SegmentLog(tmp_path, segment_size=0)
    with pytest.raises(ValueError, match="threshold must be in"), SegmentLog(tmp_path) as log:
        log.collect_garbage(1.5)


# -- rotation and recovery ------------------------------------------------------------------------


def test_segments_rotate_at_their_size_and_reopen_whole(tmp_path: Path) -> None:
    stored = fill(tmp_path, 200, segment_size=2000)
    files = segment_files(tmp_path)
    assert len(files) >= 10
    assert all(path.stat().st_size <= 2000 for path in files)
    with SegmentLog(tmp_path, segment_size=2000) as log:
        assert log.recovery.keys == 200
        assert (log.recovery.truncated, log.recovery.damaged) == ((), ())
        assert contents(log) == stored


def test_a_torn_tail_is_truncated_and_logged_at_every_byte_of_the_last_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    source = tmp_path / "source"
    stored = fill(source, 4)
    (path,) = segment_files(source)
    whole = path.read_bytes()
    last_size = len(whole) // 4  # four records of equal size
    last = len(whole) - last_size
    expected = {name: value for name, value in stored.items() if name != key(3)}
    for cut in range(last + 1, len(whole)):
        directory = tmp_path / f"cut-{cut}"
        directory.mkdir()
        (directory / path.name).write_bytes(whole[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="conveyor.storage"), SegmentLog(directory) as log:
            assert contents(log) == expected, cut
            (truncation,) = log.recovery.truncated
            assert (truncation.offset, truncation.discarded) == (last, cut - last), cut
            assert log.recovery.damaged == ()
        assert (directory / path.name).stat().st_size == last, cut
        assert any("torn tail" in r.getMessage() and f"truncating {cut - last} bytes" in r.getMessage()
                   for r in caplog.records), cut


def test_a_recovered_log_appends_after_the_truncated_tail(tmp_path: Path) -> None:
    stored = fill(tmp_path, 3)
    (path,) = segment_files(tmp_path)
    with open(path, "ab") as file:
        file.write(b"\x50\x00\x00\x00garbage")
    with SegmentLog(tmp_path) as log:
        assert len(log.recovery.truncated) == 1
        log.put(key(9), b"after")
    with SegmentLog(tmp_path) as log:
        assert contents(log) == {**stored, key(9): b"after"}
        assert log.recovery.truncated == ()


def test_corruption_in_the_middle_stops_that_segment_at_the_bad_record_and_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    stored = fill(tmp_path, 10)
    (path,) = segment_files(tmp_path)
    whole = bytearray(path.read_bytes())
    size = len(whole) // 10
    whole[4 * size + 12] ^= 0xFF
    path.write_bytes(bytes(whole))
    (tmp_path / SNAPSHOT_NAME).unlink()  # as after a crash: a clean close's snapshot would skip the scan
    with caplog.at_level(logging.ERROR, logger="conveyor.storage"), SegmentLog(tmp_path) as log:
        assert contents(log) == {key(i): stored[key(i)] for i in range(4)}
        (damage,) = log.recovery.damaged
        assert (damage.segment, damage.offset, damage.discarded) == (1, 4 * size, len(whole) - 4 * size)
        assert log.recovery.truncated == ()
        log.put(key(50), b"new")
    assert any("is corrupt at offset" in r.getMessage() for r in caplog.records)
    assert path.read_bytes() == bytes(whole), "a corrupt segment is kept as it is"
    with SegmentLog(tmp_path) as log:
        assert log.get(key(50)) == b"new"
        assert len(log.recovery.damaged) == 1


def test_a_read_that_finds_a_changed_record_raises(tmp_path: Path) -> None:
    fill(tmp_path, 3)
    (path,) = segment_files(tmp_path)
    with SegmentLog(tmp_path) as log:
        whole = bytearray(path.read_bytes())
        whole[-3] ^= 0x01
        path.write_bytes(bytes(whole))
        with pytest.raises(CorruptRecord, match="CRC mismatch"):
            log.get(key(2))


# -- garbage collection ---------------------------------------------------------------------------


def test_gc_compacts_sparse_segments_and_keeps_exactly_the_live_set(tmp_path: Path) -> None:
    stored = {key(i): bytes([i % 256]) * 1024 for i in range(400)}
    with SegmentLog(tmp_path, segment_size=64 * 1024) as log:
        for name, value in stored.items():
            log.put(name, value)
    with SegmentLog(tmp_path, segment_size=64 * 1024) as log:
        for i in range(400):
            if i % 10:
                log.delete(key(i))
                del stored[key(i)]
        log.sync()
        before = log.stats().total_bytes
        collected = log.collect_garbage(0.5)
        assert collected.removed and collected.written
        assert collected.copied == 40
        assert contents(log) == stored
        live_values = sum(len(v) for v in stored.values())
        assert collected.bytes_after < before
        on_disk = sum(p.stat().st_size for p in segment_files(tmp_path))
        assert on_disk == collected.bytes_after
        assert on_disk <= 1.3 * live_values
    with SegmentLog(tmp_path, segment_size=64 * 1024) as log:
        assert contents(log) == stored


def test_gc_leaves_dense_segments_and_the_active_one_alone(tmp_path: Path) -> None:
    fill(tmp_path, 100, segment_size=4000)
    with SegmentLog(tmp_path, segment_size=4000) as log:
        log.delete(key(0))
        collected = log.collect_garbage(0.5)
        assert (collected.removed, collected.written) == ((), ())


def test_a_tombstone_outlives_gc_while_the_put_it_cancels_is_on_disk(tmp_path: Path) -> None:
    fill(tmp_path, 50, segment_size=2000)
    with SegmentLog(tmp_path, segment_size=2000) as log:
        log.delete(key(0))  # its put stays in segment 1, which is mostly live
        for i in range(100, 200):  # push the tombstone's segment away from the active one
            log.put(key(i), b"x" * 60)
        for i in range(100, 200):
            log.delete(key(i))
        collected = log.collect_garbage(0.5)
        assert 1 not in collected.removed and collected.removed
        assert key(0) not in log
    with SegmentLog(tmp_path, segment_size=2000) as log:
        assert key(0) not in log
        assert len(log) == 49


def test_keys_come_in_the_order_their_values_lie_on_disk(tmp_path: Path) -> None:
    with SegmentLog(tmp_path, segment_size=200) as log:
        for key in (b"m", b"c", b"x", b"a", b"q", b"b"):
            log.put(key, b"v" * 40)  # a few records per segment: the order spans segments
        log.delete(b"c")
        log.put(b"c", b"v")  # now last on disk
        assert log.keys() == [b"m", b"x", b"a", b"q", b"b", b"c"]


# -- the queue index ------------------------------------------------------------------------------


def test_the_queue_index_reads_in_sequence_order_across_reopen(tmp_path: Path) -> None:
    index = QueueIndex(SegmentLog(tmp_path, segment_size=1500))
    for seq_id in (5, 1, 9, 3, 7, 11, 2):
        index.publish(seq_id, b"entry-%d" % seq_id)
    index.ack(3)
    index.ack(9)
    assert index.seq_ids() == [1, 2, 5, 7, 11]
    index.ack(1)
    index.ack(11)
    assert index.span() == (2, 8)  # acked ids at either end are skipped
    index.publish(1, b"entry-1")
    index.publish(11, b"entry-11")
    assert index.span() == (1, 12)
    assert index.read_from(4, 2) == [(5, b"entry-5"), (7, b"entry-7")]
    index.sync()
    crash_index = index
    crash_index.close()
    reopened = QueueIndex(SegmentLog(tmp_path, segment_size=1500))
    assert reopened.recovery.keys == 5
    assert reopened.seq_ids(start=2, limit=3) == [2, 5, 7]
    assert 3 not in reopened and 11 in reopened
    for seq_id in range(100, 300):
        reopened.publish(seq_id, b"e")
    for seq_id in range(100, 299):
        reopened.ack(seq_id)
    assert reopened.seq_ids(start=12) == [299]
    assert reopened.span() == (1, 300)
    assert len(reopened) == 6
    for seq_id in reopened.seq_ids():
        reopened.ack(seq_id)
    assert reopened.span() is None
    with pytest.raises(ValueError, match=r"seq_id must be an int in 0\.\.2"):
        reopened.publish(-1, b"x")
    reopened.close()


def test_recovery_removes_an_unfinished_gc_output_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    stored = fill(tmp_path, 5)
    (tmp_path / "0000000009.seg.tmp").write_bytes(b"half a copy")
    with caplog.at_level(logging.WARNING, logger="conveyor.storage"), SegmentLog(tmp_path) as log:
        assert log.recovery.removed_temporary == ("0000000009.seg.tmp",)
        assert contents(log) == stored
    assert not (tmp_path / "0000000009.seg.tmp").exists()
    assert any("did not finish" in r.getMessage() for r in caplog.records)


def test_gc_refuses_to_copy_from_a_segment_that_changed_on_disk(tmp_path: Path) -> None:
    fill(tmp_path, 40, segment_size=1000)
    with SegmentLog(tmp_path, segment_size=1000) as log:
        for i in range(40):
            if i % 4:
                log.delete(key(i))
        first = segment_files(tmp_path)[0]
        whole = bytearray(first.read_bytes())
        whole[30] ^= 0xFF
        first.write_bytes(bytes(whole))
        with pytest.raises(CorruptRecord, match="segment 1 changed on disk"):
            log.collect_garbage(0.9)
        assert first.exists()


def test_a_clean_close_leaves_a_snapshot_that_the_next_open_reads_instead_of_scanning(tmp_path: Path) -> None:
    stored = fill(tmp_path, 300, segment_size=5000)
    assert (tmp_path / SNAPSHOT_NAME).exists()
    with SegmentLog(tmp_path, segment_size=5000) as log:
        assert log.recovery.from_snapshot and log.recovery.records == 0
        assert not (tmp_path / SNAPSHOT_NAME).exists(), "deleted before anything is written"
        assert contents(log) == stored
        log.delete(key(0))
        del stored[key(0)]
        log.put(key(999), b"new")
        stored[key(999)] = b"new"
        log.sync()
        crash(log)
    with SegmentLog(tmp_path, segment_size=5000) as log:
        assert not log.recovery.from_snapshot and log.recovery.records > 0
        assert contents(log) == stored


def test_a_snapshot_that_no_longer_matches_the_segments_is_ignored_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    stored = fill(tmp_path, 20)
    snapshot = (tmp_path / SNAPSHOT_NAME).read_bytes()
    with SegmentLog(tmp_path) as log:
        log.put(key(100), b"after the snapshot")
        stored[key(100)] = b"after the snapshot"
        log.sync()
        crash(log)
    (tmp_path / SNAPSHOT_NAME).write_bytes(snapshot)  # a stale snapshot: the segment grew since
    with caplog.at_level(logging.WARNING, logger="conveyor.storage"), SegmentLog(tmp_path) as log:
        assert not log.recovery.from_snapshot
        assert contents(log) == stored
    assert any("ignoring the clean-shutdown snapshot" in r.getMessage() for r in caplog.records)


def test_an_index_lists_an_id_published_again_once(tmp_path: Path) -> None:
    """Publishing an id acked earlier keeps it once in ``seq_ids`` (the paging shell had to de-duplicate)."""
    index = QueueIndex(SegmentLog(tmp_path, segment_size=1500))
    for seq_id in (1, 2, 3):
        index.publish(seq_id, b"e")
    index.ack(2)
    index.publish(2, b"again")
    assert index.seq_ids() == [1, 2, 3]
    assert index.read_from(0, 10) == [(1, b"e"), (2, b"again"), (3, b"e")]
