"""Google's own client, unmodified (PUBSUB_EMULATOR_HOST), against conveyor's Pub/Sub front.

Each test gets a fresh server (the shipped ``pubsub_emulator`` fixture). Waits are bounded
conditions (an event, a pull with a deadline), never sleeps that a result depends on. The
streaming scenarios that conveyor's own subscriber runs too are in ``test_subscribers.py``.
"""

from __future__ import annotations

import datetime
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.cloud.pubsub_v1.subscriber.exceptions import AcknowledgeError, AcknowledgeStatus
from google.protobuf import timestamp_pb2
from google.pubsub_v1 import types

from conveyor.actors.pubsub import PubSubServer
from tests.actors.pubsub.helpers import PROJECT, pull_exactly, pull_nothing, subscription, topic


def collect(
    client: pubsub_v1.SubscriberClient,
    name: str,
    count: int,
    on_message: Callable[[Any], None] | None = None,
    **kw: Any,
) -> tuple[list[Any], Any]:
    """subscribe() until ``count`` callbacks ran; returns the messages in callback order and the future."""
    seen: list[Any] = []
    enough = threading.Event()

    def callback(message: Any) -> None:
        seen.append(message)
        if on_message is None:
            message.ack()
        else:
            on_message(message)
        if len(seen) >= count:
            enough.set()

    future = client.subscribe(name, callback, **kw)
    assert enough.wait(20), f"only {len(seen)} of {count} messages arrived"
    return seen, future


def stop(future: Any) -> None:
    future.cancel()
    future.result(timeout=10)


def test_topics_and_subscriptions(publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient) -> None:
    created = publisher.create_topic(request={"name": topic("orders"), "labels": {"team": "a"}})
    assert created.name == topic("orders")
    with pytest.raises(exceptions.AlreadyExists):
        publisher.create_topic(name=topic("orders"))
    publisher.create_topic(name=topic("other"))
    assert publisher.get_topic(topic=topic("orders")).labels == {"team": "a"}
    updated = publisher.update_topic(
        request={"topic": {"name": topic("orders"), "labels": {"team": "b"}}, "update_mask": {"paths": ["labels"]}}
    )
    assert updated.labels == {"team": "b"}
    assert [t.name for t in publisher.list_topics(project=PROJECT)] == [topic("orders"), topic("other")]
    paged = publisher.list_topics(request={"project": PROJECT, "page_size": 1})
    assert [t.name for t in paged] == [topic("orders"), topic("other")]  # the pager follows the token

    sub = subscriber.create_subscription(name=subscription("billing"), topic=topic("orders"))
    assert (sub.ack_deadline_seconds, sub.topic) == (10, topic("orders"))
    assert sub.message_retention_duration == datetime.timedelta(days=7)
    subscriber.create_subscription(name=subscription("audit"), topic=topic("orders"), ack_deadline_seconds=30)
    with pytest.raises(exceptions.AlreadyExists):
        subscriber.create_subscription(name=subscription("audit"), topic=topic("orders"))
    with pytest.raises(exceptions.NotFound, match="Topic not found"):
        subscriber.create_subscription(name=subscription("lost"), topic=topic("missing"))
    assert subscriber.get_subscription(subscription=subscription("audit")).ack_deadline_seconds == 30
    assert sorted(publisher.list_topic_subscriptions(topic=topic("orders"))) == [
        subscription("audit"), subscription("billing")
    ]
    assert [s.name for s in subscriber.list_subscriptions(project=PROJECT)] == [
        subscription("audit"), subscription("billing")
    ]
    changed = subscriber.update_subscription(
        request={
            "subscription": {"name": subscription("audit"), "ack_deadline_seconds": 45},
            "update_mask": {"paths": ["ack_deadline_seconds"]},
        }
    )
    assert changed.ack_deadline_seconds == 45
    with pytest.raises(exceptions.InvalidArgument, match=r"update_mask\.paths"):
        subscriber.update_subscription(
            request={"subscription": {"name": subscription("audit"), "filter": "attributes:x"},
                     "update_mask": {"paths": ["filter"]}}
        )

    subscriber.delete_subscription(subscription=subscription("audit"))
    with pytest.raises(exceptions.NotFound):
        subscriber.get_subscription(subscription=subscription("audit"))
    publisher.delete_topic(topic=topic("orders"))
    with pytest.raises(exceptions.NotFound):
        publisher.get_topic(topic=topic("orders"))
    assert subscriber.get_subscription(subscription=subscription("billing")).topic == "_deleted-topic_"


def test_publish_with_attributes_and_keys_then_pull_and_acknowledge(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("events"))
    subscriber.create_subscription(name=subscription("events-sub"), topic=topic("events"))
    ids = [
        publisher.publish(topic("events"), b"first", kind="a").result(10),
        publisher.publish(topic("events"), b"second", ordering_key="k1", kind="b").result(10),
    ]
    assert len(set(ids)) == 2
    got = sorted(pull_exactly(subscriber, subscription("events-sub"), 2), key=lambda m: m.message.data)
    first, second = (m.message for m in got)
    assert (first.data, dict(first.attributes), first.ordering_key) == (b"first", {"kind": "a"}, "")
    assert (second.data, dict(second.attributes), second.ordering_key) == (b"second", {"kind": "b"}, "k1")
    assert {first.message_id, second.message_id} == set(ids)
    assert first.publish_time.timestamp() > 0
    assert [m.delivery_attempt for m in got] == [0, 0]  # unset without a dead-letter policy, as in Pub/Sub
    subscriber.acknowledge(subscription=subscription("events-sub"), ack_ids=[m.ack_id for m in got])
    assert pull_nothing(subscriber, subscription("events-sub")) == []


def test_pull_dead_letters_after_max_delivery_attempts(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("work"))
    publisher.create_topic(name=topic("work-dead"))
    subscriber.create_subscription(name=subscription("dead-sub"), topic=topic("work-dead"))
    subscriber.create_subscription(
        request={
            "name": subscription("work-sub"),
            "topic": topic("work"),
            "dead_letter_policy": {"dead_letter_topic": topic("work-dead"), "max_delivery_attempts": 5},
        }
    )
    publisher.publish(topic("work"), b"poison", origin="test").result(10)
    attempts = []
    for _ in range(5):
        (received,) = pull_exactly(subscriber, subscription("work-sub"), 1)
        attempts.append(received.delivery_attempt)
        subscriber.modify_ack_deadline(
            subscription=subscription("work-sub"), ack_ids=[received.ack_id], ack_deadline_seconds=0
        )
    assert attempts == [1, 2, 3, 4, 5]
    (dead,) = pull_exactly(subscriber, subscription("dead-sub"), 1)
    assert dead.message.data == b"poison"
    assert dead.message.attributes["origin"] == "test"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceSubscription"] == "work-sub"
    assert pull_nothing(subscriber, subscription("work-sub")) == []


def test_pull_waits_out_the_retry_policy_after_a_nack(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("backoff"))
    subscriber.create_subscription(
        request={
            "name": subscription("backoff-sub"),
            "topic": topic("backoff"),
            "retry_policy": {"minimum_backoff": {"seconds": 3}, "maximum_backoff": {"seconds": 5}},
        }
    )
    got = subscriber.get_subscription(subscription=subscription("backoff-sub")).retry_policy
    assert (got.minimum_backoff.seconds, got.maximum_backoff.seconds) == (3, 5)
    publisher.publish(topic("backoff"), b"later").result(10)
    (first,) = pull_exactly(subscriber, subscription("backoff-sub"), 1)
    subscriber.modify_ack_deadline(subscription=subscription("backoff-sub"), ack_ids=[first.ack_id],
                                   ack_deadline_seconds=0)
    # Backoff of 3 s: a pull right after the nack finds nothing, a later one finds it again.
    response = subscriber.pull(subscription=subscription("backoff-sub"), max_messages=1, timeout=1.0)
    assert list(response.received_messages) == []
    (second,) = pull_exactly(subscriber, subscription("backoff-sub"), 1, rounds=6)
    assert (second.message.data, second.delivery_attempt) == (b"later", 0)  # 0: no dead-letter policy


def test_exactly_once_confirms_acks_and_refuses_stale_ones(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("once"))
    subscriber.create_subscription(
        request={"name": subscription("once-sub"), "topic": topic("once"), "enable_exactly_once_delivery": True}
    )
    publisher.publish(topic("once"), b"one").result(10)
    publisher.publish(topic("once"), b"two").result(10)
    statuses: list[Any] = []
    both_confirmed = threading.Event()

    def ack_confirmed(message: Any) -> None:
        statuses.append(message.ack_with_response().result(timeout=10))
        if len(statuses) == 2:
            both_confirmed.set()

    seen, future = collect(subscriber, subscription("once-sub"), 2, on_message=ack_confirmed)
    # The two callbacks run on the client's pool at once: the one that saw the second message can
    # return before the first one's confirmation arrives, so wait for both, not for the callbacks.
    assert both_confirmed.wait(20), f"only {len(statuses)} of 2 acks were confirmed"
    stop(future)
    assert sorted(m.data for m in seen) == [b"one", b"two"]
    assert statuses == [AcknowledgeStatus.SUCCESS, AcknowledgeStatus.SUCCESS]

    publisher.publish(topic("once"), b"three").result(10)
    (stale,) = pull_exactly(subscriber, subscription("once-sub"), 1)
    subscriber.modify_ack_deadline(subscription=subscription("once-sub"), ack_ids=[stale.ack_id],
                                   ack_deadline_seconds=0)
    with pytest.raises(exceptions.InvalidArgument) as refused:
        subscriber.acknowledge(subscription=subscription("once-sub"), ack_ids=[stale.ack_id])
    assert "no longer valid" in str(refused.value)
    (again,) = pull_exactly(subscriber, subscription("once-sub"), 1)
    assert (again.message.data, again.delivery_attempt) == (b"three", 0)  # 0: no dead-letter policy
    subscriber.acknowledge(subscription=subscription("once-sub"), ack_ids=[again.ack_id])
    assert isinstance(AcknowledgeError, type)


def test_pull_gets_only_messages_the_filter_accepts(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("colors"))
    subscriber.create_subscription(
        request={
            "name": subscription("reds"),
            "topic": topic("colors"),
            "filter": '(attributes.color = "red" OR hasPrefix(attributes.color, "dark")) AND NOT attributes:skip',
        }
    )
    subscriber.create_subscription(name=subscription("all-colors"), topic=topic("colors"))
    samples = [
        {"color": "red"}, {"color": "blue"}, {"color": "darkgreen"}, {"color": "red", "skip": "1"}, {"size": "9"},
    ]
    for n, attributes in enumerate(samples):
        publisher.publish(topic("colors"), str(n).encode(), **attributes).result(10)
    reds = pull_exactly(subscriber, subscription("reds"), 2)
    assert sorted(m.message.data for m in reds) == [b"0", b"2"]
    subscriber.acknowledge(subscription=subscription("reds"), ack_ids=[m.ack_id for m in reds])
    assert pull_nothing(subscriber, subscription("reds")) == []
    assert len(pull_exactly(subscriber, subscription("all-colors"), 5)) == 5
    assert subscriber.get_subscription(subscription=subscription("reds")).filter.startswith("(attributes.color")


class _Stream:
    """A raw StreamingPull through the client's GAPIC layer, requests fed from a queue."""

    def __init__(self, client: pubsub_v1.SubscriberClient, first: dict[str, Any]) -> None:
        self.requests: queue.Queue[Any] = queue.Queue()
        self.requests.put(types.StreamingPullRequest(**first))
        self.responses = client.api.streaming_pull(requests=self._feed())

    def _feed(self) -> Iterator[Any]:
        while (request := self.requests.get()) is not None:
            yield request

    def close(self) -> None:
        self.requests.put(None)
        self.responses.cancel()


def test_server_honours_max_outstanding_messages(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("flow"))
    subscriber.create_subscription(
        request={"name": subscription("flow-sub"), "topic": topic("flow"), "enable_exactly_once_delivery": True}
    )
    for n in range(10):
        publisher.publish(topic("flow"), str(n).encode()).result(10)
    stream = _Stream(subscriber, {"subscription": subscription("flow-sub"), "stream_ack_deadline_seconds": 60,
                                  "max_outstanding_messages": 3})
    received: list[Any] = []
    try:
        while len(received) < 3:
            response = next(stream.responses)
            assert response.subscription_properties.exactly_once_delivery_enabled
            received.extend(response.received_messages)
        assert [m.message.data for m in received] == [b"0", b"1", b"2"]
        # Nothing more until one is settled (the next response only comes after the ack).
        stream.requests.put(types.StreamingPullRequest(ack_ids=[received[0].ack_id]))
        more = list(next(stream.responses).received_messages)
        assert [m.message.data for m in more] == [b"3"]
    finally:
        stream.close()


def test_stream_acks_are_confirmed_on_exactly_once_subscriptions(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("confirmed"))
    subscriber.create_subscription(
        request={"name": subscription("confirmed-sub"), "topic": topic("confirmed"),
                 "enable_exactly_once_delivery": True}
    )
    for n in range(2):
        publisher.publish(topic("confirmed"), str(n).encode()).result(10)
    stream = _Stream(subscriber, {"subscription": subscription("confirmed-sub"), "stream_ack_deadline_seconds": 60})
    try:
        received: list[Any] = []
        while len(received) < 2:
            received.extend(next(stream.responses).received_messages)
        first, second = sorted(received, key=lambda m: m.message.data)
        never_issued = "999-0-1-12345"
        stream.requests.put(types.StreamingPullRequest(
            ack_ids=[first.ack_id, never_issued, "not-an-ack-id"],
            modify_deadline_ack_ids=[second.ack_id], modify_deadline_seconds=[30],
        ))
        response = next(stream.responses)
        assert list(response.received_messages) == []
        assert list(response.acknowledge_confirmation.ack_ids) == [first.ack_id]
        assert list(response.acknowledge_confirmation.invalid_ack_ids) == [never_issued, "not-an-ack-id"]
        assert list(response.modify_ack_deadline_confirmation.ack_ids) == [second.ack_id]
        stream.requests.put(types.StreamingPullRequest(ack_ids=[second.ack_id]))
        assert list(next(stream.responses).acknowledge_confirmation.ack_ids) == [second.ack_id]
    finally:
        stream.close()


def test_update_subscription_keeps_the_leases_of_held_messages(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("changing"))
    subscriber.create_subscription(
        request={"name": subscription("changing-sub"), "topic": topic("changing"),
                 "enable_exactly_once_delivery": True}
    )
    publisher.publish(topic("changing"), b"held").result(10)
    (held,) = pull_exactly(subscriber, subscription("changing-sub"), 1)
    subscriber.update_subscription(request={
        "subscription": {"name": subscription("changing-sub"), "ack_deadline_seconds": 30,
                         "retry_policy": {"minimum_backoff": {"seconds": 1}}},
        "update_mask": {"paths": ["ack_deadline_seconds", "retry_policy"]},
    })
    # Exactly-once: this ack would be refused if the update had dropped the lease (and redelivered it).
    subscriber.acknowledge(subscription=subscription("changing-sub"), ack_ids=[held.ack_id])
    assert pull_nothing(subscriber, subscription("changing-sub")) == []


def test_seek_replays_what_the_topic_retains(
    pubsub_server: PubSubServer, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(request={"name": topic("kept"), "message_retention_duration": {"seconds": 3600}})
    publisher.create_topic(name=topic("forgetful"))
    start = timestamp_pb2.Timestamp()
    start.FromNanoseconds(pubsub_server.clock())
    for name in ("kept", "forgetful"):
        publisher.publish(topic(name), b"before").result(10)  # before the subscription exists
        subscriber.create_subscription(name=subscription(f"{name}-sub"), topic=topic(name))
        publisher.publish(topic(name), b"after").result(10)
        (after,) = pull_exactly(subscriber, subscription(f"{name}-sub"), 1)
        assert after.message.data == b"after"  # a subscription gets what is published once it exists
        subscriber.acknowledge(subscription=subscription(f"{name}-sub"), ack_ids=[after.ack_id])
        subscriber.seek(request={"subscription": subscription(f"{name}-sub"), "time": start})
    # The topic's retention replays both, the acked one and the one older than the subscription.
    replayed = pull_exactly(subscriber, subscription("kept-sub"), 2)
    assert sorted(m.message.data for m in replayed) == [b"after", b"before"]
    # Without it, and without retain_acked_messages, there is nothing to replay.
    assert pull_nothing(subscriber, subscription("forgetful-sub")) == []


def test_stop_ends_streams_with_unavailable_and_keeps_messages(
    pubsub_server: PubSubServer, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("durable"))
    subscriber.create_subscription(name=subscription("durable-sub"), topic=topic("durable"))
    publisher.publish(topic("durable"), b"kept").result(10)
    stream = _Stream(subscriber, {"subscription": subscription("durable-sub"), "stream_ack_deadline_seconds": 60,
                                  "max_outstanding_messages": 1})
    (received,) = next(stream.responses).received_messages
    pubsub_server.stop()
    with pytest.raises(exceptions.ServiceUnavailable):  # UNAVAILABLE: the status clients retry on
        next(stream.responses)
    stream.close()
    pubsub_server.start()
    # The stream's lease outlives it: an ack with its id still takes after the restart.
    fresh = pubsub_v1.SubscriberClient()
    try:
        assert fresh.get_subscription(subscription=subscription("durable-sub")).topic == topic("durable")
        fresh.acknowledge(subscription=subscription("durable-sub"), ack_ids=[received.ack_id])
        assert pull_nothing(fresh, subscription("durable-sub")) == []
    finally:
        fresh.close()


def test_seek_to_a_time_replays_retained_messages(
    pubsub_server: PubSubServer, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("history"))
    subscriber.create_subscription(
        request={"name": subscription("history-sub"), "topic": topic("history"), "retain_acked_messages": True}
    )
    for n in range(3):
        publisher.publish(topic("history"), str(n).encode()).result(10)
    first = pull_exactly(subscriber, subscription("history-sub"), 3)
    subscriber.acknowledge(subscription=subscription("history-sub"), ack_ids=[m.ack_id for m in first])
    assert pull_nothing(subscriber, subscription("history-sub")) == []

    earliest = min(m.message.publish_time for m in first)
    back = timestamp_pb2.Timestamp()
    back.FromDatetime(earliest)
    subscriber.seek(request={"subscription": subscription("history-sub"), "time": back})
    replayed = pull_exactly(subscriber, subscription("history-sub"), 3)
    assert sorted(m.message.data for m in replayed) == [b"0", b"1", b"2"]

    now = timestamp_pb2.Timestamp()
    now.FromNanoseconds(pubsub_server.clock())
    subscriber.seek(request={"subscription": subscription("history-sub"), "time": now})
    assert pull_nothing(subscriber, subscription("history-sub")) == []


def test_bad_requests_name_the_field_and_unknown_calls_name_the_call(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("strict"))
    with pytest.raises(exceptions.InvalidArgument, match=r"messages\[0\]: a message needs data"):
        publisher.api.publish(topic=topic("strict"), messages=[{"data": b""}])
    with pytest.raises(exceptions.InvalidArgument, match=r"4 MiB"):
        publisher.api.publish(topic=topic("strict"), messages=[{"data": b"x" * (4 * 1024 * 1024)}])
    with pytest.raises(exceptions.InvalidArgument, match="goog"):
        publisher.api.publish(topic=topic("strict"), messages=[{"data": b"x", "attributes": {"googx": "1"}}])
    with pytest.raises(exceptions.InvalidArgument, match="ack_deadline_seconds"):
        subscriber.create_subscription(name=subscription("bad-1"), topic=topic("strict"), ack_deadline_seconds=5)
    with pytest.raises(exceptions.InvalidArgument, match=r"filter: .*character"):
        subscriber.create_subscription(request={"name": subscription("bad-2"), "topic": topic("strict"),
                                                "filter": "attributes.color = red"})
    with pytest.raises(exceptions.InvalidArgument, match="max_delivery_attempts"):
        subscriber.create_subscription(request={
            "name": subscription("bad-3"), "topic": topic("strict"),
            "dead_letter_policy": {"dead_letter_topic": topic("strict"), "max_delivery_attempts": 2}})
    with pytest.raises(exceptions.InvalidArgument, match="not a topic name"):
        publisher.create_topic(name="topics/nope")
    subscriber.create_subscription(name=subscription("good"), topic=topic("strict"))
    with pytest.raises(exceptions.InvalidArgument, match=r"ack_ids\[0\]"):
        subscriber.acknowledge(subscription=subscription("good"), ack_ids=["forged"])
    with pytest.raises(exceptions.InvalidArgument, match="max_messages"):
        subscriber.api.pull(subscription=subscription("good"), max_messages=0)
    with pytest.raises(exceptions.MethodNotImplemented, match="bigquery_config"):
        subscriber.create_subscription(request={"name": subscription("bq-sub"), "topic": topic("strict"),
                                                "bigquery_config": {"table": "p.d.t"}})
    with pytest.raises(exceptions.InvalidArgument, match=r"push_config\.push_endpoint"):
        subscriber.create_subscription(request={"name": subscription("pushy"), "topic": topic("strict"),
                                                "push_config": {"push_endpoint": "example.com/push"}})
    with pytest.raises(exceptions.NotFound):
        publisher.api.publish(topic=topic("absent"), messages=[{"data": b"x"}])


