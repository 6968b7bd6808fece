"""Planted bugs in the Pub/Sub front: the two defects of issue 15 (items 1 and 2), as the front was before their fixes.

Each is the real actor with the fix taken out, plugged into a ``pubsub`` scenario through
``Variant(topic=...)`` or ``Variant(subscription=...)``, which reach the registry's
``topic_factory`` / ``subscription_factory``.
"""

from __future__ import annotations

from typing import Any

import attrs

from conveyor.actors.pubsub import PublishedIds, SubscriptionActor, TopicActor
from conveyor.actors.pubsub._ackid import AckId
from conveyor.actors.pubsub._model import Publish, Settle, SettleKind, SettleOutcome
from conveyor.actors.pubsub._protocol import Envelope
from conveyor.runtime import ActorRef


class ConfirmingTopic(TopicActor):  # type: ignore[misc]  # TopicActor is final: a planted bug may subclass
    """Broken (issue 15, item 1): confirms a publish without checking first that the broker can store all of it.

    The topic numbers and confirms every message; a message with an empty attribute key then
    cannot be stored by any subscription, which drops it: a message its publisher was told is
    published is never delivered. (Before the fix the subscription crashed and restarted empty,
    losing every unacked message too; its containment now limits the loss to the poison message.)
    """

    def handle(self, message: Any) -> None:
        if type(message) is Envelope and type(message.request) is Publish:
            ids = self._publish(message.request.messages)
            if message.reply_to is not None:
                self.ctx.send(message.reply_to, PublishedIds(ids))
            return
        super().handle(message)


class TagOnlySubscription(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: likewise
    """Broken (issue 15, item 2): settles an ack id by the binding and tag it names, trusting the rest.

    The seal, the subscription's number and the queue generation are not verified (the id is read
    as text and re-issued as this subscription's own), so another subscription's ids, a deleted
    subscription's and made-up ones settle whatever delivery their binding holds under that tag.
    """

    def _settle(self, request: Settle, reply_to: ActorRef | None) -> None:
        trusted = tuple(self._as_own(text) for text in request.ack_ids)
        super()._settle(attrs.evolve(request, ack_ids=trusted), reply_to)

    def _as_own(self, text: str) -> str:
        body = text.rpartition(".")[0]
        parts = body.split("-", 5)
        if len(parts) != 6 or not all(part.isdecimal() for part in parts[:5]):
            return text
        _, _, binding, tag, attempt = (int(part) for part in parts[:5])
        return self.codec.issue(AckId(self.number, self.generation, binding, tag, attempt, parts[5]))


class EagerExactlyOnce(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: likewise
    """Broken: an exactly-once subscription confirms acks at once, without waiting for its queue's word.

    The ack goes to the binding as on a plain subscription and the client is told it succeeded,
    though its lease may have lapsed meanwhile: the message then comes back after a confirmed
    ack, which exactly-once delivery promises never happens.
    """

    def _settle(self, request: Settle, reply_to: ActorRef | None) -> None:
        if not self.config.exactly_once or request.kind is not SettleKind.ACK:
            super()._settle(request, reply_to)
            return
        self.config = attrs.evolve(self.config, exactly_once=False)
        try:
            super()._settle(request, None)
        finally:
            self.config = attrs.evolve(self.config, exactly_once=True)
        if reply_to is not None:
            self.ctx.send(reply_to, SettleOutcome(()))
