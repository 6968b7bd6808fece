"""Transactions per second on the broker backend: take-1 / put-1 units of work through ``AsyncTxQueue``.

Each client loops: open a transaction, ``try_take`` one item of ``work``, ``put`` its body back into
``work``, ``commit`` (two asks of the ``TxStoreActor`` a transaction), so the queue keeps its size
and every commit removes one item and creates one. Run on a ``TrioSystem`` with 1 and 8 concurrent
clients, with the store in memory and durable (its journal in memory: a core call appended per
take and per commit), in one run. Issue 19's target for this backend: >= 20,000 tx/s.
(The ZooKeeper backend's rows, beside raw kazoo, come with that backend.)
"""

from __future__ import annotations

import itertools
import os
import time

import trio

from conveyor.actors.transactions import AsyncTxQueue, AtLeastOnce, TxStoreActor
from conveyor.actors.zookeeper import LocalZooKeeper, ZooKeeperNotInstalled, zookeeper_missing
from conveyor.runtime import TrioSystem

from ._transactions_zk import raw_kazoo, through_backend


async def _run(transactions: int, clients: int, durable: bool) -> tuple[float, float]:
    """Transactions per second (wall clock, and per second of this process's CPU) for ``clients``
    concurrent clients sharing ``transactions`` commits."""
    async with TrioSystem() as system:
        store = system.spawn(lambda: TxStoreActor(durable=durable), name="tx")
        producer = AsyncTxQueue(system, store)
        await producer.declare("work", AtLeastOnce())
        async with producer.new_transaction() as tx:
            for n in range(2 * clients):
                tx.put("work", f"item-{n}".encode())
            await tx.commit()
        handles = [AsyncTxQueue(system, store) for _ in range(clients)]
        share = transactions // clients

        async def client(queue: AsyncTxQueue) -> None:
            for _ in range(share):
                async with queue.new_transaction() as tx:
                    item = await tx.try_take("work")
                    assert item is not None, "the queue keeps 2 items a client: a take always finds one"
                    tx.put("work", item.body)
                    await tx.commit()

        started, cpu_started = time.perf_counter(), time.process_time()
        async with trio.open_nursery() as nursery:
            for queue in handles:
                nursery.start_soon(client, queue)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        system.shutdown()
    return share * clients / elapsed, share * clients / cpu


BROKER_TARGET = 20_000.0
"""Issue 19's target for the broker backend, in transactions a second."""
ZK_ONE_WORKER_TARGET = 0.8
"""Issue 19's target for the ZooKeeper backend with one worker: this much of raw synchronous kazoo."""
ZK_CONCURRENT_TARGET = 3.0
"""... and with 8 concurrent transactions: this many times raw synchronous kazoo."""


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main(transactions: int = 20_000, repeat: int = 3, zk_transactions: int = 2_000) -> dict[str, float]:
    """Measure the broker rows (best of ``repeat``), then the ZooKeeper rows; print and return the figures.

    Every rate comes with its ratio: to the target for the broker backend, to raw kazoo for ZooKeeper.
    """
    figures: dict[str, float] = {}
    print(f"transactions on the broker backend (TrioSystem, take-1 / put-1, {transactions:,} a round, "
          f"best of {repeat}; {_load()})")
    for durable in (False, True):
        for clients in (1, 8):
            rounds = [trio.run(_run, transactions, clients, durable) for _ in range(repeat)]
            best, best_cpu = max(wall for wall, _ in rounds), max(cpu for _, cpu in rounds)
            key = f"tx_per_s_{clients}_clients{'_durable' if durable else ''}"
            figures[key] = best
            figures[f"{key}_per_cpu_s"] = best_cpu
            figures[f"{key}_ratio_to_target"] = best / BROKER_TARGET
            print(f"  {'durable' if durable else 'in memory':9}  {clients} client{'s' if clients > 1 else ' '}: "
                  f"{best:>9,.0f} tx/s ({best / BROKER_TARGET:.2f}x the target {BROKER_TARGET:,.0f}); "
                  f"{best_cpu:>9,.0f} tx a CPU second ({best_cpu / BROKER_TARGET:.2f}x)")
    figures.update(zookeeper_rows(zk_transactions, repeat))
    one, _, _ = os.getloadavg()
    figures["load_average_1_min"] = max(one, 0.01)
    print(f"  ({_load()} at the end)")
    return figures


def zookeeper_rows(transactions: int, repeat: int) -> dict[str, float]:
    """ZooKeeper rows on one local server with fsync on: raw kazoo, then the backend with 1 and 8 workers."""
    problem = zookeeper_missing()
    if problem is not None:
        raise ZooKeeperNotInstalled(problem)
    figures: dict[str, float] = {}
    with LocalZooKeeper(force_sync=True) as server:
        print(f"transactions on ZooKeeper (a local server, fsync on; take-1 / put-1, {transactions:,} a round, "
              f"best of {repeat}; {_load()})")
        roots = (f"bench-{n}" for n in itertools.count())
        rounds: dict[str, list[float]] = {name: [] for name in ("raw", "1_worker", "8_concurrent",
                                                                 "1_worker_bodies_read", "8_concurrent_bodies_read")}
        for _ in range(repeat):  # interleaved, so that a change of load weighs on every row alike
            rounds["raw"].append(raw_kazoo(server.address, next(roots), transactions))
            for read_bodies in (False, True):
                for concurrent in (1, 8):
                    name = ("1_worker" if concurrent == 1 else "8_concurrent") + ("_bodies_read" if read_bodies else "")
                    rounds[name].append(trio.run(through_backend, server.address, next(roots), transactions,
                                                 concurrent, False, read_bodies)[0])
        raw = max(rounds["raw"])
        figures["zk_raw_kazoo_tx_per_s"] = raw
        print(f"  raw kazoo, synchronous (list, lock, one checked transaction): {raw:>7,.0f} tx/s (1.00x)")
        for name, label, target in (("1_worker", "1 worker", ZK_ONE_WORKER_TARGET),
                                    ("8_concurrent", "8 concurrent transactions", ZK_CONCURRENT_TARGET)):
            rate = max(rounds[name])
            figures[f"zk_tx_per_s_{name}"] = rate
            figures[f"zk_{name}_ratio_to_raw_kazoo"] = rate / raw
            print(f"  ZkTxBackend, {label:27}: {rate:>7,.0f} tx/s ({rate / raw:.2f}x raw kazoo; "
                  f"target >= {target}x: {'met' if rate / raw >= target else 'NOT met'})")
        read = {name: max(rounds[f"{name}_bodies_read"]) for name in ("1_worker", "8_concurrent")}
        for name, rate in read.items():
            figures[f"zk_tx_per_s_{name}_bodies_read"] = rate
        print(f"  the same, each take reading its body (items another process put): 1 worker "
              f"{read['1_worker']:,.0f} tx/s ({read['1_worker'] / raw:.2f}x), 8 concurrent "
              f"{read['8_concurrent']:,.0f} tx/s ({read['8_concurrent'] / raw:.2f}x)")
        _, calls = trio.run(through_backend, server.address, next(roots), max(transactions // 4, 8), 1, True)
        figures["zk_calls_per_tx"] = sum(count for kind, count in calls.items() if kind != "writes in multis")
        print(f"  ZooKeeper calls a transaction (1 worker, bodies kept): {figures['zk_calls_per_tx']:.2f}: "
              + ", ".join(f"{kind} {count:.2f}" for kind, count in calls.items()))
    return figures


def cli() -> None:
    """``python -m conveyor.benchmarks.transactions``."""
    main()


if __name__ == "__main__":
    cli()
