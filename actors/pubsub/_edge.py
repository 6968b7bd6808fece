"""The front's request limits as one sans-IO check, made wherever a data-path request comes in.

The gRPC glue (``_convert.py``, ``_server.py``) calls it on the values it builds from a request, before
anything reaches an actor; the topic and the subscription call it again on every ``Publish``,
``PullMessages``, ``Settle`` and ``OpenStream`` they are sent, so a client that speaks the actor
protocol (the simulator's, an embedding program's) meets the same limits, and a refused request
changes nothing. Each refusal is ``field: why`` (the request field, as Pub/Sub names it), answered
INVALID_ARGUMENT. docs/pubsub.md ("Limits") lists the limits; ``_limits.py`` holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ._limits import (
    ACK_ID_MAX_BYTES,
    ACK_IDS_MAX,
    ATTRIBUTE_KEY_MAX_BYTES,
    ATTRIBUTE_VALUE_MAX_BYTES,
    ATTRIBUTES_MAX,
    ORDERING_KEY_MAX_BYTES,
    PUBLISH_MAX_BYTES,
    PUBLISH_MAX_MESSAGES,
    quote,
)
from ._model import OpenStream, Publish, PubMessage, PullMessages, Settle, SettleKind, StreamSettings
from ._schema_book import SCHEMA_STAMPS

MODACK_MAX_S: Final = 600
"""The longest ack deadline a ModifyAckDeadline may set (Pub/Sub: 0 to 600 seconds)."""
STREAM_DEADLINE_MIN_S: Final = 10
STREAM_DEADLINE_MAX_S: Final = 600
"""A stream's ack deadline (Pub/Sub: 10 to 600 seconds; 0 in ``StreamSettings``: the subscription's)."""


def message_refusal(where: str, message: PubMessage) -> str | None:
    """Why message ``where`` (``messages[i]``) of a Publish is over a limit, or None; data, attributes, ordering key."""
    attributes = message.attributes
    if not message.data and not attributes:
        return f"{where}: a message needs data or at least one attribute"
    if len(attributes) > ATTRIBUTES_MAX:
        return f"{where}.attributes: at most {ATTRIBUTES_MAX} attributes (Pub/Sub's limit), got {len(attributes)}"
    for key, value in attributes:
        size = len(key.encode())
        if size > ATTRIBUTE_KEY_MAX_BYTES:
            return (f"{where}.attributes[{quote(key)}]: keys are at most {ATTRIBUTE_KEY_MAX_BYTES} bytes (Pub/Sub's "
                    f"limit), got {size}")
        if key.startswith("goog") and key not in SCHEMA_STAMPS:  # the glue refuses those from publishers
            return f"{where}.attributes[{quote(key)}]: keys starting with 'goog' are reserved"
        size = len(value.encode())
        if size > ATTRIBUTE_VALUE_MAX_BYTES:
            return (f"{where}.attributes[{quote(key)}]: values are at most {ATTRIBUTE_VALUE_MAX_BYTES} bytes "
                    f"(Pub/Sub's limit), got {size} bytes: {quote(value)}")
    key = message.ordering_key
    size = len(key.encode())
    if size > ORDERING_KEY_MAX_BYTES:
        return (f"{where}.ordering_key: at most {ORDERING_KEY_MAX_BYTES} bytes (Pub/Sub's limit), got {size} bytes: "
                f"{quote(key)}")
    return None


def publish_size(messages: Sequence[PubMessage]) -> int:
    """Bytes a Publish carries: data, attribute keys and values, ordering keys (its encoding only adds to it)."""
    return sum(len(m.data) + len(m.ordering_key.encode()) + sum(len(k.encode()) + len(v.encode())
                                                                for k, v in m.attributes) for m in messages)


def publish_count_refusal(messages: Sequence[PubMessage]) -> str | None:
    """Why a Publish of ``messages`` has too few or too many of them, or None."""
    if not messages:
        return "messages: at least one message is required"
    if len(messages) > PUBLISH_MAX_MESSAGES:
        return (f"messages: at most {PUBLISH_MAX_MESSAGES:,} messages per Publish request (Pub/Sub's limit), "
                f"got {len(messages):,}")
    return None


def publish_refusal(messages: Sequence[PubMessage]) -> str | None:
    """Why a Publish of ``messages`` is over a limit (count, size, each message's), or None: checked whole."""
    refused = publish_count_refusal(messages)
    if refused is not None:
        return refused
    size = publish_size(messages)
    if size > PUBLISH_MAX_BYTES:
        return (f"messages: the request carries {size:,} bytes of data, attributes and ordering keys, over Pub/Sub's "
                f"{PUBLISH_MAX_BYTES:,}-byte (10 MB) Publish request limit")
    for index, message in enumerate(messages):
        refused = message_refusal(f"messages[{index}]", message)
        if refused is not None:
            return refused
    return None


def ack_ids_refusal(values: Sequence[str], field: str = "ack_ids") -> str | None:
    """Why a list of ack ids is over the limits (count, each id's length), or None; no id is parsed."""
    if len(values) > ACK_IDS_MAX:
        return f"{field}: at most {ACK_IDS_MAX:,} ack ids per request, got {len(values):,}"
    for index, text in enumerate(values):
        if len(text) > ACK_ID_MAX_BYTES or (not text.isascii() and len(text.encode()) > ACK_ID_MAX_BYTES):
            return (f"{field}[{index}]: {quote(text)} is longer than {ACK_ID_MAX_BYTES} bytes, so not an ack id this "
                    "server issued")
    return None


def settle_refusal(request: Settle) -> str | None:
    """Why an Acknowledge or ModifyAckDeadline is over a limit (its ids, the deadline's range), or None."""
    refused = ack_ids_refusal(request.ack_ids)
    if refused is not None:
        return refused
    if not request.ack_ids:
        return "ack_ids: at least one ack id is required"
    if request.kind is SettleKind.MODACK:
        return modack_refusal(request.seconds)
    return None


def modack_refusal(seconds: int) -> str | None:
    """Why a ModifyAckDeadline's deadline is out of range, or None."""
    if not 0 <= seconds <= MODACK_MAX_S:
        return f"ack_deadline_seconds: must be from 0 to {MODACK_MAX_S}, got {seconds}"
    return None


def stream_refusal(settings: StreamSettings) -> str | None:
    """Why a stream's settings are out of range (its ack deadline, its flow control), or None."""
    deadline = settings.ack_deadline_s
    if deadline and not STREAM_DEADLINE_MIN_S <= deadline <= STREAM_DEADLINE_MAX_S:
        return (f"stream_ack_deadline_seconds: must be from {STREAM_DEADLINE_MIN_S} to {STREAM_DEADLINE_MAX_S}, "
                f"got {deadline}")
    if settings.max_messages < 0 or settings.max_bytes < 0:
        return "max_outstanding_messages / max_outstanding_bytes: must be >= 0"
    return None


def pull_refusal(max_messages: int) -> str | None:
    """Why a Pull of ``max_messages`` asks for an impossible batch, or None."""
    if max_messages <= 0:
        return f"max_messages: must be > 0, got {max_messages}"
    return None


def request_refusal(request: object) -> str | None:
    """Why the front refuses a data-path request for its limits (``field: why``, INVALID_ARGUMENT), or None.

    ``Publish``, ``PullMessages``, ``Settle`` and ``OpenStream`` are checked; anything else passes.
    """
    match request:
        case Publish(messages=messages):
            return publish_refusal(messages)
        case Settle():
            return settle_refusal(request)
        case PullMessages(max_messages=max_messages):
            return pull_refusal(max_messages)
        case OpenStream(settings=settings):
            return stream_refusal(settings)
    return None
