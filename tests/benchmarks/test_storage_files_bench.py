"""The storage-files benchmark runs on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from pathlib import Path

from conveyor.benchmarks.storage_files import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_every_figure(tmp_path: Path) -> None:
    figures = main(records=300, size=256, batch=50, directory=str(tmp_path))
    assert_figures(figures, ("log_append_per_s", "sqlite_append_per_s", "log_read_per_s", "sqlite_read_per_s",
                             "log_reopen_s", "sqlite_reopen_s", "log_gc_bytes_per_live_byte",
                             "sqlite_vacuum_bytes_per_live_byte", "append_ratio", "read_ratio"), every_figure=True)
    assert figures["log_gc_bytes_per_live_byte"] < figures["log_deleted_bytes_per_live_byte"]
    assert list(tmp_path.iterdir()) == []
