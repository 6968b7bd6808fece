"""A FIFO channel between one sender and one receiver: the unit the simulator schedules."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from conveyor.runtime.lowlevel import CellBase

OUTSIDE = 0
"""Sender id of code outside any actor (tests, the simulation's driver)."""
TIMERS = -1
"""Sender id of fired timers."""
JOBS = -2
"""Sender id of finished jobs."""

_SOURCE_NAMES = {OUTSIDE: "<outside>", TIMERS: "<timer>", JOBS: "<job>"}


@final
class Channel:
    """Messages from ``sender`` to ``receiver`` in the order sent."""

    __slots__ = ("index", "key", "queue", "receiver", "sender")

    def __init__(self, key: tuple[int, int], sender: CellBase | None, receiver: CellBase) -> None:
        self.key = key
        self.sender = sender
        self.receiver = receiver
        self.queue: deque[object] = deque()
        self.index = -1  # position in the ready list, -1 when empty

    @property
    def sender_name(self) -> str:
        """The sender's path, or ``<outside>`` / ``<timer>`` / ``<job>``."""
        if self.sender is not None:
            return self.sender.path
        return _SOURCE_NAMES[self.key[0]]

    @property
    def receiver_name(self) -> str:
        """The receiver's path."""
        return self.receiver.path

    def __repr__(self) -> str:
        return f"<Channel {self.sender_name} -> {self.receiver_name} ({len(self.queue)} queued)>"
