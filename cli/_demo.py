"""``conveyor demo``: one set of actors, run on trio, on threads and in the simulator.

A dispatcher hands work items to a pool of workers in turn; each worker hashes its
item in a job (off the actor) and reports to a collector. The same classes run
on every backend and reach the same digest; the simulation replays bit for bit.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any

import attrs
import trio
from rich.console import Console
from rich.table import Table

from conveyor.runtime import Actor, ActorRef, ActorSystemBase, JobDone, ThreadSystem, TrioSystem
from conveyor.simulation import Replay, Simulation


@attrs.frozen
class Work:
    item: int


@attrs.frozen
class Result:
    item: int
    digest: str


@attrs.frozen
class Summary:
    """Asked of the collector: how many results and their combined digest."""


def digest_item(item: int) -> str:
    """The blocking work a job does: hash the item a few hundred times."""
    value = item.to_bytes(8, "big")
    for _ in range(200):
        value = hashlib.sha256(value).digest()
    return value.hex()


class Collector(Actor):
    """Keeps results by item; answers ``Summary`` with (count, digest over items in order)."""

    def __init__(self) -> None:
        self.results: dict[int, str] = {}

    def receive(self, message: Any) -> None:
        match message:
            case Result(item=item, digest=digest):
                self.results[item] = digest
            case Summary():
                combined = hashlib.sha256("".join(self.results[k] for k in sorted(self.results)).encode())
                self.ctx.reply((len(self.results), combined.hexdigest()[:12]))


class Worker(Actor):
    """Hashes each item in a job and forwards the result."""

    def __init__(self, collector: ActorRef) -> None:
        self.collector = collector
        self.items: dict[int, int] = {}

    def receive(self, message: Any) -> None:
        match message:
            case Work(item=item):
                self.items[self.ctx.run_job(digest_item, item)] = item
            case JobDone(job_id=job_id, result=digest):
                self.ctx.send(self.collector, Result(self.items.pop(job_id), digest))


class Dispatcher(Actor):
    """Spawns the workers as children and deals work to them in turn."""

    def __init__(self, collector: ActorRef, workers: int) -> None:
        self.collector = collector
        self.worker_count = workers
        self.workers: list[ActorRef] = []
        self.turn = 0

    def on_start(self) -> None:
        self.workers = [
            self.ctx.spawn(lambda: Worker(self.collector), name=f"worker-{i}") for i in range(self.worker_count)
        ]

    def receive(self, message: Any) -> None:
        if isinstance(message, Work):
            self.ctx.send(self.workers[self.turn % len(self.workers)], message)
            self.turn += 1


def build(system: ActorSystemBase, workers: int) -> tuple[ActorRef, ActorRef]:
    """Spawn the demo's actors on ``system``; return (dispatcher, collector)."""
    collector = system.spawn(Collector, name="collector")
    dispatcher = system.spawn(lambda: Dispatcher(collector, workers), name="dispatcher")
    return dispatcher, collector


def _deliveries(system: ActorSystemBase) -> int:
    return sum(1 for event in system.trace if event.kind.value == "delivered")


async def _on_trio(items: int, workers: int) -> tuple[int, str, int]:
    async with TrioSystem(trace=True) as system:
        dispatcher, collector = build(system, workers)
        for item in range(items):
            dispatcher.tell(Work(item))
        while True:
            await system.wait_quiet()
            count, digest = await system.ask(collector, Summary())
            if count == items:
                return count, digest, _deliveries(system)


def _on_threads(items: int, workers: int) -> tuple[int, str, int]:
    with ThreadSystem(trace=True) as system:
        dispatcher, collector = build(system, workers)
        for item in range(items):
            dispatcher.tell(Work(item))
        while True:
            system.wait_quiet(30)
            count, digest = system.ask(collector, Summary())
            if count == items:
                return count, digest, _deliveries(system)


def _on_simulation(items: int, workers: int, seed: int, schedule: list[int] | None) -> tuple[Simulation, str]:
    sim = Simulation(seed=seed, strategy=None if schedule is None else Replay(schedule))
    dispatcher, collector = build(sim, workers)
    for item in range(items):
        dispatcher.tell(Work(item))
    sim.run()
    _, digest = sim.ask(collector, Summary())
    return sim, digest


def run_demo(items: int = 400, workers: int = 4, seed: int = 2026, console: Console | None = None) -> None:
    """Run the demo on each backend and print one table row per run."""
    console = console or Console(width=110)
    table = Table(title=f"conveyor demo: {items} items, {workers} workers, the same actor classes everywhere")
    for column in ("backend", "results", "digest", "deliveries", "wall s", "trace hash"):
        table.add_column(column, no_wrap=True)

    def timed(run: Callable[[], Any]) -> tuple[Any, float]:
        start = time.perf_counter()
        value = run()
        return value, time.perf_counter() - start

    (count, digest, deliveries), seconds = timed(lambda: trio.run(_on_trio, items, workers))
    table.add_row("TrioSystem", str(count), digest, str(deliveries), f"{seconds:.2f}", "(not replayable)")
    (count, digest, deliveries), seconds = timed(lambda: _on_threads(items, workers))
    table.add_row("ThreadSystem", str(count), digest, str(deliveries), f"{seconds:.2f}", "(not replayable)")
    (sim, digest), seconds = timed(lambda: _on_simulation(items, workers, seed, None))
    first_hash = sim.trace_hash()
    rows = [(f"sim seed {seed}", sim, digest, seconds)]
    (replayed, digest), seconds = timed(lambda: _on_simulation(items, workers, seed, sim.schedule))
    rows.append(("  its replay", replayed, digest, seconds))
    (other, digest), seconds = timed(lambda: _on_simulation(items, workers, seed + 1, None))
    rows.append((f"sim seed {seed + 1}", other, digest, seconds))
    for label, run, run_digest, run_seconds in rows:
        table.add_row(label, str(items), run_digest, str(_deliveries(run)), f"{run_seconds:.2f}", run.trace_hash()[:12])
    console.print(table)
    same = replayed.trace_hash() == first_hash
    console.print(
        f"Same digest on every backend; replaying seed {seed}'s {len(sim.schedule)} scheduling choices "
        f"gives {'the identical' if same else 'a DIFFERENT'} trace; another seed interleaves differently."
    )
    if not same:
        raise SystemExit(1)
