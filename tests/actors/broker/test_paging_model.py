"""The body pager against a plain model: every body comes back intact, RAM stays within the target.

A hypothesis state machine drives an ``EntryList`` with a ``BodyPager`` and a ``MemoryBodyStore``
whose batches complete late (one in flight, as the queue runs them): random publishes at three
priority levels, takes by two consumers (one with a selector), browses, acks, releases, nacks with a
delay, lease lapses, TTL expiry and drop-head eviction, and target changes. A take or browse stopped
by a paged-out body reads it and asks again, as the queue does.
"""

from __future__ import annotations

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

LIVE = (EntryState.AVAILABLE, EntryState.ACQUIRED)


class PagerMachine(RuleBasedStateMachine):
    """One entry list, its pager, a store, and the bodies every message must keep."""

    @initialize(ram=st.sampled_from([0, 1, 12, 30, 100]))
    def start(self, ram: int) -> None:
        self.entries = EntryList(priorities=3)
        self.pager = BodyPager(self.entries, ram)
        self.store = MemoryBodyStore()
        self.in_flight: PageBatch | None = None
        self.bodies: dict[int, bytes] = {}  # seq -> the body it was published with
        self.now = 0.0
        self.count = 0
        self.entries.add_consumer(1, MatchAll(), 0, True)
        self.entries.add_consumer(2, HeaderEquals("colour", "red"), 0, True)
        self.entries.add_consumer(3, MatchAll(), 0, False)  # a browser

    # --- the store's job, late ------------------------------------------------------------

    def _settle(self) -> None:
        """After every step, as the queue after every handler: balance, and start a batch if none runs."""
        self.pager.balance()
        if self.in_flight is None:
            self.in_flight = self.pager.take_batch()

    def _finish_job(self) -> None:
        if self.in_flight is not None:
            bodies = run_page_batch(self.store, self.in_flight)
            self.in_flight = None
            for seq, body in bodies:
                assert body == self.bodies[seq], f"entry {seq} read back a body it was not published with"
            self.pager.loaded(bodies)

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

    @rule(consumer=st.sampled_from([1, 2]), count=st.integers(1, 4))
    def take(self, consumer: int, count: int) -> None:
        """Take, reading any body that stops the walk first (the queue holds the pull meanwhile)."""
        for _ in range(20):
            taken, _, _ = self.entries.take(consumer, self.now, count, 10**6, self.now + 5.0)
            for entry in taken:
                assert entry.message.body == self.bodies[entry.seq], "an entry was handed over without its body"
            self.pager.delivered(taken)
            blocked = self.entries.blocked
            if blocked is None or taken:
                if blocked is not None:
                    self.pager.need((blocked,))
                break
            self.pager.need((blocked,))
            while blocked.paged:  # handled anew right after the read, before the next balance (``_loaded``)
                if self.in_flight is None:
                    self.in_flight = self.pager.take_batch()
                self._finish_job()
        self._settle()

    @rule(count=st.integers(1, 4))
    def browse(self, count: int) -> None:
        seen = self.entries.browse(3, count, 10**6)
        for entry in seen:
            assert entry.message.body == self.bodies[entry.seq]
        if self.entries.blocked is not None:
            self.pager.need((self.entries.blocked,))
        self._settle()

    def _held(self, consumer: int) -> list[int]:
        return [seq for seq in self.entries.live_tags() if (e := self.entries.get(seq)) is not None
                and e.consumer == consumer]

    @rule(consumer=st.sampled_from([1, 2]), how=st.sampled_from(["ack", "release", "nack"]))
    def settle(self, consumer: int, how: str) -> None:
        tags = self._held(consumer)[:2]
        if how == "ack":
            self.entries.ack(consumer, tags)
        else:
            returned = self.entries.give_back(consumer, tags, self.now, 0.5 if how == "nack" else 0.0)
            self.pager.available_again(returned.available)
        self._settle()

    @rule(seconds=st.sampled_from([0.3, 2.0, 6.0]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds
        returned = self.entries.expire_leases(self.now)
        self.pager.available_again(returned.available)
        self.entries.expire_ttls(self.now)
        self.entries.release_delays(self.now)
        self._settle()

    @rule()
    def evict(self) -> None:
        """A full ring drops its least significant entry; its dead letter needs the body."""
        entry = self.entries.evict_least_significant()
        if entry is not None:
            self.pager.need((entry,))
        self._settle()

    @rule(ram=st.sampled_from([0, 5, 40, 1000]))
    def retarget(self, ram: int) -> None:
        self.pager.target_bytes = ram
        self._settle()

    # --- what must hold ------------------------------------------------------------------------

    @invariant()
    def ram_within_target(self) -> None:
        assert self.pager.held_bytes <= self.pager.target_bytes

    @invariant()
    def counts_agree(self) -> None:
        live = [self.entries.get(seq) for seq in self.entries.live_tags()]
        paged = sum(e.size for e in live if e is not None and e.paged)
        assert self.entries.paged_bytes == paged
        assert self.entries.paged == sum(1 for e in live if e is not None and e.paged)
        for entry in live:
            assert entry is not None
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
        stored = {seq for seq in self.entries.live_tags() if (e := self.entries.get(seq)) is not None and e.stored}
        assert set(self.store.bodies) == stored
        for seq in stored:
            assert self.store.bodies[seq] == self.bodies[seq]


PagerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPager = PagerMachine.TestCase
