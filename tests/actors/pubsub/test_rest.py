"""The REST face (``PubSubServer(rest_port=...)``) with plain HTTP requests on loopback.

Requests are urllib's, as a curl user's would be; Google's client takes the other side where a
test checks that the two faces share one state (REST publish, gRPC receive and back), and its
REST transport runs every mapped call. The docs' curl example runs with the real curl.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import shlex
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import pubsub_v1
from google.protobuf import json_format
from google.pubsub_v1 import types
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.pubsub import PubSubServer, RestBindError
from conveyor.actors.pubsub._rest import ROUTES, RestError, match_route, request_message
from tests.actors.pubsub.helpers import PROJECT, pull_exactly, subscription, topic

DOCS = Path(__file__).resolve().parents[3] / "docs" / "pubsub.md"
Answer = tuple[int, Any]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSubServer]:
    """A server with a REST face on a free port (``PUBSUB_EMULATOR_HOST`` set to its gRPC one)."""
    with PubSubServer(rest_port=0) as served:
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", served.address)
        yield served


@pytest.fixture
def base(server: PubSubServer) -> str:
    return f"http://{server.rest_address}"


def call(verb: str, url: str, body: object = None, raw: bytes | None = None) -> Answer:
    """One HTTP request; (status, the JSON answer, or the text if it is not JSON)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=verb, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def ok(answer: Answer) -> Any:
    status, document = answer
    assert status == 200, document
    return document


def pulled(base: str, name: str, count: int) -> list[dict[str, Any]]:
    """Pull over REST until ``count`` messages came (each pull waits for its first)."""
    got: list[dict[str, Any]] = []
    for _ in range(20):
        if len(got) >= count:
            break
        answer = ok(call("POST", f"{base}/v1/{name}:pull", {"maxMessages": count - len(got)}))
        got.extend(answer.get("receivedMessages", []))
    assert len(got) == count, got
    return got


def test_the_root_answers_ok_for_health_checks(base: str) -> None:
    assert call("GET", base + "/") == (200, "Ok")


def test_every_mapped_call_over_plain_http(base: str) -> None:
    orders, audit, worker = topic("orders"), topic("audit"), subscription("worker")
    assert ok(call("PUT", f"{base}/v1/{orders}", {"labels": {"team": "a"}})) == {"name": orders,
                                                                              "labels": {"team": "a"}}
    ok(call("PUT", f"{base}/v1/{audit}"))  # no body: every field but the name left unset
    assert ok(call("GET", f"{base}/v1/{orders}"))["labels"] == {"team": "a"}
    patched = ok(call("PATCH", f"{base}/v1/{orders}", {"topic": {"labels": {"team": "b"}}, "updateMask": "labels"}))
    assert patched["labels"] == {"team": "b"}
    first = ok(call("GET", f"{base}/v1/{PROJECT}/topics?pageSize=1"))
    second = ok(call("GET", f"{base}/v1/{PROJECT}/topics?pageSize=1&pageToken={first['nextPageToken']}"))
    assert [t["name"] for t in first["topics"] + second["topics"]] == sorted([orders, audit])
    assert "nextPageToken" not in second

    created = ok(call("PUT", f"{base}/v1/{worker}", {"topic": orders, "ackDeadlineSeconds": 30}))
    assert (created["topic"], created["ackDeadlineSeconds"]) == (orders, 30)
    other = ok(call("PUT", f"{base}/v1/{subscription('other')}", {"topic": audit, "ack_deadline_seconds": 20}))
    assert other["ackDeadlineSeconds"] == 20  # proto field names are accepted too; answers are camelCase
    assert ok(call("GET", f"{base}/v1/{worker}"))["ackDeadlineSeconds"] == 30
    patched = ok(call("PATCH", f"{base}/v1/{worker}",
                      {"subscription": {"ackDeadlineSeconds": 45}, "updateMask": "ackDeadlineSeconds"}))
    assert patched["ackDeadlineSeconds"] == 45
    assert ok(call("GET", f"{base}/v1/{orders}/subscriptions")) == {"subscriptions": [worker]}
    first = ok(call("GET", f"{base}/v1/{PROJECT}/subscriptions?pageSize=1"))
    second = ok(call("GET", f"{base}/v1/{PROJECT}/subscriptions?pageSize=1&pageToken={first['nextPageToken']}"))
    assert {s["name"] for s in first["subscriptions"] + second["subscriptions"]} == {worker, subscription("other")}

    published = ok(call("POST", f"{base}/v1/{orders}:publish",
                        {"messages": [{"data": "aGVsbG8=", "attributes": {"k": "v"}, "orderingKey": ""}]}))
    [message] = pulled(base, worker, 1)
    assert message["message"]["messageId"] == published["messageIds"][0]
    assert message["message"]["data"] == "aGVsbG8=" and message["message"]["attributes"] == {"k": "v"}
    assert ok(call("POST", f"{base}/v1/{worker}:modifyAckDeadline",
                   {"ackIds": [message["ackId"]], "ackDeadlineSeconds": 60})) == {}
    assert ok(call("POST", f"{base}/v1/{worker}:acknowledge", {"ackIds": [message["ackId"]]})) == {}

    assert ok(call("DELETE", f"{base}/v1/{worker}")) == {}
    assert ok(call("DELETE", f"{base}/v1/{orders}")) == {}
    assert call("GET", f"{base}/v1/{worker}")[0] == 404
    assert [t["name"] for t in ok(call("GET", f"{base}/v1/{PROJECT}/topics"))["topics"]] == [audit]


def test_publish_pull_acknowledge_round_trip(base: str) -> None:
    """An acked message is gone; one whose deadline went to 0 comes back: both settle calls took."""
    ok(call("PUT", f"{base}/v1/{topic('orders')}"))
    worker = subscription("worker")
    ok(call("PUT", f"{base}/v1/{worker}", {"topic": topic("orders"), "ackDeadlineSeconds": 600}))
    texts = [b"first", b"second"]
    ok(call("POST", f"{base}/v1/{topic('orders')}:publish",
            {"messages": [{"data": base64.b64encode(text).decode()} for text in texts]}))
    by_text = {base64.b64decode(m["message"]["data"]): m for m in pulled(base, worker, 2)}
    assert sorted(by_text) == sorted(texts)
    ok(call("POST", f"{base}/v1/{worker}:acknowledge", {"ackIds": [by_text[b"first"]["ackId"]]}))
    ok(call("POST", f"{base}/v1/{worker}:modifyAckDeadline",
            {"ackIds": [by_text[b"second"]["ackId"]], "ackDeadlineSeconds": 0}))
    [again] = pulled(base, worker, 1)
    assert base64.b64decode(again["message"]["data"]) == b"second"
    ok(call("POST", f"{base}/v1/{worker}:acknowledge", {"ackIds": [again["ackId"]]}))
    assert ok(call("POST", f"{base}/v1/{worker}:pull", {"maxMessages": 5, "returnImmediately": True})) == {}


def test_a_rest_publish_reaches_googles_grpc_client_and_back(base: str) -> None:
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    try:
        publisher.create_topic(name=topic("orders"))
        subscriber.create_subscription(name=subscription("grpc-side"), topic=topic("orders"))
        ok(call("PUT", f"{base}/v1/{subscription('rest-side')}", {"topic": topic("orders")}))
        ok(call("POST", f"{base}/v1/{topic('orders')}:publish",
                {"messages": [{"data": base64.b64encode(b"from rest").decode(), "attributes": {"via": "http"}}]}))
        publisher.publish(topic("orders"), b"from grpc", via="grpc").result(timeout=30)
        received = pull_exactly(subscriber, subscription("grpc-side"), 2)
        assert {(m.message.data, m.message.attributes["via"]) for m in received} == {(b"from rest", "http"),
                                                                                     (b"from grpc", "grpc")}
        over_rest = pulled(base, subscription("rest-side"), 2)
        assert {base64.b64decode(m["message"]["data"]) for m in over_rest} == {b"from rest", b"from grpc"}
        # an ack id the gRPC face issued settles over REST, and the other way round
        ok(call("POST", f"{base}/v1/{subscription('grpc-side')}:acknowledge", {"ackIds": [received[0].ack_id]}))
        subscriber.acknowledge(subscription=subscription("rest-side"), ack_ids=[over_rest[0]["ackId"]])
    finally:
        publisher.stop()
        subscriber.close()


def test_a_missing_resource_is_googles_404_body(base: str) -> None:
    status, document = call("GET", f"{base}/v1/{topic('nope')}")
    assert status == 404
    assert document == {"error": {"code": 404, "message": f"Topic not found: {topic('nope')}", "status": "NOT_FOUND"}}
    status, document = call("POST", f"{base}/v1/{subscription('nope')}:pull", {"maxMessages": 1})
    assert (status, document["error"]["status"]) == (404, "NOT_FOUND")


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b'{"mesages": []}', r'no field named "mesages"'),
        (b'{"messages": [{"data": "not base64!"}]}', r"data"),
        (b'{"messages": [{"attributes": {"k": 5}}]}', r"attributes"),
        (b'{"messages": ', r"Invalid JSON payload received: Expecting value: line 1 column 14"),
        (b"[1, 2]", r"the body must be a JSON object, got list"),
    ],
)
def test_bad_json_is_a_400_naming_the_field(base: str, raw: bytes, says: str) -> None:
    ok(call("PUT", f"{base}/v1/{topic('orders')}"))
    status, document = call("POST", f"{base}/v1/{topic('orders')}:publish", raw=raw)
    assert status == 400, document
    assert document["error"]["status"] == "INVALID_ARGUMENT" and document["error"]["code"] == 400
    assert re.search(says, document["error"]["message"]), document


def test_the_handlers_own_refusals_name_the_field_over_rest_too(base: str) -> None:
    ok(call("PUT", f"{base}/v1/{topic('orders')}"))
    status, document = call("POST", f"{base}/v1/{topic('orders')}:publish", {"messages": []})
    assert status == 400 and "messages" in document["error"]["message"]
    status, document = call("PUT", f"{base}/v1/{subscription('worker')}",
                            {"topic": topic("orders"), "ackDeadlineSeconds": 9000})
    assert status == 400 and "ack_deadline_seconds" in document["error"]["message"]
    assert call("PUT", f"{base}/v1/{topic('orders')}")[1]["error"]["status"] == "ALREADY_EXISTS"
    assert call("PUT", f"{base}/v1/{topic('orders')}")[0] == 409


def test_the_size_limits_apply_over_rest_as_over_grpc(base: str) -> None:
    """The request goes through the gRPC face's own deserializer, which refuses it by its size first."""
    ok(call("PUT", f"{base}/v1/{topic('orders')}"))
    ok(call("PUT", f"{base}/v1/{subscription('worker')}", {"topic": topic("orders")}))
    shaped = "2-0-1-1-1-1000000000001.000000000000000000000000"
    status, document = call("POST", f"{base}/v1/{subscription('worker')}:acknowledge", {"ackIds": [shaped] * 12_000})
    assert status == 400, document
    assert re.search(r"Acknowledge: the request is [\d,]+ bytes, over Pub/Sub's 524,288-byte \(512 KiB\) limit",
                     document["error"]["message"]), document


def test_unknown_paths_verbs_and_query_parameters_are_refused_naming_them(base: str) -> None:
    status, document = call("GET", f"{base}/v2/nothing")
    assert (status, document["error"]["status"]) == (404, "NOT_FOUND")
    assert "GET /v2/nothing" in document["error"]["message"]
    status, document = call("POST", f"{base}/v1/{topic('orders')}", {})
    assert status == 404 and "takes DELETE or GET or PATCH or PUT" in document["error"]["message"]
    status, document = call("GET", f"{base}/v1/{PROJECT}/topics?pageSise=3")
    assert status == 400 and "'pageSise'" in document["error"]["message"]
    assert "pageSize" in document["error"]["message"]  # the fields there are
    status, document = call("PATCH", f"{base}/v1/{topic('orders')}", {"topic": "orders", "updateMask": "labels"})
    assert status == 400 and "topic: must be a JSON object (a google.pubsub.v1.Topic), got str" in str(document)
    status, document = call("GET", f"{base}/v1/{PROJECT}/topics", raw=b'{"pageSize": 1}')
    assert status == 400 and "takes no body" in document["error"]["message"]
    assert ok(call("GET", f"{base}/v1/{PROJECT}/topics?prettyPrint=false&$alt=json;enum-encoding=int")) == {}


def test_an_exactly_once_ack_failure_keeps_its_error_info(base: str) -> None:
    ok(call("PUT", f"{base}/v1/{topic('orders')}"))
    ok(call("PUT", f"{base}/v1/{subscription('once')}", {"topic": topic("orders"),
                                                          "enableExactlyOnceDelivery": True}))
    forged = "2-0-1-1-1-1000000000001.000000000000000000000000"  # an ack id's shape, a seal this server never made
    status, document = call("POST", f"{base}/v1/{subscription('once')}:acknowledge", {"ackIds": [forged]})
    assert status == 400 and document["error"]["status"] == "INVALID_ARGUMENT", document
    [detail] = document["error"]["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert detail["metadata"] == {forged: "PERMANENT_FAILURE_INVALID_ACK_ID"}


def test_rest_and_grpc_end_each_call_alike(base: str) -> None:
    """The same request over both faces ends with the same code, whatever the gRPC face implements."""
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    try:
        publisher.create_topic(name=topic("orders"))
        subscriber.create_subscription(name=subscription("worker"), topic=topic("orders"))
        cases: list[tuple[Callable[[], object], str, str, object]] = [
            (lambda: publisher.get_topic(topic=topic("nope")), "GET", f"/v1/{topic('nope')}", None),
            (lambda: subscriber.get_snapshot(snapshot=f"{PROJECT}/snapshots/nope"),
             "GET", f"/v1/{PROJECT}/snapshots/nope", None),
            (lambda: publisher.get_iam_policy(request={"resource": topic("orders")}),
             "GET", f"/v1/{topic('orders')}:getIamPolicy", None),
            (lambda: subscriber.seek(request={"subscription": subscription("worker"), "snapshot": "x"}),
             "POST", f"/v1/{subscription('worker')}:seek", {"snapshot": "x"}),
            (lambda: publisher.detach_subscription(request={"subscription": subscription("nope")}),
             "POST", f"/v1/{subscription('nope')}:detach", None),
        ]
        for grpc_call, verb, path, body in cases:
            try:
                grpc_call()
                expected = "OK"
            except exceptions.GoogleAPICallError as error:
                assert error.grpc_status_code is not None
                expected = error.grpc_status_code.name
            status, document = call(verb, base + path, body)
            got = "OK" if status == 200 else document["error"]["status"]
            assert got == expected, (path, document)
    finally:
        publisher.stop()
        subscriber.close()


def test_googles_rest_transport_runs_every_mapped_call(server: PubSubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Google's unmodified client with ``transport="rest"`` pointed at the REST face."""
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")  # with it set, the client insists on a gRPC channel
    options = {"api_endpoint": f"http://{server.rest_address}"}
    credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
    publisher = pubsub_v1.PublisherClient(transport="rest", client_options=options, credentials=credentials,
                                          batch_settings=pubsub_v1.types.BatchSettings(max_latency=0.01))
    subscriber = pubsub_v1.SubscriberClient(transport="rest", client_options=options, credentials=credentials)
    try:
        orders = publisher.create_topic(name=topic("orders")).name
        publisher.update_topic(topic={"name": orders, "labels": {"a": "b"}}, update_mask={"paths": ["labels"]})
        assert publisher.get_topic(topic=orders).labels == {"a": "b"}
        assert [t.name for t in publisher.list_topics(project=PROJECT)] == [orders]
        worker = subscriber.create_subscription(name=subscription("worker"), topic=orders).name
        updated = subscriber.update_subscription(subscription={"name": worker, "ack_deadline_seconds": 30},
                                                 update_mask={"paths": ["ack_deadline_seconds"]})
        assert subscriber.get_subscription(subscription=worker).ack_deadline_seconds == updated.ack_deadline_seconds
        assert list(publisher.list_topic_subscriptions(topic=orders)) == [worker]
        assert [s.name for s in subscriber.list_subscriptions(project=PROJECT)] == [worker]
        message_id = publisher.publish(orders, b"hi", k="v").result(timeout=30)
        [received] = pull_exactly(subscriber, worker, 1)
        assert (received.message.message_id, received.message.data) == (message_id, b"hi")
        subscriber.modify_ack_deadline(subscription=worker, ack_ids=[received.ack_id], ack_deadline_seconds=60)
        subscriber.acknowledge(subscription=worker, ack_ids=[received.ack_id])
        with pytest.raises(exceptions.NotFound, match="Topic not found"):
            publisher.get_topic(topic=topic("nope"))
        subscriber.delete_subscription(subscription=worker)
        publisher.delete_topic(topic=orders)
        assert list(publisher.list_topics(project=PROJECT)) == []
    finally:
        publisher.stop()
        subscriber.transport.close()  # the wrapper's close() assumes a gRPC channel


def test_the_rest_face_stops_and_starts_with_the_server_on_its_port(server: PubSubServer, base: str) -> None:
    ok(call("PUT", f"{base}/v1/{topic('kept')}"))
    kept_alive = http.client.HTTPConnection(str(server.rest_address), timeout=30)
    kept_alive.request("GET", "/")
    assert kept_alive.getresponse().read() == b"Ok"
    server.stop()
    kept_alive.request("GET", f"/v1/{topic('kept')}")  # a connection opened before the stop
    answer = kept_alive.getresponse()
    assert (answer.status, json.loads(answer.read())["error"]["status"]) == (503, "UNAVAILABLE")
    assert answer.getheader("Connection") == "close"
    kept_alive.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base + "/", timeout=5)
    server.start()
    assert ok(call("GET", f"{base}/v1/{topic('kept')}")) == {"name": topic("kept")}


def test_a_taken_rest_port_and_a_bad_one_are_refused(server: PubSubServer) -> None:
    assert server.rest_port is not None
    taken = PubSubServer(rest_port=server.rest_port)
    with pytest.raises(RestBindError, match=f"could not listen on 127.0.0.1:{server.rest_port}"):
        taken.start()
    taken.close()
    with pytest.raises(ValueError, match="rest_port must be None or an int from 0 to 65535, got 70000"):
        PubSubServer(rest_port=70000)


def _doc_curl_commands() -> list[list[str]]:
    """The curl lines of the REST section's example in docs/pubsub.md, continuations joined."""
    text = DOCS.read_text()
    section = text[text.index("## REST\n"):]
    block = next(b for b in re.findall(r"```sh\n(.*?)```", section, re.S) if b.startswith("curl"))
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.startswith("curl")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_docs_curl_example_runs(base: str) -> None:
    commands = _doc_curl_commands()
    assert len(commands) >= 6
    outputs: list[Any] = []
    for command in commands:
        args = [arg.replace("http://localhost:8086", base) for arg in command]
        if outputs and isinstance(outputs[-1], dict) and "receivedMessages" in outputs[-1]:
            args = [arg.replace("ACK_ID", outputs[-1]["receivedMessages"][0]["ackId"]) for arg in args]
        done = subprocess.run([*args, "--write-out", "\n%{http_code}"], capture_output=True, text=True, timeout=60,
                              check=True)
        body, _, code = done.stdout.rpartition("\n")
        assert code == "200", (args, body)
        outputs.append(body if body == "Ok" else json.loads(body))
    assert outputs[0] == "Ok"
    [pulled_message] = next(o for o in outputs if isinstance(o, dict) and "receivedMessages" in o)["receivedMessages"]
    assert base64.b64decode(pulled_message["message"]["data"]) == b"hello"
    assert call("POST", f"{base}/v1/{PROJECT}/subscriptions/orders-worker:pull", {"maxMessages": 1})[0] == 404


# --- the route table, without a server -----------------------------------------------------

_NAME = st.from_regex(r"[a-zA-Z][a-zA-Z0-9._~+-]{2,40}", fullmatch=True)


@given(route_index=st.integers(0, len(ROUTES) - 1), project=_NAME, resource=_NAME)
def test_each_route_matches_its_own_paths_and_fills_its_variables(route_index: int, project: str,
                                                                  resource: str) -> None:
    route = ROUTES[route_index]
    [(field, pattern)] = re.findall(r"\{([\w.]+)=([^}]+)\}", route.template)
    value = pattern.replace("projects/*", f"projects/{project}", 1).replace("*", resource)
    found, variables = match_route(route.verb, re.sub(r"\{[^}]+\}", value, route.template))
    assert (found, variables) == (route, {field: value})
    message = request_message(route, variables, {}, b"")
    *outer, last = route.variables[0].split(".")
    for part in outer:
        message = getattr(message, part)
    assert getattr(message, last) == value


def test_a_query_parameter_of_the_wrong_type_names_it() -> None:
    route, variables = match_route("GET", "/v1/projects/demo/topics")
    with pytest.raises(RestError, match="pageSize"):
        request_message(route, variables, {"pageSize": ["many"]}, b"")
    with pytest.raises(RestError, match="'pageSize': given 2 times"):
        request_message(route, variables, {"pageSize": ["1", "2"]}, b"")


_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)


@given(messages=st.lists(st.tuples(st.binary(max_size=64), st.dictionaries(_TEXT, _TEXT, max_size=3), _TEXT),
                         max_size=4))
def test_a_publish_request_survives_its_json_form(messages: list[tuple[bytes, dict[str, str], str]]) -> None:
    """What a REST client sends (proto3 JSON of a request) parses back to the very request gRPC would get."""
    sent = types.PublishRequest.pb()(topic=topic("orders"))
    for data, attributes, ordering_key in messages:
        sent.messages.add(data=data, attributes=attributes, ordering_key=ordering_key)
    route, variables = match_route("POST", f"/v1/{topic('orders')}:publish")
    body = json.dumps(json_format.MessageToDict(sent)).encode()
    assert request_message(route, variables, {}, body) == sent
