"""Tests of the dispatcher's request batching: each rule by example, then random request streams."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor.actors.broker import Nack
from conveyor.actors.subscriber._batching import (
    AckRequest,
    BatchedRequest,
    DropRequest,
    Flush,
    ModAckRequest,
    NackRequest,
    RequestBatcher,
)
from conveyor.actors.subscriber._components import broker_requests

# ---------------------------------------------------------------------- settings and requests


@pytest.mark.parametrize("max_batch", [0, -3])
def test_max_batch_must_be_positive(max_batch: int) -> None:
    with pytest.raises(ValueError, match=f"max_batch must be >= 1, got {max_batch}"):
        RequestBatcher(max_batch=max_batch)


@pytest.mark.parametrize("max_delay_s", [-0.5, math.nan, math.inf])
def test_max_delay_must_be_finite_and_not_negative(max_delay_s: float) -> None:
    with pytest.raises(ValueError, match=f"max_delay_s must be a finite number >= 0, got {max_delay_s}"):
        RequestBatcher(max_delay_s=max_delay_s)


def test_settings_of_the_wrong_type_are_type_errors() -> None:
    with pytest.raises(TypeError, match="max_batch must be an int >= 1, got True"):
        RequestBatcher(max_batch=True)
    with pytest.raises(TypeError, match=r"max_batch must be an int >= 1, got 2\.0"):
        RequestBatcher(max_batch=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_delay_s must be a number >= 0, got '1'"):
        RequestBatcher(max_delay_s="1")  # type: ignore[arg-type]


def test_defaults_and_edge_settings_are_accepted() -> None:
    batcher = RequestBatcher()
    assert (batcher.max_batch, batcher.max_delay_s, batcher.pending_count) == (100, 0.01, 0)
    assert RequestBatcher(max_batch=1, max_delay_s=0).max_delay_s == 0.0


def test_requests_are_frozen_values_that_check_their_fields() -> None:
    assert ModAckRequest("a", 10) == ModAckRequest("a", 10.0)
    assert AckRequest("a") != NackRequest("a")  # type: ignore[comparison-overlap]
    with pytest.raises(AttributeError):
        AckRequest("a").ack_id = "b"  # type: ignore[misc]
    with pytest.raises(ValueError, match="seconds must be a finite number >= 0, got -1"):
        ModAckRequest("a", -1)
    with pytest.raises(ValueError, match="got nan"):
        ModAckRequest("a", math.nan)
    with pytest.raises(TypeError, match="ack_id must be a str, got 3"):
        DropRequest(3)  # type: ignore[arg-type]


def test_add_rejects_anything_but_a_request() -> None:
    batcher = RequestBatcher()
    with pytest.raises(TypeError, match="got 'a'"):
        batcher.add("a", 0.0)  # type: ignore[arg-type]
    assert batcher.pending_count == 0


# ---------------------------------------------------------------------- flushing by count


def test_add_flushes_when_max_batch_ids_are_pending() -> None:
    batcher = RequestBatcher(max_batch=3)
    assert batcher.add(AckRequest("a"), 0.0) is None
    assert batcher.add(NackRequest("b"), 0.0) is None
    assert batcher.pending_count == 2
    flush = batcher.add(DropRequest("c"), 0.0)
    assert flush == Flush(acks=("a",), nacks=("b",), drops=("c",))
    assert flush.size == 3
    assert batcher.pending_count == 0
    assert batcher.next_due_at() is None


def test_a_batch_of_one_flushes_every_add() -> None:
    batcher = RequestBatcher(max_batch=1, max_delay_s=5)
    assert batcher.add(AckRequest("a"), 0.0) == Flush(acks=("a",))
    assert batcher.add(ModAckRequest("a", 3), 0.0) == Flush(modacks=((3.0, ("a",)),))


def test_repeated_ids_count_once_towards_max_batch() -> None:
    batcher = RequestBatcher(max_batch=2)
    assert batcher.add(ModAckRequest("a", 10), 0.0) is None
    assert batcher.add(ModAckRequest("a", 20), 0.0) is None
    assert batcher.add(AckRequest("a"), 0.0) is None
    assert batcher.pending_count == 1
    assert batcher.add(AckRequest("b"), 0.0) == Flush(acks=("a", "b"))


# ---------------------------------------------------------------------- flushing by age


def test_due_flushes_once_the_oldest_request_is_max_delay_old() -> None:
    batcher = RequestBatcher(max_delay_s=0.25)
    assert batcher.due(1.0) is None, "nothing pending"
    assert batcher.next_due_at() is None
    batcher.add(AckRequest("a"), 1.0)
    assert batcher.next_due_at() == 1.25
    batcher.add(AckRequest("b"), 1.125)
    assert batcher.next_due_at() == 1.25, "later requests do not push the deadline back"
    assert batcher.due(1.0) is None
    assert batcher.due(1.24) is None
    assert batcher.due(1.25) == Flush(acks=("a", "b"))
    assert batcher.due(2.0) is None
    assert batcher.next_due_at() is None


def test_the_delay_starts_again_with_the_first_request_after_a_flush() -> None:
    batcher = RequestBatcher(max_batch=2, max_delay_s=0.5)
    batcher.add(AckRequest("a"), 0.0)
    assert batcher.add(AckRequest("b"), 0.25) is not None
    batcher.add(AckRequest("c"), 0.375)
    assert batcher.next_due_at() == 0.875
    assert batcher.due(0.5) is None
    assert batcher.due(0.875) == Flush(acks=("c",))


def test_a_zero_delay_is_due_at_once() -> None:
    batcher = RequestBatcher(max_delay_s=0)
    batcher.add(NackRequest("a"), 3.0)
    assert batcher.next_due_at() == 3.0
    assert batcher.due(3.0) == Flush(nacks=("a",))


def test_flush_forces_out_everything_and_is_none_when_empty() -> None:
    batcher = RequestBatcher(max_delay_s=60)
    assert batcher.flush() is None
    batcher.add(DropRequest("a"), 0.0)
    assert batcher.flush() == Flush(drops=("a",))
    assert batcher.flush() is None
    assert batcher.next_due_at() is None
    assert repr(batcher) == "<RequestBatcher pending=0 max_batch=100 max_delay_s=60.0 due_at=None>"


# ---------------------------------------------------------------------- superseding within a flush


def _flush_of(*requests: BatchedRequest) -> Flush | None:
    batcher = RequestBatcher(max_delay_s=1)
    for request in requests:
        assert batcher.add(request, 0.0) is None
    return batcher.flush()


def test_an_ack_after_a_modack_sends_only_the_ack() -> None:
    assert _flush_of(ModAckRequest("a", 10), AckRequest("a")) == Flush(acks=("a",))


def test_once_acked_stays_acked() -> None:
    for late in (NackRequest("a"), ModAckRequest("a", 10), DropRequest("a"), AckRequest("a")):
        assert _flush_of(AckRequest("a"), late) == Flush(acks=("a",)), late


def test_an_ack_after_a_nack_wins() -> None:
    assert _flush_of(NackRequest("a"), AckRequest("a")) == Flush(acks=("a",))


def test_otherwise_the_later_request_wins() -> None:
    assert _flush_of(ModAckRequest("a", 10), ModAckRequest("a", 30)) == Flush(modacks=((30.0, ("a",)),))
    assert _flush_of(ModAckRequest("a", 10), NackRequest("a")) == Flush(nacks=("a",))
    assert _flush_of(NackRequest("a"), ModAckRequest("a", 10)) == Flush(modacks=((10.0, ("a",)),))
    assert _flush_of(NackRequest("a"), DropRequest("a")) == Flush(drops=("a",))
    assert _flush_of(DropRequest("a"), NackRequest("a")) == Flush(nacks=("a",))


def test_drops_are_reported_apart_from_the_server_requests() -> None:
    flush = _flush_of(DropRequest("a"), AckRequest("b"), DropRequest("c"))
    assert flush == Flush(acks=("b",), drops=("a", "c"))


def test_modacks_are_grouped_by_seconds_in_first_seen_order() -> None:
    flush = _flush_of(
        ModAckRequest("a", 30),
        ModAckRequest("b", 10),
        ModAckRequest("c", 30),
        ModAckRequest("d", 10.0),
        ModAckRequest("e", 0),
    )
    assert flush == Flush(modacks=((30.0, ("a", "c")), (10.0, ("b", "d")), (0.0, ("e",))))
    assert flush.size == 5
    assert all(isinstance(seconds, float) for seconds, _ in flush.modacks)


def test_ids_are_ordered_by_their_deciding_request() -> None:
    flush = _flush_of(
        NackRequest("a"), NackRequest("b"), AckRequest("c"), NackRequest("a"), NackRequest("c"), NackRequest("d")
    )
    assert flush == Flush(acks=("c",), nacks=("b", "a", "d"))


def test_the_batcher_forgets_ids_across_flushes() -> None:
    batcher = RequestBatcher(max_delay_s=1)
    batcher.add(AckRequest("a"), 0.0)
    assert batcher.flush() == Flush(acks=("a",))
    batcher.add(NackRequest("a"), 0.0)
    assert batcher.flush() == Flush(nacks=("a",))


# ---------------------------------------------------------------------- random request streams


IDS = st.sampled_from("abcdef")
REQUESTS: st.SearchStrategy[BatchedRequest] = st.one_of(
    st.builds(AckRequest, IDS),
    st.builds(NackRequest, IDS),
    st.builds(ModAckRequest, IDS, st.sampled_from([0.0, 10.0, 60.0])),
    st.builds(DropRequest, IDS),
)
# Times are multiples of 1/64 s, so sums and differences are exact and "now - start >= delay" means what it says.
TICKS = st.integers(0, 16).map(lambda n: n / 64)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), REQUESTS, TICKS),
        st.tuples(st.just("due"), st.none(), TICKS),
        st.tuples(st.just("flush"), st.none(), st.just(0.0)),
    ),
    max_size=60,
)


def _expected(window: list[BatchedRequest]) -> Flush:
    """The model: per id, the deciding request is its first ack if any, else its last request."""
    decider: dict[str, int] = {}
    for index, request in enumerate(window):
        earlier = decider.get(request.ack_id)
        if earlier is None or not isinstance(window[earlier], AckRequest):
            decider[request.ack_id] = index
    chosen = [window[index] for index in sorted(decider.values())]
    seconds_seen: list[float] = []
    for request in chosen:
        if isinstance(request, ModAckRequest) and request.seconds not in seconds_seen:
            seconds_seen.append(request.seconds)
    return Flush(
        acks=tuple(r.ack_id for r in chosen if isinstance(r, AckRequest)),
        nacks=tuple(r.ack_id for r in chosen if isinstance(r, NackRequest)),
        modacks=tuple(
            (s, tuple(r.ack_id for r in chosen if isinstance(r, ModAckRequest) and r.seconds == s))
            for s in seconds_seen
        ),
        drops=tuple(r.ack_id for r in chosen if isinstance(r, DropRequest)),
    )


def _ids_of(flush: Flush) -> list[str]:
    return [*flush.acks, *flush.nacks, *(i for _, ids in flush.modacks for i in ids), *flush.drops]


@settings(max_examples=400, deadline=None)
@given(max_batch=st.integers(1, 7), delay_ticks=st.integers(0, 8), ops=OPS)
def test_every_request_lands_in_exactly_one_flush(
    max_batch: int, delay_ticks: int, ops: list[tuple[str, BatchedRequest | None, float]]
) -> None:
    max_delay_s = delay_ticks / 64
    batcher = RequestBatcher(max_batch=max_batch, max_delay_s=max_delay_s)
    now = 0.0
    window: list[BatchedRequest] = []
    """Requests added since the last flush: the next flush must account for exactly these."""
    window_start: float | None = None
    flushed_requests = 0

    def check(flush: Flush | None) -> None:
        nonlocal window_start, flushed_requests
        assert flush is not None
        ids = _ids_of(flush)
        assert len(ids) == len(set(ids)), "an id appears once per flush"
        assert set(ids) == {r.ack_id for r in window}, "every request's id is in this flush"
        assert flush.size == len(ids) <= max_batch
        assert flush == _expected(window), "later requests supersede earlier ones, except an ack"
        flushed_requests += len(window)
        window.clear()
        window_start = None
        assert batcher.pending_count == 0
        assert batcher.next_due_at() is None

    added = 0
    for op, request, tick in ops:
        now += tick
        if op == "add":
            assert request is not None
            if not window:
                window_start = now
            window.append(request)
            added += 1
            flush = batcher.add(request, now)
            distinct = len({r.ack_id for r in window})
            assert (flush is not None) == (distinct == max_batch), "add flushes exactly when the batch is full"
            if flush is not None:
                check(flush)
        elif op == "due":
            if window:
                assert window_start is not None
                assert batcher.next_due_at() == window_start + max_delay_s
            flush = batcher.due(now)
            if window:
                assert window_start is not None
                old_enough = now - window_start >= max_delay_s
                assert (flush is not None) == old_enough, "due flushes exactly when the oldest request is old enough"
                if flush is not None:
                    check(flush)
            else:
                assert flush is None
        else:
            flush = batcher.flush()
            if window:
                check(flush)
            else:
                assert flush is None
        assert batcher.pending_count == len({r.ack_id for r in window}) < max_batch
    if window:
        check(batcher.flush())
    assert flushed_requests == added


@settings(max_examples=200, deadline=None)
@given(max_batch=st.integers(1, 5), requests=st.lists(REQUESTS, max_size=40))
def test_add_alone_never_flushes_more_than_max_batch_ids(max_batch: int, requests: list[BatchedRequest]) -> None:
    batcher = RequestBatcher(max_batch=max_batch, max_delay_s=1)
    seen: list[str] = []
    for request in requests:
        flush = batcher.add(request, 0.0)
        if flush is not None:
            assert flush.size == max_batch
            seen.extend(_ids_of(flush))
    rest = batcher.flush()
    if rest is not None:
        assert rest.size < max_batch
        seen.extend(_ids_of(rest))
    assert set(seen) == {r.ack_id for r in requests}


# ---------------------------------------------------------------------- nacks naming their delivery


def test_a_nack_keeps_the_delivery_it_is_for_and_a_later_nack_of_the_id_supersedes_it() -> None:
    batcher = RequestBatcher(max_batch=10)
    batcher.add(NackRequest("1:1", 2), 0.0)
    batcher.add(NackRequest("1:2"), 0.0)  # no attempt known: 0
    batcher.add(NackRequest("1:1", 3), 0.0)  # delivered again and nacked again before the batch left
    assert batcher.flush() == Flush(nacks=("1:2", "1:1"), nack_attempts=(0, 3))
    batcher.add(NackRequest("1:3"), 0.0)
    assert batcher.flush() == Flush(nacks=("1:3",)), "no attempt named: none carried"


def test_broker_nacks_name_their_deliveries_per_consumer_unless_one_is_not_known() -> None:
    flush = Flush(nacks=("1:5", "2:6", "1:7", "2:8"), nack_attempts=(2, 0, 1, 4))
    assert broker_requests(flush) == [Nack(1, (5, 7), attempts=(2, 1)), Nack(2, (6, 8))]
    assert broker_requests(Flush(nacks=("1:5",))) == [Nack(1, (5,))]


def test_a_nack_attempt_must_be_a_delivery_count_or_zero() -> None:
    with pytest.raises(ValueError, match=r"NackRequest\.attempt must be an int >= 0 \(a delivery_count; 0: not"):
        NackRequest("1:1", -1)


# ---------------------------------------------------------------------- a batch of acks in one call


ACK_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), REQUESTS, TICKS),
        st.tuples(st.just("acks"), st.lists(IDS, max_size=8), TICKS),
        st.tuples(st.just("due"), st.none(), TICKS),
        st.tuples(st.just("flush"), st.none(), st.just(0.0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(max_batch=st.integers(1, 7), delay_ticks=st.integers(0, 8), ops=ACK_OPS)
def test_add_acks_is_add_of_an_ack_request_for_each_id_in_turn(
    max_batch: int, delay_ticks: int, ops: list[tuple[str, object, float]]
) -> None:
    batched = RequestBatcher(max_batch=max_batch, max_delay_s=delay_ticks / 64)
    one_by_one = RequestBatcher(max_batch=max_batch, max_delay_s=delay_ticks / 64)
    now = 0.0
    for op, argument, tick in ops:
        now += tick
        if op == "acks":
            assert isinstance(argument, list)
            ids: list[str] = argument  # the ids of REQUESTS: an ack may follow a nack or modack of its id
            expected = [flush for ack_id in ids if (flush := one_by_one.add(AckRequest(ack_id), now)) is not None]
            assert batched.add_acks(ids, now) == expected
        elif op == "add":
            assert isinstance(argument, (AckRequest, NackRequest, ModAckRequest, DropRequest))
            assert batched.add(argument, now) == one_by_one.add(argument, now)
        elif op == "due":
            assert batched.due(now) == one_by_one.due(now)
        else:
            assert batched.flush() == one_by_one.flush()
        assert batched.pending_count == one_by_one.pending_count
        assert batched.next_due_at() == one_by_one.next_due_at()
    assert batched.flush() == one_by_one.flush()


def test_add_acks_refuses_an_id_that_is_not_a_str_having_queued_those_before_it() -> None:
    batcher = RequestBatcher(max_batch=10)
    with pytest.raises(TypeError, match=r"AckRequest\.ack_id must be a str, got 7"):
        batcher.add_acks(["1:1", 7, "1:2"], 0.0)  # type: ignore[list-item]
    assert batcher.flush() == Flush(acks=("1:1",))
