"""SimZooKeeper, the simulator's ZooKeeper model: unit tests and a state machine against a plain reference."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.runtime.lowlevel import (
    ZkCheck,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkSetData,
    ZkWatchFired,
)
from conveyor.simulation import SimZooKeeper, WatchDelivery


def _model_with_session() -> tuple[SimZooKeeper, int]:
    model = SimZooKeeper()
    return model, model.open_session()


# -- sequential naming --------------------------------------------------------------------------------


def test_sequential_names_have_ten_digits_from_the_parents_child_version() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/q"))
    first = model.apply(session, ZkCreate("/q/item-", sequential=True)).value
    second = model.apply(session, ZkCreate("/q/item-", sequential=True)).value
    assert (first, second) == ("/q/item-0000000000", "/q/item-0000000001")
    model.apply(session, ZkCreate("/q/other"))  # any child change moves the counter, as ZooKeeper's cversion
    model.apply(session, ZkDelete("/q/item-0000000001"))
    assert model.apply(session, ZkCreate("/q/item-", sequential=True)).value == "/q/item-0000000004"


def test_sequential_names_never_repeat_after_deletes() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/q"))
    seen = set()
    for _ in range(30):
        path = model.apply(session, ZkCreate("/q/lock-", sequential=True, ephemeral=True)).value
        assert path not in seen
        seen.add(path)
        model.apply(session, ZkDelete(str(path)))
    assert model.apply(session, ZkGetChildren("/q")).value == ()


def test_a_failed_multi_does_not_move_the_sequence_counter() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/q"))
    failed = model.apply(session, ZkMulti((ZkCreate("/q/item-", sequential=True), ZkCheck("/q", 7))))
    assert failed.error == "bad_version"
    assert model.apply(session, ZkCreate("/q/item-", sequential=True)).value == "/q/item-0000000000"


# -- ephemeral nodes and sessions ---------------------------------------------------------------------


def test_expiry_removes_every_ephemeral_of_the_session_and_only_them() -> None:
    model, one = _model_with_session()
    two = model.open_session()
    model.apply(one, ZkCreate("/locks/a", ephemeral=True, make_parents=True))
    model.apply(one, ZkCreate("/locks/b-", ephemeral=True, sequential=True))
    model.apply(two, ZkCreate("/locks/c", ephemeral=True))
    model.apply(one, ZkCreate("/locks/kept"))
    assert model.ephemerals(one) == ["/locks/a", "/locks/b-0000000001"]
    model.expire(one)
    assert model.apply(two, ZkGetChildren("/locks")).value == ("c", "kept")
    assert model.ephemerals(one) == []
    assert model.session_status(one) == "expired"
    assert model.apply(one, ZkExists("/locks")).error == "session_expired"


def test_close_removes_the_ephemerals_and_later_calls_are_closed() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/e", ephemeral=True))
    model.close(session)
    assert model.node("/e") is None
    assert model.apply(session, ZkExists("/e")).error == "closed"
    assert model.expire(session) == ()  # an ended session ends once


def test_ephemeral_nodes_cannot_have_children() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/e", ephemeral=True))
    assert model.apply(session, ZkCreate("/e/child")).error == "no_children_for_ephemerals"
    assert model.node("/e") == ZkNode(b"", 0, session)


# -- errors, in ZooKeeper's order ---------------------------------------------------------------------


def test_errors_of_create_delete_and_set() -> None:
    model, session = _model_with_session()
    assert model.apply(session, ZkCreate("/a/b")).error == "no_node"
    assert model.apply(session, ZkCreate("/a")).value == "/a"
    assert model.apply(session, ZkCreate("/a")).error == "node_exists"
    assert model.apply(session, ZkCreate("/")).error == "node_exists"
    assert model.apply(session, ZkCreate("a")).error == "bad_arguments"
    assert model.apply(session, ZkCreate("/a/")).error == "bad_arguments"
    assert model.apply(session, ZkCreate("/a/../b")).error == "bad_arguments"
    model.apply(session, ZkCreate("/a/b"))
    assert model.apply(session, ZkDelete("/a")).error == "not_empty"
    assert model.apply(session, ZkDelete("/a", version=3)).error == "bad_version"  # checked before children
    assert model.apply(session, ZkDelete("/zz")).error == "no_node"
    assert model.apply(session, ZkDelete("/")).error == "bad_arguments"
    assert model.apply(session, ZkSetData("/a/b", b"x", version=1)).error == "bad_version"
    assert model.apply(session, ZkSetData("/a/b", b"x", version=0)).value == 1
    assert model.apply(session, ZkSetData("/a/b", b"y")).value == 2
    assert model.apply(session, ZkGetData("/a/b")).value == ZkNode(b"y", 2, 0)
    assert model.apply(session, ZkGetData("/zz")).error == "no_node"
    assert model.apply(session, ZkExists("/zz")).value is None


def test_make_parents_creates_missing_ancestors_persistent() -> None:
    model, session = _model_with_session()
    path = model.apply(session, ZkCreate("/r/q/items/item-", b"body", sequential=True, make_parents=True)).value
    assert path == "/r/q/items/item-0000000000"
    assert model.node("/r/q") == ZkNode(b"", 0, 0)
    assert model.apply(session, ZkMulti((ZkCreate("/s/t", make_parents=True),))).value == ZkMultiFailed(
        0, "bad_arguments")


# -- multi ---------------------------------------------------------------------------------------------


def test_multi_applies_all_or_nothing() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/q/items/item-0", b"x", make_parents=True))
    model.apply(session, ZkCreate("/q/locks/lock-0", ephemeral=True, make_parents=True))
    before = {path: model.node(path) for path in model.paths()}
    failed = model.apply(session, ZkMulti((
        ZkDelete("/q/items/item-0"),
        ZkDelete("/q/locks/lock-0"),
        ZkCreate("/q/out/item-", b"y", sequential=True),  # /q/out is missing
    )))
    assert (failed.value, failed.error) == (ZkMultiFailed(2, "no_node"), "no_node")
    assert {path: model.node(path) for path in model.paths()} == before
    done = model.apply(session, ZkMulti((
        ZkDelete("/q/items/item-0"),
        ZkDelete("/q/locks/lock-0"),
        ZkCreate("/q/out"),
        ZkCreate("/q/out/item-", b"y", sequential=True),
        ZkSetData("/q/out", b"meta"),
        ZkCheck("/q/out", 1),
    )))
    assert done.error is None
    assert done.value == (None, None, "/q/out", "/q/out/item-0000000000", 1, None)
    assert model.node("/q/items/item-0") is None


def test_a_multi_sees_its_own_earlier_operations() -> None:
    model, session = _model_with_session()
    result = model.apply(session, ZkMulti((ZkCreate("/a"), ZkCreate("/a/b"), ZkDelete("/a/b"), ZkDelete("/a"))))
    assert result.error is None
    assert model.node("/a") is None
    assert model.apply(session, ZkMulti((ZkCreate("/a"), ZkCreate("/a")))).value == ZkMultiFailed(1, "node_exists")
    assert model.node("/a") is None


# -- watches -------------------------------------------------------------------------------------------


def test_a_watch_fires_once() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/n", b"0"))
    model.apply(session, ZkGetData("/n", watch=True), "w")
    first = model.apply(session, ZkSetData("/n", b"1"))
    second = model.apply(session, ZkSetData("/n", b"2"))
    assert first.fired == (WatchDelivery(session, "w", ZkWatchFired("/n", "changed")),)
    assert second.fired == ()


def test_exists_watch_on_a_missing_node_fires_at_its_creation_and_child_watch_on_children() -> None:
    model, one = _model_with_session()
    two = model.open_session()
    model.apply(one, ZkCreate("/q"))
    model.apply(two, ZkExists("/q/x", watch=True), "exists")
    model.apply(two, ZkGetChildren("/q", watch=True), "children")
    created = model.apply(one, ZkCreate("/q/x", ephemeral=True))
    assert [d.event for d in created.fired] == [ZkWatchFired("/q/x", "created"), ZkWatchFired("/q", "child")]
    assert [d.session_id for d in created.fired] == [two, two]
    model.apply(two, ZkGetChildren("/q", watch=True), "children")
    fired = model.expire(one)  # an expiry fires the watches on its ephemerals like any delete
    assert [d.event for d in fired] == [ZkWatchFired("/q", "child")]


def test_a_watcher_with_a_data_and_a_child_watch_hears_one_delete() -> None:
    model, session = _model_with_session()
    model.apply(session, ZkCreate("/n"))
    model.apply(session, ZkGetData("/n", watch=True), "w")
    model.apply(session, ZkGetChildren("/n", watch=True), "w")
    assert [d.event for d in model.apply(session, ZkDelete("/n")).fired] == [ZkWatchFired("/n", "deleted")]


def test_a_failed_multi_fires_nothing_and_an_ended_sessions_watches_are_gone() -> None:
    model, one = _model_with_session()
    two = model.open_session()
    model.apply(one, ZkCreate("/n"))
    model.apply(two, ZkGetData("/n", watch=True), "w")
    assert model.apply(one, ZkMulti((ZkSetData("/n", b"x"), ZkDelete("/none")))).fired == ()
    model.close(two)
    assert model.apply(one, ZkSetData("/n", b"x")).fired == ()


def test_a_failed_read_leaves_no_watch() -> None:
    model, session = _model_with_session()
    assert model.apply(session, ZkGetData("/n", watch=True), "w").error == "no_node"
    assert model.apply(session, ZkCreate("/n")).fired == ()


# -- the model against a plain reference ------------------------------------------------------------

PATHS = ("/a", "/b", "/a/x", "/a/y", "/a/x/deep")
DATA = st.sampled_from((b"", b"1", b"22"))


class _Reference:
    """ZooKeeper's rules written the plain way: a dict of path -> [data, version, owner, cversion].

    Watches the plain way too: each operation's events are the difference between the tree before
    and after it (a node that appeared, vanished or changed version; a child list that changed).
    """

    def __init__(self) -> None:
        self.nodes: dict[str, list[Any]] = {"/": [b"", 0, 0, 0]}
        self.alive: set[int] = set()
        self.closed: set[int] = set()
        self.data_watches: set[tuple[int, str, str]] = set()  # (session, watcher, path)
        self.child_watches: set[tuple[int, str, str]] = set()

    @staticmethod
    def parent(path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def children(self, path: str) -> list[str]:
        return [p for p in self.nodes if p != "/" and self.parent(p) == path]

    def read(self, session: int, operation: Any, watcher: str) -> tuple[object, str | None]:
        if session not in self.alive:
            return None, "closed" if session in self.closed else "session_expired"
        node = self.nodes.get(operation.path)
        if node is None and not isinstance(operation, ZkExists):
            return None, "no_node"
        if operation.watch:
            table = self.child_watches if isinstance(operation, ZkGetChildren) else self.data_watches
            table.add((session, watcher, operation.path))
        if node is None:
            return None, None
        if isinstance(operation, ZkGetChildren):
            return tuple(sorted(p.rsplit("/", 1)[1] for p in self.children(operation.path))), None
        return ZkNode(node[0], node[1], node[2]), None

    def op(self, session: int, operation: Any) -> tuple[object, str | None, list[tuple[int, str, str, str]]]:
        if session not in self.alive:
            return None, "closed" if session in self.closed else "session_expired", []
        saved = copy.deepcopy((self.nodes, self.data_watches, self.child_watches))
        fired: list[tuple[int, str, str, str]] = []
        operations = operation.operations if isinstance(operation, ZkMulti) else (operation,)
        values = []
        for index, inner in enumerate(operations):
            before = copy.deepcopy(self.nodes)
            value, error = self.write(session, inner)
            if error is not None:
                self.nodes, self.data_watches, self.child_watches = saved
                if isinstance(operation, ZkMulti):
                    return ZkMultiFailed(index, error), error, []  # type: ignore[arg-type]
                return None, error, []
            fired += self.fire(before)
            values.append(value)
        return (tuple(values) if isinstance(operation, ZkMulti) else values[0]), None, fired

    def fire(self, before: dict[str, list[Any]]) -> list[tuple[int, str, str, str]]:
        """The one-shot watches the change from ``before`` to now fires, each taken off its table."""
        fired: list[tuple[int, str, str, str]] = []
        for path in sorted(set(before) | set(self.nodes)):
            old, new = before.get(path), self.nodes.get(path)
            kids_before = {p for p in before if p != "/" and self.parent(p) == path}
            kind = ""
            if old is None and new is not None:
                kind = "created"
            elif old is not None and new is None:
                kind = "deleted"
            elif old is not None and new is not None and old[1] != new[1]:
                kind = "changed"
            hit: set[tuple[int, str, str]] = set()
            if kind:
                hit = {w for w in self.data_watches if w[2] == path}
                self.data_watches -= hit
                if kind == "deleted":
                    gone = {w for w in self.child_watches if w[2] == path}
                    self.child_watches -= gone
                    hit |= gone  # one event to a watcher that had both
            fired += [(w[0], w[1], path, kind) for w in hit]
            if new is not None and set(self.children(path)) != kids_before:
                child_hit = {w for w in self.child_watches if w[2] == path}
                self.child_watches -= child_hit
                fired += [(w[0], w[1], path, "child") for w in child_hit]
        return fired

    def write(self, session: int, operation: Any) -> tuple[object, str | None]:
        path = operation.path
        if isinstance(operation, ZkCreate):
            parent = self.nodes.get(self.parent(path))
            if parent is None:
                return None, "no_node"
            if operation.sequential:
                path = f"{path}{parent[3]:010d}"
            if path in self.nodes:
                return None, "node_exists"
            if parent[2] != 0:
                return None, "no_children_for_ephemerals"
            self.nodes[path] = [operation.data, 0, session if operation.ephemeral else 0, 0]
            parent[3] += 1
            return path, None
        node = self.nodes.get(path)
        if node is None:
            return None, "no_node"
        if operation.version not in (-1, node[1]):
            return None, "bad_version"
        if isinstance(operation, ZkCheck):
            return None, None
        if isinstance(operation, ZkSetData):
            node[0] = operation.data
            node[1] += 1
            return node[1], None
        if self.children(path):
            return None, "not_empty"
        del self.nodes[path]
        self.nodes[self.parent(path)][3] += 1
        return None, None

    def end(self, session: int, close: bool) -> list[tuple[int, str, str, str]]:
        if session not in self.alive:
            return []
        self.alive.discard(session)
        if close:
            self.closed.add(session)
        self.data_watches = {w for w in self.data_watches if w[0] != session}
        self.child_watches = {w for w in self.child_watches if w[0] != session}
        before = copy.deepcopy(self.nodes)
        for path in [p for p, node in self.nodes.items() if node[2] == session]:
            del self.nodes[path]
            self.nodes[self.parent(path)][3] += 1
        return self.fire(before)


def _fired(deliveries: tuple[WatchDelivery, ...]) -> list[tuple[int, str, str, str]]:
    return sorted((d.session_id, str(d.watcher), d.event.path, d.event.kind) for d in deliveries)


def _writes(sessions: int) -> st.SearchStrategy[Any]:
    del sessions
    version = st.sampled_from((-1, 0, 1, 2))
    return st.one_of(
        st.builds(ZkCreate, st.sampled_from(PATHS), DATA, st.booleans(), st.booleans()),
        st.builds(ZkDelete, st.sampled_from(PATHS), version),
        st.builds(ZkSetData, st.sampled_from(PATHS), DATA, version),
        st.builds(ZkCheck, st.sampled_from(PATHS), version),
    )


class ModelAgainstReference(RuleBasedStateMachine):
    """Random creates, deletes, sets, checks, multis, reads leaving watches, expiries and closes: the model
    answers as the reference, fires the same watches and keeps the same tree."""

    def __init__(self) -> None:
        super().__init__()
        self.model = SimZooKeeper()
        self.reference = _Reference()
        self.sessions: list[int] = []
        self.open()
        self.open()

    @rule()
    def open(self) -> None:
        session = self.model.open_session()
        self.sessions.append(session)
        self.reference.alive.add(session)

    def _same(self, session: int, operation: Any) -> None:
        outcome = self.model.apply(session, operation)
        value, error, fired = self.reference.op(session, operation)
        assert (outcome.value, outcome.error) == (value, error), operation
        assert _fired(outcome.fired) == sorted(fired), operation

    @rule(data=st.data(), path=st.sampled_from(("/", *PATHS)),
          kind=st.sampled_from((ZkGetData, ZkExists, ZkGetChildren)), watch=st.booleans(),
          watcher=st.sampled_from(("w1", "w2")))
    def read(self, data: st.DataObject, path: str, kind: Any, watch: bool, watcher: str) -> None:
        session = data.draw(st.sampled_from(self.sessions))
        operation = kind(path, watch=watch)
        outcome = self.model.apply(session, operation, watcher)
        assert (outcome.value, outcome.error) == self.reference.read(session, operation, watcher), operation

    @rule(data=st.data(), write=_writes(0))
    def write(self, data: st.DataObject, write: Any) -> None:
        self._same(data.draw(st.sampled_from(self.sessions)), write)

    @rule(data=st.data(), watcher=st.sampled_from(("w1", "w2")))
    def watch_everything(self, data: st.DataObject, watcher: str) -> None:
        """A data and a child watch on every path for one session: so watches are common enough to be judged."""
        for path in ("/", *PATHS):
            self.read(data, path, ZkExists, True, watcher)
            self.read(data, path, ZkGetChildren, True, watcher)

    @rule(data=st.data(), writes=st.lists(_writes(0), min_size=1, max_size=4))
    def multi(self, data: st.DataObject, writes: list[Any]) -> None:
        self._same(data.draw(st.sampled_from(self.sessions)), ZkMulti(tuple(writes)))

    @precondition(lambda self: len(self.sessions) > 1)
    @rule(data=st.data(), close=st.booleans())
    def end(self, data: st.DataObject, close: bool) -> None:
        session = data.draw(st.sampled_from(self.sessions))
        fired = self.model.close(session) if close else self.model.expire(session)
        assert _fired(fired) == sorted(self.reference.end(session, close))

    @invariant()
    def same_tree(self) -> None:
        for path, (data, version, owner, _) in self.reference.nodes.items():
            assert self.model.node(path) == ZkNode(data, version, owner), path
        assert set(self.model.paths()) == set(self.reference.nodes)
        for path in self.reference.nodes:
            expected = tuple(sorted(p.rsplit("/", 1)[1] for p in self.reference.children(path)))
            live = next(s for s in self.sessions if s in self.reference.alive) if self.reference.alive else None
            if live is not None:
                assert self.model.apply(live, ZkGetChildren(path)).value == expected

    @invariant()
    def no_ephemeral_outlives_its_session(self) -> None:
        for session in self.sessions:
            if session not in self.reference.alive:
                assert self.model.ephemerals(session) == []


ModelAgainstReference.TestCase.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
test_model_against_reference = ModelAgainstReference.TestCase
