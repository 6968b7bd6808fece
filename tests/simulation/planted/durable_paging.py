"""Planted bugs in paged queues: a durable one's confirm (``durable-crash`` with a memory target drawn),
and any one's RAM (``paged-swarm``).

* ``ConfirmsBeforeBodySync``: a publish is confirmed once its journal write is synced, without
  waiting for its body's (a crash between the two loses a confirmed message).
* ``ReusesChunkKeys``: a recovered queue names its new delta chunks from -1 again, as a new queue
  does, so a push overwrites a chunk its recovered deltas still name (their entries are lost).
* ``PagesAtTwiceTheTarget``: the pager is built with twice the queue's target and room for one more
  small message (64 bytes and its entry's ``ENTRY_RAM_BYTES``), so the queue holds more in RAM than it
  was told to (``ram_under_target``).
"""

from __future__ import annotations

from conveyor.actors.broker import ENTRY_RAM_BYTES, BodyPager, QueueActor


class ConfirmsBeforeBodySync(QueueActor):
    """Broken: a publish confirm waits for the journal's sync only, not for its body's."""

    def _enqueue_entry(self, payload: object) -> object:  # type: ignore[override]
        entry = super()._enqueue_entry(payload)  # type: ignore[arg-type]
        self.last_body = 0  # the body the confirm waits for: none
        return entry


class ReusesChunkKeys(QueueActor):
    """Broken: after a recovery, new delta chunks are named from -1 again, over chunks the deltas still name."""

    def _recover(self) -> bool:
        found = super()._recover()
        if self.pager is not None:
            self.pager._next_chunk = -1  # the bug: forget the keys in use
        return found


class PagesAtTwiceTheTarget(QueueActor):
    """Broken: the pager keeps bodies in RAM up to twice the target, and one small message more."""

    def make_pager(self, target_bytes: int) -> BodyPager:
        return super().make_pager(2 * target_bytes + 64 + ENTRY_RAM_BYTES)
