"""Key runs: ``OrderingKeyHolds(run_limit=n)`` releases up to n held items of a key at once, in order."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from conveyor.actors.subscriber._ordering import Admission, HoldState, OrderingKeyHolds


def test_a_finished_key_releases_its_held_items_as_one_run_in_order() -> None:
    holds = OrderingKeyHolds(run_limit=3)
    assert holds.arrive("a1", "a") == ("a1",)
    for item_id in ("a2", "a3", "a4", "a5"):
        assert holds.arrive(item_id, "a") == ()
    assert holds.finished("a1") == ("a2", "a3", "a4")
    assert holds.held_of("a") == ("a5",)


def test_the_next_run_waits_for_every_item_of_the_run_in_any_order() -> None:
    holds = OrderingKeyHolds(run_limit=2)
    holds.arrive("a1", "a")
    for item_id in ("a2", "a3", "a4"):
        holds.arrive(item_id, "a")
    assert holds.finished("a1") == ("a2", "a3")
    assert holds.finished("a3") == (), "a2 of the run has not finished: the key is still busy"
    assert holds.state_of("a4") is HoldState.HELD
    assert holds.finished("a2") == ("a4",)


def test_run_limit_one_is_one_at_a_time() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    holds.arrive("a2", "a")
    holds.arrive("a3", "a")
    assert holds.finished("a1") == ("a2",)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_run_limit_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="run_limit must be an int >= 1"):
        OrderingKeyHolds(run_limit=bad)  # type: ignore[arg-type]


def test_a_run_items_skip_fences_the_key_and_later_held_items_go_back() -> None:
    """The shell's path for a run's tail that did not run (an earlier item nacked): send back + finished."""
    holds = OrderingKeyHolds(run_limit=2)
    for tag in range(1, 5):
        holds.admit(f"a{tag}", "a", tag, None, 0.0)
    assert holds.finished("a1") == ("a2", "a3")
    back = holds.send_back("a", 2)  # a2 nacked
    assert back.ids == ("a4",)
    assert holds.finished("a2") == ()
    assert holds.send_back("a", 3).fence is None  # a3 skipped: the fence waits for it too
    assert holds.finished("a3") == ()
    assert holds.fenced("a") == frozenset({2, 3, 4})
    assert holds.admit("a5", "a", 5, None, 0.0) is Admission.FENCED
    assert holds.admit("a2", "a", 2, None, 0.0) is Admission.RUN


KEYS = st.sampled_from([None, "a", "b"])


class KeyRunsMachine(RuleBasedStateMachine):
    """Random admit / finish / send_back with runs, checked against a deque per key."""

    def __init__(self) -> None:
        super().__init__()
        self.holds = OrderingKeyHolds()
        self.limit = 1
        self.tag = 0
        self.lines: dict[str, deque[str]] = {}
        """Per key, its items not finished nor sent back, in arrival order; the first ``running[key]`` run."""
        self.running: dict[str, int] = {}
        self.key_of: dict[str, str | None] = {}
        self.tag_of: dict[str, int] = {}
        self.released: dict[str, list[int]] = {}
        """Per key, the tags handed to workers, in release order."""

    @initialize(limit=st.integers(1, 4))
    def choose_limit(self, limit: int) -> None:
        self.limit = limit
        self.holds = OrderingKeyHolds(run_limit=limit)

    def _release(self, key: str | None, ids: tuple[str, ...]) -> None:
        if key is None:
            return
        assert len(ids) <= self.limit
        line = self.lines[key]
        assert self.running.get(key, 0) == 0 or not ids, "released while the key's run is unfinished"
        assert ids == tuple(list(line)[: len(ids)]), "a run is the key's oldest held items, in order"
        self.running[key] = len(ids)
        self.released.setdefault(key, []).extend(self.tag_of[item_id] for item_id in ids)

    @rule(key=KEYS)
    def admit(self, key: str | None) -> None:
        self.tag += 1
        item_id = f"m{self.tag}"
        admission = self.holds.admit(item_id, key, self.tag, None, 0.0)
        if admission is Admission.FENCED:
            assert key is not None and self.holds.fenced(key)
            return
        self.key_of[item_id] = key
        self.tag_of[item_id] = self.tag
        if key is None:
            assert admission is Admission.RUN
            return
        line = self.lines.setdefault(key, deque())
        busy = self.running.get(key, 0) > 0
        line.append(item_id)
        assert admission is (Admission.HELD if busy else Admission.RUN)
        if not busy:
            self._release(key, (item_id,))

    def _running_ids(self) -> list[str]:
        ids = [item_id for item_id, key in self.key_of.items() if key is None]
        for key, line in self.lines.items():
            ids.extend(list(line)[: self.running.get(key, 0)])
        return sorted(ids)

    def _finish(self, item_id: str) -> None:
        key = self.key_of.pop(item_id)
        got = self.holds.finished(item_id)
        if key is None:
            assert got == ()
            return
        self.lines[key].remove(item_id)
        self.running[key] -= 1
        if self.running[key]:
            assert got == ()
        else:
            self._release(key, got)
            assert len(got) == min(self.limit, len(self.lines[key]))

    @precondition(lambda self: bool(self._running_ids()))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        self._finish(data.draw(st.sampled_from(self._running_ids())))

    @precondition(lambda self: any(self.key_of[i] for i in self._running_ids()))
    @rule(data=st.data())
    def skip_or_nack(self, data: st.DataObject) -> None:
        """A run item nacked or skipped: its key goes back from its tag, then it finishes."""
        item_id = data.draw(st.sampled_from([i for i in self._running_ids() if self.key_of[i]]))
        key = self.key_of[item_id]
        assert key is not None
        tag = self.tag_of[item_id]
        back = self.holds.send_back(key, tag)
        running = list(self.lines[key])[: self.running[key]]
        expected = tuple(i for i in list(self.lines[key])[self.running[key]:] if self.tag_of[i] >= tag)
        assert back.ids == expected
        for sent in back.ids:
            self.lines[key].remove(sent)
            del self.key_of[sent]
        assert list(self.lines[key])[: self.running[key]] == running, "a run's items are never taken off"
        self._finish(item_id)

    @invariant()
    def at_most_run_limit_running_per_key(self) -> None:
        for key, count in self.running.items():
            assert count <= self.limit
            line = list(self.lines.get(key, ()))
            for index, item_id in enumerate(line):
                expected = HoldState.RUNNING if index < count else HoldState.HELD
                assert self.holds.state_of(item_id) is expected

    @invariant()
    def each_key_is_released_in_tag_order(self) -> None:
        """Tags only grow here (nothing is delivered again), so a key's releases are strictly increasing."""
        for key, tags in self.released.items():
            assert tags == sorted(set(tags)), f"key {key} released out of order: {tags}"


TestKeyRuns = KeyRunsMachine.TestCase
TestKeyRuns.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
