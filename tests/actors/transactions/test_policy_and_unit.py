"""The two small cores beside the store: the consume policy's decisions and the client's UnitOfWork.

Properties: a release never dead-letters an item the policy still allows and always dead-letters one
it does not; a take given back uncounted changes nothing else; backoff never shrinks and never
passes its cap. A UnitOfWork follows one life (open, then committed or rolled back, never back),
refuses every take, put and commit after its end, and its commit request carries exactly its takes
and puts.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.actors.transactions import (
    AtLeastOnce,
    ConsumeTimes,
    ItemKey,
    ItemMeta,
    NothingTaken,
    RedeliveryBackoff,
    SessionActor,
    Taken,
    TransactionError,
    TxAborted,
    TxCommitted,
    TxItem,
    TxPut,
    TxQueueSettings,
    TxRolledBack,
    TxState,
    UnitOfWork,
    refuse_take,
    release,
)
from conveyor.runtime import ThreadSystem

policies = st.one_of(
    st.integers(1, 5).map(ConsumeTimes),
    st.one_of(st.none(), st.integers(1, 5)).map(AtLeastOnce),
)
backoffs = st.one_of(st.none(), st.tuples(st.floats(0, 10), st.floats(0, 100)).map(
    lambda pair: RedeliveryBackoff(min(pair), max(pair))))
metas = st.builds(ItemMeta, st.integers(1, 8), st.integers(0, 8), st.floats(0, 100))


@given(policies, backoffs, metas, st.floats(0, 1000), st.booleans())
def test_a_release_dead_letters_exactly_what_the_policy_no_longer_allows(
    policy: ConsumeTimes | AtLeastOnce, backoff: RedeliveryBackoff | None, meta: ItemMeta, now: float, failed: bool
) -> None:
    settings = TxQueueSettings("q", policy, backoff)
    outcome = release(settings, meta, now, failed=failed, handed_over=True)
    assert outcome.meta.takes == meta.takes
    assert outcome.meta.rollbacks == meta.rollbacks + (1 if failed else 0)
    assert outcome.dead_letter == refuse_take(settings, outcome.meta)
    if isinstance(policy, ConsumeTimes):
        assert (outcome.dead_letter is not None) == (meta.takes >= policy.times)
    else:
        limit = policy.max_rollbacks
        assert (outcome.dead_letter is not None) == (limit is not None and outcome.meta.rollbacks >= limit)
    if outcome.dead_letter is None and backoff is not None:
        assert outcome.meta.not_before == now + backoff.delay(meta.takes)


@given(policies, backoffs, metas, st.floats(0, 1000), st.booleans())
def test_a_take_given_back_uncounted_changes_nothing_else(
    policy: ConsumeTimes | AtLeastOnce, backoff: RedeliveryBackoff | None, meta: ItemMeta, now: float, failed: bool
) -> None:
    outcome = release(TxQueueSettings("q", policy, backoff), meta, now, failed=failed, handed_over=False)
    assert outcome.meta == ItemMeta(meta.takes - 1, meta.rollbacks, meta.not_before)
    assert outcome.dead_letter is None


@given(backoffs, st.integers(1, 200))
def test_backoff_grows_and_stays_under_its_cap(backoff: RedeliveryBackoff | None, releases: int) -> None:
    if backoff is None:
        return
    assert backoff.min_s <= backoff.delay(releases) <= backoff.max_s
    assert backoff.delay(releases) <= backoff.delay(releases + 1)


ACTIONS = st.lists(st.sampled_from(["take", "nothing", "put", "commit", "abort", "rollback"]), max_size=12)


@given(ACTIONS)
def test_a_unit_of_work_has_one_life(actions: list[str]) -> None:
    with ThreadSystem() as system:
        unit = UnitOfWork(system.spawn(SessionActor), 7)
        taken: list[TxItem] = []
        puts: list[TxPut] = []
        for number, action in enumerate(actions, start=1):
            ended = unit.state is not TxState.OPEN
            if action in ("take", "nothing"):
                if ended:
                    with pytest.raises(TransactionError, match="transaction 7 is"):
                        unit.take_request("q")
                    continue
                assert unit.take_request("q", 1.5).wait_s == 1.5
                item = TxItem(ItemKey("q", number), b"x", 1)
                got = unit.took(Taken(7, item) if action == "take" else NothingTaken(7, "q"))
                if action == "take":
                    taken.append(item)
                    assert got == item
                else:
                    assert got is None
            elif action == "put":
                if ended:
                    with pytest.raises(TransactionError, match="cannot put"):
                        unit.put("out", b"p")
                    continue
                unit.put("out", bytes([number]))
                puts.append(TxPut("out", bytes([number])))
            elif action in ("commit", "abort"):
                if ended:
                    with pytest.raises(TransactionError, match="cannot commit"):
                        unit.commit_request()
                    continue
                request = unit.commit_request()
                assert request.takes == tuple(item.key for item in taken) and request.puts == tuple(puts)
                if action == "commit":
                    unit.committed(TxCommitted(7, ()))
                    assert unit.state is TxState.COMMITTED
                else:
                    with pytest.raises(TransactionError, match="not committed"):
                        unit.committed(TxAborted(7, "lost"))
                    assert unit.state is TxState.ROLLED_BACK
            else:
                rollback = unit.rollback_request()
                if ended:
                    assert rollback is None  # a rollback after the end is a no-op: it always succeeds
                    continue
                assert rollback is not None
                unit.rolled_back(TxRolledBack(7, ()))
                assert unit.state is TxState.ROLLED_BACK


def test_a_refused_take_says_why() -> None:
    with ThreadSystem() as system:
        unit = UnitOfWork(system.spawn(SessionActor), 1)
        with pytest.raises(TransactionError, match="unknown queue"):
            unit.took(NothingTaken(1, "nope", "unknown queue 'nope'; declared queues: none"))
