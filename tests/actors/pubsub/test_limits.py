"""Pub/Sub's request limits at the front, errors that quote only a short prefix, a bounded ErrorInfo.

Issue 15, item 3. Google's unmodified client throughout (its GAPIC layer where a test needs one
exact request); each refusal is INVALID_ARGUMENT naming the limit, before anything is stored.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.pubsub_v1 import types
from google.rpc import error_details_pb2

from conveyor.actors.pubsub import PubSubTransport
from conveyor.actors.pubsub._convert import (
    BadRequest,
    check_ack_id_list,
    merge,
    project_name,
    subscription_name,
    topic_name,
)
from conveyor.actors.pubsub._limits import (
    ACK_ID_MAX_BYTES,
    ACK_IDS_MAX,
    ERROR_INFO_MAX_BYTES,
    Oversize,
    quote,
    size_limited,
)
from conveyor.actors.pubsub._transport import Settlements
from tests.actors.pubsub.helpers import pull_exactly, pull_nothing, subscription, topic
from tests.actors.pubsub.test_official_client import _Stream

HUGE = "a" * 100_000


def _error_info(error: exceptions.GoogleAPICallError) -> error_details_pb2.ErrorInfo:
    (info,) = [d for d in error.details if isinstance(d, error_details_pb2.ErrorInfo)]
    return info


# --- errors quote a short prefix -------------------------------------------------------------


def test_a_huge_name_is_invalid_argument_quoting_a_short_prefix(publisher: pubsub_v1.PublisherClient) -> None:
    # The whole name in the error made the status exceed gRPC's metadata limit: RESOURCE_EXHAUSTED.
    with pytest.raises(exceptions.InvalidArgument) as refused:
        publisher.get_topic(topic=f"projects/demo/topics/{HUGE}")
    text = str(refused.value.message)
    assert len(text) < 600, text
    assert "topic: " in text
    assert "(100021 characters)" in text
    assert "projects/demo/topics/aaa" in text


@pytest.mark.parametrize("check", [topic_name, subscription_name, project_name])
def test_every_name_error_quotes_at_most_a_prefix(check: Any) -> None:
    with pytest.raises(BadRequest) as refused:
        check(HUGE)
    assert len(str(refused.value)) < 400
    assert str(refused.value).count("a") < 100


def test_update_mask_errors_quote_a_prefix() -> None:
    sub = types.Subscription.pb()(name=subscription("s"))
    with pytest.raises(BadRequest, match=r"update_mask\.paths\[0\]: \"aaa.*\(100000 characters\)") as refused:
        merge(sub, sub, [HUGE], ("labels",))
    assert len(str(refused.value)) < 400


def test_quote_keeps_short_values_whole_and_cuts_long_ones() -> None:
    assert quote("") == '""'
    assert quote('a"b') == '"a\\"b"'
    assert quote("x" * 41) == '"' + "x" * 40 + '..." (41 characters)'


def test_an_unknown_call_with_a_huge_name_is_unimplemented_not_resource_exhausted(pubsub_emulator: str) -> None:
    import grpc

    with grpc.insecure_channel(pubsub_emulator) as channel:
        call = channel.unary_unary(f"/google.pubsub.v1.Publisher/{HUGE}")
        with pytest.raises(grpc.RpcError) as refused:
            call(b"", timeout=10)
    assert refused.value.code() is grpc.StatusCode.UNIMPLEMENTED
    assert len(refused.value.details() or "") < 600


# --- Publish limits ---------------------------------------------------------------------------


def test_a_publish_of_more_than_1000_messages_is_refused_naming_the_limit(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("many"))
    subscriber.create_subscription(name=subscription("many-sub"), topic=topic("many"))
    with pytest.raises(exceptions.InvalidArgument, match=r"messages: at most 1,000 messages per Publish request"):
        publisher.api.publish(topic=topic("many"), messages=[{"data": b"x"}] * 1_001)
    publisher.api.publish(topic=topic("many"), messages=[{"data": b"x"}] * 1_000)  # the limit itself is fine
    assert len(pull_exactly(subscriber, subscription("many-sub"), 1_000)) == 1_000


def test_a_publish_request_over_10_mb_is_refused_before_it_is_parsed(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("big"))
    subscriber.create_subscription(name=subscription("big-sub"), topic=topic("big"))
    three = [{"data": b"x" * 3_500_000}] * 3  # each under the 4 MiB receive limit, 10.5 MB together
    with pytest.raises(exceptions.InvalidArgument, match=r"Publish: the request is 105\d{5} bytes, over Pub/Sub's "
                                                         r"10,000,000-byte \(10 MB\) Publish request limit"):
        publisher.api.publish(topic=topic("big"), messages=three)
    assert pull_nothing(subscriber, subscription("big-sub")) == []


def test_attribute_and_ordering_key_errors_name_the_limit_and_quote_a_prefix(
    publisher: pubsub_v1.PublisherClient,
) -> None:
    publisher.create_topic(name=topic("attrs"))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"attributes": {f"k{n}": "v" for n in range(101)}}, r"messages\[0\]\.attributes: at most 100 attributes"),
        ({"attributes": {"goog" + HUGE: "v"}}, r'messages\[0\]\.attributes\["googaaa.*\(100004 characters\)\]: '
                                               r"keys are at most 256 bytes \(Pub/Sub's limit\), got 100004"),
        ({"attributes": {"k": HUGE}}, r'messages\[0\]\.attributes\["k"\]: values are at most 1024 bytes \(Pub/Sub\'s '
                                      r'limit\), got 100000 bytes: "aaa.*\(100000 characters\)'),
        ({"ordering_key": HUGE}, r"messages\[0\]\.ordering_key: at most 1024 bytes \(Pub/Sub's limit\), "
                                 r'got 100000 bytes: "aaa'),
    ]
    for fields, expected in cases:
        with pytest.raises(exceptions.InvalidArgument, match=expected) as refused:
            publisher.api.publish(topic=topic("attrs"), messages=[{"data": b"x", **fields}], retry=None)
        assert len(str(refused.value.message)) < 600


# --- ack-id lists -----------------------------------------------------------------------------


def _settle(client: pubsub_v1.SubscriberClient, kind: str, name: str, ids: list[str]) -> None:
    if kind == "ack":
        client.api.acknowledge(subscription=name, ack_ids=ids)
    else:
        client.api.modify_ack_deadline(subscription=name, ack_ids=ids, ack_deadline_seconds=30)


@pytest.mark.parametrize("kind", ["ack", "modack"])
def test_ack_id_lists_are_bounded_by_size_count_and_length(
    kind: str, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("acks"))
    subscriber.create_subscription(name=subscription("acks-sub"), topic=topic("acks"))
    name = subscription("acks-sub")
    # 1,000,000 well-formed ids (an Acknowledge of them grew the server by 207 MB).
    with pytest.raises(exceptions.InvalidArgument, match=r"the request is \d+ bytes, over Pub/Sub's 524,288-byte "
                                                         r"\(512 KiB\) limit for Acknowledge and ModifyAckDeadline"):
        _settle(subscriber, kind, name, [f"999-0-{n}-1" for n in range(1_000_000)])
    with pytest.raises(exceptions.InvalidArgument, match=rf"ack_ids: at most {ACK_IDS_MAX:,} ack ids per request"):
        _settle(subscriber, kind, name, ["999-0-1-1"] * (ACK_IDS_MAX + 1))
    long_id = "999-0-1-" + "1" * ACK_ID_MAX_BYTES
    with pytest.raises(exceptions.InvalidArgument, match=rf'ack_ids\[1\]: "999-0-1-111.*\({len(long_id)} characters\) '
                                                         rf"is longer than {ACK_ID_MAX_BYTES} bytes") as refused:
        _settle(subscriber, kind, name, ["999-0-1-1", long_id])
    assert len(str(refused.value.message)) < 600


def test_an_ack_id_is_measured_in_bytes() -> None:
    check_ack_id_list(["é" * (ACK_ID_MAX_BYTES // 2)])  # 1,024 bytes: at the limit
    with pytest.raises(BadRequest, match=rf"ack_ids\[0\]: .* is longer than {ACK_ID_MAX_BYTES} bytes"):
        check_ack_id_list(["é" * (ACK_ID_MAX_BYTES // 2 + 1)])  # 513 characters, 1,026 bytes


def test_an_oversize_request_is_refused_by_its_size_without_being_parsed() -> None:
    def never(raw: bytes) -> object:
        raise AssertionError("parsed")

    deserialize = size_limited(never, 10, "a test limit of 10 bytes")
    refused = deserialize(b"\xff" * 11)
    assert refused == Oversize(11, "a test limit of 10 bytes")
    assert refused.describe() == "the request is 11 bytes, over a test limit of 10 bytes"
    assert size_limited(len, 10, "")(b"x" * 10) == 10


def test_a_stream_request_over_the_limits_ends_the_stream_with_invalid_argument(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    publisher.create_topic(name=topic("streamed"))
    subscriber.create_subscription(request={"name": subscription("streamed-sub"), "topic": topic("streamed"),
                                            "enable_exactly_once_delivery": True})
    stream = _Stream(subscriber, {"subscription": subscription("streamed-sub"), "stream_ack_deadline_seconds": 60})
    try:
        stream.requests.put(types.StreamingPullRequest(ack_ids=["999-0-1-1"] * (ACK_IDS_MAX + 1)))
        with pytest.raises(exceptions.InvalidArgument, match=rf"StreamingPull: ack_ids: at most {ACK_IDS_MAX:,}"):
            next(stream.responses)
    finally:
        stream.close()


# --- the exactly-once ErrorInfo ---------------------------------------------------------------


def _stale_ids(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient, count: int
) -> tuple[list[str], str, str]:
    """``count`` ack ids of an exactly-once subscription, all nacked (so an ack of any is refused), and
    two valid ones of one Pull: one to ack among them, one held to ack at the end."""
    publisher.create_topic(name=topic("once"))
    subscriber.create_subscription(request={"name": subscription("once-sub"), "topic": topic("once"),
                                            "enable_exactly_once_delivery": True})
    publisher.api.publish(topic=topic("once"), messages=[{"data": str(n).encode()} for n in range(count)])
    ids = [m.ack_id for m in pull_exactly(subscriber, subscription("once-sub"), count)]
    subscriber.modify_ack_deadline(subscription=subscription("once-sub"), ack_ids=ids, ack_deadline_seconds=0)
    response = subscriber.pull(subscription=subscription("once-sub"), max_messages=2, timeout=5)
    fresh, held = (m.ack_id for m in response.received_messages)
    return ids, fresh, held


def _only_the_stale_come_back(subscriber: pubsub_v1.SubscriberClient, held: str) -> None:
    """Ack ``held``; then the 398 nacked messages are redelivered, the acked valid one is not."""
    subscriber.acknowledge(subscription=subscription("once-sub"), ack_ids=[held])
    assert len(pull_exactly(subscriber, subscription("once-sub"), 398)) == 398
    assert pull_nothing(subscriber, subscription("once-sub")) == []


def test_a_big_exactly_once_failure_lists_what_fits_and_asks_again_for_the_rest(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    stale, fresh, held = _stale_ids(publisher, subscriber, 400)
    request = [*stale[:200], fresh, *stale[200:]]  # one valid id among 400 stale ones
    refused: set[str] = set()
    rounds = 0
    while request:
        rounds += 1
        assert rounds < 100
        try:
            subscriber.acknowledge(subscription=subscription("once-sub"), ack_ids=request)
        except (exceptions.Aborted, exceptions.InvalidArgument) as error:
            info = _error_info(error)
            assert info.reason == "EXACTLY_ONCE_ACKID_FAILURE"
            assert info.ByteSize() <= ERROR_INFO_MAX_BYTES
            metadata = dict(info.metadata)
            refused.update(i for i, why in metadata.items() if why == "PERMANENT_FAILURE_INVALID_ACK_ID")
            if isinstance(error, exceptions.InvalidArgument):
                assert set(metadata) == set(request)  # everything listed: nothing left to ask again
            # As Google's client does: a transient id, or (on ABORTED) one left out, is sent again.
            request = [i for i in request if i not in metadata or metadata[i].startswith("TRANSIENT_")]
        else:
            request = []
    assert rounds > 2  # 400 ids did not fit in one error
    assert refused == set(stale)
    assert fresh not in refused
    _only_the_stale_come_back(subscriber, held)


def test_conveyor_s_transport_sends_again_what_a_bounded_error_left_out(
    pubsub_emulator: str, publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    stale, fresh, held = _stale_ids(publisher, subscriber, 400)
    transport = PubSubTransport(pubsub_emulator)
    try:
        refused = transport.settle(subscription("once-sub"), Settlements(acks=(*stale, fresh)))
    finally:
        transport.close()
    assert refused == frozenset(stale)
    _only_the_stale_come_back(subscriber, held)
    assert pull_nothing(subscriber, subscription("once-sub")) == []


# --- responses stay under the client's receive limit -----------------------------------------


def test_a_pull_of_big_messages_answers_what_the_client_can_receive(
    publisher: pubsub_v1.PublisherClient, subscriber: pubsub_v1.SubscriberClient
) -> None:
    # A consumer's byte credit let every pull of the broker take one message past it, so a Pull of
    # 1 MB messages answered 5 MB: over the 4 MiB Google's client receives, forever redelivered.
    publisher.create_topic(name=topic("heavy"))
    subscriber.create_subscription(name=subscription("heavy-sub"), topic=topic("heavy"))
    for n in range(6):
        publisher.api.publish(topic=topic("heavy"), messages=[{"data": bytes([n]) * 1_000_000}])
    received: list[Any] = []
    for _ in range(6):
        response = subscriber.pull(subscription=subscription("heavy-sub"), max_messages=10, timeout=5)
        assert response._pb.ByteSize() <= 4 * 1024 * 1024
        received.extend(response.received_messages)
        subscriber.acknowledge(subscription=subscription("heavy-sub"), ack_ids=[m.ack_id for m in
                                                                                 response.received_messages])
        if len(received) == 6:
            break
    assert sorted(m.message.data[0] for m in received) == list(range(6))
