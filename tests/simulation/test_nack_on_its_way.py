"""A nack reaching the queue after the message was delivered again changes nothing (the 5000-5299 sweep's find).

The queue gives a lapsed message back to the same consumer under the same tag. When the subscriber
nacked a message (its callback nacked or raised, or the leaser found its lease lapsed) and the nack
reached the queue only after the queue had delivered the message again (a pause froze the nack on
its way), the manager took that delivery in as a new message while the nack returned it at the
queue and gave the broker consumer its credit back: the subscription held one message more than
``max_messages`` per such nack, and ``flow_bound`` caught it (11 and 12 > 10 in seed 5079). Now a
nack names the delivery it is for (``Nack.attempts``) and the queue ignores one for an older
delivery. These tests replay the seeds that found it and show that a subscription whose nacks name
no delivery, as before, fails them. (A queue that ignores the attempts does not: the broker
consumer, keeping the credit of a redelivery a stale nack names, still holds ``flow_bound``; the
queue's part is pinned by ``tests/actors/subscriber/test_stale_nack.py``.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from conveyor.actors.subscriber import StreamingPullManager
from conveyor.actors.subscriber._protocol import Settlement as Settle
from conveyor.actors.subscriber._protocol import SettlementKind as SettleKind
from conveyor.simulation.scenarios import ScenarioRun, Variant, run_scenario

FOUND = (
    ("paused-process", 5079, "pct", "none"),
    ("paused-process", 5070, "random", "pause"),
    ("paused-process", 5208, "random", "queue-crash"),
    ("paused-process", 5191, "pct", "delay"),
    ("leases", 5192, "pct", "pause,queue-crash"),
)
"""The ``flow_bound`` violations of the 63,600-run sweep of seeds 5000-5299 (scenario, seed, strategy, faults)."""


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


class NacksNameNoDelivery(StreamingPullManager):
    """The manager before the fix: its nacks leave ``attempts`` empty, so each returns the current delivery."""

    def _to_dispatcher(self, settle: Settle) -> None:
        if settle.kind is SettleKind.NACK:
            settle = Settle(SettleKind.NACK, settle.ack_id)
        super()._to_dispatcher(settle)


def _flow_bound(run: ScenarioRun) -> str | None:
    (result,) = (result for result in run.results if result.checker == "flow_bound")
    return None if result.ok else str(result)


@pytest.mark.parametrize(("name", "seed", "strategy", "faults"), FOUND)
def test_the_seeds_that_found_the_nack_on_its_way_pass(name: str, seed: int, strategy: str, faults: str) -> None:
    run = run_scenario(name, seed, strategy=strategy, depth=3, faults=faults)
    assert run.report.ok, run.report.violations


def test_a_subscription_whose_nacks_name_no_delivery_fails_the_found_seeds() -> None:
    variant = Variant(manager=NacksNameNoDelivery)
    failed = [
        (name, seed)
        for name, seed, strategy, faults in FOUND
        if _flow_bound(run_scenario(name, seed, strategy=strategy, depth=3, faults=faults, variant=variant))
    ]
    assert failed, "the found seeds no longer tell the fix from the bug"
