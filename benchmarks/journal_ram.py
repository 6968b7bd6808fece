"""RAM per queued message of a durable queue on a disk journal store, measured by tracemalloc.

A ``QueueConfig(durable=True)`` queue on ``TrioSystem(journal_store=DiskJournalStore(dir))`` takes
``messages`` bodies of ``size`` bytes (``PublishBatch`` of ``batch``, each answered once synced),
once with every body in RAM and once paged under ``memory_target_bytes``. Once the system is quiet
the Python heap the backlog holds (every thread's allocations: the journal's events if it keeps
them, the store's tables) is read and divided by ``messages``; then the queue is drained and every
body checked. What the journal keeps in RAM per event shows as the difference between two commits.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import tracemalloc

import trio

from conveyor.actors.broker import (
    ConsumerActor,
    ConsumerSettings,
    GetStats,
    Message,
    PublishBatch,
    QueueActor,
    QueueConfig,
    QueueStats,
)
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import TrioSystem

from ._common import check_equal
from .paging import _body, _Drain


async def _durable_backlog(directory: str, messages: int, size: int, batch: int, target: int | None) -> float:
    gc.collect()
    async with TrioSystem(journal_store=DiskJournalStore(directory)) as system:
        config = QueueConfig("backlog", durable=True, memory_target_bytes=target)
        queue = system.spawn(lambda: QueueActor(config), name="q")
        await system.ask(queue, GetStats())
        await system.wait_quiet()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for start in range(0, messages, batch):
            numbers = range(start, min(messages, start + batch))
            payloads = tuple(Message(_body(n, size), message_id=str(n)) for n in numbers)
            await system.ask(queue, PublishBatch(payloads), 60.0)
        await system.wait_quiet()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        stats: QueueStats = await system.ask(queue, GetStats())
        check_equal("journal_ram", "depth", messages, stats.depth)
        drain = _Drain(size)
        client = system.spawn(lambda: drain, name="drain")
        system.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=500)), name="consumer")
        with trio.fail_after(600):
            while drain.received < messages:
                await trio.sleep(0.05)
        check_equal("journal_ram", "bodies intact", 0, drain.wrong)
        system.shutdown()
    return held / messages


def main(messages: int = 100_000, size: int = 1024, batch: int = 1000, target: int = 1024 * 1024) -> dict[str, float]:
    """Measure a durable backlog's heap with every body in RAM and paged; print and return the figures."""
    tracemalloc.start()
    try:
        with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as paged_dir:
            plain = trio.run(_durable_backlog, plain_dir, messages, size, batch, None)
            paged = trio.run(_durable_backlog, paged_dir, messages, size, batch, target)
    finally:
        tracemalloc.stop()
    print(f"durable queue on a DiskJournalStore: {messages:,} queued messages of {size:,} bytes "
          "(tracemalloc, after quiet)")
    print(f"  every body in RAM:              {plain:>10,.0f} bytes a message")
    print(f"  memory_target_bytes={target:,}: {paged:>10,.0f} bytes a message")
    return {"durable_ram_per_message_bytes": plain, "durable_paged_ram_per_message_bytes": paged}


def cli() -> None:
    """``python -m conveyor.benchmarks.journal_ram``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--target", type=int, default=1024 * 1024)
    args = parser.parse_args()
    main(messages=args.messages, size=args.size, target=args.target)


if __name__ == "__main__":
    cli()
