"""A durable paged queue's backlog reopened: how long recovery takes and the RAM it peaks at.

A child process fills a durable queue (``TrioSystem`` with a ``DiskJournalStore``) with ``messages``
bodies of ``size`` bytes under ``memory_target_bytes`` (``PublishBatch`` of 1,000, each confirmed);
a second child opens the same directory and times the queue's recovery to its first ``GetStats``
answer, with its RSS (``VmRSS``) and peak (``ru_maxrss``). With ``--objects`` it also sums the
objects the recovered queue reaches by owner (``sys.getsizeof``, each object once): the entry list
and pager, the body store, and the journal's events alone.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time

import trio

from conveyor.actors.broker import GetStats, Message, PublishBatch, QueueActor, QueueConfig, QueueStats
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import TrioSystem

from ._common import check_equal
from .paging import deep_size


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _fill(directory: str, messages: int, size: int, target: int) -> dict[str, float]:
    config = QueueConfig("backlog", durable=True, memory_target_bytes=target)
    async with TrioSystem(journal_store=DiskJournalStore(directory)) as system:
        queue = system.spawn(lambda: QueueActor(config), name="q")
        started = time.perf_counter()
        for start in range(0, messages, 1000):
            numbers = range(start, min(messages, start + 1000))
            await system.ask(queue, PublishBatch(tuple(Message(n.to_bytes(8, "big") * (size // 8)) for n in numbers)),
                             120.0)
        await system.wait_quiet()
        seconds = time.perf_counter() - started
        stats: QueueStats = await system.ask(queue, GetStats())
        check_equal("durable reopen", "depth", messages, stats.depth)
        system.shutdown()
    return {"fill_s": seconds, "fill_peak_mib": _peak_mib(), "entries_out_of_ram": float(stats.entries_out_of_ram)}


async def _open(directory: str, messages: int, target: int, objects: bool) -> dict[str, float]:
    config = QueueConfig("backlog", durable=True, memory_target_bytes=target)
    made: list[QueueActor] = []

    def make_queue() -> QueueActor:
        made.append(QueueActor(config))
        return made[-1]

    before = _rss_mib()
    started = time.perf_counter()
    async with TrioSystem(journal_store=DiskJournalStore(directory)) as system:
        queue = system.spawn(make_queue, name="q")
        stats: QueueStats = await system.ask(queue, GetStats(), 600.0)
        figures = {"reopen_s": time.perf_counter() - started, "rss_before_mib": before, "rss_mib": _rss_mib(),
                   "peak_mib": _peak_mib(), "entries_out_of_ram": float(stats.entries_out_of_ram)}
        check_equal("durable reopen", "depth", messages, stats.depth)
        if objects:
            actor = made[-1]
            seen: set[int] = set()
            figures["entries_mib"] = deep_size((actor.entries, actor.pager), seen) / 2**20
            figures["store_mib"] = deep_size((actor.body_store,), seen) / 2**20
            events = () if actor.journal is None else list(actor.journal)
            figures["journal_events_mib"] = deep_size(events, seen) / 2**20
        system.shutdown()
    return figures


def _child(phase: str, directory: str, messages: int, size: int, target: int, objects: bool) -> dict[str, float]:
    command = [sys.executable, "-m", "conveyor.benchmarks.durable_reopen", "--phase", phase, "--dir", directory,
               "--messages", str(messages), "--size", str(size), "--target", str(target)]
    if objects:
        command.append("--objects")
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(messages: int = 1_000_000, size: int = 1024, target: int = 64 * 1024 * 1024,
         objects: bool = False) -> dict[str, float]:
    """Fill, then reopen, each in a child process; print and return the figures."""
    with tempfile.TemporaryDirectory(prefix="conveyor-reopen-") as directory:
        figures = _child("fill", directory, messages, size, target, False)
        figures.update(_child("open", directory, messages, size, target, objects))
    print(f"durable reopen: {messages:,} queued messages of {size:,} bytes, memory_target_bytes={target:,}")
    print(f"  filled in {figures['fill_s']:.1f} s (peak RSS {figures['fill_peak_mib']:,.0f} MiB), "
          f"{figures['entries_out_of_ram']:,.0f} entries out of RAM")
    print(f"  reopened in {figures['reopen_s']:.1f} s: RSS {figures['rss_before_mib']:,.0f} -> "
          f"{figures['rss_mib']:,.0f} MiB, peak {figures['peak_mib']:,.0f} MiB")
    if objects:
        print(f"  objects reached: entry list and pager {figures['entries_mib']:,.0f} MiB, body store "
              f"{figures['store_mib']:,.0f} MiB, the journal's events alone {figures['journal_events_mib']:,.0f} MiB")
    return figures


def cli() -> None:
    """``python -m conveyor.benchmarks.durable_reopen``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--target", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--objects", action="store_true", help="sum the recovered queue's objects by owner")
    parser.add_argument("--phase", choices=("fill", "open"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase is None:
        main(args.messages, args.size, args.target, args.objects)
    elif args.phase == "fill":
        print(json.dumps(trio.run(_fill, args.dir, args.messages, args.size, args.target)))
    else:
        print(json.dumps(trio.run(_open, args.dir, args.messages, args.target, args.objects)))


if __name__ == "__main__":
    cli()
