"""ctx.journal: durable state that outlives an actor's restarts, on trio, threads and the simulator."""

from __future__ import annotations

import pytest

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
