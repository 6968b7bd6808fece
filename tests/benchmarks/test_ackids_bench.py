"""The ack-id benchmark runs on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.ackids import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_every_figure() -> None:
    figures = main(ids=200, repeat=1)
    assert_figures(figures, ("issue_sealed_ns", "issue_plain_ns", "read_sealed_ns", "read_plain_ns", "issue_ratio",
                             "read_ratio", "sealed_us_per_delivery"), every_figure=True)
    assert figures["read_ratio"] == figures["read_sealed_ns"] / figures["read_plain_ns"]
