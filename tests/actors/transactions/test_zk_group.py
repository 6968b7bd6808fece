"""Group commit (``_zk_group.MultiGroups``): each commit is told what it would have been told alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conveyor.actors.transactions._zk_group import HOLD_S, MAX_PARTS, MultiGroups
from conveyor.runtime.lowlevel import ZkCreate, ZkDelete, ZkMulti, ZkMultiFailed, ZkReply


class FakeSession:
    """Applies multis all or nothing in the order they are answered; a path in ``bad`` fails its operation."""

    def __init__(self, bad: set[str]) -> None:
        self.bad = bad
        self.sent: list[tuple[ZkMulti, Callable[[ZkReply], None]]] = []
        self.applied: list[str] = []

    def send(self, multi: ZkMulti, then: Callable[[ZkReply], None]) -> None:
        self.sent.append((multi, then))

    def answer(self, index: int, lost: bool) -> None:
        multi, then = self.sent.pop(index)
        if lost:
            then(ZkReply(0, error="connection_loss"))
            return
        failed = [n for n, op in enumerate(multi.operations) if op.path in self.bad]
        if failed:
            then(ZkReply(0, ZkMultiFailed(failed[0], "no_node"), "no_node"))
        else:
            self.applied += [op.path for op in multi.operations]
            then(ZkReply(0, tuple(op.path for op in multi.operations)))


def _part(number: int, size: int) -> tuple[Any, ...]:
    return tuple(ZkDelete(f"/q/items/item-{number}-{n}") if n % 2 else ZkCreate(f"/q/items/item-{number}-{n}", b"x")
                 for n in range(size))


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=2 * MAX_PARTS + 3),
       bad=st.sets(st.integers(0, 2 * MAX_PARTS + 3), max_size=4),
       schedule=st.lists(st.tuples(st.booleans(), st.integers(0, 50), st.booleans()), max_size=200),
       lost=st.sets(st.integers(0, 60), max_size=3))
def test_every_commit_gets_its_own_outcome_once(sizes: list[int], bad: set[int],
                                                schedule: list[tuple[bool, int, bool]], lost: set[int]) -> None:
    parts = [_part(number, size) for number, size in enumerate(sizes)]
    bad_paths = {parts[number][-1].path for number in bad if number < len(parts)}
    session = FakeSession(bad_paths)
    groups = MultiGroups(session.send)
    told: dict[int, list[ZkReply]] = {number: [] for number in range(len(parts))}
    submitted = 0
    answers = 0

    def submit(number: int) -> None:
        groups.submit(parts[number], told[number].append)

    for submit_next, pick, two in schedule:  # submits and answers interleaved as the schedule draws them
        if (submit_next or not session.sent) and submitted < len(parts):
            if two and submitted + 1 < len(parts):  # a commit and the take ahead it carries
                idle = not session.sent
                with groups.together():
                    submit(submitted)
                    assert not idle or not session.sent, "held back until the block ends"
                    submit(submitted + 1)
                if idle:
                    together = parts[submitted] + parts[submitted + 1]
                    assert [multi.operations for multi, _ in session.sent] == [together], "sent as one multi"
                submitted += 2
                continue
            submit(submitted)
            submitted += 1
        elif session.sent:
            session.answer(pick % len(session.sent), answers in lost)
            answers += 1
    while submitted < len(parts):
        submit(submitted)
        submitted += 1
    while session.sent:  # then everything is answered
        session.answer(0, answers in lost)
        answers += 1

    for number, part in enumerate(parts):
        assert len(told[number]) == 1, f"commit {number} was told {told[number]}"
        reply = told[number][0]
        paths = [op.path for op in part]
        if reply.error == "connection_loss":
            continue  # resolved by its own marker: applied or not, all of it
        if set(paths) & bad_paths:
            assert isinstance(reply.value, ZkMultiFailed) and reply.value.index == len(part) - 1
            assert not set(paths) & set(session.applied)
        else:
            assert reply.error is None and reply.value == tuple(paths)  # its own results, in its order
            assert set(paths) <= set(session.applied)
    for part in parts:  # all or nothing: a commit is applied whole or not at all
        applied = [op.path in session.applied for op in part]
        assert all(applied) or not any(applied)


def test_commits_waiting_behind_one_in_flight_go_as_one_multi() -> None:
    session = FakeSession(set())
    groups = MultiGroups(session.send)
    for number in range(4):
        groups.submit(_part(number, 2), lambda _: None)
    assert [len(multi.operations) for multi, _ in session.sent] == [2]
    session.answer(0, lost=False)
    assert [len(multi.operations) for multi, _ in session.sent] == [6]  # the three that waited, in one


def test_parts_submitted_together_go_as_one_multi_even_with_none_in_flight() -> None:
    session = FakeSession(set())
    groups = MultiGroups(session.send)
    with groups.together():
        groups.submit(_part(0, 2), lambda _: None)
        groups.submit(_part(1, 3), lambda _: None)
        assert session.sent == []
    assert [len(multi.operations) for multi, _ in session.sent] == [5]
    with groups.together():  # one in flight: they wait for its reply, as any part does
        groups.submit(_part(2, 1), lambda _: None)
    assert len(session.sent) == 1
    session.answer(0, lost=False)
    assert [len(multi.operations) for multi, _ in session.sent] == [1]


class Timers:
    """The backend's ``_after`` for tests: steps run only when the test fires them, oldest first."""

    def __init__(self) -> None:
        self.steps: list[Callable[[], None]] = []

    def after(self, seconds: float, step: Callable[[], None]) -> None:
        assert 0 < seconds <= HOLD_S
        self.steps.append(step)

    def fire(self) -> None:
        if self.steps:
            self.steps.pop(0)()


@settings(max_examples=300, deadline=None)
@given(actions=st.lists(st.tuples(st.sampled_from(["submit", "together", "answer", "fire"]), st.booleans()),
                        max_size=120))
# 15 lone parts and a together-block of two wait behind the first: the next multi is cut at 16 parts, so it
# carries 15 transactions, the block's second part going with the next one (found by .ci/run, 2026-11-27).
@example(actions=[("submit", False)] * 15 + [("together", False), ("submit", False), ("answer", False)])
def test_the_next_multi_waits_for_the_answered_transactions_or_the_hold_bound(
        actions: list[tuple[str, bool]]) -> None:
    """After a reply, nothing is sent until as many transactions have parts waiting as the answered
    multi carried plus those that waited for it, or the hold's bound passes; then at once."""
    session = FakeSession(set())
    timers = Timers()
    groups = MultiGroups(session.send, timers.after)
    arrival_of: dict[str, int] = {}
    told: list[ZkReply] = []
    waiting: list[int] = []  # the model: arrivals with parts not yet sent, in order
    expected = 0  # the model's hold: 0 when none
    live_holds: list[bool] = []  # per timer set, in order: whether it is still the current hold
    arrivals = 0
    for action, lost in actions:
        if action in ("submit", "together"):
            size = 2 if action == "together" else 1
            with groups.together():
                for n in range(size):
                    part = _part(arrivals * 2 + n, 1)
                    arrival_of[part[0].path] = arrivals
                    groups.submit(part, told.append)
            waiting += [arrivals] * size
            arrivals += 1
        elif action == "answer" and session.sent:
            multi = session.sent[0][0]
            answered = len({arrival_of[op.path] for op in multi.operations})
            holding = answered + len(set(waiting)) > 1
            live_holds = [False] * len(live_holds) + ([True] if holding else [])
            expected = answered + len(set(waiting)) if holding else 0
            session.answer(0, lost)
        elif action == "fire" and timers.steps:
            if live_holds.pop(0):
                expected = 0
            timers.fire()
        if session.sent and waiting:  # the model's parts went: they were the oldest waiting ones
            sent = [arrival_of[op.path] for op in session.sent[-1][0].operations]
            if sent == waiting[:len(sent)]:
                assert not expected or len(set(waiting)) >= min(expected, MAX_PARTS), \
                    f"sent with {len(set(waiting))} waiting during a hold for {expected}"
                assert len(sent) == min(len(waiting), MAX_PARTS) or len(sent) == 1  # MAX_PARTS counts parts
                del waiting[:len(sent)]
                expected = 0
        assert len(session.sent) <= 1, "one multi in flight at most"
        if not session.sent and waiting:
            assert expected and len(set(waiting)) < min(expected, MAX_PARTS), \
                f"held with {len(set(waiting))} waiting, hold {expected}"
        assert groups.held_back() == bool(not session.sent and waiting)


def test_a_lone_transaction_never_waits_and_cohorts_merge() -> None:
    session = FakeSession(set())
    timers = Timers()
    groups = MultiGroups(session.send, timers.after)
    for number in range(3):  # one transaction after another: each multi leaves at once, no timer set
        groups.submit(_part(number, 1), lambda _: None)
        assert len(session.sent) == 1
        session.answer(0, lost=False)
    assert timers.steps == []
    for number in range(8):  # eight at once: one goes, seven wait behind it
        groups.submit(_part(10 + number, 1), lambda _: None)
    session.answer(0, lost=False)
    assert session.sent == [], "held for the answered one's next part"
    groups.submit(_part(20, 1), lambda _: None)
    assert [len(multi.operations) for multi, _ in session.sent] == [8], "all eight in one multi"
    session.answer(0, lost=False)
    for number in range(5):  # three of the eight do not come back: the hold's bound sends the five
        groups.submit(_part(30 + number, 1), lambda _: None)
    assert session.sent == []
    timers.fire()
    timers.fire()
    assert [len(multi.operations) for multi, _ in session.sent] == [5]
