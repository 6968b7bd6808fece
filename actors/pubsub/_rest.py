"""The REST face of the Pub/Sub front: ``google.pubsub.v1``'s HTTP/JSON mapping, beside gRPC.

Glue, not an actor (stdlib ``ThreadingHTTPServer``, a thread per connection). Each request is
turned into the protobuf request the gRPC face would have received (proto3 JSON: camelCase names,
base64 bytes), serialized, and handed to the very method handler gRPC dispatches to, through its
own deserializer (so the size limits apply alike). No call has a second implementation: the two
faces cannot disagree. A status the handler aborts with becomes Google's JSON error body
(``{"error": {"code", "message", "status"}}``) with the HTTP status of the gRPC code.

The routes are the ``google.api.http`` annotations of ``google/pubsub/v1/*.proto`` and of the IAM
mixin; a route whose call the gRPC face does not implement answers what gRPC answers (501).
``GET /`` answers ``Ok``, as the gcloud emulator does, for health checks.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, NoReturn, final

import attrs
import grpc
from google.iam.v1 import iam_policy_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.pubsub_v1 import types
from google.rpc import status_pb2

log = logging.getLogger("conveyor.pubsub.rest")

BODY_LIMIT: Final = 64 * 1024 * 1024
"""Largest request body read (the gRPC face's message limit); a larger one is refused unread."""
IDLE_S: Final = 60.0
"""A kept-alive connection idle this long is closed (its thread ends)."""
HEALTH_BODY: Final = b"Ok"
"""What ``GET /`` answers, as the gcloud emulator's root does."""

HTTP_STATUS: Final = {
    "OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400, "DEADLINE_EXCEEDED": 504,
    "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401,
    "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
    "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500,
}
"""The HTTP status of each gRPC code, as Google's APIs map them (google/rpc/code.proto)."""

_SYSTEM_PARAMETERS: Final = frozenset({"alt", "prettyPrint", "fields", "key", "access_token", "quotaUser",
                                       "callback", "upload_protocol", "uploadType"})
"""Query parameters every Google API takes (also spelled with a leading ``$``); not request fields."""
_CODES: Final = {code.name: code for code in grpc.StatusCode}
_PUBLISHER: Final = "google.pubsub.v1.Publisher"
_SUBSCRIBER: Final = "google.pubsub.v1.Subscriber"
_SCHEMAS: Final = "google.pubsub.v1.SchemaService"
_IAM: Final = "google.iam.v1.IAMPolicy"
_TOPIC: Final = "projects/*/topics/*"
_SUBSCRIPTION: Final = "projects/*/subscriptions/*"
_SNAPSHOT: Final = "projects/*/snapshots/*"
_SCHEMA: Final = "projects/*/schemas/*"
_PROJECT: Final = "projects/*"
_VARIABLE: Final = re.compile(r"\{([\w.]+)=([^}]+)\}")


class RestBindError(RuntimeError):
    """The REST face could not listen on its address (``PubSubServer(rest_port=...)``, ``--rest-port``)."""


def http_address(host: str, port: int) -> str:
    """``host:port`` as a URL spells it (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class RestError(Exception):
    """A request the REST face refuses before (or instead of) the handler: a gRPC code and a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: list[Any] = []


@attrs.frozen
class Route:
    """One HTTP rule: verb and path template to a gRPC method and its request type.

    ``body`` is ``*`` (the JSON body is the request), a field name (the body is that field) or
    empty (no body: the query string fills the fields the path does not).
    """

    verb: str
    template: str
    method: str  # the gRPC path, /service/Method
    request: Any  # the protobuf request class
    body: str = ""
    pattern: re.Pattern[str] = attrs.field(init=False)
    variables: tuple[str, ...] = attrs.field(init=False)

    @pattern.default
    def _compile(self) -> re.Pattern[str]:
        parts, at = [], 0
        for match in _VARIABLE.finditer(self.template):
            parts.append(re.escape(self.template[at:match.start()]))
            segments = re.escape(match.group(2)).replace(r"\*", "[^/:]+")
            parts.append(f"({segments})")
            at = match.end()
        parts.append(re.escape(self.template[at:]))
        return re.compile("".join(parts))

    @variables.default
    def _variables(self) -> tuple[str, ...]:
        return tuple(match.group(1) for match in _VARIABLE.finditer(self.template))


def _routes() -> tuple[Route, ...]:
    def rule(verb: str, template: str, service: str, method: str, request: str, body: str = "") -> Route:
        request_type = getattr(iam_policy_pb2, request) if service == _IAM else getattr(types, request).pb()
        return Route(verb, template, f"/{service}/{method}", request_type, body)

    routes = [
        rule("PUT", f"/v1/{{name={_TOPIC}}}", _PUBLISHER, "CreateTopic", "Topic", "*"),
        rule("PATCH", f"/v1/{{topic.name={_TOPIC}}}", _PUBLISHER, "UpdateTopic", "UpdateTopicRequest", "*"),
        rule("POST", f"/v1/{{topic={_TOPIC}}}:publish", _PUBLISHER, "Publish", "PublishRequest", "*"),
        rule("GET", f"/v1/{{topic={_TOPIC}}}", _PUBLISHER, "GetTopic", "GetTopicRequest"),
        rule("GET", f"/v1/{{project={_PROJECT}}}/topics", _PUBLISHER, "ListTopics", "ListTopicsRequest"),
        rule("GET", f"/v1/{{topic={_TOPIC}}}/subscriptions", _PUBLISHER, "ListTopicSubscriptions",
             "ListTopicSubscriptionsRequest"),
        rule("GET", f"/v1/{{topic={_TOPIC}}}/snapshots", _PUBLISHER, "ListTopicSnapshots",
             "ListTopicSnapshotsRequest"),
        rule("DELETE", f"/v1/{{topic={_TOPIC}}}", _PUBLISHER, "DeleteTopic", "DeleteTopicRequest"),
        rule("POST", f"/v1/{{subscription={_SUBSCRIPTION}}}:detach", _PUBLISHER, "DetachSubscription",
             "DetachSubscriptionRequest"),
        rule("PUT", f"/v1/{{name={_SUBSCRIPTION}}}", _SUBSCRIBER, "CreateSubscription", "Subscription", "*"),
        rule("GET", f"/v1/{{subscription={_SUBSCRIPTION}}}", _SUBSCRIBER, "GetSubscription",
             "GetSubscriptionRequest"),
        rule("PATCH", f"/v1/{{subscription.name={_SUBSCRIPTION}}}", _SUBSCRIBER, "UpdateSubscription",
             "UpdateSubscriptionRequest", "*"),
        rule("GET", f"/v1/{{project={_PROJECT}}}/subscriptions", _SUBSCRIBER, "ListSubscriptions",
             "ListSubscriptionsRequest"),
        rule("DELETE", f"/v1/{{subscription={_SUBSCRIPTION}}}", _SUBSCRIBER, "DeleteSubscription",
             "DeleteSubscriptionRequest"),
        rule("POST", f"/v1/{{subscription={_SUBSCRIPTION}}}:modifyAckDeadline", _SUBSCRIBER, "ModifyAckDeadline",
             "ModifyAckDeadlineRequest", "*"),
        rule("POST", f"/v1/{{subscription={_SUBSCRIPTION}}}:acknowledge", _SUBSCRIBER, "Acknowledge",
             "AcknowledgeRequest", "*"),
        rule("POST", f"/v1/{{subscription={_SUBSCRIPTION}}}:pull", _SUBSCRIBER, "Pull", "PullRequest", "*"),
        rule("POST", f"/v1/{{subscription={_SUBSCRIPTION}}}:modifyPushConfig", _SUBSCRIBER, "ModifyPushConfig",
             "ModifyPushConfigRequest", "*"),
        rule("POST", f"/v1/{{subscription={_SUBSCRIPTION}}}:seek", _SUBSCRIBER, "Seek", "SeekRequest", "*"),
        rule("GET", f"/v1/{{snapshot={_SNAPSHOT}}}", _SUBSCRIBER, "GetSnapshot", "GetSnapshotRequest"),
        rule("GET", f"/v1/{{project={_PROJECT}}}/snapshots", _SUBSCRIBER, "ListSnapshots", "ListSnapshotsRequest"),
        rule("PUT", f"/v1/{{name={_SNAPSHOT}}}", _SUBSCRIBER, "CreateSnapshot", "CreateSnapshotRequest", "*"),
        rule("PATCH", f"/v1/{{snapshot.name={_SNAPSHOT}}}", _SUBSCRIBER, "UpdateSnapshot", "UpdateSnapshotRequest",
             "*"),
        rule("DELETE", f"/v1/{{snapshot={_SNAPSHOT}}}", _SUBSCRIBER, "DeleteSnapshot", "DeleteSnapshotRequest"),
        rule("POST", f"/v1/{{parent={_PROJECT}}}/schemas", _SCHEMAS, "CreateSchema", "CreateSchemaRequest", "schema"),
        rule("POST", f"/v1/{{parent={_PROJECT}}}/schemas:validate", _SCHEMAS, "ValidateSchema",
             "ValidateSchemaRequest", "*"),
        rule("POST", f"/v1/{{parent={_PROJECT}}}/schemas:validateMessage", _SCHEMAS, "ValidateMessage",
             "ValidateMessageRequest", "*"),
        rule("GET", f"/v1/{{parent={_PROJECT}}}/schemas", _SCHEMAS, "ListSchemas", "ListSchemasRequest"),
        rule("GET", f"/v1/{{name={_SCHEMA}}}:listRevisions", _SCHEMAS, "ListSchemaRevisions",
             "ListSchemaRevisionsRequest"),
        rule("POST", f"/v1/{{name={_SCHEMA}}}:commit", _SCHEMAS, "CommitSchema", "CommitSchemaRequest", "*"),
        rule("POST", f"/v1/{{name={_SCHEMA}}}:rollback", _SCHEMAS, "RollbackSchema", "RollbackSchemaRequest", "*"),
        rule("DELETE", f"/v1/{{name={_SCHEMA}}}:deleteRevision", _SCHEMAS, "DeleteSchemaRevision",
             "DeleteSchemaRevisionRequest"),
        rule("GET", f"/v1/{{name={_SCHEMA}}}", _SCHEMAS, "GetSchema", "GetSchemaRequest"),
        rule("DELETE", f"/v1/{{name={_SCHEMA}}}", _SCHEMAS, "DeleteSchema", "DeleteSchemaRequest"),
    ]
    for resource in (_TOPIC, _SUBSCRIPTION, _SNAPSHOT, _SCHEMA):
        routes += [
            rule("GET", f"/v1/{{resource={resource}}}:getIamPolicy", _IAM, "GetIamPolicy", "GetIamPolicyRequest"),
            rule("POST", f"/v1/{{resource={resource}}}:setIamPolicy", _IAM, "SetIamPolicy", "SetIamPolicyRequest",
                 "*"),
            rule("POST", f"/v1/{{resource={resource}}}:testIamPermissions", _IAM, "TestIamPermissions",
                 "TestIamPermissionsRequest", "*"),
        ]
    return tuple(routes)


ROUTES: Final = _routes()
"""Every HTTP rule of ``google.pubsub.v1`` (and of its IAM mixin), in matching order."""


# --- from HTTP to a request ------------------------------------------------------------


def match_route(verb: str, path: str) -> tuple[Route, dict[str, str]]:
    """The route for ``verb path`` and its path variables (percent-decoded).

    Raises:
        RestError: NOT_FOUND, naming the path (and the verbs it takes, if only the verb is wrong).
    """
    verbs = []
    for route in ROUTES:
        match = route.pattern.fullmatch(path)
        if match is None:
            continue
        if route.verb != verb:
            verbs.append(route.verb)
            continue
        return route, {name: urllib.parse.unquote(value) for name, value in zip(route.variables, match.groups(),
                                                                               strict=True)}
    shown = _clip(path)
    if verbs:
        raise RestError("NOT_FOUND", f"{verb} {shown}: this path takes {' or '.join(sorted(set(verbs)))}")
    raise RestError("NOT_FOUND", f"{verb} {shown}: no such method in google.pubsub.v1's REST API "
                                 "(paths look like /v1/projects/PROJECT/topics/TOPIC)")


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _field(descriptor: Descriptor, name: str) -> FieldDescriptor | None:
    """The field called ``name`` (its proto name or its JSON name)."""
    found: FieldDescriptor | None = descriptor.fields_by_name.get(name) or descriptor.fields_by_camelcase_name.get(name)
    return found


def _put(document: dict[str, Any], descriptor: Descriptor, dotted: str, values: Sequence[str], where: str) -> None:
    """Set the (possibly nested, dotted) field ``dotted`` of a JSON request to ``values``, checked against its type."""
    *outer, last = dotted.split(".")
    for part in outer:
        field = _field(descriptor, part)
        if field is None or field.message_type is None:
            _no_field(descriptor, part, where)
        descriptor = field.message_type
        inner = document.setdefault(field.json_name, {})
        if not isinstance(inner, dict):
            raise RestError("INVALID_ARGUMENT", f"{field.json_name}: must be a JSON object (a "
                                                f"{descriptor.full_name}), got {type(inner).__name__}")
        document = inner
    field = _field(descriptor, last)
    if field is None:
        _no_field(descriptor, last, where)
    converted: list[Any] = list(values)
    if field.type == FieldDescriptor.TYPE_BOOL:
        converted = [{"true": True, "false": False}.get(value, value) for value in values]
    if field.is_repeated:
        document[field.json_name] = converted
    elif len(converted) != 1:
        raise RestError("INVALID_ARGUMENT", f"{where} {dotted!r}: given {len(converted)} times, takes one value")
    else:
        document[field.json_name] = converted[0]


def _no_field(descriptor: Descriptor, name: str, where: str) -> NoReturn:
    known = ", ".join(field.json_name for field in descriptor.fields)
    raise RestError("INVALID_ARGUMENT", f"{where} {_clip(name, 64)!r}: no such field in {descriptor.full_name} "
                                        f"(fields: {known})")


def request_message(route: Route, variables: dict[str, str], query: dict[str, list[str]], body: bytes) -> Any:
    """The protobuf request of ``route`` from the JSON body, the path variables and the query string.

    Raises:
        RestError: INVALID_ARGUMENT naming the field (or the JSON's line and column) that is wrong.
    """
    descriptor = route.request.DESCRIPTOR
    document: dict[str, Any] = {}
    if body.strip():
        if not route.body:
            raise RestError("INVALID_ARGUMENT", f"{route.verb} {route.template} takes no body; "
                                                "its fields go in the path and the query string")
        try:
            parsed = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise RestError("INVALID_ARGUMENT", f"Invalid JSON payload received: {error}") from None
        if not isinstance(parsed, dict):
            raise RestError("INVALID_ARGUMENT", f"Invalid JSON payload received: the body must be a JSON object, "
                                                f"got {type(parsed).__name__}")
        if route.body == "*":
            document = parsed
        else:
            field = _field(descriptor, route.body)
            assert field is not None  # the routes name real fields
            document[field.json_name] = parsed
    for name, values in query.items():
        if name.lstrip("$") in _SYSTEM_PARAMETERS:
            continue
        _put(document, descriptor, name, values, "query parameter")
    for name, value in variables.items():
        _put(document, descriptor, name, [value], "path variable")
    message = route.request()
    try:
        json_format.ParseDict(document, message)
    except json_format.ParseError as error:
        raise RestError("INVALID_ARGUMENT", f"Invalid JSON payload received: {error}") from None
    return message


# --- the handler's context --------------------------------------------------------------


class _Aborted(Exception):
    """Raised by ``_RestContext.abort``: the call ends with this status (as grpc's own abort raises)."""


@final
class _RestContext(grpc.ServicerContext):  # type: ignore[misc]
    """What a unary handler sees of a REST call: its status, its headers, no deadline, never cancelled."""

    def __init__(self, headers: Sequence[tuple[str, str]], peer: str) -> None:
        self._headers = tuple(headers)
        self._peer = peer
        self.status = "OK"
        self.message = ""
        self.details: list[Any] = []

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        self.status, self.message = code.name, details
        raise _Aborted(details)

    def abort_with_status(self, status: grpc.Status) -> NoReturn:
        for key, value in status.trailing_metadata or ():
            if key == "grpc-status-details-bin":
                self.details = list(status_pb2.Status.FromString(value).details)
        self.abort(status.code, status.details)

    def code(self) -> grpc.StatusCode:
        return _CODES[self.status]

    def set_code(self, code: grpc.StatusCode) -> None:
        self.status = code.name

    def set_details(self, details: str) -> None:
        self.message = details

    def time_remaining(self) -> float | None:
        return None

    def is_active(self) -> bool:
        return True

    def cancel(self) -> None:
        """A REST call is not cancelled by the server; nothing to do."""

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False  # no stream to end: the callback will not run

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._headers

    def peer(self) -> str:
        return self._peer

    def peer_identities(self) -> None:
        return None

    def peer_identity_key(self) -> None:
        return None

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def send_initial_metadata(self, initial_metadata: Any) -> None:
        """Headers are not sent from handlers over REST; ignored."""

    def set_trailing_metadata(self, trailing_metadata: Any) -> None:
        """No trailers over REST; ignored."""


@attrs.frozen
class _CallDetails(grpc.HandlerCallDetails):  # type: ignore[misc]
    method: str
    invocation_metadata: tuple[tuple[str, str], ...] = ()


# --- calling the gRPC face's handler ------------------------------------------------------


def call_handler(handlers: Sequence[grpc.GenericRpcHandler], route: Route, request: Any,
                 headers: Sequence[tuple[str, str]] = (), peer: str = "") -> Any:
    """Run ``request`` through the handler gRPC dispatches ``route.method`` to; return its response.

    Raises:
        RestError: the status the handler ended the call with.
    """
    details = _CallDetails(route.method, tuple(headers))
    handler = next((found for found in (h.service(details) for h in handlers) if found is not None), None)
    if handler is None:
        raise RestError("UNIMPLEMENTED", f"{route.method.lstrip('/')} is not implemented by conveyor's Pub/Sub front")
    wire = request.SerializeToString()
    context = _RestContext(headers, peer)
    try:
        parsed = wire if handler.request_deserializer is None else handler.request_deserializer(wire)
        if handler.unary_unary is not None:
            return handler.unary_unary(parsed, context)
        responses: Iterator[Any] = handler.stream_stream(iter([parsed]), context)
        return next(responses)
    except _Aborted:
        error = RestError(context.status, context.message)
        error.details = context.details
        raise error from None


# --- from a response to HTTP ---------------------------------------------------------------


def error_body(error: RestError) -> dict[str, Any]:
    """Google's JSON error: ``{"error": {"code": HTTP status, "message", "status": gRPC code name}}``."""
    body: dict[str, Any] = {"code": HTTP_STATUS.get(error.code, 500), "message": error.message,
                            "status": error.code}
    details = []
    for detail in error.details:
        try:
            details.append(json_format.MessageToDict(detail))
        except (TypeError, KeyError):  # a detail type this process cannot name: left out
            continue
    if details:
        body["details"] = details
    return {"error": body}


def _enum_as_int(query: dict[str, list[str]]) -> bool:
    """``$alt=json;enum-encoding=int`` (Google's REST clients send it): enums as numbers."""
    return any("enum-encoding=int" in value for name in ("$alt", "alt") for value in query.get(name, ()))


def _pretty(query: dict[str, list[str]]) -> bool:
    values = query.get("prettyPrint") or query.get("$prettyPrint") or ["true"]
    return values[-1].lower() != "false"


# --- the HTTP server ----------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    """One connection: each request routed, converted, run through the gRPC face's handler, answered."""

    protocol_version = "HTTP/1.1"  # keep-alive: Google's REST client reuses its connections
    server: _HttpServer
    timeout = IDLE_S

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _serve(self, verb: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        pretty = _pretty(query)
        try:
            body = self._body()
            if self.server.stopping:
                self.close_connection = True
                raise RestError("UNAVAILABLE", "the server is shutting down")
            if url.path in ("", "/") and verb == "GET":
                self._send(200, HEALTH_BODY, "text/plain; charset=utf-8")
                return
            route, variables = match_route(verb, url.path)
            request = request_message(route, variables, query, body)
            host, port = self.client_address[:2]
            peer = f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"  # as gRPC names a peer
            headers = tuple((name.lower(), value) for name, value in self.headers.items())  # gRPC metadata keys
            response = call_handler(self.server.handlers, route, request, headers, peer)
        except RestError as error:
            self._send_json(HTTP_STATUS.get(error.code, 500), error_body(error), pretty)
            return
        except Exception:
            log.exception("REST %s %s failed", verb, _clip(url.path))
            self._send_json(500, error_body(RestError("INTERNAL", "the server failed; see its log")), pretty)
            return
        answer = json_format.MessageToDict(response, use_integers_for_enums=_enum_as_int(query))
        self._send_json(200, answer, pretty)

    def _body(self) -> bytes:
        """The request body, whole (read even when the request is refused, so the connection stays usable)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise RestError("INVALID_ARGUMENT", "Transfer-Encoding: chunked is not supported; send Content-Length")
        length_text = self.headers.get("Content-Length", "0")
        if not length_text.isdigit():
            self.close_connection = True
            raise RestError("INVALID_ARGUMENT", f"Content-Length: must be a byte count, got {_clip(length_text, 32)!r}")
        length = int(length_text)
        if length > BODY_LIMIT:
            self.close_connection = True
            raise RestError("INVALID_ARGUMENT", f"Content-Length: {length:,} bytes is over the front's limit of "
                                                f"{BODY_LIMIT:,} bytes per request")
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, document: dict[str, Any], pretty: bool) -> None:
        text = json.dumps(document, indent=2) + "\n" if pretty else json.dumps(document, separators=(",", ":"))
        self._send(status, text.encode(), "application/json; charset=UTF-8")

    def _send(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    handlers: Sequence[grpc.GenericRpcHandler] = ()
    stopping = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that failed (a client gone mid-request): a debug line, not a traceback on stderr."""
        log.debug("REST connection from %s failed", client_address, exc_info=True)


class _Http6Server(_HttpServer):
    address_family = socket.AF_INET6


@final
class RestFace:
    """The HTTP/JSON server beside a ``PubSubServer``'s gRPC one; ``start()`` / ``stop()``.

    Args:
        host: address to listen on (as the gRPC face's).
        port: 0 picks a free port (read it back from ``port``).
        handlers: the gRPC face's generic handlers: every call is dispatched through them.
    """

    def __init__(self, host: str, port: int, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.host = host
        self.port = port
        self.handlers = tuple(handlers)
        self._server: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the REST face."""
        return http_address(self.host, self.port)

    def start(self) -> RestFace:
        """Listen on ``host:port`` and serve from a daemon thread.

        Raises:
            RestBindError: the address cannot be bound.
        """
        kind = _Http6Server if ":" in self.host else _HttpServer
        try:
            server = kind((self.host, self.port), _Handler)
        except OSError as error:
            msg = f"the REST face could not listen on {self.address}: {error.strerror or error}"
            raise RestBindError(msg) from None
        server.handlers = self.handlers
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True,
                                        name="conveyor-pubsub-rest")
        self._thread.start()
        log.info("conveyor Pub/Sub REST face listening on http://%s", self.address)
        return self

    def stop(self) -> None:
        """Stop listening; requests on connections still open are answered UNAVAILABLE."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping = True
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
        log.info("the REST face stopped listening on %s", self.address)
