"""A durable paged core's journal replays exactly, without a body in it (hypothesis).

An ``EntryList`` journaled with ``bodies_elsewhere`` (as a durable paged queue's), its ``BodyPager``
in durable mode and a durable ``MemoryBodyStore``: random publishes at two levels, takes and browses
(a walk stopped by a paged body asks for it, and a later walk takes it, as the queue's held pull
does), acks, releases and target changes, a snapshot now and then. Rebuilt from the snapshot and
the events (``replaying``), a fresh core holds the same entries in the same states and places, and
every live body is in the store under its seq, though no event or snapshot holds one.
"""

from __future__ import annotations

import pickle

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import (
    BodyPager,
    EntryList,
    EntryState,
    MatchAll,
    MemoryBodyStore,
    Message,
    PageDone,
    run_page_batch,
)
from conveyor.actors.broker._body_store import DeltaRecord
from conveyor.actors.broker._durable import as_core_call, delta_pushed, journal_calls, replay_call
from conveyor.actors.broker._entries import EntryListSnapshot
from conveyor.runtime import Journal

OPS = st.lists(st.one_of(
    st.tuples(st.just("publish"), st.integers(0, 9)),
    st.tuples(st.just("take"), st.integers(1, 3)),
    st.tuples(st.just("browse"), st.integers(1, 3)),
    st.tuples(st.just("ack"), st.integers(0, 5)),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("target"), st.sampled_from([0, 3, 10, 100])),
    st.tuples(st.just("snapshot"), st.just(0)),
), max_size=60)


def state(core: EntryList) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for seq in core.live_tags():
        entry = core.get(seq)
        assert entry is not None
        rows.append((seq, entry.position, entry.state, entry.consumer, entry.delivery_count, entry.size,
                     entry.message.message_id))
    return rows


@settings(max_examples=200, deadline=None)
@given(OPS)
@example([("publish", 1), ("publish", 1), ("take", 2), ("publish", 9), ("take", 2), ("take", 2)])
def test_a_durable_paged_core_replays_exactly_from_a_journal_without_bodies(ops: list[tuple[str, int]]) -> None:
    core = EntryList(priorities=2)
    core.add_consumer(1, MatchAll(), 0, True)
    core.add_consumer(2, MatchAll(), 0, False)
    journal = Journal("/q")
    journal_calls(core, journal, lambda held: None, after_events=10**9, bodies_elsewhere=True)
    pager = BodyPager(core, 0, durable=True)
    store = MemoryBodyStore(durable=True)
    bodies: dict[int, bytes] = {}
    held: list[int] = []

    def run_store() -> None:
        while (batch := pager.take_batch()) is not None:
            pager.loaded(run_page_batch(store, batch))

    def walk(take: bool, count: int) -> None:
        # A walk stopped by a paged body asks for it; a later walk (other calls between, as the queue
        # handles other messages while the read runs) takes it.
        if take:
            taken, _, _ = core.take(1, 0.0, count, 1 << 20, 60.0)
            pager.delivered(taken)
            held.extend(entry.seq for entry in taken)
        else:
            core.browse(2, count, 1 << 20)
        if core.blocked is not None:
            pager.need((core.blocked,))

    for n, (op, arg) in enumerate(ops):
        if op == "publish":
            entry = core.publish(Message(f"body-{n}".encode(), priority=arg, message_id=str(n)), 0.0)
            bodies[entry.seq] = entry.message.body
            pager.published(entry)
        elif op in ("take", "browse"):
            walk(op == "take", arg)
        elif op == "ack" and held:
            core.ack(1, (held.pop(arg % len(held)),))
        elif op == "release" and held:
            pager.available_again(core.give_back(1, (held.pop(arg % len(held)),), 0.0, 0.0).available)
        elif op == "target":
            pager.target_bytes = arg
        elif op == "snapshot":
            journal.save_snapshot(core.snapshot(pager.unsynced))
        pager.balance()
        if n % 3 == 0:
            run_store()
    for event in journal:
        call = as_core_call(event)
        assert not any(getattr(arg, "body", b"") for arg in call.args)  # the journal holds no body
    snapshot = journal.snapshot
    assert snapshot is None or isinstance(snapshot, EntryListSnapshot)

    again = EntryList(priorities=2)
    if snapshot is not None:
        again.restore(snapshot)
    else:
        again.add_consumer(1, MatchAll(), 0, True)
        again.add_consumer(2, MatchAll(), 0, False)
    again.replaying = True
    for event in journal:
        replay_call(again, event)
    again.replaying = False
    assert state(again) == state(core)
    assert (again.published, again.delivered, again.acked, again.live_bytes) == (
        core.published, core.delivered, core.acked, core.live_bytes)
    run_store()  # every write made: each live body is in the store under its seq
    for seq in core.live_tags():
        assert store.bodies[seq] == bodies[seq]


CHUNK_OPS = st.lists(st.one_of(
    st.tuples(st.just("publish"), st.integers(0, 9)),
    st.tuples(st.just("take"), st.integers(1, 3)),
    st.tuples(st.just("browse"), st.integers(1, 3)),
    st.tuples(st.just("ack"), st.integers(0, 5)),
    st.tuples(st.just("release"), st.integers(0, 5)),
    st.tuples(st.just("target"), st.sampled_from([0, 3, 10, 100])),
    st.tuples(st.just("snapshot"), st.just(0)),
    st.tuples(st.just("start"), st.just(0)),
    st.tuples(st.just("finish"), st.just(0)),
    st.tuples(st.just("crash"), st.just(0)),
), max_size=80)


def logical(core: EntryList, store: MemoryBodyStore, unsynced_chunks: dict[int, tuple[DeltaRecord, ...]]) -> object:
    """Every live entry as (seq, position, state, consumer, deliveries, size, message id), a delta's read from
    its chunk record (in the store, or not yet synced); the cursors (pointers and held seqs) and counters.
    Checks the paged counters on the way (the deltas' entries count as paged)."""
    records: dict[int, tuple[int, DeltaRecord]] = {}
    for rank in core.delta_ranks():
        for chunk in core.delta_chunks(rank):
            kept = unsynced_chunks.get(chunk.key)
            if kept is None:
                value = store.bodies.get(chunk.key)
                assert value is not None, f"chunk {chunk.key} of a delta is not in the store"
                kept = pickle.loads(value)
            assert [record[0] for record in kept] == list(chunk.seqs)
            assert [record[2] for record in kept] == list(chunk.sizes)
            for record in kept:
                records[record[0]] = (rank, record)
    rows: list[tuple[object, ...]] = []
    for seq in core.live_tags():
        entry = core.get(seq)
        if entry is None:
            rank, (_, message, size) = records[seq]
            rows.append((seq, (rank, seq), EntryState.AVAILABLE, None, 0, size, message.message_id))
        else:
            rows.append((seq, entry.position, entry.state, entry.consumer, entry.delivery_count, entry.size,
                         entry.message.message_id))
    delta_bytes = sum(record[2] for _, record in records.values())
    assert core.paged_bytes == sum(e.size for e in core.in_ram() if e.paged) + delta_bytes
    assert core.paged == sum(1 for e in core.in_ram() if e.paged) + len(records)
    counters = (core.published, core.delivered, core.acked, core.live_bytes, core.available, core.acquired)
    return rows, core.snapshot().cursors, counters


def rebuilt(journal: Journal) -> EntryList:
    """A fresh core from the journal's snapshot and events, as a recovery makes it."""
    again = EntryList(priorities=2)
    snapshot = journal.snapshot
    if snapshot is not None:
        assert isinstance(snapshot, EntryListSnapshot)
        again.restore(snapshot)
    else:
        again.add_consumer(1, MatchAll(), 0, True)
        again.add_consumer(2, MatchAll(), 0, False)
    again.replaying = True
    for event in journal:
        replay_call(again, event)
    again.replaying = False
    return again


@settings(max_examples=200, deadline=None)
@given(CHUNK_OPS, st.integers(1, 2), st.integers(0, 2))
@example([("publish", 1)] * 6 + [("start", 0), ("finish", 0), ("take", 1), ("start", 0), ("crash", 0),
          ("finish", 0), ("take", 3), ("crash", 0)], 2, 0)
def test_a_durable_core_with_deltas_replays_to_the_same_entries_at_any_crash(
    ops: list[tuple[str, int]], chunk_entries: int, keep_entries: int
) -> None:
    """Deltas of a durable paged core: whenever it crashes (a store job done or not, a snapshot taken with
    chunks unsynced), its journal rebuilds the same entries in the same states and places, every chunk a
    rebuilt delta names is in the store, and the journal holds no body and no delta entry's record but
    those of the chunks loaded back."""
    core = EntryList(priorities=2)
    core.add_consumer(1, MatchAll(), 0, True)
    core.add_consumer(2, MatchAll(), 0, False)
    journal = Journal("/q")
    journal_calls(core, journal, lambda held: None, after_events=10**9, bodies_elsewhere=True)
    pager = BodyPager(core, 0, chunk_entries, keep_entries, durable=True)
    pager.chunk_stored = lambda rank, chunk: journal.append(delta_pushed(rank, chunk))
    pager.hold_chunk_deletes = True
    store = MemoryBodyStore(durable=True)
    held: list[int] = []
    done: list[PageDone] = []  # the batch in flight, its store work already done

    def start() -> None:
        if not done and (batch := pager.take_batch()) is not None:
            done.append(run_page_batch(store, batch))

    def finish() -> None:
        if done:
            pager.loaded(done.pop())

    def walk(take: bool, count: int) -> None:
        if take:
            taken, _, _ = core.take(1, 0.0, count, 1 << 20, 60.0)
            pager.delivered(taken)
            held.extend(entry.seq for entry in taken)
        else:
            core.browse(2, count, 1 << 20)
        if core.blocked is not None:
            pager.need((core.blocked,))
        if core.blocked_rank is not None:
            pager.need_delta(core.blocked_rank)

    for n, (op, arg) in enumerate(ops):
        if op == "publish":
            pager.published(core.publish(Message(f"body-{n}".encode(), priority=arg, message_id=str(n)), 0.0))
        elif op in ("take", "browse"):
            walk(op == "take", arg)
        elif op == "ack" and held:
            core.ack(1, (held.pop(arg % len(held)),))
        elif op == "release" and held:
            pager.available_again(core.give_back(1, (held.pop(arg % len(held)),), 0.0, 0.0).available)
        elif op == "target":
            pager.target_bytes = arg
        elif op == "snapshot":
            journal.save_snapshot(core.snapshot(pager.unsynced, pager.unsynced_chunks))
        elif op == "start":
            start()
        elif op == "finish":
            finish()
        elif op == "crash":
            again = rebuilt(journal)
            assert logical(again, store, {}) == logical(core, store, pager.unsynced_chunks)
        pager.balance()
        pager.hold_deletes(journal.writes)  # the journal is in memory: each write is synced at once
        pager.release_deletes(journal.writes)
    finish()
    while (batch := pager.take_batch()) is not None:  # every store job done
        pager.loaded(run_page_batch(store, batch))
        pager.balance()
        pager.hold_deletes(journal.writes)
        pager.release_deletes(journal.writes)
    for event in journal:
        call = as_core_call(event)
        assert not any(getattr(arg, "body", b"") for arg in call.args)  # the journal holds no body
    again = rebuilt(journal)
    assert logical(again, store, {}) == logical(core, store, {})
    for rank in core.delta_ranks():
        assert [(c.key, list(c.seqs)) for c in again.delta_chunks(rank)] == [
            (c.key, list(c.seqs)) for c in core.delta_chunks(rank)]
    assert again.delta_count == core.delta_count
