"""The sweep benchmark runs end to end on a few seeds and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.sweep import main
from tests.benchmarks.figures import assert_figures

EXPECTED_KEYS = (
    "loop_runs_per_s",
    "pool_runs_per_s",
    "spark_runs_per_s",
    "ratio_spark_vs_pool",
    "ratio_spark_vs_loop",
    "ratio_pool_vs_loop",
    "spark_startup_s",
)


def test_main_reports_every_figure() -> None:
    figures = main(seeds=8, repeat=1)
    assert_figures(figures, EXPECTED_KEYS, every_figure=True)
