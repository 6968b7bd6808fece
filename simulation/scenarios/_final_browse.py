"""The final browse: after a run went quiet, clients read what is left in its queues.

Jepsen's total-queue test ends by draining the queue, so that every message is either seen by
a client or lost; a checker need not ask the queue what it still holds. Here the reading is a
browse, not a drain: a browser takes nothing, so the queue's state at the end of the run (what
``drained``, ``stall`` and the other monitors judge at its close) stays as the run left it, and
a browser sees every live entry, held ones included, in publish order. Each ``FinalBrowser``
notes ``FinalBrowseStarted`` and one ``FoundAtEnd`` per message it is shown, which is all
``total_queue`` needs to tell a message still queued (or dead-lettered) from a lost one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, final

from conveyor.actors.broker import ConsumerActor, ConsumerSettings, Delivery
from conveyor.runtime import Actor, ActorRef, ActorSystemBase
from conveyor.simulation.checkers import FinalBrowseStarted, FoundAtEnd

BROWSE_PREFETCH = 1000
"""Messages a final browser is shown per pull (a browser's credit is its whole prefetch)."""


@final
class FinalBrowser(Actor):
    """A client that browses one queue through a ConsumerActor of its own and notes every message it is shown."""

    def __init__(self, queue: ActorRef, dead_letters: bool) -> None:
        self.queue = queue
        self.queue_path = str(queue.path)
        self.dead_letters = dead_letters

    def on_start(self) -> None:
        """Note the browse, then start browsing (the note comes first, so it precedes every delivery)."""
        self.ctx.note(FinalBrowseStarted(self.queue_path, self.dead_letters))
        settings = ConsumerSettings(prefetch_messages=BROWSE_PREFETCH, acquiring=False)
        self.ctx.spawn(lambda: ConsumerActor(self.queue, self.ctx.self_ref, settings), name="consumer")

    def receive(self, message: Any) -> None:
        """Note a message shown; nothing else is expected."""
        if type(message) is Delivery:
            self.ctx.note(FoundAtEnd(self.queue_path, message.tag, message.message.message_id))


def browse_what_is_left(system: ActorSystemBase, queues: Iterable[tuple[ActorRef, bool]]) -> None:
    """Spawn a ``FinalBrowser`` on each (queue, is a dead-letter queue); run the system to quiet afterwards."""
    for queue, dead_letters in queues:
        name = str(queue.path).strip("/").replace("/", "-")
        system.spawn(functools.partial(FinalBrowser, queue, dead_letters), name=f"final-browse-{name}")
