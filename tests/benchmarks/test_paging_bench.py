"""The paging benchmark runs on a tiny load and reports its figures (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.paging import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_ram_per_message_with_and_without_paging() -> None:
    figures = main(messages=2000, size=1024, batch=500, target=16 * 1024)
    assert_figures(figures, ("ram_per_message_bytes", "paged_ram_per_message_bytes", "paged_bodies_in_ram_bytes",
                             "durable_paged_ram_per_message_bytes",
                             "durable_entries_out_of_ram", "durable_entries_per_message_bytes",
                             "durable_store_per_message_bytes"), every_figure=True)
    assert figures["paged_bodies_in_ram_bytes"] <= 16 * 1024
    assert figures["paged_ram_per_message_bytes"] < figures["ram_per_message_bytes"]
    assert figures["durable_paged_ram_per_message_bytes"] < figures["ram_per_message_bytes"]
    assert figures["durable_entries_out_of_ram"] > 0  # a durable queue's deep tail goes to deltas too
