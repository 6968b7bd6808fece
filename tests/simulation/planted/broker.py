"""Planted bugs in the broker: variants of the queue's entry list and of its consumer manager.

Each is the real class with one rule broken, plugged into a registry scenario through
``Variant(queue=...)``: ``QueueActor.make_entries`` swaps the ``EntryList``,
``QueueActor.make_manager`` the ``ConsumerManagerActor`` and ``ConsumerManagerActor.make_lists``
its ``ConsumerLists``. No hook had to be added for them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import attrs

from conveyor.actors.broker import (
    ConsumerActor,
    ConsumerLists,
    ConsumerManagerActor,
    Delivery,
    DeliveryError,
    EntryList,
    MatchAll,
    Message,
    PublishRejected,
    QueueActor,
    QueueConfig,
    Release,
    Selector,
)
from conveyor.actors.broker._consumer_lists import ConsumerState
from conveyor.actors.broker._entries import Entry, Returned, _Cursor, _Level

QueueFactory = Callable[[QueueConfig], QueueActor]


def queue_with_entries(entries: type[EntryList]) -> QueueFactory:
    """A queue whose sans-IO entry list is ``entries``."""

    class PlantedQueue(QueueActor):
        def make_entries(self, config: QueueConfig) -> EntryList:
            return entries(config.priorities, config.max_deliveries)

    PlantedQueue.__qualname__ = PlantedQueue.__name__ = f"QueueWith{entries.__name__}"
    return PlantedQueue


def queue_with_lists(lists: type[ConsumerLists]) -> QueueFactory:
    """A queue whose consumer manager keeps its lists in ``lists``."""

    class PlantedManager(ConsumerManagerActor):
        def make_lists(self) -> ConsumerLists:
            return lists()

    class PlantedQueue(QueueActor):
        def make_manager(self) -> ConsumerManagerActor:
            return PlantedManager(self.ctx.self_ref)

    PlantedQueue.__qualname__ = PlantedQueue.__name__ = f"QueueWith{lists.__name__}"
    return PlantedQueue


class _TailLevel(_Level):
    """A priority level whose bisect keys are the entries' positions (which a tail release changes)."""

    def removed(self, count: int = 1) -> None:
        super().removed(count)
        self.seqs = [entry.position[1] for entry in self.entries]


class TailRelease(EntryList):
    """Broken: a released (or otherwise given back) entry goes to the tail of its level, not its own position.

    It is re-queued as a publish would be (a fresh sequence number orders it), but keeps its
    tag, so nothing is lost; only the order breaks: entries published after it overtake it.
    """

    def __init__(self, priorities: int = 10, max_deliveries: int | None = None) -> None:
        super().__init__(priorities, max_deliveries)
        self._levels = [_TailLevel() for _ in range(priorities)]

    def give_back(
        self,
        consumer_id: int,
        tags: Iterable[int],
        now: float,
        delay_s: float,
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> Returned:
        returned = super().give_back(consumer_id, tags, now, delay_s, attempts, errors)
        for entry in returned.available:
            self._to_tail(entry)
        return returned

    def browse(self, consumer_id: int, max_messages: int, max_bytes: int) -> list[Entry]:
        """``EntryList.browse`` in queue-key order (a tail release changes an entry's key, not its tag)."""
        cursor = self._cursors[consumer_id]
        seen: list[Entry] = []
        seen_bytes = 0
        last = cursor.pointer[1]
        for entry in heapq.merge(*(self._live_after(level, last) for level in self._levels),
                                 key=lambda entry: entry.position[1]):
            if cursor.selector.matches(entry.message.header_map()):
                if len(seen) >= max_messages or (seen and seen_bytes + entry.size > max_bytes):
                    break
                seen.append(entry)
                seen_bytes += entry.size
            last = entry.position[1]
        cursor.pointer = (0, last)
        return seen

    @staticmethod
    def _live_after(level: _Level, key: int) -> Iterator[Entry]:
        for index in range(level.after(key), len(level.entries)):
            entry = level.entries[index]
            if entry.state.value in ("available", "acquired"):
                yield entry

    def _to_tail(self, entry: Entry) -> None:
        rank = entry.position[0]
        level = self._levels[rank]
        index = level.entries.index(entry)
        del level.entries[index]
        del level.seqs[index]
        key = self._next_seq  # the next publish's number: it now sorts after everything queued
        self._next_seq = key + 1
        entry.position = (rank, key)
        level.append(entry)
        level.seqs[-1] = key


class StuckPriorityPointer(EntryList):
    """Broken: a higher-priority publish does not move back the pointers already past its level.

    Qpid's ``checkSubscriptionsNotAheadOfDelivery`` on publish is missing: the new entry hides
    behind every consumer's pointer until some return happens to move them back.
    """

    def __init__(self, priorities: int = 10, max_deliveries: int | None = None) -> None:
        super().__init__(priorities, max_deliveries)
        self._publishing = False

    def publish(self, message: Message, now: float) -> Entry:
        self._publishing = True
        try:
            return super().publish(message, now)
        finally:
            self._publishing = False

    def _move_pointers_back(self, entry: Entry) -> None:
        if not self._publishing:
            super()._move_pointers_back(entry)


class Herd(ConsumerLists):
    """Broken: new work wakes the two front interested consumers instead of one."""

    def work_available(self, now: float | None = None) -> tuple[int, ...]:
        woken = super().work_available(now)
        extra = next((cid for cid in self.interested_ids() if cid not in woken), None)
        if extra is None:
            return woken
        return (*woken, self._notify(extra, now))


class Forgetful(ConsumerLists):
    """Broken: a notified consumer that runs dry stays on Notified instead of going back to Interested.

    It is never notified again, though it still has credit: it is forgotten.
    """

    def exhausted(self, consumer_id: int, *, more_work: bool, now: float | None = None) -> tuple[int, ...]:
        if self.state_of(consumer_id) is not ConsumerState.NOTIFIED:
            return super().exhausted(consumer_id, more_work=more_work, now=now)
        if not more_work:
            return ()
        for level in self._levels:
            candidate = self._untried_front(level)
            if candidate is not None:
                return (self._notify(candidate, now),)
        return ()


class AmnesiacQueue(QueueActor):
    """Broken: a durable queue that does not recover its journal after a crash (it starts empty)."""

    def on_start(self) -> None:
        self.ctx.journal.clear()
        super().on_start()


class UnjournaledAcks(QueueActor):
    """Broken: a durable queue that forgets to journal acks, so after a crash acked messages return."""

    def on_start(self) -> None:
        super().on_start()
        if "ack" in vars(self.entries):
            del self.entries.ack  # back to the class's method: acks reach the core, not the journal


class _Vanished(NamedTuple):
    """What ``SilentDrop`` confirms instead of an entry: only the tag an entry would have had."""

    seq: int


class SilentDrop(QueueActor):
    """Broken: the queue confirms its fourth publish without enqueuing it, so it notes nothing of it either.

    The publisher is told its message is in the queue; no consumer is ever given it, and the
    queue's own notes (``EntryEnqueued``, ``QueueClosed``) never mention it, so ``accounting``,
    which balances those notes, finds nothing wrong. Only the clients' history shows the loss.
    """

    DROPPED = 4

    def __init__(self, config: QueueConfig) -> None:
        super().__init__(config)
        self.publishes = 0

    def _enqueue(self, payload: Message, immediate: bool) -> Entry | PublishRejected:
        self.publishes += 1
        if self.publishes == self.DROPPED:
            return _Vanished(1_000_000 + self.publishes)  # type: ignore[return-value]
        return super()._enqueue(payload, immediate)


class MisdeclaredConsumer(ConsumerActor):  # type: ignore[misc]  # a planted bug may break a final class
    """Broken: an acquiring client's consumer declares itself a browser when it subscribes.

    It behaves as an acquiring consumer towards its client (credit, acks), but the queue serves
    it as the declaration says: browse deliveries, which take nothing, so another consumer is
    given the same messages at the same time and both clients process them. Every checker that
    reads the queue's roster believes the declaration and skips the liar's deliveries
    (``accounting``'s one-holder rule is for acquiring consumers only); the clients' history,
    where each client says what it meant to do, shows one delivery taken twice.
    """

    def _subscribe(self, attempt: int) -> None:
        meant = self.settings
        self.settings = attrs.evolve(meant, acquiring=False)  # what it tells the queue ...
        try:
            super()._subscribe(attempt)
        finally:
            self.settings = meant  # ... and what it does
class FreshTtlOnReturn(EntryList):
    """Broken: a message given back (nack, release, lapse) starts its TTL again, so it outlives its expiry."""

    def _return(self, entries: list[Entry], now: float, delay_of: Callable[[Entry], float]) -> Returned:
        for entry in entries:
            ttl = entry.message.ttl_s
            if ttl is not None:
                entry.expires_at = now + ttl
                heapq.heappush(self._ttls, (entry.expires_at, entry.seq))
        return super()._return(entries, now, delay_of)


class NoBackoff(EntryList):
    """Broken: the retry policy's backoff is not applied: a nacked message is offered again at once."""

    def give_back_with(
        self,
        consumer_id: int,
        tags: Iterable[int],
        now: float,
        delays: dict[int, float],
        attempts: tuple[int, ...] = (),
        errors: tuple[DeliveryError | None, ...] = (),
    ) -> Returned:
        return super().give_back_with(consumer_id, tags, now, {}, attempts, errors)


class BrowsingCounts(EntryList):
    """Broken: a browser's look at an entry counts as a delivery (its ``delivery_count`` goes up)."""

    def browse(self, consumer_id: int, max_messages: int, max_bytes: int) -> list[Entry]:
        seen = super().browse(consumer_id, max_messages, max_bytes)
        for entry in seen:
            entry.delivery_count += 1
        return seen


class LateDeadLetter(EntryList):
    """Broken: the delivery limit is checked one delivery late (``>`` where ``>=`` belongs)."""

    def __init__(self, priorities: int = 10, max_deliveries: int | None = None) -> None:
        super().__init__(priorities, None if max_deliveries is None else max_deliveries + 1)


class OneTooLong(QueueActor):
    """Broken: the length limit lets one more message in (``>`` where ``>=`` belongs)."""

    def __init__(self, config: QueueConfig) -> None:
        if config.max_length is not None:
            config = attrs.evolve(config, max_length=config.max_length + 1)
        super().__init__(config)


class BlindToConsumerPriority(EntryList):
    """Broken: no entry is kept for a higher-priority consumer that wants work; whoever pulls first takes it."""

    def _outranked(self, cursor: _Cursor) -> bool:
        return False


class SharedGroups(EntryList):
    """Broken: a message group's owner is not enforced: any consumer may take any group's entries."""

    def _group_allows(self, entry: Entry, consumer_id: int) -> bool:
        return True


class BackwardsBatch(EntryList):
    """Broken: a pull's entries are handed out last first (the batch is reversed)."""

    def take(
        self, consumer_id: int, now: float, max_messages: int, max_bytes: int, deadline: float
    ) -> tuple[list[Entry], list[Entry], bool]:
        taken, expired, limited = super().take(consumer_id, now, max_messages, max_bytes, deadline)
        taken.reverse()
        return taken, expired, limited


class SelectorDropped(EntryList):
    """Broken: a consumer's selector is dropped when it is registered: it is given every message."""

    def add_consumer(self, consumer_id: int, selector: Selector, priority: int, acquiring: bool) -> None:
        super().add_consumer(consumer_id, MatchAll(), priority, acquiring)


class IgnoresExtensions(EntryList):
    """Broken: ``ModifyAckDeadline`` extends nothing: every lease lapses at its first deadline."""

    def extend(self, consumer_id: int, tags: Iterable[int], deadline: float) -> tuple[int, ...]:
        return ()


class ReversingConsumer(ConsumerActor):  # type: ignore[misc]  # a planted bug may break a final class
    """Broken: a consumer hands each batch the queue delivered to its client last message first.

    The queue delivered in order, and its ``Delivered`` message says so: a checker that reads
    it (``strict_order`` before issue 17, item 3) finds nothing wrong. The client, whose order is
    the promise, received the batch backwards; only its receipts show it.
    """

    def _delivered(self, deliveries: tuple[Delivery, ...], exhausted: bool) -> None:
        super()._delivered(tuple(reversed(deliveries)), exhausted)


class GroupReleasingConsumer(ConsumerActor):  # type: ignore[misc]  # a planted bug may break a final class
    """Broken: a consumer gives each message of a group back to the queue as soon as it hands it to its client.

    The queue sees a release (``EntryReturned``, reason ``release``) and rightly frees the group
    for another consumer, so its own story shows one owner at a time; but the client still
    processes the message, while another client is given the group's next one. Only a checker
    that frees a group when its client answers, not when the queue says, sees two owners.
    """

    def _delivered(self, deliveries: tuple[Delivery, ...], exhausted: bool) -> None:
        super()._delivered(deliveries, exhausted)
        grouped = tuple(d.tag for d in deliveries if d.message.group is not None)
        if grouped and self.settings.acquiring and self.consumer_id is not None:
            self._forward_settlement(Release(self.consumer_id, grouped), grouped)


class SelectorDroppingConsumer(ConsumerActor):  # type: ignore[misc]  # a planted bug may break a final class
    """Broken: a consumer subscribes with no selector, whatever its client asked for.

    The queue serves it as declared, every message, and its story agrees with itself: a checker
    that reads the consumer's ``Subscribe`` finds every delivery matched. Only the selector the
    client asked for (``ConsumerAsked``) shows it was given messages it never wanted.
    """

    def _subscribe(self, attempt: int) -> None:
        meant = self.settings
        self.settings = attrs.evolve(meant, selector=MatchAll())  # what it tells the queue ...
        try:
            super()._subscribe(attempt)
        finally:
            self.settings = meant  # ... and what it does
