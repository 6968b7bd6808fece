"""The batch methods of the subscriber's cores equal the one-at-a-time calls they replace.

``LeaseTable.add_many`` / ``start_clocks`` / ``remove_many``, ``LoadTracker.add_many`` /
``remove_many`` and ``Histogram.add_many`` run beside a twin fed one message at a time (the
model), on the same steps, bad input included: every step must return or raise the same, and
leave the same state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conveyor.actors.subscriber._flow import LoadTracker
from conveyor.actors.subscriber._histogram import Histogram
from conveyor.actors.subscriber._leases import LeaseTable
from conveyor.actors.subscriber._settings import FlowControl


@attrs.frozen
class _Arrival:
    ack_id: str
    size: Any  # now and then not a good size, to compare the errors
    key: str | None


@attrs.frozen
class _Finished:
    ack_id: str
    acked: bool


def _outcome(call: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What ``call(*args)`` returned, or the type and text of what it raised."""
    try:
        return ("returned", call(*args))
    except (ValueError, TypeError) as error:
        return ("raised", (type(error), str(error)))


def _now_and_then(good: st.SearchStrategy[Any], bad: list[Any], one_in: int = 20) -> st.SearchStrategy[Any]:
    """Mostly ``good``, and one of ``bad`` about one time in ``one_in`` (shrinking towards good)."""
    return st.tuples(st.integers(0, one_in - 1), good, st.sampled_from(bad)).map(
        lambda drawn: drawn[2] if drawn[0] == one_in - 1 else drawn[1]
    )


def _new_ids(data: st.DataObject, fresh: int, known: st.SearchStrategy[str]) -> list[str]:
    """Up to 6 ack ids never used (``fresh`` on), now and then with a ``known`` one among them."""
    ids = [f"a{fresh + i}" for i in range(data.draw(st.integers(0, 6), label="arrivals"))]
    if data.draw(st.integers(0, 4), label="with a known id") == 0:
        ids.insert(data.draw(st.integers(0, len(ids))), data.draw(known))
    return ids


sizes = _now_and_then(st.integers(0, 1000), [-1, 1.5, True])
keys = st.sampled_from([None, "", "key"])
flows = st.builds(
    lambda lease, low, extra: FlowControl(
        max_lease_duration_s=lease,
        min_duration_per_lease_extension_s=low,
        max_duration_per_lease_extension_s=low + extra,
    ),
    lease=st.floats(min_value=0.5, max_value=2000.0),
    low=st.floats(min_value=2.0, max_value=120.0),
    extra=st.floats(min_value=0.0, max_value=700.0),
)


# ---------------------------------------------------------------------- the lease table


def _lease_state(table: LeaseTable, now: float, histogram: Histogram) -> tuple[object, ...]:
    """Everything the table shows of itself."""
    ids = table.ack_ids()
    return (
        ids,
        len(table),
        table.bytes,
        table.next_check_at,
        table.oldest_age(now),
        table.deadline_for(histogram),
        [(table.on_hold(ack_id), table.extended_until(ack_id), ack_id in table) for ack_id in ids],
    )


def _add_one_by_one(table: LeaseTable, items: list[_Arrival], now: float, extension: float | None) -> None:
    for item in items:
        table.add(item.ack_id, item.size, now, extension, on_hold=bool(item.key))


def _start_one_by_one(table: LeaseTable, ack_ids: list[str], now: float) -> int:
    return sum(table.start_clock(ack_id, now) for ack_id in ack_ids)


def _remove_one_by_one(table: LeaseTable, items: list[_Finished], now: float, histogram: Histogram) -> list[float]:
    durations = []
    for item in items:
        duration = table.remove(item.ack_id, now)
        if duration is not None and item.acked:
            durations.append(duration)
    histogram.add_many(durations)  # the histogram's batch method, on this side
    return durations


def _remove_batched(table: LeaseTable, items: list[_Finished], now: float, histogram: Histogram) -> list[float]:
    durations = table.remove_many(items, now)
    for duration in durations:
        histogram.add(duration)  # and its one-at-a-time add on this one
    return durations


@settings(max_examples=200, deadline=None)
@given(flow=flows, data=st.data())
def test_the_lease_table_batch_methods_equal_one_call_per_message(flow: FlowControl, data: st.DataObject) -> None:
    batched, model = LeaseTable(flow), LeaseTable(flow)
    batched_histogram, model_histogram = Histogram(), Histogram()
    now = 0.0
    fresh = 0
    for _ in range(data.draw(st.integers(0, 30), label="steps")):
        kind = data.draw(st.sampled_from(["add", "add", "start", "remove", "maintain"]), label="kind")
        now += data.draw(st.floats(0.0, 300.0), label="time until this step")
        # Mostly leased ack ids, now and then one never leased.
        leased = st.sampled_from(model.ack_ids()) if len(model) else st.just("a-none")
        some_ids = st.lists(_now_and_then(leased, ["a-none"], 5), max_size=6)
        if kind == "add":
            ids = _new_ids(data, fresh, leased if len(model) else st.just(f"a{fresh}"))  # a duplicate now and then
            fresh += len(ids)
            items = [_Arrival(ack_id, data.draw(sizes), data.draw(keys)) for ack_id in ids]
            extension = data.draw(st.one_of(st.none(), st.floats(0.5, 700.0)), label="extension")
            got = _outcome(batched.add_many, items, now, extension)
            expected = _outcome(_add_one_by_one, model, items, now, extension)
            event(f"add_many raised {got[1][0].__name__}" if got[0] == "raised" else "add_many added")
        elif kind == "start":
            ids = data.draw(some_ids)
            got = _outcome(batched.start_clocks, ids, now)
            expected = _outcome(_start_one_by_one, model, ids, now)
            event(f"start_clocks started {min(got[1], 2)}+ clocks")
        elif kind == "remove":
            finished = [_Finished(ack_id, data.draw(st.booleans())) for ack_id in data.draw(some_ids)]
            got = _outcome(_remove_batched, batched, finished, now, batched_histogram)
            expected = _outcome(_remove_one_by_one, model, finished, now, model_histogram)
            event(f"remove_many returned {min(len(got[1]), 2)}+ durations")
        else:
            got = _outcome(batched.maintain, now, batched_histogram)
            expected = _outcome(model.maintain, now, model_histogram)
            event(f"maintain expired {min(len(got[1].expired), 1)}+, found {min(len(got[1].lapsed), 1)}+ lapsed")
        assert got == expected, f"{kind} at {now}"
        assert _lease_state(batched, now, batched_histogram) == _lease_state(model, now, model_histogram)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, "10"])
def test_add_many_refuses_a_bad_extension_before_any_arrival(bad: object) -> None:
    table = LeaseTable(FlowControl())
    with pytest.raises(ValueError, match="cannot add leases: extension_s must be a finite number of seconds > 0"):
        table.add_many([_Arrival("a", 1, None)], 0.0, bad)  # type: ignore[arg-type]
    assert len(table) == 0


def test_the_batch_methods_check_now_once_even_for_no_messages() -> None:
    table = LeaseTable(FlowControl())
    table.add_many([], 5.0)
    for call in (table.add_many, table.start_clocks, table.remove_many):
        with pytest.raises(ValueError, match="time must not go backwards"):
            call([], 4.0)
    assert table.next_check_at is None


# ---------------------------------------------------------------------- the load tracker


def _count_one_by_one(tracker: LoadTracker, items: list[_Arrival]) -> None:
    for item in items:
        tracker.add(item.ack_id, item.size)


def _uncount_one_by_one(tracker: LoadTracker, items: list[_Finished]) -> int:
    return sum(tracker.remove(item.ack_id) for item in items)


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 8), data=st.data())
def test_the_load_tracker_batch_methods_equal_one_call_per_message(limit: int, data: st.DataObject) -> None:
    flow = FlowControl(max_messages=limit, max_bytes=limit * 300, resume_threshold=0.5)
    batched, model = LoadTracker(flow), LoadTracker(flow)
    counted: list[str] = []  # the ids added, some removed since
    for _ in range(data.draw(st.integers(0, 30), label="steps")):
        some_id = _now_and_then(st.sampled_from(counted) if counted else st.just("a-none"), ["a-none"], 5)
        if data.draw(st.booleans(), label="add"):
            ids = _new_ids(data, len(counted), some_id)  # a duplicate now and then
            counted.extend(ids)
            items = [_Arrival(ack_id, data.draw(sizes), None) for ack_id in ids]
            got = _outcome(batched.add_many, items)
            expected = _outcome(_count_one_by_one, model, items)
            event(f"add_many raised {got[1][0].__name__}" if got[0] == "raised" else "add_many added")
        else:
            finished = [_Finished(ack_id, acked=True) for ack_id in data.draw(st.lists(some_id, max_size=6))]
            got = _outcome(batched.remove_many, finished)
            expected = _outcome(_uncount_one_by_one, model, finished)
            event(f"remove_many removed {min(got[1], 2)}+")
        assert got == expected
        decision = batched.update()
        assert decision == model.update()
        event(f"decided {decision}")
        assert batched.snapshot() == model.snapshot()
        assert [ack_id in batched for ack_id in counted] == [ack_id in model for ack_id in counted]


# ---------------------------------------------------------------------- the histogram


durations = st.lists(
    _now_and_then(
        st.one_of(st.floats(0.0, 9.999), st.floats(10.0, 700.0), st.integers(0, 700)),
        [-1.0, -1, math.nan, math.inf, True, "5"],
    ),
    max_size=12,
)
PERCENTILES = (*range(101), 99.5)


def _add_each(histogram: Histogram, values: list[Any]) -> None:
    for value in values:
        histogram.add(value)


@settings(max_examples=300, deadline=None)
@given(batches=st.lists(durations, max_size=8))
def test_histogram_add_many_equals_add_of_each(batches: list[list[Any]]) -> None:
    batched, model = Histogram(), Histogram()
    for values in batches:
        got = _outcome(batched.add_many, values)
        expected = _outcome(_add_each, model, values)
        event("add_many raised" if got[0] == "raised" else "add_many returned")
        assert got == expected
        assert len(batched) == len(model)
        assert [batched.percentile(p) for p in PERCENTILES] == [model.percentile(p) for p in PERCENTILES]
