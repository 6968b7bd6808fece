"""Between ``google.pubsub.v1`` protobufs and the front's frozen values, validating at the edge.

Every check names the request field that failed, as Pub/Sub's own errors do, and raises
``BadRequest`` (INVALID_ARGUMENT) or ``Unsupported`` (UNIMPLEMENTED) before anything reaches
an actor. Messages are the raw protobuf classes (``types.X.pb()``), not proto-plus wrappers:
the glue builds one per delivery, and the raw classes are several times cheaper.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from google.protobuf import any_pb2, duration_pb2
from google.pubsub_v1 import types
from google.rpc import code_pb2, error_details_pb2, status_pb2

from ._ackid import looks_like_ack_id
from ._edge import ack_ids_refusal, message_refusal, publish_count_refusal
from ._filter import FilterError, parse_filter
from ._limits import ERROR_INFO_MAX_BYTES, quote
from ._model import (
    DEFAULT_EXPIRATION_S,
    DEFAULT_RETENTION_S,
    Batch,
    DeadLetterSettings,
    PubMessage,
    RetrySettings,
    SubscriptionConfig,
    TopicConfig,
)
from ._push_core import settings_from_pb as push_settings
from ._push_core import settings_into_pb as push_settings_into
from ._subscription import to_broker
from ._surface import (
    SUBSCRIPTION_REFUSED_UPDATES,
    TOPIC_REFUSED_UPDATES,
    unimplemented_subscription_field,
    unimplemented_topic_field,
)

TopicPb: Any = types.Topic.pb()
SubscriptionPb: Any = types.Subscription.pb()
PubsubMessagePb: Any = types.PubsubMessage.pb()
StreamingPullResponsePb: Any = types.StreamingPullResponse.pb()
PullResponsePb: Any = types.PullResponse.pb()
ReceivedMessagePb: Any = types.ReceivedMessage.pb()

RECEIVE_LIMIT: Final = 4 * 1024 * 1024
"""gRPC's default receive limit, which Pub/Sub clients keep in emulator mode."""
_RESPONSE_SLACK: Final = 256  # the response's own framing and subscription_properties, rounded up
_NAME_ID = r"[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}"
_TOPIC: Final = re.compile(rf"^projects/([^/]+)/topics/({_NAME_ID})$")
_SUBSCRIPTION: Final = re.compile(rf"^projects/([^/]+)/subscriptions/({_NAME_ID})$")
_PROJECT: Final = re.compile(r"^projects/[^/]+$")
MIN_RETENTION_S: Final = 600.0
MAX_RETENTION_S: Final = 31 * 24 * 3600.0
MIN_EXPIRATION_S: Final = 24 * 3600.0


class RequestError(Exception):
    """A request the front refuses; ``code`` is the gRPC status name."""

    code = "INVALID_ARGUMENT"


class BadRequest(RequestError):
    """INVALID_ARGUMENT, naming the field."""


class Unsupported(RequestError):
    """UNIMPLEMENTED: a real Pub/Sub feature this front does not offer."""

    code = "UNIMPLEMENTED"


def _bad(field: str, why: str) -> BadRequest:
    return BadRequest(f"{field}: {why}")


def topic_name(value: str, field: str = "topic") -> str:
    """A checked ``projects/P/topics/T``."""
    match = _TOPIC.match(value)
    if match is None or match.group(2).startswith("goog"):
        raise _bad(field, f"{quote(value, 64)} is not a topic name (projects/PROJECT/topics/TOPIC: 3-255 characters, "
                          "starting with a letter, not with 'goog')")
    return value


def subscription_name(value: str, field: str = "subscription") -> str:
    """A checked ``projects/P/subscriptions/S``."""
    match = _SUBSCRIPTION.match(value)
    if match is None or match.group(2).startswith("goog"):
        raise _bad(field, f"{quote(value, 64)} is not a subscription name (projects/PROJECT/subscriptions/NAME: 3-255 "
                          "characters, starting with a letter, not with 'goog')")
    return value


def project_name(value: str, field: str = "project") -> str:
    """A checked ``projects/P``."""
    if not _PROJECT.match(value):
        raise _bad(field, f"{quote(value, 64)} is not a project name (projects/PROJECT)")
    return value


def _seconds(duration: Any) -> float:
    return float(duration.seconds) + float(duration.nanos) / 1e9


def _duration(seconds: float) -> Any:
    """A Duration of ``seconds`` >= 0: whole seconds and nanoseconds apart, exact up to Duration's largest."""
    whole = math.floor(seconds)
    nanos = round((seconds - whole) * 1e9)
    if nanos == 1_000_000_000:
        whole, nanos = whole + 1, 0
    return duration_pb2.Duration(seconds=whole, nanos=nanos)


def _labels(labels: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


# --- topics ---------------------------------------------------------------------------------


def topic_config(topic: Any) -> TopicConfig:
    """A validated ``TopicConfig`` from a ``Topic``."""
    topic_name(topic.name, "name")
    retention = None
    if topic.HasField("message_retention_duration"):
        retention = _seconds(topic.message_retention_duration)
        if not MIN_RETENTION_S <= retention <= MAX_RETENTION_S:
            raise _bad("message_retention_duration", f"must be from 10 minutes to 31 days, got {retention} s")
    unimplemented = unimplemented_topic_field(topic)
    if unimplemented is not None:
        raise Unsupported(unimplemented)
    from ._schema_service import settings_from_pb  # imports _convert: here, not at the top

    return TopicConfig(topic.name, _labels(topic.labels), retention, settings_from_pb(topic))


def topic_pb(config: TopicConfig) -> Any:
    """The ``Topic`` for a config."""
    topic = TopicPb(name=config.name, labels=dict(config.labels))
    if config.retention_s is not None:
        topic.message_retention_duration.CopyFrom(_duration(config.retention_s))
    return topic


TOPIC_UPDATABLE: Final = ("labels", "message_retention_duration", "schema_settings", *TOPIC_REFUSED_UPDATES)


# --- subscriptions --------------------------------------------------------------------------


def subscription_config(sub: Any) -> SubscriptionConfig:
    """A validated ``SubscriptionConfig`` from a ``Subscription``, Pub/Sub's defaults filled in."""
    subscription_name(sub.name, "name")
    topic_name(sub.topic, "topic")
    unimplemented = unimplemented_subscription_field(sub)
    if unimplemented is not None:
        raise Unsupported(unimplemented)
    try:
        push = push_settings(sub.push_config)
    except ValueError as error:
        raise BadRequest(str(error)) from None
    if sub.bigquery_config.table:
        raise Unsupported("bigquery_config: BigQuery subscriptions are not supported by conveyor's Pub/Sub front")
    if sub.cloud_storage_config.bucket:
        raise Unsupported("cloud_storage_config: Cloud Storage subscriptions are not supported by conveyor's "
                          "Pub/Sub front")
    deadline = sub.ack_deadline_seconds or 10
    if not 10 <= deadline <= 600:
        raise _bad("ack_deadline_seconds", f"must be from 10 to 600 (or 0 for 10), got {deadline}")
    retention = DEFAULT_RETENTION_S
    if sub.HasField("message_retention_duration"):
        retention = _seconds(sub.message_retention_duration)
        if not MIN_RETENTION_S <= retention <= MAX_RETENTION_S:
            raise _bad("message_retention_duration", f"must be from 10 minutes to 31 days, got {retention} s")
    try:
        parsed = parse_filter(sub.filter)
    except FilterError as error:
        raise BadRequest(str(error)) from None
    dead_letter = None
    if sub.HasField("dead_letter_policy") and sub.dead_letter_policy.dead_letter_topic:
        policy = sub.dead_letter_policy
        topic_name(policy.dead_letter_topic, "dead_letter_policy.dead_letter_topic")
        attempts = policy.max_delivery_attempts or 5
        if not 5 <= attempts <= 100:
            raise _bad("dead_letter_policy.max_delivery_attempts",
                       f"must be from 5 to 100 (or 0 for 5), got {attempts}")
        dead_letter = DeadLetterSettings(policy.dead_letter_topic, attempts)
    retry = None
    if sub.HasField("retry_policy"):
        policy = sub.retry_policy
        low = _seconds(policy.minimum_backoff) if policy.HasField("minimum_backoff") else 10.0
        high = _seconds(policy.maximum_backoff) if policy.HasField("maximum_backoff") else 600.0
        for field, value in (("minimum_backoff", low), ("maximum_backoff", high)):
            if not 0 <= value <= 600:
                raise _bad(f"retry_policy.{field}", f"must be from 0 to 600 seconds, got {value}")
        if high < low:
            raise _bad("retry_policy.maximum_backoff", f"must be >= minimum_backoff ({low} s), got {high} s")
        retry = RetrySettings(low, high)
    return SubscriptionConfig(
        expiration_ttl_s=_expiration(sub),
        name=sub.name,
        topic=sub.topic,
        ack_deadline_s=deadline,
        retain_acked_messages=sub.retain_acked_messages,
        retention_s=retention,
        labels=_labels(sub.labels),
        enable_message_ordering=sub.enable_message_ordering,
        filter_text=sub.filter,
        filter=parsed,
        dead_letter=dead_letter,
        retry=retry,
        exactly_once=sub.enable_exactly_once_delivery,
        push=push,
    )


def _expiration(sub: Any) -> float | None:
    """``expiration_policy.ttl`` as Pub/Sub reads it: absent policy 31 days, policy without ttl never, else >= 1 day."""
    if not sub.HasField("expiration_policy"):
        return DEFAULT_EXPIRATION_S
    if not sub.expiration_policy.HasField("ttl"):
        return None
    ttl = _seconds(sub.expiration_policy.ttl)
    if ttl < MIN_EXPIRATION_S:
        raise _bad("expiration_policy.ttl", f"must be at least 1 day ({MIN_EXPIRATION_S:.0f} s) or unset (never "
                                            f"expires), got {ttl:g} s")
    return ttl


def subscription_pb(config: SubscriptionConfig) -> Any:
    """The ``Subscription`` for a config (state ACTIVE)."""
    sub = SubscriptionPb(
        name=config.name,
        topic=config.topic,
        ack_deadline_seconds=config.ack_deadline_s,
        retain_acked_messages=config.retain_acked_messages,
        labels=dict(config.labels),
        enable_message_ordering=config.enable_message_ordering,
        filter=config.filter_text,
        enable_exactly_once_delivery=config.exactly_once,
        state=1,
        detached=config.detached,
    )
    sub.message_retention_duration.CopyFrom(_duration(config.retention_s))
    if config.expiration_ttl_s is None:
        sub.expiration_policy.SetInParent()  # a policy without ttl: never expires
    else:
        sub.expiration_policy.ttl.CopyFrom(_duration(config.expiration_ttl_s))
    if config.dead_letter is not None:
        sub.dead_letter_policy.dead_letter_topic = config.dead_letter.topic
        sub.dead_letter_policy.max_delivery_attempts = config.dead_letter.max_delivery_attempts
    if config.retry is not None:
        sub.retry_policy.minimum_backoff.CopyFrom(_duration(config.retry.min_backoff_s))
        sub.retry_policy.maximum_backoff.CopyFrom(_duration(config.retry.max_backoff_s))
    if config.push is not None:
        push_settings_into(config.push, sub.push_config)
    return sub


SUBSCRIPTION_UPDATABLE: Final = (
    "ack_deadline_seconds",
    "retain_acked_messages",
    "message_retention_duration",
    "labels",
    "dead_letter_policy",
    "retry_policy",
    "enable_exactly_once_delivery",
    "push_config",
    "expiration_policy",
    *SUBSCRIPTION_REFUSED_UPDATES,
)


def merge(current: Any, update: Any, paths: Iterable[str], updatable: tuple[str, ...]) -> Any:
    """``current`` with the fields named by an update mask copied from ``update``.

    Raises:
        BadRequest: no path, or a path naming a field that cannot be updated.
    """
    chosen = list(paths)
    if not chosen:
        raise _bad("update_mask", "name at least one field to update")
    merged = type(current)()
    merged.CopyFrom(current)
    for index, path in enumerate(chosen):
        top = path.split(".")[0]
        if top not in updatable:
            raise _bad(f"update_mask.paths[{index}]",
                       f"{quote(path)} cannot be updated; updatable: {', '.join(updatable)}")
        field = update.DESCRIPTOR.fields_by_name[top]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            getattr(merged, top).clear()
            getattr(merged, top).update(getattr(update, top))
        elif field.message_type is not None and not hasattr(getattr(update, top), "DESCRIPTOR"):  # repeated
            merged.ClearField(top)
            getattr(merged, top).extend(getattr(update, top))
        elif field.message_type is not None:
            merged.ClearField(top)
            if update.HasField(top):
                getattr(merged, top).CopyFrom(getattr(update, top))
        else:
            setattr(merged, top, getattr(update, top))
    return merged


# --- messages -------------------------------------------------------------------------------


def received_size(message: Any) -> int:
    """Bytes of the largest response that could carry ``message`` alone (ack id and id at their longest)."""
    received = ReceivedMessagePb(ack_id="9" * 80, delivery_attempt=2**31 - 1)
    copy = received.message
    copy.CopyFrom(message)
    copy.message_id = "9" * 20
    copy.publish_time.seconds = 2**40
    copy.publish_time.nanos = 999_999_999
    return int(received.ByteSize()) + _RESPONSE_SLACK


def pub_messages(messages: Any, publish_time_ns: int) -> tuple[PubMessage, ...]:
    """Validated ``PubMessage`` values for a PublishRequest's messages.

    Raises:
        BadRequest: an empty request, a message with neither data nor attributes, a bad attribute
            or ordering key, or a message that could not be received (over the 4 MiB limit).
    """
    refused = publish_count_refusal(messages)
    if refused is not None:
        raise BadRequest(refused)
    result = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        data = message.data
        attributes = message.attributes
        pub = PubMessage(data, tuple(sorted(attributes.items())) if attributes else (), message.ordering_key,
                         publish_time_ns)
        refused = message_refusal(where, pub)
        if refused is not None:
            raise BadRequest(refused)
        if len(data) > RECEIVE_LIMIT - 64 * 1024:
            size = received_size(message)
            if size > RECEIVE_LIMIT:
                raise _bad(where, f"a response carrying this message would be {size} bytes, over the "
                                  f"{RECEIVE_LIMIT}-byte (4 MiB) receive limit of Pub/Sub clients, so it could "
                                  "never be received; publish less than about "
                                  f"{RECEIVE_LIMIT - (size - len(data))} bytes of data")
        _check_with_broker(where, pub)
        result.append(pub)
    return tuple(result)


def _check_with_broker(where: str, message: PubMessage) -> None:
    """Refuse, naming the field, a message the broker's ``Message`` would refuse when a subscription stores it.

    Built through ``to_broker``, the very conversion each subscription makes (ordered, with a TTL, so
    every field is checked), so the edge and the broker cannot drift apart: a message refused there
    would crash the subscription actors after the publish was confirmed.
    """
    try:
        to_broker(message, True, DEFAULT_RETENTION_S)
    except ValueError as error:
        raise _bad(_refused_field(where, message), f"the broker refuses it: {str(error)[:200]}") from None


def _refused_field(where: str, message: PubMessage) -> str:
    """Which field of a refused message the broker objects to (each tried alone); the message if none alone."""
    for key, value in message.attributes:
        try:
            to_broker(PubMessage(b"", ((key, value),)), True, DEFAULT_RETENTION_S)
        except ValueError:
            return f"{where}.attributes[{quote(key)}]"
    try:
        to_broker(PubMessage(b"", (), message.ordering_key), True, DEFAULT_RETENTION_S)
    except ValueError:
        return f"{where}.ordering_key"
    return where


def check_ack_id_list(values: Sequence[str], field: str = "ack_ids") -> None:
    """Refuse a list of ack ids over the limits (count, each id's length) before any is parsed.

    Raises:
        BadRequest: more than ``ACK_IDS_MAX`` ids, or one longer than ``ACK_ID_MAX_BYTES``.
    """
    refused = ack_ids_refusal(values, field)
    if refused is not None:
        raise BadRequest(refused)


def stream_request_ids(request: Any) -> None:
    """Refuse a StreamingPullRequest whose ack-id lists are over the limits (``check_ack_id_list``)."""
    check_ack_id_list(request.ack_ids, "ack_ids")
    check_ack_id_list(request.modify_deadline_ack_ids, "modify_deadline_ack_ids")


def ack_ids(values: Sequence[str], field: str = "ack_ids") -> tuple[str, ...]:
    """The ack ids of a request; one without an ack id's shape is refused, naming its index.

    The limits come first (``check_ack_id_list``), before any id is looked at. Only the shape is
    checked here: the subscription verifies each id's seal, and one it did not issue settles
    nothing (reported only on an exactly-once subscription).
    """
    check_ack_id_list(values, field)
    checked = tuple(values)
    for index, text in enumerate(checked):
        if not looks_like_ack_id(text):
            raise _bad(f"{field}[{index}]", f"{quote(text)} is not an ack id this server issued")
    if not checked:
        raise _bad(field, "at least one ack id is required")
    return checked


_PERMANENT: Final = "PERMANENT_FAILURE_INVALID_ACK_ID"
_TRANSIENT: Final = "TRANSIENT_FAILURE_CONFIRM_AGAIN"


def exactly_once_failure(ack_ids: Sequence[str], invalid: Iterable[str]) -> Any:
    """The status for an exactly-once Acknowledge or ModifyAckDeadline with ``invalid`` ack ids.

    Pub/Sub reports each failed id in an ``ErrorInfo`` (``EXACTLY_ONCE_ACKID_FAILURE``): invalid ones
    ``PERMANENT_...``, the others ``TRANSIENT_...`` so that the client sends them again and hears
    success (a repeated ack of an acked message is confirmed). Google's client fails every id an
    INVALID_ARGUMENT's ErrorInfo leaves out, yet an ErrorInfo of every id can exceed the trailer
    size clients accept (a big ack made one of 5 MB). So it lists what fits in
    ``ERROR_INFO_MAX_BYTES``, invalid ids first; if some are left out, the status is ABORTED, on
    which Google's client sends every id not marked permanent again, so the rest are answered by
    the next, smaller calls.
    """
    failed = set(invalid)
    ordered = [*dict.fromkeys(i for i in ack_ids if i in failed), *sorted(failed.difference(ack_ids))]
    ordered += [i for i in dict.fromkeys(ack_ids) if i not in failed]
    metadata: dict[str, str] = {}
    size = 64  # the reason, the domain and their framing
    for ack_id in ordered:
        entry = len(ack_id.encode()) + len(_PERMANENT) + 8  # a map entry's key, value and framing
        if size + entry > ERROR_INFO_MAX_BYTES:
            break
        metadata[ack_id] = _PERMANENT if ack_id in failed else _TRANSIENT
        size += entry
    complete = len(metadata) == len(ordered)
    info = error_details_pb2.ErrorInfo(reason="EXACTLY_ONCE_ACKID_FAILURE", domain="pubsub.googleapis.com",
                                       metadata=metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    listed = sum(1 for why in metadata.values() if why == _PERMANENT)
    message = f"{len(failed)} ack ids are no longer valid (lease lapsed, already settled or unknown)"
    if not complete:
        message += (f"; this error lists {len(metadata)} of the {len(ordered)} ids ({listed} invalid), as many as "
                    f"fit in {ERROR_INFO_MAX_BYTES} bytes: send the others again")
    code = code_pb2.INVALID_ARGUMENT if complete else code_pb2.ABORTED
    return status_pb2.Status(code=code, message=message, details=[detail])


def _fill(target: Any, ack_id: str, message: PubMessage, attempt: int) -> None:
    """One ReceivedMessage; ``attempt`` 0 leaves ``delivery_attempt`` unset (no dead-letter policy)."""
    target.ack_id = ack_id
    if attempt:
        target.delivery_attempt = attempt
    out = target.message
    out.data = message.data
    if message.attributes:
        out.attributes.update(message.attributes)
    out.message_id = message.message_id
    out.publish_time.FromNanoseconds(message.publish_time_ns)
    if message.ordering_key:
        out.ordering_key = message.ordering_key


def stream_responses(batch: Batch) -> list[Any]:
    """StreamingPullResponses for a batch, each under the 4 MiB receive limit, each with the properties.

    Confirmations go in the first response (one without messages if the batch has none); ack ids
    are short, so they fit beside the messages.
    """
    responses = []
    current = None
    size = 0
    for ack_id, message, attempt in batch.received:
        estimate = len(message.data) + 200 + sum(len(k) + len(v) + 8 for k, v in message.attributes)
        if current is None or size + estimate > RECEIVE_LIMIT - _RESPONSE_SLACK - _confirmations_size(batch):
            current = _stream_response(batch)
            responses.append(current)
            size = 0
        _fill(current.received_messages.add(), ack_id, message, attempt if batch.delivery_attempts else 0)
        size += estimate
    confirmations = batch.confirmations
    if confirmations is not None:
        if not responses:
            responses.append(_stream_response(batch))
        first = responses[0]
        first.acknowledge_confirmation.ack_ids.extend(confirmations.acked)
        first.acknowledge_confirmation.invalid_ack_ids.extend(confirmations.ack_invalid)
        first.modify_ack_deadline_confirmation.ack_ids.extend(confirmations.modified)
        first.modify_ack_deadline_confirmation.invalid_ack_ids.extend(confirmations.modify_invalid)
    return responses


def _stream_response(batch: Batch) -> Any:
    response = StreamingPullResponsePb()
    response.subscription_properties.exactly_once_delivery_enabled = batch.exactly_once
    response.subscription_properties.message_ordering_enabled = batch.ordering
    return response


def _confirmations_size(batch: Batch) -> int:
    confirmations = batch.confirmations
    if confirmations is None:
        return 0
    ids = (*confirmations.acked, *confirmations.ack_invalid, *confirmations.modified, *confirmations.modify_invalid)
    return sum(len(ack_id) + 4 for ack_id in ids)


def pull_response(batch: Batch) -> Any:
    """The PullResponse for a Pull's batch (at most ``max_messages``, so one response)."""
    response = PullResponsePb()
    for ack_id, message, attempt in batch.received:
        _fill(response.received_messages.add(), ack_id, message, attempt if batch.delivery_attempts else 0)
    return response
