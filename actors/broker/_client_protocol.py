"""The broker's client protocol: what publishers and consumers tell a queue, and its answers.

Commands are verbs (``Publish``, ``Ack``), replies and events past tense (``Published``,
``Delivered``). Bad input raises here, at the edge, naming the field and the allowed values,
before anything reaches an actor.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, final

import attrs

from conveyor.runtime import ActorRef
from conveyor.runtime.lowlevel import register_immutable_type
from conveyor.runtime.validators import fail, optional_non_negative_seconds, optional_positive_seconds

from ._selectors import MatchAll, Selector, parse_selector
from ._values import Delivery, DeliveryError, Message, check_id_and_flag, recorded_in_model


def _iterated(owner: str, field: str, allowed: str, value: object) -> tuple[Any, ...]:
    """``value`` as a tuple, or the field's error if it cannot be iterated (a float, None, a str)."""
    if type(value) is tuple:
        return value
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes)):
        fail(owner, field, f"an iterable of {allowed}", value)
    return tuple(value)


def _tags(owner: str, value: Iterable[int]) -> tuple[int, ...]:
    """``value`` as a tuple of delivery tags, or an error naming ``owner.tags``."""
    tags = _iterated(owner, "tags", "delivery tags (ints >= 1)", value)
    for tag in tags:
        if type(tag) is not int or tag < 1:
            fail(owner, "tags", "delivery tags (ints >= 1)", tag)
    return tags


def _ack_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("Ack", value)


def _nack_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("Nack", value)


def _release_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("Release", value)


def _modack_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("ModifyAckDeadline", value)


def _checked_attempts(owner: str, value: Iterable[int]) -> tuple[int, ...]:
    if value == ():
        return ()
    attempts = _iterated(owner, "attempts", "delivery counts (ints >= 1), one per tag", value)
    for attempt in attempts:
        if type(attempt) is not int or attempt < 1:
            fail(owner, "attempts", "delivery counts (ints >= 1), one per tag", attempt)
    return attempts


def _attempts(value: Iterable[int]) -> tuple[int, ...]:
    return _checked_attempts("Nack", value)


def _ack_attempts(value: Iterable[int]) -> tuple[int, ...]:
    return _checked_attempts("Ack", value)


# --- publisher <-> queue --------------------------------------------------------------------


@final
@attrs.frozen
class Publish:
    """Enqueue ``message``; with ``immediate`` it is refused unless a consumer can take it now."""

    message: Message
    immediate: bool = False

    def __attrs_post_init__(self) -> None:
        # One check per field in a plain method: a Publish is built per message (hot path).
        if type(self.message) is not Message:
            fail("Publish", "message", "a Message", self.message)
        if type(self.immediate) is not bool:
            fail("Publish", "immediate", "True or False", self.immediate)


# Both fields are checked above (a Message is itself a validated leaf), so sends skip looking inside.
register_immutable_type(Publish)


def _message_tuple(value: Iterable[Message]) -> tuple[Message, ...]:
    if type(value) is tuple:
        return value
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes)):
        fail("PublishBatch", "messages", "a non-empty sequence of Message", value)
    return tuple(value)


@final
@attrs.frozen
class PublishBatch:
    """Enqueue several messages in order with one reply."""

    messages: tuple[Message, ...] = attrs.field(converter=_message_tuple)

    @messages.validator
    def _check(self, attribute: attrs.Attribute[tuple[Message, ...]], value: tuple[Message, ...]) -> None:
        if not value or not all(isinstance(m, Message) for m in value):
            fail("PublishBatch", "messages", "a non-empty sequence of Message", value)


@final
@attrs.frozen
class Published:
    """The queue took the message; ``tag`` is its place in the queue's order."""

    queue: str
    tag: int
    message_id: str

    def __attrs_post_init__(self) -> None:
        # Checked once here (one per publish, the confirm), so the reply need not walk it again.
        if type(self.queue) is not str or type(self.tag) is not int or type(self.message_id) is not str:
            msg = f"Published fields must be str, int, str; got {self!r}"
            raise TypeError(msg)


register_immutable_type(Published)


@final
@attrs.frozen
class PublishRejected:
    """The queue refused the message; nothing was enqueued."""

    queue: str
    message_id: str
    reason: str


@final
@attrs.frozen
class BatchPublished:
    """One outcome per message of a ``PublishBatch``, in order."""

    outcomes: tuple[Published | PublishRejected, ...]


# --- consumer <-> queue ---------------------------------------------------------------------


def _selector(value: object) -> Selector:
    return parse_selector(value)


@final
@attrs.frozen
class Subscribe:
    """Register ``consumer`` (a ConsumerActor) with the queue; answered by ``Subscribed``.

    ``lease_s``: how long each message it takes is leased for; None: the queue's ``ack_deadline_s``.
    """

    consumer: ActorRef = attrs.field(validator=attrs.validators.instance_of(ActorRef))
    priority: int = attrs.field(default=0)
    selector: Selector = attrs.field(factory=MatchAll, converter=_selector)
    acquiring: bool = True
    interested: bool = True
    lease_s: float | None = attrs.field(default=None, validator=optional_positive_seconds)

    @priority.validator
    def _check_priority(self, attribute: attrs.Attribute[int], value: int) -> None:
        if type(value) is not int:
            fail("Subscribe", "priority", "an int (higher is served first)", value)


@final
@attrs.frozen
class Subscribed:
    """The queue registered a consumer under ``consumer_id``."""

    queue: str
    consumer_id: int


@final
@attrs.frozen
class Unsubscribe:
    """Remove a consumer; everything it holds returns to the queue at its own position."""

    consumer_id: int


@final
@attrs.frozen
class SetInterest:
    """A consumer starts or stops wanting work (credit, suspend / resume)."""

    consumer_id: int
    interested: bool

    def __attrs_post_init__(self) -> None:
        # Both fields checked here, so sends treat it as a leaf (a consumer sends one per credit change).
        check_id_and_flag("SetInterest", self.consumer_id, "interested", self.interested)


register_immutable_type(SetInterest)


@final
@attrs.frozen
class Pull:
    """A notified consumer asks for up to ``max_messages`` / ``max_bytes`` of work."""

    consumer_id: int
    max_messages: int
    max_bytes: int

    def __attrs_post_init__(self) -> None:
        # One check per field in a plain method (attrs validators are a call each): a Pull is
        # built per pull, and sends then treat it as a leaf.
        if type(self.consumer_id) is not int:
            fail("Pull", "consumer_id", "an int", self.consumer_id)
        if type(self.max_messages) is not int or self.max_messages < 1:
            fail("Pull", "max_messages", "an int >= 1", self.max_messages)
        if type(self.max_bytes) is not int or self.max_bytes < 1:
            fail("Pull", "max_bytes", "an int >= 1", self.max_bytes)


register_immutable_type(Pull)


@final
@attrs.frozen
class Rejoin:
    """A durable queue restarted: the consumer forgets its requests in flight and answers ``Rejoined``.

    A request the queue was handling when it failed (a disk error) died with it; the consumer
    cannot tell a lost ``Pull`` from one still waiting in the queue's mailbox, so it drops both.
    ``incarnation`` names the restarted instance (a random id, as Akka names an actor's
    incarnations): the answer must carry it back.
    """

    queue: str
    consumer_id: int
    incarnation: int


@final
@attrs.frozen
class Rejoined:
    """The consumer's answer to ``Rejoin``: every ``Pull`` it sent before this one is void.

    Messages from one sender arrive in order, so the queue ignores the consumer's pulls until this
    arrives; the consumer then pulls afresh. An answer to an earlier incarnation's ``Rejoin`` (the
    queue restarted twice before the consumer answered) does not count: the ``Pull`` after it was
    sent for that incarnation, and answering it too would give the consumer more than its credit.
    """

    consumer_id: int
    incarnation: int


@final
@attrs.frozen
class Delivered:
    """The queue's answer to ``Pull``; ``exhausted`` means nothing more is there for this consumer now."""

    queue: str
    deliveries: tuple[Delivery, ...]
    exhausted: bool

    def __attrs_post_init__(self) -> None:
        # Checked once here (one per Pull), so the reply need not walk the deliveries again.
        if type(self.queue) is not str:
            fail("Delivered", "queue", "a str", self.queue)
        deliveries = self.deliveries
        if type(deliveries) is not tuple:
            fail("Delivered", "deliveries", "a tuple of Delivery", deliveries)
        for delivery in deliveries:  # a loop, not any() over a generator: measurably cheaper here
            if type(delivery) is not Delivery:
                fail("Delivered", "deliveries", "a tuple of Delivery", deliveries)
        if type(self.exhausted) is not bool:
            fail("Delivered", "exhausted", "True or False", self.exhausted)


register_immutable_type(Delivered)


@final
@attrs.frozen
class Ack:
    """Settle deliveries; with ``confirm`` the queue answers ``AckResult``.

    ``attempts``, when given, is parallel to ``tags``, as ``Nack``'s: each the ``delivery_count``
    of the delivery acked. The queue gives a lapsed message back under the same tag, so an ack of
    an older delivery, arriving after the message went out again, would otherwise settle the newer
    one, which its client has not seen yet; with its attempt the queue counts it invalid instead
    (an exactly-once ack must not settle a delivery it does not name).
    """

    consumer_id: int
    tags: tuple[int, ...] = attrs.field(converter=_ack_tags)
    confirm: bool = False
    attempts: tuple[int, ...] = attrs.field(default=(), converter=_ack_attempts)

    def __attrs_post_init__(self) -> None:
        # With ``tags`` made a tuple of ints by its converter, these checks make an Ack an
        # immutable leaf: a client sends one per delivery, and sends then skip walking it.
        if type(self.consumer_id) is not int:
            fail("Ack", "consumer_id", "an int (the Delivery's consumer_id)", self.consumer_id)
        if type(self.confirm) is not bool:
            fail("Ack", "confirm", "True or False", self.confirm)
        if self.attempts and len(self.attempts) != len(self.tags):
            fail("Ack", "attempts", f"empty or one delivery_count per tag ({len(self.tags)})", self.attempts)


register_immutable_type(Ack)


@final
@attrs.frozen
class AckResult:
    """Which tags were acked, and which were not held by that consumer any more (lease lapsed)."""

    acked: tuple[int, ...]
    invalid: tuple[int, ...]


def _errors(value: Iterable[DeliveryError | None]) -> tuple[DeliveryError | None, ...]:
    if value == ():
        return ()
    return tuple(value)


@final
@attrs.frozen
class Nack:
    """Return deliveries for redelivery: after the queue's retry backoff, or ``delay_s`` if given.

    ``attempts``, when given, is parallel to ``tags``: each the ``Delivery.delivery_count`` of the
    delivery being nacked. The queue gives a lapsed message back under the same tag, so a nack that
    arrives after the message was delivered again would otherwise return that newer delivery; with
    its attempt, a nack for an older delivery changes nothing. Empty means the current delivery of
    each tag (whichever it is when the nack arrives).

    ``errors``, when given, is parallel to ``tags`` too: why each delivery failed (a callback's
    exception, or None). The queue keeps the last error of each message for its dead letter.
    """

    consumer_id: int
    tags: tuple[int, ...] = attrs.field(converter=_nack_tags)
    delay_s: float | None = attrs.field(default=None, validator=optional_non_negative_seconds)
    attempts: tuple[int, ...] = attrs.field(default=(), converter=_attempts)
    errors: tuple[DeliveryError | None, ...] = attrs.field(default=(), converter=_errors)

    def __attrs_post_init__(self) -> None:
        if self.attempts and len(self.attempts) != len(self.tags):
            fail(
                "Nack",
                "attempts",
                f"empty or one delivery_count per tag ({len(self.tags)})",
                self.attempts,
            )
        if self.errors and (
            len(self.errors) != len(self.tags)
            or not all(error is None or type(error) is DeliveryError for error in self.errors)
        ):
            fail("Nack", "errors", f"empty or one DeliveryError or None per tag ({len(self.tags)})", self.errors)


@final
@attrs.frozen
class Release:
    """Return deliveries at once, without backoff (e.g. a consumer closing)."""

    consumer_id: int
    tags: tuple[int, ...] = attrs.field(converter=_release_tags)


@final
@attrs.frozen
class ModifyAckDeadline:
    """Extend leases to ``seconds`` from now; 0 returns the messages at once (Pub/Sub's nack)."""

    consumer_id: int
    tags: tuple[int, ...] = attrs.field(converter=_modack_tags)
    seconds: float = attrs.field(default=0.0)

    @seconds.validator
    def _check(self, attribute: attrs.Attribute[float], value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 600:
            fail("ModifyAckDeadline", "seconds", "a number from 0 to 600", value)


@final
@attrs.frozen
class GetStats:
    """Ask a queue (``QueueStats``) or a consumer manager (``ConsumerListStats``) for a snapshot."""


@final
@attrs.frozen
class ConsumerStats:
    """One consumer's counters, as its queue sees them."""

    consumer_id: int
    path: str
    priority: int
    acquiring: bool
    delivered: int
    acked: int
    in_flight: int


@final
@attrs.frozen
class QueueStats:
    """A queue's counters at one instant."""

    queue: str
    depth: int
    in_flight: int
    published: int
    delivered: int
    acked: int
    redelivered: int
    dead_lettered: int
    expired: int
    rejected: int
    consumers: tuple[ConsumerStats, ...]
    body_bytes_in_ram: int | None = None
    """A paged queue (``memory_target_bytes``): bytes of live entries' bodies held in RAM; None if not paged."""
    bodies_paged: int = 0
    """A paged queue: how many live entries have their body out of RAM (in its body store, or on the way)."""
    entries_out_of_ram: int = 0
    """A paged queue: how many of those are out of RAM themselves (in its levels' deltas)."""
    returned: int = 0
    """Deliveries given back without an ack: nacked, released, lapsed, or held by a consumer that left."""


# Traces name these by their module of record, ``_model`` (see ``RECORDED_MODULE``).
recorded_in_model(
    Publish,
    PublishBatch,
    Published,
    PublishRejected,
    BatchPublished,
    Subscribe,
    Subscribed,
    Unsubscribe,
    SetInterest,
    Pull,
    Rejoin,
    Rejoined,
    Delivered,
    Ack,
    AckResult,
    Nack,
    Release,
    ModifyAckDeadline,
    GetStats,
    ConsumerStats,
    QueueStats,
)
