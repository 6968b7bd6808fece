"""Tests of the ordering-key holds: each rule by example, then against a deque-per-key model."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.subscriber._ordering import HoldError, HoldState, OrderingKeyHolds, OrderingSnapshot
from conveyor.runtime import ConveyorError

# ---------------------------------------------------------------------- unordered messages


@pytest.mark.parametrize("key", [None, ""])
def test_unordered_messages_go_straight_through(key: str | None) -> None:
    holds = OrderingKeyHolds()
    assert holds.arrive("m1", key) == ("m1",)
    assert holds.arrive("m2", key) == ("m2",)
    assert holds.held_count() == 0
    assert holds.running_keys() == ()
    assert holds.state_of("m1") is HoldState.RUNNING
    assert not holds.is_held("m2")
    assert holds.finished("m2") == ()
    assert holds.finished("m1") == ()
    assert len(holds) == 0


def test_unordered_messages_pass_a_busy_ordered_key() -> None:
    holds = OrderingKeyHolds()
    assert holds.arrive("k1", "k") == ("k1",)
    assert holds.arrive("k2", "k") == ()
    assert holds.arrive("u", None) == ("u",)
    assert holds.arrive("e", "") == ("e",)
    assert holds.held_ids() == ("k2",)


# ---------------------------------------------------------------------- one key at a time, in order


def test_a_key_runs_one_message_at_a_time_in_arrival_order() -> None:
    holds = OrderingKeyHolds()
    assert holds.arrive("a1", "a") == ("a1",)
    assert holds.arrive("a2", "a") == ()
    assert holds.arrive("a3", "a") == ()
    assert holds.held_ids() == ("a2", "a3")
    assert holds.is_held("a2")
    assert holds.finished("a1") == ("a2",)
    assert holds.state_of("a2") is HoldState.RUNNING
    assert not holds.is_held("a2")
    assert holds.finished("a2") == ("a3",)
    assert holds.running_keys() == ("a",)
    assert holds.finished("a3") == ()
    assert holds.running_keys() == ()
    assert holds.arrive("a4", "a") == ("a4",), "the key is idle again, so the next message runs at once"


def test_the_next_message_is_released_by_finished_alone() -> None:
    """Finishing the callback is the release; there is no ack step (acks go to the dispatcher, not here)."""
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    holds.arrive("a2", "a")
    assert holds.finished("a1") == ("a2",)
    assert holds.state_of("a1") is None


def test_keys_are_independent() -> None:
    holds = OrderingKeyHolds()
    assert holds.arrive("a1", "a") == ("a1",)
    assert holds.arrive("b1", "b") == ("b1",)
    assert holds.arrive("a2", "a") == ()
    assert holds.arrive("b2", "b") == ()
    assert holds.running_keys() == ("a", "b")
    assert holds.finished("b1") == ("b2",)
    assert holds.held_ids() == ("a2",)
    assert holds.finished("b2") == ()
    assert holds.running_keys() == ("a",)


def test_held_ids_are_in_arrival_order_across_keys() -> None:
    holds = OrderingKeyHolds()
    for item_id, key in [("a1", "a"), ("b1", "b"), ("b2", "b"), ("a2", "a"), ("b3", "b"), ("a3", "a")]:
        holds.arrive(item_id, key)
    assert holds.held_ids() == ("b2", "a2", "b3", "a3")
    assert holds.held_count() == 4


def test_snapshot_counts_and_the_high_water_mark() -> None:
    holds = OrderingKeyHolds()
    assert holds.snapshot() == OrderingSnapshot(held=0, active_keys=0, max_held_seen=0)
    for item_id in ("a1", "a2", "a3"):
        holds.arrive(item_id, "a")
    holds.arrive("b1", "b")
    holds.arrive("u1", None)
    assert holds.snapshot() == OrderingSnapshot(held=2, active_keys=2, max_held_seen=2)
    holds.finished("a1")
    holds.finished("a2")
    assert holds.snapshot() == OrderingSnapshot(held=0, active_keys=2, max_held_seen=2)
    assert repr(holds) == "<OrderingKeyHolds held=0 running=3 active_keys=2 max_held_seen=2>"


# ---------------------------------------------------------------------- drop_key


def test_drop_key_returns_the_held_messages_and_leaves_the_running_one() -> None:
    holds = OrderingKeyHolds()
    for item_id in ("a1", "a2", "a3"):
        holds.arrive(item_id, "a")
    holds.arrive("b1", "b")
    holds.arrive("b2", "b")
    assert holds.drop_key("a") == ("a2", "a3")
    assert holds.held_ids() == ("b2",)
    assert holds.held_count() == 1
    assert holds.state_of("a2") is None
    assert holds.running_keys() == ("a", "b")
    assert holds.finished("a1") == ()
    assert holds.running_keys() == ("b",)
    assert holds.snapshot().max_held_seen == 3


def test_drop_key_of_an_idle_or_unordered_key_drops_nothing() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("u", "")
    holds.arrive("a1", "a")
    assert holds.drop_key("zzz") == ()
    assert holds.drop_key("") == ()
    assert holds.drop_key("a") == ()
    assert holds.running_keys() == ("a",)


def test_a_dropped_message_may_arrive_again_and_queues_at_the_back() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    holds.arrive("a2", "a")
    holds.arrive("a3", "a")
    assert holds.drop_key("a") == ("a2", "a3")
    assert holds.arrive("a3", "a") == ()
    assert holds.arrive("a2", "a") == ()
    assert holds.finished("a1") == ("a3",)
    assert holds.finished("a3") == ("a2",)


# ---------------------------------------------------------------------- drop_held


def test_drop_held_sends_back_some_held_messages_and_keeps_the_rest_in_order() -> None:
    holds = OrderingKeyHolds()
    for item_id in ("a1", "a2", "a3", "a4"):
        holds.arrive(item_id, "a")
    assert holds.held_of("a") == ("a2", "a3", "a4")
    assert holds.drop_held("a", ("a4", "a3")) == ("a3", "a4"), "returned in arrival order"
    assert holds.held_of("a") == ("a2",)
    assert holds.state_of("a3") is None
    assert holds.snapshot().held == 1
    assert holds.finished("a1") == ("a2",)
    assert holds.finished("a2") == ()
    assert holds.arrive("a3", "a") == ("a3",), "a dropped message may arrive again"


def test_drop_held_of_nothing_drops_nothing() -> None:
    holds = OrderingKeyHolds()
    assert holds.drop_held("idle", ()) == ()
    assert holds.held_of("idle") == ()


def test_drop_held_refuses_what_is_not_held_behind_that_key() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    holds.arrive("a2", "a")
    holds.arrive("b1", "b")
    with pytest.raises(HoldError, match="cannot drop 'a1' from key 'a': it is not held"):
        holds.drop_held("a", ("a1",))  # running, not held
    with pytest.raises(HoldError, match="cannot drop 'b1' from key 'a'"):
        holds.drop_held("a", ("a2", "b1"))
    assert holds.held_of("a") == ("a2",), "a refused drop changes nothing"


# ---------------------------------------------------------------------- errors


def test_finishing_an_unknown_message_is_a_value_error_naming_it() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    with pytest.raises(HoldError, match=r"cannot finish item 'nope': it is not known") as caught:
        holds.finished("nope")
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, ConveyorError)
    assert "1 items are held or running" in str(caught.value)


def test_finishing_twice_is_an_error() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("u", None)
    holds.finished("u")
    with pytest.raises(ValueError, match=r"item 'u': it is not known \(never arrived, finished already"):
        holds.finished("u")


def test_finishing_a_held_message_is_an_error_naming_its_state() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    holds.arrive("a2", "a")
    with pytest.raises(HoldError, match=r"cannot finish item 'a2': it is held behind 'a1' \(key='a'\)"):
        holds.finished("a2")
    assert holds.is_held("a2"), "a failed event changes nothing"
    assert holds.finished("a1") == ("a2",)


def test_arriving_twice_is_an_error_naming_the_state() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a1", "a")
    holds.arrive("a2", "a")
    with pytest.raises(HoldError, match=r"item 'a1' with key 'b': it arrived already and is running \(key='a'\)"):
        holds.arrive("a1", "b")
    with pytest.raises(HoldError, match=r"item 'a2' with key None: it arrived already and is held"):
        holds.arrive("a2", None)
    assert holds.held_ids() == ("a2",)


def test_ids_and_keys_must_be_strings() -> None:
    holds = OrderingKeyHolds()
    with pytest.raises(TypeError, match="item_id must be a str, got 7"):
        holds.arrive(7, "a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a str, got b'k'"):
        holds.arrive("m", b"k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a str, got None"):
        holds.drop_key(None)  # type: ignore[arg-type]
    assert len(holds) == 0


# ---------------------------------------------------------------------- against a model


KEYS = st.sampled_from([None, "", "a", "b", "c"])


class _Model:
    """The obvious implementation: one deque per key whose front is the running item."""

    def __init__(self) -> None:
        self.lines: dict[str, deque[str]] = {}
        self.unordered: list[str] = []
        self.key_of: dict[str, str | None] = {}

    def arrive(self, item_id: str, key: str | None) -> tuple[str, ...]:
        self.key_of[item_id] = key or None
        if not key:
            self.unordered.append(item_id)
            return (item_id,)
        line = self.lines.setdefault(key, deque())
        line.append(item_id)
        return (item_id,) if len(line) == 1 else ()

    def running(self) -> list[str]:
        return [*self.unordered, *(line[0] for line in self.lines.values())]

    def finished(self, item_id: str) -> tuple[str, ...]:
        key = self.key_of.pop(item_id)
        if key is None:
            self.unordered.remove(item_id)
            return ()
        line = self.lines[key]
        assert line.popleft() == item_id
        if not line:
            del self.lines[key]
            return ()
        return (line[0],)

    def drop_key(self, key: str) -> tuple[str, ...]:
        line = self.lines.get(key)
        if line is None:
            return ()
        dropped = tuple(list(line)[1:])
        for item_id in dropped:
            del self.key_of[item_id]
        self.lines[key] = deque([line[0]])
        return dropped

    def held(self) -> list[str]:
        return [item_id for line in self.lines.values() for item_id in list(line)[1:]]

    def drop_held(self, key: str, item_ids: set[str]) -> tuple[str, ...]:
        line = self.lines[key]
        dropped = tuple(item_id for item_id in list(line)[1:] if item_id in item_ids)
        for item_id in dropped:
            line.remove(item_id)
            del self.key_of[item_id]
        return dropped


class OrderingKeyHoldsMachine(RuleBasedStateMachine):
    """Random arrive / finished / drop_key, checked against ``_Model`` and the ordering rules."""

    def __init__(self) -> None:
        super().__init__()
        self.holds = OrderingKeyHolds()
        self.model = _Model()
        self.count = 0
        self.arrived: dict[str, list[str]] = {}
        """Per key, every id in arrival order (ids are never reused here)."""
        self.dropped: set[str] = set()
        self.released: dict[str, list[str]] = {}
        """Per key, every id handed to a worker, in release order."""
        self.max_held = 0

    def _release(self, ids: tuple[str, ...]) -> None:
        for item_id in ids:
            key = self.model.key_of[item_id]
            assert key, f"unordered item {item_id} was held and released later"
            self.released.setdefault(key, []).append(item_id)

    @rule(key=KEYS)
    def arrive(self, key: str | None) -> None:
        item_id = f"m{self.count}"
        self.count += 1
        got = self.holds.arrive(item_id, key)
        assert got == self.model.arrive(item_id, key)
        if not key:
            assert got == (item_id,), "unordered items are never held"
            return
        self.arrived.setdefault(key, []).append(item_id)
        if got:
            self._release(got)
        self.max_held = max(self.max_held, len(self.model.held()))

    @precondition(lambda self: self.model.key_of)
    @rule(data=st.data())
    def arrive_again(self, data: st.DataObject) -> None:
        item_id = data.draw(st.sampled_from(sorted(self.model.key_of)))
        with pytest.raises(HoldError, match=f"item {item_id!r}"):
            self.holds.arrive(item_id, data.draw(KEYS))

    @precondition(lambda self: self.model.running())
    @rule(data=st.data())
    def finish_a_running_item(self, data: st.DataObject) -> None:
        item_id = data.draw(st.sampled_from(self.model.running()))
        got = self.holds.finished(item_id)
        assert got == self.model.finished(item_id)
        self._release(got)

    @rule(n=st.integers(0, 30))
    def finish_any_id(self, n: int) -> None:
        item_id = f"m{n}"
        if item_id in self.model.running():
            got = self.holds.finished(item_id)
            assert got == self.model.finished(item_id)
            self._release(got)
        else:
            state = "held" if item_id in self.model.held() else "not known"
            with pytest.raises(HoldError, match=f"cannot finish item {item_id!r}: it is {state}"):
                self.holds.finished(item_id)

    @rule(key=st.sampled_from(["", "a", "b", "c"]))
    def drop_key(self, key: str) -> None:
        got = self.holds.drop_key(key)
        assert got == self.model.drop_key(key)
        self.dropped.update(got)

    @rule(key=st.sampled_from(["a", "b", "c"]), data=st.data())
    def drop_some_held(self, key: str, data: st.DataObject) -> None:
        held = list(self.holds.held_of(key))
        assert held == [item_id for item_id in self.model.held() if self.model.key_of[item_id] == key]
        chosen = data.draw(st.lists(st.sampled_from(held), unique=True) if held else st.just([]))
        got = self.holds.drop_held(key, tuple(chosen))
        assert got == (self.model.drop_held(key, set(chosen)) if chosen else ())
        self.dropped.update(got)

    @invariant()
    def at_most_one_running_item_per_key(self) -> None:
        holds = self.holds
        running_keys = [
            self.model.key_of[item_id] for item_id in self.model.key_of if holds.state_of(item_id) is HoldState.RUNNING
        ]
        ordered = [key for key in running_keys if key is not None]
        assert len(ordered) == len(set(ordered))
        assert sorted(holds.running_keys()) == sorted(ordered)

    @invariant()
    def each_key_is_released_in_arrival_order(self) -> None:
        for key, released in self.released.items():
            kept = [item_id for item_id in self.arrived[key] if item_id not in self.dropped]
            assert released == kept[: len(released)]

    @invariant()
    def matches_the_model(self) -> None:
        holds, model = self.holds, self.model
        assert holds.held_count() == len(model.held())
        assert sorted(holds.held_ids()) == sorted(model.held())
        assert len(holds) == len(model.key_of)
        for item_id, key in model.key_of.items():
            assert holds.is_held(item_id) == (item_id in model.held())
            if key is None:
                assert holds.state_of(item_id) is HoldState.RUNNING, "unordered items are never held"
        assert holds.snapshot() == OrderingSnapshot(
            held=len(model.held()), active_keys=len(model.lines), max_held_seen=self.max_held
        )

    @invariant()
    def held_ids_are_in_arrival_order(self) -> None:
        ids = self.holds.held_ids()
        assert list(ids) == sorted(ids, key=lambda item_id: int(item_id[1:]))


OrderingKeyHoldsMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
test_ordering_key_holds_match_the_model = OrderingKeyHoldsMachine.TestCase
