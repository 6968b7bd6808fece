"""``PubSubServer``: a gRPC server speaking ``google.pubsub.v1`` in front of the Pub/Sub actors.

This module is glue, not an actor: it runs on grpcio's worker threads, turns each call into an
``ask`` on a ``ThreadSystem`` (a blocking ask is that backend's own idiom, so no event loop needs
bridging), and turns the answer into a protobuf or a status. It holds no lock and no state the
actors own: every topic, subscription, lease and message lives in the actors. The wall clock it
stamps messages with is injected (``clock``), as actors never read one.

Each open StreamingPull holds one worker thread (its response generator) plus one reader thread
(its request iterator), so the pool is sized ``max_streams`` plus a reserve for unary calls, and a
stream past ``max_streams`` is refused with RESOURCE_EXHAUSTED (which clients retry) rather than
left to starve the acks.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from types import TracebackType
from typing import Any, Final, NoReturn, final

import attrs
import grpc
from google.protobuf import empty_pb2
from google.pubsub_v1 import types
from grpc_status import rpc_status

from conveyor.actors.broker import GetStats, QueueStats
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import ActorDeadError, ActorRef, AskTimeout, ThreadSystem

from . import _convert as convert
from . import _edge as edge
from . import _limits as limits
from . import _surface_rpcs as surface_rpcs
from ._ackid import KEY_BYTES, looks_like_ack_id
from ._data_dir import ack_key as saved_ack_key
from ._data_dir import count_start
from ._memory import MemoryBudget, parse_byte_size, resident_bytes
from ._model import (
    Batch,
    Confirmations,
    CreateSubscription,
    CreateTopic,
    DeleteSubscription,
    DeleteTopic,
    Detach,
    Failed,
    GetSubscription,
    GetTopic,
    ListSubscriptions,
    ListTopics,
    ListTopicSubscriptions,
    NextBatch,
    OpenStream,
    Page,
    Publish,
    PublishedIds,
    PullMessages,
    ReplaceSubscription,
    ReplaceTopic,
    Reset,
    Seek,
    Settle,
    SettleKind,
    SettleOutcome,
    Shutdown,
    StreamClosed,
    StreamOpened,
    StreamSettings,
    SubscriptionConfig,
    TopicConfig,
)
from ._protocol import ListSubscriptionActors
from ._push import HttpPusher, Pusher
from ._registry import PubSubRegistry
from ._rest import RestFace, http_address
from ._schema_actor import NeedsSchema, ResetSchemas, SchemaActor
from ._schema_service import SchemaService, refuse_stamps
from ._subscription import SubscriptionActor
from ._surface import DETACHED_REASON

log = logging.getLogger("conveyor.pubsub")

PUBLISHER: Final = "google.pubsub.v1.Publisher"
SUBSCRIBER: Final = "google.pubsub.v1.Subscriber"
_ASK_S: Final = 30.0
_POLL_S: Final = 1.0  # a stream's binding answers an empty batch this often, so the handler sees cancels
_MAX_WAIT_S: Final = 5.0  # longest a Pull waits for its first message
_UNARY_RESERVE: Final = 32
_MESSAGE_LIMIT: Final = 64 * 1024 * 1024  # gRPC's own limits, above Pub/Sub's, so ours give the clear error
_METADATA_LIMIT: Final = 1024 * 1024  # request headers (gRPC's default: 8 KiB, hard 16 KiB), for the same reason
_CODES: Final = {code.name: code for code in grpc.StatusCode}
_LOGGED_CHARS: Final = 120  # a resource name longer than this is logged as a prefix
_SIZE_LIMITS: Final = {
    "Publish": (limits.PUBLISH_MAX_BYTES, limits.PUBLISH_LIMIT),
    "Acknowledge": (limits.ACK_REQUEST_MAX_BYTES, limits.ACK_LIMIT),
    "ModifyAckDeadline": (limits.ACK_REQUEST_MAX_BYTES, limits.ACK_LIMIT),
}
"""Requests refused by their serialized size before they are parsed (``_limits``)."""
_Ids = tuple[str, ...]


def _abort(context: grpc.ServicerContext, code: str, message: str) -> NoReturn:
    context.abort(_CODES.get(code, grpc.StatusCode.UNKNOWN), limits.clip(message))
    raise AssertionError  # abort raises


def _pb(proto_plus: Any) -> Any:
    return proto_plus.pb()


def _resource(request: Any) -> str:
    """The subscription, topic or project a request names, for the request log (a short prefix)."""
    for field in ("subscription", "name", "topic", "project"):
        value = getattr(request, field, None)
        if value is not None and not isinstance(value, str):
            value = getattr(value, "name", None)  # UpdateTopic / UpdateSubscription carry the resource
        if isinstance(value, str) and value:
            return value if len(value) <= _LOGGED_CHARS else value[:_LOGGED_CHARS] + "..."
    return "-"


def _code(context: grpc.ServicerContext) -> str:
    """The status a call ended with: the one it aborted with, or CANCELLED if the client went away."""
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "CANCELLED"


def _log_call(method: str, request: Any, code: str, elapsed_ns: int, response: Any = None) -> None:
    """The debug line of one call: method, resource, outcome code, duration (and a publish's message ids)."""
    if not log.isEnabledFor(logging.DEBUG):
        return  # the hot path pays one level check per call
    detail = ""
    ids = getattr(response, "message_ids", None)
    if ids:
        detail = f": {len(ids)} message{'' if len(ids) == 1 else 's'}, ids={ids[0]}..{ids[-1]}"
    log.debug("%s %s %s %.1f ms%s", method, _resource(request), code, elapsed_ns / 1e6, detail)


@final
class PubSubServer:
    """A ``google.pubsub.v1`` server on conveyor's actors; ``start()`` / ``stop()`` / ``close()``.

    ``stop()`` ends every open stream with UNAVAILABLE (clients reconnect) and stops listening, but
    keeps topics, subscriptions and messages: ``start()`` again listens on the same port. ``close()``
    also shuts the actors down. Usable as a context manager (started on entry, closed on exit).

    Args:
        host: address to listen on; loopback by default.
        port: 0 picks a free port (read it back from ``port`` / ``address``).
        max_streams: most StreamingPulls open at once.
        clock: wall-clock nanoseconds for publish times and Seek (injected: tests may fake it).
        max_memory: a budget for the process's resident size, in bytes or as ``512MB`` / ``2GiB``:
            a Publish that could take the process past it is refused with RESOURCE_EXHAUSTED
            (which clients retry). None: no budget.
        data_dir: keep topics, subscriptions and their messages in this directory, so they outlive
            the process (a restart, kill -9): every journal goes to a ``DiskJournalStore`` there,
            and a publish is answered only once it is synced; the ack-id key is kept there too
            (``pubsub/ack-id-key``, mode 0600). None: in memory only, a key drawn per process.
        rest_port: also serve the REST (HTTP/JSON) mapping of the same calls on this port of ``host``
            (0 picks a free one; read it back from ``rest_port``). None: gRPC only.
        pusher: makes push subscriptions' HTTP requests; None: an ``HttpPusher`` of its own.

    Raises:
        ValueError: a bad argument, naming it; a budget below what the process holds already.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_streams: int = 64,
        clock: Callable[[], int] = time.time_ns,
        max_memory: int | str | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        rest_port: int | None = None,
        pusher: Pusher | None = None,
    ) -> None:
        if not isinstance(host, str) or not host:
            msg = f"PubSubServer host must be a non-empty str, got {host!r}"
            raise ValueError(msg)
        if type(port) is not int or not 0 <= port <= 65535:
            msg = f"PubSubServer port must be an int from 0 to 65535, got {port!r}"
            raise ValueError(msg)
        if rest_port is not None and (type(rest_port) is not int or not 0 <= rest_port <= 65535):
            msg = f"PubSubServer rest_port must be None or an int from 0 to 65535, got {rest_port!r}"
            raise ValueError(msg)
        if type(max_streams) is not int or max_streams < 1:
            msg = f"PubSubServer max_streams must be an int >= 1, got {max_streams!r}"
            raise ValueError(msg)
        self.budget = None if max_memory is None else _budget(max_memory)
        self.host = host
        self.port = port
        self.rest_port = rest_port
        self._rest: RestFace | None = None
        self.max_streams = max_streams
        self.clock = clock
        self.store = None if data_dir is None else DiskJournalStore(data_dir)
        self.system = ThreadSystem(job_workers=2, journal_store=self.store)
        if data_dir is None:  # seals ack ids: nobody outside this process can make one
            ack_key, start = secrets.token_bytes(KEY_BYTES), 0
        else:  # kept with the data, so an ack id outlives a restart (and this start's numbers are new)
            ack_key, start = saved_ack_key(data_dir), count_start(data_dir)
        self.pusher = pusher if pusher is not None else HttpPusher()
        subscriptions = functools.partial(SubscriptionActor, pusher=self.pusher)
        self.registry: ActorRef = self.system.spawn(
            lambda: PubSubRegistry(ack_key, start=start, subscription_factory=subscriptions), name="pubsub")
        self.schemas: ActorRef = self.system.spawn(SchemaActor, name="pubsub-schemas")
        self.schema_service = SchemaService(self._ask, self.schemas, clock)
        self._server: grpc.Server | None = None
        self._streams: dict[int, ActorRef] = {}  # open streams; dict operations are atomic in CPython
        self._stream_errors: dict[int, str] = {}  # a stream's refused request, from its reader thread
        self._stream_ids = iter(range(1, 1 << 62))
        self._stopping = False

    @property
    def address(self) -> str:
        """``host:port``, what PUBSUB_EMULATOR_HOST should say."""
        return f"{self.host}:{self.port}"

    @property
    def rest_address(self) -> str | None:
        """``host:port`` of the REST face (``http://`` it), None without one."""
        return None if self.rest_port is None else http_address(self.host, self.rest_port)

    def __enter__(self) -> PubSubServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> PubSubServer:
        """Listen (again); the first start with port 0 picks a free port.

        Raises:
            RuntimeError: already listening, or the address cannot be bound (``RestBindError``: the REST one).
        """
        if self._server is not None:
            msg = f"PubSubServer already listens on {self.address}"
            raise RuntimeError(msg)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.max_streams + _UNARY_RESERVE,
                                       thread_name_prefix="conveyor-pubsub"),
            handlers=self._handlers(),
            options=[
                ("grpc.max_receive_message_length", _MESSAGE_LIMIT),
                ("grpc.max_send_message_length", _MESSAGE_LIMIT),
                # Google's clients repeat a resource name in a routing header: let a request with a huge
                # one in reach the handler, which refuses it as INVALID_ARGUMENT, naming the field.
                ("grpc.max_metadata_size", _METADATA_LIMIT),
                ("grpc.absolute_max_metadata_size", _METADATA_LIMIT),
            ],
        )
        port = server.add_insecure_port(f"{self.host}:{self.port}")
        if port == 0:
            msg = f"PubSubServer could not listen on {self.address}"
            raise RuntimeError(msg)
        self.port = port
        self._stopping = False
        server.start()
        self._server = server
        log.info("conveyor Pub/Sub front listening on %s", self.address)
        if self.rest_port is not None:  # the same handlers, reached over HTTP/JSON (_rest)
            try:
                self._rest = RestFace(self.host, self.rest_port, self._handlers()).start()
            except RuntimeError:
                self.stop(grace=0)
                raise
            self.rest_port = self._rest.port
        return self

    def stop(self, grace: float = 2.0) -> None:
        """End open streams with UNAVAILABLE and stop listening; the actors and their state stay."""
        server = self._server
        if server is None:
            return
        self._stopping = True
        if self._rest is not None:
            self._rest.stop()
            self._rest = None
        # Refuse new calls first, then end the open streams: a client that reconnects at once must
        # find no server (UNAVAILABLE, which it retries), not a stream that the end of the grace
        # period would cancel (CANCELLED, which Google's client takes as the end of its subscriber).
        streams = len(self._streams)
        log.info("draining: %d open stream%s end%s with UNAVAILABLE, calls in flight get %.1f s to finish",
                 streams, "" if streams == 1 else "s", "s" if streams == 1 else "", grace)
        stopped = server.stop(grace)
        try:
            self.system.ask(self.registry, Shutdown(), timeout=_ASK_S)
        except (AskTimeout, ActorDeadError):
            log.warning("the Pub/Sub registry did not confirm the shutdown")
        stopped.wait()
        self._server = None
        log.info("stopped listening on %s", self.address)

    def reset(self) -> None:
        """Delete every topic and subscription, as in a new server (message ids keep counting up).

        For a server shared by many tests (``pubsub_shared_server``): streams still open on a
        deleted subscription end with NOT_FOUND, as after DeleteSubscription.

        Raises:
            RuntimeError: the actors did not confirm within 30 s, or are shut down (``close()``).
        """
        try:
            self.system.ask(self.registry, Reset(), timeout=_ASK_S)
            self.system.ask(self.schemas, ResetSchemas(), timeout=_ASK_S)
        except (AskTimeout, ActorDeadError) as error:
            msg = f"PubSubServer on {self.address} could not reset: {type(error).__name__}"
            raise RuntimeError(msg) from error

    def close(self) -> None:
        """Stop listening and shut the actors down (everything held is gone)."""
        self.stop()
        self.system.shutdown()
        close_pusher = getattr(self.pusher, "close", None)
        if close_pusher is not None:
            close_pusher()

    def queue_stats(self, timeout: float = 2.0) -> tuple[QueueStats, ...]:
        """Every subscription's queue counters, one ask each (from any thread but the actors'); for metrics.

        A subscription deleted or stopped while it is asked is left out, not waited for past ``timeout``.
        """
        listed = self.system.ask(self.registry, ListSubscriptionActors(), timeout=timeout)
        found: list[QueueStats] = []
        for name, ref in listed.actors:
            try:
                stats = self.system.ask(ref, GetStats(), timeout=timeout)
            except (AskTimeout, ActorDeadError):
                continue
            if isinstance(stats, QueueStats):
                found.append(attrs.evolve(stats, queue=name))
        return tuple(found)

    # --- plumbing -----------------------------------------------------------------------

    def _ask(self, context: grpc.ServicerContext, request: object, ref: ActorRef | None = None,
             timeout: float = _ASK_S) -> Any:
        """Ask an actor (the registry by default); a ``Failed`` answer or a dead actor aborts the call."""
        try:
            answer = self.system.ask(self.registry if ref is None else ref, request, timeout=timeout)
        except AskTimeout:
            _abort(context, "DEADLINE_EXCEEDED", f"no answer to {type(request).__name__} within {timeout} s")
        except ActorDeadError:
            _abort(context, "UNAVAILABLE", "the server is shutting down")
        if isinstance(answer, Failed):
            _abort(context, answer.code, answer.message)
        return answer

    def _guard(self, name: str, handler: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[..., Any]:
        """Wrap a unary handler: refused requests become statuses naming the field; one debug line per call."""

        def run(request: Any, context: grpc.ServicerContext) -> Any:
            started = self.clock()  # the injected clock: the log's durations need no other
            if type(request) is limits.Oversize:
                _log_call(name, request, "INVALID_ARGUMENT", self.clock() - started)
                _abort(context, "INVALID_ARGUMENT", f"{name}: {request.describe()}")
            try:
                response = handler(request, context)
            except convert.RequestError as error:
                _log_call(name, request, error.code, self.clock() - started)
                _abort(context, error.code, f"{name}: {error}")
            except Exception:
                _log_call(name, request, _code(context), self.clock() - started)
                raise
            _log_call(name, request, "OK", self.clock() - started, response)
            return response

        return run

    def _logged_stream(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        """StreamingPull with one debug line when it ends (its subscription is named by its first request)."""
        started = self.clock()
        first: list[Any] = []

        def remembered() -> Iterator[Any]:
            for request in requests:
                if not first:
                    first.append(request)
                yield request

        try:
            yield from self._streaming_pull(remembered(), context)
        finally:
            _log_call("StreamingPull", first[0] if first else None, _code(context), self.clock() - started)

    def _handlers(self) -> list[grpc.GenericRpcHandler]:
        def unary(name: str, fn: Callable[[Any, grpc.ServicerContext], Any], request: Any) -> grpc.RpcMethodHandler:
            parse = _pb(request).FromString
            if name in _SIZE_LIMITS:  # refused by its size before it is parsed
                parse = limits.size_limited(parse, *_SIZE_LIMITS[name])
            return grpc.unary_unary_rpc_method_handler(
                self._guard(name, fn),
                request_deserializer=parse,
                response_serializer=lambda message: message.SerializeToString(),
            )

        publisher = {
            "CreateTopic": unary("CreateTopic", self._create_topic, types.Topic),
            "GetTopic": unary("GetTopic", self._get_topic, types.GetTopicRequest),
            "UpdateTopic": unary("UpdateTopic", self._update_topic, types.UpdateTopicRequest),
            "ListTopics": unary("ListTopics", self._list_topics, types.ListTopicsRequest),
            "DeleteTopic": unary("DeleteTopic", self._delete_topic, types.DeleteTopicRequest),
            "Publish": unary("Publish", self._publish, types.PublishRequest),
            "ListTopicSubscriptions": unary(
                "ListTopicSubscriptions", self._list_topic_subscriptions, types.ListTopicSubscriptionsRequest
            ),
        }
        subscriber = {
            "CreateSubscription": unary("CreateSubscription", self._create_subscription, types.Subscription),
            "GetSubscription": unary("GetSubscription", self._get_subscription, types.GetSubscriptionRequest),
            "UpdateSubscription": unary(
                "UpdateSubscription", self._update_subscription, types.UpdateSubscriptionRequest
            ),
            "ListSubscriptions": unary("ListSubscriptions", self._list_subscriptions, types.ListSubscriptionsRequest),
            "DeleteSubscription": unary(
                "DeleteSubscription", self._delete_subscription, types.DeleteSubscriptionRequest
            ),
            "Pull": unary("Pull", self._pull, types.PullRequest),
            "Acknowledge": unary("Acknowledge", self._acknowledge, types.AcknowledgeRequest),
            "ModifyAckDeadline": unary("ModifyAckDeadline", self._modify_ack_deadline, types.ModifyAckDeadlineRequest),
            "Seek": unary("Seek", self._seek, types.SeekRequest),
            "ModifyPushConfig": unary("ModifyPushConfig", self._modify_push_config, types.ModifyPushConfigRequest),
            "StreamingPull": grpc.stream_stream_rpc_method_handler(
                self._logged_stream,
                request_deserializer=limits.size_limited(_pb(types.StreamingPullRequest).FromString,
                                                         limits.ACK_REQUEST_MAX_BYTES, limits.STREAM_LIMIT),
                response_serializer=lambda message: message.SerializeToString(),
            ),
        }
        publisher.update(self._more_handlers(surface_rpcs.PUBLISHER_REQUESTS))
        subscriber.update(self._more_handlers(surface_rpcs.SUBSCRIBER_REQUESTS))
        return [
            grpc.method_handlers_generic_handler(PUBLISHER, publisher),
            grpc.method_handlers_generic_handler(SUBSCRIBER, subscriber),
            self.schema_service.method_handlers(self._guard),
            grpc.method_handlers_generic_handler(surface_rpcs.IAM, self._more_handlers(surface_rpcs.IAM_REQUESTS)),
            _Unimplemented(),
        ]

    def _more_handlers(self, table: dict[str, tuple[Any, Any]]) -> dict[str, grpc.RpcMethodHandler]:
        """Handlers for calls served by functions of another module (``_surface_rpcs``), given this server."""
        return {
            name: grpc.unary_unary_rpc_method_handler(
                self._guard(name, functools.partial(fn, self)),
                request_deserializer=request.FromString,
                response_serializer=lambda message: message.SerializeToString(),
            )
            for name, (fn, request) in table.items()
        }

    # --- publisher ----------------------------------------------------------------------

    def _create_topic(self, request: Any, context: grpc.ServicerContext) -> Any:
        bound = self.schema_service.bind(context, convert.topic_config(request))
        config: TopicConfig = self._ask(context, CreateTopic(bound))
        return self.schema_service.topic_pb(context, config)

    def _get_topic(self, request: Any, context: grpc.ServicerContext) -> Any:
        config: TopicConfig = self._ask(context, GetTopic(convert.topic_name(request.topic)))
        return self.schema_service.topic_pb(context, config)

    def _update_topic(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.topic_name(request.topic.name, "topic.name")
        schemas = self.schema_service
        return self._update(context, GetTopic(name), request.topic, request.update_mask.paths,
                            convert.TOPIC_UPDATABLE, lambda config: schemas.topic_pb(context, config),
                            lambda topic: schemas.bind(context, convert.topic_config(topic)), ReplaceTopic)

    def _update(
        self, context: grpc.ServicerContext, get: object, patch: Any, paths: Any, updatable: Any,
        to_pb: Callable[[Any], Any], from_pb: Callable[[Any], Any], replace: Callable[[Any], object],
    ) -> Any:
        """UpdateTopic / UpdateSubscription: read the current config, apply the masked fields, replace it."""
        merged = convert.merge(to_pb(self._ask(context, get)), patch, paths, updatable)
        return to_pb(self._ask(context, replace(from_pb(merged))))

    def _list_topics(self, request: Any, context: grpc.ServicerContext) -> Any:
        page: Page = self._ask(context, ListTopics(convert.project_name(request.project), request.page_size,
                                                    request.page_token))
        response = _pb(types.ListTopicsResponse)(next_page_token=page.next_after)
        response.topics.extend(self.schema_service.topic_pb(context, c) for c in page.items)  # type: ignore[arg-type]
        return response

    def _delete_topic(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._ask(context, DeleteTopic(convert.topic_name(request.topic)))
        return empty_pb2.Empty()

    def _publish(self, request: Any, context: grpc.ServicerContext) -> Any:
        topic = convert.topic_name(request.topic)
        if self.budget is not None:  # before anything of the request is copied
            refused = self.budget.refusal(request.ByteSize(), len(request.messages))
            if refused is not None:
                _abort(context, "RESOURCE_EXHAUSTED", f"Publish: {refused}")
        messages = convert.pub_messages(request.messages, self.clock())
        refuse_stamps(messages)
        published: PublishedIds = self._ask(context, Publish(topic, messages))
        if isinstance(published, NeedsSchema):  # the topic has schema_settings: check, stamp, publish again
            published = self.schema_service.publish(context, topic, messages, published.settings)
        return _pb(types.PublishResponse)(message_ids=published.message_ids)

    def _list_topic_subscriptions(self, request: Any, context: grpc.ServicerContext) -> Any:
        page: Page = self._ask(context, ListTopicSubscriptions(convert.topic_name(request.topic), request.page_size,
                                                                request.page_token))
        return _pb(types.ListTopicSubscriptionsResponse)(subscriptions=page.items, next_page_token=page.next_after)

    # --- subscriber: administration ------------------------------------------------------

    def _create_subscription(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.detached:
            raise convert.BadRequest("detached: a subscription is detached by DetachSubscription, not created so")
        config: SubscriptionConfig = self._ask(context, CreateSubscription(convert.subscription_config(request)))
        return convert.subscription_pb(config)

    def _get_subscription(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.subscription_name(request.subscription)
        config: SubscriptionConfig = self._ask(context, GetSubscription(name))
        return convert.subscription_pb(config)

    def _update_subscription(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.subscription_name(request.subscription.name, "subscription.name")
        return self._update(context, GetSubscription(name), request.subscription, request.update_mask.paths,
                            convert.SUBSCRIPTION_UPDATABLE, convert.subscription_pb, convert.subscription_config,
                            ReplaceSubscription)

    def _modify_push_config(self, request: Any, context: grpc.ServicerContext) -> Any:
        """UpdateSubscription of ``push_config`` alone: an empty one makes the subscription pull."""
        name = convert.subscription_name(request.subscription)
        patch = convert.SubscriptionPb(push_config=request.push_config)
        self._update(context, GetSubscription(name), patch, ("push_config",), convert.SUBSCRIPTION_UPDATABLE,
                     convert.subscription_pb, convert.subscription_config, ReplaceSubscription)
        return empty_pb2.Empty()

    def _list_subscriptions(self, request: Any, context: grpc.ServicerContext) -> Any:
        page: Page = self._ask(context, ListSubscriptions(convert.project_name(request.project), request.page_size,
                                                           request.page_token))
        response = _pb(types.ListSubscriptionsResponse)(next_page_token=page.next_after)
        response.subscriptions.extend(convert.subscription_pb(c) for c in page.items)  # type: ignore[arg-type]
        return response

    def _delete_subscription(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._ask(context, DeleteSubscription(convert.subscription_name(request.subscription)))
        return empty_pb2.Empty()

    # --- subscriber: messages -----------------------------------------------------------

    def _pull(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.subscription_name(request.subscription)
        refused = edge.pull_refusal(request.max_messages)
        if refused is not None:
            raise convert.BadRequest(refused)
        remaining = context.time_remaining()
        wait = 0.05 if request.return_immediately else _MAX_WAIT_S
        if remaining is not None:
            wait = max(0.0, min(wait, remaining - 0.5))
        byte_budget = max(1, convert.RECEIVE_LIMIT - 4096 - 300 * request.max_messages)
        batch: Batch = self._ask(context, PullMessages(name, request.max_messages, wait, byte_budget),
                                 timeout=wait + _ASK_S)
        return convert.pull_response(batch)

    def _settle(self, context: grpc.ServicerContext, request: Settle) -> None:
        outcome: SettleOutcome = self._ask(context, request)
        if not outcome.invalid:
            return
        # Exactly-once: Pub/Sub reports each failed ack id in an ErrorInfo, bounded in size.
        status = convert.exactly_once_failure(request.ack_ids, outcome.invalid)
        context.abort_with_status(rpc_status.to_status(status))

    def _acknowledge(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.subscription_name(request.subscription)
        self._settle(context, Settle(name, SettleKind.ACK, convert.ack_ids(request.ack_ids)))
        return empty_pb2.Empty()

    def _modify_ack_deadline(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.subscription_name(request.subscription)
        seconds = request.ack_deadline_seconds
        refused = edge.modack_refusal(seconds)
        if refused is not None:
            raise convert.BadRequest(refused)
        self._settle(context, Settle(name, SettleKind.MODACK, convert.ack_ids(request.ack_ids), seconds))
        return empty_pb2.Empty()

    def _seek(self, request: Any, context: grpc.ServicerContext) -> Any:
        name = convert.subscription_name(request.subscription)
        if request.snapshot:
            return surface_rpcs.seek_to_snapshot(self, name, request.snapshot, context)
        if not request.HasField("time"):
            _abort(context, "INVALID_ARGUMENT", "Seek: time: set the time to seek to (or a snapshot)")
        self._ask(context, Seek(name, request.time.ToNanoseconds(), self.clock()))
        return _pb(types.SeekResponse)()

    # --- StreamingPull ------------------------------------------------------------------

    def _streaming_pull(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        if self._stopping:
            _abort(context, "UNAVAILABLE", "StreamingPull: the server is shutting down; reconnect")
        try:
            first = next(requests)
        except StopIteration:
            return
        try:
            if type(first) is limits.Oversize:
                raise convert.BadRequest(first.describe())
            name = convert.subscription_name(first.subscription)
            deadline = first.stream_ack_deadline_seconds
            if not 10 <= deadline <= 600:
                raise convert.BadRequest(f"stream_ack_deadline_seconds: must be from 10 to 600, got {deadline}")
            if first.max_outstanding_messages < 0 or first.max_outstanding_bytes < 0:
                raise convert.BadRequest("max_outstanding_messages / max_outstanding_bytes: must be >= 0")
            if len(first.modify_deadline_seconds) != len(first.modify_deadline_ack_ids):
                raise convert.BadRequest("modify_deadline_seconds: one per modify_deadline_ack_ids entry")
            convert.stream_request_ids(first)
        except convert.RequestError as error:
            _abort(context, error.code, f"StreamingPull: {error}")
        if len(self._streams) >= self.max_streams:
            _abort(context, "RESOURCE_EXHAUSTED", f"StreamingPull: {self.max_streams} streams are open already "
                                                  "(PubSubServer max_streams); retry later")
        settings = StreamSettings(name, deadline, first.max_outstanding_messages, first.max_outstanding_bytes)
        opened: StreamOpened = self._ask(context, OpenStream(settings))
        binding = opened.binding
        stream_id = next(self._stream_ids)
        self._streams[stream_id] = binding
        system = self.system
        context.add_callback(lambda: system.tell_from_thread(binding, Detach()))
        self._settle_from_stream(name, first, binding)
        reader = threading.Thread(target=self._read_stream, args=(name, requests, binding, stream_id), daemon=True,
                                  name=f"conveyor-pubsub-stream-{stream_id}")
        reader.start()
        try:
            while context.is_active():
                try:
                    answer = system.ask(binding, NextBatch(_POLL_S), timeout=_POLL_S + _ASK_S)
                except (ActorDeadError, AskTimeout):
                    self._refuse_stream(context, stream_id)
                    if self._stopping:
                        _abort(context, "UNAVAILABLE", "StreamingPull: the server is shutting down; reconnect")
                    if not self._subscription_exists(name):
                        _abort(context, "NOT_FOUND", f"StreamingPull: subscription {name} is gone")
                    # Its binding failed (and gave its leases back): the client reconnects to a new one.
                    _abort(context, "UNAVAILABLE", f"StreamingPull: the stream on {name} failed; reconnect")
                if isinstance(answer, StreamClosed):
                    self._refuse_stream(context, stream_id)
                    if answer.reason == DETACHED_REASON:
                        _abort(context, "FAILED_PRECONDITION", f"StreamingPull: {name}: {answer.reason}")
                    _abort(context, "UNAVAILABLE", f"StreamingPull: {answer.reason}; reconnect")
                if answer.received and not context.is_active():
                    # The stream ended while the batch was made: nobody reads it. Given back at once, it is
                    # not left to wait out its lease.
                    ack_ids = tuple(ack_id for ack_id, _, _ in answer.received)
                    system.tell_from_thread(self.registry, Settle(name, SettleKind.MODACK, ack_ids, 0))
                    return
                yield from convert.stream_responses(answer)
        finally:
            self._streams.pop(stream_id, None)
            self._stream_errors.pop(stream_id, None)
            system.tell_from_thread(binding, Detach())

    def _subscription_exists(self, name: str) -> bool:
        try:
            answer = self.system.ask(self.registry, GetSubscription(name), timeout=_ASK_S)
        except (AskTimeout, ActorDeadError):
            return False
        return not isinstance(answer, Failed)

    def _refuse_stream(self, context: grpc.ServicerContext, stream_id: int) -> None:
        """End the stream with INVALID_ARGUMENT if its reader refused a request (over the limits)."""
        refused = self._stream_errors.pop(stream_id, None)
        if refused is not None:
            _abort(context, "INVALID_ARGUMENT", refused)

    def _read_stream(self, name: str, requests: Iterator[Any], binding: ActorRef, stream_id: int) -> None:
        """A stream's reader thread: acks and deadline changes sent on the stream go to the subscription.

        A request over the limits ends the stream: its error waits in ``_stream_errors`` for the
        response loop, which the binding's ``StreamClosed`` (after ``Detach``) wakes.
        """
        try:
            for request in requests:
                if type(request) is limits.Oversize:
                    raise convert.BadRequest(request.describe())
                convert.stream_request_ids(request)
                self._settle_from_stream(name, request, binding)
        except convert.RequestError as error:
            self._stream_errors[stream_id] = f"StreamingPull: {error}"
        except (grpc.RpcError, ValueError, AskTimeout, ActorDeadError) as error:
            log.debug("StreamingPull reader for %s ended: %r", name, error)
        finally:
            self.system.tell_from_thread(binding, Detach())

    def _settle_from_stream(self, name: str, request: Any, binding: ActorRef) -> None:
        """Apply a stream request's acks and deadline changes, then tell the binding how each went.

        The binding puts the outcomes in its next response if the subscription has exactly-once
        delivery (``acknowledge_confirmation`` / ``modify_ack_deadline_confirmation``), as Pub/Sub
        does, and drops them otherwise. An ack id this server never issued is invalid there.
        """
        confirmations = Confirmations()
        if request.ack_ids:
            done, failed = self._settle_ids(name, SettleKind.ACK, request.ack_ids, 0)
            confirmations += Confirmations(acked=done, ack_invalid=failed)
        by_seconds: dict[int, list[str]] = {}
        for seconds, ack_id in zip(request.modify_deadline_seconds, request.modify_deadline_ack_ids, strict=False):
            by_seconds.setdefault(min(max(seconds, 0), 600), []).append(ack_id)
        for seconds, ids in by_seconds.items():
            done, failed = self._settle_ids(name, SettleKind.MODACK, ids, seconds)
            confirmations += Confirmations(modified=done, modify_invalid=failed)
        if confirmations != Confirmations():
            self.system.tell_from_thread(binding, confirmations)

    def _settle_ids(self, name: str, kind: SettleKind, texts: Any, seconds: int) -> tuple[_Ids, _Ids]:
        """Settle the ack ids of one stream request: (those that took, those that did not), in request order."""
        shaped = tuple(text for text in texts if looks_like_ack_id(text))
        invalid = {text for text in texts if not looks_like_ack_id(text)} if len(shaped) < len(texts) else set()
        if shaped:
            outcome = self.system.ask(self.registry, Settle(name, kind, shaped, seconds), timeout=_ASK_S)
            invalid.update(outcome.invalid if isinstance(outcome, SettleOutcome) else shaped)  # Failed: gone
        done = tuple(text for text in texts if text not in invalid)
        return done, tuple(text for text in texts if text in invalid)


def _budget(max_memory: int | str) -> MemoryBudget:
    """The memory budget ``max_memory`` asks for, checked against what the process holds now."""
    limit = parse_byte_size(max_memory)
    try:
        held = resident_bytes()
    except OSError as error:
        msg = f"PubSubServer max_memory needs /proc/self/statm to read the resident size (Linux): {error}"
        raise ValueError(msg) from None
    if limit <= held:
        msg = (f"PubSubServer max_memory {limit:,} bytes is below what the process holds already ({held:,} bytes "
               "resident): every publish would be refused")
        raise ValueError(msg)
    return MemoryBudget(limit)


@final
class _Unimplemented(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Every call no other handler knows: UNIMPLEMENTED, naming the call."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = handler_call_details.method

        def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            log.debug("%s - UNIMPLEMENTED", limits.quote(method.lstrip("/"), 200))
            _abort(context, "UNIMPLEMENTED",
                   f"{limits.quote(method.lstrip('/'), 200)} is not implemented by conveyor's Pub/Sub front")
            yield b""  # pragma: no cover - a generator, for the stream handler's shape

        return grpc.stream_stream_rpc_method_handler(refuse)
