"""ConsumerActor: the broker-side consumer of seed 000, holding credit and carrying acks.

It subscribes on start, tells the queue when it starts or stops wanting work
(credit, suspend / resume), pulls while notified until the queue says exhausted,
and hands each delivery to its client: an actor (which answers with ``Ack`` /
``Nack`` / ``Release`` / ``ModifyAckDeadline`` sent back to this consumer) or a
callback run as a job off the actor (returning acks, raising nacks). A callback that
raises is logged at WARNING with its traceback, and its nack carries the error
(``DeliveryError``) to the queue, which puts the last one on the message's dead letter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, Terminated, TimerHandle, quote
from conveyor.runtime.validators import optional_positive_seconds, positive_int

from ._client_protocol import (
    Ack,
    AckResult,
    Delivered,
    ModifyAckDeadline,
    Nack,
    Pull,
    Rejoin,
    Rejoined,
    Release,
    SetInterest,
    Subscribe,
    Subscribed,
)
from ._manager_protocol import NotifyWork
from ._selectors import MatchAll, Selector, parse_selector
from ._values import Delivery, DeliveryError

log = logging.getLogger("conveyor.broker")


@final
@attrs.frozen
class Suspend:
    """Stop taking work (flow control) until ``Resume``."""


@final
@attrs.frozen
class Resume:
    """Take work again after ``Suspend``."""


@final
@attrs.frozen
class ConsumerSettings:
    """How a consumer subscribes.

    Attributes:
        prefetch_messages: credit in messages: most deliveries unsettled at once.
        prefetch_bytes: credit in bytes (the first message of a pull may exceed it).
        priority: consumer priority; higher is served first.
        selector: which messages it wants (see ``parse_selector``).
        acquiring: False for a browser, which sees messages without taking them.
        lease_s: how long each message it takes is leased for; None: the queue's ``ack_deadline_s``.
            A client that would extend every lease at once to its own deadline (a Pub/Sub stream)
            asks for it here instead: one lease per delivery, not a lease and a deadline change.
    """

    prefetch_messages: int = attrs.field(default=100, validator=positive_int)
    prefetch_bytes: int = attrs.field(default=16 * 1024 * 1024, validator=positive_int)
    priority: int = 0
    selector: Selector = attrs.field(factory=MatchAll, converter=parse_selector)
    acquiring: bool = True
    lease_s: float | None = attrs.field(default=None, validator=optional_positive_seconds)

    def __attrs_post_init__(self) -> None:
        # Checked here, not first in on_start's Subscribe, where the consumer would already be spawned.
        if type(self.priority) is not int:
            msg = f"ConsumerSettings.priority must be an int (higher is served first), got {quote(self.priority)}"
            raise ValueError(msg)
        if type(self.acquiring) is not bool:
            msg = f"ConsumerSettings.acquiring must be a bool (False for a browser), got {quote(self.acquiring)}"
            raise ValueError(msg)


Callback = Callable[[Delivery], object]


@final
@attrs.frozen
class _FlushAcks:
    """The consumer's note to itself: forward the acks coalesced since it was sent."""


_FLUSH_ACKS = _FlushAcks()

SUBSCRIBE_RETRIES_S = (1.0, 2.0, 4.0, 8.0, 16.0)
"""Waits for ``Subscribed`` before each ``Subscribe`` sent again (then the consumer stops asking): a
subscribe can die with a queue that failed handling it (a durable queue's disk error)."""


@final
@attrs.frozen
class _SubscribeAgain:
    """The consumer's timer: no ``Subscribed`` came within ``SUBSCRIBE_RETRIES_S[attempt]``."""

    attempt: int
_DIRECT_AFTER_LONE_NOTE = 8
"""After a ``_FlushAcks`` that carried a single ack, forward this many acks at once before trying again."""


@final
class ConsumerActor(Actor):
    """One subscription to one queue, on behalf of one client.

    Plain acks from the client (``Ack`` without ``confirm``) are coalesced: their credit
    returns at once, but the ack itself waits in ``pending_acks``. The first one puts a
    ``_FlushAcks`` note to itself at the back of its mailbox, and the acks that arrive before
    the note comes round travel to the queue as one ``Ack(tags)`` (RabbitMQ's "multiple" ack,
    made by the consumer for the client). Whatever else this consumer sends the queue (a
    ``Pull`` or ``SetInterest`` that uses the returned credit, a ``Nack``, a confirmed
    ``Ack``...) sends the pending acks first, so the queue sees every settlement in the
    client's order, and never a pull for credit it has not seen returned. An ack that
    settles everything the client holds goes at once (no later ack could join it); so do the
    next ``_DIRECT_AFTER_LONE_NOTE`` acks after a note that caught no second ack (a schedule
    that hands over one message at a time, like the Simulation's, gains nothing from the
    note). No clock is read, and an ack waits at most one pass over this consumer's mailbox;
    a stop forwards what is still pending.

    Args:
        queue: the QueueActor to consume from.
        client: an actor that receives each ``Delivery`` and answers with ``Ack`` etc.; or
            a callback, run as a job per delivery: returning acks it, raising nacks it.
        settings: credit, priority, selector, browser or not.
        batches: an actor client gets the deliveries of each pull as the queue's one ``Delivered``
            (in order; a lone delivery still comes as itself) instead of one ``Delivery`` message
            each: a client on another thread is woken once per batch.
    """

    def __init__(self, queue: ActorRef, client: ActorRef | Callback, settings: ConsumerSettings | None = None,
                 *, batches: bool = False) -> None:
        if not isinstance(queue, ActorRef):
            msg = f"ConsumerActor queue must be an ActorRef, got {type(queue).__qualname__}"
            raise TypeError(msg)
        if not isinstance(client, ActorRef) and not callable(client):
            msg = f"ConsumerActor client must be an ActorRef or a callable, got {type(client).__qualname__}"
            raise TypeError(msg)
        if type(batches) is not bool:
            msg = f"ConsumerActor batches must be True or False, got {type(batches).__qualname__}"
            raise TypeError(msg)
        self.queue = queue
        self.client = client
        self.batches = batches
        self.settings = settings or ConsumerSettings()
        self.consumer_id: int | None = None
        self.outstanding: dict[int, int] = {}  # tag -> size, unsettled deliveries
        # Outstanding tags last delivered as a redelivery -> that delivery_count (absent: 1). A nack
        # naming an older attempt is stale: the queue ignores it, so it frees no credit here.
        self.attempts: dict[int, int] = {}
        self.outstanding_bytes = 0
        self.suspended = False
        self.pulling = False
        self.notified = False
        self.renotified = False  # NotifyWork came while a pull was out: it survives that pull's "exhausted"
        self.reported_interest = True
        self.jobs: dict[int, Delivery] = {}  # job id -> its delivery, for acquiring callback clients
        self.pending_acks: list[int] = []  # acked by the client, not yet forwarded to the queue
        self.flush_sent = False  # a _FlushAcks is in our mailbox
        self.direct_acks = 0  # acks to forward at once before trying a _FlushAcks again
        self.subscribe_retry: TimerHandle | None = None
        self.interest_notices: tuple[SetInterest, SetInterest] | None = None  # (False, True), built on first use
        self.last_pull: Pull | None = None  # sent again as is while the credit it asks for is the same

    def on_start(self) -> None:
        """Subscribe (again after a while if unanswered); watch an actor client so its death ends the subscription."""
        self._subscribe(0)
        if isinstance(self.client, ActorRef):
            self.ctx.watch(self.client)

    def _subscribe(self, attempt: int) -> None:
        settings = self.settings
        self.ctx.send(
            self.queue,
            Subscribe(self.ctx.self_ref, settings.priority, settings.selector, settings.acquiring, True,
                      settings.lease_s),
        )
        self.subscribe_retry = None
        if attempt < len(SUBSCRIBE_RETRIES_S):
            self.subscribe_retry = self.ctx.schedule(SUBSCRIBE_RETRIES_S[attempt], _SubscribeAgain(attempt + 1))

    def on_stop(self) -> None:
        """Forward the acks still coalescing (stopped before our ``_FlushAcks`` came round)."""
        self._flush_acks()

    def receive(self, message: Any) -> None:
        """Handle the queue's, the manager's and the client's messages."""
        cls = type(message)
        if cls is Ack:  # the hot path first: one per delivery
            if message.attempts:  # names its deliveries: an older one's ack frees no credit (see ``_current``)
                self._forward_settlement(message, self._current(message.tags, message.attempts))
            elif message.confirm or self.consumer_id is None:
                self._forward_settlement(message, message.tags)  # answered by AckResult: not coalesced
            else:
                self._coalesce(message)
            return
        if cls is _FlushAcks:
            self.flush_sent = False
            if len(self.pending_acks) <= 1:  # nothing joined the first ack
                self.direct_acks = _DIRECT_AFTER_LONE_NOTE
            self._flush_acks()
            return
        if cls is Delivered:
            self._delivered(message.deliveries, message.exhausted)
            return
        if cls is NotifyWork:
            if self.pulling:
                self.renotified = True
            self.notified = True
            self._pull()
            return
        match message:
            case Nack(tags=tags, attempts=attempts):
                self._forward_settlement(message, self._current(tags, attempts) if attempts else tags)
            case Release(tags=tags):
                self._forward_settlement(message, tags)
            case ModifyAckDeadline(tags=tags, seconds=seconds):
                self._forward_settlement(message, tags if seconds == 0 else ())
            case JobDone(job_id=job_id):
                done = self.jobs.pop(job_id, None)
                if done is not None:  # else a browser's job: it took nothing, so it settles nothing
                    self._forward_settlement(Ack(self._id(), (done.tag,)), (done.tag,))
            case JobFailed(job_id=job_id, error=error):
                self._callback_failed(self.jobs.pop(job_id, None), error)
            case _SubscribeAgain(attempt=attempt) if self.consumer_id is None:
                self._subscribe(attempt)
            case Rejoin(consumer_id=consumer_id, incarnation=incarnation) if consumer_id == self.consumer_id:
                self._rejoin(consumer_id, incarnation)
            case Subscribed(consumer_id=consumer_id):
                if self.subscribe_retry is not None:
                    self.ctx.cancel(self.subscribe_retry)
                    self.subscribe_retry = None
                self.consumer_id = consumer_id
                self._update_interest()
                self._pull()  # the manager's NotifyWork may have arrived before Subscribed
            case Suspend():
                self.suspended = True
                self._update_interest()
            case Resume():
                self.suspended = False
                self._update_interest()
                self._pull()
            case AckResult():
                if isinstance(self.client, ActorRef):
                    self.ctx.send(self.client, message)
            case Terminated(ref=ref) if ref == self.client:
                self._flush_acks()
                self.ctx.stop()  # the queue watches us and takes everything back

    def _callback_failed(self, delivery: Delivery | None, error: BaseException) -> None:
        """The callback raised: say so (traceback, message id), and nack the delivery with the error as data."""
        if delivery is None:  # a browser's job: nothing to nack
            log.warning("callback raised on a browsed message of %s; it stays in the queue", self.queue.path,
                        exc_info=(type(error), error, error.__traceback__))
            return
        log.warning("callback raised on message %r (queue %s, tag %d, delivery %d); nacking it",
                    delivery.message.message_id, delivery.queue, delivery.tag, delivery.delivery_count,
                    exc_info=(type(error), error, error.__traceback__))
        tag = delivery.tag
        self._forward_settlement(Nack(self._id(), (tag,), errors=(DeliveryError.of(error),)), (tag,))

    def _rejoin(self, consumer_id: int, incarnation: int) -> None:
        """The queue restarted: forget the pull in flight, say so, tell our interest afresh, pull.

        The new consumer manager knows nothing of earlier notices, so we pull once unasked (a
        queue answers any pull; one with nothing for us costs a round trip).
        """
        self.pulling = False
        self.renotified = False
        self.notified = True
        self._to_queue(Rejoined(consumer_id, incarnation))
        self.reported_interest = not self._wants_work()  # so the next line tells it, changed or not
        self._update_interest()
        self._pull()

    def _id(self) -> int:
        assert self.consumer_id is not None
        return self.consumer_id

    def _credit(self) -> tuple[int, int]:
        settings = self.settings
        if not settings.acquiring:
            return settings.prefetch_messages, settings.prefetch_bytes
        return (
            settings.prefetch_messages - len(self.outstanding),
            settings.prefetch_bytes - self.outstanding_bytes,
        )

    def _wants_work(self) -> bool:
        """Not suspended, with credit left in messages and in bytes (``_credit`` both > 0).

        Compared without building the credit tuple: it is asked after every delivery and ack.
        A browser's credit is its whole prefetch, which ``ConsumerSettings`` keeps >= 1.
        """
        if self.suspended:
            return False
        settings = self.settings
        return not settings.acquiring or (
            len(self.outstanding) < settings.prefetch_messages and self.outstanding_bytes < settings.prefetch_bytes
        )

    def _update_interest(self) -> None:
        consumer_id = self.consumer_id
        if consumer_id is None:
            return
        wants = self._wants_work()
        if wants != self.reported_interest:
            self.reported_interest = wants
            notices = self.interest_notices
            if notices is None:
                notices = self.interest_notices = (SetInterest(consumer_id, False), SetInterest(consumer_id, True))
            self._to_queue(notices[wants])

    def _pull(self) -> None:
        consumer_id = self.consumer_id
        if consumer_id is None or self.pulling or not self.notified or self.suspended:
            return
        messages, byte_credit = self._credit()  # credit read once: this is _wants_work's test too
        if messages > 0 and byte_credit > 0:
            self.pulling = True
            request = self.last_pull
            if request is None or request.max_messages != messages or request.max_bytes != byte_credit:
                request = self.last_pull = Pull(consumer_id, messages, byte_credit)
            self._to_queue(request)

    def _delivered(self, deliveries: tuple[Delivery, ...], exhausted: bool) -> None:
        self.pulling = False
        client = self.client
        if self.settings.acquiring:
            outstanding = self.outstanding
            added = 0
            for delivery in deliveries:
                tag = delivery.tag
                if tag not in outstanding:  # a lapsed lease redelivered: counted once
                    size = delivery.message.size
                    outstanding[tag] = size
                    added += size
                if delivery.delivery_count != 1:
                    self.attempts[tag] = delivery.delivery_count
            self.outstanding_bytes += added
        if isinstance(client, ActorRef):
            send = self.ctx.send
            if self.batches and len(deliveries) > 1:
                send(client, Delivered(deliveries[0].queue, deliveries, exhausted))  # the pull's, in order
            else:
                for delivery in deliveries:
                    send(client, delivery)
        elif self.settings.acquiring:
            for delivery in deliveries:
                self.jobs[self.ctx.run_job(client, delivery)] = delivery
        else:
            for delivery in deliveries:
                self.ctx.run_job(client, delivery)
        if exhausted:
            # The manager put us at the back of Interested, unless it notified us again since
            # (a NotifyWork and the queue's Delivered travel different channels, in either order).
            self.notified = self.renotified
        self.renotified = False
        self._update_interest()
        self._pull()

    def _coalesce(self, ack: Ack) -> None:
        """A plain ack from the client: its credit returns now, the ack itself joins ``pending_acks``."""
        tags = ack.tags
        self.pending_acks.extend(tags)
        self._settle(tags)
        if not self.flush_sent:
            if not self.outstanding:
                self._flush_acks(ack)  # nothing else is out with the client, so no later ack can join these
            elif self.direct_acks:
                self.direct_acks -= 1  # the last note caught no second ack: this schedule does not batch
                self._flush_acks(ack)
            else:
                self.flush_sent = True
                self.ctx.send(self.ctx.self_ref, _FLUSH_ACKS)  # at the back of our mailbox
        # Returned credit can only make us want work: a SetInterest(True) or a Pull that uses it
        # sends the pending acks first.
        if not self.reported_interest:
            self._update_interest()
        if self.notified and not self.pulling:
            self._pull()

    def _flush_acks(self, last: Ack | None = None) -> None:
        """Forward the coalesced acks as one ``Ack``, in the order the client made them.

        ``last`` is the client's plain ack whose tags joined ``pending_acks`` last: when they are
        all that is pending and it names this consumer, it is the very ``Ack`` to forward (an
        immutable value, equal to the one this would build), so none is built.
        """
        tags = self.pending_acks
        if tags:
            self.pending_acks = []
            if last is not None and len(last.tags) == len(tags) and last.consumer_id == self.consumer_id:
                self.ctx.send(self.queue, last)
            else:
                self.ctx.send(self.queue, Ack(self._id(), tuple(tags)))

    def _to_queue(self, message: object) -> None:
        """Send anything but a coalesced ack to the queue: the pending acks go first, so the queue
        sees every settlement in the client's order and hears of returned credit before it is used."""
        if self.pending_acks:
            self._flush_acks()
        self.ctx.send(self.queue, message)

    def _settle(self, tags: tuple[int, ...]) -> None:
        """Forget settled deliveries: their credit is free again."""
        pop = self.outstanding.pop
        freed = 0
        for tag in tags:
            size = pop(tag, None)
            if size is not None:
                freed += size
        self.outstanding_bytes -= freed
        attempts = self.attempts
        if attempts:
            for tag in tags:
                attempts.pop(tag, None)

    def _current(self, tags: tuple[int, ...], attempts: tuple[int, ...]) -> tuple[int, ...]:
        """The tags of a nack (or an ack with attempts) naming the latest delivery seen here; the queue drops the rest.

        A nack for an older delivery than one this consumer has since passed on leaves that tag
        outstanding. If the redelivery comes after the nack went, the tag is no longer outstanding
        then and counts as new, which is right: the queue ignored the stale nack.
        """
        latest = self.attempts
        if not latest:
            return tags
        return tuple(tag for tag, attempt in zip(tags, attempts, strict=True) if attempt >= latest.get(tag, 1))

    def _forward_settlement(self, request: Ack | Nack | Release | ModifyAckDeadline, settled: tuple[int, ...]) -> None:
        if self.consumer_id is None:
            return
        if request.consumer_id != self.consumer_id:
            request = attrs.evolve(request, consumer_id=self.consumer_id)
        self._to_queue(request)
        if settled:
            self._settle(settled)
            self._update_interest()
            self._pull()
