"""The variable queue by example: the seed's worked example step by step, then one behaviour per test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from conveyor.actors.storage import (
    AckIndex,
    DeltaRange,
    Fetched,
    IndexEntry,
    LoadPending,
    MarkDelivered,
    ReadIndex,
    ReadMessage,
    ReadPending,
    RemoveMessages,
    Sync,
    VariableQueue,
    VariableQueueError,
    VariableQueueStatus,
    WriteIndex,
    WriteMessage,
)

from .vq_disk import FakeDisk


def _body(number: int) -> bytes:
    return f"message {number}".encode()


def _publish(queue: VariableQueue, numbers: range) -> None:
    for number in numbers:
        queue.publish(str(number), _body(number), persistent=True)


def _fetch(queue: VariableQueue, disk: FakeDisk, count: int) -> list[int]:
    """Fetch and ack ``count`` messages, reading bodies from the disk as asked; their numbers."""
    numbers = []
    for _ in range(count):
        result = queue.fetch()
        if isinstance(result, ReadPending):
            disk.run(queue)
            result = disk.fetched[-1]
        assert isinstance(result, Fetched)
        assert result.body == _body(int(result.msg_id))
        queue.ack([result.seq_id])
        numbers.append(int(result.msg_id))
    disk.run(queue)
    return numbers


def _expect(queue: VariableQueue, *, q4: Sequence[int] = (), q3: Sequence[int] = (), q2: Sequence[int] = (),
            q1: Sequence[int] = (), delta: Sequence[int] = (), unacked: int = 0, loading: bool = False) -> None:
    """The parts hold these message numbers (message n has position n - 1), and status() says so."""
    layout = queue.layout()
    numbers = {name: [s + 1 for s in getattr(layout, name)] for name in ("q4", "q3", "q2", "q1")}
    assert numbers == {"q4": list(q4), "q3": list(q3), "q2": list(q2), "q1": list(q1)}
    on_disk = list(delta)
    assert layout.delta == (DeltaRange(on_disk[0] - 1, on_disk[-1], len(on_disk)) if on_disk else DeltaRange(0, 0, 0))
    ready = len(q4) + len(q3) + len(q2) + len(q1) + len(on_disk)
    assert queue.status() == VariableQueueStatus(
        q1=len(q1), q2=len(q2), delta=len(on_disk), q3=len(q3), q4=len(q4), len=ready, unacked=unacked,
        ram_msg_count=len(q4) + len(q1), ram_ack_count=0,
        ram_bytes=sum(len(_body(n)) for n in [*q4, *q1]),
        ram_index_count=len(q4) + len(q3) + len(q2) + len(q1) + unacked, persistent_count=ready + unacked,
        target_ram_count=None, next_seq_id=queue.status().next_seq_id, loading=loading)


def test_the_seeds_worked_example_step_by_step() -> None:
    # Bodies go to the message store (none is embedded); an index segment is 8 positions.
    queue, disk = VariableQueue(embed_below=4, segment_entries=8), FakeDisk()

    _publish(queue, range(1, 10))
    _expect(queue, q4=range(1, 10))
    _publish(queue, range(10, 11))
    _expect(queue, q4=range(1, 11))

    assert queue.push_alphas_to_betas(0, 3) == 3
    _expect(queue, q4=range(1, 8), q3=range(8, 11))

    _publish(queue, range(11, 16))  # q3 is not empty: new messages queue in q1
    _expect(queue, q4=range(1, 8), q3=range(8, 11), q1=range(11, 16))

    assert queue.push_alphas_to_betas(3, 3) == 6  # nothing on disk yet: q1's front goes to q3's rear
    _expect(queue, q4=range(1, 5), q3=range(5, 14), q1=[14, 15])

    assert queue.push_betas_to_deltas(4) == 4  # q3's rear first
    _expect(queue, q4=range(1, 5), q3=range(5, 10), q1=[14, 15], delta=range(10, 14))

    _publish(queue, range(16, 21))
    _expect(queue, q4=range(1, 5), q3=range(5, 10), q1=range(14, 21), delta=range(10, 14))

    assert queue.push_alphas_to_betas(4, 3) == 7  # delta is not empty: q1's front goes to q2
    _expect(queue, q4=[1], q3=range(2, 10), q2=range(14, 18), q1=range(18, 21), delta=range(10, 14))

    assert _fetch(queue, disk, 3) == [1, 2, 3]
    _expect(queue, q3=range(4, 10), q2=range(14, 18), q1=range(18, 21), delta=range(10, 14))
    assert _fetch(queue, disk, 5) == [4, 5, 6, 7, 8]
    _expect(queue, q3=[9], q2=range(14, 18), q1=range(18, 21), delta=range(10, 14))

    # q3 runs dry with messages on disk: maybe_deltas_to_betas asks for delta's front segment.
    assert queue.fetch() == ReadPending(8, "9")
    _expect(queue, q2=range(14, 18), q1=range(18, 21), delta=range(10, 14), unacked=1, loading=True)
    assert queue.take_effects()[0] == ReadIndex(9, 13)
    assert queue.fetch() == LoadPending(), "nothing to give until the index is read"
    # (The shell runs the read the fetch asked for; the example re-issues it here since take_effects took it.)
    queue.loaded_index([disk.index[s] for s in range(9, 13)])
    # Delta was loaded into q3's rear and, nothing being left on disk, q2 joined behind it: the seed's
    # two pictures, one call.
    _expect(queue, q3=range(10, 18), q1=range(18, 21), unacked=1)

    _publish(queue, range(21, 26))
    _expect(queue, q3=range(10, 18), q1=range(18, 26), unacked=1)

    # The 9th message's body read was taken with the effects above: complete it by hand.
    assert queue.loaded_message(8, disk.store[8]).msg_id == "9"
    queue.ack([8])
    disk.run(queue)

    # q3 and delta run dry: q1 moves to q4 in the fetch that empties q3 (the seed's last two pictures).
    assert _fetch(queue, disk, 8) == list(range(10, 18))
    _expect(queue, q4=range(18, 26))
    assert _fetch(queue, disk, 1) == [18]
    _expect(queue, q4=range(19, 26))
    assert _fetch(queue, disk, 7) == list(range(19, 26))
    assert queue.fetch() is None
    assert disk.index == {} and disk.store == {}, "every acked message's records are removed"


def test_a_publish_goes_to_q4_while_nothing_is_paged_and_to_q1_after() -> None:
    queue = VariableQueue()
    queue.publish("a", b"a")
    queue.push_alphas_to_betas(0, 1)
    queue.publish("b", b"b")
    layout = queue.layout()
    assert (layout.q4, layout.q3, layout.q1) == ((), (0,), (1,))


def test_a_persistent_message_on_a_durable_queue_is_written_at_publish_and_confirmed_by_the_sync() -> None:
    queue = VariableQueue(embed_below=4)
    queue.publish("big", b"0123456789", persistent=True)
    queue.publish("small", b"01", persistent=True)
    queue.publish("transient", b"0123456789")
    effects = queue.take_effects()
    assert effects == (
        WriteMessage(0, "big", b"0123456789", persistent=True),
        WriteIndex(IndexEntry(0, "big", 10, persistent=True, delivered=False)),
        WriteIndex(IndexEntry(1, "small", 2, persistent=True, delivered=False, body=b"01")),
        Sync(1),
    ), "one sync covers every write since the last; the small body is embedded; the transient one is not written"
    assert queue.take_effects() == ()
    assert queue.synced(1) == ("big", "small")
    assert queue.status().persistent_count == 2


def test_a_persistent_message_on_a_transient_queue_is_transient() -> None:
    queue = VariableQueue(durable=False)
    queue.publish("m", b"body", persistent=True)
    assert queue.take_effects() == ()
    assert queue.status().persistent_count == 0


def test_a_sync_confirms_every_earlier_sync_too() -> None:
    queue = VariableQueue()
    queue.publish("a", b"a", persistent=True)
    first = queue.take_effects()[-1]
    queue.publish("b", b"b", persistent=True)
    second = queue.take_effects()[-1]
    assert (first, second) == (Sync(1), Sync(2))
    assert queue.synced(2) == ("a", "b")
    with pytest.raises(VariableQueueError, match="token 1 is not a Sync in flight"):
        queue.synced(1)


def test_paging_a_transient_message_writes_it_first_and_an_ack_removes_its_records() -> None:
    queue, disk = VariableQueue(embed_below=4, segment_entries=1), FakeDisk()
    for number in range(3):
        queue.publish(str(number), _body(number))
    queue.set_target(0)
    assert queue.status().ram_msg_count == 0
    assert queue.layout().q3 == (0,) and queue.layout().delta == DeltaRange(1, 3, 2), "q3 keeps its front segment"
    disk.run(queue)
    assert sorted(disk.store) == [0, 1, 2] and sorted(disk.index) == [1, 2]
    assert not any(isinstance(e, Sync) for e in disk.log), "transient writes need no sync"
    assert _fetch(queue, disk, 3) == [0, 1, 2]
    assert disk.store == {} and disk.index == {}


def test_an_embedded_body_comes_back_with_its_index_record() -> None:
    queue, disk = VariableQueue(segment_entries=1), FakeDisk()
    for number in range(3):
        queue.publish(str(number), _body(number), persistent=True)
    queue.set_target(0)
    disk.run(queue)
    assert disk.store == {}, "bodies below embed_below live in the index"
    queue.set_target(None)
    assert queue.fetch() == ReadPending(0, "0")  # its body was dropped from q3
    disk.run(queue)
    assert disk.log[-3:] == [ReadIndex(1, 2), MarkDelivered((0,)), ReadMessage(0, "0", embedded=True)]
    queue.ack([0])
    first = queue.fetch()
    assert isinstance(first, Fetched) and first.seq_id == 1, "q3 read ahead: the next body came with its record"
    assert (queue.status().ram_msg_count, queue.status().ram_ack_count) == (0, 1)


def test_a_requeued_message_goes_back_to_its_place_marked_redelivered() -> None:
    queue = VariableQueue()
    for number in range(4):
        queue.publish(str(number), _body(number))
    taken = [queue.fetch() for _ in range(3)]
    assert all(isinstance(t, Fetched) for t in taken)
    queue.requeue([2, 0])
    order = []
    while isinstance(result := queue.fetch(), Fetched):
        order.append((result.seq_id, result.redelivered))
    assert order == [(0, True), (2, True), (3, False)]


def test_a_transient_message_indexed_before_delivery_is_still_redelivered_after_a_trip_through_delta() -> None:
    queue, disk = VariableQueue(segment_entries=1), FakeDisk()
    queue.publish("0", _body(0))
    queue.publish("1", _body(1))
    queue.push_alphas_to_betas(0, 2)
    queue.push_betas_to_deltas(1)  # 1's index record is written now (it is embedded), as not delivered
    assert queue.fetch() == ReadPending(0, "0")
    disk.run(queue)
    second = queue.fetch()
    disk.run(queue)
    assert isinstance(second, Fetched) and (second.seq_id, second.redelivered) == (1, False)
    assert disk.index[1].delivered, "a first delivery is noted in an index record already on disk"
    queue.requeue([0, 1])
    queue.push_alphas_to_betas(0, 2)
    queue.push_betas_to_deltas(1)
    assert queue.layout().delta == DeltaRange(1, 2, 1), "1 is known only on disk again"
    again = []
    while (result := queue.fetch()) is not None:
        disk.run(queue)
        if isinstance(result, LoadPending):
            continue
        result = result if isinstance(result, Fetched) else disk.fetched[-1]
        again.append((result.seq_id, result.redelivered))
    assert again == [(0, True), (1, True)], "read back from the index, 1 still knows it was delivered"


def _take_all(queue: VariableQueue, disk: FakeDisk) -> list[int]:
    """Fetch until empty, running the disk whenever the queue waits on it; the positions, in order."""
    taken = []
    while (result := queue.fetch()) is not None:
        if not isinstance(result, Fetched):
            disk.run(queue)
            if isinstance(result, LoadPending):
                continue
            result = disk.fetched[-1]
        taken.append(result.seq_id)
    return taken


def test_a_requeue_into_the_range_being_loaded_is_merged_when_the_load_arrives() -> None:
    queue, disk = VariableQueue(segment_entries=2, embed_below=0), FakeDisk()
    for number in range(10):  # persistent: every message has its index record from the start
        queue.publish(str(number), _body(number), persistent=True)
    assert all(isinstance(queue.fetch(), Fetched) for _ in range(8))
    queue.requeue([2, 3, 4])
    queue.set_target(0)
    # q4's messages became betas; q3 keeps its front segment [2, 4), the rest went to delta.
    layout = queue.layout()
    assert (layout.q4, layout.q3, layout.delta) == ((), (2, 3), DeltaRange(4, 10, 3))
    disk.run(queue)
    assert [queue.fetch(), queue.fetch()] == [ReadPending(2, "2"), ReadPending(3, "3")]
    assert ReadIndex(4, 6) in queue.take_effects(), "q3 ran dry: delta's front segment is read"
    queue.requeue([5])  # unacked, inside the range being read: held aside
    queue.requeue([1])  # below it: back to q4
    assert queue.layout().q4 == (1,) and queue.layout().delta == DeltaRange(4, 10, 4)
    queue.loaded_index([disk.index[s] for s in sorted(disk.index) if 4 <= s < 6])
    assert queue.layout().q3 == (4, 5), "5's own record was skipped; the requeued 5 was merged in"
    for seq_id in (2, 3):
        queue.loaded_message(seq_id, disk.store[seq_id])
    disk.run(queue)
    assert _take_all(queue, disk) == [1, 4, 5, 8, 9]


def test_q3_is_not_pushed_to_delta_while_delta_is_being_read() -> None:
    queue, disk = VariableQueue(segment_entries=2, embed_below=0), FakeDisk()
    for number in range(8):
        queue.publish(str(number), _body(number))
    queue.push_alphas_to_betas(0, 8)
    assert queue.push_betas_to_deltas(2) == 2
    assert queue.layout().delta == DeltaRange(6, 8, 2)
    for _ in range(6):
        assert isinstance(queue.fetch(), ReadPending)
    effects = queue.take_effects()
    held = [e for e in effects if isinstance(e, ReadIndex)]
    assert held == [ReadIndex(6, 8)]
    for effect in effects:  # carry out the writes and the body reads; the index read stays in flight
        if not isinstance(effect, ReadIndex):
            disk.apply(queue, effect)
    queue.requeue(range(6))
    queue.push_alphas_to_betas(0, 6)
    assert queue.layout().q3 == (0, 1, 2, 3, 4, 5)
    assert queue.push_betas_to_deltas(3) == 0, "delta's front must not move under the range being read"
    disk.apply(queue, held[0])
    assert _take_all(queue, disk) == list(range(8))


def test_a_recovered_queue_reads_its_first_segment_at_once() -> None:
    queue = VariableQueue.recover(start=10, end=20, count=3, segment_entries=8)
    assert queue.take_effects() == (ReadIndex(10, 16),)
    assert queue.fetch() == LoadPending()
    queue.loaded_index([IndexEntry(12, "a", 1, persistent=True, delivered=True, body=b"a")])
    assert queue.take_effects() == ()
    assert queue.fetch() == Fetched(12, "a", b"a", persistent=True, redelivered=True)
    assert queue.take_effects() == (ReadIndex(16, 20),), "q3 ran dry: delta's next segment"
    with pytest.raises(VariableQueueError, match="the index is missing 2 of delta's messages"):
        queue.loaded_index([])


def test_the_index_returning_more_than_delta_holds_is_refused() -> None:
    queue = VariableQueue.recover(start=0, end=4, count=1)
    entries = [IndexEntry(s, str(s), 1, persistent=True, delivered=False) for s in range(2)]
    with pytest.raises(VariableQueueError, match="the index holds 2 messages in \\[0, 4\\), delta only 1"):
        queue.loaded_index(entries)
    assert queue.status().loading, "a refused load changes nothing"


def _any(value: object) -> Any:
    """A bad argument, passed as the caller who ignores the types would."""
    return value


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: VariableQueue(target_ram_count=-1), "target_ram_count must be an int >= 0, got -1"),
        (lambda: VariableQueue(target_ram_count=True), "target_ram_count must be an int >= 0, got True"),
        (lambda: VariableQueue(embed_below=-5), "embed_below must be an int >= 0, got -5"),
        (lambda: VariableQueue(segment_entries=0), "segment_entries must be >= 1, got 0"),
        (lambda: VariableQueue().set_target(-3), "target_ram_count must be an int >= 0, got -3"),
        (lambda: VariableQueue().push_alphas_to_betas(-1, 0), "q1_quota must be an int >= 0, got -1"),
        (lambda: VariableQueue().push_alphas_to_betas(0, _any(1.5)), "q4_quota must be an int >= 0, got 1.5"),
        (lambda: VariableQueue().push_betas_to_deltas(-2), "quota must be an int >= 0, got -2"),
        (lambda: VariableQueue().publish(_any(1), b"x"), "msg_id must be a str, got 1"),
        (lambda: VariableQueue().publish("m", _any("text")), "body must be bytes, got str"),
        (lambda: VariableQueue().ack([7]), "cannot ack seq_id 7: not an unacknowledged message"),
        (lambda: VariableQueue().requeue([7]), "cannot requeue seq_id 7: not an unacknowledged message"),
        (lambda: VariableQueue().loaded_index([]), "loaded_index without a ReadIndex in flight"),
        (lambda: VariableQueue().loaded_message(3, b""), "seq_id 3 has no ReadMessage in flight"),
        (lambda: VariableQueue.recover(start=5, end=4, count=0), "start=5 end=4 count=0"),
        (lambda: IndexEntry(-1, "m", 0, persistent=False, delivered=False), "seq_id must be >= 0, got -1"),
    ],
)
def test_bad_input_is_refused_naming_the_field(build: Any, match: str) -> None:
    with pytest.raises(VariableQueueError, match=match):
        build()


def test_an_ack_of_a_message_whose_body_is_being_read_is_refused_and_changes_nothing() -> None:
    queue = VariableQueue()
    queue.publish("a", b"a")
    queue.publish("b", b"b")
    queue.set_target(0)
    first = queue.fetch()
    assert first == ReadPending(0, "a")
    with pytest.raises(VariableQueueError, match="body is still being read"):
        queue.ack([0])
    with pytest.raises(VariableQueueError, match="must be distinct"):
        queue.requeue([0, 0])
    with pytest.raises(VariableQueueError, match="body for seq_id 0 must be 1 bytes"):
        queue.loaded_message(0, b"too long")
    assert queue.loaded_message(0, b"a") == Fetched(0, "a", b"a", persistent=False, redelivered=False)
    queue.ack([0])
    assert queue.status().unacked == 0
    effects = queue.take_effects()
    assert effects[-1] == AckIndex((0,)), "an embedded body goes with its index record"
    assert not any(isinstance(effect, RemoveMessages) for effect in effects)
