"""The streaming scenarios twice: through Google's threaded subscriber and through conveyor's actor subscriber.

Each parametrized test drives both clients with the same body through a small ``Client`` adapter
(subscribe, stop, ack-with-response); the tests that only one client can run say why. Waits are
bounded conditions, never sleeps a result depends on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from google.cloud import pubsub_v1
from google.cloud.pubsub_v1.subscriber.exceptions import AcknowledgeError, AcknowledgeStatus

from conveyor.actors.pubsub import (
    PubSubServer,
    PubSubTransport,
    Settlements,
    StreamHandle,
    stream_deadline_s,
    subscribe_remote,
)
from conveyor.actors.subscriber import FlowControl, SubscriptionFailed
from conveyor.runtime import ThreadSystem
from tests.actors.pubsub.helpers import fast_reconnect_clients, pull_exactly, pull_nothing, subscription, topic

Callback = Callable[[Any], None]


class Client:
    """One subscriber library, driven the same way whichever it is."""

    name: str

    def subscribe(self, name: str, callback: Callback, *, max_messages: int = 1000) -> Callable[[], None]:
        """Start receiving; returns ``stop``, which cancels and waits until the subscriber has stopped."""
        raise NotImplementedError

    def running(self, stop: Callable[[], None]) -> bool:
        """Whether the subscription that ``stop`` belongs to is still receiving."""
        raise NotImplementedError

    def ack_with_response(self, message: Any) -> bool:
        """Ack and wait for the server's word: True if it took the ack."""
        raise NotImplementedError


class GoogleClient(Client):
    name = "google"

    def __init__(self, client: pubsub_v1.SubscriberClient) -> None:
        self.client = client
        self.futures: dict[Callable[[], None], Any] = {}

    def subscribe(self, name: str, callback: Callback, *, max_messages: int = 1000) -> Callable[[], None]:
        future = self.client.subscribe(name, callback,
                                       flow_control=pubsub_v1.types.FlowControl(max_messages=max_messages))

        def stop() -> None:
            future.cancel()
            future.result(timeout=10)

        self.futures[stop] = future
        return stop

    def running(self, stop: Callable[[], None]) -> bool:
        return not self.futures[stop].done()

    def ack_with_response(self, message: Any) -> bool:
        try:
            return bool(message.ack_with_response().result(timeout=10) == AcknowledgeStatus.SUCCESS)
        except AcknowledgeError:
            return False


class ConveyorClient(Client):
    name = "conveyor"

    def __init__(self, transport: PubSubTransport, flow: dict[str, Any] | None = None) -> None:
        self.transport = transport
        self.flow = flow or {}
        self.subscriptions: dict[Callable[[], None], Any] = {}

    def subscribe(self, name: str, callback: Callback, *, max_messages: int = 1000) -> Callable[[], None]:
        system = ThreadSystem()
        running = subscribe_remote(system, self.transport, name, callback,
                                   flow_control=FlowControl(max_messages=max_messages, **self.flow), workers=4)

        def stop() -> None:
            running.cancel()
            running.result(timeout=10)
            system.wait_quiet(timeout=10)
            system.shutdown()

        self.subscriptions[stop] = running
        return stop

    def running(self, stop: Callable[[], None]) -> bool:
        return bool(self.subscriptions[stop].running)

    def ack_with_response(self, message: Any) -> bool:
        return bool(message.ack_with_response(timeout=10))


@pytest.fixture(params=["google", "conveyor"])
def client(request: pytest.FixtureRequest, pubsub_server: PubSubServer,
           subscriber: pubsub_v1.SubscriberClient) -> Iterator[Client]:
    """Google's subscriber (the test's ``subscriber``), or conveyor's over its gRPC transport."""
    if request.param == "google":
        yield GoogleClient(subscriber)
        return
    transport = PubSubTransport(pubsub_server.address)
    yield ConveyorClient(transport)
    transport.close()


class Seen:
    """What the callbacks saw, from any thread; ``wait(n)`` until ``n`` callbacks ran."""

    def __init__(self, on_message: Callback | None = None) -> None:
        self.messages: list[Any] = []
        self.on_message = on_message
        self.changed = threading.Condition()

    def __call__(self, message: Any) -> None:
        with self.changed:
            self.messages.append(message)
            self.changed.notify_all()
        if self.on_message is None:
            message.ack()
        else:
            self.on_message(message)

    def wait(self, count: int, timeout: float = 20.0) -> list[Any]:
        with self.changed:
            arrived = self.changed.wait_for(lambda: len(self.messages) >= count, timeout)
            assert arrived, f"only {len(self.messages)} of {count} messages arrived"
            return list(self.messages)

    def datas(self) -> list[bytes]:
        with self.changed:
            return [m.data for m in self.messages]


def test_each_ordering_key_in_order(client: Client, publisher: pubsub_v1.PublisherClient,
                                    subscriber: pubsub_v1.SubscriberClient) -> None:
    publisher.create_topic(name=topic("ordered"))
    subscriber.create_subscription(
        request={"name": subscription("ordered-sub"), "topic": topic("ordered"), "enable_message_ordering": True}
    )
    futures = [
        publisher.publish(topic("ordered"), f"{key}:{n}".encode(), ordering_key=key, n=str(n))
        for n in range(30)
        for key in ("a", "b", "c")
    ]
    for future in futures:
        future.result(10)
    seen = Seen()
    stop = client.subscribe(subscription("ordered-sub"), seen)
    messages = seen.wait(90)
    stop()
    for key in ("a", "b", "c"):
        numbers = [int(m.data.split(b":")[1]) for m in messages if m.ordering_key == key]
        assert numbers == list(range(30)), key
        assert [int(m.attributes["n"]) for m in messages if m.ordering_key == key] == list(range(30))


def test_nack_redelivers_with_a_higher_delivery_attempt(client: Client, publisher: pubsub_v1.PublisherClient,
                                                        subscriber: pubsub_v1.SubscriberClient) -> None:
    publisher.create_topic(name=topic("retry"))
    publisher.create_topic(name=topic("retry-dead"))
    subscriber.create_subscription(request={  # delivery_attempt is set only with a dead-letter policy
        "name": subscription("retry-sub"), "topic": topic("retry"),
        "dead_letter_policy": {"dead_letter_topic": topic("retry-dead"), "max_delivery_attempts": 5}})
    publisher.publish(topic("retry"), b"again").result(10)

    def nack_first(message: Any) -> None:
        if message.delivery_attempt == 1:
            message.nack()
        else:
            message.ack()

    seen = Seen(nack_first)
    stop = client.subscribe(subscription("retry-sub"), seen)
    messages = seen.wait(2)
    stop()
    assert [(m.data, m.delivery_attempt) for m in messages] == [(b"again", 1), (b"again", 2)]
    assert pull_nothing(subscriber, subscription("retry-sub")) == []


def test_dead_letter_after_max_delivery_attempts(client: Client, publisher: pubsub_v1.PublisherClient,
                                                 subscriber: pubsub_v1.SubscriberClient) -> None:
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
    seen = Seen(lambda message: message.nack())
    stop = client.subscribe(subscription("work-sub"), seen)
    (dead,) = pull_exactly(subscriber, subscription("dead-sub"), 1)
    stop()
    # The fifth nack dead-lettered it: no sixth delivery can have happened before the pull above.
    assert [(m.data, m.delivery_attempt) for m in seen.messages] == [(b"poison", n) for n in range(1, 6)]
    assert dead.message.data == b"poison"
    assert dead.message.attributes["origin"] == "test"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceSubscription"] == "work-sub"


def test_retry_policy_holds_a_nacked_message_back(client: Client, publisher: pubsub_v1.PublisherClient,
                                                  subscriber: pubsub_v1.SubscriberClient) -> None:
    publisher.create_topic(name=topic("backoff"))
    publisher.create_topic(name=topic("backoff-dead"))
    subscriber.create_subscription(
        request={
            "name": subscription("backoff-sub"),
            "topic": topic("backoff"),
            "retry_policy": {"minimum_backoff": {"seconds": 1}, "maximum_backoff": {"seconds": 2}},
            # delivery_attempt is set only with a dead-letter policy
            "dead_letter_policy": {"dead_letter_topic": topic("backoff-dead"), "max_delivery_attempts": 5},
        }
    )

    def nack_first(message: Any) -> None:
        if message.data == b"first" and message.delivery_attempt == 1:
            message.nack()
        else:
            message.ack()

    seen = Seen(nack_first)
    stop = client.subscribe(subscription("backoff-sub"), seen)
    publisher.publish(topic("backoff"), b"first").result(10)
    seen.wait(1)
    # Published after the nack, yet received first: the nacked message waits out its backoff (1 s).
    publisher.publish(topic("backoff"), b"second").result(10)
    messages = seen.wait(3)
    stop()
    assert [(m.data, m.delivery_attempt) for m in messages] == [(b"first", 1), (b"second", 1), (b"first", 2)]


def test_exactly_once_ack_with_response_is_confirmed(client: Client, publisher: pubsub_v1.PublisherClient,
                                                      subscriber: pubsub_v1.SubscriberClient) -> None:
    publisher.create_topic(name=topic("once"))
    subscriber.create_subscription(
        request={"name": subscription("once-sub"), "topic": topic("once"), "enable_exactly_once_delivery": True}
    )
    for n in range(3):
        publisher.publish(topic("once"), str(n).encode()).result(10)
    confirmed: list[bool] = []
    seen = Seen(lambda message: confirmed.append(client.ack_with_response(message)))
    stop = client.subscribe(subscription("once-sub"), seen)
    messages = seen.wait(3)
    assert pull_nothing(subscriber, subscription("once-sub")) == []
    stop()
    assert sorted(m.data for m in messages) == [b"0", b"1", b"2"]
    assert confirmed == [True, True, True]


def test_filter_delivers_only_matching_messages(client: Client, publisher: pubsub_v1.PublisherClient,
                                                subscriber: pubsub_v1.SubscriberClient) -> None:
    publisher.create_topic(name=topic("colors"))
    subscriber.create_subscription(
        request={
            "name": subscription("reds"),
            "topic": topic("colors"),
            "filter": 'attributes.color = "red" OR hasPrefix(attributes.color, "dark")',
            "enable_message_ordering": True,  # one key: delivered in publish order, so "last" comes last
        }
    )
    samples = [{"color": "red"}, {"color": "blue"}, {"color": "darkgreen"}, {"size": "9"}, {"color": "red"}]
    for n, attributes in enumerate(samples):
        publisher.publish(topic("colors"), str(n).encode(), ordering_key="k", **attributes).result(10)
    seen = Seen()
    stop = client.subscribe(subscription("reds"), seen)
    messages = seen.wait(3)
    stop()
    assert [(m.data, m.attributes["color"]) for m in messages] == [(b"0", "red"), (b"2", "darkgreen"), (b"4", "red")]


def test_flow_control_never_has_more_than_max_messages_outstanding(
    client: Client, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("slow"))
    subscriber.create_subscription(name=subscription("slow-sub"), topic=topic("slow"))
    for n in range(12):
        publisher.publish(topic("slow"), str(n).encode()).result(10)
    held: list[Any] = []  # received, not yet acked
    most = 0
    changed = threading.Condition()

    def hold(message: Any) -> None:
        nonlocal most
        with changed:
            held.append(message)
            most = max(most, len(held))
            changed.notify_all()

    stop = client.subscribe(subscription("slow-sub"), hold, max_messages=4)
    acked: list[bytes] = []
    with changed:
        assert changed.wait_for(lambda: len(held) >= 4, timeout=20)
        # A fifth would come now if flow control let it: give it half a second to show up.
        assert not changed.wait_for(lambda: len(held) > 4, timeout=0.5)
    while len(acked) < 12:
        with changed:
            assert changed.wait_for(lambda: bool(held), timeout=20), f"stalled after {len(acked)} acks"
            batch, held[:] = list(held), []
        for message in batch:
            acked.append(message.data)
            message.ack()
    stop()
    assert most == 4
    assert sorted(int(data) for data in acked) == list(range(12))


def test_restart_ends_streams_and_subscribers_reconnect_without_loss(
    client: Client, pubsub_server: PubSubServer, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher, fast_subscriber = fast_reconnect_clients(pubsub_server.address)
    if isinstance(client, GoogleClient):
        client = GoogleClient(fast_subscriber)
    try:
        publisher.create_topic(name=topic("durable"))
        subscriber.create_subscription(name=subscription("durable-sub"), topic=topic("durable"))
        seen = Seen()
        stop = client.subscribe(subscription("durable-sub"), seen)
        for n in range(5):
            publisher.publish(topic("durable"), f"before-{n}".encode()).result(10)
        seen.wait(5)
        pubsub_server.stop()
        pubsub_server.start()
        for n in range(5):
            publisher.publish(topic("durable"), f"after-{n}".encode()).result(30)
        with seen.changed:
            assert seen.changed.wait_for(lambda: len(set(seen.datas())) >= 10, timeout=30)
        assert client.running(stop)  # reconnected instead of failing
        stop()
    finally:
        publisher.stop()
        fast_subscriber.close()
    assert sorted(set(seen.datas())) == sorted([f"before-{n}".encode() for n in range(5)] +
                                               [f"after-{n}".encode() for n in range(5)])


# --- conveyor's subscriber only ------------------------------------------------------------


@pytest.fixture
def transport(pubsub_server: PubSubServer) -> Iterator[PubSubTransport]:
    transport = PubSubTransport(pubsub_server.address)
    yield transport
    transport.close()


def test_conveyor_keeps_key_order_across_a_nack(transport: PubSubTransport, publisher: pubsub_v1.PublisherClient,
                                                subscriber: pubsub_v1.SubscriberClient) -> None:
    """Conveyor's guarantee, not Google's: after a nack, the key's later messages run after its redelivery.

    (Google's client runs the key's next message as soon as the nack is sent, before the redelivery.)
    """
    publisher.create_topic(name=topic("own"))
    publisher.create_topic(name=topic("own-dead"))
    subscriber.create_subscription(  # delivery_attempt is set only with a dead-letter policy
        request={"name": subscription("own-sub"), "topic": topic("own"), "enable_message_ordering": True,
                 "dead_letter_policy": {"dead_letter_topic": topic("own-dead"), "max_delivery_attempts": 5}}
    )
    for n in range(20):
        publisher.publish(topic("own"), f"{n}".encode(), ordering_key=f"k{n % 2}", n=str(n))

    def nack_three_once(message: Any) -> None:
        if message.data == b"3" and message.delivery_attempt == 1:
            message.nack()  # redelivered, with the key's later messages after it
        else:
            message.ack()

    seen = Seen(nack_three_once)
    stop = ConveyorClient(transport).subscribe(subscription("own-sub"), seen)
    with seen.changed:
        assert seen.changed.wait_for(lambda: len({m.data for m in seen.messages if m.delivery_attempt > 1 or
                                                 m.data != b"3"}) >= 20, timeout=20)
    stop()
    acked = [m for m in seen.messages if not (m.data == b"3" and m.delivery_attempt == 1)]
    assert sorted({int(m.data) for m in acked}) == list(range(20))
    for key in ("k0", "k1"):
        firsts = list(dict.fromkeys(int(m.data) for m in acked if m.ordering_key == key))
        assert firsts == sorted(firsts), key
    assert [m.delivery_attempt for m in acked if m.data == b"3"] == [2]
    assert pull_nothing(subscriber, subscription("own-sub")) == []


def test_conveyor_ack_with_response_is_false_for_a_stale_ack(
    transport: PubSubTransport, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    """A lease that lapsed while the callback held the message, the message acked elsewhere: False.

    Conveyor's only: Google's client keeps exactly-once leases at least 60 s, too long for a test
    (its refusal of a stale ack is in test_official_client, through a pull).
    """
    publisher.create_topic(name=topic("stale"))
    publisher.create_topic(name=topic("stale-dead"))
    subscriber.create_subscription(  # delivery_attempt is set only with a dead-letter policy
        request={"name": subscription("stale-sub"), "topic": topic("stale"), "enable_exactly_once_delivery": True,
                 "dead_letter_policy": {"dead_letter_topic": topic("stale-dead"), "max_delivery_attempts": 5}}
    )
    publisher.publish(topic("stale"), b"late").result(10)
    release = threading.Event()
    answered = threading.Event()
    answers: list[bool] = []

    def hold_then_ack(message: Any) -> None:
        assert release.wait(20)
        answers.append(message.ack_with_response(timeout=10))
        answered.set()

    # Leases of 2 s, not extended past 0.5 s: the server takes the message back after ~2 s; with one
    # message of credit the stream cannot take it again, so the pull below gets it.
    flow = {"min_duration_per_lease_extension_s": 2.0, "max_duration_per_lease_extension_s": 2.0,
            "max_lease_duration_s": 0.5}
    seen = Seen(hold_then_ack)
    stop = ConveyorClient(transport, flow).subscribe(subscription("stale-sub"), seen, max_messages=1)
    seen.wait(1)
    (elsewhere,) = pull_exactly(subscriber, subscription("stale-sub"), 1)
    assert (elsewhere.message.data, elsewhere.delivery_attempt) == (b"late", 2)
    subscriber.acknowledge(subscription=subscription("stale-sub"), ack_ids=[elsewhere.ack_id])
    release.set()
    assert answered.wait(20)
    stop()
    assert answers == [False]


def test_conveyor_stops_with_an_error_when_its_subscription_is_deleted(
        transport: PubSubTransport, publisher: pubsub_v1.PublisherClient,
        subscriber: pubsub_v1.SubscriberClient) -> None:
    """As Google's client does: a deleted subscription ends the subscriber (it used to retry every 0.5 s)."""
    publisher.create_topic(name=topic("gone"))
    subscriber.create_subscription(request={"name": subscription("gone-sub"), "topic": topic("gone")})
    publisher.publish(topic("gone"), b"before").result(timeout=10)
    seen = Seen()
    system = ThreadSystem()
    try:
        running = subscribe_remote(system, transport, subscription("gone-sub"), seen, workers=2)
        seen.wait(1)
        subscriber.delete_subscription(subscription=subscription("gone-sub"))
        with pytest.raises(SubscriptionFailed, match="NOT_FOUND"):
            running.result(timeout=20)
        assert not running.running
    finally:
        system.shutdown()


class RecordingTransport(PubSubTransport):  # type: ignore[misc]  # final: a test may subclass to record
    """The real transport, remembering each stream's ack deadline and each settlement call's ids."""

    def __init__(self, target: str) -> None:
        super().__init__(target)
        self.stream_deadlines: list[int] = []
        self.modacks: list[tuple[int, tuple[str, ...]]] = []
        self.acks: list[str] = []

    def stream(self, subscription: str, settings: Any, deadline_s: int, alive: Callable[[], bool],
               deliver: Callable[[object], None], handle: StreamHandle | None = None) -> tuple[str, str]:
        self.stream_deadlines.append(deadline_s)
        return super().stream(subscription, settings, deadline_s, alive, deliver, handle)

    def settle(self, subscription: str, settlements: Settlements) -> frozenset[str]:
        self.acks.extend(settlements.acks)
        self.modacks.extend(settlements.modacks)
        return super().settle(subscription, settlements)


def test_conveyor_sends_no_deadline_change_at_receipt_the_stream_deadline_leases_each_delivery(
        pubsub_server: PubSubServer, publisher: pubsub_v1.PublisherClient,
        subscriber: pubsub_v1.SubscriberClient) -> None:
    """Google's client modacks every message it receives; conveyor's stream asks for a deadline that covers
    the shortest extension from receipt on (``stream_deadline_s``), so the only call per message is its ack."""
    publisher.create_topic(name=topic("receipt"))
    subscriber.create_subscription(request={"name": subscription("receipt-sub"), "topic": topic("receipt")})
    for n in range(50):
        publisher.publish(topic("receipt"), b"%d" % n)
    recording = RecordingTransport(pubsub_server.address)
    try:
        seen = Seen()
        stop = ConveyorClient(recording).subscribe(subscription("receipt-sub"), seen)
        seen.wait(50)
        deadline = time.monotonic() + 10
        while len(recording.acks) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)  # the last callbacks' acks are on their way out
        stop()
    finally:
        recording.close()
    assert recording.stream_deadlines[0] == stream_deadline_s(FlowControl()) == 15
    assert recording.modacks == [], "no deadline change: each delivery came leased for 15 s"
    assert sorted(recording.acks) == sorted(set(recording.acks)) and len(recording.acks) == 50
    assert pull_nothing(subscriber, subscription("receipt-sub")) == []


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_conveyor_gives_back_at_stop_what_is_unsettled_and_the_next_subscriber_gets_it_at_once(
        transport: PubSubTransport, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient,
        ordered: bool) -> None:
    """Conveyor's guarantee, not Google's: stopping gives back every message not settled, at once.

    (Google's client gives back only what its callbacks never started; a message whose callback left
    it unsettled waits out its lease.) Conveyor's consumer used to send that nack while its stream
    was still open: the server handed the message straight back on the stream, whose responses
    nobody read any more, and it waited out the stream's 15 s lease all the same.
    """
    name = f"giveback-{'ordered' if ordered else 'unordered'}"
    publisher.create_topic(name=topic(name))
    subscriber.create_subscription(
        request={"name": subscription(name), "topic": topic(name), "enable_message_ordering": ordered})
    for n in range(3):
        publisher.publish(topic(name), b"m%d" % n, ordering_key="k" if ordered else "").result(10)
    client = ConveyorClient(transport)
    first = Seen(lambda message: None if message.data == b"m1" else message.ack())
    stop = client.subscribe(subscription(name), first)
    first.wait(3)
    stop()
    second = Seen()
    stop = client.subscribe(subscription(name), second)
    try:
        assert [m.data for m in second.wait(1, timeout=8.0)] == [b"m1"]  # well within the lease it had
    finally:
        stop()
