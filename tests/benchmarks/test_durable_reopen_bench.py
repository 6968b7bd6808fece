"""The durable reopen benchmark fills and reopens a tiny backlog and reports its figures (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.durable_reopen import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_the_reopen_of_a_durable_paged_backlog() -> None:
    figures = main(messages=3000, size=1024, target=16 * 1024, objects=True)
    assert_figures(figures, ("fill_s", "fill_peak_mib", "reopen_s", "rss_before_mib", "rss_mib", "peak_mib",
                             "entries_out_of_ram", "entries_mib", "journal_events_mib"))
    assert figures["entries_out_of_ram"] > 0  # recovered in deltas, not in RAM
