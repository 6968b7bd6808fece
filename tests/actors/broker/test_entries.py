"""EntryList: the ordering rules of seeds 000/001, unit by unit and against a reference model."""

from __future__ import annotations

import gc
import weakref

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.broker._entries import EntryList, EntryState, Returned, priority_level
from conveyor.actors.broker._selectors import HeaderEquals, MatchAll
from conveyor.actors.broker._values import Message

ALL = MatchAll()
FAR = 1e9


def msg(n: int, priority: int = 4, **options: object) -> Message:
    return Message(str(n).encode(), priority=priority, **options)  # type: ignore[arg-type]


def bodies(entries: list) -> list[int]:  # type: ignore[type-arg]
    return [int(entry.message.body) for entry in entries]


def fresh(consumers: int = 1, **options: object) -> EntryList:
    entries = EntryList(**options)  # type: ignore[arg-type]
    for consumer in range(1, consumers + 1):
        entries.add_consumer(consumer, ALL, 0, True)
    return entries


def test_a_drained_level_lets_go_of_its_messages() -> None:
    # Finished entries were trimmed from a level's head lazily, keeping up to 1,024 acked messages
    # (bodies included) alive in a queue that had nothing left.
    entries = fresh()
    published = [msg(n) for n in range(3)]
    for message in published:
        entries.publish(message, 0.0)
    kept = [weakref.ref(message) for message in published]
    taken, _, _ = entries.take(1, 0.0, 3, 10**6, FAR)
    entries.ack(1, [entry.seq for entry in taken])
    del published, taken, message
    gc.collect()
    assert [ref() for ref in kept] == [None, None, None]


def test_acks_out_of_order_cut_the_final_head_in_place_without_a_walk_over_the_backlog() -> None:
    # Past 1,024 final entries at a level's head the level cut them by rebuilding the list of the rest
    # whenever a final entry lay further on (acks out of order, as ordering keys make them): a walk over
    # the whole backlog every 1,024 acks, 0.7 -> 3.9 us an ack at 300,000 messages queued.
    entries = fresh()
    for n in range(3000):
        entries.publish(msg(n), 0.0)
    taken, _, _ = entries.take(1, 0.0, 3000, 10**9, FAR)
    seqs = [entry.seq for entry in taken]
    (level,) = [level for level in entries._levels if level.entries]
    backlog = level.entries
    entries.ack(1, seqs[1:1100] + seqs[1101:1200])  # all but the first and the 1,101st: the head stays
    entries.ack(1, seqs[:1])  # the head walks 1,100 final entries; 99 more lie beyond the 1,101st
    assert level.entries is backlog  # cut in place
    assert level.head == 0 and level.dead == 99
    assert [entry.seq for entry in level.entries[:2]] == [seqs[1100], seqs[1101]]
    entries.ack(1, seqs[1100:1101] + seqs[1200:])
    assert entries.snapshot().entries == ()


def test_priority_levels_map_as_qpid_does() -> None:
    assert [priority_level(p, 10) for p in range(10)] == list(range(10))
    assert [priority_level(p, 2) for p in range(10)] == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    assert [priority_level(p, 3) for p in range(10)] == [0, 0, 0, 0, 1, 2, 2, 2, 2, 2]
    assert [priority_level(p, 1) for p in range(10)] == [0] * 10


@given(levels=st.integers(1, 10), priority=st.integers(0, 255))
def test_priorities_outside_the_levels_clamp_with_qpids_mapping(levels: int, priority: int) -> None:
    """Issue 15, item 7c: N levels, offset 5 - floor((N+1)/2), level clamp(priority - offset, 0, N-1)."""
    offset = 5 - (levels + 1) // 2
    assert priority_level(priority, levels) == min(levels - 1, max(0, priority - offset))


@given(levels=st.integers(1, 10), priorities=st.lists(st.integers(0, 255), min_size=1, max_size=30))
def test_any_message_priority_is_published_at_its_clamped_level(levels: int, priorities: list[int]) -> None:
    """The strict order of a queue is its levels highest first, publish order within each, for any priority."""
    entries = fresh(priorities=levels)
    for n, priority in enumerate(priorities):
        entries.publish(msg(n, priority), 0.0)
    taken, _, _ = entries.take(1, 0.0, len(priorities), 10**9, FAR)
    expected = sorted(range(len(priorities)), key=lambda n: (-priority_level(priorities[n], levels), n))
    assert bodies(taken) == expected


def test_fifo_within_a_level_and_strict_priority_between_levels() -> None:
    entries = fresh()
    for n, priority in enumerate([4, 4, 9, 0, 9, 4]):
        entries.publish(msg(n, priority), 0.0)
    taken, _, _ = entries.take(1, 0.0, 10, 10**6, FAR)
    assert bodies(taken) == [2, 4, 0, 1, 5, 3]


def test_a_higher_priority_arrival_moves_pointers_back() -> None:
    entries = fresh()
    entries.publish(msg(0, 0), 0.0)
    assert bodies(entries.take(1, 0.0, 1, 10**6, FAR)[0]) == [0]
    entries.publish(msg(1, 0), 0.0)
    entries.publish(msg(2, 9), 0.0)  # arrives after 1 but is logically before it
    assert bodies(entries.take(1, 0.0, 2, 10**6, FAR)[0]) == [2, 1]


def test_a_released_entry_returns_at_its_original_position_with_its_count() -> None:
    entries = fresh(consumers=2)
    for n in range(4):
        entries.publish(msg(n), 0.0)
    first, _, _ = entries.take(1, 0.0, 2, 10**6, FAR)  # 0, 1
    second, _, _ = entries.take(2, 0.0, 1, 10**6, FAR)  # 2
    assert bodies(first) == [0, 1] and bodies(second) == [2]
    returned = entries.give_back(1, (first[1].seq,), 0.0, 0.0)
    assert bodies(list(returned.available)) == [1]
    # Consumer 2's pointer was past entry 1: it moved back, so 1 comes before 3.
    again, _, _ = entries.take(2, 0.0, 2, 10**6, FAR)
    assert bodies(again) == [1, 3]
    assert again[0].delivery_count == 2
    assert entries.redelivered == 1


def test_delivery_limit_dead_letters_instead_of_returning() -> None:
    entries = fresh(max_deliveries=2)
    entries.publish(msg(0), 0.0)
    for attempt in (1, 2):
        (entry,), _, _ = entries.take(1, 0.0, 1, 10**6, FAR)
        returned = entries.give_back(1, (entry.seq,), 0.0, 0.0)
        if attempt == 1:
            assert returned.available == (entry,)
    assert returned.dead_lettered == (entry,)
    assert entry.state is EntryState.DEAD_LETTERED
    assert entries.take(1, 0.0, 1, 10**6, FAR)[0] == []
    assert entries.dead_lettered == 1


def test_ttl_expiry_by_timer_and_on_the_way() -> None:
    entries = fresh()
    entries.publish(msg(0, ttl_s=5.0), 0.0)
    entries.publish(msg(1, ttl_s=50.0), 0.0)
    entries.publish(msg(2), 0.0)
    assert entries.next_wakeup() == 5.0
    assert bodies(entries.expire_ttls(10.0)) == [0]
    taken, expired, _ = entries.take(1, 60.0, 10, 10**6, FAR)
    assert bodies(taken) == [2] and bodies(expired) == [1]
    assert entries.expired == 2 and entries.available == 0


def test_delayed_entries_wait_without_being_skipped_for_good() -> None:
    entries = fresh()
    entries.publish(msg(0, delay_s=10.0), 0.0)
    entries.publish(msg(1), 0.0)
    assert bodies(entries.take(1, 0.0, 10, 10**6, FAR)[0]) == [1]
    assert entries.take(1, 5.0, 10, 10**6, FAR)[0] == []
    assert entries.release_delays(10.0) == 1
    assert bodies(entries.take(1, 10.0, 10, 10**6, FAR)[0]) == [0]


def test_nack_backoff_delays_the_return() -> None:
    entries = fresh()
    entries.publish(msg(0), 0.0)
    (entry,), _, _ = entries.take(1, 0.0, 1, 10**6, FAR)
    entries.give_back(1, (entry.seq,), 0.0, 3.0)
    assert entries.take(1, 1.0, 1, 10**6, FAR)[0] == []
    assert entries.next_wakeup() == 3.0
    assert bodies(entries.take(1, 3.0, 1, 10**6, FAR)[0]) == [0]


def test_selectors_skip_for_good_and_others_still_get_the_entry() -> None:
    entries = EntryList()
    entries.add_consumer(1, HeaderEquals("colour", "red"), 0, True)
    entries.add_consumer(2, ALL, 0, True)
    entries.publish(msg(0, headers={"colour": "blue"}), 0.0)
    entries.publish(msg(1, headers={"colour": "red"}), 0.0)
    assert bodies(entries.take(1, 0.0, 10, 10**6, FAR)[0]) == [1]
    assert bodies(entries.take(2, 0.0, 10, 10**6, FAR)[0]) == [0]


def test_a_group_has_one_owner_at_a_time_and_stays_in_order() -> None:
    entries = fresh(consumers=2)
    for n in range(4):
        entries.publish(msg(n, group="g" if n < 3 else None), 0.0)
    first, _, _ = entries.take(1, 0.0, 1, 10**6, FAR)
    assert bodies(first) == [0]
    assert bodies(entries.take(2, 0.0, 10, 10**6, FAR)[0]) == [3]  # g is owned by consumer 1
    assert bodies(entries.take(1, 0.0, 10, 10**6, FAR)[0]) == [1, 2]  # the owner may take more
    held = [entry.seq for entry in entries._cursors[1].held.values()]
    entries.ack(1, held)
    entries.publish(msg(4, group="g"), 0.0)
    assert bodies(entries.take(2, 0.0, 10, 10**6, FAR)[0]) == [4]  # freed, so 2 may own it


def test_lower_priority_consumer_waits_for_an_interested_higher_one() -> None:
    entries = EntryList()
    entries.add_consumer(1, ALL, 10, True)
    entries.add_consumer(2, ALL, 0, True)
    entries.publish(msg(0), 0.0)
    assert entries.take(2, 0.0, 10, 10**6, FAR)[0] == []
    entries.set_interest(1, False)  # no credit: the lower priority may serve
    assert bodies(entries.take(2, 0.0, 10, 10**6, FAR)[0]) == [0]


def test_browsers_see_each_live_entry_once_in_publish_order() -> None:
    entries = fresh()
    entries.add_consumer(9, ALL, 0, False)
    for n, priority in enumerate([1, 9, 5]):
        entries.publish(msg(n, priority), 0.0)
    entries.take(1, 0.0, 1, 10**6, FAR)  # acquires 1 (priority 9): still live, still browsable
    assert bodies(entries.browse(9, 2, 10**6)) == [0, 1]
    entries.publish(msg(3), 0.0)
    assert bodies(entries.browse(9, 10, 10**6)) == [2, 3]
    assert entries.browse(9, 10, 10**6) == []
    assert entries.acquired == 1  # browsing acquired nothing


def test_byte_credit_allows_one_oversize_message_first() -> None:
    entries = fresh()
    entries.publish(Message(b"x" * 100), 0.0)
    entries.publish(Message(b"y" * 10), 0.0)
    assert [len(e.message.body) for e in entries.take(1, 0.0, 10, 50, FAR)[0]] == [100]
    assert [len(e.message.body) for e in entries.take(1, 0.0, 10, 50, FAR)[0]] == [10]


def test_leases_lapse_extend_and_invalidate_late_acks() -> None:
    entries = fresh(consumers=2)
    entries.publish(msg(0), 0.0)
    entries.publish(msg(1), 0.0)
    taken, _, _ = entries.take(1, 0.0, 2, 10**6, 10.0)
    assert entries.extend(1, (taken[1].seq,), 30.0) == (taken[1].seq,)
    returned = entries.expire_leases(10.0)
    assert bodies(list(returned.available)) == [0]
    assert entries.ack(1, (taken[0].seq, taken[1].seq)) == ((taken[1].seq,), (taken[0].seq,))
    assert bodies(entries.take(2, 10.0, 10, 10**6, FAR)[0]) == [0]


def test_removing_a_consumer_returns_everything_it_held() -> None:
    entries = fresh(consumers=2)
    for n in range(3):
        entries.publish(msg(n), 0.0)
    entries.take(1, 0.0, 2, 10**6, FAR)
    returned = entries.remove_consumer(1, 0.0)
    assert bodies(list(returned.available)) == [0, 1]
    assert bodies(entries.take(2, 0.0, 10, 10**6, FAR)[0]) == [0, 1, 2]


def test_evict_and_could_take_now() -> None:
    entries = fresh()
    entries.publish(msg(0), 0.0)
    entries.publish(msg(1, 9), 0.0)
    assert entries.could_take_now(msg(2))
    assert not entries.could_take_now(msg(2, delay_s=1.0))
    dropped = entries.evict_least_significant()
    assert dropped is not None and bodies([dropped]) == [0], "the lowest level's, not the head (1, priority 9)"
    assert dropped.state is EntryState.DEAD_LETTERED and entries.dead_lettered == 1
    entries.set_interest(1, False)
    assert not entries.could_take_now(msg(3))


def test_a_full_ring_evicts_the_oldest_entry_of_the_lowest_non_empty_level() -> None:
    """Issue 15, item 7b: as Qpid's ring policy (PriorityQueueList.getLeastSignificantOldestEntry)."""
    entries = fresh()
    for n, priority in enumerate([9, 4, 4, 9]):
        entries.publish(msg(n, priority), 0.0)
    evicted = entries.evict_least_significant()
    assert evicted is not None and bodies([evicted]) == [1]
    assert bodies(entries.take(1, 0.0, 10, 10**6, FAR)[0]) == [0, 3, 2]
    assert entries.evict_least_significant() is None, "only an AVAILABLE entry is evicted"


def test_the_entry_evicted_can_be_the_message_just_published() -> None:
    entries = fresh()
    entries.publish(msg(0, 9), 0.0)
    entries.publish(msg(1, 9), 0.0)
    entries.publish(msg(2, 0), 0.0)  # lower than everything queued: it is the least significant
    evicted = entries.evict_least_significant()
    assert evicted is not None and bodies([evicted]) == [2]
    assert bodies(entries.take(1, 0.0, 10, 10**6, FAR)[0]) == [0, 1]


def test_eviction_passes_over_acquired_entries_to_the_next_level_up() -> None:
    entries = fresh()
    entries.publish(msg(0, 1), 0.0)
    assert bodies(entries.take(1, 0.0, 1, 10**6, FAR)[0]) == [0]  # held: not evictable
    entries.publish(msg(1, 1), 0.0)
    entries.publish(msg(2, 5), 0.0)
    entries.publish(msg(3, 5), 0.0)
    evicted = [entries.evict_least_significant(), entries.evict_least_significant()]
    assert bodies([e for e in evicted if e is not None]) == [1, 2]


# --- reference model ----------------------------------------------------------------------------


class EntryListMachine(RuleBasedStateMachine):
    """Random publish / take / ack / give back / lease lapse / consumer churn vs a list-based model.

    Without selectors, groups, delays or consumer priorities, every take must return exactly the
    first AVAILABLE entries in queue order: the pointer rules are invisible, and this checks them.
    """

    LIMIT = 3

    def __init__(self) -> None:
        super().__init__()
        self.levels = 3
        self.entries = EntryList(priorities=self.levels, max_deliveries=self.LIMIT)
        self.now = 0.0
        # model: seq -> [rank, state, holder, count]
        self.model: dict[int, list[object]] = {}
        self.consumers: set[int] = set()
        self.next_consumer = 1
        self.counts = {"acked": 0, "dead": 0}

    def _order(self) -> list[int]:
        return sorted(self.model, key=lambda seq: (self.model[seq][0], seq))

    @rule(priority=st.one_of(st.integers(0, 9), st.integers(10, 255)))
    def publish(self, priority: int) -> None:
        entry = self.entries.publish(Message(b"m", priority=priority), self.now)
        rank = self.levels - 1 - min(self.levels - 1, max(0, priority - (5 - (self.levels + 1) // 2)))
        assert entry.position[0] == rank, "Qpid's mapping, clamped at both ends"
        self.model[entry.seq] = [rank, "available", None, 0]

    @rule()
    def add_consumer(self) -> None:
        self.entries.add_consumer(self.next_consumer, ALL, 0, True)
        self.consumers.add(self.next_consumer)
        self.next_consumer += 1

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), count=st.integers(1, 4))
    def take(self, data: st.DataObject, count: int) -> None:
        consumer = data.draw(st.sampled_from(sorted(self.consumers)))
        taken, _, _ = self.entries.take(consumer, self.now, count, 10**9, self.now + 10)
        expected = [seq for seq in self._order() if self.model[seq][1] == "available"][:count]
        assert [entry.seq for entry in taken] == expected
        for seq in expected:
            self.model[seq][1:] = ["acquired", consumer, int(self.model[seq][3]) + 1]  # type: ignore[call-overload]

    def _held(self, consumer: int) -> list[int]:
        return [seq for seq, (_, state, holder, _) in self.model.items() if state == "acquired" and holder == consumer]

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from(sorted(self.consumers)))
        held = self._held(consumer)
        tags = data.draw(st.lists(st.sampled_from(held), unique=True)) if held else []
        acked, invalid = self.entries.ack(consumer, tags)
        assert list(acked) == tags and invalid == ()
        for seq in tags:
            del self.model[seq]
            self.counts["acked"] += 1

    def _return(self, seqs: list[int]) -> None:
        for seq in seqs:
            record = self.model[seq]
            if int(record[3]) >= self.LIMIT:  # type: ignore[call-overload]
                del self.model[seq]
                self.counts["dead"] += 1
            else:
                record[1:3] = ["available", None]

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def give_back(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from(sorted(self.consumers)))
        held = self._held(consumer)
        tags = data.draw(st.lists(st.sampled_from(held), unique=True)) if held else []
        self.entries.give_back(consumer, tags, self.now, 0.0)
        self._return(tags)

    @precondition(lambda self: self.consumers)
    @rule(data=st.data(), with_delays=st.booleans())
    def nack_naming_attempts(self, data: st.DataObject, with_delays: bool) -> None:
        """A nack naming each tag's delivery: a stale attempt (any but the current) changes nothing."""
        consumer = data.draw(st.sampled_from(sorted(self.consumers)))
        held = self._held(consumer)
        tags = data.draw(st.lists(st.sampled_from(held), unique=True)) if held else []
        attempts = [
            data.draw(st.one_of(st.just(int(self.model[seq][3])), st.integers(1, self.LIMIT + 1)))  # type: ignore[call-overload]
            for seq in tags
        ]
        current = [seq for seq, attempt in zip(tags, attempts, strict=True) if self.model[seq][3] == attempt]
        stale = {seq: self._state_of(seq) for seq in tags if seq not in current}
        if with_delays:
            returned = self.entries.give_back_with(consumer, tags, self.now, {}, tuple(attempts))
        else:
            returned = self.entries.give_back(consumer, tags, self.now, 0.0, tuple(attempts))
        assert sorted(e.seq for e in returned.available + returned.dead_lettered) == sorted(current)
        assert {seq: self._state_of(seq) for seq in stale} == stale, "a stale nack changed its entry"
        self._return(current)

    def _state_of(self, seq: int) -> tuple[object, ...]:
        entry = self.entries.get(seq)
        assert entry is not None
        return entry.state, entry.consumer, entry.delivery_count, entry.deadline, entry.lease, entry.position

    @rule()
    def evict(self) -> None:
        """A full ring drops the oldest AVAILABLE entry of the lowest level that has one."""
        available = [seq for seq, record in self.model.items() if record[1] == "available"]
        expected = max(available, key=lambda seq: (self.model[seq][0], -seq), default=None)  # highest rank: lowest
        evicted = self.entries.evict_least_significant()
        assert (None if evicted is None else evicted.seq) == expected
        if expected is not None:
            del self.model[expected]
            self.counts["dead"] += 1

    @rule()
    def leases_lapse(self) -> None:
        self.now += 10
        lapsed = sorted(seq for seq, record in self.model.items() if record[1] == "acquired")
        returned = self.entries.expire_leases(self.now)
        assert sorted(e.seq for e in returned.available + returned.dead_lettered) == lapsed
        self._return(lapsed)

    @precondition(lambda self: self.consumers)
    @rule(data=st.data())
    def remove_consumer(self, data: st.DataObject) -> None:
        consumer = data.draw(st.sampled_from(sorted(self.consumers)))
        held = sorted(self._held(consumer))
        returned = self.entries.remove_consumer(consumer, self.now)
        assert sorted(e.seq for e in returned.available + returned.dead_lettered) == held
        self._return(held)
        self.consumers.discard(consumer)

    @invariant()
    def counters_account_for_every_message(self) -> None:
        entries = self.entries
        available = sum(1 for record in self.model.values() if record[1] == "available")
        acquired = len(self.model) - available
        assert (entries.available, entries.acquired) == (available, acquired)
        assert (entries.acked, entries.dead_lettered) == (self.counts["acked"], self.counts["dead"])
        assert entries.published == entries.acked + entries.dead_lettered + entries.available + entries.acquired
        live = [entries.get(seq) for seq in self.model]
        assert entries.live_bytes == sum(entry.message.size for entry in live if entry is not None)
        assert None not in live

    @invariant()
    def each_level_counts_the_final_entries_past_its_head(self) -> None:
        live = (EntryState.AVAILABLE, EntryState.ACQUIRED)
        for level in self.entries._levels:
            past_head = level.entries[level.head:]
            assert level.dead == sum(1 for entry in past_head if entry.state not in live)
            assert all(entry.state not in live for entry in level.entries[:level.head])

    @invariant()
    def no_available_entry_hides_behind_a_pointer(self) -> None:
        for cursor in self.entries._cursors.values():
            for seq, record in self.model.items():
                if record[1] == "available":
                    assert (record[0], seq) > cursor.pointer


TestEntryListMachine = EntryListMachine.TestCase
TestEntryListMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_bad_priorities_are_refused() -> None:
    with pytest.raises(ValueError, match="priorities must be from 1 to 10"):
        EntryList(priorities=0)


def test_next_wakeup_skips_leases_already_settled() -> None:
    """An acked or extended lease must not wake the queue at its old deadline (one wake per message)."""
    entries = fresh()
    for n in range(3):
        entries.publish(msg(n), 0.0)
    (first,), _, _ = entries.take(1, 0.0, 1, 10**6, 1.0)
    (second,), _, _ = entries.take(1, 0.5, 1, 10**6, 1.5)
    (third,), _, _ = entries.take(1, 0.6, 1, 10**6, 1.6)
    assert entries.next_wakeup() == 1.0
    entries.ack(1, (first.seq,))
    assert entries.next_wakeup() == 1.5
    entries.extend(1, (second.seq,), 9.0)
    assert entries.next_wakeup() == 1.6
    entries.ack(1, (third.seq,))
    assert entries.next_wakeup() == 9.0
    entries.ack(1, (second.seq,))
    assert entries.next_wakeup() is None


def test_a_nack_for_an_older_delivery_leaves_the_redelivery_leased() -> None:
    entries = fresh()
    entries.publish(msg(0), 0.0)
    (first,), _, _ = entries.take(1, 0.0, 1, 10**6, 10.0)
    assert entries.expire_leases(10.0).available == (first,)  # the lease lapsed: delivery 1 is over
    (again,), _, _ = entries.take(1, 10.0, 1, 10**6, 20.0)  # the same consumer, the same tag
    assert again is first and again.delivery_count == 2
    assert entries.give_back(1, (first.seq,), 10.5, 0.0, (1,)) == Returned(), "the nack of delivery 1 is stale"
    assert (again.state, again.consumer, again.deadline) == (EntryState.ACQUIRED, 1, 20.0)
    assert entries.give_back(1, (first.seq,), 10.5, 0.0, (2,)).available == (again,)
    assert again.state is EntryState.AVAILABLE


def _published_and_watched(count: int, watched: int) -> tuple[EntryList, list[weakref.ref[Message]]]:
    """A list with ``count`` messages published and one consumer; weak refs to the first ``watched``."""
    entries = fresh()
    published = [msg(n) for n in range(count)]
    for message in published:
        entries.publish(message, 0.0)
    return entries, [weakref.ref(message) for message in published[:watched]]


def test_a_long_queue_acked_in_order_trims_its_head_and_keeps_its_order() -> None:
    """Thousands of in-order acks trim the level's head many times over: the acked bodies go (all
    but at most the 1,025 the lazy trim keeps), and the rest is still taken in order."""
    entries, kept = _published_and_watched(6000, 5000)
    for _ in range(50):
        taken, _, _ = entries.take(1, 0.0, 100, 10**9, FAR)
        entries.ack(1, [entry.seq for entry in taken])
    del taken
    gc.collect()
    assert sum(ref() is not None for ref in kept) <= 1025
    assert bodies(entries.take(1, 0.0, 1000, 10**9, FAR)[0]) == list(range(5000, 6000))


def test_held_entries_keep_their_leases_through_thousands_of_acks() -> None:
    """The lease heap is compacted many times over while one entry per batch stays held, extended:
    each held entry still lapses at its own deadline, none earlier; the acked ones are let go."""
    entries, kept = _published_and_watched(6000, 5000)
    extended: list[int] = []
    for batch in range(50):  # 5,000 taken 100 at a time; one per batch extended, the rest acked
        taken, _, _ = entries.take(1, 0.0, 100, 10**9, 10.0 + batch)
        first, *rest = [entry.seq for entry in taken]
        assert entries.extend(1, (first,), 1000.0 + batch) == (first,)
        extended.append(first)
        assert entries.ack(1, rest) == (tuple(rest), ())
    del taken, rest
    gc.collect()
    assert sum(ref() is None for ref in kept) > 4000, "sparse levels drop their acked entries all the same"
    assert [entry.seq for entry in entries.live_in_order()] == extended + list(range(5001, 6001))
    assert entries.next_wakeup() == 1000.0
    assert entries.expire_leases(999.0) == Returned()
    assert [entry.seq for entry in entries.expire_leases(1049.0).available] == extended


def test_a_take_that_expires_thousands_on_its_way_still_takes_what_follows_in_order() -> None:
    """Expiring entries during a walk trims the level's head under it (past 1,024): the walk goes on
    from the same place, neither skipping nor repeating an entry."""
    entries = fresh()
    for n in range(3000):
        entries.publish(msg(n, ttl_s=1.0), 0.0)
    for n in range(3000, 3010):
        entries.publish(msg(n), 0.0)
    taken, expired, _ = entries.take(1, 2.0, 5, 10**9, FAR)
    assert len(expired) == 3000
    assert bodies(taken) == [3000, 3001, 3002, 3003, 3004]
    assert bodies(entries.take(1, 2.0, 10, 10**9, FAR)[0]) == [3005, 3006, 3007, 3008, 3009]
