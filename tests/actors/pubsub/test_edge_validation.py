"""A publish is validated whole at the edge: one bad message refuses the request and stores nothing.

Issue 15, item 1: Google's client sent ``publish(topic, b"x", **{"": "v"})``; the front confirmed
it, then every subscription actor of the topic crashed on the empty header key and restarted
empty, losing what they held. These tests drive Google's unmodified client.
"""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1

from conveyor.actors.pubsub import PubMessage
from conveyor.actors.pubsub._convert import BadRequest, PubsubMessagePb, pub_messages
from tests.actors.pubsub.helpers import pull_exactly, pull_nothing, subscription, topic


def test_one_bad_message_refuses_the_whole_publish_and_stores_nothing(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("poison"))
    for name in ("poison-a", "poison-b"):
        subscriber.create_subscription(name=subscription(name), topic=topic("poison"))
    publisher.publish(topic("poison"), b"earlier").result(10)
    (held,) = pull_exactly(subscriber, subscription("poison-a"), 1)  # held by a client, unacked

    # Nothing commits a batch before stop() flushes it: exactly one Publish request of three.
    batched = pubsub_v1.PublisherClient(batch_settings=pubsub_v1.types.BatchSettings(max_latency=60))
    futures = [
        batched.publish(topic("poison"), b"valid-1"),
        batched.publish(topic("poison"), b"x", **{"": "v"}),
        batched.publish(topic("poison"), b"valid-2"),
    ]
    batched.stop()
    for future in futures:
        with pytest.raises(exceptions.InvalidArgument, match=r'messages\[1\]\.attributes\[""\]: .*non-empty'):
            future.result(10)

    # None of the three reached a subscription, and what each held is still deliverable.
    subscriber.modify_ack_deadline(subscription=subscription("poison-a"), ack_ids=[held.ack_id],
                                   ack_deadline_seconds=0)
    for name in ("poison-a", "poison-b"):
        (again,) = pull_exactly(subscriber, subscription(name), 1)
        assert again.message.data == b"earlier"
        assert pull_nothing(subscriber, subscription(name)) == []


def test_the_gapic_layer_s_mixed_request_names_index_and_field(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("mixed"))
    subscriber.create_subscription(name=subscription("mixed-sub"), topic=topic("mixed"))
    messages = [{"data": b"ok"}] * 3 + [{"data": b"x", "attributes": {"": "v"}}] + [{"data": b"ok"}]
    with pytest.raises(exceptions.InvalidArgument, match=r'Publish: messages\[3\]\.attributes\[""\]: '):
        publisher.api.publish(topic=topic("mixed"), messages=messages)
    assert pull_nothing(subscriber, subscription("mixed-sub")) == []


def test_the_edge_checks_each_message_through_the_broker_s_own_validation() -> None:
    good = pub_messages([PubsubMessagePb(data=b"a", attributes={"k": "v"}, ordering_key="key")], 1)
    assert good == (PubMessage(b"a", (("k", "v"),), "key", 1),)
    bad = [PubsubMessagePb(data=b"a"), PubsubMessagePb(data=b"b", attributes={"": "v", "z": "1"})]
    with pytest.raises(BadRequest, match=r'^messages\[1\]\.attributes\[""\]: .*non-empty'):
        pub_messages(bad, 1)


def test_a_dead_letter_of_a_dead_letter_replaces_the_source_attributes(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    # A message that already carries the dead-letter source attributes (as one dead-lettered along
    # a chain of dead-letter topics does) passes the edge; forwarding it again must not build a
    # broker message with the same key twice, which would crash the dead-letter subscriptions.
    publisher.create_topic(name=topic("chain"))
    publisher.create_topic(name=topic("chain-dead"))
    subscriber.create_subscription(name=subscription("chain-dead-sub"), topic=topic("chain-dead"))
    subscriber.create_subscription(request={
        "name": subscription("chain-sub"), "topic": topic("chain"),
        "dead_letter_policy": {"dead_letter_topic": topic("chain-dead"), "max_delivery_attempts": 5},
    })
    publisher.publish(topic("chain-dead"), b"earlier").result(10)
    publisher.publish(topic("chain"), b"again", CloudPubSubDeadLetterSourceDeliveryCount="7",
                      CloudPubSubDeadLetterSourceSubscription="first").result(10)
    for _ in range(5):
        (received,) = pull_exactly(subscriber, subscription("chain-sub"), 1)
        subscriber.modify_ack_deadline(subscription=subscription("chain-sub"), ack_ids=[received.ack_id],
                                       ack_deadline_seconds=0)
    got = {m.message.data: m.message for m in pull_exactly(subscriber, subscription("chain-dead-sub"), 2)}
    assert sorted(got) == [b"again", b"earlier"]
    assert got[b"again"].attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert got[b"again"].attributes["CloudPubSubDeadLetterSourceSubscription"] == "chain-sub"
