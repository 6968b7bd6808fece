"""KazooSession against a real ZooKeeper (the session-wide ``zookeeper`` fixture), on trio and on threads.

Every operation and error code of the session protocol, multis that fail as a whole, sequential and
ephemeral nodes, one-shot watches, and the session's life: the server killed and restarted (suspended,
then reconnected, ephemeral nodes kept), a client cut off past its timeout (expired, its ephemeral
nodes gone, a new session opened), a clean close. Each test works under a root of its own.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor.actors.zookeeper import KazooSession, LocalZooKeeper
from conveyor.runtime import Actor, ActorRef
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkCheck,
    ZkClose,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkMultiFailed,
    ZkNode,
    ZkOperation,
    ZkReply,
    ZkSessionEvent,
    ZkSetData,
    ZkWatchFired,
    ZkWatchSession,
)
from tests.actors.zookeeper.proxy import PartitionProxy
from tests.conftest import Harness, make_harness


class Inbox(Actor):
    """Keeps everything a session tells it (replies, watch fires, session events) in the test's list."""

    def __init__(self, seen: list[object]) -> None:
        self.seen = seen

    def receive(self, message: Any) -> None:
        self.seen.append(message)


class Session:
    """One KazooSession and the inbox its answers go to, driven from the test."""

    def __init__(self, harness: Harness, hosts: str, *, timeout: float = 10.0) -> None:
        self.harness = harness
        self.seen: list[object] = []
        seen = self.seen
        self.inbox = harness.spawn(lambda: Inbox(seen))
        self.ref: ActorRef = harness.spawn(lambda: KazooSession(hosts, timeout=timeout))
        self.next_id = 0

    def submit(self, operation: ZkOperation | object) -> int:
        self.next_id += 1
        self.ref.tell(ZkCall(self.next_id, self.inbox, operation))  # type: ignore[arg-type]
        return self.next_id

    def reply(self, request_id: int) -> ZkReply | None:
        return next((m for m in self.seen if type(m) is ZkReply and m.request_id == request_id), None)

    async def answer(self, request_id: int, timeout: float = 15.0) -> ZkReply:
        await self.harness.wait_until(lambda: self.reply(request_id) is not None, timeout)
        reply = self.reply(request_id)
        assert reply is not None
        return reply

    async def call(self, operation: ZkOperation | object) -> ZkReply:
        return await self.answer(self.submit(operation))

    async def ok(self, operation: ZkOperation) -> object:
        reply = await self.call(operation)
        assert reply.error is None, f"{operation} answered {reply}"
        return reply.value

    def of_type(self, kind: type) -> list[Any]:
        return [m for m in self.seen if type(m) is kind]

    def states(self) -> list[str]:
        return [event.state for event in self.of_type(ZkSessionEvent)]

    async def wait_for_state(self, state: str, count: int = 1, timeout: float = 30.0) -> ZkSessionEvent:
        await self.harness.wait_until(lambda: self.states().count(state) >= count, timeout)
        events: list[ZkSessionEvent] = [e for e in self.of_type(ZkSessionEvent) if e.state == state]
        return events[count - 1]


@pytest.fixture(params=["trio", "threads"])
async def harness(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    async for made in make_harness(request.param):
        yield made


@pytest.fixture
def root() -> str:
    return f"/test-{uuid.uuid4().hex[:12]}"


async def test_every_operation_answers_with_its_value(harness: Harness, zookeeper: str, root: str) -> None:
    zk = Session(harness, zookeeper)
    assert await zk.ok(ZkCreate(f"{root}/a", b"one", make_parents=True)) == f"{root}/a"
    assert await zk.ok(ZkGetData(f"{root}/a")) == ZkNode(b"one", 0, 0)
    assert await zk.ok(ZkSetData(f"{root}/a", b"two", version=0)) == 1
    assert await zk.ok(ZkSetData(f"{root}/a", b"three")) == 2
    assert await zk.ok(ZkExists(f"{root}/a")) == ZkNode(b"", 2, 0)  # exists reads the stat, not the data
    assert await zk.ok(ZkCheck(f"{root}/a", 2)) is None
    assert await zk.ok(ZkCreate(f"{root}/b")) == f"{root}/b"
    assert sorted(await zk.ok(ZkGetChildren(root))) == ["a", "b"]  # type: ignore[call-overload]
    assert await zk.ok(ZkDelete(f"{root}/a", version=2)) is None
    assert await zk.ok(ZkExists(f"{root}/a")) is None
    assert await zk.ok(ZkGetChildren(root)) == ("b",)


async def test_sequential_names_carry_the_parents_counter_in_ten_digits(harness: Harness, zookeeper: str,
                                                                         root: str) -> None:
    zk = Session(harness, zookeeper)
    await zk.ok(ZkCreate(f"{root}/items", make_parents=True))
    names = [await zk.ok(ZkCreate(f"{root}/items/item-", b"x", sequential=True)) for _ in range(3)]
    assert names == [f"{root}/items/item-{n:010d}" for n in range(3)]
    await zk.ok(ZkCreate(f"{root}/items/other"))  # any child moves the counter
    assert await zk.ok(ZkCreate(f"{root}/items/item-", sequential=True)) == f"{root}/items/item-{4:010d}"


async def test_each_refusal_answers_zookeepers_code(harness: Harness, zookeeper: str, root: str) -> None:
    zk = Session(harness, zookeeper)
    await zk.ok(ZkCreate(f"{root}/full/child", make_parents=True))
    await zk.ok(ZkCreate(f"{root}/owned", ephemeral=True))
    cases: list[tuple[ZkOperation, str]] = [
        (ZkCreate(f"{root}/full"), "node_exists"),
        (ZkCreate(f"{root}/missing/child"), "no_node"),
        (ZkGetData(f"{root}/missing"), "no_node"),
        (ZkGetChildren(f"{root}/missing"), "no_node"),
        (ZkDelete(f"{root}/missing"), "no_node"),
        (ZkSetData(f"{root}/missing", b""), "no_node"),
        (ZkCheck(f"{root}/missing", 0), "no_node"),
        (ZkDelete(f"{root}/full/child", version=7), "bad_version"),
        (ZkSetData(f"{root}/full", b"", version=7), "bad_version"),
        (ZkCheck(f"{root}/full", 7), "bad_version"),
        (ZkDelete(f"{root}/full"), "not_empty"),
        (ZkCreate(f"{root}/owned/child"), "no_children_for_ephemerals"),
    ]
    for operation, code in cases:
        reply = await zk.call(operation)
        assert (reply.error, reply.value) == (code, None), operation


async def test_bad_input_is_answered_bad_arguments_naming_the_field(harness: Harness, zookeeper: str,
                                                                   root: str) -> None:
    zk = Session(harness, zookeeper)
    cases: list[tuple[object, str]] = [
        (ZkCreate("no-slash"), "operation.path must start with '/'"),
        (ZkCreate(f"{root}/a", "text"), "operation.data must be bytes, got str"),  # type: ignore[arg-type]
        (ZkGetData(f"{root}//a"), "operation.path must not have an empty segment"),
        (ZkDelete(f"{root}/a", version=-5), "operation.version must be an int >= -1"),
        (ZkMulti((ZkCreate(f"{root}/a", make_parents=True),)), "operation.operations[0].make_parents"),
        (ZkMulti((ZkGetData(f"{root}/a"),)), "operation.operations[0] must be a ZkCreate"),  # type: ignore[arg-type]
        ("create it", "operation must be a ZkCreate"),
    ]
    for operation, words in cases:
        reply = await zk.call(operation)
        assert reply.error == "bad_arguments", operation
        assert isinstance(reply.value, str)
        assert reply.value.startswith(words), reply.value
    assert await zk.ok(ZkExists(root)) is None  # nothing reached the server


async def test_a_multi_applies_every_write_and_answers_each_value(harness: Harness, zookeeper: str,
                                                                  root: str) -> None:
    zk = Session(harness, zookeeper)
    await zk.ok(ZkCreate(f"{root}/items/item-", sequential=True, make_parents=True))
    await zk.ok(ZkCreate(f"{root}/meta", b"0", make_parents=True))
    values = await zk.ok(ZkMulti((
        ZkDelete(f"{root}/items/item-{0:010d}"),
        ZkCreate(f"{root}/items/item-", b"put", sequential=True),
        ZkSetData(f"{root}/meta", b"1", version=0),
        ZkCheck(f"{root}/meta", 1),
    )))
    assert values == (None, f"{root}/items/item-{1:010d}", 1, None)
    assert await zk.ok(ZkGetChildren(f"{root}/items")) == (f"item-{1:010d}",)


async def test_a_failed_multi_leaves_nothing_and_names_the_failing_operation(harness: Harness, zookeeper: str,
                                                                             root: str) -> None:
    zk = Session(harness, zookeeper)
    await zk.ok(ZkCreate(f"{root}/items/taken", make_parents=True))
    failing = ZkMulti((
        ZkCreate(f"{root}/items/put-1"),
        ZkDelete(f"{root}/items/taken"),
        ZkDelete(f"{root}/items/gone"),
        ZkCreate(f"{root}/items/put-2"),
    ))
    reply = await zk.call(failing)
    assert (reply.error, reply.value) == ("no_node", ZkMultiFailed(2, "no_node"))
    assert await zk.ok(ZkGetChildren(f"{root}/items")) == ("taken",)  # the create rolled back, the delete too
    reply = await zk.call(ZkMulti((ZkCheck(f"{root}/items/taken", 0), ZkCheck(f"{root}/items/taken", 3))))
    assert (reply.error, reply.value) == ("bad_version", ZkMultiFailed(1, "bad_version"))


async def test_an_ephemeral_node_goes_when_its_session_closes(harness: Harness, zookeeper: str, root: str) -> None:
    owner, observer = Session(harness, zookeeper), Session(harness, zookeeper)
    owner.ref.tell(ZkWatchSession(owner.inbox))
    await observer.ok(ZkCreate(f"{root}/locks", make_parents=True))
    await owner.ok(ZkCreate(f"{root}/locks/lock-1", ephemeral=True))
    session_id = (await owner.wait_for_state("connected")).session_id
    assert await observer.ok(ZkExists(f"{root}/locks/lock-1")) == ZkNode(b"", 0, session_id)

    owner.ref.tell(ZkClose())
    closed = await owner.wait_for_state("closed")
    assert closed.session_id == session_id
    assert await observer.ok(ZkExists(f"{root}/locks/lock-1")) is None
    assert (await owner.call(ZkExists(root))).error == "closed"


async def test_a_stopped_session_closes_and_tells_its_subscribers(harness: Harness, zookeeper: str,
                                                                  root: str) -> None:
    zk, observer = Session(harness, zookeeper), Session(harness, zookeeper)
    zk.ref.tell(ZkWatchSession(zk.inbox))
    await zk.ok(ZkCreate(f"{root}/lock", ephemeral=True, make_parents=True))
    session_id = (await zk.wait_for_state("connected")).session_id
    harness.system.stop(zk.ref)
    assert (await zk.wait_for_state("closed")).session_id == session_id
    assert await observer.ok(ZkExists(f"{root}/lock")) is None  # closed means its ephemeral nodes are gone


async def test_a_watch_fires_once_per_read_that_left_it(harness: Harness, zookeeper: str, root: str) -> None:
    zk = Session(harness, zookeeper)
    writer = Session(harness, zookeeper)
    await writer.ok(ZkCreate(f"{root}/node", make_parents=True))
    await zk.ok(ZkGetData(f"{root}/node", watch=True))
    await zk.ok(ZkGetChildren(root, watch=True))
    assert await zk.ok(ZkExists(f"{root}/later", watch=True)) is None
    await zk.ok(ZkGetData(f"{root}/node"))  # no watch: nothing more fires for it
    for data in (b"1", b"2"):
        await writer.ok(ZkSetData(f"{root}/node", data))
    await writer.ok(ZkCreate(f"{root}/later"))
    await writer.ok(ZkCreate(f"{root}/other"))
    expected = [ZkWatchFired(f"{root}/node", "changed"), ZkWatchFired(root, "child"),
                ZkWatchFired(f"{root}/later", "created")]
    await harness.wait_until(lambda: len(zk.of_type(ZkWatchFired)) >= 3, 15)
    await zk.ok(ZkExists(root))  # one more round trip: a second fire would have arrived by now
    assert sorted(zk.of_type(ZkWatchFired), key=repr) == sorted(expected, key=repr)
    assert writer.of_type(ZkWatchFired) == []

    await zk.ok(ZkExists(f"{root}/later", watch=True))
    await writer.ok(ZkDelete(f"{root}/later"))
    await harness.wait_until(lambda: len(zk.of_type(ZkWatchFired)) == 4, 15)
    assert zk.of_type(ZkWatchFired)[-1] == ZkWatchFired(f"{root}/later", "deleted")


async def test_calls_before_the_first_connection_are_held_and_answered(harness: Harness, zookeeper: str,
                                                                       root: str) -> None:
    zk = Session(harness, zookeeper)
    first = zk.submit(ZkCreate(root))  # sent at once, before kazoo has connected
    second = zk.submit(ZkExists(root))
    assert (await zk.answer(first)).value == root
    assert (await zk.answer(second)).value == ZkNode(b"", 0, 0)


async def test_a_killed_server_suspends_the_session_and_its_restart_reconnects_it(
        harness: Harness, zookeeper_server: LocalZooKeeper, zookeeper: str, root: str) -> None:
    # The session reaches the server through a proxy kept shut while the server starts again: a
    # client that connects in a starting server's first moments may get no answer, and kazoo then
    # waits its whole session timeout, by which time the session has expired (docs/transactions.md).
    with PartitionProxy(zookeeper) as proxy:
        zk = Session(harness, proxy.address, timeout=10.0)
        zk.ref.tell(ZkWatchSession(zk.inbox))
        await zk.ok(ZkCreate(f"{root}/lock", ephemeral=True, make_parents=True))
        session_id = (await zk.wait_for_state("connected")).session_id
        await zk.ok(ZkGetChildren(root, watch=True))  # kazoo forgets its watches when the connection drops

        pid = zookeeper_server.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # the next call reaches the server but no answer can come back
        sent = proxy.sent_upstream
        in_flight = zk.submit(ZkGetData(f"{root}/lock"))
        # On the wire: kazoo awaits its answer. A ping (12 bytes) may go out first under load, so wait for
        # the request's own bytes: length, xid and type, the path's length and bytes, the watch flag.
        request_bytes = 4 + 8 + 4 + len(f"{root}/lock".encode()) + 1
        await harness.wait_until(lambda: proxy.sent_upstream - sent >= request_bytes)
        zookeeper_server.kill()
        proxy.cut()
        assert (await zk.answer(in_flight)).error == "connection_loss"
        await zk.wait_for_state("suspended")
        await harness.wait_until(lambda: zk.of_type(ZkWatchFired) == [ZkWatchFired(root, "child")])  # fired
        while_down = zk.submit(ZkExists(f"{root}/lock"))  # waits in kazoo's queue for the reconnection

        zookeeper_server.start()
        proxy.heal()
        reconnected = await zk.wait_for_state("reconnected")
        assert reconnected.session_id == session_id
        assert (await zk.answer(while_down)).value == ZkNode(b"", 0, session_id)
        observer = Session(harness, zookeeper)
        assert await observer.ok(ZkExists(f"{root}/lock")) == ZkNode(b"", 0, session_id)
        assert zk.states() == ["connected", "suspended", "reconnected"]


async def test_a_session_cut_off_past_its_timeout_expires_and_a_new_one_opens(
        harness: Harness, zookeeper: str, root: str) -> None:
    observer = Session(harness, zookeeper)
    with PartitionProxy(zookeeper) as proxy:
        zk = Session(harness, proxy.address, timeout=2.0)
        zk.ref.tell(ZkWatchSession(zk.inbox))
        await zk.ok(ZkCreate(f"{root}/lock", ephemeral=True, make_parents=True))
        old = (await zk.wait_for_state("connected")).session_id
        watched = await observer.ok(ZkExists(f"{root}/lock", watch=True))
        assert watched == ZkNode(b"", 0, old)

        proxy.cut()
        await zk.wait_for_state("suspended")
        await harness.wait_until(lambda: len(observer.of_type(ZkWatchFired)) == 1, 30)  # the server expired it
        assert observer.of_type(ZkWatchFired) == [ZkWatchFired(f"{root}/lock", "deleted")]
        proxy.heal()

        expired = await zk.wait_for_state("expired")
        assert expired.session_id == old
        new = (await zk.wait_for_state("connected", count=2)).session_id
        assert new != old
        assert zk.states() == ["connected", "suspended", "expired", "connected"]
        assert await zk.ok(ZkCreate(f"{root}/lock", ephemeral=True)) == f"{root}/lock"
        assert await observer.ok(ZkExists(f"{root}/lock")) == ZkNode(b"", 0, new)


async def test_a_subscriber_hears_the_current_state_first(harness: Harness, zookeeper: str) -> None:
    zk = Session(harness, zookeeper)
    await zk.ok(ZkExists("/"))
    zk.ref.tell(ZkWatchSession(zk.inbox))
    event = await zk.wait_for_state("connected")
    assert event.session_id != 0


@pytest.mark.parametrize(("hosts", "timeout", "words"), [
    ("", 10.0, "hosts must be a non-empty"),
    ("127.0.0.1:2181", 0, "timeout must be a finite number of seconds > 0"),
    ("127.0.0.1:2181", float("nan"), "timeout must be"),
])
def test_a_session_refuses_a_bad_configuration_naming_it(hosts: str, timeout: float, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        KazooSession(hosts, timeout=timeout)


async def test_a_failing_handler_closes_its_session_before_the_restart_opens_another(
        harness: Harness, zookeeper: str, root: str) -> None:
    zk, observer = Session(harness, zookeeper), Session(harness, zookeeper)
    zk.ref.tell(ZkWatchSession(zk.inbox))
    await zk.ok(ZkCreate(f"{root}/lock", ephemeral=True, make_parents=True))
    old = (await zk.wait_for_state("connected")).session_id

    zk.ref.tell("not a protocol message")  # TypeError in the handler: the supervisor restarts the actor
    assert (await zk.wait_for_state("expired")).session_id == old
    assert await observer.ok(ZkExists(f"{root}/lock")) is None  # "expired" is told once the session is closed
    created = await zk.ok(ZkCreate(f"{root}/lock", ephemeral=True))  # the fresh instance's own session
    assert created == f"{root}/lock"
    node = await observer.ok(ZkExists(f"{root}/lock"))
    assert isinstance(node, ZkNode) and node.ephemeral_owner not in {0, old}
