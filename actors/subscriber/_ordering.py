"""The one home of ordering-key holds: which received message may run now, and which must wait.

This is the sans-IO core of the ordering actor that seed 003 proposes in place of the Pub/Sub
client's ``MessagesOnHold``. Its rules:

* Messages with the same non-empty ordering key reach user code one at a time, in arrival order.
  The first one of an idle key runs at once; later ones are *held* until the one before them
  is finished. With ``run_limit`` > 1 a finished key releases several held items at once, a *key
  run* that one job runs in turn (so still one at a time); the next run waits for all of them.
* "Finished" means the user callback returned (or raised), not that the server confirmed the
  ack: ordering is about the callbacks, and waiting for acks would stall a key on every round
  trip.
* Messages without a key (``None`` or ``""``) are never held. Seed 003 suggests scheduling them
  at once regardless of load, so flow control (which counts every unfinished message) is the
  only thing that ever makes them wait, and it does that before they arrive here.

* When a keyed message goes back to the queue before its key's later messages ran (its callback
  nacked or raised, or its lease lapsed before it started), none of them may overtake it: the key
  is *fenced* on its tag (``send_back``). The held messages of the key from that tag on go back too,
  and the fence remembers every tag on its way back; a message of the key that arrives while an
  earlier tag is still out goes back as well (``admit`` says ``FENCED``), so the key's messages run
  again in publish order (the queue keeps positions). Each returning tag clears its place; the
  fence falls when all have come back, or when the caller lifts it (``lift``: a message that never
  returns, dead-lettered or expired, must not fence its key for ever).

Unordered messages are still tracked while they run, so that every message that was handed to
a worker is finished exactly once and a double ``finished`` is caught as the bug it is.

Items are identified by their ack id (a ``str``), and placed by their delivery's tag (an ``int``,
the queue's order) when fences need it. The class knows nothing of time, threads or I/O: callers
feed it events (and the time, for a delivery's deadline) and carry out what it returns. Every
event is O(1) except ``drop_key``, ``drop_held`` and ``send_back`` (O(items held behind the key)),
``lapse`` (O(ids given)) and a fenced ``admit`` (O(tags out for the key)). State lives in
insertion-ordered dicts and deques, so every answer is deterministic.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import NoReturn, TypeAlias, final

import attrs

from conveyor.runtime import ConveyorError, quote

__all__ = [
    "Admission",
    "HoldError",
    "HoldState",
    "Lapse",
    "OrderingKeyHolds",
    "OrderingSnapshot",
    "SentBack",
]


class HoldState(enum.Enum):
    """Where an item known to ``OrderingKeyHolds`` is (a finished item is forgotten)."""

    HELD = "held"
    """Waiting for the running item of its ordering key to finish."""
    RUNNING = "running"
    """Handed to a worker; its callback has not finished yet."""


class Admission(enum.Enum):
    """What to do with a received message, by the holds' and the fences' rules (``OrderingKeyHolds.admit``)."""

    RUN = "run"
    """Hand it to a worker now: it is running."""
    HELD = "held"
    """Keep it: it waits behind its key's running item, and a later ``finished`` releases it."""
    EARLY = "early"
    """Keep it aside: an earlier copy of it has not finished; offer it again once that one has."""
    LAPSED = "lapsed"
    """Its lease ran out on its way here, so the queue has it back: send it back (nack), and send its
    key back from its tag (``send_back``) so nothing of the key overtakes it."""
    FENCED = "fenced"
    """An earlier message of its key is on its way back: send this one back too (the fence now waits
    for its tag as well)."""


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
@attrs.frozen
class SentBack:
    """What ``OrderingKeyHolds.send_back`` took off a key's line.

    Attributes:
        fence: the number of the fence just raised on the key, or None if it was fenced already; the
            caller lifts it with ``lift(key, fence)`` after a while, in case a message never returns.
        ids: the held items taken off, in arrival order: send each back (nack) to the queue.
    """

    fence: int | None
    ids: tuple[str, ...]


@final
@attrs.frozen
class Lapse:
    """Where the items whose lease lapsed are (``OrderingKeyHolds.lapse``).

    Attributes:
        send_back: per key with held items among them, the earliest of their tags, in the order the
            keys came: send the key back from there (``send_back``); earlier held items stay.
        to_pool: the lapsed items handed to workers already (running, or waiting for a worker): the
            worker pool drops those that have not started.
    """

    send_back: tuple[tuple[str, int], ...]
    to_pool: tuple[str, ...]


_Item: TypeAlias = "tuple[str | None, HoldState, int | None]"
"""One item that arrived and has not finished: its key (``None`` if unordered), state and tag (if known).

A plain tuple, replaced when the state changes: one is made per message, and a tuple costs a fifth of a
slotted instance (measured: 60 against 300 ns)."""


@final
class _KeyLine:
    """One active ordering key: its running item (the head of its run), how many of its run have not
    finished, and the items held behind them, oldest first (None until one is held).

    A plain class, not attrs: one is made each time a key becomes active, with 1,000 keys for most messages,
    and most of those lines never hold anything, so the deque is made only when a second item arrives.
    """

    __slots__ = ("held", "running", "unfinished")

    def __init__(self, running: str) -> None:
        self.running = running
        self.unfinished = 1
        self.held: deque[str] | None = None


def _check_str(name: str, value: object) -> None:
    if not isinstance(value, str):
        msg = f"OrderingKeyHolds: {name} must be a str, got {quote(value)}"
        raise TypeError(msg)


def _check_tag(value: object) -> None:
    if type(value) is not int:
        msg = f"OrderingKeyHolds: tag must be an int, got {quote(value)}"
        raise TypeError(msg)


@final
class OrderingKeyHolds:
    """Holds back messages whose ordering key is busy and releases them one at a time, in order.

    With ``run_limit`` n > 1, a key whose running items all finished releases up to n of its held
    items at once, oldest first (a *key run*, for one job to run in turn); the key stays busy until
    every item of the run has finished, in any order. ``run_limit=1`` is one at a time.

    Owned by one actor (the subscriber's ordering actor), so it is unsynchronised.
    """

    __slots__ = ("_fence_of", "_fences", "_held", "_items", "_lines", "_max_held", "_out", "run_limit")

    def __init__(self, run_limit: int = 1) -> None:
        if type(run_limit) is not int or run_limit < 1:
            msg = f"OrderingKeyHolds: run_limit must be an int >= 1, got {quote(run_limit)}"
            raise ValueError(msg)
        self.run_limit = run_limit
        """The most held items of a key released at once, as one run."""
        self._items: dict[str, _Item] = {}
        """Every item that arrived and has not finished, in arrival order."""
        self._lines: dict[str, _KeyLine] = {}
        """Active ordering keys, in the order they became active."""
        self._held = 0
        self._max_held = 0
        self._out: dict[str, set[int]] = {}
        """Fenced keys -> the tags sent back and not yet returned (never empty)."""
        self._fence_of: dict[str, int] = {}
        """Fenced keys -> the number of the fence up now, so that lifting an old fence lifts nothing."""
        self._fences = 0
        """Fences raised so far: the last one's number."""

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
        return self._arrive(item_id, key, None)

    def _arrive(self, item_id: str, key: str | None, tag: int | None) -> tuple[str, ...]:
        if type(item_id) is not str:  # checked in a line first: every message comes this way
            _check_str("item_id", item_id)
        if key is not None and type(key) is not str:
            _check_str("key", key)
        existing = self._items.get(item_id)
        if existing is not None:
            msg = (
                f"cannot accept item {quote(item_id)} with key {quote(key)}: it arrived already and is "
                f"{existing[1].value} (key={quote(existing[0])}); finish it before it arrives again"
            )
            raise HoldError(msg)
        return (item_id,) if self._place(item_id, key or None, tag) else ()

    def _place(self, item_id: str, key: str | None, tag: int | None) -> bool:
        """Record a new item (checked already; ``key`` None if unordered): True if it runs now, False if held."""
        if key is None:
            self._items[item_id] = (None, HoldState.RUNNING, tag)
            return True
        line = self._lines.get(key)
        if line is None:
            self._lines[key] = _KeyLine(item_id)
            self._items[item_id] = (key, HoldState.RUNNING, tag)
            return True
        held = line.held
        if held is None:
            held = line.held = deque()
        held.append(item_id)
        self._items[item_id] = (key, HoldState.HELD, tag)
        self._held += 1
        self._max_held = max(self._max_held, self._held)
        return False

    def finished(self, item_id: str) -> tuple[str, ...]:
        """Record that a running item's callback finished, and return the next item of its key to run.

        Args:
            item_id: the ack id of an item that ``arrive`` or ``finished`` returned earlier.

        Returns:
            ``()`` while other items of the key's run have not finished. Otherwise the oldest held
            items of the same key, up to ``run_limit`` (now running, as the key's next run), or
            ``()`` if none is held, in which case the key becomes idle. Always ``()`` for an
            unordered item.

        Raises:
            HoldError: ``item_id`` is unknown (never arrived, or finished already) or is still
                held (a ``ValueError``).
        """
        item = self._items.get(item_id)
        if item is None or item[1] is not HoldState.RUNNING:
            self._refuse_finish(item_id, item)
        del self._items[item_id]
        key = item[0]
        if key is None:
            return ()
        line = self._lines[key]
        line.unfinished -= 1
        if line.unfinished:
            return ()
        held = line.held
        if not held:
            del self._lines[key]
            return ()
        items = self._items
        if self.run_limit == 1 or len(held) == 1:
            next_id = held.popleft()
            line.running = next_id
            line.unfinished = 1
            items[next_id] = (key, HoldState.RUNNING, items[next_id][2])
            self._held -= 1
            return (next_id,)
        released = tuple(held.popleft() for _ in range(min(self.run_limit, len(held))))
        for next_id in released:
            items[next_id] = (key, HoldState.RUNNING, items[next_id][2])
        line.running = released[0]
        line.unfinished = len(released)
        self._held -= len(released)
        return released

    def _refuse_finish(self, item_id: str, item: _Item | None) -> NoReturn:
        """Raise the ``HoldError`` for finishing an item that is unknown or still held."""
        if item is None:
            msg = (
                f"cannot finish item {quote(item_id)}: it is not known (never arrived, finished already or "
                f"dropped; {len(self._items)} items are held or running)"
            )
            raise HoldError(msg)
        key, state, _ = item
        line = self._lines[key] if key is not None else None
        running = line.running if line is not None else None
        msg = (
            f"cannot finish item {quote(item_id)}: it is {state.value} behind {quote(running)} "
            f"(key={quote(key)}) and was never handed to a worker"
        )
        raise HoldError(msg)

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
        line.held = None
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
        held = () if line is None or line.held is None else tuple(line.held)
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
        line.held = deque(item_id for item_id in held if item_id not in wanted) or None
        for item_id in dropped:
            del self._items[item_id]
        self._held -= len(dropped)
        return dropped

    # ------------------------------------------------------------------ fences

    def admit(self, item_id: str, key: str | None, tag: int, deadline: float | None, now: float) -> Admission:
        """Offer a received message, by the fences' rules and then ``arrive``'s, and say what to do with it.

        Args:
            item_id: the message's ack id.
            key: its ordering key; ``None`` or ``""`` means unordered (never fenced).
            tag: its delivery's tag, its place in the queue: fences compare tags.
            deadline: when the queue's lease on this delivery runs out, or None.
            now: the time, on the clock of ``deadline``.

        Returns:
            ``RUN`` or ``HELD`` (it arrived, as ``arrive`` says), ``EARLY``, ``LAPSED`` or ``FENCED``
            (it did not arrive): see ``Admission``.

        Raises:
            TypeError: ``item_id`` is not a str, ``key`` neither a str nor None, ``tag`` not an int.
        """
        if item_id in self._items:
            return Admission.EARLY
        if deadline is not None and deadline <= now:
            return Admission.LAPSED
        # each type tested here first (every message comes this way); the error names the field
        if type(tag) is not int:
            _check_tag(tag)
        if type(item_id) is not str:
            _check_str("item_id", item_id)
        if key is not None and type(key) is not str:
            _check_str("key", key)
        if key and self._out:
            out = self._out.get(key)
            if out:
                if tag > min(out):
                    out.add(tag)  # an earlier message of its key is still coming back
                    return Admission.FENCED
                out.discard(tag)
                if not out:  # everything came back
                    del self._out[key]
                    del self._fence_of[key]
        return Admission.RUN if self._place(item_id, key or None, tag) else Admission.HELD

    def send_back(self, key: str, tag: int) -> SentBack:
        """Fence ``key`` on ``tag`` and take its held items from ``tag`` on off its line, to go back to the queue.

        For a message of the key that went back (a nack, a lapse, a message the pool skipped): the
        queue delivers the key's messages again from there, in order, so none may run before it.
        The fence waits for ``tag`` and the tags taken off; the items held before ``tag`` stay.

        Returns:
            The new fence's number (None if the key was fenced already) and the ids taken off.

        Raises:
            HoldError: a held item of ``key`` arrived without a tag (through ``arrive``, not ``admit``).
            TypeError: ``key`` is not a str or ``tag`` not an int.
        """
        _check_str("key", key)
        _check_tag(tag)
        line = self._lines.get(key)
        tags: dict[str, int] = {}  # the key's held items, in arrival order -> their tags
        for item_id in () if line is None else line.held or ():
            item_tag = self._items[item_id][2]
            if item_tag is None:
                msg = (
                    f"cannot send key {quote(key)} back from tag {tag}: its held item {quote(item_id)} arrived "
                    "without a tag (admit items to fence their keys, not arrive)"
                )
                raise HoldError(msg)
            tags[item_id] = item_tag
        out = self._out.get(key)
        fence = None
        if out is None:
            out = self._out[key] = set()
            self._fences += 1
            fence = self._fence_of[key] = self._fences
        out.add(tag)
        dropped = self.drop_held(key, tuple(item_id for item_id, item_tag in tags.items() if item_tag >= tag))
        for item_id in dropped:
            out.add(tags[item_id])
        return SentBack(fence, dropped)

    def lapse(self, item_ids: tuple[str, ...]) -> Lapse:
        """Say where the items whose lease lapsed are: held (their keys go back) or with the workers.

        Unknown ids (finished, or never arrived) are left out. Nothing changes: the caller sends the
        keys back (``send_back``) and tells the workers.

        Raises:
            HoldError: a held item among them arrived without a tag.
        """
        first: dict[str, int] = {}
        to_pool: list[str] = []
        items = self._items
        for item_id in item_ids:
            item = items.get(item_id)
            if item is None:
                continue
            key, state, tag = item
            if state is HoldState.RUNNING:
                to_pool.append(item_id)
                continue
            if key is None or tag is None:  # only keyed items are ever held
                msg = f"cannot place lapsed item {quote(item_id)}: it is held without a tag (key={quote(key)})"
                raise HoldError(msg)
            first[key] = min(first.get(key, tag), tag)
        return Lapse(tuple(first.items()), tuple(to_pool))

    def lift(self, key: str, fence: int) -> bool:
        """Lift fence number ``fence`` from ``key`` if it is still up: stop waiting for its tags.

        Returns:
            False if that fence fell already (everything came back) or a newer one is up.
        """
        if self._fence_of.get(key) != fence:
            return False
        del self._fence_of[key]
        del self._out[key]
        return True

    # ------------------------------------------------------------------ queries

    def fenced(self, key: str) -> frozenset[int]:
        """Return the tags of ``key`` on their way back (empty if the key is not fenced)."""
        return frozenset(self._out.get(key, ()))

    def fence_of(self, key: str) -> int | None:
        """Return the number of the fence up on ``key``, or None."""
        return self._fence_of.get(key)

    def held_of(self, key: str) -> tuple[str, ...]:
        """Return the items held behind ``key``'s running item, in arrival order (O(those items))."""
        line = self._lines.get(key)
        return () if line is None else tuple(line.held or ())

    def held_count(self) -> int:
        """Return how many items are held now."""
        return self._held

    def held_ids(self) -> tuple[str, ...]:
        """Return the held ack ids in arrival order (O(items held or running))."""
        return tuple(item_id for item_id, item in self._items.items() if item[1] is HoldState.HELD)

    def running_keys(self) -> tuple[str, ...]:
        """Return the ordering keys that have an item running, in the order they became active."""
        return tuple(self._lines)

    def is_held(self, item_id: str) -> bool:
        """Return whether ``item_id`` is waiting behind an earlier item of its key."""
        item = self._items.get(item_id)
        return item is not None and item[1] is HoldState.HELD

    def state_of(self, item_id: str) -> HoldState | None:
        """Return the item's state, or None if it never arrived or has finished or been dropped."""
        item = self._items.get(item_id)
        return None if item is None else item[1]

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
