"""What the variable queue asks of the disk, what the disk hands back, and what the queue reports.

The core (``_variable_queue.py``) never touches a file: every write, read, removal and sync is an
effect value here, which the shell carries out in the order given (reads see every write issued
before them), as h11 hands out events. A read's result goes back in by a method call
(``loaded_index``, ``loaded_message``), a sync's by ``synced``.
"""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime import ConveyorError

__all__ = [
    "AckIndex",
    "DeltaRange",
    "Effect",
    "Fetched",
    "IndexEntry",
    "LoadPending",
    "MarkDelivered",
    "ReadIndex",
    "ReadMessage",
    "ReadPending",
    "RemoveMessages",
    "Sync",
    "VariableQueueError",
    "VariableQueueLayout",
    "VariableQueueStatus",
    "WriteIndex",
    "WriteMessage",
]


class VariableQueueError(ConveyorError, ValueError):
    """An argument the variable queue cannot take (a negative target, an unknown sequence id, a stray read)."""


def _non_negative(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        msg = f"{attribute.name} must be >= 0, got {value}"
        raise VariableQueueError(msg)


@final
@attrs.frozen
class IndexEntry:
    """One queue-index record: a message's place in the queue, and its body when small enough to embed.

    Attributes:
        seq_id: the message's position; the queue delivers in ``seq_id`` order.
        msg_id: the caller's id of the message, kept for the message store and for confirms.
        size: the body's length in bytes.
        persistent: survives a restart (a persistent message on a durable queue); a transient
            record exists only because the message was paged out, and recovery drops it.
        delivered: the message was delivered at least once (its next delivery is a redelivery).
        body: the body, for a message embedded in the index (shorter than ``embed_below``); None
            when the body is in the message store.
    """

    seq_id: int = attrs.field(validator=_non_negative)
    msg_id: str
    size: int = attrs.field(validator=_non_negative)
    persistent: bool
    delivered: bool
    body: bytes | None = None


# Effects: what the shell does for the core, in order.


@final
@attrs.frozen
class WriteMessage:
    """Append a body to the message store (bodies at least ``embed_below`` long)."""

    seq_id: int
    msg_id: str
    body: bytes
    persistent: bool


@final
@attrs.frozen
class WriteIndex:
    """Append a record to the queue index: the message's position (and its body, if embedded)."""

    entry: IndexEntry


@final
@attrs.frozen
class MarkDelivered:
    """Note in the index that these messages were delivered, so a restart redelivers them as such."""

    seq_ids: tuple[int, ...]


@final
@attrs.frozen
class AckIndex:
    """Remove these messages' index records: they were acknowledged."""

    seq_ids: tuple[int, ...]


@final
@attrs.frozen
class RemoveMessages:
    """Remove these bodies from the message store: their messages were acknowledged."""

    seq_ids: tuple[int, ...]
    msg_ids: tuple[str, ...]


@final
@attrs.frozen
class ReadIndex:
    """Read every index record with ``start <= seq_id < end``; give them to ``loaded_index(entries)``."""

    start: int
    end: int


@final
@attrs.frozen
class ReadMessage:
    """Read one body (from the index record if ``embedded``, else the message store); give it to ``loaded_message``."""

    seq_id: int
    msg_id: str
    embedded: bool


@final
@attrs.frozen
class Sync:
    """Make every write before this one durable (one fsync per file: group commit), then call ``synced(token)``."""

    token: int


Effect = WriteMessage | WriteIndex | MarkDelivered | AckIndex | RemoveMessages | ReadIndex | ReadMessage | Sync
"""Everything the core asks of the disk."""


# What a fetch gives.


@final
@attrs.frozen
class Fetched:
    """A message taken from the head of the queue, its body in hand; it stays unacknowledged until ``ack``."""

    seq_id: int
    msg_id: str
    body: bytes
    persistent: bool
    redelivered: bool


@final
@attrs.frozen
class ReadPending:
    """The head was taken but its body is on disk: a ``ReadMessage`` asks for it, ``loaded_message`` completes it."""

    seq_id: int
    msg_id: str


@final
@attrs.frozen
class LoadPending:
    """The next messages are being read from the index (``ReadIndex``): fetch again after ``loaded_index``."""


# What the queue reports.


@final
@attrs.frozen
class VariableQueueStatus:
    """A snapshot of the queue's bookkeeping, as RabbitMQ's ``backing_queue_status`` reports it.

    Attributes:
        q1, q2, delta, q3, q4: how many messages each part of the queue holds (``delta`` counts the
            messages known only on disk, including those being loaded).
        len: ready messages (the sum of the five parts).
        unacked: messages fetched and not yet acknowledged or requeued (those whose body is being
            read included).
        ram_msg_count: ready messages whose body is in RAM.
        ram_ack_count: unacknowledged messages whose body is in RAM.
        ram_bytes: the bytes of every body held in RAM.
        ram_index_count: index entries held in RAM: every ready message outside delta, every unacked one.
        persistent_count: persistent messages, ready or unacknowledged.
        target_ram_count: how many bodies the queue may hold in RAM; None for no limit.
        next_seq_id: the position the next publish takes.
        loading: an index read (``ReadIndex``) is in flight.
    """

    q1: int
    q2: int
    delta: int
    q3: int
    q4: int
    len: int
    unacked: int
    ram_msg_count: int
    ram_ack_count: int
    ram_bytes: int
    ram_index_count: int
    persistent_count: int
    target_ram_count: int | None
    next_seq_id: int
    loading: bool


@final
@attrs.frozen
class DeltaRange:
    """What RAM knows of delta: ``count`` messages whose positions lie in ``start <= seq_id < end``."""

    start: int
    end: int
    count: int


@final
@attrs.frozen
class VariableQueueLayout:
    """Which positions each part of the queue holds, front to rear, for tests and debugging (O(length))."""

    q1: tuple[int, ...]
    q2: tuple[int, ...]
    delta: DeltaRange
    q3: tuple[int, ...]
    q4: tuple[int, ...]
