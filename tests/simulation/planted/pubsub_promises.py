"""Planted bugs in the Pub/Sub front's promises of issue 17, item 1: filters, ordering keys, flow control, Seek.

Each is the real topic or subscription (or a binding it spawns) with one rule broken, plugged into
``pubsub-front`` through ``Variant(topic=...)`` or ``Variant(subscription=...)``; the checkers of
``simulation/checkers/_pubsub_promises.py`` find them from the clients' history.
"""

from __future__ import annotations

from typing import Any

import attrs

from conveyor.actors.broker import ConsumerSettings, Delivery
from conveyor.actors.pubsub import Binding, PullMessages, SubscriptionActor, TopicActor
from conveyor.actors.pubsub import _subscription as subscription_module
from conveyor.actors.pubsub._filter import Everything
from conveyor.actors.pubsub._registry import AttachSubscription
from conveyor.runtime import ActorRef


class FilterBlindTopic(TopicActor):  # type: ignore[misc]  # TopicActor is final: a planted bug may subclass
    """Broken: the topic forgets its subscriptions' filters and routes every message to every subscription."""

    def handle(self, message: Any) -> None:
        if type(message) is AttachSubscription:
            message = attrs.evolve(message, filter=Everything())
        super().handle(message)


class _LastFirstBinding(Binding):  # type: ignore[misc]  # Binding is final: likewise
    """A binding that hands its buffered deliveries to its client newest first (a stack, not a queue)."""

    def _unlapsed(self, buffered: list[Delivery]) -> list[Delivery]:
        return list(reversed(super()._unlapsed(buffered)))


class BrokenBindings(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: likewise
    """The real subscription, spawning ``binding`` (a broken ``Binding``) for its streams and Pulls."""

    binding: type[Binding] = Binding

    def _bind(
        self, settings: ConsumerSettings, deadline: int, pull: PullMessages | None, reply_to: ActorRef | None
    ) -> ActorRef:
        real = subscription_module.Binding
        setattr(subscription_module, "Binding", self.binding)  # noqa: B010 - the binding is built inside, at spawn
        try:
            return super()._bind(settings, deadline, pull, reply_to)
        finally:
            setattr(subscription_module, "Binding", real)  # noqa: B010


class LastFirstBindings(BrokenBindings):  # type: ignore[misc]  # a final class's subclass: likewise
    """Broken: each binding hands a batch to its client newest first; the queue's order is right, the client's not."""

    binding = _LastFirstBinding


class OneMoreOutstanding(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: likewise
    """Broken: a stream's flow control lets one message more out than ``max_outstanding_messages``."""

    def _bind(
        self, settings: ConsumerSettings, deadline: int, pull: PullMessages | None, reply_to: ActorRef | None
    ) -> ActorRef:
        if pull is None:
            settings = attrs.evolve(settings, prefetch_messages=settings.prefetch_messages + 1)
        return super()._bind(settings, deadline, pull, reply_to)


class TimelessSeek(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: likewise
    """Broken: a Seek ignores its time: every message still in the log comes back, none is marked acked."""

    def _seek(self, time_ns: int, now_ns: int) -> None:
        super()._seek(0, now_ns)
