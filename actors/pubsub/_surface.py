"""The rest of Pub/Sub's surface: DetachSubscription, a permissive IAM, and the settings the front refuses.

Detaching a subscription stops its topic's fan-out to it, drops its messages (a Seek past every
message) and ends its streams; from then on a Pull or StreamingPull fails with
FAILED_PRECONDITION, and GetSubscription shows ``detached``. IAM is permissive: the registry keeps
each resource's policy as the client set it (serialized, plain bytes) with an etag of its own, and
every permission asked about is granted. Settings of ``Topic`` and ``Subscription`` the front does
not implement are refused with UNIMPLEMENTED naming the field (``unimplemented_topic_field``,
``unimplemented_subscription_field``), on create and on update, so none is silently dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, final

import attrs

from ._model import Done, Failed, Seek
from ._protocol import Envelope

if TYPE_CHECKING:
    from ._registry import PubSubRegistry

DETACHED_REASON: Final = "subscription detached from its topic"
"""The reason a detached subscription's streams end with; the glue answers it with FAILED_PRECONDITION."""
_END_OF_TIME_NS: Final = 1 << 62


@final
@attrs.frozen
class DetachFromTopic:
    """Glue -> registry: detach subscription ``name`` from its topic (DetachSubscription); ``Done``."""

    name: str
    now_ns: int


@final
@attrs.frozen
class GetIamPolicy:
    """Glue -> registry: the policy set on ``resource`` (``IamPolicy``), or ``Failed(NOT_FOUND)``."""

    resource: str


@final
@attrs.frozen
class SetIamPolicy:
    """Glue -> registry: keep ``policy`` (a serialized ``google.iam.v1.Policy``) for ``resource``.

    ``etag`` non-empty: refused with ABORTED unless it is the current policy's (Pub/Sub's
    read-modify-write check). Answered with the kept ``IamPolicy``.
    """

    resource: str
    policy: bytes
    etag: bytes


@final
@attrs.frozen
class IamPolicy:
    """A resource's policy as it was set (serialized), and the etag the registry gave it."""

    policy: bytes
    etag: bytes


def _etag(version: int) -> bytes:
    return f"conveyor-{version}".encode()


def _exists(registry: PubSubRegistry, resource: str) -> bool:
    return resource in registry.topics or resource in registry.subscriptions or resource in registry.snapshots


REGISTRY_REQUESTS: Final = (DetachFromTopic, GetIamPolicy, SetIamPolicy)
RECORDED: Final = frozenset({DetachFromTopic, SetIamPolicy})
"""What a registry on a disk store records of these requests."""


def handle_surface_request(registry: PubSubRegistry, message: object) -> None:
    """The registry's answer to a ``REGISTRY_REQUESTS`` request."""
    reply = registry._reply  # noqa: SLF001 - this module is the registry's, split out
    match message:
        case DetachFromTopic(name=name, now_ns=now_ns):
            known = registry.subscriptions.get(name)
            if known is None:
                reply(Failed("NOT_FOUND", f"Subscription not found: {name}"))
                return
            config, ref = known
            if not config.detached:
                registry.subscriptions[name] = (attrs.evolve(config, detached=True), ref)
                topic = registry.topics.get(config.topic)
                if topic is not None:
                    registry.ctx.send(topic[1], registry_detach(name))
                registry.ctx.send(ref, Envelope(Seek(name, _END_OF_TIME_NS, now_ns), None))  # its messages go
                registry.ctx.send(ref, DetachFromTopic(name, now_ns))  # its streams end
            reply(Done())
        case GetIamPolicy(resource=resource):
            if not _exists(registry, resource):
                reply(Failed("NOT_FOUND", f"Resource not found: {resource}"))
                return
            kept = registry.iam.get(resource)
            reply(kept if kept is not None else IamPolicy(b"", _etag(0)))
        case SetIamPolicy(resource=resource, policy=policy, etag=etag):
            if not _exists(registry, resource):
                reply(Failed("NOT_FOUND", f"Resource not found: {resource}"))
                return
            current = registry.iam.get(resource)
            current_etag = current.etag if current is not None else _etag(0)
            if etag and etag != current_etag:
                reply(Failed("ABORTED", f"policy.etag: {etag!r} is not the current policy's ({current_etag!r}): "
                                        "read the policy again and apply the change to it"))
                return
            registry.iam_version += 1
            kept = IamPolicy(policy, _etag(registry.iam_version))
            registry.iam[resource] = kept
            reply(kept)


def registry_detach(name: str) -> object:
    """The registry's message that makes a topic stop fanning out to subscription ``name``."""
    from ._registry import DetachSubscription

    return DetachSubscription(name)


# --- settings the front refuses ---------------------------------------------------------------

_TOPIC_UNIMPLEMENTED: Final = {
    "kms_key_name": "customer-managed encryption keys",
    "ingestion_data_source_settings": "ingestion from other sources (Kinesis, Cloud Storage, Event Hubs, ...)",
    "message_transforms": "message transforms",
    "message_storage_policy": "message storage policies",
    "tags": "resource tags",
}
_SUBSCRIPTION_UNIMPLEMENTED: Final = {
    "bigquery_config": "BigQuery subscriptions",
    "cloud_storage_config": "Cloud Storage subscriptions",
    "bigtable_config": "Bigtable subscriptions",
    "message_transforms": "message transforms",
    "tags": "resource tags",
}
TOPIC_REFUSED_UPDATES: Final = tuple(_TOPIC_UNIMPLEMENTED)
"""Topic fields an update mask may name only to be refused with UNIMPLEMENTED (not INVALID_ARGUMENT)."""
SUBSCRIPTION_REFUSED_UPDATES: Final = tuple(_SUBSCRIPTION_UNIMPLEMENTED)


def _set(message: Any, field: str) -> bool:
    value = getattr(message, field)
    if isinstance(value, str | bytes | int | float):
        return bool(value)
    if hasattr(value, "DESCRIPTOR"):  # a message field: set and not empty
        return bool(message.HasField(field)) and value.ByteSize() > 0
    return len(value) > 0  # repeated or map


def _refusal(message: Any, fields: dict[str, str]) -> str | None:
    for field, what in fields.items():
        if _set(message, field):
            return f"{field}: {what} are not supported by conveyor's Pub/Sub front; leave it unset"
    return None


def unimplemented_topic_field(topic: Any) -> str | None:
    """Why a ``Topic`` (raw protobuf) sets a field the front does not implement (``field: why``), or None."""
    return _refusal(topic, _TOPIC_UNIMPLEMENTED)


def unimplemented_subscription_field(sub: Any) -> str | None:
    """Why a ``Subscription`` sets a field the front does not implement (``field: why``), or None."""
    return _refusal(sub, _SUBSCRIPTION_UNIMPLEMENTED)
