"""The parts of a subscription: the names its manager gives its children, and how they reach the queue.

A subscription's manager (say at ``/sub``) spawns each component as a child under one of these
names (``/sub/leaser``); the checkers find the components in a trace by the same names, so the
names have this one home.
"""

from __future__ import annotations

from typing import Final, final


@final
class Part:
    """The names of a subscription's children, as ``StreamingPullManager`` spawns them (``make_part``)."""

    CONSUMER: Final = "consumer"
    """The broker ``ConsumerActor``: the subscription's one link to the queue."""
    DISPATCHER: Final = "dispatcher"
    """Batches acks, nacks and deadline changes for the consumer."""
    WORKERS: Final = "workers"
    """The worker pool that runs the user's callbacks."""
    LOAD: Final = "load"
    """The load controller (flow control)."""
    LEASER: Final = "leaser"
    """Extends the leases of messages in progress."""
    KEYS: Final = "keys"
    """The ordered-key handler."""
    HEARTBEAT: Final = "heartbeat"
    """The heartbeater."""


EXTENSION_ROUTE: Final = (Part.LEASER, Part.DISPATCHER, Part.CONSUMER)
"""The children a lease extension passes through on its way to the queue, besides the manager itself.

The leaser sends its extensions to the manager (so a late one for a message already settled is
dropped there), which hands them to the dispatcher, which sends them through the consumer.
"""
SETTLEMENT_ROUTE: Final = (Part.DISPATCHER, Part.CONSUMER)
"""The children a callback's ack or nack passes through on its way to the queue, besides the manager itself."""
