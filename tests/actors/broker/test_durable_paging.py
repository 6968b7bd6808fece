"""A durable queue that pages (``QueueConfig(durable=True, memory_target_bytes=...)``).

Its bodies go to a synced body store beside its journal; the journal keeps none. What must hold:
a confirmed message survives a new process with its body, in order; a confirm waits for the body's
sync; the journal's events hold no body; a body the store lost (a publish never confirmed) drops its
entry instead of failing the queue; acked bodies leave the store. ``pytest --force-paging=BYTES``
runs the rest of the durable suites paged (tests/actors/broker/paging.py).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import trio

from conveyor.actors.broker import (
    ConsumerActor,
    ConsumerSettings,
    GetStats,
    MemoryBodyStore,
    Message,
    Publish,
    Published,
    QueueActor,
    QueueConfig,
    QueueStats,
)
from conveyor.actors.storage import DiskJournalStore, SegmentLog
from conveyor.runtime import TrioSystem
from conveyor.simulation import Simulation
from tests.actors.broker.clients import Action, Client, GetSeen, consume
from tests.actors.broker.test_durable import CrashableQueue, CrashNow
from tests.actors.storage.helpers import RecordingFileSystem

BODY = 100
TARGET = 3 * BODY


def body(n: int) -> bytes:
    return f"{n:04d}".encode() * (BODY // 4)


def durable_paged(name: str = "q", **options: Any) -> QueueConfig:
    return QueueConfig(name, durable=True, memory_target_bytes=TARGET, ack_deadline_s=60.0, **options)


def test_a_durable_paged_queue_keeps_its_bodies_on_disk_and_none_in_its_journal(tmp_path: Path) -> None:
    count = 40

    async def first() -> tuple[QueueStats, list[object]]:
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
            queue = system.spawn(lambda: QueueActor(durable_paged()), name="q")
            answers = [await system.ask(queue, Publish(Message(body(n), message_id=str(n)))) for n in range(count)]
            assert [type(a) for a in answers] == [Published] * count
            await system.wait_quiet()
            events = list(system.journals["/q"])
            return await system.ask(queue, GetStats()), events

    before, events = trio.run(first)
    assert before.depth == count
    assert before.body_bytes_in_ram is not None and before.body_bytes_in_ram <= TARGET
    assert before.bodies_paged >= count - TARGET // BODY
    assert before.entries_out_of_ram >= count - 2 * 4  # the deep tail's entries in deltas (chunks of 2, 4 kept)
    assert not [arg for event in events for arg in getattr(event, "args", ()) if getattr(arg, "body", b"")]
    bodies = tmp_path / "bodies"
    assert [p.name for p in bodies.iterdir()] == ["%2Fq"]

    async def second() -> tuple[list[tuple[bytes, int]], QueueStats]:
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
            queue = system.spawn(lambda: QueueActor(durable_paged()), name="q")
            recovered: QueueStats = await system.ask(queue, GetStats())
            assert recovered.entries_out_of_ram == before.entries_out_of_ram  # the deltas came back as deltas
            client, _ = consume(system_harness(system), queue, Action.ACK,
                                settings=ConsumerSettings(prefetch_messages=4))
            with trio.fail_after(20):
                while (await system.ask(queue, GetStats())).acked < count:
                    await trio.sleep(0.01)
            # A confirmed publish after the acks: its JournalSynced covers them, which lets their bodies go.
            assert type(await system.ask(queue, Publish(Message(b"last", message_id="last")))) is Published
            await system.wait_quiet()
            seen = await system.ask(client, GetSeen())
            return [(s.body, s.count) for s in seen], await system.ask(queue, GetStats())

    got, after = trio.run(second)
    assert got[:count] == [(body(n), 1) for n in range(count)]  # every body, once, in order
    assert after.acked == count + 1  # and "last"
    log = SegmentLog(str(bodies / "%2Fq"))
    try:
        assert log.keys() in ([], [(count + 1).to_bytes(8, "big")])  # the acked bodies left (but "last"'s, maybe)
    finally:
        log.close()


class _Harness:
    """Enough of tests.conftest.Harness for ``consume``: spawn on a system."""

    def __init__(self, system: TrioSystem) -> None:
        self.system = system

    def spawn(self, factory: Any, *, name: str | None = None) -> Any:
        return self.system.spawn(factory, name=name)


def system_harness(system: TrioSystem) -> Any:
    """A ``Harness`` stand-in for ``consume`` inside a test's own system."""
    return _Harness(system)


class GateBodies(RecordingFileSystem):
    """A disk whose body-store writes wait until the test opens the gate (the journal's go through)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.bodies: set[int] = set()

    def open_append(self, path: str) -> int:
        fd = super().open_append(path)
        if f"{os.sep}bodies{os.sep}" in path:
            self.bodies.add(fd)
        return fd

    def close(self, fd: int) -> None:
        self.bodies.discard(fd)
        super().close(fd)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        if fd in self.bodies:
            self.entered.set()
            assert self.gate.wait(10)
        super().write(fd, data)


def test_a_publish_is_confirmed_only_once_its_body_is_synced(tmp_path: Path) -> None:
    disk = GateBodies()

    async def run() -> tuple[list[object], list[object]]:
        answers: list[object] = []
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path, fs=disk)) as system:
            queue = system.spawn(lambda: QueueActor(durable_paged()), name="q")

            async def publish() -> None:
                answers.append(await system.ask(queue, Publish(Message(b"m", message_id="1")), 10.0))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(publish)
                try:
                    await trio.to_thread.run_sync(disk.entered.wait, 10)  # the body's write is held
                    await trio.sleep(0.2)  # time for the journal's own sync and its JournalSynced
                    held = list(answers)
                finally:
                    disk.gate.set()
        return held, answers

    held, answers = trio.run(run)
    assert held == []  # the journal was synced, the body was not: no confirm yet
    assert [type(a) for a in answers] == [Published]


def test_a_body_the_store_lost_drops_its_entry_and_the_rest_is_delivered() -> None:
    # A publish whose journal write outlived its body was never confirmed: the recovered queue
    # drops it when it finds the body missing, and delivers the others, in order.
    sim = Simulation(seed=5, trace=False)
    queue = sim.spawn(lambda: CrashableQueue(durable_paged()), name="q")
    for n in range(5):
        queue.tell(Publish(Message(body(n), message_id=str(n))))
    sim.run()
    store = sim.journals["/q"].attached["bodies"]
    assert isinstance(store, MemoryBodyStore) and sorted(k for k in store.bodies if k > 0) == [1, 2, 3, 4, 5]
    del store.bodies[3]  # the body of message 2 (seq 3) never reached the store
    queue.tell(CrashNow())
    sim.run()
    client = sim.spawn(Client, name="client")  # acks every delivery
    sim.spawn(lambda: ConsumerActor(queue, client, ConsumerSettings(prefetch_messages=2)), name="consumer")
    sim.run()
    seen = sim.ask(client, GetSeen())
    assert [s.body for s in seen] == [body(n) for n in (0, 1, 3, 4)]
    stats: QueueStats = sim.ask(queue, GetStats())
    assert (stats.depth, stats.in_flight, stats.acked) == (0, 0, 4)
    assert store.bodies == {}  # acked bodies left the store
