"""The runtime benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

import math

from conveyor.benchmarks.runtime import main

EXPECTED_KEYS = (
    "bare_loop_msgs_per_s",
    "trio_channel_msgs_per_s",
    "park_wakeup_msgs_per_s",
    "event_wakeup_msgs_per_s",
    "trio_tell_msgs_per_s",
    "trio_pipeline_msgs_per_s",
    "trio_ask_us",
    "pykka_tell_msgs_per_s",
    "pykka_ask_us",
    "thread_tell_msgs_per_s",
    "thread_ask_us",
    "sim_deliveries_per_s",
    "sim_pingpong_deliveries_per_s",
    "ratio_trio_tell_vs_pykka_tell",
    "ratio_trio_tell_vs_trio_channel",
    "ratio_thread_tell_vs_pykka_tell",
)


def test_main_reports_every_figure() -> None:
    figures = main(messages=2000, repeat=1)
    missing = [key for key in EXPECTED_KEYS if key not in figures]
    assert not missing, f"missing figures: {missing}"
    for key in EXPECTED_KEYS:
        value = figures[key]
        assert isinstance(value, float), f"{key} is {type(value).__qualname__}"
        assert math.isfinite(value), f"{key} = {value}"
        assert value > 0, f"{key} = {value}"
