"""``KazooSession``: one kazoo client owned by an actor that answers the kernel's ZooKeeper session protocol.

Every ``ZkCall`` becomes one of kazoo's ``*_async`` calls; its completion, on kazoo's callback
thread, becomes a ``ZkReply`` told straight to the caller through the system's thread-safe tell
(so replies keep ZooKeeper's per-session order, and no handler waits). kazoo's state listener
tells the actor, which turns it into ``ZkSessionEvent``s for its subscribers. Nothing here takes
a lock: the actor's state is touched only by its handlers; the threads only tell.

kazoo facts this leans on: a call made before the first connection fails at once, so the actor
holds calls until then; a call made while the connection is down waits in kazoo's queue for the
reconnection (or fails with ``connection_loss``); kazoo forgets every watch when the connection
drops, so the actor fires each such watch (kind ``child`` for a children watch, ``changed`` for a
data one): a reader that re-reads on a fire stays right, one that waited would hang; after an
expiry kazoo opens a new session by itself (``connected`` with a new session id follows
``expired``); a failed multi does not raise: its results hold one exception per operation.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable
from typing import Any, final

import attrs
from kazoo import exceptions as kazoo_errors
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import CheckVersion, Create, Delete, SetData, Transaction
from kazoo.protocol.states import EventType, KazooState
from kazoo.security import OPEN_ACL_UNSAFE

from conveyor.runtime import Actor, ActorRef, ConveyorError
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkCheck,
    ZkClose,
    ZkCreate,
    ZkDelete,
    ZkErrorCode,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkReply,
    ZkSessionEvent,
    ZkSessionState,
    ZkSetData,
    ZkWatchFired,
    ZkWatchKind,
    ZkWatchSession,
    zk_operation_problem,
)

from ._kazoo_select import kazoo_client

log = logging.getLogger(__name__)

_ERROR_CODES: tuple[tuple[type[BaseException], ZkErrorCode], ...] = (
    (kazoo_errors.NoNodeError, "no_node"),
    (kazoo_errors.NodeExistsError, "node_exists"),
    (kazoo_errors.BadVersionError, "bad_version"),
    (kazoo_errors.NotEmptyError, "not_empty"),
    (kazoo_errors.NoChildrenForEphemeralsError, "no_children_for_ephemerals"),
    (kazoo_errors.BadArgumentsError, "bad_arguments"),
    (kazoo_errors.ConnectionClosedError, "closed"),  # before its base class, SessionExpiredError
    (kazoo_errors.SessionExpiredError, "session_expired"),
    (kazoo_errors.ConnectionLoss, "connection_loss"),
)
"""kazoo's exceptions and the protocol's codes, subclasses first."""

_NOT_THE_CAUSE = (kazoo_errors.RolledBackError, kazoo_errors.RuntimeInconsistency)
"""What a failed multi reports for the operations that did not fail themselves."""


def error_code(error: BaseException) -> ZkErrorCode:
    """The protocol's code for a kazoo exception; any other failure is ``connection_loss`` (outcome unknown)."""
    for kind, code in _ERROR_CODES:
        if isinstance(error, kind):
            return code
    return "connection_loss"


_Values = Callable[[list[Any]], tuple[object, ...]]
"""Reads a successful multi's results into the protocol's values."""


def multi_outcome(results: list[Any], values: _Values) -> tuple[object, ZkErrorCode | None]:
    """A kazoo transaction's results as ``(value, error)``: the operations' values, or ``ZkMultiFailed``
    naming the first operation that failed for its own reason (the others say rolled back)."""
    failures = [(index, result) for index, result in enumerate(results) if isinstance(result, Exception)]
    if not failures:
        return values(results), None
    index, cause = next(((i, r) for i, r in failures if not isinstance(r, _NOT_THE_CAUSE)), failures[0])
    code = error_code(cause)
    return ZkMultiFailed(index, code), code


def _node(stat: Any, data: bytes = b"") -> ZkNode:
    return ZkNode(data, int(stat.version), int(stat.ephemeralOwner))


def _write_values(operations: tuple[ZkCreate | ZkDelete | ZkSetData | ZkCheck, ...]) -> _Values:
    """How to read a successful multi's results: created paths, new versions, None for the rest."""

    def values(results: list[Any]) -> tuple[object, ...]:
        out: list[object] = []
        for operation, result in zip(operations, results, strict=True):
            if type(operation) is ZkCreate:
                out.append(str(result))
            elif type(operation) is ZkSetData:
                out.append(int(result.version))
            else:
                out.append(None)
        return tuple(out)

    return values


def _checked(version: int) -> Callable[[Any], object]:
    """A standalone ``ZkCheck`` read through ``exists``: None when at ``version``, else the error raised."""

    def check(stat: Any) -> object:
        if stat is None:
            raise kazoo_errors.NoNodeError
        if version != -1 and int(stat.version) != version:
            raise kazoo_errors.BadVersionError
        return None

    return check


def _quietly(tell: Callable[[object], None]) -> Callable[[object], None]:
    """``tell`` that never raises on kazoo's threads (a system already shut down drops the message)."""

    def safe(message: object) -> None:
        try:
            tell(message)
        except (ConveyorError, RuntimeError) as error:
            log.debug("dropping %s from kazoo: %r", type(message).__qualname__, error)

    return safe


_WATCH_KINDS: dict[Any, ZkWatchKind] = {
    EventType.CREATED: "created",
    EventType.DELETED: "deleted",
    EventType.CHANGED: "changed",
    EventType.CHILD: "child",
}


@final
@attrs.frozen
class _StateChanged:
    """kazoo's state listener saw ``state`` (a ``KazooState`` value) while the session id was ``session_id``."""

    state: str
    session_id: int


@final
@attrs.frozen
class _SessionConfig:
    """A validated ``KazooSession`` configuration."""

    hosts: str
    timeout: float
    max_retry_delay: float


def _seconds(field: str, value: object) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        msg = f"KazooSession {field} must be a finite number of seconds > 0, got {value!r}"
        raise ValueError(msg)
    return float(value)


def _config(hosts: object, timeout: object, max_retry_delay: object) -> _SessionConfig:
    if type(hosts) is not str or not hosts.strip():
        msg = f"KazooSession hosts must be a non-empty 'host:port[,host:port...]' str, got {hosts!r}"
        raise ValueError(msg)
    return _SessionConfig(hosts, _seconds("timeout", timeout), _seconds("max_retry_delay", max_retry_delay))


class KazooSession(Actor):
    """Owns one ZooKeeper session through a ``KazooClient`` and answers the ``ZkCall`` protocol.

    Args:
        hosts: kazoo's ``hosts``, ``"host:port"`` or several comma-separated (an ensemble).
        timeout: the session timeout in seconds asked of the server (which clamps it to 2..20 ticks,
            or its configured bounds).
        max_retry_delay: the longest wait between two connection attempts while the connection is
            down (kazoo's default backoff grows to an hour; a session must reconnect within its timeout).
        client_factory: builds the client from ``hosts``, ``timeout`` and ``connection_retry`` (``kazoo_client``:
            a ``KazooClient`` whose connection thread waits with one ``select``).

    Calls arriving before the first connection are held and sent once it is up. Bad input is
    answered, never raised: ``ZkReply(error="bad_arguments", value=<what is wrong, naming the field>)``.
    If a handler fails anyway, the session is closed first and its subscribers are told
    ``expired``: the restarted actor opens a new session, so nothing keeps the old one alive unowned.
    """

    def __init__(self, hosts: str, *, timeout: float = 10.0, max_retry_delay: float = 1.0,
                 client_factory: Callable[..., Any] = kazoo_client) -> None:
        self.config = _config(hosts, timeout, max_retry_delay)
        self._factory = client_factory
        self._client: Any = None
        self._session_id = 0
        """The live session's id (0 before the first connection)."""
        self._suspended = False
        self._closing = False
        self._held: list[ZkCall] = []
        self._subscribers: list[ActorRef] = []

    # ---- lifecycle -------------------------------------------------------------------------------

    def on_start(self) -> None:
        """Create the client and start connecting in kazoo's own threads (``start_async`` does not wait)."""
        config = self.config
        retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": config.max_retry_delay}
        client = self._factory(hosts=config.hosts, timeout=config.timeout, connection_retry=retry)
        tell_self = _quietly(self.ctx.teller_for_threads(self.ctx.self_ref))
        client.add_listener(functools.partial(_listen, tell_self, client))
        self._client = client
        client.start_async()

    def on_stop(self) -> None:
        """Close the session (its ephemeral nodes go); subscribers hear ``closed`` once it is."""
        self._close_on_thread("closed")

    def _close_on_thread(self, state: ZkSessionState) -> None:
        """Close the session on a thread of its own (stopping kazoo waits for the server), then tell
        the subscribers ``state``: the actor may be gone by then, so the thread tells them itself."""
        if self._client is None or self._closing:
            return
        self._closing = True
        tells = tuple(_quietly(self.ctx.teller_for_threads(ref)) for ref in self._subscribers)
        event = ZkSessionEvent(self._session_id, state)
        threading.Thread(target=_stop_then_tell, args=(self._client, tells, event), name="conveyor-kazoo-close",
                         daemon=True).start()

    # ---- messages --------------------------------------------------------------------------------

    def receive(self, message: Any) -> None:
        try:
            self._receive(message)
        except Exception:
            self._abandon()
            raise

    def _receive(self, message: Any) -> None:
        match message:
            case ZkCall():
                self._call(message)
            case _StateChanged(state=state, session_id=session_id):
                self._state_changed(state, session_id)
            case ZkWatchSession(ref=ref):
                if type(ref) is not ActorRef:
                    msg = f"ZkWatchSession.ref must be an ActorRef, got {type(ref).__qualname__}"
                    raise TypeError(msg)
                self._subscribers.append(ref)
                current = self._current_state()
                if current is not None:
                    self.ctx.send(ref, ZkSessionEvent(self._session_id, current))
            case ZkClose():
                for call in self._held:
                    self.ctx.send(call.reply_to, ZkReply(call.request_id, error="closed"))
                self._held = []
                self._close_on_thread("closed")
            case _:
                msg = (f"KazooSession takes ZkCall, ZkWatchSession and ZkClose, "
                       f"got {type(message).__qualname__}")
                raise TypeError(msg)

    def _current_state(self) -> ZkSessionState | None:
        if self._closing:
            return "closed"
        if self._session_id == 0:
            return None
        return "suspended" if self._suspended else "connected"

    def _tell_subscribers(self, state: ZkSessionState) -> None:
        event = ZkSessionEvent(self._session_id, state)
        for ref in self._subscribers:
            self.ctx.send(ref, event)

    def _state_changed(self, state: str, session_id: int) -> None:
        if self._closing:
            return  # ZkClose, on_stop or a failed handler: the closing thread tells the subscribers
        if state == KazooState.CONNECTED:
            first = session_id != self._session_id
            told: ZkSessionState = "connected" if first else "reconnected"
            if not first and not self._suspended:
                return
            self._session_id = session_id
            self._suspended = False
            self._tell_subscribers(told)
            held, self._held = self._held, []
            for call in held:
                self._send(call)
        elif state == KazooState.SUSPENDED:
            self._suspended = True
            self._tell_subscribers("suspended")
        elif state == KazooState.LOST and self._session_id != 0:
            self._suspended = False
            self._tell_subscribers("expired")

    def _abandon(self) -> None:
        """A handler failed: close the session before the restart opens another; subscribers hear ``expired``."""
        self._close_on_thread("expired")

    # ---- calls -----------------------------------------------------------------------------------

    def _call(self, call: ZkCall) -> None:
        reply_to = call.reply_to
        if type(reply_to) is not ActorRef:
            msg = f"ZkCall.reply_to must be an ActorRef, got {type(reply_to).__qualname__}"
            raise TypeError(msg)
        request_id = call.request_id
        problem = (f"request_id must be an int, got {request_id!r}" if type(request_id) is not int
                   else zk_operation_problem(call.operation))
        if problem is not None:
            self.ctx.send(reply_to, ZkReply(request_id, problem, "bad_arguments"))
        elif self._closing:
            self.ctx.send(reply_to, ZkReply(request_id, error="closed"))
        elif self._session_id == 0:
            self._held.append(call)
        else:
            self._send(call)

    def _send(self, call: ZkCall) -> None:
        """Hand ``call`` to kazoo; its completion tells ``call.reply_to`` from kazoo's thread."""
        tell = _quietly(self.ctx.teller_for_threads(call.reply_to))
        try:
            self._start(call, tell)
        except (TypeError, ValueError) as error:  # kazoo's own argument checks, should one pass ours
            self.ctx.send(call.reply_to, ZkReply(call.request_id, f"operation: {error}", "bad_arguments"))

    def _start(self, call: ZkCall, tell: Callable[[object], None]) -> None:
        client = self._client
        request_id = call.request_id
        operation = call.operation
        convert: Callable[[Any], object]
        watcher = None
        if isinstance(operation, (ZkGetChildren, ZkGetData, ZkExists)) and operation.watch:
            watcher = _watcher(tell, operation)
        match operation:
            case ZkCreate(path=path, data=data, ephemeral=ephemeral, sequential=sequential, make_parents=parents):
                pending = client.create_async(path, data, ephemeral=ephemeral, sequence=sequential, makepath=parents)
                convert = str
            case ZkDelete(path=path, version=version):
                pending = client.delete_async(path, version)
                convert = _nothing
            case ZkSetData(path=path, data=data, version=version):
                pending = client.set_async(path, data, version)
                convert = _version
            case ZkCheck(path=path, version=version):
                pending = client.exists_async(path)
                convert = _checked(version)
            case ZkGetChildren(path=path):
                pending = client.get_children_async(path, watch=watcher)
                convert = tuple
            case ZkGetData(path=path):
                pending = client.get_async(path, watch=watcher)
                convert = _data_node
            case ZkExists(path=path):
                pending = client.exists_async(path, watch=watcher)
                convert = _maybe_node
            case ZkMulti(operations=operations):
                pending = client.handler.async_result()
                client._call(kazoo_transaction(operations, client.chroot, client.default_acl), pending)  # noqa: SLF001
                pending.rawlink(functools.partial(_multi_done, tell, request_id, _write_values(operations)))
                return
        pending.rawlink(functools.partial(_done, tell, request_id, convert))


# ---- kazoo's threads: these only read kazoo's results and tell ----------------------------------------


def _listen(tell: Callable[[object], None], client: Any, state: str) -> None:
    """kazoo's state listener (its connection thread): tell the actor, never block."""
    client_id = client.client_id
    tell(_StateChanged(str(state), int(client_id[0]) if client_id else 0))


def _done(tell: Callable[[object], None], request_id: int, convert: Callable[[Any], object], pending: Any) -> None:
    try:
        value = convert(pending.get_nowait())
    except Exception as error:  # noqa: BLE001  every failure is an answer: the caller must hear once
        tell(ZkReply(request_id, error=error_code(error)))
        return
    tell(ZkReply(request_id, value))


def _multi_done(tell: Callable[[object], None], request_id: int,
                values: _Values, pending: Any) -> None:
    try:
        results = pending.get_nowait()
    except Exception as error:  # noqa: BLE001  the whole multi failed to reach the server
        tell(ZkReply(request_id, error=error_code(error)))
        return
    value, code = multi_outcome(list(results), values)
    tell(ZkReply(request_id, value, code))


def _watcher(tell: Callable[[object], None], operation: ZkGetChildren | ZkGetData | ZkExists) -> Callable[[Any], None]:
    """A one-shot kazoo watch that tells ``ZkWatchFired``; a watch kazoo drops with the connection fires too."""
    path = operation.path
    dropped: ZkWatchKind = "child" if type(operation) is ZkGetChildren else "changed"

    def fired(event: Any) -> None:
        tell(ZkWatchFired(path, _WATCH_KINDS.get(event.type, dropped)))

    return fired


def kazoo_transaction(operations: tuple[ZkCreate | ZkDelete | ZkSetData | ZkCheck, ...], chroot: str | None,
                      default_acl: Any = None) -> Transaction:
    """kazoo's multi request of ``operations``, as ``client.transaction()`` builds it, built in one pass.

    The operations were checked by ``zk_operation_problem`` (absolute paths, no empty, ``.`` or ``..``
    segment), so with no chroot and no trailing ``/`` kazoo's path normalisation is the identity and
    is skipped; any other path goes through kazoo's own ``_prefix_root``. ``TransactionRequest``'s
    per-operation type checks repeat ours: about a tenth of the client's CPU with 8 concurrent
    transactions, for one request a multi.
    """
    acl = default_acl or OPEN_ACL_UNSAFE
    built: list[Any] = []
    for write in operations:
        path = write.path
        if chroot or path.endswith("/"):
            path = _prefix_root(chroot, path)
        if type(write) is ZkCreate:
            built.append(Create(path, write.data, acl, (1 if write.ephemeral else 0) | (2 if write.sequential else 0)))
        elif type(write) is ZkDelete:
            built.append(Delete(path, write.version))
        elif type(write) is ZkSetData:
            built.append(SetData(path, write.data, write.version))
        elif type(write) is ZkCheck:
            built.append(CheckVersion(path, write.version))
        else:
            msg = f"a multi holds ZkCreate, ZkDelete, ZkSetData or ZkCheck, got {type(write).__qualname__}"
            raise TypeError(msg)
    return Transaction(built)


def _stop_client(client: Any) -> None:
    """Stop (the server drops the session and its ephemeral nodes) and free the client; this waits."""
    try:
        client.stop()
    finally:
        client.close()


def _stop_then_tell(client: Any, tells: tuple[Callable[[object], None], ...], event: ZkSessionEvent) -> None:
    try:
        _stop_client(client)
    except Exception as error:  # noqa: BLE001  a thread of its own: log, and still tell
        log.error("closing the ZooKeeper session %#x failed: %r", event.session_id, error)
    for tell in tells:
        tell(event)


def _nothing(_: Any) -> None:
    return None


def _version(stat: Any) -> int:
    return int(stat.version)


def _data_node(result: Any) -> ZkNode:
    data, stat = result
    return _node(stat, bytes(data))


def _maybe_node(stat: Any) -> ZkNode | None:
    return None if stat is None else _node(stat)
