"""The one home of a queue's consumer lists: which consumer is told about work, and when.

This is the sans-IO core of the consumer manager (Qpid's ``QueueConsumerManager``, seed 000).
It keeps the seed's lists: *All* (every consumer, in add order), *NonAcquiring* (browsers that
want work), *NotInterested*, *Interested* and *Notified*, the last two split by **consumer
priority** (a higher number is served first). Every state change of a consumer happens in
``_detach`` / ``_attach`` below and nowhere else.

Two rules come from the seed:

* Only one acquiring consumer is notified per piece of new work (no thundering herd), while
  every interested browser is always notified.
* A notified consumer that runs dry goes to the *back* of Interested at its priority, which
  gives the seed's **asymptotic fairness**.

Two rules are ours:

* Each ``work_available`` starts a *generation*, and within a generation each consumer gets
  one chance. ``exhausted(..., more_work=True)`` passes the work on only to consumers not yet
  tried, so entries that no consumer can take (say, no selector matches) do not cause an
  endless notify loop.
* A **hand-over** (an acquiring consumer moved to Notified) that is not answered within
  ``hand_over_timeout_s`` is passed on as if the consumer had run dry with work left, except
  that the silent consumer stays on Notified: a frozen consumer (a GC pause, a starved thread)
  must not hold work that others with credit could take. The queue still decides who takes
  each entry, so passing work on never gives a message to two consumers; and the generation
  rule bounds the passing on as it bounds ``exhausted``. A consumer answers by leaving
  Notified (``exhausted``, losing interest, ``remove``); each hand-over times out at most once.

The class knows nothing of threads or I/O and reads no clock: callers tell it the time with
each event that may start a hand-over (``now``), ask it when the oldest unanswered one falls
due (``hand_over_deadline``), and tell it when that time has come (``hand_overs_due``). They
carry out the notifications it returns. Each move is O(1); choosing whom to notify is
O(priority levels).
"""

from __future__ import annotations

import bisect
import enum
from typing import final

import attrs

from conveyor.runtime import ConveyorError, is_finite_number, quote

__all__ = [
    "DEFAULT_HAND_OVER_TIMEOUT_S",
    "ConsumerListStats",
    "ConsumerLists",
    "ConsumerState",
    "DuplicateConsumer",
    "UnknownConsumer",
]


class ConsumerState(enum.Enum):
    """Which of the seed's lists a consumer is on (each consumer is on exactly one)."""

    NON_ACQUIRING = "non_acquiring"
    """A browser that currently wants to hear about every new entry."""
    NOT_INTERESTED = "not_interested"
    """Suspended (flow control, no credit, backpressure): never notified."""
    INTERESTED = "interested"
    """An acquiring consumer ready for work, waiting its turn at its priority."""
    NOTIFIED = "notified"
    """An acquiring consumer told about work, expected to pull until it runs dry."""


# The states as module constants: reading ``ConsumerState.NOTIFIED`` goes through the enum
# class's attribute lookup (about 0.1 us), and the transitions below read several per change.
_NON_ACQUIRING = ConsumerState.NON_ACQUIRING
_NOT_INTERESTED = ConsumerState.NOT_INTERESTED
_INTERESTED = ConsumerState.INTERESTED
_NOTIFIED = ConsumerState.NOTIFIED


DEFAULT_HAND_OVER_TIMEOUT_S = 1.0
"""How long a notified consumer may stay silent before its work is passed on, in seconds.

A healthy consumer answers within one pull round trip (well under a millisecond in one process);
one second is far above that even on a loaded machine, and well below the 4 s the simulator's
``prompt_delivery`` monitor allows an entry to wait while a consumer with credit could take it."""


def check_hand_over_timeout(owner: str, value: object) -> float | None:
    """Return ``value`` as seconds (or None) if it is a valid hand-over timeout, else raise.

    Raises:
        ValueError: naming ``owner``'s field and the allowed values.
    """
    if value is None:
        return None
    if not is_finite_number(value) or value <= 0:
        msg = (
            f"{owner}.hand_over_timeout_s must be None (wait for a notified consumer forever, as Qpid does) "
            f"or a finite number of seconds > 0, got {quote(value)}"
        )
        raise ValueError(msg)
    return float(value)


class UnknownConsumer(ConveyorError, KeyError):
    """The consumer id is not registered with these consumer lists."""

    def __str__(self) -> str:
        # KeyError.__str__ would show the message's repr, quotes and all.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class DuplicateConsumer(ConveyorError, ValueError):
    """``add`` was given a consumer id that is already registered."""


@final
@attrs.frozen
class ConsumerListStats:
    """A snapshot of the list sizes, for metrics and tests.

    Attributes:
        all: every registered consumer.
        non_acquiring: browsers that currently want work.
        not_interested: consumers (acquiring or not) that want no work now.
        interested: acquiring consumers waiting for work.
        notified: acquiring consumers told about work.
        by_priority: ``(priority, interested, notified)`` for each priority some consumer has,
            highest priority first.
    """

    all: int
    non_acquiring: int
    not_interested: int
    interested: int
    notified: int
    by_priority: tuple[tuple[int, int, int], ...]


@final
@attrs.define(eq=False)
class _Level:
    """The Interested and Notified lists of one priority, as insertion-ordered dicts (ordered sets)."""

    priority: int
    interested: dict[int, None] = attrs.field(factory=dict)
    notified: dict[int, None] = attrs.field(factory=dict)
    members: int = 0
    """Consumers of any kind and state that have this priority; the level is dropped at zero."""
    fresh: dict[int, None] = attrs.field(factory=dict)
    """Untried consumers appended to ``interested`` during generation ``fresh_generation``."""
    fresh_generation: int = -1

    def fresh_in(self, generation: int) -> dict[int, None]:
        """Return ``fresh`` for ``generation``, emptying it first if it belongs to an older one."""
        if self.fresh_generation != generation:
            self.fresh = {}
            self.fresh_generation = generation
        return self.fresh


@final
@attrs.define(eq=False)
class _Consumer:
    """One consumer's registration: fixed priority and kind, current state, last generation tried."""

    consumer_id: int
    add_index: int
    """Position in add order; sorts the browsers for ``work_available``."""
    level: _Level
    acquiring: bool
    state: ConsumerState
    tried_generation: int = -1


def _check_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"ConsumerLists: {name} must be an int, got {quote(value)}"
        raise TypeError(msg)


class ConsumerLists:
    """The consumer lists of one queue: registers consumers and decides whom to notify of work.

    Owned by one actor (the queue or its consumer manager), so it is unsynchronised.

    Args:
        hand_over_timeout_s: how long a notified acquiring consumer may stay silent before
            ``hand_overs_due`` passes its work on; None never passes it on (Qpid's behaviour).
            Only notifications made with ``now`` given are timed.

    Raises:
        ValueError: ``hand_over_timeout_s`` is neither None nor a finite number > 0.
    """

    __slots__ = (
        "_added",
        "_awaiting",
        "_browser_order",
        "_consumers",
        "_generation",
        "_levels",
        "_levels_by_priority",
        "_non_acquiring",
        "_not_interested",
        "_timeout",
    )

    def __init__(self, hand_over_timeout_s: float | None = DEFAULT_HAND_OVER_TIMEOUT_S) -> None:
        self._consumers: dict[int, _Consumer] = {}
        """The All list: every consumer, in add order."""
        self._non_acquiring: dict[int, None] = {}
        self._not_interested: dict[int, None] = {}
        self._levels: list[_Level] = []
        """Priority levels, highest priority first."""
        self._levels_by_priority: dict[int, _Level] = {}
        self._generation = 0
        self._added = 0
        self._browser_order: tuple[int, ...] | None = ()
        """The NonAcquiring ids in add order, or None when it must be recomputed."""
        self._timeout = check_hand_over_timeout("ConsumerLists", hand_over_timeout_s)
        self._awaiting: dict[int, float] = {}
        """Unanswered timed hand-overs: consumer id -> deadline, in notification order (so in
        deadline order, as ``now`` never goes back and the timeout is fixed)."""

    # ------------------------------------------------------------------ events in

    def add(self, consumer_id: int, *, priority: int = 0, acquiring: bool = True, interested: bool = True) -> None:
        """Register a consumer on the list its kind and interest call for.

        Args:
            consumer_id: the consumer's id, unique within these lists.
            priority: higher numbers are notified first.
            acquiring: False for a browser, which sees entries without taking them.
            interested: whether it wants work now.

        Raises:
            DuplicateConsumer: ``consumer_id`` is already registered (a ``ValueError``).
            TypeError: ``consumer_id`` or ``priority`` is not an int.
        """
        _check_int("consumer_id", consumer_id)
        _check_int("priority", priority)
        existing = self._consumers.get(consumer_id)
        if existing is not None:
            msg = (
                f"cannot add consumer {consumer_id}: it is already registered "
                f"(state={existing.state.name}, priority={existing.level.priority}); remove it first"
            )
            raise DuplicateConsumer(msg)
        level = self._levels_by_priority.get(priority)
        if level is None:
            level = _Level(priority)
            self._levels_by_priority[priority] = level
            bisect.insort(self._levels, level, key=lambda lv: -lv.priority)
        level.members += 1
        if not interested:
            state = _NOT_INTERESTED
        elif acquiring:
            state = _INTERESTED
        else:
            state = _NON_ACQUIRING
        consumer = _Consumer(consumer_id, self._added, level, acquiring, state)
        self._added += 1
        self._consumers[consumer_id] = consumer
        self._attach(consumer, state)

    def remove(self, consumer_id: int) -> None:
        """Forget a consumer (closed or detached), whatever list it is on.

        Raises:
            UnknownConsumer: ``consumer_id`` is not registered (a ``KeyError``).
        """
        consumer = self._get(consumer_id, "remove")
        self._detach(consumer)
        del self._consumers[consumer_id]
        level = consumer.level
        level.members -= 1
        if level.members == 0:
            del self._levels_by_priority[level.priority]
            self._levels.remove(level)

    def set_interest(self, consumer_id: int, interested: bool) -> None:
        """Record whether a consumer wants work now (credit, flow control, backpressure).

        An acquiring consumer that becomes interested joins the back of Interested at its
        priority; one that is Interested or Notified already stays where it is. Losing
        interest moves it to NotInterested. A browser moves between NonAcquiring and
        NotInterested.

        Raises:
            UnknownConsumer: ``consumer_id`` is not registered (a ``KeyError``).
        """
        consumer = self._get(consumer_id, "set the interest of")
        if not interested:
            target = _NOT_INTERESTED
        elif consumer.state is not _NOT_INTERESTED:
            return
        elif consumer.acquiring:
            target = _INTERESTED
        else:
            target = _NON_ACQUIRING
        if consumer.state is not target:
            self._detach(consumer)
            self._attach(consumer, target)

    def work_available(self, now: float | None = None) -> tuple[int, ...]:
        """Start a new generation because new work appeared, and return the ids to notify.

        Args:
            now: the caller's clock; given, the hand-over to the acquiring consumer is timed
                (see ``hand_overs_due``). It must not go back between calls.

        Returns:
            Every NonAcquiring consumer in add order, then the front Interested consumer of
            the highest priority that has one (now Notified), if any.
        """
        self._generation += 1
        browsers = self._browser_order
        if browsers is None:
            consumers = self._consumers
            browsers = tuple(sorted(self._non_acquiring, key=lambda cid: consumers[cid].add_index))
            self._browser_order = browsers
        for level in self._levels:
            if level.interested:
                return (*browsers, self._notify(next(iter(level.interested)), now))
        return browsers

    def exhausted(self, consumer_id: int, *, more_work: bool, now: float | None = None) -> tuple[int, ...]:
        """Record that a consumer found nothing more it could take, and pass the work on if some is left.

        A Notified consumer moves to the back of Interested at its priority (asymptotic
        fairness) and counts as tried in the current generation; a consumer on any other
        list stays put.

        Args:
            consumer_id: the consumer that ran dry; this answers its hand-over.
            more_work: whether the queue still holds entries nobody has taken.
            now: the caller's clock; given, a hand-over to the next consumer is timed.

        Returns:
            With ``more_work``, the front-most Interested consumer of the highest priority
            not yet tried in this generation (now Notified), as a 1-tuple; otherwise, or if
            every Interested consumer was tried already, ``()``.

        Raises:
            UnknownConsumer: ``consumer_id`` is not registered (a ``KeyError``).
        """
        consumer = self._get(consumer_id, "mark as exhausted")
        if consumer.state is _NOTIFIED:
            self._detach(consumer)
            consumer.tried_generation = self._generation
            self._attach(consumer, _INTERESTED)
        if not more_work:
            return ()
        for level in self._levels:
            candidate = self._untried_front(level)
            if candidate is not None:
                return (self._notify(candidate, now),)
        return ()

    def hand_overs_due(self, now: float) -> tuple[int, ...]:
        """Pass on the work of every hand-over unanswered at ``now`` past its deadline.

        Each such consumer stays Notified (it may still wake and pull; the queue decides who
        takes each entry) but its hand-over is over: it times out once. Its work goes, as with
        ``exhausted(..., more_work=True)``, to the front-most Interested consumer of the highest
        priority not yet tried in this generation, whose own hand-over is timed from ``now``.
        Whether work is still left the lists cannot know: a consumer notified in vain pulls
        nothing and reports ``exhausted``, at the cost of one round trip.

        Returns:
            The consumers now Notified, one per timed-out hand-over that found a candidate, in
            the order the hand-overs began.
        """
        awaiting = self._awaiting
        woken: list[int] = []
        while awaiting:
            consumer_id, deadline = next(iter(awaiting.items()))
            if deadline > now:
                break
            del awaiting[consumer_id]
            for level in self._levels:
                candidate = self._untried_front(level)
                if candidate is not None:
                    woken.append(self._notify(candidate, now))
                    break
        return tuple(woken)

    def hand_over_deadline(self) -> float | None:
        """Return when the oldest unanswered timed hand-over falls due, or None if there is none."""
        for deadline in self._awaiting.values():
            return deadline
        return None

    # ------------------------------------------------------------------ queries

    def state_of(self, consumer_id: int) -> ConsumerState:
        """Return the list the consumer is on."""
        return self._get(consumer_id, "get the state of").state

    def priority_of(self, consumer_id: int) -> int:
        """Return the consumer's priority (higher is served first)."""
        return self._get(consumer_id, "get the priority of").level.priority

    def is_acquiring(self, consumer_id: int) -> bool:
        """Return False for a browser, True for a consumer that takes entries."""
        return self._get(consumer_id, "ask about").acquiring

    def __contains__(self, consumer_id: object) -> bool:
        """Return whether ``consumer_id`` is registered."""
        return consumer_id in self._consumers

    def __len__(self) -> int:
        """Return the number of registered consumers."""
        return len(self._consumers)

    def __repr__(self) -> str:
        """Show the list sizes, for debugging."""
        s = self.stats()
        return (
            f"<ConsumerLists all={s.all} non_acquiring={s.non_acquiring} not_interested={s.not_interested} "
            f"interested={s.interested} notified={s.notified} awaiting={len(self._awaiting)} "
            f"generation={self._generation}>"
        )

    def all_ids(self) -> tuple[int, ...]:
        """Return every consumer id, in add order (the All list)."""
        return tuple(self._consumers)

    def interested_ids(self) -> tuple[int, ...]:
        """Return the Interested ids in notification order: highest priority first, front to back."""
        return tuple(cid for level in self._levels for cid in level.interested)

    def notified_ids(self) -> tuple[int, ...]:
        """Return the Notified ids: highest priority first, then in the order they were notified."""
        return tuple(cid for level in self._levels for cid in level.notified)

    def awaiting_ids(self) -> tuple[int, ...]:
        """Return the Notified ids whose timed hand-over is unanswered and not yet timed out, oldest first."""
        return tuple(self._awaiting)

    def stats(self) -> ConsumerListStats:
        """Return a snapshot of the list sizes."""
        by_priority = tuple((level.priority, len(level.interested), len(level.notified)) for level in self._levels)
        return ConsumerListStats(
            all=len(self._consumers),
            non_acquiring=len(self._non_acquiring),
            not_interested=len(self._not_interested),
            interested=sum(row[1] for row in by_priority),
            notified=sum(row[2] for row in by_priority),
            by_priority=by_priority,
        )

    # ------------------------------------------------------------------ transitions (the only place state changes)

    def _get(self, consumer_id: int, action: str) -> _Consumer:
        consumer = self._consumers.get(consumer_id)
        if consumer is None:
            msg = (
                f"cannot {action} consumer {consumer_id!r}: it is not registered "
                f"({len(self._consumers)} consumers are); add it first, or look for a double remove"
            )
            raise UnknownConsumer(msg)
        return consumer

    def _notify(self, consumer_id: int, now: float | None = None) -> int:
        """Move an Interested consumer to Notified, mark it tried in this generation, and return its id.

        With ``now`` (and a timeout), the hand-over is timed: it falls due at ``now + timeout``.
        """
        consumer = self._consumers[consumer_id]
        self._detach(consumer)
        consumer.tried_generation = self._generation
        self._attach(consumer, _NOTIFIED)
        if now is not None and self._timeout is not None:
            self._awaiting[consumer_id] = now + self._timeout
        return consumer_id

    def _untried_front(self, level: _Level) -> int | None:
        """Return the front-most Interested consumer of ``level`` not tried in this generation, in O(1).

        A consumer is marked tried only as it leaves Interested, and every entry to Interested
        is an append. So Interested is: consumers appended before this generation began (all
        untried), then consumers appended during it. If the front is tried, the first part is
        empty and the answer is the front of ``fresh``, the untried ones of the second part.
        """
        if not level.interested:
            return None
        front = next(iter(level.interested))
        if self._consumers[front].tried_generation != self._generation:
            return front
        fresh = level.fresh_in(self._generation)
        return next(iter(fresh)) if fresh else None

    def _detach(self, consumer: _Consumer) -> None:
        cid = consumer.consumer_id
        state = consumer.state
        # ``is`` tests against module constants: a ``match`` on dotted enum names looks each one up.
        if state is _INTERESTED:
            level = consumer.level
            del level.interested[cid]
            if level.fresh_generation == self._generation:
                level.fresh.pop(cid, None)
        elif state is _NOTIFIED:
            del consumer.level.notified[cid]
            if self._awaiting:
                self._awaiting.pop(cid, None)  # leaving Notified answers the hand-over
        elif state is _NOT_INTERESTED:
            del self._not_interested[cid]
        else:
            del self._non_acquiring[cid]
            self._browser_order = None

    def _attach(self, consumer: _Consumer, state: ConsumerState) -> None:
        cid = consumer.consumer_id
        consumer.state = state
        if state is _INTERESTED:
            level = consumer.level
            level.interested[cid] = None
            if consumer.tried_generation != self._generation:
                level.fresh_in(self._generation)[cid] = None
        elif state is _NOTIFIED:
            consumer.level.notified[cid] = None
        elif state is _NOT_INTERESTED:
            self._not_interested[cid] = None
        else:
            self._non_acquiring[cid] = None
            self._browser_order = None
