"""The ``tx-broker`` scenario: every checker green over many seeds, and each planted bug found.

Each planted bug is a ``TxStore`` variant swapped into the real ``TxStoreActor``
(``Variant(tx_store=...)``); the default portfolio (``conveyor simulate tx-broker``'s strategies
and fault plans) must find each, with the checker named beside it, within its budget of seeds.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import pytest

from conveyor.actors.transactions import Aborted, Committed, DeadLetter, ItemKey, TxPut, TxStore
from conveyor.simulation.scenarios import Variant, run_portfolio, run_scenario

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


def run(seed: int, core: type[TxStore] | None = None) -> list[str]:
    """The violations of seed ``seed`` of ``tx-broker`` under the default portfolio (``conveyor simulate``'s run)."""
    report = run_portfolio("tx-broker", seed, variant=Variant(tx_store=core)).report
    assert not report.cut_off, report.violations
    return list(report.violations)


def test_every_checker_holds_on_the_real_store() -> None:
    failures = {seed: violations for seed in range(SEEDS) if (violations := run(seed))}
    assert failures == {}


def test_a_run_reports_its_items_and_replays() -> None:
    first = run_scenario("tx-broker", 3)
    report = first.report
    assert report.published > 0 and report.delivered >= report.acked > 0
    assert report.acked + report.dead_lettered == report.published  # the first container never crashes
    assert run_scenario("tx-broker", 3).report.trace_hash == report.trace_hash
    replayed = run_scenario("tx-broker", 3, schedule=first.sim.schedule)
    assert replayed.report.trace_hash == report.trace_hash


@pytest.mark.parametrize(
    ("core", "checker", "budget"),
    [
        (LocksNotEphemeral, "tx_no_lock_left", 30),
        (PutsBeforeTakesChecked, "tx_no_phantom", 10),
        (CountsPerSession, "tx_at_most_k", SEEDS),
        (RollbackKeepsLocks, "tx_drained", 20),
        (CommitsWithoutItsLocks, "tx_atomicity", 20),
        (LosesDeadLetters, "tx_no_loss", 20),
    ],
)
def test_the_default_portfolio_finds_each_planted_bug(core: type[TxStore], checker: str, budget: int) -> None:
    found = next((seed for seed in range(budget) if any(line.startswith(f"{checker}:") for line in run(seed, core))),
                 None)
    assert found is not None, f"{core.__name__} not found by {checker} in {budget} seeds"
