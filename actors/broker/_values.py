"""The broker's values: a message, its delivery and why it failed, a queue's settings.

Each is validated at construction: bad input raises here, at the edge, naming the field and the
allowed values. Also the headers a dead-lettered message carries, and the one check the protocols
share. The protocols that carry these values are ``_client_protocol`` (publishers and consumers
with a queue), ``_manager_protocol`` (a queue, its consumer manager and consumers) and ``_notes``
(what a queue writes in the trace).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Final, final

import attrs

from conveyor.runtime import ActorRef
from conveyor.runtime.lowlevel import register_immutable_type, unchecked_builder
from conveyor.runtime.validators import (
    fail,
    non_empty_str,
    non_negative_seconds,
    optional_non_empty_str,
    optional_non_negative_seconds,
    optional_positive_int,
    optional_positive_seconds,
    positive_int,
    positive_seconds,
)

from ._consumer_lists import DEFAULT_HAND_OVER_TIMEOUT_S, check_hand_over_timeout

RECORDED_MODULE: Final = "conveyor.actors.broker._model"
"""The module traces name the broker's messages by (``conveyor.actors.broker._model:Delivered``).

A trace names a message ``module:qualname``, and trace hashes, stored traces (read back by
importing that name) and the Spark analysis of traces all rest on it. The messages were written
in ``_model.py`` until they were split by protocol; each keeps that recorded name, and ``_model``
still imports them all, so every recorded name resolves and no trace changed.
"""


def recorded_in_model(*classes: type) -> None:
    """Give each class ``RECORDED_MODULE`` as its module: the name traces record it by (see there)."""
    for cls in classes:
        cls.__module__ = RECORDED_MODULE


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
        fail("Message", "headers", _HEADERS_ALLOWED, value)
    ascending = True  # keys already strictly ascending (the usual case) need no sort and no duplicate check
    previous = ""
    for pair in pairs:
        if type(pair) is not tuple or len(pair) != 2:
            fail("Message", "headers", _HEADERS_ALLOWED, value)
        key, item = pair
        if not isinstance(key, str) or not key:
            fail("Message", "headers", "keyed by non-empty str", key)
        if (
            not isinstance(item, (str, int, float, bool))
            or (type(item) is float and not math.isfinite(item))
            or (type(item) is int and not HEADER_INT_MIN <= item <= HEADER_INT_MAX)
        ):
            fail("Message", f"headers[{key!r}]", "a str, int from -2**63 to 2**63-1, finite float or bool", item)
        if key <= previous:
            ascending = False
        previous = key
    if ascending:
        return pairs
    ordered = tuple(sorted(pairs, key=_pair_key))
    for (key, _), (following, _) in itertools.pairwise(ordered):
        if key == following:
            fail("Message", "headers", "free of duplicate keys", key)
    return ordered


def _pair_key(pair: tuple[str, HeaderValue]) -> str:
    return pair[0]


def check_id_and_flag(owner: str, consumer_id: object, flag: str, value: object) -> None:
    """The checks of the small (consumer id, bool) messages that travel once or twice per delivery."""
    if type(consumer_id) is not int:
        fail(owner, "consumer_id", "an int", consumer_id)
    if type(value) is not bool:
        fail(owner, flag, "True or False", value)


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
            fail("Message", "body", "bytes", type(self.body).__name__)
        priority = self.priority
        if type(priority) is not int or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            fail("Message", "priority", PRIORITY_ALLOWED, priority)
        if self.ttl_s is not None:
            optional_positive_seconds(self, _FIELD_TTL, self.ttl_s)
        if self.delay_s is not None:
            optional_non_negative_seconds(self, _FIELD_DELAY, self.delay_s)
        if self.group is not None:
            optional_non_empty_str(self, _FIELD_GROUP, self.group)
        if type(self.message_id) is not str:
            fail("Message", "message_id", "a str", self.message_id)
        headers = self.headers
        size = len(self.body)
        for key, value in headers:
            size += len(key) + len(value if type(value) is str else str(value))
        object.__setattr__(self, "size", size)

    def header_map(self) -> dict[str, HeaderValue]:
        """The headers as a dict, for selectors."""
        return dict(self.headers)

    @classmethod
    def from_decoded(cls, body: bytes, attributes: Mapping[str, str], group: str | None, message_id: str) -> Message:
        """A message built from a decoded protocol buffer (Pub/Sub's ``PubsubMessage``) without the checks.

        The wire format already typed every field (bytes, a map of str to str, str), and the server
        refused empty keys; what is left is sorting the headers. Default priority, no TTL or delay.
        Used where every received message is built (the Pub/Sub transport), where the checks cost
        1.4 us of 2.3.
        """
        message = _new_message(cls)
        headers = tuple(sorted(attributes.items())) if attributes else ()
        size = len(body)
        for key, value in headers:
            size += len(key) + len(value)
        _set(message, "body", body)
        _set(message, "headers", headers)
        _set(message, "priority", DEFAULT_PRIORITY)
        _set(message, "ttl_s", None)
        _set(message, "delay_s", None)
        _set(message, "group", group or None)
        _set(message, "message_id", message_id)
        _set(message, "size", size)
        return message

    def __reduce__(self) -> tuple[type[Message], tuple[object, ...]]:
        """Pickled as its init fields, rebuilt by ``Message(*fields)`` (checked again, ``size`` recomputed).

        A durable queue's snapshot pickles every message it holds: attrs' slots state (a dict built
        in Python per message) made that 1.7x as slow. Pickles of the attrs state still load.
        """
        return Message, (self.body, self.headers, self.priority, self.ttl_s, self.delay_s, self.group, self.message_id)


_new_message = object.__new__
_set = object.__setattr__
_FIELD_TTL, _FIELD_DELAY, _FIELD_GROUP = (attrs.fields(Message).ttl_s, attrs.fields(Message).delay_s,
                                         attrs.fields(Message).group)

# Every field of Message is validated immutable at construction (bytes, a tuple of str/scalar
# pairs, numbers, str), so sends need not look inside it again.
register_immutable_type(Message)


@final
@attrs.frozen
class RetryPolicy:
    """Exponential backoff before a nacked message is offered again: min * 2**(n-1), capped at max."""

    min_backoff_s: float = attrs.field(default=0.1, validator=non_negative_seconds)
    max_backoff_s: float = attrs.field(default=60.0, validator=non_negative_seconds)

    def __attrs_post_init__(self) -> None:
        if self.max_backoff_s < self.min_backoff_s:
            fail("RetryPolicy", "max_backoff_s", f">= min_backoff_s ({self.min_backoff_s})", self.max_backoff_s)

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


COMPACT_AFTER_EVENTS: Final = 1024
"""A journal is compacted once it holds this many events and ``COMPACT_FACTOR`` times the state's size."""


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
        compact_after_events: a durable queue replaces its journal's events by a snapshot once
            they number this many (and ``COMPACT_FACTOR`` times its state's size); kept across
            ``Reconfigure``. Small values make the simulator's runs compact and recover from
            snapshots (BUGGIFY's small constants); the default suits production.
        hand_over_timeout_s: how long a consumer told of work (``NotifyWork``) may stay silent,
            neither pulling until exhausted nor losing interest, before the consumer manager
            passes the work on to the next interested consumer (the silent one stays notified;
            the queue still gives each entry to one consumer). None waits forever, as Qpid
            does, so one frozen consumer can hold work that others with credit could take.
        memory_target_bytes: most bytes of messages the queue keeps in RAM, each counted as its
            body (``Message.size``) and ``ENTRY_RAM_BYTES`` for its message and entry; past it
            the bodies of the entries deepest in the queue are written to a body store and read
            back ahead of need (docs/storage.md, "Paging the broker's queue"). None keeps every
            body in RAM. A durable queue writes each body to a synced body store beside its journal,
            which keeps none, and its deltas' chunks there too (docs/storage.md).
    """

    name: str = attrs.field(validator=non_empty_str)
    priorities: int = attrs.field(default=10)
    ack_deadline_s: float = attrs.field(default=10.0, validator=positive_seconds)
    max_deliveries: int | None = attrs.field(default=None, validator=optional_positive_int)
    retry: RetryPolicy | None = attrs.field(default=None)
    max_length: int | None = attrs.field(default=None, validator=optional_positive_int)
    overflow: Overflow = attrs.field(default=Overflow.REJECT_PUBLISH, validator=attrs.validators.instance_of(Overflow))
    max_message_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=positive_int)
    dead_letter: ActorRef | None = attrs.field(default=None)
    durable: bool = attrs.field(default=False)
    hand_over_timeout_s: float | None = attrs.field(default=DEFAULT_HAND_OVER_TIMEOUT_S)
    compact_after_events: int = attrs.field(default=COMPACT_AFTER_EVENTS, validator=positive_int)
    memory_target_bytes: int | None = attrs.field(default=None)

    @priorities.validator
    def _check_priorities(self, attribute: attrs.Attribute[int], value: int) -> None:
        if type(value) is not int or not 1 <= value <= 10:
            fail("QueueConfig", "priorities", "an int from 1 to 10", value)

    @retry.validator
    def _check_retry(self, attribute: attrs.Attribute[RetryPolicy | None], value: RetryPolicy | None) -> None:
        if value is not None and not isinstance(value, RetryPolicy):
            fail("QueueConfig", "retry", "None or a RetryPolicy", value)

    @durable.validator
    def _check_durable(self, attribute: attrs.Attribute[bool], value: bool) -> None:
        if type(value) is not bool:
            fail("QueueConfig", "durable", "True or False", value)

    @hand_over_timeout_s.validator
    def _check_hand_over_timeout(self, attribute: attrs.Attribute[float | None], value: float | None) -> None:
        check_hand_over_timeout("QueueConfig", value)

    @memory_target_bytes.validator
    def _check_memory_target(self, attribute: attrs.Attribute[int | None], value: int | None) -> None:
        if value is None:
            return
        if type(value) is not int or value < 0:
            fail("QueueConfig", "memory_target_bytes", "None or an int >= 0 (bytes of messages kept in RAM)", value)

    @dead_letter.validator
    def _check_dead_letter(self, attribute: attrs.Attribute[ActorRef | None], value: ActorRef | None) -> None:
        if value is not None and not isinstance(value, ActorRef):
            fail("QueueConfig", "dead_letter", "None or the ActorRef of a queue", value)


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


delivery_unchecked: Callable[[str, int, Message, int, float | None, int], Delivery] = unchecked_builder(
    Delivery, ("queue", "tag", "message", "delivery_count", "deadline", "consumer_id"))
"""``Delivery(queue, tag, message, delivery_count, deadline, consumer_id)`` without its type checks, for values
known good: a queue's own entry, a transport's count. One is built per message delivered, on the queue's side
and on a Pub/Sub subscriber's, and the checks cost as much as the rest of the build."""


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
            fail("DeliveryError", "error_type", "a non-empty str", self.error_type)
        if type(self.text) is not str or len(self.text) > DeliveryError.TEXT_LIMIT:
            fail("DeliveryError", "text", f"a str of at most {DeliveryError.TEXT_LIMIT} characters",
                  self.text[:40] + "..." if isinstance(self.text, str) else self.text)

    @classmethod
    def of(cls, error: BaseException) -> DeliveryError:
        """The data of ``error``: its type's name and the first ``TEXT_LIMIT`` characters of its text."""
        try:
            text = str(error)
        except Exception:  # noqa: BLE001 - a broken __str__ must not hide the failure it describes
            text = f"<{type(error).__qualname__} whose str() raised>"
        return cls(type(error).__qualname__, text[: cls.TEXT_LIMIT])


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


# Traces name these by their module of record, ``_model`` (see ``RECORDED_MODULE``).
recorded_in_model(
    Message,
    RetryPolicy,
    Overflow,
    QueueConfig,
    Reconfigure,
    Delivery,
    DeliveryError,
)
