"""Pub/Sub semantics of issue 15, item 6: ``delivery_attempt`` and ``expiration_policy``, with Google's client.

Expiry itself is driven in the simulator (``test_expiration.py``): no test waits a day.
"""

from __future__ import annotations

from typing import Any

from google.cloud import pubsub_v1

from tests.actors.pubsub.helpers import pull_exactly, subscription, topic
from tests.actors.pubsub.test_official_client import _Stream


def _nack_and_pull(subscriber: pubsub_v1.SubscriberClient, name: str, held: Any) -> Any:
    subscriber.modify_ack_deadline(subscription=name, ack_ids=[held.ack_id], ack_deadline_seconds=0)
    (again,) = pull_exactly(subscriber, name, 1)
    return again


def test_delivery_attempt_is_set_only_with_a_dead_letter_policy(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("tries"))
    publisher.create_topic(name=topic("tries-dead"))
    plain, dead_lettered = subscription("tries-plain"), subscription("tries-dlq")
    subscriber.create_subscription(name=plain, topic=topic("tries"))
    policy = {"dead_letter_topic": topic("tries-dead"), "max_delivery_attempts": 10}
    subscriber.create_subscription(request={"name": dead_lettered, "topic": topic("tries"),
                                            "dead_letter_policy": policy})
    publisher.publish(topic("tries"), b"m").result(10)

    (first,) = pull_exactly(subscriber, plain, 1)
    assert first.delivery_attempt == 0  # unset, as Pub/Sub leaves it without a dead-letter policy
    second = _nack_and_pull(subscriber, plain, first)
    assert second.delivery_attempt == 0
    (counted,) = pull_exactly(subscriber, dead_lettered, 1)
    assert counted.delivery_attempt == 1
    recounted = _nack_and_pull(subscriber, dead_lettered, counted)
    assert recounted.delivery_attempt == 2

    # A policy given by an update counts from the next delivery; one taken away stops the count.
    subscriber.update_subscription(request={"subscription": {"name": plain, "dead_letter_policy": policy},
                                            "update_mask": {"paths": ["dead_letter_policy"]}})
    assert _nack_and_pull(subscriber, plain, second).delivery_attempt == 3
    subscriber.update_subscription(request={"subscription": {"name": dead_lettered},
                                            "update_mask": {"paths": ["dead_letter_policy"]}})
    assert _nack_and_pull(subscriber, dead_lettered, recounted).delivery_attempt == 0


def test_a_stream_without_a_dead_letter_policy_leaves_delivery_attempt_unset(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("streamed"))
    subscriber.create_subscription(name=subscription("streamed-sub"), topic=topic("streamed"))
    publisher.publish(topic("streamed"), b"m").result(10)
    stream = _Stream(subscriber, {"subscription": subscription("streamed-sub"), "stream_ack_deadline_seconds": 60})
    try:
        received: list[Any] = []
        while not received:
            received.extend(next(stream.responses).received_messages)
        assert [m.delivery_attempt for m in received] == [0]
    finally:
        stream.close()
