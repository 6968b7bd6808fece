"""A subscription idle past its ``expiration_policy`` TTL is deleted (issue 15, item 6).

The Pub/Sub actors run in the simulator, whose virtual clock jumps: days pass in milliseconds
and no test reads the wall clock. Idle means no Pull, StreamingPull, Acknowledge, ModifyAckDeadline,
Seek or update; an open stream keeps its subscription alive.
"""

from __future__ import annotations

from typing import Any

from conveyor.actors.pubsub import PubSubRegistry, SubscriptionConfig, TopicConfig
from conveyor.actors.pubsub._model import (
    Batch,
    CreateSubscription,
    CreateTopic,
    Detach,
    Failed,
    GetSubscription,
    ListTopicSubscriptions,
    NextBatch,
    OpenStream,
    Page,
    PullMessages,
    ReplaceSubscription,
    StreamOpened,
    StreamSettings,
)
from conveyor.actors.pubsub._subscription import IDLE_STREAM_S
from conveyor.runtime import ActorRef
from conveyor.simulation import Simulation
from tests.actors.pubsub.helpers import subscription, topic

DAY = 86_400.0
NAME = subscription("idle")


def _server(ttl_s: float | None = DAY, **config: Any) -> tuple[Simulation, ActorRef]:
    sim = Simulation(seed=3, trace=False)
    registry = sim.spawn(PubSubRegistry, name="pubsub")
    sim.ask(registry, CreateTopic(TopicConfig(topic("t"))))
    created = sim.ask(registry, CreateSubscription(SubscriptionConfig(NAME, topic("t"), expiration_ttl_s=ttl_s,
                                                                      **config)))
    assert isinstance(created, SubscriptionConfig)
    return sim, registry


def _exists(sim: Simulation, registry: ActorRef) -> bool:
    answer = sim.ask(registry, GetSubscription(NAME))
    return not isinstance(answer, Failed)


def _wait(sim: Simulation, seconds: float) -> None:
    sim.run(until=sim.now() + seconds)


def test_an_idle_subscription_is_deleted_once_its_ttl_has_passed() -> None:
    sim, registry = _server()
    _wait(sim, DAY - 60)
    assert _exists(sim, registry)
    _wait(sim, 120)
    assert not _exists(sim, registry)
    page = sim.ask(registry, ListTopicSubscriptions(topic("t"), 0, ""))
    assert isinstance(page, Page) and page.items == ()  # detached from its topic too


def test_a_pull_counts_as_activity_and_starts_the_ttl_again() -> None:
    sim, registry = _server()
    _wait(sim, DAY - 3600)
    assert isinstance(sim.ask(registry, PullMessages(NAME, 1, 0.01)), Batch)
    _wait(sim, 2 * 3600)  # a day after creation, but not after the pull
    assert _exists(sim, registry)
    _wait(sim, DAY)
    assert not _exists(sim, registry)


def _keep_asking(sim: Simulation, binding: ActorRef, seconds: float) -> None:
    """A live stream client: always a batch asked for (as the gRPC glue polls), for ``seconds``."""
    until = sim.now() + seconds
    while sim.now() < until:
        answer = sim.ask(binding, NextBatch(IDLE_STREAM_S / 2), timeout=IDLE_STREAM_S)
        assert isinstance(answer, Batch)


def test_an_open_stream_keeps_its_subscription_alive() -> None:
    sim, registry = _server()
    opened = sim.ask(registry, OpenStream(StreamSettings(NAME, 60, 10, 0)))
    assert isinstance(opened, StreamOpened)
    _keep_asking(sim, opened.binding, 3 * DAY)
    assert _exists(sim, registry)
    opened.binding.tell(Detach())  # the stream ends; idle from now on
    _wait(sim, DAY + 60)
    assert not _exists(sim, registry)


def test_a_stream_whose_client_never_asks_ends_and_its_subscription_expires() -> None:
    # The client stopped before its StreamOpened came (or its open timed out): nobody will ever
    # Detach this stream, and were it counted as connected the subscription would never expire.
    sim, registry = _server()
    opened = sim.ask(registry, OpenStream(StreamSettings(NAME, 60, 10, 0)))
    assert isinstance(opened, StreamOpened)
    _wait(sim, IDLE_STREAM_S - 60)
    assert opened.binding.termination is None  # not yet: a client may be slow to ask
    _wait(sim, 120)
    assert opened.binding.termination is not None
    _wait(sim, DAY)
    assert not _exists(sim, registry)


def test_a_stream_stays_open_while_its_client_asks_and_ends_once_it_stops() -> None:
    sim, registry = _server(ttl_s=None)
    opened = sim.ask(registry, OpenStream(StreamSettings(NAME, 60, 10, 0)))
    assert isinstance(opened, StreamOpened)
    _keep_asking(sim, opened.binding, 2 * IDLE_STREAM_S)  # asked again and again: stays open
    assert opened.binding.termination is None
    _wait(sim, IDLE_STREAM_S + 60)  # then silence
    assert opened.binding.termination is not None


def test_without_a_ttl_a_subscription_never_expires() -> None:
    sim, registry = _server(ttl_s=None)
    _wait(sim, 400 * DAY)
    assert _exists(sim, registry)


def test_an_update_of_the_ttl_applies_to_the_idle_time_so_far() -> None:
    sim, registry = _server(ttl_s=None)
    _wait(sim, 3 * DAY)
    # An update is activity too, so the new TTL counts from it.
    replaced = sim.ask(registry, ReplaceSubscription(SubscriptionConfig(NAME, topic("t"), expiration_ttl_s=2 * DAY)))
    assert isinstance(replaced, SubscriptionConfig)
    _wait(sim, 2 * DAY - 60)
    assert _exists(sim, registry)
    _wait(sim, 120)
    assert not _exists(sim, registry)


def test_a_ttl_longer_than_any_timer_can_wait_is_kept() -> None:
    sim, registry = _server(ttl_s=10_000 * 365 * DAY)  # the largest Duration: past threading.TIMEOUT_MAX
    _wait(sim, 30 * DAY)
    assert _exists(sim, registry)


def test_the_default_ttl_is_31_days() -> None:
    assert SubscriptionConfig(NAME, topic("t")).expiration_ttl_s == 31 * DAY
