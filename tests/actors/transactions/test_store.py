"""TxStore, the sans-IO core of the broker backend, checked against a plain model and the seed's guarantees.

The state machine drives takes, commits, rollbacks, session ends and the clock at random; after
every step it checks: no item taken more than its policy allows (counted from the history of
takes, not from the store's own meta), every item that exists or was dead-lettered was put by a
commit (no phantom), a commit changed all or nothing, a rollback left its owner no lock, and the
store's queues equal the model's.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conveyor.actors.transactions import (
    Aborted,
    AtLeastOnce,
    Committed,
    ConsumeOnce,
    ConsumePolicy,
    ConsumeTimes,
    ItemKey,
    RedeliveryBackoff,
    TxPut,
    TxQueueSettings,
    TxStore,
    UnknownQueue,
)

QUEUES = ("a", "b")
SESSIONS = ("s1", "s2")
POLICIES: dict[str, ConsumePolicy] = {"a": ConsumeTimes(2), "b": AtLeastOnce(max_rollbacks=2)}
BACKOFF = RedeliveryBackoff(1.0, 4.0)


@dataclasses.dataclass
class ModelItem:
    """The model's view of one live item."""

    body: bytes
    takes: int = 0
    rollbacks: int = 0
    owner: tuple[str, int] | None = None
    not_before: float = 0.0


class TxStoreMachine(RuleBasedStateMachine):
    """Random transactions against ``TxStore`` and an independent model of the seed's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.store = TxStore()
        for name in QUEUES:
            self.store.declare(TxQueueSettings(name, POLICIES[name], BACKOFF if name == "a" else None))
        self.now = 0.0
        self.next_tx = 1
        self.open: dict[tuple[str, int], list[ItemKey]] = {}  # owner -> keys its takes returned
        self.model: dict[ItemKey, ModelItem] = {}  # live items: body, takes, rollbacks, owner, not_before
        self.model_dead: dict[str, list[ItemKey]] = {name: [] for name in QUEUES}
        self.next_number = dict.fromkeys(QUEUES, 1)
        self.handed_takes: Counter[ItemKey] = Counter()  # takes user code saw, from the history
        self.put_bodies: dict[ItemKey, bytes] = {}

    def _policy_allows(self, key: ItemKey, item: ModelItem) -> bool:
        policy = POLICIES[key.queue]
        if isinstance(policy, AtLeastOnce):
            return policy.max_rollbacks is None or item.rollbacks < policy.max_rollbacks
        return item.takes < policy.times

    def _model_release(self, owner: tuple[str, int], *, failed: bool, handed_over: bool) -> None:
        for key in sorted(k for k, item in self.model.items() if item.owner == owner):
            item = self.model[key]
            item.owner = None
            if not handed_over:
                item.takes = item.takes - 1
                self.handed_takes[key] -= 1
                continue
            if failed:
                item.rollbacks = item.rollbacks + 1
            if not self._policy_allows(key, item):
                del self.model[key]
                self.model_dead[key.queue].append(key)
            elif key.queue == "a":
                item.not_before = self.now + BACKOFF.delay(item.takes)

    @rule(session=st.sampled_from(SESSIONS))
    def begin(self, session: str) -> None:
        self.open[(session, self.next_tx)] = []
        self.next_tx += 1

    @precondition(lambda self: self.open)
    @rule(data=st.data(), queue=st.sampled_from(QUEUES))
    def take(self, data: st.DataObject, queue: str) -> None:
        owner = data.draw(st.sampled_from(sorted(self.open)))
        item = self.store.take(owner, queue, self.now)
        offered = sorted(k for k, i in self.model.items()
                         if k.queue == queue and i.owner is None and i.not_before <= self.now)
        if not offered:
            assert item is None
            return
        assert item is not None and item.key == offered[0], "a take gets the first offered item"
        model_item = self.model[item.key]
        model_item.owner = owner
        model_item.takes = model_item.takes + 1
        assert item.takes == model_item.takes
        assert item.body == self.put_bodies[item.key]
        self.open[owner].append(item.key)
        self.handed_takes[item.key] += 1

    @precondition(lambda self: self.open)
    @rule(data=st.data(), forge=st.booleans(),
          puts=st.lists(st.tuples(st.sampled_from((*QUEUES, "nowhere")), st.binary(max_size=3)), max_size=3))
    def commit(self, data: st.DataObject, puts: list[tuple[str, bytes]], forge: bool) -> None:
        owner = data.draw(st.sampled_from(sorted(self.open)))
        takes = list(self.open.pop(owner))
        if forge and self.model:  # claim an item this transaction does not hold
            takes.append(data.draw(st.sampled_from(sorted(self.model))))
        before = (self.store.items("a"), self.store.items("b"))
        outcome = self.store.commit(owner, takes, [TxPut(q, b) for q, b in puts], self.now)
        held = all(k in self.model and self.model[k].owner == owner for k in takes)
        valid = held and all(q in QUEUES for q, _ in puts)
        if not valid:
            assert isinstance(outcome, Aborted)
            kept = {key for pair in before for key, _ in pair}
            self._model_release(owner, failed=False, handed_over=True)
            assert {key for q in QUEUES for key, _ in self.store.items(q)} <= kept, "an aborted commit created nothing"
            return
        assert isinstance(outcome, Committed)
        for key in dict.fromkeys(takes):  # a key named twice is one take
            del self.model[key]
        created = []
        for queue, body in puts:
            key = ItemKey(queue, self.next_number[queue])
            self.next_number[queue] += 1
            self.model[key] = ModelItem(body)
            self.put_bodies[key] = body
            created.append(key)
        assert outcome.created == tuple(created)
        self._model_release(owner, failed=False, handed_over=False)

    @precondition(lambda self: self.open)
    @rule(data=st.data(), failed=st.booleans(), handed_over=st.booleans())
    def rollback(self, data: st.DataObject, failed: bool, handed_over: bool) -> None:
        owner = data.draw(st.sampled_from(sorted(self.open)))
        del self.open[owner]
        self.store.rollback(owner, self.now, failed=failed, handed_over=handed_over)
        self._model_release(owner, failed=failed, handed_over=handed_over)
        assert self.store.locks_of(owner) == (), "a rollback leaves its owner no lock"

    @rule(session=st.sampled_from(SESSIONS))
    def session_ends(self, session: str) -> None:
        self.store.end_session(session, self.now)
        for owner in sorted(o for o in self.open if o[0] == session):
            del self.open[owner]
            self._model_release(owner, failed=False, handed_over=True)
        assert not [lock for lock in self.store.locked() if lock[0][0] == session], "a session's locks all go at once"

    @rule(seconds=st.sampled_from((0.5, 1.0, 3.0)))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @invariant()
    def at_most_k_takes(self) -> None:
        for key, takes in self.handed_takes.items():
            policy = POLICIES[key.queue]
            if isinstance(policy, ConsumeTimes):
                assert takes <= policy.times, f"{key} taken {takes} times under {policy}"

    @invariant()
    def matches_the_model(self) -> None:
        for queue in QUEUES:
            live = [(k, self.model[k].body) for k in sorted(self.model) if k.queue == queue]
            assert list(self.store.items(queue)) == live
            assert [d.key for d in self.store.dead_letters(queue)] == self.model_dead[queue]
        locked = {(owner, key) for owner, key in self.store.locked()}
        assert locked == {(item.owner, key) for key, item in self.model.items() if item.owner is not None}

    @invariant()
    def a_snapshot_restores_the_same_store(self) -> None:
        snapshot = self.store.snapshot()
        restored = TxStore.restore(snapshot)
        assert restored.snapshot() == snapshot
        assert sorted(restored.locked(), key=repr) == sorted(self.store.locked(), key=repr)

    @invariant()
    def no_phantom(self) -> None:
        for queue in QUEUES:
            for key, body in self.store.items(queue):
                assert self.put_bodies.get(key) == body, f"{key} was never put"
            for dead in self.store.dead_letters(queue):
                assert self.put_bodies.get(dead.key) == dead.body, f"dead letter {dead.key} was never put"

    @invariant()
    def released_items_wait_out_their_backoff(self) -> None:
        for key, item in self.model.items():
            if key.queue == "b":
                assert item.not_before == 0.0


TxStoreMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_tx_store_against_model = TxStoreMachine.TestCase


def store_with(
    name: str = "q", policy: ConsumePolicy | None = None, backoff: RedeliveryBackoff | None = None
) -> TxStore:
    store = TxStore()
    store.declare(TxQueueSettings(name, policy or ConsumeOnce(), backoff))
    return store


def put(store: TxStore, queue: str, *bodies: bytes) -> None:
    assert isinstance(store.commit(("producer", 0), (), [TxPut(queue, b) for b in bodies], 0.0), Committed)


def test_consume_once_dead_letters_an_item_whose_only_take_did_not_commit() -> None:
    store = store_with(policy=ConsumeOnce())
    put(store, "q", b"x")
    item = store.take(("s", 1), "q", 0.0)
    assert item is not None and item.takes == 1
    store.rollback(("s", 1), 0.0)
    assert store.take(("s", 2), "q", 0.0) is None
    (dead,) = store.dead_letters("q")
    assert (dead.body, dead.takes, dead.reason) == (b"x", 1, "taken 1 times (ConsumeOnce allows 1)")


def test_consume_times_offers_k_times_then_dead_letters() -> None:
    store = store_with(policy=ConsumeTimes(3))
    put(store, "q", b"x")
    for attempt in range(1, 4):
        item = store.take(("s", attempt), "q", 0.0)
        assert item is not None and item.takes == attempt
        store.rollback(("s", attempt), 0.0)
    assert store.take(("s", 9), "q", 0.0) is None
    assert [d.takes for d in store.dead_letters("q")] == [3]


def test_a_lost_session_counts_under_consume_times_but_not_under_at_least_once() -> None:
    store = TxStore()
    store.declare(TxQueueSettings("once", ConsumeOnce()))
    store.declare(TxQueueSettings("least", AtLeastOnce(max_rollbacks=1)))
    put(store, "once", b"o")
    put(store, "least", b"l")
    assert store.take(("dies", 1), "once", 0.0) is not None
    assert store.take(("dies", 1), "least", 0.0) is not None
    assert store.end_session("dies", 0.0) == (ItemKey("least", 1), ItemKey("once", 1))
    assert store.take(("s", 1), "once", 0.0) is None  # at most once: it went to the DLQ
    again = store.take(("s", 1), "least", 0.0)  # at least once: offered again
    assert again is not None and again.takes == 2
    store.rollback(("s", 1), 0.0, failed=True)
    assert [d.reason for d in store.dead_letters("least")] == ["rolled back 1 times (AtLeastOnce(max_rollbacks=1))"]


def test_a_released_item_waits_out_its_backoff() -> None:
    store = store_with(policy=ConsumeTimes(5), backoff=RedeliveryBackoff(2.0, 5.0))
    put(store, "q", b"x")
    assert store.take(("s", 1), "q", 0.0) is not None
    store.rollback(("s", 1), 10.0)
    assert store.take(("s", 2), "q", 11.9) is None
    assert store.next_offer("q", 11.9) == 12.0
    assert store.take(("s", 2), "q", 12.0) is not None
    store.rollback(("s", 2), 20.0)
    assert store.next_offer("q", 20.0) == 24.0  # second release: 2 * 2**1


def test_a_commit_across_queues_with_a_lost_lock_changes_nothing() -> None:
    store = TxStore()
    for name in ("in", "out"):
        store.declare(TxQueueSettings(name, ConsumeTimes(5)))
    put(store, "in", b"1", b"2")
    first = store.take(("s", 1), "in", 0.0)
    assert first is not None
    store.end_session("s", 0.0)  # the session expired: the lock is gone
    outcome = store.commit(("s", 1), [first.key], [TxPut("out", b"derived")], 0.0)
    assert isinstance(outcome, Aborted) and "not locked by this transaction" in outcome.reason
    assert store.items("out") == ()
    assert [key.number for key, _ in store.items("in")] == [1, 2]


def test_unknown_queue_and_conflicting_declare_name_what_exists() -> None:
    store = store_with("q")
    with pytest.raises(UnknownQueue, match=r"unknown queue 'nope'; declared queues: q"):
        store.take(("s", 1), "nope", 0.0)
    with pytest.raises(ValueError, match="exists with"):
        store.declare(TxQueueSettings("q", AtLeastOnce()))
    assert store.declare(TxQueueSettings("q")) is False


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ConsumeTimes(0), "ConsumeTimes.times must be an int >= 1"),
        (lambda: ConsumeOnce(2), "ConsumeOnce.times must be 1"),
        (lambda: AtLeastOnce(max_rollbacks=0), "AtLeastOnce.max_rollbacks must be an int >= 1"),
        (lambda: RedeliveryBackoff(2.0, 1.0), "RedeliveryBackoff.max_s must be a number of seconds >= min_s"),
        (lambda: TxQueueSettings("a/b"), "TxQueueSettings.name must be a non-empty str without '/'"),
        (lambda: TxQueueSettings("q", policy=3), "TxQueueSettings.policy must be ConsumeTimes"),  # type: ignore[arg-type]
        (lambda: TxPut("q", "text"), "TxPut.body must be bytes"),  # type: ignore[arg-type]
    ],
)
def test_bad_values_name_the_field(build: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()  # type: ignore[operator]
