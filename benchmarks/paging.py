"""RAM per queued message, with and without paging: a backlog on ``QueueActor`` measured by tracemalloc.

A queue on ``TrioSystem`` takes ``messages`` bodies of ``size`` bytes (``PublishBatch`` of ``batch``),
once with every body in RAM, once with ``memory_target_bytes`` (bodies written to a
``DiskBodyStore`` in a job) and once durable with that target, its journal in a ``DiskJournalStore``
(whose events stay on disk: ``benchmarks/journal_ram.py`` compares it with every body in RAM); once the
system is quiet (the store's last job done), the Python heap the backlog holds is read with
tracemalloc (every thread's allocations: the store's table too) and divided by ``messages``.
Then the queue is drained by one consumer and every body checked.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import tracemalloc
import types
from collections.abc import Callable, Iterable

import trio

from conveyor.actors.broker import (
    Ack,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    GetStats,
    Message,
    PublishBatch,
    QueueActor,
    QueueConfig,
    QueueStats,
)
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import Actor, TrioSystem

from ._common import check_equal


class _Drain(Actor):
    """Acks every delivery and checks its body against the one published."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.received = 0
        self.wrong = 0

    def receive(self, message: object) -> None:
        if type(message) is Delivery:
            if message.message.body != _body(int(message.message.message_id), self.size):
                self.wrong += 1
            self.received += 1
            assert self.ctx.sender is not None
            self.ctx.send(self.ctx.sender, Ack(message.consumer_id, (message.tag,)))


def _body(number: int, size: int) -> bytes:
    return number.to_bytes(8, "big") * (size // 8) + bytes(size % 8)


def deep_size(roots: Iterable[object], seen: set[int]) -> int:
    """Bytes of ``roots`` and every object they reach but those in ``seen`` (which gains them): each object
    once, classes, modules and functions left out."""
    stack = list(roots)
    total = 0
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        stack.extend(gc.get_referents(item))
    return total


async def _backlog(messages: int, size: int, batch: int, target: int | None, durable: bool = False) -> dict[str, float]:
    gc.collect()
    directory = tempfile.TemporaryDirectory(prefix="conveyor-paging-") if durable else None
    store = None if directory is None else DiskJournalStore(directory.name)
    made: list[QueueActor] = []

    def make_queue() -> QueueActor:
        made.append(QueueActor(QueueConfig("backlog", durable=durable, memory_target_bytes=target)))
        return made[-1]

    async with TrioSystem(journal_store=store) as system:
        queue = system.spawn(make_queue, name="q")
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
        actor = made[-1]
        # A journal on a DiskJournalStore keeps no event in RAM (reading them back would count a copy made now).
        seen: set[int] = set()
        entries = deep_size((actor.entries, actor.pager), seen)
        store_bytes = deep_size((actor.body_store,), seen)
        stats: QueueStats = await system.ask(queue, GetStats())
        check_equal("paging", "depth", messages, stats.depth)
        drain = _Drain(size)
        client = system.spawn(lambda: drain, name="drain")
        system.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=500)), name="consumer")
        with trio.fail_after(600):
            while drain.received < messages:
                await trio.sleep(0.05)
        check_equal("paging", "bodies intact", 0, drain.wrong)
        system.shutdown()
    if directory is not None:
        directory.cleanup()
    return {"bytes_per_message": held / messages, "bodies_in_ram": float(stats.body_bytes_in_ram or messages * size),
            "entries_out_of_ram": float(stats.entries_out_of_ram),
            "entries_per_message": entries / messages, "store_per_message": store_bytes / messages}


def main(messages: int = 100_000, size: int = 1024, batch: int = 1000, target: int = 1024 * 1024) -> dict[str, float]:
    """Measure the backlog's heap without and with paging; print and return the figures."""
    tracemalloc.start()
    try:
        plain = trio.run(_backlog, messages, size, batch, None)
        paged = trio.run(_backlog, messages, size, batch, target)
        durable = trio.run(_backlog, messages, size, batch, target, True)
    finally:
        tracemalloc.stop()
    figures = {
        "ram_per_message_bytes": plain["bytes_per_message"],
        "paged_ram_per_message_bytes": paged["bytes_per_message"],
        "paged_bodies_in_ram_bytes": paged["bodies_in_ram"],
        "durable_paged_ram_per_message_bytes": durable["bytes_per_message"],
        "durable_entries_out_of_ram": durable["entries_out_of_ram"],
        "durable_entries_per_message_bytes": durable["entries_per_message"],
        "durable_store_per_message_bytes": durable["store_per_message"],
    }
    print(f"paging: {messages:,} queued messages of {size:,} bytes (tracemalloc, after quiet)")
    print(f"  every body in RAM:                 {figures['ram_per_message_bytes']:>10,.0f} bytes a message")
    print(f"  memory_target_bytes={target:,}: {figures['paged_ram_per_message_bytes']:>10,.0f} bytes a message "
          f"({figures['paged_bodies_in_ram_bytes']:,.0f} bytes of bodies held)")
    durable_ram = figures["durable_paged_ram_per_message_bytes"]
    print(f"  durable, memory_target_bytes={target:,} (DiskJournalStore): {durable_ram:>10,.0f} bytes a message "
          f"({figures['durable_entries_out_of_ram']:,.0f} entries out of RAM); objects reached (sys.getsizeof): "
          f"{figures['durable_entries_per_message_bytes']:,.0f} from the entry list and pager, "
          f"{figures['durable_store_per_message_bytes']:,.0f} from the body store")
    return figures


def backlog_cli(measure: Callable[..., object], description: str | None) -> None:
    """The command line of a backlog benchmark (this one, ``journal_ram``): messages, size, target."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--target", type=int, default=1024 * 1024)
    args = parser.parse_args()
    measure(messages=args.messages, size=args.size, target=args.target)


def cli() -> None:
    """``python -m conveyor.benchmarks.paging``."""
    backlog_cli(main, __doc__)


if __name__ == "__main__":
    cli()
