"""The subscriber's flow-control budget: counts every unfinished message and decides pause and resume.

Seed 003 criticises the Pub/Sub client for leaving messages on hold (behind an ordering key, or
waiting for load to drop) out of its load, so that a subscriber can pile up an unbounded number
of them. Here the load counts **every** unfinished message: from receipt until it is acked,
nacked or dropped, whether it is being processed, waiting for a worker, or on hold.

``load`` is the fuller of the two budgets, ``max(count / max_messages, bytes / max_bytes)``. The
stream is paused at load >= 1 and resumed only once load < ``FlowControl.resume_threshold``;
the gap between the two (hysteresis) stops it flapping around the limit. ``update`` is the only
place the paused state changes.

The class is sans-IO: callers tell it about messages and carry out the decisions it returns.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import NoReturn, Protocol, final

import attrs

from conveyor.runtime import ConveyorError, quote

from ._settings import FlowControl

__all__ = ["Arrival", "DuplicateMessage", "FlowDecision", "FlowStats", "Identified", "LoadTracker"]


class FlowDecision(enum.Enum):
    """What the subscriber does with its stream after a change in load."""

    PAUSE = "pause"
    """Stop asking the server for messages: load reached 1."""
    RESUME = "resume"
    """Ask the server for messages again: load fell below the resume threshold."""


class Identified(Protocol):
    """A message as the batch methods name it: by its ack id (a ``Done`` is one)."""

    @property
    def ack_id(self) -> str:
        """The id the message is counted (or leased) under."""
        ...


class Arrival(Identified, Protocol):
    """A received message as ``LoadTracker.add_many`` reads it (a ``Received`` is one)."""

    @property
    def size(self) -> int:
        """Its size in bytes."""
        ...


class DuplicateMessage(ConveyorError, ValueError):
    """``LoadTracker.add`` was given a message id that is already counted."""


@final
@attrs.frozen
class FlowStats:
    """A snapshot of the budget, for metrics and tests.

    Attributes:
        count: unfinished messages now.
        bytes: their total size now.
        load: ``max(count / max_messages, bytes / max_bytes)``.
        paused: whether the last decision was to pause.
        max_count_seen: the most unfinished messages there ever were at once.
        max_bytes_seen: the most unfinished bytes there ever were at once.
        pauses: how many times the stream was paused.
    """

    count: int
    bytes: int
    load: float
    paused: bool
    max_count_seen: int
    max_bytes_seen: int
    pauses: int = 0
    """How many times the budget paused the stream (each ``PAUSE`` decision)."""


@final
class LoadTracker:
    """Counts the unfinished messages and bytes against a ``FlowControl`` and decides pause and resume.

    Owned by one actor, so it is unsynchronised. Every operation is O(1), but the batch forms
    ``add_many`` and ``remove_many``, which are O(batch).
    """

    __slots__ = ("_bytes", "_flow", "_max_bytes_seen", "_max_count_seen", "_paused", "_pauses", "_sizes")

    def __init__(self, flow: FlowControl) -> None:
        if not isinstance(flow, FlowControl):
            msg = f"LoadTracker needs a FlowControl, got {quote(flow)}"
            raise TypeError(msg)
        self._flow = flow
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._paused = False
        self._max_count_seen = 0
        self._max_bytes_seen = 0
        self._pauses = 0

    @property
    def flow(self) -> FlowControl:
        """The limits this budget is kept against."""
        return self._flow

    def add(self, message_id: str, size: int) -> None:
        """Count a message received from the server, until ``remove`` is called for it.

        Args:
            message_id: the message's id, unique among unfinished messages.
            size: its size in bytes.

        Raises:
            DuplicateMessage: ``message_id`` is already counted (a ``ValueError``).
            ValueError: ``size`` is negative.
            TypeError: ``size`` is not an int.
        """
        sizes = self._sizes
        if type(size) is not int or size < 0 or message_id in sizes:
            self._refuse(message_id, size)
        sizes[message_id] = size
        self._bytes += size
        self._max_count_seen = max(self._max_count_seen, len(sizes))
        self._max_bytes_seen = max(self._max_bytes_seen, self._bytes)

    def add_many(self, arrivals: Iterable[Arrival]) -> None:
        """Count several messages, each under its ``ack_id``: the same as ``add`` of each in turn, at less cost.

        Raises:
            DuplicateMessage, ValueError, TypeError: as ``add``, for the first bad message (those
                before it are counted).
        """
        sizes = self._sizes
        added = 0  # bytes counted in sizes but not yet in _bytes
        try:
            for arrival in arrivals:
                message_id = arrival.ack_id
                size = arrival.size
                if type(size) is not int or size < 0 or message_id in sizes:
                    self._refuse(message_id, size)
                sizes[message_id] = size
                added += size
        finally:
            # Adding only grows the count and the bytes: the highest of each is where the batch ends.
            self._bytes += added
            self._max_count_seen = max(self._max_count_seen, len(sizes))
            self._max_bytes_seen = max(self._max_bytes_seen, self._bytes)

    def _refuse(self, message_id: str, size: object) -> NoReturn:
        """Raise the error for a message ``add`` cannot count: a size not an int >= 0, or an id already counted."""
        if type(size) is not int:
            msg = f"LoadTracker.add: size of message {quote(message_id)} must be an int, got {quote(size)}"
            raise TypeError(msg)
        if size < 0:
            msg = f"LoadTracker.add: size of message {quote(message_id)} must be >= 0, got {quote(size)}"
            raise ValueError(msg)
        msg = (
            f"cannot add message {quote(message_id)}: it is already counted (size={self._sizes[message_id]}, "
            f"{len(self._sizes)} unfinished); remove it when it is finished before adding it again"
        )
        raise DuplicateMessage(msg)

    def remove(self, message_id: str) -> bool:
        """Stop counting a message that was acked, nacked or dropped.

        Returns:
            True if the message was counted, False if it was not (already removed, say).
        """
        size = self._sizes.pop(message_id, None)
        if size is None:
            return False
        self._bytes -= size
        return True

    def remove_many(self, finished: Iterable[Identified]) -> int:
        """Stop counting several messages, each named by its ``ack_id``: ``remove`` of each in turn, at less cost.

        Returns:
            How many of them were counted.
        """
        sizes = self._sizes
        removed = 0
        freed = 0
        try:
            for item in finished:
                size = sizes.pop(item.ack_id, None)
                if size is not None:
                    removed += 1
                    freed += size
        finally:
            self._bytes -= freed
        return removed

    def load(self) -> float:
        """Return how full the budget is: 1.0 means at a limit, and it may go above 1."""
        flow = self._flow
        return max(len(self._sizes) / flow.max_messages, self._bytes / flow.max_bytes)

    def update(self) -> FlowDecision | None:
        """Decide whether the stream should pause or resume now, and remember the decision.

        Call it after each batch of ``add`` and ``remove`` calls.

        Returns:
            ``PAUSE`` if not paused and load >= 1; ``RESUME`` if paused and load <
            ``resume_threshold``; otherwise None (nothing to change).
        """
        load = self.load()
        if not self._paused and load >= 1:
            self._paused = True
            self._pauses += 1
            return FlowDecision.PAUSE
        if self._paused and load < self._flow.resume_threshold:
            self._paused = False
            return FlowDecision.RESUME
        return None

    @property
    def count(self) -> int:
        """The number of unfinished messages."""
        return len(self._sizes)

    @property
    def bytes(self) -> int:
        """The total size of the unfinished messages."""
        return self._bytes

    @property
    def paused(self) -> bool:
        """Whether the last decision was ``PAUSE`` (False before any)."""
        return self._paused

    def __contains__(self, message_id: object) -> bool:
        """Return whether ``message_id`` is counted."""
        return message_id in self._sizes

    def __len__(self) -> int:
        """Return the number of unfinished messages."""
        return len(self._sizes)

    def snapshot(self) -> FlowStats:
        """Return the current counts, load and state as a frozen value."""
        return FlowStats(
            count=len(self._sizes),
            bytes=self._bytes,
            load=self.load(),
            paused=self._paused,
            max_count_seen=self._max_count_seen,
            max_bytes_seen=self._max_bytes_seen,
            pauses=self._pauses,
        )

    def __repr__(self) -> str:
        """Show the counts, load and state, for debugging."""
        return (
            f"<LoadTracker count={len(self._sizes)} bytes={self._bytes} load={self.load():.3f} paused={self._paused}>"
        )
