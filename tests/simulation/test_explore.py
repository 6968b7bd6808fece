"""Bounded exhaustive search: interleaving counts that match a count by hand, and a planted bug found."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from conveyor.actors.broker import QueueActor, QueueConfig
from conveyor.runtime import Actor, ActorRef, ConveyorError, TraceEvent
from conveyor.simulation import (
    ExploringStrategy,
    Pause,
    Replay,
    ReplayDivergence,
    Simulation,
    Strategy,
    explore,
)
from conveyor.simulation.checkers import consumer_priority
from conveyor.simulation.scenarios import BrokerScenario, ClientPolicy, run_broker_simulation
from tests.simulation.test_broker_scenarios import NoReservation, _queue_with


@attrs.frozen
class Note:
    sender: str
    number: int


class Receiver(Actor):
    """Appends every note to a list the test holds."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.log = log

    def receive(self, message: Any) -> None:
        if isinstance(message, Note):
            self.log.append((message.sender, message.number))


class Sender(Actor):
    """Sends two notes to its target as soon as it starts."""

    def __init__(self, name: str, target: ActorRef) -> None:
        self.name = name
        self.target = target

    def on_start(self) -> None:
        for number in range(2):
            self.ctx.send(self.target, Note(self.name, number))

    def receive(self, message: Any) -> None:
        pass


def held_senders(strategy: Strategy) -> tuple[tuple[str, int], ...]:
    """Senders a and b each queue two notes for a paused receiver; released together, they race.

    The receiver starts first, then is paused while a and b start one after the other, so
    nothing but the four notes is left to order: C(4, 2) = 6 interleavings.
    """
    log: list[tuple[str, int]] = []
    sim = Simulation(seed=0, strategy=strategy, faults=[Pause("/r", at_time=1.0, duration_s=1.0)])
    receiver = sim.spawn(lambda: Receiver(log), name="r")
    sim.run(until=1.0)
    for name in ("a", "b"):
        sim.spawn(lambda name=name: Sender(name, receiver), name=name)  # type: ignore[misc]
        sim.run(until=1.0)
    sim.run()
    return tuple(log)


def all_at_once(strategy: Strategy) -> tuple[tuple[str, int], ...]:
    """The receiver and both senders spawned together: their three starts race with the notes too."""
    log: list[tuple[str, int]] = []
    sim = Simulation(seed=0, strategy=strategy)
    receiver = sim.spawn(lambda: Receiver(log), name="r")
    sim.spawn(lambda: Sender("a", receiver), name="a")
    sim.spawn(lambda: Sender("b", receiver), name="b")
    sim.run()
    return tuple(log)


def test_two_senders_of_two_notes_have_exactly_six_interleavings() -> None:
    logs: list[tuple[tuple[str, int], ...]] = []

    def keep(log: tuple[tuple[str, int], ...]) -> bool:
        logs.append(log)
        return True

    result = explore(held_senders, keep)
    assert result.complete
    assert result.schedules_run == math.comb(4, 2) == 6
    assert result.ok
    a, b = [("a", 0), ("a", 1)], [("b", 0), ("b", 1)]
    merges = set()
    for positions in itertools.combinations(range(4), 2):
        a_left, b_left = list(a), list(b)
        merges.add(tuple(a_left.pop(0) if index in positions else b_left.pop(0) for index in range(4)))
    assert set(logs) == merges and len(logs) == 6  # every order, each once


def test_seven_deliveries_under_two_chains_of_three_have_140_orders() -> None:
    # Deliveries: start r, start a, a0, a1, start b, b0, b1; a's start precedes a0 precedes a1, same
    # for b; r's start is free (the cell holds notes that overtake it). 7! / (3! 3! 1!) = 140.
    result = explore(all_at_once, lambda log: True)
    assert result.complete
    assert result.schedules_run == math.factorial(7) // (math.factorial(3) * math.factorial(3)) == 140


def test_a_budget_stops_the_search_and_says_it_is_incomplete() -> None:
    result = explore(all_at_once, lambda log: True, max_schedules=4)
    assert result.schedules_run == 4
    assert not result.complete


def test_bounds_prune_the_space() -> None:
    plain = ExploringStrategy()
    all_at_once(plain)
    # One deviation: the plain run, plus each other channel at each of its choice points, once.
    one = explore(all_at_once, lambda log: True, max_deviations=1)
    assert one.complete and one.schedules_run == 1 + sum(width - 1 for width in plain.widths)
    assert explore(all_at_once, lambda log: True, max_deviations=0).schedules_run == 1
    assert explore(all_at_once, lambda log: True, max_depth=0).schedules_run == 1
    counts = [explore(all_at_once, lambda log: True, max_depth=depth).schedules_run for depth in range(8)]
    assert counts == sorted(counts) and counts[-1] == 140


def test_failures_are_reported_with_a_schedule_that_replays_them() -> None:
    def b_first(log: tuple[tuple[str, int], ...]) -> list[str]:
        return [f"b0 came first: {log}"] if log[0] == ("b", 0) else []

    result = explore(held_senders, b_first)
    assert result.complete and result.schedules_run == 6
    assert len(result.failures) == 3  # the orders that start with b0: C(3, 1)
    for failure in result.failures:
        assert held_senders(Replay(failure.schedule)) == failure.result
        assert failure.violations[0].startswith("b0 came first")
    stopped = explore(held_senders, lambda log: log[0] != ("b", 0), max_failures=1)
    assert len(stopped.failures) == 1 and stopped.failures[0].violations == ("check returned False",)
    assert not stopped.complete


def test_a_run_that_does_not_replay_its_prefix_is_refused() -> None:
    calls = 0

    def flaky(strategy: Strategy) -> int:
        nonlocal calls
        calls += 1
        return len(held_senders(strategy if calls == 1 else Replay(())))

    with pytest.raises(ConveyorError, match="must hand the strategy to a fresh Simulation"):
        explore(flaky, lambda count: True)
    with pytest.raises(ReplayDivergence, match="exploration diverged at choice 0"):
        ExploringStrategy((5,)).choose([object(), object()])  # type: ignore[list-item]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_schedules must be an int >= 1"):
        explore(held_senders, lambda log: True, max_schedules=0)
    with pytest.raises(ValueError, match="max_deviations must be None or an int >= 0"):
        explore(held_senders, lambda log: True, max_deviations=-1)


# --- a tiny broker: two messages, two consumers at different priorities -------------------------

RANKED = BrokerScenario(
    messages=2, consumers=(ClientPolicy(), ClientPolicy()), consumer_priorities=(1, 0), prefetch=2,
    publish_span_s=0.0,
)
NO_RESERVATION = _queue_with(NoReservation)


def _ranked(queue: Callable[[QueueConfig], QueueActor] = QueueActor) -> Callable[[Strategy], list[TraceEvent]]:
    def run(strategy: Strategy) -> list[TraceEvent]:
        sim, result = run_broker_simulation(RANKED, 1, strategy, queue_factory=queue)
        assert result.quiet
        return sim.trace

    return run


def _consumer_priority(trace: list[TraceEvent]) -> tuple[str, ...]:
    return consumer_priority(trace, "/queue").violations


def test_exploration_finds_a_lower_priority_consumer_served_first() -> None:
    run = _ranked(NO_RESERVATION)
    assert not _consumer_priority(run(Replay(()))), "the plain order hides the planted bug"
    found = explore(run, _consumer_priority, max_deviations=1, max_failures=1)
    assert len(found.failures) == 1
    failure = found.failures[0]
    assert "wanted work and matched" in failure.violations[0]
    assert sum(1 for choice in failure.schedule if choice) == 1
    assert _consumer_priority(run(Replay(failure.schedule))) == failure.violations


def test_the_real_queue_passes_every_schedule_within_one_deviation() -> None:
    run = _ranked()
    plain = ExploringStrategy()
    run(plain)
    result = explore(run, _consumer_priority, max_deviations=1)
    assert result.complete and result.ok
    assert result.schedules_run == 1 + sum(width - 1 for width in plain.widths)
