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
)


def test_main_reports_every_figure() -> None:
    figures = main(seeds=2, repeat=1)
    assert_figures(figures, EXPECTED_KEYS, every_figure=True)
