"""The runtime benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

from conveyor.benchmarks.runtime import main
from tests.benchmarks.figures import assert_figures

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
    "thread_pingpong_msgs_per_s",
    "thread_pingpong_one_cpu_msgs_per_s",  # Linux, where threads can be pinned
    "sim_deliveries_per_s",
    "sim_pingpong_deliveries_per_s",
    "ratio_trio_tell_vs_pykka_tell",
    "ratio_trio_tell_vs_trio_channel",
    "ratio_thread_tell_vs_pykka_tell",
    "ratio_thread_pingpong_one_cpu_vs_any",
)


def test_main_reports_every_figure() -> None:
    figures = main(messages=2000, repeat=1)
    assert_figures(figures, EXPECTED_KEYS)
