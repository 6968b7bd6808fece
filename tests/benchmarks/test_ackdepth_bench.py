"""The backlog-depth benchmark runs on a tiny load, checks its own counts and reports every figure (no timing
assertions)."""

from __future__ import annotations

import pytest

from conveyor.benchmarks.ackdepth import main
from tests.benchmarks.figures import assert_figures


def test_main_reports_every_figure() -> None:
    figures = main(shallow=1_500, deep=3_100, repeat=1)
    assert_figures(figures, ("shallow_ns_per_message", "deep_ns_per_message", "deep_over_shallow"),
                   every_figure=True)
    assert figures["deep_over_shallow"] == figures["deep_ns_per_message"] / figures["shallow_ns_per_message"]


def test_depths_out_of_order_are_refused_naming_both() -> None:
    with pytest.raises(ValueError, match="shallow=5, deep=5"):
        main(shallow=5, deep=5, repeat=1)
