"""A planted bug in a durable queue that pages its bodies (``durable-crash`` with a memory target drawn).

* ``ConfirmsBeforeBodySync``: a publish is confirmed once its journal write is synced, without
  waiting for its body's (a crash between the two loses a confirmed message).
"""

from __future__ import annotations

from conveyor.actors.broker import QueueActor


class ConfirmsBeforeBodySync(QueueActor):
    """Broken: a publish confirm waits for the journal's sync only, not for its body's."""

    def _enqueue_entry(self, payload: object) -> object:  # type: ignore[override]
        entry = super()._enqueue_entry(payload)  # type: ignore[arg-type]
        self.last_body = 0  # the body the confirm waits for: none
        return entry
