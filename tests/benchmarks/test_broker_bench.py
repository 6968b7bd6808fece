"""The broker benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.broker import main
from tests.benchmarks.figures import assert_figures

RATES = (
    "asyncio_1c_msgs_per_s",
    "asyncio_8c_msgs_per_s",
    "trio_1c_msgs_per_s",
    "trio_8c_msgs_per_s",
    "trio_1c_durable_msgs_per_s",
    "trio_1c_batch_msgs_per_s",
    "trio_1c_confirmed_msgs_per_s",
    "sim_1c_msgs_per_s",
    "sim_8c_msgs_per_s",
)
RATIOS = (
    "ratio_trio_1c_vs_asyncio",
    "ratio_trio_8c_vs_asyncio",
    "ratio_trio_1c_durable_vs_asyncio",
    "ratio_durable_vs_plain",
    "ratio_trio_1c_batch_vs_asyncio",
    "ratio_trio_1c_confirmed_vs_asyncio",
    "ratio_sim_1c_vs_asyncio",
    "ratio_sim_8c_vs_asyncio",
)
FAIRNESS = (
    "fairness_asyncio_8c",
    "fairness_trio_8c",
    "fairness_sim_8c",
)
EXPECTED_KEYS = RATES + RATIOS + FAIRNESS


def test_main_reports_every_figure() -> None:
    figures = main(messages=2000, repeat=1)
    assert_figures(figures, EXPECTED_KEYS, every_figure=True)
    for key in FAIRNESS:
        # Jain's index over 8 counts lies in [1/8, 1]; a little slack for rounding.
        assert 1 / 8 - 1e-9 <= figures[key] <= 1 + 1e-9, f"{key} = {figures[key]}"
