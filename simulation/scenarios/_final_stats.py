"""The final statistics read: after a broker run went quiet, a client asks its queue for ``QueueStats``.

The answer is noted (``QueueStatsRead``) for ``queue_stats``, which compares the counters a
queue reports with what its publisher and clients noted. The read takes nothing and changes
nothing, so the queue's state at its close stays as the run left it.
"""

from __future__ import annotations

from typing import Any, final

from conveyor.actors.broker import GetStats, QueueStats
from conveyor.runtime import Actor, ActorRef, ActorSystemBase
from conveyor.simulation.checkers import QueueStatsRead


@final
class StatsReader(Actor):
    """Asks one queue for its statistics and notes the answer."""

    def __init__(self, queue: ActorRef) -> None:
        self.queue = queue

    def on_start(self) -> None:
        """Ask once."""
        self.ctx.send(self.queue, GetStats())

    def receive(self, message: Any) -> None:
        """Note the queue's answer, then stop."""
        if type(message) is QueueStats:
            self.ctx.note(QueueStatsRead(str(self.queue.path), message))
            self.ctx.stop()


def read_stats(system: ActorSystemBase, queue: ActorRef) -> None:
    """Spawn a ``StatsReader`` on ``queue``; run the system to quiet afterwards."""
    system.spawn(lambda: StatsReader(queue), name="final-stats")
