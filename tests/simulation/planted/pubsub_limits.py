"""Planted bugs in the Pub/Sub front's request limits (issue 17, item 1): found by ``request_limits``.

Each is the real topic or subscription with one rule of the limits broken, plugged into
``pubsub-front`` through ``Variant(topic=...)`` or ``Variant(subscription=...)``; the scenario's
prober client (``simulation/scenarios/_pubsub_limits.py``) sends requests over the limits.
"""

from __future__ import annotations

from typing import Any

import attrs

from conveyor.actors.pubsub import ACK_IDS_MAX, Publish, Settle, SubscriptionActor, TopicActor, request_refusal
from conveyor.actors.pubsub._protocol import Envelope
from conveyor.runtime import ActorRef


class HalfAppliedPublish(TopicActor):  # type: ignore[misc]  # TopicActor is final: a planted bug may subclass
    """Broken: a Publish refused for one message over a limit still stores the messages before it."""

    def handle(self, message: Any) -> None:
        if type(message) is Envelope and type(message.request) is Publish:
            messages = message.request.messages
            first_bad = next((index for index in range(len(messages))
                              if request_refusal(Publish(message.request.topic, messages[: index + 1]))), 0)
            if first_bad:  # the valid head goes through, unanswered; the request is then refused as it should be
                super().handle(Envelope(attrs.evolve(message.request, messages=messages[:first_bad]), None))
        super().handle(message)


class HalfAppliedSettle(SubscriptionActor):  # type: ignore[misc]  # SubscriptionActor is final: likewise
    """Broken: an Acknowledge of more ack ids than the limit settles the first ``ACK_IDS_MAX`` before it is refused."""

    def _serve(self, request: object, reply_to: ActorRef | None) -> None:
        if type(request) is Settle and len(request.ack_ids) > ACK_IDS_MAX:
            super()._serve(attrs.evolve(request, ack_ids=request.ack_ids[:ACK_IDS_MAX]), None)
        super()._serve(request, reply_to)
