"""The liveness monitors (issue 5): green on healthy runs, each catching the failure it exists for,
and a consumer frozen by a fault not mistaken for a lost wake-up."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from conveyor.actors.broker import ConsumerLists, ConsumerManagerActor, QueueActor, Suspend
from conveyor.actors.subscriber import FlowControl, FlowNote, LoadController
from conveyor.actors.subscriber._flow import FlowDecision
from conveyor.actors.subscriber._protocol import Done, Received
from conveyor.runtime import EventKind, TrioSystem
from conveyor.simulation import Pause
from conveyor.simulation.checkers import (
    CheckResult,
    liveness,
    prompt_delivery,
    queue_order,
    single_wakeup,
    stall,
    starvation,
)
from conveyor.simulation.scenarios import (
    BrokerScenario,
    ClientPolicy,
    SubscriberScenario,
    run_broker_simulation,
    run_scenario,
    run_subscriber_simulation,
    spawn_broker_scenario,
)
from tests.simulation.planted.broker import Herd, TailRelease, queue_with_entries, queue_with_lists
from tests.simulation.planted.subscriber import manager_with

QUEUE = "/queue"
NAMES = {"prompt_delivery", "starvation", "stall", "queue_order", "single_wakeup"}


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _failed(results: list[CheckResult]) -> list[str]:
    return [str(result) for result in results if not result.ok]


# --- broken variants, each failing one way --------------------------------------------------------


class Sleepy(ConsumerLists):
    """Broken: ignores every other piece of new work (the next publish wakes someone again)."""

    calls = 0

    def work_available(self, now: float | None = None) -> tuple[int, ...]:
        self.calls += 1
        woken = super().work_available(now)
        return woken if self.calls % 2 else ()


class Tired(ConsumerLists):
    """Broken: stops notifying after its tenth piece of work (a lost wake-up nothing repairs)."""

    calls = 0

    def work_available(self, now: float | None = None) -> tuple[int, ...]:
        self.calls += 1
        return super().work_available(now) if self.calls <= 10 else ()


class Shunning(ConsumerManagerActor):
    """Broken: never tells consumer 1 about work (its lists think it was told)."""

    def _notify(self, consumer_ids: tuple[int, ...]) -> None:
        super()._notify(tuple(cid for cid in consumer_ids if cid != 1))


class ShunningQueue(QueueActor):
    def make_manager(self) -> ConsumerManagerActor:
        return Shunning(self.ctx.self_ref)


class NeverResumes(LoadController):  # type: ignore[misc]  # final: a broken variant may subclass
    """Broken: pauses the stream at load 1 and never resumes it."""

    def receive(self, message: Any) -> None:
        tracker = self.tracker
        if type(message) is Received:
            tracker.add(message.ack_id, message.size)
        elif type(message) is Done:
            if not tracker.remove(message.ack_id):
                return
        else:
            return
        if tracker.update() is FlowDecision.PAUSE:
            self.ctx.send(self.consumer, Suspend())
        self.ctx.note(FlowNote(tracker.count, tracker.bytes, tracker.paused))


# --- prompt delivery -------------------------------------------------------------------------------

SPREAD = BrokerScenario(messages=12, consumers=(ClientPolicy(),), publish_span_s=60.0, prefetch=5)
"""One consumer, publishes seconds apart: a lost wake-up waits for the next publish."""


def test_prompt_delivery_catches_a_wake_up_that_only_the_next_publish_repairs() -> None:
    healthy, _ = run_broker_simulation(SPREAD, 1)
    result = prompt_delivery(healthy.trace, QUEUE, 2.0, prefetch=SPREAD.prefetch)
    assert result.ok, str(result)
    assert result.metric("longest_hot_s") == 0  # a correct queue is never hot at the end of an instant
    broken, _ = run_broker_simulation(SPREAD, 1, queue_factory=queue_with_lists(Sleepy))
    result = prompt_delivery(broken.trace, QUEUE, 2.0, prefetch=SPREAD.prefetch)
    assert not result.ok
    assert "(interested, with credit)" in result.violations[0]
    assert "undelivered (hot since" in result.violations[0]
    assert result.metric("longest_hot_s") > 2.0


def test_a_consumer_frozen_by_a_fault_is_not_a_lost_wake_up() -> None:
    """A paused consumer cannot pull; the monitor reads the pause from the trace's FAULT events."""
    sim, _ = run_broker_simulation(SPREAD, 1, faults=(Pause("/client-0", at_time=5.0, duration_s=20.0),))
    assert any(event.kind is EventKind.FAULT for event in sim.trace)
    assert prompt_delivery(sim.trace, QUEUE, 2.0).ok
    unaware = [event for event in sim.trace if event.kind is not EventKind.FAULT]
    result = prompt_delivery(unaware, QUEUE, 2.0)
    assert not result.ok, "without the pause in the trace, the waiting entries look like a lost wake-up"


# --- starvation ------------------------------------------------------------------------------------

THREE = BrokerScenario(messages=60, consumers=(ClientPolicy(),) * 3, publish_span_s=30.0, prefetch=5)


def test_starvation_catches_a_consumer_never_woken_while_others_take_its_work() -> None:
    healthy, _ = run_broker_simulation(THREE, 2)
    assert starvation(healthy.trace, QUEUE, 2.0).ok
    broken, _ = run_broker_simulation(THREE, 2, queue_factory=ShunningQueue)
    result = starvation(broken.trace, QUEUE, 2.0)
    assert not result.ok
    assert result.violations[0].split(": ", 1)[1].startswith("consumer 1 (interested, with credit) was passed over")
    assert prompt_delivery(broken.trace, QUEUE, 2.0).ok  # the others took everything at once


# --- stall -----------------------------------------------------------------------------------------

EQUALS = BrokerScenario(messages=60, consumers=(ClientPolicy(),) * 4, prefetch=3)


def test_stall_catches_a_run_that_ends_with_deliverable_work() -> None:
    healthy, _ = run_broker_simulation(EQUALS, 3)
    assert stall(healthy.trace, QUEUE, 3.0).ok
    broken, result = run_broker_simulation(EQUALS, 3, queue_factory=queue_with_lists(Tired))
    assert result.quiet  # nothing was left scheduled...
    verdict = stall(broken.trace, QUEUE, 3.0)
    assert not verdict.ok  # ...yet work was left that a consumer with credit could take
    assert "nothing scheduled to deliver them (a lost wake-up)" in verdict.violations[0]


def test_stall_catches_a_subscriber_that_stops_making_progress() -> None:
    """The stream is paused for good: the run only ticks over (heartbeats) until its horizon."""
    scenario = SubscriberScenario(messages=20, flow=FlowControl(max_messages=3), burst=10, horizon_s=120.0)
    sim, _ = run_subscriber_simulation(scenario, 4, manager=manager_with(load=NeverResumes))
    verdict = stall(sim.trace, QUEUE, 6.0, prefetch=3)
    assert not verdict.ok
    assert "no progress for" in verdict.violations[0]
    assert verdict.metric("idle_at_end_s") > 100
    assert prompt_delivery(sim.trace, QUEUE, 6.0, prefetch=3).ok  # suspended: no credit, so never hot
    healthy, _ = run_subscriber_simulation(scenario, 4)
    assert stall(healthy.trace, QUEUE, 6.0, prefetch=3).ok


def test_stall_needs_the_queue_to_close() -> None:
    sim, _ = run_broker_simulation(EQUALS, 3)
    open_trace = [event for event in sim.trace if type(event.message).__name__ != "QueueClosed"]
    assert "never closed" in stall(open_trace, QUEUE, 3.0).violations[0]


# --- queue order and one wake-up -------------------------------------------------------------------

RELEASING = BrokerScenario(messages=30, consumers=(ClientPolicy(release=0.3),) * 2, publish_span_s=0.0, prefetch=2)
"""A backlog and frequent releases: a released message must go out again before later ones."""


def test_queue_order_catches_a_release_to_the_tail() -> None:
    for seed in range(5):
        healthy, _ = run_broker_simulation(RELEASING, seed)
        assert queue_order(healthy.trace, QUEUE).ok, f"seed {seed}"
    broken, _ = run_broker_simulation(RELEASING, 0, queue_factory=queue_with_entries(TailRelease))
    result = queue_order(broken.trace, QUEUE)
    assert not result.ok
    assert "earlier in queue order, was available to it" in result.violations[0]


def test_single_wakeup_catches_a_thundering_herd() -> None:
    healthy, _ = run_broker_simulation(EQUALS, 1)
    assert single_wakeup(healthy.trace, QUEUE).metric("handled") > 0
    assert single_wakeup(healthy.trace, QUEUE).ok
    broken, _ = run_broker_simulation(EQUALS, 1, queue_factory=queue_with_lists(Herd))
    result = single_wakeup(broken.trace, QUEUE)
    assert not result.ok
    assert "woke 2 acquiring consumers" in result.violations[0]


# --- wiring ----------------------------------------------------------------------------------------


def test_the_registry_runs_every_liveness_check() -> None:
    for name, seed in (("fairness", 1), ("ordering-keys", 2)):
        run = run_scenario(name, seed)
        assert run.report.ok, run.report.violations
        assert {result.checker for result in run.results} >= NAMES


def test_liveness_returns_every_check_over_one_trace() -> None:
    sim, _ = run_broker_simulation(EQUALS, 5)
    results = liveness(sim.trace, QUEUE, 3.0, prefetch=EQUALS.prefetch)
    assert [result.checker for result in results] == [
        "prompt_delivery", "starvation", "stall", "queue_order", "single_wakeup",
    ]
    assert not _failed(results)


async def test_liveness_holds_on_a_trio_trace() -> None:
    """Real clocks: every observation is its own instant, and nothing stays hot for long."""
    scenario = BrokerScenario(
        messages=40, consumers=(ClientPolicy(nack=0.1), ClientPolicy(release=0.1), ClientPolicy()),
        priorities=(0, 4, 9), browsers=1, publish_span_s=0.05, ack_deadline_s=0.3, retry=None,
    )
    async with TrioSystem(trace=True, seed=3) as system:
        spawn_broker_scenario(system, scenario)
        with trio.fail_after(20):
            while sum(1 for e in system.trace if type(e.message).__name__ == "EntrySettled"
                      and e.sender == QUEUE) < scenario.messages:
                await trio.sleep(0.01)
        system.shutdown()
    results = liveness(system.trace, QUEUE, 5.0, prefetch=scenario.prefetch)
    assert not _failed(results), "\n".join(_failed(results))



def test_stall_spares_consumers_whose_own_clients_hold_their_credit() -> None:
    """Clients that never answer keep their credit after their leases lapse: the queue took the
    messages back, but no consumer will pull again, so the run goes quiet with work left. That is
    the clients' doing, not a stalled queue (broker-swarm seeds 431, 886 and 948 of 2026-11-26)."""
    scenario = BrokerScenario(messages=6, consumers=(ClientPolicy(ignore=1.0),) * 2, prefetch=1, ack_deadline_s=0.5)
    sim, _ = run_broker_simulation(scenario, 1)
    assert stall(sim.trace, QUEUE, 0.1, prefetch=1).ok  # quiet for 0.17 s at the end, work left
    # without the clients' own notes nothing says who holds the credit: the queue is blamed
    unnoted = [event for event in sim.trace if type(event.message).__name__ != "DeliveryReceived"]
    verdict = stall(unnoted, QUEUE, 0.1, prefetch=1)
    assert not verdict.ok
    assert "no progress for" in verdict.violations[0]
