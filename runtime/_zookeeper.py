"""The ZooKeeper session protocol: what an actor asks of a ZooKeeper session, and what comes back.

A *session actor* owns one ZooKeeper session: in production a kazoo client (its callbacks come
back as messages), in the simulator a model of the server with its faults. Actors that use
ZooKeeper (the transactions' ZooKeeper backend, seed 004) speak only these messages, so the same
actors run against a real ensemble and against the simulated one. This is the backend boundary
DESIGN.md names for a new kind of I/O: the messages are declared here, in the kernel, and each
backend brings a session actor that answers them.

* A request is ``ZkCall(request_id, reply_to, operation)``; the session answers
  ``ZkReply(request_id, value, error)`` to ``reply_to``, exactly once, in any order across
  requests (ZooKeeper itself answers one session's requests in order; a session actor may not).
* ``error`` is one of ``ZkErrorCode``, as ZooKeeper's: ``"connection_loss"`` means the outcome is
  unknown (the operation may have been applied: the seed's ``lock-N_<uuid>`` guards against it),
  ``"session_expired"`` that the session and every ephemeral node it owned are gone.
* ``ZkMulti`` applies all its operations or none (ZooKeeper's ``multi``): on failure ``error`` is
  the failing operation's code and ``value`` is ``ZkMultiFailed`` naming it.
* A read with ``watch=True`` leaves a one-shot watch: ``ZkWatchFired`` goes to the read's
  ``reply_to`` when the node (or its children) changes. ``ZkWatchSession(ref)`` subscribes ``ref``
  to ``ZkSessionEvent``s (connected, suspended, reconnected, expired, closed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias, final

import attrs

if TYPE_CHECKING:
    from ._ref import ActorRef

ZkErrorCode: TypeAlias = Literal[
    "no_node",
    "node_exists",
    "bad_version",
    "not_empty",
    "no_children_for_ephemerals",
    "bad_arguments",
    "connection_loss",
    "session_expired",
    "closed",
]
"""ZooKeeper's error codes a session answers with (``KeeperException`` names, lower case)."""

ZK_ERROR_CODES: tuple[str, ...] = (
    "no_node", "node_exists", "bad_version", "not_empty", "no_children_for_ephemerals", "bad_arguments",
    "connection_loss", "session_expired", "closed",
)
"""Every ``ZkErrorCode``, for validation and error messages."""

ZkSessionState: TypeAlias = Literal["connected", "suspended", "reconnected", "expired", "closed"]
"""A session's states as kazoo reports them (``suspended``: connection lost, session may live on)."""

ZkWatchKind: TypeAlias = Literal["created", "deleted", "changed", "child"]
"""What changed under a watch (ZooKeeper's ``NodeCreated`` / ``NodeDeleted`` / ``NodeDataChanged`` /
``NodeChildrenChanged``)."""


@final
@attrs.frozen
class ZkCreate:
    """Create ``path`` with ``data``; ``sequential`` appends a ten-digit counter of the parent to the
    name (the created path is the answer), ``ephemeral`` binds the node to the session."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False
    make_parents: bool = False
    """Create missing parents as persistent empty nodes first (kazoo's ``makepath``; not inside a multi)."""


@final
@attrs.frozen
class ZkDelete:
    """Delete ``path`` if its version is ``version`` (-1: any); a node with children is ``not_empty``."""

    path: str
    version: int = -1


@final
@attrs.frozen
class ZkSetData:
    """Replace ``path``'s data if its version is ``version`` (-1: any); the answer is the new version."""

    path: str
    data: bytes
    version: int = -1


@final
@attrs.frozen
class ZkCheck:
    """Inside a multi: fail with ``bad_version`` unless ``path`` is at ``version`` (``no_node`` if absent)."""

    path: str
    version: int


ZkWrite: TypeAlias = "ZkCreate | ZkDelete | ZkSetData | ZkCheck"
"""An operation a ``ZkMulti`` may hold."""


@final
@attrs.frozen
class ZkMulti:
    """Apply ``operations`` atomically, in order: all of them or none (ZooKeeper's ``multi``)."""

    operations: tuple[ZkCreate | ZkDelete | ZkSetData | ZkCheck, ...]


@final
@attrs.frozen
class ZkGetChildren:
    """The names of ``path``'s children (unordered, as ZooKeeper gives them)."""

    path: str
    watch: bool = False


@final
@attrs.frozen
class ZkGetData:
    """``path``'s data and version (``ZkNode``)."""

    path: str
    watch: bool = False


@final
@attrs.frozen
class ZkExists:
    """``path``'s ``ZkNode`` without waiting for an error, or None if there is no such node."""

    path: str
    watch: bool = False


ZkOperation: TypeAlias = (
    "ZkCreate | ZkDelete | ZkSetData | ZkCheck | ZkMulti | ZkGetChildren | ZkGetData | ZkExists"
)


@final
@attrs.frozen
class ZkNode:
    """A node's data and its stat's fields that clients use."""

    data: bytes
    version: int
    ephemeral_owner: int = 0
    """The owning session's id for an ephemeral node, 0 for a persistent one."""


@final
@attrs.frozen
class ZkMultiFailed:
    """Why a multi did nothing: its operation at ``index`` failed with ``error``."""

    index: int
    error: ZkErrorCode


@final
@attrs.frozen
class ZkCall:
    """Ask the session actor to run ``operation``; ``ZkReply(request_id, ...)`` goes to ``reply_to``."""

    request_id: int
    reply_to: ActorRef
    operation: ZkCreate | ZkDelete | ZkSetData | ZkCheck | ZkMulti | ZkGetChildren | ZkGetData | ZkExists


@final
@attrs.frozen
class ZkReply:
    """The answer to ``ZkCall(request_id)``: ``value`` when ``error`` is None.

    Values: created path (``ZkCreate``), None (``ZkDelete``, ``ZkCheck``), new version
    (``ZkSetData``), tuple of names (``ZkGetChildren``), ``ZkNode`` (``ZkGetData``), ``ZkNode`` or
    None (``ZkExists``), tuple of each operation's value (``ZkMulti``; on failure ``ZkMultiFailed``).
    """

    request_id: int
    value: object = None
    error: ZkErrorCode | None = None


@final
@attrs.frozen
class ZkWatchFired:
    """A one-shot watch left by a read of ``path`` fired: ``kind`` is what changed."""

    path: str
    kind: ZkWatchKind


@final
@attrs.frozen
class ZkWatchSession:
    """Send ``ZkSessionEvent``s of this session to ``ref`` from now on (the current state first)."""

    ref: ActorRef


@final
@attrs.frozen
class ZkSessionEvent:
    """The session ``session_id`` entered ``state`` (``ZkSessionState``)."""

    session_id: int
    state: ZkSessionState


@final
@attrs.frozen
class ZkClose:
    """Close the session cleanly: its ephemeral nodes go at once; later calls answer ``closed``."""
