"""Ordering-key fences in ``OrderingKeyHolds``: each rule by example, then random runs against a list-based model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.subscriber._ordering import Admission, HoldError, HoldState, Lapse, OrderingKeyHolds, SentBack

NOW = 10.0


def _admit(holds: OrderingKeyHolds, tag: int, key: str | None = "k", deadline: float | None = None) -> Admission:
    return holds.admit(f"1:{tag}", key, tag, deadline, NOW)


def test_a_nack_sends_back_the_held_messages_from_its_tag_on_and_fences_the_key() -> None:
    holds = OrderingKeyHolds()
    assert [_admit(holds, tag) for tag in (1, 2, 3, 4)] == [Admission.RUN] + [Admission.HELD] * 3
    assert holds.send_back("k", 3) == SentBack(fence=1, ids=("1:3", "1:4")), "2 precedes 3: it stays"
    assert holds.held_of("k") == ("1:2",)
    assert holds.fenced("k") == {3, 4} and holds.fence_of("k") == 1
    assert holds.send_back("k", 2) == SentBack(fence=None, ids=("1:2",)), "fenced already: the same fence"
    assert holds.fenced("k") == {2, 3, 4}


def test_while_an_earlier_tag_is_out_a_later_one_is_sent_back_and_each_return_clears_its_place() -> None:
    holds = OrderingKeyHolds()
    _admit(holds, 1)
    holds.send_back("k", 1)
    holds.finished("1:1")
    assert _admit(holds, 5) is Admission.FENCED
    assert holds.fenced("k") == {1, 5}
    assert _admit(holds, 1) is Admission.RUN, "the earliest one back runs"
    assert holds.fenced("k") == {5}
    assert _admit(holds, 5) is Admission.HELD
    assert holds.fenced("k") == frozenset() and holds.fence_of("k") is None, "everything came back"
    assert _admit(holds, 7, key="j") is Admission.RUN, "other keys are not fenced"


def test_only_the_fence_up_now_can_be_lifted() -> None:
    holds = OrderingKeyHolds()
    holds.send_back("k", 1)
    assert holds.lift("k", 1)
    assert not holds.lift("k", 1), "lifted already"
    assert holds.send_back("k", 4).fence == 2
    assert not holds.lift("k", 1), "an old fence's timer lifts nothing"
    assert holds.fenced("k") == {4}
    assert holds.lift("k", 2) and holds.fenced("k") == frozenset()
    assert _admit(holds, 9) is Admission.RUN


def test_a_copy_that_came_early_or_late_does_not_arrive() -> None:
    holds = OrderingKeyHolds()
    _admit(holds, 1)
    assert _admit(holds, 1) is Admission.EARLY, "its earlier copy has not finished"
    assert _admit(holds, 2, deadline=NOW) is Admission.LAPSED, "the lease ran out at this very instant"
    assert _admit(holds, 3, key=None, deadline=NOW - 1) is Admission.LAPSED
    assert len(holds) == 1 and holds.fenced("k") == frozenset(), "the caller sends the key back"


def test_lapse_sends_each_key_back_from_its_earliest_held_lapsed_tag_and_leaves_the_rest_to_the_pool() -> None:
    holds = OrderingKeyHolds()
    for tag in (1, 2, 3, 4):
        _admit(holds, tag)
    for tag in (5, 6):
        _admit(holds, tag, key="j")
    _admit(holds, 7, key=None)
    lapse = holds.lapse(("1:4", "1:6", "1:3", "1:7", "1:1", "1:99"))
    assert lapse == Lapse(send_back=(("k", 3), ("j", 6)), to_pool=("1:7", "1:1"))
    assert holds.held_count() == 4, "nothing changes until the caller sends back"


def test_sending_back_needs_the_tags_of_the_held_items() -> None:
    holds = OrderingKeyHolds()
    holds.arrive("a", "k")
    holds.arrive("b", "k")
    with pytest.raises(HoldError, match="its held item 'b' arrived without a tag"):
        holds.send_back("k", 1)
    with pytest.raises(HoldError, match="held without a tag"):
        holds.lapse(("b",))


@pytest.mark.parametrize("bad", [1.0, "1", None, True])
def test_a_tag_must_be_an_int(bad: Any) -> None:
    holds = OrderingKeyHolds()
    with pytest.raises(TypeError, match="tag must be an int"):
        holds.admit("1:1", "k", bad, None, NOW)
    with pytest.raises(TypeError, match="tag must be an int"):
        holds.send_back("k", bad)


# ---------------------------------------------------------------------- against a reference model

KEY_OF = {1: "a", 2: "b", 3: "a", 4: None, 5: "a", 6: "b", 7: "a", 8: "", 9: "b"}
"""Each tag's ordering key, as the queue would deliver it (the ack id is ``1:tag``)."""


def _tag(item_id: str) -> int:
    return int(item_id[2:])


class _FenceModel:
    """Lists and sets: each key's line (running first), the tags out per key, the fence up per key."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self.unordered: set[str] = set()
        self.out: dict[str, set[int]] = {}
        self.fence_of: dict[str, int] = {}
        self.fences = 0

    def known(self) -> set[str]:
        return self.unordered | {item_id for line in self.lines.values() for item_id in line}

    def running(self) -> list[str]:
        return sorted(self.unordered | {line[0] for line in self.lines.values()})

    def admit(self, tag: int, lapsed: bool) -> Admission:
        item_id, key = f"1:{tag}", KEY_OF[tag]
        if item_id in self.known():
            return Admission.EARLY
        if lapsed:
            return Admission.LAPSED
        if key and key in self.out:
            if tag > min(self.out[key]):
                self.out[key].add(tag)
                return Admission.FENCED
            self.out[key].discard(tag)
            if not self.out[key]:
                del self.out[key], self.fence_of[key]
        if not key:
            self.unordered.add(item_id)
            return Admission.RUN
        self.lines.setdefault(key, []).append(item_id)
        return Admission.RUN if len(self.lines[key]) == 1 else Admission.HELD

    def finished(self, item_id: str) -> tuple[str, ...]:
        if item_id in self.unordered:
            self.unordered.discard(item_id)
            return ()
        key = KEY_OF[_tag(item_id)]
        assert key
        line = self.lines[key]
        line.pop(0)
        if not line:
            del self.lines[key]
            return ()
        return (line[0],)

    def send_back(self, key: str, tag: int) -> SentBack:
        fence = None
        if key not in self.out:
            self.fences += 1
            fence = self.fence_of[key] = self.fences
            self.out[key] = set()
        line = self.lines.get(key, [])
        dropped = tuple(item_id for item_id in line[1:] if _tag(item_id) >= tag)
        for item_id in dropped:
            line.remove(item_id)
        self.out[key] |= {tag, *(_tag(item_id) for item_id in dropped)}
        return SentBack(fence, dropped)

    def lapse(self, item_ids: tuple[str, ...]) -> Lapse:
        first: dict[str, int] = {}
        to_pool = []
        running = self.running()
        for item_id in item_ids:
            if item_id in running:
                to_pool.append(item_id)
            elif item_id in self.known():
                key = KEY_OF[_tag(item_id)]
                assert key
                first[key] = min(first.get(key, _tag(item_id)), _tag(item_id))
        return Lapse(tuple(first.items()), tuple(to_pool))

    def lift(self, key: str, fence: int) -> bool:
        if self.fence_of.get(key) != fence:
            return False
        del self.fence_of[key], self.out[key]
        return True


TAGS = st.sampled_from(sorted(KEY_OF))
KEYS = st.sampled_from(["a", "b"])


class FencesMachine(RuleBasedStateMachine):
    """Random admissions (some lapsed on the way), ends with and without a nack, lapses and lifts vs ``_FenceModel``.

    Ack ids are ``1:tag`` and each tag has one key, as deliveries from one queue. Besides matching the
    model, it checks the rule the fences exist for: a keyed message is admitted only if no earlier
    tag of its key is out, and a send-back leaves no held message of the key at or after its tag.
    """

    def __init__(self) -> None:
        super().__init__()
        self.holds = OrderingKeyHolds()
        self.model = _FenceModel()

    @rule(tag=TAGS, lapsed=st.sampled_from([False, False, False, True]))
    def admit(self, tag: int, lapsed: bool) -> None:
        key = KEY_OF[tag]
        got = self.holds.admit(f"1:{tag}", key, tag, NOW if lapsed else None, NOW)
        assert got is self.model.admit(tag, lapsed)
        event(f"admit: {got.value}")
        if key and got in (Admission.RUN, Admission.HELD):
            assert all(out > tag for out in self.holds.fenced(key)), "admitted past an earlier tag on its way back"

    @precondition(lambda self: self.model.running())
    @rule(data=st.data(), nacked=st.booleans())
    def end(self, data: st.DataObject, nacked: bool) -> None:
        """A callback ended: as the ordered-key handler does, a nack sends its key back first."""
        item_id = data.draw(st.sampled_from(self.model.running()))
        key = KEY_OF[_tag(item_id)]
        if nacked and key:
            self.send_back(key, _tag(item_id))
        got = self.holds.finished(item_id)
        assert got == self.model.finished(item_id)

    @rule(key=KEYS, tag=TAGS)
    def send_back(self, key: str, tag: int) -> None:
        got = self.holds.send_back(key, tag)
        assert got == self.model.send_back(key, tag)
        if got.ids:
            event("send_back took held messages off")
        assert all(_tag(item_id) < tag for item_id in self.holds.held_of(key))

    @rule(tags=st.lists(TAGS, max_size=5))
    def lapse(self, tags: list[int]) -> None:
        ids = tuple(f"1:{tag}" for tag in tags)
        lapse = self.holds.lapse(ids)
        assert lapse == self.model.lapse(ids)
        for key, tag in lapse.send_back:
            self.send_back(key, tag)

    @rule(key=KEYS, data=st.data())
    def lift(self, key: str, data: st.DataObject) -> None:
        fence = data.draw(st.integers(1, self.model.fences + 1))
        got = self.holds.lift(key, fence)
        assert got == self.model.lift(key, fence)
        if got:
            event("a fence was lifted")

    @invariant()
    def matches_the_model(self) -> None:
        holds, model = self.holds, self.model
        for key in ("a", "b"):
            assert holds.fenced(key) == model.out.get(key, set())
            assert holds.fence_of(key) == model.fence_of.get(key)
            assert (holds.fence_of(key) is None) == (not holds.fenced(key)), "a fence waits for something"
            assert list(holds.held_of(key)) == model.lines.get(key, [])[1:]
        assert sorted(holds.running_keys()) == sorted(model.lines)
        for item_id in model.known():
            expected = HoldState.RUNNING if item_id in model.running() else HoldState.HELD
            assert holds.state_of(item_id) is expected
        assert len(holds) == len(model.known())


FencesMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)
test_the_fences_match_the_model = FencesMachine.TestCase
