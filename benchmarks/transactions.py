"""Transactions per second on the broker backend: take-1 / put-1 units of work through ``AsyncTxQueue``.

Each client loops: open a transaction, ``try_take`` one item of ``work``, ``put`` its body back into
``work``, ``commit`` (two asks of the ``TxStoreActor`` a transaction), so the queue keeps its size
and every commit removes one item and creates one. Run on a ``TrioSystem`` with 1 and 8 concurrent
clients, with the store in memory and durable (its journal in memory: a core call appended per
take and per commit), in one run. Issue 19's target for this backend: >= 20,000 tx/s.
(The ZooKeeper backend's rows, beside raw kazoo, come with that backend.)
"""

from __future__ import annotations

import time

import trio

from conveyor.actors.transactions import AsyncTxQueue, AtLeastOnce, TxStoreActor
from conveyor.runtime import TrioSystem


async def _run(transactions: int, clients: int, durable: bool) -> float:
    """Transactions per second for ``clients`` concurrent clients sharing ``transactions`` commits."""
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

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for queue in handles:
                nursery.start_soon(client, queue)
        elapsed = time.perf_counter() - started
        system.shutdown()
    return share * clients / elapsed


def main(transactions: int = 20_000, repeat: int = 3) -> dict[str, float]:
    """Measure each (clients, durable) pair, best of ``repeat``; print and return the figures."""
    figures: dict[str, float] = {}
    print(f"transactions on the broker backend (TrioSystem, take-1 / put-1, {transactions:,} a round, "
          f"best of {repeat})")
    for durable in (False, True):
        for clients in (1, 8):
            best = max(trio.run(_run, transactions, clients, durable) for _ in range(repeat))
            key = f"tx_per_s_{clients}_clients{'_durable' if durable else ''}"
            figures[key] = best
            print(f"  {'durable' if durable else 'in memory':9}  {clients} client{'s' if clients > 1 else ' '}: "
                  f"{best:>10,.0f} tx/s")
    return figures


def cli() -> None:
    """``python -m conveyor.benchmarks.transactions``."""
    main()


if __name__ == "__main__":
    cli()
