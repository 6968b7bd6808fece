"""SimZooKeeper: a sans-IO model of one ZooKeeper ensemble (its data tree, sessions and watches).

What the simulator's ZooKeeper session actors talk to (``simulation/_zk_session.py``), and what a
test can drive directly. It keeps ZooKeeper's rules, as its server applies them:

* a tree of znodes, each with data, a version (bumped by every ``set_data``) and a child version
  (bumped by every child created or deleted);
* persistent, ephemeral (bound to a session; an ephemeral node has no children) and sequential
  nodes, whose name ends in the parent's child version before the create, ten digits with leading
  zeros (``item-0000000007``), so a name never repeats under a parent that lives on;
* ``multi``: the operations in order against the tree as the earlier ones left it, all applied
  or none, the first failing one named (``ZkMultiFailed``); errors checked in ZooKeeper's order
  (create: ``no_node`` for a missing parent, then ``node_exists``, then
  ``no_children_for_ephemerals``; delete: ``no_node``, ``bad_version``, ``not_empty``);
* one-shot watches per (session, watcher): a data watch (``get_data``, ``exists``; on a missing
  node ``exists`` waits for its creation) fires on a change, a deletion or a creation; a child
  watch (``get_children``) on a child created or deleted, or on the node's deletion; a watcher
  with both on one node gets one event;
* sessions with ids: an expired or closed session's ephemeral nodes all go in one step, and its
  watches with them.

Pure: no clock, no randomness, no I/O. The caller says which session asks and when a session
expires; every answer carries the watch events it fired, for the caller to deliver.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Literal, final

import attrs

from conveyor.runtime.lowlevel import (
    ZkCheck,
    ZkCreate,
    ZkDelete,
    ZkErrorCode,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkOperation,
    ZkSetData,
    ZkWatchFired,
    ZkWatchKind,
)

SEQUENCE_DIGITS = 10
"""How many digits a sequential node's suffix has (ZooKeeper's ``%010d``)."""

SessionStatus = Literal["alive", "expired", "closed"]


class ZkFailure(Exception):
    """An operation of the model failed with ZooKeeper's ``code`` (caught inside the model)."""

    def __init__(self, code: ZkErrorCode) -> None:
        super().__init__(code)
        self.code: ZkErrorCode = code


@final
@attrs.frozen
class WatchDelivery:
    """A watch that fired: ``event`` is owed to ``watcher`` of session ``session_id``."""

    session_id: int
    watcher: Hashable
    event: ZkWatchFired


@final
@attrs.frozen
class ZkOutcome:
    """What one operation gave: its value or error (as ``ZkReply``'s), and the watches it fired."""

    value: object = None
    error: ZkErrorCode | None = None
    fired: tuple[WatchDelivery, ...] = ()


@final
class _Znode:
    """One node: its data and versions, its owner (0: persistent) and its children's names."""

    __slots__ = ("children", "cversion", "data", "owner", "version")

    def __init__(self, data: bytes, owner: int) -> None:
        self.data = data
        self.version = 0
        self.owner = owner
        self.children: set[str] = set()
        self.cversion = 0

    def copy(self) -> _Znode:
        node = _Znode(self.data, self.owner)
        node.version = self.version
        node.cversion = self.cversion
        node.children = set(self.children)
        return node


def _valid_path(path: object) -> bool:
    """ZooKeeper's path rules: absolute, no empty, ``.`` or ``..`` part, no trailing slash, no NUL."""
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
        return False
    if path == "/":
        return True
    return all(part not in ("", ".", "..") for part in path[1:].split("/"))


def _parent(path: str) -> tuple[str, str]:
    """(parent path, own name) of a valid path other than the root."""
    head, _, name = path.rpartition("/")
    return head or "/", name


_Trigger = tuple[str, ZkWatchKind]
"""A change at a path that may fire watches: (path, what changed)."""


class SimZooKeeper:
    """The data tree, sessions and watches of one ZooKeeper ensemble (see the module).

    Not final: a planted bug subclasses it (``sequence_number``, ``ephemerals``) to break one rule.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, _Znode] = {"/": _Znode(b"", 0)}
        self._sessions: dict[int, SessionStatus] = {}
        self._next_session = 1
        # One-shot watches per path, in the order they were left: (session id, watcher).
        self._data_watches: dict[str, dict[tuple[int, Hashable], None]] = {}
        self._child_watches: dict[str, dict[tuple[int, Hashable], None]] = {}

    # -- sessions ----------------------------------------------------------------------------

    def open_session(self) -> int:
        """A new live session's id (1, 2, ...: never 0, which marks a persistent node's owner)."""
        session_id = self._next_session
        self._next_session += 1
        self._sessions[session_id] = "alive"
        return session_id

    def session_status(self, session_id: int) -> SessionStatus | None:
        """``alive``, ``expired`` or ``closed``; None for an id never opened."""
        return self._sessions.get(session_id)

    def expire(self, session_id: int) -> tuple[WatchDelivery, ...]:
        """The session expires: its ephemeral nodes all go at once, its watches too; the watches fired."""
        return self._end(session_id, "expired")

    def close(self, session_id: int) -> tuple[WatchDelivery, ...]:
        """The session is closed by its client: as ``expire``, but later calls are ``closed``."""
        return self._end(session_id, "closed")

    def _end(self, session_id: int, status: SessionStatus) -> tuple[WatchDelivery, ...]:
        if self._sessions.get(session_id) != "alive":
            return ()
        self._sessions[session_id] = status
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                watchers = table[path]
                for key in [key for key in watchers if key[0] == session_id]:
                    del watchers[key]
                if not watchers:
                    del table[path]
        triggers: list[_Trigger] = []
        for path in sorted(self.ephemerals(session_id)):
            triggers.extend(self._remove(path))
        return self._fire(triggers)

    def ephemerals(self, session_id: int) -> list[str]:
        """The paths of the ephemeral nodes ``session_id`` owns, sorted."""
        return sorted(path for path, node in self._nodes.items() if node.owner == session_id)

    # -- reads for tests and checkers --------------------------------------------------------

    def paths(self) -> Iterator[str]:
        """Every node's path, the root included, in no promised order."""
        return iter(self._nodes)

    def node(self, path: str) -> ZkNode | None:
        """``path``'s data, version and owner, or None."""
        node = self._nodes.get(path)
        return None if node is None else ZkNode(node.data, node.version, node.owner)

    # -- operations ---------------------------------------------------------------------------

    def apply(self, session_id: int, operation: ZkOperation, watcher: Hashable = None) -> ZkOutcome:
        """Run ``operation`` for ``session_id``; a read with ``watch`` leaves a watch for ``watcher``."""
        status = self._sessions.get(session_id)
        if status != "alive":
            return ZkOutcome(error="closed" if status == "closed" else "session_expired")
        try:
            if isinstance(operation, ZkMulti):
                return self._multi(session_id, operation)
            if isinstance(operation, (ZkGetData, ZkExists, ZkGetChildren)):
                return ZkOutcome(self._read(session_id, operation, watcher))
            if isinstance(operation, ZkCreate) and operation.make_parents:
                return self._create_with_parents(session_id, operation)
            undo: list[tuple[str, _Znode | None]] = []
            triggers: list[_Trigger] = []
            value = self._write(session_id, operation, undo, triggers)
        except ZkFailure as failure:
            return ZkOutcome(error=failure.code)
        return ZkOutcome(value, fired=self._fire(triggers))

    def _read(self, session_id: int, operation: ZkGetData | ZkExists | ZkGetChildren, watcher: Hashable) -> object:
        path = operation.path
        if not _valid_path(path):
            raise ZkFailure("bad_arguments")
        node = self._nodes.get(path)
        if node is None and not isinstance(operation, ZkExists):
            raise ZkFailure("no_node")
        if operation.watch:
            table = self._child_watches if isinstance(operation, ZkGetChildren) else self._data_watches
            table.setdefault(path, {})[(session_id, watcher)] = None
        if node is None:
            return None
        if isinstance(operation, ZkGetChildren):
            return tuple(sorted(node.children))
        return ZkNode(node.data, node.version, node.owner)

    def _create_with_parents(self, session_id: int, operation: ZkCreate) -> ZkOutcome:
        """kazoo's ``makepath``: each missing ancestor created persistent and empty, then the node."""
        if not _valid_path(operation.path) or operation.path == "/":
            return ZkOutcome(error="bad_arguments" if operation.path != "/" else "node_exists")
        undo: list[tuple[str, _Znode | None]] = []
        triggers: list[_Trigger] = []
        parts = operation.path.split("/")[1:-1]
        try:
            for depth in range(1, len(parts) + 1):
                ancestor = "/" + "/".join(parts[:depth])
                if ancestor not in self._nodes:
                    self._write(session_id, ZkCreate(ancestor), undo, triggers)
            value = self._write(session_id, attrs.evolve(operation, make_parents=False), undo, triggers)
        except ZkFailure as failure:
            # The ancestors made before the failure stay, as kazoo's separate creates would leave them.
            return ZkOutcome(error=failure.code, fired=self._fire(triggers))
        return ZkOutcome(value, fired=self._fire(triggers))

    def _multi(self, session_id: int, multi: ZkMulti) -> ZkOutcome:
        undo: list[tuple[str, _Znode | None]] = []
        triggers: list[_Trigger] = []
        values: list[object] = []
        for index, operation in enumerate(multi.operations):
            try:
                if not isinstance(operation, (ZkCreate, ZkDelete, ZkSetData, ZkCheck)) or (
                    isinstance(operation, ZkCreate) and operation.make_parents
                ):
                    raise ZkFailure("bad_arguments")
                values.append(self._write(session_id, operation, undo, triggers))
            except ZkFailure as failure:
                self._undo(undo)
                return ZkOutcome(ZkMultiFailed(index, failure.code), failure.code)
        return ZkOutcome(tuple(values), fired=self._fire(triggers))

    def _undo(self, undo: list[tuple[str, _Znode | None]]) -> None:
        """Put back every node a failed multi touched, as it was before (latest change undone first)."""
        for path, before in reversed(undo):
            if before is None:
                self._nodes.pop(path, None)
            else:
                self._nodes[path] = before

    def _touch(self, path: str, undo: list[tuple[str, _Znode | None]]) -> _Znode:
        """``path``'s node, copied first into ``undo`` so a failing multi can put it back."""
        node = self._nodes[path]
        undo.append((path, node.copy()))
        return node

    def _write(
        self, session_id: int, operation: ZkOperation, undo: list[tuple[str, _Znode | None]],
        triggers: list[_Trigger],
    ) -> object:
        """Apply one write (or check); raise ``ZkFailure`` before changing anything if it cannot."""
        if isinstance(operation, ZkCreate):
            return self._create(session_id, operation, undo, triggers)
        if not isinstance(operation, (ZkDelete, ZkSetData, ZkCheck)):
            raise ZkFailure("bad_arguments")
        path = operation.path
        if not _valid_path(path):
            raise ZkFailure("bad_arguments")
        if isinstance(operation, ZkDelete) and path == "/":
            raise ZkFailure("bad_arguments")
        node = self._nodes.get(path)
        if node is None:
            raise ZkFailure("no_node")
        if operation.version not in (-1, node.version):
            raise ZkFailure("bad_version")
        if isinstance(operation, ZkCheck):
            return None
        if isinstance(operation, ZkSetData):
            if not isinstance(operation.data, bytes):
                raise ZkFailure("bad_arguments")
            node = self._touch(path, undo)
            node.data = operation.data
            node.version += 1
            triggers.append((path, "changed"))
            return node.version
        if node.children:
            raise ZkFailure("not_empty")
        parent_path, name = _parent(path)
        parent = self._touch(parent_path, undo)
        undo.append((path, node))
        del self._nodes[path]
        parent.children.discard(name)
        parent.cversion += 1
        triggers.extend(((path, "deleted"), (parent_path, "child")))
        return None

    def _create(
        self, session_id: int, operation: ZkCreate, undo: list[tuple[str, _Znode | None]], triggers: list[_Trigger],
    ) -> str:
        path = operation.path
        if not isinstance(path, str) or not path.startswith("/") or not isinstance(operation.data, bytes):
            raise ZkFailure("bad_arguments")
        if not operation.sequential and not _valid_path(path):
            raise ZkFailure("bad_arguments")
        if path == "/" and not operation.sequential:
            raise ZkFailure("node_exists")
        parent_path, _ = _parent(path)
        if not _valid_path(parent_path):
            raise ZkFailure("bad_arguments")
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise ZkFailure("no_node")
        if operation.sequential:
            path = f"{path}{self.sequence_number(parent_path):0{SEQUENCE_DIGITS}d}"
        if not _valid_path(path):
            raise ZkFailure("bad_arguments")
        if path in self._nodes:
            raise ZkFailure("node_exists")
        if parent.owner != 0:
            raise ZkFailure("no_children_for_ephemerals")
        parent = self._touch(parent_path, undo)
        undo.append((path, None))
        self._nodes[path] = _Znode(operation.data, session_id if operation.ephemeral else 0)
        parent.children.add(_parent(path)[1])
        parent.cversion += 1
        triggers.extend(((path, "created"), (parent_path, "child")))
        return path

    def sequence_number(self, parent_path: str) -> int:
        """The number a sequential node created under ``parent_path`` now gets: its child version (ZooKeeper's)."""
        return self._nodes[parent_path].cversion

    def child_count(self, path: str) -> int:
        """How many children ``path`` has now (0 for a missing node)."""
        node = self._nodes.get(path)
        return 0 if node is None else len(node.children)

    def _remove(self, path: str) -> list[_Trigger]:
        """Delete a childless node outside any operation (a session's ephemeral node at its end)."""
        parent_path, name = _parent(path)
        del self._nodes[path]
        parent = self._nodes[parent_path]
        parent.children.discard(name)
        parent.cversion += 1
        return [(path, "deleted"), (parent_path, "child")]

    def _fire(self, triggers: list[_Trigger]) -> tuple[WatchDelivery, ...]:
        """The one-shot watches the changes fire, in order, each taken off its table."""
        fired: list[WatchDelivery] = []
        for path, kind in triggers:
            notified: set[tuple[int, Hashable]] = set()
            tables = (self._data_watches, self._child_watches) if kind == "deleted" else (
                (self._child_watches,) if kind == "child" else (self._data_watches,))
            for table in tables:
                watchers = table.pop(path, None)
                for key in watchers or ():
                    if key not in notified:
                        notified.add(key)
                        fired.append(WatchDelivery(key[0], key[1], ZkWatchFired(path, kind)))
        return tuple(fired)
