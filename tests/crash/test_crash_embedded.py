"""kill -9 crash cycles on the embedded broker (TrioSystem, journals on disk), checked like Jepsen's total queue.

A client process publishes with confirms (priorities 0, 4, 9) and consumes with acks (a third
confirmed); the harness SIGKILLs it at seeded random moments, restarts it on the same data
directory, then drains the queue and checks the history (``tests/crash/checker.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import EmbeddedTarget, run_crash_test


def test_ten_kill_cycles_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(EmbeddedTarget(tmp_path), cycles=10, seed=1)
    print(report.summary())
    assert report.verdict.ok, report.details()
    assert report.verdict.confirmed > 100  # the lives did work before they were killed


def test_the_harness_reports_the_loss_of_a_broker_that_keeps_nothing(tmp_path: Path) -> None:
    # Journals in memory: the backlog (the consumer starts after 0.5 s, the kill comes before) dies
    # with the process, though every publish of it was confirmed.
    target = EmbeddedTarget(tmp_path, on_disk=False, hold_back=1.0)
    report = run_crash_test(target, cycles=1, seed=1, max_life_s=0.4, early_share=0.0)
    assert report.verdict.lost
    assert len(report.verdict.lost) == report.verdict.confirmed


@pytest.mark.slow
def test_two_hundred_kill_cycles_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(EmbeddedTarget(tmp_path), cycles=200, seed=2)
    print(report.summary())
    assert report.verdict.ok, report.details()
