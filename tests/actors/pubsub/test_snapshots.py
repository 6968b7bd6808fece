"""Snapshots with Google's unmodified client: create, get, list, update, delete, Seek to one, expiry, restarts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.protobuf import field_mask_pb2, timestamp_pb2

from conveyor.actors.pubsub import (
    CreateSnapshot,
    CreateSubscription,
    CreateTopic,
    Failed,
    Publish,
    PubMessage,
    PubSubServer,
    SnapshotConfig,
    SubscriptionConfig,
    TopicConfig,
)
from conveyor.actors.pubsub._model import DeleteSubscription
from conveyor.actors.pubsub._snapshots import GetSnapshot

from .helpers import PROJECT, fast_reconnect_clients, pull_exactly, pull_nothing, subscription, topic

DAY_NS = 24 * 3600 * 10**9


def snapshot(name: str) -> str:
    return f"{PROJECT}/snapshots/{name}"


class FakeClock:
    """Wall-clock nanoseconds a test moves by hand (the server's ``clock``)."""

    def __init__(self) -> None:
        self.now = time.time_ns()

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def clocked(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubServer]:
    """A server on ``clock``, with PUBSUB_EMULATOR_HOST pointing at it."""
    with PubSubServer(clock=clock) as server:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
        yield server


@pytest.fixture
def clients(clocked: PubSubServer) -> Iterator[tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]]:
    publisher, subscriber = fast_reconnect_clients(clocked.address)
    yield publisher, subscriber
    publisher.stop()
    subscriber.close()


def publish(publisher: pubsub_v1.PublisherClient, name: str, *payloads: bytes) -> None:
    for payload in payloads:
        publisher.publish(topic(name), payload).result(10)


def ack(subscriber: pubsub_v1.SubscriberClient, name: str, received: list[object]) -> None:
    subscriber.acknowledge(subscription=subscription(name), ack_ids=[m.ack_id for m in received])  # type: ignore[attr-defined]


def datas(received: list[object]) -> list[bytes]:
    return sorted(m.message.data for m in received)  # type: ignore[attr-defined]


def test_seek_to_a_snapshot_restores_unacked_and_later_messages(
    clients: tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient],
) -> None:
    publisher, subscriber = clients
    publisher.create_topic(name=topic("tee"))
    subscriber.create_subscription(name=subscription("sub"), topic=topic("tee"))
    publish(publisher, "tee", b"a", b"b", b"c")
    first = pull_exactly(subscriber, subscription("sub"), 3)
    ack(subscriber, "sub", [m for m in first if m.message.data == b"a"])  # a acked before the snapshot

    made = subscriber.create_snapshot(
        request={"name": snapshot("snap"), "subscription": subscription("sub"), "labels": {"k": "v"}})
    assert made.name == snapshot("snap") and made.topic == topic("tee") and dict(made.labels) == {"k": "v"}
    publish(publisher, "tee", b"d")  # after the snapshot: it holds it
    ack(subscriber, "sub", [m for m in first if m.message.data != b"a"])
    ack(subscriber, "sub", pull_exactly(subscriber, subscription("sub"), 1))
    assert pull_nothing(subscriber, subscription("sub")) == []

    subscriber.seek(request={"subscription": subscription("sub"), "snapshot": snapshot("snap")})
    replayed = pull_exactly(subscriber, subscription("sub"), 3)
    assert datas(replayed) == [b"b", b"c", b"d"]
    assert pull_nothing(subscriber, subscription("sub")) == []


def test_seek_to_a_snapshot_acks_what_it_does_not_hold(
    clients: tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient],
) -> None:
    publisher, subscriber = clients
    publisher.create_topic(name=topic("tee"))
    subscriber.create_subscription(name=subscription("sub"), topic=topic("tee"))
    publish(publisher, "tee", b"a")
    ack(subscriber, "sub", pull_exactly(subscriber, subscription("sub"), 1))
    subscriber.create_snapshot(name=snapshot("empty"), subscription=subscription("sub"))
    # a second subscription of the same topic, with a backlog the snapshot never held
    subscriber.create_subscription(name=subscription("other"), topic=topic("tee"))
    publish(publisher, "tee", b"b")
    subscriber.seek(request={"subscription": subscription("other"), "snapshot": snapshot("empty")})
    assert datas(pull_exactly(subscriber, subscription("other"), 1)) == [b"b"]  # published after: held

    subscriber.create_subscription(name=subscription("late"), topic=topic("tee"))
    publish(publisher, "tee", b"c")
    subscriber.create_snapshot(name=snapshot("later"), subscription=subscription("sub"))  # holds b, c
    ack(subscriber, "sub", pull_exactly(subscriber, subscription("sub"), 2))
    subscriber.create_snapshot(name=snapshot("latest"), subscription=subscription("sub"))  # holds nothing
    subscriber.seek(request={"subscription": subscription("late"), "snapshot": snapshot("latest")})
    assert pull_nothing(subscriber, subscription("late")) == []  # its c counts as acked
    subscriber.seek(request={"subscription": subscription("late"), "snapshot": snapshot("later")})
    assert datas(pull_exactly(subscriber, subscription("late"), 2)) == [b"b", b"c"]  # b predates "late"


def test_snapshot_admin_calls_and_their_errors(
    clients: tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient], clock: FakeClock,
) -> None:
    publisher, subscriber = clients
    publisher.create_topic(name=topic("tee"))
    publisher.create_topic(name=topic("you"))
    subscriber.create_subscription(name=subscription("sub"), topic=topic("tee"))
    subscriber.create_subscription(name=subscription("on-u"), topic=topic("you"))
    made = subscriber.create_snapshot(name=snapshot("one"), subscription=subscription("sub"))
    subscriber.create_snapshot(name=snapshot("two"), subscription=subscription("sub"))
    assert made.expire_time.timestamp() == pytest.approx((clock.now + 7 * DAY_NS) / 1e9, abs=1)
    assert subscriber.get_snapshot(snapshot=snapshot("one")).topic == topic("tee")

    listed = list(subscriber.list_snapshots(request={"project": PROJECT, "page_size": 1}))
    assert [s.name for s in listed] == [snapshot("one"), snapshot("two")]

    sooner = timestamp_pb2.Timestamp()
    sooner.FromNanoseconds(clock.now + DAY_NS)
    updated = subscriber.update_snapshot(
        snapshot={"name": snapshot("one"), "labels": {"env": "test"}, "expire_time": sooner},
        update_mask=field_mask_pb2.FieldMask(paths=["labels", "expire_time"]),
    )
    assert dict(updated.labels) == {"env": "test"}
    assert updated.expire_time.timestamp() == pytest.approx((clock.now + DAY_NS) / 1e9, abs=1e-3)
    later = timestamp_pb2.Timestamp()
    later.FromNanoseconds(clock.now + 8 * DAY_NS)
    with pytest.raises(exceptions.InvalidArgument, match="expire_time"):
        subscriber.update_snapshot(snapshot={"name": snapshot("one"), "expire_time": later},
                                   update_mask=field_mask_pb2.FieldMask(paths=["expire_time"]))
    with pytest.raises(exceptions.InvalidArgument, match=r"update_mask.paths\[0\].*topic"):
        subscriber.update_snapshot(snapshot={"name": snapshot("one"), "topic": topic("you")},
                                   update_mask=field_mask_pb2.FieldMask(paths=["topic"]))

    with pytest.raises(exceptions.AlreadyExists, match="Snapshot already exists"):
        subscriber.create_snapshot(name=snapshot("one"), subscription=subscription("sub"))
    with pytest.raises(exceptions.NotFound, match="Subscription not found"):
        subscriber.create_snapshot(name=snapshot("three"), subscription=subscription("missing"))
    with pytest.raises(exceptions.InvalidArgument, match=r"name: .* is not a snapshot name"):
        subscriber.create_snapshot(name=f"{PROJECT}/snapshots/x", subscription=subscription("sub"))
    with pytest.raises(exceptions.InvalidArgument, match=r"snapshot: .* is not a snapshot name"):
        subscriber.get_snapshot(snapshot=f"{PROJECT}/topics/one")
    with pytest.raises(exceptions.FailedPrecondition, match=r"of topic .*topics/tee.*seek to a snapshot of its own"):
        subscriber.seek(request={"subscription": subscription("on-u"), "snapshot": snapshot("one")})
    with pytest.raises(exceptions.NotFound, match="Snapshot not found"):
        subscriber.seek(request={"subscription": subscription("sub"), "snapshot": snapshot("nope")})

    subscriber.delete_snapshot(snapshot=snapshot("one"))
    with pytest.raises(exceptions.NotFound, match="Snapshot not found"):
        subscriber.get_snapshot(snapshot=snapshot("one"))
    with pytest.raises(exceptions.NotFound, match="Snapshot not found"):
        subscriber.delete_snapshot(snapshot=snapshot("one"))
    publisher.delete_topic(topic=topic("tee"))  # its snapshots go with it (the topic kept their messages)
    assert list(subscriber.list_snapshots(request={"project": PROJECT})) == []


def test_snapshots_expire_seven_days_after_their_oldest_message(
    clients: tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient], clock: FakeClock,
) -> None:
    publisher, subscriber = clients
    publisher.create_topic(name=topic("tee"))
    subscriber.create_subscription(name=subscription("sub"), topic=topic("tee"))
    published_at = clock.now
    publish(publisher, "tee", b"old")
    clock.now += 3 * DAY_NS
    made = subscriber.create_snapshot(name=snapshot("snap"), subscription=subscription("sub"))
    assert made.expire_time.timestamp() == pytest.approx((published_at + 7 * DAY_NS) / 1e9, abs=1e-3)  # 4 days left

    clock.now = published_at + 7 * DAY_NS - 3600 * 10**9 + 1  # the next one would live under an hour
    with pytest.raises(exceptions.FailedPrecondition, match="would expire within an hour"):
        subscriber.create_snapshot(name=snapshot("late"), subscription=subscription("sub"))
    assert subscriber.get_snapshot(snapshot=snapshot("snap")).name == snapshot("snap")
    clock.now = published_at + 7 * DAY_NS
    with pytest.raises(exceptions.NotFound, match="Snapshot not found"):
        subscriber.get_snapshot(snapshot=snapshot("snap"))
    with pytest.raises(exceptions.NotFound, match="Snapshot not found"):
        subscriber.seek(request={"subscription": subscription("sub"), "snapshot": snapshot("snap")})
    assert list(subscriber.list_snapshots(request={"project": PROJECT})) == []
    subscriber.create_snapshot(name=snapshot("late"), subscription=subscription("sub"))  # the name is free again


def test_snapshots_survive_a_restart_with_a_data_dir(tmp_path: Path) -> None:
    server = PubSubServer(data_dir=tmp_path).start()
    port = server.port
    publisher, subscriber = fast_reconnect_clients(server.address)
    try:
        publisher.create_topic(name=topic("tee"))
        subscriber.create_subscription(name=subscription("sub"), topic=topic("tee"))
        publish(publisher, "tee", b"before")
        subscriber.create_snapshot(
        request={"name": snapshot("snap"), "subscription": subscription("sub"), "labels": {"k": "v"}})
        publish(publisher, "tee", b"after")
        ack(subscriber, "sub", pull_exactly(subscriber, subscription("sub"), 2))
    finally:
        publisher.stop()
        subscriber.close()
        server.close()

    again = PubSubServer(port=port, data_dir=tmp_path).start()
    publisher, subscriber = fast_reconnect_clients(again.address)
    try:
        kept = subscriber.get_snapshot(snapshot=snapshot("snap"))
        assert kept.topic == topic("tee") and dict(kept.labels) == {"k": "v"}
        publish(publisher, "tee", b"restarted")  # still recorded by the snapshot after the restart
        ack(subscriber, "sub", pull_exactly(subscriber, subscription("sub"), 1))
        subscriber.seek(request={"subscription": subscription("sub"), "snapshot": snapshot("snap")})
        assert datas(pull_exactly(subscriber, subscription("sub"), 3)) == [b"after", b"before", b"restarted"]
        subscriber.delete_snapshot(snapshot=snapshot("snap"))
    finally:
        publisher.stop()
        subscriber.close()
        again.close()

    third = PubSubServer(port=port, data_dir=tmp_path).start()
    publisher, subscriber = fast_reconnect_clients(third.address)
    try:
        with pytest.raises(exceptions.NotFound):
            subscriber.get_snapshot(snapshot=snapshot("snap"))
    finally:
        publisher.stop()
        subscriber.close()
        third.close()


def test_a_snapshot_whose_subscription_is_deleted_meanwhile_is_made_or_refused_never_stuck(
    clocked: PubSubServer,
) -> None:
    """Both happen (the delete overtakes the topic's question or not); neither leaves the name taken."""
    system, registry = clocked.system, clocked.registry
    system.ask(registry, CreateTopic(TopicConfig(topic("tee"))), timeout=10)
    for round_ in range(20):
        name, sub = snapshot(f"race-{round_}"), subscription(f"sub-{round_}")
        system.ask(registry, CreateSubscription(SubscriptionConfig(sub, topic("tee"))), timeout=10)
        system.ask(registry, Publish(topic("tee"), (PubMessage(b"x", publish_time_ns=clocked.clock()),)), timeout=10)
        answers: list[object] = []
        create = CreateSnapshot(name, sub, (), clocked.clock())
        asking = threading.Thread(target=lambda ask, into: into.append(system.ask(registry, ask, timeout=10)),
                                  args=(create, answers))
        asking.start()
        system.tell_from_thread(registry, DeleteSubscription(sub))
        asking.join(15)
        answer = answers[0]
        if isinstance(answer, Failed):
            assert answer.code == "NOT_FOUND", answer
            got = system.ask(registry, GetSnapshot(name, clocked.clock()), timeout=10)
            assert isinstance(got, Failed) and got.code == "NOT_FOUND"
        else:
            assert isinstance(answer, SnapshotConfig)
            assert system.ask(registry, GetSnapshot(name, clocked.clock()), timeout=10) == answer
        system.ask(registry, CreateSubscription(SubscriptionConfig(sub, topic("tee"))), timeout=10)
        again = system.ask(registry, CreateSnapshot(f"{name}-again", sub, (), clocked.clock()), timeout=10)
        assert isinstance(again, SnapshotConfig)  # nothing was left pending
