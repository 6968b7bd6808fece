"""The total-queue checker on hand-made histories (each broken promise reported) and on generated good ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.crash.checker import OrderViolation, PagingSeen, check_history, paging_seen
from tests.crash.history import (
    AckConfirmed,
    AckSent,
    Confirmed,
    Event,
    HistoryWriter,
    PublishFailed,
    QueueSeen,
    Received,
    Sent,
    Started,
    decode,
    encode,
    read_history,
)


def _delivered(key: str, priority: int = 0, count: int = 1, *, confirm: bool = False) -> list[Event]:
    events: list[Event] = [Received(key, priority, count), AckSent(key, confirm)]
    return [*events, AckConfirmed(key)] if confirm else events


GOOD: list[Event] = [
    Started(0, "work"),
    Sent("a", 0), Sent("b", 9), Confirmed("a"), Sent("c", 0), Confirmed("b"),
    *_delivered("b", 9), *_delivered("a", 0, confirm=True),
    Started(1, "drain"),
    *_delivered("b", 9, 2), *_delivered("c", 0),
]


def test_a_good_history_passes_with_its_counts() -> None:
    verdict = check_history(GOOD)
    assert verdict.ok
    assert (verdict.sent, verdict.confirmed, verdict.received, verdict.deliveries) == (3, 2, 3, 4)
    assert (verdict.recovered, verdict.duplicated) == (1, 1)  # c came though never confirmed; b twice


def test_a_confirmed_message_never_received_is_lost() -> None:
    history = [Sent("a"), Confirmed("a"), Sent("b"), Confirmed("b"), *_delivered("b")]
    verdict = check_history(history)
    assert verdict.lost == ("a",)
    assert not verdict.ok


def test_an_unconfirmed_message_never_received_is_not_lost() -> None:
    history = [Sent("a"), PublishFailed("a"), Sent("b"), Confirmed("b"), *_delivered("b")]
    verdict = check_history(history)
    assert verdict.ok and verdict.lost == ()


def test_a_message_nobody_sent_is_unexpected() -> None:
    history = [Sent("a"), Confirmed("a"), *_delivered("a"), *_delivered("ghost"), *_delivered("ghost", count=2)]
    verdict = check_history(history)
    assert verdict.unexpected == ("ghost",)
    assert not verdict.ok


def test_a_message_back_after_its_ack_was_confirmed_is_a_bad_duplicate() -> None:
    history = [Sent("a"), Confirmed("a"), *_delivered("a", confirm=True), Started(1, "work"), *_delivered("a", count=2)]
    verdict = check_history(history)
    assert verdict.bad_duplicates == ("a",)
    assert not verdict.ok


def test_a_message_back_after_a_plain_or_unconfirmed_ack_is_a_fair_duplicate() -> None:
    history = [
        Sent("a"), Sent("b"), Confirmed("a"), Confirmed("b"),
        *_delivered("a"),  # plain ack: may come back
        Received("b"), AckSent("b", confirm=True),  # the process died before the ack's confirm
        Started(1, "work"),
        *_delivered("a", count=2), *_delivered("b", count=2),
    ]
    verdict = check_history(history)
    assert verdict.ok
    assert verdict.duplicated == 2


def test_a_first_delivery_out_of_its_priority_order_is_a_violation() -> None:
    history = [Sent("a", 4), Sent("b", 4), Sent("c", 7), Confirmed("a"), Confirmed("b"), Confirmed("c"),
               *_delivered("c", 7), *_delivered("b", 4), *_delivered("a", 4)]
    verdict = check_history(history)
    assert verdict.order_violations == (OrderViolation(4, "b", "a"),)
    assert not verdict.ok
    assert check_history(history, check_order=False).ok


def test_priorities_may_overtake_each_other_and_redeliveries_may_come_late() -> None:
    history = [Sent("low", 0), Sent("high", 9), Sent("low2", 0),
               *_delivered("high", 9), *_delivered("low", 0), *_delivered("low2", 0), *_delivered("low", 0, 2)]
    assert check_history(history).order_violations == ()


def test_the_summary_line_names_every_count() -> None:
    line = check_history([Sent("a"), Confirmed("a")]).summary()
    assert "lost 1" in line and "unexpected 0" in line and "bad duplicates 0" in line
    assert "order violations 0" in line


# --- generated histories of a correct queue -----------------------------------------------------


@st.composite
def correct_runs(draw: st.DrawFn) -> list[Event]:
    """A history of a queue that keeps its promises: strict priority order, crashes that bring back
    what was delivered but not confirmed-acked, sends that were never confirmed and may be lost."""
    events: list[Event] = []
    ready: list[tuple[int, int, str]] = []  # (-priority, place, key): the queue's order
    unsynced: list[tuple[int, int, str]] = []  # delivered, their ack not synced: a crash brings them back
    counts: dict[str, int] = {}  # key -> deliveries so far
    for step in draw(st.lists(st.sampled_from(["send", "deliver", "crash"]), max_size=40)):
        if step == "send":
            priority = draw(st.sampled_from([0, 0, 5, 9]))
            place = sum(1 for e in events if isinstance(e, Sent))
            key = f"m{place}"
            events.append(Sent(key, priority))
            if draw(st.booleans()):
                events.append(Confirmed(key))
                ready.append((-priority, place, key))
            elif draw(st.booleans()):  # unconfirmed, yet it made it into the queue
                ready.append((-priority, place, key))
        elif step == "deliver" and ready:
            ready.sort()
            entry = ready.pop(0)
            key = entry[2]
            counts[key] = counts.get(key, 0) + 1
            events.append(Received(key, -entry[0], counts[key]))
            confirm = draw(st.booleans())
            events.append(AckSent(key, confirm))
            if confirm and draw(st.booleans()):
                events.append(AckConfirmed(key))
            elif draw(st.booleans()):
                unsynced.append(entry)
        elif step == "crash":
            events.append(Started(len(events), "work"))
            ready.extend(unsynced)
            unsynced.clear()
    for neg, _, key in sorted(ready):
        counts[key] = counts.get(key, 0) + 1
        events.append(Received(key, -neg, counts[key]))
    return events


@given(correct_runs())
def test_a_correct_queue_passes(history: list[Event]) -> None:
    verdict = check_history(history)
    assert verdict.ok, verdict
    confirmed = {e.key for e in history if isinstance(e, Confirmed)}
    assert confirmed <= {e.key for e in history if isinstance(e, Received)}


@given(correct_runs(), st.data())
def test_dropping_a_confirmed_messages_deliveries_makes_it_lost(history: list[Event], data: st.DataObject) -> None:
    confirmed = sorted({e.key for e in history if isinstance(e, Confirmed)})
    if not confirmed:
        return
    key = data.draw(st.sampled_from(confirmed))
    verdict = check_history([e for e in history if not (isinstance(e, Received) and e.key == key)])
    assert verdict.lost == (key,)


# --- the history file ---------------------------------------------------------------------------


def test_every_event_survives_its_line() -> None:
    events: list[Event] = [Sent("a", 3), Confirmed("a"), PublishFailed("a"), Received("a", 3, 2), AckSent("a", True),
                           AckConfirmed("a"), Started(4, "drain"), QueueSeen(4, 10, 64, 300)]
    for event in events:
        assert decode(encode(event)) == event


def test_a_line_naming_no_event_is_refused() -> None:
    with pytest.raises(ValueError, match="op must be one of"):
        decode(b'{"op":"teleported","key":"a"}')


def test_reading_stops_at_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "history"
    writer = HistoryWriter(path)
    writer.record(Sent("a"))
    writer.record(Confirmed("a"))
    writer.close()
    with path.open("ab") as file:
        file.write(encode(Received("a"))[:-5])  # a line cut short
    assert list(read_history(path)) == [Sent("a"), Confirmed("a")]


def test_paging_seen_sums_each_lifes_looks_and_is_none_without_any() -> None:
    events: list[Event] = [Started(0, "work"), QueueSeen(0, 500, 0, 900), QueueSeen(0, 900, 320, 400),
                           Started(1, "work"), QueueSeen(1, 40, 0, 100), QueueSeen(1, 700, 64, 100),
                           QueueSeen(1, 10, 0, 50), Sent("a")]
    seen = paging_seen(events)
    assert seen == PagingSeen(lives_looked=2, lives_with_deltas=2, lives_ending_with_deltas=1,
                              most_entries_out_of_ram=320, most_body_bytes_in_ram=900)
    assert paging_seen([Started(0, "work"), Sent("a")]) is None
    assert check_history(events).ok  # a look is no message: the checker passes over it
