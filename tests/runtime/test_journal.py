"""ctx.journal: durable state that outlives an actor's restarts, on trio, threads and the simulator."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor.runtime import Actor, Journal
from conveyor.simulation import Crash, Simulation
from tests.conftest import Harness
from tests.runtime.actors import Boom, DurableCounter, Flaky, Fragile, Get, Inc, Retrying, counted_under_faults
from tests.runtime.actors import Journal as LifeLog


async def test_a_restarted_actor_rebuilds_its_state_from_its_journal(backend: Harness) -> None:
    counter = backend.spawn(DurableCounter, name="counter")
    for _ in range(5):
        counter.tell(Inc())
    counter.tell(Boom())  # the instance dies: its attribute ``count`` with it
    counter.tell(Inc())
    await backend.quiet()
    assert await backend.ask(counter, Get()) == (6, 5)  # 5 recovered from the journal, then one more
    assert len(backend.system.journals["/counter"]) == 6


async def test_recovery_starts_from_the_snapshot_and_replays_what_came_after(backend: Harness) -> None:
    counter = backend.spawn(lambda: DurableCounter(snapshot_every=4), name="counter")
    for _ in range(10):
        counter.tell(Inc())
    counter.tell(Boom())
    await backend.quiet()
    journal = backend.system.journals["/counter"]
    assert (journal.snapshot, len(journal), journal.snapshots_saved) == (8, 2, 2)
    assert await backend.ask(counter, Get()) == (10, 10)


async def test_without_a_journal_a_restart_starts_from_nothing(backend: Harness) -> None:
    fragile = backend.spawn(lambda: Fragile(LifeLog()), name="fragile")
    for _ in range(3):
        fragile.tell(Inc())
    fragile.tell(Boom())
    await backend.quiet()
    assert await backend.ask(fragile, Get()) == 0
    assert "/fragile" not in backend.system.journals  # nothing is kept for an actor that never asked


def test_a_journal_outlives_the_actor_and_a_respawn_at_its_path_recovers_it() -> None:
    sim = Simulation(seed=1)
    counter = sim.spawn(DurableCounter, name="counter")
    for _ in range(3):
        counter.tell(Inc())
    sim.run()
    sim.stop(counter)
    sim.run()
    again = sim.spawn(DurableCounter, name="counter")
    sim.run()
    assert sim.ask(again, Get()) == (3, 3)


def test_the_simulators_crash_fault_restarts_into_the_journaled_state() -> None:
    sim, counter = counted_under_faults([Crash("/counter", at_step=4)], increments=6, seed=3)
    assert [f.outcome for f in sim.faults_applied] == ["restarted"]
    assert sim.ask(counter, Get()) == (6, 3)  # Start + 3 Inc before the crash, 3 more after it


class _CountsStarts(Actor):
    starts = 0

    def on_start(self) -> None:
        type(self).starts += 1

    def receive(self, message: object) -> None:
        pass


def test_a_crash_before_start_is_handled_still_starts_the_actor_once() -> None:
    # The Start message is still queued when the crash hits: the fresh instance must not run
    # on_start through the restart and then again when Start arrives.
    _CountsStarts.starts = 0
    sim = Simulation(seed=0, faults=[Crash("/late", at_step=0)])
    sim.spawn(_CountsStarts, name="late")
    sim.run()
    assert [f.outcome for f in sim.faults_applied] == ["restarted"]
    assert _CountsStarts.starts == 1


def test_journal_api() -> None:
    journal = Journal("/q")
    assert not journal
    journal.append("a")
    journal.append("b")
    assert (list(journal), len(journal), bool(journal)) == (["a", "b"], 2, True)
    journal.save_snapshot(("state", 2))
    assert (journal.snapshot, list(journal), journal.snapshots_saved) == (("state", 2), [], 1)
    assert bool(journal)
    assert repr(journal) == "<Journal /q: a snapshot and 0 events>"
    with pytest.raises(ValueError, match=r"journal of /q: a snapshot cannot be None"):
        journal.save_snapshot(None)
    journal.clear()
    assert (journal.snapshot, len(journal), bool(journal)) == (None, 0, False)


class _DiskError(OSError):
    pass


def _failing_on(failing: set[int]) -> tuple[Journal, list[int]]:
    """A journal whose n-th write (1-based) raises ``_DiskError`` for each n in ``failing``."""
    attempts = [0]

    def before_write() -> None:
        attempts[0] += 1
        if attempts[0] in failing:
            raise _DiskError(f"write {attempts[0]}")

    return Journal("/q", before_write=before_write), attempts


def test_an_atomic_block_is_one_write_kept_whole() -> None:
    journal, attempts = _failing_on(set())
    journal.append("a")
    with journal.atomic():
        journal.append("b")
        with journal.atomic():  # a nested block joins the outer one
            journal.append("c")
        assert journal.in_atomic
        assert list(journal) == ["a"]  # nothing of the block is recorded before it ends
        journal.append("d")
    assert (list(journal), journal.writes, attempts[0], journal.in_atomic) == (["a", "b", "c", "d"], 2, 2, False)
    with journal.atomic():
        pass  # an empty block writes nothing
    assert (journal.writes, attempts[0]) == (2, 2)


def test_a_failed_write_or_an_error_inside_an_atomic_block_records_none_of_it() -> None:
    journal, _ = _failing_on({2})
    journal.append("a")
    with pytest.raises(_DiskError, match="write 2"), journal.atomic():
        journal.append("b")
        journal.append("c")
    assert (list(journal), journal.writes, journal.in_atomic) == (["a"], 1, False)
    with pytest.raises(KeyError), journal.atomic():
        journal.append("d")
        raise KeyError("the handler failed")
    journal.append("e")  # the discarded block's events do not come back with a later write
    assert (list(journal), journal.writes) == (["a", "e"], 2)


def test_a_snapshot_inside_an_atomic_block_is_refused_by_name() -> None:
    journal = Journal("/q")
    with pytest.raises(RuntimeError, match=r"journal of /q: save_snapshot inside atomic\(\)"), journal.atomic():
        journal.append("a")
        journal.save_snapshot("state")
    assert (journal.snapshot, list(journal)) == (None, [])


@given(
    blocks=st.lists(st.lists(st.integers(0, 9), max_size=4), max_size=12),
    failing=st.sets(st.integers(1, 14), max_size=5),
)
def test_the_journal_holds_exactly_the_blocks_whose_write_succeeded(
    blocks: list[list[int]], failing: set[int]
) -> None:
    # Each block is a handler's work: its events are all recorded, or (its write failed) none.
    journal, attempts = _failing_on(failing)
    kept: list[int] = []
    for events in blocks:
        try:
            with journal.atomic():
                for event in events:
                    journal.append(event)
        except _DiskError:
            continue
        kept.extend(events)
    assert list(journal) == kept
    nonempty = sum(1 for events in blocks if events)
    assert attempts[0] == nonempty  # one write attempted per block with events
    assert journal.writes == nonempty - len(failing & set(range(1, nonempty + 1)))


async def test_an_actor_that_retries_handles_its_failed_message_once_more(backend: Harness) -> None:
    log = LifeLog()
    actor = backend.spawn(lambda: Retrying(log), name="retrying")
    actor.tell(Flaky("a", failures=0))
    actor.tell(Flaky("transient", failures=1))  # fails, the restart retries it: handled
    actor.tell(Flaky("poison", failures=99))  # fails, fails again on the retry: dropped
    actor.tell(Flaky("b", failures=0))
    await backend.quiet()
    assert await backend.ask(actor, Get()) == ("a", "transient", "b")
    assert log.count("transient") == 2
    assert log.count("poison") == 2  # tried twice, not more
    with pytest.raises(OSError, match="flaky asked"):
        await backend.ask(actor, Flaky("asked", failures=1))
    await backend.quiet()
    assert log.count("asked") == 1  # an ask is not retried: its asker already has the error
