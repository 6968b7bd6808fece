"""Push subscriptions with Google's unmodified client, against a real HTTP endpoint on loopback.

The endpoint (``http.server`` in a thread, started by the test) records every request and
answers the statuses the test scripts: the envelope and headers are checked as the service
sends them, acks end delivery, nacks and timeouts redeliver under the push backoff, dead
letters follow max_delivery_attempts, and ModifyPushConfig / UpdateSubscription switch a
subscription between push and pull.
"""

from __future__ import annotations

import base64
import http.server
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.protobuf import field_mask_pb2

from conveyor.actors.pubsub import HttpPusher, PubSubServer, PushBackoff

from .helpers import pull_exactly, pull_nothing, subscription, topic


class _Recorded:
    """One request the endpoint got: when (monotonic), its headers (lower-case names) and body."""

    def __init__(self, at: float, headers: dict[str, str], body: bytes) -> None:
        self.at = at
        self.headers = headers
        self.body = body
        self.status = 0

    def json(self) -> Any:
        return json.loads(self.body)


def _key_of(request: _Recorded) -> str:
    """The ordering key of a wrapped push ("" for none or for an unwrapped one)."""
    try:
        return str(request.json()["message"].get("orderingKey", ""))
    except (ValueError, KeyError, TypeError):
        return ""


def _data(request: _Recorded) -> bytes:
    return base64.b64decode(request.json()["message"]["data"])


class Endpoint:
    """A loopback HTTP server recording POSTs; ``answer(n)`` picks the status of the n-th (a callable)."""

    def __init__(self) -> None:
        self.requests: list[_Recorded] = []
        self.changed = threading.Condition()
        self.answer: Callable[[int, _Recorded], int] = lambda _n, _r: 200
        self.busy: dict[str, int] = {}  # ordering key -> requests of it being answered now
        self.most_busy = 0  # the most requests of one ordering key answered at once
        self.delay: Callable[[int], float] = lambda _: 0.0
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                recorded = _Recorded(time.monotonic(), {k.lower(): v for k, v in self.headers.items()}, body)
                key = _key_of(recorded)
                with endpoint.changed:
                    number = len(endpoint.requests)
                    endpoint.requests.append(recorded)
                    endpoint.busy[key] = endpoint.busy.get(key, 0) + 1
                    endpoint.most_busy = max(endpoint.most_busy, endpoint.busy[key]) if key else endpoint.most_busy
                    endpoint.changed.notify_all()
                pause = endpoint.delay(number)
                if pause:
                    time.sleep(pause)
                status = endpoint.answer(number, recorded)
                recorded.status = status
                with endpoint.changed:
                    endpoint.busy[key] -= 1
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the pusher timed out and hung up

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/push"

    def wait_for(self, count: int, timeout: float = 20.0) -> list[_Recorded]:
        """The requests once there are at least ``count`` (fails after ``timeout``)."""
        end = time.monotonic() + timeout
        with self.changed:
            while len(self.requests) < count:
                left = end - time.monotonic()
                assert left > 0, f"the endpoint got {len(self.requests)} of {count} requests"
                self.changed.wait(left)
            return list(self.requests)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    yield server
    server.close()


@pytest.fixture
def push_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubServer]:
    """A server whose pushes time out after 0.5 s (the service waits the ack deadline, 10 s at least)."""
    with PubSubServer(pusher=HttpPusher(max_timeout_s=0.5)) as server:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", server.address)
        yield server


@pytest.fixture
def clients(push_server: PubSubServer) -> Iterator[tuple[pubsub_v1.PublisherClient, pubsub_v1.SubscriberClient]]:
    publisher = pubsub_v1.PublisherClient(batch_settings=pubsub_v1.types.BatchSettings(max_latency=0.01),
                                          publisher_options=pubsub_v1.types.PublisherOptions(
                                              enable_message_ordering=True))
    subscriber = pubsub_v1.SubscriberClient()
    yield publisher, subscriber
    publisher.stop()
    subscriber.close()


def _setup(clients: Any, name: str, **subscription_fields: Any) -> tuple[str, str]:
    publisher, subscriber = clients
    topic_name, sub_name = topic(name), subscription(name)
    publisher.create_topic(name=topic_name)
    subscriber.create_subscription(request={"name": sub_name, "topic": topic_name, **subscription_fields})
    return topic_name, sub_name


def test_wrapped_envelope_as_the_service_sends_it(clients: Any, endpoint: Endpoint) -> None:
    publisher, subscriber = clients
    topic_name, sub_name = _setup(clients, "wrapped", push_config={"push_endpoint": endpoint.url},
                                  enable_message_ordering=True)
    got = subscriber.get_subscription(subscription=sub_name)
    assert got.push_config.push_endpoint == endpoint.url
    message_id = publisher.publish(topic_name, b"hello \x00\xff", colour="blue", ordering_key="k1").result()

    (request,) = endpoint.wait_for(1)
    assert request.headers["content-type"] == "application/json"
    body = request.json()
    assert body["subscription"] == sub_name
    assert "deliveryAttempt" not in body  # only with a dead-letter policy
    message = body["message"]
    assert base64.b64decode(message["data"]) == b"hello \x00\xff"
    assert message["attributes"] == {"colour": "blue"}
    assert message["messageId"] == message["message_id"] == message_id
    assert message["publishTime"] == message["publish_time"]
    assert message["publishTime"].endswith("Z") and "T" in message["publishTime"]
    assert message["orderingKey"] == "k1"


def test_an_acked_push_is_not_delivered_again(clients: Any, endpoint: Endpoint) -> None:
    publisher, _ = clients
    topic_name, _ = _setup(clients, "acked", push_config={"push_endpoint": endpoint.url}, ack_deadline_seconds=10)
    endpoint.answer = lambda n, _: (200, 201, 202, 204)[n % 4]
    for index in range(4):
        publisher.publish(topic_name, f"m{index}".encode()).result()
    requests = endpoint.wait_for(4)
    # Past the ack deadline and the push backoff's range: an ack that did not count would come again.
    time.sleep(1.5)
    assert len(endpoint.requests) == 4
    assert sorted(base64.b64decode(r.json()["message"]["data"]) for r in requests) == [b"m0", b"m1", b"m2", b"m3"]


def test_a_failing_endpoint_gets_the_message_again_under_a_growing_backoff(
    clients: Any, endpoint: Endpoint
) -> None:
    publisher, _ = clients
    topic_name, _ = _setup(clients, "failing", push_config={"push_endpoint": endpoint.url})
    endpoint.answer = lambda n, _: 500 if n < 5 else 200
    message_id = publisher.publish(topic_name, b"again").result()
    requests = endpoint.wait_for(6)
    assert {r.json()["message"]["messageId"] for r in requests} == {message_id}
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(requests)]
    # The push backoff after n failures is at least 0.1 * 2**(n-1) s (lower bounds only: a slow machine is later).
    for failures, gap in enumerate(gaps, start=1):
        assert gap >= PushBackoff(failures).pause_s() * 0.9, (failures, gaps)
    time.sleep(0.5)
    assert len(endpoint.requests) == 6  # the 200 acked it


def test_a_timed_out_push_is_a_nack(clients: Any, endpoint: Endpoint) -> None:
    publisher, _ = clients
    topic_name, _ = _setup(clients, "timeout", push_config={"push_endpoint": endpoint.url})
    # The first request is answered 200, but after 1.5 s, past the server's 0.5 s push timeout: had the
    # pusher waited for it, it would ack and nothing would come again.
    endpoint.delay = lambda n: 1.5 if n == 0 else 0.0
    publisher.publish(topic_name, b"slow").result()
    first, second = endpoint.wait_for(2)[:2]
    assert first.json()["message"]["messageId"] == second.json()["message"]["messageId"]


def test_an_unreachable_endpoint_is_a_nack(clients: Any, endpoint: Endpoint) -> None:
    publisher, subscriber = clients
    closed = Endpoint()
    dead_url = closed.url
    closed.close()  # nothing listens there now: connection refused
    topic_name, sub_name = _setup(clients, "refused", push_config={"push_endpoint": dead_url})
    publisher.publish(topic_name, b"lost?").result()
    time.sleep(0.5)
    subscriber.modify_push_config(subscription=sub_name, push_config={"push_endpoint": endpoint.url})
    (request,) = endpoint.wait_for(1)[:1]
    assert base64.b64decode(request.json()["message"]["data"]) == b"lost?"


def test_dead_letter_after_max_delivery_attempts(clients: Any, endpoint: Endpoint) -> None:
    publisher, subscriber = clients
    dead_topic = topic("push-dead")
    publisher.create_topic(name=dead_topic)
    subscriber.create_subscription(name=subscription("push-dead"), topic=dead_topic)
    topic_name, _ = _setup(
        clients, "dead-source", push_config={"push_endpoint": endpoint.url},
        dead_letter_policy={"dead_letter_topic": dead_topic, "max_delivery_attempts": 5})
    endpoint.answer = lambda _n, _r: 503
    publisher.publish(topic_name, b"doomed").result()
    requests = endpoint.wait_for(5)
    assert [r.json()["deliveryAttempt"] for r in requests[:5]] == [1, 2, 3, 4, 5]
    (dead,) = pull_exactly(subscriber, subscription("push-dead"), 1)
    assert dead.message.data == b"doomed"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceSubscription"] == "dead-source"
    time.sleep(0.5)
    assert len(endpoint.requests) == 5


def test_no_wrapper_sends_the_raw_data_and_with_write_metadata_the_headers(clients: Any, endpoint: Endpoint) -> None:
    publisher, subscriber = clients
    topic_name, sub_name = _setup(clients, "raw", push_config={"push_endpoint": endpoint.url, "no_wrapper": {}})
    publisher.publish(topic_name, b"raw body", colour="red").result()
    (bare,) = endpoint.wait_for(1)
    assert bare.body == b"raw body"
    assert "colour" not in bare.headers and not any(k.startswith("x-goog-pubsub-") for k in bare.headers)

    subscriber.modify_push_config(subscription=sub_name, push_config={
        "push_endpoint": endpoint.url, "no_wrapper": {"write_metadata": True}})
    assert subscriber.get_subscription(subscription=sub_name).push_config.no_wrapper.write_metadata
    message_id = publisher.publish(topic_name, b"with headers", colour="green", accent="caf\u00e9",
                                   ordering_key="key-9").result()
    dressed = endpoint.wait_for(2)[1]
    assert dressed.body == b"with headers"
    assert dressed.headers["colour"] == "green"
    assert dressed.headers["accent"].encode("latin-1").decode() == "caf\u00e9"  # sent as its UTF-8 bytes
    assert dressed.headers["x-goog-pubsub-message-id"] == message_id
    assert dressed.headers["x-goog-pubsub-subscription-name"] == sub_name
    assert dressed.headers["x-goog-pubsub-ordering-key"] == "key-9"
    assert dressed.headers["x-goog-pubsub-publish-time"].endswith("Z")


def _refused(call: Callable[[], Any]) -> exceptions.GoogleAPICallError:
    with pytest.raises(exceptions.GoogleAPICallError) as caught:
        call()
    return caught.value


def test_switching_push_pull_push(clients: Any, endpoint: Endpoint) -> None:
    publisher, subscriber = clients
    topic_name, sub_name = _setup(clients, "switch", push_config={"push_endpoint": endpoint.url})
    refused = _refused(lambda: subscriber.pull(subscription=sub_name, max_messages=1, timeout=2.0))
    assert refused.grpc_status_code == grpc.StatusCode.FAILED_PRECONDITION
    publisher.publish(topic_name, b"pushed").result()
    endpoint.wait_for(1)

    subscriber.modify_push_config(subscription=sub_name, push_config={})  # -> pull
    assert not subscriber.get_subscription(subscription=sub_name).push_config.push_endpoint
    publisher.publish(topic_name, b"pulled").result()
    (received,) = pull_exactly(subscriber, sub_name, 1)
    assert received.message.data == b"pulled"
    subscriber.acknowledge(subscription=sub_name, ack_ids=[received.ack_id])
    assert len(endpoint.requests) == 1

    update = {"name": sub_name, "push_config": {"push_endpoint": endpoint.url}}  # -> push again
    subscriber.update_subscription(subscription=update, update_mask=field_mask_pb2.FieldMask(paths=["push_config"]))
    publisher.publish(topic_name, b"pushed again").result()
    second = endpoint.wait_for(2)[1]
    assert base64.b64decode(second.json()["message"]["data"]) == b"pushed again"
    assert _refused(lambda: subscriber.pull(subscription=sub_name, max_messages=1, timeout=2.0)
                    ).grpc_status_code == grpc.StatusCode.FAILED_PRECONDITION

    subscriber.update_subscription(subscription={"name": sub_name, "push_config": {}},
                                   update_mask=field_mask_pb2.FieldMask(paths=["push_config"]))  # -> pull
    assert pull_nothing(subscriber, sub_name) == []  # acked by the push: nothing left


def test_messages_waiting_while_pull_are_pushed_once_push(clients: Any, endpoint: Endpoint) -> None:
    publisher, subscriber = clients
    topic_name, sub_name = _setup(clients, "backlog")
    for index in range(3):
        publisher.publish(topic_name, f"b{index}".encode()).result()
    subscriber.modify_push_config(subscription=sub_name, push_config={"push_endpoint": endpoint.url})
    requests = endpoint.wait_for(3)
    assert sorted(base64.b64decode(r.json()["message"]["data"]) for r in requests) == [b"b0", b"b1", b"b2"]


def test_a_bad_push_endpoint_is_refused_naming_the_field(clients: Any) -> None:
    publisher, subscriber = clients
    publisher.create_topic(name=topic("bad"))
    refused = _refused(lambda: subscriber.create_subscription(
        request={"name": subscription("bad"), "topic": topic("bad"), "push_config": {"push_endpoint": "ftp://x"}}))
    assert refused.grpc_status_code == grpc.StatusCode.INVALID_ARGUMENT
    assert "push_config.push_endpoint" in str(refused)


def test_ordered_pushes_one_per_key_at_a_time_in_order_even_after_a_nack(clients: Any, endpoint: Endpoint) -> None:
    publisher, _ = clients
    topic_name, _ = _setup(clients, "ordered", push_config={"push_endpoint": endpoint.url},
                           enable_message_ordering=True)
    failed_once: set[bytes] = set()

    def answer(_: int, request: _Recorded) -> int:
        data = _data(request)
        if data == b"k2" and data not in failed_once:
            failed_once.add(data)
            return 500
        return 200

    endpoint.answer = answer
    endpoint.delay = lambda _: 0.02  # long enough for a second push of the same key to overlap, were one made
    futures = [publisher.publish(topic_name, f"{key}{index}".encode(), ordering_key=key)
               for index in range(5) for key in ("k", "j")]
    for future in futures:
        future.result()
    endpoint.wait_for(11)
    time.sleep(0.3)
    requests = list(endpoint.requests)
    assert endpoint.most_busy == 1
    for key in ("k", "j"):
        acked = [_data(r) for r in requests if _key_of(r) == key and r.status == 200]
        assert acked == [f"{key}{index}".encode() for index in range(5)], acked
    assert failed_once == {b"k2"}


def test_streaming_pull_on_a_push_subscription_fails_with_failed_precondition(
    clients: Any, endpoint: Endpoint
) -> None:
    _, subscriber = clients
    _, sub_name = _setup(clients, "streamed", push_config={"push_endpoint": endpoint.url})
    future = subscriber.subscribe(sub_name, callback=lambda message: message.ack())
    with pytest.raises(exceptions.FailedPrecondition, match="push subscription"):
        future.result(timeout=20)
