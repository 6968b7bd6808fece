"""Tests of the consumer lists: each rule by example, then against a plain-list model, then fairness."""

from __future__ import annotations

from collections import Counter

import attrs
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.broker._consumer_lists import (
    DEFAULT_HAND_OVER_TIMEOUT_S,
    ConsumerLists,
    ConsumerListStats,
    ConsumerState,
    DuplicateConsumer,
    UnknownConsumer,
)
from conveyor.runtime import ConveyorError

NON_ACQUIRING = ConsumerState.NON_ACQUIRING
NOT_INTERESTED = ConsumerState.NOT_INTERESTED
INTERESTED = ConsumerState.INTERESTED
NOTIFIED = ConsumerState.NOTIFIED


def _lists(*ids: int, priority: int = 0) -> ConsumerLists:
    lists = ConsumerLists()
    for cid in ids:
        lists.add(cid, priority=priority)
    return lists


# ---------------------------------------------------------------------- add / remove / states


def test_add_puts_each_kind_on_its_list() -> None:
    lists = ConsumerLists()
    lists.add(1)
    lists.add(2, interested=False)
    lists.add(3, acquiring=False)
    lists.add(4, acquiring=False, interested=False)
    assert [lists.state_of(cid) for cid in (1, 2, 3, 4)] == [INTERESTED, NOT_INTERESTED, NON_ACQUIRING, NOT_INTERESTED]
    assert [lists.is_acquiring(cid) for cid in (1, 2, 3, 4)] == [True, True, False, False]
    assert lists.all_ids() == (1, 2, 3, 4)
    assert len(lists) == 4
    assert 3 in lists
    assert 5 not in lists
    assert lists.stats() == ConsumerListStats(
        all=4, non_acquiring=1, not_interested=2, interested=1, notified=0, by_priority=((0, 1, 0),)
    )


def test_duplicate_add_is_a_value_error_naming_the_id() -> None:
    lists = _lists(7)
    with pytest.raises(DuplicateConsumer, match=r"consumer 7: it is already registered \(state=INTERESTED"):
        lists.add(7, priority=3)
    assert isinstance(DuplicateConsumer("x"), ValueError)
    assert lists.priority_of(7) == 0


def test_unknown_ids_raise_a_key_error_with_a_readable_message() -> None:
    lists = _lists(1)
    with pytest.raises(UnknownConsumer) as caught:
        lists.remove(9)
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, ConveyorError)
    assert str(caught.value) == (
        "cannot remove consumer 9: it is not registered (1 consumers are); add it first, or look for a double remove"
    )
    for call in (
        lambda: lists.set_interest(9, True),
        lambda: lists.exhausted(9, more_work=True),
        lambda: lists.state_of(9),
        lambda: lists.priority_of(9),
        lambda: lists.is_acquiring(9),
    ):
        with pytest.raises(KeyError, match="consumer 9"):
            call()


def test_remove_twice_fails_the_second_time() -> None:
    lists = _lists(1)
    lists.remove(1)
    with pytest.raises(UnknownConsumer):
        lists.remove(1)
    assert len(lists) == 0


def test_non_int_ids_and_priorities_are_type_errors() -> None:
    lists = ConsumerLists()
    with pytest.raises(TypeError, match="consumer_id must be an int, got '1'"):
        lists.add("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="priority must be an int, got True"):
        lists.add(1, priority=True)
    assert len(lists) == 0


def test_remove_from_every_state() -> None:
    lists = ConsumerLists()
    lists.add(1)
    lists.add(2)
    lists.add(3, interested=False)
    lists.add(4, acquiring=False)
    assert lists.work_available() == (4, 1)
    for cid in (1, 2, 3, 4):
        lists.remove(cid)
    assert lists.stats() == ConsumerListStats(0, 0, 0, 0, 0, ())
    assert lists.work_available() == ()


def test_readding_a_removed_id_puts_it_at_the_back() -> None:
    lists = _lists(1, 2, 3)
    lists.remove(1)
    lists.add(1)
    assert lists.all_ids() == (2, 3, 1)
    assert lists.interested_ids() == (2, 3, 1)


# ---------------------------------------------------------------------- set_interest


def test_acquiring_interest_moves_between_not_interested_and_the_back_of_interested() -> None:
    lists = _lists(1, 2, 3)
    lists.set_interest(1, False)
    assert lists.state_of(1) is NOT_INTERESTED
    assert lists.interested_ids() == (2, 3)
    lists.set_interest(1, True)
    assert lists.interested_ids() == (2, 3, 1)


def test_gaining_interest_again_is_a_no_op_for_interested_and_notified() -> None:
    lists = _lists(1, 2)
    assert lists.work_available() == (1,)
    lists.set_interest(1, True)
    lists.set_interest(2, True)
    assert lists.state_of(1) is NOTIFIED
    assert lists.interested_ids() == (2,)


def test_a_notified_consumer_that_loses_interest_is_not_interested() -> None:
    lists = _lists(1, 2)
    lists.work_available()
    lists.set_interest(1, False)
    assert lists.state_of(1) is NOT_INTERESTED
    assert lists.notified_ids() == ()


def test_browsers_move_only_between_non_acquiring_and_not_interested() -> None:
    lists = ConsumerLists()
    lists.add(1, acquiring=False)
    lists.set_interest(1, False)
    assert lists.state_of(1) is NOT_INTERESTED
    lists.set_interest(1, False)
    assert lists.state_of(1) is NOT_INTERESTED
    lists.set_interest(1, True)
    assert lists.state_of(1) is NON_ACQUIRING
    lists.set_interest(1, True)
    assert lists.state_of(1) is NON_ACQUIRING
    assert lists.exhausted(1, more_work=False) == ()
    assert lists.state_of(1) is NON_ACQUIRING


# ---------------------------------------------------------------------- work_available


def test_work_available_notifies_one_acquiring_consumer() -> None:
    lists = _lists(1, 2, 3)
    assert lists.work_available() == (1,)
    assert lists.state_of(1) is NOTIFIED
    assert lists.work_available() == (2,)
    assert lists.work_available() == (3,)
    assert lists.work_available() == ()
    assert lists.notified_ids() == (1, 2, 3)


def test_browsers_are_always_notified_in_add_order() -> None:
    lists = ConsumerLists()
    lists.add(10, acquiring=False, priority=-5)
    lists.add(1)
    lists.add(20, acquiring=False, priority=5)
    lists.add(30, acquiring=False)
    lists.set_interest(10, False)
    lists.set_interest(10, True)  # back on NonAcquiring, but still first in add order
    assert lists.work_available() == (10, 20, 30, 1)
    assert lists.work_available() == (10, 20, 30)
    lists.set_interest(20, False)
    assert lists.work_available() == (10, 30)
    lists.remove(10)
    assert lists.work_available() == (30,)


def test_the_highest_priority_is_notified_first() -> None:
    lists = ConsumerLists()
    lists.add(1, priority=0)
    lists.add(2, priority=10)
    lists.add(3, priority=-3)
    lists.add(4, priority=10)
    assert lists.interested_ids() == (2, 4, 1, 3)
    assert [lists.work_available() for _ in range(5)] == [(2,), (4,), (1,), (3,), ()]
    assert lists.notified_ids() == (2, 4, 1, 3)


def test_a_lower_priority_is_notified_while_the_higher_one_is_not_interested() -> None:
    lists = ConsumerLists()
    lists.add(1, priority=1)
    lists.add(2, priority=9, interested=False)
    assert lists.work_available() == (1,)
    lists.exhausted(1, more_work=False)
    lists.set_interest(2, True)
    assert lists.work_available() == (2,)


def test_stats_by_priority_lists_every_level_highest_first() -> None:
    lists = ConsumerLists()
    lists.add(1, priority=1)
    lists.add(2, priority=5)
    lists.add(3, priority=5)
    lists.add(4, priority=-1, acquiring=False)
    lists.add(5, priority=3, interested=False)
    lists.work_available()
    assert lists.stats() == ConsumerListStats(
        all=5,
        non_acquiring=1,
        not_interested=1,
        interested=2,
        notified=1,
        by_priority=((5, 1, 1), (3, 0, 0), (1, 1, 0), (-1, 0, 0)),
    )
    lists.remove(5)
    assert [row[0] for row in lists.stats().by_priority] == [5, 1, -1]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        lists.stats().all = 0  # type: ignore[misc]


# ---------------------------------------------------------------------- exhausted


def test_exhausted_moves_the_consumer_to_the_back_of_interested() -> None:
    lists = _lists(1, 2, 3)
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=False) == ()
    assert lists.state_of(1) is INTERESTED
    assert lists.interested_ids() == (2, 3, 1)
    assert lists.work_available() == (2,)


def test_exhausted_stays_within_the_consumers_priority() -> None:
    lists = ConsumerLists()
    lists.add(1, priority=2)
    lists.add(2, priority=2)
    lists.add(3, priority=0)
    lists.work_available()
    lists.exhausted(1, more_work=False)
    assert lists.interested_ids() == (2, 1, 3)


def test_exhausted_is_a_no_op_move_unless_notified() -> None:
    lists = _lists(1, 2, 3)
    lists.set_interest(3, False)
    assert lists.exhausted(1, more_work=False) == ()
    assert lists.interested_ids() == (1, 2)
    assert lists.exhausted(3, more_work=False) == ()
    assert lists.state_of(3) is NOT_INTERESTED


def test_exhausted_with_more_work_notifies_the_next_candidate() -> None:
    lists = _lists(1, 2, 3)
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=True) == (2,)
    assert lists.state_of(2) is NOTIFIED
    assert lists.interested_ids() == (3, 1)


def test_exhausted_prefers_a_higher_priority_candidate() -> None:
    lists = ConsumerLists()
    lists.add(1, priority=5)
    lists.add(2, priority=0)
    lists.add(3, priority=5)
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=True) == (3,)
    assert lists.exhausted(3, more_work=True) == (2,)
    assert lists.exhausted(2, more_work=True) == ()


def test_each_consumer_gets_one_chance_per_generation() -> None:
    lists = _lists(1, 2, 3)
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=True) == (2,)
    assert lists.exhausted(2, more_work=True) == (3,)
    # Nobody could take what is left: the chain stops instead of looping.
    assert lists.exhausted(3, more_work=True) == ()
    assert lists.interested_ids() == (1, 2, 3)
    assert lists.notified_ids() == ()
    # New work starts a new generation, and everyone gets a chance again.
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=True) == (2,)


def test_a_tried_consumer_is_skipped_even_after_it_rejoins_interested() -> None:
    lists = _lists(1, 2)
    assert lists.work_available() == (1,)
    lists.set_interest(1, False)
    lists.set_interest(1, True)
    lists.add(3)
    assert lists.interested_ids() == (2, 1, 3)
    assert lists.exhausted(1, more_work=True) == (2,)
    assert lists.exhausted(2, more_work=True) == (3,)
    assert lists.exhausted(3, more_work=True) == ()


def test_an_untried_consumer_behind_tried_ones_is_found() -> None:
    lists = _lists(1, 2)
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=True) == (2,)
    lists.add(3)  # joins behind 1, which is tried
    lists.set_interest(2, False)
    assert lists.interested_ids() == (1, 3)
    assert lists.exhausted(2, more_work=True) == (3,)


def test_a_consumer_notified_in_an_older_generation_counts_as_tried_when_it_runs_dry() -> None:
    lists = _lists(1, 2)
    assert lists.work_available() == (1,)
    assert lists.work_available() == (2,)  # 1 is still busy with the first piece of work
    assert lists.exhausted(1, more_work=True) == ()
    assert lists.exhausted(2, more_work=True) == ()


def test_a_re_added_id_is_a_new_consumer_that_has_not_been_tried() -> None:
    lists = _lists(1)
    assert lists.work_available() == (1,)
    assert lists.exhausted(1, more_work=True) == ()
    lists.remove(1)
    lists.add(1)
    assert lists.exhausted(1, more_work=True) == (1,)


def test_exhausted_without_more_work_notifies_nobody() -> None:
    lists = _lists(1, 2)
    lists.work_available()
    assert lists.exhausted(1, more_work=False) == ()
    assert lists.notified_ids() == ()


def test_exhausted_by_a_browser_can_still_pass_work_on() -> None:
    lists = ConsumerLists()
    lists.add(1, acquiring=False)
    lists.add(2)
    lists.set_interest(2, False)
    assert lists.work_available() == (1,)
    lists.set_interest(2, True)
    assert lists.exhausted(1, more_work=True) == (2,)


# ---------------------------------------------------------------------- hand-over timeouts


def _timed(*ids: int, timeout: float = 1.0) -> ConsumerLists:
    lists = ConsumerLists(timeout)
    for cid in ids:
        lists.add(cid)
    return lists


def test_a_silent_consumers_work_is_passed_on_at_its_deadline_and_it_stays_notified() -> None:
    lists = _timed(1, 2, 3)
    assert lists.work_available(10.0) == (1,)
    assert lists.hand_over_deadline() == 11.0
    assert lists.hand_overs_due(10.999) == ()  # not yet
    assert lists.state_of(2) is INTERESTED
    assert lists.hand_overs_due(11.0) == (2,)
    assert lists.state_of(1) is NOTIFIED  # still eligible: it may wake and pull
    assert lists.state_of(2) is NOTIFIED
    assert lists.awaiting_ids() == (2,)  # 1 timed out once and for all
    assert lists.hand_over_deadline() == 12.0  # 2's hand-over is timed from when it began


def test_a_chain_of_silent_consumers_passes_the_work_to_each_once_per_generation() -> None:
    lists = _timed(1, 2, 3)
    assert lists.work_available(0.0) == (1,)
    assert lists.hand_overs_due(1.0) == (2,)
    assert lists.hand_overs_due(2.0) == (3,)
    assert lists.hand_overs_due(3.0) == ()  # everyone has had its chance at this work
    assert lists.hand_over_deadline() is None
    assert lists.hand_overs_due(100.0) == ()
    assert lists.notified_ids() == (1, 2, 3)


def test_an_answered_hand_over_never_falls_due() -> None:
    lists = _timed(1, 2, 3, 4)
    assert lists.work_available(0.0) == (1,)
    assert lists.exhausted(1, more_work=False, now=0.5) == ()  # ran dry: answered
    assert lists.work_available(0.5) == (2,)
    lists.set_interest(2, False)  # lost its credit: answered too
    assert lists.work_available(0.5) == (3,)
    lists.remove(3)  # gone: nothing to wait for
    assert lists.hand_over_deadline() is None
    assert lists.hand_overs_due(50.0) == ()
    assert lists.interested_ids() == (4, 1)


def test_a_late_answer_sends_the_silent_consumer_to_the_back_of_interested() -> None:
    lists = _timed(1, 2, 3)
    assert lists.work_available(0.0) == (1,)
    assert lists.hand_overs_due(1.0) == (2,)
    assert lists.exhausted(2, more_work=False, now=1.0) == ()
    assert lists.exhausted(1, more_work=False, now=4.0) == ()  # woke up at last, found nothing
    assert lists.interested_ids() == (3, 2, 1)
    assert lists.work_available(5.0) == (3,)


def test_a_pass_on_from_a_timeout_is_itself_timed_and_cleared_by_its_answer() -> None:
    lists = _timed(1, 2)
    assert lists.work_available(0.0) == (1,)
    assert lists.hand_overs_due(1.0) == (2,)
    assert lists.exhausted(2, more_work=False, now=1.25) == ()
    assert lists.hand_over_deadline() is None
    assert lists.notified_ids() == (1,)


def test_timed_out_work_goes_to_the_highest_priority_untried_consumer() -> None:
    lists = ConsumerLists(2.0)
    lists.add(1, priority=5)
    lists.add(2, priority=0)
    lists.add(3, priority=5)
    lists.add(4, priority=9, interested=False)
    assert lists.work_available(0.0) == (1,)
    lists.set_interest(4, True)
    assert lists.hand_overs_due(2.0) == (4,)
    assert lists.hand_overs_due(4.0) == (3,)
    assert lists.hand_overs_due(6.0) == (2,)


def test_a_timeout_skips_consumers_already_tried_in_this_generation() -> None:
    lists = _timed(1, 2, 3)
    assert lists.work_available(0.0) == (1,)
    assert lists.work_available(0.0) == (2,)
    assert lists.exhausted(2, more_work=False, now=0.0) == ()  # 2 had its chance at this generation
    assert lists.hand_overs_due(1.0) == (3,)
    assert lists.hand_overs_due(2.0) == ()


def test_hand_overs_fall_due_in_the_order_they_began() -> None:
    lists = _timed(1, 2, 3, 4, 5)
    assert lists.work_available(0.0) == (1,)
    assert lists.work_available(0.5) == (2,)
    assert lists.awaiting_ids() == (1, 2)
    assert lists.hand_overs_due(1.0) == (3,)  # only 1 is due
    assert lists.awaiting_ids() == (2, 3)
    assert lists.hand_over_deadline() == 1.5
    assert lists.hand_overs_due(9.0) == (4, 5)  # 2's work, then 3's (timed from 1.0)


def test_browsers_and_untimed_notifications_have_no_deadline() -> None:
    lists = ConsumerLists(1.0)
    lists.add(1, acquiring=False)
    lists.add(2)
    assert lists.work_available(0.0) == (1, 2)
    assert lists.awaiting_ids() == (2,)  # the browser is told every time; nothing to hand over
    assert lists.exhausted(2, more_work=True) == ()  # no untried consumer
    assert lists.work_available() == (1, 2)  # no clock given: not timed
    assert lists.hand_over_deadline() is None


def test_without_a_timeout_nothing_is_timed() -> None:
    lists = _timed(1, 2, timeout=None)  # type: ignore[arg-type]
    assert lists.work_available(0.0) == (1,)
    assert lists.hand_over_deadline() is None
    assert lists.hand_overs_due(1e9) == ()
    assert lists.state_of(2) is INTERESTED


def test_the_default_timeout_is_a_second() -> None:
    lists = _lists(1, 2)
    assert lists.work_available(3.0) == (1,)
    assert lists.hand_over_deadline() == 3.0 + DEFAULT_HAND_OVER_TIMEOUT_S == 4.0


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "1"])
def test_a_bad_timeout_is_refused_naming_the_field_and_the_allowed_values(bad: object) -> None:
    allowed = r"ConsumerLists\.hand_over_timeout_s must be None .* or a finite number of seconds > 0"
    with pytest.raises(ValueError, match=allowed):
        ConsumerLists(bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- fairness


def test_equal_consumers_take_equal_turns() -> None:
    lists = _lists(*range(8))
    chosen: Counter[int] = Counter()
    for _ in range(10_000):
        (consumer,) = lists.work_available()
        chosen[consumer] += 1
        assert lists.exhausted(consumer, more_work=False) == ()
    assert chosen == dict.fromkeys(range(8), 1250)


def test_fairness_holds_within_each_priority_level() -> None:
    lists = ConsumerLists()
    for cid in range(4):
        lists.add(cid, priority=1)
    lists.add(99, priority=0)
    chosen: Counter[int] = Counter()
    for _ in range(400):
        (consumer,) = lists.work_available()
        chosen[consumer] += 1
        lists.exhausted(consumer, more_work=False)
    assert chosen == {0: 100, 1: 100, 2: 100, 3: 100}


# ---------------------------------------------------------------------- against a plain-list model


@attrs.define
class _Model:
    """The same rules written the obvious O(n) way, with plain lists."""

    all: list[int] = attrs.Factory(list)
    priority: dict[int, int] = attrs.Factory(dict)
    acquiring: dict[int, bool] = attrs.Factory(dict)
    state: dict[int, ConsumerState] = attrs.Factory(dict)
    interested: list[int] = attrs.Factory(list)
    """In the order they joined; a stable sort by priority gives each level front to back."""
    notified: list[int] = attrs.Factory(list)
    tried: list[int] = attrs.Factory(list)
    timeout: float = 1.0
    awaiting: dict[int, float] = attrs.Factory(dict)
    """Timed hand-overs not yet answered nor timed out: id -> the time it began."""

    def _by_priority(self, ids: list[int]) -> list[int]:
        return sorted(ids, key=lambda cid: -self.priority[cid])

    def interested_ids(self) -> tuple[int, ...]:
        return tuple(self._by_priority(self.interested))

    def notified_ids(self) -> tuple[int, ...]:
        return tuple(self._by_priority(self.notified))

    def _leave(self, cid: int) -> None:
        if cid in self.interested:
            self.interested.remove(cid)
        if cid in self.notified:
            self.notified.remove(cid)
            self.awaiting.pop(cid, None)

    def _mark_tried(self, cid: int) -> None:
        if cid not in self.tried:
            self.tried.append(cid)

    def _notify(self, cid: int, now: float | None) -> int:
        self.interested.remove(cid)
        self.notified.append(cid)
        self.state[cid] = NOTIFIED
        self._mark_tried(cid)
        if now is not None:
            self.awaiting[cid] = now
        return cid

    def _pass_on(self, now: float | None) -> tuple[int, ...]:
        for candidate in self._by_priority(self.interested):
            if candidate not in self.tried:
                return (self._notify(candidate, now),)
        return ()

    def add(self, cid: int, priority: int, acquiring: bool, interested: bool) -> None:
        self.all.append(cid)
        self.priority[cid] = priority
        self.acquiring[cid] = acquiring
        if not interested:
            self.state[cid] = NOT_INTERESTED
        elif acquiring:
            self.state[cid] = INTERESTED
            self.interested.append(cid)
        else:
            self.state[cid] = NON_ACQUIRING

    def remove(self, cid: int) -> None:
        self._leave(cid)
        self.all.remove(cid)
        del self.priority[cid], self.acquiring[cid], self.state[cid]
        if cid in self.tried:
            self.tried.remove(cid)  # a re-added id is a new consumer

    def set_interest(self, cid: int, interested: bool) -> None:
        if not interested:
            self._leave(cid)
            self.state[cid] = NOT_INTERESTED
        elif self.state[cid] is NOT_INTERESTED:
            if self.acquiring[cid]:
                self.state[cid] = INTERESTED
                self.interested.append(cid)
            else:
                self.state[cid] = NON_ACQUIRING

    def work_available(self, now: float | None) -> tuple[int, ...]:
        self.tried = []
        browsers = tuple(cid for cid in self.all if self.state[cid] is NON_ACQUIRING)
        candidates = self._by_priority(self.interested)
        return (*browsers, self._notify(candidates[0], now)) if candidates else browsers

    def exhausted(self, cid: int, more_work: bool, now: float | None) -> tuple[int, ...]:
        if self.state[cid] is NOTIFIED:
            self._leave(cid)
            self.interested.append(cid)
            self.state[cid] = INTERESTED
            self._mark_tried(cid)
        if not more_work:
            return ()
        return self._pass_on(now)

    def hand_overs_due(self, now: float) -> tuple[int, ...]:
        # In the order the hand-overs began (a stable sort keeps notification order among equal times).
        due = sorted((cid for cid, began in self.awaiting.items() if began + self.timeout <= now),
                     key=lambda cid: self.awaiting[cid])
        woken: list[int] = []
        for cid in due:
            del self.awaiting[cid]
            woken.extend(self._pass_on(now))
        return tuple(woken)


IDS = st.integers(0, 7)


class ConsumerListsMachine(RuleBasedStateMachine):
    """Random add / remove / set_interest / work_available / exhausted, checked against ``_Model``."""

    def __init__(self) -> None:
        super().__init__()
        self.lists = ConsumerLists(1.0)
        self.model = _Model(timeout=1.0)
        self.now = 0.0

    @rule(cid=IDS, priority=st.integers(-2, 2), acquiring=st.booleans(), interested=st.booleans())
    def add(self, cid: int, priority: int, acquiring: bool, interested: bool) -> None:
        if cid in self.model.state:
            with pytest.raises(DuplicateConsumer, match=f"consumer {cid}"):
                self.lists.add(cid, priority=priority, acquiring=acquiring, interested=interested)
            return
        self.lists.add(cid, priority=priority, acquiring=acquiring, interested=interested)
        self.model.add(cid, priority, acquiring, interested)

    @rule(cid=IDS)
    def remove(self, cid: int) -> None:
        if cid not in self.model.state:
            with pytest.raises(UnknownConsumer, match=f"consumer {cid}"):
                self.lists.remove(cid)
            return
        self.lists.remove(cid)
        self.model.remove(cid)

    @rule(cid=IDS, interested=st.booleans())
    def set_interest(self, cid: int, interested: bool) -> None:
        if cid not in self.model.state:
            with pytest.raises(UnknownConsumer):
                self.lists.set_interest(cid, interested)
            return
        self.lists.set_interest(cid, interested)
        self.model.set_interest(cid, interested)

    @rule(timed=st.booleans())
    def work_available(self, timed: bool) -> None:
        now = self.now if timed else None
        assert self.lists.work_available(now) == self.model.work_available(now)

    @rule(cid=IDS, more_work=st.booleans(), timed=st.booleans())
    def exhausted(self, cid: int, more_work: bool, timed: bool) -> None:
        now = self.now if timed else None
        if cid not in self.model.state:
            with pytest.raises(UnknownConsumer):
                self.lists.exhausted(cid, more_work=more_work, now=now)
            return
        assert self.lists.exhausted(cid, more_work=more_work, now=now) == self.model.exhausted(cid, more_work, now)

    @precondition(lambda self: self.model.notified)
    @rule(more_work=st.booleans())
    def a_notified_consumer_runs_dry(self, more_work: bool) -> None:
        """The common case, drawn more often than a random id would be."""
        cid = self.model.notified_ids()[0]
        assert self.lists.exhausted(cid, more_work=more_work, now=self.now) == self.model.exhausted(
            cid, more_work, self.now
        )

    @rule(seconds=st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.75]))
    def time_passes(self, seconds: float) -> None:
        """The clock moves; the shell asks what fell due (exact quarters hit deadlines on the dot)."""
        self.now += seconds
        assert self.lists.hand_overs_due(self.now) == self.model.hand_overs_due(self.now)

    @invariant()
    def each_consumer_is_on_exactly_one_list(self) -> None:
        lists = self.lists
        placed = Counter([*lists._non_acquiring, *lists._not_interested])
        for level in lists._levels:
            placed.update([*level.interested, *level.notified])
            assert level.members > 0
            assert lists._levels_by_priority[level.priority] is level
        assert placed == Counter(lists.all_ids())
        assert [level.priority for level in lists._levels] == sorted(lists._levels_by_priority, reverse=True)
        for cid in lists._non_acquiring:
            assert lists.state_of(cid) is NON_ACQUIRING
            assert not lists.is_acquiring(cid)
        for cid in lists._not_interested:
            assert lists.state_of(cid) is NOT_INTERESTED
        for cid in lists.interested_ids():
            assert lists.state_of(cid) is INTERESTED
            assert lists.is_acquiring(cid)
        for cid in lists.notified_ids():
            assert lists.state_of(cid) is NOTIFIED
            assert lists.is_acquiring(cid)
        for cid in lists.awaiting_ids():
            assert lists.state_of(cid) is NOTIFIED  # only a Notified consumer can owe an answer

    @invariant()
    def matches_the_model(self) -> None:
        lists, model = self.lists, self.model
        assert lists.all_ids() == tuple(model.all)
        assert len(lists) == len(model.all)
        assert {cid: lists.state_of(cid) for cid in model.all} == model.state
        assert {cid: lists.priority_of(cid) for cid in model.all} == model.priority
        assert {cid: lists.is_acquiring(cid) for cid in model.all} == model.acquiring
        assert lists.interested_ids() == model.interested_ids()
        assert lists.notified_ids() == model.notified_ids()
        assert lists.awaiting_ids() == tuple(model.awaiting)  # in the order the hand-overs began
        deadlines = [began + model.timeout for began in model.awaiting.values()]
        assert lists.hand_over_deadline() == (min(deadlines) if deadlines else None)

    @invariant()
    def stats_are_consistent(self) -> None:
        stats = self.lists.stats()
        model = self.model
        counts = Counter(model.state.values())
        assert stats.all == len(model.all)
        assert stats.non_acquiring == counts[NON_ACQUIRING]
        assert stats.not_interested == counts[NOT_INTERESTED]
        assert stats.interested == counts[INTERESTED]
        assert stats.notified == counts[NOTIFIED]
        assert stats.all == stats.non_acquiring + stats.not_interested + stats.interested + stats.notified
        levels = sorted(set(model.priority.values()), reverse=True)
        assert stats.by_priority == tuple(
            (
                level,
                sum(1 for cid in model.interested if model.priority[cid] == level),
                sum(1 for cid in model.notified if model.priority[cid] == level),
            )
            for level in levels
        )


ConsumerListsMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)
test_consumer_lists_match_the_model = ConsumerListsMachine.TestCase
