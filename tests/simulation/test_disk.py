"""The simulated disk (SimDisk), its journal store in virtual time, process crashes, and the disk scenarios."""

from __future__ import annotations

import errno
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Message
from conveyor.actors.storage import DiskJournalStore, SegmentLog, VariableQueueStatus
from conveyor.runtime import Actor, ActorRef, EventKind, JournalSynced, TraceEvent
from conveyor.simulation import ChoiceStream, DiskFaults, ProcessCrash, SimDisk, Simulation, choice_stream
from conveyor.simulation.checkers import (
    AckConfirmed,
    DeliveryReceived,
    EnqueueAnswered,
    EnqueueInDoubt,
    EnqueueSent,
    FinalBrowseStarted,
    FoundAtEnd,
    PagingStatus,
    acked_stays_acked,
    durable_total_queue,
    found_order,
    paging_ram,
)
from conveyor.simulation.scenarios import open_disk_store, run_scenario


@pytest.fixture(autouse=True)
def _quiet_storage_logs() -> Iterator[None]:
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def _disk(faults: DiskFaults | None = None, seed: int = 0) -> SimDisk:
    return SimDisk(random.Random(seed), faults)


def _written(disk: SimDisk, path: str, data: bytes, *, sync: bool) -> int:
    fd = disk.open_append(path)
    disk.write(fd, data)
    if sync:
        disk.fsync(fd)
    return fd


# --- the page cache --------------------------------------------------------------------------


def test_a_crash_keeps_synced_bytes_and_loses_the_rest() -> None:
    disk = _disk()
    disk.makedirs("/d")
    fd = _written(disk, "/d/a", b"synced", sync=True)
    disk.fsync_dir("/d")
    disk.write(fd, b"-unsynced")
    assert disk.read("/d/a") == b"synced-unsynced"  # readers see the page cache
    disk.crash()
    assert disk.read("/d/a") == b"synced"


def test_a_new_file_is_lost_until_its_directory_is_synced() -> None:
    disk = _disk()
    _written(disk, "/d/new", b"data", sync=True)
    disk.crash()
    assert disk.listdir("/d") == []
    _written(disk, "/d/new", b"data", sync=True)
    disk.fsync_dir("/d")
    disk.crash()
    assert disk.listdir("/d") == ["new"]


def test_a_rename_and_an_unlink_are_durable_only_after_fsync_dir() -> None:
    disk = _disk()
    _written(disk, "/d/old", b"x", sync=True)
    disk.fsync_dir("/d")
    disk.rename("/d/old", "/d/renamed")
    disk.crash()
    assert disk.listdir("/d") == ["old"]
    disk.rename("/d/old", "/d/renamed")
    disk.fsync_dir("/d")
    disk.unlink("/d/renamed")
    disk.crash()
    assert disk.listdir("/d") == ["renamed"]


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=1, max_size=64), st.integers(0, 2**32))
@settings(max_examples=50, deadline=None)
def test_a_torn_write_keeps_a_non_empty_prefix_of_the_unsynced_tail(synced: bytes, tail: bytes, seed: int) -> None:
    disk = _disk(DiskFaults(torn_write=1.0), seed)
    fd = _written(disk, "/d/f", synced, sync=True)
    disk.fsync_dir("/d")
    disk.write(fd, tail)
    disk.crash()
    kept = disk.read("/d/f")
    assert kept.startswith(synced) and len(synced) < len(kept) <= len(synced) + len(tail)
    assert (synced + tail).startswith(kept)
    assert disk.torn == [("/d/f", len(kept) - len(synced))]


def test_a_failed_fsync_raises_eio_and_makes_nothing_durable() -> None:
    disk = _disk(DiskFaults(fsync_failure=1.0, fsync_failures=1))
    fd = _written(disk, "/d/f", b"data", sync=False)
    disk.fsync_dir("/d")
    with pytest.raises(OSError) as raised:
        disk.fsync(fd)
    assert raised.value.errno == errno.EIO
    disk.fsync(fd)  # only one may fail
    disk.write(fd, b"more")
    disk.crash()
    assert disk.read("/d/f") == b"data"


def test_a_full_disk_refuses_writes_for_a_while_then_frees_space() -> None:
    disk = _disk(DiskFaults(full_after=10, full_for=2))
    fd = _written(disk, "/d/f", b"0123456789", sync=False)
    for _ in range(2):
        with pytest.raises(OSError) as raised:
            disk.write(fd, b"x")
        assert raised.value.errno == errno.ENOSPC
    disk.write(fd, b"x")
    assert disk.read("/d/f") == b"0123456789x"


def test_a_closed_descriptor_and_a_missing_file_are_errors() -> None:
    disk = _disk()
    fd = disk.open_append("/d/f")
    disk.close(fd)
    with pytest.raises(OSError):
        disk.write(fd, b"x")
    with pytest.raises(FileNotFoundError):
        disk.read("/d/missing")


@pytest.mark.parametrize(("field", "value"), [("torn_write", 1.5), ("fsync_failure", -0.1), ("full_after", -1),
                                              ("fsync_failures", -1)])
def test_disk_faults_name_a_bad_field(field: str, value: object) -> None:
    with pytest.raises((ValueError, TypeError), match=field):
        DiskFaults(**cast("dict[str, Any]", {field: value}))


def test_the_disks_decisions_are_choices_of_the_runs_stream() -> None:
    def torn(stream: ChoiceStream) -> list[tuple[str, int]]:
        with choice_stream(stream):
            from conveyor.simulation import seeded_random

            disk = SimDisk(seeded_random("disk:7"), DiskFaults(torn_write=0.5))
        for index in range(8):
            fd = disk.open_append(f"/d/{index}")
            disk.write(fd, bytes(50))
        disk.fsync_dir("/d")
        disk.crash()
        return disk.torn

    recorded = ChoiceStream()
    first = torn(recorded)
    assert first  # some tore
    assert torn(ChoiceStream(recorded.drawn)) == first
    assert torn(ChoiceStream([])) == []  # the simplest choices: nothing tears


# --- the real segment log on it ----------------------------------------------------------------


def test_the_segment_log_recovers_what_was_synced_and_cuts_a_torn_tail() -> None:
    disk = _disk(DiskFaults(torn_write=1.0), seed=3)
    log = SegmentLog("/data", fs=disk, segment_size=4096, flush_bytes=1)  # each record reaches the page cache
    log.put(b"a", b"one")
    log.sync()
    log.put(b"b", b"two" * 20)
    disk.crash()
    reopened = SegmentLog("/data", fs=disk, segment_size=4096)
    assert dict(reopened.items()) == {b"a": b"one"}
    assert reopened.recovery.truncated  # the torn prefix of b's record was found by its CRC and cut


class _Writer(Actor):
    """Journals one event per message, asks for the sync, and notes when it came."""

    def on_start(self) -> None:
        self.count = len(self.ctx.journal)
        self.ctx.note(("recovered", self.count))

    def receive(self, message: Any) -> None:
        if type(message) is JournalSynced:
            self.ctx.note(("synced", message.through))
            return
        self.ctx.journal.append(message)
        self.ctx.journal.when_synced(self.ctx.self_ref)


def _notes(sim: Simulation) -> list[tuple[float, Any]]:
    return [(event.time, event.message) for event in sim.trace if event.kind is EventKind.NOTE]


def test_journal_syncs_come_back_as_messages_in_virtual_time() -> None:
    sim = Simulation(1, journal_store=open_disk_store, process=("/writer",))
    writer = sim.spawn(_Writer, name="writer")
    writer.tell("one")
    sim.run()
    synced = [(time, note) for time, note in _notes(sim) if note[0] == "synced"]
    assert synced and all(time > 0 for time, _ in synced)  # a drawn disk latency, not a thread


def test_a_process_crash_restarts_its_actors_from_what_the_disk_kept() -> None:
    # Step 5: after the one batched sync of all three writes (one JournalSynced per batch and journal).
    sim = Simulation(2, journal_store=open_disk_store, process=("/writer",), faults=[ProcessCrash(at_step=5)])
    writer = sim.spawn(_Writer, name="writer")
    for word in ("one", "two", "three"):
        writer.tell(word)
    sim.run()
    recovered = [note[1] for _, note in _notes(sim) if note[0] == "recovered"]
    synced = [note[1] for _, note in _notes(sim) if note[0] == "synced"]
    assert len(recovered) == 2 and recovered[0] == 0
    assert recovered[1] >= min(len(synced), 1)  # a synced event is never lost
    assert sim.faults_applied[0].outcome.startswith("killed")


def test_a_failed_fsync_crashes_the_process_and_nothing_it_held_is_confirmed() -> None:
    sim = Simulation(3, journal_store=open_disk_store, process=("/writer",),
                     disk=DiskFaults(fsync_failure=1.0, fsync_failures=1))
    writer = sim.spawn(_Writer, name="writer")
    writer.tell("one")
    sim.run()
    assert "EIO" in sim.faults_applied[0].outcome or "Input/output" in sim.faults_applied[0].outcome
    assert not [note for _, note in _notes(sim) if note[0] == "synced" and note[1] == 1]


def test_the_store_without_its_thread_writes_only_when_driven(tmp_path: Path) -> None:
    store = DiskJournalStore(tmp_path, threaded=False, first_write=5)
    assert store.write("/a", "events", ("x",)) == 5
    assert store.queued
    store.write_queued()
    assert not store.queued and store.batches == 1
    store.close()
    with pytest.raises(ValueError, match="gc_every"):
        DiskJournalStore(tmp_path / "other", gc_every=0)


# --- the checkers ------------------------------------------------------------------------------


def _note(value: object, time: float = 0.0, who: str = "/publisher") -> TraceEvent:
    return TraceEvent(EventKind.NOTE, time, who, None, value)


def _sent(*ids: str, priority: int = 4) -> TraceEvent:
    return _note(EnqueueSent("/queue", ids, tuple(Message(b"", message_id=i, priority=priority) for i in ids)))


def test_durable_total_queue_finds_a_lost_confirm_and_a_confirm_after_doubt() -> None:
    trace = [_sent("m0", "m1", "m2"), _note(EnqueueAnswered("/queue", ("m0",))),
             _note(EnqueueInDoubt("/queue", ("m1",))), _note(EnqueueAnswered("/queue", ("m1",))),
             _note(EnqueueInDoubt("/queue", ("m2",))), _note(FinalBrowseStarted("/queue"), 9.0, "/final")]
    result = durable_total_queue(trace)
    assert not result.ok
    assert any("m0 was confirmed" in line and "lost" in line for line in result.violations)
    assert any("m1 was confirmed after its publisher gave it up" in line for line in result.violations)
    assert not any("m2" in line for line in result.violations)  # in doubt: the crash decided
    ok = durable_total_queue([*trace[:3], trace[4], trace[5], _note(FoundAtEnd("/queue", 1, "m0"), 9.0, "/final")])
    assert ok.ok, ok.violations


def test_found_order_judges_only_messages_never_delivered() -> None:
    trace = [_sent("m0", "m1"), _sent("m2", priority=9), _note(FoundAtEnd("/queue", 2, "m1")),
             _note(FoundAtEnd("/queue", 3, "m2")), _note(FoundAtEnd("/queue", 1, "m0"))]
    result = found_order(trace, "/queue")
    assert [line.split(":")[0] for line in result.violations] == ["priority 4"]


def test_acked_stays_acked_finds_a_confirmed_ack_that_came_back() -> None:
    given = _note(DeliveryReceived("/queue", 1, 1, "m0", 1))
    confirmed = _note(AckConfirmed("/queue", ("m0",)), 1.0)
    again = _note(DeliveryReceived("/queue", 2, 1, "m0", 2), 2.0)
    found = _note(FoundAtEnd("/queue", 1, "m0"), 9.0, "/final")
    assert acked_stays_acked([given, again, confirmed], "/queue").ok  # given again before the confirm: allowed
    late = _note(DeliveryReceived("/queue", 2, 1, "m0", 1), 2.0)  # the first delivery, reaching a paused client late
    assert acked_stays_acked([given, confirmed, late], "/queue").ok
    assert [v.split(" was")[0] for v in acked_stays_acked([given, confirmed, again], "/queue").violations] == [
        "t=2: m0"]
    assert "a confirmed ack was lost" in acked_stays_acked([given, confirmed, found], "/queue").violations[0]
    browsed = _note(DeliveryReceived("/queue", 3, 1, "m0", 1, acquiring=False), 3.0)
    assert acked_stays_acked([given, confirmed, browsed], "/other").ok


def _status(bodies: int, target: int | None, betas: int = 0) -> VariableQueueStatus:
    return VariableQueueStatus(q1=0, q2=0, delta=0, q3=betas, q4=bodies, len=bodies + betas, unacked=0,
                               ram_msg_count=bodies, ram_ack_count=0, ram_bytes=bodies, ram_index_count=bodies,
                               persistent_count=0, target_ram_count=target, next_seq_id=0, loading=False)


def test_paging_ram_finds_bodies_over_the_target() -> None:
    assert paging_ram([_note(PagingStatus(_status(2, 2), 4))]).ok
    assert paging_ram([_note(PagingStatus(_status(9, None), 4))]).ok
    assert not paging_ram([_note(PagingStatus(_status(3, 2), 4))]).ok
    assert not paging_ram([_note(PagingStatus(_status(0, 1, betas=9), 4))]).ok


# --- the scenarios -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["durable-crash", "paging"])
def test_the_disk_scenarios_pass_on_the_real_storage_code(scenario: str) -> None:
    for seed in range(5):
        report = run_scenario(scenario, seed).report
        assert report.ok, (seed, report.violations)


@pytest.mark.parametrize("scenario", ["durable-crash", "paging"])
def test_the_disk_scenarios_crash_their_process_and_replay(scenario: str) -> None:
    first = run_scenario(scenario, 2)
    assert any(type(applied.fault) is ProcessCrash for applied in first.sim.faults_applied)
    assert run_scenario(scenario, 2).report.trace_hash == first.report.trace_hash


@pytest.mark.parametrize("clean", [False, True], ids=["after-a-crash", "after-a-clean-close"])
def test_segment_numbers_are_never_reused_after_a_reopen(tmp_path: Path, clean: bool) -> None:
    """A deleted segment's number never comes back: a tombstone still naming it would be taken for the
    newcomer's (found by the paging scenario, seeds 68 and 81). Both ways to reopen: a scan, a snapshot."""
    rng = random.Random(223)
    log = SegmentLog(tmp_path, segment_size=200)
    live: dict[bytes, bytes] = {}
    for step in range(80):
        draw = rng.random()
        key = f"k{rng.randrange(8)}".encode()
        if key in live and draw < 0.5:
            log.delete(key)
            del live[key]
        elif key not in live:
            live[key] = bytes([step]) * rng.randrange(5, 40)
            log.put(key, live[key])
        if rng.random() < 0.2:
            log.sync()
        if rng.random() < 0.1:
            log.collect_garbage()
        if rng.random() < 0.05:
            log.sync()
            if clean:
                log.close()  # the next open reads the clean-shutdown snapshot, with its next segment number
            log = SegmentLog(tmp_path, segment_size=200)  # the process died after a sync: nothing is lost
    assert dict(log.items()) == live


class _Echo(Actor):
    """Journals each message, then answers its sender with the message's length once synced."""

    def receive(self, message: Any) -> None:
        if type(message) is str:
            self.ctx.journal.append(message)
            self.ctx.reply(len(message))


class _Asker(Actor):
    def __init__(self, echo: ActorRef) -> None:
        self.echo = echo

    def on_start(self) -> None:
        for word in ("one", "three", "seven"):
            self.ctx.send(self.echo, word)

    def receive(self, message: Any) -> None:
        self.ctx.note(("answer", message))


def test_a_process_crash_can_wait_for_its_process_to_send_a_message() -> None:
    """``after_sent``: the kill comes at the step after the process sends such a message, not before."""
    sim = Simulation(4, journal_store=open_disk_store, process=("/echo",),
                     faults=[ProcessCrash(at_step=0, after_sent="int")])
    echo = sim.spawn(_Echo, name="echo")
    sim.spawn(lambda: _Asker(echo), name="asker")
    sim.run()
    (applied,) = sim.faults_applied
    assert applied.outcome.startswith("killed right after /echo sent int")
    assert applied.fault == ProcessCrash(at_step=0, after_sent="int")


def test_after_sent_must_name_a_class() -> None:
    with pytest.raises(ValueError, match="after_sent"):
        ProcessCrash(at_step=1, after_sent="not a name")
