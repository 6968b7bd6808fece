"""Messages the Pub/Sub actors exchange among themselves (the glue never sees these)."""

from __future__ import annotations

from typing import final

import attrs

from conveyor.runtime import ActorRef

from ._filter import Filter
from ._model import PubMessage, Seek, SettleKind, SubscriptionConfig


@final
@attrs.frozen
class Envelope:
    """A request forwarded by the registry with the asker to answer (None: nobody waits)."""

    request: object
    reply_to: ActorRef | None


@final
@attrs.frozen
class Route:
    """Topic -> subscription: messages its filter accepted, in publish order.

    ``token`` (not 0) asks the subscription to answer ``Routed(token, name)`` once its queue
    confirmed the batch (on a disk store: synced), so the topic can confirm the publish.
    """

    messages: tuple[PubMessage, ...]
    token: int = 0


@final
@attrs.frozen
class Routed:
    """Subscription -> topic: the ``Route`` numbered ``token`` is kept (on disk when there is one)."""

    token: int
    subscription: str


@final
@attrs.frozen
class PublishInternal:
    """Subscription -> registry: publish dead-lettered messages to ``topic``; nobody waits for ids."""

    topic: str
    messages: tuple[PubMessage, ...]


@final
@attrs.frozen
class TopicGone:
    """Registry -> subscription: its topic was deleted; no more messages will come."""


@final
@attrs.frozen
class UseConfig:
    """Registry -> subscription: new settings (UpdateSubscription)."""

    config: SubscriptionConfig


@final
@attrs.frozen
class SettleTags:
    """Subscription -> binding: settle the deliveries ``tags`` / ``attempts`` (parallel) of ``generation``.

    With ``confirm_id`` the binding answers ``Confirmed``. A tag whose current delivery is not the
    attempt named (a later one came under the same tag) is not touched.
    """

    kind: SettleKind
    generation: int
    tags: tuple[int, ...]
    attempts: tuple[int, ...]
    seconds: int
    confirm_id: int | None


@final
@attrs.frozen
class Confirmed:
    """Binding -> subscription: the tags of ``binding`` that were not acked for ``confirm_id``."""

    confirm_id: int
    binding: int
    invalid: tuple[int, ...]


@final
@attrs.frozen
class Rebind:
    """Subscription -> binding: consume from ``queue``, the subscription's ``generation`` after a Seek."""

    queue: ActorRef
    generation: int
    exactly_once: bool
    ordering: bool
    dead_letter: bool = False


@final
@attrs.frozen
class Reconfigured:
    """Subscription -> binding: its exactly-once or dead-letter policy changed; leases stay.

    (A stream's deliveries are leased for the stream's deadline, so the subscription's does not reach it.)
    """

    exactly_once: bool
    dead_letter: bool = False


@final
@attrs.frozen
class ReplayTo:
    """Registry -> topic: hand ``subscription`` the retained messages ``filter`` accepts, with ``seek``."""

    seek: Seek
    subscription: ActorRef
    filter: Filter


@final
@attrs.frozen
class Retained:
    """Topic -> subscription (in an ``Envelope``): a Seek, and the topic's retained messages for it."""

    seek: Seek
    messages: tuple[PubMessage, ...]


@final
@attrs.frozen
class CountBindings:
    """Registry -> subscription: an expiry check; answer ``BindingCount`` (to the registry)."""

    name: str
    activity: int


@final
@attrs.frozen
class BindingCount:
    """Subscription -> registry: how many bindings (clients connected or holding leases) it has.

    ``activity`` echoes the registry's count of requests when it asked, so the registry can tell
    whether anything happened since.
    """

    name: str
    activity: int
    bindings: int


@final
@attrs.frozen
class ListSubscriptionActors:
    """Ask the registry which actor serves each subscription; it answers ``SubscriptionActors``.

    For the front's metrics: each of those actors answers ``GetStats`` with its queue's ``QueueStats``.
    """


@final
@attrs.frozen
class SubscriptionActors:
    """The registry's answer: (subscription name, the actor serving it), in creation order."""

    actors: tuple[tuple[str, ActorRef], ...]


@final
@attrs.frozen
class Close:
    """Subscription -> binding: stop serving the stream (answer ``StreamClosed``), keep leases."""

    reason: str
