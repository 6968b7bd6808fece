"""conveyor's own subscriber over the wire: a gRPC transport to any ``google.pubsub.v1`` endpoint.

``PubSubConsumer`` is a drop-in for the broker's ``ConsumerActor`` inside the subscriber's
``StreamingPullManager``: it hands the manager ``Delivery`` values and takes its ``Ack`` / ``Nack``
/ ``ModifyAckDeadline`` (``Ack(confirm=True)`` answered with ``AckResult``). All network I/O runs
as jobs (``ctx.run_job``) through a ``PubSubTransport``, the I/O handle built outside the actors
(as a user callback is): one job holds the StreamingPull open and tells the actor each response;
each settlement batch is one unary call. Flow control is the server's: the stream asks for
``max_outstanding_messages`` / ``bytes`` equal to the manager's limits, so ``Suspend`` / ``Resume``
need no action here. A stream that ends is reopened after a short backoff, as Google's client does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, cast, final

import attrs
import grpc
from google.pubsub_v1 import types

from conveyor.actors.broker import (
    Ack,
    AckResult,
    ConsumerSettings,
    Delivery,
    Message,
    ModifyAckDeadline,
    Nack,
    Release,
    Resume,
    Suspend,
)
from conveyor.actors.subscriber import FlowControl, StreamingPullManager, SubscriberMessage, Subscription
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, JobDone, JobFailed

_PB: dict[str, Any] = {name: getattr(types, name).pb() for name in (
    "StreamingPullRequest", "StreamingPullResponse", "AcknowledgeRequest", "ModifyAckDeadlineRequest",
)}
_REOPEN_S = 0.5
_CONSUMER_ID = 1


@final
@attrs.frozen
class Received:
    """Stream job -> consumer: one StreamingPullResponse's messages (ack id, message, attempt)."""

    items: tuple[tuple[str, Message, int], ...]


@final
@attrs.frozen
class _Reopen:
    """The consumer's timer: open the stream again."""


@final
class PubSubTransport:
    """The gRPC channel to one endpoint and the three calls the consumer makes, run in jobs.

    Built outside the actors (it holds a socket) and handed to ``PubSubConsumer`` like a callback.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self.channel = grpc.insecure_channel(target)
        serialize = _serialize
        self._stream = self.channel.stream_stream(
            "/google.pubsub.v1.Subscriber/StreamingPull", request_serializer=serialize,
            response_deserializer=_PB["StreamingPullResponse"].FromString)
        self._ack = self.channel.unary_unary(
            "/google.pubsub.v1.Subscriber/Acknowledge", request_serializer=serialize,
            response_deserializer=lambda data: data)
        self._modack = self.channel.unary_unary(
            "/google.pubsub.v1.Subscriber/ModifyAckDeadline", request_serializer=serialize,
            response_deserializer=lambda data: data)

    def close(self) -> None:
        """Close the channel (open streams end)."""
        self.channel.close()

    def stream(self, subscription: str, settings: ConsumerSettings, deadline_s: int, alive: Callable[[], bool],
               deliver: Callable[[object], None]) -> str:
        """Hold one StreamingPull open while ``alive()``, telling ``deliver`` each response. Blocks (a job)."""
        first = _PB["StreamingPullRequest"](
            subscription=subscription, stream_ack_deadline_seconds=deadline_s,
            max_outstanding_messages=settings.prefetch_messages, max_outstanding_bytes=settings.prefetch_bytes)
        calls: list[Any] = []

        def requests() -> Iterator[Any]:
            yield first
            while alive():
                time.sleep(0.2)  # this is the job's thread, not an actor: it may block
            if calls:
                calls[0].cancel()

        call = self._stream(requests())
        calls.append(call)
        try:
            for response in call:
                items = tuple(
                    (r.ack_id, Message(r.message.data, headers=dict(r.message.attributes),
                                       group=r.message.ordering_key or None, message_id=r.message.message_id),
                     r.delivery_attempt or 1)
                    for r in response.received_messages
                )
                if items:
                    deliver(Received(items))
        except grpc.RpcError as error:
            return f"stream ended: {error.code()}"
        return "stream ended"

    def acknowledge(self, subscription: str, ack_ids: tuple[str, ...]) -> tuple[str, ...]:
        """Acknowledge; returns the ids the server refused (exactly-once), else ``()``. Blocks (a job)."""
        try:
            self._ack(_PB["AcknowledgeRequest"](subscription=subscription, ack_ids=ack_ids), timeout=60)
        except grpc.RpcError as error:
            return _refused(error, ack_ids)
        return ()

    def modify(self, subscription: str, ack_ids: tuple[str, ...], seconds: int) -> tuple[str, ...]:
        """ModifyAckDeadline (0: nack). Blocks (a job)."""
        try:
            self._modack(_PB["ModifyAckDeadlineRequest"](subscription=subscription, ack_ids=ack_ids,
                                                         ack_deadline_seconds=seconds), timeout=60)
        except grpc.RpcError as error:
            return _refused(error, ack_ids)
        return ()


def _serialize(message: Any) -> bytes:
    return cast("bytes", message.SerializeToString())


def _refused(error: grpc.RpcError, ack_ids: tuple[str, ...]) -> tuple[str, ...]:
    """The ack ids an error refuses: those its ErrorInfo marks permanent, or all of them."""
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    status = rpc_status.from_call(error)
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return tuple(i for i in ack_ids if info.metadata.get(i, "").startswith("PERMANENT"))
    return ack_ids


@final
class PubSubConsumer(Actor):
    """The subscriber's consumer for a Pub/Sub endpoint: Deliveries out, settlements as unary calls (jobs)."""

    def __init__(self, transport: PubSubTransport, subscription: str, client: ActorRef,
                 settings: ConsumerSettings, deadline_s: int = 60) -> None:
        self.transport = transport
        self.subscription = subscription
        self.client = client
        self.settings = settings
        self.deadline_s = deadline_s
        self.next_tag = 0
        self.ack_ids: dict[int, str] = {}  # tag -> the latest delivery's ack id
        self.tags: dict[str, int] = {}  # message id -> tag, until acked
        self.messages: dict[int, str] = {}  # tag -> message id
        self.stream_job: int | None = None
        self.confirming: dict[int, tuple[int, ...]] = {}  # job id -> tags awaiting AckResult

    def on_start(self) -> None:
        """Open the stream."""
        self._open()

    def _open(self) -> None:
        me = self.ctx.self_ref
        self.stream_job = self.ctx.run_job(self.transport.stream, self.subscription, self.settings, self.deadline_s,
                                           lambda: me.is_alive, self.ctx.teller_for_threads(me))

    def receive(self, message: Any) -> None:
        """Deliver what the stream brought; turn settlements into calls; reopen a stream that ended."""
        match message:
            case Received(items=items):
                for ack_id, payload, attempt in items:
                    # A redelivery keeps its message's tag: the subscriber's ordering-key fence waits for
                    # exactly the tags it sent back.
                    tag = self.tags.get(payload.message_id)
                    if tag is None:
                        self.next_tag += 1
                        tag = self.next_tag
                        self.tags[payload.message_id] = tag
                        self.messages[tag] = payload.message_id
                    self.ack_ids[tag] = ack_id
                    self.ctx.send(self.client, Delivery(self.subscription, tag, payload, attempt, None, _CONSUMER_ID))
            case Ack(tags=tags, confirm=confirm):
                ids = self._take(tags)
                for tag in tags:
                    self.tags.pop(self.messages.pop(tag, ""), None)
                if ids:
                    job = self.ctx.run_job(self.transport.acknowledge, self.subscription, ids)
                    if confirm:
                        self.confirming[job] = tags
                elif confirm:
                    self.ctx.send(self.client, AckResult((), tags))
            case Nack(tags=tags) | Release(tags=tags):
                self._modify(self._take(tags), 0)
            case ModifyAckDeadline(tags=tags, seconds=seconds):
                if seconds == 0:
                    self._modify(self._take(tags), 0)
                else:
                    self._modify(tuple(self.ack_ids[t] for t in tags if t in self.ack_ids), round(seconds))
            case JobDone(job_id=job_id, result=result) | JobFailed(job_id=job_id, error=result):
                self._job_ended(job_id, result)
            case _Reopen():
                self._open()
            case Suspend() | Resume():
                pass  # the server holds the stream to max_outstanding_messages / bytes

    def _take(self, tags: tuple[int, ...]) -> tuple[str, ...]:
        return tuple(ack_id for tag in tags if (ack_id := self.ack_ids.pop(tag, None)) is not None)

    def _modify(self, ids: tuple[str, ...], seconds: int) -> None:
        if ids:
            self.ctx.run_job(self.transport.modify, self.subscription, ids, seconds)

    def _job_ended(self, job_id: int, result: object) -> None:
        if job_id == self.stream_job:
            self.stream_job = None
            self.ctx.schedule(_REOPEN_S, _Reopen())
            return
        tags = self.confirming.pop(job_id, None)
        if tags is None:
            return
        refused = result if isinstance(result, tuple) else None
        if refused is None or refused:
            self.ctx.send(self.client, AckResult((), tags))  # failed call, or refused (one tag per confirm)
        else:
            self.ctx.send(self.client, AckResult(tags, ()))


@final
class _RemoteStreamingPullManager(StreamingPullManager):
    """The subscriber's manager with its broker consumer swapped for a ``PubSubConsumer``."""

    def __init__(self, transport: PubSubTransport, subscription: str, callback: Callable[[SubscriberMessage], object],
                 flow: FlowControl, workers: int) -> None:
        # The manager hands its ``queue`` only to the consumer, which make_part replaces here.
        super().__init__(cast("ActorRef", None), callback, flow, workers)
        self.transport = transport
        self.subscription = subscription

    def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
        """Spawn the parts as usual, but the consumer speaks gRPC."""
        if name != "consumer":
            return super().make_part(name, factory, *args)
        _, client, settings = args
        transport, subscription = self.transport, self.subscription
        return self.ctx.spawn(lambda: PubSubConsumer(transport, subscription, client, settings), name=name)


def subscribe_remote(
    system: ActorSystemBase,
    transport: PubSubTransport,
    subscription: str,
    callback: Callable[[SubscriberMessage], object],
    *,
    flow_control: FlowControl | None = None,
    workers: int = 4,
) -> Subscription:
    """``subscribe()`` to a Pub/Sub subscription at ``transport``'s endpoint, with conveyor's actor subscriber.

    Raises:
        TypeError / ValueError: a bad callback, worker count or flow control, at once.
    """
    flow = flow_control if flow_control is not None else FlowControl()
    if not isinstance(flow, FlowControl):
        msg = f"subscribe_remote() flow_control must be a FlowControl, got {type(flow).__qualname__}"
        raise TypeError(msg)
    if not isinstance(subscription, str) or "/subscriptions/" not in subscription:
        msg = f"subscribe_remote() subscription must be projects/P/subscriptions/S, got {subscription!r}"
        raise ValueError(msg)
    manager = system.spawn(lambda: _RemoteStreamingPullManager(transport, subscription, callback, flow, workers))
    return Subscription(system, manager)
