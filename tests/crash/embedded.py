"""The crash test's client process on the embedded API: a producer with confirms and a consumer that
acks, against a durable queue on ``TrioSystem`` whose journals live in a data directory.

``work`` mode publishes (priorities 0, 4 and 9, several publishes in flight, a quarter of them as a
``PublishBatch`` of 2 to 5) and consumes until the parent kills it; ``drain`` mode only consumes,
until the queue holds nothing ready or in flight, then stops cleanly. Every step goes to the
history file first (``tests/crash/history.py``). A third of the acks ask for a confirm
(``Ack(confirm=True)``): the queue answers once the ack is synced, and such a message must never
come back. One first delivery in twenty is released (``Release``) instead: it goes back to its
place and comes again.

Run as ``python -m tests.crash.embedded --data-dir D --history H --run N --mode work|drain``; it
prints ``ready`` once the queue and the consumer are up. ``--memory-target BYTES`` makes the queue
page (``QueueConfig(memory_target_bytes=BYTES)``); its lives then record a ``QueueSeen`` (entries out
of RAM, body bytes in RAM) every 0.1 s and at each look of the drain.
"""

from __future__ import annotations

import argparse
import random
import zlib
from typing import Any

import trio

from conveyor.actors.broker import (
    Ack,
    AckResult,
    BatchPublished,
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
    Release,
)
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import Actor, ActorRef, TrioSystem

from .history import (
    AckConfirmed,
    AckSent,
    Confirmed,
    HistoryWriter,
    PublishFailed,
    QueueSeen,
    Received,
    Sent,
    Started,
)

QUEUE = "crash"
PRIORITIES = (0, 0, 0, 4, 9)
"""Drawn per message: most at the lowest level, some overtaking it."""
IN_FLIGHT = 16
"""Publish requests awaiting their confirm at once."""
ASK_S = 30.0


def asks_confirm(key: str) -> bool:
    """Whether the consumer asks for the ack of ``key`` to be confirmed: a third of the messages."""
    return zlib.crc32(key.encode()) % 3 == 0


def released_first(key: str) -> bool:
    """Whether the consumer releases the first delivery of ``key``: one message in twenty."""
    return zlib.crc32(key.encode()) % 20 == 7


class HistoryConsumer(Actor):
    """The application behind the ``ConsumerActor``: records each delivery, then acks it."""

    def __init__(self, history: HistoryWriter) -> None:
        self.history = history
        self.keys: dict[int, str] = {}  # tag -> key, while its confirmed ack is out

    def receive(self, message: Any) -> None:
        match message:
            case Delivery(message=body, tag=tag, delivery_count=count, consumer_id=consumer_id):
                key = body.message_id
                self.history.record(Received(key, body.priority, count))
                if count == 1 and released_first(key):
                    self.ctx.reply(Release(consumer_id, (tag,)))
                    return
                confirm = asks_confirm(key)
                if confirm:
                    self.keys[tag] = key
                self.history.record(AckSent(key, confirm))
                self.ctx.reply(Ack(consumer_id, (tag,), confirm))
            case AckResult(acked=acked):
                for tag in acked:
                    if tag in self.keys:
                        self.history.record(AckConfirmed(self.keys.pop(tag)))


async def _publish(system: TrioSystem, queue: ActorRef, history: HistoryWriter, sends: list[tuple[str, int]],
                   slots: trio.Semaphore) -> None:
    """Publish ``sends`` (key, priority): one ``Publish``, or a ``PublishBatch`` for several."""
    try:
        messages = [Message(key.encode(), priority=priority, message_id=key) for key, priority in sends]
        for key, priority in sends:  # recorded, then sent in the same step: the file keeps send order
            history.record(Sent(key, priority))
        request = Publish(messages[0]) if len(messages) == 1 else PublishBatch(messages)
        try:
            answer = await system.ask(queue, request, ASK_S)
        except Exception:
            answer = None
        outcomes = answer.outcomes if type(answer) is BatchPublished else (answer,) * len(sends)
        for (key, _), outcome in zip(sends, outcomes, strict=True):
            history.record(Confirmed(key) if type(outcome) is Published else PublishFailed(key))
    finally:
        slots.release()


async def _produce(system: TrioSystem, queue: ActorRef, history: HistoryWriter, run: int, rng: random.Random,
                   rate: float) -> None:
    """Publish about ``rate`` messages a second, ``IN_FLIGHT`` requests at most unconfirmed, until killed."""
    slots = trio.Semaphore(IN_FLIGHT)
    async with trio.open_nursery() as nursery:
        n = 0
        while True:
            await slots.acquire()
            size = rng.randint(2, 5) if rng.random() < 0.25 else 1
            sends = [(f"{run}.{n + i}", rng.choice(PRIORITIES)) for i in range(size)]
            n += size
            nursery.start_soon(_publish, system, queue, history, sends, slots)
            await trio.sleep(rng.expovariate(rate / size))


def _record_paging(history: HistoryWriter, run: int, stats: QueueStats) -> None:
    """A paged queue's look into the history (``QueueSeen``); nothing for a queue that does not page."""
    if stats.body_bytes_in_ram is not None:
        history.record(QueueSeen(run, stats.depth, stats.entries_out_of_ram, stats.body_bytes_in_ram))


async def _drain(system: TrioSystem, queue: ActorRef, history: HistoryWriter, run: int) -> None:
    """Until the queue has held nothing ready or in flight for a few looks in a row."""
    empty_looks = 0
    while empty_looks < 3:
        stats: QueueStats = await system.ask(queue, GetStats(), ASK_S)
        _record_paging(history, run, stats)
        empty_looks = empty_looks + 1 if stats.depth == 0 and stats.in_flight == 0 else 0
        await trio.sleep(0.05)


async def _watch_paging(system: TrioSystem, queue: ActorRef, history: HistoryWriter, run: int) -> None:
    """Every 0.1 s, record what a paged queue holds out of RAM (so a test can see that a run paged)."""
    while True:
        await trio.sleep(0.1)
        _record_paging(history, run, await system.ask(queue, GetStats(), ASK_S))


async def _flush_often(history: HistoryWriter) -> None:
    while True:
        await trio.sleep(0.1)
        await trio.to_thread.run_sync(history.flush)


async def _consume_later(system: TrioSystem, queue: ActorRef, application: ActorRef, run: int, delay_s: float) -> None:
    await trio.sleep(delay_s)
    system.spawn(lambda: ConsumerActor(queue, application, ConsumerSettings(prefetch_messages=32)),
                 name=f"consumer-{run}")


async def run_client(data_dir: str | None, history_path: str, run: int, mode: str, seed: int, rate: float,
                     hold_back: float = 0.0, memory_target: int | None = None) -> None:
    """One client process's life (see the module's doc); journals in memory when ``data_dir`` is None.

    With probability ``hold_back`` a work life starts consuming only after 0.5 to 3 s, so a backlog
    builds (and a kill often finds one). ``memory_target`` (bytes) makes the queue page: its bodies
    go to a body store beside the journal and its deep tail's entries to delta chunks.
    """
    history = HistoryWriter(history_path)
    history.record(Started(run, mode))
    rng = random.Random(seed)
    store = None if data_dir is None else DiskJournalStore(data_dir)
    async with TrioSystem(journal_store=store, seed=seed) as system:
        config = QueueConfig(QUEUE, durable=True, memory_target_bytes=memory_target)
        queue = system.spawn(lambda: QueueActor(config), name=QUEUE)
        application = system.spawn(lambda: HistoryConsumer(history), name=f"application-{run}")
        held_s = rng.uniform(0.5, 3.0) if mode == "work" and rng.random() < hold_back else 0.0
        print("ready", flush=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_consume_later, system, queue, application, run, held_s)
            nursery.start_soon(_flush_often, history)
            if mode == "work":
                if memory_target is not None:
                    nursery.start_soon(_watch_paging, system, queue, history, run)
                await _produce(system, queue, history, run, rng, rate)
            else:
                await _drain(system, queue, history, run)
            nursery.cancel_scope.cancel()
    history.close()
    print("drained", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--history", required=True)
    parser.add_argument("--run", type=int, required=True)
    parser.add_argument("--mode", choices=("work", "drain"), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=2000.0, help="publishes a second (work mode)")
    parser.add_argument("--hold-back", type=float, default=0.0,
                        help="chance that a work life starts consuming 0.5 to 3 s late (a backlog builds)")
    parser.add_argument("--in-memory", action="store_true",
                        help="keep the journals in memory, not in --data-dir: a broker that loses all at a kill")
    parser.add_argument("--memory-target", type=int, default=None,
                        help="page the queue under this many bytes of messages in RAM (default: no paging)")
    args = parser.parse_args(argv)
    data_dir = None if args.in_memory else args.data_dir
    trio.run(run_client, data_dir, args.history, args.run, args.mode, args.seed, args.rate, args.hold_back,
             args.memory_target)


if __name__ == "__main__":
    main()
