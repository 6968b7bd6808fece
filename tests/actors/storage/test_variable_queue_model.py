"""The variable queue against a plain list: random publishes, fetches, acks, requeues, paging and a slow disk.

The model is what a queue promises its users: the ready messages in position order (a requeued
message goes back to its place), each delivered once until acked or requeued, nothing lost, nothing
invented, and every persistent message on a durable queue confirmed once, in publish order. The
core's effects run on ``FakeDisk``, sometimes late, and with its read answers held back, so fetches
meet ``ReadPending`` and ``LoadPending`` and operations land while an index read is in flight.
"""

from __future__ import annotations

import bisect
import itertools

from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conveyor.actors.storage import Fetched, LoadPending, ReadPending, VariableQueue

from .vq_disk import FakeDisk

_TARGETS = st.none() | st.integers(min_value=0, max_value=6)


class VariableQueueMachine(RuleBasedStateMachine):
    """One queue, one fake disk, and the list they must agree with."""

    queue: VariableQueue
    disk: FakeDisk

    # The first value of each list is the one hypothesis tries most: the configuration where records of
    # unacknowledged messages fall inside delta's ranges (durable, embedded, segments of two).
    @initialize(durable=st.sampled_from([True, False]), embed_below=st.sampled_from([4096, 6, 0]),
                segment_entries=st.sampled_from([2, 1, 3, 4]), ram_target=_TARGETS)
    def start(self, durable: bool, embed_below: int, segment_entries: int, ram_target: int | None) -> None:
        self.durable = durable
        self.queue = VariableQueue(durable=durable, target_ram_count=ram_target, embed_below=embed_below,
                                   segment_entries=segment_entries)
        self.disk = FakeDisk()
        self.ready: list[tuple[int, str, bytes]] = []
        """The ready messages (position, id, body), in position order."""
        self.unacked: dict[int, tuple[str, bytes]] = {}
        self.reading: dict[int, tuple[str, bytes]] = {}
        self.delivered: set[int] = set()
        self.to_confirm: list[str] = []
        self.persistent: set[int] = set()
        self.confirmed = 0
        self.completed = 0
        self.numbers = itertools.count()

    # ---- what users do

    @rule(size=st.integers(min_value=0, max_value=10), persistent=st.sampled_from([True, False]),
          count=st.integers(1, 4))
    def publish(self, size: int, persistent: bool, count: int) -> None:
        for _ in range(count):
            self._publish_one(size, persistent)

    def _publish_one(self, size: int, persistent: bool) -> None:
        number = next(self.numbers)
        msg_id, body = f"m{number}", f"{number}:".encode().ljust(size, b".")
        seq_id = self.queue.publish(msg_id, body, persistent=persistent)
        assert seq_id == number, "positions are handed out in publish order"
        self.ready.append((seq_id, msg_id, body))
        if persistent and self.durable:
            self.to_confirm.append(msg_id)
            self.persistent.add(seq_id)

    @rule(count=st.integers(min_value=1, max_value=4))
    def fetch(self, count: int) -> None:
        for _ in range(count):
            self._fetch_one()

    def _fetch_one(self) -> None:
        result = self.queue.fetch()
        if result is None:
            assert self.ready == [], "the queue said empty while messages were ready"
            return
        if isinstance(result, LoadPending):
            event("fetch: LoadPending")
            assert self.ready and self.queue.status().loading
            return
        seq_id, msg_id, body = self.ready.pop(0)
        assert (result.seq_id, result.msg_id) == (seq_id, msg_id), "not the front message"
        if isinstance(result, ReadPending):
            event("fetch: ReadPending")
            self.reading[seq_id] = (msg_id, body)
            return
        self._delivered(result, body)

    @rule(data=st.data())
    @precondition(lambda self: self.unacked)
    def ack(self, data: st.DataObject) -> None:
        chosen = data.draw(st.lists(st.sampled_from(sorted(self.unacked)), min_size=1, unique=True))
        self.queue.ack(chosen)
        for seq_id in chosen:
            del self.unacked[seq_id]
            self.persistent.discard(seq_id)

    @rule(data=st.data())
    @precondition(lambda self: self.unacked)
    def requeue(self, data: st.DataObject) -> None:
        self._requeue(data.draw(st.lists(st.sampled_from(sorted(self.unacked)), min_size=1, unique=True)))

    @rule()
    @precondition(lambda self: len(self.unacked) > 1)
    def requeue_every_other(self) -> None:
        """Requeue every other unacknowledged message, so ready and unacknowledged positions interleave."""
        self._requeue(sorted(self.unacked)[::2])

    # The narrow window where an index read is in flight gets rules of its own, so it is explored often.

    @rule(data=st.data())
    @precondition(lambda self: self.unacked and self.queue.status().loading)
    def requeue_while_loading(self, data: st.DataObject) -> None:
        self.requeue(data)

    @rule(quota=st.integers(min_value=1, max_value=6))
    @precondition(lambda self: self.queue.status().loading)
    def page_while_loading(self, quota: int) -> None:
        self.queue.push_alphas_to_betas(quota, quota)
        self.queue.push_betas_to_deltas(quota)

    # ---- memory pressure

    @rule(ram_target=_TARGETS)
    def set_target(self, ram_target: int | None) -> None:
        self.queue.set_target(ram_target)

    @rule(q1_quota=st.integers(min_value=0, max_value=4), q4_quota=st.integers(min_value=0, max_value=4))
    def push_alphas_to_betas(self, q1_quota: int, q4_quota: int) -> None:
        self.queue.push_alphas_to_betas(q1_quota, q4_quota)

    @rule(quota=st.integers(min_value=0, max_value=6))
    def push_betas_to_deltas(self, quota: int) -> None:
        self.queue.push_betas_to_deltas(quota)

    @rule()
    def page_everything(self) -> None:
        """Every alpha to a beta and every beta the rules allow to delta, at once."""
        status = self.queue.status()
        self.queue.push_alphas_to_betas(status.q1, status.q4)
        self.queue.push_betas_to_deltas(status.len)

    # ---- the disk

    @rule(rounds=st.integers(min_value=1, max_value=3), hold_reads=st.booleans())
    def run_disk(self, rounds: int, hold_reads: bool) -> None:
        self.disk.hold_reads = hold_reads
        self.disk.run(self.queue, rounds=rounds)
        self._take_disk_results()

    @rule()
    @precondition(lambda self: self.disk.held)
    def deliver_reads(self) -> None:
        self.disk.deliver(self.queue)
        self._take_disk_results()

    @rule()
    def settle_disk(self) -> None:
        """Run everything, then check the files hold exactly what the queue's bookkeeping says."""
        self._settle()
        self._check_files()

    # ---- checks

    @invariant()
    def status_agrees_with_the_model(self) -> None:
        status = self.queue.status()
        assert status.len == len(self.ready) == len(self.queue)
        assert status.q1 + status.q2 + status.delta + status.q3 + status.q4 == status.len
        assert status.unacked == len(self.unacked) + len(self.reading)
        assert status.persistent_count == len(self.persistent)
        if status.target_ram_count is not None:
            assert status.ram_msg_count + status.ram_ack_count <= status.target_ram_count, "RAM over the target"

    @invariant()
    def the_parts_hold_contiguous_runs_in_order(self) -> None:
        layout, status = self.queue.layout(), self.queue.status()
        front = [*layout.q4, *layout.q3]
        rear = [*layout.q2, *layout.q1]
        assert front == sorted(front) and rear == sorted(rear)
        if layout.delta.count:
            assert all(s < layout.delta.start for s in front)
            assert all(s >= layout.delta.end for s in rear)
            assert layout.delta.count <= layout.delta.end - layout.delta.start
        elif front and rear:
            assert front[-1] < rear[0]
        ready = {s for s, _, _ in self.ready}
        assert set(front) | set(rear) <= ready
        # The seed's invariants; an index read in flight stands in for q3 while it runs.
        assert not layout.q1 or layout.q3 or status.loading, "q1 holds messages but q3 is empty"
        assert not layout.q2 or layout.delta.count, "q2 holds messages but delta is empty"
        assert not layout.delta.count or layout.q3 or status.loading, "delta holds messages but q3 is empty"

    @invariant()
    def the_counters_are_the_messages_in_ram(self) -> None:
        queue = self.queue
        parts = [*queue._q1, *queue._q2, *queue._q3, *queue._q4]
        unacked = list(queue._unacked.values())
        status = queue.status()
        assert status.ram_msg_count == sum(m.body is not None for m in parts)
        assert status.ram_ack_count == sum(m.body is not None for m in unacked)
        assert status.ram_bytes == sum(m.size for m in [*parts, *unacked] if m.body is not None)
        assert all(m.body is not None or m.in_store or m.index_on_disk for m in [*parts, *unacked])
        assert all(m.body is not None for m in queue._q1), "q1 holds alphas"

    def teardown(self) -> None:
        """Everything ready and unacked comes out in position order, then acking it all leaves empty files."""
        if not hasattr(self, "queue"):
            return
        self._settle()
        self._requeue(sorted(self.unacked))
        taken: list[tuple[int, str, bytes]] = []
        waits = 0
        while (result := self.queue.fetch()) is not None:
            if isinstance(result, LoadPending):
                waits += 1
                assert waits <= len(self.ready) + 10, "the queue keeps saying LoadPending: a load never completes"
            if not isinstance(result, Fetched):
                self.disk.run(self.queue)
                if isinstance(result, LoadPending):
                    continue
                result = self.disk.fetched[-1]
            taken.append((result.seq_id, result.msg_id, result.body))
        self.completed = len(self.disk.fetched)
        assert taken == self.ready, "lost, reordered or invented messages"
        self.queue.ack([s for s, _, _ in taken])
        self._settle()
        assert self.disk.store == {} and self.disk.index == {}, "acked messages left records behind"
        assert self.disk.confirmed == self.to_confirm, "every persistent message confirmed once, in order"

    # ---- helpers

    def _requeue(self, chosen: list[int]) -> None:
        self.queue.requeue(chosen)
        for seq_id in chosen:
            bisect.insort(self.ready, (seq_id, *self.unacked.pop(seq_id)))

    def _delivered(self, result: Fetched, body: bytes) -> None:
        assert result.body == body
        assert result.redelivered == (result.seq_id in self.delivered)
        self.delivered.add(result.seq_id)
        self.unacked[result.seq_id] = (result.msg_id, body)

    def _take_disk_results(self) -> None:
        for result in self.disk.fetched[self.completed:]:
            msg_id, body = self.reading.pop(result.seq_id)
            assert result.msg_id == msg_id
            self._delivered(result, body)
        self.completed = len(self.disk.fetched)
        confirmed = self.disk.confirmed
        assert confirmed == self.to_confirm[: len(confirmed)], "a confirm out of order, twice, or for a transient"

    def _settle(self) -> None:
        self.disk.hold_reads = False
        self.disk.deliver(self.queue)
        self.disk.run(self.queue)
        self._take_disk_results()

    def _check_files(self) -> None:
        queue = self.queue
        assert not queue.status().loading and not self.reading
        in_ram = [*queue._q1, *queue._q2, *queue._q3, *queue._q4, *queue._unacked.values()]
        indexed = {m.seq_id for m in in_ram if m.index_on_disk}
        stored = {m.seq_id for m in in_ram if m.in_store}
        assert indexed <= set(self.disk.index) and stored <= set(self.disk.store)
        delta = queue.layout().delta
        on_disk_only = set(self.disk.index) - indexed
        assert len(on_disk_only) == delta.count, "delta's count is not what the index holds"
        assert all(delta.start <= s < delta.end for s in on_disk_only)
        assert set(self.disk.store) - stored <= on_disk_only, "a stored body no message owns"


TestVariableQueueMachine = VariableQueueMachine.TestCase
TestVariableQueueMachine.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)


class _Draws:
    """Stands in for hypothesis's ``data`` in a replay: each ``draw`` returns the next recorded value."""

    def __init__(self, *values: object) -> None:
        self._values = iter(values)

    def draw(self, strategy: object) -> object:
        return next(self._values)


def _replay(machine: VariableQueueMachine, steps: list[tuple[str, dict[str, object]]]) -> None:
    """Run these rules in order, checking every invariant after each, then the teardown, as hypothesis would."""
    invariants = (machine.status_agrees_with_the_model, machine.the_counters_are_the_messages_in_ram,
                  machine.the_parts_hold_contiguous_runs_in_order)
    for name, arguments in steps:
        getattr(machine, name)(**arguments)
        for check in invariants:
            check()
    machine.teardown()


# Run once inside hypothesis only because the rules call ``event``, which needs a test context.
@settings(max_examples=1, database=None)
@given(st.none())
def test_a_transient_message_requeued_then_paged_to_delta_comes_back_redelivered(_: None) -> None:
    """The sequence hypothesis found: message 2's index record was written before its first delivery, and
    the core noted deliveries in the index only for persistent messages, so when the requeued message was
    paged to delta and read back it came out as never delivered."""
    _replay(VariableQueueMachine(), [
        ("start", {"durable": True, "embed_below": 4096, "segment_entries": 2, "ram_target": None}),
        ("publish", {"count": 3, "persistent": False, "size": 0}),
        ("page_everything", {}),
        ("fetch", {"count": 2}),
        ("run_disk", {"hold_reads": False, "rounds": 1}),
        ("ack", {"data": _Draws([0])}),
        ("fetch", {"count": 1}),
        ("requeue", {"data": _Draws([1])}),
        ("requeue", {"data": _Draws([2])}),
        ("page_everything", {}),
        ("fetch", {"count": 1}),
        ("set_target", {"ram_target": 0}),
        ("run_disk", {"hold_reads": False, "rounds": 1}),
        ("fetch", {"count": 1}),
        ("settle_disk", {}),
    ])
