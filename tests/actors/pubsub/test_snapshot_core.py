"""The snapshot's set computation, sans-IO: ``TopicSnapshots`` and ``SeekLog.seek_snapshot``.

A snapshot holds its subscription's unacked messages at creation and every later publish, in
publish order, once each, and its journal events rebuild the same contents; a Seek to it leaves
exactly its messages unacked and every other message acked (kept as acked with
``retain_acked_messages``, gone without).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.pubsub import PubMessage, SeekLog, TopicSnapshots
from conveyor.actors.pubsub._filter import parse_filter
from conveyor.actors.pubsub._seek_log import rows
from conveyor.actors.pubsub._snapshots import (
    FORGET,
    HOLD,
    RECORD,
    START,
    TopicSnapshotKeeper,
    snapshot_lifetime_end,
    snapshot_name_refusal,
)

DAY_NS = 24 * 3600 * 10**9


def _message(number: int) -> PubMessage:
    return PubMessage(b"m%d" % number, (("parity", str(number % 2)),), "", number * 1_000_000_000, str(number))


def _contents(book: TopicSnapshots) -> tuple[dict[str, list[str]], set[str]]:
    return {name: [m.message_id for m in book.contents(name) or ()] for name in book.held}, book.making


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 15), st.integers(0, 15), st.data())
def test_a_snapshot_holds_the_unacked_messages_and_every_later_publish(before: int, after: int,
                                                                      data: st.DataObject) -> None:
    book = TopicSnapshots()
    earlier = [_message(n) for n in range(before)]
    book.record(earlier)  # nothing records yet: no snapshot
    book.start("snap")
    later = [_message(n) for n in range(before, before + after)]
    split = data.draw(st.integers(0, len(later)))
    book.record(later[:split])  # publishes that reach the topic before the subscription answers
    unacked = data.draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else []
    book.hold("snap", unacked)
    book.record(later[split:])
    expected = sorted({m.message_id for m in unacked} | {m.message_id for m in later}, key=int)
    assert [m.message_id for m in book.contents("snap") or ()] == expected
    odd = parse_filter('attributes.parity = "1"')
    assert [m.message_id for m in book.contents("snap", odd) or ()] == [i for i in expected if int(i) % 2]


operations = st.lists(st.one_of(
    st.tuples(st.just(RECORD), st.integers(1, 3)),
    st.tuples(st.just(START), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just(HOLD), st.sampled_from(["a", "b", "c"]), st.lists(st.integers(0, 30), max_size=4)),
    st.tuples(st.just(FORGET), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("compact")),
), max_size=30)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_the_topic_journal_rebuilds_the_same_snapshots(drawn: list[tuple[Any, ...]]) -> None:
    live = TopicSnapshots()
    state: Any = ()
    events: list[bytes] = []
    published = 100
    for operation in drawn:
        event: tuple[Any, ...]
        match operation:
            case ("compact",):
                state, events = pickle.loads(pickle.dumps(live.state())), []
                continue
            case (kind, count) if kind == RECORD:
                event = (RECORD, rows(_message(published + i) for i in range(count)))
                published += count
            case (kind, name, numbers) if kind == HOLD:
                event = (HOLD, name, rows(_message(n) for n in numbers))
            case _:
                event = operation
        events.append(pickle.dumps(event))
        live.replay(event)
        rebuilt = TopicSnapshots.restore(state)
        for written in events:
            rebuilt.replay(pickle.loads(written))
        assert _contents(rebuilt) == _contents(live)
        assert live.making <= set(live.held)
        for name in live.held:
            ids = [int(m.message_id) for m in live.contents(name) or ()]
            assert ids == sorted(set(ids))  # publish order, once each


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 20), unique=True), st.lists(st.integers(0, 20), unique=True),
       st.lists(st.integers(0, 25), unique=True), st.booleans())
def test_a_seek_to_a_snapshot_leaves_exactly_its_messages_unacked(logged: list[int], acked: list[int],
                                                                  held: list[int], retain: bool) -> None:
    log = SeekLog()
    log.route([_message(n) for n in sorted(logged)], 1e9)
    log.settle([str(n) for n in acked], retain=retain)
    before = set(log.messages)
    log.seek_snapshot([_message(n) for n in sorted(held)], 30 * 1_000_000_000, retain)
    unacked = [m.message_id for m, _ in log.unacked(1e9)]
    assert unacked == [str(n) for n in sorted(held)]  # in publish order
    if retain:
        assert set(log.acked) == before - {str(n) for n in held}
        assert set(log.messages) == before | {str(n) for n in held}
    else:
        assert set(log.messages) == {str(n) for n in held}
    assert log.bytes == sum(len(m.data) for m in log.messages.values())


def test_the_lifetime_is_seven_days_less_the_oldest_messages_age() -> None:
    now = 10 * DAY_NS
    assert snapshot_lifetime_end([], now) == now + 7 * DAY_NS
    assert snapshot_lifetime_end([now - 3 * DAY_NS, now - DAY_NS], now) == now + 4 * DAY_NS
    assert snapshot_lifetime_end([now + 5], now) == now + 7 * DAY_NS  # never later than 7 days from now


def test_snapshot_names_are_checked_naming_the_field() -> None:
    assert snapshot_name_refusal("projects/p/snapshots/good-name") is None
    for bad in ("projects/p/snapshots/ab", "projects/p/topics/abc", "projects/p/snapshots/goog-x", "x" * 300):
        refused = snapshot_name_refusal(bad, "name")
        assert refused is not None and refused.startswith("name: ") and len(refused) < 250


def test_a_foreign_event_is_refused() -> None:
    with pytest.raises(ValueError, match="not a snapshot event"):
        TopicSnapshots().replay(("publish", 1))


def test_a_snapshot_unfinished_at_a_crash_is_forgotten_at_the_restart() -> None:
    keeper = TopicSnapshotKeeper("projects/p/topics/tee")
    written: list[tuple[Any, ...]] = []
    for event in [(START, "done"), (HOLD, "done", rows([_message(1)])), (START, "cut"), (RECORD, rows([_message(2)]))]:
        assert keeper.recover(event)
    assert not keeper.recover(("route", ()))  # the topic's own events are left to it
    keeper.unfinished_lost(_Journal(written))
    assert _contents(keeper.book) == ({"done": ["1", "2"]}, set())
    assert written == [(FORGET, "cut")]


class _Journal:
    """Just ``append``, into a list (what the keeper writes)."""

    def __init__(self, into: list[tuple[Any, ...]]) -> None:
        self.append = into.append
