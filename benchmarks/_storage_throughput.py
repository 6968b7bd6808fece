"""The storage benchmark's throughput row: durable publish with confirms, then consume and ack, on disk.

conveyor: a ``TrioSystem`` whose journals live in a ``DiskJournalStore`` (``journal_store=``) runs
one durable ``QueueActor``; a publisher actor keeps ``window`` ``Publish`` unconfirmed (a confirm,
``Published``, leaves only after the store synced the write); then a ``ConsumerActor`` with a
prefetch of 100 hands the messages to a client that acks 50 at a time. RabbitMQ (``_rabbitmq``)
does the same with pika: same messages, window, prefetch and acks.
"""

from __future__ import annotations

import gc
import tempfile
import time
from typing import Any

import attrs
import trio

from conveyor.actors.broker import ConsumerActor, ConsumerSettings, GetStats, Message, Publish, QueueActor, QueueConfig
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import Actor, ActorRef, TrioSystem

from ._clients import BatchAckingClient, GetCount
from ._common import check_equal
from ._storage_core import distinct_body

ACK_DEADLINE_S = 600.0
"""Long enough that no lease lapses during a run (a redelivery would be a wrong count)."""
POLL_S = 0.002
WAIT_S = 300.0


@attrs.frozen
class Phases:
    """Seconds to publish every message with its confirm, then to consume and ack them all; and fsyncs.

    The CPU seconds of each phase are every process's involved (client and server): a figure the
    machine's other load changes less than the wall-clock one.
    """

    publish_s: float
    consume_s: float
    publish_cpu_s: float
    consume_cpu_s: float
    syncs: int = 0


@attrs.frozen
class _Go:
    """Starts the windowed publisher."""


class WindowedPublisher(Actor):
    """Publishes ``total`` messages of ``body``, keeping at most ``window`` unconfirmed; counts confirms.

    With ``distinct``, each message gets a body of its own of ``len(body)`` bytes.
    """

    def __init__(self, queue: ActorRef, total: int, window: int, body: bytes, distinct: bool = False) -> None:
        self.queue = queue
        self.total = total
        self.window = window
        self.body = body
        self.distinct = distinct
        self.sent = 0
        self.confirmed = 0

    def receive(self, message: object) -> None:
        """``_Go`` starts; each confirm lets one more publish go; ``GetCount`` asks for the confirms."""
        if type(message) is GetCount:
            self.ctx.reply(self.confirmed)
            return
        if type(message) is not _Go:
            self.confirmed += 1  # a Published (a refusal would fail the count check at the end)
        send, queue, body = self.ctx.send, self.queue, self.body
        while self.sent < self.total and self.sent - self.confirmed < self.window:
            send(queue, Publish(Message(distinct_body(self.sent, len(body)) if self.distinct else body)))
            self.sent += 1


async def _until(system: TrioSystem, ref: ActorRef, question: object, done: int, what: str) -> None:
    """Poll ``ref`` with ``question`` until it answers ``done`` (a count); raise if it never does."""
    deadline = time.perf_counter() + WAIT_S
    while True:
        got = await system.ask(ref, question, timeout=30)
        if got == done:
            return
        if time.perf_counter() > deadline:
            check_equal("conveyor", what, done, got)
        await trio.sleep(POLL_S)


async def _conveyor(directory: str, messages: int, body: bytes, window: int, prefetch: int, ack_every: int) -> Phases:
    store = DiskJournalStore(directory)
    async with TrioSystem(journal_store=store) as system:
        config = QueueConfig("bench", ack_deadline_s=ACK_DEADLINE_S, durable=True)
        queue = system.spawn(lambda: QueueActor(config), name="q")
        publisher = system.spawn(lambda: WindowedPublisher(queue, messages, window, body), name="publisher")
        await system.wait_quiet()
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        publisher.tell(_Go())
        await _until(system, publisher, GetCount(), messages, "confirms")
        publish_s, publish_cpu_s = time.perf_counter() - start, time.process_time() - cpu
        syncs = store.batches
        client = system.spawn(lambda: BatchAckingClient(ack_every), name="client")
        start, cpu = time.perf_counter(), time.process_time()
        system.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=prefetch)),
                     name="consumer")
        deadline = start + WAIT_S
        while True:
            stats = await system.ask(queue, GetStats(), timeout=30)
            if stats.acked >= messages or time.perf_counter() > deadline:
                break
            await trio.sleep(POLL_S)
        consume_s, consume_cpu_s = time.perf_counter() - start, time.process_time() - cpu
        check_equal("conveyor", "acked", messages, stats.acked)
        check_equal("conveyor", "published", messages, stats.published)
    return Phases(publish_s, consume_s, publish_cpu_s, consume_cpu_s, syncs)


def conveyor_phases(messages: int, body: bytes, window: int, prefetch: int, ack_every: int,
                    directory: str | None = None) -> Phases:
    """Run conveyor's side once in a fresh data directory (under ``directory``, default the temp dir)."""
    with tempfile.TemporaryDirectory(dir=directory, prefix="storage-bench-") as data:
        return trio.run(_conveyor, data, messages, body, window, prefetch, ack_every)


def rabbitmq_phases(messages: int, body: bytes, window: int, prefetch: int, ack_every: int) -> Phases | str:
    """Run RabbitMQ's side once on a private node; the reason instead when it cannot run here."""
    from ._rabbitmq import consume_acked, publish_confirmed, rabbit_node, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        return reason
    try:
        with rabbit_node() as node:
            cpu, server = time.process_time(), node.cpu_seconds()
            publish_s = publish_confirmed(node, messages, body, window)
            cpu_after, server_after = time.process_time(), node.cpu_seconds()
            publish_cpu_s = cpu_after - cpu + server_after - server
            consume_s = consume_acked(node, messages, prefetch, ack_every)
            consume_cpu_s = time.process_time() - cpu_after + node.cpu_seconds() - server_after
    except RuntimeError as error:
        return f"RabbitMQ failed: {error}"
    return Phases(publish_s, consume_s, publish_cpu_s, consume_cpu_s)


# --- the memory row's broker path: a queue filled in a child process (durable, or paged when it can) ------


def memory_option(explicit: str | None = None) -> str | None:
    """The ``QueueConfig`` field that sets a paged queue's memory target in bytes, if the broker has one.

    ``explicit`` names it; otherwise the first field whose name starts with ``memory_target`` is
    taken (issue 18 item 2 adds it); None means the broker queue does not page yet.
    """
    names = [field.name for field in attrs.fields(QueueConfig)]
    if explicit is not None:
        if explicit not in names:
            msg = f"broker memory option must be a QueueConfig field, one of {names}; got {explicit!r}"
            raise ValueError(msg)
        return explicit
    return next((name for name in names if name.startswith("memory_target")), None)


async def _fill(directory: str, messages: int, body: bytes, window: int, option: str | None, target: int) -> float:
    async with TrioSystem(journal_store=DiskJournalStore(directory)) as system:
        config = QueueConfig("bench", ack_deadline_s=ACK_DEADLINE_S, durable=True)
        if option is not None:  # a durable queue pages its bodies into a synced store beside its journal
            paging: dict[str, Any] = {option: target}  # a field this module may not know the type of
            config = attrs.evolve(config, **paging)
        queue = system.spawn(lambda: QueueActor(config), name="q")
        publisher = system.spawn(lambda: WindowedPublisher(queue, messages, window, body, distinct=True),
                                 name="publisher")
        await system.wait_quiet()
        start = time.perf_counter()
        publisher.tell(_Go())
        await _until(system, publisher, GetCount(), messages, "confirms")
        seconds = time.perf_counter() - start
        stats = await system.ask(queue, GetStats(), timeout=30)
        check_equal("broker queue", "messages queued", messages, stats.depth)
    return messages / seconds


def _cli() -> None:
    import argparse
    import json
    import resource

    parser = argparse.ArgumentParser(description="fill a durable broker queue (the storage benchmark's memory row)")
    parser.add_argument("--dir", required=True)
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--option", default=None, help="QueueConfig field of the memory target (none: no paging)")
    parser.add_argument("--target", type=int, default=0, help="memory target in bytes")
    arguments = parser.parse_args()
    rate = trio.run(_fill, arguments.dir, arguments.messages, bytes(arguments.size), arguments.window,
                    arguments.option, arguments.target)
    print(json.dumps({"publish_per_s": rate,
                      "peak_rss": float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}))


if __name__ == "__main__":
    _cli()
