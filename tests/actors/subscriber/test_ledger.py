"""The ack-id ledger: each case by example, then random runs against a one-state-per-ack-id model."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.broker import Delivery, Message
from conveyor.actors.subscriber._ledger import (
    REFUSED_MEMORY_S,
    AckLedger,
    Answer,
    Arrival,
    LedgerError,
    LedgerSnapshot,
    Settled,
)


def _delivery(tag: int, count: int = 1, consumer_id: int = 1) -> Delivery:
    return Delivery("q", tag, Message(f"m{tag}".encode()), count, None, consumer_id)


def _deliver(ledger: AckLedger, tag: int, count: int = 1) -> Arrival:
    return ledger.delivered(f"1:{tag}", _delivery(tag, count))


def test_a_first_delivery_is_new_and_pending() -> None:
    ledger = AckLedger()
    assert ledger.consumer_id is None
    assert _deliver(ledger, 1, count=3) is Arrival.NEW
    assert dict(ledger.pending) == {"1:1": 3}
    assert ledger.is_pending("1:1") and len(ledger) == 1
    assert ledger.consumer_id == 1


def test_a_delivery_of_a_pending_message_renews_its_lease_and_a_nack_names_the_newest() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    assert _deliver(ledger, 1, count=2) is Arrival.RENEW, "the copy here runs; the new lease is extended"
    assert _deliver(ledger, 1, count=3) is Arrival.RENEW
    assert ledger.nack("1:1") == Settled(release=True, attempt=3)
    assert not ledger.is_pending("1:1")
    assert _deliver(ledger, 1, count=4) is Arrival.NEW, "a nacked message coming back is new"


def test_a_second_settlement_does_nothing() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    assert ledger.ack("1:1") == Settled(release=True), "an ack names no delivery: it settles the current one"
    assert ledger.ack("1:1") is None
    assert ledger.nack("1:1") is None
    assert ledger.drop("1:1") is None
    assert ledger.nack("1:9") is None, "never received"


def test_a_dropped_message_delivered_again_meanwhile_hands_back_that_delivery() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    again = _delivery(1, count=2)
    assert ledger.delivered("1:1", again) is Arrival.RENEW
    assert ledger.drop("1:1") == Settled(release=True, redelivery=again)
    assert ledger.delivered("1:1", again) is Arrival.NEW, "the live delivery is taken in as new"


def test_an_ack_or_nack_settles_a_redelivery_too_and_hands_nothing_back() -> None:
    ledger = AckLedger()
    for tag in (1, 2):
        _deliver(ledger, tag)
        _deliver(ledger, tag, count=2)
    assert ledger.ack("1:1") == Settled(release=True)
    assert ledger.nack("1:2") == Settled(release=True, attempt=2)
    assert ledger.snapshot().redelivered == 0


def test_an_expired_lease_is_released_once_stays_pending_and_is_not_renewed() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    assert ledger.expire("1:1")
    assert not ledger.expire("1:1"), "released already"
    assert not ledger.expire("1:2"), "not pending"
    assert ledger.is_pending("1:1")
    assert ledger.leased_of(("1:1",)) == ()
    assert ledger.pending_of(("1:1", "1:2")) == ("1:1",)
    assert _deliver(ledger, 1, count=2) is Arrival.COVERED, "its lease is not renewed"
    assert ledger.ack("1:1") == Settled(release=False), "load and leaser forgot it already"
    assert ledger.snapshot() == LedgerSnapshot(pending=0, expired=0, redelivered=0, acking=1, refused=0)


def test_a_delivery_while_the_ack_is_on_its_way_is_covered_and_its_credit_given_back_once_the_ack_took() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    ledger.ack("1:1")
    assert _deliver(ledger, 1, count=2) is Arrival.COVERED
    assert ledger.acking == {"1:1": True}
    assert ledger.answered("1:1", took=True) is Answer.CREDIT
    assert ledger.answered("1:1", took=True) is Answer.UNKNOWN, "answered already"


def test_an_ack_that_took_asks_for_nothing_more() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    ledger.ack("1:1")
    assert ledger.answered("1:1", took=True) is Answer.TOOK
    assert _deliver(ledger, 1, count=2) is Arrival.NEW


def test_a_refused_ack_is_acked_again_when_the_message_comes_back_not_run() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    ledger.ack("1:1")
    assert ledger.answered("1:1", took=False) is Answer.REFUSED
    assert not ledger.is_refused("1:1"), "the caller remembers it, told the time"
    ledger.refuse("1:1", now=5.0)
    assert ledger.is_refused("1:1")
    assert _deliver(ledger, 1, count=2) is Arrival.ACK_AGAIN
    assert not ledger.is_refused("1:1") and ledger.acking == {"1:1": False}, "acking again"
    assert ledger.answered("1:1", took=True) is Answer.TOOK


def test_refusals_are_forgotten_oldest_first_after_the_memory() -> None:
    ledger = AckLedger(memory_s=10.0)
    ledger.refuse("1:1", now=0.0)
    ledger.refuse("1:2", now=4.0)
    ledger.refuse("1:1", now=5.0)  # again: now the newer of the two
    ledger.refuse("1:3", now=14.0)
    assert [ledger.is_refused(f"1:{tag}") for tag in (1, 2, 3)] == [True, False, True]
    ledger.refuse("1:4", now=15.0)
    assert [ledger.is_refused(f"1:{tag}") for tag in (1, 2, 3, 4)] == [False, False, True, True]
    assert REFUSED_MEMORY_S == 3600.0


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "10"])
def test_the_memory_must_be_finite_positive_seconds(bad: Any) -> None:
    with pytest.raises(LedgerError, match="memory_s must be a finite number of seconds > 0"):
        AckLedger(memory_s=bad)


@pytest.mark.parametrize("bad", [math.nan, math.inf, None])
def test_the_time_of_a_refusal_must_be_finite(bad: Any) -> None:
    with pytest.raises(ValueError, match="now must be a finite number of seconds"):
        AckLedger().refuse("1:1", now=bad)


def test_repr_shows_the_counts() -> None:
    ledger = AckLedger()
    _deliver(ledger, 1)
    _deliver(ledger, 2)
    ledger.ack("1:2")
    assert repr(ledger) == "<AckLedger pending=1 expired=0 redelivered=0 acking=1 refused=0>"


# ---------------------------------------------------------------------- against a reference model


@attrs.define
class _Pending:
    attempt: int
    expired: bool = False
    newer: Delivery | None = None


@attrs.define
class _Acking:
    again: bool = False


@attrs.define
class _Refused:
    at: float


TAGS = st.integers(1, 4)


class AckLedgerMachine(RuleBasedStateMachine):
    """Random deliveries, settlements, expiries and answers vs a model holding one state per ack id.

    The ledger keeps the states in separate tables; the model keeps exactly one per ack id (pending,
    acking or refused), so a message in two tables at once, or in the wrong one, is caught.
    The caller keeps to the manager's contract: time goes forward, and a refused ack is remembered
    (``refuse``) right after the answer that says so.
    """

    MEMORY = 20.0

    def __init__(self) -> None:
        super().__init__()
        self.ledger = AckLedger(memory_s=self.MEMORY)
        self.model: dict[str, _Pending | _Acking | _Refused] = {}
        self.now = 0.0

    def _state(self, tag: int) -> _Pending | _Acking | _Refused | None:
        return self.model.get(f"1:{tag}")

    @rule(tag=TAGS, count=st.integers(1, 4))
    def deliver(self, tag: int, count: int) -> None:
        ack_id = f"1:{tag}"
        delivery = _delivery(tag, count)
        state = self.model.get(ack_id)
        if isinstance(state, _Pending):
            state.newer = delivery
            expected = Arrival.COVERED if state.expired else Arrival.RENEW
        elif isinstance(state, _Acking):
            state.again = True
            expected = Arrival.COVERED
        elif isinstance(state, _Refused):
            self.model[ack_id] = _Acking()
            expected = Arrival.ACK_AGAIN
        else:
            self.model[ack_id] = _Pending(count)
            expected = Arrival.NEW
        assert self.ledger.delivered(ack_id, delivery) is expected
        event(f"delivered: {expected.value}")

    def _settled(self, ack_id: str, how: str) -> Settled | None:
        state = self.model.get(ack_id)
        if not isinstance(state, _Pending):
            return None
        del self.model[ack_id]
        if how == "nack":
            return Settled(not state.expired, state.attempt if state.newer is None else state.newer.delivery_count)
        return Settled(not state.expired, redelivery=state.newer if how == "drop" else None)

    @rule(tag=TAGS)
    def ack(self, tag: int) -> None:
        ack_id = f"1:{tag}"
        expected = self._settled(ack_id, "ack")
        if expected is not None:
            self.model[ack_id] = _Acking()
        assert self.ledger.ack(ack_id) == expected

    @rule(tags=st.lists(TAGS, max_size=6))
    def ack_several(self, tags: list[int]) -> None:
        # ack_all is ack of each in turn: (those it settled, those of them still counted).
        settled: list[str] = []
        released: list[str] = []
        for tag in tags:
            ack_id = f"1:{tag}"
            expected = self._settled(ack_id, "ack")
            if expected is not None:
                self.model[ack_id] = _Acking()
                settled.append(ack_id)
                if expected.release:
                    released.append(ack_id)
        assert self.ledger.ack_all([f"1:{tag}" for tag in tags]) == (settled, released)

    @rule(tag=TAGS)
    def nack(self, tag: int) -> None:
        ack_id = f"1:{tag}"
        assert self.ledger.nack(ack_id) == self._settled(ack_id, "nack")

    @rule(tag=TAGS)
    def drop(self, tag: int) -> None:
        ack_id = f"1:{tag}"
        expected = self._settled(ack_id, "drop")
        got = self.ledger.drop(ack_id)
        assert got == expected
        if got is not None and got.redelivery is not None:
            event("a drop handed back a redelivery")
            self.deliver(tag, got.redelivery.delivery_count)  # the manager takes the live delivery in

    @rule(tag=TAGS)
    def expire(self, tag: int) -> None:
        state = self._state(tag)
        expected = isinstance(state, _Pending) and not state.expired
        if isinstance(state, _Pending):
            state.expired = True
        assert self.ledger.expire(f"1:{tag}") is expected

    @rule(tag=TAGS, took=st.booleans())
    def answer(self, tag: int, took: bool) -> None:
        ack_id = f"1:{tag}"
        state = self.model.get(ack_id)
        if not isinstance(state, _Acking):
            expected = Answer.UNKNOWN
        else:
            del self.model[ack_id]
            expected = (Answer.CREDIT if state.again else Answer.TOOK) if took else Answer.REFUSED
        got = self.ledger.answered(ack_id, took)
        assert got is expected
        event(f"answered: {expected.value}")
        if got is Answer.REFUSED:
            self.ledger.refuse(ack_id, self.now)
            self.model[ack_id] = _Refused(self.now)
            for other, state in list(self.model.items()):
                if isinstance(state, _Refused) and self.now - state.at >= self.MEMORY:
                    event("a refusal was forgotten")
                    del self.model[other]

    @rule(tags=st.lists(TAGS, max_size=6))
    def several_took(self, tags: list[int]) -> None:
        # took_all is answered(took=True) of each in turn: those that answer CREDIT.
        credit: list[str] = []
        for tag in tags:
            ack_id = f"1:{tag}"
            state = self.model.get(ack_id)
            if isinstance(state, _Acking):
                del self.model[ack_id]
                if state.again:
                    credit.append(ack_id)
        assert self.ledger.took_all([f"1:{tag}" for tag in tags]) == credit

    def _tags_in(self, kind: type) -> list[int]:
        return sorted(int(ack_id[2:]) for ack_id, state in self.model.items() if isinstance(state, kind))

    @precondition(lambda self: self._tags_in(_Acking))
    @rule(data=st.data(), took=st.booleans())
    def answer_an_ack_on_its_way(self, data: st.DataObject, took: bool) -> None:
        self.answer(data.draw(st.sampled_from(self._tags_in(_Acking))), took)

    @precondition(lambda self: self._tags_in(_Refused))
    @rule(data=st.data(), count=st.integers(1, 4))
    def deliver_a_refused_message_again(self, data: st.DataObject, count: int) -> None:
        self.deliver(data.draw(st.sampled_from(self._tags_in(_Refused))), count)

    @precondition(lambda self: self._tags_in(_Refused))
    @rule()
    def a_refusal_grows_old(self) -> None:
        self.now += self.MEMORY

    @rule(seconds=st.one_of(st.sampled_from([0.0, 7.5, MEMORY]), st.floats(0.0, 2 * MEMORY)))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def matches_the_model(self) -> None:
        ledger, model = self.ledger, self.model
        pending = {ack_id: state.attempt for ack_id, state in model.items() if isinstance(state, _Pending)}
        assert dict(ledger.pending) == pending
        assert ledger.acking == {ack_id: state.again for ack_id, state in model.items() if isinstance(state, _Acking)}
        every = tuple(f"1:{tag}" for tag in range(1, 5))
        assert set(ledger.pending_of(every)) == set(pending)
        leased = {ack_id for ack_id, state in model.items() if isinstance(state, _Pending) and not state.expired}
        assert set(ledger.leased_of(every)) == leased
        for ack_id in every:
            assert ledger.is_refused(ack_id) == isinstance(model.get(ack_id), _Refused)
        assert ledger.snapshot() == LedgerSnapshot(
            pending=len(pending),
            expired=len(pending) - len(leased),
            redelivered=sum(1 for state in model.values() if isinstance(state, _Pending) and state.newer is not None),
            acking=len(ledger.acking),
            refused=sum(1 for state in model.values() if isinstance(state, _Refused)),
        )

    @invariant()
    def an_ack_id_is_in_one_table_at_most(self) -> None:
        # Held, acked and on its way, or refused: a message in two of them would be run or acked twice.
        ledger = self.ledger
        for tag in range(1, 5):
            ack_id = f"1:{tag}"
            assert ledger.is_pending(ack_id) + (ack_id in ledger.acking) + ledger.is_refused(ack_id) <= 1


AckLedgerMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
test_the_ack_ledger_matches_the_model = AckLedgerMachine.TestCase
