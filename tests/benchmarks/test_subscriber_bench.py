"""The subscriber benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.subscriber import main
from tests.benchmarks.figures import assert_figures

RATES = (
    "baseline_1t_msgs_per_s",
    "baseline_4t_msgs_per_s",
    "trio_1w_msgs_per_s",
    "trio_4w_msgs_per_s",
    "trio_4w_10keys_msgs_per_s",
    "threads_1w_msgs_per_s",
    "threads_4w_msgs_per_s",
)
OVERHEADS = (
    "overhead_trio_1w",
    "overhead_trio_4w",
    "overhead_trio_4w_10keys",
    "overhead_threads_1w",
    "overhead_threads_4w",
)
EXPECTED_KEYS = RATES + OVERHEADS


def test_main_reports_every_figure() -> None:
    figures = main(messages=200, repeat=1)
    assert_figures(figures, EXPECTED_KEYS)
