"""How fast one conveyor queue moves messages end to end, beside an ``asyncio.Queue``, in one run.

Why: the broker (``QueueActor`` -> ``ConsumerManagerActor`` -> ``ConsumerActor`` ->
client, and the ack back the same way) is the product; the kernel figures of
``benchmarks/runtime.py`` bound it but do not measure it. This script measures the
whole publish -> deliver -> ack path and sets it beside the simplest in-process
queue Python offers, measured in the same process and the same minute. Absolute
numbers are noisy (+-35% on a shared 2-core machine); ratios within one run are
steadier, but a figure near the target can flip between PASS and MISS from run to run.

What, every message a ``Message`` with one shared 1 KiB body, created inside the clock
in every variant (so message creation costs the same everywhere):

1. ``asyncio.Queue`` baseline: one producer task ``await queue.put(Message(body))``,
   one or 8 consumer tasks ``await queue.get()`` that "ack" by counting.
2. ``TrioSystem``: a trio task tells ``Publish(Message(body))`` to one ``QueueActor``
   (no sender, so no confirm); 1 or 8 ``ConsumerActor`` (prefetch 100 each) hand each
   ``Delivery`` to a client actor that acks it with its own ``ctx.reply(Ack(...))``, one
   ``Ack`` per delivery. The ``ConsumerActor`` (broker side, not the client) coalesces the
   acks that reach it in one pass over its mailbox into one ``Ack(tags)`` to the queue
   (see its docstring); the client is not changed for that. The "acks per 50" row is a
   different client: it sends one ``Ack`` of 50 tags itself (RabbitMQ's "multiple" ack).
3. ``TrioSystem``, 1 consumer, two other ways to publish: ``PublishBatch`` of 100
   from a trio task, and a publisher actor that keeps 100 unconfirmed ``Publish``
   in flight and sends one more per ``Published`` confirm.
4. ``Simulation`` (``trace=False``): the same actors, every ``Publish`` told up front
   from outside, then ``sim.run()`` until quiet. The strategy is ``RoundRobin``, a
   steady schedule like the trio dispatcher's: ``RandomWalk`` explores reorderings a
   benchmark does not need, and because it picks channels (not actors) uniformly, a
   consumer with more traffic in flight is scheduled more often, which skews the
   8-consumer split (Jain about 0.7; see docs/broker.md).

Each conveyor run ends when ``GetStats`` shows ``acked == N`` (after ``wait_quiet``);
the counts are checked (published, delivered and acked equal N, nothing redelivered,
the clients saw N deliveries) and a wrong count raises. For the 8-consumer runs the
fairness is Jain's index over the per-consumer ``delivered`` counts of
``QueueStats.consumers`` (1.0 = perfectly even, 1/8 = one consumer took everything).

Every trio or asyncio sender yields every 100 messages, as a real producer that
shares the loop would. Each figure is the best of ``repeat`` runs, each run preceded
by ``gc.collect()``; set-up, spawning and subscribing are outside the clock. The
``repeat`` rounds each run every measurement once, interleaved, so a burst of load
from elsewhere spoils one sample of many figures, not every sample of one. The
secondary TrioSystem runs (3.) and the Simulation runs (4.) get half the messages, so
the default run (100,000 messages, 3 rounds) takes under a minute on a 2-core machine
(50 s measured while other work shared the cores).

Run: ``python benchmarks/broker.py [--messages N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import attrs
import trio
from rich.console import Console
from rich.table import Table

from conveyor.actors.broker import (
    Ack,
    ConsumerActor,
    ConsumerSettings,
    Delivery,
    GetStats,
    Message,
    Publish,
    PublishBatch,
    Published,
    QueueActor,
    QueueConfig,
    QueueStats,
)
from conveyor.benchmarks._clients import BatchAckingClient, GetCount
from conveyor.benchmarks._common import check_equal
from conveyor.runtime import Actor, ActorRef, ActorSystemBase, TrioSystem
from conveyor.simulation import RoundRobin, Simulation
from conveyor.simulation.checkers import jain_index

BODY_BYTES = 1024
BODY = bytes(BODY_BYTES)
"""The one body every message carries (shared: a publisher has its payload already)."""
ACK_EVERY = 50
"""The batch-acking client acks this many deliveries with one Ack (PLATFORM.md measured RabbitMQ so)."""
YIELD_EVERY = 100
"""Trio and asyncio senders yield after this many messages."""
PREFETCH = 100
"""Each consumer's credit in messages."""
MANY_CONSUMERS = 8
CONFIRM_WINDOW = 100
"""Unconfirmed publishes the confirming publisher keeps in flight."""
ACK_DEADLINE_S = 600.0
"""Long enough that no lease lapses during a run (a redelivery would be a wrong count)."""
TARGET_MSGS_PER_S = 100_000
SECONDARY_DIVISOR = 2
"""The secondary TrioSystem runs and the Simulation runs get ``messages // SECONDARY_DIVISOR``."""
STATS_POLL_S = 0.001
STATS_WAIT_S = 60.0


@attrs.frozen
class _Measured:
    """One run: its rate and, for several consumers, Jain's fairness index."""

    msgs_per_s: float
    fairness: float | None = None


# --- actors -----------------------------------------------------------------------------


class AckingClient(Actor):
    """Acks every ``Delivery`` at once through its ConsumerActor; answers ``GetCount``."""

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: object) -> None:
        if type(message) is Delivery:
            self.count += 1
            self.ctx.reply(Ack(message.consumer_id, (message.tag,)))
        elif type(message) is GetCount:
            self.ctx.reply(self.count)


@attrs.frozen
class _Go:
    """Starts the confirming publisher."""


class ConfirmingPublisher(Actor):
    """Publishes ``total`` messages keeping ``window`` unconfirmed; one more per ``Published``."""

    def __init__(self, queue: ActorRef, total: int, window: int) -> None:
        self.queue = queue
        self.total = total
        self.window = window
        self.sent = 0
        self.confirmed = 0

    def receive(self, message: object) -> None:
        if type(message) is Published:
            self.confirmed += 1
            self._publish(1)
        elif type(message) is _Go:
            self._publish(self.window)
        elif type(message) is GetCount:
            self.ctx.reply(self.confirmed)

    def _publish(self, count: int) -> None:
        send = self.ctx.send
        queue = self.queue
        for _ in range(min(count, self.total - self.sent)):
            send(queue, Publish(Message(BODY)))
            self.sent += 1


# --- measuring helpers ------------------------------------------------------------------


def _keep_best(samples: dict[str, list[_Measured]]) -> dict[str, float]:
    """The fastest run of each measurement: its rate under its key and, if it has one, its
    fairness under ``fairness_<key without _msgs_per_s>``."""
    figures: dict[str, float] = {}
    for key, runs in samples.items():
        best = max(runs, key=lambda run: run.msgs_per_s)
        figures[key] = best.msgs_per_s
        if best.fairness is not None:
            figures[f"fairness_{key.removesuffix('_msgs_per_s')}"] = best.fairness
    return figures


def _check_stats(name: str, n: int, stats: QueueStats, consumers: int, client_counts: Sequence[int]) -> None:
    if stats.acked != n:
        msg = f"{name}: expected acked == {n}, got {stats.acked}; the run stalled or lost messages: {stats!r}"
        raise RuntimeError(msg)
    check_equal(name, "published", n, stats.published)
    check_equal(name, "delivered", n, stats.delivered)
    check_equal(name, "acked", n, stats.acked)
    check_equal(name, "redelivered", 0, stats.redelivered)
    check_equal(name, "depth", 0, stats.depth)
    check_equal(name, "in_flight", 0, stats.in_flight)
    check_equal(name, "consumers", consumers, len(stats.consumers))
    check_equal(name, "sum of per-consumer acked", n, sum(c.acked for c in stats.consumers))
    check_equal(name, "deliveries seen by the clients", n, sum(client_counts))


def _fairness(stats: QueueStats) -> float | None:
    if len(stats.consumers) < 2:
        return None
    return jain_index([c.delivered for c in stats.consumers])


def _consumer_factory(queue: ActorRef, client: ActorRef) -> Callable[[], Actor]:
    def build() -> Actor:
        return ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=PREFETCH))

    return build


def _build(
    system: ActorSystemBase, consumers: int, ack_every: int = 1, durable: bool = False
) -> tuple[ActorRef, list[ActorRef]]:
    """Spawn the queue, ``consumers`` acking clients and their ConsumerActors; return (queue, clients)."""
    config = QueueConfig("bench", ack_deadline_s=ACK_DEADLINE_S, durable=durable)
    queue = system.spawn(lambda: QueueActor(config), name="q")
    factory: Callable[[], Actor] = AckingClient if ack_every == 1 else (lambda: BatchAckingClient(ack_every))
    clients = [system.spawn(factory, name=f"client-{i}") for i in range(consumers)]
    for i, client in enumerate(clients):
        system.spawn(_consumer_factory(queue, client), name=f"consumer-{i}")
    return queue, clients


# --- 1. asyncio.Queue -------------------------------------------------------------------


async def bench_asyncio_queue(n: int, consumers: int) -> _Measured:
    """Messages/s from one producer task through an ``asyncio.Queue`` to ``consumers`` counting tasks."""
    queue: asyncio.Queue[Message | None] = asyncio.Queue()
    counts = [0] * consumers

    async def produce() -> None:
        put = queue.put
        for i in range(n):
            await put(Message(BODY))
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        for _ in range(consumers):
            await put(None)  # one end-of-stream marker per consumer

    async def consume(index: int) -> None:
        get = queue.get
        count = 0
        while await get() is not None:
            count += 1  # the "ack"
        counts[index] = count

    gc.collect()
    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for index in range(consumers):
            group.create_task(consume(index))
        group.create_task(produce())
    elapsed = time.perf_counter() - start
    check_equal(f"asyncio.Queue x{consumers}", "messages counted", n, sum(counts))
    return _Measured(n / elapsed, jain_index(counts) if consumers > 1 else None)


# --- 2-3. TrioSystem --------------------------------------------------------------------


async def _until_acked(system: TrioSystem, queue: ActorRef, n: int, name: str) -> QueueStats:
    """Wait until quiet, then poll ``GetStats`` until ``acked == n``; raise if it never is."""
    deadline = time.perf_counter() + STATS_WAIT_S
    while True:
        await system.wait_quiet()
        stats: QueueStats = await system.ask(queue, GetStats(), timeout=30)
        if stats.acked >= n or time.perf_counter() > deadline:
            if stats.acked != n:
                msg = f"{name}: expected acked == {n}, got {stats.acked} ({stats!r})"
                raise RuntimeError(msg)
            return stats
        await trio.sleep(STATS_POLL_S)


async def _client_counts(system: TrioSystem, clients: list[ActorRef]) -> list[int]:
    return [await system.ask(client, GetCount(), timeout=30) for client in clients]


async def bench_trio(n: int, consumers: int, ack_every: int = 1, durable: bool = False) -> _Measured:
    """Messages/s told as ``Publish`` from a trio task, delivered and acked through one queue."""
    name = f"TrioSystem x{consumers}, acks per {ack_every}{', durable' if durable else ''}"
    async with TrioSystem() as system:
        queue, clients = _build(system, consumers, ack_every, durable)
        await system.wait_quiet()
        tell = queue.tell
        checkpoint = trio.lowlevel.checkpoint
        gc.collect()
        start = time.perf_counter()
        for i in range(n):
            tell(Publish(Message(BODY)))
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await checkpoint()
        stats = await _until_acked(system, queue, n, name)
        elapsed = time.perf_counter() - start
        _check_stats(name, n, stats, consumers, await _client_counts(system, clients))
    return _Measured(n / elapsed, _fairness(stats))


async def bench_trio_batch(n: int) -> _Measured:
    """Messages/s told as ``PublishBatch`` of ``YIELD_EVERY`` from a trio task, 1 consumer."""
    name = "TrioSystem PublishBatch"
    async with TrioSystem() as system:
        queue, clients = _build(system, 1)
        await system.wait_quiet()
        tell = queue.tell
        checkpoint = trio.lowlevel.checkpoint
        gc.collect()
        start = time.perf_counter()
        for first in range(0, n, YIELD_EVERY):
            batch = tuple([Message(BODY) for _ in range(min(YIELD_EVERY, n - first))])
            # cast: mypy reads PublishBatch's ``converter=tuple`` as ``Iterable[_T_co]``, which nothing fits
            tell(PublishBatch(cast("Any", batch)))
            await checkpoint()
        stats = await _until_acked(system, queue, n, name)
        elapsed = time.perf_counter() - start
        _check_stats(name, n, stats, 1, await _client_counts(system, clients))
    return _Measured(n / elapsed)


async def bench_trio_confirmed(n: int) -> _Measured:
    """Messages/s from a publisher actor that waits for ``Published`` confirms (window 100), 1 consumer."""
    name = "TrioSystem confirmed publisher"
    async with TrioSystem() as system:
        queue, clients = _build(system, 1)
        publisher = system.spawn(lambda: ConfirmingPublisher(queue, n, CONFIRM_WINDOW), name="publisher")
        await system.wait_quiet()
        gc.collect()
        start = time.perf_counter()
        publisher.tell(_Go())
        stats = await _until_acked(system, queue, n, name)
        elapsed = time.perf_counter() - start
        _check_stats(name, n, stats, 1, await _client_counts(system, clients))
        check_equal(name, "confirms received", n, await system.ask(publisher, GetCount(), timeout=30))
    return _Measured(n / elapsed)


# --- 4. Simulation ----------------------------------------------------------------------


def bench_sim(n: int, consumers: int) -> _Measured:
    """Messages/s of the same actors in the Simulation: ``n`` ``Publish`` told up front, then run."""
    name = f"Simulation x{consumers}"
    sim = Simulation(seed=1, strategy=RoundRobin(), trace=False)
    queue, clients = _build(sim, consumers)
    sim.run()
    tell = queue.tell
    gc.collect()
    start = time.perf_counter()
    for _ in range(n):
        tell(Publish(Message(BODY)))
    result = sim.run()
    elapsed = time.perf_counter() - start
    if not result.quiet:
        msg = f"{name}: the simulation did not go quiet ({result!r})"
        raise RuntimeError(msg)
    stats: QueueStats = sim.ask(queue, GetStats())
    _check_stats(name, n, stats, consumers, [sim.ask(client, GetCount()) for client in clients])
    return _Measured(n / elapsed, _fairness(stats))


# --- report -----------------------------------------------------------------------------


@attrs.frozen
class _Row:
    key: str
    label: str
    count: int
    baseline: str | None  # the asyncio.Queue figure this one is compared with; None for the baselines

    @property
    def name(self) -> str:
        """The key without its unit: ``trio_1c`` for ``trio_1c_msgs_per_s``."""
        return self.key.removesuffix("_msgs_per_s")


def _fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def _print_report(console: Console, rows: list[_Row], figures: dict[str, float], messages: int, repeat: int) -> None:
    table = Table(
        title=f"conveyor broker, publish -> deliver -> ack, {BODY_BYTES} B bodies: {messages:,} messages, "
        f"best of {repeat}",
        title_justify="left",
        caption="x asyncio.Queue: this rate / asyncio.Queue's with as many consumers, same run. "
        f"The secondary TrioSystem rows and the Simulation rows run messages // {SECONDARY_DIVISOR} "
        "to keep the default run near a minute. "
        "Every client but the 'acks per 50' one sends one Ack per delivery; the broker's ConsumerActor "
        "forwards them to the queue coalesced. "
        "Jain: fairness over per-consumer deliveries (1.0 even, 0.125 one of 8 took all).",
        caption_justify="left",
    )
    table.add_column("measurement")
    table.add_column("messages", justify="right")
    table.add_column("msg/s", justify="right")
    table.add_column("us/msg", justify="right")
    table.add_column("x asyncio.Queue", justify="right")
    table.add_column("Jain", justify="right")
    for row in rows:
        rate = figures[row.key]
        ratio = "1.00 (baseline)" if row.baseline is None else f"{rate / figures[row.baseline]:.3f}"
        fairness_key = f"fairness_{row.name}"
        fairness = f"{figures[fairness_key]:.4f}" if fairness_key in figures else "-"
        table.add_row(row.label, f"{row.count:,}", _fmt_rate(rate), f"{1e6 / rate:,.2f}", ratio, fairness)
    console.print(table)
    console.print(
        f"durable queue (every EntryList call journaled, snapshots): "
        f"{figures['trio_1c_durable_msgs_per_s']:,.0f}/s, {figures['ratio_durable_vs_plain']:.3f}x the same queue "
        "without a journal (TrioSystem, 1 consumer, same run)"
    )

    for key, how in (("trio_1c_msgs_per_s", "client sends one Ack per delivery"),
                     ("trio_1c_acks50_msgs_per_s", f"client acks per {ACK_EVERY}, as PLATFORM.md's RabbitMQ figures")):
        rate = figures[key]
        result = "[green]PASS[/green]" if rate >= TARGET_MSGS_PER_S else "[red]MISS[/red]"
        console.print(
            f"target: >= {TARGET_MSGS_PER_S:,} messages/s end to end on TrioSystem with 1 consumer, {how}: "
            f"{rate:,.0f}/s ({rate / TARGET_MSGS_PER_S:.0%} of it) {result}"
        )


def main(messages: int = 100_000, repeat: int = 3) -> dict[str, float]:
    """Run every measurement, print the table and the target line, return the figures by stable name.

    Args:
        messages: messages per run (the secondary TrioSystem runs and the Simulation runs
            get ``messages // 2``, to keep the default run near a minute).
        repeat: rounds of every measurement; each rate keeps its best round.

    Returns:
        ``*_msgs_per_s`` rates, ``ratio_*_vs_asyncio`` (each conveyor rate over the
        ``asyncio.Queue`` rate with as many consumers) and ``fairness_*`` (Jain's index
        of the 8-consumer runs, from the same round as the rate kept).
    """
    if messages < 1 or repeat < 1:
        msg = f"messages and repeat must be >= 1, got messages={messages}, repeat={repeat}"
        raise ValueError(msg)
    n = messages
    half = max(1, messages // SECONDARY_DIVISOR)
    many = MANY_CONSUMERS
    samples: dict[str, list[_Measured]] = {}

    def record(key: str, measured: _Measured) -> None:
        samples.setdefault(key, []).append(measured)

    async def asyncio_round() -> None:
        record("asyncio_1c_msgs_per_s", await bench_asyncio_queue(n, 1))
        record("asyncio_8c_msgs_per_s", await bench_asyncio_queue(n, many))

    async def trio_round() -> None:
        record("trio_1c_msgs_per_s", await bench_trio(n, 1))
        record("trio_1c_acks50_msgs_per_s", await bench_trio(n, 1, ACK_EVERY))
        record("trio_1c_durable_msgs_per_s", await bench_trio(half, 1, durable=True))
        record("trio_8c_msgs_per_s", await bench_trio(n, many))
        record("trio_1c_batch_msgs_per_s", await bench_trio_batch(half))
        record("trio_1c_confirmed_msgs_per_s", await bench_trio_confirmed(half))

    # Rounds interleave the measurements, so a burst of load from elsewhere on the
    # machine spoils one sample of several figures rather than every sample of one.
    for _ in range(repeat):
        asyncio.run(asyncio_round())
        trio.run(trio_round)
        record("sim_1c_msgs_per_s", bench_sim(half, 1))
        record("sim_8c_msgs_per_s", bench_sim(half, many))
    figures = _keep_best(samples)

    one, several = "asyncio_1c_msgs_per_s", "asyncio_8c_msgs_per_s"
    rows = [
        _Row(one, "asyncio.Queue, 1 consumer task", n, None),
        _Row(several, f"asyncio.Queue, {many} consumer tasks", n, None),
        _Row("trio_1c_msgs_per_s", "TrioSystem, 1 consumer (an Ack per delivery)", n, one),
        _Row("trio_1c_acks50_msgs_per_s", f"TrioSystem, 1 consumer, client acks per {ACK_EVERY}", n, one),
        _Row("trio_8c_msgs_per_s", f"TrioSystem, {many} consumers", n, several),
        _Row("trio_1c_durable_msgs_per_s", "TrioSystem, 1 consumer, durable queue (journaled)", half, one),
        _Row("trio_1c_batch_msgs_per_s", f"TrioSystem, 1 consumer, PublishBatch of {YIELD_EVERY}", half, one),
        _Row("trio_1c_confirmed_msgs_per_s", f"TrioSystem, 1 consumer, confirms (window {CONFIRM_WINDOW})", half, one),
        _Row("sim_1c_msgs_per_s", "Simulation (round-robin), 1 consumer", half, one),
        _Row("sim_8c_msgs_per_s", f"Simulation (round-robin), {many} consumers", half, several),
    ]
    for row in rows:
        if row.baseline is not None:
            figures[f"ratio_{row.name}_vs_asyncio"] = figures[row.key] / figures[row.baseline]
    figures["ratio_durable_vs_plain"] = figures["trio_1c_durable_msgs_per_s"] / figures["trio_1c_msgs_per_s"]
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)
    _print_report(console, rows, figures, messages, repeat)
    return figures


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--messages", type=int, default=100_000, help="messages per main run (secondary and Simulation runs: half)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is reported")
    args = parser.parse_args()
    main(messages=args.messages, repeat=args.repeat)


if __name__ == "__main__":
    _cli()
