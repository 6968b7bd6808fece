"""The broker's notes: what a queue records in the trace (``ctx.note``) for the checkers.

A note is the queue's own account of a decision no message shows (an entry enqueued, settled,
returned; the queue closed or recovered), written in the queue's processing order.
"""

from __future__ import annotations

from typing import final

import attrs

from ._values import Message, recorded_in_model


@final
@attrs.frozen
class EntryEnqueued:
    """Note: ``tag`` entered ``queue`` (the message is shared, not copied)."""

    queue: str
    tag: int
    message: Message


@final
@attrs.frozen
class QueueClosed:
    """Note, written when the queue stops: the entries it still held (queued or in flight)."""

    queue: str
    remaining: tuple[int, ...]


@final
@attrs.frozen
class QueueRecovered:
    """Note, written when a durable queue restarted and rebuilt itself from its journal.

    Attributes:
        queue: the queue's name.
        remaining: the entries it recovered (queued or in flight), in publish order.
        consumers: the ids of the consumers it recovered, still registered under those ids.
    """

    queue: str
    remaining: tuple[int, ...]
    consumers: tuple[int, ...]


@final
@attrs.frozen
class EntrySettled:
    """Note: ``tag`` left ``queue`` for good: ``acked``, ``dead_lettered`` or ``expired``."""

    queue: str
    tag: int
    outcome: str
    consumer_id: int | None = None
    reason: str = ""


@final
@attrs.frozen
class EntryReturned:
    """Note: ``tag`` went back to AVAILABLE at its position (release, nack, lease lapse, consumer gone)."""

    queue: str
    tag: int
    consumer_id: int
    reason: str
    available_at: float = 0.0
    """When it may be delivered again (after a nack's backoff), on the queue's clock."""


@final
@attrs.frozen
class StaleNackIgnored:
    """Note: a ``Nack`` named delivery ``attempt`` of ``tag``, but the consumer holds delivery ``current``.

    The nack is stale (sent before the queue delivered the message again) and changes nothing.
    """

    queue: str
    tag: int
    consumer_id: int
    attempt: int
    current: int


@final
@attrs.frozen
class BodiesInRam:
    """Note, written by a paged queue (``memory_target_bytes``) after a handler that changed it: what it
    holds in RAM as its target counts it (the live bodies' bytes and ``ENTRY_RAM_BYTES`` for each), and
    its target (the ``ram_under_target`` checker compares them)."""

    queue: str
    held_bytes: int
    target_bytes: int


# Traces name these by their module of record, ``_model`` (see ``RECORDED_MODULE``); a note added since
# (``BodiesInRam``) keeps its own module.
recorded_in_model(
    EntryEnqueued,
    QueueClosed,
    QueueRecovered,
    EntrySettled,
    EntryReturned,
    StaleNackIgnored,
)
