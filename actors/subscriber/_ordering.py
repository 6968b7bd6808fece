"""The one home of ordering-key holds: which received message may run now, and which must wait.

This is the sans-IO core of the ordering actor that seed 003 proposes in place of the Pub/Sub
client's ``MessagesOnHold``. Its rules:

* Messages with the same non-empty ordering key reach user code one at a time, in arrival order.
  The first one of an idle key runs at once; later ones are *held* until the one before them
  is finished.
* "Finished" means the user callback returned (or raised), not that the server confirmed the
  ack: ordering is about the callbacks, and waiting for acks would stall a key on every round
  trip.
* Messages without a key (``None`` or ``""``) are never held. Seed 003 suggests scheduling them
  at once regardless of load, so flow control (which counts every unfinished message) is the
  only thing that ever makes them wait, and it does that before they arrive here.

Unordered messages are still tracked while they run, so that every message that was handed to
a worker is finished exactly once and a double ``finished`` is caught as the bug it is.

Items are identified by their ack id (a ``str``). The class knows nothing of time, threads or
I/O: callers feed it events and hand the ids it returns to workers. Every event is O(1) except
``drop_key`` and ``drop_held``, which are O(items held behind the key). State lives in
insertion-ordered dicts and deques, so every answer is deterministic.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import final

import attrs

from conveyor.runtime import ConveyorError, quote

__all__ = [
    "HoldError",
    "HoldState",
    "OrderingKeyHolds",
    "OrderingSnapshot",
]


class HoldState(enum.Enum):
    """Where an item known to ``OrderingKeyHolds`` is (a finished item is forgotten)."""

    HELD = "held"
    """Waiting for the running item of its ordering key to finish."""
    RUNNING = "running"
    """Handed to a worker; its callback has not finished yet."""


class HoldError(ConveyorError, ValueError):
    """An event the ordering-key holds cannot apply to the item in its current state."""


@final
@attrs.frozen
class OrderingSnapshot:
    """A snapshot of the holds, for metrics and tests.

    Attributes:
        held: items waiting for an earlier item of their key to finish.
        active_keys: ordering keys that have an item running now.
        max_held_seen: the most items that were ever held at once.
    """

    held: int
    active_keys: int
    max_held_seen: int


@final
@attrs.define(eq=False)
class _Item:
    """One item that arrived and has not finished: its key (``None`` if unordered) and state."""

    key: str | None
    state: HoldState


@final
@attrs.define(eq=False)
class _KeyLine:
    """One active ordering key: the item running now and the items held behind it, oldest first."""

    running: str
    held: deque[str] = attrs.field(factory=deque)


def _check_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        msg = f"OrderingKeyHolds: {name} must be a str, got {quote(value)}"
        raise TypeError(msg)


@final
class OrderingKeyHolds:
    """Holds back messages whose ordering key is busy and releases them one at a time, in order.

    Owned by one actor (the subscriber's ordering actor), so it is unsynchronised.
    """

    __slots__ = ("_held", "_items", "_lines", "_max_held")

    def __init__(self) -> None:
        self._items: dict[str, _Item] = {}
        """Every item that arrived and has not finished, in arrival order."""
        self._lines: dict[str, _KeyLine] = {}
        """Active ordering keys, in the order they became active."""
        self._held = 0
        self._max_held = 0

    # ------------------------------------------------------------------ events in

    def arrive(self, item_id: str, key: str | None) -> tuple[str, ...]:
        """Record a received message and return the ids to hand to workers now.

        Args:
            item_id: the message's ack id, unique among items that have not finished.
            key: its ordering key; ``None`` or ``""`` means unordered.

        Returns:
            ``(item_id,)`` if the message is unordered or its key is idle (it is now running);
            ``()`` if an earlier message of its key is running (it is now held).

        Raises:
            HoldError: ``item_id`` is already held or running (a ``ValueError``).
            TypeError: ``item_id`` is not a str, or ``key`` is neither a str nor None.
        """
        _check_str("item_id", item_id)
        if key is not None:
            _check_str("key", key)
        existing = self._items.get(item_id)
        if existing is not None:
            msg = (
                f"cannot accept item {quote(item_id)} with key {quote(key)}: it arrived already and is "
                f"{existing.state.value} (key={quote(existing.key)}); finish it before it arrives again"
            )
            raise HoldError(msg)
        if not key:
            self._items[item_id] = _Item(None, HoldState.RUNNING)
            return (item_id,)
        line = self._lines.get(key)
        if line is None:
            self._lines[key] = _KeyLine(item_id)
            self._items[item_id] = _Item(key, HoldState.RUNNING)
            return (item_id,)
        line.held.append(item_id)
        self._items[item_id] = _Item(key, HoldState.HELD)
        self._held += 1
        self._max_held = max(self._max_held, self._held)
        return ()

    def finished(self, item_id: str) -> tuple[str, ...]:
        """Record that a running item's callback finished, and return the next item of its key to run.

        Args:
            item_id: the ack id of an item that ``arrive`` or ``finished`` returned earlier.

        Returns:
            ``(next_id,)``, the oldest held item of the same key (now running), or ``()`` if
            none is held, in which case the key becomes idle. Always ``()`` for an unordered item.

        Raises:
            HoldError: ``item_id`` is unknown (never arrived, or finished already) or is still
                held (a ``ValueError``).
        """
        item = self._items.get(item_id)
        if item is None:
            msg = (
                f"cannot finish item {quote(item_id)}: it is not known (never arrived, finished already or "
                f"dropped; {len(self._items)} items are held or running)"
            )
            raise HoldError(msg)
        if item.state is not HoldState.RUNNING:
            line = self._lines[item.key] if item.key is not None else None
            running = line.running if line is not None else None
            msg = (
                f"cannot finish item {quote(item_id)}: it is {item.state.value} behind {quote(running)} "
                f"(key={quote(item.key)}) and was never handed to a worker"
            )
            raise HoldError(msg)
        del self._items[item_id]
        if item.key is None:
            return ()
        line = self._lines[item.key]
        if not line.held:
            del self._lines[item.key]
            return ()
        next_id = line.held.popleft()
        line.running = next_id
        self._items[next_id].state = HoldState.RUNNING
        self._held -= 1
        return (next_id,)

    def drop_key(self, key: str) -> tuple[str, ...]:
        """Remove and return every held item of ``key``, oldest first, for shutdown or nack-all-held.

        The running item of the key, if any, stays running; when it finishes the key becomes
        idle. Dropped items are forgotten: they may arrive again (the server redelivers them).

        Returns:
            The dropped ack ids in arrival order; ``()`` if the key holds nothing (or is ``""``).
        """
        _check_str("key", key)
        line = self._lines.get(key)
        if line is None or not line.held:
            return ()
        dropped = tuple(line.held)
        line.held.clear()
        for item_id in dropped:
            del self._items[item_id]
        self._held -= len(dropped)
        return dropped

    def drop_held(self, key: str, item_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Remove the given held items of ``key`` and return them in arrival order; the rest stay held.

        ``drop_key`` sends back everything held behind a key's running item (a nack); this
        sends back only some of them: those that must not run before a message of the key
        that went back to the server (the items held *before* it may still run).

        Raises:
            HoldError: an id in ``item_ids`` is not an item held behind ``key`` (a ``ValueError``).
        """
        _check_str("key", key)
        line = self._lines.get(key)
        held = () if line is None else tuple(line.held)
        wanted = set(item_ids)
        missing = [item_id for item_id in item_ids if item_id not in held]
        if missing:
            msg = (
                f"cannot drop {quote(missing[0])} from key {quote(key)}: it is not held behind that key "
                f"(held: {quote(held)})"
            )
            raise HoldError(msg)
        if not wanted:
            return ()
        assert line is not None
        dropped = tuple(item_id for item_id in held if item_id in wanted)
        line.held = deque(item_id for item_id in held if item_id not in wanted)
        for item_id in dropped:
            del self._items[item_id]
        self._held -= len(dropped)
        return dropped

    # ------------------------------------------------------------------ queries

    def held_of(self, key: str) -> tuple[str, ...]:
        """Return the items held behind ``key``'s running item, in arrival order (O(those items))."""
        line = self._lines.get(key)
        return () if line is None else tuple(line.held)

    def held_count(self) -> int:
        """Return how many items are held now."""
        return self._held

    def held_ids(self) -> tuple[str, ...]:
        """Return the held ack ids in arrival order (O(items held or running))."""
        return tuple(item_id for item_id, item in self._items.items() if item.state is HoldState.HELD)

    def running_keys(self) -> tuple[str, ...]:
        """Return the ordering keys that have an item running, in the order they became active."""
        return tuple(self._lines)

    def is_held(self, item_id: str) -> bool:
        """Return whether ``item_id`` is waiting behind an earlier item of its key."""
        item = self._items.get(item_id)
        return item is not None and item.state is HoldState.HELD

    def state_of(self, item_id: str) -> HoldState | None:
        """Return the item's state, or None if it never arrived or has finished or been dropped."""
        item = self._items.get(item_id)
        return None if item is None else item.state

    def snapshot(self) -> OrderingSnapshot:
        """Return the counts as a frozen value."""
        return OrderingSnapshot(held=self._held, active_keys=len(self._lines), max_held_seen=self._max_held)

    def __len__(self) -> int:
        """Return how many items are held or running."""
        return len(self._items)

    def __repr__(self) -> str:
        """Show the counts, for debugging."""
        return (
            f"<OrderingKeyHolds held={self._held} running={len(self._items) - self._held} "
            f"active_keys={len(self._lines)} max_held_seen={self._max_held}>"
        )
