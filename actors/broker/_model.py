"""The broker's values and protocol: every message its actors exchange, validated at construction.

Commands are verbs (``Publish``, ``Ack``), replies and events past tense
(``Published``, ``Delivered``). Bad input raises here, at the edge, naming the
field and the allowed values, before anything reaches an actor.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, final

import attrs

from conveyor.runtime import ActorRef, is_finite_number, quote
from conveyor.runtime.lowlevel import register_immutable_type

from ._consumer_lists import DEFAULT_HAND_OVER_TIMEOUT_S, check_hand_over_timeout
from ._selectors import MatchAll, Selector, parse_selector

HeaderValue = str | int | float | bool
Headers = tuple[tuple[str, HeaderValue], ...]
PRIORITY_MIN = 0
PRIORITY_MAX = 255
"""A message priority is an octet, as AMQP carries it; above a queue's levels it clamps to the top one."""
PRIORITY_ALLOWED = f"an int from {PRIORITY_MIN} to {PRIORITY_MAX} (beyond a queue's levels it clamps to the nearest)"
DEFAULT_PRIORITY = 4
HEADER_INT_MIN = -(2**63)
HEADER_INT_MAX = 2**63 - 1
"""Header ints are 64-bit, as AMQP carries them (and a trace or journal can write them)."""
_HEADERS_ALLOWED = "a mapping of str to str/int/float/bool or an iterable of (key, value) pairs"


def _fail(owner: str, field: str, allowed: str, value: object) -> NoReturn:
    msg = f"{owner}.{field} must be {allowed}, got {quote(value)}"
    raise ValueError(msg)


def _headers(value: Mapping[str, HeaderValue] | Iterable[tuple[str, HeaderValue]] | None) -> Headers:
    """Normalise headers to a key-sorted tuple of pairs (hashable, deterministic)."""
    if value is None or value == ():
        return ()
    if type(value) is tuple:
        pairs = value
    elif isinstance(value, Mapping):
        pairs = tuple(value.items())
    elif isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        pairs = tuple(value)
    else:
        _fail("Message", "headers", _HEADERS_ALLOWED, value)
    ascending = True  # keys already strictly ascending (the usual case) need no sort and no duplicate check
    previous = ""
    for pair in pairs:
        if type(pair) is not tuple or len(pair) != 2:
            _fail("Message", "headers", _HEADERS_ALLOWED, value)
        key, item = pair
        if not isinstance(key, str) or not key:
            _fail("Message", "headers", "keyed by non-empty str", key)
        if (
            not isinstance(item, (str, int, float, bool))
            or (type(item) is float and not math.isfinite(item))
            or (type(item) is int and not HEADER_INT_MIN <= item <= HEADER_INT_MAX)
        ):
            _fail("Message", f"headers[{key!r}]", "a str, int from -2**63 to 2**63-1, finite float or bool", item)
        if key <= previous:
            ascending = False
        previous = key
    if ascending:
        return pairs
    ordered = tuple(sorted(pairs, key=_pair_key))
    for (key, _), (following, _) in itertools.pairwise(ordered):
        if key == following:
            _fail("Message", "headers", "free of duplicate keys", key)
    return ordered


def _pair_key(pair: tuple[str, HeaderValue]) -> str:
    return pair[0]


def _positive_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not is_finite_number(value) or value <= 0:
        _fail(type(instance).__name__, attribute.name, "None or a finite number of seconds > 0", value)


def _non_negative_seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not is_finite_number(value) or value < 0:
        _fail(type(instance).__name__, attribute.name, "None or a finite number of seconds >= 0", value)


def _seconds(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not is_finite_number(value) or value < 0:
        _fail(type(instance).__name__, attribute.name, "a finite number of seconds >= 0", value)


def _positive_seconds_required(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        _fail(type(instance).__name__, attribute.name, "a finite number of seconds > 0", value)
    _positive_seconds(instance, attribute, value)


def _non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        _fail(type(instance).__name__, attribute.name, "a non-empty str", value)


def _optional_str(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        _fail(type(instance).__name__, attribute.name, "None or a non-empty str", value)


def _positive_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not int or value < 1:
        _fail(type(instance).__name__, attribute.name, "an int >= 1", value)


def _optional_positive_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive_int(instance, attribute, value)


def _iterated(owner: str, field: str, allowed: str, value: object) -> tuple[Any, ...]:
    """``value`` as a tuple, or the field's error if it cannot be iterated (a float, None, a str)."""
    if type(value) is tuple:
        return value
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes)):
        _fail(owner, field, f"an iterable of {allowed}", value)
    return tuple(value)


def _tags(owner: str, value: Iterable[int]) -> tuple[int, ...]:
    """``value`` as a tuple of delivery tags, or an error naming ``owner.tags``."""
    tags = _iterated(owner, "tags", "delivery tags (ints >= 1)", value)
    for tag in tags:
        if type(tag) is not int or tag < 1:
            _fail(owner, "tags", "delivery tags (ints >= 1)", tag)
    return tags


def _ack_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("Ack", value)


def _nack_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("Nack", value)


def _release_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("Release", value)


def _modack_tags(value: Iterable[int]) -> tuple[int, ...]:
    return _tags("ModifyAckDeadline", value)


def _attempts(value: Iterable[int]) -> tuple[int, ...]:
    if value == ():
        return ()
    attempts = _iterated("Nack", "attempts", "delivery counts (ints >= 1), one per tag", value)
    for attempt in attempts:
        if type(attempt) is not int or attempt < 1:
            _fail("Nack", "attempts", "delivery counts (ints >= 1), one per tag", attempt)
    return attempts


# --- values ---------------------------------------------------------------------------------


@final
@attrs.frozen
class Message:
    """What a publisher sends: body, headers and delivery options.

    Attributes:
        body: the payload, bytes only.
        headers: str keys to str / int / float / bool values (a mapping is accepted).
        priority: 0 (lowest) to 255; mapped onto the queue's priority levels as Qpid does
            (``priority_level``): 0-9 as JMS uses them, and a priority beyond the queue's
            levels clamps to the nearest one, rather than being refused.
        ttl_s: seconds the message may wait in the queue before it expires.
        delay_s: not-before time, as seconds after publish (delayed delivery).
        group: message group; one consumer owns a group at a time.
        message_id: the publisher's own id, carried through untouched.
    """

    body: bytes
    headers: Headers = attrs.field(default=(), converter=_headers)
    priority: int = DEFAULT_PRIORITY
    ttl_s: float | None = None
    delay_s: float | None = None
    group: str | None = None
    message_id: str = ""
    size: int = attrs.field(init=False, eq=False, repr=False)
    """Bytes counted against byte credit and limits: body plus header keys and values."""

    def __attrs_post_init__(self) -> None:
        # One pass over every field, the common case first: a Message is built per publish, and
        # separate attrs validators cost 1.7 us a message, this pass 0.74 us (measured).
        if type(self.body) is not bytes:
            _fail("Message", "body", "bytes", type(self.body).__name__)
        priority = self.priority
        if type(priority) is not int or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            _fail("Message", "priority", PRIORITY_ALLOWED, priority)
        if self.ttl_s is not None:
            _positive_seconds(self, _FIELD_TTL, self.ttl_s)
        if self.delay_s is not None:
            _non_negative_seconds(self, _FIELD_DELAY, self.delay_s)
        if self.group is not None:
            _optional_str(self, _FIELD_GROUP, self.group)
        if type(self.message_id) is not str:
            _fail("Message", "message_id", "a str", self.message_id)
        headers = self.headers
        size = len(self.body)
        for key, value in headers:
            size += len(key) + len(value if type(value) is str else str(value))
        object.__setattr__(self, "size", size)

    def header_map(self) -> dict[str, HeaderValue]:
        """The headers as a dict, for selectors."""
        return dict(self.headers)


_FIELD_TTL, _FIELD_DELAY, _FIELD_GROUP = (attrs.fields(Message).ttl_s, attrs.fields(Message).delay_s,
                                         attrs.fields(Message).group)

# Every field of Message is validated immutable at construction (bytes, a tuple of str/scalar
# pairs, numbers, str), so sends need not look inside it again.
register_immutable_type(Message)


@final
@attrs.frozen
class RetryPolicy:
    """Exponential backoff before a nacked message is offered again: min * 2**(n-1), capped at max."""

    min_backoff_s: float = attrs.field(default=0.1, validator=_seconds)
    max_backoff_s: float = attrs.field(default=60.0, validator=_seconds)

    def __attrs_post_init__(self) -> None:
        if self.max_backoff_s < self.min_backoff_s:
            _fail("RetryPolicy", "max_backoff_s", f">= min_backoff_s ({self.min_backoff_s})", self.max_backoff_s)

    def backoff(self, delivery_count: int) -> float:
        """Delay before the next delivery of a message already delivered ``delivery_count`` times."""
        exponent = min(max(delivery_count - 1, 0), 62)
        return float(min(self.max_backoff_s, self.min_backoff_s * float(2**exponent)))


class Overflow(enum.Enum):
    """What a queue at ``max_length`` does with one more message.

    ``REJECT_PUBLISH`` refuses it. ``DROP_HEAD`` (a ring, as Qpid's) takes it and dead-letters the
    least significant oldest entry: the oldest AVAILABLE one of the lowest priority level that has
    one, which may be the message just published. Without priorities that is the head.
    """

    REJECT_PUBLISH = "reject-publish"
    DROP_HEAD = "drop-head"


@final
@attrs.frozen
class QueueConfig:
    """A queue's settings, fixed at declaration.

    Attributes:
        name: the queue's name.
        priorities: number of strict priority levels (1-10; Qpid's default 10).
        ack_deadline_s: lease length of a delivery; past it the message is redelivered.
        max_deliveries: delivery limit; a message returned after that many deliveries goes to
            ``dead_letter`` (or is dropped and counted if there is none).
        retry: backoff for nacked messages; None redelivers at once.
        max_length: most messages ready in the queue; None for unbounded.
        overflow: what happens past ``max_length``.
        max_message_bytes: larger messages are refused at publish.
        dead_letter: the queue actor that receives dead-lettered messages.
        durable: keep the queue's state in its journal (``ctx.journal``), so that after a
            crash the restarted queue rebuilds it exactly: messages, leases, consumers.
        hand_over_timeout_s: how long a consumer told of work (``NotifyWork``) may stay silent,
            neither pulling until exhausted nor losing interest, before the consumer manager
            passes the work on to the next interested consumer (the silent one stays notified;
            the queue still gives each entry to one consumer). None waits forever, as Qpid
            does, so one frozen consumer can hold work that others with credit could take.
    """

    name: str = attrs.field(validator=_non_empty_str)
    priorities: int = attrs.field(default=10)
    ack_deadline_s: float = attrs.field(default=10.0, validator=_positive_seconds_required)
    max_deliveries: int | None = attrs.field(default=None, validator=_optional_positive_int)
    retry: RetryPolicy | None = attrs.field(default=None)
    max_length: int | None = attrs.field(default=None, validator=_optional_positive_int)
    overflow: Overflow = attrs.field(default=Overflow.REJECT_PUBLISH, validator=attrs.validators.instance_of(Overflow))
    max_message_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=_positive_int)
    dead_letter: ActorRef | None = attrs.field(default=None)
    durable: bool = attrs.field(default=False)
    hand_over_timeout_s: float | None = attrs.field(default=DEFAULT_HAND_OVER_TIMEOUT_S)

    @priorities.validator
    def _check_priorities(self, attribute: attrs.Attribute[int], value: int) -> None:
        if type(value) is not int or not 1 <= value <= 10:
            _fail("QueueConfig", "priorities", "an int from 1 to 10", value)

    @retry.validator
    def _check_retry(self, attribute: attrs.Attribute[RetryPolicy | None], value: RetryPolicy | None) -> None:
        if value is not None and not isinstance(value, RetryPolicy):
            _fail("QueueConfig", "retry", "None or a RetryPolicy", value)

    @durable.validator
    def _check_durable(self, attribute: attrs.Attribute[bool], value: bool) -> None:
        if type(value) is not bool:
            _fail("QueueConfig", "durable", "True or False", value)

    @hand_over_timeout_s.validator
    def _check_hand_over_timeout(self, attribute: attrs.Attribute[float | None], value: float | None) -> None:
        check_hand_over_timeout("QueueConfig", value)

    @dead_letter.validator
    def _check_dead_letter(self, attribute: attrs.Attribute[ActorRef | None], value: ActorRef | None) -> None:
        if value is not None and not isinstance(value, ActorRef):
            _fail("QueueConfig", "dead_letter", "None or the ActorRef of a queue", value)


@final
@attrs.frozen
class Reconfigure:
    """Change a queue's settings in place: its entries keep their places, leases and consumers.

    The new ack deadline applies to deliveries from now on; the delivery limit, retry and
    dead-letter settings to the next nack or lapse; a limit on length to the next publish. The
    queue's ``name``, ``priorities`` and ``durable`` are its own and stay as they were (the
    consumer manager keeps the hand-over timeout it was spawned with). A durable queue journals
    the change, so a restart rebuilds the queue with the settings it had.
    """

    config: QueueConfig = attrs.field(validator=attrs.validators.instance_of(QueueConfig))


@final
@attrs.frozen
class Delivery:
    """One message handed to a consumer; ``tag`` names it in acks."""

    queue: str
    tag: int
    message: Message
    delivery_count: int
    deadline: float | None
    consumer_id: int

    def __attrs_post_init__(self) -> None:
        # Checked once here, so every hop after may treat a Delivery as an immutable leaf.
        if (
            type(self.queue) is not str
            or type(self.message) is not Message
            or type(self.tag) is not int
            or type(self.delivery_count) is not int
            or type(self.consumer_id) is not int
            or not (self.deadline is None or type(self.deadline) in (int, float))
        ):
            msg = f"Delivery fields must be str, int, Message, int, float or None, int; got {self!r}"
            raise TypeError(msg)

    @property
    def redelivered(self) -> bool:
        """True from the second delivery on."""
        return self.delivery_count > 1


register_immutable_type(Delivery)


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
            _fail("Publish", "message", "a Message", self.message)
        if type(self.immediate) is not bool:
            _fail("Publish", "immediate", "True or False", self.immediate)


# Both fields are checked above (a Message is itself a validated leaf), so sends skip looking inside.
register_immutable_type(Publish)


def _message_tuple(value: Iterable[Message]) -> tuple[Message, ...]:
    if type(value) is tuple:
        return value
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes)):
        _fail("PublishBatch", "messages", "a non-empty sequence of Message", value)
    return tuple(value)


@final
@attrs.frozen
class PublishBatch:
    """Enqueue several messages in order with one reply."""

    messages: tuple[Message, ...] = attrs.field(converter=_message_tuple)

    @messages.validator
    def _check(self, attribute: attrs.Attribute[tuple[Message, ...]], value: tuple[Message, ...]) -> None:
        if not value or not all(isinstance(m, Message) for m in value):
            _fail("PublishBatch", "messages", "a non-empty sequence of Message", value)


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
    """Register ``consumer`` (a ConsumerActor) with the queue; answered by ``Subscribed``."""

    consumer: ActorRef = attrs.field(validator=attrs.validators.instance_of(ActorRef))
    priority: int = attrs.field(default=0)
    selector: Selector = attrs.field(factory=MatchAll, converter=_selector)
    acquiring: bool = True
    interested: bool = True

    @priority.validator
    def _check_priority(self, attribute: attrs.Attribute[int], value: int) -> None:
        if type(value) is not int:
            _fail("Subscribe", "priority", "an int (higher is served first)", value)


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


def _check_id_and_flag(owner: str, consumer_id: object, flag: str, value: object) -> None:
    """The checks of the small (consumer id, bool) messages that travel once or twice per delivery."""
    if type(consumer_id) is not int:
        _fail(owner, "consumer_id", "an int", consumer_id)
    if type(value) is not bool:
        _fail(owner, flag, "True or False", value)


@final
@attrs.frozen
class SetInterest:
    """A consumer starts or stops wanting work (credit, suspend / resume)."""

    consumer_id: int
    interested: bool

    def __attrs_post_init__(self) -> None:
        # Both fields checked here, so sends treat it as a leaf (a consumer sends one per credit change).
        _check_id_and_flag("SetInterest", self.consumer_id, "interested", self.interested)


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
            _fail("Pull", "consumer_id", "an int", self.consumer_id)
        if type(self.max_messages) is not int or self.max_messages < 1:
            _fail("Pull", "max_messages", "an int >= 1", self.max_messages)
        if type(self.max_bytes) is not int or self.max_bytes < 1:
            _fail("Pull", "max_bytes", "an int >= 1", self.max_bytes)


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
            _fail("Delivered", "queue", "a str", self.queue)
        deliveries = self.deliveries
        if type(deliveries) is not tuple:
            _fail("Delivered", "deliveries", "a tuple of Delivery", deliveries)
        for delivery in deliveries:  # a loop, not any() over a generator: measurably cheaper here
            if type(delivery) is not Delivery:
                _fail("Delivered", "deliveries", "a tuple of Delivery", deliveries)
        if type(self.exhausted) is not bool:
            _fail("Delivered", "exhausted", "True or False", self.exhausted)


register_immutable_type(Delivered)


@final
@attrs.frozen
class Ack:
    """Settle deliveries; with ``confirm`` the queue answers ``AckResult``."""

    consumer_id: int
    tags: tuple[int, ...] = attrs.field(converter=_ack_tags)
    confirm: bool = False

    def __attrs_post_init__(self) -> None:
        # With ``tags`` made a tuple of ints by its converter, these two checks make an Ack an
        # immutable leaf: a client sends one per delivery, and sends then skip walking it.
        if type(self.consumer_id) is not int:
            _fail("Ack", "consumer_id", "an int (the Delivery's consumer_id)", self.consumer_id)
        if type(self.confirm) is not bool:
            _fail("Ack", "confirm", "True or False", self.confirm)


register_immutable_type(Ack)


@final
@attrs.frozen
class AckResult:
    """Which tags were acked, and which were not held by that consumer any more (lease lapsed)."""

    acked: tuple[int, ...]
    invalid: tuple[int, ...]


@final
@attrs.frozen
class DeliveryError:
    """Why a delivery was nacked, as data: the type and text of the exception its callback raised.

    It travels with the ``Nack`` to the queue, which keeps the last one per message and puts it on
    the dead letter (``LAST_ERROR_TYPE``, ``LAST_ERROR``), so a dead-lettered message says why.
    """

    TEXT_LIMIT = 1000
    """Longest ``text`` kept: headers count against the dead-letter queue's ``max_message_bytes``."""

    error_type: str
    text: str

    def __attrs_post_init__(self) -> None:
        if type(self.error_type) is not str or not self.error_type:
            _fail("DeliveryError", "error_type", "a non-empty str", self.error_type)
        if type(self.text) is not str or len(self.text) > DeliveryError.TEXT_LIMIT:
            _fail("DeliveryError", "text", f"a str of at most {DeliveryError.TEXT_LIMIT} characters",
                  self.text[:40] + "..." if isinstance(self.text, str) else self.text)

    @classmethod
    def of(cls, error: BaseException) -> DeliveryError:
        """The data of ``error``: its type's name and the first ``TEXT_LIMIT`` characters of its text."""
        try:
            text = str(error)
        except Exception:  # noqa: BLE001 - a broken __str__ must not hide the failure it describes
            text = f"<{type(error).__qualname__} whose str() raised>"
        return cls(type(error).__qualname__, text[: cls.TEXT_LIMIT])


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
    delay_s: float | None = attrs.field(default=None, validator=_non_negative_seconds)
    attempts: tuple[int, ...] = attrs.field(default=(), converter=_attempts)
    errors: tuple[DeliveryError | None, ...] = attrs.field(default=(), converter=_errors)

    def __attrs_post_init__(self) -> None:
        if self.attempts and len(self.attempts) != len(self.tags):
            _fail(
                "Nack",
                "attempts",
                f"empty or one delivery_count per tag ({len(self.tags)})",
                self.attempts,
            )
        if self.errors and (
            len(self.errors) != len(self.tags)
            or not all(error is None or type(error) is DeliveryError for error in self.errors)
        ):
            _fail("Nack", "errors", f"empty or one DeliveryError or None per tag ({len(self.tags)})", self.errors)


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
            _fail("ModifyAckDeadline", "seconds", "a number from 0 to 600", value)


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


DEAD_LETTER_REASON = "x-dead-letter-reason"
"""Header of a dead-lettered message: why (``delivery-limit``, ``max-length``)."""
DEAD_LETTER_QUEUE = "x-dead-letter-queue"
"""Header of a dead-lettered message: the queue it came from."""
DELIVERY_COUNT = "x-delivery-count"
"""Header of a dead-lettered message: how often it had been delivered."""
LAST_ERROR_TYPE = "x-last-error-type"
"""Header of a dead-lettered message whose last nack said why: the exception's type (``DeliveryError``)."""
LAST_ERROR = "x-last-error"
"""Header of a dead-lettered message whose last nack said why: the exception's text (a prefix)."""


# --- queue <-> consumer manager <-> consumer ---------------------------------------------------


@final
@attrs.frozen
class AddConsumer:
    """Queue -> manager: a consumer joined."""

    consumer_id: int
    consumer: ActorRef
    priority: int
    acquiring: bool
    interested: bool


@final
@attrs.frozen
class RemoveConsumer:
    """Queue -> manager: a consumer left."""

    consumer_id: int


@final
@attrs.frozen
class InterestChanged:
    """Queue -> manager: a consumer's interest changed."""

    consumer_id: int
    interested: bool

    def __attrs_post_init__(self) -> None:
        _check_id_and_flag("InterestChanged", self.consumer_id, "interested", self.interested)


register_immutable_type(InterestChanged)


@final
@attrs.frozen
class WorkAvailable:
    """Queue -> manager: new work appeared (publish, release, expiry of a delay, a freed group)."""


register_immutable_type(WorkAvailable)  # no fields


@final
@attrs.frozen
class ConsumerExhausted:
    """Queue -> manager: a notified consumer found nothing more; ``more_work`` if others might."""

    consumer_id: int
    more_work: bool

    def __attrs_post_init__(self) -> None:
        _check_id_and_flag("ConsumerExhausted", self.consumer_id, "more_work", self.more_work)


register_immutable_type(ConsumerExhausted)


@final
@attrs.frozen
class NotifyWork:
    """Manager -> consumer: there may be work for you; pull until the queue says exhausted."""

    queue: ActorRef

    def __attrs_post_init__(self) -> None:
        if type(self.queue) is not ActorRef:
            _fail("NotifyWork", "queue", "the ActorRef of a queue", self.queue)


# Checked above (an ActorRef is an identity leaf): the manager sends one per notification.
register_immutable_type(NotifyWork)


# --- notes: what a queue records in the trace for checkers (ctx.note) --------------------------


@final
@attrs.frozen
class EntryEnqueued:
    """Note: ``tag`` entered ``queue`` (the message is shared, not copied)."""

    queue: str
    tag: int
    message: Message


@final
@attrs.frozen
class QueueClosed:
    """Note, written when the queue stops: the entries it still held (queued or in flight)."""

    queue: str
    remaining: tuple[int, ...]


@final
@attrs.frozen
class QueueRecovered:
    """Note, written when a durable queue restarted and rebuilt itself from its journal.

    Attributes:
        queue: the queue's name.
        remaining: the entries it recovered (queued or in flight), in publish order.
        consumers: the ids of the consumers it recovered, still registered under those ids.
    """

    queue: str
    remaining: tuple[int, ...]
    consumers: tuple[int, ...]


@final
@attrs.frozen
class EntrySettled:
    """Note: ``tag`` left ``queue`` for good: ``acked``, ``dead_lettered`` or ``expired``."""

    queue: str
    tag: int
    outcome: str
    consumer_id: int | None = None
    reason: str = ""


@final
@attrs.frozen
class EntryReturned:
    """Note: ``tag`` went back to AVAILABLE at its position (release, nack, lease lapse, consumer gone)."""

    queue: str
    tag: int
    consumer_id: int
    reason: str
    available_at: float = 0.0
    """When it may be delivered again (after a nack's backoff), on the queue's clock."""


@final
@attrs.frozen
class StaleNackIgnored:
    """Note: a ``Nack`` named delivery ``attempt`` of ``tag``, but the consumer holds delivery ``current``.

    The nack is stale (sent before the queue delivered the message again) and changes nothing.
    """

    queue: str
    tag: int
    consumer_id: int
    attempt: int
    current: int
