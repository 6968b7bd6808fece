"""The transactions workload on the simulator: every checker green over many seeds, and each planted bug found.

Each planted bug is a ``TxStore`` variant swapped into the real ``TxStoreActor``; the sweep of
seeds below (the random walk and PCT alternating) must find each with the checker named beside it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import pytest

from conveyor.actors.transactions import Aborted, Committed, DeadLetter, ItemKey, TxPut, TxStore
from conveyor.simulation import strategy_from_name
from conveyor.simulation.checkers import CheckResult
from conveyor.simulation.scenarios import check_tx_run, random_tx_scenario, run_tx_simulation

SEEDS = 120


class LocksNotEphemeral(TxStore):
    """A dead session keeps its locks (ZooKeeper locks created persistent, not ephemeral)."""

    def end_session(self, session: Hashable, now: float) -> tuple[ItemKey, ...]:
        return ()


class PutsBeforeTakesChecked(TxStore):
    """A commit writes its puts, then checks its takes: an aborted commit leaves them behind."""

    def commit(self, owner: tuple[Hashable, int], takes: Iterable[ItemKey], puts: Iterable[TxPut],
               now: float) -> Committed | Aborted:
        puts = tuple(puts)
        outcome = super().commit(owner, takes, puts, now)
        if isinstance(outcome, Aborted):
            super().commit(("planted", 0), (), puts, now)
        return outcome


class CountsPerSession(TxStore):
    """A take is counted only while its session lives: a dead session's takes are given back (K per session)."""

    def end_session(self, session: Hashable, now: float) -> tuple[ItemKey, ...]:
        released: list[ItemKey] = []
        for owner in [owner for owner, _ in self.locked() if owner[0] == session]:
            released.extend(self.rollback(owner, now, failed=False, handed_over=False))
        return tuple(released)


class RollbackKeepsLocks(TxStore):
    """A failed transaction's rollback answers but leaves its locks."""

    def rollback(self, owner: tuple[Hashable, int], now: float, *, failed: bool = True,
                 handed_over: bool = True) -> tuple[ItemKey, ...]:
        if failed:
            return self.locks_of(owner)
        return super().rollback(owner, now, failed=failed, handed_over=handed_over)


class CommitsWithoutItsLocks(TxStore):
    """A commit removes the items it names without checking that it still holds their locks."""

    def commit(self, owner: tuple[Hashable, int], takes: Iterable[ItemKey], puts: Iterable[TxPut],
               now: float) -> Committed | Aborted:
        takes = tuple(takes)
        for key in takes:
            if key not in self.locks_of(owner) and any(k == key for k, _ in self.items(key.queue)):
                stolen = self.take(owner, key.queue, now)  # takes the first offered item: often the one named
                if stolen is None or stolen.key != key:
                    break
        return super().commit(owner, takes, puts, now)


class LosesDeadLetters(TxStore):
    """The DLQ keeps nothing: an item past its policy's limit is lost instead of dead-lettered."""

    def dead_letters(self, queue_name: str) -> tuple[DeadLetter, ...]:
        return ()


def run(seed: int, core: type[TxStore] = TxStore) -> list[CheckResult]:
    scenario = random_tx_scenario(seed)
    strategy = strategy_from_name(("random", "pct")[seed % 2], seed, depth=3)
    sim, result, final = run_tx_simulation(scenario, seed, strategy, core=core)
    assert result.quiet, f"seed {seed}: not quiet after {result.steps} steps"
    return check_tx_run(sim, scenario, final)


def test_every_checker_holds_on_the_real_store() -> None:
    failures = {}
    for seed in range(SEEDS):
        bad = [str(result) for result in run(seed) if not result.ok]
        if bad:
            failures[seed] = bad
    assert failures == {}


@pytest.mark.parametrize(
    ("core", "checker"),
    [
        (LocksNotEphemeral, "tx_no_lock_left"),
        (PutsBeforeTakesChecked, "tx_no_phantom"),
        (CountsPerSession, "tx_at_most_k"),
        (RollbackKeepsLocks, "tx_drained"),
        (CommitsWithoutItsLocks, "tx_atomicity"),
        (LosesDeadLetters, "tx_no_loss"),
    ],
)
def test_each_planted_bug_is_found(core: type[TxStore], checker: str) -> None:
    found = next((seed for seed in range(SEEDS) if any(r.checker == checker and not r.ok for r in run(seed, core))),
                 None)
    assert found is not None, f"{core.__name__} not found by {checker} in {SEEDS} seeds"
