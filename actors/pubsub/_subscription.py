"""A Pub/Sub subscription on the broker's actors: its queue, its log for Seek, and one binding per client.

``SubscriptionActor`` owns a broker ``QueueActor`` (child) configured from the subscription:
ack deadline -> ``ack_deadline_s``, dead_letter_policy -> ``max_deliveries`` with itself as the
dead-letter target (it forwards to the dead-letter topic), retry_policy -> ``RetryPolicy``,
ordering -> the message ``group``, retention -> ``ttl_s``. An update reconfigures that queue in
place, so held messages keep their leases and ack ids. It keeps a log of the messages it holds
(acked ones too with ``retain_acked_messages``, and whatever a retaining topic hands it for a
Seek): a Seek rebuilds the queue as a new generation from the log. Seek says which messages count
as unacked from then on, so the messages clients held are redelivered and their old ack ids fail.

``Binding`` serves one StreamingPull or one Pull: it is the client of a broker ``ConsumerActor``
(its child) whose credit is the stream's flow control, buffers deliveries until the glue asks
for them, routes settlements to the consumer, and pairs the queue's ``AckResult`` with the
exactly-once confirmations waiting for them. When its stream ends it keeps its leases until they
are settled or lapse (a reconnecting client may still ack them), then stops; stopping its
consumer hands whatever is left back to the queue.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from typing import Any, final

import attrs

from conveyor.actors.broker import (
    DEAD_LETTER_QUEUE,
    DEAD_LETTER_REASON,
    DELIVERY_COUNT,
    Ack,
    AckResult,
    BatchPublished,
    ConsumerActor,
    ConsumerSettings,
    Delivered,
    Delivery,
    GetStats,
    Message,
    ModifyAckDeadline,
    Nack,
    Publish,
    PublishBatch,
    QueueActor,
    QueueConfig,
    QueueStats,
    Reconfigure,
    Release,
    RetryPolicy,
    Suspend,
)
from conveyor.runtime import Actor, ActorRef, Journal, JournalSynced, Terminated, TimerHandle

from ._ackid import AckId, AckIdCodec, AckIdReader, ack_id_unchecked
from ._containment import ContainedActor, HandlerFailed
from ._edge import request_refusal
from ._model import (
    ORDERING_KEY,
    PUBLISH_TIME,
    Confirmations,
    Detach,
    Done,
    Failed,
    NextBatch,
    OpenStream,
    PubMessage,
    PullMessages,
    Seek,
    Settle,
    SettleKind,
    SettleOutcome,
    Shutdown,
    StreamClosed,
    StreamOpened,
    SubscriptionConfig,
    batch_unchecked,
    pub_message_unchecked,
)
from ._protocol import (
    BindingCount,
    Close,
    Confirmed,
    CountBindings,
    Envelope,
    PublishInternal,
    Rebind,
    Reconfigured,
    Retained,
    Route,
    Routed,
    SettleTags,
    TopicGone,
    UseConfig,
)
from ._push import PushActor, Pusher, push_terms
from ._seek_log import (
    CONFIRM,
    DROP,
    GENERATION,
    REBUILT,
    RETAINED,
    ROUTE,
    SEEK,
    SETTLE,
    UNRETAIN,
    Event,
    SeekLog,
    SeekLogState,
    rows,
)
from ._snapshots import serve_on_subscription
from ._surface import DETACHED_REASON, DetachFromTopic

logger = logging.getLogger("conveyor.pubsub")
UNLIMITED_MESSAGES = 1_000_000_000
UNLIMITED_BYTES = 1 << 62
_MAX_MESSAGE_BYTES = (1 << 31) - 1  # the glue enforces Pub/Sub's limits before a message gets here
_PULL_LINGER_S = 0.005  # a Pull answers this long after its first message, so one batch fills it
IDLE_STREAM_S = 3600.0
"""A stream nobody asked a batch of for this long has lost its client: it ends (and its binding goes).

A live client always has a ``NextBatch`` waiting (the gRPC glue polls every few seconds); one
that stopped before its ``StreamOpened`` came, or whose open timed out, never asks at all, and
without this its binding would count as a connected subscriber for ever: the subscription would
never expire.
"""
STREAM_RESPONSE_MAX = 500
"""Most messages a StreamingPull response carries; the rest of what is ready goes in the next, at once. With all
of a 1,000-message window in one response, the client's first callback waited for the server to make and send
the whole of it (first callback 24-34 ms after subscribe; 19-23 ms at 500, conveyor's subscriber, 1,000 keys)."""
_DEAD_LETTER_SOURCE = frozenset({"CloudPubSubDeadLetterSourceDeliveryCount", "CloudPubSubDeadLetterSourceSubscription",
                                 "CloudPubSubDeadLetterSourceSubscriptionProject"})
"""Attributes a dead letter gets from the subscription it left (a message dead-lettered twice has them already)."""


@final
@attrs.frozen
class _Flush:
    """Binding -> itself: answer the waiting asker with what is buffered."""


@final
@attrs.frozen
class _WaitOver:
    """Binding's timer: the asker ``serial`` has waited long enough; answer it (empty if need be)."""

    serial: int


@final
@attrs.frozen
class _IdleOver:
    """Binding's timer: nobody asked for a batch since ``serial``; the stream's client is gone."""

    serial: int


@final
@attrs.frozen
class _Check:
    """Binding's timer, once detached: stop if every lease is settled or lapsed."""


def _fitting(deliveries: list[Delivery], max_bytes: int) -> tuple[list[Delivery], list[Delivery]]:
    """(the deliveries that fit in ``max_bytes``, the first always; the rest), in order.

    A consumer's byte credit may be overshot by a message per pull of the broker, so a Pull of
    1 MB messages gathered 5 MB: over the 4 MiB a client receives, and redelivered into the same
    failure for ever.
    """
    size = 0
    for index, delivery in enumerate(deliveries):
        size += delivery.message.size
        if index and size > max_bytes:
            return deliveries[:index], deliveries[index:]
    return deliveries, []


def to_broker(message: PubMessage, ordered: bool, ttl_s: float) -> Message:
    """The broker message for ``message``: attributes as headers, the ordering key as group if ordered."""
    headers: tuple[tuple[str, str | int], ...] = (*message.attributes, (PUBLISH_TIME, message.publish_time_ns))
    key = message.ordering_key
    if key:
        headers = (*headers, (ORDERING_KEY, key))
    return Message(
        message.data,
        headers=headers,
        group=key if ordered and key else None,
        message_id=message.message_id,
        ttl_s=ttl_s if ttl_s > 0 else None,
    )


def unpublishable(messages: tuple[PubMessage, ...]) -> str | None:
    """Why a publish of ``messages`` cannot be stored whole (``messages[i]: ...``), or None if it can.

    The topic asks this before it numbers or confirms anything, so one message the broker's queues
    would refuse refuses the whole request and nothing of it is stored.
    """
    for index, message in enumerate(messages):
        try:
            to_broker(message, True, 1.0)
        except (TypeError, ValueError) as error:
            return f"messages[{index}]: {error}"
    return None


def stored_size(message: PubMessage) -> int:
    """Bytes ``message`` counts for in a Pull's ``max_bytes`` and in flow control: its broker ``Message.size``."""
    return to_broker(message, False, 0.0).size


def from_broker(message: Message) -> PubMessage:
    """The Pub/Sub message inside a broker message (reserved headers back into fields)."""
    attributes: list[tuple[str, str]] = []
    publish_time_ns = 0
    key = ""
    for name, value in message.headers:
        if name == PUBLISH_TIME:
            publish_time_ns = int(value)
        elif name == ORDERING_KEY:
            key = str(value)
        else:
            attributes.append((name, str(value)))
    # the broker's message was checked when published: its headers are str and int, its body bytes
    return pub_message_unchecked(message.body, tuple(attributes), key, publish_time_ns, message.message_id)


@final
@attrs.frozen
class _Issued:
    """Binding -> its subscription: the ack ids it issued for a batch, so that their acks are a lookup, not a seal."""

    texts: tuple[str, ...]
    ack_ids: tuple[AckId, ...]
    """What each text names (both tuples of leaves: a send checks them without a walk)."""


@final
class Binding(Actor):
    """One StreamingPull (``pull`` None) or one Pull, consuming from the subscription's queue.

    Args:
        number: the binding's number, named by its ack ids.
        ack_ids: the subscription's ack-id codec, and its incarnation and queue generation, which
            every ack id it issues names (``AckId``).
        queue: the queue to consume from.
        subscription: the owning ``SubscriptionActor`` (gets ``Confirmed``).
        settings: the consumer's credit (the stream's flow control).
        ack_deadline_s: the stream's ack deadline: its consumer asks the queue to lease each message
            it takes for that long (``ConsumerSettings.lease_s``), whatever the queue's own deadline.
        exactly_once / ordering: the subscription's properties, echoed on every batch.
        pull: for a Pull, the request (answered once, to ``reply_to``).
        reply_to: the Pull's asker.
        dead_letter: whether the subscription has a dead-letter policy (only then do its
            messages carry ``delivery_attempt``, as in Pub/Sub).
    """

    def __init__(
        self,
        number: int,
        ack_ids: tuple[AckIdCodec, int, int],
        queue: ActorRef,
        subscription: ActorRef,
        settings: ConsumerSettings,
        ack_deadline_s: int,
        exactly_once: bool,
        ordering: bool,
        pull: PullMessages | None = None,
        reply_to: ActorRef | None = None,
        *,
        dead_letter: bool = False,
    ) -> None:
        self.dead_letter = dead_letter
        self.number = number
        self.codec, self.subscription_id, self.generation = ack_ids
        self.queue = queue
        self.subscription = subscription
        self.settings = settings
        self.ack_deadline_s = ack_deadline_s
        self.exactly_once = exactly_once
        self.ordering = ordering
        self.pull = pull
        self.reply_to = reply_to
        self.consumer: ActorRef | None = None
        self.buffer: list[Delivery] = []
        self.outstanding: dict[int, int] = {}  # tag -> the attempt (delivery count) handed out under it
        self.acked: set[tuple[int, int]] = set()  # exactly-once: a repeated ack of an acked delivery succeeds
        # (confirm id, tags already refused, tag -> attempt of each ack sent), per confirmed Ack out
        self.confirms: deque[tuple[int, tuple[int, ...], dict[int, int]]] = deque()
        self.confirmations: Confirmations | None = None  # for the stream's next response
        self.waiter: ActorRef | None = None
        self.waiter_serial = 0
        self.wait_timer: TimerHandle | None = None
        self.flush_pending = False
        self.detached = False
        self.closed_reason = ""
        self.latest_deadline = 0.0
        self.check: TimerHandle | None = None
        self.idle_timer: TimerHandle | None = None

    def on_start(self) -> None:
        """Start consuming; a Pull waits for its first message or its timeout, a stream for its client."""
        self._spawn_consumer()
        if self.pull is not None:
            self.waiter = self.reply_to
            self.waiter_serial += 1
            self.wait_timer = self.ctx.schedule(self.pull.wait_s, _WaitOver(self.waiter_serial))
        else:
            self._await_client()

    def _await_client(self) -> None:
        """A stream with no asker: end it unless its client asks again within ``IDLE_STREAM_S``."""
        if self.idle_timer is not None:
            self.ctx.cancel(self.idle_timer)
        self.idle_timer = self.ctx.schedule(IDLE_STREAM_S, _IdleOver(self.waiter_serial))

    def on_restart(self, error: Exception) -> None:
        """A binding that raised ends its stream instead (the client reconnects); its consumer gave its leases back."""
        self.ctx.give_up(error)

    def _spawn_consumer(self) -> None:
        queue, me = self.queue, self.ctx.self_ref
        # Leased for the stream's deadline when taken: no deadline change per batch to lengthen the queue's.
        settings = attrs.evolve(self.settings, lease_s=float(self.ack_deadline_s))
        batches = self.pull is None  # a stream takes each pull of its consumer whole; a Pull counts one by one
        self.consumer = self.ctx.spawn(lambda: ConsumerActor(queue, me, settings, batches=batches),
                                       name=f"consumer-{self.generation}")

    def receive(self, message: Any) -> None:
        """Deliveries in, batches out, settlements through, confirmations back."""
        match message:
            case Delivery():
                self._delivered((message,))
            case Delivered():
                self._delivered(message.deliveries)
            case _Flush():
                self.flush_pending = False
                if self.waiter is not None and (self.buffer or self.confirmations is not None):
                    self._answer()
            case NextBatch(wait_s=wait_s):
                self._next_batch(wait_s)
            case _WaitOver(serial=serial):
                if self.waiter is not None and serial == self.waiter_serial:
                    self._answer()
            case SettleTags():
                self._settle(message)
            case Confirmations():
                self._confirmations(message)
            case Reconfigured(exactly_once=exactly_once):
                self.exactly_once = exactly_once
                self.dead_letter = message.dead_letter
            case AckResult(acked=acked, invalid=invalid):
                confirm_id, refused, attempts = self.confirms.popleft()
                self.acked.update((tag, attempts[tag]) for tag in acked)
                self.ctx.send(self.subscription, Confirmed(confirm_id, self.number, refused + invalid))
                self._maybe_stop()
            case Detach():
                self._detach("stream ended")
            case Close(reason=reason):
                self._detach(reason)
            case Rebind():
                self._rebind(message)
            case _Check():
                self.check = None
                self._maybe_stop()
            case _IdleOver(serial=serial):
                self.idle_timer = None
                if self.waiter is None and serial == self.waiter_serial:
                    self._detach("stream idle: its client stopped asking")

    def _delivered(self, deliveries: tuple[Delivery, ...]) -> None:
        """Buffer what the consumer delivered (one delivery, or one pull's whole), for the next answer."""
        if self.ctx.sender != self.consumer:
            return  # from a consumer of an earlier generation, already stopped
        if self.detached:
            if self.consumer is not None:
                self.ctx.send(self.consumer, Release(0, tuple(delivery.tag for delivery in deliveries)))
            return
        outstanding = self.outstanding
        for delivery in deliveries:
            outstanding[delivery.tag] = delivery.delivery_count
        self.latest_deadline = max(self.latest_deadline, self.ctx.now() + self.ack_deadline_s)
        self.buffer.extend(deliveries)
        if self.waiter is not None and not self.flush_pending:
            self.flush_pending = True
            if self.pull is not None:
                self.ctx.schedule(_PULL_LINGER_S, _Flush())
            else:
                self.ctx.send(self.ctx.self_ref, _Flush())

    def _next_batch(self, wait_s: float) -> None:
        if self.closed_reason:
            self.ctx.reply(StreamClosed(self.closed_reason))
            return
        self.waiter = self.ctx.sender
        self.waiter_serial += 1
        if self.idle_timer is not None:
            self.ctx.cancel(self.idle_timer)
            self.idle_timer = None
        if self.buffer or self.confirmations is not None:
            self._answer()
        else:
            self.wait_timer = self.ctx.schedule(wait_s, _WaitOver(self.waiter_serial))

    def _confirmations(self, confirmations: Confirmations) -> None:
        """Outcomes of settlements sent on the stream: they go out with the next response, soon."""
        if self.pull is not None or self.closed_reason or not self.exactly_once:
            return  # Pub/Sub confirms only on exactly-once subscriptions
        pending = self.confirmations
        self.confirmations = confirmations if pending is None else pending + confirmations
        if self.waiter is not None and not self.flush_pending:
            self.flush_pending = True
            self.ctx.send(self.ctx.self_ref, _Flush())

    def _answer(self) -> None:
        waiter = self.waiter
        assert waiter is not None
        self.waiter = None
        if self.wait_timer is not None:
            self.ctx.cancel(self.wait_timer)
            self.wait_timer = None
        deliveries, self.buffer = self._unlapsed(self.buffer), []
        if self.pull is not None:  # one response: what fits its bytes; the rest goes back unseen (_detach)
            deliveries, self.buffer = _fitting(deliveries, self.pull.max_bytes)
        elif len(deliveries) > STREAM_RESPONSE_MAX:
            deliveries, self.buffer = deliveries[:STREAM_RESPONSE_MAX], deliveries[STREAM_RESPONSE_MAX:]
        issue, subscription, generation, number = self.codec.issue, self.subscription_id, self.generation, self.number
        ack_ids = tuple(ack_id_unchecked(subscription, generation, number, d.tag, d.delivery_count,
                                         d.message.message_id) for d in deliveries)
        texts = tuple(issue(ack_id) for ack_id in ack_ids)
        received = tuple((text, from_broker(d.message), d.delivery_count)
                         for text, d in zip(texts, deliveries, strict=True))
        if texts:
            # before the batch goes out: the subscription has them before any ack of them can come
            self.ctx.send(self.subscription, _Issued(texts, ack_ids))
        confirmations, self.confirmations = self.confirmations, None
        self.ctx.send(waiter, batch_unchecked(received, self.exactly_once, self.ordering, confirmations,
                                              self.dead_letter))
        if self.pull is not None:
            self._detach("pull answered")
        elif not self.detached:
            self._await_client()

    def _unlapsed(self, buffered: list[Delivery]) -> list[Delivery]:
        """The buffered deliveries whose lease still runs; the others are forgotten, not handed out.

        A delivery waits here until its client asks; if its lease lapsed meanwhile, the queue has
        it back and may have given it to another client, whose exactly-once ack may even be
        confirmed already: handing it out now would deliver it again.
        """
        now = self.ctx.now()
        kept = [d for d in buffered if d.deadline is None or d.deadline > now]
        if len(kept) < len(buffered):
            outstanding = self.outstanding
            for d in buffered:
                if d.deadline is not None and d.deadline <= now and outstanding.get(d.tag) == d.delivery_count:
                    del outstanding[d.tag]
        return kept

    def _settle(self, request: SettleTags) -> None:
        """Settle the deliveries named: a tag whose current delivery is another attempt is left alone."""
        consumer = self.consumer
        if request.generation != self.generation or consumer is None:
            if request.confirm_id is not None:
                self.ctx.send(self.subscription, Confirmed(request.confirm_id, self.number, request.tags))
            return
        outstanding = self.outstanding
        named = tuple(dict.fromkeys(zip(request.tags, request.attempts, strict=True)))  # an id sent twice: once
        current = [(tag, attempt) for tag, attempt in named if outstanding.get(tag) == attempt]
        held = tuple(tag for tag, _ in current)
        if request.kind is SettleKind.ACK:
            for tag in held:
                del outstanding[tag]
            if request.confirm_id is None:
                if held:
                    self.ctx.send(consumer, Ack(0, held))
            else:
                taken = set(held)
                refused = tuple(tag for tag, attempt in named if tag not in taken and (tag, attempt) not in self.acked)
                if held:
                    self.confirms.append((request.confirm_id, refused, dict(current)))
                    # Named by attempt: the queue may have given a lapsed message out again under the
                    # same tag (its Delivered still on its way here); this ack must not settle that one.
                    self.ctx.send(consumer, Ack(0, held, confirm=True, attempts=tuple(a for _, a in current)))
                else:
                    self.ctx.send(self.subscription, Confirmed(request.confirm_id, self.number, refused))
        elif held:
            seconds = request.seconds
            if seconds == 0:
                attempts = tuple(outstanding.pop(tag) for tag in held)
                # A nack names its delivery: if the queue gave the message out again under this tag
                # meanwhile, the nack (on its way) leaves that later delivery alone.
                self.ctx.send(consumer, Nack(0, held, None, attempts))
            else:
                self.latest_deadline = max(self.latest_deadline, self.ctx.now() + seconds)
                self.ctx.send(consumer, ModifyAckDeadline(0, held, float(seconds)))
        self._maybe_stop()

    def _detach(self, reason: str) -> None:
        if not self.closed_reason:
            self.closed_reason = reason
        if self.waiter is not None and self.pull is None:
            self.ctx.send(self.waiter, StreamClosed(reason))
            self.waiter = None
        if self.detached:
            return
        self.detached = True
        if self.idle_timer is not None:
            self.ctx.cancel(self.idle_timer)
            self.idle_timer = None
        if self.consumer is not None:
            self.ctx.send(self.consumer, Suspend())
            if self.buffer:  # never handed out: back to the queue at once
                self.ctx.send(self.consumer, Release(0, tuple(d.tag for d in self.buffer)))
                for delivery in self.buffer:
                    self.outstanding.pop(delivery.tag, None)
                self.buffer = []
        self._maybe_stop()

    def _maybe_stop(self) -> None:
        if not self.detached or self.confirms:
            return
        now = self.ctx.now()
        if not self.outstanding or now >= self.latest_deadline:
            self.ctx.stop()
        elif self.check is None:
            self.check = self.ctx.schedule(self.latest_deadline - now + 0.01, _Check())

    def _rebind(self, request: Rebind) -> None:
        for confirm_id, refused, _ in self.confirms:
            self.ctx.send(self.subscription, Confirmed(confirm_id, self.number, refused))
        self.confirms.clear()
        if self.consumer is not None:
            self.ctx.stop(self.consumer)
        self.generation = request.generation
        self.queue = request.queue
        self.exactly_once = request.exactly_once
        self.ordering = request.ordering
        self.dead_letter = request.dead_letter
        self.buffer = []
        self.outstanding = {}
        self.acked = set()
        if self.detached:
            self.consumer = None
            self.ctx.stop()
            return
        self._spawn_consumer()


@final
@attrs.define
class _Pending:
    """An exactly-once Acknowledge waiting for its bindings' confirmations."""

    reply_to: ActorRef | None
    waiting: dict[int, tuple[int, ...]]  # binding number -> its tags still unconfirmed
    invalid: list[str]
    texts: dict[tuple[int, int], str]  # (binding, tag) -> ack id text


@final
class _SubscriptionQueue(QueueActor):
    """The broker's queue under a subscription: durable, and its journal dropped once it stops for good.

    Durable (``QueueConfig(durable=True)``) so that a raise inside it costs nothing: the restart
    rebuilds every message, lease and consumer from its journal. Stopped for good (a Seek's new
    generation, the subscription deleted), it forgets the journal, which nobody will read again.
    """

    def on_stop(self) -> None:
        """Forget the journal (unless the server is only shutting down), then close as any queue does."""
        if not shutting_down(self.ctx.self_ref):
            self.ctx.journal.clear()
        super().on_stop()


def shutting_down(ref: ActorRef) -> bool:
    """True when ``ref`` stops because its system shuts down: its journal must outlive it (``data_dir``)."""
    termination = ref.termination
    return termination is not None and termination.reason == "shutdown"


@final
@attrs.frozen
class QueueGeneration:
    """A subscription's journal snapshot before the Seek log was journaled (``SeekLogState`` now): the generation."""

    generation: int


@final
class SubscriptionActor(ContainedActor):
    """One subscription: its queue (a child, rebuilt by Seek), its log, its bindings.

    Args:
        config: its settings.
        registry: where dead letters are published.
        number: its incarnation number, named by every ack id it issues (the registry never reuses one).
        codec: seals and verifies ack ids; an id that does not verify as this subscription's, for
            its current queue generation, settles nothing.

    On a disk store it journals its ``SeekLog`` (the Seek log, the confirmed exactly-once ack ids,
    the queue generation), so a new process recovers them; an exactly-once ack is answered only
    once its confirmation is synced.
    """

    def __init__(self, config: SubscriptionConfig, registry: ActorRef, number: int, codec: AckIdCodec,
                 *, pusher: Pusher | None = None) -> None:
        self.pusher = pusher  # makes a push subscription's requests (None: push_config is kept, nothing pushed)
        self.push_actor: ActorRef | None = None
        self.config = config
        self.registry = registry
        self.number = number
        self.codec = codec
        self.reader = AckIdReader(codec)  # a delivery's id is read at its receipt extension and its ack
        self.memory = SeekLog()
        self.journal: Journal | None = None  # on a disk store: the SeekLog's events
        self.event_bytes = 0  # message data held by the journal's events since its snapshot
        self.rebuild_batch: str | None = None  # the last message id of the batch a Seek's new queue must confirm
        # Exactly-once answers waiting for the journal's sync: (write number, asker, answer), in order.
        self.unsynced: deque[tuple[int, ActorRef, SettleOutcome]] = deque()
        self.synced_through = 0
        self.queue: ActorRef | None = None
        self.stats_askers: deque[ActorRef] = deque()  # asked GetStats, waiting for the queue's QueueStats
        self.bindings: dict[int, ActorRef] = {}
        self.by_ref: dict[ActorRef, int] = {}
        self.next_binding = 0
        self.pending: dict[int, _Pending] = {}
        self.next_confirm = 0
        # Batches sent to the queue and not yet confirmed, oldest first: (the batch's last message
        # id, Route token, topic). The id pairs an answer with its batch even after a queue restart
        # lost the answers of the batches before it.
        self.routed: deque[tuple[str, int, ActorRef | None]] = deque()

    # The Seek log's state, under the names the handlers (and the planted bugs' variants) use.
    @property
    def generation(self) -> int:
        """The current queue generation (each Seek starts a new one)."""
        return self.memory.generation

    @property
    def log(self) -> OrderedDict[str, PubMessage]:
        """Message id -> message of every message a Seek may replay (``SeekLog.messages``)."""
        return self.memory.messages

    @log.setter
    def log(self, messages: OrderedDict[str, PubMessage]) -> None:
        self.memory.messages = messages

    @property
    def acked(self) -> dict[str, None]:
        """With retain_acked_messages: the acked messages still in the log."""
        return self.memory.acked

    @property
    def confirmed(self) -> OrderedDict[str, None]:
        """Exactly-once: ack ids whose ack was confirmed (bounded), so a repeated ack is confirmed again."""
        return self.memory.confirmed

    def on_start(self) -> None:
        """Create the first queue generation, or, recovered from disk, the one the journal names.

        A Seek whose new queue had not confirmed the log's messages before the process died is
        done again, into a fresh generation: the log, journaled before the queue, is the truth.
        """
        if self.ctx.journal_on_disk:
            journal = self.journal = self.ctx.journal
            snapshot = journal.snapshot
            if isinstance(snapshot, SeekLogState):
                self.memory = SeekLog.restore(snapshot)
            elif isinstance(snapshot, QueueGeneration):  # written before the Seek log was journaled
                self.memory.generation = snapshot.generation
            for event in journal:
                try:
                    self.memory.replay(event)  # type: ignore[arg-type]
                except (ValueError, TypeError) as error:  # a start that raised would be restarted into the same
                    logger.error("%s skips an event of its journal it cannot replay: %r", journal.path, error)
        self.queue = self._spawn_queue()
        if self.memory.rebuilding:
            self._rebuild()
        self._sync_push(None)

    def _record(self, event: Event, data_bytes: int = 0) -> None:
        """Journal ``event`` (on a disk store) before the handler applies it; ``data_bytes``: its message data."""
        journal = self.journal
        if journal is None:
            return
        journal.append(event)
        self.event_bytes += data_bytes

    def _compact_if_due(self) -> None:
        """Replace the journal by a snapshot once its events outgrow the state (after the change is applied)."""
        journal = self.journal
        if journal is not None and self.memory.needs_compaction(len(journal), self.event_bytes):
            journal.save_snapshot(self.memory.snapshot())
            self.event_bytes = 0

    def _answer_settle(self, reply_to: ActorRef | None, outcome: SettleOutcome) -> None:
        """Answer an exactly-once ack once every journal write so far is synced (what it confirmed stays so)."""
        if reply_to is None:
            return
        journal = self.journal
        if journal is None or (not self.unsynced and journal.last_write <= self.synced_through):
            self.ctx.send(reply_to, outcome)
            return
        if not self.unsynced or self.unsynced[-1][0] < journal.last_write:
            journal.when_synced(self.ctx.self_ref)
        self.unsynced.append((journal.last_write, reply_to, outcome))

    def _synced(self, through: int) -> None:
        self.synced_through = max(self.synced_through, through)
        unsynced = self.unsynced
        while unsynced and unsynced[0][0] <= through:
            _, reply_to, outcome = unsynced.popleft()
            self.ctx.send(reply_to, outcome)

    def on_stop(self) -> None:
        """Stopped for good (deleted), the journal goes too; a shutdown keeps it for the next start."""
        if self.ctx.journal_on_disk and not shutting_down(self.ctx.self_ref):
            self.ctx.journal.clear()

    def _queue_config(self) -> QueueConfig:
        config = self.config
        dead_letter = config.dead_letter
        retry = config.retry
        return QueueConfig(
            name=f"queue-{self.generation}",
            priorities=1,
            ack_deadline_s=float(config.ack_deadline_s),
            max_deliveries=dead_letter.max_delivery_attempts if dead_letter else None,
            retry=RetryPolicy(retry.min_backoff_s, retry.max_backoff_s) if retry else None,
            max_message_bytes=_MAX_MESSAGE_BYTES,
            dead_letter=self.ctx.self_ref if dead_letter else None,
            durable=True,
        )

    def _spawn_queue(self) -> ActorRef:
        queue_config = self._queue_config()
        return self.ctx.spawn(lambda: _SubscriptionQueue(queue_config), name=queue_config.name)

    def handle(self, message: Any) -> None:
        """Route messages into the queue; serve the glue's requests; forward dead letters."""
        match message:
            case _Issued(texts=texts, ack_ids=ack_ids):
                self.reader.learn(texts, ack_ids)
                return
            case Route(messages=messages, token=token):
                self._route(messages, token)
            case Envelope(request=request, reply_to=reply_to):
                self._serve(request, reply_to)
            case Confirmed():
                self._confirmed(message)
            case BatchPublished(outcomes=outcomes) if self.ctx.sender == self.queue:
                # (An answer of a queue a Seek replaced, sent before it stopped, names none of the batches
                # routed since: taken for the oldest of them, it would drop them all.)
                self._batch_kept(outcomes[-1].message_id if outcomes else None)
            case Publish(message=dead):
                self._dead_letter(dead)
            case Terminated(ref=ref):
                self._binding_gone(ref)
            case UseConfig(config=config):
                self._use_config(config)
            case TopicGone():
                self.config = attrs.evolve(self.config, topic="_deleted-topic_")
            case GetStats():  # the front's metrics: the queue answers, in the order asked
                if self.queue is not None and self.ctx.sender is not None:
                    self.stats_askers.append(self.ctx.sender)
                    self.ctx.send(self.queue, GetStats())
            case QueueStats():
                if self.stats_askers:
                    self.ctx.send(self.stats_askers.popleft(), message)
            case CountBindings(name=name, activity=activity):  # the registry's expiry check
                self.ctx.send(self.registry, BindingCount(name, activity, len(self.bindings)))
            case Shutdown():
                for ref in self.bindings.values():
                    self.ctx.send(ref, Close("server shutting down"))
            case DetachFromTopic():  # its streams end (FAILED_PRECONDITION); no new one opens
                for ref in self.bindings.values():
                    self.ctx.send(ref, Close(DETACHED_REASON))
            case JournalSynced(through=through):
                self._synced(through)
        self._compact_if_due()

    # --- messages in ----------------------------------------------------------------------

    def _route(self, messages: tuple[PubMessage, ...], token: int) -> None:
        config = self.config
        ordered = config.enable_message_ordering
        ttl = config.retention_s
        try:
            batch = tuple(to_broker(m, ordered, ttl) for m in messages)
        except (TypeError, ValueError):
            messages, batch = self._storable(messages)
            if not messages:
                if token:
                    self.ctx.reply(Routed(token, self.config.name))
                return
        if self.journal is not None:  # before the queue's own write: a crash never keeps its and not this
            self._record((ROUTE, rows(messages), config.retention_s), sum(len(m.data) for m in messages))
        self.memory.route(messages, config.retention_s)
        assert self.queue is not None
        self.ctx.send(self.queue, PublishBatch(batch))
        self.routed.append((batch[-1].message_id, token, self.ctx.sender))

    def _batch_kept(self, last_id: str | None) -> None:
        """The queue confirmed a batch (on disk: synced): tell its topic, which confirms the publish.

        Batches before it whose answers never came (the queue restarted meanwhile) stay unconfirmed:
        their publishers retry. ``None`` confirms the oldest batch, whatever it is.
        """
        routed = self.routed
        while routed:
            batch_id, token, topic = routed.popleft()
            if last_id is None or batch_id == last_id:
                if token and topic is not None:
                    self.ctx.send(topic, Routed(token, self.config.name))
                elif batch_id == self.rebuild_batch:  # a Seek's new queue holds the log's messages
                    self.rebuild_batch = None
                    self._record((REBUILT,))
                    self.memory.rebuilt()
                return

    def _storable(self, messages: tuple[PubMessage, ...]) -> tuple[tuple[PubMessage, ...], tuple[Message, ...]]:
        """The messages of a route the queue can take, one by one: one it cannot take is logged, not the rest.

        The topic refuses such a publish whole before it confirms it (``unpublishable``), so this
        is defence in depth: a message that still gets here cannot stop the others of its batch.
        """
        config = self.config
        kept: list[PubMessage] = []
        converted: list[Message] = []
        for message in messages:
            try:
                converted.append(to_broker(message, config.enable_message_ordering, config.retention_s))
            except (TypeError, ValueError) as error:
                path = self.ctx.self_ref.path
                logger.error("%s cannot store message %s, which its topic should have refused: %r", path,
                          message.message_id, error)
                if self.ctx.tracing:
                    self.ctx.note(HandlerFailed(path, f"Route of message {message.message_id}", repr(error)[:200]))
            else:
                kept.append(message)
        return tuple(kept), tuple(converted)

    def _dead_letter(self, dead: Message) -> None:
        headers = dict(dead.headers)
        count = headers.pop(DELIVERY_COUNT, 0)
        headers.pop(DEAD_LETTER_REASON, None)
        headers.pop(DEAD_LETTER_QUEUE, None)
        original = from_broker(attrs.evolve(dead, headers=headers))
        if original.message_id in self.log or original.message_id in self.acked:
            self._record((DROP, original.message_id))
            self.memory.drop(original.message_id)
        policy = self.config.dead_letter
        if policy is None:
            return
        project, _, short = self.config.name.partition("/subscriptions/")
        attributes = (  # replaced, not repeated: a broker Message refuses a key given twice
            *(pair for pair in original.attributes if pair[0] not in _DEAD_LETTER_SOURCE),
            ("CloudPubSubDeadLetterSourceDeliveryCount", str(count)),
            ("CloudPubSubDeadLetterSourceSubscription", short),
            ("CloudPubSubDeadLetterSourceSubscriptionProject", project.removeprefix("projects/")),
        )
        forwarded = attrs.evolve(original, attributes=attributes, message_id="")
        self.ctx.send(self.registry, PublishInternal(policy.topic, (forwarded,)))

    # --- the glue's requests ----------------------------------------------------------------

    def _serve(self, request: object, reply_to: ActorRef | None) -> None:
        refused = request_refusal(request)  # the front's limits: a refused request changes nothing
        if refused is not None:
            if reply_to is not None:
                self.ctx.send(reply_to, Failed("INVALID_ARGUMENT", refused))
            return
        if (self.config.push is not None and isinstance(request, OpenStream | PullMessages)
                and reply_to != self.push_actor):
            if reply_to is not None:  # as Pub/Sub answers a pull on a push subscription
                self.ctx.send(reply_to, Failed("FAILED_PRECONDITION",
                                               f"{self.config.name} is a push subscription: pulling it is not "
                                               "supported; ModifyPushConfig with an empty push_config makes it pull"))
            return
        match request:
            case OpenStream(settings=settings):
                ref = self._bind(
                    ConsumerSettings(prefetch_messages=settings.max_messages or UNLIMITED_MESSAGES,
                                     prefetch_bytes=settings.max_bytes or UNLIMITED_BYTES),
                    settings.ack_deadline_s or self.config.ack_deadline_s,
                    None,
                    None,
                )
                if reply_to is not None:
                    self.ctx.send(reply_to, StreamOpened(ref, self.config.exactly_once,
                                                         self.config.enable_message_ordering))
            case PullMessages(max_messages=max_messages, max_bytes=max_bytes):
                self._bind(ConsumerSettings(prefetch_messages=max_messages, prefetch_bytes=max_bytes),
                           self.config.ack_deadline_s, request, reply_to)
            case Settle():
                self._settle(request, reply_to)
            case Seek(time_ns=time_ns, now_ns=now_ns):
                self._seek(time_ns, now_ns)
                if reply_to is not None:
                    self.ctx.send(reply_to, Done())
            case Retained(seek=seek, messages=messages):
                self._retained(messages)
                self._seek(seek.time_ns, seek.now_ns)
                if reply_to is not None:
                    self.ctx.send(reply_to, Done())
            case _ if serve_on_subscription(self, request, reply_to):
                pass
            case _:
                if reply_to is not None:
                    self.ctx.send(reply_to, Failed("UNIMPLEMENTED", f"{type(request).__name__} on a subscription"))

    def _bind(
        self, settings: ConsumerSettings, deadline: int, pull: PullMessages | None, reply_to: ActorRef | None
    ) -> ActorRef:
        self.next_binding += 1
        number = self.next_binding
        queue, me, config = self.queue, self.ctx.self_ref, self.config
        assert queue is not None
        ack_ids = (self.codec, self.number, self.generation)
        ref = self.ctx.spawn(
            lambda: Binding(number, ack_ids, queue, me, settings, deadline, config.exactly_once,
                            config.enable_message_ordering, pull, reply_to, dead_letter=config.dead_letter is not None),
            name=f"binding-{number}",
        )
        self.bindings[number] = ref
        self.by_ref[ref] = number
        self.ctx.watch(ref)
        return ref

    def _settle(self, request: Settle, reply_to: ActorRef | None) -> None:
        """Route each ack id to its binding, once its seal shows this subscription issued it.

        An id that does not verify (forged, of another subscription or of a deleted one, of an
        earlier queue generation, or of a binding that is gone) settles nothing and leaves the
        Seek log alone; only an exactly-once subscription reports it, as Pub/Sub does.
        """
        config = self.config
        confirm = config.exactly_once and request.kind is SettleKind.ACK
        groups: dict[int, list[AckId]] = {}
        invalid: list[str] = []
        texts: dict[tuple[int, int], str] = {}
        reader, number, generation, bindings = self.reader, self.number, self.generation, self.bindings
        acking = request.kind is SettleKind.ACK
        # An ack or a nack (a zero deadline) settles: its ids are forgotten; an extension's are remembered.
        read = reader.take if acking or request.seconds == 0 else reader.read
        confirmed = self.confirmed if confirm else {}
        acked_ids: list[str] = []
        for text in request.ack_ids:
            if text in confirmed:
                continue  # acked and confirmed before: confirmed again, and nothing to settle
            ack_id = read(text)
            if (ack_id is None or ack_id.subscription != number or ack_id.generation != generation
                    or ack_id.binding not in bindings):
                invalid.append(text)
                continue
            groups.setdefault(ack_id.binding, []).append(ack_id)
            texts[(ack_id.binding, ack_id.tag)] = text
            if acking:
                acked_ids.append(ack_id.message_id)
        if acked_ids:
            retain = config.retain_acked_messages
            self._record((SETTLE, tuple(acked_ids), retain))
            self.memory.settle(acked_ids, retain)
        confirm_id = None
        if confirm:
            self.next_confirm += 1
            confirm_id = self.next_confirm
            self.pending[confirm_id] = _Pending(reply_to, {}, invalid, texts)
        for binding, ids in groups.items():
            tags = tuple(ack_id.tag for ack_id in ids)
            attempts = tuple(ack_id.attempt for ack_id in ids)
            if confirm_id is not None:
                self.pending[confirm_id].waiting[binding] = tags
            self.ctx.send(bindings[binding], SettleTags(request.kind, generation, tags, attempts,
                                                         0 if confirm else request.seconds, confirm_id))
        if confirm_id is not None:
            self._finish_if_done(confirm_id)
        elif reply_to is not None:
            # Exactly-once: an ack id that does not count is reported (Pub/Sub does); otherwise ignored.
            self.ctx.send(reply_to, SettleOutcome(tuple(invalid) if config.exactly_once else ()))

    def _confirmed(self, message: Confirmed) -> None:
        pending = self.pending.get(message.confirm_id)
        if pending is None:
            return
        waiting = pending.waiting.get(message.binding)
        if waiting is not None:
            del pending.waiting[message.binding]  # one SettleTags per binding and request
        for tag in message.invalid:
            pending.invalid.append(pending.texts.get((message.binding, tag), f"{message.binding}-?-{tag}"))
        self._finish_if_done(message.confirm_id)

    def _finish_if_done(self, confirm_id: int) -> None:
        pending = self.pending[confirm_id]
        if pending.waiting:
            return
        del self.pending[confirm_id]
        refused = set(pending.invalid)
        newly = tuple(text for text in pending.texts.values() if text not in refused)
        if newly:
            self._record((CONFIRM, newly))
            self.memory.confirm(newly)
        self._answer_settle(pending.reply_to, SettleOutcome(tuple(pending.invalid)))

    def _binding_gone(self, ref: ActorRef) -> None:
        number = self.by_ref.pop(ref, None)
        if number is None:
            return
        del self.bindings[number]
        for confirm_id, pending in list(self.pending.items()):
            tags = pending.waiting.pop(number, None)
            if tags is not None:
                pending.invalid.extend(pending.texts.get((number, tag), str(tag)) for tag in tags)
                self._finish_if_done(confirm_id)

    # --- Seek (a new queue generation) and updates (in place) ----------------------------------

    def _retained(self, messages: tuple[PubMessage, ...]) -> None:
        """Add the topic's retained messages to the log (a Seek may replay them), keeping publish order.

        They may predate the subscription, or have been acked and dropped from the log here: a Seek
        with topic retention replays them all, as in Pub/Sub.
        """
        log = self.log
        new = [message for message in messages if message.message_id not in log]
        if new:
            self._record((RETAINED, rows(new)), sum(len(m.data) for m in new))
            self.memory.add_retained(new)

    def _seek(self, time_ns: int, now_ns: int) -> None:
        """Messages published before ``time_ns`` count as acked, later ones (still retained) as not."""
        retain = self.config.retain_acked_messages
        self._record((SEEK, time_ns, now_ns, retain))
        self.memory.seek(time_ns, now_ns, retain)
        self._rebuild()

    def _use_config(self, config: SubscriptionConfig) -> None:
        old = self.config
        self.config = config
        if not config.retain_acked_messages and self.acked:
            self._record((UNRETAIN,))
            self.memory.unretain()
        # In place, not as a new queue generation: the messages held by clients keep their leases
        # (and ack ids). A new retention applies to messages routed from now on.
        if any(getattr(old, name) != getattr(config, name) for name in ("ack_deadline_s", "dead_letter", "retry")):
            assert self.queue is not None
            self.ctx.send(self.queue, Reconfigure(self._queue_config()))
        dead_letter = config.dead_letter is not None
        if old.exactly_once != config.exactly_once or (old.dead_letter is not None) != dead_letter:
            reconfigured = Reconfigured(config.exactly_once, dead_letter)
            for ref in self.bindings.values():
                self.ctx.send(ref, reconfigured)
        self._sync_push(old)

    def _sync_push(self, old: SubscriptionConfig | None) -> None:
        """Start, retune or stop the push actor as the config turned push, changed, or turned pull.

        Turned push, the pull streams open end (their clients' reconnections are refused).
        """
        config, terms = self.config, push_terms(self.config)
        if terms is None or self.pusher is None:
            if self.push_actor is not None:
                self.ctx.stop(self.push_actor)
                self.push_actor = None
            return
        if self.push_actor is not None:
            if old is not None and push_terms(old) != terms:
                self.ctx.send(self.push_actor, terms)
            return
        for ref in self.bindings.values():
            self.ctx.send(ref, Close(f"{config.name} became a push subscription"))
        name, me, pusher = config.name, self.ctx.self_ref, self.pusher
        self.next_binding += 1  # a fresh name: a stopped push actor may still be winding down
        self.push_actor = self.ctx.spawn(lambda: PushActor(name, me, pusher, terms), name=f"push-{self.next_binding}")

    def _rebuild(self) -> None:
        """A new queue generation holding every retained, unacked message, in publish order.

        On a disk store the generation is journaled as unfinished until its queue confirms the
        batch (``REBUILT``): a crash in between makes the next start rebuild again from the log.
        """
        if self.queue is not None:
            self.ctx.stop(self.queue)
        self.rebuild_batch = None
        while self.routed:  # the old queue answers no more: what it held is in the log, replayed below
            self._batch_kept(None)
        self._record((GENERATION, self.generation + 1))
        self.memory.new_generation()
        queue = self._spawn_queue()
        self.queue = queue
        config = self.config
        ordered = config.enable_message_ordering
        kept = [to_broker(message, ordered, left_s) for message, left_s in self.memory.unacked(config.retention_s)]
        if kept:
            self.ctx.send(queue, PublishBatch(tuple(kept)))
            self.routed.append((kept[-1].message_id, 0, None))
            self.rebuild_batch = kept[-1].message_id
        else:
            self._record((REBUILT,))
            self.memory.rebuilt()
        rebind = Rebind(queue, self.generation, config.exactly_once, config.enable_message_ordering,
                        config.dead_letter is not None)
        for ref in self.bindings.values():
            self.ctx.send(ref, rebind)
