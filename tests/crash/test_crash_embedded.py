"""kill -9 crash cycles on the embedded broker (TrioSystem, journals on disk), checked like Jepsen's total queue.

A client process publishes with confirms (priorities 0, 4, 9) and consumes with acks (a third
confirmed); the harness SIGKILLs it at seeded random moments, restarts it on the same data
directory, then drains the queue and checks the history (``tests/crash/checker.py``). The paged
runs give the queue a 64 KiB memory target: its bodies go to the synced body store and its deep
tail's entries to delta chunks of 64, so kills find both on disk.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.crash.harness import Child, EmbeddedTarget, run_crash_test


def test_ten_kill_cycles_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(EmbeddedTarget(tmp_path), cycles=10, seed=1)
    print(report.summary())
    assert report.verdict.ok, report.details()
    assert not report.lives_with_tracebacks, report.details()
    assert report.verdict.confirmed > 100  # the lives did work before they were killed


PAGED_TARGET = 64 * 1024
"""Bytes of messages in RAM: about 128 messages (a body and ``ENTRY_RAM_BYTES`` each), deltas of 64."""


def test_ten_paged_kill_cycles_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(EmbeddedTarget(tmp_path, memory_target=PAGED_TARGET), cycles=10, seed=3)
    print(report.summary())
    assert report.verdict.ok, report.details()
    assert not report.lives_with_tracebacks, report.details()
    assert report.verdict.confirmed > 100
    assert report.paging is not None  # the lives recorded what the queue held out of RAM
    assert report.paging.lives_with_deltas > 0, report.summary()  # a run that never paged would prove nothing


def test_the_harness_reports_the_loss_of_a_broker_that_keeps_nothing(tmp_path: Path) -> None:
    # Journals in memory: the backlog (the consumer starts after 0.5 s, the kill comes before) dies
    # with the process, though every publish of it was confirmed.
    target = EmbeddedTarget(tmp_path, on_disk=False, hold_back=1.0)
    report = run_crash_test(target, cycles=1, seed=1, max_life_s=0.4, early_share=0.0)
    assert report.verdict.lost
    assert len(report.verdict.lost) == report.verdict.confirmed


def test_a_child_that_logged_a_traceback_is_seen() -> None:
    # As an actor's failure is logged (runtime/_cell.py): no handler configured, so the root logger's last resort.
    logs_one = "import logging\ntry:\n    1 / 0\nexcept Exception:\n    logging.exception('x')"
    failed = Child([sys.executable, "-c", logs_one])
    quiet = Child([sys.executable, "-c", "import sys; print('no traceback here', file=sys.stderr)"])
    assert failed.finish(30.0) == 0 and quiet.finish(30.0) == 0
    assert failed.logged_traceback()
    assert not quiet.logged_traceback()


@pytest.mark.slow
def test_two_hundred_kill_cycles_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(EmbeddedTarget(tmp_path), cycles=200, seed=2)
    print(report.summary())
    assert report.verdict.ok, report.details()
    assert not report.lives_with_tracebacks, report.details()


@pytest.mark.slow
def test_a_hundred_paged_kill_cycles_lose_nothing_confirmed(tmp_path: Path) -> None:
    report = run_crash_test(EmbeddedTarget(tmp_path, memory_target=PAGED_TARGET), cycles=100, seed=4)
    print(report.summary())
    assert report.verdict.ok, report.details()
    assert not report.lives_with_tracebacks, report.details()
    assert report.paging is not None
    assert report.paging.lives_with_deltas > 0, report.summary()
