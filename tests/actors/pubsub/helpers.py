"""Names, bounded pulls and a simulated front shared by the Pub/Sub front's tests."""

from __future__ import annotations

from typing import Any

import grpc
from google.cloud import pubsub_v1

from conveyor.actors.pubsub import CreateSubscription, CreateTopic, PubSubRegistry, SubscriptionConfig, TopicConfig
from conveyor.runtime import ActorRef
from conveyor.simulation import Simulation

PROJECT = "projects/demo"
FAST_RECONNECT = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
"""Channel options for clients that see the server restart: gRPC's own first backoff is 1 s, then 1.6x."""


def topic(name: str) -> str:
    return f"{PROJECT}/topics/{name}"


def subscription(name: str) -> str:
    return f"{PROJECT}/subscriptions/{name}"


SIM_KEY = bytes(range(32))
"""The ack-id key of simulated fronts."""


def simulated_front(seed: int, name: str, **config: Any) -> tuple[Simulation, ActorRef, str]:
    """A registry in a fresh simulator with topic ``name`` and subscription ``name-sub`` (``config``: its
    ``SubscriptionConfig`` fields): the simulator, the registry and the subscription's full name."""
    sim = Simulation(seed=seed)
    registry = sim.spawn(lambda: PubSubRegistry(SIM_KEY))
    sim.ask(registry, CreateTopic(TopicConfig(topic(name))))
    full = subscription(f"{name}-sub")
    sim.ask(registry, CreateSubscription(SubscriptionConfig(full, topic(name), **config)))
    return sim, registry, full


def pull_exactly(client: pubsub_v1.SubscriberClient, name: str, count: int, rounds: int = 20) -> list[Any]:
    """Pull until ``count`` messages came (each pull waits at most ~1.5 s for its first)."""
    got: list[Any] = []
    for _ in range(rounds):
        if len(got) >= count:
            break
        response = client.pull(subscription=name, max_messages=count - len(got), timeout=2.0)
        got.extend(response.received_messages)
    assert len(got) == count, f"pulled {len(got)} of {count}"
    return got


def pull_nothing(client: pubsub_v1.SubscriberClient, name: str) -> list[Any]:
    """A pull that waits about a second; returns what came (the caller asserts it is empty)."""
    return list(client.pull(subscription=name, max_messages=10, timeout=1.5).received_messages)


def fast_reconnect_clients(address: str) -> tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]:
    """Official clients whose channels retry a refused connection within 0.1-1 s (for restarts)."""
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    publisher = pubsub_v1.PublisherClient(
        batch_settings=pubsub_v1.types.BatchSettings(max_latency=0.01),
        transport=PublisherGrpcTransport(channel=grpc.insecure_channel(address, options=FAST_RECONNECT)),
    )
    subscriber = pubsub_v1.SubscriberClient(
        transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(address, options=FAST_RECONNECT)),
    )
    return publisher, subscriber
