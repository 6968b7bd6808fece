"""Shrinking: hypothesis-drawn schedules shrink, planted bugs shrink to short runs, stories read well."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conveyor.runtime import TraceEvent
from conveyor.simulation import HypothesisStrategy, Replay, explore
from conveyor.simulation.checkers import consumer_priority, delivery_steps, story_lines
from conveyor.simulation.scenarios import (
    BrokerScenario,
    ClientPolicy,
    RunReport,
    Variant,
    run_broker_simulation,
    run_scenario,
    shrink,
)
from tests.simulation.test_broker_scenarios import (
    DoubleDealer,
    FavouringQueue,
    Forgetful,
    GroupBlind,
    LifoEntries,
    NoReservation,
    _queue_with,
)
from tests.simulation.test_explore import RANKED, held_senders

LINE = re.compile(r"^t=\d+\.\d{3} \S")


def _hypothesis_settings(examples: int) -> settings:
    return settings(
        max_examples=examples, derandomize=True, database=None, deadline=None,
        suppress_health_check=list(HealthCheck),
    )


# --- the hypothesis strategy ---------------------------------------------------------------------


def test_hypothesis_shrinks_a_failing_interleaving_to_the_smallest_one() -> None:
    """'b0 is delivered first' fails on 3 of the 6 interleavings; hypothesis must end on the smallest."""
    failing: list[tuple[int, ...]] = []

    @_hypothesis_settings(100)
    @given(st.data())
    def a_goes_first(data: st.DataObject) -> None:
        strategy = HypothesisStrategy(data)
        recorder = _Recording(strategy)
        log = held_senders(recorder)
        if log[0] == ("b", 0):
            failing.append(tuple(recorder.choices))
        assert log[0] != ("b", 0), log

    with pytest.raises(AssertionError):
        a_goes_first()
    found = explore(held_senders, lambda log: log[0] != ("b", 0))
    smallest = min((failure.schedule for failure in found.failures), key=lambda s: (len(s), s))
    assert failing[-1] == smallest  # hypothesis replays its shrunk example last


class _Recording:
    """Wraps a strategy and keeps the choices it made."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.choices: list[int] = []

    def choose(self, ready: Any) -> int:
        choice: int = self.inner.choose(ready)
        self.choices.append(choice)
        return choice


def test_hypothesis_shrinks_a_planted_broker_bug() -> None:
    """A queue without consumer-priority reservation: found by hypothesis, shrunk to few deviations.

    The run is drawn inside a composite strategy (its ``draw`` feeds the scheduler), which
    spares hypothesis a note per draw; the test then judges the drawn run.
    """
    queue = _queue_with(NoReservation)
    failing: list[tuple[int, ...]] = []

    @st.composite
    def ranked_runs(draw: st.DrawFn) -> tuple[tuple[int, ...], list[TraceEvent]]:
        sim, _ = run_broker_simulation(RANKED, 1, HypothesisStrategy(draw), queue_factory=queue)
        return tuple(sim.schedule), sim.trace

    @_hypothesis_settings(200)
    @given(ranked_runs())
    def reserved(run: tuple[tuple[int, ...], list[TraceEvent]]) -> None:
        schedule, trace = run
        result = consumer_priority(trace, "/queue")
        if not result.ok:
            failing.append(schedule)
        assert result.ok, result

    with pytest.raises(AssertionError, match="wanted work and matched"):
        reserved()
    first, shrunk = failing[0], failing[-1]
    assert sum(map(bool, shrunk)) < sum(map(bool, first))
    assert any(shrunk), "the plain order hides this bug, so some choice must remain"
    sim, _ = run_broker_simulation(RANKED, 1, Replay(shrunk), queue_factory=queue)
    assert not consumer_priority(sim.trace, "/queue").ok


# --- the shrinker --------------------------------------------------------------------------------


def _first_failure(name: str, variant: Variant, seeds: int = 10) -> RunReport:
    for seed in range(seeds):
        report = run_scenario(name, seed, variant=variant).report
        if not report.ok:
            return report
    pytest.fail(f"the planted bug never showed in {name} over {seeds} seeds")


def _check_shrunk(name: str, variant: Variant) -> None:
    failing = _first_failure(name, variant)
    result = shrink(name, failing.seed, variant=variant)
    assert result.deliveries <= 15, "\n".join(result.story)
    assert result.deliveries <= result.original_deliveries
    assert any(line.startswith(f"{result.checker}:") for line in result.report.violations)
    assert result.checker == failing.violations[0].split(":")[0]
    replayed = result.replay(variant)  # the workload, the rest of the choice stream, the same faults
    assert replayed.report.trace_hash == result.report.trace_hash
    assert delivery_steps(replayed.sim.trace) == result.deliveries
    told = [line for line in result.story if re.search(r": (deliver|browse) ", line)]
    assert len(told) == result.deliveries
    assert all(LINE.match(line) for line in result.story)


PLANTED: dict[str, tuple[str, Callable[..., Any]]] = {
    "duplicate deliveries": ("priorities", _queue_with(DoubleDealer)),
    "lost messages": ("priorities", _queue_with(Forgetful)),
    "a favourite consumer": ("fairness", FavouringQueue),
}


@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_planted_bug_shrinks_to_at_most_15_delivery_steps(bug: str) -> None:
    name, queue = PLANTED[bug]
    _check_shrunk(name, Variant(queue=queue))


SLOW_PLANTED: dict[str, tuple[str, Callable[..., Any]]] = {
    "no reservation": ("consumer-priorities", _queue_with(NoReservation)),
    "blind to groups": ("groups", _queue_with(GroupBlind)),
    "last in, first out": ("groups", _queue_with(LifoEntries)),
}


@pytest.mark.slow
@pytest.mark.parametrize("bug", list(SLOW_PLANTED))
def test_more_planted_bugs_shrink_to_at_most_15_delivery_steps(bug: str) -> None:
    name, queue = SLOW_PLANTED[bug]
    _check_shrunk(name, Variant(queue=queue))


def test_shrinking_a_passing_run_is_refused() -> None:
    with pytest.raises(ValueError, match="passes every checker: nothing to shrink"):
        shrink("fairness", 1)
    failing = _first_failure("priorities", Variant(queue=_queue_with(Forgetful)))
    with pytest.raises(ValueError, match="but not 'fairness'"):
        shrink("priorities", failing.seed, variant=Variant(queue=_queue_with(Forgetful)), checker="fairness")


def test_the_budget_bounds_the_runs_and_the_best_run_so_far_stands() -> None:
    variant = Variant(queue=_queue_with(Forgetful))
    failing = _first_failure("priorities", variant)
    result = shrink("priorities", failing.seed, variant=variant, max_runs=3)
    assert result.runs == 3
    assert any(line.startswith("accounting:") for line in result.report.violations)


# --- stories -------------------------------------------------------------------------------------


def test_the_story_tells_publishes_deliveries_nacks_lapses_and_dead_letters() -> None:
    scenario = BrokerScenario(
        messages=1, consumers=(ClientPolicy(nack=1.0),), max_deliveries=2, publish_span_s=0.0, retry=None
    )
    sim, _ = run_broker_simulation(scenario, 3)
    story = story_lines(sim.trace)
    assert all(LINE.match(line) for line in story)
    assert [line.split(" ", 1)[1] for line in story] == [
        "/publisher -> /queue: publish m0 (priority 4)",
        "/queue -> /client-0/consumer: deliver m0 (attempt 1)",
        "/client-0/consumer -> /queue: nack m0 (available again at t=0.000)",
        "/queue -> /client-0/consumer: deliver m0 (attempt 2)",
        "/queue: dead-letter m0 (delivery-limit)",
        "/queue -> /dead-letters: publish m0 (priority 4)",
    ]
    ignoring = BrokerScenario(messages=1, consumers=(ClientPolicy(ignore=1.0),), max_deliveries=2, publish_span_s=0.0)
    sim, _ = run_broker_simulation(ignoring, 3)
    assert story_lines(sim.trace)[1:5] == [
        "t=0.000 /queue -> /client-0/consumer: deliver m0 (attempt 1)",
        "t=1.000 /queue: lease of /client-0/consumer on m0 lapsed",  # ack_deadline_s = 1
        "t=1.000 /queue -> /client-0/consumer: deliver m0 (attempt 2)",
        "t=2.000 /queue: dead-letter m0 (delivery-limit)",
    ]


def test_the_story_shows_faults_and_acks() -> None:
    run = run_scenario("crash-recovery", 5)
    story = story_lines(run.sim.trace)
    assert any(re.search(r"fault: crash /client-\d+ \(stopped\)$", line) for line in story)
    assert any(re.search(r"/client-\d+/consumer -> /queue: ack m\d+$", line) for line in story)
    assert sum(1 for line in story if ": deliver " in line) == run.report.delivered


def test_the_story_tells_a_queue_crash_and_what_the_queue_recovered() -> None:
    run = run_scenario("queue-crash", 4)
    story = story_lines(run.sim.trace)
    crash = next(index for index, line in enumerate(story) if line.endswith("fault: crash /queue (restarted)"))
    assert story[crash + 1] == "t=0.169 /queue: recovered from its journal 1 message: m4; 11 consumers"


def test_a_front_workload_shrinks_only_to_workloads_it_can_run() -> None:
    from conveyor.simulation.scenarios import ClientPlan, PublisherPlan, PubSubScenario, SubscriptionPlan
    from conveyor.simulation.scenarios._shrink import _pubsub_candidates

    work = PubSubScenario(
        subscriptions=(SubscriptionPlan(exactly_once=True), SubscriptionPlan(ordering=True), SubscriptionPlan()),
        publishers=(PublisherPlan(publishes=3, poison=0.5), PublisherPlan()),
        clients=(ClientPlan(0, nack=0.2), ClientPlan(1, pull=True), ClientPlan(2, forge=0), ClientPlan(2, stale=0.3)),
    )
    candidates = list(_pubsub_candidates(work))
    assert candidates and work not in candidates
    assert len(set(map(repr, candidates))) == len(candidates)  # each cut once
    # Without subscription 0 its client goes, the others move down, and the forger on it turns honest.
    assert PubSubScenario(
        subscriptions=work.subscriptions[1:],
        publishers=work.publishers,
        clients=(ClientPlan(0, pull=True), ClientPlan(1), ClientPlan(1, stale=0.3)),
    ) in candidates
    # A cut that would leave subscription 1 without its only client is never offered.
    assert all({client.subscription for client in cut.clients} == set(range(len(cut.subscriptions)))
               for cut in candidates)


# --- the step budget -------------------------------------------------------------------------------


def test_a_run_cut_off_by_its_step_budget_is_not_shrunk() -> None:
    with pytest.raises(ValueError, match="cut off by its step budget of 40 delivery steps"):
        shrink("fairness", 1, max_steps=40)


def test_simulate_prints_a_cut_off_run_as_cut_off_not_failed() -> None:
    from typer.testing import CliRunner

    from conveyor.cli import app

    result = CliRunner().invoke(
        app, ["simulate", "fairness", "--seeds", "1", "--first-seed", "1", "--max-steps", "40", "--strategy", "random"]
    )
    assert result.exit_code == 1
    assert "CUT OFF fairness seed 1 (random, faults none): step budget exhausted" in result.output
    assert "FAILED" not in result.output
    assert "1 cut off by the step budget of 40 deliveries" in result.output


def test_a_shrunk_run_is_told_with_its_stream_and_a_note_only_when_long() -> None:
    variant = Variant(queue=_queue_with(Forgetful))
    failing = _first_failure("priorities", variant)
    result = shrink("priorities", failing.seed, variant=variant)
    assert result.note == ""  # short enough: no excuse needed
    assert result.replay(variant).report.trace_hash == result.report.trace_hash
    cut_short = shrink("priorities", failing.seed, variant=variant, max_runs=1)
    assert cut_short.deliveries == cut_short.original_deliveries > 15
    assert "budget of 1 runs ran out" in cut_short.note
