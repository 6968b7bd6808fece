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


ZK_MAX_DATA_BYTES = 1_048_575
"""ZooKeeper's default ``jute.maxbuffer`` less one: a larger node (or multi) is refused by the server."""


def _path_problem(prefix: str, path: object, *, trailing_slash: bool = False) -> str | None:
    """What is wrong with ``prefix.path``, or None; the field's name is only built for a problem (the hot path)."""
    if type(path) is str and path.startswith("/") and "\x00" not in path and "//" not in path and "/." not in path and (
            not path.endswith("/") or path == "/" or trailing_slash):
        return None
    field = f"{prefix}.path"
    if type(path) is not str:
        return f"{field} must be a str, got {type(path).__qualname__}"
    if not path.startswith("/"):
        return f"{field} must start with '/', got {path!r}"
    if "\x00" in path:
        return f"{field} must not contain NUL, got {path!r}"
    parts = path.split("/")[1:]
    if path != "/" and not (trailing_slash and path.endswith("/")) and not all(parts):
        return f"{field} must not have an empty segment ('//' or a trailing '/'), got {path!r}"
    if any(part in {".", ".."} for part in parts):
        return f"{field} must not have a '.' or '..' segment, got {path!r}"
    return None


def _flag_problem(prefix: str, name: str, value: object) -> str | None:
    return None if type(value) is bool else f"{prefix}.{name} must be a bool, got {value!r}"


def _version_problem(prefix: str, version: object, *, lowest: int) -> str | None:
    if type(version) is not int or version < lowest:
        return f"{prefix}.version must be an int >= {lowest}, got {version!r}"
    return None


def _data_problem(prefix: str, data: object) -> str | None:
    if type(data) is not bytes:
        return f"{prefix}.data must be bytes, got {type(data).__qualname__}"
    if len(data) > ZK_MAX_DATA_BYTES:
        return f"{prefix}.data is {len(data)} bytes; ZooKeeper takes at most {ZK_MAX_DATA_BYTES} (jute.maxbuffer)"
    return None


def _write_problem(prefix: str, operation: object, *, in_multi: bool) -> str | None:
    """What is wrong with one write operation (fields named ``prefix.field``), or None."""
    match operation:
        case ZkCreate(path=path, data=data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents):
            problems = [
                _path_problem(prefix, path, trailing_slash=sequential is True),
                _data_problem(prefix, data),
                _flag_problem(prefix, "ephemeral", ephemeral),
                _flag_problem(prefix, "sequential", sequential),
                _flag_problem(prefix, "make_parents", make_parents),
            ]
            if in_multi and make_parents is True:
                problems.append(f"{prefix}.make_parents must be False inside a ZkMulti (create the parents first)")
        case ZkDelete(path=path, version=version) | ZkCheck(path=path, version=version):
            problems = [_path_problem(prefix, path), _version_problem(prefix, version, lowest=-1)]
        case ZkSetData(path=path, data=data, version=version):
            problems = [_path_problem(prefix, path), _data_problem(prefix, data),
                        _version_problem(prefix, version, lowest=-1)]
        case _:
            return None
    return next((problem for problem in problems if problem is not None), None)


def _plainly_good_write(write: ZkCreate | ZkDelete | ZkSetData | ZkCheck) -> bool:
    """True for a multi's write no rule of ``_write_problem`` refuses, seen without naming a field (a
    commit's multi holds about nine a transaction); False: let every rule look at it."""
    path = write.path
    if (type(path) is not str or not path.startswith("/") or path.endswith("/") or "\x00" in path or "//" in path
            or "/." in path):
        return False
    if type(write) is ZkCreate:
        data = write.data
        return (type(data) is bytes and len(data) <= ZK_MAX_DATA_BYTES and write.make_parents is False
                and type(write.ephemeral) is bool and type(write.sequential) is bool)
    version = write.version
    if type(version) is not int or version < -1:
        return False
    if type(write) is ZkSetData:
        data = write.data
        return type(data) is bytes and len(data) <= ZK_MAX_DATA_BYTES
    return True


def zk_operation_problem(operation: object) -> str | None:
    """What is wrong with ``operation`` of a ``ZkCall``, naming the field, or None when it is well formed.

    Both backends' session actors check it at the edge and answer ``bad_arguments`` with this text as
    the reply's value, so a typo never reaches a server (which would refuse it, or drop the connection
    for an oversized node) and reads the same on every backend.
    """
    match operation:
        case ZkCreate() | ZkDelete() | ZkSetData() | ZkCheck():
            return _write_problem("operation", operation, in_multi=False)
        case ZkMulti(operations=operations):
            if type(operations) is not tuple:
                return f"operation.operations must be a tuple of writes, got {type(operations).__qualname__}"
            total = 0
            for index, write in enumerate(operations):
                if type(write) not in {ZkCreate, ZkDelete, ZkSetData, ZkCheck}:
                    return (f"operation.operations[{index}] must be a ZkCreate, ZkDelete, ZkSetData or ZkCheck, "
                            f"got {type(write).__qualname__}")
                if not _plainly_good_write(write):
                    problem = _write_problem(f"operation.operations[{index}]", write, in_multi=True)
                    if problem is not None:
                        return problem
                total += len(getattr(write, "data", b"")) + len(write.path)
            if total > ZK_MAX_DATA_BYTES:
                return f"operation holds {total} bytes of data and paths; ZooKeeper takes at most {ZK_MAX_DATA_BYTES}"
            return None
        case (ZkGetChildren(path=path, watch=watch) | ZkGetData(path=path, watch=watch)
              | ZkExists(path=path, watch=watch)):
            return _path_problem("operation", path) or _flag_problem("operation", "watch", watch)
        case _:
            kinds = "ZkCreate, ZkDelete, ZkSetData, ZkCheck, ZkMulti, ZkGetChildren, ZkGetData or ZkExists"
            return f"operation must be a {kinds}, got {type(operation).__qualname__}"
