"""The unit of work on ``ZkTxBackend``, guarantee by guarantee, on the simulated ZooKeeper and a real server.

Each test drives the backend through ``AsyncTxQueue`` handles (the same face the broker backend's
tests use); ``zk_store`` gives the backend on the ``Simulation`` with ``SimZooKeeperEnsemble``
(deterministic) and on trio with ``KazooSession`` and the ``zookeeper`` fixture's server. A
``LoseReply`` proxy between backend and session loses the reply of a call (a lock create, a
commit) after the server applied it, as a connection loss would.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import pytest

from conveyor.actors.transactions import (
    AtLeastOnce,
    ConsumeOnce,
    ConsumeTimes,
    GetTxStats,
    ReadDeadLetters,
    TransactionError,
    TxState,
    ZkTxBackend,
)
from conveyor.actors.zookeeper import KazooSession
from conveyor.runtime import Actor, ActorRef
from conveyor.runtime.lowlevel import ZkCall, ZkCreate, ZkDelete, ZkExists, ZkMulti, ZkReply
from conveyor.simulation import SimZooKeeperEnsemble, ZkFaults
from tests.actors.transactions.helpers import declared, handle, produce
from tests.conftest import Harness, SimulationHarness, make_harness

RETRY = AtLeastOnce()
_roots = itertools.count()


class Inbox(Actor):
    """Keeps what it is told in the test's list."""

    def __init__(self, seen: list[object]) -> None:
        self.seen = seen

    def receive(self, message: Any) -> None:
        self.seen.append(message)


def is_lock_create(operation: object) -> bool:
    """A lock's create: alone (an item taken before), or in the multi that takes a fresh item."""
    if isinstance(operation, ZkMulti):
        return any(is_lock_create(write) for write in operation.operations)
    return isinstance(operation, ZkCreate) and operation.ephemeral


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


@attrs.define
class ZkStore:
    """A backend under test: the harness, the backend's ref, how to make a session, the simulated ensemble."""

    harness: Harness
    session: Any
    root: str
    ensemble: SimZooKeeperEnsemble | None
    instances: list[ZkTxBackend] = attrs.field(factory=list)
    store: ActorRef = attrs.field(init=False)

    def spawn_backend(
        self, *, lose: Callable[[object], bool] | None = None, times: int = 1,
    ) -> tuple[ActorRef, list[ZkCall]]:
        """Another backend on a session of its own (another process, for ZooKeeper), same root.

        ``lose``: the first ``times`` calls it matches are applied and answered ``connection_loss``.
        """
        session = self.harness.spawn(self.session)
        lost: list[ZkCall] = []
        if lose is not None:
            matches = lose
            session = self.harness.spawn(lambda: LoseReply(session, lost, matches, times))
        instances = self.instances

        def make() -> ZkTxBackend:
            backend = ZkTxBackend(session, root=self.root)
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
            zk = ZkStore(harness, lambda: KazooSession(hosts), root, None)
            zk.store, _ = zk.spawn_backend()
            yield zk


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
    alone = lambda operation: isinstance(operation, ZkCreate) and operation.ephemeral  # noqa: E731
    store, lost = zk_store.spawn_backend(lose=alone if taken_before else is_lock_create)
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


@pytest.mark.parametrize("zk_store", ["simulation"], indirect=True)  # a real expiry needs a partition proxy
async def test_session_expiry_mid_transaction_aborts_it_and_its_take_counted(zk_store: ZkStore) -> None:
    assert zk_store.ensemble is not None
    q = await declared(zk_store.harness, zk_store.store, ("in", RETRY))
    await produce(q, "in", b"1")
    tx = q.new_transaction()
    assert await tx.try_take("in") is not None
    backend = zk_store.instances[0]
    assert backend.session_id is not None
    zk_store.ensemble.expire(backend.session_id)
    await zk_store.harness.quiet()
    with pytest.raises(TransactionError, match="expired"):
        await tx.commit()
    with pytest.raises(TransactionError, match="session expired"):  # the backend's session is gone: no more takes
        await q.new_transaction().try_take("in")
    other_store, _ = zk_store.spawn_backend()
    other = await declared(zk_store.harness, other_store, ("in", RETRY))
    again = other.new_transaction()
    item = await again.try_take("in")
    assert item is not None and item.takes == 2, "the lock went with the session; the meta kept the take"
    await again.commit()


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
        consumed: list[bytes] = []
        for _ in range(60):
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
            consumed.append(item.body)
        ensemble.end_faults()
        await harness.elapse(2.0)
        assert sorted(consumed) == sorted(produced), "each produced item committed away exactly once"
        assert await bodies_of(zk, q, "out") == sorted(produced)
