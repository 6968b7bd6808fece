"""Planted bugs for the broker's and the subscriber's promises that had none (issue 17, item 1):
fairness among equal consumers, what a stopping consumer gives back, ``max_lease_duration_s``, and
what a subscriber that shuts down returns to the queue.

Each is the real class with one rule broken, plugged in through ``Variant`` as ``broker.py`` and
``subscriber.py`` do.
"""

from __future__ import annotations

import heapq
from typing import Any

import attrs

from conveyor.actors.broker import ConsumerActor, ConsumerLists, EntryList, Message
from conveyor.actors.broker._entries import Entry, Returned
from conveyor.actors.subscriber import FlowControl, Leaser, StreamingPullManager
from conveyor.actors.subscriber._leases import LeaseTable
from conveyor.actors.subscriber._protocol import Settlement, SettlementKind
from conveyor.runtime import ActorRef

from .broker import TailRelease, queue_with_entries, queue_with_lists
from .subscriber import manager_with


class FavoursFirst(ConsumerLists):
    """Broken: new work goes to the first registered consumer that wants it, not the front of Interested.

    The rotation that makes equal consumers share the work (a notified consumer that runs dry
    goes to the back) is bypassed whenever the first consumer has credit.
    """

    def work_available(self, now: float | None = None) -> tuple[int, ...]:
        self._generation += 1
        consumers = self._consumers
        browsers = tuple(sorted(self._non_acquiring, key=lambda cid: consumers[cid].add_index))
        for level in self._levels:
            if level.interested:
                first = min(level.interested, key=lambda cid: consumers[cid].add_index)  # not the front
                return (*browsers, self._notify(first, now))
        return browsers


FavouringQueue = queue_with_lists(FavoursFirst)


class ForgetsOneHeld(EntryList):
    """Broken: a consumer that stops gives back everything it held but its last entry, which stays acquired
    by nobody: never delivered again, never settled."""

    def remove_consumer(self, consumer_id: int, now: float) -> Returned:
        cursor = self._cursors.get(consumer_id)
        if cursor is None:
            return Returned()
        returned = self.give_back(consumer_id, tuple(cursor.held)[:-1], now, 0.0)
        del self._cursors[consumer_id]
        self._top_priority = max((cursor.priority for cursor in self._cursors.values()), default=0)
        return returned


class StoppedToTail(TailRelease):
    """Broken: what a stopping consumer held goes back to the tail of its level, not each entry to its position
    (a nack, release or lapse still returns an entry to its place)."""

    def give_back(self, *args: Any, **kwargs: Any) -> Returned:
        return EntryList.give_back(self, *args, **kwargs)

    def remove_consumer(self, consumer_id: int, now: float) -> Returned:
        returned = super().remove_consumer(consumer_id, now)
        for entry in returned.available:
            self._to_tail(entry)
        return returned


ForgetfulStopQueue = queue_with_entries(ForgetsOneHeld)
TailOnStopQueue = queue_with_entries(StoppedToTail)


class EndlessLeaser(Leaser):  # type: ignore[misc]  # Leaser is final: a planted bug may subclass
    """Broken: ignores ``max_lease_duration_s`` and extends a lease for as long as its callback runs."""

    def __init__(self, manager: ActorRef, dispatcher: ActorRef, flow: FlowControl) -> None:
        super().__init__(manager, dispatcher, attrs.evolve(flow, max_lease_duration_s=1e9))


class EarlyClockLeaser(Leaser):  # type: ignore[misc]
    """Broken: starts a keyed message's max-lease clock when it arrives, not when its callback is scheduled,
    so a message that waited on hold behind its key is given up early."""

    def receive(self, message: Any) -> None:
        super().receive(message)
        if type(message).__name__ in ("Received", "ReceivedBatch"):
            items = getattr(message, "items", (message,))
            now = self.ctx.now()
            for item in items:
                if item.key:
                    self.table.start_clock(item.ack_id, now)
            if self.table.next_check_at is not None:
                self._arm(self.table.next_check_at)


class ShortExtensionLeaser(Leaser):  # type: ignore[misc]
    """Broken: always asks for the shortest extension the flow allows, whatever the callbacks take (no p99)."""

    def __init__(self, manager: ActorRef, dispatcher: ActorRef, flow: FlowControl) -> None:
        super().__init__(manager, dispatcher, flow)
        self.table = _ShortTable(flow)


class _ShortTable(LeaseTable):  # type: ignore[misc]
    def deadline_for(self, histogram: Any) -> float:
        return float(self._flow.min_duration_per_lease_extension_s)


EndlessLeases = manager_with(leaser=EndlessLeaser)
EarlyClocks = manager_with(leaser=EarlyClockLeaser)
ShortExtensions = manager_with(leaser=ShortExtensionLeaser)


class AcksOnShutdown(StreamingPullManager):
    """Broken: shutting down acks every message still unfinished instead of leaving it to the queue."""

    def _cancel(self) -> None:
        if not self.closing:
            for ack_id in tuple(self.ledger.pending):
                self._settle(Settlement(SettlementKind.ACK, ack_id))
        super()._cancel()


class EarlyExpiry(EntryList):
    """Broken: a message expires half way through its time to live."""

    def publish(self, message: Message, now: float) -> Entry:
        entry = super().publish(message, now)
        if message.ttl_s is not None and entry.expires_at is not None:
            entry.expires_at = now + message.ttl_s / 2
            heapq.heappush(self._ttls, (entry.expires_at, entry.seq))
        return entry


class GreedyConsumer(ConsumerActor):  # type: ignore[misc]
    """Broken: each pull asks for one message more than the client has room for."""

    def _credit(self) -> tuple[int, int]:
        messages, byte_credit = super()._credit()
        return (messages + 1 if messages > 0 else messages), byte_credit
