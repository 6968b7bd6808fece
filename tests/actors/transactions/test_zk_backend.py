"""The unit of work on ``ZkTxBackend``, guarantee by guarantee, on the simulated ZooKeeper and a real server.

Each test drives the backend through ``AsyncTxQueue`` handles (the same face the broker backend's
tests use); ``zk_store`` gives the backend on the ``Simulation`` with ``SimZooKeeperEnsemble``
(deterministic) and on trio with ``KazooSession`` and the ``zookeeper`` fixture's server. A
``LoseReply`` proxy between backend and session loses the reply of a call (a lock create, a
commit) after the server applied it, as a connection loss would.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.transactions import (
    AsyncTxQueue,
    AtLeastOnce,
    ConsumeOnce,
    ConsumeTimes,
    GetTxStats,
    ReadDeadLetters,
    RedeliveryBackoff,
    TakeItem,
    Taken,
    TransactionError,
    TxQueueSettings,
    TxState,
    ZkTxBackend,
    settings_from_bytes,
    settings_to_bytes,
)
from conveyor.actors.transactions._zk_backend import AHEAD_HOLD_S, BODIES_MAX_BYTES
from conveyor.actors.zookeeper import KazooSession
from conveyor.runtime import Actor, ActorRef, AskTimeout, ConveyorError
from conveyor.runtime.lowlevel import (
    ZkCall,
    ZkCheck,
    ZkCreate,
    ZkDelete,
    ZkExists,
    ZkGetChildren,
    ZkGetData,
    ZkMulti,
    ZkReply,
)
from conveyor.simulation import SimZooKeeperEnsemble, ZkFaults
from tests.actors.transactions.helpers import declared, handle, produce, until
from tests.actors.zookeeper.proxy import PartitionProxy
from tests.conftest import Harness, SimulationHarness, make_harness

RETRY = AtLeastOnce()
_roots = itertools.count()


class Inbox(Actor):
    """Keeps what it is told in the test's list."""

    def __init__(self, seen: list[object]) -> None:
        self.seen = seen

    def receive(self, message: Any) -> None:
        self.seen.append(message)


def is_lock_create_alone(operation: object) -> bool:
    """A lock's create on its own: the take of an item taken before (it has meta)."""
    return isinstance(operation, ZkCreate) and operation.ephemeral and "/locks/" in operation.path


def is_lock_create(operation: object) -> bool:
    """A lock's create: alone (an item taken before), or in the multi that takes a fresh item."""
    if isinstance(operation, ZkMulti):
        return any(is_lock_create_alone(write) for write in operation.operations)
    return is_lock_create_alone(operation)


def is_commit_with_puts(operation: object) -> bool:
    return isinstance(operation, ZkMulti) and any(getattr(write, "sequential", False) for write in operation.operations)


class LoseReply(Actor):
    """Forwards to the session; the first ``times`` matching calls are applied, their replies swapped for
    ``connection_loss``."""

    def __init__(self, session: ActorRef, lost: list[ZkCall], matches: Callable[[object], bool], times: int) -> None:
        self.session = session
        self.lost = lost
        self.matches = matches
        self.times = times
        self.waiting: dict[int, ActorRef] = {}

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkCall):
            if len(self.lost) < self.times and self.matches(message.operation):
                self.lost.append(message)
                self.waiting[message.request_id] = message.reply_to
                self.ctx.send(self.session, attrs.evolve(message, reply_to=self.ctx.self_ref))
                return
            self.ctx.send(self.session, message)
        elif isinstance(message, ZkReply) and message.request_id in self.waiting:
            assert message.error is None, "the server applied the create"
            self.ctx.send(self.waiting.pop(message.request_id), ZkReply(message.request_id, None, "connection_loss"))
        else:
            self.ctx.send(self.session, message)


class Recorder(Actor):
    """Forwards to the session; writes down each call's operation with the time it was sent."""

    def __init__(self, session: ActorRef, calls: list[tuple[float, object]]) -> None:
        self.session = session
        self.calls = calls

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkCall):
            self.calls.append((self.ctx.now(), message.operation))
        self.ctx.send(self.session, message)


class Taker(Actor):
    """One waiting take, as its own session: sends ``TakeItem`` on start, keeps (time, answer)."""

    def __init__(self, store: ActorRef, queue: str, wait_s: float, answers: list[tuple[float, object]]) -> None:
        self.store = store
        self.queue = queue
        self.wait_s = wait_s
        self.answers = answers

    def on_start(self) -> None:
        self.ctx.send(self.store, TakeItem(self.ctx.self_ref, 1, self.queue, self.wait_s))

    def receive(self, message: Any) -> None:
        self.answers.append((self.ctx.now(), message))


class DropMarkerDeletes(Actor):
    """Forwards to the session all but the deletes of commit markers: as if the process died before them."""

    def __init__(self, session: ActorRef) -> None:
        self.session = session

    def receive(self, message: Any) -> None:
        operation = message.operation if isinstance(message, ZkCall) else None
        if isinstance(operation, ZkDelete) and "-commits/" in operation.path:
            return
        self.ctx.send(self.session, message)


class LoseCommitRequest(Actor):
    """Forwards to the session, but the first commit multi with puts never reaches it: answered
    ``connection_loss``, as a request lost before the server saw it."""

    def __init__(self, session: ActorRef) -> None:
        self.session = session
        self.lost = False

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkCall) and is_commit_with_puts(message.operation) and not self.lost:
            self.lost = True
            self.ctx.send(message.reply_to, ZkReply(message.request_id, None, "connection_loss"))
            return
        self.ctx.send(self.session, message)


class ExpireBeforeMarkerRead(Actor):
    """Forwards to the session; the first read of a commit marker waits 1 s, while the session is expired."""

    def __init__(self, session: ActorRef, expire: Callable[[], None]) -> None:
        self.session = session
        self.expire = expire
        self.held = False

    def receive(self, message: Any) -> None:
        if (isinstance(message, ZkCall) and isinstance(message.operation, ZkExists)
                and "-commits/" in message.operation.path and not self.held):
            self.held = True
            self.expire()
            self.ctx.schedule(1.0, message)
            return
        self.ctx.send(self.session, message)


class ExpireBeforeFreshTakeReply(Actor):
    """Forwards to the session; the reply of the first multi taking a fresh item comes back 1 s late, the
    session expired meanwhile: applied on a session whose lock went with it."""

    def __init__(self, session: ActorRef, expire: Callable[[], None]) -> None:
        self.session = session
        self.expire = expire
        self.backend: ActorRef | None = None
        self.expired = False

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkReply) and self.backend is not None:
            if not self.expired:
                self.expired = True
                self.expire()
                self.ctx.schedule(1.0, message)
            else:
                self.ctx.send(self.backend, message)
            return
        if isinstance(message, ZkCall) and is_lock_create(message.operation) and self.backend is None:
            self.backend = message.reply_to
            message = attrs.evolve(message, reply_to=self.ctx.self_ref)
        self.ctx.send(self.session, message)


@attrs.define
class ZkStore:
    """A backend under test: the harness, the backend's ref, how to make a session, the simulated ensemble."""

    harness: Harness
    session: Any
    root: str
    ensemble: SimZooKeeperEnsemble | None
    hosts: str = ""
    """The real server's address ("" in the simulator)."""
    instances: list[ZkTxBackend] = attrs.field(factory=list)
    sessions: list[ActorRef] = attrs.field(factory=list)
    store: ActorRef = attrs.field(init=False)

    def spawn_backend(
        self, *, lose: Callable[[object], bool] | None = None, times: int = 1,
        record: list[tuple[float, object]] | None = None, between: Callable[[ActorRef], Actor] | None = None,
        body_cache_bytes: int = BODIES_MAX_BYTES,
    ) -> tuple[ActorRef, list[ZkCall]]:
        """Another backend on a session of its own (another process, for ZooKeeper), same root.

        ``lose``: the first ``times`` calls it matches are applied and answered ``connection_loss``.
        ``record``: every call the backend makes, with the time it made it. ``between``: a proxy actor
        made from the session's ref, between backend and session.
        """
        session = self.harness.spawn(self.session)
        self.sessions.append(session)
        lost: list[ZkCall] = []
        if between is not None:
            direct = session
            session = self.harness.spawn(lambda: between(direct))
        if record is not None:
            calls, direct = record, session
            session = self.harness.spawn(lambda: Recorder(direct, calls))
        if lose is not None:
            matches = lose
            session = self.harness.spawn(lambda: LoseReply(session, lost, matches, times))
        instances = self.instances

        def make() -> ZkTxBackend:
            backend = ZkTxBackend(session, root=self.root, body_cache_bytes=body_cache_bytes)
            instances.append(backend)
            return backend

        return self.harness.spawn(make), lost


@pytest.fixture(params=["simulation", "real"])
async def zk_store(request: pytest.FixtureRequest) -> AsyncIterator[ZkStore]:
    """``ZkTxBackend`` on the simulated ensemble, or on trio with a real server."""
    root = f"tx-test-{next(_roots)}-{request.node.name.replace('[', '-').replace(']', '')}"
    if request.param == "simulation":
        async for harness in make_harness("simulation"):
            assert isinstance(harness, SimulationHarness)
            ensemble = SimZooKeeperEnsemble(harness.sim, ZkFaults())
            zk = ZkStore(harness, ensemble.session(), root, ensemble)
            zk.store, _ = zk.spawn_backend()
            yield zk
    else:
        hosts = request.getfixturevalue("zookeeper")
        async for harness in make_harness("trio"):
            zk = ZkStore(harness, lambda: KazooSession(hosts), root, None, hosts)
            zk.store, _ = zk.spawn_backend()
            yield zk


async def children(zk: ZkStore, path: str) -> tuple[str, ...]:
    """The children of ``path``, read on a session of the test's own."""
    raw = zk.harness.spawn(zk.session)
    seen: list[object] = []
    inbox = zk.harness.spawn(lambda: Inbox(seen))
    raw.tell(ZkCall(0, inbox, ZkGetChildren(path)))
    await zk.harness.wait_until(lambda: bool(seen), 15.0)
    reply = seen[0]
    assert isinstance(reply, ZkReply) and reply.error is None, reply
    zk.harness.system.stop(raw)
    return cast("tuple[str, ...]", reply.value)


async def no_commit_marker(zk_store: ZkStore) -> bool:
    """Every commit marker is deleted (in a batch, or with its session)."""
    return await children(zk_store, f"/{zk_store.root}-commits") == ()


async def bodies_of(zk: ZkStore, q: Any, queue: str) -> list[bytes]:
    """Everything a fresh transaction can take from ``queue`` now (then given back, not consumed)."""
    taker = await handle(zk.harness, zk.store)
    tx = taker.new_transaction()
    got = []
    while (item := await tx.try_take(queue)) is not None:
        got.append(item.body)
    request = tx.unit.rollback_request(failed=False, handed_over=False)
    assert request is not None
    tx.unit.rolled_back(await zk.harness.ask(zk.store, request))
    taker.close()
    await zk.harness.quiet()
    return sorted(got)


async def test_a_returned_commit_has_removed_its_takes_and_created_its_puts_across_queues(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1", b"2")
    tx = q.new_transaction()
    item = await tx.try_take("in")
    assert item is not None and item.takes == 1
    tx.put("out", b"hello")
    assert await bodies_of(zk_store, q, "out") == [], "a put is in memory only until commit"
    others = await bodies_of(zk_store, q, "in")
    assert len(others) == 1 and item.body not in others, "a taken item is locked, not offered"
    await tx.commit()
    assert tx.state is TxState.COMMITTED
    assert await bodies_of(zk_store, q, "in") == others
    assert await bodies_of(zk_store, q, "out") == [b"hello"]
    assert (await zk_store.harness.ask(zk_store.store, GetTxStats("in"))).locked == 0


async def test_rollback_leaves_no_lock_and_no_put_and_the_item_is_offered_again(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")
    tx = q.new_transaction()
    assert await tx.try_take("in") is not None
    tx.put("out", b"never")
    await tx.rollback()
    await tx.rollback()  # always answers, even twice
    assert tx.state is TxState.ROLLED_BACK
    assert await bodies_of(zk_store, q, "out") == []
    again = q.new_transaction()
    item = await again.try_take("in")
    assert item is not None and (item.body, item.takes) == (b"1", 2)
    await again.commit()


async def test_an_item_is_locked_by_one_transaction_across_backends(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"only")
    other_store, _ = zk_store.spawn_backend()
    other = await declared(zk_store.harness, other_store, ("in", RETRY))
    tx = q.new_transaction()
    assert await tx.try_take("in") is not None
    rival = other.new_transaction()
    assert await rival.try_take("in") is None, "the lock node exists: the other backend may not take it"
    await tx.commit()
    assert await rival.try_take("in") is None
    await rival.rollback()


async def test_a_client_that_stops_releases_its_locks(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"1")
    gone = await handle(zk_store.harness, zk_store.store)
    assert await gone.new_transaction().try_take("in") is not None
    gone.close()  # its session actor stops without a commit or rollback
    tx = q.new_transaction()
    item = await tx.take("in", 5.0)
    assert item is not None and item.takes == 2, "the lock was released and the take counted"
    await tx.commit()


async def test_consume_times_counts_takes_in_meta_and_dead_letters_after_the_last(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", ConsumeTimes(2)), ("once", ConsumeOnce()))
    await produce(q, "in", b"twice")
    await produce(q, "once", b"one")
    for takes in (1, 2):
        tx = q.new_transaction()
        item = await tx.try_take("in")
        assert item is not None and item.takes == takes
        await tx.rollback()
    tx = q.new_transaction()
    assert await tx.try_take("in") is None, "taken twice under ConsumeTimes(2): dead-lettered"
    await tx.rollback()
    letters = (await zk_store.harness.ask(zk_store.store, ReadDeadLetters("in"))).items
    assert [(letter.body, letter.takes) for letter in letters] == [(b"twice", 2)]
    tx = q.new_transaction()
    assert await tx.try_take("once") is not None
    await tx.rollback()
    letters = (await zk_store.harness.ask(zk_store.store, ReadDeadLetters("once"))).items
    assert [letter.body for letter in letters] == [b"one"]


async def test_a_failed_multi_aborts_naming_why_and_changes_nothing(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")
    tx = q.new_transaction()
    item = await tx.try_take("in")
    assert item is not None
    tx.put("out", b"lost")
    raw = zk_store.harness.spawn(zk_store.session)
    seen: list[object] = []
    inbox = zk_store.harness.spawn(lambda: Inbox(seen))
    path = f"/{zk_store.root}/in/items/item-{item.key.number:010d}"
    raw.tell(ZkCall(0, inbox, ZkDelete(path)))  # someone else removes the taken item behind the lock
    await zk_store.harness.wait_until(lambda: any(isinstance(m, ZkReply) for m in seen), 15.0)
    assert [m for m in seen if isinstance(m, ZkReply)] == [ZkReply(0, None, None)]
    with pytest.raises(TransactionError, match="no_node"):
        await tx.commit()
    assert tx.state is TxState.ROLLED_BACK
    assert await bodies_of(zk_store, q, "out") == []


@pytest.mark.parametrize("taken_before", [False, True], ids=["fresh item", "item taken before"])
async def test_a_lock_create_applied_but_lost_to_connection_loss_is_recovered_by_its_uuid(
    zk_store: ZkStore, taken_before: bool,
) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"1")
    if taken_before:  # the item has meta now: its next take locks alone, then reads
        first = q.new_transaction()
        assert await first.try_take("in") is not None
        await first.rollback()
    store, lost = zk_store.spawn_backend(lose=is_lock_create_alone if taken_before else is_lock_create)
    q = await declared(zk_store.harness, store, ("in", RETRY))
    tx = q.new_transaction()
    item = await tx.try_take("in")
    assert len(lost) == 1, "the lock create's reply was lost"
    assert item is not None and item.body == b"1", "the uuid in lock-N says the lock is ours"
    assert item.takes == (2 if taken_before else 1), "the take is counted once"
    await tx.commit()
    await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    assert await bodies_of(zk_store, q, "in") == []


@pytest.mark.parametrize("marker_reads_lost", [0, 1])
async def test_a_commit_applied_but_lost_to_connection_loss_is_answered_committed_by_its_marker(
    zk_store: ZkStore, marker_reads_lost: int,
) -> None:
    store, lost = zk_store.spawn_backend(
        lose=lambda op: is_commit_with_puts(op) or isinstance(op, ZkExists), times=1 + marker_reads_lost)
    q = await declared(zk_store.harness, store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")  # its multi is the first with a put: applied, answered connection_loss
    assert len(lost) == 1 + marker_reads_lost
    tx = q.new_transaction()
    item = await tx.try_take("in")
    assert item is not None and item.body == b"1", "the lost commit did create the item"
    tx.put("out", b"2")
    await tx.commit()
    await declared(zk_store.harness, zk_store.store, ("in", RETRY), ("out", RETRY))
    assert (await bodies_of(zk_store, q, "in"), await bodies_of(zk_store, q, "out")) == ([], [b"2"])
    await until(zk_store.harness, lambda: no_commit_marker(zk_store), 5)  # the recovered commit's, in a batch


async def test_a_commit_lost_before_it_was_applied_aborts_and_its_item_is_offered_again(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")
    store, _ = zk_store.spawn_backend(between=LoseCommitRequest)
    mover = await handle(zk_store.harness, store)
    tx = mover.new_transaction()
    assert await tx.try_take("in") is not None
    tx.put("out", b"never")
    with pytest.raises(TransactionError, match="lost before the commit's multi was applied"):
        await tx.commit()  # no marker, and our lock still there: read on our session, so not applied
    assert await bodies_of(zk_store, q, "out") == []
    again = mover.new_transaction()
    item = await again.take("in", 10.0)
    assert item is not None and item.takes == 2
    await again.commit()


async def test_a_commit_marker_goes_with_its_session_when_its_process_dies_before_deleting_it(
        zk_store: ZkStore) -> None:
    store, _ = zk_store.spawn_backend(between=DropMarkerDeletes)
    q = await declared(zk_store.harness, store, ("in", RETRY))
    await produce(q, "in", b"1")
    markers = await children(zk_store, f"/{zk_store.root}-commits")
    assert len(markers) == 1, "the marker's delete never went"
    zk_store.harness.system.stop(zk_store.sessions[-1])  # the process dies: its session ends
    await until(zk_store.harness, lambda: no_commit_marker(zk_store), 15)  # ephemeral: none outlives its writer


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_a_commit_whose_reply_and_marker_an_expiry_took_is_never_answered_aborted(zk_store: ZkStore) -> None:
    """The multi applied, its reply lost, the session expired before the marker was read: the marker is gone
    with the session, so its absence proves nothing; the items are gone too: the outcome stays unknown."""
    ensemble = zk_store.ensemble
    assert ensemble is not None
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")

    def expire() -> None:
        backend = zk_store.instances[-1]
        assert backend.session_id is not None
        ensemble.expire(backend.session_id)

    store, lost = zk_store.spawn_backend(between=lambda session: ExpireBeforeMarkerRead(session, expire),
                                         lose=is_commit_with_puts)
    mover = await handle(zk_store.harness, store)
    tx = mover.new_transaction()
    assert await tx.try_take("in") is not None
    tx.put("out", b"moved")
    with pytest.raises(AskTimeout):
        await tx.commit()
    assert len(lost) == 1
    assert (await bodies_of(zk_store, q, "in"), await bodies_of(zk_store, q, "out")) == ([], [b"moved"])


async def test_an_expired_session_aborts_its_transactions_and_the_backend_serves_on_the_next(
        zk_store: ZkStore) -> None:
    """ZooKeeper removes every lock of an expired session at once; kazoo (and the simulated session) opens a
    new session: the backend's transactions of the old one abort naming the expiry, new ones are served."""
    harness = zk_store.harness
    with contextlib.ExitStack() as stack:
        if zk_store.ensemble is None:  # a real expiry: the client cut off from a running server past its timeout
            proxy = stack.enter_context(PartitionProxy(zk_store.hosts))
            zk_store.session = lambda: KazooSession(proxy.address, timeout=2.0)
        store, _ = zk_store.spawn_backend()
        backend = zk_store.instances[-1]
        q = await declared(harness, store, ("in", RETRY), ("out", RETRY))
        await declared(harness, zk_store.store, ("in", RETRY), ("out", RETRY))
        await produce(q, "in", b"1")
        tx = q.new_transaction()
        assert await tx.try_take("in") is not None
        tx.put("out", b"never")
        old = backend.session_id
        assert old is not None
        if zk_store.ensemble is not None:
            zk_store.ensemble.expire(old)
        else:
            proxy.cut()

            async def lock_gone() -> bool:  # seen by another backend: the server expired the session
                stats = await harness.ask(zk_store.store, GetTxStats("in"))
                return bool(stats.locked == 0)

            await until(harness, lock_gone, 30)
            proxy.heal()
        await harness.wait_until(lambda: backend.session_id != old and not backend.expired, 30)
        with pytest.raises(TransactionError, match="session expired"):
            await tx.commit()
        again = q.new_transaction()
        item = await again.take("in", 10.0)
        assert item is not None and (item.body, item.takes) == (b"1", 2), "the lock went; the meta kept the take"
        again.put("out", b"served")
        await again.commit()
        assert await bodies_of(zk_store, q, "out") == [b"served"]
        assert await bodies_of(zk_store, q, "in") == []


async def test_queue_settings_live_in_zookeeper_a_consumer_needs_no_declare_and_a_clash_is_refused(
        zk_store: ZkStore) -> None:
    harness = zk_store.harness
    q = await declared(harness, zk_store.store, ("in", ConsumeTimes(2)), ("out", RETRY))
    consumer_store, _ = zk_store.spawn_backend()
    consumer = await handle(harness, consumer_store)  # declares nothing: reads each queue's settings
    await produce(q, "in", b"1")
    for takes in (1, 2):
        tx = consumer.new_transaction()
        item = await tx.try_take("in")
        assert item is not None and item.takes == takes
        tx.put("out", b"echo")
        await tx.rollback()
    tx = consumer.new_transaction()
    assert await tx.try_take("in") is None, "ConsumeTimes(2), read from ZooKeeper: dead-lettered after two"
    tx.put("out", b"put by a process that never declared")
    await tx.commit()
    letters = (await harness.ask(consumer_store, ReadDeadLetters("in"))).items
    assert [(letter.body, letter.takes) for letter in letters] == [(b"1", 2)]
    assert await bodies_of(zk_store, q, "out") == [b"put by a process that never declared"]

    rival_store, _ = zk_store.spawn_backend()
    rival = await handle(harness, rival_store)
    with pytest.raises(ConveyorError, match=r"'in' is declared in ZooKeeper .* with .*ConsumeTimes\(times=2\).*"
                                               r"this declare asks .*ConsumeOnce"):
        await rival.declare("in", ConsumeOnce())
    await rival.declare("in", ConsumeTimes(2))  # the same settings: idempotent
    with pytest.raises(TransactionError, match="unknown queue 'nowhere'"):
        await rival.new_transaction().try_take("nowhere")
    tx = rival.new_transaction()
    tx.put("nowhere", b"x")
    with pytest.raises(TransactionError, match="unknown queue 'nowhere'"):
        await tx.commit()


@given(st.builds(
    TxQueueSettings, st.just("q"),
    st.one_of(st.builds(ConsumeOnce), st.builds(ConsumeTimes, st.integers(1, 10**6)),
              st.builds(AtLeastOnce, st.one_of(st.none(), st.integers(1, 10**6)))),
    st.one_of(st.none(), st.builds(lambda a, b: RedeliveryBackoff(min(a, b), max(a, b)),
                                   st.floats(0, 1e6), st.floats(0, 1e6)))))
def test_queue_settings_read_back_as_written(settings: TxQueueSettings) -> None:
    assert settings_from_bytes("q", settings_to_bytes(settings)) == settings


def test_unreadable_queue_settings_say_which_queue() -> None:
    with pytest.raises(ValueError, match="the settings of queue 'q' in ZooKeeper are not readable"):
        settings_from_bytes("q", b'{"policy": {"kind": "Sometimes"}, "backoff": null}')


def listings(calls: list[tuple[float, object]], folder: str, since: float = 0.0) -> int:
    return sum(1 for at, op in calls if at >= since and isinstance(op, ZkGetChildren) and op.path.endswith(folder))


async def test_a_waiting_take_watches_the_queue_instead_of_polling_and_wakes_when_an_item_comes(
        zk_store: ZkStore) -> None:
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    await declared(harness, store, ("in", RETRY))
    q = await declared(harness, zk_store.store, ("in", RETRY))
    answers: list[tuple[float, object]] = []
    harness.spawn(lambda: Taker(store, "in", 20.0, answers))
    await harness.elapse(3.0)
    assert answers == []
    assert 1 <= listings(calls, "/in/items") <= 5, "a re-list per second at most, not a poll every 50 ms"
    put_at = harness.system.now()
    await produce(q, "in", b"came")
    await harness.wait_until(lambda: bool(answers), 15)
    taken_at, answer = answers[0]
    assert isinstance(answer, Taken) and answer.item.body == b"came"
    if zk_store.ensemble is not None:  # virtual time: the watch woke it, not the next re-list (1 s)
        assert taken_at - put_at < 0.5


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)  # counts calls against virtual time
async def test_a_waiting_take_wakes_when_a_lock_is_released_and_when_a_backoff_ends(zk_store: ZkStore) -> None:
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    later = RedeliveryBackoff(4.5, 4.5)  # ends between two re-lists (1 s apart)
    for backend in (store, zk_store.store):
        await declared(harness, backend, ("soon", RETRY))
        q = await declared(harness, backend, ("later", RETRY), backoff=later)
    await produce(q, "soon", b"1")
    await produce(q, "later", b"2")
    holder = q.new_transaction()
    assert await holder.try_take("soon") is not None
    assert await holder.try_take("later") is not None
    answers: dict[str, list[tuple[float, object]]] = {"soon": [], "later": []}
    for queue, seen in answers.items():
        harness.spawn(functools.partial(Taker, store, queue, 20.0, seen))
    await harness.elapse(2.0)
    assert answers == {"soon": [], "later": []}
    await holder.rollback()  # "soon" is offered again at once (its lock's delete fires the watch), "later" in 4.5 s
    rolled_back_at = harness.system.now()
    await harness.wait_until(lambda: bool(answers["soon"] and answers["later"]), 15)
    (soon_at, soon), (later_at, later_item) = answers["soon"][0], answers["later"][0]
    assert isinstance(soon, Taken) and isinstance(later_item, Taken)
    assert soon_at - rolled_back_at < 0.5, "woken by the watch on locks/, not by the next re-list"
    assert 4.5 <= later_at - rolled_back_at < 4.9, "served when the backoff ends"
    assert listings(calls, "/later/items", since=rolled_back_at) <= 10, "a re-list a second, not a poll (90)"


async def move_in_to_out(
    harness: SimulationHarness, q: AsyncTxQueue, rounds: int = 60
) -> tuple[list[bytes], list[bytes]]:
    """Up to ``rounds`` transactions each moving one item of ``in`` to ``out``: the bodies whose commit returned,
    and those whose commit was never answered (an expiry hid its outcome)."""
    consumed: list[bytes] = []
    unanswered: list[bytes] = []
    for _ in range(rounds):
        tx = q.new_transaction()
        try:
            item = await tx.try_take("in")
        except TransactionError:
            await tx.rollback()
            continue
        if item is None:
            await tx.rollback()
            await harness.elapse(0.5)
            continue
        tx.put("out", item.body)
        try:
            await tx.commit()
        except TransactionError:
            continue
        except AskTimeout:
            unanswered.append(item.body)
            continue
        consumed.append(item.body)
    return consumed, unanswered


@pytest.mark.parametrize("seed", range(12))
async def test_under_lost_connections_and_slow_requests_every_item_is_consumed_exactly_once(seed: int) -> None:
    """Faulty simulated sessions (lost connections before or after apply, slow requests): every item
    put by a returned commit is consumed by exactly one returned commit, and none is invented."""
    async for harness in make_harness("simulation", seed=seed):
        assert isinstance(harness, SimulationHarness)
        faults = ZkFaults(connection_loss=0.15, losses=6, slow=0.3, slow_s=0.2, reconnect_s=0.3)
        ensemble = SimZooKeeperEnsemble(harness.sim, faults)
        zk = ZkStore(harness, ensemble.session(), f"faults-{seed}", ensemble)
        zk.store, _ = zk.spawn_backend()
        q = await declared(harness, zk.store, ("in", RETRY), ("out", RETRY))
        produced: list[bytes] = []
        for n in range(6):
            try:
                await produce(q, "in", b"%d" % n)
            except TransactionError:
                continue  # aborted: nothing was created
            produced.append(b"%d" % n)
        consumed, unanswered = await move_in_to_out(harness, q)
        assert unanswered == [], "without expiries every commit is answered"
        ensemble.end_faults()
        await harness.elapse(2.0)
        assert sorted(consumed) == sorted(produced), "each produced item committed away exactly once"
        assert await bodies_of(zk, q, "out") == sorted(produced)


@pytest.mark.parametrize("seed", range(10))
async def test_under_lost_connections_and_expiries_no_item_is_lost_doubled_or_invented(seed: int) -> None:
    """Faulty simulated sessions that also expire (half the lost connections outlast the timeout): the
    backend goes on with new sessions; a commit whose outcome an expiry hid may stay unanswered (the ask
    times out), but no item is committed away twice, none is lost, none invented."""
    async for harness in make_harness("simulation", seed=seed):
        assert isinstance(harness, SimulationHarness)
        faults = ZkFaults(connection_loss=0.15, losses=6, slow=0.3, slow_s=0.2, reconnect_s=0.3, expiry=0.5,
                          session_timeout_s=1.0)
        ensemble = SimZooKeeperEnsemble(harness.sim, faults)
        zk = ZkStore(harness, ensemble.session(), f"expiries-{seed}", ensemble)
        zk.store, _ = zk.spawn_backend()
        q = await declared(harness, zk.store, ("in", RETRY), ("out", RETRY))
        produced: list[bytes] = []
        maybe_produced: list[bytes] = []
        for n in range(6):
            body = b"%d" % n
            try:
                await produce(q, "in", body)
            except TransactionError:
                continue  # aborted: nothing was created
            except AskTimeout:
                maybe_produced.append(body)  # the outcome an expiry hid
                continue
            produced.append(body)
        consumed, maybe_consumed = await move_in_to_out(harness, q)
        ensemble.end_faults()
        await harness.elapse(2.0)
        left = await bodies_of(zk, q, "in")
        out = await bodies_of(zk, q, "out")
        assert len(set(consumed)) == len(consumed), "no item committed away twice"
        assert set(consumed) <= set(out) <= set(consumed) | set(maybe_consumed), "out holds what was committed"
        assert sorted(out) == sorted(set(out)), "each item moved once"
        assert set(produced) <= set(out) | set(left), "nothing produced is lost"
        assert set(out) | set(left) <= set(produced) | set(maybe_produced), "nothing invented"


def marker_deletes(calls: list[tuple[float, object]], start: int = 0) -> list[int]:
    """How many commit markers each delete call (alone or a multi) removed, in order."""
    sizes = []
    for _, operation in calls[start:]:
        writes = operation.operations if isinstance(operation, ZkMulti) else (operation,)
        deleted = sum(1 for write in writes if isinstance(write, ZkDelete) and "-commits/" in write.path)
        if deleted:
            sizes.append(deleted)
    return sizes


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)  # the batch's timer runs in virtual time
async def test_answered_commits_markers_are_deleted_in_one_multi_and_an_expired_sessions_are_left_to_it(
        zk_store: ZkStore) -> None:
    harness, ensemble = zk_store.harness, zk_store.ensemble
    assert ensemble is not None
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    backend = zk_store.instances[-1]
    q = await declared(harness, store, ("in", RETRY))
    for body in (b"1", b"2", b"3"):
        await produce(q, "in", body)
    await until(harness, lambda: no_commit_marker(zk_store), 5)
    assert marker_deletes(calls) == [3], "three answered commits, one delete"

    await produce(q, "in", b"4")
    start, old = len(calls), backend.session_id
    assert old is not None
    ensemble.expire(old)  # before the batch's second: the marker goes with the session
    await harness.wait_until(lambda: backend.session_id != old and not backend.expired, 30)
    await harness.elapse(2.0)
    assert marker_deletes(calls, start) == [], "no delete sent for an expired session's marker"
    assert await no_commit_marker(zk_store)


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)  # the cached listing stays young in virtual time
async def test_a_take_whose_cached_listing_is_stale_lists_again_before_answering_nothing(zk_store: ZkStore) -> None:
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    mine = await declared(harness, store, ("in", RETRY))
    other = await declared(harness, zk_store.store, ("in", RETRY))
    await produce(other, "in", b"old")
    first = mine.new_transaction()
    assert await first.try_take("in") is not None  # its listing, naming only "old", is cached
    await first.rollback()  # answered at once; its lock's delete may still be on its way
    theirs = other.new_transaction()
    assert await theirs.take("in", 5.0) is not None
    theirs.put("in", b"new")
    await theirs.commit()  # "old" gone, "new" put: neither seen by our cached listing
    start = len(calls)
    item = await mine.new_transaction().try_take("in")
    assert item is not None and item.body == b"new"
    tried = [op for _, op in calls[start:] if isinstance(op, (ZkMulti, ZkGetChildren))]
    assert isinstance(tried[0], ZkMulti) and "item-" in tried[0].operations[0].path, "first from the cache"
    assert isinstance(tried[1], ZkGetChildren), "then a real listing, before answering"


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_the_cached_listing_is_dropped_when_a_watch_on_its_queue_fires_and_when_the_session_expires(
        zk_store: ZkStore) -> None:
    harness, ensemble = zk_store.harness, zk_store.ensemble
    assert ensemble is not None
    store, _ = zk_store.spawn_backend()
    backend = zk_store.instances[-1]
    await declared(harness, store, ("in", RETRY))
    other = await declared(harness, zk_store.store, ("in", RETRY))
    answers: list[tuple[float, object]] = []
    harness.spawn(lambda: Taker(store, "in", 20.0, answers))  # parks, its listing watched
    await harness.elapse(0.05)
    await produce(other, "in", b"x")
    await harness.wait_until(lambda: bool(answers), 15)  # woken, it listed again (a new watch) and took x
    assert "in" in backend.listings
    await produce(other, "in", b"y")  # the new watch fires with no take parked
    await harness.wait_until(lambda: "in" not in backend.listings, 5)
    await mine_listing(harness, store)
    assert "in" in backend.listings
    old = backend.session_id
    assert old is not None
    ensemble.expire(old)
    await harness.wait_until(lambda: backend.session_id != old and not backend.expired, 30)
    assert backend.listings == {}


async def mine_listing(harness: Harness, store: ActorRef) -> None:
    """A take that lists ``in`` (and leaves nothing held)."""
    q = await handle(harness, store)
    tx = q.new_transaction()
    await tx.try_take("in")
    await tx.rollback()


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_a_fresh_take_answered_after_its_session_expired_is_not_handed_over(zk_store: ZkStore) -> None:
    """The one multi taking a fresh item applied, then the session expired before its reply came: the lock
    went with the session (another client may hold it now), so nothing is taken; the take stays counted."""
    ensemble = zk_store.ensemble
    assert ensemble is not None
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"1")

    def expire() -> None:
        session_id = zk_store.instances[-1].session_id
        assert session_id is not None
        ensemble.expire(session_id)

    store, _ = zk_store.spawn_backend(between=lambda session: ExpireBeforeFreshTakeReply(session, expire))
    late = await handle(zk_store.harness, store)
    assert await late.new_transaction().try_take("in") is None
    item = await q.new_transaction().try_take("in")
    assert item is not None and item.body == b"1" and item.takes == 2, "free again, the lost take counted"


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)  # no latency: the listing stays young
async def test_takes_served_at_once_reuse_the_listing_and_set_no_watch(zk_store: ZkStore) -> None:
    """A watch set at every take would fire at every commit of ours, dropping the cached listing: each
    take would list ``items/`` and ``locks/`` again, as before the cache."""
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    q = await declared(harness, store, ("in", RETRY), ("out", RETRY))
    await produce(await handle(harness, zk_store.store), "in", *(b"%d" % n for n in range(10)))  # put by another
    for _ in range(10):
        tx = q.new_transaction()
        item = await tx.take("in", 5.0)
        assert item is not None
        tx.put("out", item.body)
        await tx.commit()
    assert (listings(calls, "/in/items"), listings(calls, "/in/locks")) == (1, 0)
    reads = [op for _, op in calls if isinstance(op, ZkGetData) and ("/meta/" in op.path or "/items/" in op.path)]
    assert len(reads) == 10, "the item's read only, pipelined with the take's multi; no meta read"


# --- take ahead: a commit of a take from an AtLeastOnce queue takes the next item in its multi ------------------


class DelayItemReads(Actor):
    """Forwards to the session; the reply of every read of an item comes ``delay_s`` late."""

    def __init__(self, session: ActorRef, delay_s: float) -> None:
        self.session = session
        self.delay_s = delay_s
        self.waiting: dict[int, ActorRef] = {}

    def receive(self, message: Any) -> None:
        operation = message.operation if isinstance(message, ZkCall) else None
        if isinstance(operation, ZkGetData) and "/items/" in operation.path:
            self.waiting[message.request_id] = message.reply_to
            message = attrs.evolve(message, reply_to=self.ctx.self_ref)
        elif isinstance(message, ZkReply) and message.request_id in self.waiting:
            self.ctx.schedule(self.delay_s, _Late(self.waiting.pop(message.request_id), message))
            return
        elif isinstance(message, _Late):
            self.ctx.send(message.to, message.reply)
            return
        self.ctx.send(self.session, message)


@attrs.frozen
class _Late:
    to: ActorRef
    reply: ZkReply


def calls_of(calls: list[tuple[float, object]], since: int) -> list[object]:
    """The operations recorded from index ``since`` on, less the deletes of spent commit markers."""
    return [op for _, op in calls[since:]
            if not (isinstance(op, ZkMulti) and all("-commits/" in write.path for write in op.operations))]


async def take_and_commit(q: AsyncTxQueue, queue: str = "in") -> bytes:
    tx = q.new_transaction()
    item = await tx.take(queue, 5.0)
    assert item is not None
    await tx.commit()
    return item.body


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_a_commit_takes_the_next_item_ahead_in_its_multi_and_the_next_take_costs_no_call(
        zk_store: ZkStore) -> None:
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    q = await declared(harness, store, ("in", RETRY))
    await produce(q, "in", b"1", b"2", b"3")
    first = await take_and_commit(q)
    commit = [op for op in calls_of(calls, 0) if is_commit_with_puts(op) or (
        isinstance(op, ZkMulti) and any(isinstance(w, ZkDelete) and "/items/" in w.path for w in op.operations))][-1]
    assert isinstance(commit, ZkMulti) and is_lock_create(commit), "the next item's lock rides in the commit's multi"
    before = len(calls)
    tx = q.new_transaction()
    item = await tx.take("in", 5.0)
    assert item is not None and item.body != first and item.takes == 1
    assert calls_of(calls, before) == [], "answered from the item taken ahead: no call"
    assert (await harness.ask(store, GetTxStats("in"))).locked == 1, "the transaction's lock; none taken ahead counted"
    await tx.rollback()
    assert (await harness.ask(store, GetTxStats("in"))).locked == 0


async def test_an_item_taken_ahead_that_no_take_asks_for_is_given_back_fresh(zk_store: ZkStore) -> None:
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"1", b"2")
    first = await take_and_commit(q)
    instance = zk_store.instances[-1]
    assert instance.ready.get("in") or instance.ahead.get("in"), "the commit took an item ahead"
    await until(zk_store.harness, lambda: no_children(zk_store, "locks", "meta"))
    other, _ = zk_store.spawn_backend()
    item = await (await handle(zk_store.harness, other)).new_transaction().try_take("in")
    assert item is not None and item.body != first and item.takes == 1, "fresh again: its take given back"


async def no_children(zk: ZkStore, *folders: str) -> bool:
    for folder in folders:
        if await children(zk, f"/{zk.root}/in/{folder}"):
            return False
    return True


async def test_stopping_the_backend_gives_back_its_items_taken_ahead(zk_store: ZkStore) -> None:
    store, _ = zk_store.spawn_backend()
    q = await declared(zk_store.harness, store, ("in", RETRY))
    await produce(q, "in", b"1", b"2", b"3")
    await take_and_commit(q)
    instance = zk_store.instances[-1]
    await zk_store.harness.wait_until(lambda: bool(instance.ready.get("in")), 5.0)
    assert not await no_children(zk_store, "locks"), "an item taken ahead is locked"
    zk_store.harness.system.stop(store)
    await until(zk_store.harness, lambda: no_children(zk_store, "locks", "meta"), timeout=AHEAD_HOLD_S * 5)


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_no_take_ahead_under_consume_times_a_count_unused_would_cost_a_delivery(zk_store: ZkStore) -> None:
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    q = await declared(harness, store, ("once", ConsumeOnce()), ("twice", ConsumeTimes(2)))
    for queue in ("once", "twice"):
        await produce(q, queue, b"1", b"2")
        before = len(calls)
        await take_and_commit(q, queue)
        commits = [op for op in calls_of(calls, before) if isinstance(op, ZkMulti)
                   and any(isinstance(write, ZkDelete) and "/items/" in write.path for write in op.operations)]
        assert len(commits) == 1 and not is_lock_create(commits[0]), "the commit's multi takes nothing ahead"


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_a_take_that_comes_while_the_take_ahead_runs_adopts_it(zk_store: ZkStore) -> None:
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls, between=lambda session: DelayItemReads(session, 0.05))
    q = await declared(harness, store, ("in", RETRY))
    await produce(await handle(harness, zk_store.store), "in", b"1", b"2", b"3")  # put by another: bodies read
    first = await take_and_commit(q)
    assert zk_store.instances[-1].ahead.get("in"), "the item taken ahead is still being read"
    before = len(calls)
    tx = q.new_transaction()
    item = await tx.take("in", 5.0)
    assert item is not None and item.body != first and item.takes == 1
    assert calls_of(calls, before) == [], "it waited for the take ahead instead of taking another item"
    await tx.commit()


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_an_expiry_drops_the_items_taken_ahead_and_leaves_their_take_counted(zk_store: ZkStore) -> None:
    ensemble = zk_store.ensemble
    assert ensemble is not None
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"1", b"2")
    first = await take_and_commit(q)
    instance = zk_store.instances[-1]
    assert instance.ready.get("in"), "an item is taken ahead"
    session_id = instance.session_id
    assert session_id is not None
    ensemble.expire(session_id)
    await until(zk_store.harness, lambda: no_children(zk_store, "locks"))
    await zk_store.harness.wait_until(lambda: instance.epoch == 1 and not instance.expired, 10.0)
    assert not instance.ready.get("in"), "its lock went with the session"
    item = await q.new_transaction().try_take("in")
    assert item is not None and item.body != first and item.takes == 2, "taken again; the lost take counted"


# --- bodies this backend put are handed over without a read ----------------------------------------------------


def item_reads(calls: list[tuple[float, object]], since: int = 0) -> int:
    return sum(1 for _, op in calls[since:] if isinstance(op, ZkGetData) and "/items/" in op.path)


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
@pytest.mark.parametrize(("cache_bytes", "reads"), [(BODIES_MAX_BYTES, 0), (2, 1), (0, 3)])
async def test_a_take_of_an_item_this_backend_put_reads_no_body_while_it_is_kept(
        zk_store: ZkStore, cache_bytes: int, reads: int) -> None:
    """Bodies of 1 byte: a cache of 2 bytes keeps the last two puts, one of 0 keeps none."""
    harness = zk_store.harness
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls, body_cache_bytes=cache_bytes)
    q = await declared(harness, store, ("in", ConsumeOnce()))
    await produce(q, "in", b"1", b"2", b"3")
    before = len(calls)
    tx = q.new_transaction()
    bodies = [item.body for item in [await tx.try_take("in") for _ in range(3)] if item is not None]
    assert sorted(bodies) == [b"1", b"2", b"3"], "each item with the body it was put with"
    assert item_reads(calls, before) == reads
    await tx.commit()
    other, _ = zk_store.spawn_backend()
    assert await (await handle(harness, other)).new_transaction().try_take("in") is None, "all three consumed"


# --- a lock's delete is guarded by its session's guard node -------------------------------------------------------


def lock_deletes(calls: list[tuple[float, object]]) -> list[ZkMulti]:
    return [op for _, op in calls if isinstance(op, ZkMulti) and len(op.operations) == 2
            and isinstance(op.operations[1], ZkDelete) and "/locks/" in op.operations[1].path]


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)
async def test_a_lock_given_up_is_deleted_only_while_its_session_lives(zk_store: ZkStore) -> None:
    """A session actor sends a call on the session it has now: a delete meant for an expired session's lock,
    sent before the backend heard of the expiry, could delete another client's lock-N. So it goes in a multi
    behind a check of the session's guard node, which goes with the session."""
    harness, ensemble = zk_store.harness, zk_store.ensemble
    assert ensemble is not None
    q = await declared(harness, zk_store.store, ("in", RETRY), backoff=RedeliveryBackoff(30.0, 30.0))
    await produce(q, "in", b"1")
    tx = q.new_transaction()
    assert await tx.try_take("in") is not None
    await tx.rollback()  # failed: in its backoff for 30 s, meta-N says so
    calls: list[tuple[float, object]] = []
    store, _ = zk_store.spawn_backend(record=calls)
    assert await (await handle(harness, store)).new_transaction().try_take("in") is None, "locked, read, given up"
    backend = zk_store.instances[-1]
    assert backend.session_id is not None
    guard = f"/{zk_store.root}-sessions/session-{backend.session_id:x}"
    await harness.quiet()
    [delete] = lock_deletes(calls)
    assert delete.operations[0] == ZkCheck(guard, -1)
    assert await no_children(zk_store, "locks")

    # the guard goes with its session: a delete behind it then deletes nothing
    other, _ = zk_store.spawn_backend()
    taker = await handle(harness, other)
    await harness.elapse(31.0)
    held = taker.new_transaction()
    assert await held.try_take("in") is not None
    ensemble.expire(backend.session_id)
    await until(harness, lambda: guard_gone(zk_store, guard))
    seen: list[object] = []
    inbox = harness.spawn(lambda: Inbox(seen))
    raw = harness.spawn(zk_store.session)
    raw.tell(ZkCall(0, inbox, delete))
    await harness.wait_until(lambda: bool(seen), 5.0)
    assert isinstance(seen[0], ZkReply) and seen[0].error == "no_node"
    assert not await no_children(zk_store, "locks"), "the other client's lock-N is still there"
    await held.commit()


async def guard_gone(zk: ZkStore, guard: str) -> bool:
    return guard.rsplit("/", 1)[1] not in await children(zk, guard.rsplit("/", 1)[0])
