"""The storage file layer by measurement: conveyor's segment log beside SQLite in WAL mode, in one run.

Both store ``records`` bodies of ``size`` bytes under integer keys with a group commit (one fsync)
every ``batch`` records, read every body back, and are reopened after a clean close (the segment log
reads the snapshot its close saved); the segment log is reopened once more as after a crash (every
segment scanned and checked). Then 90% of the records are deleted and each
reclaims space (the segment log's garbage collection; SQLite's VACUUM): bytes on disk per live
byte before and after. The figures and the choice they led to are in docs/storage-format.md.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from conveyor.actors.storage import SNAPSHOT_NAME, SegmentLog

from ._common import check_equal


def _disk_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir() if path.is_file())


def _body(number: int, size: int) -> bytes:
    return number.to_bytes(8, "big") * (size // 8) + bytes(size % 8)


def _reopen(directory: Path, expected: int, what: str) -> tuple[SegmentLog, float]:
    """Open the log in ``directory``, check it holds ``expected`` records; returns it and the seconds it took."""
    start = time.perf_counter()
    log = SegmentLog(directory)
    seconds = time.perf_counter() - start
    check_equal("segment log", what, expected, len(log))
    return log, seconds


def _segment_log(directory: Path, records: int, size: int, batch: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    keys = [number.to_bytes(8, "big") for number in range(records)]
    log = SegmentLog(directory)
    start = time.perf_counter()
    for number, key in enumerate(keys):
        log.put(key, _body(number, size))
        if (number + 1) % batch == 0:
            log.sync()
    log.sync()
    figures["log_append_per_s"] = records / (time.perf_counter() - start)
    start = time.perf_counter()
    read = sum(len(value) for _, value in log.items())
    figures["log_read_per_s"] = records / (time.perf_counter() - start)
    check_equal("segment log", "bytes read back", records * size, read)
    log.close()
    log, figures["log_reopen_s"] = _reopen(directory, records, "records recovered")
    log.close()
    (directory / SNAPSHOT_NAME).unlink()  # as after a crash: no snapshot, so the next open scans
    log, figures["log_reopen_after_crash_s"] = _reopen(directory, records, "records recovered after a crash")
    figures["log_bytes_per_live_byte"] = _disk_bytes(directory) / (records * size)
    live = 0
    for number, key in enumerate(keys):
        if number % 10:
            log.delete(key)
        else:
            live += 1
        if (number + 1) % batch == 0:
            log.sync()
    log.sync()
    figures["log_deleted_bytes_per_live_byte"] = _disk_bytes(directory) / (live * size)
    start = time.perf_counter()
    log.collect_garbage()
    figures["log_gc_s"] = time.perf_counter() - start
    figures["log_gc_bytes_per_live_byte"] = _disk_bytes(directory) / (live * size)
    log.close()
    log, figures["log_reopen_after_gc_s"] = _reopen(directory, live, "records after GC")
    log.close()
    return figures


def _sqlite_connect(path: Path, page_size: int) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(f"PRAGMA page_size={int(page_size)}")  # takes effect when the first table is made
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")  # a commit fsyncs the WAL: the same promise as a sync
    return connection


def _sqlite(directory: Path, records: int, size: int, batch: int, page_size: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    path = directory / "store.db"
    connection = _sqlite_connect(path, page_size)
    connection.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    start = time.perf_counter()
    for first in range(0, records, batch):
        connection.execute("BEGIN")
        connection.executemany("INSERT INTO messages VALUES (?, ?)",
                               ((n, _body(n, size)) for n in range(first, min(first + batch, records))))
        connection.execute("COMMIT")
    figures["sqlite_append_per_s"] = records / (time.perf_counter() - start)
    start = time.perf_counter()
    read = sum(len(body) for (body,) in connection.execute("SELECT body FROM messages ORDER BY id"))
    figures["sqlite_read_per_s"] = records / (time.perf_counter() - start)
    check_equal("sqlite", "bytes read back", records * size, read)
    connection.close()
    start = time.perf_counter()
    connection = _sqlite_connect(path, page_size)
    count = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
    figures["sqlite_reopen_s"] = time.perf_counter() - start
    check_equal("sqlite", "records after reopen", records, count)
    figures["sqlite_bytes_per_live_byte"] = _disk_bytes(directory) / (records * size)
    for first in range(0, records, batch):
        connection.execute("BEGIN")
        connection.execute("DELETE FROM messages WHERE id >= ? AND id < ? AND id % 10 != 0", (first, first + batch))
        connection.execute("COMMIT")
    live = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
    figures["sqlite_deleted_bytes_per_live_byte"] = _disk_bytes(directory) / (live * size)
    start = time.perf_counter()
    connection.execute("VACUUM")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    figures["sqlite_vacuum_s"] = time.perf_counter() - start
    figures["sqlite_vacuum_bytes_per_live_byte"] = _disk_bytes(directory) / (live * size)
    connection.close()
    return figures


def main(
    records: int = 100_000, size: int = 1024, batch: int = 1000, directory: str | None = None,
    sqlite_page_size: int = 4096,
) -> dict[str, float]:
    """Measure both stores; print and return the figures."""
    with tempfile.TemporaryDirectory(dir=directory, prefix="storage-files-") as root:
        (Path(root) / "log").mkdir()
        (Path(root) / "sqlite").mkdir()
        figures = _segment_log(Path(root) / "log", records, size, batch)
        figures |= _sqlite(Path(root) / "sqlite", records, size, batch, sqlite_page_size)
    figures["append_ratio"] = figures["log_append_per_s"] / figures["sqlite_append_per_s"]
    figures["read_ratio"] = figures["log_read_per_s"] / figures["sqlite_read_per_s"]
    print(f"storage files: {records:,} records of {size:,} bytes, one fsync per {batch:,} records")
    print(f"  {'':28}{'segment log':>16}{f'sqlite WAL {sqlite_page_size // 1024}K':>16}")
    rows = (
        ("append, records/s", "log_append_per_s", "sqlite_append_per_s", ",.0f"),
        ("read back, records/s", "log_read_per_s", "sqlite_read_per_s", ",.0f"),
        ("reopen after close, s", "log_reopen_s", "sqlite_reopen_s", ".3f"),
        ("disk / live bytes", "log_bytes_per_live_byte", "sqlite_bytes_per_live_byte", ".3f"),
        ("90% deleted: disk / live", "log_deleted_bytes_per_live_byte", "sqlite_deleted_bytes_per_live_byte", ".3f"),
        ("GC / VACUUM, s", "log_gc_s", "sqlite_vacuum_s", ".3f"),
        ("after GC: disk / live", "log_gc_bytes_per_live_byte", "sqlite_vacuum_bytes_per_live_byte", ".3f"),
    )
    for label, log_key, sqlite_key, form in rows:
        print(f"  {label:28}{format(figures[log_key], form):>16}{format(figures[sqlite_key], form):>16}")
    print(f"  segment log reopen after a crash (a scan): {figures['log_reopen_after_crash_s']:.3f} s, "
          f"after GC: {figures['log_reopen_after_gc_s']:.3f} s; "
          f"append {figures['append_ratio']:.2f}x and read {figures['read_ratio']:.2f}x SQLite's rate")
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000, help="records to store")
    parser.add_argument("--size", type=int, default=1024, help="bytes per body")
    parser.add_argument("--batch", type=int, default=1000, help="records per group commit")
    parser.add_argument("--dir", default=None, help="where to put the temporary files (default: the temp dir)")
    parser.add_argument("--sqlite-page-size", type=int, default=4096, help="SQLite's page size (its default: 4096)")
    arguments = parser.parse_args()
    main(records=arguments.records, size=arguments.size, batch=arguments.batch, directory=arguments.dir,
         sqlite_page_size=arguments.sqlite_page_size)
