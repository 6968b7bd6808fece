"""A durable paged core's journal replays exactly, without a body in it (hypothesis).

An ``EntryList`` journaled with ``bodies_elsewhere`` (as a durable paged queue's), its ``BodyPager``
in durable mode and a durable ``MemoryBodyStore``: random publishes at two levels, takes and browses
(a walk stopped by a paged body asks for it, and a later walk takes it, as the queue's held pull
does), acks, releases and target changes, a snapshot now and then. Rebuilt from the snapshot and
the events (``replaying``), a fresh core holds the same entries in the same states and places, and
every live body is in the store under its seq, though no event or snapshot holds one.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import BodyPager, EntryList, MatchAll, MemoryBodyStore, Message, run_page_batch
from conveyor.actors.broker._durable import as_core_call, journal_calls, replay_call
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
