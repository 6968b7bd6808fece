"""Tests of the lease table: each rule by example, then a model server proving no lease ever lapses."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from conveyor.actors.subscriber._histogram import Histogram
from conveyor.actors.subscriber._leases import DuplicateLease, LeaseTable, LeaseWork
from conveyor.actors.subscriber._settings import FlowControl
from conveyor.runtime import ConveyorError


def _table(
    max_lease_duration_s: float = 3600.0, min_extension_s: float = 10.0, max_extension_s: float = 600.0
) -> LeaseTable:
    return LeaseTable(
        FlowControl(
            max_lease_duration_s=max_lease_duration_s,
            min_duration_per_lease_extension_s=min_extension_s,
            max_duration_per_lease_extension_s=max_extension_s,
        )
    )


def _histogram(*samples: float) -> Histogram:
    histogram = Histogram()
    for seconds in samples:
        histogram.add(seconds)
    return histogram


# ---------------------------------------------------------------------- add / remove / queries


def test_add_remembers_leases_in_arrival_order() -> None:
    table = _table()
    assert len(table) == 0
    assert table.next_check_at is None
    assert table.oldest_age(0.0) is None
    table.add("b", 10, now=1.0)
    table.add("a", 20, now=2.0)
    table.add("c", 30, now=2.0)
    assert table.ack_ids() == ("b", "a", "c")
    assert len(table) == 3
    assert "a" in table
    assert "z" not in table
    assert table.bytes == 60
    assert table.oldest_age(5.5) == 4.5


def test_remove_returns_the_processing_duration() -> None:
    table = _table()
    table.add("a", 10, now=100.0)
    table.add("b", 5, now=101.0)
    assert table.remove("a", now=142.5) == 42.5
    assert table.remove("a", now=143.0) is None
    assert table.remove("never", now=143.0) is None
    assert table.ack_ids() == ("b",)
    assert table.bytes == 5
    assert table.oldest_age(143.0) == 42.0


def test_an_emptied_table_needs_no_check() -> None:
    table = _table()
    table.add("a", 1, now=0.0)
    assert table.next_check_at is not None
    table.remove("a", now=1.0)
    assert table.next_check_at is None


def test_a_removed_ack_id_can_be_leased_again_at_the_back() -> None:
    table = _table()
    table.add("a", 1, now=0.0)
    table.add("b", 1, now=1.0)
    table.remove("a", now=2.0)
    table.add("a", 1, now=3.0)
    assert table.ack_ids() == ("b", "a")


def test_duplicate_add_is_a_value_error_naming_the_ack_id() -> None:
    table = _table()
    table.add("ack-9", 1, now=5.0)
    with pytest.raises(
        DuplicateLease, match=r"cannot add lease 'ack-9' at now=6.0: it is already leased \(arrived=5.0"
    ):
        table.add("ack-9", 1, now=6.0)
    assert isinstance(DuplicateLease("x"), ValueError)
    assert isinstance(DuplicateLease("x"), ConveyorError)
    assert table.bytes == 1


def test_add_refuses_bad_sizes() -> None:
    table = _table()
    with pytest.raises(ValueError, match=r"size of lease 'a' must be >= 0, got -3"):
        table.add("a", -3, now=0.0)
    with pytest.raises(TypeError, match=r"size of lease 'a' must be an int, got 2.0"):
        table.add("a", 2.0, now=0.0)  # type: ignore[arg-type]
    assert len(table) == 0


def test_time_must_not_go_backwards() -> None:
    table = _table()
    table.add("a", 1, now=10.0)
    with pytest.raises(ValueError, match=r"cannot add lease 'b' at now=9.0: it was already told now=10.0"):
        table.add("b", 1, now=9.0)
    with pytest.raises(ValueError, match=r"cannot remove lease 'a' at now=9.5"):
        table.remove("a", now=9.5)
    with pytest.raises(ValueError, match=r"cannot maintain leases at now=0"):
        table.maintain(0, Histogram())
    with pytest.raises(ValueError, match=r"cannot measure the oldest lease at now=1.0"):
        table.oldest_age(1.0)
    assert table.ack_ids() == ("a",)
    assert table.remove("a", now=10.0) == 0.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_now_must_be_finite(bad: float) -> None:
    with pytest.raises(ValueError, match=rf"now must be finite, got {bad!r}"):
        _table().add("a", 1, now=bad)


def test_now_must_be_a_number() -> None:
    with pytest.raises(TypeError, match="now must be an int or float, got '5'"):
        _table().maintain("5", Histogram())  # type: ignore[arg-type]


def test_a_table_needs_a_flow_control() -> None:
    with pytest.raises(TypeError, match="LeaseTable needs a FlowControl, got None"):
        LeaseTable(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- the extension


def test_the_extension_is_the_99th_percentile() -> None:
    table = _table()
    assert table.deadline_for(_histogram(*([30] * 99), 500)) == 30.0
    assert table.deadline_for(_histogram(*([30] * 98), 500, 500)) == 500.0


def test_the_extension_is_clamped_to_the_flow_bounds() -> None:
    table = _table(min_extension_s=45.5, max_extension_s=120.0)
    assert table.deadline_for(Histogram()) == 45.5  # an empty histogram says 10
    assert table.deadline_for(_histogram(60)) == 60.0
    assert table.deadline_for(_histogram(3000)) == 120.0
    assert isinstance(table.deadline_for(_histogram(60)), float)


# ---------------------------------------------------------------------- maintain


def test_maintain_extends_every_lease_and_schedules_the_next_check() -> None:
    table = _table()
    table.add("a", 1, now=0.0)
    table.add("b", 1, now=5.0)
    work = table.maintain(8.0, _histogram(100))
    assert work == LeaseWork(extend=("a", "b"), extension_s=100.0, expired=(), next_check_at=8.0 + 89.0)
    assert table.next_check_at == 97.0
    with pytest.raises(AttributeError):
        work.extension_s = 1.0  # type: ignore[misc]


def test_maintain_of_an_empty_table_has_nothing_to_do() -> None:
    assert _table().maintain(3.0, Histogram()) == LeaseWork(extend=(), extension_s=10.0, expired=(), next_check_at=None)


def test_leases_held_for_the_max_lease_duration_expire() -> None:
    table = _table(max_lease_duration_s=100.0)
    table.add("old", 7, now=0.0)
    table.add("edge", 5, now=10.0)
    table.add("young", 3, now=50.0)
    work = table.maintain(110.0, _histogram(20))
    assert work.expired == ("old", "edge")  # 110 and exactly 100 seconds old
    assert work.extend == ("young",)
    assert table.ack_ids() == ("young",)
    assert table.bytes == 3
    assert table.remove("old", now=111.0) is None  # a late ack of an expired lease is not a duration


def test_when_every_lease_expires_there_is_no_next_check() -> None:
    table = _table(max_lease_duration_s=1.0)
    table.add("a", 1, now=0.0)
    assert table.maintain(5.0, Histogram()) == LeaseWork(
        extend=(), extension_s=10.0, expired=("a",), next_check_at=None
    )
    assert len(table) == 0


def test_the_next_check_comes_no_later_than_the_first_expiry() -> None:
    table = _table(max_lease_duration_s=60.0)
    table.add("a", 1, now=0.0)
    table.add("b", 1, now=30.0)
    work = table.maintain(40.0, _histogram(300))  # 40 + 0.9 * 300 - 1 = 309, but "a" expires at 60
    assert work.next_check_at == 60.0
    work = table.maintain(60.0, _histogram(300))
    assert (work.expired, work.extend, work.next_check_at) == (("a",), ("b",), 90.0)


def test_add_brings_the_next_check_forward() -> None:
    table = _table(min_extension_s=10.0)
    table.add("a", 1, now=0.0)
    assert table.next_check_at == 8.0  # its deadline is 10: check at 0.9 * 10 - 1
    assert table.maintain(8.0, _histogram(600)).next_check_at == 8.0 + 539.0
    table.add("b", 1, now=20.0)  # its deadline is 30, long before 547
    assert table.next_check_at == 28.0
    table.add("c", 1, now=25.0)  # needs a check by 33: 28 comes first
    assert table.next_check_at == 28.0


def test_add_never_schedules_past_the_new_lease_expiry() -> None:
    table = _table(max_lease_duration_s=2.0, min_extension_s=10.0)
    table.add("a", 1, now=100.0)
    assert table.next_check_at == 102.0


# ---------------------------------------------------------------------- lapses: a caller that ran late


def test_a_pass_after_the_requested_deadline_reports_the_lease_lapsed() -> None:
    table = _table(min_extension_s=10.0)
    table.add("a", 1, now=0.0, extension_s=10.0)  # asked for 10 s on receipt: runs out at 10
    table.add("b", 1, now=5.0, extension_s=10.0)  # runs out at 15
    assert (table.extended_until("a"), table.extended_until("b"), table.extended_until("z")) == (10.0, 15.0, None)
    work = table.maintain(12.0, _histogram(20))  # the pass due at 8 ran at 12 (the process stood still)
    assert work.lapsed == ("a",)
    assert work.extend == ("a", "b"), "lapsed leases are still extended: the server may have given them back"
    assert table.extended_until("a") == table.extended_until("b") == 32.0
    assert table.maintain(30.0, _histogram(20)).lapsed == (), "each lapse is reported by the pass that sees it"


def test_a_deadline_that_runs_out_at_the_very_pass_counts_as_lapsed() -> None:
    table = _table(min_extension_s=10.0)
    table.add("a", 1, now=0.0, extension_s=10.0)
    assert table.maintain(10.0, Histogram()).lapsed == ("a",)  # the server's deadline may be this instant


def test_an_expired_lease_is_reported_expired_not_lapsed() -> None:
    table = _table(max_lease_duration_s=5.0, min_extension_s=10.0)
    table.add("a", 1, now=0.0, extension_s=10.0)
    work = table.maintain(50.0, Histogram())
    assert (work.expired, work.lapsed, work.extend) == (("a",), (), ())


def test_add_without_an_extension_assumes_the_minimum() -> None:
    table = _table(min_extension_s=10.0)
    table.add("a", 1, now=3.0)
    assert table.extended_until("a") == 13.0


def test_renew_records_a_fresh_deadline_and_brings_the_check_forward() -> None:
    table = _table(min_extension_s=10.0)
    table.add("a", 1, now=0.0, extension_s=10.0)
    assert table.maintain(8.0, _histogram(100)).next_check_at == 97.0  # extended to 108
    assert table.renew("a", now=20.0, extension_s=10.0)  # delivered again, with the server's short lease
    assert table.extended_until("a") == 30.0
    assert table.next_check_at == 28.0, "the renewed lease needs a check before it runs out at 30"
    assert not table.renew("unknown", now=21.0, extension_s=10.0)
    assert table.maintain(28.0, _histogram(100)).lapsed == ()


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "10"])
def test_extensions_must_be_finite_positive_seconds(bad: object) -> None:
    table = _table()
    with pytest.raises(ValueError, match="extension_s must be a finite number of seconds > 0"):
        table.add("a", 1, now=0.0, extension_s=bad)  # type: ignore[arg-type]
    table.add("a", 1, now=0.0)
    with pytest.raises(ValueError, match="extension_s must be a finite number of seconds > 0"):
        table.renew("a", now=1.0, extension_s=bad)  # type: ignore[arg-type]


def test_tiny_extensions_are_refused_since_the_leaser_would_spin() -> None:
    # With a 1 s extension the 1 s safety margin would ask for a check at once, again and again:
    # FlowControl refuses such settings at construction.
    with pytest.raises(ValueError, match=r"min_duration_per_lease_extension_s must be >= 2\.0 seconds"):
        _table(min_extension_s=1.0, max_extension_s=1.0)


def test_repr_shows_the_table() -> None:
    table = _table()
    table.add("a", 4, now=0.0)
    assert repr(table) == "<LeaseTable leases=1 bytes=4 next_check_at=8.0>"


# ---------------------------------------------------------------------- a model server: no lease lapses


@attrs.define
class _ServerModel:
    """What the server believes: each leased message's ack deadline."""

    deadlines: dict[str, float] = attrs.field(factory=dict)
    arrived: dict[str, float] = attrs.field(factory=dict)
    started: dict[str, float] = attrs.field(factory=dict)
    """When each lease's max-lease clock started (its callback was scheduled); absent while on hold."""


flows = st.builds(
    lambda lease, low, extra: FlowControl(
        max_lease_duration_s=lease,
        min_duration_per_lease_extension_s=low,
        max_duration_per_lease_extension_s=low + extra,
    ),
    lease=st.one_of(st.sampled_from([5.0, 60.0, 3600.0]), st.floats(min_value=0.5, max_value=2000.0)),
    # At least 2 s, so 0.9 * extension - 1 > 0 and each check is strictly later than the last.
    low=st.one_of(st.sampled_from([2.0, 10.0]), st.floats(min_value=2.0, max_value=120.0)),
    extra=st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=700.0)),
)
steps = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "hold", "start", "ack", "nack", "maintain"]),
        st.floats(min_value=0.0, max_value=400.0),  # time until this step
        st.integers(min_value=0, max_value=1000),  # which lease, or the size of a new one
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(flow=flows, steps=steps)
def test_no_lease_lapses_at_the_server_between_scheduled_checks(
    flow: FlowControl, steps: list[tuple[str, float, int]]
) -> None:
    table = LeaseTable(flow)
    histogram = Histogram()
    server = _ServerModel()
    now = 0.0
    added = 0

    def check_no_lapse() -> None:
        assert set(table.ack_ids()) == set(server.deadlines)
        for ack_id, deadline in server.deadlines.items():
            assert deadline > now, f"lease {ack_id} lapsed at {deadline} before the check at {now}"

    def maintain() -> None:
        before = table.ack_ids()
        check_no_lapse()
        work = table.maintain(now, histogram)
        if work.expired:
            event("a maintain pass expired leases")
        if work.extend and work.extension_s > flow.min_duration_per_lease_extension_s:
            event("an extension above the minimum")
        assert flow.min_duration_per_lease_extension_s <= work.extension_s <= flow.max_duration_per_lease_extension_s
        assert sorted(work.expired + work.extend) == sorted(before)
        assert work.extend == tuple(a for a in before if a not in work.expired), "arrival order is kept"
        assert work.lapsed == (), "a caller that keeps to the schedule never loses a lease"
        for ack_id in work.expired:
            assert ack_id in server.started, f"{ack_id} expired on hold, before its callback was scheduled"
            age = now - server.started[ack_id]
            assert age >= flow.max_lease_duration_s or now >= server.started[ack_id] + flow.max_lease_duration_s
            del server.deadlines[ack_id]  # left to the server, which will redeliver it
        for ack_id in work.extend:
            started = server.started.get(ack_id)
            if started is None:
                event("a lease on hold was extended")
                continue
            assert now - started < flow.max_lease_duration_s, f"extended {ack_id}, too old"
            assert now < started + flow.max_lease_duration_s
        for ack_id in work.extend:
            server.deadlines[ack_id] = now + work.extension_s
        assert table.ack_ids() == work.extend
        if work.extend:
            assert work.next_check_at is not None
            assert now < work.next_check_at <= now + max(0.0, 0.9 * work.extension_s - 1.0)
            running = [server.started[a] for a in work.extend if a in server.started]
            if running:
                assert work.next_check_at <= min(running) + flow.max_lease_duration_s
        else:
            assert work.next_check_at is None
        assert table.next_check_at == work.next_check_at

    for kind, delay, pick in steps:
        target = now + delay
        # The caller's timer: maintain runs at every scheduled check up to the step's time.
        while table.next_check_at is not None and table.next_check_at <= target:
            assert table.next_check_at >= now
            event("a scheduled check ran")
            now = table.next_check_at
            maintain()
        now = target
        check_no_lapse()
        if kind in ("add", "hold"):
            ack_id = f"a{added}"
            added += 1
            before = table.next_check_at
            table.add(ack_id, pick, now, on_hold=kind == "hold")
            if before is not None and table.next_check_at != before:
                event("add brought a scheduled check forward")
            server.arrived[ack_id] = now
            if kind == "add":
                server.started[ack_id] = now
            server.deadlines[ack_id] = now + flow.min_duration_per_lease_extension_s
        elif kind == "maintain":
            maintain()  # an extra pass, off schedule, is always allowed
        elif kind == "start":
            held = sorted(a for a in server.deadlines if a not in server.started)
            if held:
                ack_id = held[pick % len(held)]
                assert table.start_clock(ack_id, now)
                event("a held lease's clock started")
                server.started[ack_id] = now
        elif server.deadlines:
            ack_id = sorted(server.deadlines)[pick % len(server.deadlines)]
            duration = table.remove(ack_id, now)
            assert duration == now - server.arrived[ack_id]
            if kind == "ack":
                histogram.add(duration)
            del server.deadlines[ack_id]
        else:
            assert table.remove("a-none", now) is None


late_steps = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "ack", "stall", "maintain"]),
        st.floats(min_value=0.0, max_value=400.0),  # time until this step
        st.integers(min_value=0, max_value=1000),  # which lease, or the size of a new one
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(flow=flows, steps=late_steps)
def test_a_late_pass_reports_exactly_the_leases_whose_requested_deadline_passed(
    flow: FlowControl, steps: list[tuple[str, float, int]]
) -> None:
    """A caller that sometimes stands still (``stall``: time passes, no scheduled check runs)."""
    table = LeaseTable(flow)
    histogram = _histogram(30)
    requested: dict[str, float] = {}  # what the caller last asked the server for, per lease
    now = 0.0
    added = 0

    def maintain() -> None:
        work = table.maintain(now, histogram)
        expected = tuple(ack_id for ack_id in work.extend if requested[ack_id] <= now)
        if expected:
            event("a late pass found lapsed leases")
        assert work.lapsed == expected
        for ack_id in work.expired:
            del requested[ack_id]
        for ack_id in work.extend:
            requested[ack_id] = now + work.extension_s
            assert table.extended_until(ack_id) == requested[ack_id]

    for kind, delay, pick in steps:
        target = now + delay
        if kind != "stall":
            while table.next_check_at is not None and table.next_check_at <= target:
                now = max(now, table.next_check_at)
                maintain()
        now = target
        if kind == "add":
            ack_id = f"a{added}"
            added += 1
            extension = table.deadline_for(histogram)
            table.add(ack_id, pick, now, extension)
            requested[ack_id] = now + extension
        elif kind == "maintain":
            maintain()
        elif kind == "ack" and requested:
            ack_id = sorted(requested)[pick % len(requested)]
            table.remove(ack_id, now)
            del requested[ack_id]


# ---------------------------------------------------------------------- the max-lease clock of a held message


def test_a_lease_on_hold_is_extended_but_never_expires_while_it_waits() -> None:
    table = _table(max_lease_duration_s=30.0, min_extension_s=10.0)
    table.add("held", 1, now=0.0, on_hold=True)  # behind its ordering key: its callback is not scheduled
    table.add("running", 1, now=0.0)
    assert table.on_hold("held") and not table.on_hold("running") and not table.on_hold("unknown")
    work = table.maintain(8.0, Histogram())
    assert (work.expired, work.extend) == ((), ("held", "running"))
    work = table.maintain(30.0, Histogram())
    assert (work.expired, work.extend) == (("running",), ("held",)), "only a scheduled message's clock runs"
    work = table.maintain(100.0, Histogram())
    assert (work.expired, work.extend) == ((), ("held",))
    assert work.next_check_at == 100.0 + 8.0, "no expiry to wait for: the extension alone sets the next check"


def test_the_clock_starts_when_the_callback_is_scheduled() -> None:
    table = _table(max_lease_duration_s=30.0, min_extension_s=10.0)
    table.add("a", 1, now=0.0, on_hold=True)
    table.add("b", 1, now=5.0)
    assert table.maintain(8.0, _histogram(100)).next_check_at == 35.0, "b expires at 35"
    assert table.start_clock("a", now=10.0)
    assert not table.on_hold("a")
    assert not table.start_clock("a", now=11.0), "a clock starts once"
    assert not table.start_clock("unknown", now=11.0)
    work = table.maintain(35.0, _histogram(100))
    assert (work.expired, work.extend, work.next_check_at) == (("b",), ("a",), 40.0), "a expires 30 s after 10"
    work = table.maintain(40.0, _histogram(100))
    assert (work.expired, work.extend, work.next_check_at) == (("a",), (), None)


def test_starting_a_clock_brings_the_next_check_forward_to_its_expiry() -> None:
    table = _table(max_lease_duration_s=5.0, min_extension_s=10.0)
    table.add("a", 1, now=0.0, on_hold=True)
    assert table.next_check_at == 8.0
    assert table.maintain(8.0, _histogram(600)).next_check_at == 8.0 + 539.0
    table.start_clock("a", now=9.0)
    assert table.next_check_at == 14.0


def test_expiry_follows_the_order_clocks_started_in_not_arrival() -> None:
    table = _table(max_lease_duration_s=30.0, min_extension_s=10.0)
    table.add("first", 1, now=0.0, on_hold=True)
    table.add("second", 1, now=1.0, on_hold=True)
    table.start_clock("second", now=2.0)
    table.start_clock("first", now=3.0)
    work = table.maintain(32.0, _histogram(20))
    assert (work.expired, work.extend) == (("second",), ("first",))
    assert table.remove("first", now=33.0) == 33.0, "the processing time still runs from receipt"


def test_renew_of_a_held_lease_looks_at_no_expiry() -> None:
    table = _table(max_lease_duration_s=5.0, min_extension_s=10.0)
    table.add("a", 1, now=0.0, on_hold=True)
    table.maintain(8.0, _histogram(600))
    assert table.renew("a", now=20.0, extension_s=10.0)
    assert table.next_check_at == 28.0
