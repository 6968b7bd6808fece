"""gRPC glue for snapshots, DetachSubscription and IAM: validate, ask the registry, convert the answer.

Functions of the ``PubSubServer`` (``server``), wired into its handlers; like the rest of the glue
they hold no state: snapshots and policies live in the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import grpc
from google.iam.v1 import iam_policy_pb2, policy_pb2
from google.protobuf import empty_pb2
from google.pubsub_v1 import types

from . import _convert as convert
from ._model import Page
from ._snapshots import (
    CreateSnapshot,
    DeleteSnapshot,
    GetSnapshot,
    ListSnapshots,
    ReplaceSnapshot,
    SeekSnapshot,
    SnapshotConfig,
    snapshot_name_refusal,
)
from ._surface import DetachFromTopic, GetIamPolicy, IamPolicy, SetIamPolicy

if TYPE_CHECKING:
    from ._server import PubSubServer

IAM: Final = "google.iam.v1.IAMPolicy"
SnapshotPb: Any = types.Snapshot.pb()
SNAPSHOT_UPDATABLE: Final = ("labels", "expire_time")


def snapshot_name(value: str, field: str = "snapshot") -> str:
    """A checked ``projects/P/snapshots/S``."""
    refused = snapshot_name_refusal(value, field)
    if refused is not None:
        raise convert.BadRequest(refused)
    return value


def snapshot_pb(config: SnapshotConfig) -> Any:
    """The ``Snapshot`` for a config."""
    snapshot = SnapshotPb(name=config.name, topic=config.topic, labels=dict(config.labels))
    snapshot.expire_time.FromNanoseconds(config.expire_ns)
    return snapshot


def _snapshot_config(snapshot: Any) -> SnapshotConfig:
    """The settings an UpdateSnapshot may change, read back from a merged ``Snapshot``."""
    return SnapshotConfig(snapshot.name, snapshot.topic, snapshot.expire_time.ToNanoseconds(),
                          tuple(sorted(snapshot.labels.items())))


# --- snapshots ------------------------------------------------------------------------------


def create_snapshot(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """CreateSnapshot: the subscription's unacked messages and every later publish, until expiry."""
    name = snapshot_name(request.name, "name")
    subscription = convert.subscription_name(request.subscription)
    if len(request.tags):
        raise convert.Unsupported("tags: resource tags are not supported by conveyor's Pub/Sub front; leave it unset")
    labels = tuple(sorted(request.labels.items()))
    config: SnapshotConfig = server._ask(context, CreateSnapshot(name, subscription, labels, server.clock()))  # noqa: SLF001
    return snapshot_pb(config)


def get_snapshot(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """GetSnapshot."""
    name = snapshot_name(request.snapshot)
    return snapshot_pb(server._ask(context, GetSnapshot(name, server.clock())))  # noqa: SLF001


def list_snapshots(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """ListSnapshots of a project, by pages."""
    project = convert.project_name(request.project)
    page: Page = server._ask(context, ListSnapshots(project, request.page_size, request.page_token,  # noqa: SLF001
                                                    server.clock()))
    response = types.ListSnapshotsResponse.pb()(next_page_token=page.next_after)
    response.snapshots.extend(snapshot_pb(config) for config in page.items)  # type: ignore[arg-type]
    return response


def update_snapshot(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """UpdateSnapshot of ``labels`` and ``expire_time`` (no later than Pub/Sub's expiry at creation)."""
    name = snapshot_name(request.snapshot.name, "snapshot.name")
    now = server.clock()
    current = snapshot_pb(server._ask(context, GetSnapshot(name, now)))  # noqa: SLF001
    merged = convert.merge(current, request.snapshot, request.update_mask.paths, SNAPSHOT_UPDATABLE)
    if not merged.HasField("expire_time"):
        raise convert.BadRequest("expire_time: set the time the snapshot expires (it cannot be cleared)")
    return snapshot_pb(server._ask(context, ReplaceSnapshot(_snapshot_config(merged), now)))  # noqa: SLF001


def delete_snapshot(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """DeleteSnapshot."""
    server._ask(context, DeleteSnapshot(snapshot_name(request.snapshot)))  # noqa: SLF001
    return empty_pb2.Empty()


def seek_to_snapshot(server: PubSubServer, subscription: str, snapshot: str, context: grpc.ServicerContext) -> Any:
    """Seek ``subscription`` to ``snapshot``: what it holds becomes unacked, everything else acked."""
    server._ask(context, SeekSnapshot(subscription, snapshot_name(snapshot), server.clock()))  # noqa: SLF001
    return types.SeekResponse.pb()()


# --- DetachSubscription ---------------------------------------------------------------------


def detach_subscription(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """DetachSubscription: the subscription stops receiving; its messages go; Pull and streams fail."""
    name = convert.subscription_name(request.subscription)
    server._ask(context, DetachFromTopic(name, server.clock()))  # noqa: SLF001
    return types.DetachSubscriptionResponse.pb()()


# --- IAM ------------------------------------------------------------------------------------


def _resource(value: str) -> str:
    """A checked topic, subscription or snapshot name."""
    if "/snapshots/" in value:
        return snapshot_name(value, "resource")
    if "/subscriptions/" in value:
        return convert.subscription_name(value, "resource")
    if "/topics/" in value:
        return convert.topic_name(value, "resource")
    raise convert.BadRequest(f"resource: {value[:64]!r} is not a topic, subscription or snapshot name "
                             "(projects/P/topics/T, projects/P/subscriptions/S, projects/P/snapshots/S)")


def _policy(kept: IamPolicy) -> Any:
    policy = policy_pb2.Policy.FromString(kept.policy)
    policy.etag = kept.etag
    return policy


def get_iam_policy(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """GetIamPolicy: the policy last set on the resource (empty if none)."""
    return _policy(server._ask(context, GetIamPolicy(_resource(request.resource))))  # noqa: SLF001


def set_iam_policy(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """SetIamPolicy: kept as given (the fields its update_mask names, if it has one); a stale etag is ABORTED."""
    resource = _resource(request.resource)
    policy = policy_pb2.Policy()
    policy.CopyFrom(request.policy)
    paths = list(request.update_mask.paths) if request.HasField("update_mask") else []
    if paths:
        current = _policy(server._ask(context, GetIamPolicy(resource)))  # noqa: SLF001
        for index, path in enumerate(paths):
            if path not in ("bindings", "etag", "version", "audit_configs"):
                raise convert.BadRequest(f"update_mask.paths[{index}]: {path[:64]!r} is not a Policy field "
                                         "(bindings, etag, version, audit_configs)")
            current.ClearField(path)
            if path in {"bindings", "audit_configs"}:
                getattr(current, path).extend(getattr(policy, path))
            else:
                setattr(current, path, getattr(policy, path))
        policy = current
    etag = policy.etag
    policy.etag = b""
    kept: IamPolicy = server._ask(context, SetIamPolicy(resource, policy.SerializeToString(), etag))  # noqa: SLF001
    return _policy(kept)


def test_iam_permissions(server: PubSubServer, request: Any, context: grpc.ServicerContext) -> Any:
    """TestIamPermissions: every permission asked about is granted (the front is permissive)."""
    server._ask(context, GetIamPolicy(_resource(request.resource)))  # noqa: SLF001 - NOT_FOUND if missing
    return iam_policy_pb2.TestIamPermissionsResponse(permissions=list(request.permissions))


IAM_REQUESTS: Final = {
    "GetIamPolicy": (get_iam_policy, iam_policy_pb2.GetIamPolicyRequest),
    "SetIamPolicy": (set_iam_policy, iam_policy_pb2.SetIamPolicyRequest),
    "TestIamPermissions": (test_iam_permissions, iam_policy_pb2.TestIamPermissionsRequest),
}
SUBSCRIBER_REQUESTS: Final = {
    "CreateSnapshot": (create_snapshot, types.CreateSnapshotRequest.pb()),
    "GetSnapshot": (get_snapshot, types.GetSnapshotRequest.pb()),
    "ListSnapshots": (list_snapshots, types.ListSnapshotsRequest.pb()),
    "UpdateSnapshot": (update_snapshot, types.UpdateSnapshotRequest.pb()),
    "DeleteSnapshot": (delete_snapshot, types.DeleteSnapshotRequest.pb()),
}
PUBLISHER_REQUESTS: Final = {
    "DetachSubscription": (detach_subscription, types.DetachSubscriptionRequest.pb()),
}
"""Method name -> (handler, raw request class), per service, for ``PubSubServer``'s handler tables."""
