"""The simulation benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.simulation import main
from tests.benchmarks.figures import assert_figures

EXPECTED_KEYS = (
    "bare_calls_per_s",
    "sim_raw_deliveries_per_s",
    "sim_raw_schedules_per_min",
    "sim_pct_deliveries_per_s",
    "sim_pct_schedules_per_min",
    "sim_traced_deliveries_per_s",
    "sim_traced_schedules_per_min",
    "scenario_deliveries_per_s",
    "scenario_schedules_per_min",
    "ratio_sim_pct_vs_raw",
    "ratio_sim_traced_vs_raw",
    "ratio_scenario_vs_raw",
    "ratio_sim_raw_vs_bare",
    "ratio_sim_raw_vs_kernel",
    "kernel_deliveries_per_s",
    "deliveries_per_schedule",
    "checked_deliveries_per_s",
    "checked_schedules_per_min",
    "ratio_checked_vs_raw",
    "bare_schedules_per_hour",
    "checked_schedules_per_hour",
    "ratio_checked_vs_bare_per_hour",
    "spark_schedules_per_hour",
    "spark_cores",
    "spark_startup_s",
    "ratio_spark_vs_bare_per_hour",
)


def test_main_reports_every_figure() -> None:
    figures = main(seeds=2, repeat=1, spark_seeds=4)
    assert_figures(figures, EXPECTED_KEYS, every_figure=True)
