"""ConsumerActor: the broker-side consumer of seed 000, holding credit and carrying acks.

It subscribes on start, tells the queue when it starts or stops wanting work
(credit, suspend / resume), pulls while notified until the queue says exhausted,
and hands each delivery to its client: an actor (which answers with ``Ack`` /
``Nack`` / ``Release`` / ``ModifyAckDeadline`` sent back to this consumer) or a
callback run as a job off the actor (returning acks, raising nacks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, final

import attrs

from conveyor.runtime import Actor, ActorRef, JobDone, JobFailed, Terminated

from ._model import (
    Ack,
    AckResult,
    Delivered,
    Delivery,
    ModifyAckDeadline,
    Nack,
    NotifyWork,
    Pull,
    Release,
    SetInterest,
    Subscribe,
    Subscribed,
)
from ._selectors import MatchAll, Selector, parse_selector


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
    """

    prefetch_messages: int = 100
    prefetch_bytes: int = 16 * 1024 * 1024
    priority: int = 0
    selector: Selector = attrs.field(factory=MatchAll, converter=parse_selector)
    acquiring: bool = True

    def __attrs_post_init__(self) -> None:
        for name in ("prefetch_messages", "prefetch_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                msg = f"ConsumerSettings.{name} must be an int >= 1, got {value!r}"
                raise ValueError(msg)
        # Checked here, not first in on_start's Subscribe, where the consumer would already be spawned.
        if type(self.priority) is not int:
            msg = f"ConsumerSettings.priority must be an int (higher is served first), got {self.priority!r}"
            raise ValueError(msg)
        if type(self.acquiring) is not bool:
            msg = f"ConsumerSettings.acquiring must be a bool (False for a browser), got {self.acquiring!r}"
            raise ValueError(msg)


Callback = Callable[[Delivery], object]


@final
class ConsumerActor(Actor):
    """One subscription to one queue, on behalf of one client.

    Args:
        queue: the QueueActor to consume from.
        client: an actor that receives each ``Delivery`` and answers with ``Ack`` etc.; or
            a callback, run as a job per delivery: returning acks it, raising nacks it.
        settings: credit, priority, selector, browser or not.
    """

    def __init__(self, queue: ActorRef, client: ActorRef | Callback, settings: ConsumerSettings | None = None) -> None:
        if not isinstance(queue, ActorRef):
            msg = f"ConsumerActor queue must be an ActorRef, got {type(queue).__qualname__}"
            raise TypeError(msg)
        if not isinstance(client, ActorRef) and not callable(client):
            msg = f"ConsumerActor client must be an ActorRef or a callable, got {type(client).__qualname__}"
            raise TypeError(msg)
        self.queue = queue
        self.client = client
        self.settings = settings or ConsumerSettings()
        self.consumer_id: int | None = None
        self.outstanding: dict[int, int] = {}  # tag -> size, unsettled deliveries
        self.outstanding_bytes = 0
        self.suspended = False
        self.pulling = False
        self.notified = False
        self.renotified = False  # NotifyWork came while a pull was out: it survives that pull's "exhausted"
        self.reported_interest = True
        self.jobs: dict[int, int] = {}  # job id -> tag, for callback clients

    def on_start(self) -> None:
        """Subscribe; watch an actor client so its death ends the subscription."""
        settings = self.settings
        self.ctx.send(
            self.queue,
            Subscribe(self.ctx.self_ref, settings.priority, settings.selector, settings.acquiring, True),
        )
        if isinstance(self.client, ActorRef):
            self.ctx.watch(self.client)

    def receive(self, message: Any) -> None:
        """Handle the queue's, the manager's and the client's messages."""
        match message:
            case NotifyWork():
                if self.pulling:
                    self.renotified = True
                self.notified = True
                self._pull()
            case Delivered(deliveries=deliveries, exhausted=exhausted):
                self._delivered(deliveries, exhausted)
            case Ack(tags=tags) | Release(tags=tags) | Nack(tags=tags):
                self._forward_settlement(message, tags)
            case ModifyAckDeadline(tags=tags, seconds=seconds):
                self._forward_settlement(message, tags if seconds == 0 else ())
            case JobDone(job_id=job_id):
                tag = self.jobs.pop(job_id)
                self._forward_settlement(Ack(self._id(), (tag,)), (tag,))
            case JobFailed(job_id=job_id):
                tag = self.jobs.pop(job_id)
                self._forward_settlement(Nack(self._id(), (tag,)), (tag,))
            case Subscribed(consumer_id=consumer_id):
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
                self.ctx.stop()  # the queue watches us and takes everything back

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
        messages, byte_credit = self._credit()
        return not self.suspended and messages > 0 and byte_credit > 0

    def _update_interest(self) -> None:
        wants = self._wants_work()
        if self.consumer_id is not None and wants != self.reported_interest:
            self.reported_interest = wants
            self.ctx.send(self.queue, SetInterest(self.consumer_id, wants))

    def _pull(self) -> None:
        if self.consumer_id is None or self.pulling or not self.notified or not self._wants_work():
            return
        messages, byte_credit = self._credit()
        self.pulling = True
        self.ctx.send(self.queue, Pull(self.consumer_id, messages, byte_credit))

    def _delivered(self, deliveries: tuple[Delivery, ...], exhausted: bool) -> None:
        self.pulling = False
        acquiring = self.settings.acquiring
        for delivery in deliveries:
            if acquiring and delivery.tag not in self.outstanding:  # a lapsed lease redelivered: counted once
                size = delivery.message.size
                self.outstanding[delivery.tag] = size
                self.outstanding_bytes += size
            client = self.client
            if isinstance(client, ActorRef):
                self.ctx.send(client, delivery)
            elif acquiring:
                self.jobs[self.ctx.run_job(client, delivery)] = delivery.tag
            else:
                self.ctx.run_job(client, delivery)
        if exhausted:
            # The manager put us at the back of Interested, unless it notified us again since
            # (a NotifyWork and the queue's Delivered travel different channels, in either order).
            self.notified = self.renotified
        self.renotified = False
        self._update_interest()
        self._pull()

    def _forward_settlement(self, request: Ack | Nack | Release | ModifyAckDeadline, settled: tuple[int, ...]) -> None:
        if self.consumer_id is None:
            return
        if request.consumer_id != self.consumer_id:
            request = attrs.evolve(request, consumer_id=self.consumer_id)
        self.ctx.send(self.queue, request)
        for tag in settled:
            size = self.outstanding.pop(tag, None)
            if size is not None:
                self.outstanding_bytes -= size
        if settled:
            self._update_interest()
            self._pull()
