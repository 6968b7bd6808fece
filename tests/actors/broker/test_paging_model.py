"""The body pager against a plain model: every body comes back intact, RAM stays within the target.

A hypothesis state machine drives an ``EntryList`` with a ``BodyPager`` and a ``MemoryBodyStore``
whose batches complete late (one in flight, as the queue runs them): random publishes at three
priority levels, takes by two consumers (one with a selector), browses, acks, releases, nacks with a
delay, lease lapses, TTL expiry and drop-head eviction, and target changes. A take or browse stopped
by a paged-out body reads it and asks again, as the queue does.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conveyor.actors.broker import (
    BodyPager,
    EntryList,
    EntryState,
    HeaderEquals,
    MatchAll,
    MemoryBodyStore,
    Message,
    PageBatch,
    run_page_batch,
)
from conveyor.actors.broker._entries import Entry

LIVE = (EntryState.AVAILABLE, EntryState.ACQUIRED)


def _body_back(entry: Entry) -> Callable[[], bool]:
    return lambda: not entry.paged


def _chunk_back(entries: EntryList, rank: int) -> Callable[[], bool]:
    chunk = entries.first_delta_chunk(rank)
    return lambda: entries.first_delta_chunk(rank) is not chunk


class PagerMachine(RuleBasedStateMachine):
    """One entry list, its pager, a store, and the bodies every message must keep."""

    @initialize(ram=st.sampled_from([0, 1, 12, 30, 100]), chunk=st.sampled_from([None, 1, 2, 3]),
                keep=st.sampled_from([0, 2]), each=st.sampled_from([0, 0, 7]))
    def start(self, ram: int, chunk: int | None, keep: int, each: int) -> None:
        self.entries = EntryList(priorities=3)
        self.pager = BodyPager(self.entries, ram, chunk, keep, entry_bytes=each)
        self.final: set[int] = set()  # seqs settled for good
        self.store = MemoryBodyStore()
        self.in_flight: PageBatch | None = None
        self.bodies: dict[int, bytes] = {}  # seq -> the body it was published with
        self.now = 0.0
        self.count = 0
        self.entries.add_consumer(1, MatchAll(), 0, True)
        self.entries.add_consumer(2, HeaderEquals("colour", "red"), 0, True)
        self.entries.add_consumer(3, MatchAll(), 0, False)  # a browser
        self.browsed = 0

    # --- the store's job, late ------------------------------------------------------------

    def _settle(self) -> None:
        """After every step, as the queue after every handler: balance, and start a batch if none runs."""
        self.pager.balance()
        if self.in_flight is None:
            self.in_flight = self.pager.take_batch()

    def _finish_job(self) -> None:
        if self.in_flight is not None:
            done = run_page_batch(self.store, self.in_flight)
            self.in_flight = None
            for seq, body in done.bodies:
                assert body == self.bodies[seq], f"entry {seq} read back a body it was not published with"
            self.pager.loaded(done)

    @rule()
    def complete_job(self) -> None:
        self._finish_job()
        self._settle()

    def _drain_jobs(self) -> None:
        while self.in_flight is not None:
            self.complete_job()

    # --- what the queue does ----------------------------------------------------------------

    @rule(size=st.integers(0, 12), priority=st.sampled_from([0, 4, 9]), red=st.booleans(),
          ttl=st.sampled_from([None, None, 1.0]))
    def publish(self, size: int, priority: int, red: bool, ttl: float | None) -> None:
        self.count += 1
        body = bytes([self.count % 251]) * size
        message = Message(body, headers={"colour": "red" if red else "blue"}, priority=priority, ttl_s=ttl,
                          message_id=str(self.count))
        entry = self.entries.publish(message, self.now)
        self.bodies[entry.seq] = body
        self.pager.published(entry)
        self._settle()

    def _run_until(self, done: Callable[[], bool]) -> None:
        """Run the store's jobs until ``done()`` (no balance between: the queue handles the pull at once)."""
        for _ in range(10):
            if done():
                return
            if self.in_flight is None:
                self.in_flight = self.pager.take_batch()
            self._finish_job()
        raise AssertionError("a read the walk waits for never came back")

    @rule(consumer=st.sampled_from([1, 2]), count=st.integers(1, 4))
    def take(self, consumer: int, count: int) -> None:
        """Take, reading any body or delta that stops the walk first (the queue holds the pull meanwhile)."""
        self._take(consumer, count)
        self._settle()

    def _take(self, consumer: int, count: int) -> list[int]:
        for _ in range(50):
            taken, expired, _ = self.entries.take(consumer, self.now, count, 10**6, self.now + 5.0)
            self.final.update(entry.seq for entry in expired)
            positions = [entry.position for entry in taken]
            assert positions == sorted(positions), "one take handed entries out of queue order"
            for entry in taken:
                assert entry.message.body == self.bodies[entry.seq], "an entry was handed over without its body"
            self.pager.delivered(taken)
            blocked, rank = self.entries.blocked, self.entries.blocked_rank
            if blocked is not None:
                self.pager.need((blocked,))
            elif rank is not None:
                self.pager.need_delta(rank)
            if taken or (blocked is None and rank is None):
                return [entry.seq for entry in taken]
            if blocked is not None:
                self._run_until(_body_back(blocked))
            else:
                assert rank is not None
                self._run_until(_chunk_back(self.entries, rank))
        raise AssertionError("a take kept waiting")

    @rule(count=st.integers(1, 4))
    def browse(self, count: int) -> None:
        seen = self.entries.browse(3, count, 10**6)
        for entry in seen:
            assert entry.message.body == self.bodies[entry.seq]
            assert entry.seq > self.browsed, "a browser saw an entry twice or out of publish order"
            self.browsed = entry.seq
        if self.entries.blocked is not None:
            self.pager.need((self.entries.blocked,))
        if self.entries.blocked_rank is not None:
            self.pager.need_delta(self.entries.blocked_rank)
        self._settle()

    def _held(self, consumer: int) -> list[int]:
        return [seq for seq in self.entries.live_tags() if (e := self.entries.get(seq)) is not None
                and e.consumer == consumer]

    @rule(consumer=st.sampled_from([1, 2]), how=st.sampled_from(["ack", "release", "nack"]))
    def settle(self, consumer: int, how: str) -> None:
        tags = self._held(consumer)[:2]
        if how == "ack":
            self.final.update(self.entries.ack(consumer, tags)[0])
        else:
            returned = self.entries.give_back(consumer, tags, self.now, 0.5 if how == "nack" else 0.0)
            self.pager.available_again(returned.available)
            self.final.update(entry.seq for entry in (*returned.dead_lettered, *returned.expired))
        self._settle()

    @rule(seconds=st.sampled_from([0.3, 2.0, 6.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        returned = self.entries.expire_leases(self.now)
        self.pager.available_again(returned.available)
        self.final.update(entry.seq for entry in (*returned.dead_lettered, *returned.expired))
        self.final.update(entry.seq for entry in self.entries.expire_ttls(self.now))
        self.entries.release_delays(self.now)
        self._settle()

    @rule()
    def evict(self) -> None:
        """A full ring drops its least significant entry; its dead letter needs the body."""
        if self.pager.chunk_entries is not None:
            return  # a queue with a length limit keeps its entries in RAM (QueueActor.make_pager)
        entry = self.entries.evict_least_significant()
        if entry is not None:
            self.final.add(entry.seq)
            self.pager.need((entry,))
        self._settle()

    @rule(ram=st.sampled_from([0, 5, 40, 1000]))
    def retarget(self, ram: int) -> None:
        self.pager.target_bytes = ram
        self._settle()

    # --- what must hold ------------------------------------------------------------------------

    @invariant()
    def ram_within_target(self) -> None:
        # What the target bounds: each body in RAM, and ``entry_bytes`` for it (counted here from the entries).
        in_ram = [entry for seq in self.bodies if seq not in self.final
                  and (entry := self.entries.get(seq)) is not None and not entry.paged]
        assert self.pager.held_bytes == sum(entry.size for entry in in_ram)
        assert self.pager.held_cost == self.pager.held_bytes + self.pager.entry_bytes * len(in_ram)
        assert self.pager.held_cost <= self.pager.target_bytes

    @invariant()
    def nothing_lost_nothing_invented(self) -> None:
        tags = self.entries.live_tags()
        assert list(tags) == sorted(set(self.bodies) - self.final)
        assert self.entries.available + self.entries.acquired == len(tags)

    def _delta_sizes(self) -> list[int]:
        return [size for level in self.entries._levels for chunk in level.delta for size in chunk.sizes]

    @invariant()
    def counts_agree(self) -> None:
        live = [self.entries.get(seq) for seq in self.entries.live_tags()]
        delta = self._delta_sizes()
        assert len(delta) == self.entries.delta_count == sum(1 for e in live if e is None)
        paged = sum(e.size for e in live if e is not None and e.paged) + sum(delta)
        assert self.entries.paged_bytes == paged
        assert self.entries.paged == sum(1 for e in live if e is not None and e.paged) + len(delta)
        for entry in live:
            if entry is None:
                continue  # in a delta
            if not entry.paged:
                assert entry.message.body == self.bodies[entry.seq]
            else:
                assert entry.message.body == b""
                assert entry.stored

    def teardown(self) -> None:
        """Every job done: the store holds exactly the stored bodies of live entries, each intact."""
        if not hasattr(self, "pager"):
            return
        self._drain_jobs()
        stored = {seq for seq in self.entries.live_tags() if (e := self.entries.get(seq)) is None or e.stored}
        assert {key for key in self.store.bodies if key > 0} == stored
        chunks = {chunk.key for level in self.entries._levels for chunk in level.delta}
        assert {key for key in self.store.bodies if key < 0} == chunks
        for seq in stored:
            assert self.store.bodies[seq] == self.bodies[seq]
        # Drain: the plain consumer takes every entry left (in RAM or in a delta) and acks it.
        for consumer in (1, 2):
            self.entries.give_back(consumer, self._held(consumer), self.now, 0.0)
        self.now += 100.0
        self.entries.expire_leases(self.now)
        self.final.update(entry.seq for entry in self.entries.expire_ttls(self.now))
        self.entries.release_delays(self.now)
        while self.entries.available:
            taken = self._take(1, 4)
            assert taken, "entries are left that no take reaches"
            self.final.update(self.entries.ack(1, taken)[0])
            self._settle()
        assert self.entries.delta_count == 0


PagerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPager = PagerMachine.TestCase
