"""DetachSubscription, UpdateTopic, IAM and the refused settings, with Google's unmodified client."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.iam.v1 import policy_pb2
from google.protobuf import duration_pb2, field_mask_pb2

from conveyor.actors.pubsub import PubSubServer

from .helpers import PROJECT, fast_reconnect_clients, pull_exactly, pull_nothing, subscription, topic


def test_a_detached_subscription_stops_receiving_and_its_pulls_fail(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("orders"))
    subscriber.create_subscription(name=subscription("kept"), topic=topic("orders"))
    subscriber.create_subscription(name=subscription("gone"), topic=topic("orders"))
    publisher.publish(topic("orders"), b"before").result(10)
    pull_exactly(subscriber, subscription("gone"), 1)

    failed = threading.Event()
    errors: list[BaseException] = []

    def on_message(message: Any) -> None:
        message.ack()

    future = subscriber.subscribe(subscription("gone"), on_message)
    def ended(done: Any) -> None:
        errors.append(done.exception())
        failed.set()

    future.add_done_callback(ended)
    publisher.detach_subscription(request={"subscription": subscription("gone")})
    assert failed.wait(30), "the open stream should end once its subscription is detached"
    assert isinstance(errors[0], exceptions.FailedPrecondition)

    got = subscriber.get_subscription(subscription=subscription("gone"))
    assert got.detached and got.topic == topic("orders")
    with pytest.raises(exceptions.FailedPrecondition, match="detached"):
        subscriber.pull(subscription=subscription("gone"), max_messages=1, timeout=5)
    publisher.publish(topic("orders"), b"after").result(10)
    assert sorted(m.message.data for m in pull_exactly(subscriber, subscription("kept"), 2)) == [b"after", b"before"]
    assert list(publisher.list_topic_subscriptions(topic=topic("orders"))) == [subscription("gone"),
                                                                                subscription("kept")]
    # an update keeps it detached; detaching twice is no error; a missing one is NOT_FOUND
    subscriber.update_subscription(subscription={"name": subscription("gone"), "labels": {"a": "b"}},
                                   update_mask=field_mask_pb2.FieldMask(paths=["labels"]))
    assert subscriber.get_subscription(subscription=subscription("gone")).detached
    publisher.detach_subscription(request={"subscription": subscription("gone")})
    with pytest.raises(exceptions.NotFound, match="Subscription not found"):
        publisher.detach_subscription(request={"subscription": subscription("missing")})
    with pytest.raises(exceptions.InvalidArgument, match="detached"):
        subscriber.create_subscription(request={"name": subscription("born-detached"), "topic": topic("orders"),
                                                "detached": True})


def test_update_topic_changes_every_field_the_front_stores(publisher: pubsub_v1.PublisherClient) -> None:
    publisher.create_topic(name=topic("tuned"))
    updated = publisher.update_topic(
        topic={"name": topic("tuned"), "labels": {"team": "a"}, "message_retention_duration": {"seconds": 3600}},
        update_mask=field_mask_pb2.FieldMask(paths=["labels", "message_retention_duration"]),
    )
    assert dict(updated.labels) == {"team": "a"} and updated.message_retention_duration.total_seconds() == 3600
    got = publisher.get_topic(topic=topic("tuned"))
    assert dict(got.labels) == {"team": "a"} and got.message_retention_duration.total_seconds() == 3600
    cleared = publisher.update_topic(topic={"name": topic("tuned")},
                                     update_mask=field_mask_pb2.FieldMask(paths=["message_retention_duration"]))
    assert not cleared._pb.HasField("message_retention_duration")
    with pytest.raises(exceptions.InvalidArgument, match="message_retention_duration: must be from 10 minutes"):
        publisher.update_topic(topic={"name": topic("tuned"), "message_retention_duration": {"seconds": 5}},
                               update_mask=field_mask_pb2.FieldMask(paths=["message_retention_duration"]))


TOPIC_REFUSED = [
    ("kms_key_name", {"kms_key_name": "projects/p/locations/l/keyRings/r/cryptoKeys/k"}),
    ("ingestion_data_source_settings",
     {"ingestion_data_source_settings": {"aws_kinesis": {"stream_arn": "arn:aws:kinesis:x"}}}),
    ("message_transforms", {"message_transforms": [{"javascript_udf": {"function_name": "f", "code": "x"}}]}),
    ("message_storage_policy", {"message_storage_policy": {"allowed_persistence_regions": ["us-east1"]}}),
    ("tags", {"tags": {"tagKeys/1": "tagValues/2"}}),
]
SUBSCRIPTION_REFUSED = [
    ("bigquery_config", {"bigquery_config": {"table": "p.d.t"}}),
    ("cloud_storage_config", {"cloud_storage_config": {"bucket": "b"}}),
    ("bigtable_config", {"bigtable_config": {"table": "projects/p/instances/i/tables/t"}}),
    ("message_transforms", {"message_transforms": [{"javascript_udf": {"function_name": "f", "code": "x"}}]}),
    ("tags", {"tags": {"tagKeys/1": "tagValues/2"}}),
]


@pytest.mark.parametrize(("field", "setting"), TOPIC_REFUSED, ids=[f for f, _ in TOPIC_REFUSED])
def test_topic_settings_the_front_lacks_are_refused_by_name(
    publisher: pubsub_v1.PublisherClient, field: str, setting: dict[str, Any]
) -> None:
    with pytest.raises(exceptions.MethodNotImplemented, match=rf"CreateTopic: {field}: .* not supported"):
        publisher.create_topic(request={"name": topic("refused"), **setting})
    publisher.create_topic(name=topic("plain"))
    with pytest.raises(exceptions.MethodNotImplemented, match=rf"UpdateTopic: {field}: .* not supported"):
        publisher.update_topic(topic={"name": topic("plain"), **setting},
                               update_mask=field_mask_pb2.FieldMask(paths=[field]))
    assert publisher.get_topic(topic=topic("plain")).kms_key_name == ""


@pytest.mark.parametrize(("field", "setting"), SUBSCRIPTION_REFUSED, ids=[f for f, _ in SUBSCRIPTION_REFUSED])
def test_subscription_settings_the_front_lacks_are_refused_by_name(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient, field: str,
    setting: dict[str, Any],
) -> None:
    publisher.create_topic(name=topic("events"))
    with pytest.raises(exceptions.MethodNotImplemented, match=rf"CreateSubscription: {field}: .* not supported"):
        subscriber.create_subscription(request={"name": subscription("refused"), "topic": topic("events"), **setting})
    subscriber.create_subscription(name=subscription("plain"), topic=topic("events"))
    with pytest.raises(exceptions.MethodNotImplemented, match=rf"UpdateSubscription: {field}: .* not supported"):
        subscriber.update_subscription(subscription={"name": subscription("plain"), **setting},
                                       update_mask=field_mask_pb2.FieldMask(paths=[field]))


def test_iam_keeps_what_was_set_and_grants_every_permission(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("guarded"))
    subscriber.create_subscription(name=subscription("guarded-sub"), topic=topic("guarded"))
    subscriber.create_snapshot(name=f"{PROJECT}/snapshots/guarded-snap", subscription=subscription("guarded-sub"))
    for resource, client in ((topic("guarded"), publisher), (subscription("guarded-sub"), subscriber),
                             (f"{PROJECT}/snapshots/guarded-snap", subscriber)):
        empty = client.get_iam_policy(request={"resource": resource})
        assert list(empty.bindings) == []
        policy = policy_pb2.Policy(bindings=[policy_pb2.Binding(role="roles/pubsub.viewer",
                                                                members=["user:a@example.com"])])
        kept = client.set_iam_policy(request={"resource": resource, "policy": policy})
        assert [b.role for b in kept.bindings] == ["roles/pubsub.viewer"] and kept.etag
        got = client.get_iam_policy(request={"resource": resource})
        assert got == kept
        asked = ["pubsub.topics.publish", "pubsub.subscriptions.consume", "made.up"]
        assert list(client.test_iam_permissions(request={"resource": resource, "permissions": asked})
                    .permissions) == asked
        stale = policy_pb2.Policy(bindings=[], etag=empty.etag)
        with pytest.raises(exceptions.Aborted, match="etag"):
            client.set_iam_policy(request={"resource": resource, "policy": stale})
        fresh = policy_pb2.Policy(bindings=[], etag=got.etag)
        assert list(client.set_iam_policy(request={"resource": resource, "policy": fresh}).bindings) == []

    with pytest.raises(exceptions.NotFound, match="Resource not found"):
        publisher.get_iam_policy(request={"resource": topic("absent")})
    with pytest.raises(exceptions.InvalidArgument, match=r"resource: .* is not a topic, subscription or snapshot"):
        publisher.get_iam_policy(request={"resource": "projects/p/buckets/b"})
    publisher.set_iam_policy(request={"resource": topic("guarded"), "policy": policy_pb2.Policy(version=1)})
    publisher.delete_topic(topic=topic("guarded"))
    publisher.create_topic(name=topic("guarded"))
    assert publisher.get_iam_policy(request={"resource": topic("guarded")}).version == 0  # the policy went with it


def test_set_iam_policy_with_an_update_mask_changes_only_its_fields(publisher: pubsub_v1.PublisherClient) -> None:
    publisher.create_topic(name=topic("masked"))
    binding = policy_pb2.Binding(role="roles/pubsub.publisher", members=["user:b@example.com"])
    publisher.set_iam_policy(request={"resource": topic("masked"), "policy": policy_pb2.Policy(bindings=[binding])})
    kept = publisher.set_iam_policy(request={"resource": topic("masked"), "policy": policy_pb2.Policy(version=3),
                                             "update_mask": field_mask_pb2.FieldMask(paths=["version"])})
    assert kept.version == 3 and [b.role for b in kept.bindings] == ["roles/pubsub.publisher"]


def test_retention_set_by_update_is_used_by_seek(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("later"))
    subscriber.create_subscription(name=subscription("later-sub"), topic=topic("later"))
    publisher.update_topic(topic={"name": topic("later"), "message_retention_duration": duration_pb2.Duration(
        seconds=3600)}, update_mask=field_mask_pb2.FieldMask(paths=["message_retention_duration"]))
    publisher.publish(topic("later"), b"kept").result(10)
    got = pull_exactly(subscriber, subscription("later-sub"), 1)
    subscriber.acknowledge(subscription=subscription("later-sub"), ack_ids=[m.ack_id for m in got])
    assert pull_nothing(subscriber, subscription("later-sub")) == []
    subscriber.seek(request={"subscription": subscription("later-sub"), "time": got[0].message.publish_time})
    assert [m.message.data for m in pull_exactly(subscriber, subscription("later-sub"), 1)] == [b"kept"]


def test_detached_subscriptions_and_policies_survive_a_restart_with_a_data_dir(tmp_path: Path) -> None:
    binding = policy_pb2.Binding(role="roles/pubsub.viewer", members=["user:c@example.com"])
    with PubSubServer(data_dir=tmp_path) as server:
        port = server.address.rsplit(":", 1)[1]
        publisher, subscriber = fast_reconnect_clients(server.address)
        publisher.create_topic(name=topic("durable"))
        subscriber.create_subscription(name=subscription("durable-sub"), topic=topic("durable"))
        publisher.publish(topic("durable"), b"dropped").result(10)
        policy = policy_pb2.Policy(bindings=[binding])
        publisher.set_iam_policy(request={"resource": topic("durable"), "policy": policy})
        publisher.detach_subscription(request={"subscription": subscription("durable-sub")})
        publisher.stop()
        subscriber.close()
    with PubSubServer(port=int(port), data_dir=tmp_path) as again:
        publisher, subscriber = fast_reconnect_clients(again.address)
        try:
            assert subscriber.get_subscription(subscription=subscription("durable-sub")).detached
            with pytest.raises(exceptions.FailedPrecondition):
                subscriber.pull(subscription=subscription("durable-sub"), max_messages=1, timeout=5)
            kept = publisher.get_iam_policy(request={"resource": topic("durable")})
            assert [b.role for b in kept.bindings] == ["roles/pubsub.viewer"]
        finally:
            publisher.stop()
            subscriber.close()
