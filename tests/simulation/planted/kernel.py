"""Planted bugs in the kernel: variants of the ``Simulation`` plugged through ``Variant(simulation=...)``.

Each breaks one promise of docs/architecture.md that every actor library relies on, in the
simulator's own delivery or in its cells; the kernel checkers (``mailbox_fifo``,
``nothing_vanishes``, ``supervision``) judge the raw trace. ``Simulation`` is ``@final``, so the
variants subclass it with a ``type: ignore[misc]``, as the subscriber's planted bugs do.
"""

from __future__ import annotations

from typing import Any

from conveyor.runtime import Terminated
from conveyor.runtime.lowlevel import CellBase
from conveyor.simulation import Simulation

_SYSTEM = frozenset({"Start", "Stop", "Watch", "Unwatch"})


class Overtaking(Simulation):  # type: ignore[misc]
    """Broken: every 50th message sent to a channel that already holds one jumps ahead of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pushes = 0

    def _push(self, sender_id: int, sender: CellBase | None, target: CellBase, message: object) -> None:
        super()._push(sender_id, sender, target, message)
        self.pushes += 1
        outgoing = getattr(sender, "outgoing", None)
        channel = outgoing.get(target) if outgoing is not None else None
        if channel is not None and len(channel.queue) > 1 and self.pushes % 50 == 0:
            channel.queue.rotate(1)  # the newest message goes first


class Lossy(Simulation):  # type: ignore[misc]
    """Broken: the 100th message sent between two actors (not a system message) is recorded, then lost.

    A later message on the same channel then seems to overtake it (``mailbox_fifo``); if none
    follows, it is still waiting at shutdown (``nothing_vanishes``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pushes = 0

    def _push(self, sender_id: int, sender: CellBase | None, target: CellBase, message: object) -> None:
        if sender is not None and type(message).__name__ not in _SYSTEM:
            self.pushes += 1
            if self.pushes == 100:
                return
        super()._push(sender_id, sender, target, message)


class ForgetsWatchers(Simulation):  # type: ignore[misc]
    """Broken: an actor that stops (other than at shutdown) does not send its watchers ``Terminated``."""

    def send(self, sender: CellBase | None, target: CellBase, message: object) -> None:
        if (type(message) is Terminated and message.reason != "shutdown" and sender is not None
                and sender.path == message.ref.path):
            return
        super().send(sender, target, message)
