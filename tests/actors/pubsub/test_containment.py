"""A subscription's messages never vanish because one of the front's actors raised.

The topic refuses a publish the broker could not store, whole, before it confirms anything. Behind
that, handlers are made to raise on purpose: a subscription contains the failure to the request
(its state, queue and bindings stay), and the durable queue under it rebuilds itself from its
journal after a raise. Each runs in the simulator, so leases and waits cost no wall time.
"""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.actors.pubsub import PubMessage, PubSubRegistry
from conveyor.actors.pubsub import _registry as registry_module
from conveyor.actors.pubsub import _subscription as subscription_module
from conveyor.actors.pubsub._model import (
    Batch,
    CreateSubscription,
    CreateTopic,
    Failed,
    NextBatch,
    OpenStream,
    Publish,
    PublishedIds,
    Settle,
    SettleKind,
    SettleOutcome,
    StreamOpened,
    StreamSettings,
    SubscriptionConfig,
    TopicConfig,
)
from conveyor.actors.pubsub._subscription import SubscriptionActor, to_broker
from conveyor.runtime import ActorRef
from conveyor.simulation import Simulation
from tests.actors.pubsub.helpers import subscription, topic

KEY = bytes(range(32))
TOPIC = topic("orders")
SUBSCRIPTION = subscription("orders-sub")


class Front:
    """The front's actors in a simulator, and a client's calls on them (the glue's asks)."""

    def __init__(self, exactly_once: bool = True) -> None:
        self.sim = Simulation(seed=7)
        self.registry = self.sim.spawn(lambda: PubSubRegistry(KEY))
        self.sim.ask(self.registry, CreateTopic(TopicConfig(TOPIC)))
        self.sim.ask(self.registry, CreateSubscription(SubscriptionConfig(SUBSCRIPTION, TOPIC,
                                                                          exactly_once=exactly_once)))
        opened: StreamOpened = self.sim.ask(self.registry, OpenStream(StreamSettings(SUBSCRIPTION, 60, 0, 0)))
        self.binding: ActorRef = opened.binding

    def publish(self, *bodies: bytes, **attributes: str) -> Any:
        messages = tuple(PubMessage(body, tuple(attributes.items()), publish_time_ns=1) for body in bodies)
        return self.sim.ask(self.registry, Publish(TOPIC, messages))

    def receive(self, count: int) -> dict[bytes, str]:
        """Data -> ack id of the next ``count`` deliveries on the stream."""
        got: dict[bytes, str] = {}
        for _ in range(20):
            batch: Batch = self.sim.ask(self.binding, NextBatch(1.0))
            got.update((message.data, ack_id) for ack_id, message, _ in batch.received)
            if len(got) >= count:
                break
        assert len(got) == count, f"received {sorted(got)}, wanted {count}"
        return got

    def nothing_more(self) -> None:
        batch: Batch = self.sim.ask(self.binding, NextBatch(5.0), timeout=10.0)
        assert batch.received == ()

    def ack(self, *ack_ids: str) -> Any:
        return self.sim.ask(self.registry, Settle(SUBSCRIPTION, SettleKind.ACK, ack_ids))


def test_a_publish_the_broker_could_not_store_is_refused_whole_and_stores_nothing() -> None:
    front = Front()
    assert isinstance(front.publish(b"earlier"), PublishedIds)
    (earlier,) = front.receive(1).values()
    messages = (PubMessage(b"ok", publish_time_ns=1), PubMessage(b"bad", (("", "v"),), publish_time_ns=1))
    refused = front.sim.ask(front.registry, Publish(TOPIC, messages))
    assert isinstance(refused, Failed)
    assert refused.code == "INVALID_ARGUMENT"
    assert refused.message.startswith("messages[1]: ")
    front.nothing_more()
    assert front.ack(earlier) == SettleOutcome(())  # the earlier message is still held, and acks


def poison_to_broker(message: PubMessage, ordered: bool, ttl_s: float) -> Any:
    if message.data == b"poison":
        raise ValueError("planted: this message cannot be stored")
    return to_broker(message, ordered, ttl_s)


def test_a_message_that_makes_the_subscription_raise_costs_only_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    front = Front()
    front.publish(b"earlier")
    (earlier,) = front.receive(1).values()
    # The topic's check lets the poison through, and storing it raises inside the subscription.
    monkeypatch.setattr(registry_module, "unpublishable", lambda messages: None)
    monkeypatch.setattr(subscription_module, "to_broker", poison_to_broker)
    assert isinstance(front.publish(b"one", b"poison", b"two"), PublishedIds)
    assert sorted(front.receive(2)) == [b"one", b"two"]
    assert front.ack(earlier) == SettleOutcome(())  # what the subscription held before is still there


def test_a_request_that_makes_the_subscription_raise_is_answered_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    front = Front()
    front.publish(b"held")
    (held,) = front.receive(1).values()
    original = SubscriptionActor._settle

    def broken(self: SubscriptionActor, request: Settle, reply_to: ActorRef | None) -> None:
        raise RuntimeError("planted: settling raised")

    monkeypatch.setattr(SubscriptionActor, "_settle", broken)
    answer = front.ack(held)
    assert isinstance(answer, Failed)
    assert (answer.code, "planted: settling raised" in answer.message) == ("INTERNAL", True)
    monkeypatch.setattr(SubscriptionActor, "_settle", original)
    front.publish(b"after")
    assert list(front.receive(1)) == [b"after"]
    assert front.ack(held) == SettleOutcome(())  # still held: the failed request settled nothing


def test_the_queue_under_a_subscription_rebuilds_itself_after_a_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    queue_publish = subscription_module._SubscriptionQueue._publish
    raised: list[object] = []

    def raise_once(self: Any, payload: Any, immediate: bool) -> Any:
        if not raised and payload.body == b"two":  # inside the batch's one write, after "one" was taken
            raised.append(payload)
            raise RuntimeError("planted: the queue raised")
        return queue_publish(self, payload, immediate)

    monkeypatch.setattr(subscription_module._SubscriptionQueue, "_publish", raise_once)
    front = Front()
    front.publish(b"held")
    (held,) = front.receive(1).values()
    front.publish(b"one", b"two")
    assert sorted(front.receive(2)) == [b"one", b"two"]
    assert raised  # the queue restarted, rebuilt from its journal, and handled the batch again
    assert front.ack(held) == SettleOutcome(())  # the lease from before the raise still counts
