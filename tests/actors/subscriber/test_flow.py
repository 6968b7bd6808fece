"""Tests of the flow-control budget: each rule by example, then against a dict model with hysteresis."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conveyor.actors.subscriber._flow import DuplicateMessage, FlowDecision, FlowStats, LoadTracker
from conveyor.actors.subscriber._settings import FlowControl
from conveyor.runtime import ConveyorError

PAUSE = FlowDecision.PAUSE
RESUME = FlowDecision.RESUME


def _tracker(max_messages: int = 4, max_bytes: int = 1000, resume_threshold: float = 0.5) -> LoadTracker:
    return LoadTracker(FlowControl(max_messages=max_messages, max_bytes=max_bytes, resume_threshold=resume_threshold))


# ---------------------------------------------------------------------- counting


def test_a_new_tracker_is_empty_and_running() -> None:
    tracker = _tracker()
    assert tracker.count == 0
    assert tracker.bytes == 0
    assert tracker.load() == 0.0
    assert not tracker.paused
    assert tracker.update() is None
    assert tracker.snapshot() == FlowStats(count=0, bytes=0, load=0.0, paused=False, max_count_seen=0, max_bytes_seen=0)


def test_add_and_remove_count_messages_and_bytes() -> None:
    tracker = _tracker()
    tracker.add("a", 100)
    tracker.add("b", 250)
    assert (tracker.count, tracker.bytes, len(tracker)) == (2, 350, 2)
    assert "a" in tracker
    assert tracker.remove("a") is True
    assert "a" not in tracker
    assert (tracker.count, tracker.bytes) == (1, 250)


def test_remove_of_an_unknown_message_is_false_and_changes_nothing() -> None:
    tracker = _tracker()
    tracker.add("a", 10)
    assert tracker.remove("zzz") is False
    assert tracker.remove("a") is True
    assert tracker.remove("a") is False
    assert (tracker.count, tracker.bytes) == (0, 0)


def test_duplicate_add_is_a_value_error_naming_the_id() -> None:
    tracker = _tracker()
    tracker.add("m-7", 10)
    with pytest.raises(DuplicateMessage, match=r"cannot add message 'm-7': it is already counted \(size=10, 1 unfin"):
        tracker.add("m-7", 99)
    assert isinstance(DuplicateMessage("x"), ValueError)
    assert isinstance(DuplicateMessage("x"), ConveyorError)
    assert tracker.bytes == 10


def test_add_refuses_bad_sizes() -> None:
    tracker = _tracker()
    with pytest.raises(ValueError, match=r"size of message 'a' must be >= 0, got -1"):
        tracker.add("a", -1)
    with pytest.raises(TypeError, match=r"size of message 'a' must be an int, got 1.5"):
        tracker.add("a", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"must be an int, got True"):
        tracker.add("a", True)
    assert tracker.count == 0
    tracker.add("a", 0)
    assert (tracker.count, tracker.bytes) == (1, 0)


def test_a_tracker_needs_a_flow_control() -> None:
    with pytest.raises(TypeError, match="LoadTracker needs a FlowControl, got 5"):
        LoadTracker(5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- load


def test_load_is_the_fuller_of_the_two_budgets() -> None:
    tracker = _tracker(max_messages=4, max_bytes=1000)
    tracker.add("a", 100)
    assert tracker.load() == 0.25  # 1 of 4 messages beats 100 of 1000 bytes
    tracker.add("b", 600)
    assert tracker.load() == 0.7  # 700 of 1000 bytes beats 2 of 4 messages
    tracker.add("c", 700)
    assert tracker.load() == 1.4  # it may exceed 1: one message can be bigger than what is left


def test_held_messages_count_like_any_other() -> None:
    # Seed 003: the Pub/Sub client leaves messages on hold out of its load. Here the caller adds
    # every received message, held or not, so three held messages fill a budget of three.
    tracker = _tracker(max_messages=3)
    for message_id in ("held-1", "held-2", "held-3"):
        tracker.add(message_id, 1)
    assert tracker.load() == 1.0
    assert tracker.update() is PAUSE


# ---------------------------------------------------------------------- pause and resume


def test_pause_at_load_one_and_resume_below_the_threshold() -> None:
    tracker = _tracker(max_messages=4, resume_threshold=0.5)
    for message_id in "abc":
        tracker.add(message_id, 1)
    assert tracker.update() is None  # 0.75
    tracker.add("d", 1)
    assert tracker.update() is PAUSE  # 1.0
    assert tracker.paused
    assert tracker.update() is None  # decided already
    tracker.remove("a")
    assert tracker.update() is None  # 0.75: still paused, above the threshold
    tracker.remove("b")
    assert tracker.update() is None  # 0.5: not below the threshold
    assert tracker.paused
    tracker.remove("c")
    assert tracker.update() is RESUME  # 0.25
    assert not tracker.paused
    assert tracker.update() is None


def test_no_flapping_between_threshold_and_one() -> None:
    tracker = _tracker(max_messages=10, resume_threshold=0.8)
    for i in range(10):
        tracker.add(f"m{i}", 1)
    assert tracker.update() is PAUSE
    decisions = []
    for i in range(10, 30):  # one finishes, one arrives: load hovers at 0.9 and 1.0
        tracker.remove(f"m{i - 10}")
        decisions.append(tracker.update())
        tracker.add(f"m{i}", 1)
        decisions.append(tracker.update())
    assert decisions == [None] * 40
    assert tracker.paused


def test_bytes_alone_can_pause() -> None:
    tracker = _tracker(max_messages=100, max_bytes=1000)
    tracker.add("big", 1000)
    assert tracker.update() is PAUSE
    tracker.remove("big")
    assert tracker.update() is RESUME


def test_a_threshold_of_one_resumes_as_soon_as_load_drops_below_one() -> None:
    tracker = _tracker(max_messages=2, resume_threshold=1.0)
    tracker.add("a", 1)
    tracker.add("b", 1)
    assert tracker.update() is PAUSE
    tracker.remove("a")
    assert tracker.update() is RESUME


def test_snapshot_keeps_the_high_water_marks() -> None:
    tracker = _tracker(max_messages=4, max_bytes=1000)
    tracker.add("a", 300)
    tracker.add("b", 500)
    tracker.remove("a")
    tracker.add("c", 100)
    tracker.remove("b")
    stats = tracker.snapshot()
    assert stats == FlowStats(count=1, bytes=100, load=0.25, paused=False, max_count_seen=2, max_bytes_seen=800)
    with pytest.raises(AttributeError):
        stats.count = 3  # type: ignore[misc]
    assert repr(tracker) == "<LoadTracker count=1 bytes=100 load=0.250 paused=False>"


# ---------------------------------------------------------------------- against a model


class LoadTrackerMachine(RuleBasedStateMachine):
    """Random adds, removes and updates, checked against a dict and the hysteresis rules."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[str, int] = {}
        self.paused = False
        self.max_count = 0
        self.max_bytes = 0
        self.pauses = 0
        self.next_id = 0

    @initialize(
        max_messages=st.integers(min_value=1, max_value=4),
        max_bytes=st.one_of(st.just(10_000), st.integers(min_value=1, max_value=200)),  # often count decides
        # Thresholds a load of n / max_messages can hit exactly, to test the strict "<" at the edge.
        resume_threshold=st.one_of(st.sampled_from([1.0, 0.5, 0.75, 0.25]), st.floats(min_value=0.01, max_value=1.0)),
    )
    def make(self, max_messages: int, max_bytes: int, resume_threshold: float) -> None:
        self.flow = FlowControl(max_messages=max_messages, max_bytes=max_bytes, resume_threshold=resume_threshold)
        self.tracker = LoadTracker(self.flow)

    def model_load(self) -> float:
        return max(len(self.sizes) / self.flow.max_messages, sum(self.sizes.values()) / self.flow.max_bytes)

    @rule(size=st.one_of(st.integers(min_value=0, max_value=2), st.integers(min_value=0, max_value=80)))
    def add(self, size: int) -> None:
        message_id = f"m{self.next_id}"
        self.next_id += 1
        self.tracker.add(message_id, size)
        self.sizes[message_id] = size
        self.max_count = max(self.max_count, len(self.sizes))
        self.max_bytes = max(self.max_bytes, sum(self.sizes.values()))

    @precondition(lambda self: self.sizes)
    @rule(data=st.data())
    def add_duplicate(self, data: st.DataObject) -> None:
        message_id = data.draw(st.sampled_from(sorted(self.sizes)))
        with pytest.raises(DuplicateMessage, match=repr(message_id)):
            self.tracker.add(message_id, 1)

    @precondition(lambda self: self.sizes)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        message_id = data.draw(st.sampled_from(sorted(self.sizes)))
        assert self.tracker.remove(message_id) is True
        del self.sizes[message_id]

    @rule(message_id=st.sampled_from(["m-never", "x"]))
    def remove_unknown(self, message_id: str) -> None:
        assert self.tracker.remove(message_id) is False

    @rule()
    def update(self) -> None:
        load = self.model_load()
        was_paused = self.paused
        decision = self.tracker.update()
        if decision is PAUSE:
            assert not was_paused, "paused twice"
            assert load >= 1, f"paused below load 1 (load={load})"
            self.paused = True
            self.pauses += 1
        elif decision is RESUME:
            assert was_paused, "resumed while running"
            assert load < self.flow.resume_threshold, f"resumed at load {load} >= {self.flow.resume_threshold}"
            self.paused = False
        else:
            assert decision is None
            if was_paused:
                assert load >= self.flow.resume_threshold, f"stayed paused at load {load}"
            else:
                assert load < 1, f"kept running at load {load}"

    @invariant()
    def counts_match(self) -> None:
        if not hasattr(self, "tracker"):
            return
        assert self.tracker.snapshot() == FlowStats(
            count=len(self.sizes),
            bytes=sum(self.sizes.values()),
            load=self.model_load(),
            paused=self.paused,
            max_count_seen=self.max_count,
            max_bytes_seen=self.max_bytes,
            pauses=self.pauses,
        )


LoadTrackerMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
test_load_tracker_against_a_model = LoadTrackerMachine.TestCase
