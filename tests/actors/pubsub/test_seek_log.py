"""``SeekLog``: a subscription's Seek log and exactly-once memory, rebuilt from its journal to the same state.

The subscription journals each change as an event before it applies it, and replaces the events by
a snapshot now and then; a new process restores the snapshot and replays the events. Hypothesis
drives random changes with snapshots at random points: the rebuilt log must equal the live one
after every step, the events must survive pickling (they go to disk), and the log's own rules hold
(bytes counted, acked messages in the log, the confirmed memory bounded, retention and Seek).
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.pubsub import PubMessage, SeekLog, SeekLogState
from conveyor.actors.pubsub._seek_log import (
    CONFIRM,
    DROP,
    GENERATION,
    REBUILT,
    RETAINED,
    ROUTE,
    SEEK,
    SETTLE,
    SNAPSHOT,
    UNRETAIN,
    Event,
    rows,
)

LIMIT = 5  # confirmed ack ids remembered: small, so that forgetting the oldest is exercised


def _message(number: int, size: int) -> PubMessage:
    return PubMessage(b"x" * size, (("n", str(number)),), "", number * 1_000_000_000, str(number))


def _state(log: SeekLog) -> tuple[Any, ...]:
    return (list(log.messages.items()), log.bytes, dict(log.acked), log.latest_ns, list(log.confirmed),
            log.generation, log.rebuilding)


operations = st.lists(st.one_of(
    st.tuples(st.just(ROUTE), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), min_size=1, max_size=4),
              st.sampled_from([5.0, 1e9])),
    st.tuples(st.just(SETTLE), st.lists(st.integers(0, 30), max_size=4), st.booleans()),
    st.tuples(st.just(DROP), st.integers(0, 30)),
    st.tuples(st.just(RETAINED), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=4)),
    st.tuples(st.just(SEEK), st.integers(0, 31), st.booleans()),
    st.tuples(st.just(UNRETAIN)),
    st.tuples(st.just(CONFIRM), st.lists(st.integers(0, 9).map(lambda n: f"ack-{n}"), min_size=1, max_size=3)),
    st.tuples(st.just(GENERATION)),
    st.tuples(st.just(REBUILT)),
    st.tuples(st.just(SNAPSHOT), st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), max_size=4),
              st.booleans()),
    st.tuples(st.just("snapshot")),
), max_size=40)


def _event(log: SeekLog, operation: tuple[Any, ...]) -> Event:
    """The event the subscription would journal for ``operation`` (what its handler records)."""
    match operation:
        case (kind, drawn, retention_s) if kind == ROUTE:
            return ROUTE, rows(_message(n, size) for n, size in drawn), retention_s
        case (kind, numbers, retain) if kind == SETTLE:
            return SETTLE, tuple(map(str, numbers)), retain
        case (kind, number) if kind == DROP:
            return DROP, str(number)
        case (kind, drawn) if kind == RETAINED:
            return RETAINED, rows(_message(n, size) for n, size in drawn)
        case (kind, second, retain) if kind == SEEK:
            return SEEK, second * 1_000_000_000, 31_000_000_000, retain
        case (kind, texts) if kind == CONFIRM:
            return CONFIRM, tuple(texts)
        case (kind, drawn, retain) if kind == SNAPSHOT:
            return SNAPSHOT, rows(_message(n, size) for n, size in drawn), 31_000_000_000, retain
        case (kind,) if kind == GENERATION:
            return GENERATION, log.generation + 1
    return operation


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_journal_rebuilds_the_same_log_after_every_step(drawn: list[tuple[Any, ...]]) -> None:
    live = SeekLog(LIMIT)
    snapshot: SeekLogState | None = None
    events: list[bytes] = []
    for operation in drawn:
        if operation[0] == "snapshot":
            snapshot, events = pickle.loads(pickle.dumps(live.snapshot())), []
        else:
            event = _event(live, operation)
            events.append(pickle.dumps(event))
            live.replay(event)
        rebuilt = SeekLog(LIMIT) if snapshot is None else SeekLog.restore(snapshot, LIMIT)
        for written in events:
            rebuilt.replay(pickle.loads(written))
        assert _state(rebuilt) == _state(live)
        assert live.bytes == sum(len(m.data) for m in live.messages.values())
        assert set(live.acked) <= set(live.messages)
        assert len(live.confirmed) <= LIMIT
        assert all(key == message.message_id for key, message in live.messages.items())


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=20), st.integers(0, 21))
def test_a_seek_with_retained_acks_marks_exactly_the_earlier_messages_acked(drawn: list[tuple[int, int]],
                                                                          second: int) -> None:
    log = SeekLog()
    log.route([_message(n, size) for n, size in drawn], 1e9)
    log.settle([str(n) for n, _ in drawn], retain=True)
    log.seek(second * 1_000_000_000, 0, retain=True)
    assert set(log.acked) == {str(n) for n, _ in drawn if n < second}
    assert [m.message_id for m, _ in log.unacked(1e9)] == [mid for mid in log.messages if int(mid) >= second]


def test_an_ack_without_retention_leaves_the_log_and_with_it_stays_as_acked() -> None:
    log = SeekLog()
    log.route([_message(1, 3), _message(2, 4)], 1e9)
    log.settle(["1"], retain=False)
    assert list(log.messages) == ["2"] and log.bytes == 4
    log.settle(["2"], retain=True)
    assert list(log.messages) == ["2"] and log.acked == {"2": None} and log.unacked(1e9) == []
    log.unretain()
    assert not log.messages and not log.acked and log.bytes == 0


def test_retention_drops_the_oldest_messages_and_counts_what_is_left() -> None:
    log = SeekLog()
    log.route([_message(1, 1), _message(2, 1)], 10.0)
    log.route([_message(12, 1)], 10.0)  # 1 is now 11 s older than the newest: past 10 s of retention
    assert list(log.messages) == ["2", "12"]
    # 2 is still in the log but has no retention left: a Seek's new generation does not get it
    assert [(m.message_id, left) for m, left in log.unacked(10.0)] == [("12", 10.0)]


def test_the_confirmed_memory_forgets_the_oldest_first() -> None:
    log = SeekLog(confirmed_limit=2)
    log.confirm(["a", "b", "c"])
    assert list(log.confirmed) == ["b", "c"]


def test_retained_messages_join_in_publish_order() -> None:
    log = SeekLog()
    log.route([_message(5, 1)], 1e9)
    log.add_retained([_message(7, 1), _message(3, 1), _message(5, 9)])
    assert list(log.messages) == ["3", "5", "7"] and log.messages["5"].data == b"x"


def test_compaction_is_due_by_events_or_by_bytes() -> None:
    log = SeekLog()
    log.route([_message(n, 1) for n in range(10)], 1e9)
    assert not log.needs_compaction(1023, 0)
    assert log.needs_compaction(1024, 0)
    assert not log.needs_compaction(1, 4 * 1024 * 1024 - 1)
    assert log.needs_compaction(1, 4 * 1024 * 1024)


def test_a_foreign_event_or_a_bad_limit_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="not a Seek log event"):
        SeekLog().replay(("publish", 1))
    with pytest.raises(ValueError, match="confirmed_limit"):
        SeekLog(-1)


def test_a_snapshot_holds_plain_values_only() -> None:
    log = SeekLog()
    log.route([_message(1, 2)], 1e9)
    log.confirm(["a"])
    state = log.snapshot()
    assert state.messages == ((b"xx", (("n", "1"),), "", 1_000_000_000, "1"),)
    assert _state(SeekLog.restore(state)) == _state(log)
    assert isinstance(SeekLog.restore(state).messages, OrderedDict)
