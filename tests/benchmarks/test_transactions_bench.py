"""The transactions benchmark runs on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.transactions import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_every_figure() -> None:
    figures = main(transactions=80, repeat=1)
    assert_figures(figures, ("tx_per_s_1_clients", "tx_per_s_8_clients", "tx_per_s_1_clients_durable",
                             "tx_per_s_8_clients_durable"), every_figure=True)
