"""The Pub/Sub front's values and protocol: what the gRPC glue asks, what the actors answer.

Every value is ``attrs.frozen``. The glue validates requests against Pub/Sub's rules (naming the
field) before anything reaches an actor; the actors answer a result value or ``Failed(code,
message)``, where ``code`` is the name of a gRPC status code.
"""

from __future__ import annotations

import enum
from typing import final

import attrs
from attrs import AttrsInstance

from conveyor.runtime import ActorRef
from conveyor.runtime.lowlevel import checked_when_built, unchecked_builder

from ._filter import Everything, Filter
from ._push_core import PushSettings
from ._schema_book import SchemaSettings

Attributes = tuple[tuple[str, str], ...]

PUBLISH_TIME = "goog-publish-time-ns"
"""Reserved broker header: when the topic took the message (ns since the epoch). Pub/Sub forbids
attribute keys starting with ``goog``, so reserved headers never collide with a user's."""
ORDERING_KEY = "goog-ordering-key"
"""Reserved broker header: the message's ordering key (kept even where the subscription ignores it)."""
DEFAULT_RETENTION_S = 7 * 24 * 3600.0
DEFAULT_EXPIRATION_S = 31 * 24 * 3600.0
"""Pub/Sub's expiration TTL when a Create names no ``expiration_policy``: 31 days of inactivity."""


@final
@checked_when_built
@attrs.frozen
class PubMessage:
    """A published message as the topic keeps it; ``message_id`` is set by the topic.

    Checked immutable once when built: a batch of deliveries is sent without walking each message again.
    """

    data: bytes
    attributes: Attributes = ()
    ordering_key: str = ""
    publish_time_ns: int = 0
    message_id: str = ""


pub_message_unchecked = unchecked_builder(PubMessage, ("data", "attributes", "ordering_key", "publish_time_ns",
                                                       "message_id"))
"""``PubMessage(...)`` without its checks, for values known good: a message the queue holds, turned back into
the Pub/Sub message it was (one per delivery; the checks cost as much as the rest of the build)."""


@final
@attrs.frozen
class TopicConfig:
    """A topic's settings (``retention_s`` None: the topic keeps nothing beyond its subscriptions)."""

    name: str
    labels: Attributes = ()
    retention_s: float | None = None
    schema: SchemaSettings | None = None
    """``schema_settings``: publishes are checked against the schema (``_schema_service``)."""

    def __getstate__(self) -> dict[str, object]:
        return _state_of(self)

    def __setstate__(self, state: dict[str, object]) -> None:
        """Unpickle from a journal, one written before a field existed too (it takes its default)."""
        _restore(self, state)


def _state_of(config: AttrsInstance) -> dict[str, object]:
    """A config's fields by name: what a journal keeps of it."""
    return {field.name: getattr(config, field.name) for field in attrs.fields(type(config))}


def _restore(config: AttrsInstance, state: dict[str, object]) -> None:
    """Set a config's fields from a journal's ``state``; a field added since the journal was written takes its
    default, so a data directory of an earlier build still opens."""
    for field in attrs.fields(type(config)):
        if field.name in state:
            value = state[field.name]
        elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]  # attrs types Factory as a function
            value = field.default.factory()
        else:
            value = field.default
        object.__setattr__(config, field.name, value)


@final
@attrs.frozen
class RetrySettings:
    """Pub/Sub's retry_policy: backoff between min and max after a nack or a lapsed lease."""

    min_backoff_s: float = 10.0
    max_backoff_s: float = 600.0


@final
@attrs.frozen
class DeadLetterSettings:
    """Pub/Sub's dead_letter_policy: after ``max_delivery_attempts`` deliveries, to ``topic``."""

    topic: str
    max_delivery_attempts: int = 5


@final
@attrs.frozen
class SubscriptionConfig:
    """A subscription's settings, validated by the glue; ``filter`` is parsed, ``filter_text`` kept."""

    name: str
    topic: str
    ack_deadline_s: int = 10
    retain_acked_messages: bool = False
    retention_s: float = DEFAULT_RETENTION_S
    labels: Attributes = ()
    enable_message_ordering: bool = False
    filter_text: str = ""
    filter: Filter = attrs.field(factory=Everything, eq=False)
    dead_letter: DeadLetterSettings | None = None
    retry: RetrySettings | None = None
    exactly_once: bool = False
    expiration_ttl_s: float | None = DEFAULT_EXPIRATION_S
    """Deleted after this long without activity (``expiration_policy.ttl``); None: never expires."""
    detached: bool = False
    """Detached from its topic (DetachSubscription): receives nothing, Pull and StreamingPull fail."""
    push: PushSettings | None = None
    """A push subscription's ``push_config`` (``_push``); None: a pull subscription."""

    def __getstate__(self) -> dict[str, object]:
        return _state_of(self)

    def __setstate__(self, state: dict[str, object]) -> None:
        """Unpickle from a journal, one written before a field existed too (it takes its default)."""
        _restore(self, state)


@final
@attrs.frozen
class Failed:
    """A request could not be done; ``code`` names the gRPC status, ``message`` says why."""

    code: str
    message: str


@final
@attrs.frozen
class Done:
    """A request that returns nothing succeeded."""


# --- admin requests (to the registry) -------------------------------------------------------


@final
@attrs.frozen
class CreateTopic:
    """Create a topic; answered with the ``TopicConfig`` or ``Failed(ALREADY_EXISTS)``."""

    config: TopicConfig


@final
@attrs.frozen
class GetTopic:
    """Answered with the ``TopicConfig`` or ``Failed(NOT_FOUND)``."""

    name: str


@final
@attrs.frozen
class ReplaceTopic:
    """Replace an existing topic's settings (the glue merged the update mask)."""

    config: TopicConfig


@final
@attrs.frozen
class DeleteTopic:
    """Delete a topic; its subscriptions stay, detached (their topic becomes ``_deleted-topic_``)."""

    name: str


@final
@attrs.frozen
class ListTopics:
    """Topics of ``project`` (``projects/p``), as a ``Page`` of names after ``after``."""

    project: str
    page_size: int
    after: str


@final
@attrs.frozen
class ListTopicSubscriptions:
    """Subscription names of a topic, as a ``Page``."""

    topic: str
    page_size: int
    after: str


@final
@attrs.frozen
class CreateSubscription:
    """Create a subscription; answered with its config or ``Failed``."""

    config: SubscriptionConfig


@final
@attrs.frozen
class GetSubscription:
    """Answered with the ``SubscriptionConfig`` or ``Failed(NOT_FOUND)``."""

    name: str


@final
@attrs.frozen
class ReplaceSubscription:
    """Replace a subscription's settings (the glue merged the update mask)."""

    config: SubscriptionConfig


@final
@attrs.frozen
class DeleteSubscription:
    """Delete a subscription: its streams close and its messages go."""

    name: str


@final
@attrs.frozen
class ListSubscriptions:
    """Subscriptions of a project, as a ``Page`` of configs."""

    project: str
    page_size: int
    after: str


@final
@attrs.frozen
class Page:
    """One page of a listing; ``next_after`` is empty on the last page."""

    items: tuple[object, ...]
    next_after: str


# --- data path ------------------------------------------------------------------------------


@final
@attrs.frozen
class Publish:
    """Publish messages to ``topic``; answered with ``PublishedIds`` or ``Failed(NOT_FOUND)``."""

    topic: str
    messages: tuple[PubMessage, ...]
    schema_checked: bool = False
    """The glue checked the messages against the topic's schema (else such a topic answers ``NeedsSchema``)."""


@final
@attrs.frozen
class PublishedIds:
    """The topic's ids for the published messages, in order."""

    message_ids: tuple[str, ...]


class SettleKind(enum.Enum):
    """What a client said about received messages."""

    ACK = "ack"
    MODACK = "modack"


@final
@attrs.frozen
class Settle:
    """Acknowledge or modify deadlines of ``ack_ids`` on ``subscription``.

    Answered with ``SettleOutcome``: with exactly-once delivery the invalid ack ids are listed
    once the queue has confirmed; otherwise at once, listing nothing. The subscription verifies
    each id's seal (``AckIdCodec``): an id it did not issue settles nothing.
    """

    subscription: str
    kind: SettleKind
    ack_ids: tuple[str, ...]
    seconds: int = 0


@final
@attrs.frozen
class SettleOutcome:
    """Which ack ids failed (exactly-once only: their leases had lapsed or they were never valid)."""

    invalid: tuple[str, ...]


@final
@attrs.frozen
class StreamSettings:
    """What the first StreamingPullRequest asked for."""

    subscription: str
    ack_deadline_s: int
    max_messages: int
    max_bytes: int


@final
@attrs.frozen
class OpenStream:
    """Start a stream; answered with ``StreamOpened`` or ``Failed``."""

    settings: StreamSettings


@final
@attrs.frozen
class StreamOpened:
    """The binding actor serving the stream, and the subscription's properties."""

    binding: ActorRef
    exactly_once: bool
    ordering: bool


@final
@attrs.frozen
class PullMessages:
    """A synchronous Pull: up to ``max_messages`` / ``max_bytes``, waiting up to ``wait_s`` for the first."""

    subscription: str
    max_messages: int
    wait_s: float
    max_bytes: int = 1 << 62


@final
@attrs.frozen
class NextBatch:
    """Glue -> binding: the next deliveries; answered with ``Batch`` (empty after ``wait_s``) or ``StreamClosed``."""

    wait_s: float


@final
@attrs.frozen
class Confirmations:
    """Exactly-once outcomes of acks and deadline changes sent on a stream, for its next response.

    Glue -> binding; the binding hands them back in a ``Batch`` (Pub/Sub's
    ``acknowledge_confirmation`` and ``modify_ack_deadline_confirmation``).
    """

    acked: tuple[str, ...] = ()
    ack_invalid: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    modify_invalid: tuple[str, ...] = ()

    def __add__(self, other: Confirmations) -> Confirmations:
        return Confirmations(self.acked + other.acked, self.ack_invalid + other.ack_invalid,
                             self.modified + other.modified, self.modify_invalid + other.modify_invalid)


@final
@checked_when_built
@attrs.frozen
class Batch:
    """Deliveries for one response: each is (ack id, message, delivery attempt), and the properties.

    ``confirmations`` (exactly-once streams only) answers acks and deadline changes sent on the stream.
    Checked immutable once when built (a binding builds its own with ``batch_unchecked``).
    """

    received: tuple[tuple[str, PubMessage, int], ...]
    exactly_once: bool = False
    ordering: bool = False
    confirmations: Confirmations | None = None
    delivery_attempts: bool = False
    """Whether responses carry ``delivery_attempt``: Pub/Sub sets it only with a dead-letter policy."""


batch_unchecked = unchecked_builder(Batch, ("received", "exactly_once", "ordering", "confirmations",
                                            "delivery_attempts"))
"""``Batch(...)`` without its walk over every delivery, for a binding's own: ack ids it issued (str), messages
built by ``pub_message_unchecked``, attempts (int), and its flags."""


@final
@attrs.frozen
class StreamClosed:
    """The binding no longer serves a stream (server stopping, subscription deleted or changed)."""

    reason: str


@final
@attrs.frozen
class Detach:
    """Glue -> binding: the stream ended; keep the leases until settled or lapsed, then stop."""


@final
@attrs.frozen
class Shutdown:
    """Glue -> registry: close every stream (each answers ``StreamClosed``), the server is stopping."""


@final
@attrs.frozen
class Reset:
    """Glue -> registry: delete every topic and subscription (a clean state for the next test); ``Done``."""


@final
@attrs.frozen
class Seek:
    """Seek ``subscription`` to ``time_ns``: earlier messages count as acked, later ones as not."""

    subscription: str
    time_ns: int
    now_ns: int
