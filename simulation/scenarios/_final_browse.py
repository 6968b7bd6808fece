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

import attrs

from conveyor.actors.broker import ConsumerActor, ConsumerSettings, Delivery
from conveyor.runtime import Actor, ActorRef, ActorSystemBase
from conveyor.simulation.checkers import FinalBrowseStarted, FoundAtEnd

BROWSE_PREFETCH = 1000
"""Messages a final browser is shown per pull (a browser's credit is its whole prefetch)."""


@final
@attrs.frozen
class BrowseAgain:
    """The harness tells a final browser the queue's process died (a crash still due when the run went
    quiet): its subscription went with the connection, so it browses anew through a new consumer."""


@final
class FinalBrowser(Actor):
    """A client that browses one queue through a ConsumerActor of its own and notes every message it is shown."""

    def __init__(self, queue: ActorRef, dead_letters: bool) -> None:
        self.queue = queue
        self.queue_path = str(queue.path)
        self.dead_letters = dead_letters
        self.connections = 0  # browses begun anew (BrowseAgain)
        self.consumer: ActorRef | None = None

    def on_start(self) -> None:
        """Note the browse, then start browsing (the note comes first, so it precedes every delivery)."""
        self.ctx.note(FinalBrowseStarted(self.queue_path, self.dead_letters))
        self.consumer = self._browse()

    def _browse(self) -> ActorRef:
        settings = ConsumerSettings(prefetch_messages=BROWSE_PREFETCH, acquiring=False)
        name = "consumer" if not self.connections else f"consumer-{self.connections}"
        return self.ctx.spawn(lambda: ConsumerActor(self.queue, self.ctx.self_ref, settings), name=name)

    def receive(self, message: Any) -> None:
        """Note a message shown; browse anew when told the connection died."""
        if type(message) is Delivery:
            self.ctx.note(FoundAtEnd(self.queue_path, message.tag, message.message.message_id))
        elif type(message) is BrowseAgain:
            if self.consumer is not None:
                self.ctx.stop(self.consumer)
            self.connections += 1
            self.consumer = self._browse()


def browse_what_is_left(system: ActorSystemBase, queues: Iterable[tuple[ActorRef, bool]]) -> list[ActorRef]:
    """Spawn a ``FinalBrowser`` on each (queue, is a dead-letter queue); run the system to quiet afterwards.

    Returns the browsers (a harness whose queues' process may still crash tells them ``BrowseAgain``).
    """
    browsers = []
    for queue, dead_letters in queues:
        name = str(queue.path).strip("/").replace("/", "-")
        browsers.append(system.spawn(functools.partial(FinalBrowser, queue, dead_letters), name=f"final-browse-{name}"))
    return browsers
