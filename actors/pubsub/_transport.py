"""conveyor's own subscriber over the wire: a gRPC transport to any ``google.pubsub.v1`` endpoint.

``PubSubConsumer`` is a drop-in for the broker's ``ConsumerActor`` inside the subscriber's
``StreamingPullManager``: it hands the manager ``Delivery`` values and takes its ``Ack`` / ``Nack``
/ ``ModifyAckDeadline`` (``Ack(confirm=True)`` answered with ``AckResult``). All network I/O runs
as jobs (``ctx.run_job``) through a ``PubSubTransport``, the I/O handle built outside the actors
(as a user callback is): one job holds the StreamingPull open and tells the actor each response;
one *settlement job* at a time sends everything gathered since the last one (acks, nacks and
deadline changes as concurrent unary calls), so under load each call carries a large batch and
answers keep the order the manager asked in. Flow control is the server's: the stream asks for
``max_outstanding_messages`` / ``bytes`` equal to the manager's limits, so ``Suspend`` /
``Resume`` need no action here. A stream that ends is reopened after a short backoff, as Google's
client does; calls wait for the channel while the server restarts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, cast, final

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
    delivery_unchecked,
)
from conveyor.actors.subscriber import (
    CALLBACKS_PER_JOB,
    Deliveries,
    Dispatcher,
    FlowControl,
    Leaser,
    Part,
    SourceGone,
    StreamingPullManager,
    SubscriberMessage,
    Subscription,
)
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, ConveyorError, JobDone, JobFailed

from ._edge import STREAM_DEADLINE_MAX_S, STREAM_DEADLINE_MIN_S
from ._limits import ACK_REQUEST_MAX_BYTES

log = logging.getLogger("conveyor.pubsub")

_PB: dict[str, Any] = {name: getattr(types, name).pb() for name in (
    "StreamingPullRequest", "StreamingPullResponse", "AcknowledgeRequest", "ModifyAckDeadlineRequest",
)}
_REOPEN_S: Final = 0.5
_PERMANENT: Final = frozenset({"NOT_FOUND", "PERMISSION_DENIED", "INVALID_ARGUMENT", "FAILED_PRECONDITION",
                               "UNIMPLEMENTED", "UNAUTHENTICATED"})
"""Status codes a StreamingPull is not reopened after (the others are retried every ``_REOPEN_S``)."""
_CONSUMER_ID: Final = 1
_CALL_TIMEOUT_S: Final = 30.0  # a settlement call waits this long for the server (restarts included)
_CLOSE_WAIT_S: Final = 5.0  # the consumer's last job waits this long for its stream to end before it settles
_IDS_PER_CALL: Final = 2500  # ack ids of ~40 bytes: about 100 KB per request, far under Pub/Sub's 512 KB
_BYTES_PER_CALL: Final = ACK_REQUEST_MAX_BYTES - 4096  # and never over it, whatever the ids' length
RELEASED_MEMORY: Final = 100_000
SETTLE_CALLS: Final = 2
"""Settlement jobs out at once. With one, the server answered a call's acks with new deliveries while the
subscriber waited, then the other way round; a second call overlaps the two (1,000 keys: 24-25k -> 27-31k
msg/s). Their answers are given in the order the jobs were sent."""
TRANSIT_ALLOWANCE_S: Final = 5
"""The longest a delivery is taken to need from the server's send to the subscriber's leaser. A stream asks for
this much more than the shortest lease extension as its ack deadline, and the leaser counts each delivery's lease
as that deadline less this from its receipt, so it sends no deadline change at receipt (Google's client does: a
second call per message, and acks queued behind it)."""


def stream_deadline_s(flow: FlowControl) -> int:
    """The ``stream_ack_deadline_seconds`` a subscriber with ``flow`` asks for: its shortest extension plus the
    transit allowance, in Pub/Sub's range."""
    wanted = math.ceil(flow.min_duration_per_lease_extension_s) + TRANSIT_ALLOWANCE_S
    return min(STREAM_DEADLINE_MAX_S, max(STREAM_DEADLINE_MIN_S, wanted))
"""How many messages given back (nacked, or their ack refused) keep their tag for a redelivery.

A message the server never sends back (dead-lettered, or taken by another subscriber) would
otherwise keep its entry for ever; past this many, the oldest are forgotten.
"""
CHANNEL_OPTIONS: Final = (
    # After a failed connection gRPC waits 1 s, then 1.6x more each time, before trying again; an
    # emulator restarting on the same machine is back far sooner than that.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
)


@final
@attrs.frozen
class Received:
    """Stream job -> consumer: one StreamingPullResponse's messages (ack id, message, attempt; 0 unknown)."""

    items: tuple[tuple[str, Message, int], ...]


@final
@attrs.frozen
class Settlements:
    """What one settlement job sends: acks, and deadline changes by seconds (0 nacks)."""

    acks: tuple[str, ...] = ()
    modacks: tuple[tuple[int, tuple[str, ...]], ...] = ()

    @property
    def empty(self) -> bool:
        """True if there is no call to make."""
        return not self.acks and not self.modacks


@final
@attrs.frozen
class _Reopen:
    """The consumer's timer: open the stream again."""


@final
@attrs.frozen
class _Send:
    """The consumer's note to itself: send what was gathered since the note was put in its mailbox."""


_SEND = _Send()


@final
class StreamHandle:
    """One consumer's StreamingPull call, shared by the job that holds it open and the consumer's last job.

    The last job closes the stream before it gives messages back (a nack sent while the stream is
    open hands the message straight back on it, to nobody). The actor only creates and passes it;
    the two jobs' threads read and write it.
    """

    __slots__ = ("call", "closing", "ended", "unread")

    def __init__(self) -> None:
        self.call: Any = None  # the gRPC call, once the stream job opened it
        self.closing = False
        self.ended = threading.Event()  # set when the stream job stops reading
        self.unread: list[str] = []  # ack ids of messages that came after the consumer stopped: nobody runs them

    def close(self, timeout: float = _CLOSE_WAIT_S) -> tuple[str, ...]:
        """Cancel the call and wait for the stream job to stop reading; the ack ids it read that nobody will run."""
        self.closing = True
        call = self.call
        if call is not None:
            call.cancel()
        self.ended.wait(timeout)
        return tuple(self.unread)


@final
class PubSubTransport:
    """The gRPC channel to one endpoint and the calls the consumer makes, run in jobs.

    Built outside the actors (it holds a socket) and handed to ``PubSubConsumer`` like a callback.

    Args:
        target: ``host:port`` of the endpoint (an insecure channel, as for an emulator).
        options: gRPC channel options; by default reconnects are tried within 0.1-2 s.
    """

    def __init__(self, target: str, options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS) -> None:
        self.target = target
        self.channel = grpc.insecure_channel(target, options=list(options))
        serialize = _serialize
        self._stream = self.channel.stream_stream(
            "/google.pubsub.v1.Subscriber/StreamingPull", request_serializer=serialize,
            response_deserializer=_PB["StreamingPullResponse"].FromString)
        self._ack = self.channel.unary_unary(
            "/google.pubsub.v1.Subscriber/Acknowledge", request_serializer=serialize,
            response_deserializer=_ignore)
        self._modack = self.channel.unary_unary(
            "/google.pubsub.v1.Subscriber/ModifyAckDeadline", request_serializer=serialize,
            response_deserializer=_ignore)

    def close(self) -> None:
        """Close the channel (open streams end)."""
        self.channel.close()

    def stream(self, subscription: str, settings: ConsumerSettings, deadline_s: int, alive: Callable[[], bool],
               deliver: Callable[[object], None], handle: StreamHandle | None = None) -> tuple[str, str]:
        """Hold one StreamingPull open while ``alive()``, telling ``deliver`` each response. Blocks (a job).

        A response that comes once ``alive()`` is false is not delivered: its ack ids are kept in
        ``handle.unread``, for the consumer's last job to give back (``close_then_settle``), and the
        call is cancelled.

        Returns:
            How it ended: the gRPC status code's name and details (``("OK", "")`` when it just closed).
        """
        if handle is None:
            handle = StreamHandle()
        first = _PB["StreamingPullRequest"](
            subscription=subscription, stream_ack_deadline_seconds=deadline_s,
            max_outstanding_messages=settings.prefetch_messages, max_outstanding_bytes=settings.prefetch_bytes)
        calls: list[Any] = []

        def requests() -> Iterator[Any]:
            yield first
            while alive() and not (calls and calls[0].done()):
                time.sleep(0.2)  # this is the job's thread, not an actor: it may block
            if calls:
                calls[0].cancel()

        call = self._stream(requests(), wait_for_ready=True)
        calls.append(call)
        handle.call = call
        if handle.closing:  # closed before the call was known to it
            call.cancel()
        try:
            for response in call:
                if not alive():
                    handle.unread.extend(r.ack_id for r in response.received_messages)
                    call.cancel()
                    continue
                items = tuple(_received_item(r) for r in response.received_messages)
                if items:
                    deliver(Received(items))
        except grpc.RpcError as error:
            code = error.code()
            return (code.name if code is not None else "UNKNOWN"), str(error.details() or "")
        finally:
            handle.ended.set()
        return "OK", ""

    def close_then_settle(self, subscription: str, settlements: Settlements, stream: StreamHandle | None,
                          ) -> frozenset[str]:
        """A consumer's last job: close its stream, then send its last settlements and give back what the stream
        read after the consumer stopped. Blocks (a job).

        In this order, a message given back cannot be handed out again on the stream being closed,
        where nobody reads it any more: it would wait out its lease there, 15 s or more.
        """
        unread = stream.close() if stream is not None else ()
        if unread:
            settlements = Settlements(settlements.acks, (*settlements.modacks, (0, unread)))
        return self.settle(subscription, settlements) if not settlements.empty else frozenset()

    def settle(self, subscription: str, settlements: Settlements) -> frozenset[str]:
        """Make every call of ``settlements`` at once; return the ack ids whose ack was refused. Blocks (a job).

        An ack is refused if the server says so (exactly-once: its ErrorInfo marks it permanent)
        or if its call failed; failed deadline changes are not reported (the lease lapses instead).
        """
        acks, modacks = settlements.acks, settlements.modacks
        refused: set[str] = set()
        while acks or modacks:
            pending: list[tuple[Any, tuple[str, ...]]] = []
            for chunk in _chunks(acks):
                request = _PB["AcknowledgeRequest"](subscription=subscription, ack_ids=chunk)
                pending.append((self._ack.future(request, timeout=_CALL_TIMEOUT_S, wait_for_ready=True), chunk))
            for seconds, ids in modacks:
                for chunk in _chunks(ids):
                    request = _PB["ModifyAckDeadlineRequest"](subscription=subscription, ack_ids=chunk,
                                                              ack_deadline_seconds=seconds)
                    pending.append((self._modack.future(request, timeout=_CALL_TIMEOUT_S, wait_for_ready=True), ()))
            again: list[str] = []
            for future, acked in pending:
                try:
                    future.result()
                except grpc.RpcError as error:
                    if acked:
                        lost, retry = _refused(error, acked)
                        refused.update(lost)
                        again.extend(retry)
            # An exactly-once error lists what fits and asks for the others again (ABORTED).
            if len(again) == len(acks):  # nothing was answered: no progress to be made
                refused.update(again)
                again = []
            acks, modacks = tuple(again), ()
        return frozenset(refused)


def _serialize(message: Any) -> bytes:
    return cast("bytes", message.SerializeToString())


def _ignore(data: bytes) -> bytes:
    return data


def _chunks(ids: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """``ids`` in calls of at most ``_IDS_PER_CALL`` ids and ``_BYTES_PER_CALL`` bytes (Pub/Sub's request limit)."""
    if len(ids) <= _IDS_PER_CALL and len("".join(ids).encode()) + 4 * len(ids) <= _BYTES_PER_CALL:
        if ids:
            yield ids  # the common case, all in one call: one encode for the lot, not one per id
        return
    chunk: list[str] = []
    size = 0
    for ack_id in ids:
        entry = len(ack_id.encode()) + 4  # the id and its field's framing
        if chunk and (len(chunk) == _IDS_PER_CALL or size + entry > _BYTES_PER_CALL):
            yield tuple(chunk)
            chunk, size = [], 0
        chunk.append(ack_id)
        size += entry
    if chunk:
        yield tuple(chunk)


def _refused(error: grpc.RpcError, ack_ids: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the ack ids an error refuses, those to send again).

    Refused: those its ErrorInfo marks permanent, or all of them without one. Sent again: those an
    ABORTED error's ErrorInfo leaves out (it lists only what fits, and asks for the rest again).
    """
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    status = rpc_status.from_call(error)
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                metadata = info.metadata
                refused = tuple(i for i in ack_ids if metadata.get(i, "").startswith("PERMANENT"))
                aborted = error.code() is grpc.StatusCode.ABORTED
                again = tuple(i for i in ack_ids if i not in metadata) if aborted else ()
                return refused, again
    return ack_ids, ()


@final
@attrs.define
class _Confirm:
    """An ``Ack(confirm=True)`` being sent: its tags and the ack id sent for each."""

    tags: tuple[int, ...]
    ack_ids: dict[int, str]


@final
@attrs.define
class _InFlight:
    """A settlement job out: the confirmed Acks it carries, every ack (tag -> ack id), and once it
    ended, the acks refused (its answer waits for the jobs sent before it)."""

    job: int
    confirms: list[_Confirm]
    acked: dict[int, str]
    refused: frozenset[str] | None = None


def _received_item(received: Any) -> tuple[str, Message, int]:
    """(ack id, message, delivery attempt) of one ``ReceivedMessage``; each protobuf field read once."""
    message = received.message
    return (
        received.ack_id,
        # the wire typed every field: no checks (Message.from_decoded)
        Message.from_decoded(message.data, message.attributes, message.ordering_key, message.message_id),
        received.delivery_attempt,  # 0 (unset) unless the subscription has a dead-letter policy
    )


@final
class PubSubConsumer(Actor):
    """The subscriber's consumer for a Pub/Sub endpoint: Deliveries out, settlements as batched unary calls."""

    def __init__(self, transport: PubSubTransport, subscription: str, client: ActorRef,
                 settings: ConsumerSettings, deadline_s: int = 60, batches: bool = False) -> None:
        self.transport = transport
        self.batches = batches  # hand the client each received batch as one ``Deliveries`` (a subscriber manager)
        self.subscription = subscription
        self.client = client
        self.settings = settings
        self.deadline_s = deadline_s
        self.next_tag = 0
        self.ack_ids: dict[int, str] = {}  # tag -> the latest delivery's ack id, until settled here
        self.attempts: dict[int, int] = {}  # tag -> the latest delivery's attempt, while the tag is kept
        self.tags: dict[str, int] = {}  # message id -> tag, until the server took its ack
        self.messages: dict[int, str] = {}  # tag -> message id
        self.released: dict[int, None] = {}  # tags given back and not delivered again, oldest first
        self.stream_job: int | None = None
        self.stream: StreamHandle | None = None  # the running stream job's call (its jobs use it, not this actor)
        # Gathered for the next settlement job:
        self.acks: list[str] = []
        self.modacks: dict[int, list[str]] = {}  # seconds (0: nack) -> ack ids
        self.confirms: list[_Confirm] = []
        self.acked: dict[int, str] = {}  # tag -> ack id, of the acks gathered
        self.note_sent = False
        self.in_flight: dict[int, _InFlight] = {}  # job id -> the job, in the order sent
        self.next_answer = 0  # the last key of an answer with no job (a negative number)

    def on_start(self) -> None:
        """Open the stream."""
        self._open()

    def on_stop(self) -> None:
        """Close the stream, then send what is gathered and give back every message not settled (the server
        redelivers them at once)."""
        if self.ack_ids:
            self.modacks.setdefault(0, []).extend(self.ack_ids.values())
            self.ack_ids.clear()
        settlements = self._take_gathered()
        stream = self.stream if self.stream_job is not None else None
        if settlements.empty and stream is None:
            return
        try:
            self.ctx.run_job(self.transport.close_then_settle, self.subscription, settlements, stream)
        except ConveyorError:  # the system is shutting down: no job runs any more
            log.warning("%s: %d acks and %d deadline changes not sent (the system shut down first); the server "
                        "redelivers those messages once their leases lapse", self.subscription,
                        len(settlements.acks), sum(len(ids) for _, ids in settlements.modacks))

    def _open(self) -> None:
        me = self.ctx.self_ref
        self.stream = StreamHandle()
        self.stream_job = self.ctx.run_job(self.transport.stream, self.subscription, self.settings, self.deadline_s,
                                           lambda: me.is_alive, self.ctx.teller_for_threads(me), self.stream)

    def receive(self, message: Any) -> None:
        """Deliver what the stream brought; gather settlements into calls; reopen a stream that ended."""
        cls = type(message)
        if cls is Received:
            self._received(message.items)
        elif cls is Ack:
            self._ack(message.tags, message.confirm)
        elif cls is ModifyAckDeadline:
            if message.seconds == 0:
                self._nack(message.tags)
            else:
                seconds = min(600, max(1, round(message.seconds)))
                ids = [self.ack_ids[tag] for tag in message.tags if tag in self.ack_ids]
                if ids:
                    self.modacks.setdefault(seconds, []).extend(ids)
                    self._gathered()
        elif cls is Nack:
            self._nack(message.tags, message.attempts)
        elif cls is Release:
            self._nack(message.tags)
        elif cls is _Send:
            self.note_sent = False
            if len(self.in_flight) < SETTLE_CALLS:
                self._send()
        elif cls is JobDone or cls is JobFailed:
            self._job_ended(message.job_id, message.result if cls is JobDone else message.error)
        elif cls is _Reopen:
            self._open()
        elif cls is Suspend or cls is Resume:
            pass  # the server holds the stream to max_outstanding_messages / bytes

    # --- deliveries ---------------------------------------------------------------------------

    def _received(self, items: tuple[tuple[str, Message, int], ...]) -> None:
        tags = self.tags
        ack_ids = self.ack_ids
        attempts = self.attempts
        send = self.ctx.send
        client = self.client
        subscription = self.subscription
        deliveries: list[Delivery] = []
        for ack_id, payload, server_attempt in items:
            # A redelivery keeps its message's tag: the subscriber's ordering-key fence waits for
            # exactly the tags it sent back, and tells a copy it still holds by its tag.
            tag = tags.get(payload.message_id)
            if tag is None:
                self.next_tag += 1
                tag = self.next_tag
                tags[payload.message_id] = tag
                self.messages[tag] = payload.message_id
            elif self.released:
                self.released.pop(tag, None)
            # The server's count when it keeps one (a dead-letter policy), else this consumer's own,
            # so that each delivery under a tag has its own attempt, which a nack names.
            attempt = server_attempt or attempts.get(tag, 0) + 1
            attempts[tag] = attempt
            ack_ids[tag] = ack_id
            deliveries.append(delivery_unchecked(subscription, tag, payload, attempt, None, _CONSUMER_ID))
        if self.batches and len(deliveries) > 1:
            # One actor message per received batch: the manager fans it out as one message per component.
            send(client, Deliveries(tuple(deliveries)))
        else:
            for delivery in deliveries:
                send(client, delivery)

    # --- settlements ----------------------------------------------------------------------------

    def _take(self, tags: tuple[int, ...]) -> dict[int, str]:
        pop = self.ack_ids.pop
        return {tag: ack_id for tag in tags if (ack_id := pop(tag, None)) is not None}

    def _ack(self, tags: tuple[int, ...], confirm: bool) -> None:
        taken = self._take(tags)
        self.acks.extend(taken.values())
        self.acked.update(taken)
        if confirm:
            self.confirms.append(_Confirm(tags, taken))
        self._gathered()

    def _nack(self, tags: tuple[int, ...], attempts: tuple[int, ...] = ()) -> None:
        if attempts:
            # A nack names the delivery it is for: one for an earlier delivery than the latest
            # received under its tag is stale, and sending the latest ack id would return the newer one.
            current = self.attempts
            tags = tuple(tag for tag, attempt in zip(tags, attempts, strict=True) if current.get(tag) == attempt)
        taken = self._take(tags)
        if not taken:
            return
        self.modacks.setdefault(0, []).extend(taken.values())
        self._release(taken)
        self._gathered()

    def _release(self, tags: Iterable[int]) -> None:
        """Remember given-back messages' tags for their redelivery, forgetting the oldest past the bound."""
        released = self.released
        for tag in tags:
            released[tag] = None
        while len(released) > RELEASED_MEMORY:
            oldest = next(iter(released))
            del released[oldest]
            self.tags.pop(self.messages.pop(oldest, ""), None)
            self.attempts.pop(oldest, None)

    def _gathered(self) -> None:
        """Something was gathered: send it once the rest of the manager's batch has come too."""
        if len(self.in_flight) < SETTLE_CALLS and not self.note_sent:
            self.note_sent = True
            self.ctx.send(self.ctx.self_ref, _SEND)  # at the back of the mailbox, behind the rest of the batch

    def _take_gathered(self) -> Settlements:
        settlements = Settlements(
            tuple(self.acks), tuple((seconds, tuple(ids)) for seconds, ids in self.modacks.items())
        )
        self.acks = []
        self.modacks = {}
        return settlements

    def _send(self) -> None:
        confirms, self.confirms = self.confirms, []
        acked, self.acked = self.acked, {}
        settlements = self._take_gathered()
        if settlements.empty:
            # Confirms of tags already settled: nothing to send. Answered at once, but after the jobs out.
            self.next_answer -= 1  # a key no job id takes
            self.in_flight[self.next_answer] = _InFlight(self.next_answer, confirms, {}, frozenset())
            self._answer_ended()
            return
        job = self.ctx.run_job(self.transport.settle, self.subscription, settlements)
        self.in_flight[job] = _InFlight(job, confirms, acked)

    def _answer_ended(self) -> None:
        """Answer the ended jobs at the head, in the order they were sent (a later one may end first)."""
        jobs = self.in_flight
        while jobs:
            first = next(iter(jobs.values()))
            if first.refused is None:
                return
            del jobs[first.job]
            self._answer(first.confirms, first.acked, first.refused)

    def _answer(self, confirms: list[_Confirm], acked: dict[int, str], refused: frozenset[str]) -> None:
        """Forget the messages whose ack took; answer each confirmed Ack, in the order they came.

        A message whose ack was refused keeps its tag, so that a redelivery comes to the manager
        under the same one (it acks it again rather than run it again).
        """
        tags, messages = self.tags, self.messages
        for tag, ack_id in acked.items():
            if ack_id not in refused:
                tags.pop(messages.pop(tag, ""), None)
                self.attempts.pop(tag, None)
        if refused:
            self._release(tag for tag, ack_id in acked.items() if ack_id in refused)
        for confirm in confirms:
            sent = confirm.ack_ids
            took = tuple(tag for tag in confirm.tags if tag in sent and sent[tag] not in refused)
            invalid = tuple(tag for tag in confirm.tags if tag not in sent or sent[tag] in refused)
            self.ctx.send(self.client, AckResult(took, invalid))

    def _job_ended(self, job_id: int, result: object) -> None:
        if job_id == self.stream_job:
            self.stream_job = None
            if type(result) is tuple and result[0] in _PERMANENT:
                # As Google's client does: a deleted subscription or a refused request ends the subscriber.
                code, details = result
                self.ctx.send(self.client, SourceGone(f"StreamingPull on {self.subscription} ended with {code}: "
                                                      f"{details}"))
                return
            self.ctx.schedule(_REOPEN_S, _Reopen())
            return
        in_flight = self.in_flight.get(job_id)
        if in_flight is None:
            return
        if isinstance(result, frozenset):
            in_flight.refused = result
        else:  # the job failed: no ack is known to have taken
            in_flight.refused = frozenset(in_flight.acked.values())
        self._answer_ended()
        if len(self.in_flight) < SETTLE_CALLS and (self.acks or self.modacks or self.confirms):
            self._send()


@final
class _RemoteStreamingPullManager(StreamingPullManager):
    """The subscriber's manager with its broker consumer swapped for a ``PubSubConsumer``."""

    def __init__(self, transport: PubSubTransport, subscription: str, callback: Callable[[SubscriberMessage], object],
                 flow: FlowControl, workers: int, callbacks_per_job: int = CALLBACKS_PER_JOB) -> None:
        # The manager hands its ``queue`` only to the consumer, which make_part replaces here.
        super().__init__(cast("ActorRef", None), callback, flow, workers, callbacks_per_job=callbacks_per_job)
        self.transport = transport
        self.subscription = subscription
        self.deadline_s = stream_deadline_s(flow)

    def make_part(self, name: str, factory: Callable[..., Actor], *args: Any) -> ActorRef:
        """Spawn the parts as usual, but the consumer speaks gRPC, settlements reach it without a timer's wait,
        and the leaser knows the lease each delivery comes with.

        The consumer gathers whatever comes while its settlement call is out into the next call, so
        the dispatcher's 10 ms batching only delayed each ack (and the server's flow-control credit).
        The stream's ack deadline (``stream_deadline_s``) already leases each delivery for at least the
        shortest extension from its receipt on, so the leaser sends no deadline change at receipt.
        """
        if name == Part.DISPATCHER:
            return super().make_part(name, lambda manager: Dispatcher(manager, max_delay_s=0.0), *args)
        if name == Part.LEASER:
            granted = float(self.deadline_s - TRANSIT_ALLOWANCE_S)
            return super().make_part(
                name, lambda manager, dispatcher, flow: Leaser(manager, dispatcher, flow, granted_s=granted), *args)
        if name != Part.CONSUMER:
            return super().make_part(name, factory, *args)
        _, client, settings = args
        transport, subscription, deadline_s = self.transport, self.subscription, self.deadline_s
        return self.ctx.spawn(
            lambda: PubSubConsumer(transport, subscription, client, settings, deadline_s=deadline_s, batches=True),
            name=name)


def subscribe_remote(
    system: ActorSystemBase,
    transport: PubSubTransport,
    subscription: str,
    callback: Callable[[SubscriberMessage], object],
    *,
    flow_control: FlowControl | None = None,
    workers: int = 4,
    callbacks_per_job: int = CALLBACKS_PER_JOB,
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
    manager = system.spawn(
        lambda: _RemoteStreamingPullManager(transport, subscription, callback, flow, workers, callbacks_per_job))
    return Subscription(system, manager)
