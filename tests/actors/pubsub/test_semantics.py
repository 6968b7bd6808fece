"""Pub/Sub semantics of issue 15, item 6: ``delivery_attempt`` and ``expiration_policy``, with Google's client.

Expiry itself is driven in the simulator (``test_expiration.py``): no test waits a day.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1

from tests.actors.pubsub.helpers import PROJECT, pull_exactly, subscription, topic
from tests.actors.pubsub.test_official_client import _Stream

DAY = datetime.timedelta(days=1)


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


# --- expiration_policy ----------------------------------------------------------------------


def test_expiration_policy_is_stored_returned_and_updated(subscriber: pubsub_v1.SubscriberClient,
                                                          publisher: pubsub_v1.PublisherClient) -> None:
    publisher.create_topic(name=topic("aging"))
    default = subscriber.create_subscription(name=subscription("aging-default"), topic=topic("aging"))
    assert default.expiration_policy.ttl == 31 * DAY  # absent in Create: Pub/Sub's default of 31 days
    two_days = subscriber.create_subscription(request={
        "name": subscription("aging-two"), "topic": topic("aging"),
        "expiration_policy": {"ttl": {"seconds": 2 * 86400}}})
    assert two_days.expiration_policy.ttl == 2 * DAY
    never = subscriber.create_subscription(request={
        "name": subscription("aging-never"), "topic": topic("aging"), "expiration_policy": {}})
    assert "expiration_policy" in never  # set, with no ttl: never expires
    assert "ttl" not in never.expiration_policy

    assert subscriber.get_subscription(subscription=subscription("aging-two")).expiration_policy.ttl == 2 * DAY
    listed = {s.name: s for s in subscriber.list_subscriptions(project=PROJECT)}
    assert listed[subscription("aging-default")].expiration_policy.ttl == 31 * DAY
    assert "ttl" not in listed[subscription("aging-never")].expiration_policy
    updated = subscriber.update_subscription(request={
        "subscription": {"name": subscription("aging-never"), "expiration_policy": {"ttl": {"seconds": 86400}}},
        "update_mask": {"paths": ["expiration_policy"]}})
    assert updated.expiration_policy.ttl == DAY
    assert subscriber.get_subscription(subscription=subscription("aging-never")).expiration_policy.ttl == DAY


@pytest.mark.parametrize("seconds", [86399, 3600, 1, -86400])
def test_an_expiration_ttl_under_a_day_is_refused_naming_the_field(
    seconds: int, subscriber: pubsub_v1.SubscriberClient, publisher: pubsub_v1.PublisherClient
) -> None:
    publisher.create_topic(name=topic("short"))
    with pytest.raises(exceptions.InvalidArgument, match=r"expiration_policy\.ttl: must be at least 1 day \(86400 s\) "
                                                         r"or unset \(never expires\), got"):
        subscriber.create_subscription(request={"name": subscription("short-sub"), "topic": topic("short"),
                                                "expiration_policy": {"ttl": {"seconds": seconds}}})


def test_the_longest_ttl_a_duration_holds_is_accepted_and_timers_keep_working(
    subscriber: pubsub_v1.SubscriberClient, publisher: pubsub_v1.PublisherClient
) -> None:
    # 10,000 years is past threading.TIMEOUT_MAX: a timer armed for it would stop the thread backend's timers.
    publisher.create_topic(name=topic("ages"))
    created = subscriber.create_subscription(request={
        "name": subscription("ages-sub"), "topic": topic("ages"),
        "expiration_policy": {"ttl": {"seconds": 315_576_000_000}}})
    assert created.expiration_policy.ttl == datetime.timedelta(seconds=315_576_000_000)
    publisher.publish(topic("ages"), b"m").result(10)
    (held,) = pull_exactly(subscriber, subscription("ages-sub"), 1)
    subscriber.modify_ack_deadline(subscription=subscription("ages-sub"), ack_ids=[held.ack_id],
                                   ack_deadline_seconds=0)
    (again,) = pull_exactly(subscriber, subscription("ages-sub"), 1)  # a Pull answers through a timer
    assert again.message.data == b"m"
