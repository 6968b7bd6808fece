"""The one home of the subscription's ack-id ledger: what is held here, what was settled, what the queue said.

This is the sans-IO core of ``StreamingPullManager``: the manager translates deliveries, settlements
and the queue's ``AckResult`` into calls on an ``AckLedger`` and the answers into messages. The ledger
knows nothing of actors, time or I/O; the one rule that needs a clock (how long a refused ack is
remembered) is told the time.

The queue names a delivery by its tag and gives a message whose lease lapsed back to the same
consumer under the same tag, so one ack id (``consumer_id:tag``) can be delivered more than once.
The ledger tells the cases apart (``Arrival``), so that a message this subscription holds or has
acked is never run twice by it:

* **pending** (received, not settled): a copy is held here; delivered again, that copy stays the one
  that runs, the newest delivery is remembered (a nack names it; a drop takes it in as new), and its
  lease is renewed unless the leaser gave the lease up at ``max_lease_duration_s`` (*expired*: still
  pending, so its callback's settlement still goes out, but no longer counted or extended);
* **acking** (acked, the queue's answer not back yet): delivered again, the ack covers it (the queue
  delivered it before it took the ack); if the answer says the ack took, that second delivery's
  credit is given back;
* **refused** (the queue refused the ack: the lease had lapsed first): delivered again, it is acked
  again instead of run again. Remembered for ``memory_s``, oldest first;
* anything else is a new delivery: a nacked or dropped message coming back, or one delivered again
  while its nack is on its way (the lease lapsed before the nack arrived). Each nack names the
  delivery it is for (``Settled.attempt``, the newest one held here), so the queue ignores a nack
  for an older one and the new delivery stays leased to this subscription.

Every operation is O(1) except ``pending_of``, ``leased_of``, ``ack_all`` and ``took_all`` (O(ids asked
about)) and ``refuse`` (O(refusals it forgets)). State lives in insertion-ordered dicts, so every answer is
deterministic.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from typing import final

import attrs

from conveyor.actors.broker import Delivery
from conveyor.runtime import ConveyorError, quote

__all__ = [
    "REFUSED_MEMORY_S",
    "AckLedger",
    "Answer",
    "Arrival",
    "LedgerError",
    "LedgerSnapshot",
    "Settled",
]

REFUSED_MEMORY_S = 3600.0
"""How long an ack the queue refused is remembered, waiting for the message to be delivered here again.

Long enough for any redelivery to this subscription; the bound only keeps the memory of messages
that went elsewhere (dead-lettered, or delivered to another subscriber) from growing for ever.
"""


class Arrival(enum.Enum):
    """What the subscription does with a delivery (``AckLedger.delivered``)."""

    NEW = "new"
    """Take it in: count it, lease it, run it. It is pending now."""
    RENEW = "renew"
    """A copy is pending here (its lease lapsed and the queue gave it back): extend the new lease at once."""
    COVERED = "covered"
    """Nothing to do: a pending copy whose lease was given up (not renewed), or an ack on its way covers it."""
    ACK_AGAIN = "ack again"
    """The queue refused this message's ack before: ack it again (confirmed), do not run it. It is acking now."""


class Answer(enum.Enum):
    """What the queue's word on a confirmed ack asks of the subscription (``AckLedger.answered``)."""

    TOOK = "took"
    """The ack took; nothing more to do."""
    CREDIT = "credit"
    """The ack took, and the queue had delivered the message again meanwhile: give that delivery's credit back."""
    REFUSED = "refused"
    """The ack came after the lease lapsed: remember it (``refuse``), to ack the redelivery instead of running it."""
    UNKNOWN = "unknown"
    """Not an ack on its way here (answered already, or never sent): nothing to do."""


class LedgerError(ConveyorError, ValueError):
    """An argument the ledger cannot take (a bad time or memory)."""


@final
@attrs.frozen
class Settled:
    """A pending message settled (acked, nacked or dropped): what the subscription still has to do.

    Attributes:
        release: the load controller and the leaser still count it: tell them it is done. False if
            they forgot it when the leaser gave its lease up (``expire``).
        attempt: for a nack, the ``delivery_count`` of the newest delivery held here: the one the
            nack is for. 0 for an ack or a drop (an ack is never stale: it settles whatever delivery
            of the tag is current, the newest included).
        redelivery: for a drop only, the newer delivery the queue made while the copy here was held
            (its lease lapsed): that delivery is live, to be taken in as new (``delivered``).
    """

    release: bool
    attempt: int = 0
    redelivery: Delivery | None = None


_RELEASE = Settled(release=True)
_RELEASED = Settled(release=False)
"""The settlements of acks and plain drops, shared: an ack is made for every message."""


@final
@attrs.frozen
class LedgerSnapshot:
    """The ledger's counts, for metrics and tests.

    Attributes:
        pending: received, not settled (expired ones included).
        expired: pending, with the lease given up at the maximum.
        redelivered: pending, delivered again while held here.
        acking: acked, the queue's answer not back yet.
        refused: acks the queue refused, remembered until the message comes back.
    """

    pending: int
    expired: int
    redelivered: int
    acking: int
    refused: int


@final
class AckLedger:
    """The ack ids a subscription holds, has settled, or is waiting to hear about.

    Owned by one actor (the ``StreamingPullManager``), so it is unsynchronised.
    """

    __slots__ = ("_acking", "_consumer_id", "_expired", "_memory_s", "_pending", "_redelivered", "_refused")

    def __init__(self, memory_s: float = REFUSED_MEMORY_S) -> None:
        """Make an empty ledger that remembers refused acks for ``memory_s`` seconds."""
        if type(memory_s) not in (int, float) or not math.isfinite(memory_s) or memory_s <= 0:
            msg = f"AckLedger memory_s must be a finite number of seconds > 0, got {quote(memory_s)}"
            raise LedgerError(msg)
        self._memory_s = float(memory_s)
        self._pending: dict[str, int] = {}
        """Received, not settled -> the delivery_count it arrived with."""
        self._expired: set[str] = set()
        """Pending, but its lease was given up at max_lease_duration_s: released, not extended."""
        self._redelivered: dict[str, Delivery] = {}
        """Pending -> its newest delivery (the lease lapsed and the queue delivered it again)."""
        self._acking: dict[str, bool] = {}
        """Acked, the queue's answer not back yet -> delivered again meanwhile?"""
        self._refused: dict[str, float] = {}
        """Acked here, the ack refused by the queue -> when (oldest first)."""
        self._consumer_id: int | None = None

    # ------------------------------------------------------------------ deliveries

    def delivered(self, ack_id: str, delivery: Delivery) -> Arrival:
        """Record a delivery and say what to do with it.

        Args:
            ack_id: the delivery's ack id (``ack_id_of(delivery)``, which the caller has at hand).
            delivery: the delivery itself; its ``consumer_id`` names the broker consumer the first time.

        Returns:
            ``NEW`` (now pending), ``RENEW``, ``COVERED`` or ``ACK_AGAIN`` (now acking): see ``Arrival``.
        """
        if self._consumer_id is None:
            self._consumer_id = delivery.consumer_id
        if ack_id in self._pending:
            self._redelivered[ack_id] = delivery
            return Arrival.COVERED if ack_id in self._expired else Arrival.RENEW
        acking = self._acking
        if ack_id in acking:
            acking[ack_id] = True  # the queue delivered it before it took our ack, which covers it
            return Arrival.COVERED
        if ack_id in self._refused:
            del self._refused[ack_id]
            acking[ack_id] = False
            return Arrival.ACK_AGAIN
        self._pending[ack_id] = delivery.delivery_count
        return Arrival.NEW

    # ------------------------------------------------------------------ settlements

    def expire(self, ack_id: str) -> bool:
        """The leaser gave up a pending message's lease (held ``max_lease_duration_s``): stop counting it.

        It stays pending: its callback's own settlement still goes to the queue (which takes it if the
        lease still holds, and gives the broker consumer its credit back either way). A redelivery
        meanwhile is ``COVERED``, not renewed.

        Returns:
            True if the load controller and the leaser must forget it now; False if it is not pending
            or was expired already.
        """
        if ack_id not in self._pending or ack_id in self._expired:
            return False
        self._expired.add(ack_id)
        return True

    def ack(self, ack_id: str) -> Settled | None:
        """Settle a pending message by an ack, which is then on its way (``answered`` ends that).

        The ack settles a newer delivery of the message too (the same tag), if the queue made one.

        Returns:
            What is left to do, or None if it is not pending (settled before: the first decision stands).
        """
        if self._pending.pop(ack_id, None) is None:
            return None
        self._acking[ack_id] = False
        if self._redelivered:
            self._redelivered.pop(ack_id, None)
        if ack_id in self._expired:
            self._expired.discard(ack_id)
            return _RELEASED
        return _RELEASE

    def ack_all(self, ack_ids: Iterable[str]) -> tuple[list[str], list[str]]:
        """``ack`` each of ``ack_ids`` in turn, for a batch of acks in one call.

        Returns:
            (the ids it settled, in order; those of them the load controller and the leaser still
            count, the ones ``ack`` answers ``release`` for).
        """
        pending, acking, redelivered, expired = self._pending, self._acking, self._redelivered, self._expired
        settled: list[str] = []
        released: list[str] = []
        for ack_id in ack_ids:
            if pending.pop(ack_id, None) is None:
                continue
            acking[ack_id] = False
            settled.append(ack_id)
            if redelivered:
                redelivered.pop(ack_id, None)
            if expired and ack_id in expired:
                expired.discard(ack_id)
            else:
                released.append(ack_id)
        return settled, released

    def nack(self, ack_id: str) -> Settled | None:
        """Settle a pending message by a nack, for its newest delivery (``Settled.attempt``).

        Returns:
            What is left to do, or None if it is not pending.
        """
        attempt = self._pending.pop(ack_id, None)
        if attempt is None:
            return None
        newer = self._redelivered.pop(ack_id, None)  # the nack settles it too (the same tag)
        return Settled(self._unexpire(ack_id), attempt if newer is None else newer.delivery_count)

    def drop(self, ack_id: str) -> Settled | None:
        """Settle a pending message by a drop (nothing goes to the queue); None if it is not pending.

        If the queue delivered it again while it was held here, that delivery is live: it comes back
        as ``Settled.redelivery``.
        """
        if self._pending.pop(ack_id, None) is None:
            return None
        release = self._unexpire(ack_id)
        newer = self._redelivered.pop(ack_id, None)
        if newer is None:
            return _RELEASE if release else _RELEASED
        return Settled(release, redelivery=newer)

    def _unexpire(self, ack_id: str) -> bool:
        """Forget that a settled message was expired; True if it was not (load and leaser still count it)."""
        if ack_id in self._expired:
            self._expired.discard(ack_id)
            return False
        return True

    # ------------------------------------------------------------------ the queue's answers

    def answered(self, ack_id: str, took: bool) -> Answer:
        """Record the queue's answer to a confirmed ack of ``ack_id``: whether it took.

        A refused ack is not remembered here: the caller does that with ``refuse``, told the time.
        """
        delivered_again = self._acking.pop(ack_id, None)
        if delivered_again is None:
            return Answer.UNKNOWN
        if not took:
            return Answer.REFUSED
        return Answer.CREDIT if delivered_again else Answer.TOOK

    def took_all(self, ack_ids: Iterable[str]) -> list[str]:
        """Record that the queue took the confirmed acks of ``ack_ids`` (``answered(ack_id, True)`` each).

        Returns:
            Those answered ``CREDIT``, in order: delivered again meanwhile, that delivery's credit to give back.
        """
        acking = self._acking
        return [ack_id for ack_id in ack_ids if acking.pop(ack_id, False)]

    def refuse(self, ack_id: str, now: float) -> None:
        """Remember that the queue refused the ack of ``ack_id`` at ``now``, and forget refusals older than the memory.

        Raises:
            LedgerError: ``now`` is not a finite number.
        """
        if type(now) not in (int, float) or not math.isfinite(now):
            msg = f"AckLedger.refuse: now must be a finite number of seconds, got {quote(now)}"
            raise LedgerError(msg)
        refused = self._refused
        refused.pop(ack_id, None)
        refused[ack_id] = now
        while refused:
            oldest = next(iter(refused))
            if now - refused[oldest] < self._memory_s:
                break
            del refused[oldest]

    # ------------------------------------------------------------------ queries

    def is_pending(self, ack_id: str) -> bool:
        """Return whether ``ack_id`` was received and is not settled yet (an expired one too)."""
        return ack_id in self._pending

    def pending_of(self, ack_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Return those of ``ack_ids`` that are pending, in the order given."""
        pending = self._pending
        return tuple(ack_id for ack_id in ack_ids if ack_id in pending)

    def leased_of(self, ack_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Return those of ``ack_ids`` that are pending and still leased (not expired), in the order given."""
        pending, expired = self._pending, self._expired
        return tuple(ack_id for ack_id in ack_ids if ack_id in pending and ack_id not in expired)

    def is_refused(self, ack_id: str) -> bool:
        """Return whether a refusal of ``ack_id``'s ack is remembered."""
        return ack_id in self._refused

    @property
    def pending(self) -> Mapping[str, int]:
        """The pending ack ids, in arrival order -> the ``delivery_count`` each arrived with (a live view)."""
        return self._pending

    @property
    def acking(self) -> dict[str, bool]:
        """The acks on their way -> whether the message was delivered again meanwhile.

        The live table: read it, and edit it only to plant a bug in a simulation.
        """
        return self._acking

    @property
    def consumer_id(self) -> int | None:
        """The broker consumer's id, from the first delivery (None before one)."""
        return self._consumer_id

    def snapshot(self) -> LedgerSnapshot:
        """Return the counts as a frozen value."""
        return LedgerSnapshot(
            pending=len(self._pending),
            expired=len(self._expired),
            redelivered=len(self._redelivered),
            acking=len(self._acking),
            refused=len(self._refused),
        )

    def __len__(self) -> int:
        """Return how many messages are pending."""
        return len(self._pending)

    def __repr__(self) -> str:
        """Show the counts, for debugging."""
        s = self.snapshot()
        return (
            f"<AckLedger pending={s.pending} expired={s.expired} redelivered={s.redelivered} "
            f"acking={s.acking} refused={s.refused}>"
        )
