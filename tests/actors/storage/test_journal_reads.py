"""A journal with a disk store keeps its events and snapshot on disk only, and reads them back from it.

Hypothesis drives a ``Journal`` on a ``DiskJournalStore`` and an in-memory one through the same writes
and compares what they answer (events, snapshot, count) after every step: with the writer thread
serving reads, and without it with the queue written or not at random points; also once reopened
from disk. Then RAM: appending durable publishes must not grow the heap per event. Refs a store
wrote read back as the same refs (a restart in the process keeps its consumers), refs of an earlier
process as gone ones; a store whose disk failed refuses a read rather than hang it.
"""

from __future__ import annotations

import gc
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Message, Publish, QueueConfig
from conveyor.actors.broker import _durable as durable
from conveyor.actors.storage import DiskJournalStore
from conveyor.runtime import ActorRef, Journal, ThreadSystem, TrioSystem
from conveyor.simulation import Simulation
from tests.actors.broker.clients import Action, consume, received
from tests.actors.broker.test_durable import CrashableQueue, CrashNow
from tests.actors.storage.helpers import RecordingFileSystem
from tests.actors.storage.test_journal_store import FakeSystem
from tests.actors.storage.test_journal_store import apply as apply_each
from tests.conftest import Harness, ThreadHarness, TrioHarness

Step = tuple[str, Any]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(-5, 5)),
        st.tuples(st.just("group"), st.lists(st.integers(-5, 5), max_size=4)),
        st.tuples(st.just("failed group"), st.lists(st.integers(-5, 5), max_size=3)),
        st.tuples(st.just("snapshot"), st.tuples(st.text(max_size=3), st.integers())),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("write"), st.none()),  # the writer writes what is queued (no thread)
    ),
    max_size=25,
)


def apply(journal: Journal, kind: str, value: Any) -> None:
    if kind == "failed group":
        with pytest.raises(KeyError), journal.atomic():
            for event in value:
                journal.append(event)
            raise KeyError("the handler failed inside the group")
    else:
        apply_each(journal, [(kind, value)])


def answers(journal: Journal) -> tuple[object, list[object], int, bool]:
    return journal.snapshot, list(journal), len(journal), bool(journal)


def follow(on_disk: Journal, in_memory: Journal, store: DiskJournalStore, operations: list[Step]) -> None:
    writes = in_memory.writes - on_disk.writes, in_memory.snapshots_saved - on_disk.snapshots_saved
    for kind, value in operations:
        if kind == "write":
            if not store._threaded:
                store.write_queued()
        else:
            apply(on_disk, kind, value)
            apply(in_memory, kind, value)
        assert answers(on_disk) == answers(in_memory)
        assert (in_memory.writes - on_disk.writes, in_memory.snapshots_saved - on_disk.snapshots_saved) == writes


@settings(max_examples=60, deadline=None)
@given(operations=steps, then=steps, threaded=st.booleans(), clean=st.booleans())
def test_a_journal_on_a_store_answers_as_one_in_memory_before_and_after_a_reopen(
    tmp_path_factory: Any, operations: list[Step], then: list[Step], threaded: bool, clean: bool
) -> None:
    directory = tmp_path_factory.mktemp("journals")
    synced = threading.Event()
    store = DiskJournalStore(directory, threaded=threaded)
    store.start(FakeSystem(lambda ref, message: synced.set()))  # type: ignore[arg-type]
    on_disk, in_memory = Journal("/a", None, store), Journal("/a")
    other = Journal("/b", None, store)  # another journal's writes between them
    other.append("b")
    follow(on_disk, in_memory, store, operations)
    assert list(other) == ["b"]
    if clean:
        store.close()
    else:  # the process dies once every write is synced, without a clean close
        on_disk.append("last")
        in_memory.append("last")
        store.notify_when_synced("me", "/a", on_disk.last_write)  # type: ignore[arg-type]
        if not threaded:
            store.write_queued()
        assert synced.wait(10)
    reopened = DiskJournalStore(directory, threaded=threaded)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    again = Journal("/a", None, reopened)
    assert bool(again) == bool(in_memory)
    follow(again, in_memory, reopened, then)
    reopened.close()
    if not clean:
        store.close()


def test_a_recovered_journal_counts_its_events_without_keeping_them(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path)
    store.start(FakeSystem())  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    journal.save_snapshot("base")
    for n in range(5):
        journal.append(n)
    store.close()
    reopened = DiskJournalStore(tmp_path)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    again = Journal("/a", None, reopened)
    assert repr(again) == "<Journal /a: a snapshot and some events>"  # not read yet
    assert len(again) == 5
    again.append(5)
    assert (again.snapshot, list(again), len(again)) == ("base", [0, 1, 2, 3, 4, 5], 6)
    reopened.close()


def test_reads_before_the_writer_starts_see_the_queue_and_it_is_written_after(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path)
    journal = Journal("/a", None, store)
    journal.append(1)
    journal.save_snapshot("s")
    journal.append(2)
    assert (journal.snapshot, list(journal)) == ("s", [2])  # no thread yet: read beside the queue
    store.start(FakeSystem())  # type: ignore[arg-type]
    journal.append(3)
    assert list(journal) == [2, 3]
    store.close()
    reopened = DiskJournalStore(tmp_path)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    again = Journal("/a", None, reopened)
    assert (again.snapshot, list(again)) == ("s", [2, 3])
    reopened.close()


def test_a_long_journal_reads_back_in_chunks_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from conveyor.actors.storage import _journal_store

    monkeypatch.setattr(_journal_store, "READ_CHUNK_BYTES", 64)  # a few records per answer of the writer
    monkeypatch.setattr(_journal_store, "EVENTS_RECORD_BYTES", 40)
    store = DiskJournalStore(tmp_path)
    store.start(FakeSystem())  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    for n in range(200):
        journal.append(("event", n))
    assert list(journal) == [("event", n) for n in range(200)]
    store.close()


# --- RAM ---------------------------------------------------------------------------------------


def test_ram_does_not_grow_with_the_events_of_a_journal_on_a_store(tmp_path: Path) -> None:
    # A durable paged queue's publish: a body-less Message's fields (about 250 bytes in RAM).
    store = DiskJournalStore(tmp_path, threaded=False)
    store.start(FakeSystem())  # type: ignore[arg-type]
    journal = Journal("/q", None, store)
    events = 20_000
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(events):
            message = Message(b"", headers=(("k", "v"),), message_id=f"message-{n}")
            journal.append(durable.recorded_call("publish_stored", (message, float(n), 1024)))
            if n % 100 == 99:  # the writer takes a batch
                store.write_queued()
        store.write_queued()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(journal) == events
    assert held / events < 40  # the store's table: one record per batch; nothing per event
    first = next(iter(journal))
    assert first == ("publish_stored", Message(b"", headers=(("k", "v"),), message_id="message-0"), 0.0, 1024)
    store.close()


# --- refs --------------------------------------------------------------------------------------


@attrs.frozen
class Names:
    ref: ActorRef


def test_a_ref_reads_back_as_itself_from_its_store_and_as_a_gone_ref_from_a_later_one(tmp_path: Path) -> None:
    sim = Simulation(seed=1)
    ref = sim.spawn(lambda: CrashableQueue(QueueConfig("q")), name="consumer")
    store = DiskJournalStore(tmp_path, threaded=False)
    store.start(FakeSystem())  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    journal.append(Names(ref))
    store.write_queued()
    journal.save_snapshot(Names(ref))
    assert list(journal) == []
    assert journal.snapshot == Names(ref)  # the same ref (refs compare by identity)
    journal.append(("publish", 1.0))
    assert journal.snapshot == Names(ref)  # a later write of another journal kept it
    store.close()
    reopened = DiskJournalStore(tmp_path, threaded=False)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    assert Journal("/a", None, reopened).snapshot == Names("gone:/consumer")  # type: ignore[arg-type]
    reopened.close()


async def _restart_keeps_the_consumer(harness: Harness) -> list[bytes]:
    queue = harness.spawn(lambda: CrashableQueue(QueueConfig("q", durable=True)), name="q")
    client, _ = consume(harness, queue, Action.ACK)
    for n in range(3):
        await harness.ask(queue, Publish(Message(f"m{n}".encode())))
    queue.tell(CrashNow())  # the replay reads the journal back from the store
    for n in range(3, 6):
        await harness.ask(queue, Publish(Message(f"m{n}".encode())))
    with trio.fail_after(10):
        while len(await received(harness, client)) < 6:
            await trio.sleep(0.01)
    return [body for body, _ in await received(harness, client)]


@pytest.mark.parametrize("backend", ["trio", "threads"])
def test_a_durable_queue_restarted_in_the_process_keeps_its_consumers_on_a_disk_store(
    tmp_path: Path, backend: str
) -> None:
    async def run() -> list[bytes]:
        if backend == "trio":
            async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
                return await _restart_keeps_the_consumer(TrioHarness(system))
        with ThreadSystem(journal_store=DiskJournalStore(tmp_path)) as threads:
            return await _restart_keeps_the_consumer(ThreadHarness(threads))

    assert sorted(trio.run(run)) == [f"m{n}".encode() for n in range(6)]


# --- a failed disk -----------------------------------------------------------------------------


class FailingWrites(RecordingFileSystem):
    """Every write to a segment fails, as on a full disk."""

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        raise OSError(28, "No space left on device")


def test_a_read_from_a_store_whose_disk_failed_raises_and_does_not_hang(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path, fs=FailingWrites())
    answered = threading.Event()
    store.start(FakeSystem(lambda ref, message: answered.set()))  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    journal.append(1)
    journal.when_synced("me")  # type: ignore[arg-type]
    for _ in range(1000):  # the writer takes the batch and fails
        if store.failure is not None:
            break
        threading.Event().wait(0.01)
    assert store.failure is not None and not answered.is_set()
    with pytest.raises(RuntimeError, match="cannot be read back"):
        list(journal)
    store.close()
