"""The front's request limits as a sans-IO check (``_edge.py``): the same answer for the glue and the actors.

Each limit refuses just over it, naming the field, and not at it; the topic and the subscription
answer an over-limit request ``Failed(INVALID_ARGUMENT)`` and change nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.pubsub import (
    ACK_ID_MAX_BYTES,
    ACK_IDS_MAX,
    ATTRIBUTE_KEY_MAX_BYTES,
    ATTRIBUTE_VALUE_MAX_BYTES,
    ATTRIBUTES_MAX,
    MODACK_MAX_S,
    ORDERING_KEY_MAX_BYTES,
    PUBLISH_MAX_BYTES,
    PUBLISH_MAX_MESSAGES,
    CreateSubscription,
    CreateTopic,
    Failed,
    OpenStream,
    Publish,
    PublishedIds,
    PubMessage,
    PubSubRegistry,
    PullMessages,
    Settle,
    SettleKind,
    StreamSettings,
    SubscriptionConfig,
    TopicConfig,
    request_refusal,
)
from conveyor.simulation import Simulation

TOPIC = "projects/p/topics/t"
SUB = "projects/p/subscriptions/s"


def _publish(*messages: PubMessage) -> Publish:
    return Publish(TOPIC, messages)


def _one(attributes: tuple[tuple[str, str], ...] = (("a", "b"),), key: str = "") -> Publish:
    return _publish(PubMessage(b"x"), PubMessage(b"y", attributes, key))


AT_AND_OVER = [
    ("attributes", lambda extra: _one(tuple((f"k{i}", "v") for i in range(ATTRIBUTES_MAX + extra))),
     "messages[1].attributes:"),
    ("attribute key", lambda extra: _one((("k" * (ATTRIBUTE_KEY_MAX_BYTES + extra), "v"),)), "messages[1].attributes["),
    ("attribute value", lambda extra: _one((("k", "v" * (ATTRIBUTE_VALUE_MAX_BYTES + extra)),)),
     "messages[1].attributes["),
    ("ordering key", lambda extra: _one(key="o" * (ORDERING_KEY_MAX_BYTES + extra)), "messages[1].ordering_key:"),
    ("messages", lambda extra: _publish(*(PubMessage(b"m") for _ in range(PUBLISH_MAX_MESSAGES + extra))),
     "messages:"),
    ("request bytes", lambda extra: _publish(PubMessage(b"d" * (PUBLISH_MAX_BYTES + extra))), "messages:"),
    ("ack ids", lambda extra: Settle(SUB, SettleKind.ACK, ("x",) * (ACK_IDS_MAX + extra)), "ack_ids:"),
    ("ack id length", lambda extra: Settle(SUB, SettleKind.ACK, ("x", "9" * (ACK_ID_MAX_BYTES + extra))),
     "ack_ids[1]:"),
    ("modack seconds", lambda extra: Settle(SUB, SettleKind.MODACK, ("x",), MODACK_MAX_S + extra),
     "ack_deadline_seconds:"),
    ("pull", lambda extra: PullMessages(SUB, 1 - extra, 1.0), "max_messages:"),
    ("stream deadline", lambda extra: OpenStream(StreamSettings(SUB, 600 + extra, 0, 0)),
     "stream_ack_deadline_seconds:"),
]


@pytest.mark.parametrize(("name", "build", "field"), AT_AND_OVER, ids=[case[0] for case in AT_AND_OVER])
def test_a_request_just_over_a_limit_is_refused_naming_its_field_and_one_at_it_is_not(
    name: str, build: object, field: str
) -> None:
    assert callable(build)
    assert request_refusal(build(0)) is None, name
    refused = request_refusal(build(1))
    assert refused is not None and refused.startswith(field), refused


def test_empty_requests_and_reserved_keys_are_refused() -> None:
    assert request_refusal(_publish()) == "messages: at least one message is required"
    assert (request_refusal(Settle(SUB, SettleKind.ACK, ())) or "").startswith("ack_ids:")
    assert (request_refusal(_publish(PubMessage(b""))) or "").startswith("messages[0]:")
    assert (request_refusal(_one((("goog-x", "v"),))) or "").startswith("messages[1].attributes[")
    assert request_refusal(OpenStream(StreamSettings(SUB, 0, 0, 0))) is None  # 0: the subscription's deadline
    assert (request_refusal(OpenStream(StreamSettings(SUB, 9, 0, 0))) or "").startswith("stream_ack_deadline")
    assert (request_refusal(OpenStream(StreamSettings(SUB, 10, -1, 0))) or "").startswith("max_outstanding")


@given(count=st.integers(0, 2 * ATTRIBUTES_MAX), key=st.integers(1, 2 * ATTRIBUTE_KEY_MAX_BYTES),
       value=st.integers(0, 2 * ATTRIBUTE_VALUE_MAX_BYTES), ordering=st.integers(0, 2 * ORDERING_KEY_MAX_BYTES))
def test_a_message_is_refused_exactly_when_one_of_its_parts_is_over_its_limit(
    count: int, key: int, value: int, ordering: int
) -> None:
    attributes = tuple((f"{i:0{key}d}"[-key:].rjust(key, "k"), "v" * value) for i in range(count))
    refused = request_refusal(_publish(PubMessage(b"d", attributes, "o" * ordering)))
    over = (count > ATTRIBUTES_MAX or (count and key > ATTRIBUTE_KEY_MAX_BYTES)
            or (count and value > ATTRIBUTE_VALUE_MAX_BYTES) or ordering > ORDERING_KEY_MAX_BYTES)
    assert (refused is not None) == bool(over), refused


def test_the_actors_refuse_an_over_limit_request_whole_and_store_nothing() -> None:
    sim = Simulation(seed=1)
    registry = sim.spawn(lambda: PubSubRegistry(b"k" * 32), name="pubsub")
    sim.ask(registry, CreateTopic(TopicConfig(TOPIC)))
    sim.ask(registry, CreateSubscription(SubscriptionConfig(SUB, TOPIC)))
    over = _one((("k" * (ATTRIBUTE_KEY_MAX_BYTES + 1), "v"),))
    answer = sim.ask(registry, over)
    assert type(answer) is Failed and answer.code == "INVALID_ARGUMENT"
    assert answer.message.startswith("messages[1].attributes[")
    refused = sim.ask(registry, Settle(SUB, SettleKind.ACK, ("x",) * (ACK_IDS_MAX + 1)))
    assert type(refused) is Failed and refused.message.startswith("ack_ids:")
    pulled = sim.ask(registry, PullMessages(SUB, 0, 0.1))
    assert type(pulled) is Failed and pulled.message.startswith("max_messages:")
    assert type(sim.ask(registry, _publish(PubMessage(b"kept")))) is PublishedIds
    batch = sim.ask(registry, PullMessages(SUB, 10, 0.5))
    assert [message.data for _, message, _ in batch.received] == [b"kept"]  # nothing of the refused publish
