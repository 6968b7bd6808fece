"""Properties of the push core: the ack statuses, the push backoff, and the requests it builds."""

from __future__ import annotations

import base64
import json

import pytest
from google.pubsub_v1 import types
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.pubsub import (
    ACK_STATUSES,
    KeyGate,
    PushBackoff,
    PushDelivery,
    PushSettings,
    acknowledges,
    push_request,
)
from conveyor.actors.pubsub._push_core import (
    MAX_PUSH_BACKOFF_S,
    MIN_PUSH_BACKOFF_S,
    endpoint_refusal,
    rfc3339,
    settings_from_pb,
    settings_into_pb,
)

statuses = st.one_of(st.none(), st.integers(min_value=100, max_value=599))
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_", min_size=1, max_size=12)
deliveries = st.builds(
    PushDelivery,
    subscription=st.just("projects/p/subscriptions/s"),
    data=st.binary(max_size=64),
    attributes=st.dictionaries(names, st.text(max_size=12).filter(lambda v: "\r" not in v and "\n" not in v),
                               max_size=3).map(lambda d: tuple(sorted(d.items()))),
    message_id=st.integers(min_value=1, max_value=10**12).map(str),
    publish_time_ns=st.integers(min_value=0, max_value=4 * 10**18),
    ordering_key=st.sampled_from(["", "k"]),
    delivery_attempt=st.one_of(st.none(), st.integers(min_value=1, max_value=100)),
)


@given(statuses)
def test_only_the_listed_statuses_ack(status: int | None) -> None:
    assert acknowledges(status) == (status in {102, 200, 201, 202, 204})
    assert {102, 200, 201, 202, 204} == ACK_STATUSES


@given(st.lists(statuses, max_size=40))
def test_the_backoff_counts_failures_since_the_last_ack_and_stays_in_range(answers: list[int | None]) -> None:
    backoff = PushBackoff()
    failures = 0
    for status in answers:
        before = backoff.pause_s()
        backoff = backoff.after(acknowledges(status))
        failures = 0 if acknowledges(status) else failures + 1
        assert backoff.failures == failures
        pause = backoff.pause_s()
        if failures == 0:
            assert pause == 0.0
        else:
            assert MIN_PUSH_BACKOFF_S <= pause <= MAX_PUSH_BACKOFF_S
            assert pause >= before  # a failure never shortens the pause
            assert pause == min(MAX_PUSH_BACKOFF_S, before * 2) or failures == 1


@given(deliveries)
def test_the_envelope_carries_the_message_as_the_service_writes_it(delivery: PushDelivery) -> None:
    post = push_request(PushSettings("http://h/x"), delivery)
    body = json.loads(post.body)
    message = body["message"]
    assert base64.b64decode(message["data"]) == delivery.data
    assert message["attributes"] == dict(delivery.attributes)
    assert message["messageId"] == message["message_id"] == delivery.message_id
    assert message["publishTime"] == message["publish_time"] == rfc3339(delivery.publish_time_ns)
    assert ("orderingKey" in message) == bool(delivery.ordering_key)
    assert body["subscription"] == delivery.subscription
    assert body.get("deliveryAttempt") == delivery.delivery_attempt
    assert dict(post.headers) == {"Content-Type": "application/json"}


@given(deliveries, st.booleans())
def test_the_unwrapped_form_is_the_data_and_headers_only_with_metadata(delivery: PushDelivery, metadata: bool) -> None:
    post = push_request(PushSettings("http://h/x", no_wrapper=True, write_metadata=metadata), delivery)
    assert post.body == delivery.data
    headers = dict(post.headers)
    if not metadata:
        assert headers == {}
        return
    assert headers["x-goog-pubsub-message-id"] == delivery.message_id
    assert headers["x-goog-pubsub-subscription-name"] == delivery.subscription
    assert ("x-goog-pubsub-delivery-attempt" in headers) == (delivery.delivery_attempt is not None)
    for name, value in delivery.attributes:
        assert headers[name] == value


def test_publish_time_is_rfc3339_with_nanoseconds() -> None:
    assert rfc3339(1_700_000_000_123_456_789) == "2023-11-14T22:13:20.123456789Z"


@pytest.mark.parametrize("endpoint", ["ftp://h/x", "/relative", "http://", "not a url"])
def test_endpoints_that_are_not_http_urls_are_refused_naming_the_field(endpoint: str) -> None:
    refused = endpoint_refusal(endpoint)
    assert refused is not None and refused.startswith("push_config.push_endpoint")


@given(st.builds(PushSettings, endpoint=st.just("https://h:8443/p?q=1"),
                 attributes=st.dictionaries(names, names, max_size=2).map(lambda d: tuple(sorted(d.items()))),
                 no_wrapper=st.booleans(), write_metadata=st.booleans(),
                 oidc_service_account=st.sampled_from(["", "a@b.iam.gserviceaccount.com"]),
                 oidc_audience=st.sampled_from(["", "aud"])).filter(lambda s: s.no_wrapper or not s.write_metadata))
def test_push_config_round_trips_through_the_message(settings: PushSettings) -> None:
    message = types.PushConfig.pb()()
    settings_into_pb(settings, message)
    assert settings_from_pb(message) == settings


# --- KeyGate: a model of the actor driving it -----------------------------------------------------

gate_steps = st.lists(st.tuples(st.sampled_from(["arrive", "ack", "nack", "nack-final", "tick"]),
                                st.integers(min_value=0, max_value=7)), max_size=80)


@given(gate_steps)
def test_the_key_gate_keeps_one_push_per_key_and_each_keys_order(steps: list[tuple[str, int]]) -> None:
    """Messages k0, k1, ... of two keys arrive in order (nacked ones again); the gate's pushes respect their order.

    Invariants: never two pushes of one key in flight; a key's first pushes follow publish order;
    after a nack the next push of that key (before its wait expires) is the nacked message; and
    every message that arrived is in flight, waiting, acked or dropped (nothing vanishes).
    """
    gate: KeyGate[tuple[str, int]] = KeyGate()
    now = 0.0
    published = {"a": 0, "b": 0}  # next message number per key
    in_flight: dict[str, int] = {}
    redeliver: list[tuple[str, int]] = []  # nacked, to arrive again
    first_pushed: dict[str, list[int]] = {"a": [], "b": []}
    awaiting: dict[str, tuple[int, float]] = {}
    done: set[tuple[str, int]] = set()

    def pushed(items: list[tuple[str, int]]) -> None:
        for key, number in items:
            assert key not in in_flight, f"two pushes of key {key} in flight"
            expected = awaiting.pop(key, None)
            if expected is not None and now < expected[1]:
                assert number == expected[0], f"key {key}: pushed {number} before the nacked {expected[0]}"
            in_flight[key] = number
            if number not in first_pushed[key]:
                first_pushed[key].append(number)

    for action, choice in steps:
        key = "ab"[choice % 2]
        if action == "arrive":
            if redeliver and choice % 3 == 0:
                item = redeliver.pop(0)
            else:
                item = (key, published[key])
                published[key] += 1
            pushed(gate.admit(item[0], str(item[1]), item, now))
        elif action in ("ack", "nack", "nack-final") and key in in_flight:
            number = in_flight.pop(key)
            acked, comes_back = action == "ack", action == "nack"
            if acked or not comes_back:
                done.add((key, number))
            else:
                redeliver.append((key, number))
                awaiting[key] = (number, now + 5.0)
            pushed(gate.finished(key, str(number), acked, comes_back, now + 5.0))
        elif action == "tick":
            now += 2.0
            for each in ("a", "b"):
                pushed(gate.expire(each, now))
    for key in ("a", "b"):
        assert first_pushed[key] == sorted(first_pushed[key])
    waiting = {item for state in gate.keys.values() for _, item in state.waiting}
    arrived = {(key, number) for key in ("a", "b") for number in range(published[key])}
    accounted = waiting | set(in_flight.items()) | done | set(redeliver)
    assert arrived <= accounted
