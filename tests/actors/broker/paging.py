"""Forced paging for tests: every queue pages under a tiny memory target.

``pytest --force-paging=BYTES`` (tests/conftest.py) applies ``force_paging`` to every test, so
the existing broker suites and scenarios run on paged queues: bodies leave RAM at once, entries
beyond the first two paged ones leave it two at a time (delta; a durable queue's go to its synced
store beside the journal), and each delivery, browse and dead letter waits for its
body (and its entry) to be read back. In the simulator the body
store's jobs then take no virtual time: the suites' ``quiet()`` runs only until the clock's
present, and a test that never lets time pass would otherwise wait for a body forever.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from conveyor.actors.broker import BodyPager, QueueActor, QueueConfig, run_page_batch
from conveyor.actors.broker._store_turn import run_in_turn
from conveyor.simulation import Simulation


def force_paging(monkeypatch: pytest.MonkeyPatch, target_bytes: int) -> None:
    """Make each ``QueueActor`` built from now on page at ``target_bytes`` unless already paged."""
    original = QueueActor.__init__

    def paged_init(self: QueueActor, config: QueueConfig, *args: Any, **kwargs: Any) -> None:
        if isinstance(config, QueueConfig) and config.memory_target_bytes is None:
            config = attrs.evolve(config, memory_target_bytes=target_bytes)
        original(self, config, *args, **kwargs)

    monkeypatch.setattr(QueueActor, "__init__", paged_init)

    def small_deltas(self: QueueActor, target: int) -> BodyPager:
        chunk = None if self.config.max_length is not None else 2
        return BodyPager(self.entries, target, chunk, 2, durable=self.config.durable)

    monkeypatch.setattr(QueueActor, "make_pager", small_deltas)

    start_job = Simulation.start_job

    def instant_page_jobs(self: Simulation, cell: Any, job_id: int, fn: Any, args: tuple[Any, ...]) -> None:
        if fn is not run_page_batch and fn is not run_in_turn:
            start_job(self, cell, job_id, fn, args)
            return
        drawn = self._job_duration
        self._job_duration = lambda rng: 0.0
        try:
            start_job(self, cell, job_id, fn, args)
        finally:
            self._job_duration = drawn

    monkeypatch.setattr(Simulation, "start_job", instant_page_jobs)
