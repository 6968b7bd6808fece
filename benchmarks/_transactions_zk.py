"""The ZooKeeper rows of ``benchmarks/transactions.py``: take-1 / put-1 on a real server, beside raw kazoo.

One ``LocalZooKeeper`` with fsync on (a real server's setting) serves three measurements in turn:

- **raw kazoo**, synchronous, one transaction at a time: ``get_children`` of ``items/``, create the
  ephemeral ``lock-N``, then one ``client.transaction()`` deleting the item and its lock and creating
  a new item, its results checked (three round trips, two of them writes). This is the yardstick.
- **ZkTxBackend** through ``KazooSession`` on a ``TrioSystem``, driven by ``AsyncTxQueue``: each
  transaction takes one item of ``work`` and puts its body back, with one worker, then with 8
  concurrent transactions (8 handles, one backend, one ZooKeeper session). Every item it takes was
  put by the same backend, whose cache of the bodies it put then spares the body's read; the same
  rows with that cache off (``read_bodies``) say what a take of items another process put costs.
- a short round through a counting relay between the backend and its session, which says how many
  ZooKeeper calls a transaction costs, by kind.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import trio
from kazoo.client import KazooClient

from conveyor.actors.transactions import AsyncTxQueue, AtLeastOnce, ZkTxBackend
from conveyor.actors.zookeeper import KazooSession
from conveyor.runtime import Actor, ActorRef, TrioSystem
from conveyor.runtime.lowlevel import ZkCall, ZkClose, ZkMulti, ZkSessionEvent, ZkWatchSession

BODY = b"x" * 64
"""Every item's body: small, as the seed's queue items are."""

TAKE_WAIT_S = 5.0
"""How long a take may wait: with 8 concurrent transactions a listing may name items committed away."""


def raw_kazoo(address: str, root: str, transactions: int) -> float:
    """Transactions per second of raw synchronous kazoo doing the backend's take-1 / put-1 by hand."""
    client = KazooClient(hosts=address, timeout=10.0)
    client.start(timeout=15.0)
    try:
        items, locks = f"/{root}/items", f"/{root}/locks"
        client.ensure_path(items)
        client.ensure_path(locks)
        for _ in range(8):
            client.create(f"{items}/item-", BODY, sequence=True)
        started = time.perf_counter()
        for n in range(transactions):
            name = min(client.get_children(items))  # ten-digit suffixes: the name order is the number order
            lock = f"{locks}/lock-{int(name.rsplit('-', 1)[1])}"
            client.create(lock, f"{n:032x}".encode(), ephemeral=True)
            transaction = client.transaction()
            transaction.delete(f"{items}/{name}")
            transaction.delete(lock)
            transaction.create(f"{items}/item-", BODY, sequence=True)
            failed = [result for result in transaction.commit() if isinstance(result, Exception)]
            if failed:  # a kazoo transaction that fails does not raise
                msg = f"raw kazoo transaction {n} failed: {failed}"
                raise RuntimeError(msg)
        return transactions / (time.perf_counter() - started)
    finally:
        client.stop()
        client.close()


class CallCounter(Actor):
    """Relays a backend's ZooKeeper calls to its session and counts them by kind (a multi's writes too)."""

    def __init__(self, zk: ActorRef) -> None:
        self.zk = zk
        self.calls: collections.Counter[str] = collections.Counter()

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkCall):
            operation = message.operation
            self.calls[type(operation).__name__] += 1
            if isinstance(operation, ZkMulti):
                self.calls["writes in multis"] += len(operation.operations)
            self.ctx.send(self.zk, message)
        elif isinstance(message, ZkWatchSession):
            self.ctx.send(self.zk, message)
        elif message == "counts":
            self.ctx.reply(tuple(sorted(self.calls.items())))


class SessionClosed(Actor):
    """Hears a ZooKeeper session's events; answers whether it has closed (its server dropped it)."""

    def __init__(self) -> None:
        self.closed = False

    def receive(self, message: Any) -> None:
        if isinstance(message, ZkSessionEvent):
            self.closed = self.closed or message.state == "closed"
        else:
            self.ctx.reply(self.closed)


async def close_session(system: TrioSystem, zk: ActorRef) -> None:
    """Close ``zk``'s session and wait until the server has dropped it, so no client outlives the server."""
    watcher = system.spawn(SessionClosed)
    zk.tell(ZkWatchSession(watcher))
    zk.tell(ZkClose())
    with trio.move_on_after(10.0):
        while not await system.ask(watcher, "closed?"):
            await trio.sleep(0.01)


async def through_backend(address: str, root: str, transactions: int, concurrent: int,
                          count_calls: bool = False, read_bodies: bool = False) -> tuple[float, dict[str, float]]:
    """Transactions per second through ``ZkTxBackend``, and (``count_calls``) ZooKeeper calls per transaction;
    ``read_bodies``: the backend keeps no body it put, so every take reads its item's (as of items others put)."""
    async with TrioSystem() as system:
        zk = system.spawn(lambda: KazooSession(address, timeout=10.0), name="zk")
        relay = system.spawn(lambda: CallCounter(zk), name="count") if count_calls else zk
        backend = system.spawn(lambda: ZkTxBackend(relay, root=root, body_cache_bytes=0) if read_bodies
                               else ZkTxBackend(relay, root=root), name="tx")
        producer = AsyncTxQueue(system, backend, timeout_s=30.0)
        await producer.declare("work", AtLeastOnce())
        async with producer.new_transaction() as tx:
            for _ in range(2 * concurrent + 8):
                tx.put("work", BODY)
            await tx.commit()
        handles = [AsyncTxQueue(system, backend, timeout_s=30.0) for _ in range(concurrent)]
        share = transactions // concurrent
        before: tuple[tuple[str, int], ...] = await system.ask(relay, "counts") if count_calls else ()

        async def worker(queue: AsyncTxQueue) -> None:
            for _ in range(share):
                async with queue.new_transaction() as tx:
                    item = await tx.take("work", TAKE_WAIT_S)
                    if item is None:
                        msg = f"no item of 'work' within {TAKE_WAIT_S} s: the queue always holds some"
                        raise RuntimeError(msg)
                    tx.put("work", item.body)
                    await tx.commit()

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for queue in handles:
                nursery.start_soon(worker, queue)
        elapsed = time.perf_counter() - started
        per_tx: dict[str, float] = {}
        if count_calls:
            await system.wait_quiet()
            counts = collections.Counter(dict(await system.ask(relay, "counts")))
            counts.subtract(dict(before))
            per_tx = {kind: count / (share * concurrent) for kind, count in sorted(counts.items()) if count}
        for queue in (producer, *handles):
            queue.close()
        await close_session(system, zk)
        system.shutdown()
    return share * concurrent / elapsed, per_tx
