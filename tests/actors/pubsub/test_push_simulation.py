"""The push actor in the simulator: the real registry, subscription, binding and queue, a scripted endpoint.

The endpoint (``ScriptedPusher``) answers each POST at once with a status drawn from the seed
(acks, nacks, no answer); the simulator orders its answers among everything else. Midway the
subscription turns pull and back to push. Whatever the interleaving, every message is pushed
until acked, and an ordered subscription pushes each key's messages first in publish order.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable

import pytest

from conveyor.actors.pubsub import (
    CreateSubscription,
    CreateTopic,
    HttpPost,
    Publish,
    PublishedIds,
    PubMessage,
    PubSubRegistry,
    PushAnswered,
    PushSettings,
    RetrySettings,
    SubscriptionActor,
    SubscriptionConfig,
    TopicConfig,
)
from conveyor.actors.pubsub._model import ReplaceSubscription
from conveyor.simulation import Simulation

TOPIC = "projects/sim/topics/t"
SUBSCRIPTION = "projects/sim/subscriptions/pushed"
PUSH = PushSettings("http://endpoint.sim/push")


class ScriptedPusher:
    """A ``Pusher`` whose endpoint answers at once: 200 / 204 ack, 500 / 503 / no answer nack (seeded)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"push-endpoint:{seed}")
        self.log: list[tuple[str, str, int | None]] = []  # (message id, ordering key, status) per POST

    def post(self, request: HttpPost, timeout_s: float, token: int, tell: Callable[[object], None]) -> None:
        message = json.loads(request.body)["message"]
        status = self.rng.choice((200, 204, 200, 500, 503, None))
        self.log.append((message["messageId"], message.get("orderingKey", ""), status))
        tell(PushAnswered(token, status, "" if status else "timed out"))


def _run(seed: int, ordered: bool) -> tuple[list[str], list[str], ScriptedPusher]:
    """Publish 12 messages (keys a/b when ordered), switch push -> pull -> push midway, run to quiet."""
    pusher = ScriptedPusher(seed)
    sim = Simulation(seed=seed)
    key = random.Random(f"ack-key:{seed}").randbytes(32)
    factory = functools.partial(SubscriptionActor, pusher=pusher)
    registry = sim.spawn(lambda: PubSubRegistry(key, subscription_factory=factory), name="pubsub")
    sim.ask(registry, CreateTopic(TopicConfig(TOPIC)))
    config = SubscriptionConfig(SUBSCRIPTION, TOPIC, ack_deadline_s=2, retention_s=3600.0,
                                enable_message_ordering=ordered, retry=RetrySettings(0.1, 1.0), push=PUSH)
    sim.ask(registry, CreateSubscription(config))
    ids: list[str] = []
    keys: list[str] = []
    for batch in range(4):
        messages = tuple(PubMessage(f"m{batch}-{index}".encode(), (), ("a", "b")[index % 2] if ordered else "")
                         for index in range(3))
        published = sim.ask(registry, Publish(TOPIC, messages))
        assert isinstance(published, PublishedIds)
        ids.extend(published.message_ids)
        keys.extend(message.ordering_key for message in messages)
        sim.run(until=sim.now() + 0.3)
        if batch == 1:
            sim.ask(registry, ReplaceSubscription(SubscriptionConfig(
                SUBSCRIPTION, TOPIC, ack_deadline_s=2, retention_s=3600.0, enable_message_ordering=ordered,
                retry=RetrySettings(0.1, 1.0))))
            sim.run(until=sim.now() + 1.0)
            sim.ask(registry, ReplaceSubscription(config))
    sim.run(until=sim.now() + 600.0)  # past a push backoff that grew to its 60 s cap
    sim.shutdown()
    return ids, keys, pusher


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("ordered", [False, True])
def test_every_message_is_pushed_until_acked_and_keys_keep_their_order(seed: int, ordered: bool) -> None:
    ids, keys, pusher = _run(seed, ordered)
    acked = [message_id for message_id, _, status in pusher.log if status in (200, 204)]
    assert set(acked) == set(ids), f"never acked: {sorted(set(ids) - set(acked))}"
    if ordered:  # first pushes in publish order (conveyor's promise, docs/pubsub.md), and acks too
        first_pushes = list(dict.fromkeys(message_id for message_id, _, _ in pusher.log))
        first_acks = list(dict.fromkeys(acked))
        for key in ("a", "b"):
            published = [message_id for message_id, k in zip(ids, keys, strict=True) if k == key]
            assert [m for m in first_pushes if m in set(published)] == published, (key, pusher.log)
            assert [m for m in first_acks if m in set(published)] == published, (key, pusher.log)
