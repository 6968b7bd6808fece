"""The ``tx-broker`` scenario: every checker green over many seeds of the default portfolio, runs that report
and replay. Its planted bugs (``planted/transactions.py``) are in the catalog, run by ``planted/test_planted.py``.
"""

from __future__ import annotations

from conveyor.actors.transactions import TxStore
from conveyor.simulation.scenarios import Variant, run_portfolio, run_scenario

SEEDS = 120



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


