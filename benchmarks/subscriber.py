"""Messages per second through ``subscribe`` with an acking no-op callback, beside hand-written trio, in one run.

Why: the subscriber (seed 003) turns the Pub/Sub client's threads and locks into actors:
a ``StreamingPullManager`` fans every delivery out to a load controller, a leaser and an
ordered-key handler, a ``WorkerPool`` runs the user's callback as a job in a worker thread,
the callback's ``ack()`` comes back through ``tell_from_thread`` and a ``Dispatcher`` batches
the acks to the broker. Every message costs a thread hop whatever the design, so the
question is how much the actors add on top of it. The baseline is the same shape of work
without any actor: a trio memory channel whose consumer tasks hand each message to a worker
thread with ``trio.to_thread.run_sync(callback, ...)`` (the same call a TrioSystem job
makes), measured in the same process and the same minute.

What, every message a ``Message`` with one shared 100-byte body, all created once before
any clock starts and shared by every variant (the same objects each run):

1. Baseline: one producer task ``await send(message)`` into a trio memory channel (buffer
   ``CHANNEL_BUFFER``), 1 or 4 consumer tasks that run ``callback(message)`` in a thread
   with ``trio.to_thread.run_sync``. The callback is the same function as the subscriber's;
   its ``ack()`` appends to a list (no broker to tell).
2. ``subscribe(system, queue, callback, workers=1 or 4)`` on a ``TrioSystem`` and on a
   ``ThreadSystem``: the messages are told to one ``QueueActor`` (ack deadline 600 s, so no
   lease lapses) as ``PublishBatch`` of 100 from outside the actors; the callback calls
   ``message.ack()`` and nothing else. Default ``FlowControl`` (1,000 messages of credit).
3. The same on a ``TrioSystem`` with 4 workers, every message with one of 10 ordering keys
   (``Message(..., group=f"k{i % 10}")``): one callback per key at a time, so at most 4 of the
   10 keys run at once.

Each conveyor run ends when ``GetStats`` shows ``acked == N`` (polled after ``wait_quiet``);
the counts are checked (published, delivered and acked equal N, nothing redelivered or left
in the queue) and a wrong count raises. The baseline checks that its callbacks acked N.

The overhead is ``baseline rate / conveyor rate`` with as many consumer tasks as workers
(4 for the ordering-key row): 1.0 means the actors cost nothing beyond the thread hop, 3.0
means three times as long per message. Absolute rates are noisy (+-35% on a shared 2-core
machine); ratios within one run are steadier.

Each figure is the best of ``repeat`` runs, each run preceded by ``gc.collect()``;
set-up, spawning and subscribing are outside the clock. The ``repeat`` rounds each run
every measurement once, interleaved, so a burst of load from elsewhere spoils one sample of
many figures, not every sample of one. Callbacks run in threads, so rates are in the
thousands per second: the default run (3,000 messages, 2 rounds) takes well under 90 s.

Run: ``python benchmarks/subscriber.py [--messages N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from collections.abc import Sequence
from typing import Protocol

import attrs
import trio
from rich.console import Console
from rich.table import Table

from conveyor.actors.broker import GetStats, Message, PublishBatch, QueueActor, QueueConfig, QueueStats
from conveyor.actors.subscriber import subscribe
from conveyor.benchmarks._common import check_equal
from conveyor.runtime import ActorRef, ActorSystemBase, ThreadSystem, TrioSystem

BODY_BYTES = 100
BODY = bytes(BODY_BYTES)
"""The one body every message carries (shared: a publisher has its payload already)."""
BATCH = 100
"""Messages per ``PublishBatch``."""
FEW_WORKERS = 1
MANY_WORKERS = 4
KEYS = 10
"""Ordering keys of the keyed run."""
CHANNEL_BUFFER = 100
"""The baseline's memory-channel buffer."""
ACK_DEADLINE_S = 600.0
"""Long enough that no lease lapses during a run (a redelivery would be a wrong count)."""
STATS_POLL_S = 0.001
STATS_WAIT_S = 120.0
"""A run that has not acked every message after this long raises."""


class _Ackable(Protocol):
    def ack(self) -> None: ...


def ack_callback(message: _Ackable) -> None:
    """The callback of every variant: ack, nothing else."""
    message.ack()


@attrs.define(slots=True)
class _PlainMessage:
    """The baseline's message as its callback sees it: ``ack()`` records it, nothing more."""

    message: Message
    acked: list[Message]

    def ack(self) -> None:
        self.acked.append(self.message)  # list.append is atomic under the GIL


# --- helpers --------------------------------------------------------------------------------


def make_messages(n: int, keys: int = 0) -> list[Message]:
    """``n`` messages with the shared body; with ``keys`` > 0 message ``i`` has ordering key ``k{i % keys}``."""
    if keys:
        return [Message(BODY, group=f"k{i % keys}") for i in range(n)]
    return [Message(BODY) for _ in range(n)]


def _batches(messages: Sequence[Message]) -> list[PublishBatch]:
    return [PublishBatch(messages[i : i + BATCH]) for i in range(0, len(messages), BATCH)]


def _check_stats(name: str, n: int, stats: QueueStats) -> None:
    check_equal(name, "published", n, stats.published)
    check_equal(name, "delivered", n, stats.delivered)
    check_equal(name, "acked", n, stats.acked)
    check_equal(name, "redelivered", 0, stats.redelivered)
    check_equal(name, "depth", 0, stats.depth)
    check_equal(name, "in_flight", 0, stats.in_flight)


def _spawn_queue(system: ActorSystemBase) -> ActorRef:
    config = QueueConfig("bench", ack_deadline_s=ACK_DEADLINE_S)
    return system.spawn(lambda: QueueActor(config), name="q")


def _stalled(name: str, n: int, stats: QueueStats) -> RuntimeError:
    return RuntimeError(f"{name}: expected acked == {n} within {STATS_WAIT_S} s, got {stats.acked} ({stats!r})")


# --- 1. baseline: trio memory channel + trio.to_thread --------------------------------------


async def bench_baseline(messages: Sequence[Message], consumers: int) -> float:
    """Messages/s from one producer task through a trio memory channel to ``consumers`` tasks,
    each running the callback in a worker thread with ``trio.to_thread.run_sync``."""
    n = len(messages)
    acked: list[Message] = []
    send, receive = trio.open_memory_channel[Message](CHANNEL_BUFFER)

    async def produce() -> None:
        async with send:
            for message in messages:
                await send.send(message)

    async def consume(channel: trio.MemoryReceiveChannel[Message]) -> None:
        run_sync = trio.to_thread.run_sync
        async with channel:
            async for message in channel:
                await run_sync(ack_callback, _PlainMessage(message, acked))

    gc.collect()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(consumers):
            nursery.start_soon(consume, receive.clone())
        await receive.aclose()
        nursery.start_soon(produce)
    elapsed = time.perf_counter() - start
    check_equal(f"baseline x{consumers}", "messages acked by the callbacks", n, len(acked))
    return n / elapsed


# --- 2-3. subscribe() on TrioSystem and ThreadSystem ----------------------------------------


async def bench_trio(messages: Sequence[Message], workers: int) -> float:
    """Messages/s through ``subscribe`` on a TrioSystem: published in batches, acked by the callback."""
    n = len(messages)
    name = f"TrioSystem, {workers} workers"
    batches = _batches(messages)
    async with TrioSystem() as system:
        queue = _spawn_queue(system)
        subscribe(system, queue, ack_callback, workers=workers, name="subscription")
        await system.wait_quiet()
        tell = queue.tell
        checkpoint = trio.lowlevel.checkpoint
        gc.collect()
        start = time.perf_counter()
        for batch in batches:
            tell(batch)
            await checkpoint()
        deadline = start + STATS_WAIT_S
        while True:
            await system.wait_quiet()
            stats: QueueStats = await system.ask(queue, GetStats(), timeout=30)
            if stats.acked >= n:
                break
            if time.perf_counter() > deadline:
                raise _stalled(name, n, stats)
            await trio.sleep(STATS_POLL_S)
        elapsed = time.perf_counter() - start
        _check_stats(name, n, stats)
    return n / elapsed


def bench_threads(messages: Sequence[Message], workers: int) -> float:
    """Messages/s through ``subscribe`` on a ThreadSystem, driven from this (plain) thread."""
    n = len(messages)
    name = f"ThreadSystem, {workers} workers"
    batches = _batches(messages)
    with ThreadSystem(job_workers=max(8, workers)) as system:
        queue = _spawn_queue(system)
        subscribe(system, queue, ack_callback, workers=workers, name="subscription")
        system.wait_quiet(timeout=30)
        tell = queue.tell
        gc.collect()
        start = time.perf_counter()
        for batch in batches:
            tell(batch)
        deadline = start + STATS_WAIT_S
        while True:
            system.wait_quiet(timeout=STATS_WAIT_S)
            stats: QueueStats = system.ask(queue, GetStats(), timeout=30)
            if stats.acked >= n:
                break
            if time.perf_counter() > deadline:
                raise _stalled(name, n, stats)
            time.sleep(STATS_POLL_S)
        elapsed = time.perf_counter() - start
        _check_stats(name, n, stats)
    return n / elapsed


# --- report ---------------------------------------------------------------------------------


@attrs.frozen
class _Row:
    key: str
    label: str
    baseline: str | None  # the baseline figure this one is compared with; None for the baselines

    @property
    def name(self) -> str:
        """The key without its unit: ``trio_1w`` for ``trio_1w_msgs_per_s``."""
        return self.key.removesuffix("_msgs_per_s")


def _print_report(console: Console, rows: list[_Row], figures: dict[str, float], messages: int, repeat: int) -> None:
    table = Table(
        title=f"conveyor subscriber, publish -> callback in a thread -> ack, {BODY_BYTES} B bodies: "
        f"{messages:,} messages per run, best of {repeat}",
        title_justify="left",
        caption="overhead: baseline rate / this rate, the baseline with as many consumer tasks as workers "
        f"({MANY_WORKERS} for the ordering-key row); 1.00 = the actors cost nothing beyond the thread hop. "
        "Every row runs the same messages; the callback only acks.",
        caption_justify="left",
    )
    table.add_column("measurement")
    table.add_column("msg/s", justify="right")
    table.add_column("us/msg", justify="right")
    table.add_column("overhead (x)", justify="right")
    for row in rows:
        rate = figures[row.key]
        overhead = "1.00 (baseline)" if row.baseline is None else f"{figures[f'overhead_{row.name}']:.2f}"
        table.add_row(row.label, f"{rate:,.0f}", f"{1e6 / rate:,.1f}", overhead)
    console.print(table)


def main(messages: int = 3000, repeat: int = 2) -> dict[str, float]:
    """Run every measurement, print the table, return the figures by stable name.

    Args:
        messages: messages per run (every row runs all of them).
        repeat: rounds of every measurement; each rate keeps its best round.

    Returns:
        ``*_msgs_per_s`` rates and ``overhead_*`` (the baseline rate with as many consumer
        tasks over each conveyor rate: how many times longer a message takes through
        ``subscribe``).
    """
    if messages < 1 or repeat < 1:
        msg = f"messages and repeat must be >= 1, got messages={messages}, repeat={repeat}"
        raise ValueError(msg)
    plain = make_messages(messages)
    keyed = make_messages(messages, KEYS)
    few, many = FEW_WORKERS, MANY_WORKERS
    samples: dict[str, list[float]] = {}

    def record(key: str, rate: float) -> None:
        samples.setdefault(key, []).append(rate)

    async def trio_round() -> None:
        record("baseline_1t_msgs_per_s", await bench_baseline(plain, few))
        record("baseline_4t_msgs_per_s", await bench_baseline(plain, many))
        record("trio_1w_msgs_per_s", await bench_trio(plain, few))
        record("trio_4w_msgs_per_s", await bench_trio(plain, many))
        record("trio_4w_10keys_msgs_per_s", await bench_trio(keyed, many))

    # Rounds interleave the measurements, so a burst of load from elsewhere on the
    # machine spoils one sample of several figures rather than every sample of one.
    for _ in range(repeat):
        trio.run(trio_round)
        record("threads_1w_msgs_per_s", bench_threads(plain, few))
        record("threads_4w_msgs_per_s", bench_threads(plain, many))
    figures = {key: max(rates) for key, rates in samples.items()}

    one, several = "baseline_1t_msgs_per_s", "baseline_4t_msgs_per_s"
    rows = [
        _Row(one, f"baseline: trio channel + to_thread, {few} consumer task", None),
        _Row(several, f"baseline: trio channel + to_thread, {many} consumer tasks", None),
        _Row("trio_1w_msgs_per_s", f"subscribe, TrioSystem, {few} worker", one),
        _Row("trio_4w_msgs_per_s", f"subscribe, TrioSystem, {many} workers", several),
        _Row("trio_4w_10keys_msgs_per_s", f"subscribe, TrioSystem, {many} workers, {KEYS} ordering keys", several),
        _Row("threads_1w_msgs_per_s", f"subscribe, ThreadSystem, {few} worker", one),
        _Row("threads_4w_msgs_per_s", f"subscribe, ThreadSystem, {many} workers", several),
    ]
    for row in rows:
        if row.baseline is not None:
            figures[f"overhead_{row.name}"] = figures[row.baseline] / figures[row.key]
    for key, value in figures.items():
        if not (math.isfinite(value) and value > 0):
            msg = f"{key} = {value!r}: every figure should be a positive finite number"
            raise RuntimeError(msg)
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 120)
    _print_report(console, rows, figures, messages, repeat)
    return figures


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=3000, help="messages per run")
    parser.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is reported")
    args = parser.parse_args()
    main(messages=args.messages, repeat=args.repeat)


if __name__ == "__main__":
    _cli()
