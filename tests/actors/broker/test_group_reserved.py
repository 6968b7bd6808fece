"""Group order holds when an entry of the group is left to a higher-priority consumer (found by broker-swarm).

A lower-priority consumer skips an entry reserved for a higher-priority consumer that wants work;
it used to take the group's later entries (ones the higher consumer's selector does not match) past
it, so the group went out of order and the lower consumer owned the group while its first entry
waited (``group_exclusivity``, broker-swarm seed 106 under ``pause``).
"""

from __future__ import annotations

from conveyor.actors.broker import EntryList, HeaderEquals, MatchAll, Message

RED = (("colour", "red"),)
BLUE = (("colour", "blue"),)


def _entries() -> EntryList:
    entries = EntryList()
    entries.add_consumer(1, HeaderEquals("colour", "red"), priority=2, acquiring=True)
    entries.add_consumer(2, MatchAll(), priority=0, acquiring=True)
    entries.set_interest(1, True)
    entries.set_interest(2, True)
    return entries


def _take(entries: EntryList, consumer_id: int) -> list[int]:
    taken, _, _ = entries.take(consumer_id, 0.0, 10, 1 << 20, 10.0)
    return [entry.seq for entry in taken]


def test_a_lower_consumer_does_not_take_a_group_past_an_entry_reserved_for_a_higher_one() -> None:
    entries = _entries()
    first = entries.publish(Message(b"1", headers=RED, group="g"), 0.0)
    second = entries.publish(Message(b"2", headers=BLUE, group="g"), 0.0)
    assert _take(entries, 2) == []  # the group waits behind its first entry
    assert _take(entries, 1) == [first.seq]
    assert _take(entries, 2) == []  # consumer 1 owns the group now
    entries.ack(1, (first.seq,))
    assert _take(entries, 2) == [second.seq]


def test_other_groups_and_ungrouped_entries_still_go_to_the_lower_consumer() -> None:
    entries = _entries()
    entries.publish(Message(b"1", headers=RED, group="g"), 0.0)
    other = entries.publish(Message(b"2", headers=BLUE, group="h"), 0.0)
    loose = entries.publish(Message(b"3", headers=BLUE), 0.0)
    assert _take(entries, 2) == [other.seq, loose.seq]
