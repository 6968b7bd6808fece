"""The subscriber's lease table: which messages to keep extending, by how much, and when to look again.

This is the sans-IO core of seed 003's *leaser*. Every message the subscriber received and has
not finished (acked, nacked or dropped) is leased: the server will redeliver it unless its ack
deadline keeps being pushed back. The table remembers when each lease arrived; ``maintain``
returns the work of one leaser pass as a ``LeaseWork`` value, and the caller sends the
deadline extensions and sets a timer for ``next_check_at``.

Rules:

* The extension asked for is the 99th percentile of the processing-time ``Histogram``,
  clamped into [``min_duration_per_lease_extension_s``, ``max_duration_per_lease_extension_s``].
* A lease expires once its message's callback has been scheduled for ``max_lease_duration_s``:
  ``maintain`` drops it and lists it in ``expired``; it is no longer extended, and the server
  redelivers it when its last deadline passes. The clock starts when the callback is handed to
  the workers, not at receipt, as in Google's client: a message added ``on_hold`` (held behind
  its ordering key) is extended for as long as it waits and never expires until
  ``start_clock``. (The test is ``now - started >= max_lease_duration_s`` or ``now >= started +
  max_lease_duration_s``, which differ only by float rounding: the first keeps every extended
  lease younger than the limit, the second expires a lease at the very check scheduled for its
  boundary.)
* ``next_check_at`` is ``now + max(0, 0.9 * extension_s - 1)``, but never later than the
  earliest expiry boundary, so an expiring lease is dropped on time rather than extended once
  more. It is None when the table is empty. An extension under 1/0.9 s leaves no lead at
  all: ``next_check_at`` is then ``now`` itself, so such a ``FlowControl`` makes the caller
  check without pause.
* ``add`` assumes the new message's server deadline is at least
  ``now + min_duration_per_lease_extension_s`` (the caller acknowledges receipt with at least
  that deadline), and moves ``next_check_at`` earlier if this lease needs looking at sooner.
* **Lapses.** The table remembers, per lease, until when the last extension it asked for runs
  (``now + extension_s`` of that request: the server's deadline is never earlier, since a
  request arrives after it is made). A pass that runs at or after that time came too late: the
  caller did not run while the deadline passed (its process was paused, or its clock jumped),
  so the server has taken the message back and will deliver it again. ``maintain`` lists such
  leases in ``lapsed``, and still extends them with the rest (the server may have delivered the
  message to this very subscriber again, under the same ack id); the caller decides what to do
  with a message it holds whose lease it lost. ``renew`` records a new deadline when the server
  delivers a leased message again.

**Invariant.** If the caller runs ``maintain`` no later than ``next_check_at`` (read after
each ``add`` and ``maintain``) and sends every extension it returns, then between two maintain
calls every non-expired lease has a server deadline later than the next check: no lease the
table still holds ever lapses at the server. The proof is one line each way: an extended lease's
deadline is ``now + extension_s > now + max(0, 0.9 * extension_s - 1) >= next_check_at``, and a
new lease's deadline is ``now + min_duration > now + max(0, 0.9 * min_duration - 1)``, which
``add`` makes an upper bound of ``next_check_at``.

Time is told, never read: every method that takes ``now`` refuses a ``now`` earlier than one
it was already given, so the order clocks were started in is also the order they run out in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NoReturn, Protocol, TypeAlias, final

import attrs

from conveyor.runtime import ConveyorError, is_finite_number, quote

from ._flow import Arrival, Identified
from ._histogram import Histogram
from ._settings import FlowControl

_INF = math.inf

__all__ = [
    "EXTENSION_FRACTION",
    "SAFETY_MARGIN_S",
    "DuplicateLease",
    "Finished",
    "KeyedArrival",
    "LeaseTable",
    "LeaseWork",
]

EXTENSION_FRACTION = 0.9
"""The next check comes after this fraction of the extension just asked for..."""
SAFETY_MARGIN_S = 1.0
"""...minus this many seconds, to leave time for the extension to reach the server."""


class KeyedArrival(Arrival, Protocol):
    """A received message as ``LeaseTable.add_many`` reads it (a ``Received`` is one)."""

    @property
    def key(self) -> str | None:
        """Its ordering key: with one (not empty), its callback may wait behind the key, so it is added on hold."""
        ...


class Finished(Identified, Protocol):
    """A finished message as ``LeaseTable.remove_many`` reads it (a ``Done`` is one)."""

    @property
    def acked(self) -> bool:
        """Whether it was acked (only then does its processing time count)."""
        ...


class DuplicateLease(ConveyorError, ValueError):
    """``LeaseTable.add`` was given an ack id that is already leased."""


@final
@attrs.frozen
class LeaseWork:
    """The outcome of one leaser pass, for the caller to carry out.

    Attributes:
        extend: ack ids whose deadline to extend by ``extension_s``, in arrival order.
        extension_s: how long an extension to ask the server for.
        expired: ack ids dropped from the table because their callbacks were scheduled
            ``max_lease_duration_s`` ago; not extended, the server will redeliver them.
        next_check_at: when to call ``maintain`` again, or None when the table is empty.
        lapsed: ack ids in ``extend`` whose last requested deadline had already passed when
            this pass ran: the server took them back (see the module docstring).
    """

    extend: tuple[str, ...]
    extension_s: float
    expired: tuple[str, ...]
    next_check_at: float | None
    lapsed: tuple[str, ...] = ()


_Lease: TypeAlias = tuple[float, int, float]
"""A lease: when it arrived, how big its message is, and until when its last requested extension runs.

A tuple, not an object: one is made per message received, and a tuple costs a fraction of an
instance to make. Its max-lease clock, once started, is in ``LeaseTable._clocks``."""


def _check_extension(extension_s: object, action: str, ack_id: str | None = None) -> None:
    """Refuse an extension that is not a finite number of seconds > 0 (``action`` names ``ack_id``, if given)."""
    if type(extension_s) is float and 0.0 < extension_s < _INF:  # the common case, first: once per message
        return
    if not is_finite_number(extension_s) or extension_s <= 0:
        action = _action(action, ack_id)
        msg = (
            f"LeaseTable cannot {action}: extension_s must be a finite number of seconds > 0, "
            f"got {quote(extension_s)}"
        )
        raise ValueError(msg)


def _action(action: str, ack_id: str | None) -> str:
    """The text of what was refused: ``action`` and the lease it was for (built only for an error)."""
    return action if ack_id is None else f"{action} {ack_id!r}"


def _lead(extension_s: float) -> float:
    """Return how long after an extension to check again, so the extension never runs out first."""
    return max(0.0, extension_s * EXTENSION_FRACTION - SAFETY_MARGIN_S)


@final
class LeaseTable:
    """The leased messages of one subscriber, in arrival order, and the schedule that keeps them leased.

    Owned by one actor, so it is unsynchronised. ``add``, ``start_clock``, ``remove`` and the
    queries are O(1); their batch forms (``add_many``, ``start_clocks``, ``remove_many``, for a
    ``ReceivedBatch``, a ``Scheduled`` or a ``Dones``) are O(batch) and check ``now`` once;
    ``maintain`` is O(leases).
    """

    __slots__ = ("_bytes", "_clocks", "_flow", "_leases", "_next_check_at", "_now")

    def __init__(self, flow: FlowControl) -> None:
        if not isinstance(flow, FlowControl):
            msg = f"LeaseTable needs a FlowControl, got {quote(flow)}"
            raise TypeError(msg)
        self._flow = flow
        self._leases: dict[str, _Lease] = {}
        self._clocks: dict[str, float] = {}  # ack id -> when its clock started, in that order; none while on hold
        self._bytes = 0
        self._now = -math.inf
        self._next_check_at: float | None = None

    @property
    def flow(self) -> FlowControl:
        """The limits the leases are kept under."""
        return self._flow

    def add(
        self, ack_id: str, size: int, now: float, extension_s: float | None = None, *, on_hold: bool = False
    ) -> None:
        """Lease a message received at ``now``, and bring ``next_check_at`` forward if it needs it.

        Args:
            ack_id: the message's ack id, unique among leased messages.
            size: its size in bytes.
            now: the current time, in seconds of the caller's clock.
            extension_s: the first extension the caller asks for (its receipt acknowledgement);
                ``min_duration_per_lease_extension_s`` if not given.
            on_hold: its callback is not scheduled yet (it may wait behind its ordering key), so
                its max-lease clock does not start before ``start_clock``; otherwise it starts now.

        Raises:
            DuplicateLease: ``ack_id`` is already leased (a ``ValueError``).
            ValueError: ``size`` is negative, ``extension_s`` is not a positive number, or ``now``
                is not finite or earlier than a time already given.
            TypeError: ``size`` is not an int, or ``now`` is not a number.
        """
        self._advance(now, "add lease", ack_id)
        flow = self._flow
        first = flow.min_duration_per_lease_extension_s if extension_s is None else extension_s
        _check_extension(first, "add lease", ack_id)
        if type(size) is not int or size < 0 or ack_id in self._leases:
            self._refuse(ack_id, size, now)
        self._leases[ack_id] = (now, size, now + first)
        self._bytes += size
        shortest = flow.min_duration_per_lease_extension_s
        due = now + _lead(first if first < shortest else shortest)
        if not on_hold:
            self._clocks[ack_id] = now
            due = min(due, now + flow.max_lease_duration_s)
        if self._next_check_at is None or due < self._next_check_at:
            self._next_check_at = due

    def add_many(self, arrivals: Iterable[KeyedArrival], now: float, extension_s: float | None = None) -> None:
        """Lease several messages received at ``now``: the same as ``add`` of each in turn, at less cost.

        Each is added under its ``ack_id`` with its ``size``, ``on_hold`` if it has a ``key``.
        ``now`` and ``extension_s`` are checked once, even for no arrivals.

        Raises:
            DuplicateLease, ValueError, TypeError: as ``add``; for a bad arrival, those before it
                are leased (and ``next_check_at`` covers them).
        """
        self._advance(now, "add leases")
        flow = self._flow
        first = flow.min_duration_per_lease_extension_s if extension_s is None else extension_s
        _check_extension(first, "add leases")
        leases = self._leases
        clocks = self._clocks
        until = now + first
        count = len(leases)
        added = 0  # bytes leased but not yet in _bytes
        started = False
        try:
            for arrival in arrivals:
                ack_id = arrival.ack_id
                size = arrival.size
                if type(size) is not int or size < 0 or ack_id in leases:
                    self._refuse(ack_id, size, now)
                leases[ack_id] = (now, size, until)
                if not arrival.key:
                    clocks[ack_id] = now
                    started = True
                added += size
        finally:
            if len(leases) > count:  # as add does for each: the earliest of their checks
                self._bytes += added
                shortest = flow.min_duration_per_lease_extension_s
                due = now + _lead(first if first < shortest else shortest)
                if started:
                    due = min(due, now + flow.max_lease_duration_s)
                if self._next_check_at is None or due < self._next_check_at:
                    self._next_check_at = due

    def _refuse(self, ack_id: str, size: object, now: float) -> NoReturn:
        """Raise the error for a lease ``add`` cannot take: a size not an int >= 0, or an ack id already leased."""
        if type(size) is not int:
            msg = f"LeaseTable.add: size of lease {quote(ack_id)} must be an int, got {quote(size)}"
            raise TypeError(msg)
        if size < 0:
            msg = f"LeaseTable.add: size of lease {quote(ack_id)} must be >= 0, got {quote(size)}"
            raise ValueError(msg)
        msg = (
            f"cannot add lease {quote(ack_id)} at now={quote(now)}: it is already leased "
            f"(arrived={quote(self._leases[ack_id][0])}, "
            f"{len(self._leases)} leases); remove it when the message is finished before adding it again"
        )
        raise DuplicateLease(msg)

    def start_clock(self, ack_id: str, now: float) -> bool:
        """Start the max-lease clock of a lease added ``on_hold``: its callback was scheduled at ``now``.

        Returns:
            Whether a clock started (False if ``ack_id`` is not leased or its clock already runs).

        Raises:
            ValueError: ``now`` is not finite or is earlier than a time already given.
        """
        self._advance(now, "start the clock of lease", ack_id)
        if ack_id not in self._leases or ack_id in self._clocks:
            return False
        self._clocks[ack_id] = now
        due = now + self._flow.max_lease_duration_s
        if self._next_check_at is None or due < self._next_check_at:
            self._next_check_at = due
        return True

    def start_clocks(self, ack_ids: Iterable[str], now: float) -> int:
        """Start the max-lease clocks of several leases: the same as ``start_clock`` of each in turn, at less cost.

        ``now`` is checked once, even for no ack ids.

        Returns:
            How many clocks started.
        """
        self._advance(now, "start the clocks of leases")
        leases = self._leases
        clocks = self._clocks
        started = 0
        try:
            for ack_id in ack_ids:
                if ack_id in leases and ack_id not in clocks:
                    clocks[ack_id] = now
                    started += 1
        finally:
            if started:
                due = now + self._flow.max_lease_duration_s
                if self._next_check_at is None or due < self._next_check_at:
                    self._next_check_at = due
        return started

    def renew(self, ack_id: str, now: float, extension_s: float) -> bool:
        """Record that the caller asked for ``extension_s`` more on a leased message, outside ``maintain``.

        For a message the server delivered again (its lease had lapsed) while the caller still
        holds it: the new delivery has the server's short default deadline, so the caller extends
        it at once rather than at the next pass. ``next_check_at`` comes forward if needed.

        Returns:
            Whether ``ack_id`` is leased (nothing is recorded otherwise).

        Raises:
            ValueError: ``extension_s`` is not a positive number, or ``now`` is not finite or is
                earlier than a time already given.
        """
        self._advance(now, "renew lease", ack_id)
        _check_extension(extension_s, "renew lease", ack_id)
        lease = self._leases.get(ack_id)
        if lease is None:
            return False
        arrived, size, _ = lease
        self._leases[ack_id] = (arrived, size, now + extension_s)
        due = now + _lead(extension_s)
        started = self._clocks.get(ack_id)
        if started is not None:
            due = min(due, started + self._flow.max_lease_duration_s)
        if self._next_check_at is None or due < self._next_check_at:
            self._next_check_at = due
        return True

    def remove(self, ack_id: str, now: float) -> float | None:
        """Forget a lease because its message was acked, nacked or dropped.

        Returns:
            ``now - arrived``, the processing duration (feed it to the ``Histogram`` when
            the message was acked), or None if ``ack_id`` was not leased.

        Raises:
            ValueError: ``now`` is not finite or is earlier than a time already given.
        """
        self._advance(now, "remove lease", ack_id)
        lease = self._leases.pop(ack_id, None)
        if lease is None:
            return None
        self._clocks.pop(ack_id, None)
        arrived, size, _ = lease
        self._bytes -= size
        if not self._leases:
            self._next_check_at = None
        return now - arrived

    def remove_many(self, finished: Iterable[Finished], now: float) -> list[float]:
        """Forget several leases, each named by its ``ack_id``: the same as ``remove`` of each in turn, at less cost.

        ``now`` is checked once, even for none.

        Returns:
            The processing durations (``now - arrived``) of those leased and ``acked``, in order:
            what to feed the ``Histogram`` (``Histogram.add_many``).
        """
        self._advance(now, "remove leases")
        leases = self._leases
        clocks = self._clocks
        durations: list[float] = []
        freed = 0
        try:
            for item in finished:
                ack_id = item.ack_id
                lease = leases.pop(ack_id, None)
                if lease is None:
                    continue
                clocks.pop(ack_id, None)
                freed += lease[1]
                if item.acked:
                    durations.append(now - lease[0])
        finally:
            self._bytes -= freed
            if not leases:
                self._next_check_at = None
        return durations

    def deadline_for(self, histogram: Histogram) -> float:
        """Return the extension to ask for: the histogram's 99th percentile, clamped to the flow's bounds."""
        flow = self._flow
        p99 = histogram.percentile(99)
        return float(min(max(p99, flow.min_duration_per_lease_extension_s), flow.max_duration_per_lease_extension_s))

    def maintain(self, now: float, histogram: Histogram) -> LeaseWork:
        """Run one leaser pass: drop the expired leases, extend the others, and say when to run again.

        Args:
            now: the current time; at the latest ``next_check_at``, or a lease may lapse.
            histogram: processing durations so far, which set ``extension_s``.

        Returns:
            The leases to extend (in arrival order) and by how much, which of them had lapsed
            before this pass, the leases that expired (in the order their clocks started), and
            the next check.

        Raises:
            ValueError: ``now`` is not finite or is earlier than a time already given.
        """
        self._advance(now, "maintain leases")
        extension_s = self.deadline_for(histogram)
        max_lease = self._flow.max_lease_duration_s
        leases = self._leases
        clocks = self._clocks
        expired: list[str] = []
        # Clocks start in time order (time never goes back), so the expired leases are a prefix.
        while clocks:
            ack_id = next(iter(clocks))
            started = clocks[ack_id]
            if now - started < max_lease and now < started + max_lease:
                break
            del clocks[ack_id]
            self._bytes -= leases.pop(ack_id)[1]
            expired.append(ack_id)
        lapsed = [ack_id for ack_id, (_, _, extended_until) in leases.items() if extended_until <= now]
        until = now + extension_s
        self._leases = leases = {ack_id: (arrived, size, until) for ack_id, (arrived, size, _) in leases.items()}
        if leases:
            next_check_at: float | None = now + _lead(extension_s)
            if clocks:
                next_check_at = min(now + _lead(extension_s), next(iter(clocks.values())) + max_lease)
        else:
            next_check_at = None
        self._next_check_at = next_check_at
        return LeaseWork(
            extend=tuple(leases), extension_s=extension_s, expired=tuple(expired), next_check_at=next_check_at,
            lapsed=tuple(lapsed),
        )

    # ------------------------------------------------------------------ queries

    @property
    def next_check_at(self) -> float | None:
        """When ``maintain`` must run next (brought forward by ``add``), or None when the table is empty."""
        return self._next_check_at

    @property
    def bytes(self) -> int:
        """The total size of the leased messages."""
        return self._bytes

    def on_hold(self, ack_id: str) -> bool:
        """Return whether ``ack_id`` is leased with its max-lease clock not started yet."""
        return ack_id in self._leases and ack_id not in self._clocks

    def extended_until(self, ack_id: str) -> float | None:
        """Return until when the last extension asked for ``ack_id`` runs, or None if it is not leased."""
        lease = self._leases.get(ack_id)
        return None if lease is None else lease[2]

    def oldest_age(self, now: float) -> float | None:
        """Return how long the oldest lease has been held at ``now``, or None when the table is empty.

        Raises:
            ValueError: ``now`` is not finite or is earlier than a time already given.
        """
        self._check_now(now, "measure the oldest lease")
        if not self._leases:
            return None
        return now - next(iter(self._leases.values()))[0]

    def ack_ids(self) -> tuple[str, ...]:
        """Return the leased ack ids in arrival order (oldest first)."""
        return tuple(self._leases)

    def __contains__(self, ack_id: object) -> bool:
        """Return whether ``ack_id`` is leased."""
        return ack_id in self._leases

    def __len__(self) -> int:
        """Return the number of leases."""
        return len(self._leases)

    def __repr__(self) -> str:
        """Show the size of the table and the next check, for debugging."""
        return f"<LeaseTable leases={len(self._leases)} bytes={self._bytes} next_check_at={self._next_check_at!r}>"

    # ------------------------------------------------------------------ time

    def _check_now(self, now: float, action: str) -> None:
        """Refuse a ``now`` that is not a finite number or that goes back in time."""
        if not isinstance(now, (int, float)) or isinstance(now, bool):
            msg = f"LeaseTable cannot {action}: now must be an int or float, got {quote(now)}"
            raise TypeError(msg)
        if not is_finite_number(now):
            msg = f"LeaseTable cannot {action}: now must be finite, got {quote(now)}"
            raise ValueError(msg)
        if now < self._now:
            msg = (
                f"LeaseTable cannot {action} at now={quote(now)}: it was already told now={quote(self._now)}; "
                "time must not go backwards (use one monotonic clock)"
            )
            raise ValueError(msg)

    def _advance(self, now: float, action: str, ack_id: str | None = None) -> None:
        """Check ``now`` and remember it as the latest time seen (``action`` names ``ack_id`` in an error)."""
        if type(now) is not float or not self._now <= now < _INF or now == -_INF:  # the common case passes
            self._check_now(now, _action(action, ack_id))
        self._now = now
