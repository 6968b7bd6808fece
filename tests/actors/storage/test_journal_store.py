"""DiskJournalStore: actor journals on disk, recovered by the next process; confirms wait for the sync.

The store is checked on its own (what a journal wrote comes back, whatever mix of events, groups,
snapshots and clears; hypothesis against the in-memory journal), then under a real durable queue on
``TrioSystem``: a copy of the data directory taken while publishes are in flight stands for a kill -9
at that instant, and a new system opened on the copy must hold every message confirmed before it.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import GetStats, Message, Publish, Published, QueueActor, QueueConfig, QueueStats
from conveyor.actors.storage import DiskJournalStore, SegmentLog, recover_journals
from conveyor.actors.storage import _journal_store as journal_store_module
from conveyor.runtime import ActorRef, Journal, JournalSynced, TrioSystem
from tests.actors.broker.clients import Action, consume, received
from tests.actors.storage.helpers import RecordingFileSystem
from tests.conftest import TrioHarness

# --- the store on its own -----------------------------------------------------------------------


class FakeSystem:
    """What a store needs of its system: where ``JournalSynced`` goes, and refs of a past process."""

    def __init__(self, on_tell: Callable[[object, object], None] = lambda ref, message: None) -> None:
        self.on_tell = on_tell

    def tell_from_thread(self, ref: object, message: object) -> None:
        self.on_tell(ref, message)

    def gone_ref(self, path: str) -> str:
        return f"gone:{path}"


Op = tuple[str, Any]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers()),
        st.tuples(st.just("group"), st.lists(st.integers(), max_size=4)),
        st.tuples(st.just("snapshot"), st.integers()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=30,
)


def apply(journal: Journal, operations: list[Op]) -> None:
    for kind, value in operations:
        if kind == "append":
            journal.append(value)
        elif kind == "group":
            with journal.atomic():
                for event in value:
                    journal.append(event)
        elif kind == "snapshot":
            journal.save_snapshot(value)
        else:
            journal.clear()


@settings(max_examples=40, deadline=None)
@given(operations=ops, clean=st.booleans())
def test_a_reopened_store_gives_back_what_each_journal_held(tmp_path_factory: Any, operations: list[Op],
                                                             clean: bool) -> None:
    directory = tmp_path_factory.mktemp("journals")
    store = DiskJournalStore(directory)
    synced = threading.Event()
    store.start(FakeSystem(lambda ref, message: synced.set()))  # type: ignore[arg-type]
    on_disk = Journal("/a", None, store)
    in_memory = Journal("/a")
    other = Journal("/b", None, store)
    apply(on_disk, operations)
    apply(in_memory, operations)
    other.append("b's own")
    if clean:
        store.close()
    else:  # once synced, the process "dies": the disk as it is then, without a clean close
        store.notify_when_synced("me", "/b", other.last_write)  # type: ignore[arg-type]
        assert synced.wait(10)
        crashed = directory.with_name(directory.name + "-crash")
        shutil.copytree(directory, crashed)
        store.close()
        directory = crashed
    reopened = DiskJournalStore(directory)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    again = Journal("/a", None, reopened)
    assert (again.snapshot, list(again)) == (in_memory.snapshot, list(in_memory))
    assert list(Journal("/b", None, reopened)) == ["b's own"]
    reopened.close()


def test_a_value_that_cannot_be_stored_fails_the_write_and_changes_nothing(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path)
    store.start(FakeSystem())  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    journal.append(1)
    with pytest.raises(Exception, match="pickle"):
        journal.append(lambda: None)
    assert (list(journal), journal.writes) == ([1], 1)
    store.close()
    reopened = DiskJournalStore(tmp_path)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    assert list(Journal("/a", None, reopened)) == [1]
    reopened.close()


def test_the_store_answers_a_sync_request_after_the_writes_it_waits_for(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path)
    answers: list[object] = []
    store.start(FakeSystem(lambda ref, message: answers.append((ref, message))))  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    journal.append("x")
    journal.when_synced("me")  # type: ignore[arg-type]
    store.close()
    assert answers == [("me", JournalSynced("/a", journal.last_write))]
    assert store.batches >= 1


def test_one_batch_answers_each_asker_once_with_the_highest_write_it_asked_for(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path)
    answers: list[object] = []
    journal_a, journal_b = Journal("/a", None, store), Journal("/b", None, store)
    for value in range(3):  # queued before the writer starts, so it takes them all as one batch
        journal_a.append(value)
        journal_a.when_synced("me")  # type: ignore[arg-type]
    journal_b.append("y")
    journal_b.when_synced("me")  # type: ignore[arg-type]
    journal_b.when_synced("you")  # type: ignore[arg-type]
    store.start(FakeSystem(lambda ref, message: answers.append((ref, message))))  # type: ignore[arg-type]
    store.close()
    assert store.batches == 1
    assert answers == [("me", JournalSynced("/a", journal_a.last_write)),
                       ("me", JournalSynced("/b", journal_b.last_write)),
                       ("you", JournalSynced("/b", journal_b.last_write))]


def test_an_answer_names_the_highest_write_synced_and_a_request_already_synced_waits_for_no_fsync(
    tmp_path: Path,
) -> None:
    store = DiskJournalStore(tmp_path, threaded=False)
    answers: list[tuple[object, object, int]] = []  # (asker, answer, batches synced when it was sent)
    store.start(FakeSystem(lambda ref, message: answers.append((ref, message, store.batches))))  # type: ignore[arg-type]
    journal = Journal("/a", None, store)
    journal.append("x")
    journal.when_synced("me")  # type: ignore[arg-type]
    asked = journal.last_write
    journal.append("y")  # after the request, in the same batch: synced by the same fsync
    store.write_queued()
    assert answers == [("me", JournalSynced("/a", journal.last_write), 1)]
    assert journal.last_write > asked
    journal.when_synced("you")  # type: ignore[arg-type]  # everything it waits for is on disk
    journal.append("z")
    store.write_queued()
    # answered as the writer took it, before this batch's fsync, with what was synced then
    assert answers[1:] == [("you", JournalSynced("/a", journal.last_write - 1), 1)]
    assert store.batches == 2
    store.close()


def test_encoding_is_the_same_after_a_large_value_and_after_a_value_that_cannot_be_pickled() -> None:
    # The thread's pickler is reused: its memo must start empty for every value, or a value would
    # refer to objects of an earlier one (and decode wrong in another process).
    encode = journal_store_module.encode_value

    def decode(data: bytes) -> object:
        return journal_store_module.decode_value(data, lambda path: path)

    small = ("publish", 0.0, b"body", (("k", "v"),), 4, None, None, None, "id")
    first = encode(small)
    large = [("text", str(n), b"x" * 10) for n in range(2000)]
    assert decode(encode(large)) == large
    with pytest.raises(Exception, match="pickle"):
        encode(("publish", lambda: None))
    assert encode(small) == first
    assert encode(small) == first
    assert decode(first) == small


def test_a_journals_event_writes_of_one_batch_are_one_record_that_reads_back_in_order(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path)
    journal_a, journal_b = Journal("/a", None, store), Journal("/b", None, store)
    for value in range(3):  # queued before the writer starts: one batch
        journal_a.append(value)
        journal_b.append(-value)
    with journal_a.atomic():
        journal_a.append(3)
        journal_a.append(4)
    journal_a.save_snapshot("s")
    journal_a.append(5)
    journal_a.append(6)
    store.start(FakeSystem())  # type: ignore[arg-type]
    store.close()
    log = SegmentLog(tmp_path)
    _, live = recover_journals(log)
    log.close()
    assert live == {"/a": [2, 3], "/b": [1]}  # events, snapshot (deleting them), events; and /b's events
    reopened = DiskJournalStore(tmp_path)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    recovered_a, recovered_b = Journal("/a", None, reopened), Journal("/b", None, reopened)
    assert (recovered_a.snapshot, list(recovered_a), list(recovered_b)) == ("s", [5, 6], [0, -1, -2])
    reopened.close()


def test_joined_event_records_stay_under_their_size_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_store_module, "EVENTS_RECORD_BYTES", 1)  # every write fills a record
    store = DiskJournalStore(tmp_path)
    journal = Journal("/a", None, store)
    for value in range(3):
        journal.append(value)
    store.start(FakeSystem())  # type: ignore[arg-type]
    store.close()
    log = SegmentLog(tmp_path)
    assert recover_journals(log)[1] == {"/a": [1, 2, 3]}
    log.close()
    reopened = DiskJournalStore(tmp_path)
    reopened.start(FakeSystem())  # type: ignore[arg-type]
    assert list(Journal("/a", None, reopened)) == [0, 1, 2]
    reopened.close()


# --- a durable queue on TrioSystem ------------------------------------------------------------


class SlowDisk(RecordingFileSystem):
    """Each write reaches the file a little late, so a confirm sent before its write would show."""

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        time.sleep(0.002)
        super().write(fd, data)


async def _publish_and_crash(data: Path, crash_copy: Path, total: int, copy_after: int) -> list[Published]:
    """Publish ``total`` messages with confirms; copy the data directory once ``copy_after`` are confirmed."""
    confirmed: list[Published] = []
    at_copy: list[Published] = []
    async with TrioSystem(journal_store=DiskJournalStore(data, fs=SlowDisk())) as system:
        queue = system.spawn(lambda: QueueActor(QueueConfig("q", durable=True)), name="q")

        async def publish(n: int) -> None:
            answer = await system.ask(queue, Publish(Message(f"m{n}".encode(), message_id=str(n))), 10.0)
            assert type(answer) is Published
            confirmed.append(answer)
            if len(confirmed) == copy_after:
                shutil.copytree(data, crash_copy)  # the disk as a kill -9 now would leave it
                at_copy.extend(confirmed)

        async with trio.open_nursery() as nursery:
            for n in range(total):
                nursery.start_soon(publish, n)
    return at_copy


async def _reopen(data: Path) -> tuple[QueueStats, list[bytes]]:
    async with TrioSystem(journal_store=DiskJournalStore(data)) as system:
        harness = TrioHarness(system)
        queue = system.spawn(lambda: QueueActor(QueueConfig("q", durable=True)), name="q")
        stats: QueueStats = await system.ask(queue, GetStats())
        client, _ = consume(harness, queue, Action.ACK)
        with trio.fail_after(10):
            while len(await received(harness, client)) < stats.depth:
                await trio.sleep(0.01)
        bodies = [body for body, _ in await received(harness, client)]
    return stats, bodies


def test_every_confirmed_message_survives_a_crash_in_order(tmp_path: Path) -> None:
    data, crash = tmp_path / "data", tmp_path / "crash"
    confirmed = trio.run(_publish_and_crash, data, crash, 300, 150)
    assert len(confirmed) == 150
    stats, bodies = trio.run(_reopen, crash)
    kept = {body.decode() for body in bodies}
    lost = [c.message_id for c in confirmed if f"m{c.message_id}" not in kept]
    assert lost == []
    by_seq = [f"m{c.message_id}".encode() for c in sorted(confirmed, key=lambda c: c.tag)]
    assert [b for b in bodies if b in set(by_seq)] == by_seq  # queue order kept
    assert stats.depth == len(bodies)


def test_a_clean_stop_keeps_every_message_too(tmp_path: Path) -> None:
    trio.run(_publish_and_crash, tmp_path / "data", tmp_path / "unused", 50, 10**9)
    _, bodies = trio.run(_reopen, tmp_path / "data")
    assert sorted(bodies) == sorted(f"m{n}".encode() for n in range(50))


class GateDisk(RecordingFileSystem):
    """A disk whose journal writes wait until the test opens the gate (a paged queue's body store's do not:
    its job would keep the system from ever being quiet)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.bodies: set[int] = set()  # fds of the body store's files

    def open_append(self, path: str) -> int:
        fd = super().open_append(path)
        if f"{os.sep}bodies{os.sep}" in path:
            self.bodies.add(fd)
        return fd

    def close(self, fd: int) -> None:
        self.bodies.discard(fd)  # the number may come back for a journal file
        super().close(fd)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> None:
        if fd not in self.bodies:
            self.entered.set()
            assert self.gate.wait(10)
        super().write(fd, data)


def test_a_publish_is_confirmed_only_once_its_write_is_synced(tmp_path: Path) -> None:
    disk = GateDisk()

    async def run() -> list[object]:
        answers: list[object] = []
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path, fs=disk)) as system:
            queue = system.spawn(lambda: QueueActor(QueueConfig("q", durable=True)), name="q")

            async def publish() -> None:
                answers.append(await system.ask(queue, Publish(Message(b"m", message_id="1")), 10.0))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(publish)
                try:
                    await trio.to_thread.run_sync(disk.entered.wait, 10)  # the writer holds the publish's write
                    await system.wait_quiet()
                    held = list(answers)  # handled, queued for the disk, not yet on it: no confirm
                finally:
                    disk.gate.set()
        assert held == []
        return answers

    answers = trio.run(run)
    assert [type(a) for a in answers] == [Published]
    assert len(disk.operations) >= 2 and "fsync" in disk.operations  # the confirm came after a sync


def test_a_queue_keeps_one_sync_request_in_flight_and_still_confirms_every_publish(tmp_path: Path) -> None:
    # While the writer holds the first publish's batch, twenty more are written but not asked for;
    # the answer to the first request leads to one more request, which covers all of them.
    disk = GateDisk()
    store = DiskJournalStore(tmp_path, fs=disk)
    asked: list[int] = []
    notify = store.notify_when_synced

    def counting(ref: ActorRef, path: str, through: int) -> None:
        asked.append(through)
        notify(ref, path, through)

    store.notify_when_synced = counting  # type: ignore[method-assign]

    async def run() -> list[object]:
        answers: list[object] = []
        async with TrioSystem(journal_store=store) as system:
            queue = system.spawn(lambda: QueueActor(QueueConfig("q", durable=True)), name="q")

            async def publish(n: int) -> None:
                answers.append(await system.ask(queue, Publish(Message(b"m", message_id=str(n))), 10.0))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(publish, 0)
                try:
                    await trio.to_thread.run_sync(disk.entered.wait, 10)  # the writer holds the first write
                    for n in range(1, 21):
                        nursery.start_soon(publish, n)
                    await system.wait_quiet()
                    assert answers == []
                finally:
                    disk.gate.set()
        return answers

    answers = trio.run(run)
    assert all(type(answer) is Published for answer in answers)
    published = [answer for answer in answers if type(answer) is Published]
    assert sorted(int(answer.message_id) for answer in published) == list(range(21))
    assert len(asked) == 2


def test_without_a_store_a_new_system_starts_empty(tmp_path: Path) -> None:
    async def run() -> int:
        async with TrioSystem() as system:
            queue: ActorRef = system.spawn(lambda: QueueActor(QueueConfig("q", durable=True)), name="q")
            stats: QueueStats = await system.ask(queue, GetStats())
            return stats.depth
    assert trio.run(run) == 0


def test_leases_of_a_consumer_of_the_dead_process_come_back_at_once(tmp_path: Path) -> None:
    config = QueueConfig("q", durable=True, ack_deadline_s=600.0)

    async def lease_all() -> None:
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
            harness = TrioHarness(system)
            queue = system.spawn(lambda: QueueActor(config), name="q")
            client, _ = consume(harness, queue, Action.IGNORE)  # takes them and never settles
            for n in range(3):
                await system.ask(queue, Publish(Message(f"m{n}".encode())))
            with trio.fail_after(10):
                while len(await received(harness, client)) < 3:
                    await trio.sleep(0.01)

    async def reopen() -> list[tuple[bytes, int]]:
        async with TrioSystem(journal_store=DiskJournalStore(tmp_path)) as system:
            harness = TrioHarness(system)
            queue = system.spawn(lambda: QueueActor(config), name="q")
            client, _ = consume(harness, queue, Action.ACK, name="new")
            with trio.fail_after(10):
                while len(await received(harness, client)) < 3:
                    await trio.sleep(0.01)
            return await received(harness, client)

    trio.run(lease_all)
    # The old consumer is gone with its process: its leases end now, not after the 600 s deadline.
    assert trio.run(reopen) == [(f"m{n}".encode(), 2) for n in range(3)]
