"""TimerQueue: the one home of timer bookkeeping, shared by every backend.

Deadline-ordered, armed in O(log n), cancelled lazily (a cancelled entry is
skipped when it reaches the head). Not thread-safe: ThreadSystem guards it.
"""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING, final

from ._messages import TimerHandle

if TYPE_CHECKING:
    from ._cell import ActorCell


@final
class TimerQueue:
    """Timers of one system: (deadline, id) order, so equal deadlines fire in arming order."""

    __slots__ = ("_heap", "_ids", "_live")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, ActorCell, object]] = []
        self._live: set[int] = set()
        self._ids = itertools.count(1)

    def arm(self, deadline: float, cell: ActorCell, message: object) -> TimerHandle:
        """Add a timer that fires at ``deadline`` (the caller's clock)."""
        timer_id = next(self._ids)
        heapq.heappush(self._heap, (deadline, timer_id, cell, message))
        self._live.add(timer_id)
        return TimerHandle(timer_id)

    def cancel(self, handle: TimerHandle) -> bool:
        """Disarm; True if the timer had not fired or been cancelled yet."""
        if handle.timer_id in self._live:
            self._live.discard(handle.timer_id)
            return True
        return False

    def next_deadline(self) -> float | None:
        """The earliest live deadline, or None when no timer is armed."""
        heap = self._heap
        while heap and heap[0][1] not in self._live:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def pop_due(self, now: float) -> list[tuple[int, ActorCell, object]]:
        """Remove and return every live timer with deadline <= ``now``, in firing order."""
        heap = self._heap
        due: list[tuple[int, ActorCell, object]] = []
        while heap and heap[0][0] <= now:
            _, timer_id, cell, message = heapq.heappop(heap)
            if timer_id in self._live:
                self._live.discard(timer_id)
                due.append((timer_id, cell, message))
        return due

    def clear(self) -> None:
        """Disarm everything."""
        self._heap.clear()
        self._live.clear()
