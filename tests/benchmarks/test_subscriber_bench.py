"""The subscriber benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

import math

from conveyor.benchmarks.subscriber import main

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
    missing = [key for key in EXPECTED_KEYS if key not in figures]
    assert not missing, f"missing figures: {missing}"
    for key in EXPECTED_KEYS:
        value = figures[key]
        assert isinstance(value, float), f"{key} is {type(value).__qualname__}"
        assert math.isfinite(value), f"{key} = {value}"
        assert value > 0, f"{key} = {value}"
