"""kill -9 crash cycles on ``conveyor serve --data-dir`` driven by Google's official client.

Each life is a server process and a client process (publish futures as confirms, sync pull with
acknowledge on an exactly-once subscription); the harness SIGKILLs both at seeded random moments,
restarts them on the same data directory, then drains and checks the history. Messages carry one
of four ordering keys (the subscription orders them): first deliveries must keep each key's order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import PubSubTarget, run_crash_test


def test_three_kill_cycles_of_the_server_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(PubSubTarget(tmp_path), cycles=3, seed=1, early_share=0.0)
    print(report.summary())
    assert report.verdict.ok, report.details()
    assert report.verdict.confirmed > 10


@pytest.mark.slow
def test_thirty_kill_cycles_of_the_server_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(PubSubTarget(tmp_path), cycles=30, seed=2, max_life_s=2.0)
    print(report.summary())
    assert report.verdict.ok, report.details()
