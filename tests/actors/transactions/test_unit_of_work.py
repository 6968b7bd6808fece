"""The unit of work, guarantee by guarantee as seed 004 states them, on both transaction backends.

Each guarantee test drives a store through ``AsyncTxQueue`` handles whose asks go through the
harness: the broker backend's ``TxStoreActor`` on trio, threads and the simulator, and the
ZooKeeper backend's ``ZkTxBackend`` on the simulated ensemble (``tx_store``), so one suite shows
one API over two backends. The durable store's tests are the broker's own; the last tests use the
blocking ``TxQueue`` on a ``ThreadSystem`` and the default ask of a ``TrioSystem``.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import attrs
import pytest
import trio

from conveyor.actors.transactions import (
    AtLeastOnce,
    ConsumeOnce,
    ConsumeTimes,
    ItemKey,
    RedeliveryBackoff,
    TransactionError,
    TxQueue,
    TxState,
    TxStoreActor,
    ZkTxBackend,
)
from conveyor.runtime import ActorRef, ThreadSystem, TrioSystem
from conveyor.simulation import SimZooKeeperEnsemble
from tests.actors.transactions.helpers import CrashNow, declared, handle, produce, spawn_store
from tests.conftest import Harness, SimulationHarness, make_harness

RETRY = AtLeastOnce()


@attrs.frozen
class StoreUnderTest:
    """A transaction backend on a harness: ``spawn()`` starts the store the test drives."""

    harness: Harness
    spawn: Callable[[], ActorRef]
    first_number: int
    """The number the first item of a queue gets (the broker counts from 1, ZooKeeper's sequence from 0)."""


def _zookeeper_store(harness: SimulationHarness) -> Callable[[], ActorRef]:
    """``ZkTxBackend`` on a simulated ensemble, strict FIFO (as the broker's first offered item)."""
    session = SimZooKeeperEnsemble(harness.sim).session()

    def spawn() -> ActorRef:
        zk = harness.spawn(session)
        return harness.spawn(lambda: ZkTxBackend(zk, root="tx", strict_fifo=True), name="tx")

    return spawn


@pytest.fixture(params=["broker-trio", "broker-threads", "broker-simulation", "zookeeper-simulation"])
async def tx_store(request: pytest.FixtureRequest) -> AsyncIterator[StoreUnderTest]:
    """The broker backend on each harness, and ``ZkTxBackend`` on the simulated ZooKeeper."""
    kind, harness_kind = request.param.split("-")
    async for harness in make_harness(harness_kind):
        if kind == "broker":
            yield StoreUnderTest(harness, functools.partial(spawn_store, harness), 1)
        else:
            assert isinstance(harness, SimulationHarness)
            yield StoreUnderTest(harness, _zookeeper_store(harness), 0)


async def bodies_of(backend: Harness, q: object, queue: str) -> list[bytes]:
    """Everything a fresh transaction can take from ``queue`` now (then rolled back as not consumed)."""
    taker = await handle(backend, q.store)  # type: ignore[attr-defined]
    tx = taker.new_transaction()
    got = []
    while (item := await tx.try_take(queue)) is not None:
        got.append(item.body)
    request = tx.unit.rollback_request(failed=False, handed_over=False)
    assert request is not None
    tx.unit.rolled_back(await backend.ask(q.store, request))  # type: ignore[attr-defined]
    taker.close()
    await backend.quiet()
    return got


async def test_a_returned_commit_has_removed_its_takes_and_created_its_puts_across_queues(
        tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", RETRY), ("out", RETRY), ("audit", RETRY))
    await produce(q, "in", b"1", b"2")
    tx = q.new_transaction()
    item = await tx.try_take("in")
    assert item is not None and (item.body, item.key, item.takes) == (b"1", ItemKey("in", tx_store.first_number), 1)
    tx.put("out", b"hello 1")
    tx.put("audit", b"took 1")
    assert await bodies_of(backend, q, "out") == [], "a put is in memory only until commit"
    assert await bodies_of(backend, q, "in") == [b"2"], "a taken item is locked, not removed"
    await tx.commit()
    assert tx.state is TxState.COMMITTED
    assert await bodies_of(backend, q, "in") == [b"2"]
    assert await bodies_of(backend, q, "out") == [b"hello 1"]
    assert await bodies_of(backend, q, "audit") == [b"took 1"]
    assert (await q.stats("in")).locked == 0


async def test_rollback_leaves_no_lock_and_no_put(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")
    tx = q.new_transaction()
    assert await tx.try_take("in") is not None
    tx.put("out", b"never")
    await tx.rollback()
    await tx.rollback()  # always succeeds, even twice
    assert tx.state is TxState.ROLLED_BACK
    assert (await q.stats("in")).locked == 0
    assert await bodies_of(backend, q, "out") == []
    assert await bodies_of(backend, q, "in") == [b"1"]


async def test_an_uncommitted_transaction_rolls_back_when_its_block_ends(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1", b"2")
    async with q.new_transaction() as tx:
        assert await tx.try_take("in") is not None
        tx.put("out", b"dropped")
    with pytest.raises(ValueError, match="listener bug"):
        async with q.new_transaction() as failing:
            assert await failing.try_take("in") is not None
            raise ValueError("listener bug")
    async with q.new_transaction() as done:
        assert await done.try_take("in") is not None
        await done.commit()
    assert (tx.state, failing.state, done.state) == (TxState.ROLLED_BACK, TxState.ROLLED_BACK, TxState.COMMITTED)
    assert (await q.stats("in")).locked == 0
    assert await bodies_of(backend, q, "in") == [b"2"]
    assert await bodies_of(backend, q, "out") == []


async def test_an_ended_transaction_refuses_more_work(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", RETRY))
    tx = q.new_transaction()
    await tx.commit()
    with pytest.raises(TransactionError, match="transaction 1 is committed; open a new one"):
        await tx.try_take("in")
    with pytest.raises(TransactionError, match="cannot put"):
        tx.put("in", b"x")
    with pytest.raises(TransactionError, match="unknown queue 'nope'; declared queues: in"):
        await q.new_transaction().try_take("nope")


async def test_a_put_to_an_unknown_queue_aborts_the_whole_commit(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1")
    tx = q.new_transaction()
    assert await tx.try_take("in") is not None
    tx.put("out", b"kept?")
    tx.put("typo", b"x")
    with pytest.raises(TransactionError, match="put to unknown queue 'typo'"):
        await tx.commit()
    assert tx.state is TxState.ROLLED_BACK
    assert await bodies_of(backend, q, "out") == []
    assert await bodies_of(backend, q, "in") == [b"1"]


async def test_a_session_that_ends_releases_all_its_locks_at_once(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("a", RETRY), ("b", RETRY))
    await produce(q, "a", b"a1")
    await produce(q, "b", b"b1")
    client = await handle(backend, store)
    first, second = client.new_transaction(), client.new_transaction()
    assert await first.try_take("a") is not None
    assert await second.try_take("b") is not None
    assert ((await q.stats("a")).locked, (await q.stats("b")).locked) == (1, 1)
    client.close()  # the client dies: its session ends
    await backend.quiet()
    assert ((await q.stats("a")).locked, (await q.stats("b")).locked) == (0, 0)
    with pytest.raises(TransactionError, match="not committed"):
        await first.commit()  # its locks are gone: the commit changes nothing
    assert await bodies_of(backend, q, "a") == [b"a1"]
    assert await bodies_of(backend, q, "b") == [b"b1"]
    with pytest.raises(TransactionError, match="handle is closed"):
        client.new_transaction()


async def test_consume_times_k_then_the_queues_own_dlq(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("twice", ConsumeTimes(2)), ("once", ConsumeOnce()))
    await produce(q, "twice", b"t")
    await produce(q, "once", b"o")
    for attempt in (1, 2):
        async with q.new_transaction() as tx:
            item = await tx.try_take("twice")
            assert item is not None and item.takes == attempt
    async with q.new_transaction() as tx:
        assert await tx.try_take("twice") is None
        assert await tx.try_take("once") is not None
    assert await bodies_of(backend, q, "once") == []
    assert [(d.body, d.takes) for d in await q.dead_letters("twice")] == [(b"t", 2)]
    assert [(d.body, d.takes, d.reason) for d in await q.dead_letters("once")] == [
        (b"o", 1, "taken 1 times (ConsumeOnce allows 1)")
    ]


async def test_at_least_once_offers_an_item_again_after_its_client_died(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("jobs", AtLeastOnce(max_rollbacks=1)))
    await produce(q, "jobs", b"j")
    for _ in range(3):  # a client dies holding it, three times: never dead-lettered
        client = await handle(backend, store)
        assert await client.new_transaction().try_take("jobs") is not None
        client.close()
        await backend.quiet()
    async with q.new_transaction() as tx:
        item = await tx.try_take("jobs")
        assert item is not None and item.takes == 4
        await tx.rollback()  # an explicit failure counts
    assert [d.rollbacks for d in await q.dead_letters("jobs")] == [1]


async def test_a_rolled_back_item_is_not_offered_again_before_its_backoff(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", ConsumeTimes(5)), backoff=RedeliveryBackoff(0.3, 1.0))
    await produce(q, "in", b"x")
    async with q.new_transaction() as tx:
        assert await tx.try_take("in") is not None
    released_at = backend.system.now()
    async with q.new_transaction() as tx:
        assert await tx.try_take("in") is None or backend.system.now() - released_at >= 0.3
        item = await tx.take("in", timeout=10.0)
        assert item is not None and item.takes == 2
        assert backend.system.now() - released_at >= 0.3, "offered before its backoff ended"
        await tx.commit()


async def test_take_waits_for_an_item_and_gives_up_after_its_timeout(tx_store: StoreUnderTest) -> None:
    backend, store = tx_store.harness, tx_store.spawn()
    q = await declared(backend, store, ("in", RETRY))
    async with q.new_transaction() as tx:
        asked_at = backend.system.now()
        assert await tx.take("in", timeout=0.2) is None
        assert backend.system.now() - asked_at >= 0.2
    assert (await q.stats("in")).locked == 0


@pytest.mark.parametrize("compact_after_events", [1024, 3], ids=["events", "snapshots"])
async def test_a_durable_store_keeps_commits_and_locks_across_a_crash(
    backend: Harness, compact_after_events: int
) -> None:
    store = spawn_store(backend, durable=True, compact_after_events=compact_after_events)
    q = await declared(backend, store, ("in", RETRY), ("out", RETRY))
    await produce(q, "in", b"1", b"2")
    held = q.new_transaction()
    assert (await held.try_take("in")) is not None
    held.put("out", b"from 1")
    store.tell(CrashNow())
    await backend.quiet()
    assert (await q.stats("in")).locked == 1, "the lock survived the restart"
    assert await bodies_of(backend, q, "in") == [b"2"]
    await held.commit()
    assert await bodies_of(backend, q, "out") == [b"from 1"]
    store.tell(CrashNow())
    await backend.quiet()
    assert await bodies_of(backend, q, "out") == [b"from 1"], "a returned commit survives a crash"
    assert await bodies_of(backend, q, "in") == [b"2"]


def test_the_blocking_face_on_threads() -> None:
    with ThreadSystem() as system:
        store = system.spawn(TxStoreActor)
        q = TxQueue(system, store)
        q.declare("in", AtLeastOnce())
        q.declare("out", AtLeastOnce())
        with q.new_transaction() as tx:
            tx.put("in", b"world")
            tx.commit()
        with q.new_transaction() as tx:
            item = tx.take("in", timeout=1.0)
            assert item is not None
            tx.put("out", b"Hello, " + item.body)
            tx.commit()
        with q.new_transaction() as tx:
            assert tx.try_take("in") is None
            out = tx.try_take("out")
            assert out is not None and out.body == b"Hello, world"
        assert q.stats("out").locked == 0
        q.close()


async def test_the_async_face_on_trio_with_its_own_ask() -> None:
    from conveyor.actors.transactions import AsyncTxQueue

    async with TrioSystem() as system:
        store = system.spawn(TxStoreActor)
        q = AsyncTxQueue(system, store)
        await q.declare("in", ConsumeOnce())
        async with q.new_transaction() as tx:
            tx.put("in", b"x")
            await tx.commit()
        async with q.new_transaction() as tx:
            item = await tx.take("in", timeout=1.0)
            assert item is not None and item.body == b"x"
            await tx.commit()
        with trio.fail_after(5):
            assert (await q.stats("in")).items == 0
        q.close()


@pytest.mark.parametrize("compact_after_events", [1024, 3], ids=["events", "snapshots"])
def test_a_durable_store_on_disk_outlives_the_process_and_its_dead_sessions(
    tmp_path: Path, compact_after_events: int
) -> None:
    from conveyor.actors.storage import DiskJournalStore
    from conveyor.actors.transactions import AsyncTxQueue

    def durable_store() -> TxStoreActor:
        return TxStoreActor(durable=True, compact_after_events=compact_after_events)

    async def first() -> None:
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
            q = AsyncTxQueue(system, system.spawn(durable_store, name="tx"))
            await q.declare("in", AtLeastOnce())
            await q.declare("out", AtLeastOnce())
            async with q.new_transaction() as tx:
                for body in (b"1", b"2", b"3"):
                    tx.put("in", body)
                await tx.commit()  # answered once synced
            async with q.new_transaction() as tx:
                assert await tx.try_take("in") is not None
                tx.put("out", b"from 1")
                await tx.commit()
            held = q.new_transaction()
            assert await held.try_take("in") is not None  # the process ends holding this lock

    async def second() -> tuple[list[bytes], list[bytes], int]:
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
            q = AsyncTxQueue(system, system.spawn(durable_store, name="tx"))
            await system.wait_quiet()  # the recovered store hears its sessions are gone
            locked = (await q.stats("in")).locked
            taken: dict[str, list[bytes]] = {"in": [], "out": []}
            async with q.new_transaction() as tx:
                for name, got in taken.items():
                    while (item := await tx.try_take(name)) is not None:
                        got.append(item.body)
            return taken["in"], taken["out"], locked

    trio.run(first)
    remaining, out, locked = trio.run(second)
    assert locked == 0, "a lock of a session of the ended process is released at recovery"
    assert remaining == [b"2", b"3"]
    assert out == [b"from 1"]
