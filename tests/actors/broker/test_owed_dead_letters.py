"""A durable paged queue owes its dead letters: a failure while a body is read loses none (docs/storage.md).

A dead letter whose body is paged out waits for the store's read. If the queue fails before the read
comes back, its restart must still send it, once, in order (``_dead_letters``), whether it recovers
from events or from a snapshot. And a restart while the dead instance's job still runs on a thread
must not start a job of its own beside it (``_store_turn``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

from conveyor.actors.broker import (
    DEAD_LETTER_REASON,
    BodyPager,
    ConsumerActor,
    EntryList,
    GetStats,
    MatchAll,
    MemoryBodyStore,
    Message,
    Nack,
    Publish,
    Published,
    QueueActor,
    QueueConfig,
    QueueStats,
    _queue,
    run_page_batch,
)
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import ActorRef, EventKind, Journal, ThreadSystem
from tests.actors.broker.clients import Action, Client, GetSeen, Send, consume, received, seen
from tests.actors.broker.test_durable import CrashableQueue, CrashNow
from tests.conftest import Harness

BODY = 100


def body(n: int) -> bytes:
    return f"{n:04d}".encode() * (BODY // 4)


def owing_queue(dlq: ActorRef, **options: Any) -> QueueConfig:
    """Durable, every body paged out (target 0), dead-lettered at the first nack."""
    return QueueConfig("q", durable=True, memory_target_bytes=0, max_deliveries=1, dead_letter=dlq,
                       ack_deadline_s=60.0, **options)


class FailsWhileDeadLetterIsRead(QueueActor):
    """A real queue that fails once, right after a handler that left a dead letter waiting for its body
    (``compact``: having first replaced its journal's events by a snapshot)."""

    def __init__(self, config: QueueConfig, failed: list[bool], compact: bool) -> None:
        super().__init__(config)
        self.failed = failed
        self.compact = compact

    def receive(self, message: Any) -> None:
        super().receive(message)
        if self.outbox and not self.failed:  # the read was asked for (the store's job has it, or will)
            self.failed.append(True)
            if self.compact:
                self._compact_now()
                assert self.journal is not None and not list(self.journal)
            msg = "injected failure while a dead letter's body is read"
            raise RuntimeError(msg)


async def depth_reaches(backend: Harness, queue: ActorRef, depth: int) -> None:
    for _ in range(200):
        await backend.quiet()
        stats: QueueStats = await backend.ask(queue, GetStats())
        if stats.depth >= depth:
            return
        await backend.elapse(0.02)
    raise AssertionError(f"{queue} never held {depth} messages")


@pytest.mark.parametrize("compacted", [False, True], ids=["events", "snapshot"])
async def test_a_dead_letter_whose_body_is_read_when_the_queue_fails_still_arrives(
    backend: Harness, compacted: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    if compacted:  # the queue compacts just before it fails: the owed dead letter is recovered from a snapshot
        monkeypatch.setattr(_queue, "needs_compaction", lambda *args: True)
    dlq = backend.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
    failed: list[bool] = []
    config = owing_queue(dlq)
    queue = backend.spawn(lambda: FailsWhileDeadLetterIsRead(config, failed, compacted), name="q")
    for n in range(3):
        assert type(await backend.ask(queue, Publish(Message(body(n), message_id=str(n))))) is Published
    consume(backend, queue, Action.NACK)  # each delivery nacked once: a dead letter
    await depth_reaches(backend, dlq, 3)

    assert failed, "the queue failed while a dead letter waited for its body"
    await backend.elapse(0.1)
    assert (await backend.ask(dlq, GetStats())).published == 3  # each sent once
    stats: QueueStats = await backend.ask(queue, GetStats())
    assert (stats.dead_lettered, stats.depth, stats.in_flight) == (3, 0, 0)
    client, _ = consume(backend, dlq, Action.IGNORE)
    for _ in range(200):
        if len(await received(backend, client)) == 3:
            break
        await backend.elapse(0.02)
    assert await received(backend, client) == [(body(n), 1) for n in range(3)]  # with their bodies, in order
    assert {s.delivery.message.header_map()[DEAD_LETTER_REASON] for s in await seen(backend, client)} == {
        "delivery-limit"
    }


# --- two instances, one store -------------------------------------------------------------------


class GatedStore:
    """A durable body store (a dict) whose reads wait while ``gate`` is shut, noting any call made while
    another is inside: two jobs at once."""

    def __init__(self, fail_held: bool = False) -> None:
        self.fail_held = fail_held  # the held read raises once the gate opens
        self.inner = MemoryBodyStore(durable=True)
        self.generation = 0
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()  # a read is waiting at the gate
        self.inside: list[str] = []
        self.overlaps: list[str] = []
        self.reads: list[tuple[int, ...]] = []

    @contextmanager
    def _call(self, what: str) -> Iterator[None]:
        if self.inside:
            self.overlaps.append(f"{what} while {self.inside} ran")
        self.inside.append(what)
        try:
            yield
        finally:
            self.inside.remove(what)

    def write(self, bodies: Any) -> None:
        with self._call("write"):
            self.inner.write(bodies)

    def read(self, seqs: Any) -> list[bytes | None]:
        with self._call("read"):
            self.reads.append(tuple(seqs))
            if not self.gate.is_set():
                self.held.set()
                assert self.gate.wait(10)
                if self.fail_held:
                    msg = "injected disk error in the held read"
                    raise OSError(msg)
            return self.inner.read(seqs)

    def delete(self, seqs: Any) -> None:
        with self._call("delete"):
            self.inner.delete(seqs)

    def forget_from(self, seq: int) -> None:
        with self._call("forget"):
            self.inner.forget_from(seq)


class GatedQueue(CrashableQueue):
    """A crashable durable queue whose body store is the test's."""

    def __init__(self, config: QueueConfig, store: GatedStore) -> None:
        super().__init__(config)
        self.store = store

    def make_durable_body_store(self, journal: Journal) -> Any:
        journal.attached["bodies"] = self.store
        return self.store


@attrs.frozen
class HeldJobRun:
    """What ``run_with_a_held_job`` saw."""

    overlaps: list[str]
    reads_while_held: list[tuple[int, ...]]
    last_read: tuple[int, ...]
    dead_letters: QueueStats
    failures: list[str]


def run_with_a_held_job(tmp_path: Path, store: GatedStore) -> HeldJobRun:
    """On threads: a nack dead-letters a paged message; its read is held at the store's gate while the
    queue is made to fail; the restarted instance gets the time to start a job; then the gate opens."""
    with ThreadSystem(journal_store=DiskJournalStore(tmp_path), trace=True) as system:
        dlq = system.spawn(lambda: QueueActor(QueueConfig("dlq")), name="dlq")
        queue = system.spawn(lambda: GatedQueue(owing_queue(dlq), store), name="q")
        assert type(system.ask(queue, Publish(Message(body(0), message_id="0")))) is Published
        client = system.spawn(lambda: Client(Action.IGNORE), name="client")
        system.spawn(lambda: ConsumerActor(queue, client), name="consumer")
        deadline = time.monotonic() + 10
        while not system.ask(client, GetSeen()):
            assert time.monotonic() < deadline, "the message was never delivered"
            time.sleep(0.005)
        delivery = system.ask(client, GetSeen())[0].delivery
        store.gate.clear()
        system.ask(client, Send(Nack(delivery.consumer_id, (delivery.tag,))))
        assert store.held.wait(10)  # the dead letter's read is inside the queue's job, held
        reads = len(store.reads)
        queue.tell(CrashNow())
        system.ask(queue, GetStats())  # the restarted instance has recovered, and handled a message
        time.sleep(0.2)  # room for a job of its own to start beside the held one, which it must not
        reads_while_held = store.reads[reads:]
        store.gate.set()
        deadline = time.monotonic() + 10
        while system.ask(dlq, GetStats()).depth < 1:
            assert time.monotonic() < deadline, "the dead letter never arrived"
            time.sleep(0.005)
        assert system.wait_quiet(10)
        dead = system.ask(dlq, GetStats())
        failures = [event.error or "" for event in system.trace
                    if event.kind is EventKind.FAILED and event.receiver == "/q"]
    return HeldJobRun(store.overlaps, reads_while_held, store.reads[-1], dead, failures)


def test_a_restarted_queue_starts_no_job_while_the_dead_instances_job_runs(tmp_path: Path) -> None:
    run = run_with_a_held_job(tmp_path, GatedStore())
    assert run.overlaps == []
    assert run.reads_while_held == []  # the restarted instance read nothing while the held job ran
    assert run.last_read == (1,)  # then it read the body, and sent the dead letter once
    assert (run.dead_letters.depth, run.dead_letters.published) == (1, 1)
    assert len(run.failures) == 1  # the injected one


def test_a_restarted_queue_drops_a_store_whose_dead_job_failed(tmp_path: Path) -> None:
    # The held job fails once the gate opens: the store may be half-changed, so the instance that
    # waited for it fails too (PagingFailed) and the next one reopens it, then sends the dead letter.
    run = run_with_a_held_job(tmp_path, GatedStore(fail_held=True))
    assert run.overlaps == []
    assert run.reads_while_held == []
    assert (run.dead_letters.depth, run.dead_letters.published) == (1, 1)
    assert len(run.failures) == 2
    assert "PagingFailed" in run.failures[1]
    assert "earlier instance" in run.failures[1]


# --- the pager keeps an owed dead letter's body ---------------------------------------------------


def test_an_owed_dead_letters_body_stays_in_the_store_until_released() -> None:
    entries = EntryList(1, max_deliveries=1)
    pager = BodyPager(entries, 1_000, durable=True)
    store = MemoryBodyStore(durable=True)
    entries.add_consumer(1, MatchAll(), 0, True)
    entry = entries.publish(Message(b"body"), 0.0)
    pager.published(entry)
    pager.balance()
    batch = pager.take_batch()
    assert batch is not None
    pager.loaded(run_page_batch(store, batch))  # written through, as a durable queue's bodies are
    taken, _, _ = entries.take(1, 0.0, 1, 1_000, 60.0)
    assert taken == [entry]
    assert entries.give_back(1, (entry.seq,), 0.0, 0.0).dead_lettered == (entry,)
    pager.keep(entry.seq)  # its dead letter is owed
    pager.balance()
    assert pager.take_batch() is None  # settled, but its body stays
    assert store.bodies == {entry.seq: b"body"}
    pager.release_kept(entry.seq)  # sent: now it goes, as a settled entry's body does
    batch = pager.take_batch()
    assert batch is not None and batch.deletes == (entry.seq,)
    pager.loaded(run_page_batch(store, batch))
    assert store.bodies == {}
