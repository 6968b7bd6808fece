"""The broker's queue <-> manager protocol: how a queue, its consumer manager and its consumers share out work.

The queue tells the manager who joined, left or changed interest and when work appeared; the
manager tells one interested consumer of the highest priority (``NotifyWork``), which pulls until
the queue says it is exhausted (``ConsumerExhausted``).
"""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime import ActorRef
from conveyor.runtime.lowlevel import register_immutable_type
from conveyor.runtime.validators import fail

from ._values import check_id_and_flag, recorded_in_model


@final
@attrs.frozen
class AddConsumer:
    """Queue -> manager: a consumer joined."""

    consumer_id: int
    consumer: ActorRef
    priority: int
    acquiring: bool
    interested: bool


@final
@attrs.frozen
class RemoveConsumer:
    """Queue -> manager: a consumer left."""

    consumer_id: int


@final
@attrs.frozen
class InterestChanged:
    """Queue -> manager: a consumer's interest changed."""

    consumer_id: int
    interested: bool

    def __attrs_post_init__(self) -> None:
        check_id_and_flag("InterestChanged", self.consumer_id, "interested", self.interested)


register_immutable_type(InterestChanged)


@final
@attrs.frozen
class WorkAvailable:
    """Queue -> manager: new work appeared (publish, release, expiry of a delay, a freed group)."""


register_immutable_type(WorkAvailable)  # no fields


@final
@attrs.frozen
class ConsumerExhausted:
    """Queue -> manager: a notified consumer found nothing more; ``more_work`` if others might."""

    consumer_id: int
    more_work: bool

    def __attrs_post_init__(self) -> None:
        check_id_and_flag("ConsumerExhausted", self.consumer_id, "more_work", self.more_work)


register_immutable_type(ConsumerExhausted)


@final
@attrs.frozen
class NotifyWork:
    """Manager -> consumer: there may be work for you; pull until the queue says exhausted."""

    queue: ActorRef

    def __attrs_post_init__(self) -> None:
        if type(self.queue) is not ActorRef:
            fail("NotifyWork", "queue", "the ActorRef of a queue", self.queue)


# Checked above (an ActorRef is an identity leaf): the manager sends one per notification.
register_immutable_type(NotifyWork)


# Traces name these by their module of record, ``_model`` (see ``RECORDED_MODULE``).
recorded_in_model(
    AddConsumer,
    RemoveConsumer,
    InterestChanged,
    WorkAvailable,
    ConsumerExhausted,
    NotifyWork,
)
