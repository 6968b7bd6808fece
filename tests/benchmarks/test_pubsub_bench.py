"""The Pub/Sub benchmark runs end to end on a tiny load and reports every figure (no timing assertions)."""

from __future__ import annotations

import os

import pytest

from conveyor.benchmarks._common import pinned_cpu
from conveyor.benchmarks.pubsub import main
from tests.benchmarks.figures import assert_figures

CASES = ("unordered", "keys10", "keys100", "keys1000")
WHO = ("google", "conveyor")
EXPECTED_KEYS = (
    *(f"{case}_publish_{who}_msgs_per_s" for case in CASES for who in WHO),
    *(f"{case}_{who}_msgs_per_s" for case in CASES for who in WHO),
    *(f"{case}_{who}_cpu_us_per_msg" for case in CASES for who in WHO),
    *(f"ratio_{case}" for case in CASES),
)


@pytest.mark.parametrize("in_process", [False, True], ids=["server-process", "in-process"])
def test_main_reports_every_figure(in_process: bool, capsys: pytest.CaptureFixture[str]) -> None:
    figures = main(messages=60, timeout=60.0, in_process=in_process, rounds=1 if in_process else 2)  # keep CI short
    assert_figures(figures, EXPECTED_KEYS, every_figure=True)
    for case in CASES:
        ratio = figures[f"ratio_{case}"]
        assert ratio == figures[f"{case}_conveyor_msgs_per_s"] / figures[f"{case}_google_msgs_per_s"]
    cpu = pinned_cpu()
    assert cpu == min(os.sched_getaffinity(0))  # Linux: conveyor's actors keep to the lowest CPU by default
    assert f"conveyor's actors: on CPU {cpu} (ThreadSystem(cpu={cpu}))" in " ".join(capsys.readouterr().out.split())


def test_pin_off_leaves_conveyors_actors_where_the_system_puts_them(capsys: pytest.CaptureFixture[str]) -> None:
    figures = main(messages=60, timeout=60.0, in_process=True, rounds=1, pin=False)
    assert_figures(figures, EXPECTED_KEYS, every_figure=True)
    assert "conveyor's actors: not pinned" in " ".join(capsys.readouterr().out.split())


def test_rounds_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="rounds must be >= 1, got 0"):
        main(messages=60, rounds=0)
