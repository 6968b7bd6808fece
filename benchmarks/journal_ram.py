"""RAM per queued message of a durable queue on a disk journal store, measured by tracemalloc.

A ``QueueConfig(durable=True)`` queue on ``TrioSystem(journal_store=DiskJournalStore(dir))`` takes
``messages`` bodies of ``size`` bytes (``PublishBatch`` of ``batch``, each answered once synced),
once with every body in RAM and once paged under ``memory_target_bytes``. Once the system is quiet
the Python heap the backlog holds (every thread's allocations: the journal's events if it keeps
them, the store's tables) is read and divided by ``messages``; then the queue is drained and every
body checked (``paging._backlog``, durable). What the journal keeps in RAM per
event shows as the difference between two commits.
"""

from __future__ import annotations

import tracemalloc

import trio

from .paging import _backlog, backlog_cli


def main(messages: int = 100_000, size: int = 1024, batch: int = 1000, target: int = 1024 * 1024) -> dict[str, float]:
    """Measure a durable backlog's heap with every body in RAM and paged; print and return the figures."""
    tracemalloc.start()
    try:
        plain = trio.run(_backlog, messages, size, batch, None, True)["bytes_per_message"]
        paged = trio.run(_backlog, messages, size, batch, target, True)["bytes_per_message"]
    finally:
        tracemalloc.stop()
    print(f"durable queue on a DiskJournalStore: {messages:,} queued messages of {size:,} bytes "
          "(tracemalloc, after quiet)")
    print(f"  every body in RAM:              {plain:>10,.0f} bytes a message")
    print(f"  memory_target_bytes={target:,}: {paged:>10,.0f} bytes a message")
    return {"durable_ram_per_message_bytes": plain, "durable_paged_ram_per_message_bytes": paged}


def cli() -> None:
    """``python -m conveyor.benchmarks.journal_ram``."""
    backlog_cli(main, __doc__)


if __name__ == "__main__":
    cli()
