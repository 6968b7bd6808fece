"""What a subscription remembers beyond its queue: its Seek log and its exactly-once confirmations.

``SeekLog`` is a sans-IO core: the messages a Seek may replay (every message the subscription
holds, and acked ones too with ``retain_acked_messages``), the exactly-once ack ids whose ack was
confirmed, and the queue generation. Every change is an event, a plain tuple (``replay`` applies
one), so that a subscription on a disk store journals each event before it applies it, and a new
process replays the snapshot and the events after it into the same state: a Seek after a restart
replays what it would have replayed before, and a confirmed ack stays confirmed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Final, TypeAlias, final

import attrs

from ._model import PubMessage

CONFIRMED_MEMORY: Final = 100_000
"""Confirmed exactly-once ack ids a subscription remembers, to confirm a repeated ack (about 10 MB at most)."""
COMPACT_AFTER_EVENTS: Final = 1024
"""The journal is replaced by a snapshot once it holds this many events and ``COMPACT_FACTOR`` times the state's."""
COMPACT_AFTER_BYTES: Final = 4 * 1024 * 1024
"""... or once the message bytes its events hold pass this and ``COMPACT_FACTOR`` times the log's."""
COMPACT_FACTOR: Final = 4

Row: TypeAlias = "tuple[bytes, tuple[tuple[str, str], ...], str, int, str]"
"""A message in an event: (data, attributes, ordering key, publish time, message id); plain values pickle fast."""
Event: TypeAlias = "tuple[Any, ...]"

ROUTE: Final = "route"  # (ROUTE, rows, retention_s): messages routed to the queue; older ones leave the log
SETTLE: Final = "settle"  # (SETTLE, message ids, retain): acked; kept as acked when retained, else dropped
DROP: Final = "drop"  # (DROP, message id): dead-lettered, gone from the log
RETAINED: Final = "retained"  # (RETAINED, rows): a retaining topic's messages added for a Seek
SEEK: Final = "seek"  # (SEEK, time_ns, now_ns, retain)
UNRETAIN: Final = "unretain"  # (UNRETAIN,): retain_acked_messages turned off: acked messages leave the log
CONFIRM: Final = "confirm"  # (CONFIRM, ack id texts): exactly-once acks confirmed to their client
GENERATION: Final = "generation"  # (GENERATION, n): a Seek starts queue generation n, to be filled from the log
REBUILT: Final = "rebuilt"  # (REBUILT,): the new generation's queue has the log's messages (synced)
SNAPSHOT: Final = "seek-snapshot"  # (SNAPSHOT, rows, now_ns, retain): a Seek to a snapshot holding these messages


def to_row(message: PubMessage) -> Row:
    """``message`` as plain values, for an event."""
    return message.data, message.attributes, message.ordering_key, message.publish_time_ns, message.message_id


def from_row(row: Row) -> PubMessage:
    """The message an event's row holds."""
    return PubMessage(*row)


def rows(messages: Iterable[PubMessage]) -> tuple[Row, ...]:
    """Every message of ``messages`` as plain values."""
    return tuple(map(to_row, messages))


def _publish_order(message: PubMessage) -> tuple[int, int]:
    """Sort key: publish time, then the topic's number (message ids are decimal)."""
    number = int(message.message_id) if message.message_id.isdecimal() else 0
    return message.publish_time_ns, number


@final
@attrs.frozen
class SeekLogState:
    """A ``SeekLog``'s snapshot: everything it holds, in plain values."""

    generation: int
    messages: tuple[Row, ...]
    acked: tuple[str, ...]
    latest_ns: int
    confirmed: tuple[str, ...]
    rebuilding: bool


@final
class SeekLog:
    """A subscription's Seek log, acked-and-retained set, confirmed ack ids and queue generation.

    Args:
        confirmed_limit: how many confirmed ack ids it remembers, the oldest forgotten first.
    """

    def __init__(self, confirmed_limit: int = CONFIRMED_MEMORY) -> None:
        if type(confirmed_limit) is not int or confirmed_limit < 0:
            msg = f"SeekLog confirmed_limit must be an int >= 0, got {confirmed_limit!r}"
            raise ValueError(msg)
        self.confirmed_limit = confirmed_limit
        self._messages: OrderedDict[str, PubMessage] = OrderedDict()
        self.bytes = 0
        """Bytes of data of the messages in the log (the compaction rule weighs events against it)."""
        self.acked: dict[str, None] = {}
        """With retain_acked_messages: the acked messages still in the log."""
        self.latest_ns = 0
        """The latest publish or Seek time seen: retention counts back from it."""
        self.confirmed: OrderedDict[str, None] = OrderedDict()
        """Exactly-once ack ids whose ack was confirmed, oldest first: an ack sent again is confirmed again."""
        self.generation = 0
        self.rebuilding = False
        """A Seek started ``generation`` and its queue has not confirmed the messages it was given yet."""

    @property
    def messages(self) -> OrderedDict[str, PubMessage]:
        """Message id -> message, for every message a Seek may replay, in publish order."""
        return self._messages

    @messages.setter
    def messages(self, messages: OrderedDict[str, PubMessage]) -> None:
        self._messages = messages
        self.bytes = sum(len(m.data) for m in messages.values())

    def _remove(self, message_id: str) -> None:
        """``message_id`` leaves the log (and the acked set)."""
        message = self._messages.pop(message_id, None)
        if message is not None:
            self.bytes -= len(message.data)
            self.acked.pop(message_id, None)

    # --- changes ---------------------------------------------------------------------------

    def route(self, messages: Iterable[PubMessage], retention_s: float) -> None:
        """Add routed messages; those older than ``retention_s`` before the newest leave the log."""
        log = self._messages
        newest = self.latest_ns
        for message in messages:
            previous = log.get(message.message_id)
            if previous is not None:
                self.bytes -= len(previous.data)
            log[message.message_id] = message
            self.bytes += len(message.data)
            newest = max(newest, message.publish_time_ns)
        self.latest_ns = newest
        horizon = newest - int(retention_s * 1e9)
        while log:
            first = next(iter(log.values()))
            if first.publish_time_ns >= horizon:
                break
            log.popitem(last=False)
            self.bytes -= len(first.data)
            self.acked.pop(first.message_id, None)

    def settle(self, message_ids: Iterable[str], retain: bool) -> None:
        """Messages acked: kept, as acked, when ``retain`` (retain_acked_messages); dropped otherwise."""
        if retain:
            log, acked = self._messages, self.acked
            for message_id in message_ids:
                if message_id in log:
                    acked[message_id] = None
        else:
            for message_id in message_ids:
                self._remove(message_id)

    def drop(self, message_id: str) -> None:
        """A message dead-lettered: no Seek replays it."""
        self._remove(message_id)

    def add_retained(self, messages: Iterable[PubMessage]) -> None:
        """A retaining topic's messages, for a Seek: those the log lacks join it, in publish order."""
        log = self._messages
        added = False
        for message in messages:
            if message.message_id not in log:
                log[message.message_id] = message
                self.bytes += len(message.data)
                added = True
        if added:
            self._messages = OrderedDict(sorted(log.items(), key=lambda item: _publish_order(item[1])))

    def seek(self, time_ns: int, now_ns: int, retain: bool) -> None:
        """Messages published before ``time_ns`` count as acked, later ones (still retained) as not."""
        self.latest_ns = max(self.latest_ns, now_ns)
        if retain:
            acked = self.acked
            for message_id, message in self._messages.items():
                if message.publish_time_ns < time_ns:
                    acked[message_id] = None
                else:
                    acked.pop(message_id, None)
        else:
            for message_id in [mid for mid, m in self._messages.items() if m.publish_time_ns < time_ns]:
                self._remove(message_id)

    def seek_snapshot(self, messages: Iterable[PubMessage], now_ns: int, retain: bool) -> None:
        """A Seek to a snapshot: its ``messages`` count as unacked, every other message as acked."""
        self.latest_ns = max(self.latest_ns, now_ns)
        held = {m.message_id: m for m in messages}
        if retain:
            acked = self.acked
            for message_id in self._messages:
                if message_id not in held:
                    acked[message_id] = None
        else:
            for message_id in [mid for mid in self._messages if mid not in held]:
                self._remove(message_id)
        for message_id in held:
            self.acked.pop(message_id, None)
        self.add_retained(held.values())

    def unretain(self) -> None:
        """retain_acked_messages turned off: the acked messages leave the log."""
        for message_id in list(self.acked):
            self._remove(message_id)

    def confirm(self, ack_ids: Iterable[str]) -> None:
        """Exactly-once acks confirmed to their client: remembered (the oldest forgotten past the limit)."""
        confirmed = self.confirmed
        for text in ack_ids:
            confirmed[text] = None
        while len(confirmed) > self.confirmed_limit:
            confirmed.popitem(last=False)

    def new_generation(self) -> int:
        """A Seek starts the next queue generation, to be filled from the log: its number."""
        self.generation += 1
        self.rebuilding = True
        return self.generation

    def rebuilt(self) -> None:
        """The current generation's queue confirmed the messages the log gave it."""
        self.rebuilding = False

    # --- reading ----------------------------------------------------------------------------

    def unacked(self, retention_s: float) -> list[tuple[PubMessage, float]]:
        """(message, seconds of retention left) of each unacked message still retained, in log order."""
        acked, latest = self.acked, self.latest_ns
        kept = []
        for message_id, message in self._messages.items():
            if message_id in acked:
                continue
            left_s = retention_s - (latest - message.publish_time_ns) / 1e9
            if left_s > 0:
                kept.append((message, left_s))
        return kept

    def needs_compaction(self, events: int, event_bytes: int) -> bool:
        """Whether a journal of ``events`` events holding ``event_bytes`` of message data outgrows this state."""
        size = len(self._messages) + len(self.confirmed)
        if events >= max(COMPACT_AFTER_EVENTS, COMPACT_FACTOR * size):
            return True
        return event_bytes >= max(COMPACT_AFTER_BYTES, COMPACT_FACTOR * self.bytes)

    # --- journal ----------------------------------------------------------------------------

    def snapshot(self) -> SeekLogState:
        """Everything it holds, in plain values (a journal's snapshot)."""
        return SeekLogState(self.generation, rows(self._messages.values()), tuple(self.acked), self.latest_ns,
                            tuple(self.confirmed), self.rebuilding)

    @classmethod
    def restore(cls, state: SeekLogState, confirmed_limit: int = CONFIRMED_MEMORY) -> SeekLog:
        """The log a snapshot holds."""
        log = cls(confirmed_limit)
        log.generation, log.latest_ns, log.rebuilding = state.generation, state.latest_ns, state.rebuilding
        log.messages = OrderedDict((row[4], from_row(row)) for row in state.messages)
        log.acked = dict.fromkeys(state.acked)
        log.confirm(state.confirmed)
        return log

    def replay(self, event: Event) -> None:
        """Apply one journaled event.

        Raises:
            ValueError: not an event this module writes.
        """
        match event:
            case (str() as kind, rows_, retention_s) if kind == ROUTE:
                self.route(map(from_row, rows_), retention_s)
            case (str() as kind, message_ids, retain) if kind == SETTLE:
                self.settle(message_ids, retain)
            case (str() as kind, message_id) if kind == DROP:
                self.drop(message_id)
            case (str() as kind, rows_) if kind == RETAINED:
                self.add_retained(map(from_row, rows_))
            case (str() as kind, time_ns, now_ns, retain) if kind == SEEK:
                self.seek(time_ns, now_ns, retain)
            case (str() as kind,) if kind == UNRETAIN:
                self.unretain()
            case (str() as kind, ack_ids) if kind == CONFIRM:
                self.confirm(ack_ids)
            case (str() as kind, generation) if kind == GENERATION:
                self.generation = generation - 1
                self.new_generation()
            case (str() as kind,) if kind == REBUILT:
                self.rebuilt()
            case (str() as kind, rows_, now_ns, retain) if kind == SNAPSHOT:
                self.seek_snapshot(map(from_row, rows_), now_ns, retain)
            case _:
                msg = f"SeekLog.replay: {event!r:.200} is not a Seek log event (route, settle, drop, ...)"
                raise ValueError(msg)
