"""Checkers that trust nobody (issue 17, item 3): the clients' history is the judge, and a checker that raises
is itself a finding, reported with its seed and replay command, at once, without stopping the sweep."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from conveyor.actors.broker import Message
from conveyor.cli import app
from conveyor.runtime import EventKind, TraceEvent
from conveyor.simulation.checkers import (
    CheckResult,
    DeliveryReceived,
    DeliverySettled,
    EnqueueAnswered,
    EnqueueSent,
    FinalBrowseStarted,
    FoundAtEnd,
    before_final_browse,
    delivery_steps,
    group_exclusivity,
    guarded,
    story_lines,
    strict_order,
    total_queue,
)
from conveyor.simulation.scenarios import (
    BrokerScenario,
    ClientPolicy,
    Variant,
    run_broker_simulation,
    run_portfolio,
    run_scenario,
)
from conveyor.simulation.scenarios import _registry as registry
from tests.simulation.planted import broker

QUEUE_SIDE = {"accounting", "drained", "priority_order", "consumer_priority"}


@pytest.fixture(autouse=True)
def _quiet_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.CRITICAL, logger="conveyor")
    yield


def _checkers(violations: tuple[str, ...]) -> set[str]:
    return {line.split(":", 1)[0] for line in violations}


@pytest.mark.parametrize("variant", [Variant(queue=broker.SilentDrop), Variant(consumer=broker.MisdeclaredConsumer)],
                         ids=["silent-drop", "misdeclared-consumer"])
def test_only_the_clients_history_sees_a_lie_the_queues_notes_repeat(variant: Variant) -> None:
    """The queue's own notes (and a consumer's declaration) agree with the lie; the clients' history does not."""
    run = run_scenario("fairness", 0, variant=variant)
    assert "total_queue" in _checkers(run.report.violations), run.report.violations
    verdicts = {result.checker: result for result in run.results}
    for name in QUEUE_SIDE & set(verdicts):
        assert verdicts[name].ok, verdicts[name]  # blind: it reads what the liar wrote
    assert run_scenario("fairness", 0).report.ok  # the real actors pass the same run


@pytest.mark.parametrize(
    ("scenario", "seed", "variant", "checker"),
    [("fairness", 2, Variant(consumer=broker.ReversingConsumer), strict_order),
     ("groups", 1, Variant(consumer=broker.GroupReleasingConsumer), group_exclusivity)],
    ids=["reversing-consumer", "group-releasing-consumer"],
)
def test_an_order_checker_judges_what_the_clients_received_not_what_the_queue_sent(
    scenario: str, seed: int, variant: Variant, checker: Any
) -> None:
    """The queue delivered in order and its story shows one group owner at a time; the clients were given
    otherwise. Judged from the queue's story (``from_clients=False``) the run passes; from the clients'
    receipts it fails."""
    run = run_portfolio(scenario, seed, variant=variant)
    trace = run.sim.trace
    assert not checker(trace, "/queue").ok
    assert checker(trace, "/queue", from_clients=False).ok  # blind: the queue's word repeats the lie
    assert checker(run_portfolio(scenario, seed).sim.trace, "/queue").ok  # the real consumers pass


def test_a_client_given_what_its_selector_refuses_is_caught_whatever_its_consumer_declared() -> None:
    """The consumer told the queue it wants everything; its client asked for red only. The queue's story
    agrees with the declaration; the client's ``ConsumerAsked`` does not."""
    run = run_portfolio("selectors", 0, variant=Variant(consumer=broker.SelectorDroppingConsumer))
    failing = {line.split(":", 1)[0] for line in run.report.violations}
    assert failing == {"consumer_priority"}, run.report.violations
    assert any("which the selector it asked for refuses" in line for line in run.report.violations)
    assert run_portfolio("selectors", 0).report.ok


def test_a_silent_drop_is_named_as_confirmed_and_never_given() -> None:
    run = run_scenario("fairness", 1, variant=Variant(queue=broker.SilentDrop))
    lines = [line for line in run.report.violations if line.startswith("total_queue:")]
    assert len(lines) == 1
    assert "was confirmed to its publisher, never given to a client, and not found at the end" in lines[0]


def test_a_misdeclared_consumer_is_caught_taking_a_delivery_another_client_took() -> None:
    run = run_scenario("fairness", 0, variant=Variant(consumer=broker.MisdeclaredConsumer))
    assert any("two acquiring clients took one delivery" in line for line in run.report.violations)


# --- total_queue over hand-written histories --------------------------------------------------------


def _note(time: float, sender: str, note: object) -> TraceEvent:
    return TraceEvent(EventKind.NOTE, time, sender, None, note)


def _history(messages: int, acked: frozenset[int], found: frozenset[int], browse: bool) -> list[TraceEvent]:
    trace: list[TraceEvent] = []
    for index in range(messages):
        name = f"m{index}"
        trace.append(_note(index, "/publisher", EnqueueSent("/queue", (name,))))
        trace.append(_note(index, "/publisher", EnqueueAnswered("/queue", (name,))))
        trace.append(_note(index + 0.5, "/client-0", DeliveryReceived("/queue", 1, index + 1, name, 1)))
        if index in acked:
            trace.append(_note(index + 0.5, "/client-0", DeliverySettled("/queue", 1, index + 1, name, 1, "ack")))
    if browse:
        trace.append(_note(messages, "/final-browse-queue", FinalBrowseStarted("/queue")))
        trace += [_note(messages, "/final-browse-queue", FoundAtEnd("/queue", index + 1, f"m{index}"))
                  for index in sorted(found)]
    return trace


@given(st.integers(1, 12), st.data())
def test_every_confirmed_message_acked_or_found_passes_one_missing_fails(messages: int, data: st.DataObject) -> None:
    acked = data.draw(st.frozensets(st.integers(0, messages - 1)))
    left = frozenset(range(messages)) - acked
    assert total_queue(_history(messages, acked, left, browse=bool(left))).ok
    if left:
        missing = data.draw(st.sampled_from(sorted(left)))
        result = total_queue(_history(messages, acked, left - {missing}, browse=True))
        assert not result.ok
        assert result.metric("lost") == 1
        assert any(f"m{missing} was confirmed" in line for line in result.violations)


def test_a_run_cut_off_before_the_final_browse_leaves_open_messages_unresolved_not_lost() -> None:
    result = total_queue(_history(3, frozenset({0}), frozenset(), browse=False))
    assert result.ok
    assert result.metric("unresolved") == 2


@pytest.mark.parametrize(("ttl", "lost"), [(None, 1), (0.5, 0), (5.0, 1)])
def test_a_message_may_be_missing_once_the_ttl_its_publisher_asked_for_ran_out(ttl: float | None, lost: int) -> None:
    """The final browse starts at t=3: m0, sent at t=0, may have expired only if its TTL is under 3 seconds."""
    sent = Message(b"m0", message_id="m0", ttl_s=ttl)
    trace = [_note(0, "/publisher", EnqueueSent("/queue", ("m0",), (sent,))),
             _note(0, "/publisher", EnqueueAnswered("/queue", ("m0",))),
             _note(3, "/final-browse-queue", FinalBrowseStarted("/queue"))]
    result = total_queue(trace)
    assert result.ok is (lost == 0)
    assert (result.metric("lost"), result.metric("expired")) == (lost, 1 - lost)


def test_a_message_no_publisher_sent_is_a_phantom() -> None:
    trace = [*_history(1, frozenset({0}), frozenset(), browse=False),
             _note(2, "/client-0", DeliveryReceived("/queue", 1, 9, "ghost", 1))]
    result = total_queue(trace)
    assert not result.ok
    assert any("ghost given, but no publisher sent it" in line for line in result.violations)


# --- a checker that raises is a finding ---------------------------------------------------------------


def _raising_liveness(trace: list[TraceEvent], path: str, within: float, *, prefetch: int | None) -> list[object]:
    raise KeyError("consumer 7")


def _raising_kernel_checks(trace: list[TraceEvent]) -> list[object]:
    raise KeyError("consumer 7")


def test_guarded_turns_a_raise_into_a_failing_verdict_naming_the_checker_and_where() -> None:
    def broken(trace: object) -> list[CheckResult]:
        empty: dict[str, list[CheckResult]] = {}
        return empty["missing"]

    (result,) = guarded("broken", broken, [])
    assert not result.ok
    assert result.violations[0].startswith("the checker raised KeyError: 'missing' (test_trust_nobody.py:")


def test_a_monitor_that_raises_fails_the_run_with_its_seed_and_replay_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "liveness", _raising_liveness)
    report = run_scenario("fairness", 3).report
    assert not report.ok
    assert "liveness: the checker raised KeyError: 'consumer 7'" in report.violations[0]
    assert report.replay_command == "conveyor replay fairness --seed 3 --strategy random"
    verdicts = {line.split(":", 1)[0] for line in report.violations}
    assert verdicts == {"liveness"}  # the other checkers still judged the run, and passed it


def test_simulate_all_prints_each_failure_as_it_happens_and_keeps_going(monkeypatch: pytest.MonkeyPatch) -> None:
    """One raising monitor no longer hides a sweep: every failure is printed before the summary, and every
    scenario still runs."""
    monkeypatch.setattr(registry, "liveness", _raising_liveness)
    monkeypatch.setattr(registry, "kernel_checks", _raising_kernel_checks)  # the disk scenarios run no liveness
    result = CliRunner().invoke(app, ["simulate", "all", "--seeds", "1"])
    assert result.exit_code == 1
    output = result.output
    table = output.index("conveyor simulate:")
    failures = [index for index, line in enumerate(output.splitlines()) if line.startswith("FAILED ")]
    assert len(failures) == len(registry.scenario_names())  # every scenario ran, and each run failed
    assert output.index("FAILED ") < table  # printed as it happened, not after the summary
    assert output.count("the checker raised KeyError") >= len(failures)
    assert output.count("  replay: conveyor replay ") == len(failures)


def test_the_final_browse_finds_a_dead_letter_without_counting_as_the_runs_traffic() -> None:
    """A run left open is browsed at the end: a dead-lettered message is found, not lost; the run's story and
    delivery steps stop where the browse begins."""
    scenario = BrokerScenario(
        messages=1, consumers=(ClientPolicy(nack=1.0),), max_deliveries=2, publish_span_s=0.0, retry=None
    )
    sim, _ = run_broker_simulation(scenario, 3)
    trace = sim.trace
    found = [event.message for event in trace if isinstance(event.message, FoundAtEnd)]
    assert [(note.queue, note.message_id) for note in found] == [("/dead-letters", "m0")]
    verdict = total_queue(trace)
    assert verdict.ok, verdict
    assert (verdict.metric("dead_lettered"), verdict.metric("lost")) == (1, 0)
    assert len(before_final_browse(trace)) < len(trace)
    assert story_lines(trace) == story_lines(before_final_browse(trace))
    assert not any("final-browse" in line for line in story_lines(trace))
    assert delivery_steps(trace) == 2  # the two attempts, not the browse's delivery


def test_a_run_its_clients_settled_is_not_browsed() -> None:
    run = run_scenario("fairness", 1)
    assert not any(isinstance(event.message, FinalBrowseStarted) for event in run.sim.trace)
